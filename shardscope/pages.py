"""The dashboard's pages and the view module each runs.

Each page's HTML names one script, its view's bundle (``/js/views/<view>.bundle.js``: the view module and every
module it imports, built by the server with the notebook bundler, :mod:`server.bundles`); ``tests/test_pages.py``
holds every page to that. :func:`imported` reads a view's import graph with the same bundler's parser.
"""

from __future__ import annotations

from collections import deque
from pathlib import Path

from shardscope.notebook.bundle import parse_module

FRONTEND = Path(__file__).resolve().parent.parent / "frontend"
PAGES = {
    "index.html": "js/views/layout.js",
    "topology.html": "js/views/topology.js",
    "kernels.html": "js/views/kernels.js",
    "snapshots.html": "js/views/snapshots.js",
    "compare.html": "js/views/compare.js",
}
"""Each page and the view module it runs."""


def bundle_address(page: str) -> str:
    """The one script ``page`` names: its view's bundle."""
    return f"/js/views/{Path(PAGES[page]).stem}.bundle.js"


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
