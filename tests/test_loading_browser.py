"""What each page loads before its first useful paint (issue 37), in headless Chromium against a real server:
Plotly (4.8 MB) is asked for only by the page that draws a chart, and only after the element a reader came
for is on screen — a snapshot's verdict — never by the layout explorer, the topology view, the kernel lab or
the compare page, which draw none; a second page takes it from the browser's cache without a byte over the
network. The snapshot page draws in the order a reader looks at it: the verdict before the collectives,
the collectives before the leaves. Page errors and console errors (a CSP refusal among them) fail the test.

The oracle for "asked for" is the browser's own record: every request Playwright sees leave the page, and
the page's resource timing (when each started, how many bytes came over the network); the first paint is
the time the page's own MutationObserver saw the element visible with its words.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import urlencode

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P
from playwright.sync_api import Browser, Page

from sharding_core import inspect_jit, publish
from tests.plugins.browser import Watched
from tests.plugins.live import Server

pytestmark = pytest.mark.browser  # a real server and a browser

# Records, in the page, when the element `window.__watch` names is first visible with its words (or a
# picture): window.__shown, ms since the navigation started; and marks <html data-shown> then.
WATCH = """
(() => {
  const sel = window.__watch;
  const seen = () => {
    const e = document.querySelector(sel);
    if (!e) return false;
    const words = e.textContent.trim() !== "" || e.querySelector("canvas, svg") !== null || e.matches("canvas, svg");
    return words && e.checkVisibility();
  };
  const obs = new MutationObserver(() => {
    if (!seen()) return;
    obs.disconnect();
    window.__shown = performance.now();
    window.__atFirst = {
      collectives: document.querySelectorAll("tr.collective").length,
      leaves: document.querySelectorAll("[data-part=leaf-rows] tr.leaf").length,
    };
    document.documentElement.dataset.shown = "";
  });
  obs.observe(document, { subtree: true, childList: true, attributes: true, characterData: true });
})();
"""
# Every Plotly request the page made (resource timing): address, start (ms since navigation), bytes over the network.
PLOTLY = """
() => performance.getEntriesByType("resource").filter((e) => e.name.includes("/vendor/plotly"))
  .map((e) => ({ name: new URL(e.name).pathname, start: e.startTime, bytes: e.transferSize }))
"""


def mesh() -> Mesh:
    return Mesh(np.array(jax.devices()).reshape(2, 4), ("data", "model"))


@pytest.fixture(scope="module")
def links(server: Server) -> dict[str, str]:
    """Two compiled programs (inspect_jit: a verdict, collectives, leaves, memory) published as a user would."""
    m = mesh()
    a = jax.device_put(jnp.ones((8, 16)), NamedSharding(m, P("data", "model")))
    base = f"http://127.0.0.1:{server.port}"
    one = publish(inspect_jit(lambda v: v.sum(0), a), "sum over data", base)
    two = publish(inspect_jit(lambda v: v.sum(1), a), "sum over model", base)
    return {"base": base, "one": one, "two": two}


@pytest.fixture
def opened(browser: Browser) -> Iterator[Any]:
    """Opens an address in a fresh context watching `selector`; the Watched page and the requests it made."""
    contexts = []

    def open_(url: str, selector: str) -> tuple[Watched, list[str]]:
        context = browser.new_context(viewport={"width": 1400, "height": 1000})
        contexts.append(context)
        context.add_init_script(f"window.__watch = {selector!r};" + WATCH)
        w = Watched(context)
        requests: list[str] = []
        w.page.on("request", lambda r: requests.append(r.url))
        w.page.goto(url)
        w.page.wait_for_selector("html[data-shown]", state="attached", timeout=60_000)
        return w, requests

    yield open_
    for context in contexts:
        context.close()


def settled(page: Page) -> None:
    page.wait_for_load_state("networkidle", timeout=60_000)


@pytest.mark.parametrize(
    ("address", "selector"),
    [
        ("/?devices=cpu:8&mesh=2x4&axes=x,y&shape=64,64&spec=P('x','y')", "[data-part=grid] .layout-grid"),
        ("/topology.html?devices=cpu:8&mesh=2x4&axes=x,y", "[data-part=topo-view]"),
        ("/kernels.html", "[data-part=kernel-doc]"),
    ],
    ids=["layout", "topology", "kernels"],
)
def test_pages_that_draw_no_chart_never_ask_for_plotly(
    links: dict[str, str], opened: Any, address: str, selector: str
) -> None:
    w, requests = opened(links["base"] + address, selector)
    settled(w.page)
    assert [u for u in requests if "/vendor/" in u] == []
    assert w.errors == []


def test_the_compare_page_of_two_programs_never_asks_for_plotly(links: dict[str, str], opened: Any) -> None:
    query = urlencode({"a": links["one"], "b": links["two"]})  # two share links, as pasted
    w, requests = opened(f"{links['base']}/compare.html?{query}", "[data-part=verdict]")
    w.page.wait_for_selector("body[data-compares='1']", state="attached", timeout=60_000)
    settled(w.page)
    assert w.page.locator("[data-part=plan-a] [data-part=plan-verdict]").count() == 1  # a plan drawn, no chart
    assert [u for u in requests if "/vendor/" in u] == []
    assert w.errors == []


def test_a_snapshot_asks_for_plotly_after_its_verdict_and_once(links: dict[str, str], opened: Any) -> None:
    w, requests = opened(links["one"], "[data-part=plan-verdict]")
    page = w.page
    page.wait_for_selector("[data-part=memory-chart][data-plotted]", state="attached", timeout=60_000)
    settled(page)
    shown = page.evaluate("() => window.__shown")
    plotly = page.evaluate(PLOTLY)
    # the manifest, then the script and stylesheet at the addresses it names
    names = {p["name"] for p in plotly}
    assert sum("/vendor/" in u for u in requests) == 3
    where = page.evaluate("() => fetch('/vendor/plotly.json').then((r) => r.json())")
    assert names == {"/vendor/plotly.json", where["js"], where["css"]}, names
    assert all(p["start"] > shown for p in plotly), (shown, plotly)
    # a second page in the same browser: Plotly's script and stylesheet from its cache, no byte over the network
    page.goto(links["two"])
    page.wait_for_selector("[data-part=memory-chart][data-plotted]", state="attached", timeout=60_000)
    settled(page)
    again = {p["name"]: p["bytes"] for p in page.evaluate(PLOTLY)}
    assert [b for n, b in again.items() if n != "/vendor/plotly.json"] == [0, 0], again
    assert w.errors == []


def test_the_verdict_is_on_screen_before_the_collectives_and_the_leaves(links: dict[str, str], opened: Any) -> None:
    # The page records, the moment the verdict first shows, how many of the collectives' and the leaves' rows
    # were in the document: none, they come in later frames; then they all come.
    w, _ = opened(links["one"], "[data-part=plan-verdict]")
    page = w.page
    page.wait_for_selector("body[data-rendered='1']", state="attached", timeout=60_000)
    assert page.evaluate("() => window.__atFirst") == {"collectives": 0, "leaves": 0}
    assert page.locator("tr.collective").count() >= 1
    assert page.locator("[data-part=leaf-rows] tr.leaf").count() >= 1
    assert w.errors == []
