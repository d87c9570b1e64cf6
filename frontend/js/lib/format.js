// Small pure formatters (device ids as compact ranges, bytes, index ranges, seconds, mesh axes) and
// the two parsers of what people type in the controls and URLs (dims "2x4", groups "0,4;1,5").

/**
 * Device ids as compact ranges: [0,1,2,3,8,9,10,11] -> "0-3,8-11" (runs of 3+ become ranges).
 * @param {number[]} ids
 * @returns {string}
 */
export function compactIds(ids) {
  const sorted = [...ids].sort((a, b) => a - b);
  /** @type {string[]} */
  const out = [];
  /** @type {number[]} */
  let run = [];
  const flush = () => {
    if (run.length >= 3) out.push(`${run[0]}-${run[run.length - 1]}`);
    else out.push(...run.map(String));
  };
  for (const i of sorted) {
    if (run.length && i === run[run.length - 1] + 1) run.push(i);
    else {
      flush();
      run = [i];
    }
  }
  flush();
  return out.join(",");
}

/** Device ids as visualize_sharding prints them: "0,1,2,3". @param {number[]} ids @returns {string} */
export function plainIds(ids) {
  return [...ids].sort((a, b) => a - b).join(",");
}

/**
 * Device ids in their own order, runs of 3+ ascending ids as ranges (what parseIds reads back):
 * [0,1,2,3,5,4] -> "0-3,5,4".
 * @param {number[]} ids
 * @returns {string}
 */
export function orderedIds(ids) {
  /** @type {string[]} */
  const out = [];
  for (let i = 0; i < ids.length; ) {
    let j = i;
    while (j + 1 < ids.length && ids[j + 1] === ids[j] + 1) j++;
    if (j - i >= 2) out.push(`${ids[i]}-${ids[j]}`);
    else for (let k = i; k <= j; k++) out.push(String(ids[k]));
    i = j + 1;
  }
  return out.join(",");
}

/** A device group as the tables show it: "{0,4}", or "{0-7}" past 8 ids. @param {number[]} g @returns {string} */
export function groupText(g) {
  return `{${g.length > 8 ? compactIds(g) : g.join(",")}}`;
}

/** @param {number} n bytes @returns {string} */
export function fmtBytes(n) {
  const units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
  let v = n;
  let u = 0;
  while (v >= 1024 && u < units.length - 1) {
    v /= 1024;
    u += 1;
  }
  return u === 0 ? `${v} B` : `${v.toFixed(v < 10 ? 2 : 1)} ${units[u]}`;
}

/** Index bounds as a NumPy slice: [[0,4],[8,16]] -> "[0:4, 8:16]". @param {number[][]} index @returns {string} */
export function fmtIndex(index) {
  return `[${index.map(([a, b]) => `${a}:${b}`).join(", ")}]`;
}

/**
 * A positive number to three significant digits, without an exponent or trailing zeros after a point:
 * 279.6 -> "280", 1.4 -> "1.4", 93.24 -> "93.2", 100 -> "100".
 * @param {number} x
 * @returns {string}
 */
export function threeDigits(x) {
  return String(Number(x.toPrecision(3)));
}

/**
 * Seconds with the unit that reads: "280 µs", "1.4 ms", "2.1 s"; "—" for none. The value is rounded to three
 * digits before the unit is chosen (999.96 µs reads "1 ms"); sharding_core/units.py's fmt_seconds is the twin.
 * @param {number | null | undefined} s
 * @returns {string}
 */
export function fmtSeconds(s) {
  if (s === null || s === undefined || Number.isNaN(s)) return "—";
  if (s === 0) return "0 s";
  const rounded = Number(s.toPrecision(3));
  for (const [unit, scale] of /** @type {[string, number][]} */ ([["s", 1], ["ms", 1e-3], ["µs", 1e-6], ["ns", 1e-9]])) {
    if (rounded >= scale) return `${threeDigits(rounded / scale)} ${unit}`;
  }
  return `${s.toExponential(2)} s`;
}

/** @param {number} ms @returns {string} */
export function fmtMs(ms) {
  return ms < 10 ? `${ms.toFixed(1)} ms` : `${ms.toFixed(0)} ms`;
}

/** A count with an SI suffix: 1.50 G, 12.0 k; "—" when there is none. @param {number | null | undefined} n */
export function fmtCount(n) {
  if (n === null || n === undefined) return "—";
  if (n >= 1e9) return `${(n / 1e9).toFixed(2)} G`;
  if (n >= 1e6) return `${(n / 1e6).toFixed(2)} M`;
  if (n >= 1e3) return `${(n / 1e3).toFixed(1)} k`;
  return String(n);
}

/**
 * A moment in this browser's time zone, "2026-11-28 05:10:42". Written out by hand: a page's first
 * toLocaleString loads the time-zone and locale data (0.05–0.25 s on a busy machine), which would delay what
 * is drawn with it.
 * @param {number} ms since the epoch
 */
export function fmtDateTime(ms) {
  const d = new Date(ms);
  const two = (/** @type {number} */ n) => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${two(d.getMonth() + 1)}-${two(d.getDate())} ${two(d.getHours())}:${two(d.getMinutes())}:${two(d.getSeconds())}`;
}

/** An integer with thousands separators, "1,234,567" (toLocaleString("en-US")'s, without loading its data). @param {number} n */
export function thousands(n) {
  return String(n).replace(/\B(?=(\d{3})+(?!\d))/g, ",");
}

/** A mesh's axes with their sizes: "x(2) × y(4)". @param {{shape: number[], axis_names: string[]}} mesh */
export function meshAxes(mesh) {
  return mesh.axis_names.map((n, i) => `${n}(${mesh.shape[i]})`).join(" × ");
}

/** "4x4" or "4,4" -> [4, 4]; null unless positive integers. @param {string} text @returns {number[] | null} */
export function parseDims(text) {
  const parts = text.split(/[x,\s]+/i).filter(Boolean);
  if (!parts.length) return null;
  const nums = parts.map((p) => (/^\d{1,12}$/.test(p) ? Number(p) : NaN));
  return nums.every((n) => Number.isInteger(n) && n >= 1) ? nums : null;
}

/** "0,4;1,5" -> [[0, 4], [1, 5]]; null unless every id is a non-negative integer. @param {string} text */
export function parseGroups(text) {
  if (!text) return null;
  const groups = text.split(";").map((g) => g.split(",").map((v) => (/^\d{1,9}$/.test(v.trim()) ? Number(v) : NaN)));
  return groups.every((g) => g.length && g.every(Number.isInteger)) ? groups : null;
}

/** [[0, 4], [1, 5]] -> "0,4;1,5" (what parseGroups reads). @param {number[][]} groups @returns {string} */
export function groupsQuery(groups) {
  return groups.map((g) => g.join(",")).join(";");
}

/**
 * Text Plotly shows as it is: Plotly reads labels as a small HTML dialect (<a href>, <b>, <br>), so a
 * label that came from data (a snapshot's platform, a name) has its markup characters escaped.
 * @param {string} text
 */
export function plotlyText(text) {
  return String(text).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
}

/**
 * Device ids as people write them: "0,1,2,3,6,7,4,5", "0-3 8-11", "[0, 2, 1, 3]"; null unless
 * non-negative integers (at most `max` of them, ranges ascending).
 * @param {string} text
 * @param {number} [max]
 * @returns {number[] | null}
 */
export function parseIds(text, max = 16384) {
  const parts = text.replace(/[[\]()]/g, " ").split(/[\s,;]+/).filter(Boolean);
  if (!parts.length) return null;
  /** @type {number[]} */
  const out = [];
  for (const p of parts) {
    const m = /^(\d{1,9})(?:-(\d{1,9}))?$/.exec(p);
    if (!m) return null;
    const a = Number(m[1]);
    const b = m[2] === undefined ? a : Number(m[2]);
    if (b < a || out.length + (b - a + 1) > max) return null;
    for (let i = a; i <= b; i++) out.push(i);
  }
  return out;
}
