// Page chrome every view shares: the header's view links and JAX version, the colour scheme, page
// element lookup, and the body data-* counters the browser tests and benchmarks wait on.

import { getJSON } from "./api.js";
import { el } from "./dom.js";

/** One static page per view (index.html is the layout explorer). @type {{name: string, label: string, href: string}[]} */
export const VIEWS = [
  { name: "layout", label: "Layout", href: "/" },
  { name: "topology", label: "Topology", href: "/topology.html" },
  { name: "snapshots", label: "Snapshots", href: "/snapshots.html" },
  { name: "kernels", label: "Kernels", href: "/kernels.html" },
  { name: "compare", label: "Compare", href: "/compare.html" },
];

/**
 * The page's own element `id` (views only: components get their containers handed to them).
 * @param {string} id
 * @returns {HTMLElement}
 */
export function byId(id) {
  return /** @type {HTMLElement} */ (document.getElementById(id));
}

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

/** Calls `fn` when the colour scheme changes (pictures are drawn in the scheme's colours). @param {() => void} fn */
export function onThemeChange(fn) {
  window.matchMedia("(prefers-color-scheme: dark)").addEventListener("change", fn);
}

/** Counts one more `name` event on <body data-name="n"> (tests and benchmarks wait on them). @param {string} name */
export function bump(name) {
  const data = document.body.dataset;
  data[name] = String(Number(data[name] || 0) + 1);
}
