"""``shardscope.show`` in a real marimo (the PyPI package, started here on a free loopback port with a token and
its update check off) in Debian's Chromium, in both of its modes: the editor (``marimo edit``, dark theme,
cells run on open) and the app (``marimo run``, light theme). The notebook is the one JupyterLab runs
(``tests/notebooks/show_cells.py``), converted by marimo's own ``marimo convert``.

marimo draws an anywidget inside a shadow root: the widget's stylesheet stays inside it, so the hover card
lives in the widget (not the page's <body>) and the theme is read from marimo's body classes. Every check is
against JAX or the page as drawn; nothing is fetched from outside the machine.

Screenshots: ``artifacts/screenshots/marimo-{edit,run}-*.png``.
"""

from __future__ import annotations

import os
import re
import secrets
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

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
from tests.plugins.live import free_port

pytestmark = pytest.mark.browser  # a real server or notebook and a browser

MARIMO = Path(sys.executable).parent / "marimo"
MAX_MARIMO_RSS = 4 * 1024**3
"""marimo's server and its kernel together (JAX, Flax, the widgets): about 1 GiB."""
START_SECONDS = 90
WIDGETS = sorted(SHOW_CELLS, key=SHOW_CELLS.__getitem__)
"""The widgets in page order (every cell but the set-up one shows one)."""

MODES = {"edit": "dark", "run": "light"}
"""marimo's two modes, each in one theme (the theme is marimo's own setting, read at start)."""


@dataclass
class Marimo:
    mode: str
    theme: str
    port: int
    token: str
    proc: subprocess.Popen[bytes]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/?access_token={self.token}"

    def rss(self) -> int:
        return sum(descendants(self.proc.pid).values())


@pytest.fixture(scope="module", params=list(MODES))
def marimo(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Marimo]:
    mode, theme = request.param, MODES[request.param]
    root = tmp_path_factory.mktemp(f"marimo-{mode}")
    write(root / "show.ipynb")
    subprocess.run([str(MARIMO), "convert", "show.ipynb", "-o", "show.py"], cwd=root, check=True, capture_output=True)
    # marimo reads the nearest .marimo.toml up from its working directory first
    (root / ".marimo.toml").write_text(f'[display]\ntheme = "{theme}"\n\n[runtime]\nauto_instantiate = true\n')
    home = tmp_path_factory.mktemp(f"marimo-{mode}-home")
    env = {k: v for k, v in os.environ.items() if k != "SHARDSCOPE_URL"}  # no dashboard: no Publish button
    env |= {
        "JAX_PLATFORMS": "cpu",
        "MARIMO_SKIP_UPDATE_CHECK": "1",
        **{f"XDG_{d}_HOME": str(home / d.lower()) for d in ("CONFIG", "CACHE", "STATE", "DATA")},
    }
    port, token = free_port(), secrets.token_hex(24)
    log = root / "marimo.log"
    args = [
        str(MARIMO), "--yes", mode, "show.py", "--headless", "--host", "127.0.0.1", "--port", str(port),
        "--token-password", token, "--no-sandbox", "--session-ttl", "120",
    ]  # fmt: skip
    with log.open("wb") as out:
        proc = subprocess.Popen(args, cwd=root, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    app = Marimo(mode, theme, port, token, proc)
    try:
        wait_until_answering(proc, app.url, log, f"marimo {mode}", START_SECONDS)
        yield app
    finally:
        stop(proc, str(home))


class Notebook(HostPage):
    """The notebook open in marimo with its cells run."""

    def __init__(self, page: Page, app: Marimo) -> None:
        super().__init__(page, f"marimo-{app.mode}")
        self.app = app

    def widget(self, name: str) -> Locator:
        # Playwright's CSS locators reach into open shadow roots, where marimo draws widgets
        return self.page.locator(".shardscope-nb").nth(WIDGETS.index(name))


@pytest.fixture(scope="module")
def nb(browser: Browser, marimo: Marimo) -> Iterator[Notebook]:
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    notebook = Notebook(page, marimo)
    page.goto(marimo.url)
    try:
        expect(page.locator(".shardscope-nb[data-rendered]")).to_have_count(len(WIDGETS), timeout=180_000)
    except AssertionError:
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS / f"marimo-{marimo.mode}-failed.png"), full_page=True)
        pytest.fail(f"not every widget drew; errors {notebook.errors}")
    yield notebook
    context.close()


def luminance(css: str) -> float:
    """Of a computed colour, ``rgb(…)`` or ``color(srgb …)``."""
    if m := re.fullmatch(r"rgba?\(([\d.]+), ([\d.]+), ([\d.]+)(?:, [\d.]+)?\)", css):
        r, g, b = (float(v) for v in m.groups())
    elif m := re.fullmatch(r"color\(srgb ([\d.e-]+) ([\d.e-]+) ([\d.e-]+)(?: / [\d.e-]+)?\)", css):
        r, g, b = (float(v) * 255 for v in m.groups())
    else:
        raise AssertionError(f"unread colour {css}")
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


# ---- the tests -----------------------------------------------------------------------------------------------


def test_the_array_grid_is_jaxs_layout(nb: Notebook) -> None:
    w = nb.widget("array")
    nb.shot(w, "array")
    expected = jax_tiles((2, 4), P("x", "y"), (8, 16))
    assert sorted(w.locator(".tile-label").all_text_contents()) == sorted(expected)
    summary = w.locator("[data-part=summary]").inner_text()
    assert "[4,4]" in summary and "1× (no replication)" in summary and "64 B" in summary
    assert w.get_by_role("button", name=re.compile("Publish")).count() == 0  # no dashboard URL: no button
    columns, width = columns_fit_the_width(w)
    print(f"output {width:.0f} px wide: {columns} column(s)")


def test_the_hover_card_is_beside_the_pointer_in_the_widgets_own_colours(nb: Notebook) -> None:
    w = nb.widget("array")
    w.scroll_into_view_if_needed()
    expected = jax_tiles((2, 4), P("x", "y"), (8, 16))
    for label, bounds in expected.items():
        k = w.locator(".tile-label", has_text=re.compile(f"^{re.escape(label)}$")).get_attribute("data-tile")
        tile = w.locator(f".tile[data-tile='{k}']").bounding_box()
        assert tile
        x, y = tile["x"] + tile["width"] / 3, tile["y"] + tile["height"] / 3
        nb.page.mouse.move(x, y)
        card = w.locator("#tooltip")  # in the widget's shadow root, under its stylesheet
        expect(card).to_be_visible()
        assert card.inner_text().startswith("[" + ", ".join(f"{a}:{b}" for a, b in bounds) + "]")
        box = card.bounding_box()
        assert box and 0 <= box["x"] - x <= 30 and 0 <= box["y"] - y <= 30, (box, x, y)  # beside the pointer
    style = card.evaluate("e => [getComputedStyle(e).position, getComputedStyle(e).backgroundColor]")
    assert style[0] == "fixed"
    assert (luminance(style[1]) < 128) == (nb.app.theme == "dark"), style
    nb.shot(w, "hover")
    nb.page.mouse.move(0, 0)
    expect(card).to_be_hidden()


def test_typing_a_spec_relays_out_in_the_kernel(nb: Notebook) -> None:
    w = nb.widget("array")
    box = w.get_by_label("PartitionSpec")
    before = count(w)
    box.fill("P('y')")
    counted(w, before)
    assert sorted(w.locator(".tile-label").all_text_contents()) == sorted(jax_tiles((2, 4), P("y"), (8, 16)))
    errors = count(w, "errors")
    box.fill("P('y', 'q')")
    counted(w, errors, "errors")
    alert = w.locator("[data-part=spec-error]")
    expect(alert).to_contain_text("unknown_axis")  # once typing has paused, as on the page
    expect(alert).to_contain_text("'q'")
    expect(w.locator("[data-part=results]")).to_have_class(re.compile("stale"))
    nb.shot(w, "spec-error")
    before = count(w)
    box.fill("P('x', 'y')")
    counted(w, before)
    assert alert.is_hidden()
    assert sorted(w.locator(".tile-label").all_text_contents()) == sorted(jax_tiles((2, 4), P("x", "y"), (8, 16)))


def test_a_model_state_and_its_training_step(nb: Notebook) -> None:
    w = nb.widget("model")
    nb.shot(w, "model")
    before = count(w, "filtered")
    w.get_by_label("Filter leaves").fill("Dense_1 kernel")
    counted(w, before, "filtered")
    w.locator("tr.leaf button.leaf-open").first.click()
    assert w.locator("[data-part=leaf-title]").inner_text().endswith("Dense_1/kernel")
    expected = jax_tiles((2, 4), P("y", None), (64, 16))
    assert sorted(w.locator("[data-part=leaf-grid] .tile-label").all_text_contents()) == sorted(expected)
    step = nb.widget("step")
    rows = step.locator("tr.collective")
    assert rows.count() >= 1 and "all-reduce" in rows.first.inner_text()
    rows.first.click()
    assert step.locator(".collective-mesh .mesh-caption").inner_text().startswith("#1 all-reduce")
    nb.shot(step, "step")


def test_the_widgets_follow_marimos_theme(nb: Notebook) -> None:
    w = nb.widget("array")
    dark = nb.app.theme == "dark"
    assert ("ss-dark" in (w.get_attribute("class") or "")) == dark
    stroke = w.locator("svg.grid-tiles g.tiles").first.get_attribute("stroke")
    assert stroke == ("#15181d" if dark else "#ffffff")
    panel = w.evaluate("e => getComputedStyle(e).backgroundColor")
    assert (luminance(panel) < 128) == dark


def test_4096_devices_draw_on_a_canvas(nb: Notebook) -> None:
    w = nb.widget("large")
    grid = w.locator(".layout-grid")
    assert grid.get_attribute("data-tiles") == "4096" and grid.get_attribute("data-renderer") == "canvas"
    first = count(w, "first-paint-ms")
    print(f"marimo {nb.app.mode}: 4096 devices, first paint {first} ms")
    assert first > 0  # measured, not asserted against a budget (bench/bench_frontend.py has the figure)
    nb.shot(w, "4096")


def test_nothing_is_fetched_from_outside_and_nothing_errs(nb: Notebook) -> None:
    assert nb.outside == []
    assert nb.errors == []
    rss = nb.app.rss()
    print(f"marimo {nb.app.mode} and its kernel: {rss / 2**20:.0f} MiB resident")
    assert rss < MAX_MARIMO_RSS
