"""capture / inspect_jit / publish / show in the user's process, against JAX and Flax themselves.

Every expected number comes from JAX (``addressable_shards``, ``devices_indices_map``, JAX's replica
id rule) or Flax (``logical_to_mesh_axes``); nothing is hard-coded that they can compute.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jax._src.sharding_impls import device_replica_id_map
from jax.sharding import AxisType, Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

import sharding_core
import shardscope
from sharding_core.capturing import array_kind
from sharding_core.devices import parse_devices
from sharding_core.errors import ShardingError
from sharding_core.layout import ARRAY_FIELDS, Layout
from sharding_core.mesh import MeshSpec
from sharding_core.publishing import PublishError
from sharding_core.snapshot.rules import check_rules, logical_spec, logical_to_mesh_axes

AUTO = (AxisType.Auto, AxisType.Auto)


def mesh_2x4(order: list[int] | None = None) -> Mesh:
    devs = np.array(jax.devices())
    if order is not None:
        devs = devs[order]
    return Mesh(devs.reshape(2, 4), ("data", "model"), axis_types=AUTO)


def bounds(index: tuple[slice, ...], shape: tuple[int, ...]) -> list[list[int]]:
    return [[s.start or 0, d if s.stop is None else s.stop] for s, d in zip(index, shape, strict=True)]


def leaf_layout(snap: dict[str, Any], path: str) -> tuple[dict[str, Any], dict[str, Any]]:
    leaf = next(leaf for leaf in snap["leaves"] if leaf["path"] == path)
    return leaf, snap["layouts"][leaf["layout"]]


# ---- round trips against JAX ---------------------------------------------------------------------

SPECS = [P(), P("data"), P(None, "model"), P("data", "model"), P("model", "data"), P(("data", "model"))]


@given(
    spec=st.sampled_from(SPECS),
    rows=st.sampled_from([8, 16, 24]),
    cols=st.sampled_from([8, 32]),
    dtype=st.sampled_from([jnp.float32, jnp.bfloat16, jnp.int8]),
    order=st.permutations(list(range(8))),
)
@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck), database=None)
def test_captured_layout_is_jaxs(spec: P, rows: int, cols: int, dtype: Any, order: list[int]) -> None:
    mesh = mesh_2x4(order)
    x = jax.device_put(jax.random.normal(jax.random.key(rows), (rows, cols)).astype(dtype), NamedSharding(mesh, spec))
    snap = sharding_core.capture({"x": x})
    json.dumps(snap, allow_nan=False)  # JSON-serialisable as is
    leaf, layout = leaf_layout(snap, "x")
    sharding = x.sharding
    # every device's block: devices_indices_map, in its order
    want = [(d.id, bounds(idx, x.shape)) for d, idx in sharding.devices_indices_map(x.shape).items()]
    assert [(s["device_id"], s["index"]) for s in layout["shards"]] == want
    # what this process holds: addressable_shards, replica ids included
    got = {s["device_id"]: (s["index"], s["replica_id"]) for s in layout["shards"]}
    for shard in x.addressable_shards:
        assert got[shard.device.id] == (bounds(shard.index, x.shape), shard.replica_id)
        assert list(shard.data.shape) == layout["shard_shape"]
    assert {d.id: r for d, r in device_replica_id_map(sharding, x.shape).items()} == {k: v[1] for k, v in got.items()}
    assert leaf["spec"] == repr(spec) and leaf["dtype"] == str(x.dtype)
    assert layout["bytes_per_device"] == x.addressable_shards[0].data.nbytes
    mesh_rec = snap["meshes"][leaf["mesh"]]
    assert mesh_rec["device_ids"] == mesh.device_ids.tolist()
    assert leaf["array_kind"] == array_kind(x) == "sharded" and leaf["fully_addressable"] is True
    # ...and the same fields /api/layout computes for that mesh (the real devices, in the same order)
    same = Layout.from_named(
        parse_devices("local"),
        MeshSpec((2, 4), ("data", "model"), axis_types=("auto", "auto"), order="devices", device_ids=tuple(order)),
        spec,
        x.shape,
        str(x.dtype),
    ).json
    assert layout == {k: same[k] for k in ARRAY_FIELDS}


def test_array_kinds_and_live_arrays() -> None:
    mesh = mesh_2x4()
    one = jax.device_put(jnp.arange(4.0), jax.devices()[3])
    many = jax.device_put(jnp.ones((8, 8)), NamedSharding(mesh, P("data")))
    snap = sharding_core.capture(jax.live_arrays())
    by_id = {leaf["layout"]: leaf for leaf in snap["leaves"]}
    kinds = {leaf["array_kind"] for leaf in snap["leaves"]}
    assert {"single_device", "sharded"} <= kinds
    assert len(snap["leaves"]) == len(jax.live_arrays()) or len(snap["leaves"]) >= 2
    single = [leaf for leaf in snap["leaves"] if leaf["array_kind"] == "single_device"]
    assert any(snap["layouts"][leaf["layout"]]["shards"][0]["device_id"] == 3 for leaf in single)
    assert array_kind(one) == "single_device" and array_kind(many) == "sharded"
    assert by_id  # every live array got a layout
    del one, many


def test_shape_dtype_structs_shardings_specs_and_host_data() -> None:
    mesh = mesh_2x4()
    s = NamedSharding(mesh, P(None, "model"))
    snap = sharding_core.capture(
        {"planned": jax.ShapeDtypeStruct((16, 8), jnp.bfloat16, sharding=s), "bare": s, "spec": P("data"),
         "host": np.zeros(3), "nothing": None, "text": "skip me"}
    )  # fmt: skip
    leaves = {leaf["path"]: leaf for leaf in snap["leaves"]}
    assert set(leaves) == {"planned", "bare", "spec", "host"} and snap["skipped"] == 1  # None has no leaves
    planned = snap["layouts"][leaves["planned"]["layout"]]
    assert [s_["index"] for s_ in planned["shards"]] == [
        bounds(i, (16, 8)) for i in s.devices_indices_map((16, 8)).values()
    ]
    assert planned["itemsize"] == 2 and leaves["planned"]["kind"] == "shape_dtype_struct"
    assert leaves["bare"]["layout"] is None and leaves["bare"]["num_devices"] == 8
    assert leaves["bare"]["spec"] == repr(P(None, "model"))
    assert leaves["spec"]["spec"] == repr(P("data")) and leaves["host"]["kind"] == "host"


def test_orbax_style_restore_target_and_optax_state() -> None:
    mesh = mesh_2x4()
    params = {"w": jax.device_put(jnp.ones((8, 16)), NamedSharding(mesh, P("data", "model")))}
    opt_state = optax.adam(1e-3).init(params)
    # an Orbax restore target: the tree of ShapeDtypeStructs with the shardings to restore into
    target = jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=a.sharding), params)
    snap = sharding_core.capture({"opt_state": opt_state, "restore": target})
    paths = {leaf["path"]: leaf for leaf in snap["leaves"]}
    assert {"opt_state/0/mu/w", "opt_state/0/nu/w", "opt_state/0/count", "restore/w"} <= set(paths)
    assert paths["opt_state/0/mu/w"]["spec"] == paths["restore/w"]["spec"] == repr(P("data", "model"))
    assert paths["restore/w"]["kind"] == "shape_dtype_struct"


# ---- Flax --------------------------------------------------------------------------------------------


class Logical(nn.Module):
    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        w = self.param("w", nn.with_logical_partitioning(nn.initializers.ones, ("embed", "hidden")), (16, 32))
        b = self.param("b", nn.with_partitioning(nn.initializers.zeros, ("model",)), (32,))
        return x @ w + b


RULES = (("batch", "data"), ("hidden", "model"), ("embed", None))


def test_flax_linen_boxes_keep_logical_names_and_rules() -> None:
    mesh = mesh_2x4()
    abstract = jax.eval_shape(Logical().init, jax.random.key(0), jnp.ones((4, 16)))
    snap = sharding_core.capture(abstract, rules=RULES, mesh=mesh)
    leaves = {leaf["path"]: leaf for leaf in snap["leaves"]}
    w, b = leaves["params/w"], leaves["params/b"]
    assert w["box"] == "LogicallyPartitioned" and w["logical_axes"] == ["embed", "hidden"]
    assert b["box"] == "Partitioned" and b["logical_axes"] is None
    assert snap["rules"] == [list(r) for r in RULES]
    # the spec is what Flax itself derives from those names and rules
    declared = nn.get_partition_spec(abstract)["params"]
    want = {"w": nn.logical_to_mesh_axes(declared["w"], RULES), "b": declared["b"]}  # Partitioned: mesh axes
    assert w["spec"] == repr(want["w"]) and b["spec"] == repr(want["b"])
    layout = snap["layouts"][w["layout"]]
    sharding = NamedSharding(mesh, want["w"])
    assert [s["index"] for s in layout["shards"]] == [
        bounds(i, (16, 32)) for i in sharding.devices_indices_map((16, 32)).values()
    ]


def test_flax_boxes_holding_sharded_arrays_use_the_arrays_layout() -> None:
    mesh = mesh_2x4()
    x = jnp.ones((4, 16))
    with jax.set_mesh(mesh), nn.logical_axis_rules(RULES):
        abstract = jax.eval_shape(Logical().init, jax.random.key(0), x)
        shardings = nn.logical_to_mesh_sharding(nn.get_partition_spec(abstract), mesh, RULES)
        variables = jax.jit(Logical().init, out_shardings=shardings)(jax.random.key(0), x)
    box = variables["params"]["w"]
    assert isinstance(box, nn.LogicallyPartitioned)
    snap = sharding_core.capture(variables, rules=RULES)
    leaf, layout = leaf_layout(snap, "params/w")
    assert leaf["kind"] == "array" and leaf["logical_axes"] == ["embed", "hidden"]
    assert {s["device_id"]: s["index"] for s in layout["shards"]} == {
        sh.device.id: bounds(sh.index, box.value.shape) for sh in box.value.addressable_shards
    }
    assert leaf["spec"] == repr(box.value.sharding.spec) and leaf["note"] is None


def test_flax_nnx_variables() -> None:
    mesh = mesh_2x4()

    class Model(nnx.Module):
        def __init__(self, rngs: nnx.Rngs) -> None:
            init = nnx.with_partitioning(nnx.initializers.lecun_normal(), (None, "model"))
            self.dense = nnx.Linear(8, 16, kernel_init=init, rngs=rngs)

    with jax.set_mesh(mesh):
        model = Model(nnx.Rngs(0))
    snap = sharding_core.capture(model)
    leaf, layout = leaf_layout(snap, "dense/kernel")
    assert leaf["box"] == "nnx.Param" and leaf["declared_spec"] == repr(P(None, "model"))
    kernel = model.dense.kernel.get_value()
    assert leaf["spec"] == repr(kernel.sharding.spec)
    assert {s["device_id"]: s["index"] for s in layout["shards"]} == {
        sh.device.id: bounds(sh.index, kernel.shape) for sh in kernel.addressable_shards
    }
    assert leaf["logical_axes"] is None  # names that are mesh axes, no rules: not logical


name = st.sampled_from(["batch", "embed", "hidden", "heads", "mlp", "kv"])
mesh_side = st.one_of(
    st.none(), st.sampled_from(["data", "model", "x"]), st.lists(st.sampled_from(["data", "model", "x"]), max_size=2)
)


@given(
    names=st.lists(st.one_of(st.none(), name), max_size=4, unique_by=lambda n: n if n is not None else object()),
    rules=st.lists(st.tuples(name, mesh_side), max_size=6),
)
@settings(max_examples=300, deadline=None, database=None)
def test_logical_to_mesh_axes_is_flaxs(names: list[str | None], rules: list[tuple[str, Any]]) -> None:
    rules_t = tuple((k, tuple(v) if isinstance(v, list) else v) for k, v in rules)
    ours = logical_to_mesh_axes(tuple(names), check_rules(rules_t))
    assert P(*ours) == nn.logical_to_mesh_axes(tuple(names), rules_t)


def test_a_pasted_logical_spec_maps_as_flax_maps_its_names() -> None:
    """The layout route's rules, now in sharding_core: a pasted spec of logical names (None kept), as Flax maps it."""
    rules = [["batch", "data"], ["embed", ["fsdp", "tensor"]], ["mlp", None]]
    flax_rules = (("batch", "data"), ("embed", ("fsdp", "tensor")), ("mlp", None))
    assert logical_spec("P('batch', None, 'embed')", rules) == nn.logical_to_mesh_axes(
        ("batch", None, "embed"), flax_rules
    )
    with pytest.raises(ShardingError, match="one logical axis"):
        logical_spec("P(('batch', 'embed'))", rules)


def test_logical_names_used_twice_are_refused_like_flax() -> None:
    with pytest.raises(ValueError, match="more than once"):
        nn.logical_to_mesh_axes(("a", "a"), (("a", "x"),))
    with pytest.raises(ShardingError, match="more than once"):
        logical_to_mesh_axes(("a", "a"), (("a", "x"),))


# ---- inspect_jit -----------------------------------------------------------------------------------------


def test_inspect_jit_shardings_and_collectives_in_device_ids() -> None:
    order = [7, 6, 5, 4, 3, 2, 1, 0]  # a reversed mesh: partition ids and device ids differ
    mesh = mesh_2x4(order)
    x = jax.device_put(jnp.ones((8, 16)), NamedSharding(mesh, P("data", "model")))
    w = jax.device_put(jnp.ones((16, 32)), NamedSharding(mesh, P("model", None)))

    def f(x: jax.Array, w: jax.Array) -> jax.Array:
        return x @ w  # contracts over 'model': XLA sums the partial products over it

    snap = sharding_core.inspect_jit(f, x, w)
    compiled = jax.jit(f).lower(x, w).compile()
    leaves = {leaf["path"]: leaf for leaf in snap["leaves"]}
    assert leaves["inputs/args/0"]["spec"] == repr(compiled.input_shardings[0][0].spec)
    assert leaves["outputs"]["spec"] == repr(compiled.output_shardings.spec)
    reduces = [c for c in snap["collectives"] if c["op"] == "all-reduce"]
    assert reduces, snap["collectives"]
    # the groups run along the 'model' axis: the rows of the mesh, as device ids
    rows = sorted(sorted(r) for r in mesh.device_ids.tolist())
    assert sorted(sorted(g) for g in reduces[0]["groups"]) == rows
    assert snap["jit"]["function"] == "f" and snap["jit"]["memory_per_device"]["argument_size_in_bytes"] > 0


# ---- publish and show without a dashboard -------------------------------------------------------------


def test_a_token_publish_cannot_send_is_refused_in_words() -> None:
    # Regression: a non-ASCII token could never be sent (HTTP headers are latin-1) and failed obscurely.
    with pytest.raises(PublishError) as err:
        sharding_core.publish({"x": jnp.ones(2)}, "x", url="http://127.0.0.1:9", token="tökén-tökén-tökén-tökén")
    assert err.value.code == "bad_token" and "ASCII" in err.value.message


def test_publish_to_an_unreachable_dashboard_says_what_to_do() -> None:
    with pytest.raises(PublishError) as err:
        sharding_core.publish({"x": jnp.ones(2)}, "x", url="http://127.0.0.1:9", timeout=5)
    e = err.value
    assert e.code == "dashboard_unreachable" and e.url == "http://127.0.0.1:9" and e.status is None
    assert "shardscope serve" in (e.hint or "") and "127.0.0.1:9" in str(e)


@pytest.mark.parametrize("url", ["file:///etc/passwd", "ftp://x", "127.0.0.1:8000", ""])
def test_publish_refuses_non_http_urls(url: str) -> None:
    with pytest.raises(PublishError) as err:
        sharding_core.publish({"x": jnp.ones(2)}, "x", url=url)
    assert err.value.code == "bad_url"


def test_bad_run_id_is_refused_before_sending() -> None:
    with pytest.raises(PublishError) as err:
        sharding_core.publish({"x": jnp.ones(2)}, "x", url="http://127.0.0.1:9", run_id="short")
    assert err.value.code == "bad_run_id"


def test_show_needs_no_dashboard(capsys: pytest.CaptureFixture[str]) -> None:
    # show used to publish (and fail without a dashboard); it now draws inline, or prints outside a notebook
    mesh = mesh_2x4()
    x = jax.device_put(jnp.zeros((8, 16)), NamedSharding(mesh, P("data", "model")))
    assert shardscope.show(x, url="http://127.0.0.1:9") is None
    assert "CPU 0" in capsys.readouterr().out


def test_the_api_is_importable_light() -> None:
    code = (
        "import sys, sharding_core\n"
        "from sharding_core import capture, publish, inspect_jit, PublishError\n"
        "import sharding_core.snapshot, sharding_core.publishing, sharding_core.capturing\n"
        "assert callable(sharding_core.capture) and callable(sharding_core.publish)\n"
        "heavy = ('fastapi', 'uvicorn', 'pydantic', 'starlette', 'server', 'orjson', 'flax')\n"
        "bad = [m for m in heavy if m in sys.modules]\n"
        "print(bad)"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert r.stdout.strip() == "[]"


def test_inspect_jit_names_the_parameters_its_arguments_were_passed_as() -> None:
    # Regression (issue 21): inspect_jit named arguments by position only (inputs/args/0, inputs/args/1).
    from sharding_core.planning.program import argument_names

    def step(state: Any, x: Any, *rest: Any) -> Any:
        return state["w"] @ x

    mesh = jax.make_mesh((8,), ("x",))
    w = jax.device_put(jnp.ones((8, 8)), NamedSharding(mesh, P("x")))
    snap = sharding_core.inspect_jit(step, {"w": w}, w)
    assert snap["jit"]["arguments"] == ["state", "x"]
    assert argument_names(jax.jit(step), 4) == ["state", "x", None, None]  # *rest has no names
    assert argument_names(len, 1) in (["obj"], [None])  # a builtin: its signature when Python has one
