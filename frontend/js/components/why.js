// Why a collective is there, and the fixes that were compiled to remove it (issue 22; docs/why.md): drawn
// into the collectives section's slot (components/collectives.js, docs/frontend.md: the seam) for the
// selected collective. Everything is the collective's `why` as the API sends it (sharding_core/why), shown
// as text: the sentence, the line and the call stack, the JAX op and its jaxpr equation, the operands it
// moves with their shardings before and after, the input leaves, Shardy's origins with their propagation
// edges, the partitioner; then the fixes with their figures after against before (each one compiled again,
// never estimated here), and "try this fix": the recompiled program the snapshot carries, with what the
// host can do with it (the dashboard diffs and compares it; the kernel lab runs it again).

import { cellsOf, defList, h, headedTable } from "../lib/dom.js";
import { fmtBytes, fmtSeconds } from "../lib/format.js";
import { showError } from "../lib/errors.js";
import { collectivesTable } from "./collectives.js";

/**
 * What the panel hands the why view (what it can do with a fix depends on its host):
 * @typedef {object} WhyOpts
 * @property {(fix: any) => any} [program] the fix's recompiled program (a snapshot's `fixes[fix.result]`), or
 *   null when this host holds none
 * @property {null | ((fix: any) => Promise<any>)} [diff] the leaves that differ between the program on screen
 *   and the fix's (the dashboard: POST /api/snapshots/diff with `{"snapshot": id, "fix": k}`)
 * @property {null | ((fix: any) => string | null)} [compare] the compare view's address for the program and
 *   the fix's, side by side
 * @property {null | ((fix: any) => string | null)} [open] the snapshot view's address of the fix's program
 * @property {null | ((fix: any) => void)} [load] the kernel lab: runs the fix's `run` (its inputs' specs and
 *   out_specs) in the lab
 * @property {string} [cannot] what this host cannot do with a fix, said plainly under it
 * @property {string} [linkTarget] where the links open ("_blank" outside the dashboard)
 * @property {number} [tried] the fix (its index in the why's fixes) to show tried on arrival
 * @property {(k: number | null) => void} [onTry] hears a fix tried (null: put away)
 * @property {(path: string) => string} [leafName] a leaf path as the panel names it elsewhere: the program's
 *   parameter names (`inputs/args/1` -> `w`, as the HBM table says), the path itself without one
 */

/**
 * `text` with each of `paths` (leaf paths the API writes) said by `name`, the longest first (`inputs/args/1/mu`
 * before `inputs/args/1`).
 * @param {string} text
 * @param {string[]} paths
 * @param {(path: string) => string} name
 */
function named(text, paths, name) {
  let out = text;
  for (const p of [...new Set(paths)].sort((a, b) => b.length - a.length)) if (p) out = out.split(p).join(name(p));
  return out;
}

/** "f32[8,128,1024]". @param {any} o */
function shapeText(o) {
  return `${o.dtype || ""}[${(o.shape || []).join(",")}]`;
}

/** "4 → 1" with the after marked when it changed. @param {any} before @param {any} after @param {(x: any) => string} fmt */
function change(before, after, fmt) {
  const b = before === null || before === undefined ? "—" : fmt(before);
  const a = after === null || after === undefined ? "—" : fmt(after);
  return `${b} → ${a}`;
}

/** @param {any} n */
const count = (n) => String(n);
/** @param {any} n */
const bytes = (n) => fmtBytes(Number(n));
/** @param {any} s */
const seconds = (s) => fmtSeconds(Number(s));

/** Where the collective came from, as the why names it. @param {any} why @param {(path: string) => string} name */
function facts(why, name) {
  const leaves = (why.leaves || []).map(name);
  return defList([
    ["line", why.source || "no line of yours: XLA's own relayout (no source metadata)"],
    ["JAX op", why.op],
    ["jaxpr", why.jaxpr],
    ["input leaves", leaves.length ? leaves.join(", ") : null],
    ["partitioner", why.partitioner === "gspmd" ? "GSPMD (no Shardy origins)" : why.partitioner === "shardy" ? "Shardy" : why.partitioner],
  ]);
}

/** The call stack, innermost first. @param {any[]} stack */
function stackList(stack) {
  if (!stack || !stack.length) return null;
  return h("details", { class: "why-stack", part: "why-stack" },
    h("summary", {}, `call stack (${stack.length} frame${stack.length > 1 ? "s" : ""})`),
    h("ol", {}, stack.map((f) => h("li", {}, h("code", {}, `${f.file}:${f.line}`), ` in ${f.function}`))));
}

/**
 * A table whose rows become cards on a phone (css: table.why-cards): each cell carries its column's name, shown
 * before it there; a row's `lead` cell heads its card.
 * @param {string} cls
 * @param {string[]} headers
 */
function cardTable(cls, headers) {
  const { table, body } = headedTable(`hops why-cards ${cls}`, headers);
  const row = () => {
    const tr = body.insertRow();
    const cell = cellsOf(tr);
    let n = 0;
    /** @param {string} text @param {string} [c] */
    const labelled = (text, c) => {
      const td = cell(text, c);
      td.dataset.label = headers[n++] ?? "";
      return td;
    };
    return { tr, cell: labelled };
  };
  return { table, row };
}

/** The operands the collective moves: their shardings before (Shardy's) and after (what the op needs). @param {any[]} operands */
function operandsTable(operands, name = (/** @type {string} */ p) => p) {
  if (!operands || !operands.length) return null;
  const { table, row } = cardTable("why-operands", ["operand", "shape", "sharded now", "the op needs", "leaf"]);
  for (const o of operands) {
    const { cell } = row();
    cell(o.name || o.value || `operand ${o.operand}`, "lead");
    cell(shapeText(o), "mono");
    cell(o.before || "—", "mono before");
    cell(o.after || "—", "mono after");
    cell(o.leaf ? name(o.leaf) : "—", "mono").title = o.leaf || "";
  }
  return h("div", { class: "table-wrap", part: "why-operands" }, table);
}

/** Shardy's origins per mesh axis, each with its propagation edges (step: from → to). @param {any} origin */
function originTable(origin) {
  if (!Array.isArray(origin)) return typeof origin === "string" && origin ? h("p", { class: "muted", part: "why-origin" }, origin) : null;
  if (!origin.length) return null;
  const { table, row } = cardTable("why-origin", ["of", "axis", "came from", "propagation edges"]);
  for (const o of origin) {
    const { cell } = row();
    cell(o.side || "", "lead");
    cell(o.axis || "", "mono");
    cell(o.meaning || o.origin || "", "mono");
    const edges = (o.edges || []).map((/** @type {any} */ e) => `step ${e.step}: ${e.axis} ${e.source} → ${(e.to || []).join(", ")}`);
    cell(edges.join("; ") || "—", "mono edges");
  }
  return h("div", { class: "table-wrap", part: "why-origin" }, table);
}

/**
 * Draws collective `c`'s why into `slot` (emptied by the section before each call).
 * @param {HTMLElement} slot
 * @param {any} c a collective with its `why`
 * @param {WhyOpts} [opts]
 */
export function draw(slot, c, opts = {}) {
  const why = c && c.why;
  const name = opts.leafName ?? ((/** @type {string} */ p) => p);
  if (!why) {
    slot.append(h("p", { class: "muted", part: "why-none" }, "No why recorded for this collective (captured before Shardscope explained collectives)."));
    return;
  }
  const tried = h("div", { class: "why-tried", part: "why-tried", hidden: true });
  const fixes = why.fixes || [];
  const section = h("section", { class: "why", part: "why", "data-kind": why.kind || "" },
    h("h3", {}, "Why this collective"),
    h("p", { class: "why-explanation", part: "why-explanation" }, named(why.explanation || "", why.leaves || [], name)),
    h("div", { class: "summary", part: "why-facts" }, facts(why, name)),
    // what the reading could not do (GSPMD wrote no origins, Shardy's module was too large to read...)
    why.note ? h("p", { class: "muted why-note", part: "why-note" }, why.note) : null,
    stackList(why.stack),
    operandsTable(why.operands, name),
    originTable(why.origin),
    h("h3", {}, fixes.length ? `Fixes, each compiled again (${fixes.length})` : "Fixes"),
    fixes.length ? fixesTable(fixes, (k) => tryFix(k), name) : null,
    why.fixes_note ? h("p", { class: "muted why-note", part: "why-fixes-note" }, why.fixes_note) : null,
    tried);
  slot.append(section);

  /** Shows fix `k` tried: its recompiled program, and what the host does with it. @param {number | null} k */
  function tryFix(k) {
    section.querySelectorAll("tr.why-fix").forEach((tr, i) => tr.classList.toggle("selected", i === k));
    tried.replaceChildren();
    const fix = k === null ? null : fixes[k];
    // a kernel-lab fix is tried by running it in the lab (its `run`): the lab's results are the tried fix
    tried.hidden = !fix || Boolean(fix.run && opts.load);
    opts.onTry?.(k);
    if (!fix || k === null) return;
    tried.dataset.fix = String(k);
    if (fix.run && opts.load) {
      opts.load(fix);
      return;
    }
    triedFix(tried, fix, opts);
    // a phone: the tried fix opens under the fixes, out of sight; bring its head into view
    if (tried.getBoundingClientRect().top > window.innerHeight * 0.8) tried.scrollIntoView({ block: "start" });
  }
  if (opts.tried !== undefined && opts.tried >= 0 && opts.tried < fixes.length) tryFix(opts.tried);
}

/**
 * The fixes: the change, and the whole program's collectives, bytes, estimated time and peak after it
 * against before (each compiled again); a button tries one.
 * @param {any[]} fixes
 * @param {(k: number) => void} onTry
 * @param {(path: string) => string} name
 */
function fixesTable(fixes, onTry, name) {
  // estimated seconds exist only where the device set has hardware figures (not on CPU sets, where a kernel
  // run's program without collectives still says 0 s after): else no column
  const timed = fixes.some((f) => f.seconds_before !== null && f.seconds_before !== undefined);
  const headers = ["#", "change", "collectives", "bytes moved", ...(timed ? ["estimate"] : []), "peak memory", ""];
  const { table, row } = cardTable("why-fixes", headers);
  fixes.forEach((fix, k) => {
    const { tr, cell } = row();
    tr.className = "why-fix";
    cell(String(k + 1), "rank");
    cell(fixText(fix, name), "change lead").title = fix.leaf || "";
    cell(change(fix.collectives_before, fix.collectives_after, count), "num collectives-after");
    cell(change(fix.bytes_before, fix.bytes_after, bytes), "num bytes-after").title = `${fix.bytes_before ?? "?"} → ${fix.bytes_after} bytes per device per step`;
    if (timed) cell(change(fix.seconds_before, fix.seconds_after, seconds), "num seconds-after");
    cell(change(fix.peak_before, fix.peak_after, bytes), "num peak-after").title = `${fix.peak_before ?? "?"} → ${fix.peak_after ?? "?"} bytes (memory_analysis)`;
    const label = fix.run ? "Run it in the lab" : "Try this fix";
    const button = h("button", { type: "button", part: "try-fix", "data-fix": k }, label);
    button.addEventListener("click", () => onTry(k));
    tr.insertCell().append(button);
  });
  return h("div", { class: "table-wrap", part: "why-fixes" }, table);
}

/** A fix in words, its leaf by the panel's name for it. @param {any} fix @param {(path: string) => string} name */
function fixText(fix, name) {
  return named(fix.text || `${fix.leaf} as ${fix.spec}`, fix.leaf ? [fix.leaf] : [], name);
}

/**
 * A fix tried: the program as it compiled, its collectives, and the diff and comparison where the host
 * offers them.
 * @param {HTMLElement} box
 * @param {any} fix
 * @param {WhyOpts} opts
 */
function triedFix(box, fix, opts) {
  const program = opts.program?.(fix) || null;
  const target = opts.linkTarget ? { target: opts.linkTarget, rel: "noopener noreferrer" } : {};
  box.append(h("h4", {}, `Tried: ${fixText(fix, opts.leafName ?? ((/** @type {string} */ p) => p))}`));
  if (!program) {
    box.append(h("p", { class: "muted", part: "tried-missing" }, "This snapshot does not carry the recompiled program of this fix."));
    return;
  }
  const colls = program.collectives || [];
  box.append(h("p", { part: "tried-summary" },
    colls.length
      ? `The program compiled again with it has ${colls.length} collective${colls.length > 1 ? "s" : ""}, moving ${fmtBytes(fix.bytes_after)} per device per step (${fmtBytes(fix.bytes_before)} before); peak ${fix.peak_after === null || fix.peak_after === undefined ? "—" : fmtBytes(fix.peak_after)}.`
      : `The program compiled again with it has no collectives (${fmtBytes(fix.bytes_before)} moved before).`));
  if (colls.length) {
    const wrap = h("div", { class: "table-wrap", part: "tried-collectives" });
    collectivesTable(wrap, colls);
    box.append(wrap);
  }
  const compare = opts.compare?.(fix) || null;
  const open = opts.open?.(fix) || null;
  const links = [
    open ? h("a", { href: open, part: "tried-open", ...target }, "open the fixed program") : null,
    compare ? h("a", { href: compare, part: "tried-compare", ...target }, "compare side by side") : null,
  ].filter(Boolean);
  if (links.length) box.append(h("p", { class: "why-links" }, links.flatMap((a, i) => (i ? [" · ", a] : [a]))));
  if (opts.cannot) box.append(h("p", { class: "muted", part: "tried-cannot" }, opts.cannot));
  if (opts.diff) diffInPlace(box, fix, opts.diff);
}

/**
 * The leaves the fix changes, as the server's diff says (the program on screen against the fix's).
 * @param {HTMLElement} box
 * @param {any} fix
 * @param {(fix: any) => Promise<any>} diff
 */
async function diffInPlace(box, fix, diff) {
  const status = h("p", { class: "muted", part: "tried-diff-status" }, "diffing against the program on screen…");
  const err = h("div", { class: "error", hidden: true });
  const result = h("div", { class: "table-wrap", part: "tried-diff" });
  box.append(status, err, result);
  try {
    const res = await diff(fix);
    const s = res.summary;
    const changed = res.leaves.filter((/** @type {any} */ r) => r.status !== "same");
    status.textContent = `Diff: ${s.changed} ${s.changed === 1 ? "leaf" : "leaves"} changed, ${s.same} the same; ${fmtBytes(s.bytes_to_move)} would move to switch.`;
    if (!changed.length) return;
    const { table, body } = headedTable("hops", ["leaf", "now", "with the fix", "bytes to move"]);
    for (const r of changed.slice(0, 200)) {
      const cell = cellsOf(body.insertRow());
      cell(r.path, "mono");
      cell(r.a_spec || "—", "mono");
      cell(r.b_spec || "—", "mono");
      cell(fmtBytes(r.bytes_to_move), "num");
    }
    result.append(table);
  } catch (e) {
    status.textContent = "";
    showError(err, e);
  }
}
