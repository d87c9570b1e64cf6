// The notebook's colour scheme, which is the notebook's, not the operating system's: JupyterLab and
// Notebook 7 say it on <body data-jp-theme-light>, VS Code with body classes, Colab on <html theme>;
// elsewhere (marimo, classic Jupyter) the background the widget sits on decides, and last the system.

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
  for (let n = node.parentElement; n; n = n.parentElement) {
    const m = /rgba?\(([\d.]+),\s*([\d.]+),\s*([\d.]+)(?:,\s*([\d.]+))?\)/.exec(getComputedStyle(n).backgroundColor);
    if (m && (m[4] === undefined || Number(m[4]) > 0.5)) {
      return 0.2126 * Number(m[1]) + 0.7152 * Number(m[2]) + 0.0722 * Number(m[3]) < 128;
    }
  }
  return window.matchMedia("(prefers-color-scheme: dark)").matches;
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
