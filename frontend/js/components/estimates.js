// Cost estimates as the API reports them (sharding_core/cost): a collective's estimate as a table cell,
// the total under a collectives table, and a program's roofline (compute, memory, communication, the
// bound, a lower bound on run time, HBM fit). Everything is labelled an estimate, with its formula on
// hover; where there are no hardware figures it says why.

import { el, svgEl } from "../lib/dom.js";
import { fmtBytes } from "../lib/format.js";

/**
 * @typedef {{seconds: number | null, formula?: string, inputs?: Record<string, any>, fabric?: string,
 *   why?: string}} Estimate
 * @typedef {{source: string, hardware: string | null, dtype: string, compute_seconds: number | null,
 *   memory_seconds: number | null, communication_seconds: number | null, bound: string | null,
 *   lower_bound_seconds: number | null, serial_seconds: number | null, formula: string,
 *   inputs: Record<string, any>, hbm: {bytes_per_device: number | null, capacity_bytes: number | null,
 *   fits: boolean | null, over_bytes: number | null, text: string}, why: string | null}} Roofline
 */

/** Seconds with a unit that reads: "93.2 µs", "1.40 ms", "2.1 s"; "—" for none. @param {number | null | undefined} s */
export function fmtSeconds(s) {
  if (s === null || s === undefined || Number.isNaN(s)) return "—";
  if (s === 0) return "0 s";
  for (const [unit, scale] of /** @type {[string, number][]} */ ([["s", 1], ["ms", 1e-3], ["µs", 1e-6], ["ns", 1e-9]])) {
    if (s >= scale) return `${(s / scale).toPrecision(3).replace(/\.?0+$/, "")} ${unit}`;
  }
  return `${s.toExponential(2)} s`;
}

/** "93.2 µs · ici", or "no estimate". @param {Estimate | undefined} e */
export function estimateText(e) {
  if (!e) return "—";
  if (e.seconds === null || e.seconds === undefined) return "no estimate";
  return `${fmtSeconds(e.seconds)}${e.fabric ? ` · ${e.fabric}` : ""}`;
}

/** The hover text: the formula and the inputs, or why there is no estimate. @param {Estimate | undefined} e */
export function estimateTitle(e) {
  if (!e) return "no estimate (captured before estimates existed)";
  if (e.seconds === null || e.seconds === undefined) return `no estimate: ${e.why || "no hardware figures"}`;
  const inputs = Object.entries(e.inputs || {})
    .filter(([, v]) => typeof v !== "object" || v === null)
    .map(([k, v]) => `${k} = ${typeof v === "number" ? Number(v.toPrecision(4)) : v}`);
  return `estimate: ${e.formula || ""}\n${inputs.join(", ")}`;
}

/**
 * Fills a table cell with a collective's estimate (time and fabric; formula and inputs on hover).
 * @param {HTMLTableCellElement} td
 * @param {Estimate | undefined} e
 */
export function estimateCell(td, e) {
  td.textContent = estimateText(e);
  td.title = estimateTitle(e);
  td.classList.add("estimate");
  if (!e || e.seconds === null || e.seconds === undefined) td.classList.add("no-estimate");
}

/**
 * The sum of the collectives' estimates: "estimated communication: 1.2 ms over 5 collectives (2 without
 * an estimate: why)". Shown under a collectives table.
 * @param {HTMLElement} container
 * @param {{bytes: number | null, estimate?: Estimate}[]} collectives
 */
export function estimateTotal(container, collectives) {
  let total = 0;
  /** @type {Estimate[]} */
  const missing = [];
  let bytes = 0;
  for (const c of collectives) {
    bytes += c.bytes || 0;
    const e = c.estimate;
    if (!e || e.seconds === null || e.seconds === undefined) missing.push(e || { seconds: null });
    else total += e.seconds;
  }
  const p = el("p", "estimate-total");
  p.dataset.seconds = String(missing.length === collectives.length && collectives.length ? "" : total);
  const n = collectives.length;
  const head = missing.length === n && n ? "no estimate" : `${fmtSeconds(total)}`;
  p.append(el("strong", "", `Estimated communication: ${head}`), ` over ${n} collective${n === 1 ? "" : "s"}, ${fmtBytes(bytes)} of results per device`);
  if (missing.length) {
    const why = missing.find((e) => e.why)?.why || "no hardware figures";
    p.append(el("span", "muted", ` (${missing.length} without an estimate: ${why})`));
  }
  container.replaceChildren(p);
}

const TERMS = /** @type {const} */ ([
  ["compute", "compute_seconds", "flops / peak FLOP/s"],
  ["memory", "memory_seconds", "bytes accessed / HBM bandwidth"],
  ["communication", "communication_seconds", "Σ collective estimates"],
]);

/**
 * A roofline panel: three bars (compute, memory, communication) on one scale, the bound marked, the lower
 * bound on run time, HBM fit, and what the model has no figures for.
 * @param {HTMLElement} container
 * @param {Roofline | null | undefined} r
 * @param {string} [title]
 */
export function rooflinePanel(container, r, title = "Roofline") {
  container.replaceChildren();
  if (!r) return;
  const box = el("section", "roofline");
  box.setAttribute("aria-label", `${title} (estimate)`);
  const head = el("h3", "roofline-head", `${title} (estimate)`);
  head.append(el("span", "muted", ` ${r.hardware ? `on ${r.hardware}` : ""} — ${r.source}`));
  box.appendChild(head);
  const values = TERMS.map(([, key]) => r[key]);
  const max = Math.max(0, ...values.filter((v) => v !== null).map(Number));
  if (r.hardware && max > 0) {
    const width = 520;
    const label = 120;
    const rowH = 22;
    const svg = svgEl("svg", { viewBox: `0 0 ${width} ${TERMS.length * rowH + 4}`, width, height: TERMS.length * rowH + 4, role: "img", class: "roofline-bars" });
    svgEl("title", {}, svg).textContent = `roofline: ${TERMS.map(([name], i) => `${name} ${fmtSeconds(values[i])}`).join(", ")}`;
    TERMS.forEach(([name, key, formula], i) => {
      const v = r[key];
      const y = i * rowH + 2;
      const g = svgEl("g", { class: `bar ${name}${r.bound === name ? " bound" : ""}` }, svg);
      svgEl("title", {}, g).textContent = `${name}: ${fmtSeconds(v)} = ${formula}`;
      svgEl("text", { x: 0, y: y + 15, class: "bar-label" }, g).textContent = name;
      const w = v === null ? 0 : Math.max(1, ((width - label - 90) * v) / max);
      svgEl("rect", { x: label, y, width: w, height: rowH - 6, rx: 2 }, g);
      svgEl("text", { x: label + w + 6, y: y + 15, class: "bar-value" }, g).textContent = v === null ? "no figure" : fmtSeconds(v);
    });
    box.appendChild(svg);
  }
  const facts = el("dl", "roofline-facts");
  /** @param {string} k @param {string} v @param {string} [cls] */
  const row = (k, v, cls) => {
    const dd = el("dd", cls || "", v);
    facts.append(el("dt", "", k), dd);
    return dd;
  };
  if (r.bound) row("bound", `${r.bound}-bound`, "bound");
  row("lower bound", r.lower_bound_seconds !== null ? `${fmtSeconds(r.lower_bound_seconds)} per run (all overlapped); ${fmtSeconds(r.serial_seconds)} with no overlap` : "no estimate");
  const hbm = r.hbm;
  row("HBM", hbm.text, hbm.fits === false ? "over" : hbm.fits ? "fits" : "");
  const peak = r.inputs.peak_flops && r.compute_seconds !== null ? `${fmtSeconds(r.compute_seconds)} = ${Number(r.inputs.flops).toPrecision(3)} flops / ${(r.inputs.peak_flops / 1e12).toPrecision(4)} TFLOP/s (${r.dtype})` : "";
  if (peak) row("compute", peak).title = r.inputs.peak_note || "";
  if (r.why) row("not modelled", r.why, "muted");
  box.appendChild(facts);
  const formula = el("p", "muted roofline-formula", r.formula);
  box.appendChild(formula);
  container.appendChild(box);
}
