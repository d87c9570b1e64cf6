// The URL state of the layout and topology views (one shape: a device set, a mesh, an array and its
// spec, plus what the topology view highlights), and the addresses that open each of them at a
// COMPLETE state: views hand each other everything the next one needs, never half of it.

import { parseDims } from "../lib/format.js";
import { VIEWS } from "../lib/page.js";

/** @typedef {{devices: string, slices: number, mesh: string, axes: string, order: string,
 *   types: string, spec: string, shape: string, dtype: string, dims: string, axis: string,
 *   groups: string, glabel: string, reshard: string}} State
 *   mesh "4x4"; axes "x,y"; order make_mesh | iota; types "" (JAX's default) | auto | explicit;
 *   shape "16,16"; dims: the two array dimensions the grid shows ("0,2", rank > 2); axis: the mesh axis
 *   the topology view highlights; groups "0,4;1,5" and glabel: device groups handed over by another
 *   view (a collective's), drawn and measured on the topology; reshard: the layout explorer's "Reshard to…"
 *   target spec */

/** @type {Readonly<State>} */
export const DEFAULTS = Object.freeze({
  devices: "tpu:v5e:4x4",
  slices: 1,
  mesh: "4x4",
  axes: "x,y",
  order: "make_mesh",
  types: "",
  spec: "P('x', None)",
  shape: "16,16",
  dtype: "float32",
  dims: "",
  axis: "",
  groups: "",
  glabel: "",
  reshard: "",
});

const KEYS = /** @type {(keyof State)[]} */ (Object.keys(DEFAULTS));

/** The state a query names, defaults for the rest. @param {URLSearchParams} q @returns {State} */
export function fromQuery(q) {
  const s = { ...DEFAULTS };
  for (const k of KEYS) {
    const v = q.get(k);
    if (v === null) continue;
    if (k === "slices") s.slices = Math.max(1, Math.min(64, parseInt(v, 10) || 1));
    else /** @type {any} */ (s)[k] = v.slice(0, 600);
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
 * The device set and mesh as the API takes them ({devices, slices?, mesh: {shape, axis_names, order}}).
 * @param {State} s
 * @returns {{devices: string, slices?: number, mesh: Record<string, unknown>}}
 */
export function meshRequest(s) {
  const mesh = parseDims(s.mesh);
  if (!mesh) throw new Error(`mesh shape must look like 2x4, got "${s.mesh}"`);
  /** @type {{devices: string, slices?: number, mesh: Record<string, unknown>}} */
  const req = { devices: s.devices, mesh: { shape: mesh, axis_names: axisNames(s), order: s.order } };
  if (s.types) req.mesh.axis_types = axisNames(s).map(() => s.types);
  if (s.slices > 1) req.slices = s.slices;
  return req;
}

/** The POST /api/layout body. @param {State} s @returns {Record<string, unknown>} */
export function layoutRequest(s) {
  const shape = s.shape.trim() === "" ? [] : parseDims(s.shape);
  if (!shape) throw new Error(`array shape must look like 16,16, got "${s.shape}"`);
  return { ...meshRequest(s), spec: s.spec, shape, dtype: s.dtype };
}

/** @param {string} name a view's name @returns {string} its page */
function pageOf(name) {
  return /** @type {{href: string}} */ (VIEWS.find((v) => v.name === name)).href;
}

/** The layout explorer at this state (what only the topology view reads is left out). @param {State} s */
export function layoutHref(s) {
  return `${pageOf("layout")}?${toQuery({ ...s, axis: "", groups: "", glabel: "" })}`;
}

/** The topology view at this state (the layout explorer's reshard target stays behind). @param {State} s */
export function topologyHref(s) {
  return `${pageOf("topology")}?${toQuery({ ...s, reshard: "" })}`;
}
