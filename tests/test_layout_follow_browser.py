"""The layout explorer when the device set changes and when a sharding is pasted (issue 28): the explorer kept a
4x4 mesh when the slice became 64 chips (48 chips grey), and on a ``cpu:8`` page a pasted sharding offered
"Use tpu:v2:2x2" (the oldest generation, the first in the catalog).

The oracles: JAX's own ``devices_indices_map`` of the same NamedSharding — over libtpu's compile-only devices for
a TPU slice (``shardscope.mesh``), over this process's CPU devices for a CPU set — and the device table
(``sharding_core.devices.TPU_GENERATIONS``) for which slices of a size exist.
"""

from __future__ import annotations

import math

import jax
import pytest
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P
from playwright.sync_api import expect

import shardscope
from sharding_core.devices import TPU_GENERATIONS
from tests.plugins.browser import Watched, rendered, shot
from tests.plugins.live import Server
from tests.test_views_browser import jax_labels, labels, part, printed

pytestmark = pytest.mark.browser


@pytest.mark.tpu
def test_the_mesh_follows_a_slice_that_grows(server: Server, watched: Watched) -> None:
    page = watched.page
    page.goto(f"http://127.0.0.1:{server.port}/?devices=tpu:v5e:4x4&mesh=4x4&axes=x,y&spec=P('x', 'y')&shape=64,64")
    rendered(page)
    page.locator("label", has_text="Topology").locator("select").select_option("8x8")
    rendered(page, 2)
    expect(page.get_by_label("Shape", exact=True)).to_have_value("8x8")  # the slice's own sides
    expect(page.locator(part("spec-note"))).to_contain_text("Mesh 8x8: it follows the 64 devices of tpu:v5e:8x8")
    expect(page.get_by_role("alert")).to_have_count(0)
    # every one of the 64 chips holds its block, as JAX lays P('x', 'y') out on libtpu's v5e 8x8
    mesh = shardscope.mesh("tpu:v5e:8x8", (8, 8), ("x", "y"))
    assert labels(page) == jax_labels(NamedSharding(mesh, P("x", "y")), (64, 64), "TPU")
    assert len(labels(page)) == 64
    shot(page, "views-mesh-follows-slice")


def test_the_mesh_follows_a_cpu_set_that_shrinks(server: Server, watched: Watched) -> None:
    page = watched.page
    page.goto(f"http://127.0.0.1:{server.port}/?devices=cpu:8&mesh=2x4&axes=data,model&spec=P('data', 'model')"
              "&shape=16,16")  # fmt: skip
    rendered(page)
    box = page.locator(part("controls")).locator("label", has_text="Devices").locator("input")
    box.fill("4")
    box.press("Tab")  # the count commits when the field is left
    rendered(page, 2)
    expect(page.get_by_label("Shape", exact=True)).to_have_value("2x2")
    expect(page.get_by_label("Axis names", exact=True)).to_have_value("data,model")  # the names kept
    mesh = jax.make_mesh((2, 2), ("data", "model"), axis_types=(AxisType.Auto,) * 2, devices=jax.devices()[:4])
    assert labels(page) == jax_labels(NamedSharding(mesh, P("data", "model")), (16, 16), "CPU")


def test_a_paste_on_a_cpu_page_keeps_the_set_and_offers_a_current_slice(server: Server, watched: Watched) -> None:
    page = watched.page
    page.goto(f"http://127.0.0.1:{server.port}/?devices=cpu:8&mesh=8&axes=x&spec=P('x')&shape=16,16")
    rendered(page)
    page.get_by_label("PartitionSpec", exact=True).fill(printed((2, 4)))
    rendered(page, 2)
    note = page.locator(part("spec-note"))
    expect(note).to_contain_text("devices cpu:8 kept")
    offered = [b.removeprefix("Use ") for b in note.get_by_role("button").all_text_contents()]
    # the newest generation with one device a chip that has an 8-device slice (the catalog lists v2 first)
    newest = next(
        f"tpu:{g.name}:{t}"
        for g in reversed(list(TPU_GENERATIONS.values()))
        if g.cores_per_chip == 1
        for t in g.topologies
        if math.prod(int(d) for d in t.split("x")) == 8
    )
    assert offered[0] == newest and not any(o.startswith("tpu:v2:") for o in offered), offered
    expect(note).to_contain_text("The repr names no platform")
