// The layout grid's interactions, the same for both painters: the hover card, clicks (a tile's device
// ids, or nothing beside the tiles), the keyboard (arrows, Page Up/Down, Home/End move the focused
// tile; Enter or Space picks it; + − 0 zoom), wheel zoom around the pointer and drag to pan.

/** @typedef {import("./geometry.js").ViewBox} ViewBox */

/**
 * What the interactions act on: the grid's own controller (components/grid.js).
 * @typedef {object} GridControl
 * @property {number} rows
 * @property {number} cols
 * @property {boolean} interactive wheel zoom, drag pan and the zoom keys
 * @property {(pi: number, clientX: number, clientY: number) => {r: number, c: number, k: number}} hit
 *   what is under a viewport point in block `pi` (k: the tile, -1 for none)
 * @property {(pi: number, r: number, c: number) => number} tileAt the tile at a cell (-1: none)
 * @property {(k: number) => string[]} describe the hover card's lines
 * @property {(pi: number, r: number, c: number) => void} setActive make a cell the keyboard's
 * @property {() => {part: number, r: number, c: number} | null} active
 * @property {(k: number | null, at: {part: number, r: number, c: number} | null) => void} pick a tile
 *   was clicked or chosen (null: beside the tiles)
 * @property {(k: number, fx: number, fy: number) => void} zoom by `k` around the fraction (fx, fy)
 * @property {(k: number, at: {r: number, c: number}) => void} zoomAround keeping a cell in place
 * @property {() => void} resetView
 * @property {() => number} pageRows rows in one screenful
 * @property {() => ViewBox} view
 * @property {(v: ViewBox) => void} setView pan to `v` (clamped, redrawn)
 * @property {(pi: number) => number} scale screen px per natural unit of block `pi`
 * @property {() => void} leave the pointer or focus left: the card hides, the focus ring goes
 * @property {(lines: string[], x: number, y: number, near: Element) => void} card show the hover card
 */

/**
 * Wires block `pi`'s plot element.
 * @param {HTMLElement} plot
 * @param {number} pi
 * @param {GridControl} g
 */
export function interact(plot, pi, g) {
  let dragged = false;
  plot.addEventListener("mousemove", (e) => {
    const { k } = g.hit(pi, e.clientX, e.clientY);
    if (k >= 0) g.card(g.describe(k), e.clientX, e.clientY, plot);
    else g.leave();
  });
  plot.addEventListener("mouseleave", () => g.leave());
  plot.addEventListener("click", (e) => {
    if (dragged) {
      dragged = false;
      return;
    }
    const { k, r, c } = g.hit(pi, e.clientX, e.clientY);
    g.pick(k >= 0 ? k : null, k >= 0 ? { part: pi, r, c } : null);
  });
  plot.addEventListener("focus", () => {
    const a = g.active();
    g.setActive(pi, a?.part === pi ? a.r : 0, a?.part === pi ? a.c : 0);
  });
  plot.addEventListener("blur", () => g.leave());
  plot.addEventListener("keydown", (e) => {
    const a = g.active();
    const cur = a && a.part === pi ? a : { part: pi, r: 0, c: 0 };
    const page = g.pageRows();
    /** @type {Record<string, () => void>} */
    const keys = {
      ArrowRight: () => g.setActive(pi, cur.r, cur.c + 1),
      ArrowLeft: () => g.setActive(pi, cur.r, cur.c - 1),
      ArrowDown: () => g.setActive(pi, cur.r + 1, cur.c),
      ArrowUp: () => g.setActive(pi, cur.r - 1, cur.c),
      PageDown: () => g.setActive(pi, cur.r + page, cur.c),
      PageUp: () => g.setActive(pi, cur.r - page, cur.c),
      Home: () => g.setActive(pi, cur.r, 0),
      End: () => g.setActive(pi, cur.r, g.cols - 1),
      Enter: () => {
        const k = g.tileAt(pi, cur.r, cur.c);
        g.pick(k >= 0 ? k : null, k >= 0 ? cur : null);
      },
      "+": () => g.zoomAround(0.8, cur),
      "=": () => g.zoomAround(0.8, cur),
      "-": () => g.zoomAround(1.25, cur),
      "0": () => g.resetView(),
    };
    keys[" "] = keys.Enter;
    const fn = keys[e.key];
    if (!fn || e.altKey || e.ctrlKey || e.metaKey) return;
    if (!g.interactive && ["+", "=", "-", "0"].includes(e.key)) return;
    e.preventDefault();
    fn();
  });
  if (!g.interactive) return;
  plot.addEventListener(
    "wheel",
    (e) => {
      e.preventDefault();
      const rect = plot.getBoundingClientRect();
      g.zoom(e.deltaY < 0 ? 0.8 : 1.25, (e.clientX - rect.left) / rect.width, (e.clientY - rect.top) / rect.height);
    },
    { passive: false },
  );
  /** @type {{x: number, y: number, view: ViewBox, moved: boolean, id: number} | null} */
  let drag = null;
  plot.addEventListener("pointerdown", (e) => {
    if (e.button === 0) drag = { x: e.clientX, y: e.clientY, view: { ...g.view() }, moved: false, id: e.pointerId };
  });
  plot.addEventListener("pointermove", (e) => {
    if (!drag) return;
    if (!drag.moved && Math.abs(e.clientX - drag.x) + Math.abs(e.clientY - drag.y) > 4) {
      drag.moved = true;
      plot.setPointerCapture(drag.id);
      plot.classList.add("dragging");
    }
    if (!drag.moved) return;
    const s = g.scale(pi);
    g.setView({ ...drag.view, x: drag.view.x - (e.clientX - drag.x) / s, y: drag.view.y - (e.clientY - drag.y) / s });
  });
  const end = () => {
    if (drag && drag.moved) dragged = true;
    drag = null;
    plot.classList.remove("dragging");
  };
  plot.addEventListener("pointerup", end);
  plot.addEventListener("pointercancel", end);
}
