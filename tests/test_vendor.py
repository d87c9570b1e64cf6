"""Plotly.js served from the installed package, CSP-clean (see server/vendor.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from starlette.testclient import TestClient

from server.vendor import MAPLIBRE_STYLE_ID, extract_plotly_css, plotly_js_path

ROOT = Path(__file__).resolve().parent.parent


def test_plotly_is_served_from_the_installed_package(client: TestClient) -> None:
    response = client.get("/vendor/plotly.min.js")
    assert response.status_code == 200
    assert response.content == plotly_js_path().read_bytes()
    assert "javascript" in response.headers["content-type"]
    assert "script-src 'self'" in response.headers["content-security-policy"]


def test_plotly_css_is_the_rules_table_plotly_would_inject(client: TestClient) -> None:
    css = client.get("/vendor/plotly.css")
    assert css.status_code == 200 and css.headers["content-type"].startswith("text/css")
    text = css.text
    # the rules that matter for layout and the notifier, rewritten as plotly.js rewrites them
    assert ".js-plotly-plot .plotly .main-svg{position:absolute;top:0;left:0;pointer-events:none;}" in text
    assert ".plotly-notifier{" in text
    assert "X " not in text and text.count("{") == text.count("}")


def test_css_extraction_reads_literals_without_evaluating() -> None:
    js = 'var a={"X,X div":\'font-family:"Open Sans";\',"Y .n":"color:#fff;",Y:"top:0;"};for(k in a)'
    assert extract_plotly_css(js) == (
        '.js-plotly-plot .plotly,.js-plotly-plot .plotly div{font-family:"Open Sans";}\n'
        ".plotly-notifier .n{color:#fff;}\n.plotly-notifier{top:0;}\n"
    )
    with pytest.raises(ValueError, match="not found"):
        extract_plotly_css("var nothing = 1;")


def test_pages_carry_the_maplibre_guard_plotly_checks_for() -> None:
    # Regression guard: if a plotly upgrade changes the id, the page would inject a <style> the CSP refuses.
    assert f'document.getElementById("{MAPLIBRE_STYLE_ID}")' in plotly_js_path().read_text(encoding="utf-8")
    assert f'id="{MAPLIBRE_STYLE_ID}"' in (ROOT / "frontend" / "snapshots.html").read_text()
