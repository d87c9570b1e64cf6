// Bytes per device as plain SVG bars, for the notebook widget: the dashboard draws this chart with
// Plotly (4.8 MB, served by the dashboard's server), which a widget that needs no server cannot load.
// The same reading as components/memory.js: bars coloured by host, the heaviest red when the devices
// are imbalanced, the mean dotted; each bar's device, bytes and host on hover; a what-if's bars (in
// orange) beside the captured ones, which fade.

import { svgEl } from "../js/lib/dom.js";
import { fmtBytes } from "../js/lib/format.js";

const HOSTS = ["#4c78a8", "#72b7b2", "#54a24b", "#b279a2"];
const WHATIF = ["#f58518", "#e45756", "#eeca3b", "#ff9da6"];
const FONT = "ui-monospace, SFMono-Regular, Menlo, Consolas, monospace";

/** @typedef {import("../js/components/memory.js").Memory} Memory */

/**
 * Draws the bars into `container` (replacing what is there).
 * @param {HTMLElement} container
 * @param {Memory} mem captured
 * @param {{platform: string, hostOf: Map<number, number>, dark: boolean, next?: Memory | null}} opts next: a what-if's
 */
export function memoryBars(container, mem, opts) {
  const next = opts.next || null;
  const n = mem.device_ids.length;
  const W = 760;
  const H = 130;
  const left = 64;
  const bottom = n <= 32 ? 22 : 8;
  const top = 10;
  const plotW = W - left - 8;
  const plotH = H - top - bottom;
  const fg = opts.dark ? "#e6e8eb" : "#1b1f24";
  const max = [...mem.bytes, ...(next ? next.bytes : [])].reduce((a, b) => Math.max(a, b), 0) || 1;
  const svg = /** @type {SVGSVGElement} */ (svgEl("svg", { xmlns: "http://www.w3.org/2000/svg", viewBox: `0 0 ${W} ${H}`, role: "img", class: "memory-bars" }));
  svg.setAttribute("aria-label", `Bytes per device, ${n} devices${next ? ", captured and what-if" : ""}`);
  const y = (/** @type {number} */ b) => top + plotH - (b / max) * plotH;
  for (const [value, label] of [[max, fmtBytes(max)], [0, "0"]]) {
    const t = svgEl("text", { x: left - 6, y: y(/** @type {number} */ (value)) + 4, "text-anchor": "end", "font-size": 11, "font-family": FONT, fill: fg }, svg);
    t.textContent = String(label);
  }
  svgEl("line", { x1: left, x2: left + plotW, y1: top + plotH, y2: top + plotH, stroke: fg, "stroke-opacity": 0.4 }, svg);
  const step = plotW / Math.max(1, n);
  const series = next ? [[mem, HOSTS, "captured", 0.45], [next, WHATIF, "what-if", 1]] : [[mem, HOSTS, "captured", 1]];
  series.forEach(([m, colours, name, opacity], si) => {
    const mm = /** @type {Memory} */ (m);
    const width = (step > 3 ? step * 0.8 : step) / series.length;
    mm.device_ids.forEach((id, k) => {
      const b = mm.bytes[k];
      const host = opts.hostOf.get(id) ?? 0;
      const fill = mm.imbalanced && b === mm.max_bytes ? "#d62728" : /** @type {string[]} */ (colours)[host % 4];
      const x = left + k * step + (step > 3 ? step * 0.1 : 0) + si * width;
      const bar = svgEl("rect", { x, y: y(b), width: Math.max(0.5, width), height: Math.max(0, top + plotH - y(b)), fill, "fill-opacity": opacity, class: `bar ${si ? "whatif" : "captured"}`, "data-device": id }, svg);
      svgEl("title", {}, bar).textContent = `${opts.platform} ${id}: ${fmtBytes(b)} · host ${host} (${name})`;
    });
  });
  if (n <= 32) {
    mem.device_ids.forEach((id, k) => {
      const t = svgEl("text", { x: left + (k + 0.5) * step, y: H - 6, "text-anchor": "middle", "font-size": 10, "font-family": FONT, fill: fg }, svg);
      t.textContent = String(id);
    });
  }
  const shown = next || mem;
  if (shown.devices_with_data) {
    svgEl("line", { x1: left, x2: left + plotW, y1: y(shown.mean_bytes), y2: y(shown.mean_bytes), stroke: fg, "stroke-dasharray": "3 3", class: "mean" }, svg);
  }
  container.replaceChildren(svg);
}
