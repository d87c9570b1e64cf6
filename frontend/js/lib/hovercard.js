// The hover card: one floating box per document that follows the pointer (or sits beside the
// keyboard's current item) with a few lines of text about what is under it (a grid tile's index
// ranges and devices, a topology device and the shard it holds). It shows at once: no native
// `title` delay.
//
// It lives in the page's <body>, where no scrolled or clipped container can cut it off. A view drawn
// inside a shadow root (marimo shows a notebook widget in one) cannot be styled from <body>: there the
// card lives in the nearest element marked `data-card-home` (the widget's root), under the widget's
// own stylesheet and theme.

import { el } from "./dom.js";

/** @type {WeakMap<Element, HTMLElement>} the card of each home (a widget's goes with the widget) */
const cards = new WeakMap();
/** @type {HTMLElement | null} the card on screen, if any: only one shows at a time */
let shown = null;

/** Where the card for `near` lives. @param {Element | undefined} near */
function homeOf(near) {
  const root = near?.getRootNode();
  if (near && typeof ShadowRoot !== "undefined" && root instanceof ShadowRoot) {
    return near.closest("[data-card-home]") || root.firstElementChild || document.body;
  }
  return document.body;
}

/** @param {Element | undefined} near */
function theCard(near) {
  const home = homeOf(near);
  let card = cards.get(home);
  if (!card || !card.isConnected) {
    card = el("div", "tooltip");
    card.id = "tooltip";
    card.setAttribute("role", "tooltip");
    card.hidden = true;
    home.appendChild(card);
    cards.set(home, card);
  }
  return card;
}

/**
 * Shows `lines` in the card near the viewport point (x, y), kept inside the window.
 * @param {string[]} lines
 * @param {number} x
 * @param {number} y
 * @param {Element} [near] what the card is about (the element under the pointer or focused): says
 *   which document or shadow root the card belongs in
 */
export function showCard(lines, x, y, near) {
  const tip = theCard(near);
  if (shown && shown !== tip) shown.hidden = true;
  shown = tip;
  tip.replaceChildren(...lines.map((line) => el("div", "", line)));
  tip.hidden = false;
  const left = Math.min(x + 14, window.innerWidth - tip.offsetWidth - 8);
  const top = Math.min(y + 14, window.innerHeight - tip.offsetHeight - 8);
  tip.style.left = `${Math.max(0, left)}px`;
  tip.style.top = `${Math.max(0, top)}px`;
}

/** Hides the card. */
export function hideCard() {
  if (shown) shown.hidden = true;
  shown = null;
}

/**
 * Shows the card over `host` with the lines `linesAt` gives for what is under the pointer (none:
 * the card hides).
 * @param {Element} host
 * @param {(target: EventTarget | null, event: MouseEvent) => string[] | null} linesAt
 */
export function hoverCard(host, linesAt) {
  host.addEventListener("mousemove", (ev) => {
    const e = /** @type {MouseEvent} */ (ev);
    const lines = linesAt(e.target, e);
    if (!lines) hideCard();
    else showCard(lines, e.clientX, e.clientY, host);
  });
  host.addEventListener("mouseleave", hideCard);
}
