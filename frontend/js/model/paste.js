// What people paste into the PartitionSpec box besides a spec: JAX's own prints of a sharding —
// `print(x.sharding)` of a NamedSharding (its mesh and its spec), a SingleDeviceSharding (one
// device), a Mesh — read by a small scanner (never eval), and typographic quotes from docs and chat
// made straight.

/**
 * @typedef {{shape: number[], axis_names: string[], axis_types: string[] | null, device_ids: number[] | null}} PastedMesh
 *   axis_types lower-case (auto, explicit, manual) as JAX printed them; device_ids flat, in mesh
 *   order, when the repr lists them (older JAX: Mesh(device_ids=array([...]), ...))
 * @typedef {{kind: "named" | "single" | "mesh", spec: string | null, mesh: PastedMesh | null,
 *   device: number | null, memoryKind: string | null}} Pasted
 */

const CURLY_SINGLE = /[\u2018\u2019\u201a\u201b]/g;
const CURLY_DOUBLE = /[\u201c\u201d\u201e\u201f]/g;

/**
 * `text` with typographic quotes made straight — only when it has no straight quotes at all (an axis
 * name may itself hold a curly quote inside straight ones). Same length, so a caret stays put.
 * @param {string} text
 * @returns {string}
 */
export function straightQuotes(text) {
  if (/['"]/.test(text)) return text;
  return text.replace(CURLY_SINGLE, "'").replace(CURLY_DOUBLE, '"');
}

/**
 * The index just past the bracket that closes the one at `open` (quotes skipped), or -1.
 * @param {string} text
 * @param {number} open
 */
function closing(text, open) {
  let depth = 0;
  /** @type {string | null} */
  let quote = null;
  for (let i = open; i < text.length; i++) {
    const ch = text[i];
    if (quote) {
      if (ch === "\\") i++;
      else if (ch === quote) quote = null;
    } else if (ch === "'" || ch === '"') quote = ch;
    else if ("([{".includes(ch)) depth++;
    else if (")]}".includes(ch)) {
      depth--;
      if (depth === 0) return i + 1;
    }
  }
  return -1;
}

/**
 * The text of the call `name(...)` after `key=` in `text` (e.g. key "spec" → "PartitionSpec(None, 'model')").
 * @param {string} text
 * @param {string} key
 */
function argument(text, key) {
  const m = new RegExp(`\\b${key}\\s*=\\s*([A-Za-z_][\\w.]*)?\\s*\\(`).exec(text);
  if (!m) return null;
  const open = m.index + m[0].length - 1;
  const end = closing(text, open);
  return end < 0 ? null : text.slice(m.index + m[0].indexOf(m[1] ?? "("), end);
}

/** Quoted names in a tuple's text: "('data', 'model')" -> ["data", "model"]. @param {string} text */
function quotedNames(text) {
  return [...text.matchAll(/'((?:[^'\\]|\\.)*)'|"((?:[^"\\]|\\.)*)"/g)].map((q) => q[1] ?? q[2]);
}

/** "(Explicit, Explicit)" / "(AxisType.Auto,)" -> ["explicit", "explicit"]. @param {string} text */
function axisTypes(text) {
  const names = text.replace(/[()]/g, "").split(",").map((t) => t.trim().replace(/^AxisType\./, "").toLowerCase()).filter(Boolean);
  return names.length && names.every((t) => ["auto", "explicit", "manual"].includes(t)) ? names : null;
}

/**
 * A nested array literal's shape and flat numbers: "[[0, 1], [2, 3]]" -> {shape: [2, 2], ids: [0, 1, 2, 3]}
 * (at most 8 levels: a mesh has at most 8 axes); null unless rectangular.
 * @param {string} text
 * @returns {{shape: number[], ids: number[]} | null}
 */
function nested(text) {
  const toks = text.match(/\[|\]|\d+/g) || [];
  let i = 0;
  /** @param {number} depth @returns {any[]} */
  const list = (depth) => {
    if (depth > 8) throw new Error("too deep");
    i++;
    const out = [];
    while (i < toks.length && toks[i] !== "]") out.push(toks[i] === "[" ? list(depth + 1) : Number(toks[i++]));
    i++;
    return out;
  };
  if (toks[0] !== "[") return null;
  let arr;
  try {
    arr = list(1);
  } catch {
    return null;
  }
  const shape = [];
  for (let a = arr; Array.isArray(a); a = a[0]) shape.push(a.length);
  const ids = arr.flat(Infinity);
  return shape.every((n) => n > 0) && ids.length === shape.reduce((x, y) => x * y, 1) && ids.every(Number.isInteger) ? { shape, ids } : null;
}

/**
 * A Mesh's repr, the text inside `Mesh(...)` / `AbstractMesh(...)`: "'data': 2, 'model': 4,
 * axis_types=(Explicit, Explicit)", or "axis_sizes=(2, 4), axis_names=('data', 'model'), ...", or
 * "device_ids=array([[0, 1], [2, 3]]), axis_names=(...)".
 * @param {string} inner
 * @returns {PastedMesh | null}
 */
function meshOf(inner) {
  const types = /axis_types\s*=\s*(\([^)]*\))/.exec(inner);
  const axis_types = types ? axisTypes(types[1]) : null;
  const names = /axis_names\s*=\s*(\([^)]*\))/.exec(inner);
  const sizes = /axis_sizes\s*=\s*\(([^)]*)\)/.exec(inner);
  if (names && sizes) {
    const shape = sizes[1].split(",").map((v) => v.trim()).filter(Boolean).map(Number);
    const axis_names = quotedNames(names[1]);
    return shape.length === axis_names.length && shape.every((n) => Number.isInteger(n) && n > 0)
      ? { shape, axis_names, axis_types, device_ids: null }
      : null;
  }
  const ids = /device_ids\s*=\s*(?:array\s*\()?\s*\[/.exec(inner);
  if (names && ids) {
    const open = inner.indexOf("[", ids.index);
    const end = closing(inner, open);
    const arr = end > 0 ? nested(inner.slice(open, end)) : null;
    const axis_names = quotedNames(names[1]);
    return arr && arr.shape.length === axis_names.length ? { shape: arr.shape, axis_names, axis_types, device_ids: arr.ids } : null;
  }
  const pairs = [...inner.replace(/axis_types\s*=\s*\([^)]*\)/, "").matchAll(/(?:'((?:[^'\\]|\\.)*)'|"((?:[^"\\]|\\.)*)")\s*:\s*(\d+)/g)];
  if (!pairs.length) return null;
  return { shape: pairs.map((p) => Number(p[3])), axis_names: pairs.map((p) => p[1] ?? p[2]), axis_types, device_ids: null };
}

/**
 * What a pasted sharding repr says, or null when `text` is not one (a plain spec is not: the server
 * parses those).
 * @param {string} text
 * @returns {Pasted | null}
 */
export function parsePasted(text) {
  if (text.length > 100_000) return null;
  const t = text.trim().replace(/^(jax\.)?(sharding\.)?/, "");
  const memory = /memory_kind\s*=\s*'?([\w-]+)'?/.exec(t);
  const memoryKind = memory ? memory[1] : null;
  if (/^NamedSharding\s*\(/.test(t)) {
    const m = /\bmesh\s*=\s*(?:Abstract)?Mesh\s*\(/.exec(t);
    const end = m ? closing(t, m.index + m[0].length - 1) : -1;
    const mesh = m && end > 0 ? meshOf(t.slice(m.index + m[0].length, end - 1)) : null;
    const spec = argument(t, "spec");
    if (!mesh && !spec) return null;
    return { kind: "named", spec, mesh, device: null, memoryKind };
  }
  if (/^SingleDeviceSharding\s*\(/.test(t)) {
    const id = /device\s*=\s*\w*\(\s*id\s*=\s*(\d+)/.exec(t);
    return id ? { kind: "single", spec: null, mesh: null, device: Number(id[1]), memoryKind } : null;
  }
  if (/^(Abstract)?Mesh\s*\(/.test(t)) {
    const open = t.indexOf("(");
    const end = closing(t, open);
    const mesh = end > 0 ? meshOf(t.slice(open + 1, end - 1)) : null;
    return mesh ? { kind: "mesh", spec: null, mesh, device: null, memoryKind: null } : null;
  }
  return null;
}
