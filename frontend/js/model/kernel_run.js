// The kernel-run state: what the kernel lab shows in its controls and keeps in its address, and what the
// comparison reads from a pasted kernel-lab address — one model, so both send the same request for the
// same address. A state names a kernel, a device set, a mesh, each input's shape, spec and dtype, the
// parameters and the output specs; whatever an address leaves out is the catalog's default for that
// kernel (so `?kernel=matmul_xxt&types=explicit` is a complete run).

import { parseDims } from "../lib/format.js";

/** @typedef {{shape: string, spec: string, dtype: string}} InputState */
/** @typedef {{kernel: string, devices: string, slices: number, mesh: string, axes: string, order: string,
 *   types: string, data: string, inputs: InputState[], params: Record<string, string>, outs: string[]}} KernelState
 *   mesh "2x4", axes "x,y"; types auto | explicit; data: the inputs' values, "" (seeded normal draws) or
 *   "arange" (0, 1, 2, … as the tutorials' jnp.arange); outs: one spec per output, "" for JAX decides */

/** How long a field of an address may be (the API bounds what it takes: this only keeps the page sane). */
const FIELD_MAX = 600;
const MAX_INPUTS = 16;

/** The catalog's defaults for kernel `k` (GET /api/kernels's entry). @param {any} k @returns {KernelState} */
export function defaultsFor(k) {
  return {
    kernel: k.name,
    devices: k.devices,
    slices: 1,
    mesh: k.mesh.shape.join("x"),
    axes: k.mesh.axis_names.join(","),
    order: "make_mesh",
    types: String(k.mesh.axis_types[0]).toLowerCase(),
    data: "",
    inputs: k.inputs.map((/** @type {any} */ i) => ({ shape: i.shape.join(","), spec: i.spec, dtype: i.dtype })),
    params: Object.fromEntries(k.params.map((/** @type {any} */ p) => [p.name, p.default])),
    outs: (k.outputs || []).map(() => ""),
  };
}

/**
 * The state a kernel-lab query describes: what it names, the catalog's defaults for the rest (an input
 * given as `in=8,16` keeps the catalog's spec and dtype). Null without a kernel the catalog has.
 * @param {URLSearchParams} q
 * @param {any[]} catalog GET /api/kernels's kernels
 * @returns {KernelState | null}
 */
export function fromQuery(q, catalog) {
  const k = catalog.find((x) => x.name === (q.get("kernel") || ""));
  if (!k) return null;
  const s = defaultsFor(k);
  const str = (/** @type {string} */ key) => (q.get(key) ?? "").slice(0, FIELD_MAX);
  for (const key of /** @type {const} */ (["devices", "mesh", "axes", "order", "types"])) if (q.has(key)) s[key] = str(key);
  if (q.has("slices")) s.slices = Math.max(1, Math.min(64, parseInt(str("slices"), 10) || 1));
  if (q.get("data") === "arange") s.data = "arange";
  q.getAll("in").slice(0, MAX_INPUTS).forEach((v, i) => {
    if (i >= s.inputs.length) return;
    const given = v.slice(0, FIELD_MAX).split("|");
    const d = s.inputs[i];
    s.inputs[i] = { shape: given[0] || d.shape, spec: given[1] || d.spec, dtype: given[2] || d.dtype };
  });
  for (const [key, v] of q.entries()) if (key.startsWith("p.") && key.slice(2) in s.params) s.params[key.slice(2)] = v.slice(0, FIELD_MAX);
  q.getAll("out").slice(0, s.outs.length).forEach((v, i) => (s.outs[i] = v.slice(0, FIELD_MAX)));
  return s;
}

/** The state as a kernel-lab query (what fromQuery reads back). @param {KernelState} s @returns {string} */
export function toQuery(s) {
  const q = new URLSearchParams();
  q.set("kernel", s.kernel);
  q.set("devices", s.devices);
  if (s.slices > 1) q.set("slices", String(s.slices));
  q.set("mesh", s.mesh);
  q.set("axes", s.axes);
  q.set("order", s.order);
  q.set("types", s.types);
  if (s.data) q.set("data", s.data);
  for (const i of s.inputs) q.append("in", `${i.shape}|${i.spec}|${i.dtype}`);
  for (const [k, v] of Object.entries(s.params)) q.set(`p.${k}`, v);
  if (s.outs.some((o) => o.trim())) for (const o of s.outs) q.append("out", o);
  return q.toString();
}

/**
 * A field the user can fix, for an error to stand beside: an input's shape, spec or dtype, an output
 * spec, a parameter, or the mesh.
 * @typedef {{input?: number, output?: number, param?: string, field: string}} Where
 */

/** An error about one field, saying where it is. */
export class FieldError extends Error {
  /** @param {string} message @param {Where} where */
  constructor(message, where) {
    super(message);
    this.where = where;
  }
}

/** "2x4" / "8,8" -> [2, 4] / [8, 8] ("" -> []: a scalar). @param {string} text @param {string} what @param {Where} where */
function dims(text, what, where) {
  if (text.trim() === "") return [];
  const nums = parseDims(text);
  if (!nums) throw new FieldError(`${what} must look like 2x4 or 8,8, got "${text}"`, where);
  return nums;
}

/**
 * The POST /api/kernels/run body of a state; throws a FieldError naming the field that cannot be read
 * (an output spec given for some outputs but not all included: every output a spec, or none).
 * @param {KernelState} s
 * @param {any[]} catalog
 * @returns {Record<string, any>}
 */
export function runRequest(s, catalog) {
  const k = catalog.find((x) => x.name === s.kernel);
  if (!k) throw new FieldError(`no kernel named "${s.kernel}" in the catalog`, { field: "kernel" });
  const mesh = dims(s.mesh, "the mesh shape", { field: "mesh" });
  if (!mesh.length) throw new FieldError("the mesh needs a shape, e.g. 2x4", { field: "mesh" });
  const axes = s.axes.split(",").map((a) => a.trim());
  /** @type {Record<string, any>} */
  const req = {
    kernel: k.name,
    devices: s.devices,
    mesh: { shape: mesh, axis_names: axes, order: s.order, axis_types: axes.map(() => s.types) },
    inputs: s.inputs.map((i, n) => ({
      shape: dims(i.shape, `the shape of ${k.inputs[n].name}`, { input: n, field: "shape" }),
      spec: i.spec,
      dtype: i.dtype,
    })),
  };
  if (k.params.length) req.params = s.params;
  if (k.outputs && s.outs.some((o) => o.trim())) {
    const missing = s.outs.findIndex((o) => !o.trim());
    if (missing >= 0) throw new FieldError("give every output a spec, or none (JAX decides)", { output: missing, field: "spec" });
    req.out_specs = s.outs.map((o) => o.trim());
  }
  if (s.data) req.data = s.data;
  if (s.slices > 1) req.slices = s.slices;
  return req;
}
