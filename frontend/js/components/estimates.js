// Cost estimates as the API reports them (sharding_core/cost): a collective's estimate as a table cell,
// the total under a collectives table, and a program's roofline (compute, memory, communication, the
// bound, a lower bound on run time, HBM fit). Every time is labelled: the **bound** (spec-sheet bandwidths
// and latencies, the book's formulas) and the **expected** time (each fabric at its efficiency fitted to
// published measurements); a collective inside a loop says how many times it runs. The formula is on
// hover; where there are no hardware figures it says why.

import { el, svgEl } from "../lib/dom.js";
import { fmtBytes, fmtSeconds } from "../lib/format.js";

export { fmtSeconds }; // the one formatter is lib/format.js; views import it from here too

/**
 * @typedef {{seconds: number | null, bound_seconds?: number | null, expected_seconds?: number | null,
 *   formula?: string, inputs?: Record<string, any>, fabric?: string, why?: string}} Estimate
 * @typedef {{source: string, hardware: string | null, dtype: string, compute_seconds: number | null,
 *   memory_seconds: number | null, communication_seconds: number | null,
 *   communication_expected_seconds?: number | null, bound: string | null,
 *   lower_bound_seconds: number | null, serial_seconds: number | null, formula: string,
 *   inputs: Record<string, any>, hbm: {bytes_per_device: number | null, capacity_bytes: number | null,
 *   fits: boolean | null, over_bytes: number | null, text: string}, why: string | null}} Roofline
 */

/** "× 10" for a collective that runs 10 times per run of its program (loops), "" otherwise. @param {number | undefined} repeat */
export function repeatText(repeat) {
  return repeat && repeat > 1 ? ` × ${repeat}` : "";
}

/**
 * "bound 280 µs · expected 350 µs · ici" (per run; "× 10" when it runs in a loop), or "no estimate".
 * @param {Estimate | undefined} e
 * @param {number} [repeat]
 */
export function estimateText(e, repeat) {
  if (!e) return "—";
  if (e.seconds === null || e.seconds === undefined) return "no estimate";
  const times = repeatText(repeat);
  const expected = e.expected_seconds === null || e.expected_seconds === undefined ? "" : ` · expected ${fmtSeconds(e.expected_seconds)}${times}`;
  return `bound ${fmtSeconds(e.seconds)}${times}${expected}${e.fabric ? ` · ${e.fabric}` : ""}`;
}

/** The hover text: the formula and the inputs, or why there is no estimate. @param {Estimate | undefined} e */
export function estimateTitle(e) {
  if (!e) return "no estimate (captured before estimates existed)";
  if (e.seconds === null || e.seconds === undefined) return `no estimate: ${e.why || "no hardware figures"}`;
  const inputs = Object.entries(e.inputs || {})
    .filter(([, v]) => typeof v !== "object" || v === null)
    .map(([k, v]) => `${k} = ${typeof v === "number" ? Number(v.toPrecision(4)) : v}`);
  const from = e.profile || Object.values(e.inputs?.profiles || {}).find((p) => p !== "fitted") || "fitted to published measurements";
  const expected = e.expected_seconds === null || e.expected_seconds === undefined ? "" : `\nexpected: each fabric's bandwidth term over its efficiency for the operation, plus its latency (${JSON.stringify(e.inputs?.efficiency || {})}; ${from})`;
  return `bound: ${e.formula || ""}${expected}\n${inputs.join(", ")}`;
}

/**
 * Fills a table cell with a collective's estimate (bound, expected and fabric; formula and inputs on hover).
 * @param {HTMLTableCellElement} td
 * @param {Estimate | undefined} e
 * @param {number} [repeat] runs per program run (loops)
 */
export function estimateCell(td, e, repeat) {
  td.textContent = estimateText(e, repeat);
  td.title = estimateTitle(e);
  td.classList.add("estimate");
  if (!e || e.seconds === null || e.seconds === undefined) td.classList.add("no-estimate");
}

/**
 * The sum of the collectives' estimates, each times its repeat count: "Estimated communication: bound 1.2 ms ·
 * expected 1.5 ms over 5 collectives (12 runs: loops), ..." Shown under a collectives table.
 * @param {HTMLElement} container
 * @param {{bytes: number | null, repeat?: number, estimate?: Estimate}[]} collectives
 */
export function estimateTotal(container, collectives) {
  let total = 0;
  let expected = 0;
  let runs = 0;
  /** @type {Estimate[]} */
  const missing = [];
  let bytes = 0;
  for (const c of collectives) {
    const times = c.repeat && c.repeat > 0 ? c.repeat : 1;
    runs += times;
    bytes += (c.bytes || 0) * times;
    const e = c.estimate;
    if (!e || e.seconds === null || e.seconds === undefined) missing.push(e || { seconds: null });
    else {
      total += e.seconds * times;
      expected += (e.expected_seconds ?? e.seconds) * times;
    }
  }
  const p = el("p", "estimate-total");
  p.dataset.seconds = String(missing.length === collectives.length && collectives.length ? "" : total);
  p.dataset.expected = String(missing.length === collectives.length && collectives.length ? "" : expected);
  const n = collectives.length;
  const head = missing.length === n && n ? "no estimate" : `bound ${fmtSeconds(total)} · expected ${fmtSeconds(expected)}`;
  const loops = runs > n ? ` (${runs} runs: some run in loops)` : "";
  p.append(el("strong", "", `Estimated communication: ${head}`), ` over ${n} collective${n === 1 ? "" : "s"}${loops}, ${fmtBytes(bytes)} of results per device`);
  if (missing.length) {
    const why = missing.find((e) => e.why)?.why || "no hardware figures";
    p.append(el("span", "muted", ` (${missing.length} without an estimate: ${why})`));
  }
  container.replaceChildren(p);
}

const TERMS = /** @type {const} */ ([
  ["compute", "compute_seconds", "flops / peak FLOP/s"],
  ["memory", "memory_seconds", "HBM traffic / HBM bandwidth (arguments + outputs, or every matmul's operands and result per run)"],
  ["communication", "communication_seconds", "Σ collective bounds × repeats"],
]);

/**
 * A roofline panel: three bars (compute, memory, communication) on one scale, the bound marked, the
 * communication's expected time beside its bound (dashed), the lower bound on run time, HBM fit, and
 * what the model has no figures for.
 * "With nothing overlapped" has one meaning wherever it is shown: the serial sum with each collective at its
 * expected time (a plan's step-time upper bound, passed as `nothingOverlapped`; else computed the same way).
 * @param {HTMLElement} container
 * @param {Roofline | null | undefined} r
 * @param {string} [title]
 * @param {number | null} [nothingOverlapped]
 */
export function rooflinePanel(container, r, title = "Roofline", nothingOverlapped = null) {
  container.replaceChildren();
  if (!r) return;
  const box = el("section", "roofline");
  box.setAttribute("aria-label", `${title} (estimate)`);
  const head = el("h3", "roofline-head", `${title} (estimate)`);
  head.append(el("span", "muted", ` ${r.hardware ? `on ${r.hardware}` : ""} — ${r.source}`));
  box.appendChild(head);
  const values = TERMS.map(([, key]) => r[key]);
  // communication's expected time (each fabric at its fitted efficiency and latency) beside its bound
  const expected = r.communication_expected_seconds ?? null;
  const max = Math.max(0, ...[...values, expected].filter((v) => v !== null && v !== undefined).map(Number));
  if (r.hardware && max > 0) {
    // Drawn in CSS pixels, not scaled from a viewBox: a 390 px phone shrank a 600-unit drawing's 12 px
    // labels to 6 px. Each term is a line of text (name left, time right) over a bar whose length is a
    // percentage of the row, so the bars follow the box's width and the text keeps its size.
    const rowH = 32;
    const height = TERMS.length * rowH;
    const svg = svgEl("svg", { width: "100%", height, role: "img", class: "roofline-bars" });
    svgEl("title", {}, svg).textContent = `roofline: ${TERMS.map(([name], i) => `${name} ${fmtSeconds(values[i])}`).join(", ")}`;
    /** @param {number} v a time @returns {string} its share of the longest, as a bar's width */
    const pct = (v) => `${Math.max(0.2, (99.5 * v) / max).toFixed(2)}%`; // 99.5: the dashed stroke stays inside
    TERMS.forEach(([name, key, formula], i) => {
      const v = r[key];
      const y = i * rowH;
      const g = svgEl("g", { class: `bar ${name}${r.bound === name ? " bound" : ""}` }, svg);
      const also = name === "communication" && expected !== null ? `; expected ${fmtSeconds(expected)}: each fabric at its fitted efficiency and latency (dashed)` : "";
      svgEl("title", {}, g).textContent = `${name}: bound ${fmtSeconds(v)} = ${formula}${also}`;
      svgEl("text", { x: 0, y: y + 13, class: "bar-label" }, g).textContent = name;
      const more = name === "communication" && expected !== null && v !== null;
      const value = v === null ? "no figure" : more ? `${fmtSeconds(v)} · expected ${fmtSeconds(expected)}` : fmtSeconds(v);
      svgEl("text", { x: "100%", y: y + 13, "text-anchor": "end", class: "bar-value" }, g).textContent = value;
      svgEl("rect", { x: 0, y: y + 17, width: v === null ? 0 : pct(v), height: 10, rx: 2 }, g);
      if (more) svgEl("rect", { x: 0, y: y + 17.5, width: pct(Number(expected)), height: 9, rx: 2, class: "expected" }, g);
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
  const comm = r.communication_expected_seconds ?? r.communication_seconds;
  const serial = nothingOverlapped ?? [r.compute_seconds, r.memory_seconds, comm].reduce((/** @type {number} */ t, v) => t + (v ?? 0), 0);
  row("at 100 % MFU", r.lower_bound_seconds !== null ? `${fmtSeconds(r.lower_bound_seconds)} per run (the lower bound: all overlapped); ${fmtSeconds(serial)} with nothing overlapped` : "no estimate")
    .title = "with nothing overlapped: compute + memory + communication, each collective at its expected time";
  if (r.communication_expected_seconds !== null && r.communication_expected_seconds !== undefined && r.communication_seconds !== null) {
    row("communication", `bound ${fmtSeconds(r.communication_seconds)} · expected ${fmtSeconds(r.communication_expected_seconds)}`);
  }
  if (r.inputs.intensity !== undefined && r.inputs.critical_intensity !== undefined) {
    row("intensity", `${Number(r.inputs.intensity).toPrecision(3)} flops/byte vs ${Number(r.inputs.critical_intensity).toPrecision(3)} for this hardware`).title = "the book's arithmetic-intensity rule: compute-bound above the hardware's flops per byte of HBM bandwidth";
  }
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
