// The facts a view lists about a layout, a snapshot or one of its leaves, as [label, text] rows (the
// layout explorer's summary, the snapshot view's header and leaf panel, a kernel run's array cards):
// one wording everywhere, replication included.

import { compactIds, fmtBytes, fmtDateTime, meshAxes } from "../lib/format.js";
import { memoryOf } from "./program.js";
import { rulesText } from "./rules.js";

/** @typedef {import("./layout.js").Layout} Layout */
/** @typedef {[string, string | null | undefined]} Row a fact; rows without a value are left out */

/**
 * How many copies of each block there are and along which mesh axes: "2× (replicated over y)",
 * "1× (no replication)", and "; unreduced over z" when partial sums are pending along z.
 * @param {{replication_factor: number, replicated_axes?: string[], unreduced_axes?: string[]}} j a
 *   layout's JSON (an /api/layout answer, a kernel array, a snapshot's layout entry)
 * @returns {string}
 */
export function replicationText(j) {
  const over = j.replicated_axes || [];
  const unreduced = j.unreduced_axes || [];
  const how = j.replication_factor > 1 ? `replicated over ${over.length ? over.join(", ") : "every device"}` : "no replication";
  return `${j.replication_factor}× (${how})${unreduced.length ? `; unreduced over ${unreduced.join(", ")}` : ""}`;
}

/**
 * The array's type with its sharding as jax.typeof prints it ("float32[8@x,16@y]", "{U:y}" for an unreduced
 * axis), where the mesh has an Explicit axis (the sharding is then part of the type); null elsewhere.
 * @param {{typed?: string | null}} j a layout's JSON or a snapshot leaf
 * @param {{axis_types?: string[]} | null | undefined} mesh
 * @returns {string | null}
 */
export function typedText(j, mesh) {
  return j.typed && mesh && (mesh.axis_types || []).includes("Explicit") ? j.typed : null;
}

/** "x.dims[0]: 16 / x(2) → 8"-style rows, one per array dimension, the first labelled "split". @param {{dims: {text: string}[]}} j */
function splitRows(j) {
  return j.dims.map((d, i) => /** @type {Row} */ ([i === 0 ? "split" : " ", d.text]));
}

/**
 * A layout's summary rows: spec, mesh, array, shard shape, replication, bytes, and each dimension's split.
 * @param {Layout} l
 * @param {{spec?: string, single?: boolean}} [opts] spec: the spec as the view words it (e.g. with its
 *   logical names); single: a single-device sharding (the mesh is one device)
 * @returns {Row[]}
 */
export function layoutFacts(l, opts = {}) {
  const j = l.json;
  const single = Boolean(opts.single);
  /** @type {Row[]} */
  const rows = [["spec", opts.spec ?? l.spec], ["typed", single ? null : typedText(j, l.mesh)]];
  if (single) rows.push(["sharding", `SingleDeviceSharding(${l.platform} ${l.meshIds[0]})`]);
  rows.push(
    ["mesh", single ? `one device: ${l.platform} ${l.meshIds[0]} of ${l.devicesKey}` : `${meshAxes(l.mesh)} over ${l.devicesKey}`],
    ["array", `${JSON.stringify(l.shape)} ${l.dtype}`],
    ["shard shape", JSON.stringify(l.shardShape)],
    ["replication", replicationText(j)],
    ["per device", fmtBytes(j.bytes_per_device)],
    ["total", totalText(j)],
    ...splitRows(j),
  );
  return rows;
}

/** "2.00 KiB across 8 devices vs 512 B logical". @param {any} j a layout's JSON */
function totalText(j) {
  return `${fmtBytes(j.total_bytes)} across ${j.shards.length} device${j.shards.length > 1 ? "s" : ""} vs ${fmtBytes(j.logical_bytes)} logical`;
}

/**
 * A kernel run's array in one line: shard shape, bytes per device, replication.
 * @param {any} a a kernel run's input or output (an /api/layout answer with a name)
 * @returns {string[]}
 */
export function arrayFacts(a) {
  return [`shard ${JSON.stringify(a.shard_shape)}`, `${fmtBytes(a.bytes_per_device)} per device`, replicationText(a)];
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
function kindOnDevices(leaf) {
  return kindText(leaf) + (leaf.num_devices ? ` on ${leaf.num_devices} device${leaf.num_devices > 1 ? "s" : ""}` : "");
}

/** Flax logical axis names as Python writes the tuple: ('hidden', None). @param {(string | null)[] | null} axes */
function logicalAxesText(axes) {
  return axes ? `(${axes.map((n) => (n === null ? "None" : `'${n}'`)).join(", ")})` : null;
}

/**
 * A snapshot's summary rows: leaves by kind, devices, meshes, process, rules, when captured, jit memory.
 * @param {any} snap a stored snapshot (or a merged run)
 * @returns {Row[]}
 */
export function snapshotFacts(snap) {
  /** @type {Record<string, number>} */
  const counts = {};
  for (const l of snap.leaves) counts[kindText(l)] = (counts[kindText(l)] || 0) + 1;
  const logical = snap.leaves.filter((/** @type {any} */ l) => l.logical_axes).length;
  const jit = snap.jit;
  const mem = memoryOf(snap.program); // the program report's: XLA's memory_analysis fields by their names
  const perDevice = jit
    ? Object.entries(mem || {}).map(([k, b]) => `${k.replace("_size_in_bytes", "")} ${fmtBytes(/** @type {number} */ (b))}`)
    : [];
  return [
    ["leaves", `${snap.leaves.length} (${Object.entries(counts).map(([k, n]) => `${n} ${k}`).join(", ")})${snap.skipped ? `; ${snap.skipped} non-array leaves skipped` : ""}`],
    ["devices", `${snap.devices.id.length} ${snap.device_kind} (${snap.platform})`],
    ["meshes", snap.meshes.map(meshAxes).join("; ") || "none"],
    ["process", snap.process_index !== null && snap.process_index !== undefined ? `${snap.process_index} of ${snap.process_count}` : null],
    ["logical rules", snap.rules ? rulesText(snap.rules) : logical ? "none captured" : null],
    ["captured", snap.created ? `${fmtDateTime(snap.created * 1000)} with JAX ${snap.jax_version}` : null],
    // a plan's memory is drawn in its own section (components/plan.js): here, only what was compiled
    ["jit", jit ? (snap.plan ? `${jit.function}${mem ? "" : ": refused by XLA for memory"}` : `${jit.function}: per device ${perDevice.join(", ")}`) : null],
  ];
}

/**
 * One leaf's rows: what it is, its spec now (a what-if's, with the captured one beside it when they
 * differ), its mesh, bytes, replication, the processes that reported it and the devices whose shard
 * nobody here holds, and each dimension's split.
 * @param {any} snap
 * @param {any} leaf
 * @param {import("./leaves.js").LeafNow} v the leaf now
 * @param {Set<number>} held devices whose shard is not held (model/leaves.js notHeld)
 * @returns {Row[]}
 */
export function leafFacts(snap, leaf, v, held) {
  const lay = v.layout;
  const mesh = leaf.mesh !== null && leaf.mesh !== undefined ? snap.meshes[leaf.mesh] : null;
  /** @type {Row[]} */
  const rows = [
    ["type", leaf.box ? `${leaf.box} of ${leaf.type}` : leaf.type],
    ["kind", kindOnDevices(leaf)],
    ["array", leaf.shape ? `(${leaf.shape.join(", ")}) ${leaf.dtype}` : null],
    ["spec", v.spec || (leaf.sharding ? leaf.sharding : null)],
    // the captured type; a what-if's spec changes the sharding, so its layout's type is the one shown
    ["typed", typedText(v.changed && lay ? lay : leaf, mesh)],
    ["captured spec", v.changed || v.error ? v.captured : null],
    ["what-if error", v.error ? `${v.error.code}: ${v.error.message}` : null],
    // under a what-if the box's declaration is the what-if's spec: what the capture noted about it is moot
    ["declared", leaf.declared_spec && leaf.declared_spec !== v.spec && !v.underWhatif ? leaf.declared_spec : null],
    ["logical axes", logicalAxesText(leaf.logical_axes)],
    ["rules", leaf.rules ? rulesText(leaf.rules) : null],
    ["mesh", mesh ? `${meshAxes(mesh)} — devices ${JSON.stringify(mesh.device_ids)}` : null],
    ["memory kind", leaf.memory_kind],
    ["shard shape", lay ? `(${lay.shard_shape.join(", ")})` : null],
    ["per device", lay ? fmtBytes(lay.bytes_per_device) : null],
    ["total", lay ? totalText(lay) : null],
    ["replication", lay ? replicationText(lay) : null],
    ["processes", leaf.processes ? `reported by ${leaf.processes.join(", ")}` : null],
    ["not held", held.size ? `${String(snap.platform).toUpperCase()} ${compactIds([...held])}` : null],
    ["conflict", leaf.conflict],
    ["note", v.underWhatif ? null : leaf.note],
  ];
  if (lay) rows.push(...splitRows(lay));
  return rows;
}
