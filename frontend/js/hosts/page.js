// The page host: a dashboard page mounts one panel in its <main> and answers it over HTTP (the /api
// routes), keeps its state in the address bar (a share link /s/<id> is redirected by the server to the
// view's page with that query), hears back and forward, and draws memory with Plotly.

import { ApiError, getJSON, postJSON } from "../lib/api.js";
import { bootPage, isDark } from "../lib/page.js";
import { VIEWS } from "../lib/vocabulary.js";
import { onBackForward, pageQuery, writeUrl } from "../lib/url.js";
import { memoryChart } from "../components/memory.js";
import { countOn, markOn } from "./host.js";

/** Each view's page (index.html is the layout explorer). */
const PAGES = Object.fromEntries(VIEWS.map((v) => [v.name, v.href]));

const POLL_MS = [60, 100, 150, 250, 400];
const RECENT_KEY = "shardscope.recentSnapshots";
const RECENT_MAX = 12;

/**
 * A panel module: its view name, its state's codec for the address bar, and mount.
 * @typedef {{VIEW: string, fromQuery: (q: URLSearchParams) => any, toQuery: (s: any) => string,
 *   mount: (root: HTMLElement, host: import("./host.js").Host, state: any) => {update: (s: any) => void, dispose: () => void}}} PanelModule
 */

/** A query as a share link stores it: its keys and values, or the whole string when a key repeats. @param {string} query */
function linkState(query) {
  const q = new URLSearchParams(query);
  const keys = [...q.keys()];
  return new Set(keys).size === keys.length ? Object.fromEntries(q) : { query };
}

/** A kernel run through the job queue: POST /api/kernels/jobs, then its state until done. */
/** @type {import("./host.js").Data["runKernel"]} */
async function runKernel(req, progress, current) {
  const created = await postJSON("/api/kernels/jobs", req);
  for (let i = 0; ; i++) {
    const job = await getJSON(created.url);
    if (!current()) return null;
    if (job.state === "done") return job.result;
    if (job.state === "error") throw new ApiError(422, job.failure);
    const ahead = job.queued_ahead ? ` (${job.queued_ahead} ahead)` : "";
    progress(`${job.state}${job.state === "queued" ? ahead : "…"} ${(job.elapsed_ms / 1000).toFixed(1)} s`, job.state);
    await new Promise((r) => setTimeout(r, POLL_MS[Math.min(i, POLL_MS.length - 1)]));
  }
}

/**
 * A stored snapshot, a merged run, or one process of a run; with `fix: k`, the program its k-th fix compiled
 * (carried in the explained snapshot: `fixes[k]`). @param {Record<string, any>} ref
 */
async function snapshot(ref) {
  if (ref.fix !== undefined) {
    const { fix, ...of } = ref;
    const fixes = (await snapshot(of)).fixes || [];
    if (!fixes[fix]) throw new ApiError(404, { code: "not_found", message: `the snapshot has ${fixes.length} compiled fixes, not a fix ${fix}`, hint: "fixes come with sharding_core.explain captures" });
    return fixes[fix];
  }
  if (ref.run) {
    const merged = await getJSON(`/api/snapshots/runs/${encodeURIComponent(ref.run)}`);
    if (ref.process === undefined) return merged;
    const part = merged.processes.snapshots.find((/** @type {any} */ p) => p.process_index === ref.process);
    if (!part) throw new ApiError(404, { code: "not_found", message: `process ${ref.process} did not report to this run` });
    return getJSON(`/api/snapshots/${part.id}`);
  }
  return getJSON(`/api/snapshots/${encodeURIComponent(ref.snapshot)}`);
}

/** @type {import("./host.js").Recent} */
const recent = {
  list() {
    try {
      const list = JSON.parse(localStorage.getItem(RECENT_KEY) || "[]");
      return Array.isArray(list) ? list.filter((r) => r && typeof r.href === "string" && r.href.startsWith("/snapshots.html?")) : [];
    } catch {
      return [];
    }
  },
  remember(entry) {
    const list = [{ ...entry, at: Date.now() }, ...recent.list().filter((r) => r.href !== entry.href)];
    try {
      localStorage.setItem(RECENT_KEY, JSON.stringify(list.slice(0, RECENT_MAX)));
    } catch {
      // storage full or refused: the list is a convenience
    }
  },
  forget: () => localStorage.removeItem(RECENT_KEY),
};

/**
 * The page host of `panel`.
 * @param {PanelModule} panel
 * @returns {import("./host.js").Host}
 */
export function pageHost(panel) {
  const path = PAGES[panel.VIEW];
  const media = window.matchMedia("(prefers-color-scheme: dark)");
  return {
    kind: "page",
    data: {
      platforms: () => getJSON("/api/platforms"),
      layout: (req, signal) => postJSON("/api/layout", req, signal),
      reshard: (body) => postJSON("/api/reshard", body),
      topology: (devices, slices, signal) => {
        const q = new URLSearchParams({ devices });
        if (slices > 1) q.set("slices", String(slices));
        return getJSON(`/api/topology?${q}`, signal);
      },
      topologyMesh: (req, signal) => postJSON("/api/topology/mesh", req, signal),
      topologyGroups: (body, signal) => postJSON("/api/topology/groups", body, signal),
      kernels: () => getJSON("/api/kernels"),
      runKernel,
      snapshot,
      whatif: (ref, rules) => postJSON("/api/snapshots/whatif", { ref, rules }),
      diff: (a, b) => postJSON("/api/snapshots/diff", { a, b }),
      link: (id) => getJSON(`/api/links/${encodeURIComponent(id)}`),
      compare: (a, b) => postJSON("/api/compare", { a, b }),
      examples: () => getJSON("/examples.json"),
    },
    dark: isDark,
    onTheme(fn) {
      media.addEventListener("change", fn);
      return () => media.removeEventListener("change", fn);
    },
    bump: (name) => countOn(document.body, name),
    mark: (name) => markOn(document.body, name),
    save: (state, replace) => writeUrl(path, panel.toQuery(state), replace),
    async share(state) {
      const res = await postJSON("/api/links", { view: panel.VIEW, state: linkState(panel.toQuery(state)) });
      return `${location.origin}${res.url}`;
    },
    shareLabel: "Copy link",
    href: (view, query) => `${PAGES[view]}${query ? `?${query}` : ""}`,
    go: (view, query) => location.assign(`${PAGES[view]}?${query}`),
    memoryChart: (container, data) => memoryChart(container, data),
    recent,
    // the whole picture in view under the spec box, however many rows (its rulers and caption below it)
    fitHeight: (element) => Math.max(280, window.innerHeight - (element.getBoundingClientRect().top + window.scrollY) - 48),
    fixed: new Set(),
    foldMeshAbove: 0,
  };
}

/**
 * Mounts `panel` in the page's <main> at the state in the address, and hands it the state back and
 * forward restore.
 * @param {PanelModule} panel
 */
export function mountPage(panel) {
  bootPage(panel.VIEW);
  const root = /** @type {HTMLElement} */ (document.querySelector("main"));
  const mounted = panel.mount(root, pageHost(panel), panel.fromQuery(pageQuery()));
  onBackForward((q) => mounted.update(panel.fromQuery(q)));
}
