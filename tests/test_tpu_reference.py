"""Simulated TPU slices against libtpu's compile-only topologies (the optional ``tpu`` extra).

``jax.experimental.topologies.get_topology_desc`` builds real ``TpuDevice`` objects for a slice
without any TPU attached; ``make test`` installs the extra, so these run in CI.
"""

from __future__ import annotations

import math
from typing import Any

import jax
import pytest
from jax.experimental import mesh_utils, topologies

from sharding_core.devices import TPU_GENERATIONS, parse_devices

pytestmark = pytest.mark.tpu

# (generation, topology, slices): 20+ slices across every generation, single- and multi-slice,
# 1-chip to 6144-chip, 2-D and 3-D, one and two cores per chip.
SLICES = [
    ("v2", "2x2", 1),
    ("v2", "4x8", 1),
    ("v3", "2x2", 1),
    ("v3", "4x4", 1),
    ("v3", "16x32", 1),
    ("v4", "2x2x1", 1),
    ("v4", "2x2x2", 1),
    ("v4", "2x4x4", 1),
    ("v4", "4x4x8", 1),
    ("v4", "4x4x4", 2),
    ("v5e", "1x1", 1),
    ("v5e", "2x2", 1),
    ("v5e", "2x4", 1),
    ("v5e", "4x8", 1),
    ("v5e", "16x16", 1),
    ("v5e", "4x4", 3),
    ("v5p", "2x2x1", 1),
    ("v5p", "2x2x4", 1),
    ("v5p", "8x8x8", 1),
    ("v5p", "16x16x24", 1),
    ("v6e", "2x4", 1),
    ("v6e", "8x16", 1),
    ("7x", "2x2x1", 1),
    ("7x", "2x2x2", 1),
    ("7x", "4x4x8", 1),
    ("7x", "2x2x2", 2),
]


def _reference(gen: str, topo: str, slices: int, host: tuple[int, ...]) -> list[Any]:
    g = TPU_GENERATIONS[gen]
    kwargs: dict[str, Any] = {"chips_per_host_bounds": host}
    if g.chip_config:
        kwargs["chip_config_name"] = g.chip_config
    if slices > 1:
        kwargs["num_slices"] = slices
    desc = topologies.get_topology_desc(platform="tpu", topology_name=f"{g.libtpu_name}:{topo}", **kwargs)
    return list(desc.devices)


def _attrs(d: Any, multislice: bool) -> tuple[Any, ...]:
    return (
        d.id,
        tuple(d.coords),
        d.core_on_chip,
        d.process_index,
        d.device_kind,
        d.platform,
        d.slice_index if multislice else None,
    )


@pytest.mark.parametrize(("gen", "topo", "slices"), SLICES)
def test_devices_equal_libtpu(gen: str, topo: str, slices: int) -> None:
    ds = parse_devices(f"tpu:{gen}:{topo}", slices=slices)
    assert ds.chips_per_host is not None
    ref = _reference(gen, topo, slices, ds.chips_per_host)
    # Same devices, attribute for attribute, in the same list order (jax.devices() order).
    assert [_attrs(d, slices > 1) for d in ds.devices] == [_attrs(d, slices > 1) for d in ref]


@pytest.mark.parametrize(("gen", "topo"), [("v5e", "4x4"), ("v4", "4x4x4"), ("v3", "4x4")])
def test_host_override_equals_libtpu(gen: str, topo: str) -> None:
    host = (2, 4, 1) if gen != "v4" else (2, 2, 2)
    ds = parse_devices(f"tpu:{gen}:{topo}", chips_per_host=host)
    ref = _reference(gen, topo, 1, host)
    assert [_attrs(d, False) for d in ds.devices] == [_attrs(d, False) for d in ref]


def _mesh_shapes(n: int) -> list[tuple[int, ...]]:
    shapes: list[tuple[int, ...]] = [(n,)]
    for a in (2, 4, 8):
        if n % a == 0 and n > a:
            shapes.append((a, n // a))
    if n % 8 == 0 and n >= 16:
        shapes.append((2, 2, n // 4))
    return shapes


@pytest.mark.parametrize(("gen", "topo", "slices"), [s for s in SLICES if s[2] == 1 and s[1] != "16x16x24"])
def test_make_mesh_orderings_equal_libtpu(gen: str, topo: str, slices: int) -> None:
    ds = parse_devices(f"tpu:{gen}:{topo}")
    assert ds.chips_per_host is not None
    ref = _reference(gen, topo, 1, ds.chips_per_host)
    for shape in _mesh_shapes(len(ref)):
        names = tuple("abc"[: len(shape)])
        for split in (False, True):
            got = _ids_or_error(
                lambda d, s=shape, sp=split: mesh_utils.create_device_mesh(s, d, allow_split_physical_axes=sp),
                ds.devices,
            )
            want = _ids_or_error(
                lambda d, s=shape, sp=split: mesh_utils.create_device_mesh(s, d, allow_split_physical_axes=sp), ref
            )
            assert got == want, (shape, split)
        got = _ids_or_error(lambda d, s=shape, n=names: jax.make_mesh(s, n, devices=d).devices, ds.devices)
        want = _ids_or_error(lambda d, s=shape, n=names: jax.make_mesh(s, n, devices=d).devices, ref)
        assert got == want, shape


def test_hybrid_mesh_equals_libtpu() -> None:
    ds = parse_devices("tpu:v5e:4x4", slices=2)
    ref = _reference("v5e", "4x4", 2, (2, 2, 1))
    got = mesh_utils.create_hybrid_device_mesh((4, 4), (2, 1), ds.devices)
    want = mesh_utils.create_hybrid_device_mesh((4, 4), (2, 1), ref)
    assert [d.id for d in got.flat] == [d.id for d in want.flat]
    assert math.prod(got.shape) == 32


def _ids_or_error(make: Any, devices: Any) -> Any:
    try:
        return [d.id for d in make(devices).flat]
    except (ValueError, NotImplementedError, AssertionError) as e:
        return type(e).__name__
