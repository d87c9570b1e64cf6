// The collectives table (one row per collective in compiled HLO: op, shape, bytes, mesh axes, how many
// times it runs per step through loops, device groups, its estimated time when the API gives one, where
// it came from) for kernel runs, snapshots' inspect_jit captures and plans alike; a collective's groups
// laid on the mesh table; and the section both panels show (collectivesSection): the table, the total,
// the selected collective on the mesh with its way to the topology view, and a slot for what else a
// panel shows about the selected one (docs/frontend.md: the seam).

import { actionable, cellsOf, h, headedTable } from "../lib/dom.js";
import { fmtBytes } from "../lib/format.js";
import { groupsSummary, groupsText, groupsTitle, opText } from "../model/collective.js";
import { estimateCell, estimateTotal } from "./estimates.js";
import { groupColour, paletteColour } from "../model/layout.js";
import { meshTable } from "./mesh_table.js";

/** @typedef {import("../model/collective.js").Collective} Collective */

/** A collective's estimated time per step: its estimate (bound) times the runs per step; null without one. @param {Collective} c */
function perStep(c) {
  const s = /** @type {any} */ (c).estimate?.seconds;
  return s === null || s === undefined ? null : s * (c.repeat ?? 1);
}

/**
 * The collectives' indices costliest first, as `shardscope plan` prints them: by estimated time per step
 * (stable, so ties and sets without estimates — CPU — keep program order).
 * @param {Collective[]} collectives
 * @returns {number[]}
 */
export function costOrder(collectives) {
  return collectives.map((c, i) => ({ i, t: perStep(c) ?? -1 })).sort((a, b) => b.t - a.t || a.i - b.i).map((x) => x.i);
}

/**
 * Draws the table into `container` (replacing what is there), costliest first (`costOrder`); every
 * column header sorts by that column (again: the other way), "#" being program order. Columns no
 * collective fills (mesh axes for inspect_jit captures, the source op) are left out.
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
  // runs per step: a collective inside a scanned layer runs once per layer (the loop's trip count)
  const repeats = collectives.some((c) => (c.repeat ?? 1) > 1);
  /** @type {[string, ((c: Collective, i: number) => number | string | null) | null][]} */
  const columns = [
    ["#", (_c, i) => i],
    ["op", (c) => opText(c)],
    ["shape / device", (c) => c.shape ?? ""],
    ["bytes", (c) => c.bytes ?? null],
    ...(axes ? [/** @type {[string, (c: Collective) => string]} */ (["mesh axes", (c) => c.axes_text ?? ""])] : []),
    ...(repeats ? [/** @type {[string, (c: Collective) => number]} */ (["runs", (c) => c.repeat ?? 1])] : []),
    ["groups (device ids)", (c) => (c.groups || []).length],
    ...(estimates ? [/** @type {[string, (c: Collective) => number | null]} */ (["estimate", perStep])] : []),
    ...(source ? [/** @type {[string, (c: Collective) => string]} */ (["from", (c) => c.source || ""])] : []),
  ];
  const { table, body } = headedTable("hops collectives", columns.map(([name]) => name));
  /** @type {HTMLTableRowElement[]} */
  const rows = collectives.map((c, i) => {
    const row = body.insertRow();
    const cell = cellsOf(row);
    cell(String(i + 1));
    cell(opText(c), "op");
    cell(c.shape);
    cell(c.bytes === null || c.bytes === undefined ? "—" : fmtBytes(c.bytes));
    if (axes) cell(c.axes_text ?? "");
    if (repeats) cell(`× ${c.repeat ?? 1}`, "num runs").title = runsTitle(c);
    cell(groupsText(c), "groups").title = groupsTitle(c);
    if (estimates) estimateCell(row.insertCell(), c.estimate, /** @type {any} */ (c).repeat);
    if (source) cell(c.source || "", "source");
    if (c.name) row.dataset.name = c.name;
    row.dataset.index = String(i);
    if (opts.onSelect) {
      const onSelect = opts.onSelect;
      row.classList.add("collective");
      actionable(row, () => {
        select(i);
        onSelect(i);
      });
    }
    return row;
  });
  const ths = [...table.querySelectorAll("thead th")];
  /** Rows in `order` (indices), the header sorted on marked. @param {number[]} order @param {number} col @param {"ascending" | "descending"} dir */
  const arrange = (order, col, dir) => {
    for (const i of order) body.appendChild(rows[i]);
    ths.forEach((th, k) => (k === col ? th.setAttribute("aria-sort", dir) : th.removeAttribute("aria-sort")));
    table.dataset.sort = `${columns[col][0]} ${dir}`;
  };
  ths.forEach((th, col) => {
    const key = /** @type {(c: Collective, i: number) => number | string | null} */ (columns[col][1]);
    const button = h("button", { type: "button", class: "sort", title: `sort by ${columns[col][0]}` }, th.textContent || "");
    th.replaceChildren(button);
    button.addEventListener("click", () => {
      // the first click sorts numbers largest first and text A to Z; the next, the other way
      const first = typeof key(collectives[0], 0) === "string" || col === 0 ? "ascending" : "descending";
      const dir = th.getAttribute("aria-sort") === first ? (first === "ascending" ? "descending" : "ascending") : first;
      const sign = dir === "ascending" ? 1 : -1;
      const order = collectives.map((c, i) => ({ i, v: key(c, i) }))
        .sort((a, b) => (a.v === b.v ? a.i - b.i : a.v === null ? 1 : b.v === null ? -1 : sign * (a.v < b.v ? -1 : 1)))
        .map((x) => x.i);
      arrange(order, col, dir);
    });
  });
  const costly = columns.findIndex(([name]) => name === "estimate");
  arrange(costOrder(collectives), costly >= 0 ? costly : 0, costly >= 0 ? "descending" : "ascending");
  /** @param {number} i */
  const select = (i) => rows.forEach((tr, k) => tr.classList.toggle("selected", k === i));
  container.replaceChildren(table);
  if (opts.selected !== undefined) select(opts.selected);
  return { select };
}

/** How a collective's run count comes about: the loops it sits in, with their trip counts. @param {Collective} c */
function runsTitle(c) {
  const loops = /** @type {any} */ (c).loops || [];
  if (!loops.length) return "runs once per step";
  return `runs ${c.repeat ?? 1} times per step: inside ${loops.map((/** @type {any} */ l) => `${l.loop}${l.trip_count ? ` (× ${l.trip_count})` : ""}`).join(" inside ")}`;
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
  const members = groups.map((g) => g.join(",")); // once per group, not once per device (256 devices of one group)
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
      return gi !== undefined ? `device ${id}: group ${gi + 1} {${members[gi]}}` : `device ${id}: not in this collective`;
    },
  });
}


/**
 * A program's collectives as one section, the seam the snapshot panel and the kernel lab share: the table
 * (a row selects its collective), the total of the estimates, the selected collective's groups on the mesh
 * with the way to see them on the topology view, and under them a slot for what else the panel shows
 * about the selected collective (the why view draws there). Parts: `collectives` (the table),
 * `collective-total`, `collective-mesh`, `collective-detail` (the slot).
 * @param {HTMLElement} container its contents are replaced
 * @param {Collective[]} collectives
 * @param {{mesh: import("./mesh_table.js").MeshIds, dark: boolean, selected?: number, total?: boolean,
 *   topology?: (c: Collective) => string | null, linkTarget?: string,
 *   onSelect?: (c: Collective, i: number, slot: HTMLElement) => void}} opts mesh: the mesh the groups are
 *   drawn on; total: the estimates' total under the table; topology: the topology view's address for a
 *   collective (null: none for it); linkTarget: where that link opens ("_blank" outside the dashboard);
 *   onSelect: hears each selection (the first one too) with the slot to draw its details into
 * @returns {{select: (i: number) => void, selected: () => number}}
 */
export function collectivesSection(container, collectives, opts) {
  const table = h("div", { class: "table-wrap collectives-wrap", part: "collectives" });
  const total = h("div", { part: "collective-total" });
  const mesh = h("div", { class: "collective-mesh", part: "collective-mesh" });
  const slot = h("div", { class: "collective-detail", part: "collective-detail" });
  container.replaceChildren(table, total, mesh, slot);
  if (!collectives.length) return { select: () => {}, selected: () => -1 };
  // the costliest (the table's first row) unless the panel says which
  let chosen = Math.max(0, Math.min(opts.selected ?? costOrder(collectives)[0], collectives.length - 1));
  if (opts.total) estimateTotal(total, collectives);

  /** @param {number} i */
  const draw = (i) => {
    chosen = i;
    const c = collectives[i];
    const href = opts.topology?.(c) || null;
    const link = href ? h("a", { href, part: "topology-link", ...(opts.linkTarget ? { target: opts.linkTarget, rel: "noopener noreferrer" } : {}) }, "see it on the topology") : null;
    collectiveOnMesh(mesh, opts.mesh, c, i + 1, { dark: opts.dark, link: /** @type {HTMLAnchorElement | undefined} */ (link || undefined) });
    slot.replaceChildren();
    opts.onSelect?.(c, i, slot);
  };
  const rows = collectivesTable(table, collectives, { selected: chosen, onSelect: draw });
  draw(chosen);
  return {
    select(i) {
      rows.select(i);
      draw(i);
    },
    selected: () => chosen,
  };
}
