"""Every view at a desktop (1440×900) and a phone (390×844) size, light and dark: nothing is wider
than the window (issue 13: at 390 px pages were ~700 px wide and the header did not wrap), and a
screenshot of each for people to look at: ``artifacts/screenshots/screen-<view>-<width>-<scheme>.png``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P
from playwright.sync_api import Browser

from sharding_core import publish
from tests.plugins.browser import Watched, shot, sized_context
from tests.plugins.live import Server

pytestmark = pytest.mark.browser  # a real server or notebook and a browser

VIEWS: dict[str, tuple[str, str]] = {
    # name: (address, what marks it drawn)
    "layout": ("/?devices=tpu:v5e:4x4&mesh=4x4&axes=x,y&spec=P('x',None)&shape=16,16", "body[data-rendered]"),
    "layout-6144": (
        "/?devices=tpu:v5p:16x16x24&mesh=24x256&axes=x,y&spec=P(('x','y'),None)&shape=6144,1024",
        "body[data-rendered]",
    ),
    "topology-2d": (
        "/topology.html?devices=tpu:v5e:4x4&mesh=4x4&axes=x,y&spec=P('x','y')&shape=16,16&axis=x",
        "body[data-rendered]",
    ),
    "topology-3d": (
        "/topology.html?devices=tpu:v4:4x4x4&mesh=4x16&axes=x,y&spec=P('x','y')&shape=16,16&axis=y",
        "body[data-rendered]",
    ),
    "kernels": ("/kernels.html?kernel=sum_axis0&types=auto", "body[data-runs]"),
    "snapshots": ("{snapshot}", "[data-part=memory-chart][data-plotted]"),
    "snapshots-empty": ("/snapshots.html", "body[data-loaded]"),
    "compare-empty": ("/compare.html", "[data-part=compare-form]"),
}
SIZES = [(1440, 900), (390, 844)]


@pytest.fixture(scope="module")
def snapshot(server: Server) -> str:
    mesh = Mesh(np.array(jax.devices()).reshape(2, 4), ("data", "model"))
    tree = {
        "params": {
            "dense": {"kernel": jax.device_put(jnp.ones((64, 256)), NamedSharding(mesh, P(None, "model")))},
            "out": {"kernel": jax.device_put(jnp.ones((256, 64)), NamedSharding(mesh, P("model", None)))},
        },
        "batch": jax.device_put(jnp.ones((32, 64)), NamedSharding(mesh, P("data"))),
    }
    return publish(tree, "screens", f"http://127.0.0.1:{server.port}")


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize(("width", "height"), SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
@pytest.mark.parametrize("view", list(VIEWS))
def test_every_view_fits_its_window(
    server: Server, browser: Browser, snapshot: str, view: str, width: int, height: int, scheme: str
) -> None:
    context = sized_context(browser, width, height, scheme)
    w = Watched(context)
    try:
        page = w.page
        address, drawn = VIEWS[view]
        url = snapshot if address == "{snapshot}" else f"http://127.0.0.1:{server.port}{address}"
        page.goto(url)
        page.wait_for_selector(drawn, state="attached", timeout=90_000)
        page.wait_for_timeout(150)
        assert page.evaluate("() => document.documentElement.scrollWidth") <= width, "wider than the window"
        header = page.locator("header.top").bounding_box()
        assert header is not None and header["width"] <= width and header["height"] < 130
        shot(page, f"screen-{view}-{width}-{scheme}")
        assert w.errors == []
    finally:
        context.close()
