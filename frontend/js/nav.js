// The header's view switcher, shared by every page: one static page per view (index.html is the
// layout explorer), each an ES module of its own. A view adds itself to VIEWS.

/** @type {{name: string, label: string, href: string}[]} */
export const VIEWS = [
  { name: "layout", label: "Layout", href: "/" },
  { name: "topology", label: "Topology", href: "/topology.html" },
  { name: "snapshots", label: "Snapshots", href: "/snapshots.html" },
  { name: "kernels", label: "Kernels", href: "/kernels.html" },
];

/**
 * Fills <nav id="views"> with links, marking the current one.
 * @param {string} current the current view's name
 */
export function renderNav(current) {
  const nav = document.getElementById("views");
  if (!nav) return;
  nav.replaceChildren();
  for (const v of VIEWS) {
    const a = document.createElement("a");
    a.href = v.href;
    a.textContent = v.label;
    if (v.name === current) a.setAttribute("aria-current", "page");
    nav.appendChild(a);
  }
}

/** Where a stored share link of `view` opens (pages read `?link=<id>` themselves). */
export function pageForLink(view, id) {
  const v = VIEWS.find((x) => x.name === view);
  return v && v.name !== "layout" ? `${v.href}?link=${encodeURIComponent(id)}` : null;
}
