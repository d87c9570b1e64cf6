// The hover card: one floating box per document that follows the pointer (or sits beside the
// keyboard's current item) with a few lines of text about what is under it (a grid tile's index
// ranges and devices, a topology device and the shard it holds). It shows at once: no native
// `title` delay.

import { el } from "./dom.js";

/** @type {HTMLElement | null} */
let card = null;

function theCard() {
  if (!card || !card.isConnected) {
    card = el("div", "tooltip");
    card.id = "tooltip";
    card.setAttribute("role", "tooltip");
    card.hidden = true;
    document.body.appendChild(card);
  }
  return card;
}

/**
 * Shows `lines` in the card near the viewport point (x, y), kept inside the window.
 * @param {string[]} lines
 * @param {number} x
 * @param {number} y
 */
export function showCard(lines, x, y) {
  const tip = theCard();
  tip.replaceChildren(...lines.map((line) => el("div", "", line)));
  tip.hidden = false;
  const left = Math.min(x + 14, window.innerWidth - tip.offsetWidth - 8);
  const top = Math.min(y + 14, window.innerHeight - tip.offsetHeight - 8);
  tip.style.left = `${Math.max(0, left)}px`;
  tip.style.top = `${Math.max(0, top)}px`;
}

/** Hides the card. */
export function hideCard() {
  if (card) card.hidden = true;
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
    else showCard(lines, e.clientX, e.clientY);
  });
  host.addEventListener("mouseleave", hideCard);
}
