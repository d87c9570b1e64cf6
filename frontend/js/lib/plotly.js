// Plotly.js (4.8 MB, served from /vendor by the server), loaded once, on first need. Pages that use
// it link /vendor/plotly.css and carry the MapLibre guard element themselves (strict CSP: Plotly
// must not inject <style>).

/** @type {Promise<any> | null} */
let loading = null;

/**
 * Plotly, loading /vendor/plotly.min.js on the first call.
 * @param {{afterPaint?: boolean}} [opts] afterPaint: start only after the next paint, so what is
 *   already built shows before Plotly's long first run (a page may preload the file meanwhile)
 * @returns {Promise<any>} window.Plotly
 */
export function loadPlotly(opts = {}) {
  const w = /** @type {any} */ (window);
  if (w.Plotly) return Promise.resolve(w.Plotly);
  if (!loading) {
    loading = new Promise((resolve, reject) => {
      const add = () => {
        const script = document.createElement("script");
        script.src = "/vendor/plotly.min.js";
        script.addEventListener("load", () => resolve(w.Plotly));
        script.addEventListener("error", () => reject(new Error("could not load /vendor/plotly.min.js")));
        document.head.appendChild(script);
      };
      if (opts.afterPaint) requestAnimationFrame(() => setTimeout(add, 0));
      else add();
    });
  }
  return loading;
}
