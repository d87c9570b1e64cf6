"""The backend side of issue 13 ("every layout visible, every mesh reachable"): what the views send
and show, checked against JAX and Flax themselves through the in-process client and ``capture``.

- typographic quotes pasted from docs are read as the straight quotes they stand for;
- ``POST /api/layout`` with ``rules`` lays out logical axis names as Flax's ``logical_to_mesh_axes``;
- ``mesh_unplaceable`` for a multi-slice set says what to do (a hybrid mesh with its DCN shape) in a
  few hundred characters, not 3,000 characters of device reprs, and carries the fix as data;
- a Flax ``LogicallyPartitioned`` state captured without the rules it was made under is not marked
  "not as the box declares"; with rules, only a leaf that truly differs is.
"""

from __future__ import annotations

from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
from fastapi.testclient import TestClient
from jax.experimental import mesh_utils
from jax.sharding import AxisType, Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

import sharding_core
from sharding_core.devices import parse_devices

RULES = [["batch", "data"], ["hidden", "model"], ["embed", None]]


def body(**over: Any) -> dict[str, Any]:
    req: dict[str, Any] = {
        "devices": "cpu:8",
        "mesh": {"shape": [2, 4], "axis_names": ["data", "model"]},
        "spec": "P('data', None)",
        "shape": [16, 32],
    }
    req.update(over)
    return req


def test_typographic_quotes_are_straight_quotes(client: TestClient) -> None:
    for text in ["P(\u2018data\u2019, None)", "P(\u201cdata\u201d, None)", "P('data\u2019, None)"]:
        r = client.post("/api/layout", json=body(spec=text))
        assert r.status_code == 200, r.json()
        assert r.json()["spec"] == "P('data', None)"


def test_logical_names_with_rules_are_laid_out_as_flax_does(client: TestClient) -> None:
    rules = tuple((k, v) for k, v in RULES)
    for names in [("embed", "hidden"), ("hidden", "embed"), ("batch", None), ("batch", "hidden")]:
        spec = "(" + ", ".join("None" if n is None else repr(n) for n in names) + ")"
        r = client.post("/api/layout", json=body(spec=spec, rules=RULES))
        assert r.status_code == 200, r.json()
        want = P(*nn.logical_to_mesh_axes(names, rules))
        assert r.json()["spec"] == repr(want)
        mesh = jax.make_mesh((2, 4), ("data", "model"), devices=parse_devices("cpu:8").devices)
        indices = NamedSharding(mesh, want).devices_indices_map((16, 32))
        got = {s["device_id"]: s["index"] for s in r.json()["shards"]}
        assert got == {d.id: [[s.start or 0, n if s.stop is None else s.stop] for s, n in zip(i, (16, 32), strict=True)]
                       for d, i in indices.items()}  # fmt: skip


def test_logical_names_without_rules_are_unknown_axes_and_tuples_are_refused(client: TestClient) -> None:
    r = client.post("/api/layout", json=body(spec="('embed', 'hidden')"))
    assert r.status_code == 422 and r.json()["error"]["code"] == "unknown_axis"
    r = client.post("/api/layout", json=body(spec="(('embed', 'mlp'), None)", rules=RULES))
    assert r.status_code == 422 and r.json()["error"]["code"] == "bad_rules"
    r = client.post("/api/layout", json=body(spec="('embed', 'hidden')", rules=[["hidden"]]))
    assert r.status_code == 422 and r.json()["error"]["code"] == "validation_error"


def test_multislice_make_mesh_error_is_short_and_names_the_hybrid_fix(client: TestClient) -> None:
    req = body(devices="tpu:v5e:4x4", slices=2, mesh={"shape": [8, 4], "axis_names": ["x", "y"]}, spec="P()")
    r = client.post("/api/layout", json=req)
    assert r.status_code == 422
    err = r.json()["error"]
    assert err["code"] == "mesh_unplaceable"
    assert "SimDevice(" not in r.text and len(r.text) < 1000  # was 6,300 bytes of device reprs
    assert "hybrid" in err["message"] and "dcn_shape [2, 1]" in err["hint"]
    assert err["suggest"] == {"order": "hybrid", "dcn_shape": [2, 1]}
    # the suggestion works, and gives JAX's own hybrid mesh
    req["mesh"] |= {"order": "hybrid", "dcn_shape": [2, 1]}
    r = client.post("/api/layout", json=req)
    assert r.status_code == 200, r.json()
    want = mesh_utils.create_hybrid_device_mesh((4, 4), (2, 1), parse_devices("tpu:v5e:4x4", slices=2).devices)
    assert r.json()["mesh"]["device_ids"] == [[d.id for d in row] for row in want]


def test_split_physical_axes_is_suggested_when_it_helps(client: TestClient) -> None:
    req = body(devices="tpu:v4:4x4x4", mesh={"shape": [8, 8], "axis_names": ["x", "y"]}, spec="P()")
    err = client.post("/api/layout", json=req).json()["error"]
    assert err["code"] == "mesh_unplaceable" and err["suggest"] == {"allow_split_physical_axes": True}
    req["mesh"] |= {"allow_split_physical_axes": True}
    assert client.post("/api/layout", json=req).status_code == 200


class Mlp(nn.Module):
    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        w1 = self.param("w1", nn.with_logical_partitioning(nn.initializers.ones, ("embed", "hidden")), (16, 32))
        w2 = self.param("w2", nn.with_logical_partitioning(nn.initializers.ones, ("hidden", "embed")), (32, 16))
        return (x @ w1) @ w2


def sharded_state() -> Any:
    mesh = Mesh(np.array(jax.devices()).reshape(2, 4), ("data", "model"), axis_types=(AxisType.Auto,) * 2)
    rules = tuple((k, v) for k, v in RULES)
    x = jnp.ones((8, 16))
    with jax.set_mesh(mesh), nn.logical_axis_rules(rules):
        abstract = jax.eval_shape(Mlp().init, jax.random.key(0), x)
        shardings = nn.logical_to_mesh_sharding(nn.get_partition_spec(abstract), mesh, rules)
        return jax.jit(Mlp().init, out_shardings=shardings)(jax.random.key(0), x), mesh


def test_a_flax_state_captured_without_its_rules_is_not_marked() -> None:
    # Regression: published as the README shows (no rules=, outside the rules context), every leaf
    # said "not as the box declares (P(None, None))": the declaration was computed without rules.
    state, _ = sharded_state()
    snap = sharding_core.capture(state)
    for leaf in snap["leaves"]:
        assert leaf["note"] is None, leaf
        assert leaf["logical_axes"] and leaf["declared_spec"] is None
        assert leaf["spec"] in ("P(None, 'model')", "P('model',)", "P('model', None)")


def test_with_rules_only_a_leaf_that_truly_differs_is_marked() -> None:
    state, mesh = sharded_state()
    snap = sharding_core.capture(state, rules=RULES)
    assert all(leaf["note"] is None for leaf in snap["leaves"])  # P('model') is P('model', None)
    moved = jax.device_put(state["params"]["w2"].value, NamedSharding(mesh, P(None, "model")))
    state["params"]["w2"] = state["params"]["w2"].replace_boxed(moved)
    notes = {leaf["path"]: leaf["note"] for leaf in sharding_core.capture(state, rules=RULES)["leaves"]}
    assert notes["params/w1"] is None
    assert notes["params/w2"] == "the value is sharded P(None, 'model'), not as the box declares (P('model', None))"


def test_the_front_ends_vocabulary_is_what_its_owners_say() -> None:
    """The views, the dtypes, the id pattern and the layout explorer's URL state are written once (server.vocabulary
    from the domain's constants) and served to the front end as a generated module: it must not drift."""
    from server.vocabulary import COMMAND, MODULE, module_text

    assert MODULE.read_text() == module_text(), f"frontend/js/lib/vocabulary.js is stale: run `{COMMAND}`"
