// What a page asks the server for first. The page host imports this module before the panel's, so in the
// page's bundle (server/bundles.py) it runs before any panel code: it starts the GETs the page's address
// already determines — the snapshot a share link opens, the catalogs the pickers need — while the panel is
// still being built. The page host takes each answer once (`early(url)`); an answer nobody takes is dropped
// with the page. Only GETs of what the address names: nothing is written, nothing is sent that the page
// would not send itself. A share link's snapshot is asked for sooner still: the server names it in the
// page's own Link header (server/early.py, rel=preload), and the fetch here takes that answer.

import { getJSON } from "../lib/api.js";

/** The address of a stored snapshot or a merged run. @param {Record<string, any>} ref */
export function snapshotUrl(ref) {
  return ref.run ? `/api/snapshots/runs/${encodeURIComponent(ref.run)}` : `/api/snapshots/${encodeURIComponent(ref.snapshot)}`;
}

/** The snapshot (or merged run) a snapshots page's query opens first, if any. @param {URLSearchParams} q @returns {string[]} */
function snapshotOf(q) {
  const run = q.get("run");
  const snapshot = q.get("snapshot");
  if (run) return [snapshotUrl({ run })];
  return snapshot ? [snapshotUrl({ snapshot })] : [];
}

/** A compare side's snapshot, when the side is a snapshots page's address. @param {string | null} side @returns {string[]} */
function sideOf(side) {
  if (!side) return [];
  let url;
  try {
    url = new URL(side.trim(), location.origin);
  } catch {
    return []; // the compare panel says what is wrong with it
  }
  return url.origin === location.origin && url.pathname === "/snapshots.html" ? snapshotOf(url.searchParams) : [];
}

/** What each page's address determines it will GET. @param {string} path @param {URLSearchParams} q @returns {string[]} */
function wanted(path, q) {
  if (path === "/snapshots.html") return snapshotOf(q);
  if (path === "/compare.html") return ["/api/kernels", ...sideOf(q.get("a")), ...sideOf(q.get("b"))];
  if (path === "/kernels.html") return ["/api/kernels", "/api/platforms", "/examples.json"];
  if (path === "/" || path === "/index.html") return ["/api/platforms", "/examples.json"];
  if (path === "/topology.html") return ["/api/platforms"];
  return [];
}

/** @type {Map<string, Promise<any>>} */
const started = new Map();
for (const url of wanted(location.pathname, new URLSearchParams(location.search))) {
  if (started.has(url)) continue;
  const answer = getJSON(url);
  answer.catch(() => {}); // whoever takes it hears the error; untaken, it is no one's
  started.set(url, answer);
}

/**
 * The answer to GET `url` started early, once (a second call, or a URL not started early: null).
 * @param {string} url
 * @returns {Promise<any> | null}
 */
export function early(url) {
  const answer = started.get(url) ?? null;
  started.delete(url);
  return answer;
}
