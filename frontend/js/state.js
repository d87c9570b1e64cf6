// The view's whole state lives in the page URL (copying the address bar shares it).

/** @typedef {{devices: string, slices: number, mesh: string, axes: string, order: string,
 *   types: string, spec: string, shape: string, dtype: string, dims: string, axis: string,
 *   groups: string, glabel: string}} State */

/** @type {State} */
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
});

const KEYS = /** @type {(keyof State)[]} */ (Object.keys(DEFAULTS));

/** @param {string} search @returns {State} */
export function fromQuery(search) {
  const q = new URLSearchParams(search);
  const s = { ...DEFAULTS };
  for (const k of KEYS) {
    const v = q.get(k);
    if (v === null) continue;
    if (k === "slices") s.slices = Math.max(1, Math.min(64, parseInt(v, 10) || 1));
    else /** @type {any} */ (s)[k] = v.slice(0, 600);
  }
  return s;
}

/** @param {Record<string, unknown>} obj @returns {State} */
export function fromObject(obj) {
  const params = new URLSearchParams();
  for (const k of KEYS) if (obj && typeof obj[k] !== "undefined") params.set(k, String(obj[k]));
  return fromQuery(params.toString());
}

/** @param {State} s @returns {string} */
export function toQuery(s) {
  const q = new URLSearchParams();
  // empty optional fields stay out of the URL (fromQuery gives them back as their default "")
  for (const k of KEYS) if (!(DEFAULTS[k] === "" && s[k] === "")) q.set(k, String(s[k]));
  return q.toString();
}

/** "0,4;1,5" -> [[0, 4], [1, 5]]; null unless every id is a non-negative integer. @param {string} text */
export function parseGroups(text) {
  if (!text) return null;
  const groups = text.split(";").map((g) => g.split(",").map((v) => (/^\d{1,9}$/.test(v.trim()) ? Number(v) : NaN)));
  return groups.every((g) => g.length && g.every(Number.isInteger)) ? groups : null;
}

/** "4x4" or "4,4" -> [4, 4]; null if not positive integers. @param {string} text */
export function parseDims(text) {
  const parts = text.split(/[x,\s]+/i).filter(Boolean);
  if (!parts.length) return null;
  const nums = parts.map((p) => (/^\d{1,12}$/.test(p) ? Number(p) : NaN));
  return nums.every((n) => Number.isInteger(n) && n >= 1) ? nums : null;
}

/** @param {State} s */
export function layoutRequest(s) {
  const mesh = parseDims(s.mesh);
  const shape = s.shape.trim() === "" ? [] : parseDims(s.shape);
  const axes = s.axes.split(",").map((a) => a.trim());
  if (!mesh) throw new Error(`mesh shape must look like 2x4, got "${s.mesh}"`);
  if (!shape) throw new Error(`array shape must look like 16,16, got "${s.shape}"`);
  /** @type {Record<string, unknown>} */
  const meshReq = { shape: mesh, axis_names: axes, order: s.order };
  if (s.types) meshReq.axis_types = axes.map(() => s.types);
  /** @type {Record<string, unknown>} */
  const req = { devices: s.devices, mesh: meshReq, spec: s.spec, shape, dtype: s.dtype };
  if (s.slices > 1) req.slices = s.slices;
  return req;
}
