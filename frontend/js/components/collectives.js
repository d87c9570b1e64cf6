// The collectives table (one row per collective in compiled HLO: op, shape, bytes, mesh axes, device
// groups, its estimated time when the API gives one, where it came from) for kernel runs and snapshots'
// inspect_jit captures alike, and a collective's groups laid on the mesh table.

import { actionable, cellsOf, headedTable } from "../lib/dom.js";
import { fmtBytes } from "../lib/format.js";
import { groupsSummary, groupsText, groupsTitle, opText } from "../model/collective.js";
import { estimateCell } from "./estimates.js";
import { groupColour, paletteColour } from "../model/layout.js";
import { meshTable } from "./mesh_table.js";

/** @typedef {import("../model/collective.js").Collective} Collective */

/**
 * Draws the table into `container` (replacing what is there). Columns no collective fills (mesh axes
 * for inspect_jit captures, the source op) are left out.
 * @param {HTMLElement} container
 * @param {Collective[]} collectives
 * @param {{selected?: number, onSelect?: (i: number) => void}} [opts] onSelect: rows become buttons,
 *   and the selected one is marked
 * @returns {{select: (i: number) => void}}
 */
export function collectivesTable(container, collectives, opts = {}) {
  const axes = collectives.some((c) => c.axes_text !== undefined);
  const source = collectives.some((c) => c.source);
  const estimates = collectives.some((c) => c.estimate); // cost estimates (components/estimates.js)
  const headers = ["#", "op", "shape / device", "bytes", ...(axes ? ["mesh axes"] : []), "groups (device ids)", ...(estimates ? ["estimate"] : []), ...(source ? ["from"] : [])];
  const { table, body } = headedTable("hops collectives", headers);
  /** @type {HTMLTableRowElement[]} */
  const rows = collectives.map((c, i) => {
    const row = body.insertRow();
    const cell = cellsOf(row);
    cell(String(i + 1));
    cell(opText(c), "op");
    cell(c.shape);
    cell(c.bytes === null || c.bytes === undefined ? "—" : fmtBytes(c.bytes));
    if (axes) cell(c.axes_text ?? "");
    cell(groupsText(c), "groups").title = groupsTitle(c);
    if (estimates) estimateCell(row.insertCell(), c.estimate, /** @type {any} */ (c).repeat);
    if (source) cell(c.source || "", "source");
    if (opts.onSelect) {
      const onSelect = opts.onSelect;
      row.classList.add("collective");
      row.dataset.index = String(i);
      actionable(row, () => {
        select(i);
        onSelect(i);
      });
    }
    return row;
  });
  /** @param {number} i */
  const select = (i) => rows.forEach((tr, k) => tr.classList.toggle("selected", k === i));
  container.replaceChildren(table);
  if (opts.selected !== undefined) select(opts.selected);
  return { select };
}

/**
 * Collective `c` (number `n` in its table) on the mesh: every device coloured by the group it is in;
 * for a collective-permute each cell says where its device sends.
 * @param {HTMLElement} container
 * @param {import("./mesh_table.js").MeshIds} mesh
 * @param {Collective} c
 * @param {number} n
 * @param {{dark: boolean, link?: HTMLAnchorElement}} opts link: put at the end of the caption
 */
export function collectiveOnMesh(container, mesh, c, n, opts) {
  /** @type {Map<number, number>} */
  const groupOf = new Map();
  const groups = c.groups || [];
  groups.forEach((g, gi) => g.forEach((id) => groupOf.set(id, gi)));
  const target = new Map((c.pairs || []).map(([a, b]) => [a, b]));
  const over = c.axes_text ? ` over ${c.axes_text}` : "";
  const caption = `#${n} ${c.op}${over}: ${groupsSummary(c)}${c.pairs ? " (cells show where each device sends)" : ""}`;
  meshTable(container, mesh, {
    caption: opts.link ? [`${caption} — `, opts.link] : [caption],
    text: (id) => (target.has(id) ? `${id}→${target.get(id)}` : String(id)),
    colour: (id) => {
      const gi = groupOf.get(id);
      return gi === undefined ? null : groupColour(gi, opts.dark);
    },
    title: (id) => {
      const gi = groupOf.get(id);
      return gi !== undefined ? `device ${id}: group ${gi + 1} {${groups[gi].join(",")}}` : `device ${id}: not in this collective`;
    },
  });
}

