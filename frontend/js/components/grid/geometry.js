// The layout grid's geometry, with no DOM: which array dimensions form the grid, where every tile sits
// (small multiples for the other dimensions), the picture's natural size and how it fits its room, the
// view (zoom and pan) and what is in it, how big labels and outlines are on screen, rulers' tick steps,
// and what the hover card says about a tile. The painters (svg.js, canvas.js) and the interactions
// (interact.js) all read the same geometry, so hit-testing, hover, highlight, keyboard and zoom agree
// whichever painter drew the tiles.

import { compactIds, fmtBytes, fmtIndex, plainIds } from "../../lib/format.js";

export const FONT = "ui-monospace, SFMono-Regular, Menlo, Consolas, monospace";
/** Layouts with more tiles than this are drawn on a canvas. */
export const CANVAS_ABOVE = 1024;
export const MAX_LABELS = 900; // labels on screen at once
export const CHAR = 0.62; // advance of a monospace character per px of font size
export const MIN_FONT = 9;
export const MAX_FONT = 13;
export const TICK_FONT = 10;
export const LEFT_RULER = 46; // px: room for row indices up to 6 digits
export const TOP_RULER = 18;

/** @typedef {import("../../model/layout.js").Layout} Layout */
/** @typedef {{x: number, y: number, w: number, h: number}} ViewBox in natural units */

/**
 * Which two array dimensions form the grid (the last two unless `wanted` names two others).
 * @param {number} rank
 * @param {number[] | null} wanted
 * @returns {number[]}
 */
export function gridDims(rank, wanted) {
  if (rank <= 2) return [...Array(rank).keys()];
  if (wanted && wanted.length === 2 && wanted.every((d) => d >= 0 && d < rank) && wanted[0] !== wanted[1]) {
    return wanted;
  }
  return [rank - 2, rank - 1];
}

/**
 * The outline (screen px) between tiles whose smaller side is `side` px on screen: it never covers
 * a tile (a twelfth of the side at most, half a pixel for small tiles, none under 5 px).
 * @param {number} side
 * @returns {number}
 */
export function tileGap(side) {
  if (side >= 12) return Math.min(2, side / 12);
  return side >= 5 ? 0.5 : 0;
}

/**
 * A label of at most `chars` characters: the full id list, else ranges, else bare ranges, else elided.
 * @param {string} platform
 * @param {number[]} ids
 * @param {number} chars
 */
export function fitLabel(platform, ids, chars) {
  const full = `${platform} ${plainIds(ids)}`;
  if (full.length <= chars) return full;
  const compact = `${platform} ${compactIds(ids)}`;
  if (compact.length <= chars) return compact;
  const bare = compactIds(ids);
  if (bare.length <= chars) return bare;
  return chars >= 3 ? `${bare.slice(0, chars - 1)}…` : "";
}

/** The smallest power of two at least `x` (1 for x <= 1). @param {number} x */
export const pow2 = (x) => (x <= 1 ? 1 : 2 ** Math.ceil(Math.log2(x)));

/**
 * @typedef {{key: number[][], title: string, tiles: number[], cell: Int32Array}} Block one small
 *   multiple: the range of the other dimensions it shows, its tiles and the tile of each cell
 *   (row-major, -1 for none)
 * @typedef {{rank: number, shape: number[], shard: number[], a: number, b: number | null,
 *   others: number[], rows: number, cols: number, blocks: Block[], where: Int32Array,
 *   indexOf: (k: number) => number[][]}} GridModel
 *   where: per tile its block, row and column (3 entries each)
 */

/**
 * Where every tile of `layout` sits: the grid's rows and columns (blocks of the two grid
 * dimensions), and one block per distinct range of the other dimensions.
 * @param {Layout} layout
 * @param {number[] | null} wanted the two grid dimensions (rank > 2)
 * @returns {GridModel}
 */
export function gridModel(layout, wanted) {
  const rank = layout.rank;
  const shape = rank === 0 ? [1] : layout.shape;
  const shard = rank === 0 ? [1] : layout.shardShape;
  const dims = gridDims(shape.length, wanted);
  const others = [...shape.keys()].filter((d) => !dims.includes(d));
  const a = dims[0];
  const b = dims.length === 2 ? dims[1] : null;
  const count = (/** @type {number} */ d) => Math.max(1, Math.ceil(shape[d] / Math.max(1, shard[d])));
  const rows = b === null ? 1 : count(a);
  const cols = b === null ? count(a) : count(b);
  const indexOf = (/** @type {number} */ k) => (rank === 0 ? [[0, 1]] : layout.tiles[k].index);
  /** @type {Map<string, {key: number[][], tiles: number[]}>} */
  const groups = new Map();
  layout.tiles.forEach((_, k) => {
    const key = others.map((d) => indexOf(k)[d]);
    const name = key.map((r) => r[0]).join(",");
    let g = groups.get(name);
    if (!g) groups.set(name, (g = { key, tiles: [] }));
    g.tiles.push(k);
  });
  const sorted = [...groups.values()].sort((p, q) => {
    for (let i = 0; i < p.key.length; i++) if (p.key[i][0] !== q.key[i][0]) return p.key[i][0] - q.key[i][0];
    return 0;
  });
  const where = new Int32Array(layout.tiles.length * 3).fill(-1);
  const cellOf = (/** @type {number} */ pos, /** @type {number} */ d, /** @type {number} */ n) =>
    Math.min(n - 1, Math.floor(pos / Math.max(1, shard[d])));
  const blocks = sorted.map((g, bi) => {
    const cell = new Int32Array(rows * cols).fill(-1);
    for (const k of g.tiles) {
      const index = indexOf(k);
      const r = b === null ? 0 : cellOf(index[a][0], a, rows);
      const c = b === null ? cellOf(index[a][0], a, cols) : cellOf(index[b][0], b, cols);
      cell[r * cols + c] = k;
      where.set([bi, r, c], k * 3);
    }
    const title = others.map((d, i) => `dim ${d} [${g.key[i][0]}:${g.key[i][1]}]`).join(", ");
    return { key: g.key, title, tiles: g.tiles, cell };
  });
  return { rank, shape, shard, a, b, others, rows, cols, blocks, where, indexOf };
}

/**
 * The picture's natural size in px: its aspect follows the array's within bounds, rows get a
 * readable height when there are few enough of them, small multiples shrink.
 * @param {GridModel} m
 * @returns {{w: number, h: number}}
 */
export function naturalSize(m) {
  const n = m.blocks.length;
  const perRow = Math.ceil(Math.sqrt(n));
  const maxW = n > 1 ? Math.max(220, 880 / perRow) : 880;
  const w = Math.max(Math.min(maxW, m.cols * 140), Math.min(maxW, 480));
  if (m.b === null) return { w, h: Math.min(64, Math.max(40, w / 8)) };
  const aspect = m.shape[m.a] / m.shape[m.b];
  const maxH = maxW * 0.8;
  const h = Math.max(60, Math.min(maxH, w * aspect), Math.min(maxH, m.rows * 24));
  // as wide as the array's aspect asks once the height is set (few columns, many rows)
  return { w: Math.max(w, Math.min(maxW, h / aspect)), h };
}

/**
 * Everything fixed about one grid: its model, natural size, cell size, the ruler and band-list room,
 * and whether thin rows get a band list beside them (one tile per row).
 * @typedef {{m: GridModel, nat: {w: number, h: number}, cw: number, ch: number, leftW: number,
 *   banded: boolean, labelChars: number}} Geometry
 */

/**
 * The geometry of `layout`'s grid.
 * @param {Layout} layout
 * @param {number[] | null} wanted
 * @returns {Geometry}
 */
export function geometry(layout, wanted) {
  const m = gridModel(layout, wanted);
  const nat = naturalSize(m);
  const banded = m.b !== null && m.cols === 1 && m.rows > 1;
  // the band list's width: its longest label, from up to 256 rows spread over the grid
  let labelChars = 4;
  if (banded) {
    const tiles = layout.tiles;
    const every = Math.max(1, Math.floor(tiles.length / 256));
    for (let k = 0; k < tiles.length; k += every) labelChars = Math.max(labelChars, layout.platform.length + 1 + compactIds(tiles[k].ids).length);
  }
  return { m, nat, cw: nat.w / m.cols, ch: nat.h / m.rows, leftW: m.b === null ? 0 : LEFT_RULER, banded, labelChars };
}

/**
 * How the picture fits `width` px of room (and the height limit): blocks per row, the band list's
 * width, the scale, and each block's plot size in px.
 * @param {Geometry} g
 * @param {number} blocks
 * @param {number} width
 * @param {number | undefined} maxHeight
 * @returns {{perRow: number, bandW: number, fit: number, pw: number, ph: number}}
 */
export function fitRoom(g, blocks, width, maxHeight) {
  const { nat, leftW, banded, m } = g;
  const avail = width > 0 ? width : nat.w + leftW;
  const perRow = blocks > 1 ? Math.max(1, Math.min(Math.ceil(Math.sqrt(blocks)), Math.floor(avail / (nat.w * 0.5 + leftW + 24)))) : 1;
  const room = avail / perRow - (blocks > 1 ? 16 : 0);
  const tall = maxHeight ? maxHeight / nat.h : 1;
  // the band list takes what its longest label needs, at most a third of the room
  let bandW = banded ? Math.min(Math.ceil(g.labelChars * 11 * CHAR) + 14, Math.max(60, room * 0.34), 220) : 0;
  let fit = Math.min(1, Math.max(0.05, (room - leftW - bandW) / nat.w), tall);
  // no band list when the rows are tall enough for labels inside them
  if (banded && (nat.h * fit) / m.rows >= MIN_FONT + 4) {
    bandW = 0;
    fit = Math.min(1, Math.max(0.05, (room - leftW) / nat.w), tall);
  }
  return { perRow, bandW, fit, pw: Math.max(1, Math.round(nat.w * fit)), ph: Math.max(1, Math.round(nat.h * fit)) };
}

/** How far in the view may zoom: 64×, or until the smallest tile is 30 px. @param {Geometry} g @param {number} fit */
export function maxZoom(g, fit) {
  return Math.max(64, 30 / (Math.min(g.cw, g.ch) * fit));
}

/**
 * `v` kept inside the picture and within the zoom limits.
 * @param {Geometry} g
 * @param {ViewBox} v
 * @param {number} fit
 * @returns {ViewBox}
 */
export function clampView(g, v, fit) {
  const { nat } = g;
  const w = Math.min(nat.w, Math.max(nat.w / maxZoom(g, fit), v.w));
  const h = (w / nat.w) * nat.h;
  return { x: Math.min(Math.max(0, v.x), nat.w - w), y: Math.min(Math.max(0, v.y), nat.h - h), w, h };
}

/**
 * The rows and columns in view.
 * @param {Geometry} g
 * @param {ViewBox} view
 * @returns {{r0: number, r1: number, c0: number, c1: number}}
 */
export function inView(g, view) {
  const { m, cw, ch } = g;
  return {
    r0: Math.max(0, Math.floor(view.y / ch)),
    r1: Math.min(m.rows - 1, Math.ceil((view.y + view.h) / ch) - 1),
    c0: Math.max(0, Math.floor(view.x / cw)),
    c1: Math.min(m.cols - 1, Math.ceil((view.x + view.w) / cw) - 1),
  };
}

/**
 * How device ids fit a tile `sw` × `sh` px on screen: the font size, and whether the label reads
 * across (flat), turned (tall narrow tiles), or not at all.
 * @param {number} sw
 * @param {number} sh
 * @param {number} [minFont]
 * @returns {{font: number, flat: boolean, turned: boolean}}
 */
export function labelFit(sw, sh, minFont = MIN_FONT) {
  const font = Math.max(minFont, Math.min(MAX_FONT, sh * 0.45, sw * 0.3));
  const flat = sh >= font + 3 && sw >= 3 * font * CHAR + 4;
  const turned = !flat && sw >= font + 3 && sh >= 3 * font * CHAR + 4;
  return { font, flat, turned };
}

/**
 * A ruler's tick step in blocks: as dense as its numbers allow.
 * @param {GridModel} m
 * @param {"x" | "y"} axis
 * @param {number} spacing px between block boundaries
 * @param {number} dim the array dimension
 */
export function tickStep(m, axis, spacing, dim) {
  const widest = String(m.shape[dim]).length * TICK_FONT * CHAR + 8;
  return pow2((axis === "x" ? widest : TICK_FONT + 5) / spacing);
}

/**
 * The hover card's lines for a tile: its index ranges, shard and bytes, and where each holder sits
 * (host, slice, coordinates, replica id, mesh position).
 * @param {Layout} layout
 * @param {GridModel} m
 * @returns {(k: number) => string[]}
 */
export function tileCard(layout, m) {
  /** @type {Map<number, string> | null} device id -> its mesh position "x=1, y=0" (made on first hover) */
  let meshPos = null;
  const position = (/** @type {number} */ id) => {
    if (!meshPos) {
      const at = new Map();
      const { shape, axis_names: names } = layout.mesh;
      layout.meshIds.forEach((d, i) => {
        let rem = i;
        const parts = [];
        for (let a = shape.length - 1; a >= 0; a--) {
          parts.unshift(`${names[a]}=${rem % shape[a]}`);
          rem = Math.floor(rem / shape[a]);
        }
        at.set(d, parts.join(", "));
      });
      meshPos = at;
    }
    return meshPos.get(id);
  };
  const platform = layout.platform;
  return (k) => {
    const t = layout.tiles[k];
    const lines = [
      `${fmtIndex(m.indexOf(k))}  shard ${JSON.stringify(layout.shardShape)}  ${fmtBytes(layout.json.bytes_per_device)} per device`,
      `${platform} ${compactIds(t.ids)} (${t.ids.length} device${t.ids.length > 1 ? "s" : ""})`,
    ];
    for (const id of t.ids.slice(0, 12)) {
      const d = layout.device(id);
      if (!d) continue;
      const where = d.coords ? ` coords (${d.coords.join(",")}) core ${d.core_on_chip}` : "";
      const slice = d.slice_index !== undefined && d.slice_index !== null ? ` slice ${d.slice_index}` : "";
      const pos = position(id);
      lines.push(`  ${platform} ${id}: host ${d.process_index}${slice}${where}, replica ${t.replicas.get(id)}${pos ? `, mesh (${pos})` : ""}`);
    }
    if (t.ids.length > 12) lines.push(`  … and ${t.ids.length - 12} more`);
    return lines;
  };
}
