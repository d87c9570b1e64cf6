"""The dashboard pages' ``<link rel="modulepreload">`` lists, written from their views' import graphs (issue 37:
a page asks for every module it runs at once, not one import level after another).

``make docs-gen`` runs ``python -m shardscope.pages``; ``tests/test_pages.py`` fails when a list drifts from
the graph. The graph is read with the notebook bundler's own parser (:mod:`shardscope.notebook.bundle`), the one
that follows the same imports for the widget."""

from __future__ import annotations

import re
import sys
from collections import deque
from pathlib import Path

from shardscope.notebook.bundle import parse_module

FRONTEND = Path(__file__).resolve().parent.parent / "frontend"
EARLY = "js/hosts/early.js"
"""Started by each page on its own (``async``), so it asks for the page's first data while the modules load."""
PAGES = {
    "index.html": "js/views/layout.js",
    "topology.html": "js/views/topology.js",
    "kernels.html": "js/views/kernels.js",
    "snapshots.html": "js/views/snapshots.js",
    "compare.html": "js/views/compare.js",
}
"""Each page and the view module it runs."""
_PRELOADS = re.compile(r'(?:  <link rel="modulepreload" href="/[^"]+">\n)+')


def imported(entry: str, frontend: Path = FRONTEND) -> list[str]:
    """Every module ``entry`` imports, directly or not, nearest first."""
    seen, order, queue = {entry}, [], deque([entry])
    while queue:
        path = queue.popleft()
        module = parse_module(path, (frontend / path).read_text(encoding="utf-8"), frontend, entry=path == entry)
        for src, _ in module.imports:
            if src not in seen:
                seen.add(src)
                order.append(src)
                queue.append(src)
    return order


def preload_block(page: str, frontend: Path = FRONTEND) -> str:
    """The ``<link rel="modulepreload">`` lines ``page`` should carry: its view's modules but :data:`EARLY`."""
    wanted = [m for m in imported(PAGES[page], frontend) if m != EARLY]
    return "".join(f'  <link rel="modulepreload" href="/{m}">\n' for m in wanted)


def write(frontend: Path = FRONTEND) -> list[str]:
    """Rewrites every page's preload list (the one run of modulepreload lines in its head); the pages changed."""
    changed = []
    for page in PAGES:
        path = frontend / page
        html = path.read_text(encoding="utf-8")
        runs = list(_PRELOADS.finditer(html))
        if len(runs) != 1:
            raise SystemExit(f"{page}: expected one run of modulepreload lines in its head, found {len(runs)}")
        new = html[: runs[0].start()] + preload_block(page, frontend) + html[runs[0].end() :]
        if new != html:
            path.write_text(new, encoding="utf-8")
            changed.append(page)
    return changed


if __name__ == "__main__":
    for page in write():
        print(f"wrote {FRONTEND / page}", file=sys.stderr)
