"""Plotly.js served from the installed package, CSP-clean (see server/vendor.py)."""

from __future__ import annotations

import hashlib
import time
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


def test_pages_get_the_maplibre_guard_plotly_checks_for(client: TestClient) -> None:
    # Regression guard: if a plotly upgrade changes the id, the page would inject a <style> the CSP refuses.
    # Pages add the element before Plotly's script (frontend/js/lib/plotly.js), with the id the manifest names.
    assert f'document.getElementById("{MAPLIBRE_STYLE_ID}")' in plotly_js_path().read_text(encoding="utf-8")
    assert client.get("/vendor/plotly.json").json()["maplibre_guard"] == MAPLIBRE_STYLE_ID
    loader = (ROOT / "frontend" / "js" / "lib" / "plotly.js").read_text()
    assert "guard.id = where.maplibre_guard" in loader and 'css.id = "plotly.js-style-global"' in loader


def test_plotly_addresses_name_its_content_and_are_cached_for_good(client: TestClient) -> None:
    # Issue 37: a second page never fetches Plotly again; an upgraded plotly has other addresses.
    manifest = client.get("/vendor/plotly.json")
    assert manifest.headers["cache-control"] == "no-cache"  # asked again each time: it names the version
    etag = manifest.headers["etag"]
    assert client.get("/vendor/plotly.json", headers={"if-none-match": etag}).status_code == 304
    where = manifest.json()
    digest = hashlib.sha256(plotly_js_path().read_bytes()).hexdigest()[:16]
    assert where["js"] == f"/vendor/plotly-{digest}.min.js" and where["css"] == f"/vendor/plotly-{digest}.css"
    js = client.get(where["js"], headers={"accept-encoding": "identity"})
    assert js.status_code == 200 and js.content == plotly_js_path().read_bytes()
    assert js.headers["cache-control"] == "public, max-age=31536000, immutable"
    assert "accept-encoding" in js.headers["vary"].lower()
    css = client.get(where["css"])
    assert css.headers["cache-control"] == "public, max-age=31536000, immutable"
    assert css.content == client.get("/vendor/plotly.css").content
    # a page from before an upgrade asks for the old digest: a clear 404, never another version's bytes
    old = client.get("/vendor/plotly-0123456789abcdef.min.js")
    assert old.status_code == 404 and old.json()["error"]["code"] == "not_found"
    assert "reload" in old.json()["error"]["hint"]
    # the unversioned addresses stay, revalidated
    plain = client.get("/vendor/plotly.min.js", headers={"accept-encoding": "identity"})
    assert plain.headers["cache-control"] == "no-cache"
    assert client.get("/vendor/plotly.min.js", headers={"if-none-match": plain.headers["etag"]}).status_code == 304


def test_plotly_goes_out_gzipped_once_compressed(client: TestClient) -> None:
    # 4.8 MB of script is 1.5 MB compressed: compressed once, in a thread the first request starts.
    url = client.get("/vendor/plotly.json").json()["js"]
    raw = plotly_js_path().read_bytes()
    deadline = time.monotonic() + 60
    while True:
        r = client.get(url, headers={"accept-encoding": "gzip"})
        if r.headers.get("content-encoding") == "gzip" or time.monotonic() > deadline:
            break
        assert r.content == raw  # meanwhile: the file as it is
        time.sleep(0.1)
    assert r.headers.get("content-encoding") == "gzip"
    assert r.content == raw  # httpx decodes it
    assert int(r.headers["content-length"]) < len(raw) / 2
    # a client that does not take gzip gets the file as it is
    assert "content-encoding" not in client.get(url, headers={"accept-encoding": "identity"}).headers
