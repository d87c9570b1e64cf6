// The URL state of the layout and topology views (one shape: a device set, a mesh, an array and its
// spec, plus what the topology view highlights), and the addresses that open each of them at a
// COMPLETE state: views hand each other everything the next one needs, never half of it.

import { parseDims, parseIds } from "../lib/format.js";
import { parseRules } from "./rules.js";
import { LAYOUT_STATE } from "../lib/vocabulary.js";

/** @typedef {{devices: string, slices: number, mesh: string, axes: string, order: string,
 *   types: string, spec: string, shape: string, dtype: string, dims: string, axis: string,
 *   groups: string, glabel: string, split: string, dcn: string, ids: string, rules: string, reshard: string}} State
 *   mesh "4x4"; axes "x,y"; order: one of ORDERS' values; types "" (JAX's default) | auto | explicit;
 *   shape "16,16"; dims: the two array dimensions the grid shows ("0,2", rank > 2); axis: the mesh axis
 *   the topology view highlights; groups "0,4;1,5" and glabel: device groups handed over by another
 *   view (a collective's), drawn and measured on the topology; split "1": allow_split_physical_axes;
 *   dcn "2x1": the DCN part of a hybrid mesh; ids "0-3,6,7,4,5": an explicit device order (one id
 *   for a single device); rules: Flax logical → mesh axis rules, the spec then naming logical axes;
 *   reshard: the layout explorer's "Reshard to…" target spec */

/** Every mesh constructor the API has, as [order, label, what it does]. */
export const ORDERS = /** @type {const} */ ([
  ["make_mesh", "jax.make_mesh", "jax.make_mesh(shape, names, devices=…): JAX's order along the physical axes"],
  ["iota", "iota (reshape of the device list)", "Mesh(np.array(devices).reshape(shape)): the device list as it comes"],
  ["devices", "explicit device order", "Mesh(np.array(ids).reshape(shape)): your own permutation of device ids"],
  ["hybrid", "hybrid ICI × DCN", "mesh_utils.create_hybrid_device_mesh(ici, dcn, devices): each axis is ICI × DCN, the DCN part across slices (TPU) or hosts (GPU)"],
  ["single", "single device", "jax.device_put(x, device): one device holds the whole array (SingleDeviceSharding)"],
]);

/** The fields and their defaults: one list, the domain's (sharding_core.linking.LAYOUT_STATE, what
 * shardscope.link writes), served as lib/vocabulary.js. @type {Readonly<State>} */
export const DEFAULTS = /** @type {Readonly<State>} */ (LAYOUT_STATE);

const KEYS = /** @type {(keyof State)[]} */ (Object.keys(DEFAULTS));
/** Characters kept of a field from an address: device groups and orders name up to a slice's every device. */
const LONG = new Set(["groups", "ids"]);

/** The state a query names, defaults for the rest. @param {URLSearchParams} q @returns {State} */
export function fromQuery(q) {
  const s = { ...DEFAULTS };
  for (const k of KEYS) {
    const v = q.get(k);
    if (v === null) continue;
    if (k === "slices") s.slices = Math.max(1, Math.min(64, parseInt(v, 10) || 1));
    else /** @type {any} */ (s)[k] = v.slice(0, LONG.has(k) ? 40000 : 600);
  }
  return s;
}

/** @param {State} s @returns {string} */
export function toQuery(s) {
  const q = new URLSearchParams();
  // empty optional fields stay out of the URL (fromQuery gives them back as their default "")
  for (const k of KEYS) if (!(DEFAULTS[k] === "" && s[k] === "")) q.set(k, String(s[k]));
  return q.toString();
}

/** @param {State} s @returns {string[]} */
export function axisNames(s) {
  return s.axes.split(",").map((a) => a.trim());
}

/**
 * The device set and mesh as the API takes them ({devices, slices?, mesh: {shape, axis_names, order,
 * axis_types?, device_ids?, dcn_shape?, allow_split_physical_axes?}}); throws with a message saying
 * what to type when a field cannot be read.
 * @param {State} s
 * @returns {{devices: string, slices?: number, mesh: Record<string, unknown>}}
 */
export function meshRequest(s) {
  const names = axisNames(s);
  /** @type {Record<string, unknown>} */
  let mesh;
  if (s.order === "single") {
    // SingleDeviceSharding: a mesh of ones over the one device, so the spec's axes still resolve
    const id = s.ids.trim() === "" ? [0] : parseIds(s.ids, 1);
    if (!id) throw new Error(`the single device is one device id, e.g. 0, got "${s.ids}"`);
    mesh = { shape: names.map(() => 1), axis_names: names, order: "devices", device_ids: id };
  } else {
    const shape = parseDims(s.mesh);
    if (!shape) throw new Error(`mesh shape must look like 2x4, got "${s.mesh}"`);
    mesh = { shape, axis_names: names, order: s.order };
    if (s.order === "devices") {
      const ids = parseIds(s.ids);
      if (!ids) throw new Error(`give the device ids in mesh order, e.g. 0,1,2,3,6,7,4,5 or 0-7, got "${s.ids}"`);
      mesh.device_ids = ids;
    }
    if (s.order === "hybrid") {
      const dcn = parseDims(s.dcn);
      if (!dcn) throw new Error(`a hybrid mesh needs its DCN shape, one entry per mesh axis, e.g. 2x1, got "${s.dcn}"`);
      mesh.dcn_shape = dcn;
    }
    if (s.split && (s.order === "make_mesh" || s.order === "hybrid")) mesh.allow_split_physical_axes = true;
  }
  /** @type {{devices: string, slices?: number, mesh: Record<string, unknown>}} */
  const req = { devices: s.devices, mesh };
  if (s.types) mesh.axis_types = names.map(() => s.types);
  if (s.slices > 1) req.slices = s.slices;
  return req;
}

/** The POST /api/layout body (logical rules, when given, as the API takes them). @param {State} s @returns {Record<string, unknown>} */
export function layoutRequest(s) {
  const shape = s.shape.trim() === "" ? [] : parseDims(s.shape);
  if (!shape) throw new Error(`array shape must look like 16,16, got "${s.shape}"`);
  /** @type {Record<string, unknown>} */
  const req = { ...meshRequest(s), spec: s.spec, shape, dtype: s.dtype };
  if (s.rules && s.rules.trim()) req.rules = parseRules(s.rules);
  return req;
}

/** The layout explorer's query at this state (what only the topology view reads is left out). @param {State} s */
export function layoutQuery(s) {
  return toQuery({ ...s, axis: "", groups: "", glabel: "" });
}

/** The topology view's query at this state (the layout explorer's reshard target stays behind). @param {State} s */
export function topologyQuery(s) {
  return toQuery({ ...s, reshard: "" });
}

/**
 * How many devices a device set has, when the page can tell: cpu:N, gpu:KIND:HxG, tpu:GEN:TOPO (chips
 * times the generation's devices per chip, from the platforms catalog); null for `local` and unknown sets.
 * @param {string} devices
 * @param {number} slices
 * @param {any} catalog GET /api/platforms
 * @returns {number | null}
 */
export function deviceCount(devices, slices, catalog) {
  const [kind, a, b] = devices.split(":");
  if (kind === "cpu") return parseDims(a || "") ? Number(a) : null;
  if (kind === "gpu") {
    const hg = parseDims(b || "");
    return hg && hg.length === 2 ? hg[0] * hg[1] : null;
  }
  if (kind === "tpu") {
    const gen = (catalog?.tpu || []).find((/** @type {any} */ g) => g.name === a);
    const topo = parseDims(b || "");
    return gen && topo ? topo.reduce((x, y) => x * y, 1) * gen.cores_per_chip * Math.max(1, slices) : null;
  }
  return null;
}

/**
 * Device sets of exactly `n` devices to offer for a mesh of `n` (a pasted repr names no devices): a TPU
 * slice of the current set's generation (else of any generation) whose topology has `n` devices, a GPU
 * set of the current kind, and `cpu:n` (what JAX numbers 0..n-1 with --xla_force_host_platform_device_count).
 * @param {number} n
 * @param {string} current the device set on screen
 * @param {any} catalog GET /api/platforms
 * @returns {string[]}
 */
export function deviceSetsFor(n, current, catalog) {
  const [kind, name] = current.split(":");
  /** @type {string[]} */
  const out = [];
  const tpus = catalog?.tpu || [];
  const gens = kind === "tpu" ? [...tpus.filter((/** @type {any} */ g) => g.name === name), ...tpus.filter((/** @type {any} */ g) => g.name !== name)] : tpus;
  for (const gen of gens) {
    const topo = gen.topologies.find((/** @type {string} */ t) => t.split("x").reduce((x, y) => x * Number(y), 1) * gen.cores_per_chip === n);
    if (topo) {
      out.push(`tpu:${gen.name}:${topo}`);
      break;
    }
  }
  if (kind === "gpu" && n % 8 === 0) out.push(`gpu:${name}:${n / 8}x8`);
  if (n <= (catalog?.cpu?.max_devices ?? 16384)) out.push(`cpu:${n}`);
  return out;
}
