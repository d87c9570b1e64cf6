"""The dashboard's panels on both of their hosts: every test here runs once against the dashboard's page (the
page host, over HTTP) and once against the notebook widget in a real JupyterLab (the widget host, answered in
the kernel), on the same objects (``tests/notebooks/panel_objects.py``: the page opens ``shardscope.link(x)``
and the published snapshots; the notebook ``shardscope.show``\\s them). The checks are the same and against
JAX: one panel, two hosts.

Screenshots: ``artifacts/screenshots/panel-<host>-*.png``, at 1440×900 and 390×844, light and dark.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import flax.linen as nn
import pytest
from jax.sharding import PartitionSpec as P
from playwright.sync_api import Browser, Locator, expect

import shardscope
from sharding_core import publish
from tests.notebooks import panel_objects as objects
from tests.notebooks.hosting import Mounted, jax_tiles
from tests.notebooks.jupyter import Notebook, in_every_size_and_theme, lab_notebook, mounting
from tests.notebooks.show_cells import PANEL_CELLS, PANEL_SHOW_CELLS
from tests.plugins.live import Server

pytestmark = pytest.mark.browser  # a real server or notebook and a browser


@dataclass
class Published:
    """The panel objects on the dashboard: each one's address."""

    array: str
    model: str
    step: str
    half: str


@pytest.fixture(scope="module")
def published(server: Server) -> Published:
    url = f"http://127.0.0.1:{server.port}"
    state = objects.train_state()
    return Published(
        array=shardscope.link(objects.array(), url),
        model=publish(state, "train state", url, rules=objects.RULES),
        step=publish(objects.train_step_capture(state), "train_step", url),
        half=publish(objects.half_run(), "half a run", url),
    )


@pytest.fixture(scope="module")
def nb(browser: Browser, tmp_path_factory: pytest.TempPathFactory, server: Server) -> Iterator[Notebook]:
    with lab_notebook(
        browser, tmp_path_factory, PANEL_CELLS, PANEL_SHOW_CELLS, f"http://127.0.0.1:{server.port}"
    ) as shown:
        yield shown


@pytest.fixture
def mount(host: str, request: pytest.FixtureRequest, browser: Browser, published: Published) -> Iterator[Any]:
    """``mount(name)``: the panel showing object ``name`` on the test's host."""
    with mounting(
        host, lambda: request.getfixturevalue("nb"), browser, lambda name: getattr(published, name),
        lambda name: "rendered" if name == "array" else "loaded",
    ) as mount:  # fmt: skip
        yield mount


def labels(grid: Locator) -> list[str]:
    return sorted(grid.locator(".tile-label").all_text_contents())


# ---- the layout panel ---------------------------------------------------------------------------------------


def test_the_layout_is_jaxs_with_its_hover_cards(mount: Any) -> None:
    p: Mounted = mount("array")
    expected = jax_tiles((2, 4), P("x", "y"), (8, 16))
    grid = p.part("grid")
    assert labels(grid) == sorted(expected)
    for label, bounds in expected.items():
        k = grid.locator(".tile-label", has_text=re.compile(f"^{re.escape(label)}$")).get_attribute("data-tile")
        grid.locator(f".tile[data-tile='{k}']").hover()
        card = p.page.locator("#tooltip")
        card.wait_for(state="visible")
        assert card.inner_text().startswith("[" + ", ".join(f"{a}:{b}" for a, b in bounds) + "]")
    summary = p.part("summary").inner_text()
    assert "[4,4]" in summary and "1× (no replication)" in summary and "64 B" in summary
    p.shot("layout")


def test_typing_a_spec_lays_it_out_again_and_an_error_dims_the_picture(mount: Any) -> None:
    p: Mounted = mount("array")
    box = p.root.get_by_label("PartitionSpec", exact=True)
    before = p.count("rendered")
    box.fill("P('y')")
    p.counted(before)
    assert labels(p.part("grid")) == sorted(jax_tiles((2, 4), P("y"), (8, 16)))
    expect(p.part("summary")).to_contain_text("2× (replicated over x)")
    box.fill("P('y', 'q')")  # not a mesh axis: the explanation, the last picture kept and dimmed
    expect(p.part("spec-error")).to_contain_text("unknown_axis")
    expect(p.part("results")).to_have_class(re.compile("stale"))
    expect(p.part("stale-note")).to_contain_text("last valid layout")
    p.shot("layout-error")
    before = p.count("rendered")
    box.fill("P('x', 'y')")
    p.counted(before)
    expect(p.part("spec-error")).to_be_hidden()
    assert labels(p.part("grid")) == sorted(jax_tiles((2, 4), P("x", "y"), (8, 16)))


def test_the_mesh_table_and_the_tiles_highlight_each_other(mount: Any) -> None:
    p: Mounted = mount("array")
    p.part("mesh").locator("td[data-device='5']").click()
    lit = p.part("grid").locator(".tile.hl")
    expect(lit).to_have_count(1)
    k = lit.get_attribute("data-tile")
    expect(p.part("grid").locator(f".tile-label[data-tile='{k}']")).to_have_text("CPU 5")
    expect(p.part("selection")).to_contain_text("CPU 5")


# ---- the snapshot panel -------------------------------------------------------------------------------------


def test_the_leaf_table_filters_and_a_leafs_grid_is_jaxs(mount: Any) -> None:
    p: Mounted = mount("model")
    before = p.count("filtered")
    p.root.get_by_label("Filter leaves").fill("Dense_1 kernel")
    p.counted(before, "filtered")
    expect(p.part("leaf-count")).to_have_text(re.compile(r"\d+ of \d+ leaves match"))
    p.part("leaf-rows").locator("tr.leaf button.leaf-open").first.click()
    expect(p.part("leaf-title")).to_have_text(re.compile("Dense_1/kernel$"))
    assert labels(p.part("leaf-grid")) == sorted(jax_tiles((2, 4), P("y", None), (64, 16)))
    expect(p.part("leaf-summary")).to_contain_text("('hidden', 'embed')")
    # every column of the leaf table in view: none cut off (issue 21: the widget's was clipped at 1,090 px)
    clipped = p.part("leaf-table").evaluate("t => t.scrollWidth - t.clientWidth")
    assert clipped <= 1, clipped
    p.shot("snapshot")


def test_the_whatif_lays_the_logical_leaves_out_again(mount: Any) -> None:
    # New in the widget (issue 21): the what-if of other Flax rules, computed in the kernel.
    p: Mounted = mount("model")
    rules = (("hidden", "x"), ("embed", "y"))
    before = p.count("whatif")
    p.root.get_by_role("textbox", name="Rules").fill("('hidden', 'x'), ('embed', 'y')")
    p.root.get_by_role("button", name="Apply rules").click()
    p.counted(before, "whatif")
    spec = repr(nn.logical_to_mesh_axes(("hidden", "embed"), rules))
    before = p.count("filtered")
    p.root.get_by_label("Filter leaves").fill("Dense_1 kernel")
    p.counted(before, "filtered")
    p.part("leaf-rows").locator("tr.leaf button.leaf-open").first.click()
    expect(p.part("leaf-rows").locator("tr.selected td.changed")).to_have_text(spec)
    expect(p.part("leaf-summary")).to_contain_text("captured spec")
    expect(p.part("memory-flag")).to_contain_text("What-if")
    p.shot("whatif")
    p.root.get_by_role("button", name="Back to captured").click()
    expect(p.part("memory-flag")).not_to_contain_text("What-if")


def test_an_inspect_jit_capture_shows_its_collectives_on_the_mesh(mount: Any) -> None:
    p: Mounted = mount("step")
    # issue 25: a capture's collectives come before its leaves (they were the last card, far down the page)
    tops = [p.part(name).first.bounding_box() for name in ("collectives-section", "leaf-table")]
    assert tops[0] is not None and tops[1] is not None and tops[0]["y"] < tops[1]["y"], tops
    rows = p.part("collectives").locator("tr.collective")
    expect(rows.first).to_contain_text("all-reduce")
    rows.last.click()
    n = rows.count()
    expect(p.part("collective-mesh").locator(".mesh-caption")).to_have_text(re.compile(f"^#{n} all-reduce"))
    groups = re.findall(r"\{([\d,]+)\}", rows.last.locator("td.groups").inner_text())
    for group in groups:  # every device of a group coloured alike on the mesh
        cells = [p.part("collective-mesh").locator(f"td[data-device='{i}']") for i in group.split(",")]
        assert len({cell.evaluate("e => e.style.background") for cell in cells}) == 1
    # Regression (issue 21): inspect_jit named its arguments by position only; train_step(state, x)
    tree = p.part("leaf-rows")
    expect(tree.locator("button.tree-toggle[data-group='inputs/args/0']")).to_have_text("▾ 0 · state")
    before = p.count("filtered")
    p.root.get_by_label("Filter leaves").fill("inputs/args/1")  # the table draws the rows in view: bring it up
    p.counted(before, "filtered")
    tree.locator("tr.leaf button.leaf-open", has_text=re.compile(r"^1 · x$")).click()
    expect(p.part("leaf-title")).to_have_text("inputs/args/1 — argument x")


def test_a_run_missing_a_process_fades_its_shards(mount: Any) -> None:
    # New in the widget (issue 21): a merged run's processes and the shards of the one that never reported.
    p: Mounted = mount("half")
    expect(p.part("processes")).to_contain_text("Processes: 1 of 2 reported")
    expect(p.part("processes")).to_contain_text("Missing: process 1")
    expect(p.part("leaf-title")).to_have_text("w")
    faded = p.part("leaf-grid").locator(".tile.not-held .tile-label, .tile.not-held")
    expect(p.part("leaf-grid").locator(".tile.not-held")).to_have_count(4)  # devices 4-7 hold their own blocks
    assert faded.count() >= 4
    expect(p.part("leaf-legend")).to_contain_text("whose process did not report")
    expect(p.part("leaf-summary")).to_contain_text("not held")
    p.shot("half-run")


# ---- every size and theme, in JupyterLab (the dashboard's: tests/test_screens_browser.py) ------------------------


def test_the_widgets_fit_their_output_in_every_size_and_theme(nb: Notebook) -> None:
    in_every_size_and_theme(nb, list(PANEL_SHOW_CELLS), "panel-jupyterlab")
