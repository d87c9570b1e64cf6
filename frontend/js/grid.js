// The layout grid: visualize_array_sharding in SVG, for any rank and any mesh size.
// Built only with createElementNS/textContent (labels are data, never markup).

import { compactIds, deviceColour, fmtBytes, fmtIndex, plainIds } from "./format.js";

const SVG = "http://www.w3.org/2000/svg";
const FONT = "ui-monospace, SFMono-Regular, Menlo, Consolas, monospace";

/** @param {string} tag @param {Record<string, string|number>} attrs @param {Element} [parent] */
function el(tag, attrs, parent) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
  if (parent) parent.appendChild(e);
  return e;
}

/** Device attributes by id, from the layout's columnar `devices`. */
export function deviceTable(layout) {
  const d = layout.devices;
  /** @type {Map<number, {id:number, process_index:number, core_on_chip:number, coords:number[]|null, slice_index?:number}>} */
  const byId = new Map();
  d.id.forEach((id, i) => {
    byId.set(id, {
      id,
      process_index: d.process_index[i],
      core_on_chip: d.core_on_chip[i],
      coords: d.coords ? d.coords[i] : null,
      slice_index: d.slice_index ? d.slice_index[i] : undefined,
    });
  });
  return byId;
}

/** Which two array dimensions form the grid. @param {number} rank @param {number[]|null} wanted */
export function gridDims(rank, wanted) {
  if (rank <= 2) return [...Array(rank).keys()];
  if (wanted && wanted.length === 2 && wanted.every((d) => d >= 0 && d < rank) && wanted[0] !== wanted[1]) {
    return wanted;
  }
  return [rank - 2, rank - 1];
}

/** A label that fits `width` px: the full list, else ranges, else elided. */
function fitLabel(platform, ids, width, fontSize) {
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
 * Renders `layout` into a fresh <svg>. Returns the svg and a controller for highlighting.
 * @param {any} layout the /api/layout response
 * @param {{dims: number[]|null, dark: boolean, onTileClick?: (ids: number[]) => void}} opts
 */
export function renderGrid(layout, opts) {
  const rank = layout.shape.length;
  const vshape = rank === 0 ? [1] : layout.shape;
  const vshard = rank === 0 ? [1] : layout.shard_shape;
  const platform = String(layout.platform).toUpperCase();
  const dims = gridDims(vshape.length, opts.dims);
  const others = [...vshape.keys()].filter((d) => !dims.includes(d));
  const devices = deviceTable(layout);

  // Tiles: the first shard of each tile gives its index bounds.
  /** @type {{index: number[][], ids: number[], replicas: Map<number, number>}[]} */
  const tiles = layout.tiles.map((ids) => ({ index: [], ids, replicas: new Map() }));
  for (const s of layout.shards) {
    const t = tiles[s.tile];
    if (!t.index.length) t.index = rank === 0 ? [[0, 1]] : s.index;
    t.replicas.set(s.device_id, s.replica_id);
  }
  // Blocks (small multiples): one per distinct range of the non-grid dimensions.
  /** @type {Map<string, {key: number[][], tiles: number[]}>} */
  const blocks = new Map();
  tiles.forEach((t, k) => {
    const key = others.map((d) => t.index[d]);
    const name = JSON.stringify(key);
    if (!blocks.has(name)) blocks.set(name, { key, tiles: [] });
    blocks.get(name).tiles.push(k);
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

  const svg = /** @type {SVGSVGElement} */ (el("svg", { xmlns: SVG, viewBox: `0 0 ${width} ${height}`, role: "img" }));
  svg.setAttribute("aria-label", `Layout of ${layout.spec} over ${layout.devices_key}`);
  svg.setAttribute("width", String(Math.round(width)));
  svg.dataset.width = String(width);
  svg.dataset.height = String(height);
  const viewport = el("g", { class: "viewport" }, svg);
  el("rect", { x: 0, y: 0, width, height, fill: opts.dark ? "#15181d" : "#ffffff" }, viewport);
  const textFill = opts.dark ? "#e6e6e6" : "#1b1f24";
  const dimTexts = layout.dims.map((/** @type {any} */ d) => String(d.text));

  /** @type {Map<number, SVGGElement[]>} */
  const tileEls = new Map();
  /** Every drawn tile with its top-left corner in svg units, for level-of-detail labels.
   * @type {{k: number, g: SVGGElement, x: number, y: number, lx: number, ly: number, text: SVGTextElement|null}[]} */
  const placed = [];
  blockList.forEach((block, bi) => {
    const ox = (bi % perRow) * blockW + 8;
    const oy = Math.floor(bi / perRow) * blockH + 8;
    const g = el("g", { transform: `translate(${ox},${oy})` }, viewport);
    if (others.length) {
      const title = el("text", { x: 0, y: 12, "font-size": 12, "font-family": FONT, fill: textFill, class: "block-title" }, g);
      title.textContent = others.map((d, i) => `dim ${d} [${block.key[i][0]}:${block.key[i][1]}]`).join(", ");
    }
    const gy = titleH;
    // Axis rulers: which mesh axes split each grid dimension.
    const top = el("text", { x: rulerLeft, y: gy + 13, "font-size": 12, "font-family": FONT, fill: textFill, class: "ruler" }, g);
    top.textContent = b === null ? (rank === 0 ? "scalar" : dimTexts[a]) : dimTexts[b];
    if (b !== null) {
      const left = el("text", {
        x: 0, y: 0, "font-size": 12, "font-family": FONT, fill: textFill, class: "ruler",
        transform: `translate(${rulerLeft - 10},${gy + rulerTop + gridH / 2}) rotate(-90)`, "text-anchor": "middle",
      }, g);
      left.textContent = dimTexts[a];
    }
    // Column index ticks when they fit.
    const tickDim = b === null ? a : b;
    if (cw >= 36 && rank > 0) {
      for (let j = 0; j < cols; j++) {
        const t = el("text", {
          x: rulerLeft + j * cw + cw / 2, y: gy + rulerTop - 5, "font-size": 9, "font-family": FONT,
          fill: textFill, "text-anchor": "middle", opacity: 0.7,
        }, g);
        t.textContent = `${j * vshard[tickDim]}:${(j + 1) * vshard[tickDim]}`;
      }
    }
    for (const k of block.tiles) {
      const t = tiles[k];
      const r = b === null ? 0 : t.index[a][0] / vshard[a];
      const c = b === null ? t.index[a][0] / vshard[a] : t.index[b][0] / vshard[b];
      const x = rulerLeft + c * cw;
      const y = gy + rulerTop + r * ch;
      const tg = /** @type {SVGGElement} */ (el("g", { class: "tile", "data-tile": k }, g));
      el("rect", {
        x, y, width: cw, height: ch, fill: deviceColour(Math.min(...t.ids), opts.dark),
        stroke: opts.dark ? "#0b0d10" : "#ffffff", "stroke-width": Math.min(2, cw / 12),
      }, tg);
      placed.push({ k, g: tg, x: x + ox, y: y + oy, lx: x, ly: y, text: null });
      if (!tileEls.has(k)) tileEls.set(k, []);
      tileEls.get(k).push(tg);
    }
  });

  /** Details for the hover card. @param {number} k */
  function describe(k) {
    const t = tiles[k];
    const shard = layout.shard_shape;
    const lines = [
      `${fmtIndex(t.index)}  shard ${JSON.stringify(shard)}  ${fmtBytes(layout.bytes_per_device)} per device`,
      `${platform} ${compactIds(t.ids)} (${t.ids.length} device${t.ids.length > 1 ? "s" : ""})`,
    ];
    for (const id of t.ids.slice(0, 12)) {
      const d = devices.get(id);
      if (!d) continue;
      const where = d.coords ? ` coords (${d.coords.join(",")}) core ${d.core_on_chip}` : "";
      const slice = d.slice_index !== undefined ? ` slice ${d.slice_index}` : "";
      lines.push(`  ${platform} ${id}: host ${d.process_index}${slice}${where}, replica ${t.replicas.get(id)}`);
    }
    if (t.ids.length > 12) lines.push(`  … and ${t.ids.length - 12} more`);
    return lines;
  }

  const labelFill = opts.dark ? "#f4f4f4" : "#111";
  /**
   * Labels sized for how big the tiles are on screen (`scale` screen px per svg unit), for the tiles
   * inside `view`: zooming into a 64x64 grid brings its device ids out. At most 2048 labels at once.
   * @param {{x: number, y: number, w: number, h: number}} view
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
        p.text = /** @type {SVGTextElement} */ (el("text", {
          x: p.lx + cw / 2, y: p.ly + ch / 2, "font-family": FONT, fill: labelFill,
          "text-anchor": "middle", "dominant-baseline": "central", class: "tile-label",
        }, p.g));
      }
      p.text.setAttribute("font-size", String(px / scale));
      p.text.removeAttribute("visibility");
      p.text.textContent = label;
    }
  }

  return {
    svg,
    tiles,
    describe,
    relabel,
    /** Highlight the tiles holding any of `ids` (null clears). @param {Set<number>|null} ids */
    highlight(ids) {
      tileEls.forEach((els, k) => {
        const on = ids !== null && tiles[k].ids.some((i) => ids.has(i));
        for (const e of els) {
          e.classList.toggle("hl", on);
          e.classList.toggle("dimmed", ids !== null && !on);
        }
      });
    },
    /** The tile number for a DOM target inside the svg. @param {EventTarget|null} target */
    tileAt(target) {
      const g = target instanceof Element ? target.closest(".tile") : null;
      return g ? Number(g.getAttribute("data-tile")) : null;
    },
  };
}

/**
 * Wheel zoom (around the cursor) and drag pan on an svg, by editing its viewBox; `onView` hears the
 * new view box and scale (screen px per svg unit) once the zooming settles, and once at the start.
 * @param {SVGSVGElement} svg
 * @param {(view: {x: number, y: number, w: number, h: number}, scale: number) => void} onView
 */
export function enableZoom(svg, onView) {
  const W = Number(svg.dataset.width);
  const H = Number(svg.dataset.height);
  let vb = { x: 0, y: 0, w: W, h: H };
  let pending = 0;
  const notify = () => {
    clearTimeout(pending);
    pending = window.setTimeout(() => onView(vb, svg.getBoundingClientRect().width / vb.w), 80);
  };
  const apply = () => {
    svg.setAttribute("viewBox", `${vb.x} ${vb.y} ${vb.w} ${vb.h}`);
    notify();
  };
  onView(vb, svg.getBoundingClientRect().width / vb.w);
  svg.addEventListener(
    "wheel",
    (e) => {
      e.preventDefault();
      const rect = svg.getBoundingClientRect();
      const fx = (e.clientX - rect.left) / rect.width;
      const fy = (e.clientY - rect.top) / rect.height;
      const k = e.deltaY < 0 ? 0.8 : 1.25;
      const w = Math.min(W, Math.max(W / 64, vb.w * k));
      const h = (w / vb.w) * vb.h;
      vb = { x: vb.x + (vb.w - w) * fx, y: vb.y + (vb.h - h) * fy, w, h };
      apply();
    },
    { passive: false },
  );
  let drag = null;
  svg.addEventListener("pointerdown", (e) => {
    if (e.button !== 0) return;
    drag = { x: e.clientX, y: e.clientY, vb: { ...vb }, moved: false };
  });
  svg.addEventListener("pointermove", (e) => {
    if (!drag) return;
    const rect = svg.getBoundingClientRect();
    const dx = ((e.clientX - drag.x) / rect.width) * vb.w;
    const dy = ((e.clientY - drag.y) / rect.height) * vb.h;
    if (Math.abs(e.clientX - drag.x) + Math.abs(e.clientY - drag.y) > 4) drag.moved = true;
    if (drag.moved) {
      vb = { ...vb, x: drag.vb.x - dx, y: drag.vb.y - dy };
      apply();
    }
  });
  const end = () => {
    if (drag && drag.moved) svg.dataset.justDragged = "1";
    drag = null;
  };
  svg.addEventListener("pointerup", end);
  svg.addEventListener("pointerleave", end);
  return {
    reset() {
      vb = { x: 0, y: 0, w: W, h: H };
      apply();
    },
    /** Relabel for the current view now (e.g. after an export relabelled for the full picture). */
    refresh() {
      onView(vb, svg.getBoundingClientRect().width / vb.w);
    },
    /** @param {number} k */
    zoom(k) {
      const w = Math.min(W, Math.max(W / 64, vb.w * k));
      const h = (w / vb.w) * vb.h;
      vb = { x: vb.x + (vb.w - w) / 2, y: vb.y + (vb.h - h) / 2, w, h };
      apply();
    },
  };
}
