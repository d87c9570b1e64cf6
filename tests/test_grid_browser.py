"""Issue 13 in the layout explorer, in headless Chromium against a real server: every layout visible,
every mesh reachable, what JAX prints pasteable, the spec box first.

Regression tests name the defect they guard. Every expected device id, index and mesh order comes from
the API (JAX computes it); pixel checks decode what Chromium painted (``tests/pixels.py``).
Screenshots land in ``artifacts/screenshots/grid-*.png``.
"""

from __future__ import annotations

import itertools
import re
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.pixels import painted, tile_colours
from tests.plugins.browser import Watched, rendered, shot
from tests.plugins.live import Server

pytestmark = pytest.mark.browser  # a real server or notebook and a browser


@pytest.fixture(params=["light", "dark"])
def themed(browser: Browser, request: pytest.FixtureRequest) -> Iterator[Watched]:
    context = browser.new_context(viewport={"width": 1400, "height": 1000}, color_scheme=request.param)
    w = Watched(context)
    w.scheme = request.param
    yield w
    context.close()
    assert w.errors == []


def api(server: Server, state: dict[str, Any]) -> dict[str, Any]:
    """The /api/layout answer for a page state (the same request the page makes)."""
    mesh: dict[str, Any] = {"shape": [int(n) for n in state["mesh"].split("x")], "axis_names": state["axes"].split(",")}
    for key, field in (("order", "order"),):
        if key in state:
            mesh[field] = state[key]
    body: dict[str, Any] = {"devices": state["devices"], "mesh": mesh, "spec": state["spec"],
                            "shape": [int(n) for n in state["shape"].split(",")]}  # fmt: skip
    if "slices" in state:
        body["slices"] = int(state["slices"])
    status, layout = server.post_json("/api/layout", body)
    assert status == 200, layout
    return dict(layout)


def flat(rows: list[list[int]]) -> list[int]:
    return [i for row in rows for i in row]


def open_layout(page: Page, server: Server, state: dict[str, Any]) -> None:
    page.goto(f"http://127.0.0.1:{server.port}/?{urlencode(state)}")
    rendered(page)


def spec_box(page: Page) -> Any:
    return page.get_by_label("PartitionSpec", exact=True)


STACKED = {
    "devices": "tpu:v5e:16x16",
    "mesh": "16x16",
    "axes": "x,y",
    "shape": "1024,1024",
    "spec": "P(('x','y'), None)",
}
CASES = {
    # Regression: the grid was an empty box — each 1.9 px row covered by its own 2 px outline.
    "stacked-256": STACKED,
    "transposed-256": {**STACKED, "spec": "P(None, ('x','y'))"},
    "thin-8": {"devices": "cpu:8", "mesh": "2x4", "axes": "data,model", "shape": "8,1024",
               "spec": "P(('data','model'),)"},
    "stacked-4096": {"devices": "cpu:4096", "mesh": "64x64", "axes": "x,y", "shape": "4096,1024",
                     "spec": "P(('x','y'), None)"},
    "stacked-6144": {"devices": "tpu:v5p:16x16x24", "mesh": "24x256", "axes": "x,y", "shape": "6144,1024",
                     "spec": "P(('x','y'), None)"},
}  # fmt: skip


@pytest.mark.parametrize("case", list(CASES))
def test_the_grid_area_is_painted_in_tile_colours(server: Server, themed: Watched, case: str) -> None:
    page = themed.page
    state = CASES[case]
    open_layout(page, server, state)
    layout = api(server, state)
    colours = tile_colours(layout, themed.scheme == "dark")
    got = painted(page, page.locator("[data-part=grid] .grid-plot").first, colours)
    # outlines never cover a tile: nearly every pixel of the picture is some tile's colour
    assert got["fraction"] >= 0.85, got
    if len(colours) <= 256:  # every tile can be seen (thinner ones share screen pixels until zoomed)
        assert got["present"] == got["colours"], got
    shot(page, f"grid-{case}-{themed.scheme}")


def test_outlines_are_sized_by_the_smaller_side_and_dropped_when_tiny(server: Server, watched: Watched) -> None:
    page = watched.page
    open_layout(page, server, CASES["thin-8"])
    gaps = page.evaluate(
        "async () => { const {tileGap} = await import('/js/components/grid/geometry.js');"
        " return [1, 2, 4, 4.9, 5, 8, 12, 24, 100].map((s) => [s, tileGap(s)]); }"
    )
    for side, gap in gaps:
        assert gap <= side / 8 or side >= 16, (side, gap)  # never more than an eighth of the tile
        assert (gap == 0) == (side < 5)


def test_thin_rows_get_labels_inside_or_beside(server: Server, watched: Watched) -> None:
    page = watched.page
    # 8 rows of (8, 1024): tall enough for their ids inside (they were 7.5 px strips with none)
    open_layout(page, server, CASES["thin-8"])
    layout = api(server, CASES["thin-8"])
    want = sorted(f"CPU {ids[0]}" for ids in layout["tiles"])
    assert sorted(page.locator("[data-part=grid] .tile-label").all_text_contents()) == want
    # 256 rows: too thin for text inside, so a band list beside them names every k-th row's devices
    open_layout(page, server, STACKED)
    layout = api(server, STACKED)
    bands = page.locator("[data-part=grid] .band-label")
    assert bands.count() >= 16
    for i in range(bands.count()):
        k = int(bands.nth(i).get_attribute("data-tile") or "-1")
        assert bands.nth(i).text_content() == "TPU " + ",".join(map(str, sorted(layout["tiles"][k])))
    shot(page, "grid-band-list")


def test_6144_rows_reach_readable_labels_by_zooming_and_the_rulers_follow(server: Server, watched: Watched) -> None:
    # Regression: at the 64x zoom cap 6144 rows were never more than 7.5 px tall, so never labelled;
    # and the rulers scrolled away with the picture.
    page = watched.page
    state = CASES["stacked-6144"]
    open_layout(page, server, state)
    layout = api(server, state)
    plot = page.locator("[data-part=grid] .grid-plot").first
    left = page.locator("[data-part=grid] .ruler-left").first
    before = left.bounding_box()
    assert page.locator("[data-part=grid] .tile-label").count() == 0
    plot.focus()
    for _ in range(30):
        page.keyboard.press("+")
        if page.locator("[data-part=grid] .tile-label").count():
            break
    labels = page.locator("[data-part=grid] .tile-label")
    expect(labels.first).to_be_visible()
    for i in range(min(labels.count(), 12)):
        k = int(labels.nth(i).get_attribute("data-tile") or "-1")
        assert labels.nth(i).text_content() == "TPU " + ",".join(map(str, sorted(layout["tiles"][k])))
    # the rulers stayed where they were and tick the rows in view
    assert left.bounding_box() == before
    ticks = [int(t) for t in page.locator("[data-part=grid] .ruler-left .tick").all_text_contents()]
    rows = sorted(layout["tiles"][int(labels.nth(i).get_attribute("data-tile") or 0)][0] for i in range(labels.count()))
    assert ticks and all(0 < t < 6144 for t in ticks), ticks
    assert min(ticks) <= max(rows) + 1 and max(ticks) >= min(rows)  # the ticks are around the labelled rows
    assert float(plot.get_attribute("data-zoom") or "0") > 64  # past the old cap
    shot(page, "grid-6144-zoomed")


def test_rulers_tick_rows_and_columns_and_stay_put_when_zoomed(server: Server, watched: Watched) -> None:
    page = watched.page
    state = {"devices": "tpu:v4:16x16x16", "mesh": "64x64", "axes": "x,y", "order": "iota", "shape": "4096,4096",
             "spec": "P('x','y')"}  # fmt: skip
    open_layout(page, server, state)
    top = page.locator("[data-part=grid] .ruler-top").first
    left = page.locator("[data-part=grid] .ruler-left").first
    boxes = (top.bounding_box(), left.bounding_box())
    for ruler in (top, left):
        ticks = [int(t) for t in ruler.locator(".tick").all_text_contents()]
        assert ticks[0] == 0 and ticks[-1] == 4096 and all(t % 64 == 0 for t in ticks)
    for _ in range(8):
        page.get_by_role("button", name="Zoom in").click()
    page.wait_for_timeout(100)
    assert (top.bounding_box(), left.bounding_box()) == boxes  # outside the zoomed picture: they stay
    for ruler in (top, left):
        ticks = [int(t) for t in ruler.locator(".tick").all_text_contents()]
        assert len(ticks) >= 2 and all(0 < t < 4096 and t % 64 == 0 for t in ticks), ticks
        assert ticks[1] - ticks[0] < 1024  # denser than when zoomed out
    shot(page, "grid-rulers-zoomed")


def test_downloads_say_what_they_show(server: Server, watched: Watched) -> None:
    # Regression: exported SVG and PNG had no title: a picture of some tiles, of what nobody knew.
    page = watched.page
    open_layout(page, server, CASES["stacked-6144"])
    with page.expect_download() as dl:
        page.get_by_role("button", name="Download SVG").click()
    svg = Path(dl.value.path()).read_text()
    title = "P(('x', 'y'), None) · float32[6144, 1024] · mesh x(24) × y(256) over tpu:v5p:16x16x24"
    assert f"<title>{title}</title>" in svg
    assert "dim 0: 6144 / x(24)·y(256) → 1" in svg and "TPU 0" in svg  # the split and the band list
    assert dl.value.suggested_filename.endswith(".svg") and "P" in dl.value.suggested_filename
    width, height = (int(v) for v in re.findall(r'<svg[^>]* width="(\d+)" height="(\d+)"', svg)[0])
    with page.expect_download() as dl:
        page.get_by_role("button", name="Download PNG").click()
    png = Path(dl.value.path()).read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert struct.unpack(">II", png[16:24]) == (width * 2, height * 2)


def test_canvas_and_svg_renderers_hit_test_hover_and_highlight_alike(server: Server, watched: Watched) -> None:
    page = watched.page
    open_layout(
        page, server, {"devices": "cpu:64", "mesh": "8x8", "axes": "x,y", "shape": "64,64", "spec": "P('x','y')"}
    )
    result = page.evaluate(
        """async () => {
          const {layoutGrid} = await import('/js/components/grid.js');
          const {Layout} = await import('/js/model/layout.js');
          const mesh = {shape: [8, 8], axis_names: ['x', 'y']};
          const body = {devices: 'cpu:64', mesh, spec: "P('x', 'y')", shape: [64, 64]};
          const r = await fetch('/api/layout', {method: 'POST', headers: {'content-type': 'application/json'},
            body: JSON.stringify(body)});
          const layout = Layout.fromApi(await r.json());
          const out = {};
          for (const renderer of ['svg', 'canvas']) {
            const host = document.createElement('div');
            host.style.width = '600px';
            document.body.prepend(host);
            const clicks = [];
            const view = layoutGrid(host, layout, {dark: false, renderer, onTileClick: (ids) => clicks.push(ids)});
            const plot = host.querySelector('.grid-plot');
            const box = plot.getBoundingClientRect();
            const at = (fx, fy) => ({clientX: box.left + box.width * fx, clientY: box.top + box.height * fy,
                                     bubbles: true});
            plot.dispatchEvent(new MouseEvent('mousemove', at(0.3, 0.7)));
            const card = document.getElementById('tooltip').textContent;
            plot.dispatchEvent(new MouseEvent('click', at(0.3, 0.7)));
            view.highlight(new Set(clicks[0]));
            const lit = host.querySelector('.layout-grid').dataset.highlighted;
            const centre = view.tileCenter(0) !== null;
            out[renderer] = {renderer: view.renderer, card, clicked: clicks[0], lit, centre};
            host.remove();
          }
          return out;
        }"""
    )
    assert result["svg"]["renderer"] == "svg" and result["canvas"]["renderer"] == "canvas"
    for key in ("card", "clicked", "lit", "centre"):
        assert result["svg"][key] == result["canvas"][key], key
    assert "[40:48, 16:24]" in result["svg"]["card"]  # row 5, column 2 of 8x8 blocks of 8
    assert result["svg"]["lit"] == "1"


def test_the_spec_box_comes_first_and_the_keyboard_reads_the_grid(server: Server, watched: Watched) -> None:
    # Regression: the spec box was the 15th Tab stop, no shortcut reached it, Escape cleared nothing
    # and tiles could not be focused, so keyboard users could not read index ranges.
    page = watched.page
    open_layout(
        page, server, {"devices": "tpu:v5e:4x4", "mesh": "4x4", "axes": "x,y", "shape": "16,16", "spec": "P('x', None)"}
    )
    assert page.evaluate("() => document.activeElement.dataset.part") == "spec"
    tab_stops = page.evaluate(
        """() => [...document.querySelectorAll('a[href], button, input, select, textarea, [tabindex]')]
              .filter((e) => e.tabIndex >= 0 && !e.disabled && e.offsetParent !== null)
              .map((e) => e.dataset.part || e.textContent.trim())"""
    )
    views = page.locator("nav.views a").count()
    assert tab_stops.index("spec") == views, tab_stops[: views + 2]  # right after the view links
    box = spec_box(page).bounding_box()
    assert box is not None and box["y"] < 200 and box["width"] > 600  # above the fold, and wide
    # / jumps to the spec box from anywhere
    page.locator("[data-part=summary]").click()
    page.keyboard.press("/")
    assert page.evaluate("() => document.activeElement.dataset.part") == "spec"
    # Tab into the grid: arrows move between tiles and read their index ranges; Enter highlights
    page.locator("[data-part=grid] .grid-plot").focus()
    expect(page.locator("#tooltip")).to_contain_text("[0:4, 0:16]")
    page.keyboard.press("ArrowDown")
    expect(page.locator("#tooltip")).to_contain_text("[4:8, 0:16]")
    expect(page.locator("[data-part=grid] .sr-only")).to_contain_text("[4:8, 0:16]")
    page.keyboard.press("Enter")
    expect(page.locator("[data-part=selection]")).to_contain_text("TPU 4-7")
    assert sorted(page.locator("[data-part=mesh] td.hl").all_text_contents(), key=int) == ["4", "5", "6", "7"]
    shot(page, "grid-keyboard")
    page.keyboard.press("Escape")
    expect(page.locator("[data-part=selection]")).to_have_text("")
    assert (
        page.locator("[data-part=mesh] td.hl").count() == 0 and page.locator("[data-part=grid] .tile.hl").count() == 0
    )


def test_an_error_speaks_once_per_pause_dims_everything_and_moves_nothing(server: Server, watched: Watched) -> None:
    # Regression: the role=alert box re-announced on nearly every keystroke (17 times for one spec)
    # and pushed the page down; on an error only the grid dimmed.
    page = watched.page
    open_layout(page, server, {"devices": "cpu:8", "mesh": "2x4", "axes": "x,y", "shape": "8,16", "spec": "P('x')"})
    grid_top = page.locator("[data-part=grid]").bounding_box()
    box = spec_box(page)
    box.fill("")
    box.evaluate("(e) => { window.keys = []; e.addEventListener('input', () => window.keys.push(performance.now())); }")
    box.press_sequentially("P('x', 'q')", delay=40)
    alert = page.get_by_role("alert")
    expect(alert).to_contain_text("unknown_axis")
    page.wait_for_timeout(900)
    # once per pause in the typing: one, unless the machine stalled the typing itself for SETTLE_MS (600 ms) between
    # two keys (a loaded CI host did: it then spoke twice, once per pause, as it should)
    keys = page.evaluate("window.keys")
    pauses = 1 + sum(b - a >= 600 for a, b in itertools.pairwise(keys))
    shown = int(page.get_attribute("body", "data-error-shown") or 0)
    assert keys and 1 <= shown <= pauses, (shown, pauses)
    assert page.locator("[data-part=grid]").bounding_box() == grid_top  # the explanation floats: nothing moved
    for part in ("[data-part=grid]", "[data-part=summary]", "[data-part=mesh]"):
        opacity = page.locator(part).evaluate("(e) => getComputedStyle(e).opacity")
        assert float(opacity) < 0.5, part
    expect(page.locator("[data-part=stale-note]")).to_contain_text("last valid layout: P('x',)")
    shot(page, "grid-error-once")
    box.fill("P('x', 'y')")
    expect(alert).to_be_hidden()
    expect(page.locator("[data-part=results]")).not_to_have_class(re.compile("stale"))


def test_every_mesh_constructor_is_reachable(server: Server, watched: Watched) -> None:
    # Regression: the API built meshes (explicit permutations, split physical axes, hybrid ICI x DCN,
    # a single device) that no view could show.
    page = watched.page
    order_box = page.get_by_label("Device order")
    # an explicit permutation
    state = {
        "devices": "cpu:4",
        "mesh": "4",
        "axes": "x",
        "order": "devices",
        "ids": "0,2,1,3",
        "shape": "8",
        "spec": "P('x')",
    }
    open_layout(page, server, state)
    assert page.locator("[data-part=mesh] td").all_text_contents() == ["0", "2", "1", "3"]
    expect(page.get_by_label("Device ids in mesh order")).to_have_value("0,2,1,3")
    # iota against make_mesh on a v4 2x2x2: each as JAX orders it
    for order in ("iota", "make_mesh"):
        state = {"devices": "tpu:v4:2x2x2", "mesh": "8", "axes": "x", "order": order, "shape": "8", "spec": "P('x')"}
        open_layout(page, server, state)
        want = [str(i) for i in api(server, state)["mesh"]["device_ids"]]
        assert page.locator("[data-part=mesh] td").all_text_contents() == want
    # split physical axes: offered by the error, one click away
    state = {"devices": "tpu:v4:4x4x4", "mesh": "8x8", "axes": "x,y", "shape": "64,64", "spec": "P('x','y')"}
    page.goto(f"http://127.0.0.1:{server.port}/?{urlencode(state)}")
    expect(page.get_by_role("alert")).to_contain_text("mesh_unplaceable")
    page.get_by_role("button", name="Allow split physical axes").click()
    rendered(page)
    assert "split=1" in page.url
    status, want_split = server.post_json("/api/layout", {
        "devices": "tpu:v4:4x4x4", "spec": "P('x','y')", "shape": [64, 64],
        "mesh": {"shape": [8, 8], "axis_names": ["x", "y"], "allow_split_physical_axes": True}})  # fmt: skip
    assert status == 200
    assert [int(t) for t in page.locator("[data-part=mesh] td").all_text_contents()] == flat(
        want_split["mesh"]["device_ids"]
    )
    # hybrid ICI x DCN across two slices: the error is short and offers the mesh JAX asks for
    state = {
        "devices": "tpu:v5e:4x4",
        "slices": "2",
        "mesh": "8x4",
        "axes": "x,y",
        "shape": "8,8",
        "spec": "P('x','y')",
    }
    page.goto(f"http://127.0.0.1:{server.port}/?{urlencode(state)}")
    alert = page.get_by_role("alert")
    expect(alert).to_contain_text("hybrid")
    assert "SimDevice" not in (alert.text_content() or "") and len(alert.text_content() or "") < 900
    shot(page, "grid-hybrid-offered")
    page.get_by_role("button", name=re.compile("Use a hybrid ICI × DCN mesh with DCN shape 2x1")).click()
    rendered(page)
    expect(order_box).to_have_value("hybrid")
    expect(page.get_by_label("DCN shape (per axis)")).to_have_value("2x1")
    status, hybrid = server.post_json("/api/layout", {
        "devices": "tpu:v5e:4x4", "slices": 2, "spec": "P('x','y')", "shape": [8, 8],
        "mesh": {"shape": [8, 4], "axis_names": ["x", "y"], "order": "hybrid", "dcn_shape": [2, 1]}})  # fmt: skip
    assert status == 200
    assert [int(t) for t in page.locator("[data-part=mesh] td").all_text_contents()] == flat(
        hybrid["mesh"]["device_ids"]
    )
    shot(page, "grid-hybrid")
    # a single device, the first picture of JAX's parallelism tutorial
    open_layout(page, server, {"devices": "cpu:8", "mesh": "2x4", "axes": "x,y", "shape": "8,16", "spec": "P()"})
    order_box.select_option("single")
    page.get_by_label("Device id").fill("3")
    page.get_by_label("Device id").press("Tab")
    expect(page.locator("[data-part=grid] .tile-label")).to_have_text(["CPU 3"])
    expect(page.locator("[data-part=summary]")).to_contain_text("SingleDeviceSharding(CPU 3)")
    shot(page, "grid-single-device")


def test_pasting_what_jax_prints_sets_the_mesh_and_the_spec(server: Server, watched: Watched) -> None:
    # Regression: print(x.sharding) was refused; curly quotes from docs were refused.
    page = watched.page
    open_layout(page, server, {"devices": "cpu:8", "mesh": "2x2", "axes": "x,y", "shape": "16,16", "spec": "P('x')"})
    count = int(page.get_attribute("body", "data-rendered") or "0")
    spec_box(page).fill(
        "NamedSharding(mesh=Mesh('data': 2, 'model': 4), spec=PartitionSpec(None, 'model'), memory_kind=device)"
    )
    rendered(page, count + 1)
    expect(page.get_by_label("Shape", exact=True)).to_have_value("2x4")
    expect(page.get_by_label("Axis names")).to_have_value("data,model")
    expect(spec_box(page)).to_have_value("PartitionSpec(None, 'model')")
    expect(page.locator("[data-part=spec-note]")).to_contain_text("NamedSharding")
    layout = api(
        server, {"devices": "cpu:8", "mesh": "2x4", "axes": "data,model", "shape": "16,16", "spec": "P(None, 'model')"}
    )
    assert sorted(page.locator("[data-part=grid] .tile-label").all_text_contents()) == sorted(
        "CPU " + ",".join(map(str, sorted(ids))) for ids in layout["tiles"]
    )
    shot(page, "grid-pasted-named-sharding")
    # newer JAX prints the axis types too
    spec_box(page).fill(
        "NamedSharding(mesh=Mesh('a': 4, 'b': 2, axis_types=(Explicit, Explicit)), spec=P('b', 'a'), "
        "memory_kind=device)"
    )
    rendered(page, count + 2)
    expect(page.get_by_label("Axis types")).to_have_value("explicit")
    expect(page.locator("[data-part=summary]")).to_contain_text("a(4) × b(2)")
    # a single-device array's sharding
    spec_box(page).fill("SingleDeviceSharding(device=CpuDevice(id=5), memory_kind=device)")
    rendered(page, count + 3)
    expect(page.locator("[data-part=grid] .tile-label")).to_have_text(["CPU 5"])
    # curly quotes become straight ones
    spec_box(page).fill("P(\u2018a\u2019, None)")
    rendered(page, count + 4)
    expect(spec_box(page)).to_have_value("P('a', None)")
    expect(page.locator("[data-part=spec-note]")).to_contain_text("Curly quotes")


def test_logical_names_with_flax_rules(server: Server, watched: Watched) -> None:
    # Regression: logical axis names existed only in Snapshots; the layout view said unknown_axis
    # with no word about rules.
    page = watched.page
    state = {"devices": "cpu:8", "mesh": "2x4", "axes": "data,model", "shape": "16,32", "spec": "('embed', 'hidden')"}
    page.goto(f"http://127.0.0.1:{server.port}/?{urlencode(state)}")
    alert = page.get_by_role("alert")
    expect(alert).to_contain_text("unknown_axis")
    expect(alert).to_contain_text("logical axis name")
    page.get_by_role("button", name="Add logical → mesh rules").click()
    rules = page.get_by_label("Logical → mesh axis rules, in order of precedence")
    expect(rules).to_be_focused()
    rules.fill("('batch', 'data'), ('hidden', 'model'), ('embed', None)")
    rendered(page)
    expect(page.locator("[data-part=summary]")).to_contain_text("P(None, 'model')")
    expect(alert).to_be_hidden()
    assert "rules=" in page.url
    shot(page, "grid-logical-rules")


def test_a_phone_sees_the_grid_under_the_spec_box(server: Server, browser: Browser) -> None:
    # Regression: at 390 px the header did not wrap, pages were ~700 px wide and the grid was 1.5
    # screens below the spec box.
    context = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True)
    w = Watched(context)
    try:
        page = w.page
        open_layout(page, server, STACKED)
        assert page.evaluate("() => document.documentElement.scrollWidth") <= 390
        spec = spec_box(page).bounding_box()
        grid = page.locator("[data-part=grid] .grid-plot").first.bounding_box()
        assert spec is not None and grid is not None
        assert grid["y"] < 844 and grid["y"] - (spec["y"] + spec["height"]) < 300
        shot(page, "grid-phone")
        assert w.errors == []
    finally:
        context.close()
