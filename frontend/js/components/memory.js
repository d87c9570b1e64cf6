// Bytes per device as a Plotly bar chart (bars coloured by host, the heaviest flagged red when the
// devices are imbalanced, a dotted mean), optionally with a what-if next to what was captured; and
// the verdict in words.

import { el } from "../lib/dom.js";
import { compactIds, fmtBytes, plotlyText } from "../lib/format.js";
import { loadPlotly } from "../lib/plotly.js";

/**
 * @typedef {{device_ids: number[], bytes: number[], devices_with_data: number, max_bytes: number,
 *   min_bytes: number, mean_bytes: number, ratio: number, imbalanced: boolean, heaviest: number[]}} Memory
 *   a snapshot's `memory` (or a what-if's)
 */

/**
 * One line saying whether the devices are balanced.
 * @param {Memory} mem
 * @param {string} label "Captured", "What-if"
 * @param {string} platform "CPU", "TPU"
 * @returns {string}
 */
function verdict(mem, label, platform) {
  if (!mem.devices_with_data) return `${label}: no leaf has a layout.`;
  const heavy = mem.heaviest.length ? `${platform} ${compactIds(mem.heaviest)}` : "—";
  const spread = `max ${fmtBytes(mem.max_bytes)}, min ${fmtBytes(mem.min_bytes)}, mean ${fmtBytes(Math.round(mem.mean_bytes))}`;
  return mem.imbalanced
    ? `${label}: imbalanced — ${heavy} hold${mem.heaviest.length > 1 ? "" : "s"} ${mem.ratio.toFixed(2)}× the mean (${spread}).`
    : `${label}: balanced — the busiest device holds ${mem.ratio.toFixed(2)}× the mean (${spread}).`;
}

/**
 * Writes the verdicts into `container` (class "warn" when what is shown last is imbalanced).
 * @param {HTMLElement} container
 * @param {Memory} mem captured
 * @param {Memory | null} next a what-if's
 * @param {string} platform
 * @param {string} [label] what the chart shows ("Captured"; a program's "Arguments and outputs ...")
 */
export function memoryVerdict(container, mem, next, platform, label = "Captured") {
  container.replaceChildren(el("span", "", verdict(mem, label, platform)));
  if (next) container.append(el("br"), el("span", "", verdict(next, "What-if", platform)));
  container.classList.toggle("warn", Boolean((next || mem).imbalanced));
}

/**
 * Plots the chart into `container` (loading Plotly after the next paint on first use); its
 * data-plotted attribute counts the plots.
 * @param {HTMLElement} container
 * @param {{mem: Memory, next: Memory | null, platform: string, hostOf: Map<number, number>, dark: boolean}} data
 * @returns {Promise<void>}
 */
export async function memoryChart(container, { mem, next, platform, hostOf, dark }) {
  const Plotly = await loadPlotly({ afterPaint: true });
  // bars in binary units, as the text above the chart says them (Plotly's own ticks would say "25M")
  const top = Math.max(1, ...mem.bytes, ...(next ? next.bytes : []));
  const power = Math.min(4, Math.floor(Math.log(top) / Math.log(1024)));
  const unit = 1024 ** power;
  const unitName = ["B", "KiB", "MiB", "GiB", "TiB"][power];
  // Category labels from the snapshot's own data: escaped, so a platform string is text, never a link.
  const x = mem.device_ids.map((id) => plotlyText(`${platform} ${id}`));
  const fg = dark ? "#e6e8eb" : "#1b1f24";
  /** @param {Memory} m @param {string[]} base */
  const colour = (m, base) => m.bytes.map((b, k) => (m.imbalanced && b === m.max_bytes ? "#d62728" : base[(hostOf.get(m.device_ids[k]) ?? 0) % base.length]));
  /** @param {Memory} m @param {string} name @param {string[]} base @param {number} opacity */
  const trace = (m, name, base, opacity) => ({
    type: "bar",
    name,
    x,
    y: m.bytes.map((b) => b / unit),
    customdata: m.bytes.map((b, k) => `${fmtBytes(b)} · host ${hostOf.get(m.device_ids[k])}`),
    hovertemplate: "%{x}: %{customdata}<extra>" + name + "</extra>",
    marker: { color: colour(m, base) },
    opacity,
  });
  const traces = [trace(mem, "captured", ["#4c78a8", "#72b7b2", "#54a24b", "#b279a2"], next ? 0.45 : 1)];
  if (next) traces.push(trace(next, "what-if", ["#f58518", "#e45756", "#eeca3b", "#ff9da6"], 1));
  const shown = next || mem;
  const layout = {
    barmode: "group",
    height: 280,
    margin: { l: 70, r: 10, t: 10, b: 60 },
    paper_bgcolor: "rgba(0,0,0,0)",
    plot_bgcolor: "rgba(0,0,0,0)",
    font: { color: fg, size: 11 },
    yaxis: { title: { text: `${unitName} per device` }, gridcolor: dark ? "#2c323b" : "#e5e7eb", rangemode: "tozero", tickformat: "~g" },
    xaxis: { type: "category", tickangle: x.length > 16 ? -60 : "auto" },
    showlegend: Boolean(next),
    legend: { orientation: "h", y: 1.12 },
    shapes: shown.devices_with_data
      ? [{ type: "line", xref: "paper", x0: 0, x1: 1, y0: shown.mean_bytes / unit, y1: shown.mean_bytes / unit, line: { dash: "dot", width: 1, color: fg } }]
      : [],
  };
  await Plotly.react(container, traces, layout, { displayModeBar: false, responsive: true });
  container.dataset.plotted = String(Number(container.dataset.plotted || 0) + 1);
}
