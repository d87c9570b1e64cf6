// The facts a view lists about a layout or a snapshot leaf, as [label, text] rows (the layout
// explorer's summary, the snapshot view's leaf panel, the notebook widget's): one wording everywhere.

import { fmtBytes, meshAxes } from "../lib/format.js";

/** @typedef {import("./layout.js").Layout} Layout */

/**
 * A layout's summary rows: spec, mesh, array, shard shape, replication, bytes, and each dimension's split.
 * @param {Layout} l
 * @param {{spec?: string, single?: boolean}} [opts] spec: the spec as the view words it (e.g. with its
 *   logical names); single: a single-device sharding (the mesh is one device)
 * @returns {[string, string][]}
 */
export function layoutFacts(l, opts = {}) {
  const j = l.json;
  const single = Boolean(opts.single);
  /** @type {[string, string][]} */
  const rows = [["spec", opts.spec ?? l.spec]];
  if (single) rows.push(["sharding", `SingleDeviceSharding(${l.platform} ${l.meshIds[0]})`]);
  rows.push(
    ["mesh", single ? `one device: ${l.platform} ${l.meshIds[0]} of ${l.devicesKey}` : `${meshAxes(l.mesh)} over ${l.devicesKey}`],
    ["array", `${JSON.stringify(l.shape)} ${l.dtype}`],
    ["shard shape", JSON.stringify(l.shardShape)],
    ["replication", `${j.replication_factor}×` + (j.replicated_axes.length ? ` (replicated over ${j.replicated_axes.join(", ")})` : " (no replication)") + (j.unreduced_axes.length ? `; unreduced over ${j.unreduced_axes.join(", ")}` : "")],
    ["per device", fmtBytes(j.bytes_per_device)],
    ["total", `${fmtBytes(j.total_bytes)} across ${l.shards.length} device${l.shards.length > 1 ? "s" : ""} vs ${fmtBytes(j.logical_bytes)} logical`],
  );
  l.dims.forEach((d, i) => rows.push([i === 0 ? "split" : "", d.text]));
  return rows;
}

const KIND_LABEL = /** @type {Record<string, string>} */ ({
  single_device: "single-device",
  sharded: "sharded, fully addressable",
  global: "global (across processes)",
  shape_dtype_struct: "planned",
  sharding: "sharding",
  partition_spec: "spec",
  host: "host",
  array: "array",
});

/** What kind of leaf it is, in words (an array's kind in JAX's migration-guide terms). @param {any} leaf */
export function kindText(leaf) {
  const kind = leaf.array_kind || leaf.kind;
  return KIND_LABEL[kind] || kind;
}

/** The kind, and on how many devices. @param {any} leaf */
export function kindOnDevices(leaf) {
  return kindText(leaf) + (leaf.num_devices ? ` on ${leaf.num_devices} device${leaf.num_devices > 1 ? "s" : ""}` : "");
}

/** Flax logical axis names as Python writes the tuple: ('hidden', None). @param {(string | null)[] | null} axes */
export function logicalAxesText(axes) {
  return axes ? `(${axes.map((n) => (n === null ? "None" : `'${n}'`)).join(", ")})` : null;
}

/**
 * A snapshot's summary rows: leaves by kind, devices, meshes, process, rules, when captured, jit memory.
 * @param {any} snap a stored snapshot (or a merged run)
 * @param {(rules: any) => string} rulesText how rules are written (model/rules.js)
 * @returns {[string, string | null][]}
 */
export function snapshotFacts(snap, rulesText) {
  /** @type {Record<string, number>} */
  const counts = {};
  for (const l of snap.leaves) counts[kindText(l)] = (counts[kindText(l)] || 0) + 1;
  const logical = snap.leaves.filter((/** @type {any} */ l) => l.logical_axes).length;
  const jit = snap.jit;
  const perDevice = jit
    ? Object.entries(jit.memory_per_device || {}).map(([k, b]) => `${k.replace("_size_in_bytes", "")} ${fmtBytes(/** @type {number} */ (b))}`)
    : [];
  return [
    ["leaves", `${snap.leaves.length} (${Object.entries(counts).map(([k, n]) => `${n} ${k}`).join(", ")})${snap.skipped ? `; ${snap.skipped} non-array leaves skipped` : ""}`],
    ["devices", `${snap.devices.id.length} ${snap.device_kind} (${snap.platform})`],
    ["meshes", snap.meshes.map(meshAxes).join("; ") || "none"],
    ["process", snap.process_index !== null && snap.process_index !== undefined ? `${snap.process_index} of ${snap.process_count}` : null],
    ["logical rules", snap.rules ? rulesText(snap.rules) : logical ? "none captured" : null],
    ["captured", snap.created ? `${new Date(snap.created * 1000).toLocaleString()} with JAX ${snap.jax_version}` : null],
    ["jit", jit ? `${jit.function}: per device ${perDevice.join(", ")}` : null],
  ];
}
