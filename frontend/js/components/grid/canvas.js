// The layout grid's canvas painter, for many tiles (past CANVAS_ABOVE) and tiles thinner than a few
// pixels: pixels written directly, each tile's edges snapped to device pixels, so every pixel shows one
// tile's colour however thin the tiles are, and 6,144 tiles cost a few row fills each.

import { el } from "../../lib/dom.js";
import { inView, tileGap } from "./geometry.js";

/** @typedef {import("./geometry.js").Geometry} Geometry */
/** @typedef {import("./geometry.js").ViewBox} ViewBox */

/** Packed colours by CSS text: the palette is small (golden-angle hues), so this stays small. */
const packed = new Map();
/** @type {CanvasRenderingContext2D | null} */
let probe = null;

/**
 * A CSS colour as one 32-bit ImageData pixel (bytes R, G, B, A: little-endian, as every browser
 * platform is). The layout model's hsl() colours are converted here; anything else the browser
 * resolves once.
 * @param {string} css
 * @returns {number}
 */
export function pack(css) {
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

/** A canvas for one block's tiles. @param {string} label its accessible name */
export function tileCanvas(label) {
  const canvas = el("canvas", "grid-canvas");
  canvas.setAttribute("role", "img");
  canvas.setAttribute("aria-label", label);
  return canvas;
}

/** Sizes a block's canvas to `pw` × `ph` CSS px at the screen's pixel ratio. @param {HTMLCanvasElement} canvas @param {number} pw @param {number} ph */
export function sizeCanvas(canvas, pw, ph) {
  const dpr = window.devicePixelRatio || 1;
  canvas.width = Math.round(pw * dpr);
  canvas.height = Math.round(ph * dpr);
  Object.assign(canvas.style, { width: `${pw}px`, height: `${ph}px`, display: "block" });
}

/**
 * A painter of one block's tiles on its canvas: `paint(view, lit)` paints what is in view, lit tiles
 * outlined and the others dimmed. It keeps its ImageData between paints.
 * @param {HTMLCanvasElement} canvas
 * @param {Geometry} g
 * @param {{cell: Int32Array}} block
 * @param {number} bi the block's index
 * @param {{packs: Uint32Array, faded: Uint8Array, sep: string}} colours packs: each tile's packed colour
 * @returns {(view: ViewBox, pw: number, lit: Set<number> | null) => void}
 */
export function canvasPainter(canvas, g, block, bi, colours) {
  /** @type {ImageData | null} */
  let image = null;
  const { m, cw, ch } = g;
  return (view, pw, lit) => {
    const ctx = /** @type {CanvasRenderingContext2D} */ (canvas.getContext("2d"));
    const Wd = canvas.width;
    const Hd = canvas.height;
    const dpr = Wd / pw;
    const s = pw / view.w;
    const gap = tileGap(Math.min(cw * s, ch * s));
    const { r0, r1, c0, c1 } = inView(g, view);
    const X = (/** @type {number} */ c) => (c * cw - view.x) * s;
    const Y = (/** @type {number} */ r) => (r * ch - view.y) * s;
    if (!image || image.width !== Wd || image.height !== Hd) image = ctx.createImageData(Wd, Hd);
    const px = new Uint32Array(image.data.buffer);
    const under = pack(colours.sep);
    px.fill(under);
    const gp = Math.round(gap * dpr);
    const edges = (/** @type {number} */ v) => Math.min(Math.max(Math.round(v * dpr), 0), 1e9);
    for (let r = r0; r <= r1; r++) {
      const ya = Math.max(0, edges(Y(r)));
      const yb = Math.min(Hd, edges(Y(r + 1)));
      if (yb <= ya) continue;
      // one scan line of the row's tiles, then copied down the row's other pixel rows
      const top = yb - ya > 3 * gp ? ya + gp - (gp >> 1) : ya;
      const bottom = yb - ya > 3 * gp ? yb - (gp >> 1) : yb;
      const line = top * Wd;
      let left = Wd;
      let right = 0;
      for (let c = c0; c <= c1; c++) {
        const k = block.cell[r * m.cols + c];
        if (k < 0) continue;
        const xa = Math.max(0, edges(X(c)));
        const xb = Math.min(Wd, edges(X(c + 1)));
        if (xb <= xa) continue;
        const wide = xb - xa > 3 * gp;
        const alpha = colours.faded[k] ? 0.22 : lit && !lit.has(k) ? 0.25 : 1;
        const colour = alpha === 1 ? colours.packs[k] : blend(colours.packs[k], under, alpha);
        px.fill(colour, line + xa + (wide ? gp - (gp >> 1) : 0), line + xb - (wide ? gp >> 1 : 0));
        left = Math.min(left, xa);
        right = Math.max(right, xb);
      }
      if (right > left) for (let y = top + 1; y < bottom; y++) px.copyWithin(y * Wd + left, line + left, line + right);
    }
    ctx.putImageData(image, 0, 0);
    if (!lit) return;
    ctx.strokeStyle = "#ff9f1a";
    ctx.lineWidth = 3 * dpr;
    for (const k of lit) {
      if (m.where[k * 3] !== bi) continue;
      const r = m.where[k * 3 + 1];
      const c = m.where[k * 3 + 2];
      if (r < r0 || r > r1 || c < c0 || c > c1) continue;
      ctx.strokeRect(edges(X(c)) + 1.5 * dpr, edges(Y(r)) + 1.5 * dpr, Math.max(1, edges(X(c + 1)) - edges(X(c)) - 3 * dpr), Math.max(1, edges(Y(r + 1)) - edges(Y(r)) - 3 * dpr));
    }
  };
}
