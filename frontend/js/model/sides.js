// What one side of a comparison is, from what people paste: a kernel-lab address (its query is the run), a
// layout-explorer address with a reshard target (the reshard), a snapshots-page address, "snapshot:<id>" or
// "run:<id>", or a share link /s/<id> to any of them — turned into the side POST /api/compare takes.

import { getJSON } from "../lib/api.js";
import { parseDims } from "../lib/format.js";
import { fromQuery as layoutState, layoutRequest } from "./state.js";

/** @typedef {{kernel?: Record<string, any>, reshard?: Record<string, any>, snapshot?: Record<string, any>,
 *   label?: string}} Side */

/** "2x4" -> [2, 4]; throws with a message. @param {string} text @param {string} what */
function dims(text, what) {
  if (text.trim() === "") return [];
  const nums = parseDims(text);
  if (!nums) throw new Error(`${what} must look like 2x4 or 8,8, got "${text}"`);
  return nums;
}

/**
 * The kernel-lab run a kernels.html query describes (the kernel lab's URL format: kernel, devices, slices,
 * mesh, axes, order, types, in=shape|spec|dtype per input, p.NAME, out), the catalog's defaults for the rest.
 * @param {URLSearchParams} q
 * @param {any[]} catalog GET /api/kernels's kernels
 * @returns {Record<string, any>}
 */
export function kernelRequest(q, catalog) {
  const k = catalog.find((x) => x.name === q.get("kernel"));
  if (!k) throw new Error(`no kernel named "${q.get("kernel") || ""}" in the catalog`);
  const get = (/** @type {string} */ key, /** @type {string} */ fallback) => (q.get(key) ?? fallback).slice(0, 600);
  const axes = get("axes", k.mesh.axis_names.join(",")).split(",").map((a) => a.trim());
  const types = get("types", String(k.mesh.axis_types[0]).toLowerCase());
  const mesh = dims(get("mesh", k.mesh.shape.join("x")), "the mesh shape");
  const given = q.getAll("in");
  /** @type {Record<string, any>} */
  const req = {
    kernel: k.name,
    devices: get("devices", k.devices),
    mesh: { shape: mesh, axis_names: axes, order: get("order", "make_mesh"), axis_types: axes.map(() => types) },
    inputs: k.inputs.map((/** @type {any} */ meta, /** @type {number} */ i) => {
      const [shape = meta.shape.join(","), spec = meta.spec, dtype = meta.dtype] = (given[i] || "").split("|").map((v) => v || undefined);
      return { shape: dims(shape, `the shape of ${meta.name}`), spec, dtype };
    }),
  };
  if (k.params.length) {
    req.params = Object.fromEntries(k.params.map((/** @type {any} */ p) => [p.name, get(`p.${p.name}`, p.default)]));
  }
  const outs = q.getAll("out").slice(0, (k.outputs || []).length);
  if (k.outputs && outs.length && outs.every((o) => o.trim())) req.out_specs = outs;
  const slices = parseInt(get("slices", "1"), 10);
  if (slices > 1) req.slices = slices;
  return req;
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
function snapshotRef(q) {
  if (q.get("run")) return q.get("process") ? { run: q.get("run"), process: Number(q.get("process")) } : { run: q.get("run") };
  if (q.get("snapshot")) return { snapshot: q.get("snapshot") };
  throw new Error("a snapshots address names a snapshot= or a run=");
}

/**
 * The side a pasted text describes (share links are looked up first).
 * @param {string} text
 * @param {any[]} catalog
 * @returns {Promise<{side: Side, kind: string, href: string}>}
 */
export async function resolveSide(text, catalog) {
  const t = text.trim();
  if (!t) throw new Error("paste a kernel-lab or layout-explorer address, a snapshot, or a share link");
  const bare = /^(snapshot|run):\s*([A-Za-z0-9_-]+)$/.exec(t);
  if (bare) {
    const ref = { [bare[1]]: bare[2] };
    return { side: { snapshot: ref }, kind: "snapshot", href: `/snapshots.html?${bare[1]}=${bare[2]}` };
  }
  // a bare query ("kernel=...&devices=..." or "devices=...&reshard=...") is the kernel lab's or the layout's
  const query = /^[?]?[A-Za-z.]+=/.test(t) ? `${/(^|[?&])kernel=/.test(t) ? "/kernels.html" : "/"}?${t.replace(/^\?/, "")}` : t;
  const url = new URL(query, location.origin);
  const link = /^\/s\/([A-Za-z0-9_-]{1,64})$/.exec(url.pathname);
  if (link) {
    const stored = await getJSON(`/api/links/${link[1]}`);
    const state = stored.state || {};
    const query = typeof state.query === "string" ? state.query : new URLSearchParams(Object.entries(state).map(([k, v]) => [k, String(v)])).toString();
    const page = { kernels: "/kernels.html", snapshots: "/snapshots.html", layout: "/" }[/** @type {string} */ (stored.view)];
    if (!page) throw new Error(`a ${stored.view} link cannot be one side of a comparison`);
    return resolveSide(`${page}?${query.replace(/^\?/, "")}`, catalog);
  }
  const q = url.searchParams;
  const href = `${url.pathname}${url.search}`;
  if (url.pathname.endsWith("/kernels.html") || (!url.pathname.endsWith(".html") && q.has("kernel"))) {
    return { side: { kernel: kernelRequest(q, catalog) }, kind: "kernel", href: `/kernels.html${url.search}` };
  }
  if (url.pathname.endsWith("/snapshots.html")) return { side: { snapshot: snapshotRef(q) }, kind: "snapshot", href };
  if (url.pathname === "/" || url.pathname.endsWith("/index.html")) {
    return { side: { reshard: reshardRequest(q) }, kind: "reshard", href };
  }
  throw new Error(`cannot compare "${t.slice(0, 80)}": paste a kernels.html or layout-explorer address, a snapshot, or a /s/ link`);
}
