"""The dashboard's pages run one script each (issue 37): their view and every module it imports as one bundle,
built by the server (``server/bundles.py``) with the notebook widget's bundler — one request instead of forty,
the first paint no longer waiting on them — and built again as soon as one of its modules changes.
"""

from __future__ import annotations

import re
import shutil
import time
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from shardscope.notebook.bundle import bundle, bundle_with_files
from shardscope.pages import FRONTEND, PAGES, bundle_address
from tests.conftest import ClientFactory


def test_every_page_is_listed() -> None:
    assert {p.name for p in FRONTEND.glob("*.html")} == set(PAGES)


@pytest.mark.parametrize("page", sorted(PAGES))
def test_a_page_runs_its_view_as_one_script(client: TestClient, page: str) -> None:
    html = (FRONTEND / page).read_text(encoding="utf-8")
    scripts = re.findall(r"<script\b[^>]*>", html)
    assert scripts == [f'<script type="module" src="{bundle_address(page)}">'], scripts
    assert "modulepreload" not in html
    answer = client.get(bundle_address(page))
    assert answer.status_code == 200 and answer.headers["content-type"].startswith("text/javascript")
    assert answer.headers["cache-control"] == "no-cache"
    assert answer.text == bundle(FRONTEND, PAGES[page])
    modules = bundle_with_files(FRONTEND, PAGES[page])[1]
    assert "js/hosts/early.js" in modules and len(modules) > 5
    for module in modules[:-1]:  # every module of the view's graph, once (the entry last, at the top level)
        assert answer.text.count(f"// ---- {module}\n") == 1, module
    again = client.get(bundle_address(page), headers={"if-none-match": answer.headers["etag"]})
    assert again.status_code == 304 and again.content == b""


@pytest.mark.parametrize("page", sorted(PAGES))
def test_no_page_asks_for_plotly_up_front(page: str) -> None:
    # Plotly (4.8 MB) is loaded by the chart that needs it (js/lib/plotly.js), never by a page's <head>.
    assert "/vendor/" not in (FRONTEND / page).read_text(encoding="utf-8")


def test_a_bundle_goes_out_gzipped_to_a_browser_that_takes_it(client: TestClient) -> None:
    address = bundle_address("snapshots.html")
    plain = client.get(address, headers={"accept-encoding": "identity"})
    assert "content-encoding" not in plain.headers and plain.headers["vary"] == "Accept-Encoding"
    raw = client.get(address, headers={"accept-encoding": "gzip, deflate, br"})
    assert raw.headers["content-encoding"] == "gzip" and raw.text == plain.text  # httpx decodes it
    assert int(raw.headers["content-length"]) * 3 < len(plain.content)  # 275 KiB of modules, 84 KiB on the wire
    assert raw.headers["etag"] != plain.headers["etag"]  # one ETag per representation
    for answer, encoding in ((plain, "identity"), (raw, "gzip")):
        again = client.get(address, headers={"accept-encoding": encoding, "if-none-match": answer.headers["etag"]})
        assert again.status_code == 304


def test_bundles_are_kept_within_their_byte_bound(make_client: ClientFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    from server import bundles

    c = make_client()
    pages = next(r.app.bundles for r in c.app.routes if getattr(r, "name", "") == "frontend")  # type: ignore[attr-defined]
    layout = c.get("/js/views/layout.bundle.js")
    assert pages.kept_bytes() == len(layout.text.encode()) + len(pages.get("layout").gzipped)
    monkeypatch.setattr(bundles, "MAX_KEPT_BYTES", pages.kept_bytes() + 1)  # room for no second bundle
    topology = c.get("/js/views/topology.bundle.js")  # built for its request, served whole, not kept
    assert topology.status_code == 200 and topology.text == bundle(FRONTEND, PAGES["topology.html"])
    assert set(pages._built) == {"layout"} and pages.kept_bytes() <= bundles.MAX_KEPT_BYTES


def test_a_bundle_follows_its_modules(make_client: ClientFactory, tmp_path: Path) -> None:
    frontend = tmp_path / "frontend"
    shutil.copytree(FRONTEND, frontend)
    c = make_client(frontend_dir=frontend)
    first = c.get("/js/views/layout.bundle.js")
    assert first.status_code == 200 and "const answer = 42" not in first.text
    dom = frontend / "js" / "lib" / "dom.js"
    time.sleep(0.01)
    dom.write_text(dom.read_text(encoding="utf-8") + "\nexport const answer = 42;\n", encoding="utf-8")
    second = c.get("/js/views/layout.bundle.js")  # an edited module is served at once
    assert "export const answer" not in second.text and "const answer = 42;" in second.text
    assert second.headers["etag"] != first.headers["etag"]
    assert c.get("/js/views/layout.bundle.js", headers={"if-none-match": first.headers["etag"]}).status_code == 200
    # only the pages' views are bundled; a module is still served as itself
    assert c.get("/js/views/nothere.bundle.js").status_code == 404
    assert c.get("/js/lib/dom.bundle.js").status_code == 404
    assert c.get("/js/views/layout.js").text.startswith("// The layout page")
    assert c.post("/js/views/layout.bundle.js").status_code == 405
