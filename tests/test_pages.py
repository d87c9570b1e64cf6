"""The dashboard's pages ask for everything they run at once (issue 37): each page's HTML lists every module
its view imports as ``<link rel="modulepreload">`` (so the browser fetches them side by side, not one import
level after another) and starts ``js/hosts/early.js`` on its own, which asks for the page's first data while
the modules load. The import graph is read with the notebook bundler's own parser
(``shardscope/notebook/bundle.py``), the one that follows the same imports for the widget.
"""

from __future__ import annotations

import re

import pytest

from shardscope.pages import EARLY, FRONTEND, PAGES, imported


def test_every_page_is_listed() -> None:
    assert {p.name for p in FRONTEND.glob("*.html")} == set(PAGES)


@pytest.mark.parametrize("page", sorted(PAGES))
def test_a_page_preloads_its_whole_module_graph(page: str) -> None:
    html = (FRONTEND / page).read_text(encoding="utf-8")
    listed = re.findall(r'<link rel="modulepreload" href="/([^"]+)">', html)
    wanted = [m for m in imported(PAGES[page]) if m != EARLY]
    block = "".join(f'  <link rel="modulepreload" href="/{m}">\n' for m in wanted)
    assert sorted(listed) == sorted(wanted), f"{page} should list (make docs-gen writes it):\n{block}"
    assert len(listed) == len(set(listed))
    assert f'<script type="module" src="/{PAGES[page]}"></script>' in html
    # early.js runs on its own, as soon as it is here (the page host imports the same module: one instance)
    assert f'<script type="module" async src="/{EARLY}"></script>' in html
    assert EARLY in imported(PAGES[page])


@pytest.mark.parametrize("page", sorted(PAGES))
def test_no_page_asks_for_plotly_up_front(page: str) -> None:
    # Plotly (4.8 MB) is loaded by the chart that needs it (js/lib/plotly.js), never by a page's <head>.
    assert "/vendor/" not in (FRONTEND / page).read_text(encoding="utf-8")
