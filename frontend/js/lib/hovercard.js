// The hover card: one floating box per document that follows the pointer with a few lines of text
// about what is under it (a grid tile's index ranges and devices).

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
 * Shows the card over `host` with the lines `linesAt` gives for the element under the pointer
 * (none: the card hides).
 * @param {Element} host
 * @param {(target: EventTarget | null) => string[] | null} linesAt
 */
export function hoverCard(host, linesAt) {
  host.addEventListener("mousemove", (ev) => {
    const e = /** @type {MouseEvent} */ (ev);
    const tip = theCard();
    const lines = linesAt(e.target);
    if (!lines) {
      tip.hidden = true;
      return;
    }
    tip.replaceChildren(...lines.map((line) => el("div", "", line)));
    tip.hidden = false;
    const x = Math.min(e.clientX + 14, window.innerWidth - tip.offsetWidth - 8);
    const y = Math.min(e.clientY + 14, window.innerHeight - tip.offsetHeight - 8);
    tip.style.left = `${Math.max(0, x)}px`;
    tip.style.top = `${Math.max(0, y)}px`;
  });
  host.addEventListener("mouseleave", () => (theCard().hidden = true));
}
