// Page chrome every page shares (the page host's, hosts/page.js): the header's view links and JAX
// version, and the colour scheme.

import { getJSON } from "./api.js";
import { el } from "./dom.js";
import { VIEWS } from "./vocabulary.js";

/**
 * Fills the page's <header class="top">: links to every view after the title (the current one
 * marked), and the server's JAX version at the end once /api/health answers.
 * @param {string} current the current view's name
 */
export function bootPage(current) {
  const header = /** @type {HTMLElement} */ (document.querySelector("header.top"));
  const nav = el("nav", "views");
  nav.setAttribute("aria-label", "Views");
  for (const v of VIEWS) {
    const a = el("a", "", v.label);
    a.href = v.href;
    if (v.name === current) a.setAttribute("aria-current", "page");
    nav.appendChild(a);
  }
  const version = el("span", "muted jax-version");
  header.querySelector("h1")?.after(nav);
  header.appendChild(version);
  getJSON("/api/health")
    .then((health) => (version.textContent = `JAX ${health.jax_version}`))
    .catch(() => {}); // the views say what failed; the version is only a label
}

/** Whether the dark colour scheme is on. @returns {boolean} */
export function isDark() {
  return window.matchMedia("(prefers-color-scheme: dark)").matches;
}
