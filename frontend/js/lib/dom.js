// lib/: what every view and component shares (DOM, API, URL state, formats, page chrome, errors,
// hover card, Plotly, share links). This module: building DOM nodes. Text always goes in through
// textContent, never innerHTML: labels are data (axis names, leaf paths), never markup.

const SVG_NS = "http://www.w3.org/2000/svg";

/**
 * An HTML element with an optional class and text.
 * @template {keyof HTMLElementTagNameMap} K
 * @param {K} tag
 * @param {string} [cls]
 * @param {string} [text]
 * @returns {HTMLElementTagNameMap[K]}
 */
export function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

/**
 * @typedef {Node | string | null | undefined | false} Child a node, text (set as text, never markup), or
 *   nothing (skipped)
 */

/**
 * An element built in one expression: `h("p", {class: "muted", part: "note"}, "text", el("code"))`.
 * Props: `class`; `part` (the element's name within its panel, `data-part`: what hosts, tests and
 * styles address it by; panels never use page ids); `hidden`; anything else is an attribute. Children
 * are nodes or text (text goes in as text, never as markup); null, undefined and false are skipped.
 * @template {keyof HTMLElementTagNameMap} K
 * @param {K} tag
 * @param {Record<string, string | number | boolean | null | undefined>} [props]
 * @param {(Child | Child[])[]} children
 * @returns {HTMLElementTagNameMap[K]}
 */
export function h(tag, props = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(props)) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") e.className = String(v);
    else if (k === "part") e.dataset.part = String(v);
    else if (k === "hidden") e.hidden = true;
    else e.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat()) if (c !== null && c !== undefined && c !== false) e.append(c);
  return e;
}

/**
 * The element named `name` (`data-part`) inside a panel's root.
 * @param {Element} root
 * @param {string} name
 * @returns {HTMLElement}
 */
export function partOf(root, name) {
  const found = root.querySelector(`[data-part="${name}"]`);
  if (!found) throw new Error(`no part ${name} in this panel`);
  return /** @type {HTMLElement} */ (found);
}

/**
 * An SVG element with attributes, appended to `parent` when one is given.
 * @param {string} tag
 * @param {Record<string, string | number>} attrs
 * @param {Element} [parent]
 * @returns {SVGElement}
 */
export function svgEl(tag, attrs, parent) {
  const e = /** @type {SVGElement} */ (document.createElementNS(SVG_NS, tag));
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
  if (parent) parent.appendChild(e);
  return e;
}

/**
 * A definition list of [term, value] rows; rows whose value is null, undefined or "" are left out.
 * @param {[string, string | number | null | undefined][]} rows
 * @returns {HTMLDListElement}
 */
export function defList(rows) {
  const d = el("dl");
  for (const [k, v] of rows) {
    if (v === null || v === undefined || v === "") continue;
    d.append(el("dt", "", k), el("dd", "", String(v)));
  }
  return d;
}

/**
 * A table with one header row of `headers`; returns the table and its body.
 * @param {string} cls
 * @param {string[]} headers
 * @returns {{table: HTMLTableElement, body: HTMLTableSectionElement}}
 */
export function headedTable(cls, headers) {
  const table = el("table", cls);
  const head = table.createTHead().insertRow();
  for (const text of headers) {
    const th = el("th", "", text);
    th.scope = "col";
    head.appendChild(th);
  }
  return { table, body: table.createTBody() };
}

/**
 * A table row's cell maker: `cell(text, cls?)` appends a cell holding `text` (as text) and returns it.
 * @param {HTMLTableRowElement} row
 * @returns {(text: string, cls?: string) => HTMLTableCellElement}
 */
export function cellsOf(row) {
  return (text, cls) => {
    const td = row.insertCell();
    td.textContent = text;
    if (cls) td.className = cls;
    return td;
  };
}

/**
 * Replaces a <select>'s options: `values`, shown as `labels` when given.
 * @param {HTMLSelectElement} select
 * @param {string[]} values
 * @param {string[]} [labels]
 */
export function setOptions(select, values, labels) {
  select.replaceChildren(
    ...values.map((v, i) => {
      const o = el("option", "", labels ? labels[i] : v);
      o.value = v;
      return o;
    }),
  );
}

/**
 * A <label> holding its text and then its control (the control's accessible name is the text).
 * @param {string} text
 * @param {HTMLElement} control
 * @returns {HTMLLabelElement}
 */
export function labelled(text, control) {
  const l = el("label");
  l.append(`${text} `, control);
  return l;
}

/**
 * A text <input> for code-like values (no spellcheck, no autocomplete).
 * @param {string} value
 * @param {string} [type] "text" or "number"
 * @returns {HTMLInputElement}
 */
export function codeInput(value, type = "text") {
  const input = el("input");
  input.type = type;
  input.value = value;
  input.spellcheck = false;
  input.autocomplete = "off";
  if (type === "number") input.inputMode = "numeric";
  return input;
}

/**
 * Makes a table row act as a button: click, Enter and Space call `pick`.
 * @param {HTMLElement} row
 * @param {() => void} pick
 */
export function actionable(row, pick) {
  row.tabIndex = 0;
  row.addEventListener("click", pick);
  row.addEventListener("keydown", (e) => {
    if (e.key === "Enter" || e.key === " ") {
      e.preventDefault();
      pick();
    }
  });
}

/**
 * Saves `blob` as a file called `name`.
 * @param {Blob} blob
 * @param {string} name
 */
export function download(blob, name) {
  const a = el("a");
  a.href = URL.createObjectURL(blob);
  a.download = name;
  document.body.appendChild(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(a.href), 10_000);
}

/**
 * Resolves after the next paint, so what is built so far shows before the next piece of work: a panel draws
 * what a reader looks at first, awaits this, then draws the rest. The rest waits, as a background task, for
 * whatever else the page has to do first (another panel's first picture: several widgets in a notebook). In
 * a hidden page, which paints nothing (a background tab), it does not wait for a paint.
 * @returns {Promise<void>}
 */
export function afterPaint() {
  const scheduler = /** @type {any} */ (globalThis).scheduler;
  const later = (/** @type {() => void} */ resolve) =>
    scheduler?.postTask ? scheduler.postTask(resolve, { priority: "background" }) : setTimeout(resolve, 0);
  return new Promise((resolve) => {
    if (document.visibilityState === "hidden") later(resolve);
    else requestAnimationFrame(() => later(resolve));
  });
}
