// Plotly.js (4.8 MB, served from /vendor by the server: server/vendor.py), loaded once, when a page first
// draws a chart, never before: /vendor/plotly.json names the script and its stylesheet at addresses that
// carry the installed plotly's digest (cached for good by the browser), and the id of the element that
// keeps Plotly's bundled MapLibre from injecting CSS. The stylesheet's <link> carries the id and class
// that tell Plotly its rules are there already (strict CSP: Plotly must not inject <style>).

import { getJSON } from "./api.js";
import { afterPaint } from "./dom.js";

/** @type {Promise<any> | null} */
let loading = null;

/**
 * Adds `node` to the page's <head>, resolving once it has loaded (a script or a stylesheet).
 * @param {HTMLScriptElement | HTMLLinkElement} node
 * @param {string} url
 * @returns {Promise<void>}
 */
function added(node, url) {
  return new Promise((resolve, reject) => {
    node.addEventListener("load", () => resolve());
    node.addEventListener("error", () => reject(new Error(`could not load ${url}`)));
    document.head.appendChild(node);
  });
}

/** @returns {Promise<any>} */
async function load() {
  const where = await getJSON("/vendor/plotly.json");
  if (!document.getElementById(where.maplibre_guard)) {
    const guard = document.createElement("meta");
    guard.id = where.maplibre_guard;
    guard.name = "plotly-maplibre-css";
    guard.content = "not used";
    document.head.appendChild(guard);
  }
  const css = document.createElement("link");
  css.id = "plotly.js-style-global";
  css.className = "no-inline-styles";
  css.rel = "stylesheet";
  css.href = where.css;
  const script = document.createElement("script");
  script.src = where.js;
  await Promise.all([added(css, where.css), added(script, where.js)]);
  return /** @type {any} */ (window).Plotly;
}

/**
 * Plotly, loading it on the first call.
 * @param {{afterPaint?: boolean}} [opts] afterPaint: start only after the next paint, so what is
 *   already built shows before Plotly's long first run
 * @returns {Promise<any>} window.Plotly
 */
export function loadPlotly(opts = {}) {
  const w = /** @type {any} */ (window);
  if (w.Plotly) return Promise.resolve(w.Plotly);
  if (!loading) {
    loading = (opts.afterPaint ? afterPaint() : Promise.resolve()).then(load);
    loading.catch(() => (loading = null)); // a later chart tries again
  }
  return loading;
}
