// Memory over program order (a plan's `memory_timeline`, issue 33): live bytes per device at each point of the
// compiled schedule as a plain SVG area (no Plotly: the dashboard and the notebook widget draw it the same way,
// at once), XLA's peak marked, hover for the live bytes at a point, and the buffers live at the peak as a table
// — each with its group, padded and logical bytes, shape, sharding and the source line that made it; a buffer
// padded past twice its logical size flagged. Click a row for its source line and sharding in full.

import { defList, el, h, headedTable, cellsOf, svgEl } from "../lib/dom.js";
import { fmtBytes } from "../lib/format.js";

const FONT = "ui-monospace, SFMono-Regular, Menlo, Consolas, monospace";

/**
 * @typedef {{bytes: number, logical_bytes: number, shape: number[], dtype: string, what: string, name: string,
 *   source: string | null, sharding: string | null, op: string | null, padded: boolean}} Buffer
 * @typedef {{points: [number, number][], peak_bytes: number, peak_index: number, timeline_peak_bytes: number,
 *   resident_bytes: number, length: number, at_peak: Buffer[], at_peak_total: number,
 *   groups: {what: string, bytes: number}[], padded: {name: string}[], note: string | null, source: string,
 *   host?: {points: [number, number][], peak_bytes: number, peak_index: number, resident_bytes: number}}} Timeline
 */

const HOST = "#f58518";  // not the peak's red

/**
 * The chart: an SVG area over program order with the peak marked; a hover line names the point's live bytes.
 * @param {Timeline} t
 * @param {boolean} dark
 * @param {HTMLElement} readout where the hovered point is said
 * @returns {SVGSVGElement}
 */
function chart(t, dark, readout) {
  const W = 760, H = 200, left = 70, right = 10, top = 12, bottom = 26;
  const fg = dark ? "#e6e8eb" : "#1b1f24";
  const grid = dark ? "#2c323b" : "#e5e7eb";
  const last = Math.max(1, t.length - 1);
  const max = Math.max(1, t.peak_bytes, t.timeline_peak_bytes, t.host?.peak_bytes ?? 0);
  const x = (/** @type {number} */ i) => left + (i / last) * (W - left - right);
  const y = (/** @type {number} */ b) => top + (1 - b / max) * (H - top - bottom);
  const svg = /** @type {SVGSVGElement} */ (svgEl("svg", { xmlns: "http://www.w3.org/2000/svg", viewBox: `0 0 ${W} ${H}`, role: "img", class: "memory-timeline-chart" }));
  svg.setAttribute("aria-label", `Live bytes per device over ${t.length} points of the program; peak ${fmtBytes(t.peak_bytes)}`);
  for (const [value, label] of [[max, fmtBytes(max)], [max / 2, fmtBytes(Math.round(max / 2))], [0, "0"]]) {
    svgEl("line", { x1: left, x2: W - right, y1: y(Number(value)), y2: y(Number(value)), stroke: grid }, svg);
    svgEl("text", { x: left - 6, y: y(Number(value)) + 4, "text-anchor": "end", "font-size": 11, "font-family": FONT, fill: fg }, svg).textContent = String(label);
  }
  const line = t.points.map(([i, b]) => `${x(i).toFixed(1)},${y(b).toFixed(1)}`).join(" ");
  svgEl("polygon", { points: `${x(t.points[0]?.[0] ?? 0)},${y(0)} ${line} ${x(t.points.at(-1)?.[0] ?? 0)},${y(0)}`, fill: "#4c78a8", "fill-opacity": 0.35 }, svg);
  svgEl("polyline", { points: line, fill: "none", stroke: "#4c78a8", "stroke-width": 1.5 }, svg);
  if (t.host) {  // host memory (offloaded values) over the same points, on the same axis
    const host = t.host.points.map(([i, b]) => `${x(i).toFixed(1)},${y(b).toFixed(1)}`).join(" ");
    svgEl("polyline", { points: host, fill: "none", stroke: HOST, "stroke-width": 1.5, "stroke-dasharray": "5 3", class: "memory-timeline-host" }, svg);
    svgEl("text", { x: left + 6, y: H - bottom - 6, "font-size": 11, "font-family": FONT, fill: HOST, class: "memory-timeline-host-key" }, svg).textContent = `host memory (dashed), peak ${fmtBytes(t.host.peak_bytes)}`;
  }
  svgEl("line", { x1: left, x2: W - right, y1: y(t.peak_bytes), y2: y(t.peak_bytes), stroke: "#d62728", "stroke-dasharray": "4 3" }, svg);
  svgEl("circle", { cx: x(t.peak_index), cy: y(t.timeline_peak_bytes), r: 4, fill: "#d62728" }, svg);
  svgEl("text", { x: W - right, y: Math.max(11, y(t.peak_bytes) - 4), "text-anchor": "end", "font-size": 11, "font-family": FONT, fill: "#d62728" }, svg).textContent = `XLA's peak ${fmtBytes(t.peak_bytes)}`;
  svgEl("text", { x: (left + W - right) / 2, y: H - 6, "text-anchor": "middle", "font-size": 11, "font-family": FONT, fill: fg }, svg).textContent = `program order (${t.length} points of the schedule)`;
  const cursor = svgEl("line", { x1: 0, x2: 0, y1: top, y2: H - bottom, stroke: fg, "stroke-opacity": 0.5, visibility: "hidden" }, svg);
  svg.addEventListener("mousemove", (e) => {
    const box = svg.getBoundingClientRect();
    const at = ((e.clientX - box.left) / box.width) * W;
    let best = t.points[0];
    for (const p of t.points) if (Math.abs(x(p[0]) - at) < Math.abs(x(best[0]) - at)) best = p;
    cursor.setAttribute("x1", String(x(best[0])));
    cursor.setAttribute("x2", String(x(best[0])));
    cursor.setAttribute("visibility", "visible");
    const peak = best[0] === t.peak_index ? ` — the peak: ${t.at_peak.slice(0, 3).map((b) => `${b.name} ${fmtBytes(b.bytes)}`).join(", ")}…` : "";
    let host = "";
    if (t.host) {
      let near = t.host.points[0];
      for (const p of t.host.points) if (Math.abs(p[0] - best[0]) < Math.abs(near[0] - best[0])) near = p;
      host = `, ${fmtBytes(near[1])} in host memory`;
    }
    readout.textContent = `point ${best[0]}: ${fmtBytes(best[1])} live${host}${peak}`;
  });
  svg.addEventListener("mouseleave", () => cursor.setAttribute("visibility", "hidden"));
  return svg;
}

/**
 * The buffers at the peak as a table, largest first; a click on a row says its source and sharding in full.
 * @param {Timeline} t
 * @param {HTMLElement} detail
 * @returns {HTMLTableElement}
 */
function peakTable(t, detail) {
  const { table, body } = headedTable("memory-peak-table", ["buffer", "group", "bytes", "logical", "shape", "sharding", "source"]);
  for (const b of t.at_peak) {
    const row = body.insertRow();
    const cell = cellsOf(row);
    cell(b.name);
    cell(b.what);
    cell(fmtBytes(b.bytes), "num");
    cell(fmtBytes(b.logical_bytes) + (b.padded ? ` (padded ${(b.bytes / Math.max(1, b.logical_bytes)).toFixed(1)}×)` : ""), b.padded ? "num warn" : "num");
    cell(`${b.dtype}[${b.shape.join(",")}]`);
    cell(b.sharding || "—");
    cell(b.source ? b.source.split("/").at(-1) || b.source : "—");
    row.tabIndex = 0;
    row.addEventListener("click", () => {
      detail.replaceChildren(defList([["buffer", b.name], ["made by", b.op], ["source", b.source], ["sharding", b.sharding], ["group", b.what]]));
    });
  }
  return table;
}

/**
 * Draws a plan's memory timeline into `container` (replacing what is there; hidden without one).
 * @param {HTMLElement} container
 * @param {Timeline | null | undefined} t
 * @param {{dark: boolean}} opts
 */
export function memoryTimeline(container, t, opts) {
  container.hidden = !t || !t.points?.length;
  if (!t || container.hidden) return;
  const readout = el("p", "muted memory-timeline-readout", "Hover the chart for the live bytes at a point.");
  const detail = el("div", "memory-timeline-detail");
  const groups = t.groups.map((g) => `${g.what} ${fmtBytes(g.bytes)}`).join(" · ");
  const own = t.timeline_peak_bytes === t.peak_bytes ? "the timeline's highest point is XLA's peak" : `the timeline's highest point: ${fmtBytes(t.timeline_peak_bytes)}`;
  container.replaceChildren(
    h("h2", {}, "Memory over program order"),
    h("p", { part: "timeline-peak", "data-bytes": String(t.peak_bytes) }, `Peak ${fmtBytes(t.peak_bytes)} per device (XLA's figure) at point ${t.peak_index} of ${t.length}; ${own}. Live at the peak: ${groups}.`),
    ...(t.host ? [h("p", { part: "timeline-host", "data-bytes": String(t.host.peak_bytes) }, `Host memory (values the program offloads, pinned_host): peak ${fmtBytes(t.host.peak_bytes)} per device at point ${t.host.peak_index}; ${fmtBytes(t.host.resident_bytes)} of it host arguments and outputs.`)] : []),
    ...(t.note ? [el("p", "muted", t.note)] : []),
    chart(t, opts.dark, readout),
    readout,
    el("h3", "", `Buffers live at the peak (${t.at_peak.length} of ${t.at_peak_total}, largest first; ${t.padded.length} padded past 2×)`),
    peakTable(t, detail),
    h("div", { part: "timeline-detail" }, detail),
    el("p", "muted", t.source),
  );
  container.dataset.plotted = String(Number(container.dataset.plotted || 0) + 1);
}
