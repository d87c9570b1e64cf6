// The comparison (compare.html): two kernel runs, reshards or snapshots side by side — collectives matched
// up, bytes, estimates, memory, rooflines — with a verdict (POST /api/compare) and a share link. The two
// sides are the page's URL state (?a=…&b=…), each as pasted: an address, "snapshot:<id>" or a /s/ link.

import { getJSON, postJSON } from "../lib/api.js";
import { cellsOf, el, headedTable } from "../lib/dom.js";
import { showError } from "../lib/errors.js";
import { fmtBytes } from "../lib/format.js";
import { bootPage, bump, byId } from "../lib/page.js";
import { shareControl } from "../lib/share.js";
import { onBackForward, pageQuery, writeUrl } from "../lib/url.js";
import { estimateText, estimateTitle, fmtSeconds, rooflinePanel } from "../components/estimates.js";
import { resolveSide } from "../model/sides.js";

const boxA = /** @type {HTMLTextAreaElement} */ (byId("side-a"));
const boxB = /** @type {HTMLTextAreaElement} */ (byId("side-b"));
/** @type {any[]} */
let catalog = [];
let token = 0;

/** @param {unknown} err */
const fail = (err) => showError(byId("compare-error"), err, { hintLabel: "What to change: " });

/** @param {string} text @param {string} name */
function setState(text, name) {
  byId("compare-state").textContent = text;
  document.body.dataset.compareState = name;
}

function query() {
  const q = new URLSearchParams();
  if (boxA.value.trim()) q.set("a", boxA.value.trim());
  if (boxB.value.trim()) q.set("b", boxB.value.trim());
  return q.toString();
}

/** @param {URLSearchParams} q */
function fromQuery(q) {
  boxA.value = (q.get("a") || "").slice(0, 4000);
  boxB.value = (q.get("b") || "").slice(0, 4000);
}

async function run() {
  writeUrl("/compare.html", query(), false);
  const t = ++token;
  fail(null);
  byId("results").classList.add("stale");
  setState("comparing…", "running");
  try {
    const [a, b] = await Promise.all([resolveSide(boxA.value, catalog), resolveSide(boxB.value, catalog)]);
    const result = await postJSON("/api/compare", { a: { ...a.side, label: "A" }, b: { ...b.side, label: "B" } });
    if (t !== token) return;
    render(result, [a.href, b.href]);
    setState("done", "done");
    requestAnimationFrame(() => bump("compares"));
  } catch (e) {
    if (t !== token) return;
    fail(e);
    setState("failed", "error");
    bump("errors");
  }
}

/** @param {number | null | undefined} v @param {(v: number) => string} f */
const maybe = (v, f) => (v === null || v === undefined ? "—" : f(v));

/** The two summaries as rows: what, program, collectives, estimates, roofline terms, HBM. @param {any} r @param {string[]} hrefs */
function renderSides(r, hrefs) {
  const { table, body } = headedTable("hops compare-sides", ["", "A", "B"]);
  const a = r.a;
  const b = r.b;
  const cheaper = r.verdict.cheaper;
  /** @param {string} name @param {(s: any) => string} f @param {string} [title] */
  const row = (name, f, title) => {
    const tr = body.insertRow();
    const th = el("th", "", name);
    th.scope = "row";
    if (title) th.title = title;
    tr.appendChild(th);
    [a, b].forEach((s, i) => {
      const td = tr.insertCell();
      td.textContent = f(s);
      if (cheaper === (i === 0 ? "a" : "b")) td.classList.add("cheaper");
    });
  };
  const head = body.insertRow();
  head.appendChild(el("th", "", "open"));
  hrefs.forEach((href, i) => {
    const link = el("a", "", `open ${i === 0 ? "A" : "B"}`);
    link.href = href;
    head.insertCell().appendChild(link);
  });
  row("what", (s) => `${s.title}${s.mesh ? ` (mesh ${s.mesh})` : ""}`);
  row("specs", (s) => s.specs.filter(Boolean).join(" → ") || "—");
  row("program", (s) => s.program);
  row("collectives", (s) => `${s.communication.count}, ${fmtBytes(s.communication.bytes)} of results per device`);
  row("communication (estimate)", (s) => (s.communication.seconds === null ? `no estimate` : `bound ${fmtSeconds(s.communication.seconds)} · expected ${fmtSeconds(s.communication.expected_seconds ?? s.communication.seconds)}`), "Σ the collectives' estimates × their repeat counts (loops)");
  row("compute (estimate)", (s) => maybe(s.roofline?.compute_seconds, fmtSeconds), "flops (loop bodies counted per run) / peak FLOP/s");
  row("memory (estimate)", (s) => maybe(s.roofline?.memory_seconds, fmtSeconds), "HBM traffic / HBM bandwidth");
  row("bound", (s) => s.roofline?.bound || "—");
  row("lower bound on run time", (s) => maybe(s.lower_bound_seconds, fmtSeconds), "max(compute, memory, communication)");
  row("HBM", (s) => s.hbm?.text || "—");
  row("not modelled", (s) => s.roofline?.why || (s.roofline ? "" : "no cost analysis (a snapshot)") || "—");
  byId("sides").replaceChildren(table);
}

/** The matched collectives: each side's op, groups, bytes and estimate, and the differences. @param {any} r */
function renderMatched(r) {
  const { table, body } = headedTable("hops collectives compare-matched", ["op", "mesh axes", "A groups", "A bytes", "A estimate", "B groups", "B bytes", "B estimate", "Δ estimate", "Δ bytes"]);
  for (const m of r.collectives) {
    const tr = body.insertRow();
    const cell = cellsOf(tr);
    cell(m.op || "", "op");
    cell(m.axes_text || "");
    for (const side of [m.a, m.b]) {
      if (!side) {
        cell("—", "absent");
        cell("");
        cell("");
        continue;
      }
      cell(side.groups);
      cell(side.bytes === null ? "—" : fmtBytes(side.bytes), "num");
      const est = side.seconds === null ? { seconds: null, why: side.why } : { seconds: side.seconds, expected_seconds: side.expected_seconds, fabric: side.fabric, formula: side.formula };
      const td = cell(estimateText(est, side.repeat), "estimate num");
      td.title = estimateTitle(est);
    }
    const ds = m.delta_seconds;
    cell(ds === null ? "" : `${ds > 0 ? "+" : ds < 0 ? "−" : ""}${fmtSeconds(Math.abs(ds))}`, `num ${ds > 0 ? "worse" : ds < 0 ? "better" : ""}`);
    const db = m.delta_bytes;
    cell(db === null ? "" : `${db > 0 ? "+" : db < 0 ? "−" : ""}${fmtBytes(Math.abs(db))}`, "num");
  }
  byId("matched").replaceChildren(r.collectives.length ? table : el("p", "muted", "neither side has collectives"));
}

/** @param {any} r @param {string[]} hrefs */
function render(r, hrefs) {
  const results = byId("results");
  results.hidden = false;
  results.classList.remove("stale");
  const v = r.verdict;
  const verdict = byId("verdict");
  verdict.replaceChildren(el("strong", "", `${v.text.charAt(0).toUpperCase()}${v.text.slice(1)}`), " (estimates)");
  verdict.dataset.cheaper = v.cheaper || "";
  byId("verdict-notes").replaceChildren(...v.notes.map((/** @type {string} */ n) => el("li", "", n)));
  renderSides(r, hrefs);
  const rooflines = byId("rooflines");
  rooflines.replaceChildren();
  for (const [name, side] of [["A", r.a], ["B", r.b]]) {
    const box = el("div", "compare-roofline");
    if (side.roofline) rooflinePanel(box, side.roofline, `${name}: roofline`);
    else box.appendChild(el("p", "muted", `${name}: no roofline (snapshots carry no cost analysis)`));
    rooflines.appendChild(box);
  }
  renderMatched(r);
  byId("note").textContent = r.note;
}

function wire() {
  byId("compare-form").addEventListener("submit", (e) => {
    e.preventDefault();
    run();
  });
  byId("swap").addEventListener("click", () => {
    [boxA.value, boxB.value] = [boxB.value, boxA.value];
    run();
  });
  shareControl(byId("share"), {
    view: "compare",
    state: () => ({ query: query() }),
    onStatus: (text) => setState(text, document.body.dataset.compareState || "idle"),
    onError: fail,
  });
  onBackForward((q) => {
    fromQuery(q);
    if (boxA.value && boxB.value) run();
  });
}

async function main() {
  bootPage("compare");
  wire();
  fromQuery(pageQuery());
  try {
    catalog = (await getJSON("/api/kernels")).kernels;
  } catch (e) {
    fail(e);
  }
  document.body.dataset.ready = "1";
  if (boxA.value.trim() && boxB.value.trim()) run();
}

main();
