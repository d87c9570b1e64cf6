"""``shardscope.show`` in a real JupyterLab and a real Notebook 7 (the PyPI packages, each started here on a
free loopback port with a token and its network features off) in Debian's Chromium: the notebook of
``tests/notebooks/show_cells.py`` is run from the Run menu, and the drawn widgets are checked against
JAX — tile labels, hover cards, the spec box recomputing in the kernel, the snapshot view, the
collectives on the mesh, publishing to a real dashboard, the draw time at 4096 devices, light and dark
themes — and nothing is fetched from outside the machine. Every test runs in both front ends, one
after the other (the module's Jupyter server is parametrised).

Screenshots: ``artifacts/screenshots/notebook-*.png`` (JupyterLab), ``notebook7-*.png`` (Notebook 7).
"""

from __future__ import annotations

import json
import os
import re
import secrets
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import pytest
from jax.sharding import PartitionSpec as P
from playwright.sync_api import Browser, Locator, Page, expect

from tests.notebooks.hosting import (
    HostPage,
    columns_fit_the_width,
    count,
    counted,
    descendants,
    jax_tiles,
    stop,
    wait_until_answering,
)
from tests.notebooks.show_cells import SHOW_CELLS, write
from tests.plugins.browser import SHOTS
from tests.plugins.live import Server, free_port

pytestmark = pytest.mark.slow

BIN = Path(sys.executable).parent
MAX_DRAW_MS = 500
"""A 4096-device layout, from the payload to the painted frame (the grid and the summary; the mesh table of
more than 1024 devices is folded, built when opened)."""
MAX_JUPYTER_RSS = 4 * 1024**3
"""The Jupyter server and its kernel together (JAX, Flax, the widgets): about 1 GiB."""
JUPYTER_START_SECONDS = 90

# Jupyter's own noise on an offline machine, never the widget's.
JUPYTER_NOISE = ("debugger", "WebSocket", "terminals", "History was unable", "favicon")


class Front(NamedTuple):
    """A notebook front end: its command, the address of a notebook in it, its own offline switches."""

    name: str
    command: str
    notebook_path: str
    shots: str
    args: tuple[str, ...]
    noise: tuple[str, ...] = ()
    """The front end's own errors, never the widget's."""


FRONTS = {
    "JupyterLab": Front(
        "JupyterLab", "jupyter-lab", "/lab/tree/", "notebook",
        (   # no announcements, no update check, no PyPI extension manager
            "--LabApp.news_url=None", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
            "--LabApp.extension_manager=readonly",
            "--LabApp.expose_app_in_browser=True",  # window.jupyterapp: the test switches the theme with it
        ),
    ),
    # Notebook 7 has no news or update check of its own
    "Notebook 7": Front(
        "Notebook 7", "jupyter-notebook", "/notebooks/", "notebook7",
        ("--JupyterNotebookApp.expose_app_in_browser=True",),
        # Notebook 7.6's settings loader throws this on opening any notebook, before a cell has run
        # (checked with the notebook opened and not run)
        noise=("Cannot read properties of undefined (reading 'schema')",),
    ),
}  # fmt: skip


@dataclass
class Jupyter:
    """A running Jupyter server of one front end, and the dashboard its kernels publish to."""

    front: Front
    port: int
    token: str
    proc: subprocess.Popen[bytes]
    log: Path
    dashboard: str

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def rss(self) -> int:
        return sum(descendants(self.proc.pid).values())


@pytest.fixture(scope="module", params=list(FRONTS))
def jupyter(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, server: Server
) -> Iterator[Jupyter]:
    """JupyterLab, then Notebook 7, serving a fresh directory holding the notebook; its kernels publish to
    ``server``."""
    front = FRONTS[request.param]
    root = tmp_path_factory.mktemp(front.shots)
    write(root / "show.ipynb")
    home = tmp_path_factory.mktemp(f"{front.shots}-home")
    settings = home / "settings"
    lab_settings = {
        # no news or update checks (both fetch from outside), no kernel-picker dialog
        "@jupyterlab/apputils-extension/notification": {"fetchNews": "false", "checkForUpdates": False},
        "@jupyterlab/notebook-extension/tracker": {"autoStartDefaultKernel": True},
    }
    for name, value in lab_settings.items():
        path = f"{name}.jupyterlab-settings"
        (settings / path).parent.mkdir(parents=True, exist_ok=True)
        (settings / path).write_text(json.dumps(value))
    port, token = free_port(), secrets.token_hex(24)
    env = {
        **os.environ,
        "JAX_PLATFORMS": "cpu",
        "SHARDSCOPE_URL": f"http://127.0.0.1:{server.port}",
        "JUPYTER_CONFIG_DIR": str(home / "config"),
        "JUPYTER_RUNTIME_DIR": str(home / "runtime"),
        "JUPYTERLAB_SETTINGS_DIR": str(settings),
        "JUPYTERLAB_WORKSPACES_DIR": str(home / "workspaces"),
    }
    log = root.parent / f"{root.name}-jupyter.log"
    args = [
        str(BIN / front.command), "--no-browser", "--allow-root", f"--port={port}", "--ServerApp.port_retries=0",
        "--ServerApp.ip=127.0.0.1", f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}",
        "--ServerApp.terminals_enabled=False", *front.args,
    ]  # fmt: skip
    with log.open("wb") as out:
        proc = subprocess.Popen(args, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    jupyter = Jupyter(front, port, token, proc, log, env["SHARDSCOPE_URL"])
    try:
        wait_until_answering(proc, f"{jupyter.origin}/api/status?token={token}", log, front.name, JUPYTER_START_SECONDS)
        yield jupyter
    finally:
        stop(proc, str(home))


KERNEL_IDLE = """(() => {
    const kernel = window.jupyterapp.shell.currentWidget?.sessionContext?.session?.kernel;
    return kernel?.status === 'idle' && kernel.connectionStatus === 'connected';
})()"""
"""The open notebook's kernel has started and is connected (both front ends: JupyterLab's shell and Notebook 7's)."""


class Notebook(HostPage):
    """The notebook open in a front end with its cells run."""

    def __init__(self, page: Page, jupyter: Jupyter) -> None:
        super().__init__(page, jupyter.front.shots)
        self.jupyter = jupyter

    def widget(self, name: str) -> Locator:
        return self.page.locator(".jp-Cell").nth(SHOW_CELLS[name]).locator(".shardscope-nb")

    def widget_errors(self) -> list[str]:
        return [e for e in self.errors if not any(n in e for n in JUPYTER_NOISE + self.jupyter.front.noise)]


@pytest.fixture(scope="module")
def nb(browser: Browser, jupyter: Jupyter) -> Iterator[Notebook]:
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    notebook = Notebook(page, jupyter)
    page.goto(f"{jupyter.origin}{jupyter.front.notebook_path}show.ipynb?token={jupyter.token}")
    page.wait_for_function("window.jupyterapp && document.querySelector('.jp-Notebook')", timeout=90_000)
    page.wait_for_function(KERNEL_IDLE, timeout=90_000)
    page.wait_for_timeout(1000)  # the kernel's first websocket is refused by jupyter_server while it connects
    page.click("text=Run", timeout=10_000)
    page.click("text=Run All Cells", timeout=10_000)
    try:
        page.wait_for_function(
            f"document.querySelectorAll('.shardscope-nb[data-rendered]').length >= {len(SHOW_CELLS)}", timeout=180_000
        )
    except Exception:
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS / f"{jupyter.front.shots}-failed.png"), full_page=True)
        drawn = page.evaluate("document.querySelectorAll('.shardscope-nb[data-rendered]').length")
        outputs = page.locator(".jp-OutputArea-output").all_inner_texts()
        pytest.fail(f"{drawn} widgets drawn; errors {notebook.errors}; outputs {[o[:300] for o in outputs]}")
    yield notebook
    context.close()


# ---- the tests -----------------------------------------------------------------------------------------------


def test_the_array_grid_is_jaxs_layout_with_its_hover_cards(nb: Notebook) -> None:
    w = nb.widget("array")
    nb.shot(w, "array")
    expected = jax_tiles((2, 4), P("x", "y"), (8, 16))
    labels = w.locator(".tile-label").all_text_contents()
    assert sorted(labels) == sorted(expected)
    for label, bounds in expected.items():
        # labels are drawn over the tiles: hover the tile the label names
        k = w.locator(".tile-label", has_text=re.compile(f"^{re.escape(label)}$")).get_attribute("data-tile")
        w.locator(f".tile[data-tile='{k}']").hover()
        card = nb.page.locator("#tooltip")
        card.wait_for(state="visible")
        text = card.inner_text()
        assert text.startswith("[" + ", ".join(f"{a}:{b}" for a, b in bounds) + "]"), text
        assert "shard [4,4]" in text and "64 B per device" in text
    summary = w.locator("[data-part=summary]").inner_text()
    assert "[4,4]" in summary and "1× (no replication)" in summary and "64 B" in summary
    columns, width = columns_fit_the_width(w)
    print(f"output {width:.0f} px wide: {columns} column(s)")


def test_typing_a_spec_relays_out_in_the_kernel(nb: Notebook) -> None:
    w = nb.widget("array")
    box = w.get_by_label("PartitionSpec")
    before = count(w)
    box.fill("P('y')")
    counted(w, before)
    expected = jax_tiles((2, 4), P("y"), (8, 16))
    assert sorted(w.locator(".tile-label").all_text_contents()) == sorted(expected)
    assert "2× (replicated over x)" in w.locator("[data-part=summary]").inner_text()
    errors = count(w, "errors")
    box.fill("P('y', 'q')")  # not a mesh axis: the API's explanation, the last picture kept, dimmed
    counted(w, errors, "errors")
    alert = w.locator("[data-part=spec-error]")
    expect(alert).to_contain_text("unknown_axis")  # once typing has paused, as on the page
    expect(alert).to_contain_text("'q'")
    expect(w.locator("[data-part=results]")).to_have_class(re.compile("stale"))
    for part in (
        "[data-part=grid]",
        "[data-part=summary]",
        "[data-part=mesh]",
    ):  # the last picture, its summary and mesh: all dimmed
        dimmed = "e => getComputedStyle(e).opacity === '0.35'"  # after the fade
        w.page.wait_for_function(dimmed, arg=w.locator(part).element_handle(), timeout=5_000)
    nb.shot(w, "spec-error")
    before = count(w)
    box.fill("P('x', 'y')")
    counted(w, before)
    expect(w.locator("[data-part=results]")).not_to_have_class(re.compile("stale"))
    assert alert.is_hidden() and sorted(w.locator(".tile-label").all_text_contents()) == sorted(
        jax_tiles((2, 4), P("x", "y"), (8, 16))
    )


def test_a_hypothetical_tpu_layout_is_editable_and_publishes(nb: Notebook) -> None:
    w = nb.widget("hypothetical")
    nb.shot(w, "hypothetical")
    assert w.locator(".tile").count() == 16
    assert (w.locator(".tile-label").first.text_content() or "").startswith("TPU 0")
    box = w.get_by_label("PartitionSpec")
    before = count(w)
    box.fill("P('x', 'y')")
    counted(w, before)
    assert w.locator(".tile").count() == 256 and "[64,64]" in w.locator("[data-part=summary]").inner_text()
    # Publish: the dashboard's layout explorer at the same state
    w.get_by_role("button", name=re.compile("Publish")).click()
    link = w.locator("a.share-open")
    link.wait_for(state="visible", timeout=30_000)
    href = link.get_attribute("href") or ""
    assert href.startswith(nb.jupyter.dashboard + "/s/")
    page = nb.page.context.new_page()
    page.goto(href)
    page.wait_for_selector("body[data-rendered]", state="attached", timeout=30_000)
    assert page.get_by_label("PartitionSpec").input_value() == "P('x', 'y')"
    assert page.locator("[data-part=grid] .tile").count() == 256
    page.close()


def test_a_model_state_shows_the_snapshot_view(nb: Notebook) -> None:
    w = nb.widget("model")
    nb.shot(w, "model")
    rows = w.locator("tr.leaf")
    assert rows.count() >= 5
    filter_box = w.get_by_label("Filter leaves")
    before = count(w, "filtered")
    filter_box.fill("Dense_1 kernel")
    counted(w, before, "filtered", timeout=10_000)
    assert re.match(r"\d+ of \d+ leaves match", w.locator("[data-part=leaf-count]").inner_text())
    w.locator("tr.leaf button.leaf-open").first.click()
    assert w.locator("[data-part=leaf-title]").inner_text().endswith("Dense_1/kernel")
    grid = w.locator("[data-part=leaf-grid] .tile-label")
    # P('y', None) on the (x, y) mesh: 4 blocks, each held by the 2 devices along x
    expected = jax_tiles((2, 4), P("y", None), (64, 16))
    assert sorted(grid.all_text_contents()) == sorted(expected)
    assert "per device" in w.locator("[data-part=leaf-summary]").inner_text()
    assert (
        w.locator("[data-part=memory-chart] rect.bar").count() == 8
        and "balanced" in w.locator(".memory-flag").inner_text()
    )


def test_an_inspect_jit_capture_shows_its_collectives_on_the_mesh(nb: Notebook) -> None:
    w = nb.widget("step")
    rows = w.locator("tr.collective")
    assert rows.count() >= 1 and "all-reduce" in rows.first.inner_text()
    rows.last.click()
    n = rows.count()
    caption = w.locator(".collective-mesh .mesh-caption")
    assert caption.inner_text().startswith(f"#{n} all-reduce")
    groups = re.findall(r"\{([\d,]+)\}", rows.last.locator("td.groups").inner_text())
    for group in groups:  # every device of a group coloured alike on the mesh
        ids = [int(i) for i in group.split(",")]
        cells = [w.locator(f".collective-mesh td[data-device='{i}']") for i in ids]
        colours = {cell.evaluate("e => e.style.background") for cell in cells}
        assert len(colours) == 1
    nb.shot(w, "step")


def test_4096_devices_draw_within_budget(nb: Notebook) -> None:
    w = nb.widget("large")
    grid = w.locator(".layout-grid")
    assert grid.get_attribute("data-tiles") == "4096" and grid.get_attribute("data-renderer") == "canvas"
    first = int(w.get_attribute("data-first-paint-ms") or 0)
    draw = int(w.get_attribute("data-draw-ms") or 0)
    print(f"4096 devices: first paint {first} ms (payload decoded, layout model, grid, summary), draw {draw} ms")
    assert 0 < first <= MAX_DRAW_MS and draw <= MAX_DRAW_MS
    # the 64x64 mesh table is folded and built when opened
    assert w.locator("[data-part=mesh] td").count() == 0
    w.locator("[data-part=mesh-details] summary").click()
    assert w.locator("[data-part=mesh] td").count() == 4096
    nb.shot(w, "4096")


def test_light_and_dark_themes(nb: Notebook) -> None:
    w = nb.widget("array")
    assert "ss-dark" not in (w.get_attribute("class") or "")
    # the grid's tile separators follow the theme: white on light, the dark background on dark
    assert w.locator("svg.grid-tiles g.tiles").first.get_attribute("stroke") == "#ffffff"
    nb.shot(w, "light")
    nb.page.evaluate("() => window.jupyterapp.commands.execute('apputils:change-theme', {theme: 'JupyterLab Dark'})")
    nb.page.wait_for_selector(".shardscope-nb.ss-dark", timeout=30_000)
    strokes = (
        "[...document.querySelectorAll('.shardscope-nb svg.grid-tiles g.tiles')].map(g => g.getAttribute('stroke'))"
    )
    nb.page.wait_for_function(f"() => {strokes}.length && {strokes}.every(s => s === '#15181d')", timeout=30_000)
    nb.shot(w, "dark")
    nb.shot(nb.widget("model"), "model-dark")
    nb.page.evaluate("() => window.jupyterapp.commands.execute('apputils:change-theme', {theme: 'JupyterLab Light'})")
    nb.page.wait_for_function("() => !document.querySelector('.shardscope-nb.ss-dark')", timeout=30_000)


def test_nothing_is_fetched_from_outside_and_nothing_errs(nb: Notebook) -> None:
    assert nb.outside == []
    assert nb.widget_errors() == []
    rss = nb.jupyter.rss()
    print(f"{nb.jupyter.front.name} and its kernel: {rss / 2**20:.0f} MiB resident")
    assert rss < MAX_JUPYTER_RSS
