// The layout grid's SVG painters: a block's tiles (up to CANVAS_ABOVE of them, as SVG rects), the
// overlay drawn over either painter's tiles (device-id labels in the tiles in view, the keyboard's
// focus ring), the band list naming thin rows' devices beside them, the rulers, and the whole picture
// as a standalone SVG document for downloads (titled, rulers ticked, labels at full size).

import { svgEl } from "../../lib/dom.js";
import { fmtBytes, meshAxes } from "../../lib/format.js";
import { replicationText } from "../../model/facts.js";
import { CHAR, FONT, LEFT_RULER, MAX_LABELS, MIN_FONT, TICK_FONT, TOP_RULER, fitLabel, inView, labelFit, pow2, tickStep, tileGap } from "./geometry.js";

/** @typedef {import("./geometry.js").Geometry} Geometry */
/** @typedef {import("./geometry.js").ViewBox} ViewBox */
/** @typedef {import("./geometry.js").Block} Block */
/** @typedef {import("../../model/layout.js").Layout} Layout */
/** @typedef {{sep: string, labelFill: string, textFill: string}} Ink the theme's colours */

/** The theme's colours: tile separators, labels on tiles, text beside them. @param {boolean} dark @returns {Ink} */
export function inkOf(dark) {
  return { sep: dark ? "#15181d" : "#ffffff", labelFill: dark ? "#f4f4f4" : "#111111", textFill: dark ? "#e6e6e6" : "#1b1f24" };
}

/** XML text. @param {string} s */
const xml = (s) => s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");

/**
 * One block's tiles as SVG (a rect per tile in a <g data-tile>, the view set by viewBox).
 * @param {Geometry} g
 * @param {Block} block
 * @param {{colours: string[], faded: Uint8Array, sep: string, label: string}} o
 * @returns {{svg: SVGSVGElement, group: SVGGElement, tiles: SVGGElement[]}}
 */
export function tileSvg(g, block, o) {
  const { m, nat, cw, ch } = g;
  const svg = /** @type {SVGSVGElement} */ (svgEl("svg", { class: "grid-tiles", xmlns: "http://www.w3.org/2000/svg", preserveAspectRatio: "none" }));
  svg.setAttribute("role", "img");
  svg.setAttribute("aria-label", o.label);
  svgEl("rect", { x: 0, y: 0, width: nat.w, height: nat.h, fill: o.sep }, svg);
  const group = /** @type {SVGGElement} */ (svgEl("g", { class: "tiles", stroke: o.sep }, svg));
  const tiles = block.tiles.map((k) => {
    const r = m.where[k * 3 + 1];
    const c = m.where[k * 3 + 2];
    const tile = /** @type {SVGGElement} */ (svgEl("g", { class: o.faded[k] ? "tile not-held" : "tile", "data-tile": k }, group));
    svgEl("rect", {
      x: c * cw, y: r * ch, width: cw, height: ch, fill: o.colours[k],
      "vector-effect": "non-scaling-stroke", "shape-rendering": "crispEdges",
    }, tile);
    return tile;
  });
  return { svg, group, tiles };
}

/** Shows `view` in a block's tile SVG, its outlines sized for the zoom. @param {{svg: SVGSVGElement, group: SVGGElement}} t @param {Geometry} g @param {ViewBox} view @param {number} pw */
export function viewTiles(t, g, view, pw) {
  const s = pw / view.w;
  t.svg.setAttribute("viewBox", `${view.x} ${view.y} ${view.w} ${view.h}`);
  t.group.setAttribute("stroke-width", String(tileGap(Math.min(g.cw * s, g.ch * s))));
}

/**
 * What goes over a block's tiles and beside them for this view: device-id labels inside the tiles
 * when they fit (turned in tall narrow tiles), else the band list for thin rows; and the keyboard's
 * focus ring.
 * @param {Geometry} g
 * @param {Layout} layout
 * @param {Block} block
 * @param {{view: ViewBox, pw: number, ph: number, bandW: number, ink: Ink, active: {r: number, c: number} | null}} o
 * @returns {{labels: SVGElement[], bands: SVGElement[]}}
 */
export function overlayMarks(g, layout, block, o) {
  const { m, cw, ch } = g;
  const { view, ink } = o;
  const s = o.pw / view.w;
  const sw = cw * s;
  const sh = ch * s;
  const { r0, r1, c0, c1 } = inView(g, view);
  const X = (/** @type {number} */ c) => (c * cw - view.x) * s;
  const Y = (/** @type {number} */ r) => (r * ch - view.y) * s;
  const tiles = layout.tiles;
  /** @type {SVGElement[]} */
  const labels = [];
  /** @type {SVGElement[]} */
  const bands = [];
  const { font, flat, turned } = labelFit(sw, sh);
  if ((flat || turned) && (r1 - r0 + 1) * (c1 - c0 + 1) <= MAX_LABELS) {
    const chars = Math.floor(((flat ? sw : sh) - 6) / (font * CHAR));
    for (let r = r0; r <= r1; r++) {
      for (let c = c0; c <= c1; c++) {
        const k = block.cell[r * m.cols + c];
        if (k < 0) continue;
        const text = fitLabel(layout.platform, tiles[k].ids, chars);
        if (!text) continue;
        const x = X(c) + sw / 2;
        const y = Y(r) + sh / 2;
        const t = svgEl("text", {
          x, y, "font-size": font.toFixed(1), "font-family": FONT, fill: ink.labelFill, "text-anchor": "middle",
          "dominant-baseline": "central", class: "tile-label", "data-tile": k,
          ...(turned ? { transform: `rotate(-90 ${x} ${y})` } : {}),
        });
        t.textContent = text;
        labels.push(t);
      }
    }
  } else if (g.banded && o.bandW > 0 && !flat) {
    const step = pow2(14 / sh);
    const chars = Math.floor((o.bandW - 12) / (11 * CHAR));
    for (let r = Math.ceil(r0 / step) * step; r <= r1; r += step) {
      const k = block.cell[r * m.cols];
      if (k < 0) continue;
      const y = Y(r) + sh / 2;
      if (y < -2 || y > o.ph + 2) continue;
      bands.push(svgEl("line", { x1: 0, x2: 6, y1: y, y2: y, stroke: ink.textFill, "stroke-opacity": 0.5 }));
      const t = svgEl("text", { x: 9, y, "font-size": 11, "font-family": FONT, fill: ink.textFill, "dominant-baseline": "central", class: "band-label", "data-tile": k });
      t.textContent = fitLabel(layout.platform, tiles[k].ids, chars);
      bands.push(t);
    }
  }
  if (o.active) {
    const { r, c } = o.active;
    labels.push(svgEl("rect", {
      x: X(c) + 1.5, y: Y(r) + 1.5, width: Math.max(2, sw - 3), height: Math.max(2, sh - 3), fill: "none",
      stroke: "#ff9f1a", "stroke-width": 3, class: "focus-ring",
    }));
  }
  return { labels, bands };
}

/**
 * A ruler's ticks for the block boundaries in view: index values at the boundaries, as dense as their
 * numbers allow.
 * @param {Geometry} g
 * @param {"x" | "y"} axis
 * @param {{view: ViewBox, pw: number, length: number, ink: Ink}} o length: the ruler's length in px
 * @returns {SVGElement[]}
 */
export function rulerMarks(g, axis, o) {
  const { m, cw, ch } = g;
  const s = o.pw / o.view.w;
  const { r0, r1, c0, c1 } = inView(g, o.view);
  const dim = axis === "x" ? (m.b === null ? m.a : m.b) : m.a;
  const spacing = axis === "x" ? cw * s : ch * s;
  const [j0, j1] = axis === "x" ? [c0, c1 + 1] : [r0, r1 + 1];
  const at = (/** @type {number} */ j) => (axis === "x" ? (j * cw - o.view.x) * s : (j * ch - o.view.y) * s);
  const per = m.shard[dim];
  const step = tickStep(m, axis, spacing, dim);
  const fill = o.ink.textFill;
  /** @type {SVGElement[]} */
  const out = [];
  for (let j = Math.ceil(j0 / step) * step; j <= j1; j += step) {
    const pos = at(j);
    if (pos < -1.5 || pos > o.length + 1.5) continue;
    const text = String(Math.min(j * per, m.shape[dim]));
    if (axis === "x") {
      out.push(svgEl("line", { x1: pos, x2: pos, y1: TOP_RULER - 4, y2: TOP_RULER, stroke: fill, "stroke-opacity": 0.6 }));
      const t = svgEl("text", { x: pos, y: TOP_RULER - 6, "font-size": TICK_FONT, "font-family": FONT, fill, "text-anchor": "middle", class: "tick" });
      t.textContent = text;
      out.push(t);
    } else {
      out.push(svgEl("line", { x1: LEFT_RULER - 4, x2: LEFT_RULER, y1: pos, y2: pos, stroke: fill, "stroke-opacity": 0.6 }));
      const t = svgEl("text", { x: LEFT_RULER - 6, y: pos, "font-size": TICK_FONT, "font-family": FONT, fill, "text-anchor": "end", "dominant-baseline": "central", class: "tick" });
      t.textContent = text;
      out.push(t);
    }
  }
  return out;
}

/**
 * The size of the exported picture and where its parts go.
 * @param {Geometry} g
 * @param {number} blocks
 */
export function exportLayout(g, blocks) {
  const { m, nat, leftW } = g;
  const pad = 12;
  const head = 58;
  const perRow = Math.ceil(Math.sqrt(blocks));
  const gW = g.banded && nat.h / m.rows < MIN_FONT + 4 ? Math.min(Math.ceil(g.labelChars * 11 * CHAR) + 14, 220) : 0;
  const titleH = m.others.length ? 18 : 0;
  const blockW = leftW + nat.w + gW + 16;
  const blockH = titleH + TOP_RULER + nat.h + 16;
  const width = Math.ceil(pad * 2 + perRow * blockW);
  const height = Math.ceil(pad + head + Math.ceil(blocks / perRow) * blockH);
  return { pad, head, perRow, gW, titleH, blockW, blockH, width, height };
}

/**
 * The whole picture as a standalone SVG document: titled with the spec, array and mesh, its facts and
 * its caption, every block with rulers and labels at full size.
 * @param {Geometry} g
 * @param {Layout} layout
 * @param {{colours: string[], faded: Uint8Array, dark: boolean, caption: string}} o
 * @returns {string}
 */
export function exportSvg(g, layout, o) {
  const { m, nat, cw, ch, leftW } = g;
  const ink = inkOf(o.dark);
  const tiles = layout.tiles;
  const L = exportLayout(g, m.blocks.length);
  const out = [];
  out.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${L.width}" height="${L.height}" viewBox="0 0 ${L.width} ${L.height}" font-family="${FONT}">`);
  out.push(`<rect x="0" y="0" width="${L.width}" height="${L.height}" fill="${o.dark ? "#15181d" : "#ffffff"}"/>`);
  const j = layout.json;
  const title = `${layout.spec} · ${layout.dtype}[${layout.shape.join(", ")}] · mesh ${meshAxes(layout.mesh)} over ${layout.devicesKey}`;
  const facts = `shard [${layout.shardShape.join(", ")}] · ${fmtBytes(j.bytes_per_device)} per device · replication ${replicationText(j)} · ${tiles.length} tiles on ${layout.shards.length} devices`;
  out.push(`<title>${xml(title)}</title>`);
  out.push(`<text x="${L.pad}" y="${L.pad + 12}" font-size="14" font-weight="bold" fill="${ink.textFill}">${xml(title)}</text>`);
  out.push(`<text x="${L.pad}" y="${L.pad + 30}" font-size="12" fill="${ink.textFill}">${xml(facts)}</text>`);
  out.push(`<text x="${L.pad}" y="${L.pad + 47}" font-size="12" fill="${ink.textFill}">${xml(o.caption)}</text>`);
  const { font, flat, turned } = labelFit(cw, ch, 8);
  const gap = tileGap(Math.min(cw, ch));
  m.blocks.forEach((block, bi) => {
    const ox = L.pad + (bi % L.perRow) * L.blockW;
    const oy = L.pad + L.head + Math.floor(bi / L.perRow) * L.blockH;
    out.push(`<g transform="translate(${ox},${oy})">`);
    if (block.title) out.push(`<text x="0" y="12" font-size="12" fill="${ink.textFill}">${xml(block.title)}</text>`);
    const gx = leftW;
    const gy = L.titleH + TOP_RULER;
    const ticks = (/** @type {"x" | "y"} */ axis, /** @type {number} */ n, /** @type {number} */ spacing, /** @type {number} */ dim) => {
      const step = tickStep(m, axis, spacing, dim);
      for (let t = 0; t <= n; t += step) {
        const text = String(Math.min(t * m.shard[dim], m.shape[dim]));
        if (axis === "x") {
          const x = gx + t * spacing;
          out.push(`<line x1="${x}" x2="${x}" y1="${gy - 4}" y2="${gy}" stroke="${ink.textFill}" stroke-opacity="0.6"/><text x="${x}" y="${gy - 6}" font-size="${TICK_FONT}" text-anchor="middle" fill="${ink.textFill}">${text}</text>`);
        } else {
          const y = gy + t * spacing;
          out.push(`<line x1="${gx - 4}" x2="${gx}" y1="${y}" y2="${y}" stroke="${ink.textFill}" stroke-opacity="0.6"/><text x="${gx - 6}" y="${y + 3.5}" font-size="${TICK_FONT}" text-anchor="end" fill="${ink.textFill}">${text}</text>`);
        }
      }
    };
    ticks("x", m.cols, cw, m.b === null ? m.a : m.b);
    if (m.b !== null) ticks("y", m.rows, ch, m.a);
    out.push(`<g stroke="${ink.sep}" stroke-width="${gap}">`);
    for (const k of block.tiles) {
      const r = m.where[k * 3 + 1];
      const c = m.where[k * 3 + 2];
      const op = o.faded[k] ? ` fill-opacity="0.22"` : "";
      out.push(`<rect x="${gx + c * cw}" y="${gy + r * ch}" width="${cw}" height="${ch}" fill="${o.colours[k]}"${op} shape-rendering="crispEdges"/>`);
    }
    out.push("</g>");
    if ((flat || turned) && block.tiles.length <= 16384) {
      const chars = Math.floor(((flat ? cw : ch) - 6) / (font * CHAR));
      for (const k of block.tiles) {
        const text = fitLabel(layout.platform, tiles[k].ids, chars);
        if (!text) continue;
        const x = gx + (m.where[k * 3 + 2] + 0.5) * cw;
        const y = gy + (m.where[k * 3 + 1] + 0.5) * ch;
        const rot = turned ? ` transform="rotate(-90 ${x} ${y})"` : "";
        out.push(`<text x="${x}" y="${y + font * 0.35}" font-size="${font.toFixed(1)}" text-anchor="middle" fill="${ink.labelFill}"${rot}>${xml(text)}</text>`);
      }
    } else if (L.gW) {
      const step = pow2(13 / ch);
      const chars = Math.floor((L.gW - 12) / (11 * CHAR));
      for (let r = 0; r < m.rows; r += step) {
        const k = block.cell[r * m.cols];
        if (k < 0) continue;
        const y = gy + (r + 0.5) * ch;
        const x = gx + nat.w + 4;
        out.push(`<line x1="${x}" x2="${x + 6}" y1="${y}" y2="${y}" stroke="${ink.textFill}" stroke-opacity="0.5"/><text x="${x + 9}" y="${y + 4}" font-size="11" fill="${ink.textFill}">${xml(fitLabel(layout.platform, tiles[k].ids, chars))}</text>`);
      }
    }
    out.push("</g>");
  });
  out.push("</svg>");
  return out.join("\n");
}
