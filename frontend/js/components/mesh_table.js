// The device mesh as a table of device ids (what `print(mesh.devices)` shows), the leading axes'
// indices down the side and the last axis across; each cell coloured and titled by the caller (a
// layout's tile colours, a collective's groups).

import { el } from "../lib/dom.js";

/**
 * @typedef {{shape: number[], axis_names: string[], device_ids: any}} MeshIds device_ids nested, mesh order
 * @typedef {{highlight: (ids: Set<number> | null) => void,
 *   recolour: (colour: (id: number) => string | null, title?: (id: number, at: number[]) => string) => void}} MeshTableView
 *   recolour: new cell colours (and hover texts) for the same mesh, without rebuilding the table
 */

/**
 * Draws the mesh table into `container` (replacing what is there), after a caption.
 * @param {HTMLElement} container
 * @param {MeshIds} mesh
 * @param {{caption: (string | Node)[], colour: (id: number) => string | null, title: (id: number, at: number[]) => string,
 *   text?: (id: number) => string, onDeviceClick?: (id: number) => void}} opts colour: a cell's background
 *   (null: none); title: its hover text, given its mesh index; text: what it shows (its id);
 *   onDeviceClick: cells become focusable buttons
 * @returns {MeshTableView}
 */
export function meshTable(container, mesh, opts) {
  const { shape, axis_names: names } = mesh;
  const flat = /** @type {number[]} */ (mesh.device_ids.flat(Infinity));
  const cols = shape[shape.length - 1];
  const rows = flat.length / cols;
  const lead = shape.slice(0, -1);
  const wrap = el("div", "mesh");
  const caption = el("p", "mesh-caption");
  caption.append(...opts.caption);
  wrap.appendChild(caption);

  const table = el("table", "mesh-table");
  if (cols > 24) table.classList.add("dense");
  const head = table.createTHead().insertRow();
  head.appendChild(el("th", "", lead.length ? `${names.slice(0, -1).join(",")} \\ ${names[names.length - 1]}` : names[0]));
  for (let j = 0; j < cols; j++) {
    const th = el("th", "", String(j));
    th.scope = "col";
    head.appendChild(th);
  }
  const body = table.createTBody();
  const focusable = Boolean(opts.onDeviceClick) && flat.length <= 1024;
  /** @type {Map<number, HTMLTableCellElement>} */
  const cells = new Map();
  /** @type {Map<number, number[]>} */
  const where = new Map();
  for (let r = 0; r < rows; r++) {
    const tr = body.insertRow();
    // the leading axes' indices of this row, e.g. "x=1, y=0"
    let rem = r;
    /** @type {number[]} */
    const idx = [];
    for (let k = lead.length - 1; k >= 0; k--) {
      idx.unshift(rem % lead[k]);
      rem = Math.floor(rem / lead[k]);
    }
    const th = el("th", "", lead.length ? idx.map((v, k) => `${names[k]}=${v}`).join(", ") : "");
    th.scope = "row";
    tr.appendChild(th);
    for (let c = 0; c < cols; c++) {
      const id = flat[r * cols + c];
      const td = tr.insertCell();
      td.textContent = opts.text ? opts.text(id) : String(id);
      td.dataset.device = String(id);
      const colour = opts.colour(id);
      if (colour) td.style.background = colour;
      td.title = opts.title(id, [...idx, c]);
      where.set(id, [...idx, c]);
      if (focusable) td.tabIndex = 0;
      cells.set(id, td);
    }
  }
  const onDeviceClick = opts.onDeviceClick;
  if (onDeviceClick) {
    /** @param {Event} e */
    const deviceOf = (e) => {
      const td = e.target instanceof Element ? e.target.closest("td") : null;
      return td && td.dataset.device ? Number(td.dataset.device) : null;
    };
    table.classList.add("clickable");
    table.addEventListener("click", (e) => {
      const id = deviceOf(e);
      if (id !== null) onDeviceClick(id);
    });
    table.addEventListener("keydown", (e) => {
      const id = deviceOf(e);
      if (id !== null && (e.key === "Enter" || e.key === " ")) {
        e.preventDefault();
        onDeviceClick(id);
      }
    });
  }
  wrap.appendChild(table);
  container.replaceChildren(wrap);
  return {
    recolour(colour, title) {
      cells.forEach((td, id) => {
        td.style.background = colour(id) || "";
        if (title) td.title = title(id, /** @type {number[]} */ (where.get(id)));
      });
    },
    highlight(ids) {
      cells.forEach((td, id) => {
        td.classList.toggle("hl", ids !== null && ids.has(id));
        td.classList.toggle("dimmed", ids !== null && !ids.has(id));
      });
    },
  };
}
