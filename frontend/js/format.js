// Small pure formatting helpers shared by every view.

/**
 * Device ids as compact ranges: [0,1,2,3,8,9,10,11] -> "0-3,8-11" (runs of 3+ become ranges).
 * @param {number[]} ids
 * @returns {string}
 */
export function compactIds(ids) {
  const sorted = [...ids].sort((a, b) => a - b);
  const out = [];
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

/** Device ids as visualize_sharding prints them: "0,1,2,3". @param {number[]} ids */
export function plainIds(ids) {
  return [...ids].sort((a, b) => a - b).join(",");
}

/** @param {number} n bytes */
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

/** Index bounds as a NumPy slice: [[0,4],[8,16]] -> "[0:4, 8:16]". @param {number[][]} index */
export function fmtIndex(index) {
  return `[${index.map(([a, b]) => `${a}:${b}`).join(", ")}]`;
}

/**
 * A stable colour per device id (golden-angle hues), so a device keeps its colour across views.
 * @param {number} id
 * @param {boolean} dark
 */
export function deviceColour(id, dark) {
  const hue = Math.round((id * 137.508) % 360);
  const sat = 55 + ((id * 7) % 3) * 10;
  const light = dark ? 34 + ((id * 3) % 3) * 6 : 72 + ((id * 5) % 3) * 6;
  return `hsl(${hue}, ${sat}%, ${light}%)`;
}
