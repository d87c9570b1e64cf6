"""``shardscope.link(x)``: the layout explorer's address of an array's exact layout.

The address's state is what the page sends to ``/api/layout`` (as ``frontend/js/model/state.js``
builds the request); the answer must be JAX's own ``devices_indices_map`` of the array, device ids
included, whatever order the program's mesh put its devices in.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, urlsplit

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from fastapi.testclient import TestClient
from jax.sharding import AxisType, Mesh, NamedSharding, SingleDeviceSharding
from jax.sharding import PartitionSpec as P
from playwright.sync_api import Browser

import shardscope
from sharding_core.errors import ShardingError
from sharding_core.linking import LAYOUT_STATE, link
from tests.plugins.live import Server


def page_request(address: str) -> dict[str, Any]:
    """The POST /api/layout body the layout explorer makes for an address: the page's own reading (model/state.js's
    layoutRequest) is checked to be this one in a browser (test_the_page_reads_the_state_link_writes)."""
    q = {k: v[0] for k, v in parse_qs(urlsplit(address).query).items()}
    names = q["axes"].split(",")
    if q["order"] == "single":
        mesh = {"shape": [1] * len(names), "axis_names": names, "order": "devices", "device_ids": [int(q["ids"])]}
    else:
        mesh = {"shape": [int(s) for s in q["mesh"].split("x")], "axis_names": names, "order": q["order"],
                "device_ids": [int(i) for i in q["ids"].split(",")]}  # fmt: skip
    if q.get("types"):
        mesh["axis_types"] = [q["types"]] * len(names)
    body = {"devices": q["devices"], "mesh": mesh, "spec": q["spec"], "dtype": q["dtype"],
            "shape": [int(d) for d in q["shape"].split(",")]}  # fmt: skip
    if q.get("slices"):
        body["slices"] = int(q["slices"])
    return body


def jax_shards(sharding: Any, shape: tuple[int, ...]) -> dict[int, list[list[int]]]:
    """JAX's answer: each device id's index bounds."""
    out = {}
    for device, index in sharding.devices_indices_map(shape).items():
        out[device.id] = [[s.start or 0, n if s.stop is None else s.stop] for s, n in zip(index, shape, strict=True)]
    return out


def laid_out(client: TestClient, address: str) -> dict[int, list[list[int]]]:
    r = client.post("/api/layout", json=page_request(address))
    assert r.status_code == 200, r.text
    return {s["device_id"]: s["index"] for s in r.json()["shards"]}


@pytest.mark.parametrize("order", ["make_mesh", "permuted"])
def test_an_arrays_address_lays_it_out_exactly(client: TestClient, order: str) -> None:
    devices = jax.devices()
    if order == "make_mesh":
        mesh = jax.make_mesh((2, 4), ("x", "y"), axis_types=(AxisType.Explicit,) * 2)
    else:  # a program's own device order, which no mesh constructor gives
        mesh = Mesh(np.array(devices)[[5, 2, 7, 0, 1, 6, 3, 4]].reshape(4, 2), ("data", "model"))
    spec = P("x", "y") if order == "make_mesh" else P(("data", "model"))
    x = jax.device_put(jnp.zeros((8, 16), jnp.bfloat16), NamedSharding(mesh, spec))
    address = shardscope.link(x, "http://127.0.0.1:9")
    assert address.startswith("http://127.0.0.1:9/?")
    q = parse_qs(urlsplit(address).query)
    assert q["devices"] == ["cpu:8"] and q["dtype"] == ["bfloat16"] and q["shape"] == ["8,16"]
    assert q["ids"] == [",".join(str(d.id) for d in mesh.devices.flat)]
    assert q["types"] == ["explicit" if order == "make_mesh" else "auto"]  # the program's own axis types
    assert laid_out(client, address) == jax_shards(x.sharding, x.shape)


def test_a_single_device_array_and_a_sharding_with_a_shape(client: TestClient) -> None:
    device = jax.devices()[5]
    x = jax.device_put(jnp.ones((4, 8)), device)
    address = link(x)
    assert parse_qs(urlsplit(address).query)["order"] == ["single"]
    assert laid_out(client, address) == jax_shards(SingleDeviceSharding(device), (4, 8))
    sharding = NamedSharding(jax.make_mesh((8,), ("x",)), P(None, "x"))
    address = link(sharding, shape=(3, 16), dtype=jnp.int8)
    assert laid_out(client, address) == jax_shards(sharding, (3, 16))
    with pytest.raises(ShardingError) as err:
        link(sharding)
    assert err.value.code == "bad_shape"


def test_a_tree_gives_an_address_per_array(client: TestClient) -> None:
    mesh = jax.make_mesh((2, 4), ("x", "y"))
    w = jax.ShapeDtypeStruct((16, 32), jnp.float32, sharding=NamedSharding(mesh, P(None, "y")))
    b = jax.device_put(jnp.ones(8), NamedSharding(mesh, P("x")))
    addresses = link({"params": {"w": w, "b": b}, "step": 3})
    assert set(addresses) == {"params/w", "params/b"}
    assert laid_out(client, addresses["params/w"]) == jax_shards(w.sharding, w.shape)
    assert laid_out(client, addresses["params/b"]) == jax_shards(b.sharding, b.shape)


def test_a_url_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SHARDSCOPE_URL", "http://127.0.0.1:8123/")
    x = jax.device_put(jnp.ones(8), NamedSharding(jax.make_mesh((8,), ("x",)), P("x")))
    assert link(x).startswith("http://127.0.0.1:8123/?")


@pytest.mark.tpu
def test_a_tpu_slices_arrays_keep_their_chips(client: TestClient) -> None:
    from jax.experimental import topologies

    topo = topologies.get_topology_desc(platform="tpu", topology_name="v5e:4x4")
    mesh = Mesh(np.array(topo.devices).reshape(4, 4), ("x", "y"))
    x = jax.ShapeDtypeStruct((16, 16), jnp.float32, sharding=NamedSharding(mesh, P("x", None)))
    address = link(x)
    assert parse_qs(urlsplit(address).query)["devices"] == ["tpu:v5e:4x4"]
    assert laid_out(client, address) == jax_shards(x.sharding, x.shape)


@pytest.mark.browser  # a real server and a browser
def test_the_page_reads_the_state_link_writes(server: Server, browser: Browser) -> None:
    """One owner of the layout explorer's URL state (sharding_core.linking.LAYOUT_STATE, served to the page as
    lib/vocabulary.js): the request the page's own model/state.js makes from an address link() writes is the one
    this file's page_request reads from it, for every way link() writes a mesh."""
    devices = jax.devices()
    meshes = [
        NamedSharding(jax.make_mesh((2, 4), ("x", "y"), axis_types=(AxisType.Explicit,) * 2), P("x", "y")),
        NamedSharding(Mesh(np.array(devices)[[5, 2, 7, 0, 1, 6, 3, 4]].reshape(4, 2), ("a", "b")), P(("a", "b"))),
        SingleDeviceSharding(devices[3]),
    ]
    addresses = [link(s, f"http://127.0.0.1:{server.port}", shape=(8, 16), dtype=jnp.bfloat16) for s in meshes]
    context = browser.new_context()
    try:
        page = context.new_page()
        page.goto(f"http://127.0.0.1:{server.port}/")
        for address in addresses:
            query = urlsplit(address).query
            got = page.evaluate(
                "async (q) => { const m = await import('/js/model/state.js');"
                " return m.layoutRequest(m.fromQuery(new URLSearchParams(q))); }",
                query,
            )
            assert got == page_request(address), address
            assert set(parse_qs(query)) <= set(LAYOUT_STATE)
    finally:
        context.close()
