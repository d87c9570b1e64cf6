"""Layouts against JAX computed directly in the test, over thousands of random cases."""

from __future__ import annotations

import math
from typing import Any

import jax
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jax._src.sharding_impls import device_replica_id_map
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from sharding_core.devices import DeviceSet, parse_devices
from sharding_core.errors import ShardingError
from sharding_core.layout import DTYPES, MAX_ARRAY_ELEMENTS, MAX_RANK, Layout
from sharding_core.mesh import MeshSpec

# CPU, GPU and every TPU generation, from 1 to 64 devices.
DEVICE_SETS = [
    "cpu:1",
    "cpu:6",
    "cpu:8",
    "cpu:12",
    "cpu:16",
    "gpu:h100:2x4",
    "gpu:a100:1x8",
    "gpu:b200:4x4",
    "tpu:v2:2x2",
    "tpu:v3:4x4",
    "tpu:v4:2x2x1",
    "tpu:v4:2x2x2",
    "tpu:v4:2x4x4",
    "tpu:v5e:2x4",
    "tpu:v5e:4x4",
    "tpu:v5e:4x8",
    "tpu:v5p:2x2x2",
    "tpu:v5p:4x4x4",
    "tpu:v6e:4x4",
    "tpu:7x:2x2x1",
    "tpu:7x:2x2x2",
]
AXIS_POOL = ["x", "y", "z", "data", "model", "fsdp", "ép", "a b"]


def _factorizations(n: int, k: int) -> list[tuple[int, ...]]:
    if k == 1:
        return [(n,)]
    return [(d, *rest) for d in range(1, n + 1) if n % d == 0 for rest in _factorizations(n // d, k - 1)]


@st.composite
def cases(draw: st.DrawFn) -> tuple[DeviceSet, MeshSpec, Any, tuple[int, ...]]:
    ds = parse_devices(draw(st.sampled_from(DEVICE_SETS)))
    n = len(ds)
    rank = draw(st.integers(1, 4))
    mesh_shape = draw(st.sampled_from(_factorizations(n, rank)))
    names = tuple(draw(st.permutations(AXIS_POOL))[:rank])
    order = draw(st.sampled_from(["make_mesh", "iota"]))
    mesh_spec = MeshSpec(mesh_shape, names, order=order)
    arr_rank = draw(st.integers(1, 4))
    unused = list(names)
    entries: list[Any] = []
    for _ in range(draw(st.integers(0, arr_rank))):
        kind = draw(st.sampled_from(["none", "axis", "tuple"]))
        if kind == "none" or not unused:
            entries.append(None)
        elif kind == "axis":
            a = draw(st.sampled_from(unused))
            unused.remove(a)
            entries.append(a)
        else:
            k = draw(st.integers(1, min(3, len(unused))))
            axes = tuple(draw(st.permutations(unused))[:k])
            for a in axes:
                unused.remove(a)
            entries.append(axes)
    sizes = dict(zip(names, mesh_shape, strict=True))
    shape = []
    for dim in range(arr_rank):
        e = entries[dim] if dim < len(entries) else None
        axes = () if e is None else (e if isinstance(e, tuple) else (e,))
        factor = math.prod(sizes[a] for a in axes)
        shape.append(factor * draw(st.integers(1, 3)))
    return ds, mesh_spec, P(*entries), tuple(shape)


def _jax_mesh(ds: DeviceSet, spec: MeshSpec) -> Mesh:
    """The mesh built by JAX directly in the test, independent of sharding_core.mesh."""
    if spec.order == "iota":
        arr = np.empty(spec.size, dtype=object)
        arr[:] = ds.devices[: spec.size]
        return Mesh(arr.reshape(spec.shape), spec.axis_names)
    return jax.make_mesh(spec.shape, spec.axis_names, devices=ds.devices)


def _bounds(idx: tuple[slice, ...], shape: tuple[int, ...]) -> list[list[int]]:
    return [[s.start or 0, shape[i] if s.stop is None else s.stop] for i, s in enumerate(idx)]


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_every_shard_matches_jax(case: tuple[DeviceSet, MeshSpec, Any, tuple[int, ...]]) -> None:
    ds, mesh_spec, pspec, shape = case
    try:
        want_mesh = _jax_mesh(ds, mesh_spec)
    except (ValueError, NotImplementedError):
        with pytest.raises(ShardingError) as e:  # JAX cannot place it: we must say so, not guess
            Layout.from_named(ds, mesh_spec, pspec, shape)
        assert e.value.code == "mesh_unplaceable"
        return
    layout = Layout.from_named(ds, mesh_spec, pspec, shape)
    sharding = NamedSharding(want_mesh, pspec)
    want = sharding.devices_indices_map(shape)
    replica = device_replica_id_map(sharding, shape)
    got = layout.json
    assert got["mesh"]["device_ids"] == np.vectorize(lambda d: d.id)(want_mesh.devices).tolist()
    assert [s["device_id"] for s in got["shards"]] == [d.id for d in want]
    for s, (dev, idx) in zip(got["shards"], want.items(), strict=True):
        assert s["index"] == _bounds(idx, shape)
        assert s["replica_id"] == replica[dev]
    assert got["shard_shape"] == list(sharding.shard_shape(shape))
    assert got["spec"] == repr(pspec)
    # Derived figures agree with the shards themselves.
    distinct = {tuple(map(tuple, s["index"])) for s in got["shards"]}
    assert len(got["tiles"]) == len(distinct)
    assert got["replication_factor"] * len(distinct) == len(want)
    assert sorted(i for t in got["tiles"] for i in t) == sorted(d.id for d in want)
    for t, ids in enumerate(got["tiles"]):
        assert {tuple(map(tuple, s["index"])) for s in got["shards"] if s["device_id"] in ids} == {
            tuple(map(tuple, got["shards"][[s["device_id"] for s in got["shards"]].index(ids[0])]["index"]))
        }
        assert all(got["shards"][[x["device_id"] for x in got["shards"]].index(i)]["tile"] == t for i in ids)
    assert got["bytes_per_device"] == math.prod(sharding.shard_shape(shape)) * 4
    assert got["logical_bytes"] == math.prod(shape) * 4
    assert got["total_bytes"] == got["bytes_per_device"] * len(want)
    used = {a for e in pspec.partitions for a in ((e,) if isinstance(e, str) else (e or ()))}
    assert set(got["replicated_axes"]) == {a for a, n in want_mesh.shape.items() if a not in used and n > 1}
    assert got["replication_factor"] == math.prod(want_mesh.shape[a] for a in got["replicated_axes"])


def test_device_attributes_follow_mesh_order() -> None:
    ds = parse_devices("tpu:v5e:4x4")
    layout = Layout.from_named(ds, MeshSpec((4, 4), ("x", "y")), P("x", "y"), (8, 8))
    devs = layout.json["devices"]
    for i, dev_id in enumerate(devs["id"]):
        d = ds.by_id[dev_id]
        assert devs["coords"][i] == list(d.coords)
        assert devs["process_index"][i] == d.process_index


def test_dims_describe_the_split() -> None:
    ds = parse_devices("cpu:8")
    layout = Layout.from_named(ds, MeshSpec((2, 4), ("x", "y")), P(("x", "y"), None), (16, 3))
    dims = layout.json["dims"]
    assert dims[0]["text"] == "dim 0: 16 / x(2)·y(4) → 2"
    assert dims[1]["text"] == "dim 1: 3 (not split)"


def test_unreduced_axes_keep_the_blocks_and_are_reported() -> None:
    ds = parse_devices("cpu:8")
    spec = MeshSpec((2, 4), ("x", "y"), axis_types=("explicit", "explicit"))
    layout = Layout.from_named(ds, spec, P("x", unreduced={"y"}), (8, 4))
    plain = Layout.from_named(ds, spec, P("x"), (8, 4))
    assert layout.json["spec"] == "P('x', unreduced={'y'})"
    assert layout.json["unreduced_axes"] == ["y"]
    assert layout.json["shards"] == plain.json["shards"]
    assert layout.json["replicated_axes"] == []
    with pytest.raises(ShardingError) as e:  # JAX: unreduced needs Explicit axes
        Layout.from_named(ds, MeshSpec((2, 4), ("x", "y"), order="iota"), P("x", unreduced={"y"}), (8, 4))
    assert e.value.code == "invalid_spec"


def _err(spec: Any, shape: tuple[int, ...], devices: str = "cpu:8", mesh: tuple[int, ...] = (2, 4)) -> ShardingError:
    with pytest.raises(ShardingError) as e:
        Layout.from_named(parse_devices(devices), MeshSpec(mesh, ("x", "y")), spec, shape)
    return e.value


def test_unknown_axis_suggests_the_closest() -> None:
    e = _err(P("xx"), (8,))
    assert e.code == "unknown_axis"
    assert "('x', 'y')" in e.message
    assert e.hint == "did you mean 'x'?"


def test_duplicate_axis_across_entries() -> None:
    e = _err(P("x", ("y", "x")), (8, 8))
    assert e.code == "duplicate_axis"
    assert e.details["axis"] == "x"


def test_rank_mismatch_says_both_numbers() -> None:
    e = _err(P("x", None, "y"), (8, 8))
    assert e.code == "rank_mismatch"
    assert "3 entries" in e.message and "rank 2" in e.message


def test_indivisible_names_dim_size_axes_and_nearest_sizes() -> None:
    e = _err(P(None, ("x", "y")), (4, 10))
    assert e.code == "indivisible"
    assert e.details["dim"] == 1 and e.details["size"] == 10 and e.details["factor"] == 8
    assert e.details["suggestions"] == [8, 16]
    assert "x(2) x y(4) = 8" in e.message
    assert e.hint is not None and "'x' alone divides it" in e.hint
    # JAX agrees that it is indivisible.
    mesh = jax.make_mesh((2, 4), ("x", "y"), devices=parse_devices("cpu:8").devices)
    with pytest.raises(ValueError, match="should evenly divide"):
        NamedSharding(mesh, P(None, ("x", "y"))).shard_shape((4, 10))


def test_shape_and_dtype_limits() -> None:
    ds = parse_devices("cpu:1")
    mesh = MeshSpec((1,), ("x",))
    assert Layout.from_named(ds, mesh, P(), (1,) * MAX_RANK).json["shape"] == [1] * MAX_RANK
    with pytest.raises(ShardingError) as e:
        Layout.from_named(ds, mesh, P(), (1,) * (MAX_RANK + 1))
    assert e.value.code == "too_large"
    assert Layout.from_named(ds, mesh, P(), (MAX_ARRAY_ELEMENTS,)).json["logical_bytes"] == MAX_ARRAY_ELEMENTS * 4
    with pytest.raises(ShardingError) as e:
        Layout.from_named(ds, mesh, P(), (MAX_ARRAY_ELEMENTS + 1,))
    assert e.value.code == "too_large"
    with pytest.raises(ShardingError) as e:
        Layout.from_named(ds, mesh, P(), (2**40, 2**40))
    assert e.value.code == "too_large"
    for bad in [(0,), (-1,), (True,)]:
        with pytest.raises(ShardingError) as e:
            Layout.from_named(ds, mesh, P(), bad)
        assert e.value.code == "bad_shape"
    with pytest.raises(ShardingError) as e:
        Layout.from_named(ds, mesh, P(), (4,), "float128")
    assert e.value.code == "bad_dtype"


@pytest.mark.parametrize("dtype", sorted(DTYPES))
def test_itemsizes_match_jax(dtype: str) -> None:
    layout = Layout.from_named(parse_devices("cpu:2"), MeshSpec((2,), ("x",)), P("x"), (8,), dtype)
    assert layout.itemsize == jax.numpy.dtype(dtype).itemsize or dtype in ("int4", "uint4")
    assert layout.bytes_per_device == 4 * layout.itemsize


def test_spec_text_is_parsed() -> None:
    layout = Layout.from_named(parse_devices("cpu:8"), MeshSpec((2, 4), ("x", "y")), 'PartitionSpec("x", None)', (4, 4))
    assert layout.spec == "P('x', None)"


def test_layouts_are_cached_and_immutable() -> None:
    ds = parse_devices("cpu:8")
    a = Layout.from_named(ds, MeshSpec((2, 4), ("x", "y")), P("x"), (4, 4))
    assert Layout.from_named(ds, MeshSpec((2, 4), ("x", "y")), P("x"), (4, 4)) is a
    with pytest.raises(ValueError, match="read-only"):
        a.starts[0, 0] = 5


def test_local_devices_layout_matches_placed_array() -> None:
    """On real devices, the layout equals where JAX actually places an array's shards."""
    ds = parse_devices("local")
    spec = MeshSpec((2, 4), ("x", "y"))
    layout = Layout.from_named(ds, spec, P("y", "x"), (8, 4))
    mesh = jax.make_mesh((2, 4), ("x", "y"), devices=jax.devices())
    arr = jax.device_put(np.zeros((8, 4), np.float32), NamedSharding(mesh, P("y", "x")))
    placed = {s.device.id: (_bounds(s.index, (8, 4)), s.replica_id) for s in arr.addressable_shards}
    assert {s["device_id"]: (s["index"], s["replica_id"]) for s in layout.json["shards"]} == placed


def test_unused_manual_axis_is_explained_not_a_crash() -> None:
    # Regression: JAX's devices_indices_map asserts on an unused Manual axis (was a 500).
    ds = parse_devices("cpu:8")
    spec = MeshSpec((2, 4), ("x", "y"), axis_types=("auto", "manual"))
    with pytest.raises(ShardingError) as e:
        Layout.from_named(ds, spec, P("x"), (8,))
    assert e.value.code == "invalid_spec" and e.value.details["axes"] == ["y"]
    layout = Layout.from_named(ds, spec, P("x", "y"), (8, 8))  # used Manual axes are fine
    assert layout.json["mesh"]["axis_types"] == ["Auto", "Manual"]


# ---- P.UNCONSTRAINED mirrors JAX -------------------------------------------------------------------


def _mesh_of(ds: DeviceSet, types: tuple[str, ...]) -> Mesh:
    from jax.sharding import AxisType

    return Mesh(np.array(ds.devices).reshape(2, 4), ("x", "y"), axis_types=tuple(AxisType[t] for t in types))


@pytest.mark.parametrize("types", [("Auto", "Auto"), ("Auto", "Explicit")])
@pytest.mark.parametrize("spec", ["P(P.UNCONSTRAINED, 'y')", "P(P.UNCONSTRAINED)", "P('y', P.UNCONSTRAINED)"])
def test_unconstrained_on_a_mesh_with_an_auto_axis_is_jaxs_layout(types: tuple[str, str], spec: str) -> None:
    ds = parse_devices("cpu:8")
    layout = Layout.from_named(ds, MeshSpec((2, 4), ("x", "y"), axis_types=types, order="iota"), spec, (4, 8))
    jax_spec = eval(spec, {"P": P})
    sharding = NamedSharding(_mesh_of(ds, types), jax_spec)
    want = {d.id: [[s.start or 0, s.stop or n] for s, n in zip(idx, (4, 8), strict=True)]
            for d, idx in sharding.devices_indices_map((4, 8)).items()}  # fmt: skip
    assert {s.device_id: [list(b) for b in s.index] for s in layout.shards} == want
    assert layout.shard_shape == tuple(sharding.shard_shape((4, 8)))
    assert layout.spec == repr(jax_spec)
    replicas = {d.id: r for d, r in device_replica_id_map(sharding, (4, 8)).items()}
    assert {s.device_id: s.replica_id for s in layout.shards} == replicas


def test_unconstrained_on_an_all_explicit_mesh_gives_jaxs_reason() -> None:
    ds = parse_devices("cpu:8")
    with pytest.raises(ValueError) as jax_error:
        NamedSharding(_mesh_of(ds, ("Explicit", "Explicit")), P(P.UNCONSTRAINED, "y"))
    with pytest.raises(ShardingError) as err:
        Layout.from_named(ds, MeshSpec((2, 4), ("x", "y"), order="make_mesh"), "P(P.UNCONSTRAINED, 'y')", (4, 8))
    assert err.value.code == "invalid_spec"
    assert str(jax_error.value) in err.value.message and "Auto" in (err.value.hint or "")


# ---- any jax Sharding, one constructor ---------------------------------------------------------------


def test_from_sharding_of_a_named_sharding_is_from_named() -> None:
    ds = parse_devices("tpu:v5e:2x4")
    spec = MeshSpec((2, 4), ("x", "y"), axis_types=("auto", "auto"))
    named = Layout.from_named(ds, spec, "P('y', None)", (8, 6), "bfloat16")
    from sharding_core.mesh import build_mesh

    sharding = NamedSharding(build_mesh(ds, spec), P("y", None))
    same = Layout.from_sharding(sharding, (8, 6), "bfloat16")
    assert same.to_json() == {**named.to_json(), "devices_key": None}
    assert same.to_json(context=False) == named.to_json(context=False)


def test_from_sharding_takes_shardings_without_a_mesh() -> None:
    from jax.sharding import SingleDeviceSharding

    dev = jax.devices()[3]
    single = Layout.from_sharding(SingleDeviceSharding(dev), (4, 8), np.float32)
    assert single.spec is None and single.mesh_device_ids is None
    assert [(s.device_id, s.index) for s in single.shards] == [(3, ((0, 4), (0, 8)))]
    assert single.to_json()["mesh"] is None and single.to_json()["dims"][0]["text"] == "dim 0: 4 (not split)"
    x = jax.device_put(np.zeros((8, 4), np.float32), NamedSharding(Mesh(np.array(jax.devices()), ("d",)), P("d")))
    gspmd = jax.jit(lambda v: v * 2).lower(x).compile().output_shardings  # what the compiler chose
    layout = Layout.from_sharding(gspmd, (8, 4), np.float32)
    want = {d.id: idx for d, idx in gspmd.devices_indices_map((8, 4)).items()}
    assert {s.device_id: s.index for s in layout.shards} == {
        i: tuple((sl.start or 0, sl.stop or n) for sl, n in zip(idx, (8, 4), strict=True)) for i, idx in want.items()
    }
