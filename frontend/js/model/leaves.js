// The leaf model: what each leaf of a snapshot (or a merged run) looks like now — its captured spec and
// layout, or a what-if's — which devices' shards nobody here holds, whether it passes the view's
// filters, and which leaf to open first. The snapshot panel reads leaves only through this, on every
// host.

import { Layout } from "./layout.js";

/**
 * @typedef {{spec: string | null, layout: any, error: {code: string, message: string} | null,
 *   changed: boolean, captured: string | null, underWhatif: boolean}} LeafNow
 *   layout: a snapshot layout entry (or a what-if's); underWhatif: a what-if re-laid this leaf out
 * @typedef {{layouts: any[], byIndex: Map<number, any>, memory: any, changed: number, errors: number,
 *   leaves: any[]}} WhatIf a POST /api/snapshots/whatif answer, its leaves by index
 * @typedef {{q: string, axis: string, kind: string}} LeafFilter q: words; axis: a mesh axis,
 *   "(replicated)" or "(not split)"; kind: "", array, shape_dtype_struct, sharding, logical, changed
 */

/** A what-if answer with its leaves by index. @param {any} res @returns {WhatIf} */
export function whatIfOf(res) {
  return { ...res, byIndex: new Map(res.leaves.map((/** @type {any} */ r) => [r.index, r])) };
}

/**
 * Leaf `i` now: the what-if's spec and layout when one re-laid it out, else as captured.
 * @param {any} snap
 * @param {WhatIf | null} whatif
 * @param {number} i
 * @returns {LeafNow}
 */
export function leafNow(snap, whatif, i) {
  const leaf = snap.leaves[i];
  const captured = leaf.layout !== null && leaf.layout !== undefined ? snap.layouts[leaf.layout] : null;
  const w = whatif ? whatif.byIndex.get(i) : undefined;
  if (w) {
    const layout = w.layout !== null && w.layout !== undefined ? whatif.layouts[w.layout] : captured;
    return { spec: w.spec, layout, error: w.error, changed: w.changed, captured: leaf.spec, underWhatif: true };
  }
  return { spec: leaf.spec, layout: captured, error: null, changed: false, captured: leaf.spec, underWhatif: false };
}

/**
 * Devices whose shard of the leaf nobody here holds: owned by a process that did not report (a merged
 * run's `missing_devices`), or not addressable from the process that captured.
 * @param {any} leaf
 * @param {any} layout its layout entry now
 * @returns {Set<number>}
 */
export function notHeld(leaf, layout) {
  if (leaf.missing_devices) return new Set(leaf.missing_devices);
  if (leaf.addressable_devices && layout) {
    const mine = new Set(leaf.addressable_devices);
    return new Set(layout.shards.map((/** @type {any} */ s) => s.device_id).filter((/** @type {number} */ d) => !mine.has(d)));
  }
  return new Set();
}

/** What the faded tiles of a leaf mean. @param {any} leaf */
export function notHeldLegend(leaf) {
  return leaf.missing_devices
    ? "Faded tiles: shards on devices whose process did not report."
    : "Faded tiles: shards on other processes' devices (not addressable from the process that captured).";
}

/** Mesh axes a layout splits dimensions over. @param {any} layout @returns {string[]} */
export function axesOf(layout) {
  return layout ? layout.dims.flatMap((/** @type {any} */ d) => d.axes) : [];
}

/**
 * Whether leaf `i` passes the filters.
 * @param {any} snap
 * @param {WhatIf | null} whatif
 * @param {number} i
 * @param {LeafFilter} f
 */
export function leafMatches(snap, whatif, i, f) {
  const leaf = snap.leaves[i];
  const v = leafNow(snap, whatif, i);
  const kind = f.kind;
  if (kind === "logical" && !leaf.logical_axes) return false;
  if (kind === "changed" && !v.changed) return false;
  if (kind === "sharding" && !["sharding", "partition_spec"].includes(leaf.kind)) return false;
  if (["array", "shape_dtype_struct"].includes(kind) && leaf.kind !== kind) return false;
  const axis = f.axis;
  if (axis === "(replicated)") {
    if (!v.layout || v.layout.replication_factor <= 1) return false;
  } else if (axis === "(not split)") {
    if (!v.layout || axesOf(v.layout).length) return false;
  } else if (axis && !axesOf(v.layout).includes(axis)) return false;
  const q = f.q.trim().toLowerCase();
  if (!q) return true;
  const text = [leaf.path, v.spec || "", leaf.dtype || "", (leaf.logical_axes || []).join(" "), axesOf(v.layout).join(" "), leaf.box || "", leaf.type]
    .join(" ")
    .toLowerCase();
  return q.split(/\s+/).filter(Boolean).every((w) => text.includes(w));
}

/**
 * The leaf to open when none is named: the first one split into the most blocks (more telling than a
 * replicated scalar); -1 when no leaf has a layout.
 * @param {any} snap
 * @returns {number}
 */
export function mostTelling(snap) {
  let best = -1;
  let tiles = -1;
  snap.leaves.forEach((/** @type {any} */ leaf, /** @type {number} */ i) => {
    const lay = leaf.layout !== null && leaf.layout !== undefined ? snap.layouts[leaf.layout] : null;
    if (lay && lay.tiles.length > tiles) {
      best = i;
      tiles = lay.tiles.length;
    }
  });
  return best;
}

/**
 * The layout model of leaf `i` as it is now (what the grid draws).
 * @param {any} snap
 * @param {any} leaf
 * @param {any} entry its layout entry now
 * @returns {Layout}
 */
export function leafLayout(snap, leaf, entry) {
  return Layout.fromSnapshot(snap, entry, leaf.mesh);
}

/** The devices' hosts (process index by device id). @param {any} snap @returns {Map<number, number>} */
export function hostsOf(snap) {
  return new Map(snap.devices.id.map((/** @type {number} */ id, /** @type {number} */ k) => [id, snap.devices.process_index[k]]));
}

/**
 * The reference of a snapshot on screen, as the API takes it: a stored snapshot, a run, or one
 * process of a run.
 * @param {{snapshot?: string, run?: string, process?: string}} s
 * @returns {Record<string, string | number>}
 */
export function snapshotRef(s) {
  if (s.run) return s.process !== undefined && s.process !== "" ? { run: s.run, process: Number(s.process) } : { run: s.run };
  return { snapshot: s.snapshot || "" };
}
