// A program's findings and values (sharding_core/findings, sharding_core/program/values: what plans and captures
// carry as `findings` and `values`): the findings first — each its kind, bytes per step (repeat × bytes), share of
// the step's collective bytes, line, text and fix (recompiled when the fix says so) — then every value's sharding
// as the partitioner chose it, largest per device first, filterable. Drawn from the snapshot alone.

import { el, h, headedTable } from "../lib/dom.js";
import { fmtBytes, fmtSeconds } from "../lib/format.js";

/** Values listed before "show all". */
const VALUES_SHOWN = 30;

/** One finding as a card. @param {any} f */
function findingCard(f) {
  const repeat = (f.repeat ?? 1) > 1 ? ` (${f.repeat} × ${fmtBytes(f.bytes ?? 0)})` : "";
  const share = f.share != null ? `, ${(100 * f.share).toFixed(0)}% of the step's collective bytes` : "";
  const card = h("li", { class: "finding", part: "finding" },
    h("p", {}, h("strong", {}, f.title || f.kind), " ", el("span", "mono muted", `[${f.kind}]`)),
    h("p", {}, `${fmtBytes(f.bytes_per_step ?? 0)} per step${repeat}${share} at `, el("code", "", f.source || "—")),
    el("p", "", f.text));
  const fix = f.fix;
  if (fix) {
    const after = [];
    if (fix.expected_seconds_after != null) after.push(`step ${fmtSeconds(fix.expected_seconds_after)}`);
    if (fix.peak_after != null) after.push(`peak ${fmtBytes(fix.peak_after)}`);
    // a TPU set's candidate is scheduled by libtpu, not compiled to the end: the bytes its buffer assignment placed
    else if (fix.placed_after != null) after.push(`${fmtBytes(fix.placed_after)} placed (from ${fmtBytes(fix.placed_before ?? 0)})`);
    if (fix.expected_seconds_after != null || fix.peak_after != null) after.push(`collectives ${fmtBytes(fix.bytes_after ?? 0)} per step`);
    card.append(h("p", { class: "fix" }, h("strong", {}, "Fix"), fix.line ? h("span", {}, " at ", el("code", "", fix.line)) : "", ": ", fix.text,
      after.length ? el("span", "muted", ` (recompiled: ${after.join(", ")})`) : ""));
  }
  return card;
}

/** The findings section: none (said so) or the cards, largest first. @param {HTMLElement} box @param {any} snap */
export function findingsSection(box, snap) {
  const found = snap.findings || [];
  box.hidden = !("findings" in snap) || (!found.length && !snap.values);
  const list = h("ol", { class: "findings", part: "findings" }, ...found.map(findingCard));
  box.replaceChildren(h("h2", {}, found.length ? `Findings: ${found.length}` : "Findings"),
    found.length ? list : el("p", "muted", "No silent waste found (docs: Values and findings)."));
}

/** The values table: filter by text, largest per device first. @param {HTMLElement} box @param {any} snap */
export function valuesSection(box, snap) {
  const rows = snap.values || [];
  box.hidden = !rows.length;
  if (!rows.length) return;
  const filter = h("input", { type: "search", part: "values-filter", spellcheck: "false", autocomplete: "off", placeholder: "op, line or axis", "aria-label": "Filter values" });
  const all = h("input", { type: "checkbox", part: "values-all" });
  const count = el("p", "muted", "");
  const wrap = h("div", { class: "table-wrap", part: "values-table" });
  const sorted = [...rows].sort((a, b) => b.bytes - a.bytes);
  const draw = () => {
    const q = filter.value.trim().toLowerCase();
    const hits = sorted.filter((v) => !q || `${v.op} ${v.source} ${v.spec} ${v.typed}`.toLowerCase().includes(q));
    const shown = all.checked ? hits : hits.slice(0, VALUES_SHOWN);
    const headers = ["bytes / device", "× per step", "type", "spec", "op", "line"];
    // a card per value on a phone (css: table.why-cards), its type first
    const { table, body } = headedTable("values why-cards", headers);
    for (const v of shown) {
      const cells = [el("td", "num", fmtBytes(v.bytes)), el("td", "num", String(v.repeat ?? 1)),
        el("td", "mono lead", v.typed || `${v.dtype}[${v.shape.join(",")}]`), el("td", "mono", v.spec || v.sharding),
        el("td", "mono", v.op), el("td", "mono", (v.source || "—").split("/").slice(-1)[0])];
      cells.forEach((td, i) => (td.dataset.label = headers[i]));
      body.insertRow().append(...cells);
    }
    count.textContent = `${shown.length} of ${hits.length} values${hits.length < rows.length ? ` (${rows.length} in all)` : ""}, largest per device first`;
    wrap.replaceChildren(table);
  };
  filter.addEventListener("input", draw);
  all.addEventListener("change", draw);
  box.replaceChildren(h("h2", {}, "Values: each value's sharding along the program"),
    el("p", "muted", "The sharding the partitioner chose for every value (what jax.debug.inspect_array_sharding reports there)."),
    h("div", { class: "row filters" }, h("label", {}, "Filter ", filter), h("label", { class: "check" }, all, " show all")), count, wrap);
  draw();
}
