// components/: pieces of UI that draw into a container element they are handed, from data and
// callbacks they are given — no page ids, no page state — so every panel, on every host, draws with
// them. This module: the layout grid, visualize_array_sharding for any rank and mesh size, put
// together from its geometry (grid/geometry.js), its two painters (grid/svg.js up to CANVAS_ABOVE
// tiles, grid/canvas.js past it) and its interactions (grid/interact.js).
//
// Outlines between tiles are sized by a tile's smaller side on screen and dropped when tiles are
// tiny, so a tile is never covered by its own outline. Rulers sit outside the zoomed picture (they
// stay put when zooming) and tick row and column indices for what is in view. Device ids go inside
// a tile when they fit, turned when the tile is tall and narrow, and for thin rows in a band list
// beside the grid. Downloads are titled with what they show.

import { el, svgEl } from "../lib/dom.js";
import { hideCard, showCard } from "../lib/hovercard.js";
import { canvasPainter, pack, sizeCanvas, tileCanvas } from "./grid/canvas.js";
import { CANVAS_ABOVE, TOP_RULER, clampView, fitRoom, geometry, maxZoom, tileCard } from "./grid/geometry.js";
import { interact } from "./grid/interact.js";
import { exportLayout, exportSvg, inkOf, overlayMarks, rulerMarks, tileSvg, viewTiles } from "./grid/svg.js";

/** @typedef {import("../model/layout.js").Layout} Layout */
/** @typedef {import("./grid/geometry.js").ViewBox} ViewBox */

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
 * @typedef {{block: import("./grid/geometry.js").Block, frame: HTMLElement, plot: HTMLElement,
 *   tiles: {svg: SVGSVGElement, group: SVGGElement, tiles: SVGGElement[]} | null,
 *   canvas: HTMLCanvasElement | null, paint: ((view: ViewBox, pw: number, lit: Set<number> | null) => void) | null,
 *   overlay: SVGSVGElement, top: SVGSVGElement, left: SVGSVGElement, band: SVGSVGElement}} Part
 *   one small multiple on screen
 */

/**
 * The grid's frame in `container` (replacing what is there): the caption naming the dimensions shown, the box
 * the blocks go in, and a line screen readers hear.
 * @param {HTMLElement} container @param {import("./grid/geometry.js").GridModel} m @param {string[]} dimTexts
 * @param {string} renderer @param {number} tiles how many
 */
function gridFrame(container, m, dimTexts, renderer, tiles) {
  const root = el("div", "layout-grid");
  root.dataset.renderer = renderer;
  root.dataset.tiles = String(tiles);
  const caption = el("p", "grid-dims-caption");
  if (m.rank === 0) caption.textContent = "a scalar: every device holds it";
  else if (m.b === null) caption.textContent = `→ ${dimTexts[m.a]}`;
  else caption.append(el("span", "dim-rows", `↓ rows: ${dimTexts[m.a]}`), el("span", "dim-cols", `→ columns: ${dimTexts[m.b]}`));
  const blocksBox = el("div", "grid-blocks");
  const live = el("div", "sr-only");
  live.setAttribute("aria-live", "polite");
  // read by screen readers, never seen (inline, for hosts without app.css)
  Object.assign(live.style, { position: "absolute", width: "1px", height: "1px", overflow: "hidden", clipPath: "inset(50%)", whiteSpace: "nowrap" });
  root.append(caption, blocksBox, live);
  container.replaceChildren(root);
  return { root, caption, blocksBox, live };
}

/**
 * One figure per block in `blocksBox`: its rulers, its plot (the tiles, drawn as SVG or on a canvas, and the
 * overlay of labels) and its band list.
 * @param {HTMLElement} blocksBox
 * @param {import("./grid/geometry.js").Geometry} g
 * @param {{renderer: string, colours: string[], faded: Uint8Array, packs: Uint32Array, sep: string, name: string}} o
 * @returns {Part[]}
 */
function buildParts(blocksBox, g, o) {
  const { m } = g;
  const { renderer, colours, faded, packs, name } = o;
  return m.blocks.map((block, bi) => {
    const fig = el("figure", "grid-block");
    fig.dataset.block = String(bi);
    if (block.title) fig.appendChild(el("figcaption", "block-title", block.title));
    const frame = el("div", "grid-frame");
    const top = /** @type {SVGSVGElement} */ (svgEl("svg", { class: "ruler ruler-top", "aria-hidden": "true" }));
    const left = /** @type {SVGSVGElement} */ (svgEl("svg", { class: "ruler ruler-left", "aria-hidden": "true" }));
    const plot = el("div", "grid-plot");
    plot.tabIndex = bi === 0 ? 0 : -1;
    plot.setAttribute("role", "application");
    plot.setAttribute("aria-roledescription", "layout grid");
    plot.setAttribute("aria-label", `${name}${block.title ? `, ${block.title}` : ""}: ${m.rows} × ${m.cols} tiles. Arrow keys move between tiles, Enter highlights one, plus and minus zoom.`);
    const band = /** @type {SVGSVGElement} */ (svgEl("svg", { class: "band-list", "aria-hidden": "true" }));
    for (const s of [top, left, band]) s.style.overflow = "visible";
    const svgTiles = renderer === "svg" ? tileSvg(g, block, { colours, faded, sep: o.sep, label: name }) : null;
    const canvas = renderer === "canvas" ? tileCanvas(name) : null;
    const paint = canvas ? canvasPainter(canvas, g, block, bi, { packs, faded, sep: o.sep }) : null;
    const overlay = /** @type {SVGSVGElement} */ (svgEl("svg", { class: "grid-overlay" }));
    plot.append(/** @type {Element} */ (svgTiles ? svgTiles.svg : canvas), overlay);
    frame.append(el("div"), top, el("div"), left, plot, band);
    fig.appendChild(frame);
    blocksBox.appendChild(fig);
    return { block, frame, plot, tiles: svgTiles, canvas, paint, overlay, top, left, band };
  });
}

/**
 * Each block's frame, rulers, plot and band list sized to `room` (fitRoom).
 * @param {Part[]} parts @param {{pw: number, ph: number, bandW: number}} room @param {number} leftW the left ruler's width
 */
function sizeParts(parts, room, leftW) {
  const { pw, ph, bandW } = room;
  for (const p of parts) {
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
    if (p.tiles) {
      p.tiles.svg.setAttribute("width", String(pw));
      p.tiles.svg.setAttribute("height", String(ph));
      p.tiles.svg.style.display = "block";
    }
    if (p.canvas) sizeCanvas(p.canvas, pw, ph);
  }
}

/** The SVG tiles marked lit (`hl`) or dimmed (null: none lit). @param {Part[]} parts @param {Set<number> | null} lit */
function markTiles(parts, lit) {
  for (const p of parts) {
    for (const t of p.tiles ? p.tiles.tiles : []) {
      const k = Number(t.getAttribute("data-tile"));
      const on = lit !== null && lit.has(k);
      t.classList.toggle("hl", on);
      t.classList.toggle("dimmed", lit !== null && !on);
    }
  }
}

/**
 * Calls `resize(width)` when `box` changes width (by 2 px or more) while `root` is on the page; a grid replaced
 * by another stops listening.
 * @param {HTMLElement} box @param {HTMLElement} root @param {number} measured its width now @param {(width: number) => void} resize
 */
function onWidth(box, root, measured, resize) {
  let lastWidth = measured;
  const resized = new ResizeObserver((entries) => {
    if (!root.isConnected) {
      resized.disconnect(); // replaced by another grid: let this one go
      return;
    }
    const w = Math.round(entries[0].contentRect.width);
    if (Math.abs(w - lastWidth) < 2 || !w) return;
    lastWidth = w;
    resize(w);
  });
  resized.observe(box);
}

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
  const g = geometry(layout, opts.dims ?? null);
  const { m, nat, cw, ch, leftW } = g;
  const tiles = layout.tiles;
  const dark = opts.dark;
  const ink = inkOf(dark);
  // a canvas for many tiles, and for tiles thinner than a few pixels (snapped to device pixels, no seams)
  const renderer = opts.renderer ?? (tiles.length > CANVAS_ABOVE || Math.min(cw, ch) < 4 ? "canvas" : "svg");
  const colours = tiles.map((t) => layout.colourOf(t.ids[0], dark));
  const faded = new Uint8Array(tiles.length);
  if (opts.faded && opts.faded.size) tiles.forEach((t, k) => (faded[k] = t.ids.every((id) => opts.faded?.has(id)) ? 1 : 0));
  const packs = renderer === "canvas" ? Uint32Array.from(colours, pack) : new Uint32Array(0);
  // measured before anything is built: reading the widths of a page that has not changed is free
  const pads = getComputedStyle(container);
  const measured = container.clientWidth - (parseFloat(pads.paddingLeft) || 0) - (parseFloat(pads.paddingRight) || 0);

  // ---- DOM: caption, then one figure per block: rulers, the plot (tiles + overlay), band list
  const { root, caption, blocksBox, live } = gridFrame(container, m, layout.dims.map((d) => String(d.text)), renderer, tiles.length);

  const name = `Layout of ${layout.spec} over ${layout.devicesKey}`;
  const parts = buildParts(blocksBox, g, { renderer, colours, faded, packs, sep: ink.sep, name });

  // ---- sizes: the natural picture, fitted to the container's width and the height limit
  let room = fitRoom(g, parts.length, measured, opts.maxHeight);
  /** @param {number} width the room for the blocks, px */
  const layoutParts = (width) => {
    room = fitRoom(g, parts.length, width, opts.maxHeight);
    sizeParts(parts, room, leftW);
  };

  // ---- the view (natural units, shared by every block), what is lit and the keyboard's tile
  /** @type {ViewBox} */
  let view = { x: 0, y: 0, w: nat.w, h: nat.h };
  const clamp = (/** @type {ViewBox} */ v) => clampView(g, v, room.fit);
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
    const { pw, ph, bandW } = room;
    if (p.tiles) viewTiles(p.tiles, g, view, pw);
    else p.paint?.(view, pw, lit);
    const marks = overlayMarks(g, layout, p.block, { view, pw, ph, bandW, ink, active: active && active.part === pi ? active : null });
    p.band.replaceChildren(...marks.bands);
    p.overlay.replaceChildren(...marks.labels);
    // rulers: index ticks at the block boundaries in view, as dense as their numbers allow
    p.top.replaceChildren(...rulerMarks(g, "x", { view, pw, length: pw, ink }));
    p.left.replaceChildren(...(m.b !== null ? rulerMarks(g, "y", { view, pw, length: ph, ink }) : []));
    p.plot.dataset.zoom = (nat.w / view.w).toFixed(2);
  }

  // ---- hit-testing, the hover card, the keyboard's tile, zoom
  const describe = tileCard(layout, m);

  /** Where tile (r, c) of part `pi` is on screen, null when out of view. @param {number} pi @param {number} r @param {number} c */
  function cellCenter(pi, r, c) {
    const rect = parts[pi].plot.getBoundingClientRect();
    const s = rect.width / view.w;
    const x = ((c + 0.5) * cw - view.x) * s;
    const y = ((r + 0.5) * ch - view.y) * s;
    if (x < 0 || y < 0 || x > rect.width || y > rect.height) return null;
    return { x: rect.left + x, y: rect.top + y };
  }

  /** Scales the view by `k` around the fraction (fx, fy) of the plot. @param {number} k @param {number} fx @param {number} fy */
  function zoom(k, fx, fy) {
    const w = Math.min(nat.w, Math.max(nat.w / maxZoom(g, room.fit), view.w * k));
    const h = (w / nat.w) * nat.h;
    view = clamp({ x: view.x + (view.w - w) * fx, y: view.y + (view.h - h) * fy, w, h });
    requestDraw();
  }

  /** @type {import("./grid/interact.js").GridControl} */
  const control = {
    rows: m.rows,
    cols: m.cols,
    interactive: opts.interactive !== false,
    hit(pi, clientX, clientY) {
      const rect = parts[pi].plot.getBoundingClientRect();
      const s = rect.width / view.w;
      const r = Math.floor((view.y + (clientY - rect.top) / s) / ch);
      const c = Math.floor((view.x + (clientX - rect.left) / s) / cw);
      if (r < 0 || c < 0 || r >= m.rows || c >= m.cols) return { r, c, k: -1 };
      return { r, c, k: parts[pi].block.cell[r * m.cols + c] };
    },
    tileAt: (pi, r, c) => parts[pi].block.cell[r * m.cols + c],
    describe,
    setActive(pi, r, c) {
      active = { part: pi, r: Math.max(0, Math.min(m.rows - 1, r)), c: Math.max(0, Math.min(m.cols - 1, c)) };
      const x0 = active.c * cw;
      const y0 = active.r * ch;
      if (x0 < view.x || x0 + cw > view.x + view.w || y0 < view.y || y0 + ch > view.y + view.h) {
        view = clamp({ ...view, x: x0 + cw / 2 - view.w / 2, y: y0 + ch / 2 - view.h / 2 });
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
    },
    active: () => active,
    pick(k, at) {
      if (at) active = at;
      opts.onTileClick?.(k === null ? null : tiles[k].ids);
    },
    zoom,
    zoomAround(k, at) {
      zoom(k, Math.min(1, Math.max(0, ((at.c + 0.5) * cw - view.x) / view.w)), Math.min(1, Math.max(0, ((at.r + 0.5) * ch - view.y) / view.h)));
    },
    resetView() {
      view = { x: 0, y: 0, w: nat.w, h: nat.h };
      requestDraw();
    },
    pageRows: () => Math.max(1, Math.floor(view.h / ch)),
    view: () => view,
    setView(v) {
      view = clamp(v);
      requestDraw();
    },
    scale: () => room.pw / view.w,
    leave: hideCard,
    card: showCard,
  };
  parts.forEach((p, pi) => interact(p.plot, pi, control));

  const tBuilt = performance.now();
  performance.measure("grid-build", { start: tStart, end: tBuilt });
  layoutParts(measured);
  draw();
  performance.measure("grid-draw", { start: tBuilt, end: performance.now() });
  onWidth(blocksBox, root, measured, (w) => {
    layoutParts(w);
    view = clamp(view);
    draw();
  });

  const first = parts[0];
  return {
    svg: /** @type {SVGSVGElement} */ (first.tiles ? first.tiles.svg : first.overlay),
    element: root,
    renderer: /** @type {"svg" | "canvas"} */ (renderer),
    get width() {
      return exportLayout(g, parts.length).width;
    },
    get height() {
      return exportLayout(g, parts.length).height;
    },
    highlight(ids) {
      lit = ids === null ? null : new Set(tiles.map((_, k) => k).filter((k) => tiles[k].ids.some((i) => ids.has(i))));
      markTiles(parts, lit);
      root.dataset.highlighted = lit ? String(lit.size) : "";
      draw();
    },
    zoomBy(k) {
      if (control.interactive) zoom(k, 0.5, 0.5);
    },
    resetView: control.resetView,
    tileCenter(k) {
      if (k < 0 || k >= tiles.length) return null;
      return cellCenter(m.where[k * 3], m.where[k * 3 + 1], m.where[k * 3 + 2]);
    },
    svgText: () => exportSvg(g, layout, { colours, faded, dark, caption: caption.textContent || "" }),
    pngBlob(scale = 2) {
      const { width: w, height: h } = exportLayout(g, parts.length);
      return svgToPng(exportSvg(g, layout, { colours, faded, dark, caption: caption.textContent || "" }), w, h, scale);
    },
  };
}

/**
 * An SVG document as a PNG `scale` times its size (at most 16,000 px a side).
 * @param {string} text
 * @param {number} w
 * @param {number} h
 * @param {number} scale
 * @returns {Promise<Blob>}
 */
function svgToPng(text, w, h, scale) {
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
}
