// A compiled program's report drawn the same way wherever it is shown (the kernel lab's run and its TPU
// compile; the snapshot panel's plan draws the same memory through components/plan.js): its memory and
// work as lines of a summary, Shardy's sharding origins, XLA's warnings. Its collectives are
// components/collectives.js, its roofline components/estimates.js, a plan's HBM components/plan.js: the
// family reads the report through model/program.js.

import { el, h } from "../lib/dom.js";
import { fmtBytes, fmtCount } from "../lib/format.js";
import { compilerLog, memoryOf, workOf } from "../model/program.js";

/** "arguments 1 KiB, outputs …, temporaries …, peak …" per device. @param {import("../model/program.js").Report | null | undefined} report */
export function memoryText(report) {
  const mem = memoryOf(report) || {};
  const peak = mem.peak_memory_in_bytes !== null && mem.peak_memory_in_bytes !== undefined ? `, peak ${fmtBytes(mem.peak_memory_in_bytes)}` : "";
  return `arguments ${fmtBytes(mem.argument_size_in_bytes ?? 0)}, outputs ${fmtBytes(mem.output_size_in_bytes ?? 0)}, temporaries ${fmtBytes(mem.temp_size_in_bytes ?? 0)}${peak}`;
}

/**
 * "12 Mflops, 3 MB accessed, …" per device: XLA's cost_analysis (each loop body once, as XLA reports it).
 * @param {import("../model/program.js").Report | null | undefined} report
 * @param {{flopsOnly?: boolean}} [opts]
 */
export function workText(report, opts = {}) {
  const work = workOf(report) || {};
  const flops = work.flops_xla !== null && work.flops_xla !== undefined ? `${fmtCount(work.flops_xla)} flops` : "no flops reported";
  if (opts.flopsOnly) return flops;
  return [
    flops,
    work.bytes_accessed_xla !== null && work.bytes_accessed_xla !== undefined ? `${fmtCount(work.bytes_accessed_xla)}B accessed` : "",
    work.transcendentals ? `${fmtCount(work.transcendentals)} transcendentals` : "",
  ].filter(Boolean).join(", ");
}

/** @param {any} entry */
function originsText(entry) {
  if (!entry) return "no sharding from propagation (replicated or decided by the partitioner)";
  return entry.origins.map((/** @type {any} */ o) => `${o.axis} ← ${o.meaning}`).join("; ") || "—";
}

/**
 * The card "Where did these shardings come from?": Shardy's sharding origins of each output and value.
 * @param {HTMLElement} parent
 */
export function mountOrigins(parent) {
  const note = h("p", { class: "muted", part: "origins-note" });
  const origins = h("div", { part: "origins" });
  parent.append(h("details", { part: "origins-box" }, h("summary", {}, "Where did these shardings come from? (Shardy's sharding origins)"), note, origins));
  return {
    /**
     * @param {import("../model/program.js").Report} report
     * @param {{name: string, spec: string}[]} outputs the program's outputs (named as the run names them)
     * @param {string} why what the origins are (or why there are none)
     */
    render(report, outputs, why) {
      note.textContent = why;
      origins.replaceChildren();
      const found = report.origins;
      if (!found) return;
      const outs = el("ul", "origin-outputs");
      outputs.forEach((o, i) => {
        const entry = found.outputs[i];
        outs.appendChild(h("li", {}, h("strong", {}, o.name), ` ${entry && entry.sharding ? entry.sharding : o.spec}: ${originsText(entry)}`));
      });
      origins.appendChild(outs);
      const table = el("table", "hops origins");
      const head = table.createTHead().insertRow();
      for (const text of ["value", "op", "sharding", "each axis came from"]) head.appendChild(el("th", "", text));
      const body = table.createTBody();
      for (const e of found.entries) {
        const row = body.insertRow();
        for (const text of [e.value + (e.name ? ` [${e.name}]` : ""), e.op, e.sharding || "", originsText(e)]) row.insertCell().textContent = text;
      }
      origins.appendChild(table);
      if (found.truncated) origins.appendChild(el("p", "muted", "(only the first entries are shown)"));
    },
  };
}

/** The card "Compiler warnings": XLA's, hidden when it said nothing. @param {HTMLElement} parent */
export function mountCompilerLog(parent) {
  const list = h("ul", { class: "compiler-log", part: "compiler-log" });
  const box = h("details", { part: "log-box", hidden: true }, h("summary", {}, "Compiler warnings"), list);
  parent.append(box);
  return {
    /** @param {import("../model/program.js").Report} report */
    render(report) {
      const log = compilerLog(report);
      box.hidden = !log.length;
      list.replaceChildren(...log.map((l) => el("li", "", l)));
    },
  };
}
