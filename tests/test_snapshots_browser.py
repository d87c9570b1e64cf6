"""The snapshot view in headless Chromium against a real server: a published Flax model opened from
its share link, filtered, a leaf's grid, the memory chart (Plotly under the strict CSP), the
what-if rules, a diff and a copied link. Page errors and console errors fail the test.

Screenshots land in ``artifacts/screenshots/snapshots-*.png``.
"""

from __future__ import annotations

import re
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import AxisType, Mesh, NamedSharding
from jax.sharding import PartitionSpec as P
from playwright.sync_api import Browser, Page, expect

from sharding_core import capture, inspect_jit, publish
from tests.plugins.browser import Watched, shot
from tests.plugins.live import Server

pytestmark = pytest.mark.browser  # a real server or notebook and a browser

RULES = (("batch", "data"), ("hidden", "model"), ("embed", None))


class Mlp(nn.Module):
    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        for i in range(3):
            w1 = self.param(
                f"w1_{i}", nn.with_logical_partitioning(nn.initializers.ones, ("embed", "hidden")), (16, 32)
            )
            w2 = self.param(
                f"w2_{i}", nn.with_logical_partitioning(nn.initializers.ones, ("hidden", "embed")), (32, 16)
            )
            x = (x @ w1) @ w2
        return x


def mesh() -> Mesh:
    return Mesh(np.array(jax.devices()).reshape(2, 4), ("data", "model"), axis_types=(AxisType.Auto,) * 2)


@pytest.fixture(scope="module")
def published(server: Server) -> dict[str, Any]:
    m = mesh()
    x = jnp.ones((8, 16))
    with jax.set_mesh(m), nn.logical_axis_rules(RULES):
        abstract = jax.eval_shape(Mlp().init, jax.random.key(0), x)
        shardings = nn.logical_to_mesh_sharding(nn.get_partition_spec(abstract), m, RULES)
        params = jax.jit(Mlp().init, out_shardings=shardings)(jax.random.key(0), x)["params"]
    lopsided = jax.device_put(jnp.ones((64, 64)), jax.devices()[6])  # one device holds much more
    url = f"http://127.0.0.1:{server.port}"
    tree = {"params": params, "batch": jax.device_put(x, NamedSharding(m, P("data"))), "cache": lopsided}
    first = publish(tree, "mlp", url, rules=RULES)
    tree["batch"] = jax.device_put(x, NamedSharding(m, P(None, "model")))
    second = publish(tree, "mlp resharded", url, rules=RULES)
    return {"first": first, "second": second, "params": params}


def loaded(page: Page, count: int = 1) -> None:
    page.wait_for_selector(f"body[data-loaded='{count}']", state="attached", timeout=30_000)
    page.wait_for_selector("[data-part=memory-chart][data-plotted]", state="attached", timeout=30_000)


def leaf_rows(page: Page) -> list[str]:
    return page.locator("[data-part=leaf-rows] tr.leaf .leaf-open").all_text_contents()


def test_open_filter_grid_chart_whatif_diff_and_share(
    server: Server, browser: Browser, watched: Watched, published: dict[str, Any]
) -> None:
    page = watched.page
    page.goto(published["first"])
    loaded(page)
    assert re.search(r"/snapshots\.html\?snapshot=[A-Za-z0-9_-]{22}", page.url)  # the long form
    expect(page.locator("[data-part=snap-title]")).to_have_text("mlp")
    expect(page.locator("[data-part=leaf-count]")).to_have_text("8 leaves")
    # the memory chart: one bar per device, the lopsided device flagged
    expect(page.locator("[data-part=memory-chart] .main-svg").first).to_be_visible()
    assert page.locator("[data-part=memory-chart] .trace.bars .point").count() == 8
    expect(page.locator("[data-part=memory-flag]")).to_contain_text("imbalanced")
    expect(page.locator("[data-part=memory-flag]")).to_contain_text("CPU 6")
    shot(page, "snapshots-01-opened")

    # filter by axis name: the hidden→model weights and nothing else
    page.get_by_label("Filter").fill("w2_")
    page.wait_for_selector("body[data-filtered]", state="attached")
    expect(page.locator("[data-part=leaf-count]")).to_have_text("3 of 8 leaves match")
    assert leaf_rows(page) == ["w2_0", "w2_1", "w2_2"]
    page.get_by_label("Sharded over").select_option("model")
    expect(page.locator("[data-part=leaf-count]")).to_have_text("3 of 8 leaves match")
    shot(page, "snapshots-02-filtered")

    # a leaf's grid: the layout explorer's component, labelled with JAX's device ids per block
    page.locator("[data-part=leaf-rows] .leaf-open", has_text="w2_1").click()
    page.wait_for_selector("[data-part=leaf-grid][data-path='params/w2_1']", state="attached")
    box = published["params"]["w2_1"].value
    blocks: dict[tuple[int, ...], list[int]] = {}
    for shard in box.addressable_shards:
        blocks.setdefault(tuple(s.start or 0 for s in shard.index), []).append(shard.device.id)
    want = sorted("CPU " + ",".join(map(str, sorted(ids))) for ids in blocks.values())
    assert sorted(page.locator("[data-part=leaf-grid] .tile-label").all_text_contents()) == want
    expect(page.locator("[data-part=leaf-summary]")).to_contain_text("('hidden', 'embed')")
    assert "leaf=params%2Fw2_1" in page.url
    shot(page, "snapshots-03-leaf-grid")

    # what-if: hidden over data instead of model; the spec, grid and chart follow
    page.get_by_role("textbox", name="Rules").fill("('hidden', 'data'), ('embed', 'model')")
    page.get_by_role("button", name="Apply rules").click()
    page.wait_for_selector("body[data-whatif='1']", state="attached")
    page.wait_for_selector("[data-part=memory-chart][data-plotted='2']", state="attached")
    spec = repr(nn.logical_to_mesh_axes(("hidden", "embed"), (("hidden", "data"), ("embed", "model"))))
    expect(page.locator("[data-part=leaf-rows] tr.selected td.changed")).to_have_text(spec)
    expect(page.locator("[data-part=leaf-summary]")).to_contain_text(spec)
    assert page.locator("[data-part=memory-chart] .trace.bars").count() == 2  # captured and what-if
    expect(page.locator("[data-part=memory-flag]")).to_contain_text("What-if")
    shot(page, "snapshots-04-whatif")

    # diff against the resharded snapshot: the batch moved
    page.get_by_label("Compare with").fill(published["second"])
    page.get_by_role("button", name="Compare").click()
    page.wait_for_selector("body[data-diffs='1']", state="attached")
    expect(page.locator("[data-part=diff-result]")).to_contain_text("1 changed")
    expect(page.locator("[data-part=diff-result] td.changed")).to_have_text("changed")
    shot(page, "snapshots-05-diff")

    # Copy link restores the view (filter, leaf, rules, diff) in a fresh browser
    page.get_by_role("button", name="Copy link").click()
    share = page.get_by_label("Share link")
    expect(share).to_have_value(re.compile(r"/s/[A-Za-z0-9_-]{22,}$"))
    fresh = Watched(browser.new_context(viewport={"width": 1400, "height": 1000}))
    try:
        fresh.page.goto(share.input_value())
        loaded(fresh.page)
        fresh.page.wait_for_selector("[data-part=leaf-grid][data-path='params/w2_1']", state="attached")
        fresh.page.wait_for_selector("body[data-diffs='1']", state="attached")
        expect(fresh.page.get_by_label("Filter")).to_have_value("w2_")
        expect(fresh.page.locator("[data-part=leaf-rows] tr.selected td.changed")).to_have_text(spec)
        assert fresh.errors == []
    finally:
        fresh.context.close()


def test_a_share_link_asks_for_its_snapshot_once_with_the_page(browser: Browser, published: dict[str, Any]) -> None:
    # Issue 37: the server names the snapshot in the page's Link header (server/early.py); the browser asks for it
    # with the page's first bytes and the panel's own fetch takes that answer: one request, started by the link.
    context = browser.new_context()
    page = context.new_page()
    warnings: list[str] = []
    page.on("console", lambda m: warnings.append(m.text) if m.type in ("warning", "error") else None)
    page.goto(published["first"])
    loaded(page)
    snapshot_id = re.search(r"snapshot=([A-Za-z0-9_-]+)", page.url)
    assert snapshot_id
    asked = page.evaluate(
        """(id) => performance.getEntriesByType("resource")
              .filter((e) => new URL(e.name).pathname === `/api/snapshots/${id}`)
              .map((e) => [e.initiatorType, e.startTime])""",
        snapshot_id[1],
    )
    assert len(asked) == 1 and asked[0][0] == "link", asked
    modules = page.evaluate(
        """() => performance.getEntriesByType("resource")
              .filter((e) => e.name.includes("/js/")).map((e) => e.startTime)"""
    )
    assert asked[0][1] <= min(modules), (asked, min(modules))  # before any module, not after them
    context.close()
    assert not [w for w in warnings if "preload" in w], warnings  # a preload the page did not use is a warning


def test_an_unknown_snapshot_says_so(server: Server, watched: Watched) -> None:
    page = watched.page
    page.on("console", lambda m: None)
    watched.errors.clear()
    page.goto(f"http://127.0.0.1:{server.port}/snapshots.html?snapshot={'A' * 22}")
    page.wait_for_selector("body[data-loaded='1']", state="attached")
    expect(page.get_by_role("alert").first).to_contain_text("not_found")
    expect(page.locator("[data-part=empty]")).to_be_visible()
    # the 404 itself is logged by the browser as a failed resource; nothing else may be
    watched.errors[:] = [e for e in watched.errors if "404" not in e]
    shot(page, "snapshots-06-not-found")


def test_hostile_leaf_paths_and_names_render_as_text(server: Server, watched: Watched) -> None:
    page = watched.page
    evil = '<img src=x onerror="window.XSS=1"><script>window.XSS=2</script>'
    m = mesh()
    tree = {evil: jax.device_put(jnp.ones((8, 8)), NamedSharding(m, P("data")))}
    url = publish(tree, f"name {evil}", f"http://127.0.0.1:{server.port}")
    page.goto(url)
    loaded(page)
    assert page.evaluate("() => window.XSS") is None
    assert page.locator("img[src='x'], script:not([src])").count() == 0
    # the path shows as text; "/" in a path separates tree levels, so the closing tag splits there
    expect(page.locator("[data-part=leaf-rows]")).to_contain_text(
        '<img src=x onerror="window.XSS=1"><script>window.XSS=2<'
    )
    shot(page, "snapshots-07-hostile-names")


def test_a_snapshots_platform_is_text_in_the_memory_chart(server: Server, watched: Watched) -> None:
    # Regression (issue 12): Plotly reads labels as HTML, so a snapshot's platform string became a
    # clickable link in the per-device memory chart.
    page = watched.page
    snap = capture({"x": jax.device_put(jnp.ones((8, 8)), NamedSharding(mesh(), P("data")))})
    snap["platform"] = '<a href="https://evil.example/">click</a>'
    page.goto(publish(snap, "platform", f"http://127.0.0.1:{server.port}"))
    loaded(page)
    chart = page.locator("[data-part=memory-chart]")
    expect(chart).to_contain_text('<A HREF="HTTPS://EVIL.EXAMPLE/">CLICK</A> 0')  # the view upper-cases platforms
    assert chart.locator("a[href*='evil']").count() == 0
    shot(page, "snapshots-08-platform-as-text")


def test_inspect_jit_collectives_use_the_kernel_labs_collectives_table(server: Server, watched: Watched) -> None:
    # The collectives of a captured jit (inspect_jit) show in the same table component as the
    # kernel lab's: one row per collective, op and device groups as text.
    page = watched.page
    m = mesh()
    a = jax.device_put(jnp.ones((8, 16)), NamedSharding(m, P("data", "model")))
    snap = inspect_jit(lambda v: v.sum(0), a)
    assert snap["collectives"], "the sum over a sharded dimension compiles to an all-reduce"
    page.goto(publish(snap, "sum over data", f"http://127.0.0.1:{server.port}"))
    loaded(page)
    expect(page.locator("[data-part=collectives-section]")).to_be_visible()
    rows = page.locator("[data-part=collectives] table.collectives tbody tr")
    expect(rows).to_have_count(len(snap["collectives"]))
    expect(rows.first.locator("td.op")).to_have_text(snap["collectives"][0]["op"])
    groups = snap["collectives"][0]["groups"]
    if groups:
        text = " ".join("{" + ",".join(map(str, g)) + "}" for g in groups)
        expect(rows.first.locator("td.groups")).to_have_text(text)
    shot(page, "snapshots-08-inspect-jit-collectives")


# ---- issue 13 ----------------------------------------------------------------------------------


def sharded_params() -> Any:
    m = mesh()
    x = jnp.ones((8, 16))
    with jax.set_mesh(m), nn.logical_axis_rules(RULES):
        abstract = jax.eval_shape(Mlp().init, jax.random.key(0), x)
        shardings = nn.logical_to_mesh_sharding(nn.get_partition_spec(abstract), m, RULES)
        return jax.jit(Mlp().init, out_shardings=shardings)(jax.random.key(0), x)["params"]


def open_leaf(page: Page, name: str) -> None:
    page.locator("[data-part=leaf-rows] .leaf-open", has_text=name).click()
    page.wait_for_selector(f"[data-part=leaf-grid][data-path='params/{name}']", state="attached")


def test_the_declared_note_only_when_truly_different_and_never_under_a_whatif(server: Server, watched: Watched) -> None:
    # Regression: a Flax state published as the README shows (no rules=) marked every leaf "not as
    # the box declares (P(None, None))", and the note survived a what-if.
    page = watched.page
    params = sharded_params()
    url = f"http://127.0.0.1:{server.port}"
    page.goto(publish({"params": params}, "as the README shows", url))
    loaded(page)
    open_leaf(page, "w1_0")
    expect(page.locator("[data-part=leaf-summary]")).to_contain_text("('embed', 'hidden')")
    expect(page.locator("[data-part=leaf-summary]")).not_to_contain_text("declares")
    # with its rules, and one leaf moved off its declaration: only that one is marked
    m = mesh()
    moved = dict(params)
    moved["w2_0"] = params["w2_0"].replace_boxed(
        jax.device_put(params["w2_0"].value, NamedSharding(m, P(None, "model")))
    )
    page.goto(publish({"params": moved}, "one leaf moved", url, rules=RULES))
    loaded(page)
    open_leaf(page, "w1_0")
    expect(page.locator("[data-part=leaf-summary]")).not_to_contain_text("declares")
    open_leaf(page, "w2_0")
    expect(page.locator("[data-part=leaf-summary]")).to_contain_text("not as the box declares (P('model', None))")
    shot(page, "snapshots-09-declared-note")
    page.get_by_role("textbox", name="Rules").fill("('hidden', 'data'), ('embed', 'model')")
    page.get_by_role("button", name="Apply rules").click()
    page.wait_for_selector("body[data-whatif='1']", state="attached")
    expect(page.locator("[data-part=leaf-summary]")).not_to_contain_text("declares")


def test_the_leaf_grid_opens_in_view_and_the_diff_fits_the_page(
    server: Server, browser: Browser, published: dict[str, Any]
) -> None:
    # Regression: the leaf grid opened below the fold; the diff table overflowed the page (1440 → 1550 px).
    context = browser.new_context(viewport={"width": 1440, "height": 900})
    w = Watched(context)
    page = w.page
    try:
        page.goto(published["first"])
        loaded(page)
        page.locator("[data-part=leaf-rows] .leaf-open", has_text="w2_1").click()
        page.wait_for_selector("[data-part=leaf-grid][data-path='params/w2_1']", state="attached")
        grid = page.locator("[data-part=leaf-grid]").bounding_box()
        table = page.locator("[data-part=leaf-table]").bounding_box()
        assert grid is not None and table is not None
        assert grid["y"] < 900 and grid["x"] > table["x"] + table["width"]  # beside the table, above the fold
        page.get_by_label("Compare with").fill(published["second"])
        page.get_by_role("button", name="Compare").click()
        page.wait_for_selector("body[data-diffs='1']", state="attached")
        assert page.evaluate("() => document.documentElement.scrollWidth") <= 1440
        # the chart's axis says the unit the text says
        flag = page.locator("[data-part=memory-flag]").text_content() or ""
        unit = re.search(r"max [\d.]+ (B|KiB|MiB|GiB)", flag)
        assert unit is not None
        expect(page.locator("[data-part=memory-chart] .ytitle")).to_have_text(f"{unit.group(1)} per device")
        shot(page, "snapshots-10-leaf-beside-diff-fits")
        assert w.errors == []
    finally:
        context.close()


def test_the_snapshot_page_without_an_id_lists_recent_snapshots(
    server: Server, watched: Watched, published: dict[str, Any]
) -> None:
    # Regression: /snapshots.html without an id showed empty panels and no list of recent snapshots.
    page = watched.page
    page.goto(published["first"])
    loaded(page)
    page.goto(f"http://127.0.0.1:{server.port}/snapshots.html")
    page.wait_for_selector("body[data-loaded='1']", state="attached")
    expect(page.locator(".snap-leaves")).to_be_hidden()
    expect(page.locator(".snap-memory")).to_be_hidden()
    recent = page.locator("[data-part=recent] a")
    expect(recent).to_have_text(["mlp"])
    shot(page, "snapshots-11-recent")
    recent.first.click()
    loaded(page)
    expect(page.locator("[data-part=snap-title]")).to_have_text("mlp")


# ---- issue 32 ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("width", "height", "scheme"), [(1440, 900, "light"), (1440, 900, "dark"),
                                                         (390, 844, "light"), (390, 844, "dark")])  # fmt: skip
def test_findings_come_first_and_values_are_listed(
    server: Server, browser: Browser, width: int, height: int, scheme: str
) -> None:
    """A MaxText #5056-style accumulation loop: its finding leads the page (before the plan), the values table
    lists the largest values first and filters."""
    from tests import findings_corpus as corpus
    from tests.plugins.browser import sized_context

    f, args = corpus.optax_multisteps_dp()
    snap = inspect_jit(f, *args)
    assert snap["findings"] and snap["values"]
    context = sized_context(browser, width, height, scheme)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(publish(snap, "accumulation loop", f"http://127.0.0.1:{server.port}"))
    loaded(page)
    box = page.locator("[data-part=findings-section]")
    expect(box).to_be_visible()
    expect(box.locator("[data-part=finding]")).to_have_count(len(snap["findings"]))
    expect(box).to_contain_text("reduced_every_iteration")
    expect(box).to_contain_text("8 × 1.00 MiB")  # the front end's bytes: 3 significant digits
    top = page.locator("[data-part=findings-section]").bounding_box()
    plan = page.locator("[data-part=plan]").bounding_box()
    assert top is not None and plan is not None and top["y"] < plan["y"]
    values = page.locator("[data-part=values-section]")
    expect(values).to_be_visible()
    rows = values.locator("table.values tbody tr")
    expect(rows).to_have_count(min(30, len(snap["values"])))
    largest = max(snap["values"], key=lambda v: v["bytes"])
    expect(rows.first.locator("td").nth(2)).to_have_text(largest["typed"])
    page.locator("[data-part=values-filter]").fill("dot_general")
    expect(rows).to_have_count(len([v for v in snap["values"] if "dot_general" in v["op"]]))
    shot(page, f"snapshots-12-findings-values-{width}x{height}-{scheme}")
    context.close()
    assert errors == []


@pytest.fixture(scope="module")
def tpu_fix(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Any]:
    """Issue 32's naive-FSDP decoder, small, planned for ``tpu:v5p:2x2x4`` with its fixes checked (the fix scheduled
    by libtpu, not compiled to the end): the plan, and a file holding it."""
    import json

    from sharding_core.capturing import program_snapshot
    from sharding_core.program.targets import mesh as target_mesh
    from tests.test_findings_fix import decoder

    f, args = decoder(target_mesh("tpu:v5p:2x2x4", (16,), ("fsdp",)), d=512, seq=256, vocab=4096)
    snap = program_snapshot(f, args, {}, detailed=False, check_fixes=True)
    snap["name"] = "naive FSDP decoder"
    fix = next(x["fix"] for x in snap["findings"] if x["kind"] == "batch_not_split")
    assert fix["placed_after"] and fix["peak_after"] is None
    path = tmp_path_factory.mktemp("tpu-fix") / "plan.json"
    path.write_text(json.dumps(snap))
    return snap, path


def _placed_text(snap: dict[str, Any]) -> str:
    fix = next(x["fix"] for x in snap["findings"] if x["kind"] == "batch_not_split")
    return f"{_js_bytes(fix['placed_after'])} placed (from {_js_bytes(fix['placed_before'])})"


@pytest.mark.tpu
def test_a_tpu_fix_says_the_bytes_it_placed(
    server: Server, browser: Browser, tpu_fix: tuple[dict[str, Any], Any]
) -> None:
    """The fix was scheduled by libtpu and not compiled to the end, so its card gives the step after and the bytes
    placed, before and after, and no peak; at a desktop and a phone size, light and dark, its long file paths wrap."""
    from tests.plugins.browser import sized_context

    snap, _ = tpu_fix
    context = sized_context(browser, 1440, 900, "light")
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(publish(snap, "naive FSDP decoder", f"http://127.0.0.1:{server.port}"))
    loaded(page)
    card = page.locator("[data-part=findings-section] [data-part=finding]").filter(has_text="batch_not_split")
    expect(card).to_have_count(1)
    expect(card.locator(".fix")).to_contain_text(_placed_text(snap))
    expect(card.locator(".fix")).not_to_contain_text("peak")
    for width, height in ((1440, 900), (390, 844)):
        page.set_viewport_size({"width": width, "height": height})
        for scheme in ("light", "dark"):
            page.emulate_media(color_scheme=scheme)
            expect(card).to_be_visible()
            box = card.bounding_box()
            assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= width
            # the card's long file paths wrap: nothing in it is wider than the window
            widest = card.evaluate(_WIDEST)
            assert widest <= width, (widest, width)
            shot(page, f"snapshots-13-tpu-fix-placed-{width}x{height}-{scheme}")
    context.close()
    assert errors == []


@pytest.mark.tpu
def test_a_tpu_fix_in_jupyterlab_fits_every_size_and_theme(
    browser: Browser, tmp_path_factory: pytest.TempPathFactory, server: Server, tpu_fix: tuple[dict[str, Any], Any]
) -> None:
    """The same plan shown by the notebook widget: the fix's card says the bytes placed, and nothing is wider than
    the widget at 1440×900 and 390×844, light and dark (screenshots with the findings at the top)."""
    from tests.notebooks.jupyter import in_every_size_and_theme, lab_notebook

    snap, path = tpu_fix
    cells = ["import json, os\nos.environ.setdefault('JAX_PLATFORMS', 'cpu')\nimport shardscope",
             f"shardscope.show(json.load(open({str(path)!r})))"]  # fmt: skip
    with lab_notebook(browser, tmp_path_factory, cells, {"plan": 1}, f"http://127.0.0.1:{server.port}") as nb:
        card = nb.widget("plan").locator("[data-part=finding]").filter(has_text="batch_not_split")
        expect(card.locator(".fix")).to_contain_text(_placed_text(snap))
        in_every_size_and_theme(nb, ["plan"], "findings-jupyterlab-tpu-fix", parts=("findings-section",))
        assert nb.widget_errors() == []


_WIDEST = "c => Math.max(...[c, ...c.querySelectorAll('*')].map(e => e.getBoundingClientRect().right))"


def _js_bytes(n: int) -> str:
    """Bytes as the front end writes them (frontend/js/lib/format.js ``fmtBytes``)."""
    units, v, u = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"], float(n), 0
    while v >= 1024 and u < len(units) - 1:
        v, u = v / 1024, u + 1
    return f"{int(v)} B" if u == 0 else f"{v:.{2 if v < 10 else 1}f} {units[u]}"
