// The device mesh as a grid of ids with axis names (what `print(mesh.devices)` shows).

import { deviceColour } from "./format.js";

/**
 * @param {any} layout the /api/layout response
 * @param {Map<number, any>} devices id -> attributes
 * @param {Map<number, number>} tileOf device id -> tile number
 * @param {{dark: boolean, onDeviceClick: (id: number) => void}} opts
 */
export function renderMesh(layout, devices, tileOf, opts) {
  const shape = layout.mesh.shape;
  const names = layout.mesh.axis_names;
  const flat = /** @type {number[]} */ (layout.mesh.device_ids.flat(Infinity));
  const cols = shape[shape.length - 1];
  const rows = flat.length / cols;
  const lead = shape.slice(0, -1);
  const wrap = document.createElement("div");
  wrap.className = "mesh";
  const caption = document.createElement("p");
  caption.className = "mesh-caption";
  caption.textContent = `Mesh(${names.map((n, i) => `'${n}': ${shape[i]}`).join(", ")}) — axis types ${layout.mesh.axis_types.join(", ")}`;
  wrap.appendChild(caption);

  const table = document.createElement("table");
  table.className = "mesh-table";
  if (cols > 24) table.classList.add("dense");
  const head = table.createTHead().insertRow();
  const corner = document.createElement("th");
  corner.textContent = lead.length ? `${names.slice(0, -1).join(",")} \\ ${names[names.length - 1]}` : names[0];
  head.appendChild(corner);
  for (let j = 0; j < cols; j++) {
    const th = document.createElement("th");
    th.textContent = String(j);
    th.scope = "col";
    head.appendChild(th);
  }
  const body = table.createTBody();
  const focusable = flat.length <= 1024;
  /** @type {Map<number, HTMLTableCellElement>} */
  const cells = new Map();
  for (let r = 0; r < rows; r++) {
    const tr = body.insertRow();
    const th = document.createElement("th");
    th.scope = "row";
    // the leading axes' indices of this row, e.g. "x=1, y=0"
    let rem = r;
    const idx = [];
    for (let k = lead.length - 1; k >= 0; k--) {
      idx.unshift(rem % lead[k]);
      rem = Math.floor(rem / lead[k]);
    }
    th.textContent = lead.length ? idx.map((v, k) => `${names[k]}=${v}`).join(", ") : "";
    tr.appendChild(th);
    for (let c = 0; c < cols; c++) {
      const id = flat[r * cols + c];
      const td = tr.insertCell();
      td.textContent = String(id);
      td.dataset.device = String(id);
      const d = devices.get(id);
      const tile = tileOf.get(id);
      const tileIds = tile !== undefined ? layout.tiles[tile] : [id];
      td.style.background = deviceColour(Math.min(...tileIds), opts.dark);
      const where = d && d.coords ? `coords (${d.coords.join(",")}) core ${d.core_on_chip}, ` : "";
      td.title = `device ${id}: ${where}host ${d ? d.process_index : "?"}; mesh index (${[...idx, c].join(", ")})`;
      if (focusable) td.tabIndex = 0;
      cells.set(id, td);
    }
  }
  table.addEventListener("click", (e) => {
    const td = e.target instanceof Element ? e.target.closest("td") : null;
    if (td && td.dataset.device) opts.onDeviceClick(Number(td.dataset.device));
  });
  table.addEventListener("keydown", (e) => {
    const td = e.target instanceof Element ? e.target.closest("td") : null;
    if (td && td.dataset.device && (e.key === "Enter" || e.key === " ")) {
      e.preventDefault();
      opts.onDeviceClick(Number(td.dataset.device));
    }
  });
  wrap.appendChild(table);
  return {
    element: wrap,
    /** @param {Set<number>|null} ids */
    highlight(ids) {
      cells.forEach((td, id) => {
        td.classList.toggle("hl", ids !== null && ids.has(id));
        td.classList.toggle("dimmed", ids !== null && !ids.has(id));
      });
    },
  };
}
