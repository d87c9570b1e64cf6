// components/: pieces of UI that draw into a container element they are handed, from data and
// callbacks they are given — no page ids, no page state — so a notebook widget can mount them in an
// output cell. This module: the layout grid, visualize_array_sharding for any rank and mesh size.
//
// Tiles are SVG up to CANVAS_ABOVE tiles and drawn on a <canvas> past it; both share one geometry,
// so hit-testing, the hover card, highlighting, keyboard focus, zoom and pan are the same code.
// Outlines between tiles are sized by a tile's smaller side on screen and dropped when tiles are
// tiny, so a tile is never covered by its own outline. Rulers sit outside the zoomed picture (they
// stay put when zooming) and tick row and column indices for what is in view. Device ids go inside
// a tile when they fit, turned when the tile is tall and narrow, and for thin rows in a band list
// beside the grid. Downloads are titled with what they show.

import { el, svgEl } from "../lib/dom.js";
import { compactIds, fmtBytes, fmtIndex, meshAxes, plainIds } from "../lib/format.js";
import { hideCard, showCard } from "../lib/hovercard.js";

const FONT = "ui-monospace, SFMono-Regular, Menlo, Consolas, monospace";
/** Layouts with more tiles than this are drawn on a canvas. */
export const CANVAS_ABOVE = 1024;
const MAX_LABELS = 900; // labels on screen at once
const CHAR = 0.62; // advance of a monospace character per px of font size
const MIN_FONT = 9;
const MAX_FONT = 13;
const TICK_FONT = 10;
const LEFT_RULER = 46; // px: room for row indices up to 6 digits
const TOP_RULER = 18;

/** @typedef {import("../model/layout.js").Layout} Layout */
/** @typedef {{x: number, y: number, w: number, h: number}} ViewBox */

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

/** @type {Map<string, number>} */
const packed = new Map();
/** @type {CanvasRenderingContext2D | null} */
let probe = null;

/**
 * A CSS colour as one 32-bit ImageData pixel (bytes R, G, B, A: little-endian, as every browser
 * platform is), `alpha` of it over `under` (a packed colour) when given. The layout model's
 * hsl() colours are converted here; anything else the browser resolves once.
 * @param {string} css
 * @returns {number}
 */
function pack(css) {
  let v = packed.get(css);
  if (v !== undefined) return v;
  let rgb;
  const m = /^hsl\(\s*([\d.]+)\s*,\s*([\d.]+)%\s*,\s*([\d.]+)%\s*\)$/.exec(css);
  if (m) {
    const [h, sat, l] = [Number(m[1]), Number(m[2]) / 100, Number(m[3]) / 100];
    const a = sat * Math.min(l, 1 - l);
    const f = (/** @type {number} */ n) => {
      const k = (n + h / 30) % 12;
      return Math.round((l - a * Math.max(-1, Math.min(k - 3, 9 - k, 1))) * 255);
    };
    rgb = [f(0), f(8), f(4)];
  } else {
    probe = probe || /** @type {CanvasRenderingContext2D} */ (document.createElement("canvas").getContext("2d"));
    probe.fillStyle = "#000000";
    probe.fillStyle = css;
    const hex = /^#([0-9a-f]{2})([0-9a-f]{2})([0-9a-f]{2})$/i.exec(String(probe.fillStyle));
    rgb = hex ? [1, 2, 3].map((i) => parseInt(hex[i], 16)) : [128, 128, 128];
  }
  v = ((255 << 24) | (rgb[2] << 16) | (rgb[1] << 8) | rgb[0]) >>> 0;
  packed.set(css, v);
  return v;
}

/** `colour` at opacity `alpha` over `under` (both packed). @param {number} colour @param {number} under @param {number} alpha */
function blend(colour, under, alpha) {
  let out = 255 << 24;
  for (let shift = 0; shift < 24; shift += 8) {
    const c = (colour >>> shift) & 255;
    const u = (under >>> shift) & 255;
    out |= Math.round(alpha * c + (1 - alpha) * u) << shift;
  }
  return out >>> 0;
}

/** The smallest power of two at least `x` (1 for x <= 1). @param {number} x */
const pow2 = (x) => (x <= 1 ? 1 : 2 ** Math.ceil(Math.log2(x)));

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
function naturalSize(m) {
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

/** XML text. @param {string} s */
const xml = (s) => s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");

/**
 * @typedef {object} GridView
 * @property {SVGSVGElement} svg the first block's tiles (SVG renderer) or its overlay of labels (canvas)
 * @property {HTMLElement} element the grid's root element
 * @property {"svg" | "canvas"} renderer
 * @property {(ids: Set<number> | null) => void} highlight the tiles holding any of `ids` (null clears)
 * @property {(k: number) => void} zoomBy scale the view by `k` around its centre (< 1 zooms in)
 * @property {() => void} resetView
 * @property {() => string} svgText the whole picture as a standalone SVG document, titled, labelled at full size
 * @property {(scale?: number) => Promise<Blob>} pngBlob the same picture as a PNG
 * @property {(k: number) => {x: number, y: number} | null} tileCenter where tile `k` is on screen
 *   (viewport px, its first block), null when out of view
 * @property {number} width natural size of the exported picture in px
 * @property {number} height
 */

/**
 * Draws `layout` into `container` (replacing what is there).
 * @param {HTMLElement} container
 * @param {Layout} layout
 * @param {{dims?: number[] | null, dark: boolean, interactive?: boolean, faded?: Set<number>,
 *   onTileClick?: (ids: number[] | null) => void, renderer?: "svg" | "canvas", maxHeight?: number}} opts
 *   dims: the two array dimensions the grid shows (rank > 2); interactive (default true): wheel zoom
 *   and drag pan; faded: tiles held only by these devices are faded; onTileClick: a tile's device
 *   ids when one is clicked (or chosen with Enter), null for a click beside the tiles; renderer:
 *   force one (default: SVG up to CANVAS_ABOVE tiles); maxHeight: the picture's height limit in px
 * @returns {GridView}
 */
export function layoutGrid(container, layout, opts) {
  const tStart = performance.now();
  hideCard(); // a card about the picture being replaced would be stale
  const m = gridModel(layout, opts.dims ?? null);
  const tiles = layout.tiles;
  const platform = layout.platform;
  const dark = opts.dark;
  const interactive = opts.interactive !== false;
  const nat = naturalSize(m);
  const cw = nat.w / m.cols;
  const ch = nat.h / m.rows;
  // a canvas for many tiles, and for tiles thinner than a few pixels (snapped to device pixels, no seams)
  const renderer = opts.renderer ?? (tiles.length > CANVAS_ABOVE || Math.min(cw, ch) < 4 ? "canvas" : "svg");
  const colours = tiles.map((t) => layout.colourOf(t.ids[0], dark));
  const packs = renderer === "canvas" ? Uint32Array.from(colours, pack) : new Uint32Array(0);
  const sep = dark ? "#15181d" : "#ffffff";
  const labelFill = dark ? "#f4f4f4" : "#111111";
  const textFill = dark ? "#e6e6e6" : "#1b1f24";
  const faded = new Uint8Array(tiles.length);
  if (opts.faded && opts.faded.size) tiles.forEach((t, k) => (faded[k] = t.ids.every((id) => opts.faded?.has(id)) ? 1 : 0));
  const dimTexts = layout.dims.map((d) => String(d.text));
  // A band list beside the grid names the devices of thin rows (one tile per row).
  const banded = m.b !== null && m.cols === 1 && m.rows > 1;
  const leftW = m.b === null ? 0 : LEFT_RULER;
  // the band list's width: its longest label, from up to 256 rows spread over the grid
  let labelChars = 4;
  if (banded) {
    const every = Math.max(1, Math.floor(tiles.length / 256));
    for (let k = 0; k < tiles.length; k += every) labelChars = Math.max(labelChars, platform.length + 1 + compactIds(tiles[k].ids).length);
  }
  // measured before anything is built: reading the widths of a page that has not changed is free
  const pads = getComputedStyle(container);
  const measured = container.clientWidth - (parseFloat(pads.paddingLeft) || 0) - (parseFloat(pads.paddingRight) || 0);

  // ---- DOM: caption, then one figure per block: rulers, the plot (tiles + overlay), band list
  const root = el("div", "layout-grid");
  root.dataset.renderer = renderer;
  root.dataset.tiles = String(tiles.length);
  const caption = el("p", "grid-dims-caption");
  if (m.rank === 0) caption.textContent = "a scalar: every device holds it";
  else if (m.b === null) caption.textContent = `→ ${dimTexts[m.a]}`;
  else caption.append(el("span", "dim-rows", `↓ rows: ${dimTexts[m.a]}`), el("span", "dim-cols", `→ columns: ${dimTexts[m.b]}`));
  const blocksBox = el("div", "grid-blocks");
  const live = el("div", "sr-only");
  live.setAttribute("aria-live", "polite");
  // read by screen readers, never seen (inline, for hosts without app.css: the notebook widget)
  Object.assign(live.style, { position: "absolute", width: "1px", height: "1px", overflow: "hidden", clipPath: "inset(50%)", whiteSpace: "nowrap" });
  root.append(caption, blocksBox, live);
  container.replaceChildren(root);

  /**
   * @typedef {{block: Block, fig: HTMLElement, frame: HTMLElement, plot: HTMLElement, tilesSvg: SVGSVGElement | null,
   *   tileGroup: SVGGElement | null, tileEls: SVGGElement[], canvas: HTMLCanvasElement | null, overlay: SVGSVGElement,
   *   top: SVGSVGElement, left: SVGSVGElement, band: SVGSVGElement, pw: number, ph: number, image: ImageData | null}} Part
   */
  /** @type {Part[]} */
  const parts = m.blocks.map((block, bi) => {
    const fig = el("figure", "grid-block");
    fig.dataset.block = String(bi);
    if (block.title) fig.appendChild(el("figcaption", "block-title", block.title));
    const frame = el("div", "grid-frame");
    const corner = el("div");
    const top = /** @type {SVGSVGElement} */ (svgEl("svg", { class: "ruler ruler-top", "aria-hidden": "true" }));
    const spacer = el("div");
    const left = /** @type {SVGSVGElement} */ (svgEl("svg", { class: "ruler ruler-left", "aria-hidden": "true" }));
    const plot = el("div", "grid-plot");
    plot.tabIndex = bi === 0 ? 0 : -1;
    plot.setAttribute("role", "application");
    plot.setAttribute("aria-roledescription", "layout grid");
    plot.setAttribute("aria-label", `Layout of ${layout.spec} over ${layout.devicesKey}${block.title ? `, ${block.title}` : ""}: ${m.rows} × ${m.cols} tiles. Arrow keys move between tiles, Enter highlights one, plus and minus zoom.`);
    const band = /** @type {SVGSVGElement} */ (svgEl("svg", { class: "band-list", "aria-hidden": "true" }));
    for (const s of [top, left, band]) s.style.overflow = "visible";
    /** @type {SVGSVGElement | null} */
    let tilesSvg = null;
    /** @type {SVGGElement | null} */
    let tileGroup = null;
    /** @type {SVGGElement[]} */
    const tileEls = [];
    /** @type {HTMLCanvasElement | null} */
    let canvas = null;
    if (renderer === "svg") {
      tilesSvg = /** @type {SVGSVGElement} */ (svgEl("svg", { class: "grid-tiles", xmlns: "http://www.w3.org/2000/svg", preserveAspectRatio: "none" }));
      tilesSvg.setAttribute("role", "img");
      tilesSvg.setAttribute("aria-label", `Layout of ${layout.spec} over ${layout.devicesKey}`);
      svgEl("rect", { x: 0, y: 0, width: nat.w, height: nat.h, fill: sep }, tilesSvg);
      tileGroup = /** @type {SVGGElement} */ (svgEl("g", { class: "tiles", stroke: sep }, tilesSvg));
      for (const k of block.tiles) {
        const r = m.where[k * 3 + 1];
        const c = m.where[k * 3 + 2];
        const g = /** @type {SVGGElement} */ (svgEl("g", { class: faded[k] ? "tile not-held" : "tile", "data-tile": k }, tileGroup));
        svgEl("rect", {
          x: c * cw, y: r * ch, width: cw, height: ch, fill: colours[k],
          "vector-effect": "non-scaling-stroke", "shape-rendering": "crispEdges",
        }, g);
        tileEls.push(g);
      }
    } else {
      canvas = el("canvas", "grid-canvas");
      canvas.setAttribute("role", "img");
      canvas.setAttribute("aria-label", `Layout of ${layout.spec} over ${layout.devicesKey}`);
    }
    const overlay = /** @type {SVGSVGElement} */ (svgEl("svg", { class: "grid-overlay" }));
    plot.append(/** @type {Element} */ (tilesSvg || canvas), overlay);
    frame.append(corner, top, spacer, left, plot, band);
    fig.appendChild(frame);
    blocksBox.appendChild(fig);
    return { block, fig, frame, plot, tilesSvg, tileGroup, tileEls, canvas, overlay, top, left, band, pw: nat.w, ph: nat.h, image: null };
  });

  // ---- sizes: the natural picture, fitted to the container's width and the height limit
  let bandW = 0;
  let fit = 1;
  /** @param {number} width the room for the blocks, px */
  const layoutParts = (width) => {
    const avail = width > 0 ? width : nat.w + leftW;
    const perRow = parts.length > 1 ? Math.max(1, Math.min(Math.ceil(Math.sqrt(parts.length)), Math.floor(avail / (nat.w * 0.5 + leftW + 24)))) : 1;
    const room = avail / perRow - (parts.length > 1 ? 16 : 0);
    // the band list takes what its longest label needs, at most a third of the room
    bandW = banded ? Math.min(Math.ceil(labelChars * 11 * CHAR) + 14, Math.max(60, room * 0.34), 220) : 0;
    fit = Math.min(1, Math.max(0.05, (room - leftW - bandW) / nat.w), opts.maxHeight ? opts.maxHeight / nat.h : 1);
    // no band list when the rows are tall enough for labels inside them
    if (banded && nat.h * fit / m.rows >= MIN_FONT + 4) {
      bandW = 0;
      fit = Math.min(1, Math.max(0.05, (room - leftW) / nat.w), opts.maxHeight ? opts.maxHeight / nat.h : 1);
    }
    const pw = Math.max(1, Math.round(nat.w * fit));
    const ph = Math.max(1, Math.round(nat.h * fit));
    for (const p of parts) {
      p.pw = pw;
      p.ph = ph;
      const f = p.frame.style;
      f.display = "grid";
      f.gridTemplateColumns = `${leftW}px ${pw}px ${bandW}px`;
      f.gridTemplateRows = `${TOP_RULER}px ${ph}px`;
      for (const s of [p.top, p.overlay]) s.setAttribute("width", String(pw));
      p.top.setAttribute("height", String(TOP_RULER));
      p.left.setAttribute("width", String(leftW));
      p.left.setAttribute("height", String(ph));
      p.band.setAttribute("width", String(bandW));
      p.band.setAttribute("height", String(ph));
      p.overlay.setAttribute("height", String(ph));
      Object.assign(p.plot.style, { position: "relative", width: `${pw}px`, height: `${ph}px`, overflow: "hidden" });
      Object.assign(p.overlay.style, { position: "absolute", left: "0", top: "0", pointerEvents: "none" });
      if (p.tilesSvg) {
        p.tilesSvg.setAttribute("width", String(pw));
        p.tilesSvg.setAttribute("height", String(ph));
        p.tilesSvg.style.display = "block";
      }
      if (p.canvas) {
        const dpr = window.devicePixelRatio || 1;
        p.canvas.width = Math.round(pw * dpr);
        p.canvas.height = Math.round(ph * dpr);
        Object.assign(p.canvas.style, { width: `${pw}px`, height: `${ph}px`, display: "block" });
      }
    }
  };

  // ---- the view (natural units, shared by every block) and its limits
  /** @type {ViewBox} */
  let view = { x: 0, y: 0, w: nat.w, h: nat.h };
  const maxZoom = () => Math.max(64, 30 / (Math.min(cw, ch) * fit));
  /** @param {ViewBox} v */
  const clampView = (v) => {
    const w = Math.min(nat.w, Math.max(nat.w / maxZoom(), v.w));
    const h = (w / nat.w) * nat.h;
    return { x: Math.min(Math.max(0, v.x), nat.w - w), y: Math.min(Math.max(0, v.y), nat.h - h), w, h };
  };

  /** @type {Set<number> | null} highlighted tiles */
  let lit = null;
  /** @type {{part: number, r: number, c: number} | null} the keyboard's tile */
  let active = null;

  // ---- drawing
  const draw = () => {
    if (!root.isConnected) return;
    parts.forEach(drawPart);
  };
  let frameRequested = 0;
  const requestDraw = () => {
    if (frameRequested) return;
    frameRequested = requestAnimationFrame(() => {
      frameRequested = 0;
      draw();
    });
  };

  /** @param {Part} p @param {number} pi */
  function drawPart(p, pi) {
    const s = p.pw / view.w;
    const sw = cw * s;
    const sh = ch * s;
    const gap = tileGap(Math.min(sw, sh));
    const r0 = Math.max(0, Math.floor(view.y / ch));
    const r1 = Math.min(m.rows - 1, Math.ceil((view.y + view.h) / ch) - 1);
    const c0 = Math.max(0, Math.floor(view.x / cw));
    const c1 = Math.min(m.cols - 1, Math.ceil((view.x + view.w) / cw) - 1);
    const X = (/** @type {number} */ c) => (c * cw - view.x) * s;
    const Y = (/** @type {number} */ r) => (r * ch - view.y) * s;
    // tiles
    if (p.tilesSvg && p.tileGroup) {
      p.tilesSvg.setAttribute("viewBox", `${view.x} ${view.y} ${view.w} ${view.h}`);
      p.tileGroup.setAttribute("stroke-width", String(gap));
    } else if (p.canvas) {
      const ctx = /** @type {CanvasRenderingContext2D} */ (p.canvas.getContext("2d"));
      const Wd = p.canvas.width;
      const Hd = p.canvas.height;
      const dpr = Wd / p.pw;
      // pixels written directly, each tile's edges snapped to device pixels: every pixel shows one
      // tile's colour, however thin the tiles, and 6,144 tiles cost a few row fills each
      if (!p.image || p.image.width !== Wd || p.image.height !== Hd) p.image = ctx.createImageData(Wd, Hd);
      const px = new Uint32Array(p.image.data.buffer);
      const under = pack(sep);
      px.fill(under);
      const g = Math.round(gap * dpr);
      const edges = (/** @type {number} */ v) => Math.min(Math.max(Math.round(v * dpr), 0), 1e9);
      for (let r = r0; r <= r1; r++) {
        const ya = Math.max(0, edges(Y(r)));
        const yb = Math.min(Hd, edges(Y(r + 1)));
        if (yb <= ya) continue;
        // one scan line of the row's tiles, then copied down the row's other pixel rows
        const top = yb - ya > 3 * g ? ya + g - (g >> 1) : ya;
        const bottom = yb - ya > 3 * g ? yb - (g >> 1) : yb;
        const line = top * Wd;
        let left = Wd;
        let right = 0;
        for (let c = c0; c <= c1; c++) {
          const k = p.block.cell[r * m.cols + c];
          if (k < 0) continue;
          const xa = Math.max(0, edges(X(c)));
          const xb = Math.min(Wd, edges(X(c + 1)));
          if (xb <= xa) continue;
          const wide = xb - xa > 3 * g;
          const alpha = faded[k] ? 0.22 : lit && !lit.has(k) ? 0.25 : 1;
          const colour = alpha === 1 ? packs[k] : blend(packs[k], under, alpha);
          px.fill(colour, line + xa + (wide ? g - (g >> 1) : 0), line + xb - (wide ? g >> 1 : 0));
          left = Math.min(left, xa);
          right = Math.max(right, xb);
        }
        if (right > left) for (let y = top + 1; y < bottom; y++) px.copyWithin(y * Wd + left, line + left, line + right);
      }
      ctx.putImageData(p.image, 0, 0);
      if (lit) {
        ctx.strokeStyle = "#ff9f1a";
        ctx.lineWidth = 3 * dpr;
        for (const k of lit) {
          if (m.where[k * 3] !== pi) continue;
          const r = m.where[k * 3 + 1];
          const c = m.where[k * 3 + 2];
          if (r < r0 || r > r1 || c < c0 || c > c1) continue;
          ctx.strokeRect(edges(X(c)) + 1.5 * dpr, edges(Y(r)) + 1.5 * dpr, Math.max(1, edges(X(c + 1)) - edges(X(c)) - 3 * dpr), Math.max(1, edges(Y(r + 1)) - edges(Y(r)) - 3 * dpr));
        }
      }
    }
    // labels: inside the tiles when they fit, turned in tall narrow tiles, else the band list
    const labels = [];
    const bandLabels = [];
    const visible = (r1 - r0 + 1) * (c1 - c0 + 1);
    const font = Math.max(MIN_FONT, Math.min(MAX_FONT, sh * 0.45, sw * 0.3));
    const flat = sh >= font + 3 && sw >= 3 * font * CHAR + 4;
    const turned = !flat && sw >= font + 3 && sh >= 3 * font * CHAR + 4;
    if ((flat || turned) && visible <= MAX_LABELS) {
      const chars = Math.floor(((flat ? sw : sh) - 6) / (font * CHAR));
      for (let r = r0; r <= r1; r++) {
        for (let c = c0; c <= c1; c++) {
          const k = p.block.cell[r * m.cols + c];
          if (k < 0) continue;
          const text = fitLabel(platform, tiles[k].ids, chars);
          if (!text) continue;
          const x = X(c) + sw / 2;
          const y = Y(r) + sh / 2;
          const t = svgEl("text", {
            x, y, "font-size": font.toFixed(1), "font-family": FONT, fill: labelFill, "text-anchor": "middle",
            "dominant-baseline": "central", class: "tile-label", "data-tile": k,
            ...(turned ? { transform: `rotate(-90 ${x} ${y})` } : {}),
          });
          t.textContent = text;
          labels.push(t);
        }
      }
    } else if (banded && bandW > 0 && !flat) {
      const step = pow2(14 / sh);
      const chars = Math.floor((bandW - 12) / (11 * CHAR));
      for (let r = Math.ceil(r0 / step) * step; r <= r1; r += step) {
        const k = p.block.cell[r * m.cols];
        if (k < 0) continue;
        const y = Y(r) + sh / 2;
        if (y < -2 || y > p.ph + 2) continue;
        bandLabels.push(svgEl("line", { x1: 0, x2: 6, y1: y, y2: y, stroke: textFill, "stroke-opacity": 0.5 }));
        const t = svgEl("text", { x: 9, y, "font-size": 11, "font-family": FONT, fill: textFill, "dominant-baseline": "central", class: "band-label", "data-tile": k });
        t.textContent = fitLabel(platform, tiles[k].ids, chars);
        bandLabels.push(t);
      }
    }
    p.band.replaceChildren(...bandLabels);
    // the keyboard's tile
    if (active && active.part === pi) {
      const { r, c } = active;
      labels.push(svgEl("rect", {
        x: X(c) + 1.5, y: Y(r) + 1.5, width: Math.max(2, sw - 3), height: Math.max(2, sh - 3), fill: "none",
        stroke: "#ff9f1a", "stroke-width": 3, class: "focus-ring",
      }));
    }
    p.overlay.replaceChildren(...labels);
    // rulers: index ticks at the block boundaries in view, as dense as their numbers allow
    drawRuler(p.top, "x", c0, c1 + 1, cw * s, X, m.b === null ? m.a : m.b);
    if (m.b !== null) drawRuler(p.left, "y", r0, r1 + 1, sh, Y, m.a);
    p.plot.dataset.zoom = (nat.w / view.w).toFixed(2);
  }

  /**
   * @param {SVGSVGElement} svg
   * @param {"x" | "y"} axis
   * @param {number} j0 first boundary in view
   * @param {number} j1 last boundary in view
   * @param {number} spacing px between boundaries
   * @param {(j: number) => number} at a boundary's screen position
   * @param {number} dim the array dimension
   */
  function drawRuler(svg, axis, j0, j1, spacing, at, dim) {
    const per = m.shard[dim];
    const widest = String(m.shape[dim]).length * TICK_FONT * CHAR + 8;
    const step = pow2((axis === "x" ? widest : TICK_FONT + 5) / spacing);
    const out = [];
    const len = axis === "x" ? svg.width.baseVal.value : svg.height.baseVal.value;
    for (let j = Math.ceil(j0 / step) * step; j <= j1; j += step) {
      const pos = at(j);
      if (pos < -1.5 || pos > len + 1.5) continue;
      const text = String(Math.min(j * per, m.shape[dim]));
      if (axis === "x") {
        out.push(svgEl("line", { x1: pos, x2: pos, y1: TOP_RULER - 4, y2: TOP_RULER, stroke: textFill, "stroke-opacity": 0.6 }));
        const t = svgEl("text", { x: pos, y: TOP_RULER - 6, "font-size": TICK_FONT, "font-family": FONT, fill: textFill, "text-anchor": "middle", class: "tick" });
        t.textContent = text;
        out.push(t);
      } else {
        out.push(svgEl("line", { x1: LEFT_RULER - 4, x2: LEFT_RULER, y1: pos, y2: pos, stroke: textFill, "stroke-opacity": 0.6 }));
        const t = svgEl("text", { x: LEFT_RULER - 6, y: pos, "font-size": TICK_FONT, "font-family": FONT, fill: textFill, "text-anchor": "end", "dominant-baseline": "central", class: "tick" });
        t.textContent = text;
        out.push(t);
      }
    }
    svg.replaceChildren(...out);
  }

  // ---- hit-testing, hover card, keyboard
  /**
   * The block, row and column under a viewport point, and the tile there (-1: none).
   * @param {Part} p
   * @param {number} clientX
   * @param {number} clientY
   */
  function hit(p, clientX, clientY) {
    const rect = p.plot.getBoundingClientRect();
    const s = rect.width / view.w;
    const x = view.x + (clientX - rect.left) / s;
    const y = view.y + (clientY - rect.top) / s;
    const r = Math.floor(y / ch);
    const c = Math.floor(x / cw);
    if (r < 0 || c < 0 || r >= m.rows || c >= m.cols) return { r, c, k: -1 };
    return { r, c, k: p.block.cell[r * m.cols + c] };
  }

  /** @type {Map<number, string> | null} device id -> its mesh position "x=1, y=0" */
  let meshPos = null;
  const meshPosition = (/** @type {number} */ id) => {
    if (!meshPos) {
      meshPos = new Map();
      const shape = layout.mesh.shape;
      const names = layout.mesh.axis_names;
      layout.meshIds.forEach((d, i) => {
        let rem = i;
        const at = [];
        for (let a = shape.length - 1; a >= 0; a--) {
          at.unshift(`${names[a]}=${rem % shape[a]}`);
          rem = Math.floor(rem / shape[a]);
        }
        /** @type {Map<number, string>} */ (meshPos).set(d, at.join(", "));
      });
    }
    return meshPos.get(id);
  };

  /** The hover card's lines for tile `k`. @param {number} k */
  function describe(k) {
    const t = tiles[k];
    const lines = [
      `${fmtIndex(m.indexOf(k))}  shard ${JSON.stringify(layout.shardShape)}  ${fmtBytes(layout.json.bytes_per_device)} per device`,
      `${platform} ${compactIds(t.ids)} (${t.ids.length} device${t.ids.length > 1 ? "s" : ""})`,
    ];
    for (const id of t.ids.slice(0, 12)) {
      const d = layout.device(id);
      if (!d) continue;
      const where = d.coords ? ` coords (${d.coords.join(",")}) core ${d.core_on_chip}` : "";
      const slice = d.slice_index !== undefined && d.slice_index !== null ? ` slice ${d.slice_index}` : "";
      const pos = meshPosition(id);
      lines.push(`  ${platform} ${id}: host ${d.process_index}${slice}${where}, replica ${t.replicas.get(id)}${pos ? `, mesh (${pos})` : ""}`);
    }
    if (t.ids.length > 12) lines.push(`  … and ${t.ids.length - 12} more`);
    return lines;
  }

  /** Where tile (r, c) of part `pi` is on screen, null when out of view. @param {number} pi @param {number} r @param {number} c */
  function cellCenter(pi, r, c) {
    const p = parts[pi];
    const rect = p.plot.getBoundingClientRect();
    const s = rect.width / view.w;
    const x = ((c + 0.5) * cw - view.x) * s;
    const y = ((r + 0.5) * ch - view.y) * s;
    if (x < 0 || y < 0 || x > rect.width || y > rect.height) return null;
    return { x: rect.left + x, y: rect.top + y };
  }

  /** Makes (r, c) of part `pi` the keyboard's tile: in view, ringed, described. @param {number} pi @param {number} r @param {number} c */
  function setActive(pi, r, c) {
    active = { part: pi, r: Math.max(0, Math.min(m.rows - 1, r)), c: Math.max(0, Math.min(m.cols - 1, c)) };
    const x0 = active.c * cw;
    const y0 = active.r * ch;
    if (x0 < view.x || x0 + cw > view.x + view.w || y0 < view.y || y0 + ch > view.y + view.h) {
      view = clampView({ ...view, x: x0 + cw / 2 - view.w / 2, y: y0 + ch / 2 - view.h / 2 });
    }
    draw();
    const k = parts[pi].block.cell[active.r * m.cols + active.c];
    const at = cellCenter(pi, active.r, active.c);
    if (k >= 0) {
      const lines = describe(k);
      live.textContent = lines.slice(0, 2).join("; ");
      if (at) showCard(lines, at.x, at.y, parts[pi].plot);
    } else {
      live.textContent = "no tile here";
      hideCard();
    }
  }

  let dragged = false;
  parts.forEach((p, pi) => {
    const plot = p.plot;
    plot.addEventListener("mousemove", (e) => {
      const { k } = hit(p, e.clientX, e.clientY);
      if (k >= 0) showCard(describe(k), e.clientX, e.clientY, plot);
      else hideCard();
    });
    plot.addEventListener("mouseleave", hideCard);
    plot.addEventListener("click", (e) => {
      if (dragged) {
        dragged = false;
        return;
      }
      const { k, r, c } = hit(p, e.clientX, e.clientY);
      if (k >= 0) active = { part: pi, r, c };
      opts.onTileClick?.(k >= 0 ? tiles[k].ids : null);
    });
    plot.addEventListener("focus", () => setActive(pi, active?.part === pi ? active.r : 0, active?.part === pi ? active.c : 0));
    plot.addEventListener("blur", () => {
      hideCard();
      requestDraw();
    });
    plot.addEventListener("keydown", (e) => {
      const cur = active && active.part === pi ? active : { part: pi, r: 0, c: 0 };
      const page = Math.max(1, Math.floor(view.h / ch));
      /** @type {Record<string, () => void>} */
      const keys = {
        ArrowRight: () => setActive(pi, cur.r, cur.c + 1),
        ArrowLeft: () => setActive(pi, cur.r, cur.c - 1),
        ArrowDown: () => setActive(pi, cur.r + 1, cur.c),
        ArrowUp: () => setActive(pi, cur.r - 1, cur.c),
        PageDown: () => setActive(pi, cur.r + page, cur.c),
        PageUp: () => setActive(pi, cur.r - page, cur.c),
        Home: () => setActive(pi, cur.r, 0),
        End: () => setActive(pi, cur.r, m.cols - 1),
        Enter: () => {
          const k = p.block.cell[cur.r * m.cols + cur.c];
          opts.onTileClick?.(k >= 0 ? tiles[k].ids : null);
        },
        "+": () => zoomAround(0.8, cur),
        "=": () => zoomAround(0.8, cur),
        "-": () => zoomAround(1.25, cur),
        "0": () => api.resetView(),
      };
      keys[" "] = keys.Enter;
      const fn = keys[e.key];
      if (!fn || e.altKey || e.ctrlKey || e.metaKey) return;
      if (!interactive && ["+", "=", "-", "0"].includes(e.key)) return;
      e.preventDefault();
      fn();
    });
    if (!interactive) return;
    plot.addEventListener(
      "wheel",
      (e) => {
        e.preventDefault();
        const rect = plot.getBoundingClientRect();
        zoom(e.deltaY < 0 ? 0.8 : 1.25, (e.clientX - rect.left) / rect.width, (e.clientY - rect.top) / rect.height);
      },
      { passive: false },
    );
    /** @type {{x: number, y: number, view: ViewBox, moved: boolean, id: number} | null} */
    let drag = null;
    plot.addEventListener("pointerdown", (e) => {
      if (e.button === 0) drag = { x: e.clientX, y: e.clientY, view: { ...view }, moved: false, id: e.pointerId };
    });
    plot.addEventListener("pointermove", (e) => {
      if (!drag) return;
      if (!drag.moved && Math.abs(e.clientX - drag.x) + Math.abs(e.clientY - drag.y) > 4) {
        drag.moved = true;
        plot.setPointerCapture(drag.id);
        plot.classList.add("dragging");
      }
      if (!drag.moved) return;
      const s = p.pw / view.w;
      view = clampView({ ...view, x: drag.view.x - (e.clientX - drag.x) / s, y: drag.view.y - (e.clientY - drag.y) / s });
      requestDraw();
    });
    const end = () => {
      if (drag && drag.moved) dragged = true;
      drag = null;
      plot.classList.remove("dragging");
    };
    plot.addEventListener("pointerup", end);
    plot.addEventListener("pointercancel", end);
  });

  /** Scales the view by `k` around the fraction (fx, fy) of the plot. @param {number} k @param {number} fx @param {number} fy */
  function zoom(k, fx, fy) {
    const w = Math.min(nat.w, Math.max(nat.w / maxZoom(), view.w * k));
    const h = (w / nat.w) * nat.h;
    view = clampView({ x: view.x + (view.w - w) * fx, y: view.y + (view.h - h) * fy, w, h });
    requestDraw();
  }

  /** Zooms keeping the keyboard's tile in place. @param {number} k @param {{r: number, c: number}} at */
  function zoomAround(k, at) {
    zoom(k, Math.min(1, Math.max(0, ((at.c + 0.5) * cw - view.x) / view.w)), Math.min(1, Math.max(0, ((at.r + 0.5) * ch - view.y) / view.h)));
  }

  const tBuilt = performance.now();
  performance.measure("grid-build", { start: tStart, end: tBuilt });
  layoutParts(measured);
  draw();
  performance.measure("grid-draw", { start: tBuilt, end: performance.now() });
  let lastWidth = measured;
  const resized = new ResizeObserver((entries) => {
    if (!root.isConnected) {
      resized.disconnect(); // replaced by another grid: let this one go
      return;
    }
    const w = Math.round(entries[0].contentRect.width);
    if (Math.abs(w - lastWidth) < 2 || !w) return;
    lastWidth = w;
    layoutParts(w);
    view = clampView(view);
    draw();
  });
  resized.observe(blocksBox);

  // ---- the exported picture: titled, rulers ticked, labels at full size
  const exportLayout = () => {
    const pad = 12;
    const head = 58;
    const perRow = Math.ceil(Math.sqrt(parts.length));
    const gW = banded && nat.h / m.rows < MIN_FONT + 4 ? Math.min(Math.ceil(labelChars * 11 * CHAR) + 14, 220) : 0;
    const titleH = m.others.length ? 18 : 0;
    const blockW = leftW + nat.w + gW + 16;
    const blockH = titleH + TOP_RULER + nat.h + 16;
    const width = Math.ceil(pad * 2 + perRow * blockW);
    const height = Math.ceil(pad + head + Math.ceil(parts.length / perRow) * blockH);
    return { pad, head, perRow, gW, titleH, blockW, blockH, width, height };
  };

  const api = {
    svg: /** @type {SVGSVGElement} */ (parts[0].tilesSvg || parts[0].overlay),
    element: root,
    renderer: /** @type {"svg" | "canvas"} */ (renderer),
    get width() {
      return exportLayout().width;
    },
    get height() {
      return exportLayout().height;
    },
    /** @param {Set<number> | null} ids */
    highlight(ids) {
      lit = ids === null ? null : new Set(tiles.map((_, k) => k).filter((k) => tiles[k].ids.some((i) => ids.has(i))));
      for (const p of parts) {
        for (const g of p.tileEls) {
          const k = Number(g.getAttribute("data-tile"));
          const on = lit !== null && lit.has(k);
          g.classList.toggle("hl", on);
          g.classList.toggle("dimmed", lit !== null && !on);
        }
      }
      root.dataset.highlighted = lit ? String(lit.size) : "";
      draw();
    },
    /** @param {number} k */
    zoomBy: (k) => {
      if (interactive) zoom(k, 0.5, 0.5);
    },
    resetView() {
      view = { x: 0, y: 0, w: nat.w, h: nat.h };
      requestDraw();
    },
    /** @param {number} k */
    tileCenter(k) {
      if (k < 0 || k >= tiles.length) return null;
      return cellCenter(m.where[k * 3], m.where[k * 3 + 1], m.where[k * 3 + 2]);
    },
    svgText() {
      const L = exportLayout();
      const out = [];
      out.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${L.width}" height="${L.height}" viewBox="0 0 ${L.width} ${L.height}" font-family="${FONT}">`);
      out.push(`<rect x="0" y="0" width="${L.width}" height="${L.height}" fill="${dark ? "#15181d" : "#ffffff"}"/>`);
      const j = layout.json;
      const title = `${layout.spec} · ${layout.dtype}[${layout.shape.join(", ")}] · mesh ${meshAxes(layout.mesh)} over ${layout.devicesKey}`;
      const facts = `shard [${layout.shardShape.join(", ")}] · ${fmtBytes(j.bytes_per_device)} per device · ${j.replication_factor > 1 ? `replicated ${j.replication_factor}× over ${(j.replicated_axes || []).join(", ")}` : "no replication"} · ${tiles.length} tiles on ${layout.shards.length} devices`;
      out.push(`<title>${xml(title)}</title>`);
      out.push(`<text x="${L.pad}" y="${L.pad + 12}" font-size="14" font-weight="bold" fill="${textFill}">${xml(title)}</text>`);
      out.push(`<text x="${L.pad}" y="${L.pad + 30}" font-size="12" fill="${textFill}">${xml(facts)}</text>`);
      out.push(`<text x="${L.pad}" y="${L.pad + 47}" font-size="12" fill="${textFill}">${xml(caption.textContent || "")}</text>`);
      const font = Math.max(8, Math.min(MAX_FONT, ch * 0.45, cw * 0.3));
      const flat = ch >= font + 3 && cw >= 3 * font * CHAR + 4;
      const turned = !flat && cw >= font + 3 && ch >= 3 * font * CHAR + 4;
      const gap = tileGap(Math.min(cw, ch));
      parts.forEach((p, bi) => {
        const ox = L.pad + (bi % L.perRow) * L.blockW;
        const oy = L.pad + L.head + Math.floor(bi / L.perRow) * L.blockH;
        out.push(`<g transform="translate(${ox},${oy})">`);
        if (p.block.title) out.push(`<text x="0" y="12" font-size="12" fill="${textFill}">${xml(p.block.title)}</text>`);
        const gx = leftW;
        const gy = L.titleH + TOP_RULER;
        // rulers
        const ticks = (/** @type {"x" | "y"} */ axis, /** @type {number} */ n, /** @type {number} */ spacing, /** @type {number} */ dim) => {
          const widest = String(m.shape[dim]).length * TICK_FONT * CHAR + 8;
          const step = pow2((axis === "x" ? widest : TICK_FONT + 5) / spacing);
          for (let t = 0; t <= n; t += step) {
            const text = String(Math.min(t * m.shard[dim], m.shape[dim]));
            if (axis === "x") {
              const x = gx + t * spacing;
              out.push(`<line x1="${x}" x2="${x}" y1="${gy - 4}" y2="${gy}" stroke="${textFill}" stroke-opacity="0.6"/><text x="${x}" y="${gy - 6}" font-size="${TICK_FONT}" text-anchor="middle" fill="${textFill}">${text}</text>`);
            } else {
              const y = gy + t * spacing;
              out.push(`<line x1="${gx - 4}" x2="${gx}" y1="${y}" y2="${y}" stroke="${textFill}" stroke-opacity="0.6"/><text x="${gx - 6}" y="${y + 3.5}" font-size="${TICK_FONT}" text-anchor="end" fill="${textFill}">${text}</text>`);
            }
          }
        };
        ticks("x", m.cols, cw, m.b === null ? m.a : m.b);
        if (m.b !== null) ticks("y", m.rows, ch, m.a);
        out.push(`<g stroke="${sep}" stroke-width="${gap}">`);
        for (const k of p.block.tiles) {
          const r = m.where[k * 3 + 1];
          const c = m.where[k * 3 + 2];
          const op = faded[k] ? ` fill-opacity="0.22"` : "";
          out.push(`<rect x="${gx + c * cw}" y="${gy + r * ch}" width="${cw}" height="${ch}" fill="${colours[k]}"${op} shape-rendering="crispEdges"/>`);
        }
        out.push("</g>");
        if ((flat || turned) && p.block.tiles.length <= 16384) {
          const chars = Math.floor(((flat ? cw : ch) - 6) / (font * CHAR));
          for (const k of p.block.tiles) {
            const text = fitLabel(platform, tiles[k].ids, chars);
            if (!text) continue;
            const x = gx + (m.where[k * 3 + 2] + 0.5) * cw;
            const y = gy + (m.where[k * 3 + 1] + 0.5) * ch;
            const rot = turned ? ` transform="rotate(-90 ${x} ${y})"` : "";
            out.push(`<text x="${x}" y="${y + font * 0.35}" font-size="${font.toFixed(1)}" text-anchor="middle" fill="${labelFill}"${rot}>${xml(text)}</text>`);
          }
        } else if (L.gW) {
          const step = pow2(13 / ch);
          const chars = Math.floor((L.gW - 12) / (11 * CHAR));
          for (let r = 0; r < m.rows; r += step) {
            const k = p.block.cell[r * m.cols];
            if (k < 0) continue;
            const y = gy + (r + 0.5) * ch;
            const x = gx + nat.w + 4;
            out.push(`<line x1="${x}" x2="${x + 6}" y1="${y}" y2="${y}" stroke="${textFill}" stroke-opacity="0.5"/><text x="${x + 9}" y="${y + 4}" font-size="11" fill="${textFill}">${xml(fitLabel(platform, tiles[k].ids, chars))}</text>`);
          }
        }
        out.push("</g>");
      });
      out.push("</svg>");
      return out.join("\n");
    },
    /** @param {number} [scale] */
    pngBlob(scale = 2) {
      const { width: w, height: h } = exportLayout();
      const text = api.svgText();
      return new Promise((resolve, reject) => {
        const img = new Image();
        const url = URL.createObjectURL(new Blob([text], { type: "image/svg+xml" }));
        img.onload = () => {
          const canvas = el("canvas");
          const k = Math.max(0.25, Math.min(scale, 16000 / Math.max(w, h)));
          canvas.width = Math.round(w * k);
          canvas.height = Math.round(h * k);
          const ctx = /** @type {CanvasRenderingContext2D} */ (canvas.getContext("2d"));
          ctx.scale(k, k);
          ctx.drawImage(img, 0, 0, w, h);
          URL.revokeObjectURL(url);
          canvas.toBlob((blob) => (blob ? resolve(blob) : reject(new Error("the PNG could not be made"))), "image/png");
        };
        img.onerror = () => reject(new Error("the picture could not be drawn as PNG"));
        img.src = url;
      });
    },
  };
  return api;
}
