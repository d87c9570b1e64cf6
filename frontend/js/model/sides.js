// What one side of a comparison is, from what people paste: a kernel-lab address (its query is the run), a
// layout-explorer address with a reshard target (the reshard), a snapshots-page address, "snapshot:<id>" or
// "run:<id>", or a share link /s/<id> to any of them — turned into the side POST /api/compare takes.

import { fromQuery as kernelState, runRequest } from "./kernel_run.js";
import { snapshotRef } from "./leaves.js";
import { fromQuery as layoutState, layoutRequest } from "./state.js";
import { ID_PATTERN, VIEWS } from "../lib/vocabulary.js";

/** @typedef {{kernel?: Record<string, any>, reshard?: Record<string, any>, snapshot?: Record<string, any>,
 *   label?: string}} Side */

/**
 * The kernel run a kernels.html query describes: the kernel lab's own state model, so the comparison sends
 * what the lab sends for the same address.
 * @param {URLSearchParams} q
 * @param {any[]} catalog GET /api/kernels's kernels
 * @returns {Record<string, any>}
 */
export function kernelRequest(q, catalog) {
  const s = kernelState(q, catalog);
  if (!s) throw new Error(`no kernel named "${q.get("kernel") || ""}" in the catalog`);
  return runRequest(s, catalog);
}

/** The reshard a layout-explorer query with a `reshard=` target describes. @param {URLSearchParams} q */
export function reshardRequest(q) {
  const s = layoutState(q);
  if (!s.reshard) throw new Error("a layout-explorer address needs a reshard= target to be compared (use Reshard to…)");
  const req = layoutRequest(s);
  /** @type {Record<string, any>} */
  const out = { devices: req.devices, mesh: req.mesh, shape: req.shape, dtype: req.dtype, from: req.spec, to: s.reshard };
  if (req.slices) out.slices = req.slices;
  return out;
}

/** A snapshots-page query as a snapshot reference. @param {URLSearchParams} q */
function snapshotOf(q) {
  if (!q.get("run") && !q.get("snapshot")) throw new Error("a snapshots address names a snapshot= or a run=");
  return snapshotRef({ snapshot: q.get("snapshot") || "", run: q.get("run") || "", process: q.get("process") || "", fix: q.get("fix") || "" });
}

/**
 * The side a pasted text describes (share links are looked up first, with `link`).
 * @param {string} text
 * @param {any[]} catalog
 * @param {(id: string) => Promise<{view: string, state: any}>} link a stored share link (GET /api/links/<id>)
 * @returns {Promise<{side: Side, kind: string, href: string}>}
 */
export async function resolveSide(text, catalog, link) {
  const t = text.trim();
  if (!t) throw new Error("paste a kernel-lab or layout-explorer address, a snapshot, or a share link");
  const bare = new RegExp(`^(snapshot|run):\\s*(${ID_PATTERN})$`).exec(t);
  if (bare) {
    const ref = { [bare[1]]: bare[2] };
    return { side: { snapshot: ref }, kind: "snapshot", href: `/snapshots.html?${bare[1]}=${bare[2]}` };
  }
  // a bare query ("kernel=...&devices=..." or "devices=...&reshard=...") is the kernel lab's or the layout's
  const query = /^[?]?[A-Za-z.]+=/.test(t) ? `${/(^|[?&])kernel=/.test(t) ? "/kernels.html" : "/"}?${t.replace(/^\?/, "")}` : t;
  // only the path and the query are read: the origin is whichever dashboard the text came from
  const url = new URL(query, "http://dashboard.invalid");
  const shared = new RegExp(`^/s/(${ID_PATTERN})$`).exec(url.pathname);
  if (shared) {
    const stored = await link(shared[1]);
    const state = stored.state || {};
    const query = typeof state.query === "string" ? state.query : new URLSearchParams(Object.entries(state).map(([k, v]) => [k, String(v)])).toString();
    const page = ["kernels", "snapshots", "layout"].includes(stored.view) ? VIEWS.find((v) => v.name === stored.view)?.href : undefined;
    if (!page) throw new Error(`a ${stored.view} link cannot be one side of a comparison`);
    return resolveSide(`${page}?${query.replace(/^\?/, "")}`, catalog, link);
  }
  const q = url.searchParams;
  const href = `${url.pathname}${url.search}`;
  if (url.pathname.endsWith("/kernels.html") || (!url.pathname.endsWith(".html") && q.has("kernel"))) {
    return { side: { kernel: kernelRequest(q, catalog) }, kind: "kernel", href: `/kernels.html${url.search}` };
  }
  if (url.pathname.endsWith("/snapshots.html")) return { side: { snapshot: snapshotOf(q) }, kind: "snapshot", href };
  if (url.pathname === "/" || url.pathname.endsWith("/index.html")) {
    return { side: { reshard: reshardRequest(q) }, kind: "reshard", href };
  }
  throw new Error(`cannot compare "${t.slice(0, 80)}": paste a kernels.html or layout-explorer address, a snapshot, or a /s/ link`);
}
