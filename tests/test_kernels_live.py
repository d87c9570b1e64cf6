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

pytestmark = pytest.mark.live  # a real server on a socket

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
    labels = sorted(page.locator("[data-part=outputs] svg .tile-label").all_text_contents())
    assert labels == sorted("CPU " + ",".join(map(str, sorted(ids))) for ids in out["tiles"])
    expect(page.locator("[data-part=outputs] .array-head").first).to_contain_text(out["spec"])
    rows = page.locator("[data-part=collectives] tr.collective")
    expect(rows).to_have_count(len(result["collectives"]))
    expect(rows.first).to_contain_text("all-reduce")
    groups = " ".join("{" + ",".join(map(str, g)) + "}" for g in result["collectives"][0]["groups"])
    expect(rows.first).to_contain_text(groups)
    expect(page.locator("[data-part=collective-mesh]")).to_contain_text("all-reduce over x")
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
    page.locator("[data-part=stablehlo-box] summary").click()
    expect(page.locator("[data-part=stablehlo]")).to_contain_text("sdy.sharding")
    page.locator("[data-part=origins-box] summary").click()
    expect(page.locator("[data-part=origins]")).to_contain_text("given here")
    # memory over program order, as on a plan's page (issue 33): the run's own timeline, XLA's peak to the byte
    timeline = page.locator("[data-part=memory-timeline]")
    expect(timeline.locator("svg.memory-timeline-chart")).to_have_count(1)
    peak = timeline.locator("[data-part=timeline-peak]")
    assert int(peak.get_attribute("data-bytes") or -1) == result["memory_timeline"]["peak_bytes"]
    assert result["memory_timeline"]["peak_bytes"] == result["program"]["memory"]["peak_memory_in_bytes"]
    shot(page, f"01-sum-{watched.scheme}")
    timeline.screenshot(path=str(SHOTS / f"kernel-timeline-{watched.scheme}.png"))


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
    expect(page.locator("[data-part=collectives]")).to_contain_text("all-gather")
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
    expect(w2.page.locator("[data-part=collectives]")).to_contain_text("collective-permute")
    shot(w2.page, "03-shared-ppermute")
    fresh.close()
    context.close()
    assert w.errors == [] and w2.errors == []


# ---- issue 13 ----------------------------------------------------------------------------------


def rgb(css: str) -> tuple[int, int, int]:
    r, g, b = (int(v) for v in re.findall(r"\d+", css)[:3])
    return r, g, b


def test_collective_groups_get_colours_that_tell_them_apart(server: Server, watched: Watched) -> None:
    # Regression: groups 0 and 3 of a collective got near-identical colours (golden-angle hues of 3 and 24).
    page = watched.page
    page.goto(f"http://127.0.0.1:{server.port}/kernels.html?kernel=sum_axis0&types=auto")
    runs(page, 1)
    page.locator("[data-part=collectives] tr.collective").first.click()
    cells = page.locator("[data-part=collective-mesh] td[data-device]")
    expect(cells).to_have_count(8)
    background = "(e) => getComputedStyle(e).backgroundColor"
    colour = {
        int(cells.nth(i).get_attribute("data-device") or "-1"): rgb(cells.nth(i).evaluate(background)) for i in range(8)
    }
    groups = [colour[i] for i in range(4)]  # the all-reduce over x: {0,4} {1,5} {2,6} {3,7}
    assert all(colour[i] == colour[i + 4] for i in range(4))
    for a in range(4):
        for b in range(a + 1, 4):
            distance = sum((p - q) ** 2 for p, q in zip(groups[a], groups[b], strict=True)) ** 0.5
            assert distance > 60, (a, b, groups)
    shot(page, f"04-group-colours-{watched.scheme}")


def test_an_input_error_names_the_input_and_the_source_keeps_its_indentation(server: Server, watched: Watched) -> None:
    # Regression: errors did not say which input was wrong; "Source (exactly what runs)" lost its
    # indentation.
    page = watched.page
    page.goto(f"http://127.0.0.1:{server.port}/kernels.html?kernel=matmul_xw&types=auto")
    runs(page, 1)
    source = page.locator("[data-part=kernel-source]").text_content() or ""
    lines = source.splitlines()
    assert lines[0].startswith("def ") and all(line.startswith("    ") for line in lines[1:] if line.strip())
    w = page.get_by_label("w PartitionSpec")
    w.fill("P('q', None)")
    page.get_by_role("button", name="Run").click()
    alert = page.get_by_role("alert")
    expect(alert).to_contain_text("input w (P('q', None)")
    expect(alert).to_contain_text("unknown_axis")
    expect(w).to_have_attribute("aria-invalid", "true")
    expect(page.get_by_label("x PartitionSpec")).not_to_have_attribute("aria-invalid", "true")
    # the same kernel failed: its last results stay, dimmed and captioned as the previous run's
    expect(page.locator("[data-part=results]")).to_be_visible()
    expect(page.locator("[data-part=results-note]")).to_contain_text("previous run of matmul_xw")
    shot(page, f"05-input-error-{watched.scheme}")


def test_a_refusal_of_another_kernel_does_not_leave_the_old_results(server: Server, watched: Watched) -> None:
    # Regression: a refusal left the previous, different kernel's results under it.
    page = watched.page
    page.goto(f"http://127.0.0.1:{server.port}/kernels.html?kernel=elementwise&types=auto")
    runs(page, 1)
    expect(page.locator("[data-part=results]")).to_be_visible()
    page.get_by_label("Kernel", exact=True).select_option("matmul_xxt")
    page.get_by_label("Axis types").select_option("explicit")
    page.get_by_role("button", name="Run").click()
    expect(page.get_by_role("alert")).to_contain_text("Contracting dimensions are sharded", timeout=60_000)
    expect(page.locator("[data-part=results]")).to_be_hidden()


def test_tall_grids_keep_readable_labels(server: Server, watched: Watched) -> None:
    # Regression: tall grids were scaled down whole, their labels to ~7 px.
    page = watched.page
    page.goto(f"http://127.0.0.1:{server.port}/kernels.html?kernel=layer_shard_map")
    runs(page, 1)
    labels = page.locator("[data-part=inputs-placed] .tile-label")
    expect(labels.first).to_be_visible()
    sizes = [float(labels.nth(i).get_attribute("font-size") or "0") for i in range(labels.count())]
    assert min(sizes) >= 9, sizes
    heights = page.locator("[data-part=inputs-placed] .grid-plot").evaluate_all(
        "ps => ps.map(p => p.getBoundingClientRect().height)"
    )
    assert max(heights) <= 421
