// The notebook's colour scheme, which is the notebook's, not the operating system's: JupyterLab and
// Notebook 7 say it on <body data-jp-theme-light>, VS Code with body classes, Colab on <html theme>,
// marimo with <body class="dark-theme"> / "light-theme"; elsewhere (classic Jupyter) the background the
// widget sits on decides (read through shadow roots), and last the system.

/**
 * The colour of a computed `background-color` as [r, g, b] in 0–255, or null when transparent or unread.
 * Chromium writes `rgb(…)`/`rgba(…)`, or `color(srgb r g b / a)` (components 0–1) for colours given so.
 * @param {string} css
 * @returns {number[] | null}
 */
export function opaqueRgb(css) {
  let m = /^rgba?\(([\d.]+),\s*([\d.]+),\s*([\d.]+)(?:,\s*([\d.]+))?\)$/.exec(css);
  if (m) return m[4] === undefined || Number(m[4]) > 0.5 ? [Number(m[1]), Number(m[2]), Number(m[3])] : null;
  m = /^color\(srgb ([\d.e-]+) ([\d.e-]+) ([\d.e-]+)(?: \/ ([\d.e-]+))?\)$/.exec(css);
  if (m) return m[4] === undefined || Number(m[4]) > 0.5 ? [m[1], m[2], m[3]].map((v) => Number(v) * 255) : null;
  return null;
}

/**
 * Whether `node` sits in a dark notebook.
 * @param {Element} node
 * @returns {boolean}
 */
export function isDarkAt(node) {
  const body = document.body;
  const jp = body.dataset.jpThemeLight;
  if (jp === "true" || jp === "false") return jp === "false";
  const cls = body.classList;
  if (cls.contains("vscode-light") || cls.contains("vscode-high-contrast-light")) return false;
  if (cls.contains("vscode-dark") || cls.contains("vscode-high-contrast")) return true;
  const colab = document.documentElement.getAttribute("theme");
  if (colab === "dark" || colab === "light") return colab === "dark";
  if (cls.contains("dark-theme") || cls.contains("light-theme")) return cls.contains("dark-theme");
  for (let n = outOf(node); n; n = outOf(n)) {
    const rgb = opaqueRgb(getComputedStyle(n).backgroundColor);
    if (rgb) return 0.2126 * rgb[0] + 0.7152 * rgb[1] + 0.0722 * rgb[2] < 128;
  }
  return window.matchMedia("(prefers-color-scheme: dark)").matches;
}

/** The element `n` sits in: its parent, or the host of the shadow root it tops. @param {Element} n */
function outOf(n) {
  if (n.parentElement) return n.parentElement;
  const root = n.getRootNode();
  return typeof ShadowRoot !== "undefined" && root instanceof ShadowRoot ? root.host : null;
}

/**
 * Calls `fn` when the notebook's scheme may have changed; returns the function that stops listening.
 * @param {() => void} fn
 * @returns {() => void}
 */
export function watchTheme(fn) {
  const observer = new MutationObserver(fn);
  observer.observe(document.body, { attributes: true, attributeFilter: ["class", "data-jp-theme-light", "data-jp-theme-name"] });
  observer.observe(document.documentElement, { attributes: true, attributeFilter: ["theme", "class", "data-theme"] });
  const media = window.matchMedia("(prefers-color-scheme: dark)");
  media.addEventListener("change", fn);
  return () => {
    observer.disconnect();
    media.removeEventListener("change", fn);
  };
}
