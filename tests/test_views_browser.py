"""The views' defects a new user met (issue 21), each with its regression test, in headless Chromium
against a real server. Every expected layout comes from JAX (in this process, or through the API, which
asks JAX); screenshots land in ``artifacts/screenshots/views-*.png``.
"""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import urlencode

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import AxisType, Mesh, NamedSharding
from jax.sharding import PartitionSpec as P
from playwright.sync_api import Browser, Page, expect

import shardscope
from sharding_core import inspect_jit, publish
from tests.plugins.browser import Watched, rendered, runs, shot
from tests.plugins.live import Server

pytestmark = pytest.mark.browser  # a real server or notebook and a browser


def part(name: str) -> str:
    return f"[data-part={name}]"


def labels(page: Page) -> list[str]:
    return sorted(page.locator(f"{part('grid')} .tile-label").all_text_contents())


def label_of(platform: str, ids: list[int]) -> str:
    return f"{platform} " + ",".join(map(str, sorted(ids)))


def jax_labels(sharding: Any, shape: tuple[int, ...], platform: str) -> list[str]:
    """JAX's own blocks of ``shape`` under ``sharding``, each labelled with its holders as the grid does."""
    blocks: dict[tuple[Any, ...], list[int]] = {}
    for device, index in sharding.devices_indices_map(shape).items():
        blocks.setdefault(tuple((s.start, s.stop) for s in index), []).append(device.id)
    return sorted(label_of(platform, ids) for ids in blocks.values())


def api_labels(server: Server, body: dict[str, Any]) -> list[str]:
    status, layout = server.post_json("/api/layout", body)
    assert status == 200, layout
    return sorted(label_of(layout["platform"].upper(), ids) for ids in layout["tiles"])


def overlaps(a: dict[str, float] | None, b: dict[str, float] | None) -> bool:
    assert a is not None and b is not None
    return not (a["x"] + a["width"] <= b["x"] or b["x"] + b["width"] <= a["x"] or
                a["y"] + a["height"] <= b["y"] or b["y"] + b["height"] <= a["y"])  # fmt: skip


def printed(shape: tuple[int, int]) -> str:
    """What ``print(x.sharding)`` shows for an array on a ``shape`` mesh of Auto axes (JAX's own repr; the 4x8 one
    from the 2x4 one, as this process has 8 devices)."""
    mesh = jax.make_mesh((2, 4), ("x", "y"), axis_types=(AxisType.Auto,) * 2)
    text = repr(NamedSharding(mesh, P("x", "y")))
    assert "'x': 2, 'y': 4" in text, text
    return text.replace("'x': 2, 'y': 4", f"'x': {shape[0]}, 'y': {shape[1]}")


# ---- pasting print(x.sharding) --------------------------------------------------------------------------------


def test_a_paste_on_the_tpu_page_chooses_devices_that_fit_and_offers_the_switch(
    server: Server, watched: Watched
) -> None:
    # Regression: on the default tpu:v5e:4x4 page a pasted 2x4 repr kept the 16 TPU chips, so the device
    # ids were not the program's (8 devices numbered 0..7), silently; a 4x8 repr got bad_mesh with a hint
    # proposing other mesh shapes (undoing the paste).
    page = watched.page
    page.goto(f"http://127.0.0.1:{server.port}/")
    rendered(page)
    page.get_by_label("PartitionSpec", exact=True).fill(printed((2, 4)))
    rendered(page, 2)
    note = page.locator(part("spec-note"))
    expect(note).to_contain_text("devices cpu:8")
    expect(note).to_contain_text("tpu:v5e:4x4 has 16 devices, the mesh 8")
    # what the program had: 8 devices numbered as JAX numbers them, make_mesh's order
    mesh = jax.make_mesh((2, 4), ("x", "y"), axis_types=(AxisType.Auto,) * 2)
    assert labels(page) == jax_labels(NamedSharding(mesh, P("x", "y")), (16, 16), "CPU")
    expect(page.get_by_role("alert")).to_have_count(0)
    shot(page, "views-paste-cpu")
    # one click to the TPU slice of the same size, laid out as JAX lays it out there
    note.get_by_role("button", name="Use tpu:v5e:2x4").click()
    rendered(page, 3)
    expect(page.locator(part("pickers"))).to_contain_text("devices: tpu:v5e:2x4")
    body = {"devices": "tpu:v5e:2x4", "mesh": {"shape": [2, 4], "axis_names": ["x", "y"], "axis_types": ["auto"] * 2},
            "spec": "P('x', 'y')", "shape": [16, 16]}  # fmt: skip
    assert labels(page) == api_labels(server, body)
    # a 4x8 repr: 32 devices, laid out, the paste kept (no hint proposing other shapes)
    page.get_by_label("PartitionSpec", exact=True).fill(printed((4, 8)))
    rendered(page, 4)
    expect(note).to_contain_text("devices cpu:32")
    expect(page.get_by_role("alert")).to_have_count(0)
    expect(page.get_by_label("Shape", exact=True)).to_have_value("4x8")
    assert len(labels(page)) == 32
    expect(note.get_by_role("button", name="Use tpu:v5e:4x8")).to_be_visible()


def test_a_mesh_too_big_for_its_devices_offers_device_sets_beside_the_mesh_controls(
    server: Server, watched: Watched
) -> None:
    page = watched.page
    state = {"devices": "tpu:v5e:4x4", "mesh": "4x8", "axes": "x,y", "spec": "P('x', 'y')", "shape": "16,16"}
    page.goto(f"http://127.0.0.1:{server.port}/?{urlencode(state)}")
    alert = page.get_by_role("alert")
    expect(alert).to_contain_text("bad_mesh")
    # beside the controls that fix it, and the field marked
    controls = page.locator(part("controls"))
    expect(controls.get_by_role("alert")).to_contain_text("needs 32 devices")
    expect(page.get_by_label("Shape", exact=True)).to_have_attribute("aria-invalid", "true")
    expect(page.locator(part("error-pointer"))).to_contain_text("beside the Mesh controls")
    shot(page, "views-bad-mesh")
    controls.get_by_role("button", name="Use tpu:v5e:4x8 (32 devices)").click()
    rendered(page)
    expect(alert).to_have_count(0)
    body = {"devices": "tpu:v5e:4x8", "mesh": {"shape": [4, 8], "axis_names": ["x", "y"]}, "spec": "P('x', 'y')",
            "shape": [16, 16]}  # fmt: skip
    assert labels(page) == api_labels(server, body)


def test_an_arrays_own_link_opens_its_exact_layout(server: Server, watched: Watched) -> None:
    # The lossless round trip: shardscope.link(x) from the program, opened in the page.
    devices = np.array(jax.devices())[[3, 1, 6, 0, 7, 2, 5, 4]]
    mesh = Mesh(devices.reshape(2, 4), ("data", "model"))
    x = jax.device_put(jnp.zeros((8, 16)), NamedSharding(mesh, P("data", "model")))
    page = watched.page
    page.goto(shardscope.link(x, f"http://127.0.0.1:{server.port}"))
    rendered(page)
    assert labels(page) == jax_labels(x.sharding, x.shape, "CPU")
    mesh_ids = [int(t) for t in page.locator(f"{part('mesh')} td").all_text_contents()]
    assert mesh_ids == [d.id for d in devices]
    shot(page, "views-link")


# ---- errors beside the control that fixes them --------------------------------------------------------------


def test_a_spec_error_floats_over_the_stale_picture_never_over_a_control(server: Server, watched: Watched) -> None:
    # Regression: the floating error box covered the device picker and the grid toolbar it asks to change.
    page = watched.page
    state = {"devices": "cpu:8", "mesh": "2x4", "axes": "x,y", "spec": "P('x')", "shape": "8,16"}
    page.goto(f"http://127.0.0.1:{server.port}/?{urlencode(state)}")
    rendered(page)
    page.get_by_label("PartitionSpec", exact=True).fill("P('x', 'q')")
    error = page.locator(part("spec-error"))
    expect(error).to_contain_text("unknown_axis")
    box = error.bounding_box()
    pickers = page.locator(f"{part('controls')} select, {part('controls')} input")
    for control in [*page.locator(".toolbar button").all(), *pickers.all()]:
        if control.is_visible():
            assert not overlaps(box, control.bounding_box()), control.text_content()
    spec = page.get_by_label("PartitionSpec", exact=True).bounding_box()
    # in the first screen, right under the toolbar over the picture it makes stale
    assert box is not None and spec is not None and box["y"] - (spec["y"] + spec["height"]) < 260
    assert box["y"] + box["height"] < 900
    shot(page, "views-spec-error")


def test_kernel_errors_stand_beside_run_and_mark_the_field(server: Server, watched: Watched) -> None:
    # Regression: errors showed at the top of the results column, ~1,300 px from Run; too_large marked no
    # field; an indivisible input marked its spec, not its shape; after every refusal the page re-POSTed
    # /api/layout once per input to find which input failed (the refusal now names the input and field).
    page = watched.page
    page.goto(f"http://127.0.0.1:{server.port}/kernels.html?kernel=matmul_xw&types=auto")
    runs(page, 1)
    layouts: list[str] = []
    page.on("request", lambda r: layouts.append(r.url) if r.url.endswith("/api/layout") else None)
    run = page.get_by_role("button", name="Run", exact=True)
    alert = page.locator(part("run-error"))
    page.get_by_label("w PartitionSpec").fill("P('q', None)")
    run.click()
    expect(alert).to_contain_text("unknown_axis")
    a, r = alert.bounding_box(), run.bounding_box()
    assert a is not None and r is not None and 0 <= a["y"] - (r["y"] + r["height"]) < 40  # right under Run
    expect(page.get_by_label("w PartitionSpec")).to_have_attribute("aria-invalid", "true")
    expect(page.locator(".field-error")).to_contain_text("unknown_axis")
    shot(page, "views-kernel-error")
    # an indivisible input: its shape is marked
    page.get_by_label("w PartitionSpec").fill("P('y', None)")
    page.get_by_label("x shape").fill("7,16")
    run.click()
    expect(alert).to_contain_text("indivisible")
    expect(page.get_by_label("x shape")).to_have_attribute("aria-invalid", "true")
    expect(page.get_by_label("x PartitionSpec")).not_to_have_attribute("aria-invalid", "true")
    assert layouts == [], "a refusal should name its input: no layout requests to find it"
    # too many elements: the largest input's shape is marked
    page.get_by_label("x shape").fill("4096,4104")
    page.get_by_label("w shape").fill("4104,8")
    run.click()
    expect(alert).to_contain_text("too_large")
    expect(page.get_by_label("x shape")).to_have_attribute("aria-invalid", "true")
    # a mesh over the kernel device limit: the mesh's shape is marked
    page.goto(f"http://127.0.0.1:{server.port}/kernels.html?kernel=sum_axis0&devices=cpu:4096&mesh=64x64&types=auto")
    expect(alert).to_contain_text("too_large")
    expect(page.get_by_label("Shape", exact=True)).to_have_attribute("aria-invalid", "true")


def test_unreduced_on_auto_axes_points_to_the_axis_types(server: Server, watched: Watched) -> None:
    # Regression: JAX's "Unreduced axes can only refer to mesh axes that is of type Explicit" was relayed
    # with no word about the Axis types control.
    page = watched.page
    state = {"devices": "cpu:8", "mesh": "2x4", "axes": "x,y", "types": "auto", "spec": "P(None, 'y', unreduced={'x'})",
             "shape": "8,16"}  # fmt: skip
    page.goto(f"http://127.0.0.1:{server.port}/?{urlencode(state)}")
    alert = page.get_by_role("alert")
    expect(alert).to_contain_text("Explicit")
    expect(page.get_by_label("Axis types")).to_have_attribute("aria-invalid", "true")
    page.get_by_role("button", name="Make the mesh axes Explicit").click()
    rendered(page)
    assert "types=explicit" in page.url
    expect(page.locator(part("summary"))).to_contain_text("unreduced over x")


# ---- examples: the tutorials' own cells ---------------------------------------------------------------------


def test_examples_are_in_view_and_one_click_opens_the_tutorials_cell(server: Server, browser: Browser) -> None:
    # Regression: the examples started at y = 888 on a 900 px screen and were not the tutorials' cells.
    context = browser.new_context(viewport={"width": 1440, "height": 900})
    w = Watched(context)
    try:
        page = w.page
        page.goto(f"http://127.0.0.1:{server.port}/")
        rendered(page)
        buttons = page.locator(part("examples")).get_by_role("button")
        expect(buttons.first).to_be_visible()
        for i in range(buttons.count()):
            box = buttons.nth(i).bounding_box()
            assert box is not None and box["y"] + box["height"] <= 900 and box["x"] + box["width"] <= 1440
        # the Flax guide's W1: (None, 'model') on create_device_mesh((2, 4)) of 8 fake CPU devices
        buttons.filter(has_text="Flax: W1").click()
        rendered(page, 2)
        mesh = Mesh(np.array(jax.devices()).reshape(2, 4), ("data", "model"))
        assert labels(page) == jax_labels(NamedSharding(mesh, P(None, "model")), (1024, 1024), "CPU")
        # the migration guide's arange(8) on Mesh(devices.reshape(4, 2)), P('x')
        buttons.filter(has_text="migration").click()
        rendered(page, 3)
        mesh = Mesh(np.array(jax.devices()).reshape(4, 2), ("x", "y"))
        assert labels(page) == jax_labels(NamedSharding(mesh, P("x")), (8,), "CPU")
        shot(page, "views-examples")
        assert w.errors == []
    finally:
        context.close()


@pytest.mark.tpu
def test_the_intro_example_is_its_tpu_v2_8_layout(server: Server, watched: Watched) -> None:
    # JAX's parallelism intro runs on Colab's TPU v2-8: "the device numbers here are not in numerical order,
    # because the mesh reflects the underlying toroidal topology". libtpu's compile-only v2 topology says which.
    from jax.experimental import mesh_utils, topologies

    topo = topologies.get_topology_desc(platform="tpu", topology_name="v2:2x2")
    mesh = Mesh(mesh_utils.create_device_mesh((2, 4), devices=topo.devices), ("x", "y"))
    page = watched.page
    page.goto(f"http://127.0.0.1:{server.port}/")
    rendered(page)
    page.locator(part("examples")).get_by_role("button", name="intro: (4, 8) P('x', 'y')").click()
    rendered(page, 2)
    assert labels(page) == jax_labels(NamedSharding(mesh, P("x", "y")), (4, 8), "TPU")


def test_on_a_phone_an_example_brings_its_picture_into_view(server: Server, browser: Browser) -> None:
    # Regression: on a phone a click on an example changed nothing in view.
    context = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True)
    w = Watched(context)
    try:
        page = w.page
        page.goto(f"http://127.0.0.1:{server.port}/")
        rendered(page)
        button = page.locator(part("examples")).get_by_role("button").filter(has_text="Flax: x")
        button.scroll_into_view_if_needed()
        box = button.bounding_box()
        assert box is not None and box["y"] < 844
        button.click()
        rendered(page, 2)
        grid = page.locator(f"{part('grid')} .grid-plot").first.bounding_box()
        assert grid is not None and 0 <= grid["y"] < 844
        assert page.evaluate("() => document.documentElement.scrollWidth") <= 390
        shot(page, "views-phone-example")
        assert w.errors == []
    finally:
        context.close()


def test_the_kernel_lab_shows_the_intros_psum_of_496(server: Server, watched: Watched) -> None:
    # Regression: the lab never showed an output's values; the intro's psum of arange(32) prints 496.
    page = watched.page
    page.goto(f"http://127.0.0.1:{server.port}/kernels.html")
    page.wait_for_selector("body[data-ready]", state="attached", timeout=30_000)
    page.locator(part("examples")).get_by_role("button", name=re.compile("psum of arange")).click()
    runs(page, 1)
    expect(page.locator(f"{part('outputs')} {part('values')}")).to_have_text("values 496")
    assert "data=arange" in page.url
    shot(page, "views-psum-496")


def test_a_kernel_run_shows_its_findings_and_every_values_sharding(server: Server, watched: Watched) -> None:
    # Issue 32: a kernel run carries findings and every value's sharding (checked against JAX's own
    # inspect_array_sharding in tests/test_kernels_api.py); the lab shows them as a plan's page does, from the
    # answer the page itself received.
    page = watched.page
    answers: list[Any] = []

    def keep(response: Any) -> None:  # the job's state once done: its result is what the page drew
        if "/api/kernels/jobs/" in response.url and response.status == 200:
            job = response.json()
            if job.get("state") == "done":
                answers.append(job["result"])

    page.on("response", keep)
    state = {"kernel": "elementwise", "in": "512,512|P('x', 'y')|float32"}
    page.goto(f"http://127.0.0.1:{server.port}/kernels.html?{urlencode(state)}")
    runs(page, 1)
    assert answers, "the page received no run with values"
    result = answers[-1]
    findings = page.locator(part("findings-section"))
    expect(findings).to_be_visible()
    if result["findings"]:
        expect(findings.locator(part("finding"))).to_have_count(len(result["findings"]))
    else:
        expect(findings).to_contain_text("No silent waste found")
    values = page.locator(part("values-section"))
    expect(values).to_be_visible()
    shown = min(30, len(result["values"]))
    expect(values.locator("table.values tbody tr")).to_have_count(shown)
    expect(values).to_contain_text(f"{shown} of {len(result['values'])} values")
    largest = max(result["values"], key=lambda v: v["bytes"])
    expect(values.locator("table.values tbody tr").first.locator("td").nth(3)).to_have_text(largest["spec"])
    mul = [v for v in result["values"] if v["op"] == "mul"]
    assert mul and mul[0]["spec"] == "P('x', 'y')"
    # the findings lead the results, the values follow the collectives
    top, outputs = findings.bounding_box(), page.locator(part("outputs")).bounding_box()
    after, table = page.locator(part("collective-count")).bounding_box(), values.bounding_box()
    assert top and outputs and after and table
    assert top["y"] < outputs["y"] < after["y"] < table["y"]
    shot(page, "views-kernel-findings-values")


def test_a_bf16_result_states_its_error_against_its_scale(server: Server, watched: Watched) -> None:
    # Regression: bf16 kernels showed an absolute max error with no relative scale.
    page = watched.page
    page.goto(f"http://127.0.0.1:{server.port}/kernels.html?kernel=matmul_xxt&types=auto&in=8,16|P('x', 'y')|bfloat16")
    runs(page, 1)
    facts = page.locator(f"{part('outputs')} .array-facts").first
    expect(facts).to_contain_text("of max |reference|")
    text = facts.text_content() or ""
    error, ratio, scale = (
        float(v)
        for v in re.findall(r"max \|error\| ([\d.e+-]+) \(([\d.e+-]+) of max \|reference\| ([\d.e+-]+)\)", text)[0]
    )
    assert ratio == pytest.approx(error / scale, rel=0.06)


# ---- snapshots, compare, topology ---------------------------------------------------------------------------


def test_a_snapshot_with_collectives_fits_a_phone(server: Server, browser: Browser) -> None:
    # Regression: the snapshot page was 870 px wide on a 390 px phone (the collectives table).
    mesh = Mesh(np.array(jax.devices()).reshape(2, 4), ("data", "model"))
    a = jax.device_put(jnp.ones((8, 16)), NamedSharding(mesh, P("data", "model")))
    url = publish(inspect_jit(lambda v: v.sum(0), a), "sum over data", f"http://127.0.0.1:{server.port}")
    context = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True)
    w = Watched(context)
    try:
        page = w.page
        page.goto(url)
        page.wait_for_selector("body[data-loaded='1']", state="attached", timeout=30_000)
        expect(page.locator(f"{part('collectives')} tr.collective").first).to_be_visible()
        assert page.evaluate("() => document.documentElement.scrollWidth") <= 390
        shot(page, "views-snapshot-phone")
        assert w.errors == []
    finally:
        context.close()


def test_a_diff_with_a_cut_share_link_says_what_is_wrong(server: Server, watched: Watched) -> None:
    # Regression: a malformed /s/ id said only "paste a share link".
    mesh = Mesh(np.array(jax.devices()).reshape(2, 4), ("data", "model"))
    url = publish(
        {"w": jax.device_put(jnp.ones((8, 8)), NamedSharding(mesh, P("data")))}, "w", f"http://127.0.0.1:{server.port}"
    )
    page = watched.page
    page.goto(url)
    page.wait_for_selector("body[data-loaded='1']", state="attached", timeout=30_000)
    page.get_by_label("Compare with").fill(url[:-12])  # the link cut when it was copied
    page.get_by_role("button", name="Compare").click()
    error = page.locator(part("diff-error"))
    expect(error).to_contain_text("is not a share link's id")
    expect(error).to_contain_text("copy the whole link again")


def test_compare_reads_specs_in_and_out_and_matches_shapes_and_sources(server: Server, watched: Watched) -> None:
    # Regression: the kernel "specs" row joined input and output specs with "→" (a reshard chain); the
    # matched table dropped each collective's shape and the op that caused it; snapshot sides said "—".
    page = watched.page
    a = "/kernels.html?kernel=matmul_xw&types=auto"
    b = "/kernels.html?kernel=matmul_xw&types=auto&in=8,16|P('x', None)|float32&in=16,8|P(None, 'y')|float32"
    page.goto(f"http://127.0.0.1:{server.port}/compare.html?{urlencode({'a': a, 'b': b})}")
    page.wait_for_selector("body[data-compares='1']", state="attached", timeout=120_000)
    specs = page.locator(f"{part('sides')} tr", has=page.locator("th", has_text="specs"))
    expect(specs.locator("td").first).to_have_text("in P('x', 'y'), P('y', None); out P('x',)")
    assert "→" not in (specs.text_content() or "")
    matched = page.locator(part("matched"))
    assert matched.locator("th").all_text_contents() == ["collective", "A", "B", "Δ (B − A)"]
    a_side = matched.locator("tbody tr").first.locator("td[data-side=a]")
    shape = a_side.locator("[data-field=shape]").text_content() or ""
    assert re.fullmatch(r"[a-z0-9]+\[[\d,]*\]", shape), shape
    assert "jit(" in (a_side.locator("[data-field=from]").text_content() or "")  # the op that caused it
    shot(page, "views-compare")
    # snapshot sides: their specs, by leaf count
    mesh = Mesh(np.array(jax.devices()).reshape(2, 4), ("data", "model"))
    tree = {"w": jax.device_put(jnp.ones((8, 8)), NamedSharding(mesh, P("data"))),
            "v": jax.device_put(jnp.ones((8, 8)), NamedSharding(mesh, P("data")))}  # fmt: skip
    one = publish(tree, "one", f"http://127.0.0.1:{server.port}")
    tree["v"] = jax.device_put(jnp.ones((8, 8)), NamedSharding(mesh, P(None, "model")))
    two = publish(tree, "two", f"http://127.0.0.1:{server.port}")
    page.goto(f"http://127.0.0.1:{server.port}/compare.html?{urlencode({'a': one, 'b': two})}")
    page.wait_for_selector("body[data-compares='1']", state="attached", timeout=60_000)
    cells = page.locator(f"{part('sides')} tr", has=page.locator("th", has_text="specs")).locator("td")
    expect(cells.nth(0)).to_have_text("2 leaves: P('data',) ×2")
    expect(cells.nth(1)).to_contain_text("P(None, 'model') ×1")


def test_compare_breaks_a_tie_with_bytes_and_memory(server: Server, watched: Watched) -> None:
    # Regression: "about the same (8.74 µs each)" when B moves 4x the bytes and needs more HBM: no
    # tie-breaker. The comparison the API gave, with its estimates made equal (latency-bound collectives).
    base = "/?devices=tpu:v5e:4x4&mesh=4x4&axes=x,y&spec=P('x', 'y')&shape=256,256&dtype=bfloat16&reshard="
    sides = {"a": base + "P(None, 'y')", "b": base + "P()"}
    page = watched.page

    def tie(route: Any) -> None:
        r = route.fetch().json()
        for side in ("a", "b"):
            r[side]["lower_bound_seconds"] = 8.74e-6
        r["verdict"] = {
            **r["verdict"],
            "cheaper": None,
            "text": "about the same by lower bound on run time: A 8.74 µs, B 8.74 µs",
        }
        route.fulfill(status=200, content_type="application/json", body=json.dumps(r))

    page.route("**/api/compare", tie)
    page.goto(f"http://127.0.0.1:{server.port}/compare.html?{urlencode(sides)}")
    page.wait_for_selector("body[data-compares='1']", state="attached", timeout=120_000)
    status, answer = server.post_json(
        "/api/compare", {"a": {"reshard": reshard_of(sides["a"])}, "b": {"reshard": reshard_of(sides["b"])}}
    )
    assert status == 200
    ratio = answer["b"]["communication"]["bytes"] / answer["a"]["communication"]["bytes"]
    verdict = page.locator(part("verdict"))
    expect(verdict).to_contain_text("About the same")
    expect(page.locator(part("tie-breaker"))).to_contain_text(
        f"A is cheaper by the tie-breakers: {ratio:#.2g}× fewer bytes moved"
    )
    expect(verdict).to_have_attribute("data-cheaper", "a")
    shot(page, "views-compare-tie")


def test_compare_says_a_side_has_no_collectives(server: Server, watched: Watched) -> None:
    """Issue 28: a fix that removed every collective read "About the same by lower bound ... 1.1x less HBM" (both
    sides compute-bound) without saying it left none. The API's answer with B's collectives taken away and the
    estimates made equal: the tie-breaker says 0 collectives first, and what A moves."""
    base = "/?devices=tpu:v5e:4x4&mesh=4x4&axes=x,y&spec=P('x', 'y')&shape=256,256&dtype=bfloat16&reshard="
    sides = {"a": base + "P(None, 'y')", "b": base + "P()"}
    page = watched.page
    seen: dict[str, Any] = {}

    def none_in_b(route: Any) -> None:
        r = route.fetch().json()
        for side in ("a", "b"):
            r[side]["lower_bound_seconds"] = 8.74e-6
        r["b"]["communication"] = {**r["b"]["communication"], "count": 0, "runs": 0, "bytes": 0}
        r["verdict"] = {**r["verdict"], "cheaper": None, "text": "about the same by lower bound on run time"}
        seen.update(r)
        route.fulfill(status=200, content_type="application/json", body=json.dumps(r))

    page.route("**/api/compare", none_in_b)
    page.goto(f"http://127.0.0.1:{server.port}/compare.html?{urlencode(sides)}")
    page.wait_for_selector("body[data-compares='1']", state="attached", timeout=120_000)
    a = seen["a"]["communication"]
    expect(page.locator(part("tie-breaker"))).to_contain_text(
        f"B is cheaper by the tie-breakers: 0 collectives, where A has {a['count']} moving"
    )
    expect(page.locator(part("verdict"))).to_have_attribute("data-cheaper", "b")
    shot(page, "views-compare-no-collectives")


def reshard_of(address: str) -> dict[str, Any]:
    from urllib.parse import parse_qs, urlsplit

    q = {k: v[0] for k, v in parse_qs(urlsplit(address).query).items()}
    return {"devices": q["devices"], "mesh": {"shape": [4, 4], "axis_names": ["x", "y"]}, "shape": [256, 256],
            "dtype": q["dtype"], "from": q["spec"], "to": q["reshard"]}  # fmt: skip


def test_3d_tick_labels_stay_above_the_rings_when_rotated(server: Server, watched: Watched) -> None:
    # Regression: after rotating the 3-D lattice, ring lines were drawn across the axes' tick labels.
    page = watched.page
    query = urlencode({"devices": "tpu:v4:4x4x4", "mesh": "4x4x4", "axes": "x,y,z", "spec": "P('x', 'y')",
                       "shape": "16,16", "axis": "z"})  # fmt: skip
    page.goto(f"http://127.0.0.1:{server.port}/topology.html?{query}")
    rendered(page)
    canvas = page.locator(f"{part('topo-view')} canvas")
    canvas.focus()
    for turn in range(8):
        for _ in range(3):
            page.keyboard.press("ArrowLeft")
        page.keyboard.press("ArrowUp" if turn % 2 else "ArrowDown")
        page.wait_for_timeout(60)
        ring_pixels = canvas.evaluate(
            """c => {
              const ctx = c.getContext('2d'), dpr = c.width / c.clientWidth;
              let n = 0;
              for (const [x, y, w, h] of JSON.parse(c.dataset.labels)) {
                const img = ctx.getImageData(Math.ceil((x + 1) * dpr), Math.ceil((y + 1) * dpr),
                  Math.max(1, Math.floor((w - 2) * dpr)), Math.max(1, Math.floor((h - 2) * dpr)));
                for (let i = 0; i < img.data.length; i += 4) {
                  const [r, g, b] = [img.data[i], img.data[i + 1], img.data[i + 2]];
                  if (b - r > 90 || r - b > 90) n++;  // the rings' blue or red, never the text's grey
                }
              }
              return n;
            }"""
        )
        assert ring_pixels == 0, (turn, ring_pixels)
    shot(page, "views-3d-ticks")


def test_the_picture_stays_put_when_the_examples_arrive(server: Server, watched: Watched) -> None:
    # Regression: the examples (fetched after the first picture) grew the spec bar, pushing the picture,
    # sized to the first screen, past its bottom.
    page = watched.page
    arrived: list[bool] = []

    def late(route: Any) -> None:
        page.wait_for_timeout(1500)
        arrived.append(True)
        route.continue_()

    page.route("**/examples.json", late)
    state = {
        "devices": "tpu:v5p:16x16x24",
        "mesh": "24x256",
        "axes": "x,y",
        "shape": "6144,1024",
        "spec": "P(('x','y'), None)",
    }
    page.goto(f"http://127.0.0.1:{server.port}/?{urlencode(state)}")
    rendered(page)
    plot = page.locator(f"{part('grid')} .grid-plot").first
    before = plot.bounding_box()
    expect(page.locator(part("examples")).get_by_role("button").first).to_be_visible(timeout=10_000)
    assert arrived and plot.bounding_box() == before
    assert before is not None and before["y"] + before["height"] <= 1000  # the whole picture in the first screen
