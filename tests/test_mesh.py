"""Meshes: orders, axis types, hybrid meshes and the errors when JAX cannot place a mesh."""

from __future__ import annotations

import jax
import numpy as np
import pytest
from jax.experimental import mesh_utils
from jax.sharding import AxisType

from sharding_core.devices import parse_devices
from sharding_core.errors import ShardingError
from sharding_core.mesh import MAX_MESH_AXES, MeshSpec, build_mesh


def _ids(mesh: object) -> list[int]:
    return [d.id for d in mesh.devices.flat]  # type: ignore[attr-defined]


def test_make_mesh_is_exactly_jax_make_mesh() -> None:
    ds = parse_devices("tpu:v5e:4x4")
    mesh = build_mesh(ds, MeshSpec((2, 8), ("x", "y")))
    want = jax.make_mesh((2, 8), ("x", "y"), devices=ds.devices)
    assert _ids(mesh) == _ids(want)
    assert mesh.axis_types == want.axis_types == (AxisType.Explicit, AxisType.Explicit)
    assert build_mesh(ds, MeshSpec((2, 8), ("x", "y"))) is mesh  # cached


def test_iota_is_a_plain_reshape_of_the_device_list() -> None:
    ds = parse_devices("tpu:v5e:4x4")
    mesh = build_mesh(ds, MeshSpec((4, 4), ("x", "y"), order="iota"))
    assert _ids(mesh) == [d.id for d in ds.devices]
    assert mesh.axis_types == (AxisType.Auto, AxisType.Auto)
    assert mesh.device_ids.tolist() == np.array([d.id for d in ds.devices]).reshape(4, 4).tolist()


def test_explicit_device_ids_and_axis_types() -> None:
    ds = parse_devices("cpu:4")
    mesh = build_mesh(
        ds, MeshSpec((2, 2), ("a", "b"), axis_types=("auto", "manual"), order="devices", device_ids=(3, 1, 2, 0))
    )
    assert _ids(mesh) == [3, 1, 2, 0]
    assert mesh.axis_types == (AxisType.Auto, AxisType.Manual)


def test_smaller_mesh_uses_the_first_devices_like_make_mesh() -> None:
    ds = parse_devices("cpu:8")
    assert _ids(build_mesh(ds, MeshSpec((4,), ("x",)))) == [0, 1, 2, 3]


def test_allow_split_physical_axes_matches_create_device_mesh() -> None:
    ds = parse_devices("tpu:v5p:4x4x4")
    with pytest.raises(ShardingError) as e:
        build_mesh(ds, MeshSpec((8, 8), ("x", "y")))
    assert e.value.code == "mesh_unplaceable"
    assert "Failed to find assignment" in e.value.message
    assert e.value.hint is not None and "allow_split_physical_axes" in e.value.hint
    mesh = build_mesh(ds, MeshSpec((8, 8), ("x", "y"), allow_split_physical_axes=True))
    want = mesh_utils.create_device_mesh((8, 8), ds.devices, allow_split_physical_axes=True)
    assert _ids(mesh) == [d.id for d in want.flat]


def test_multislice_needs_hybrid_and_hybrid_matches_jax() -> None:
    ds = parse_devices("tpu:v5e:2x2", slices=2)
    with pytest.raises(ShardingError) as e:
        build_mesh(ds, MeshSpec((2, 4), ("data", "model")))
    assert e.value.code == "mesh_unplaceable"
    assert e.value.hint is not None and "dcn_shape [2, 1]" in e.value.hint
    mesh = build_mesh(ds, MeshSpec((2, 4), ("data", "model"), order="hybrid", dcn_shape=(2, 1)))
    want = mesh_utils.create_hybrid_device_mesh((1, 4), (2, 1), ds.devices)
    assert _ids(mesh) == [d.id for d in want.flat]


def test_gpu_hybrid_mesh_groups_hosts() -> None:
    ds = parse_devices("gpu:h100:2x4")
    mesh = build_mesh(ds, MeshSpec((2, 4), ("dcn", "ici"), order="hybrid", dcn_shape=(2, 1)))
    want = mesh_utils.create_hybrid_device_mesh((1, 4), (2, 1), ds.devices, process_is_granule=True)
    assert _ids(mesh) == [d.id for d in want.flat]
    assert {d.process_index for d in mesh.devices[0]} == {0}


@pytest.mark.parametrize(
    ("kwargs", "code"),
    [
        ({"shape": (2, 4), "axis_names": ("x",)}, "bad_mesh"),
        ({"shape": (2, 4), "axis_names": ("x", "x")}, "duplicate_axis"),
        ({"shape": (2, 0), "axis_names": ("x", "y")}, "bad_mesh"),
        ({"shape": (8,), "axis_names": ("",)}, "bad_axis_name"),
        ({"shape": (8,), "axis_names": ("x" * 65,)}, "bad_axis_name"),
        ({"shape": (8,), "axis_names": ("a\nb",)}, "bad_axis_name"),
        ({"shape": (1,) * (MAX_MESH_AXES + 1), "axis_names": tuple("abcdefghi")}, "bad_mesh"),
        ({"shape": (8,), "axis_names": ("x",), "order": "zigzag"}, "bad_mesh"),
        ({"shape": (8,), "axis_names": ("x",), "axis_types": ("sometimes",)}, "bad_mesh"),
        ({"shape": (8,), "axis_names": ("x",), "order": "devices"}, "bad_mesh"),
        ({"shape": (4, 2), "axis_names": ("x", "y"), "order": "hybrid", "dcn_shape": (3, 1)}, "bad_mesh"),
    ],
)
def test_bad_mesh_specs(kwargs: dict[str, object], code: str) -> None:
    with pytest.raises(ShardingError) as e:
        MeshSpec(**kwargs)  # type: ignore[arg-type]
    assert e.value.code == code


def test_mesh_axes_limit_accepted() -> None:
    spec = MeshSpec((1,) * MAX_MESH_AXES, tuple("abcdefgh"))
    assert build_mesh(parse_devices("cpu:1"), spec).devices.shape == (1,) * MAX_MESH_AXES


def test_mesh_too_big_for_set_suggests_shapes() -> None:
    with pytest.raises(ShardingError) as e:
        build_mesh(parse_devices("cpu:8"), MeshSpec((4, 4), ("x", "y")))
    assert e.value.code == "bad_mesh"
    assert e.value.hint is not None and "8x1" in e.value.hint


@pytest.mark.parametrize("ids", [(0, 1, 2), (0, 0, 1, 2), (0, 1, 2, 99)])
def test_bad_device_id_lists(ids: tuple[int, ...]) -> None:
    with pytest.raises(ShardingError) as e:
        build_mesh(parse_devices("cpu:4"), MeshSpec((4,), ("x",), order="devices", device_ids=ids))
    assert e.value.code == "bad_mesh"
