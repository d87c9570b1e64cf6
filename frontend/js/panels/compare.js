// The comparison panel: two kernel runs, reshards or snapshots side by side — collectives matched up
// (with each side's shape and the op that caused it), bytes, estimates, memory, rooflines — with a
// verdict (POST /api/compare), a tie-breaker when the estimates are the same, and a share link; two plans
// (FSDP against FSDP × TP, one model on two slices) each with its verdict, HBM by kind and step time
// (components/plan.js). The two sides are the state (a, b), each as pasted: an address, "snapshot:<id>"
// or a /s/ link.

import { el, h, headedTable } from "../lib/dom.js";
import { showError } from "../lib/errors.js";
import { fmtBytes } from "../lib/format.js";
import { estimateText, estimateTitle, fmtSeconds, rooflinePanel } from "../components/estimates.js";
import { planSummary } from "../components/plan.js";
import { peakOf } from "../model/program.js";
import { resolveSide } from "../model/sides.js";
import { errorBox, shareAndStatus } from "./common.js";

export const VIEW = "compare";

/** @typedef {{a: string, b: string}} CState */

/** @param {URLSearchParams} q @returns {CState} */
export function fromQuery(q) {
  return { a: (q.get("a") || "").slice(0, 4000), b: (q.get("b") || "").slice(0, 4000) };
}

/** @param {CState} s */
export function toQuery(s) {
  const q = new URLSearchParams();
  if (s.a.trim()) q.set("a", s.a.trim());
  if (s.b.trim()) q.set("b", s.b.trim());
  return q.toString();
}

/** @param {number | null | undefined} v @param {(v: number) => string} f */
const maybe = (v, f) => (v === null || v === undefined ? "—" : f(v));

/** "4.0×" when `big` is well past `small`, else null. @param {number | null | undefined} small @param {number | null | undefined} big */
function times(small, big) {
  if (!small || !big || big <= small * 1.1) return null;
  return `${(big / small).toPrecision(2)}×`;
}

/**
 * When the estimates are about the same, what else tells the sides apart: the bytes their collectives
 * move and the memory each device needs. Null when nothing does.
 * @param {any} r a POST /api/compare answer
 * @returns {{cheaper: "a" | "b", text: string} | null}
 */
export function tieBreaker(r) {
  if (r.verdict.cheaper) return null;
  // One side with no collective at all (a fix that removed them): said first, in words (issue 28).
  const none = /** @type {("a" | "b")[]} */ (["a", "b"]).filter((k) => r[k].communication.count === 0);
  if (none.length === 1) {
    const side = none[0];
    const otherSide = side === "a" ? "b" : "a";
    const other = r[otherSide].communication;
    const hbm = times(r[side].hbm?.bytes_per_device ?? null, r[otherSide].hbm?.bytes_per_device ?? null);
    const more = hbm ? ` and ${hbm} less HBM per device` : "";
    const text = `${side.toUpperCase()} is cheaper by the tie-breakers: 0 collectives, where ${otherSide.toUpperCase()} has ${other.count} moving ${fmtBytes(other.bytes)} a step${more}`;
    return { cheaper: side, text };
  }
  /** @type {[string, number | null, number | null][]} */
  const measures = [
    ["fewer bytes moved by its collectives", r.a.communication.bytes, r.b.communication.bytes],
    ["less HBM per device", r.a.hbm?.bytes_per_device ?? null, r.b.hbm?.bytes_per_device ?? null],
  ];
  /** @type {Record<string, string[]>} */
  const wins = { a: [], b: [] };
  for (const [what, a, b] of measures) {
    if (a === null || b === null) continue;
    const ratio = a < b ? times(a, b) : times(b, a);
    if (ratio) wins[a < b ? "a" : "b"].push(`${ratio} ${what}`);
  }
  const side = wins.a.length > wins.b.length ? "a" : wins.b.length > wins.a.length ? "b" : null;
  if (!side) return null;
  return { cheaper: side, text: `${side.toUpperCase()} is cheaper by the tie-breakers: ${wins[side].join(" and ")}` };
}

/**
 * What one side's specs are: a kernel run's inputs then its outputs, a reshard's move, or a snapshot's
 * leaves by spec.
 * @param {any} s a side's summary
 * @param {{kind: string, side: any, snap?: any}} resolved what was pasted, resolved
 */
function specsText(s, resolved) {
  if (resolved.kind === "reshard") return `${resolved.side.reshard.from} → ${resolved.side.reshard.to} (a reshard)`;
  if (resolved.kind === "kernel") {
    const n = resolved.side.kernel.inputs ? resolved.side.kernel.inputs.length : 0;
    const ins = s.specs.slice(0, n).map((/** @type {string | null} */ x) => x ?? "—");
    const outs = s.specs.slice(n).map((/** @type {string | null} */ x) => x ?? "—");
    return `in ${ins.join(", ") || "—"}; out ${outs.join(", ") || "—"}`;
  }
  const snap = resolved.snap;
  if (!snap) return "—";
  /** @type {Map<string, number>} */
  const counts = new Map();
  for (const leaf of snap.leaves) if (leaf.spec) counts.set(leaf.spec, (counts.get(leaf.spec) || 0) + 1);
  const top = [...counts].sort((x, y) => y[1] - x[1]);
  const shown = top.slice(0, 4).map(([spec, n]) => `${spec} ×${n}`).join(", ");
  return `${snap.leaves.length} leaves: ${shown || "no specs"}${top.length > 4 ? `, and ${top.length - 4} more specs` : ""}`;
}

/**
 * The card "Sides": the two summaries as rows (what, specs, program, collectives, estimates, roofline terms, HBM),
 * the cheaper side's cells marked.
 * @param {HTMLElement} sides @param {import("../hosts/host.js").Host} host @param {any} r @param {any[]} sidesIn @param {string | null} cheaper
 */
function renderSides(sides, host, r, sidesIn, cheaper) {
  const { table, body } = headedTable("hops compare-sides", ["", "A", "B"]);
  const pair = [r.a, r.b];
  /** @param {string} name @param {(s: any, i: number) => string} f @param {string} [title] */
  const row = (name, f, title) => {
    const tr = body.insertRow();
    tr.appendChild(h("th", { scope: "row", title }, name));
    pair.forEach((s, i) => {
      const td = tr.insertCell();
      td.textContent = f(s, i);
      if (cheaper === (i === 0 ? "a" : "b")) td.classList.add("cheaper");
    });
  };
  const head = body.insertRow();
  head.appendChild(el("th", "", "open"));
  sidesIn.forEach((s, i) => head.insertCell().appendChild(h("a", { href: host.href ? s.href : null }, `open ${i === 0 ? "A" : "B"}`)));
  row("what", (s) => `${s.title}${s.mesh ? ` (mesh ${s.mesh})` : ""}`);
  row("specs", (s, i) => specsText(s, sidesIn[i]), "a kernel run's input specs, then its output specs");
  row("program", (s) => s.program);
  row("collectives", (s) => `${s.communication.count}, ${fmtBytes(s.communication.bytes)} of results per device`);
  row("communication (estimate)", (s) => (s.communication.seconds === null ? `no estimate` : `bound ${fmtSeconds(s.communication.seconds)} · expected ${fmtSeconds(s.communication.expected_seconds ?? s.communication.seconds)}`), "Σ the collectives' estimates × their repeat counts (loops)");
  row("compute (estimate)", (s) => maybe(s.roofline?.compute_seconds, fmtSeconds), "flops (loop bodies counted per run) / peak FLOP/s");
  row("memory (estimate)", (s) => maybe(s.roofline?.memory_seconds, fmtSeconds), "HBM traffic / HBM bandwidth");
  row("bound", (s) => s.roofline?.bound || "—");
  row("lower bound on run time", (s) => maybe(s.lower_bound_seconds, fmtSeconds), "at 100 % MFU: max(compute, memory, communication), all at spec-sheet figures");
  if (sidesIn.some((x) => x.snap?.plan)) {
    // a plan's step time: the cost model's expected time beside the roofline's lower bound
    row("expected step time (plan)", (_s, i) => maybe(sidesIn[i].snap?.plan?.step_time?.expected_seconds, fmtSeconds), "the compiled schedule replayed: work at efficiencies fitted to published runs, each collective at its expected time, overlapped as scheduled");
    row("peak HBM (XLA)", (_s, i) => maybe(peakOf(sidesIn[i].snap?.program), fmtBytes), "XLA's memory_analysis: peak_memory_in_bytes per device");
  }
  row("HBM", (s) => s.hbm?.text || "—");
  row("not modelled", (s) => s.roofline?.why || (s.roofline ? "" : "no cost analysis (a snapshot)") || "—");
  sides.replaceChildren(table);
}

/**
 * The card "Collectives, matched up": the matched collectives, four columns so A, B and Δ are in view at 1440 px (cards on a phone, app.css):
 * the op and its mesh axes; each side's bytes and estimate, its shape and groups, the line and JAX op that
 * make it; Δ (B − A) of time and bytes.
 * @param {HTMLElement} matched @param {any} r
 */
function renderMatched(matched, r) {
  const { table, body } = headedTable("hops collectives compare-matched", ["collective", "A", "B", "Δ (B − A)"]);
  for (const m of r.collectives) {
    const row = body.insertRow();
    row.dataset.paired = String(Boolean(m.a && m.b));
    const op = row.insertCell();
    op.className = "op";
    op.dataset.label = "collective";
    op.append(h("strong", {}, m.op || ""), h("div", { class: "muted axes", "data-field": "axes" }, m.axes_text ? `mesh axes ${m.axes_text}` : "no mesh axes"));
    for (const [key, s] of /** @type {[string, any][]} */ ([["A", m.a], ["B", m.b]])) {
      const td = row.insertCell();
      td.className = `side${s ? "" : " absent"}`;
      td.dataset.label = key;
      td.dataset.side = key.toLowerCase();
      if (!s) {
        td.textContent = `— none on ${key}'s side`;
        continue;
      }
      const est = s.seconds === null ? { seconds: null, why: s.why } : { seconds: s.seconds, expected_seconds: s.expected_seconds, fabric: s.fabric, formula: s.formula };
      const estimate = h("span", { class: "estimate", title: estimateTitle(est) }, estimateText(est, s.repeat));
      const bytes = h("strong", { class: "num", "data-field": "bytes", title: s.bytes === null ? "" : `${s.bytes.toLocaleString("en-US")} bytes per device` }, s.bytes === null ? "—" : fmtBytes(s.bytes));
      td.append(h("div", {}, bytes, " · ", estimate),
        h("div", { class: "muted" }, h("span", { class: "mono", "data-field": "shape" }, s.shape || "—"), ` · ${s.groups}`),
        h("div", { class: "source", "data-field": "from", title: [s.line, s.source, s.name].filter(Boolean).join("\n") }, [s.line, s.source || s.name].filter(Boolean).join(" · ") || "—"));
    }
    const delta = row.insertCell();
    delta.className = "num delta";
    delta.dataset.label = "Δ (B − A)";
    const ds = m.delta_seconds;
    const db = m.delta_bytes;
    const sign = (/** @type {number} */ d) => (d > 0 ? "+" : d < 0 ? "−" : "");
    if (ds === null && db === null) delta.append(h("span", { class: "muted" }, m.a && m.b ? "" : "unmatched"));
    if (ds !== null) delta.append(h("div", { class: ds > 0 ? "worse" : ds < 0 ? "better" : "", "data-field": "delta-seconds" }, `${sign(ds)}${fmtSeconds(Math.abs(ds))}`));
    if (db !== null) delta.append(h("div", { "data-field": "delta-bytes" }, `${sign(db)}${fmtBytes(Math.abs(db))}`));
  }
  matched.replaceChildren(r.collectives.length ? table : el("p", "muted", "neither side has collectives"));
}

/** The card "Plans": each plan's verdict, HBM by kind and step time, side by side. @param {HTMLElement} plans @param {any[]} sidesIn @param {boolean} dark */
function renderPlans(plans, sidesIn, dark) {
  plans.replaceChildren();
  plans.hidden = !sidesIn.some((x) => x.snap?.plan);
  if (plans.hidden) return;
  sidesIn.forEach((x, i) => {
    const box = h("section", { class: "compare-plan", part: `plan-${i === 0 ? "a" : "b"}` });
    const body = h("div");
    box.append(h("h3", {}, `${i === 0 ? "A" : "B"}: ${x.snap?.name ?? "no plan"}`), body);
    if (x.snap?.plan) planSummary(body, x.snap, { dark, compact: true });
    else body.appendChild(el("p", "muted", "not a plan: a kernel run, a reshard or a capture without one"));
    plans.appendChild(box);
  });
}

/**
 * @param {HTMLElement} root
 * @param {import("../hosts/host.js").Host} host
 * @param {CState} initial
 */
export function mount(root, host, initial) {
  const data = host.data;
  /** @type {any[]} */
  let catalog = [];
  let token = 0;
  /** The sides on show (their plans are drawn again when the colour scheme changes). @type {any[] | null} */
  let shownSides = null;

  // ---------------------------------------------------------------- DOM
  root.classList.add("app");
  const boxA = h("textarea", { rows: 4, spellcheck: "false", "aria-label": "Side A", part: "side-a" });
  const boxB = h("textarea", { rows: 4, spellcheck: "false", "aria-label": "Side B", part: "side-b" });
  const swap = h("button", { type: "button", part: "swap" }, "Swap");
  const form = h("form", { class: "compare-form", part: "compare-form", novalidate: true },
    h("fieldset", {}, h("legend", {}, "Sides"),
      h("p", { class: "muted" }, "Paste a kernel-lab address, a layout-explorer address with a reshard target (", h("q", {}, "Reshard to…"),
        "), a snapshots-page address, ", h("code", {}, "snapshot:<id>"), ", or any ", h("code", {}, "/s/"), " share link of those."),
      h("label", {}, "A ", boxA), h("label", {}, "B ", boxB)),
    h("div", { class: "row actions" }, h("button", { type: "submit", class: "primary", part: "run" }, "Compare"), swap));
  const compareError = errorBox("compare-error");
  const aside = h("aside", { class: "controls", "aria-label": "Comparison controls" }, form, compareError,
    h("p", { class: "muted" }, "Every time on this page is an estimate from public hardware figures (GET /api/hardware lists them with their sources) and the formulas of How to Scale Your Model; hover a cell for its formula."));
  const compareState = h("span", { class: "run-state", role: "status", "aria-live": "polite", part: "compare-state" }, "paste two sides and compare");
  const toolbar = h("div", { class: "toolbar" }, compareState, h("span", { class: "spacer" }));
  const verdict = h("p", { class: "verdict", part: "verdict" });
  const notes = h("ul", { class: "muted verdict-notes", part: "verdict-notes" });
  const sides = h("div", { class: "table-wrap", part: "sides" });
  const rooflines = h("div", { class: "compare-rooflines", part: "rooflines" });
  const plans = h("div", { class: "compare-plans", part: "plans", hidden: true });
  const matched = h("div", { class: "table-wrap", part: "matched" });
  const note = h("p", { class: "muted", part: "note" });
  const results = h("div", { class: "compare-results", part: "results", hidden: true },
    verdict, notes, sides, plans, rooflines,
    h("h2", {}, "Collectives, matched up"),
    h("p", { class: "muted" }, "Only the same op along the same mesh axes is paired: by source line, then size; a collective with no match stands alone. Δ is B − A."),
    matched, note);
  root.replaceChildren(aside, h("section", { class: "view", "aria-label": "Comparison" }, toolbar, results));

  /** @returns {CState} */
  const current = () => ({ a: boxA.value, b: boxB.value });
  /** @param {unknown} err */
  const fail = (err) => showError(compareError, err, { hintLabel: "What to change: " });
  shareAndStatus(toolbar, host, current, fail, compareState);

  /** @param {string} text @param {string} name */
  function setState(text, name) {
    compareState.textContent = text;
    compareState.dataset.state = name;
  }

  /** A side as pasted, resolved; a snapshot side's snapshot too (its specs). @param {string} text */
  async function resolved(text) {
    const link = /** @type {NonNullable<typeof data.link>} */ (data.link);
    const side = await resolveSide(text, catalog, link);
    const snap = side.kind === "snapshot" && data.snapshot ? await data.snapshot(side.side.snapshot) : null;
    return { ...side, snap };
  }

  async function run() {
    host.save(current(), false);
    const t = ++token;
    fail(null);
    results.classList.add("stale");
    setState("comparing…", "running");
    try {
      const ask = /** @type {NonNullable<typeof data.compare>} */ (data.compare);
      const [a, b] = await Promise.all([resolved(boxA.value), resolved(boxB.value)]);
      const result = await ask({ ...a.side, label: "A" }, { ...b.side, label: "B" });
      if (t !== token) return;
      render(result, [a, b]);
      setState("done", "done");
      requestAnimationFrame(() => host.bump("compares"));
    } catch (e) {
      if (t !== token) return;
      fail(e);
      setState("failed", "error");
      host.bump("errors");
    }
  }

  /** @param {any} r @param {any[]} sidesIn */
  function render(r, sidesIn) {
    results.hidden = false;
    results.classList.remove("stale");
    const v = r.verdict;
    const tie = tieBreaker(r);
    const cheaper = v.cheaper || tie?.cheaper || null;
    verdict.replaceChildren(h("strong", {}, `${v.text.charAt(0).toUpperCase()}${v.text.slice(1)}`), " (estimates)");
    if (tie) verdict.append(h("br"), h("span", { class: "tie-breaker", part: "tie-breaker" }, `${tie.text}.`));
    verdict.dataset.cheaper = cheaper || "";
    notes.replaceChildren(...v.notes.map((/** @type {string} */ n) => el("li", "", n)));
    renderSides(sides, host, r, sidesIn, cheaper);
    shownSides = sidesIn;
    renderPlans(plans, sidesIn, host.dark());
    rooflines.replaceChildren();
    for (const [name, s] of [["A", r.a], ["B", r.b]]) {
      const box = el("div", "compare-roofline");
      if (s.roofline) rooflinePanel(box, s.roofline, `${name}: roofline`);
      else box.appendChild(el("p", "muted", `${name}: no roofline (snapshots carry no cost analysis)`));
      rooflines.appendChild(box);
    }
    renderMatched(matched, r);
    note.textContent = r.note;
  }

  /** @param {CState} s */
  function show(s) {
    boxA.value = s.a;
    boxB.value = s.b;
  }

  form.addEventListener("submit", (e) => {
    e.preventDefault();
    run();
  });
  swap.addEventListener("click", () => {
    [boxA.value, boxB.value] = [boxB.value, boxA.value];
    run();
  });
  show(initial);
  const stopTheme = host.onTheme(() => shownSides && renderPlans(plans, shownSides, host.dark()));
  const ready = data.kernels ? data.kernels().then((c) => (catalog = c.kernels), fail) : Promise.resolve();
  ready.then(() => {
    host.bump("ready");
    if (boxA.value.trim() && boxB.value.trim()) run();
  });

  return {
    update(next) {
      show(next);
      if (next.a && next.b) run();
    },
    dispose() {
      token++;
      stopTheme();
    },
  };
}
