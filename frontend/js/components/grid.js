// components/: pieces of UI that draw into a container element they are handed, from data and
// callbacks they are given — no page ids, no page state — so a notebook widget can mount them in an
// output cell. This module: the layout grid, visualize_array_sharding in SVG for any rank and mesh
// size, with zoom and pan, level-of-detail device labels, hover cards and highlighting.

import { svgEl } from "../lib/dom.js";
import { compactIds, fmtBytes, fmtIndex, plainIds } from "../lib/format.js";
import { hoverCard } from "../lib/hovercard.js";

const FONT = "ui-monospace, SFMono-Regular, Menlo, Consolas, monospace";

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

/** A label that fits `width` px: the full list, else ranges, else elided. */
function fitLabel(/** @type {string} */ platform, /** @type {number[]} */ ids, /** @type {number} */ width, /** @type {number} */ fontSize) {
  const chars = Math.floor(width / (fontSize * 0.62)) - 1;
  const full = `${platform} ${plainIds(ids)}`;
  if (full.length <= chars) return full;
  const compact = `${platform} ${compactIds(ids)}`;
  if (compact.length <= chars) return compact;
  const bare = compactIds(ids);
  if (bare.length <= chars) return bare;
  return chars >= 2 ? `${bare.slice(0, chars - 1)}…` : "";
}

/**
 * @typedef {object} GridView
 * @property {SVGSVGElement} svg
 * @property {(ids: Set<number> | null) => void} highlight the tiles holding any of `ids` (null clears)
 * @property {(k: number) => void} zoomBy scale the view by `k` around its centre (< 1 zooms in)
 * @property {() => void} resetView
 * @property {() => string} svgText the whole picture as a standalone SVG document, labelled at full size
 * @property {number} width natural size in px
 * @property {number} height
 */

/**
 * Draws `layout` into `container` (replacing what is there).
 * @param {HTMLElement} container
 * @param {Layout} layout
 * @param {{dims?: number[] | null, dark: boolean, interactive?: boolean, faded?: Set<number>,
 *   onTileClick?: (ids: number[] | null) => void}} opts dims: the two array dimensions the grid
 *   shows (rank > 2); interactive (default true): wheel zoom and drag pan, labels for what is on
 *   screen (false: labels for the natural size); faded: tiles held only by these devices are faded;
 *   onTileClick: a tile's device ids when one is clicked, null for a click beside the tiles
 * @returns {GridView}
 */
export function layoutGrid(container, layout, opts) {
  const rank = layout.rank;
  const vshape = rank === 0 ? [1] : layout.shape;
  const vshard = rank === 0 ? [1] : layout.shardShape;
  const platform = layout.platform;
  const dims = gridDims(vshape.length, opts.dims ?? null);
  const others = [...vshape.keys()].filter((d) => !dims.includes(d));
  const tiles = layout.tiles;
  const indexOf = (/** @type {number} */ k) => (rank === 0 ? [[0, 1]] : tiles[k].index);

  // Blocks (small multiples): one per distinct range of the non-grid dimensions.
  /** @type {Map<string, {key: number[][], tiles: number[]}>} */
  const blocks = new Map();
  tiles.forEach((_, k) => {
    const key = others.map((d) => indexOf(k)[d]);
    const name = JSON.stringify(key);
    if (!blocks.has(name)) blocks.set(name, { key, tiles: [] });
    /** @type {{tiles: number[]}} */ (blocks.get(name)).tiles.push(k);
  });
  const blockList = [...blocks.values()].sort((p, q) => {
    for (let i = 0; i < p.key.length; i++) if (p.key[i][0] !== q.key[i][0]) return p.key[i][0] - q.key[i][0];
    return 0;
  });

  const a = dims[0];
  const b = dims.length === 2 ? dims[1] : null;
  const rows = b === null ? 1 : vshape[a] / vshard[a];
  const cols = b === null ? vshape[a] / vshard[a] : vshape[b] / vshard[b];
  // Grid size follows the array's aspect ratio within bounds; small multiples shrink.
  const perRow = Math.ceil(Math.sqrt(blockList.length));
  const maxW = blockList.length > 1 ? Math.max(220, 900 / perRow) : 900;
  const aspect = b === null ? 0 : vshape[a] / vshape[b];
  const gridW = Math.max(Math.min(maxW, cols * 140), Math.min(maxW, 480));
  const gridH = b === null ? Math.min(64, Math.max(36, gridW / 8)) : Math.max(60, Math.min(maxW * 0.8, gridW * aspect));
  const cw = gridW / cols;
  const ch = gridH / rows;
  const rulerTop = 34;
  const rulerLeft = b === null ? 12 : 34;
  const titleH = others.length ? 18 : 0;
  const blockW = rulerLeft + gridW + 16;
  const blockH = titleH + rulerTop + gridH + 16;
  const width = perRow * blockW + 8;
  const height = Math.ceil(blockList.length / perRow) * blockH + 8;

  const svg = /** @type {SVGSVGElement} */ (svgEl("svg", { xmlns: "http://www.w3.org/2000/svg", viewBox: `0 0 ${width} ${height}`, role: "img" }));
  svg.setAttribute("aria-label", `Layout of ${layout.spec} over ${layout.devicesKey}`);
  svg.setAttribute("width", String(Math.round(width)));
  const viewport = svgEl("g", { class: "viewport" }, svg);
  svgEl("rect", { x: 0, y: 0, width, height, fill: opts.dark ? "#15181d" : "#ffffff" }, viewport);
  const textFill = opts.dark ? "#e6e6e6" : "#1b1f24";
  const dimTexts = layout.dims.map((d) => String(d.text));

  /** @type {Map<number, SVGGElement[]>} */
  const tileEls = new Map();
  /** Every drawn tile with its top-left corner in svg units, for level-of-detail labels.
   * @type {{k: number, g: SVGGElement, x: number, y: number, lx: number, ly: number, text: SVGTextElement | null}[]} */
  const placed = [];
  blockList.forEach((block, bi) => {
    const ox = (bi % perRow) * blockW + 8;
    const oy = Math.floor(bi / perRow) * blockH + 8;
    const g = svgEl("g", { transform: `translate(${ox},${oy})` }, viewport);
    if (others.length) {
      const title = svgEl("text", { x: 0, y: 12, "font-size": 12, "font-family": FONT, fill: textFill, class: "block-title" }, g);
      title.textContent = others.map((d, i) => `dim ${d} [${block.key[i][0]}:${block.key[i][1]}]`).join(", ");
    }
    const gy = titleH;
    // Axis rulers: which mesh axes split each grid dimension.
    const top = svgEl("text", { x: rulerLeft, y: gy + 13, "font-size": 12, "font-family": FONT, fill: textFill, class: "ruler" }, g);
    top.textContent = b === null ? (rank === 0 ? "scalar" : dimTexts[a]) : dimTexts[b];
    if (b !== null) {
      const left = svgEl("text", {
        x: 0, y: 0, "font-size": 12, "font-family": FONT, fill: textFill, class: "ruler",
        transform: `translate(${rulerLeft - 10},${gy + rulerTop + gridH / 2}) rotate(-90)`, "text-anchor": "middle",
      }, g);
      left.textContent = dimTexts[a];
    }
    // Column index ticks when they fit.
    const tickDim = b === null ? a : b;
    if (cw >= 36 && rank > 0) {
      for (let j = 0; j < cols; j++) {
        const t = svgEl("text", {
          x: rulerLeft + j * cw + cw / 2, y: gy + rulerTop - 5, "font-size": 9, "font-family": FONT,
          fill: textFill, "text-anchor": "middle", opacity: 0.7,
        }, g);
        t.textContent = `${j * vshard[tickDim]}:${(j + 1) * vshard[tickDim]}`;
      }
    }
    for (const k of block.tiles) {
      const t = tiles[k];
      const index = indexOf(k);
      const r = b === null ? 0 : index[a][0] / vshard[a];
      const c = b === null ? index[a][0] / vshard[a] : index[b][0] / vshard[b];
      const x = rulerLeft + c * cw;
      const y = gy + rulerTop + r * ch;
      const tg = /** @type {SVGGElement} */ (svgEl("g", { class: "tile", "data-tile": k }, g));
      if (opts.faded && t.ids.every((id) => opts.faded?.has(id))) tg.classList.add("not-held");
      svgEl("rect", {
        x, y, width: cw, height: ch, fill: layout.colourOf(t.ids[0], opts.dark),
        stroke: opts.dark ? "#0b0d10" : "#ffffff", "stroke-width": Math.min(2, cw / 12),
      }, tg);
      placed.push({ k, g: tg, x: x + ox, y: y + oy, lx: x, ly: y, text: null });
      if (!tileEls.has(k)) tileEls.set(k, []);
      /** @type {SVGGElement[]} */ (tileEls.get(k)).push(tg);
    }
  });

  /** The hover card's lines for tile `k`. @param {number} k */
  function describe(k) {
    const t = tiles[k];
    const lines = [
      `${fmtIndex(indexOf(k))}  shard ${JSON.stringify(layout.shardShape)}  ${fmtBytes(layout.json.bytes_per_device)} per device`,
      `${platform} ${compactIds(t.ids)} (${t.ids.length} device${t.ids.length > 1 ? "s" : ""})`,
    ];
    for (const id of t.ids.slice(0, 12)) {
      const d = layout.device(id);
      if (!d) continue;
      const where = d.coords ? ` coords (${d.coords.join(",")}) core ${d.core_on_chip}` : "";
      const slice = d.slice_index !== undefined && d.slice_index !== null ? ` slice ${d.slice_index}` : "";
      lines.push(`  ${platform} ${id}: host ${d.process_index}${slice}${where}, replica ${t.replicas.get(id)}`);
    }
    if (t.ids.length > 12) lines.push(`  … and ${t.ids.length - 12} more`);
    return lines;
  }

  const labelFill = opts.dark ? "#f4f4f4" : "#111";
  /**
   * Labels sized for how big the tiles are on screen (`scale` screen px per svg unit), for the tiles
   * inside `view`: zooming into a 64x64 grid brings its device ids out. At most 2048 labels at once.
   * @param {ViewBox} view
   * @param {number} scale
   */
  function relabel(view, scale) {
    const sw = cw * scale;
    const sh = ch * scale;
    const px = Math.max(8, Math.min(13, sh * 0.45, sw / 4));
    const visible = new Set(
      placed.filter((p) => p.x + cw >= view.x && p.x <= view.x + view.w && p.y + ch >= view.y && p.y <= view.y + view.h),
    );
    const show = visible.size <= 2048 && sh >= px + 2;
    for (const p of placed) {
      const label = show && visible.has(p) ? fitLabel(platform, tiles[p.k].ids, sw, px) : "";
      if (!label) {
        if (p.text) p.text.setAttribute("visibility", "hidden");
        continue;
      }
      if (!p.text) {
        p.text = /** @type {SVGTextElement} */ (svgEl("text", {
          x: p.lx + cw / 2, y: p.ly + ch / 2, "font-family": FONT, fill: labelFill,
          "text-anchor": "middle", "dominant-baseline": "central", class: "tile-label",
        }, p.g));
      }
      p.text.setAttribute("font-size", String(px / scale));
      p.text.removeAttribute("visibility");
      p.text.textContent = label;
    }
  }

  /** The tile number under a DOM target inside the svg. @param {EventTarget | null} target */
  const tileAt = (target) => {
    const g = target instanceof Element ? target.closest(".tile") : null;
    return g ? Number(g.getAttribute("data-tile")) : null;
  };

  container.replaceChildren(svg);
  const full = { x: 0, y: 0, w: width, h: height };
  const zoom = opts.interactive === false ? null : panZoom(svg, full, relabel);
  if (!zoom) relabel(full, 1);
  hoverCard(svg, (target) => {
    const k = tileAt(target);
    return k === null ? null : describe(k);
  });
  if (opts.onTileClick) {
    const onTileClick = opts.onTileClick;
    svg.addEventListener("click", (e) => {
      if (zoom?.justDragged()) return;
      const k = tileAt(e.target);
      onTileClick(k === null ? null : tiles[k].ids);
    });
  }

  return {
    svg,
    width,
    height,
    highlight(ids) {
      tileEls.forEach((els, k) => {
        const on = ids !== null && tiles[k].ids.some((i) => ids.has(i));
        for (const e of els) {
          e.classList.toggle("hl", on);
          e.classList.toggle("dimmed", ids !== null && !on);
        }
      });
    },
    zoomBy: (k) => zoom?.zoomBy(k),
    resetView: () => zoom?.reset(),
    svgText() {
      // Labels for the whole picture at its natural size, then back to the labels of the current view.
      relabel(full, 1);
      const clone = /** @type {SVGSVGElement} */ (svg.cloneNode(true));
      zoom?.refresh();
      clone.setAttribute("viewBox", `0 0 ${width} ${height}`);
      clone.setAttribute("width", String(width));
      clone.setAttribute("height", String(height));
      return new XMLSerializer().serializeToString(clone);
    },
  };
}

/**
 * Wheel zoom (around the cursor) and drag pan on an svg, by editing its viewBox; `onView` hears the
 * new view box and scale (screen px per svg unit) once the zooming settles, and once at the start.
 * @param {SVGSVGElement} svg
 * @param {ViewBox} full
 * @param {(view: ViewBox, scale: number) => void} onView
 */
function panZoom(svg, full, onView) {
  const W = full.w;
  let vb = { ...full };
  let pending = 0;
  let dragged = false;
  const now = () => onView(vb, svg.getBoundingClientRect().width / vb.w);
  const later = () => {
    clearTimeout(pending);
    pending = window.setTimeout(now, 80);
  };
  const apply = () => {
    svg.setAttribute("viewBox", `${vb.x} ${vb.y} ${vb.w} ${vb.h}`);
    later();
  };
  // labels follow the size on screen: a window resized, a folded <details> opened
  new ResizeObserver(later).observe(svg);
  /** @param {number} k @param {number} fx @param {number} fy */
  const scaleAround = (k, fx, fy) => {
    const w = Math.min(W, Math.max(W / 64, vb.w * k));
    const h = (w / vb.w) * vb.h;
    vb = { x: vb.x + (vb.w - w) * fx, y: vb.y + (vb.h - h) * fy, w, h };
    apply();
  };
  now();
  svg.addEventListener(
    "wheel",
    (e) => {
      e.preventDefault();
      const rect = svg.getBoundingClientRect();
      scaleAround(e.deltaY < 0 ? 0.8 : 1.25, (e.clientX - rect.left) / rect.width, (e.clientY - rect.top) / rect.height);
    },
    { passive: false },
  );
  /** @type {{x: number, y: number, vb: ViewBox, moved: boolean} | null} */
  let drag = null;
  svg.addEventListener("pointerdown", (e) => {
    if (e.button === 0) drag = { x: e.clientX, y: e.clientY, vb: { ...vb }, moved: false };
  });
  svg.addEventListener("pointermove", (e) => {
    if (!drag) return;
    const rect = svg.getBoundingClientRect();
    if (Math.abs(e.clientX - drag.x) + Math.abs(e.clientY - drag.y) > 4) drag.moved = true;
    if (drag.moved) {
      vb = { ...vb, x: drag.vb.x - ((e.clientX - drag.x) / rect.width) * vb.w, y: drag.vb.y - ((e.clientY - drag.y) / rect.height) * vb.h };
      apply();
    }
  });
  const end = () => {
    if (drag && drag.moved) dragged = true;
    drag = null;
  };
  svg.addEventListener("pointerup", end);
  svg.addEventListener("pointerleave", end);
  return {
    reset() {
      vb = { ...full };
      apply();
    },
    /** Relabel for the current view now. */
    refresh: now,
    /** @param {number} k */
    zoomBy: (k) => scaleAround(k, 0.5, 0.5),
    /** Whether a drag just ended (the click that ends a drag selects nothing); reading clears it. */
    justDragged() {
      const was = dragged;
      dragged = false;
      return was;
    },
  };
}
