// The error box: what went wrong as text — an API error's code, message and hint (and where in the
// typed text a parse error is), or a local Error's message.

import { ApiError } from "./api.js";
import { el } from "./dom.js";

/**
 * The fields of an error worth showing, from an ApiError or anything thrown.
 * @param {unknown} err
 * @returns {{code: string, message: string, hint?: string, column?: number, axis_types?: string[]}}
 */
export function errorFields(err) {
  if (err instanceof ApiError) return err.error;
  const message = err instanceof Error ? err.message : String(err);
  return { code: "error", message };
}

/**
 * Shows `err` in `box` (null hides the box).
 * @param {HTMLElement} box
 * @param {unknown} err
 * @param {{source?: string, hintLabel?: string}} [opts] `source`: the text a parse error's column points
 *   into (a caret is drawn under it); `hintLabel`: what precedes the hint ("Hint: ").
 */
export function showError(box, err, opts = {}) {
  box.replaceChildren();
  box.hidden = !err;
  if (!err) return;
  const e = errorFields(err);
  const head = el("p");
  head.append(el("code", "", e.code), " ", el("span", "error-message", e.message));
  box.appendChild(head);
  if (opts.source !== undefined && typeof e.column === "number" && e.code === "parse_error") {
    box.appendChild(el("pre", "", `${opts.source}\n${" ".repeat(Math.max(0, e.column - 1))}^ column ${e.column}`));
  }
  if (e.hint) box.appendChild(el("p", "hint", `${opts.hintLabel ?? "Hint: "}${e.hint}`));
  if (e.axis_types) box.appendChild(el("p", "muted", `mesh axis types: ${e.axis_types.join(", ")}`));
}
