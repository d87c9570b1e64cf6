"""The dashboard's pages and the view module each runs.

Each page's HTML names one script, its view's bundle (``/js/views/<view>.bundle.js``: the view module and every
module it imports, built by the server with the notebook bundler, :mod:`server.bundles`); ``tests/test_pages.py``
holds every page to that.
"""

from __future__ import annotations

from pathlib import Path

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
