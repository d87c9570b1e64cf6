"""Terminal text: character for character what ``jax.debug.visualize_sharding`` prints (1-D, 2-D)."""

from __future__ import annotations

import contextlib
import io
import math
from typing import Any

import jax
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from sharding_core.devices import parse_devices
from sharding_core.layout import Layout
from sharding_core.mesh import MeshSpec, build_mesh
from sharding_core.render import compact_ids, render_text

SETS = ["cpu:1", "cpu:4", "cpu:8", "gpu:h100:2x4", "tpu:v3:2x2", "tpu:v4:2x2x2", "tpu:v5e:4x4", "tpu:7x:2x2x2"]


def _jax_text(shape: tuple[int, ...], sharding: Any, **kwargs: Any) -> str:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        jax.debug.visualize_sharding(shape, sharding, use_color=False, **kwargs)
    return buf.getvalue()


@st.composite
def grids(draw: st.DrawFn) -> tuple[str, tuple[int, ...], Any, tuple[int, ...]]:
    devices = draw(st.sampled_from(SETS))
    n = len(parse_devices(devices))
    a = draw(st.sampled_from([d for d in range(1, n + 1) if n % d == 0]))
    mesh_shape = (a, n // a)
    rank = draw(st.integers(1, 2))
    entry = st.sampled_from([None, "x", "y", ("x", "y"), ("y", "x")])
    entries = [draw(entry) for _ in range(draw(st.integers(0, rank)))]
    flat = [a for e in entries for a in ((e,) if isinstance(e, str) else (e or ()))]
    if len(flat) != len(set(flat)):
        entries = entries[:1]
    sizes = {"x": mesh_shape[0], "y": mesh_shape[1]}
    shape = []
    for dim in range(rank):
        e = entries[dim] if dim < len(entries) else None
        axes = () if e is None else ((e,) if isinstance(e, str) else e)
        shape.append(math.prod(sizes[x] for x in axes) * draw(st.sampled_from([1, 2, 3, 8])))
    return devices, mesh_shape, P(*entries), tuple(shape)


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(grids())
def test_text_equals_visualize_sharding(case: tuple[str, tuple[int, ...], Any, tuple[int, ...]]) -> None:
    devices, mesh_shape, spec, shape = case
    ds = parse_devices(devices)
    mesh_spec = MeshSpec(mesh_shape, ("x", "y"), order="iota")
    layout = Layout.from_named(ds, mesh_spec, spec, shape)
    want = _jax_text(shape, NamedSharding(build_mesh(ds, mesh_spec), spec))
    assert render_text(layout) == want


def test_golden_tutorial_cases() -> None:
    # The layouts of JAX's sharding tutorial: a 2x4 mesh with P('x','y'), P('x'), P(None,'y').
    ds = parse_devices("cpu:8")
    mesh_spec = MeshSpec((2, 4), ("x", "y"))
    for spec in (P("x", "y"), P("x"), P(None, "y"), P(), P(("x", "y"))):
        shape = (8, 16) if len(spec) != 1 or spec == P("x") else (32,)
        layout = Layout.from_named(ds, mesh_spec, spec, shape)
        assert render_text(layout) == _jax_text(shape, NamedSharding(build_mesh(ds, mesh_spec), spec))


def test_wide_grid_matches_with_overflow() -> None:
    # 16 columns overflow 80 characters; rich shrinks columns the same way for both.
    ds = parse_devices("tpu:v5e:4x4")
    mesh_spec = MeshSpec((1, 16), ("x", "y"))
    layout = Layout.from_named(ds, mesh_spec, P("x", "y"), (4, 64))
    assert render_text(layout) == _jax_text((4, 64), NamedSharding(build_mesh(ds, mesh_spec), P("x", "y")))


def test_higher_rank_one_grid_per_block() -> None:
    ds = parse_devices("cpu:8")
    layout = Layout.from_named(ds, MeshSpec((2, 4), ("x", "y")), P("x", None, "y"), (4, 3, 8))
    text = render_text(layout, summary=True)
    assert text.count("┌") == 2  # dim 0 is split in two blocks
    assert "dim 0 [0:2]" in text and "dim 0 [2:4]" in text
    assert "CPU 0" in text and "CPU 7" in text
    assert "replication factor 1" in text
    # choosing the grid dims: dims (0, 2) in one grid, dim 1 unsplit → a single block
    one = render_text(layout, dims=(0, 2))
    assert one.count("┌") == 1
    # each block is JAX's 2-D picture of that block: block 0 holds devices 0-3 (x = 0)
    first = text.split("dim 0 [2:4]")[0]
    assert all(f"CPU {i}" in first for i in range(4)) and "CPU 4" not in first


def test_scalar_and_compact_labels() -> None:
    ds = parse_devices("tpu:v5e:4x4")
    layout = Layout.from_named(ds, MeshSpec((4, 4), ("x", "y")), P(), ())
    assert "TPU 0,1,2,3" in render_text(layout)
    assert "TPU 0-15" in render_text(layout, compact=True)


def test_compact_ids() -> None:
    assert compact_ids([0, 1, 2, 3, 8, 9, 10, 11]) == "0-3,8-11"
    assert compact_ids([0, 6]) == "0,6"
    assert compact_ids([5, 4, 7, 6]) == "4-7"
    assert compact_ids([1, 2, 5]) == "1,2,5"
    assert compact_ids([]) == ""
