"""The kernel lab against a real ``shardscope serve``: concurrent runs and the page in Chromium.

Screenshots land in ``artifacts/screenshots/kernels-*.png`` (git-ignored) for people to look at.
"""

from __future__ import annotations

import concurrent.futures
import re
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs, urlsplit

import orjson
import pytest
from playwright.sync_api import Browser, Page, expect

from tests.plugins.browser import SHOTS, Watched, runs
from tests.plugins.live import Server

pytestmark = pytest.mark.slow  # a real server, worker processes or a browser: not in the fast inner loop

JSON = {"Content-Type": "application/json"}


def run_body(n: int) -> dict[str, Any]:
    return {
        "kernel": "elementwise",
        "devices": "cpu:8",
        "mesh": {"shape": [2, 4], "axis_names": ["x", "y"], "axis_types": ["auto", "auto"]},
        "inputs": [{"shape": [8, 8 * n], "spec": "P('x', 'y')", "dtype": "float32"}],
    }


def test_twenty_concurrent_runs_get_only_200_or_429(server: Server) -> None:
    def post(n: int) -> tuple[int, dict[str, str], bytes]:
        return server.request("POST", "/api/kernels/run", orjson.dumps(run_body(n)), JSON)

    with concurrent.futures.ThreadPoolExecutor(max_workers=20) as ex:
        answers = list(ex.map(post, range(1, 21)))
    statuses = [status for status, _, _ in answers]
    assert set(statuses) <= {200, 429}, statuses
    assert statuses.count(200) >= 1
    for status, headers, body in answers:
        if status == 429:
            assert int(headers["retry-after"]) >= 1 and b'"code":"busy"' in body


@pytest.fixture(params=["light", "dark"])
def watched(browser: Browser, request: pytest.FixtureRequest) -> Iterator[Watched]:
    context = browser.new_context(viewport={"width": 1400, "height": 1000}, color_scheme=request.param)
    w = Watched(context)
    w.scheme = request.param
    yield w
    context.close()
    assert w.errors == []


def shot(page: Page, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"kernels-{name}.png"), full_page=True)


def test_pick_a_kernel_run_it_and_see_grid_and_collectives(server: Server, watched: Watched) -> None:
    page = watched.page
    page.goto(f"http://127.0.0.1:{server.port}/kernels.html")
    page.wait_for_selector("body[data-ready]", state="attached", timeout=30_000)
    page.get_by_label("Kernel", exact=True).select_option("sum_axis0")
    expect(page.get_by_label("x PartitionSpec")).to_have_value("P('x', 'y')")
    page.get_by_role("button", name="Run").click()
    runs(page, 1)
    expect(page.get_by_role("status")).to_contain_text("done")
    status, result = server.post_json("/api/kernels/run", {
        "kernel": "sum_axis0", "devices": "cpu:8",
        "mesh": {"shape": [2, 4], "axis_names": ["x", "y"], "order": "make_mesh", "axis_types": ["auto", "auto"]},
        "inputs": [{"shape": [8, 8], "spec": "P('x', 'y')", "dtype": "float32"}]})  # fmt: skip
    assert status == 200 and result["cached"] is True  # the page's run, from the cache
    out = result["outputs"][0]
    labels = sorted(page.locator("#outputs svg .tile-label").all_text_contents())
    assert labels == sorted("CPU " + ",".join(map(str, sorted(ids))) for ids in out["tiles"])
    expect(page.locator("#outputs .array-head").first).to_contain_text(out["spec"])
    rows = page.locator("#collectives tr.collective")
    expect(rows).to_have_count(len(result["collectives"]))
    expect(rows.first).to_contain_text("all-reduce")
    groups = " ".join("{" + ",".join(map(str, g)) + "}" for g in result["collectives"][0]["groups"])
    expect(rows.first).to_contain_text(groups)
    expect(page.locator("#collective-mesh")).to_contain_text("all-reduce over x")
    topo = page.get_by_role("link", name="see it on the topology")
    # the link hands the topology view the run's whole state: devices, mesh, an output's layout and
    # the collective's own replica groups
    expected_groups = ";".join(",".join(map(str, g)) for g in result["collectives"][0]["groups"])
    href = urlsplit(topo.get_attribute("href") or "")
    query = parse_qs(href.query)
    assert href.path == "/topology.html"
    assert (query["devices"], query["mesh"], query["axes"], query["types"]) == (["cpu:8"], ["2x4"], ["x,y"], ["auto"])
    assert (query["spec"], query["shape"]) == ([out["spec"]], [",".join(map(str, out["shape"]))])
    assert query["groups"] == [expected_groups]
    assert query["glabel"] == ["all-reduce over x"]
    assert "kernel=sum_axis0" in page.url and "in=8%2C8" in page.url
    page.locator("#stablehlo-box summary").click()
    expect(page.locator("#stablehlo")).to_contain_text("sdy.sharding")
    page.locator("#origins-box summary").click()
    expect(page.locator("#origins")).to_contain_text("given here")
    shot(page, f"01-sum-{watched.scheme}")


def test_an_explicit_axes_refusal_shows_jax_message_and_what_to_change(server: Server, browser: Browser) -> None:
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    watched = Watched(context)
    page = watched.page
    page.goto(f"http://127.0.0.1:{server.port}/kernels.html?kernel=matmul_xxt&types=explicit")
    alert = page.get_by_role("alert")
    expect(alert).to_contain_text("kernel_error", timeout=60_000)
    expect(alert).to_contain_text("Contracting dimensions are sharded")
    expect(alert).to_contain_text("out_sharding")
    expect(page.get_by_label("Axis types")).to_have_value("explicit")
    shot(page, f"02-explicit-error-{watched.scheme}")
    page.get_by_label("Axis types").select_option("auto")
    page.get_by_role("button", name="Run").click()
    runs(page, 1)
    expect(alert).to_be_hidden()
    expect(page.locator("#collectives")).to_contain_text("all-gather")
    shot(page, f"02-explicit-fixed-{watched.scheme}")
    context.close()
    assert watched.errors == []


def test_copied_link_reopens_the_run(server: Server, browser: Browser) -> None:
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    w = Watched(context)
    page = w.page
    page.goto(f"http://127.0.0.1:{server.port}/kernels.html?kernel=ppermute&mesh=2x4&axes=x,y&types=auto")
    runs(page, 1)
    page.get_by_role("button", name="Copy link").click()
    share = page.get_by_label("Share link")
    expect(share).to_have_value(re.compile(r"/s/[A-Za-z0-9_-]{22,}$"))
    url = share.input_value()
    fresh = browser.new_context(viewport={"width": 1400, "height": 1000})
    w2 = Watched(fresh)
    w2.page.goto(url)
    runs(w2.page, 1)
    assert "/kernels.html" in w2.page.url and "kernel=ppermute" in w2.page.url
    expect(w2.page.locator("#collectives")).to_contain_text("collective-permute")
    shot(w2.page, "03-shared-ppermute")
    fresh.close()
    context.close()
    assert w.errors == [] and w2.errors == []
