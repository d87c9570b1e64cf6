// What every panel builds the same way: its error boxes, its share button and status line, the
// "settled" explanation of an error while someone types, and the theme subscription it drops on dispose.

import { h } from "../lib/dom.js";
import { errorFields, showError } from "../lib/errors.js";
import { shareControl } from "../lib/share.js";

/** @typedef {import("../hosts/host.js").Host} Host */

/** Typing this long ago (ms) counts as having paused: only then does an error show and speak. */
export const SETTLE_MS = 600;

/** An error box (role=alert, hidden until there is something to say). @param {string} part @param {string} [cls] */
export function errorBox(part, cls = "") {
  return h("div", { class: `error ${cls}`.trim(), role: "alert", part, hidden: true });
}

/**
 * The status line (or the panel's own, `status`) and, when the host can make links, the share button,
 * in `toolbar`.
 * @param {HTMLElement} toolbar
 * @param {Host} host
 * @param {() => any} state the panel's state now (what the link reopens)
 * @param {(e: unknown) => void} onError
 * @param {HTMLElement} [status] a status line the panel has already
 * @returns {HTMLElement} the status line
 */
export function shareAndStatus(toolbar, host, state, onError, status) {
  const line = status || h("span", { class: "muted", role: "status", part: "status" });
  const share = h("span", { class: "share", part: "share" });
  const make = host.share;
  if (make) shareControl(share, { label: host.shareLabel, make: () => make(state()), onStatus: (t) => (line.textContent = t), onError });
  toolbar.append(share);
  if (!status) toolbar.append(line);
  return line;
}

/**
 * An explanation that waits for typing to pause: `show(err)` fills `box` only once `typedAt()` is
 * SETTLE_MS old and only when it says something new (a screen reader hears one message per pause, not
 * one per keystroke); `show(null)` clears at once.
 * @param {HTMLElement} box
 * @param {() => number} typedAt when the last keystroke was (performance.now())
 * @param {(err: unknown) => void} shown called once the explanation is on screen
 * @returns {{show: (err: unknown, source?: string) => void, dispose: () => void}}
 */
export function settledError(box, typedAt, shown) {
  let timer = 0;
  let said = "";
  return {
    show(err, source) {
      clearTimeout(timer);
      if (!err) {
        said = "";
        showError(box, null);
        return;
      }
      timer = window.setTimeout(() => {
        const e = errorFields(err);
        const key = `${e.code}|${e.message}|${source ?? ""}`;
        if (key === said) return;
        said = key;
        showError(box, err, { source });
        shown(err);
      }, Math.max(0, typedAt() + SETTLE_MS - performance.now()));
    },
    dispose: () => clearTimeout(timer),
  };
}

/**
 * A one-click way out under an error's explanation.
 * @param {HTMLElement} box
 * @param {string} label
 * @param {() => void} act
 */
export function fixButton(box, label, act) {
  const b = h("button", { class: "fix", type: "button" }, label);
  b.addEventListener("click", act);
  box.appendChild(b);
  return b;
}

/**
 * The field an error is about, so it can be marked next to the control that fixes it: the error's own
 * `field` when the API names it, else what its code says (an indivisible dimension is the shape's, not
 * the spec's; too_large says what was too large in its message).
 * @param {{code: string, message?: string, field?: string}} e
 * @returns {"spec" | "shape" | "dtype" | "mesh" | "devices" | "types" | "rules" | null}
 */
export function fieldOf(e) {
  if (e.field && ["spec", "shape", "dtype", "mesh", "devices", "types", "rules"].includes(e.field)) return /** @type {any} */ (e.field);
  const message = e.message || "";
  switch (e.code) {
    case "parse_error":
    case "unknown_axis":
    case "duplicate_axis":
    case "rank_mismatch":
      return "spec";
    case "invalid_spec":
      return /unreduced|reduced axes/i.test(message) && /Explicit/.test(message) ? "types" : "spec";
    case "indivisible":
    case "bad_shape":
      return "shape";
    case "bad_dtype":
      return "dtype";
    case "bad_devices":
      return "devices";
    case "bad_mesh":
    case "bad_axis_name":
    case "mesh_unplaceable":
      return "mesh";
    case "bad_rules":
      return "rules";
    case "too_large":
      if (/spec text/.test(message)) return "spec";
      if (/devices/.test(message) && !/elements/.test(message)) return /mesh/.test(message) ? "mesh" : "devices";
      return "shape";
    default:
      return null;
  }
}

/**
 * Stops what a panel started, once: `add(fn)` collects, `dispose()` runs them (a panel's dispose).
 * @returns {{add: (...fns: (() => void)[]) => void, dispose: () => void, readonly disposed: boolean}}
 */
export function lifetime() {
  /** @type {(() => void)[]} */
  const stops = [];
  let done = false;
  return {
    add: (...fns) => void stops.push(...fns),
    dispose() {
      if (done) return;
      done = true;
      for (const stop of stops.splice(0)) stop();
    },
    get disposed() {
      return done;
    },
  };
}

/**
 * An example's button: its label, its source on hover.
 * @param {{label: string, source: string}} e
 * @param {() => void} open
 */
export function exampleButton(e, open) {
  const b = h("button", { type: "button", title: e.source }, e.label);
  b.addEventListener("click", open);
  return b;
}
