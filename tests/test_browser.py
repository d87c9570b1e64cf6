"""The layout explorer and the topology view in headless Chromium (Debian's, driven by Playwright)
against a real server.

Screenshots of each state land in ``artifacts/screenshots/`` (git-ignored) for people to look at.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.plugins.browser import Watched, rendered, shot
from tests.plugins.live import Server

pytestmark = pytest.mark.browser  # a real server or notebook and a browser


def tile_labels(page: Page) -> list[str]:
    return sorted(page.locator("[data-part=grid] svg .tile-label").all_text_contents())


def api_layout(server: Server, body: dict[str, Any]) -> dict[str, Any]:
    status, layout = server.post_json("/api/layout", body)
    assert status == 200, layout
    return dict(layout)


def test_default_view_shows_device_labels(server: Server, watched: Watched) -> None:
    page = watched.page
    page.goto(f"http://127.0.0.1:{server.port}/")
    rendered(page)
    layout = api_layout(
        server,
        {"devices": "tpu:v5e:4x4", "mesh": {"shape": [4, 4], "axis_names": ["x", "y"]}, "spec": "P('x', None)",
         "shape": [16, 16], "dtype": "float32"},
    )  # fmt: skip
    want = sorted("TPU " + ",".join(map(str, sorted(ids))) for ids in layout["tiles"])
    assert tile_labels(page) == want == ["TPU 0,1,2,3", "TPU 12,13,14,15", "TPU 4,5,6,7", "TPU 8,9,10,11"]
    expect(page.get_by_label("PartitionSpec")).to_have_value("P('x', None)")
    expect(page.locator("[data-part=summary]")).to_contain_text("replicated over y")
    # jax.make_mesh's axes are Explicit: the sharding is in the type, shown as JAX prints it (the API's typed)
    assert "Explicit" in layout["mesh"]["axis_types"] and "@" in layout["typed"]
    expect(page.locator("[data-part=summary]")).to_contain_text("typed" + layout["typed"])
    shot(page, "01-default")


def test_typing_a_spec_updates_grid_and_url(server: Server, watched: Watched) -> None:
    page = watched.page
    page.goto(f"http://127.0.0.1:{server.port}/?devices=cpu:8&mesh=2x4&axes=x,y&spec=P()&shape=8,16")
    rendered(page)
    box = page.get_by_label("PartitionSpec")
    box.fill("")
    box.press_sequentially("P('x', 'y')", delay=5)
    page.wait_for_function("() => document.querySelectorAll('[data-part=grid] .tile').length === 8", polling=100)
    layout = api_layout(
        server,
        {"devices": "cpu:8", "mesh": {"shape": [2, 4], "axis_names": ["x", "y"]}, "spec": "P('x', 'y')",
         "shape": [8, 16], "dtype": "float32"},
    )  # fmt: skip
    assert tile_labels(page) == sorted(f"CPU {ids[0]}" for ids in layout["tiles"])
    assert "spec=P%28%27x%27%2C+%27y%27%29" in page.url
    shot(page, "02-typed-spec")


def test_invalid_spec_shows_the_explanation_and_keeps_the_picture(server: Server, watched: Watched) -> None:
    page = watched.page
    page.goto(f"http://127.0.0.1:{server.port}/?devices=cpu:8&mesh=2x4&axes=x,y&spec=P('x')&shape=8,16")
    rendered(page)
    page.get_by_label("PartitionSpec").fill("P('x', 'q')")
    alert = page.get_by_role("alert")
    expect(alert).to_contain_text("unknown_axis")
    expect(alert).to_contain_text("'q'")
    expect(page.locator("[data-part=results]")).to_have_class(re.compile("stale"))
    assert len(tile_labels(page)) == 2  # the last good picture stays
    page.get_by_label("PartitionSpec").fill("P('x' 'y')")
    expect(alert).to_contain_text("parse_error")
    expect(alert.locator("pre")).to_contain_text("^ column")
    shot(page, "03-invalid-spec")
    page.get_by_label("PartitionSpec").fill("P(None, 'y')")
    expect(alert).to_be_hidden()
    expect(page.locator("[data-part=results]")).not_to_have_class(re.compile("stale"))


def test_copied_link_restores_the_view_in_a_fresh_browser(server: Server, browser: Browser, watched: Watched) -> None:
    page = watched.page
    page.goto(f"http://127.0.0.1:{server.port}/?devices=tpu:v3:2x2&mesh=8&axes=x&spec=P('x')&shape=16")
    rendered(page)
    page.get_by_role("button", name="Copy link").click()
    share = page.get_by_label("Share link")
    expect(share).to_have_value(re.compile(r"/s/[A-Za-z0-9_-]{22,}$"))
    url = share.input_value()
    before = tile_labels(page)
    mesh_before = page.locator("[data-part=mesh] td").all_text_contents()
    assert mesh_before == ["0", "1", "2", "3", "6", "7", "4", "5"]  # the v3 tray ring order, from JAX
    fresh = Watched(browser.new_context())
    try:
        fresh.page.goto(url)
        rendered(fresh.page)
        assert tile_labels(fresh.page) == before
        assert fresh.page.locator("[data-part=mesh] td").all_text_contents() == mesh_before
        expect(fresh.page.get_by_label("PartitionSpec")).to_have_value("P('x')")
        shot(fresh.page, "04-shared-link")
        # The long form (the address bar) restores it too.
        fresh.page.goto(page.url)
        rendered(fresh.page)
        assert tile_labels(fresh.page) == before
        assert fresh.errors == []
    finally:
        fresh.context.close()


def test_hostile_axis_name_renders_as_text_and_runs_nothing(server: Server, watched: Watched) -> None:
    page = watched.page
    evil = '<img src=x onerror="window.XSS=1">'
    query = urlencode({"devices": "cpu:4", "mesh": "4", "axes": evil, "spec": f"P('{evil}')", "shape": "8"})
    page.goto(f"http://127.0.0.1:{server.port}/?{query}")
    rendered(page)
    assert page.evaluate("() => window.XSS") is None
    assert page.locator("[data-part=grid] img, [data-part=mesh] img, [data-part=summary] img").count() == 0
    expect(page.locator("[data-part=summary]")).to_contain_text(evil)
    expect(page.locator(".mesh-caption")).to_contain_text(evil)
    shot(page, "05-hostile-axis-name")


def test_back_and_forward_restore_states(server: Server, watched: Watched) -> None:
    page = watched.page
    page.goto(f"http://127.0.0.1:{server.port}/")
    rendered(page)
    page.get_by_role("button", name="Flax: W1 (None, 'model')").click()
    rendered(page, 2)
    expect(page.get_by_label("PartitionSpec")).to_have_value("P(None, 'model')")
    page.go_back()
    rendered(page, 3)
    expect(page.get_by_label("PartitionSpec")).to_have_value("P('x', None)")
    assert tile_labels(page)[0].startswith("TPU")
    page.go_forward()
    rendered(page, 4)
    expect(page.get_by_label("PartitionSpec")).to_have_value("P(None, 'model')")


def test_mesh_panel_and_tiles_highlight_each_other(server: Server, watched: Watched) -> None:
    page = watched.page
    page.goto(f"http://127.0.0.1:{server.port}/?devices=cpu:8&mesh=2x4&axes=x,y&spec=P('x')&shape=8,16")
    rendered(page)
    page.locator("[data-part=mesh] td[data-device='5']").click()
    assert page.locator("[data-part=grid] .tile.hl").count() == 1
    lit = page.locator("[data-part=grid] .tile.hl").get_attribute("data-tile")
    expect(page.locator(f"[data-part=grid] .tile-label[data-tile='{lit}']")).to_have_text("CPU 4,5,6,7")
    page.locator("[data-part=grid] .tile").first.click()
    assert sorted(page.locator("[data-part=mesh] td.hl").all_text_contents()) == ["0", "1", "2", "3"]
    page.locator("[data-part=grid] .tile").nth(1).hover()
    expect(page.locator("#tooltip")).to_contain_text("[4:8, 0:16]")
    expect(page.locator("#tooltip")).to_contain_text("CPU 4: host 0")
    shot(page, "06-highlight-and-hover")


def test_rank_three_small_multiples_and_downloads(server: Server, watched: Watched) -> None:
    page = watched.page
    page.goto(f"http://127.0.0.1:{server.port}/?devices=cpu:8&mesh=2x4&axes=x,y&spec=P('x',None,'y')&shape=4,6,16")
    rendered(page)
    assert page.locator("[data-part=grid] .block-title").all_text_contents() == ["dim 0 [0:2]", "dim 0 [2:4]"]
    with page.expect_download() as dl:
        page.get_by_role("button", name="Download SVG").click()
    svg = Path(dl.value.path()).read_text()
    assert svg.startswith("<svg") and "CPU 7" in svg
    with page.expect_download() as dl:
        page.get_by_role("button", name="Download PNG").click()
    assert Path(dl.value.path()).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    shot(page, "07-rank-three")


def test_large_mesh_stays_usable(server: Server, watched: Watched) -> None:
    page = watched.page
    page.goto(
        f"http://127.0.0.1:{server.port}/?devices=tpu:v4:16x16x16&mesh=64x64&axes=x,y&order=iota"
        "&spec=P('x','y')&shape=4096,4096"
    )
    rendered(page)
    grid = page.locator("[data-part=grid] .layout-grid")
    expect(grid).to_have_attribute("data-renderer", "canvas")  # 4096 tiles: drawn on a canvas
    expect(grid).to_have_attribute("data-tiles", "4096")
    assert page.locator("[data-part=mesh] td").count() == 4096
    assert page.locator("[data-part=grid] .tile-label").count() == 0  # 4096 tiles: too small for labels
    for _ in range(6):
        page.get_by_role("button", name="Zoom in").click()
    # zoomed in, the tiles in view get their device ids (level of detail), the others none
    expect(page.locator("[data-part=grid] .tile-label").first).to_be_visible()
    assert 0 < page.locator("[data-part=grid] .tile-label").count() < 1024
    # zoomed on the centre (the corner of tiles (31, 31) and (32, 32)): just below and right of it,
    # the tile at mesh position (32, 32) holds block [2048:2112, 2048:2112]
    box = page.locator("[data-part=grid] .grid-plot").bounding_box()
    assert box is not None
    page.mouse.move(box["x"] + box["width"] / 2 + 6, box["y"] + box["height"] / 2 + 6)
    expect(page.locator("#tooltip")).to_contain_text("[2048:2112, 2048:2112]")
    expect(page.locator("#tooltip")).to_contain_text("(1 device)")
    shot(page, "08-4096-devices")


def test_dark_theme(server: Server, browser: Browser) -> None:
    context = browser.new_context(color_scheme="dark", viewport={"width": 1400, "height": 1000})
    w = Watched(context)
    try:
        w.page.goto(
            f"http://127.0.0.1:{server.port}/?devices=gpu:h100:2x4&mesh=2x4&axes=data,model&spec=P('data')&shape=8,8"
        )
        rendered(w.page)
        assert tile_labels(w.page) == ["GPU 0,1,2,3", "GPU 4,5,6,7"]
        bg = w.page.evaluate("() => getComputedStyle(document.body).backgroundColor")
        assert bg != "rgb(255, 255, 255)"
        shot(w.page, "09-dark")
        assert w.errors == []
    finally:
        context.close()


# ---- the topology view ----------------------------------------------------------------------------


def test_topology_2d_marks_every_device_and_highlights_an_axis(server: Server, watched: Watched) -> None:
    page = watched.page
    page.goto(
        f"http://127.0.0.1:{server.port}/topology.html?devices=tpu:v5e:4x4&mesh=4x4&axes=x,y"
        "&spec=P('x','y')&shape=16,16"
    )
    rendered(page)
    view = page.locator("[data-part=topo-view]")
    expect(view).to_have_attribute("data-mode", "2d")
    assert page.locator("[data-part=topo-view] .device").count() == 16
    assert page.locator("[data-part=topo-view] .hosts rect").count() == 4
    assert page.locator("[data-part=topo-view] .ring-hop").count() == 0
    # colours follow the layout: P('x', 'y') gives every device its own tile, P('x') one per mesh row
    fills = page.locator("[data-part=topo-view] .device rect").evaluate_all("rs => rs.map(r => r.getAttribute('fill'))")
    assert len(set(fills)) == 16
    page.locator("[data-part=spec]").fill("P('x')")
    rendered(page, 2)
    fills = page.locator("[data-part=topo-view] .device rect").evaluate_all("rs => rs.map(r => r.getAttribute('fill'))")
    assert len(set(fills)) == 4
    page.get_by_label("x", exact=True).check()
    rendered(page, 3)
    expect(view).to_have_attribute("data-axis", "x")
    # four groups of four: 4 segments each; the closing hop of each line is 3 links (no wraparound)
    assert page.locator("[data-part=topo-view] .ring-hop").count() == 16
    assert page.locator("[data-part=topo-view] .ring-hop.far").count() == 4
    rows = page.locator("[data-part=hop-table] tbody tr")
    assert rows.count() == 4
    assert rows.first.locator("td").nth(1).text_content() == "0 4 8 12"
    assert rows.first.locator("td").nth(2).text_content() == "1 1 1 3"
    expect(page.locator("[data-part=orderings]")).to_contain_text("make_mesh")
    shot(page, "10-topology-2d")


def test_topology_3d_lattice_and_the_non_ring_order(server: Server, watched: Watched) -> None:
    page = watched.page
    # jax issue 20305: make_mesh((4,)) on a v4-8 is not a ring — the hop table shows a 2-link hop.
    page.goto(
        f"http://127.0.0.1:{server.port}/topology.html?devices=tpu:v4:2x2x1&mesh=4&axes=x&spec=P('x')&shape=8&axis=x"
    )
    rendered(page)
    assert page.locator("[data-part=hop-table] tbody tr td").nth(2).text_content() == "1 2 1 2"
    page.goto(
        f"http://127.0.0.1:{server.port}/topology.html?devices=tpu:v4:4x4x4&mesh=4x16&axes=x,y&spec=P('x','y')&shape=16,16&axis=x"
    )
    rendered(page)
    view = page.locator("[data-part=topo-view]")
    expect(view).to_have_attribute("data-mode", "3d")
    expect(view).to_have_attribute("data-device-marks", "64")
    # the lattice is drawn on a canvas (no Plotly, no WebGL), with its legend beside it
    expect(page.locator("[data-part=topo-view] canvas")).to_be_visible()
    expect(page.locator("[data-part=topo-legend]")).to_contain_text("wraparound")
    expect(page.locator("[data-part=hop-summary]")).to_contain_text("every group is a ring")
    shot(page, "11-topology-3d")


def test_hostile_link_state_renders_as_text_in_every_view(server: Server, watched: Watched) -> None:
    page = watched.page
    evil = '"><img src=x onerror="window.XSS=1"><script>window.XSS=2</script>'
    state = {"devices": "cpu:8", "mesh": "2x4", "axes": f"x,{evil}", "spec": f"P('{evil}')", "shape": "8,8"}
    for view, path in (("layout", "/"), ("topology", "/topology.html")):
        status, link = server.post_json("/api/links", {"view": view, "state": state})
        assert status == 201
        page.goto(f"http://127.0.0.1:{server.port}{link['url']}")
        page.wait_for_selector("body[data-rendered], body[data-errors]", state="attached", timeout=30_000)
        assert page.evaluate("() => window.XSS") is None
        assert page.locator("img[src='x'], script:not([src])").count() == 0
        expect(page.get_by_label("PartitionSpec")).to_have_value(f"P('{evil}')")
        assert page.url.split("?")[0].endswith(path) or "/s/" in page.url
    shot(page, "12-hostile-link-state")


def test_topology_draws_groups_handed_over_by_the_kernel_lab(server: Server, watched: Watched) -> None:
    page = watched.page
    # what the kernel lab links to for an all-reduce over x on a 2x4 mesh of a v5e 2x4 slice (iota)
    query = urlencode({"devices": "tpu:v5e:2x4", "mesh": "2x4", "axes": "x,y", "order": "iota", "spec": "P('x')",
                       "shape": "8", "groups": "0,4;1,5;2,6;3,7", "glabel": "all-reduce over x"})  # fmt: skip
    page.goto(f"http://127.0.0.1:{server.port}/topology.html?{query}")
    rendered(page)
    expect(page.locator("[data-part=topo-view]")).to_have_attribute("data-axis", "⟨all-reduce over x⟩")
    expect(page.locator("[data-part=hop-summary]")).to_contain_text("all-reduce over x")
    rows = page.locator("[data-part=hop-table] tbody tr")
    assert rows.count() == 4
    assert rows.first.locator("td").nth(1).text_content() == "0 4"
    assert rows.first.locator("td").nth(2).text_content() == "2"  # (0,0) to (0,2): two links
    assert page.locator("[data-part=topo-view] .ring-hop.far").count() == 4
    # the orderings table compares the mesh's own axes only (x, y), not the handed-over groups
    headers = page.locator("[data-part=orderings] th").all_text_contents()
    assert headers == ["order", "axis x: max / mean hop", "axis y: max / mean hop", "first devices"]
    shot(page, "13-topology-collective-groups")


# ---- the topology view, issue 13 ------------------------------------------------------------------


def test_topology_hover_says_which_shard_a_device_holds_and_a_legend_names_colours(
    server: Server, watched: Watched
) -> None:
    # Regression: hover was a slow native <title> that did not say which shard a device holds, and
    # there was no colour legend.
    page = watched.page
    state = {"devices": "tpu:v5e:4x4", "mesh": "4x4", "axes": "x,y", "spec": "P('x', None)", "shape": "16,16"}
    page.goto(f"http://127.0.0.1:{server.port}/topology.html?{urlencode({**state, 'axis': 'y'})}")
    rendered(page)
    layout = api_layout(server, {"devices": state["devices"], "mesh": {"shape": [4, 4], "axis_names": ["x", "y"]},
                                 "spec": state["spec"], "shape": [16, 16], "dtype": "float32"})  # fmt: skip
    assert page.locator("[data-part=topo-view] title").count() == 0
    ids = [i for row in layout["mesh"]["device_ids"] for i in row]
    device = ids[6]  # mesh position x=1, y=2
    shard = next(s for s in layout["shards"] if s["device_id"] == device)
    index = "[" + ", ".join(f"{a}:{b}" for a, b in shard["index"]) + "]"
    page.locator(f"[data-part=topo-view] .device[data-device='{device}'] rect").hover()
    card = page.locator("#tooltip")
    expect(card).to_be_visible(timeout=500)  # at once, not after a native title's delay
    expect(card).to_contain_text(f"holds {index} of {layout['spec']}")
    expect(card).to_contain_text("mesh position (x=1, y=2)")
    expect(card).to_contain_text("y: group 1, member 3 of 4")
    legend = page.locator("[data-part=topo-legend]")
    for tile in layout["tiles"]:
        first = next(s for s in layout["shards"] if s["device_id"] == tile[0])
        expect(legend).to_contain_text("[" + ", ".join(f"{a}:{b}" for a, b in first["index"]) + "]")
    expect(legend).to_contain_text("ring hop over more than one link")
    swatches = legend.locator(".swatch.fill").evaluate_all("ss => ss.map(s => getComputedStyle(s).backgroundColor)")
    fills = page.locator("[data-part=topo-view] .device rect").evaluate_all(
        "rs => rs.map(r => getComputedStyle(r).fill)"
    )
    assert set(swatches[: len(layout["tiles"])]) == set(fills)
    shot(page, "14-topology-hover-legend")


def test_small_2d_slices_fill_their_panel_and_ids_stay_clear_of_rings(server: Server, watched: Watched) -> None:
    # Regression: v2/v3 2-D drawings were ~110 px inside a 900 px panel, ids under the ring lines.
    page = watched.page
    page.goto(
        f"http://127.0.0.1:{server.port}/topology.html?devices=tpu:v3:2x2&mesh=8&axes=x&spec=P('x')&shape=16&axis=x"
    )
    rendered(page)
    svg = page.locator("[data-part=topo-view] svg").bounding_box()
    assert svg is not None and svg["width"] >= 350
    for i in range(8):
        label = page.locator("[data-part=topo-view] .labels text").nth(i).bounding_box()
        assert label is not None
        centre_y = (
            page.locator("[data-part=topo-view] .device rect")
            .nth(i)
            .evaluate("r => r.getBoundingClientRect().top + r.getBoundingClientRect().height / 2")
        )
        assert label["y"] + label["height"] < centre_y  # above the centre, where the ring lines run
    shot(page, "15-topology-v3-large")


def test_pairs_on_a_cpu_row_are_separate_arcs(server: Server, watched: Watched) -> None:
    # Regression: pairs {0,4},{1,5},... on a CPU row were drawn on one line and read as one chain.
    page = watched.page
    query = urlencode({"devices": "cpu:8", "mesh": "2x4", "axes": "x,y", "spec": "P('x')", "shape": "8",
                       "groups": "0,4;1,5;2,6;3,7", "glabel": "all-reduce over x"})  # fmt: skip
    page.goto(f"http://127.0.0.1:{server.port}/topology.html?{query}")
    rendered(page)
    paths = page.locator("[data-part=topo-view] .ring-hop").evaluate_all("ps => ps.map(p => p.getAttribute('d'))")
    assert len(paths) == 4 and len(set(paths)) == 4
    bows = []
    for d in paths:
        _, y1, _, cy, _, y2 = (float(v) for v in re.findall(r"-?\d+(?:\.\d+)?", d))
        assert y1 == y2 and abs(cy - y1) > 10  # a curve off the row, not a straight segment along it
        bows.append(cy > y1)
    assert set(bows) == {True, False}  # alternately above and below
    shot(page, "16-topology-cpu-pairs")


def test_3d_axes_tick_integers_and_switching_the_ring_axis_only_redraws(server: Server, watched: Watched) -> None:
    # Regression: 3-D axes were ticked at half-integers; switching the ring axis on a 64-chip v4 took
    # 1.3-1.7 s (a full Plotly redraw).
    page = watched.page
    query = urlencode({"devices": "tpu:v4:4x4x4", "mesh": "4x4x4", "axes": "x,y,z", "spec": "P('x', 'y')",
                       "shape": "16,16", "axis": "x"})  # fmt: skip
    page.goto(f"http://127.0.0.1:{server.port}/topology.html?{query}")
    rendered(page)
    canvas = page.locator("[data-part=topo-view] canvas")
    expect(canvas).to_have_attribute("data-ticks", "x:0,1,2,3;y:0,1,2,3;z:0,1,2,3")
    canvas.evaluate("c => { c.dataset.marker = 'same'; }")
    for n, axis in enumerate(["y", "z", ""], start=2):
        page.locator(f"[data-part=axis-buttons] input[value='{axis}']").check()
        rendered(page, n)
        took = page.evaluate("() => performance.getEntriesByName('axis-switch').at(-1).duration")
        assert took > 0  # redrawn (checked below), not rebuilt; the bench measures it against its 200 ms target
    expect(canvas).to_have_attribute("data-marker", "same")  # redrawn, not rebuilt
    # hover: the card says what the device under the pointer holds
    box = canvas.bounding_box()
    assert box is not None
    found = False
    for fx in (0.5, 0.45, 0.55, 0.4, 0.6):
        for fy in (0.5, 0.45, 0.55, 0.4, 0.6, 0.35, 0.65):
            page.mouse.move(box["x"] + box["width"] * fx, box["y"] + box["height"] * fy)
            if canvas.get_attribute("data-hover"):
                found = True
                break
        if found:
            break
    assert found
    expect(page.locator("#tooltip")).to_contain_text("holds [")
    shot(page, "17-topology-3d-canvas")


def test_topology_dims_what_is_stale_on_an_error(server: Server, watched: Watched) -> None:
    page = watched.page
    page.goto(
        f"http://127.0.0.1:{server.port}/topology.html?devices=tpu:v5e:4x4&mesh=4x4&axes=x,y&spec=P('x')&shape=16"
    )
    rendered(page)
    page.get_by_label("Axis names").fill("x")
    page.get_by_label("Axis names").press("Tab")
    expect(page.locator("[data-part=topo-results]")).to_have_class(re.compile("stale"))
    expect(page.locator("[data-part=stale-note]")).to_contain_text("tpu:v5e:4x4")
    opacity = page.locator("[data-part=topo-summary]").evaluate("(e) => getComputedStyle(e).opacity")
    assert float(opacity) < 0.5
