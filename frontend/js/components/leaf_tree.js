// A pytree's leaves as a windowed tree table (path, shape, dtype, spec, shard shape, bytes per
// device, kind): groups fold, a filter picks leaves, only the rows in view are in the DOM, so a
// 10,000-leaf model scrolls smoothly.

import { el, headedTable } from "../lib/dom.js";
import { fmtBytes } from "../lib/format.js";

const ROW_H = 26; // px, the fixed height of a row (CSS .leaf-table tr)
const OVERSCAN = 10;
const COLUMNS = ["path", "shape", "dtype", "spec", "shard shape", "bytes / device", "kind"];

/**
 * @typedef {{spec: string | null, changed: boolean, error: {code: string, message: string} | null,
 *   layout: {shard_shape: number[], bytes_per_device: number} | null}} LeafNow what a leaf looks like
 *   now (the captured spec and layout, or a what-if's)
 * @typedef {{type: "group" | "leaf", depth: number, label: string, key: string, index: number}} Row
 */

/**
 * Builds the table into `container` (a scrolling box; replacing what is there).
 * @param {HTMLElement} container
 * @param {any[]} leaves the snapshot's leaves ({path "a/b/c", shape, dtype, logical_axes, kind, array_kind})
 * @param {{now: (i: number) => LeafNow, kind: (leaf: any) => string, onOpen: (i: number) => void,
 *   onRows?: () => void, name?: (key: string) => string | null}} opts now: leaf i's spec and layout; kind:
 *   its kind column; onOpen: a leaf was clicked; onRows: rows were drawn; name: what a path (a group's or a
 *   leaf's) stands for, shown beside its label (an inspect_jit argument's parameter name)
 * @returns {{body: HTMLTableSectionElement, filter: (keep: (i: number) => boolean) => number,
 *   select: (path: string) => void}} filter: shows the leaves `keep` keeps (and their groups), says
 *   how many; select: marks the leaf at `path`
 */
export function leafTree(container, leaves, opts) {
  const { table, body } = headedTable("", COLUMNS);
  container.replaceChildren(table);
  /** @type {Row[]} */
  const rows = [];
  /** @type {string[]} */
  let stack = [];
  leaves.forEach((leaf, i) => {
    const parts = leaf.path.split("/");
    const groups = parts.slice(0, -1);
    let common = 0;
    while (common < stack.length && common < groups.length && stack[common] === groups[common]) common++;
    for (let d = common; d < groups.length; d++) {
      rows.push({ type: "group", depth: d, label: groups[d], key: groups.slice(0, d + 1).join("/"), index: -1 });
    }
    stack = groups;
    rows.push({ type: "leaf", depth: groups.length, label: parts[parts.length - 1], key: leaf.path, index: i });
  });
  /** @type {Set<string>} */
  const collapsed = new Set();
  /** @type {Set<number>} */
  let kept = new Set();
  /** @type {number[]} rows on show, as indices into `rows` */
  let shown = [];
  let selected = "";

  /** @param {number} height */
  const spacer = (height) => {
    const tr = el("tr", "spacer");
    const td = el("td");
    td.colSpan = COLUMNS.length;
    tr.appendChild(td);
    tr.style.height = `${height}px`;
    return tr;
  };

  /** @param {Row} r */
  const rowEl = (r) => {
    const tr = el("tr");
    const name = el("td", "path");
    name.style.paddingLeft = `${0.4 + r.depth * 1.1}rem`;
    const named = opts.name?.(r.key);
    const label = named ? `${r.label} · ${named}` : r.label;
    if (r.type === "group") {
      tr.className = "group";
      const b = el("button", "link tree-toggle", `${collapsed.has(r.key) ? "▸" : "▾"} ${label}`);
      b.type = "button";
      b.setAttribute("aria-expanded", String(!collapsed.has(r.key)));
      b.dataset.group = r.key;
      name.appendChild(b);
      name.colSpan = COLUMNS.length;
      tr.appendChild(name);
      return tr;
    }
    const leaf = leaves[r.index];
    const v = opts.now(r.index);
    tr.className = "leaf";
    tr.dataset.index = String(r.index);
    if (leaf.path === selected) tr.classList.add("selected");
    const b = el("button", "link leaf-open", label);
    b.type = "button";
    b.title = leaf.path;
    name.appendChild(b);
    const spec = el("td", "mono", v.spec || "—");
    if (v.changed) spec.classList.add("changed");
    if (v.error) {
      spec.classList.add("bad");
      spec.title = v.error.message;
    }
    if (leaf.logical_axes) spec.title = spec.title || `logical axes (${leaf.logical_axes.map((/** @type {string | null} */ n) => (n === null ? "None" : n)).join(", ")})`;
    const lay = v.layout;
    tr.append(
      name,
      el("td", "mono", leaf.shape ? `(${leaf.shape.join(", ")})` : "—"),
      el("td", "mono", leaf.dtype || "—"),
      spec,
      el("td", "mono", lay ? `(${lay.shard_shape.join(", ")})` : "—"),
      el("td", "num", lay ? fmtBytes(lay.bytes_per_device) : "—"),
      el("td", leaf.array_kind === "global" ? "global" : "", opts.kind(leaf)),
    );
    return tr;
  };

  const draw = () => {
    const first = Math.max(0, Math.floor(container.scrollTop / ROW_H) - OVERSCAN);
    const count = Math.ceil((container.clientHeight || 400) / ROW_H) + 2 * OVERSCAN;
    const last = Math.min(shown.length, first + count);
    const out = [spacer(first * ROW_H)];
    for (let k = first; k < last; k++) out.push(rowEl(rows[shown[k]]));
    out.push(spacer((shown.length - last) * ROW_H));
    body.replaceChildren(...out);
    if (last > first) opts.onRows?.();
  };

  /** The rows on show: kept leaves and their groups, less what folded groups hide. */
  const reshow = () => {
    /** @type {Set<string>} */
    const groupsKept = new Set();
    for (const r of rows) {
      if (r.type !== "leaf" || !kept.has(r.index)) continue;
      const parts = r.key.split("/");
      for (let d = 1; d < parts.length; d++) groupsKept.add(parts.slice(0, d).join("/"));
    }
    shown = [];
    rows.forEach((r, k) => {
      if (r.type === "leaf" ? !kept.has(r.index) : !groupsKept.has(r.key)) return;
      const parts = r.key.split("/");
      for (let d = 1; d < parts.length; d++) if (collapsed.has(parts.slice(0, d).join("/"))) return;
      shown.push(k);
    });
  };

  let pending = 0;
  // assigned, not added: a view that opens another snapshot in the same container replaces the listener
  container.onscroll = () => {
    if (pending) return;
    pending = requestAnimationFrame(() => {
      pending = 0;
      draw();
    });
  };
  body.addEventListener("click", (e) => {
    const target = /** @type {HTMLElement} */ (e.target);
    const toggle = /** @type {HTMLElement | null} */ (target.closest(".tree-toggle"));
    if (toggle) {
      const key = toggle.dataset.group || "";
      if (collapsed.has(key)) collapsed.delete(key);
      else collapsed.add(key);
      const top = container.scrollTop;
      reshow();
      container.scrollTop = top;
      draw();
      return;
    }
    const row = /** @type {HTMLElement | null} */ (target.closest("tr.leaf"));
    if (row) opts.onOpen(Number(row.dataset.index));
  });

  return {
    body,
    filter(keep) {
      kept = new Set(leaves.map((_, i) => i).filter(keep));
      reshow();
      container.scrollTop = 0;
      draw();
      return kept.size;
    },
    select(path) {
      selected = path;
      for (const tr of body.querySelectorAll("tr.leaf")) {
        const i = Number(/** @type {HTMLElement} */ (tr).dataset.index);
        tr.classList.toggle("selected", leaves[i].path === path);
      }
    },
  };
}
