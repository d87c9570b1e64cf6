"""The one HLO reader (``sharding_core.hlo``): collectives, groups and origins, against HLO JAX produces here.

Expected groups are computed from the mesh (which devices lie along the axes a collective runs
over), never written out by hand; the three replica-group spellings are checked against XLA's
definitions (iota lists, mesh axes with sub-axes) and against real compiled modules.
"""

from __future__ import annotations

import itertools
import math
import re
import tempfile
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jax.sharding import AxisType, Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from sharding_core.hlo import axes as hlo_axes
from sharding_core.hlo import origins
from sharding_core.hlo import text as hlo
from sharding_core.hlo.collectives import map_to_devices, read_collectives
from sharding_core.kernels import build

DEVICES = np.array(jax.devices())
RING = [0, 1, 2, 3, 6, 7, 4, 5]  # a v3 tray's ring order: device ids not in mesh order


def mesh_of(shape: Sequence[int], names: Sequence[str], order: Sequence[int] | None = None) -> Mesh:
    n = math.prod(shape)
    devs = DEVICES[list(order)] if order is not None else DEVICES[:n]
    return Mesh(devs.reshape(tuple(shape)), tuple(names), axis_types=(AxisType.Auto,) * len(shape))


def expected_groups(mesh: Mesh, axes: Sequence[str]) -> set[frozenset[int]]:
    """Device ids along ``axes`` for each position of the other axes: what a collective over them joins."""
    ids = mesh.device_ids
    names = list(mesh.axis_names)
    moved = np.moveaxis(ids, [names.index(a) for a in axes], list(range(len(names) - len(axes), len(names))))
    size = math.prod(mesh.shape[a] for a in axes)
    return {frozenset(int(i) for i in row) for row in moved.reshape(-1, size)}


def compiled_collectives(f: Callable[..., Any], *args: Any) -> tuple[str, list[hlo.Collective], list[int]]:
    compiled = jax.jit(f).lower(*args).compile()
    text = compiled.as_text()
    assignment = [d.id for d in compiled.runtime_executable().local_devices()]
    return text, hlo.parse_collectives(text), assignment


def device_groups(c: hlo.Collective, assignment: list[int]) -> set[frozenset[int]]:
    groups, _ = map_to_devices(c, assignment)
    return {frozenset(g) for g in groups}


def coords(mesh: Mesh) -> dict[int, tuple[int, ...]]:
    return hlo_axes.mesh_coords(mesh.device_ids.tolist())


def kinds_by_regex(text: str) -> list[str]:
    """Collective kinds straight from the HLO text, independently of the parser."""
    ops = "all-reduce|all-gather|reduce-scatter|all-to-all|collective-permute"
    return sorted(m.group(1) for m in re.finditer(rf"= (?:\([^)]*\)|\S+) ({ops})(?:-start)?\(", text))


def sharded(mesh: Mesh, spec: P, shape: tuple[int, ...] = (8, 16)) -> jax.Array:
    return jax.device_put(jnp.arange(math.prod(shape), dtype=jnp.float32).reshape(shape), NamedSharding(mesh, spec))


# ------------------------------------------------------------------------ the three spellings


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 4), min_size=1, max_size=4), st.data())
def test_iota_groups_follow_the_reshape_transpose_definition(dims: list[int], data: st.DataObject) -> None:
    perm = data.draw(st.permutations(range(len(dims))))
    total = math.prod(dims)
    size = data.draw(st.sampled_from([d for d in range(1, total + 1) if total % d == 0]))
    text = f"[{total // size},{size}]<=[{','.join(map(str, dims))}]T({','.join(map(str, perm))})"
    want = np.arange(total).reshape(dims).transpose(perm).reshape(total // size, size).tolist()
    assert hlo.parse_replica_groups(text, total) == want


def test_iota_without_transpose_and_explicit_lists() -> None:
    assert hlo.parse_replica_groups("[2,4]<=[8]", 8) == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert hlo.parse_replica_groups("{{0,2},{1,3}}", 4) == [[0, 2], [1, 3]]
    assert hlo.parse_replica_groups("{}", 4) == [[0, 1, 2, 3]]  # empty: one group of everyone
    assert hlo.parse_replica_groups("maximal_mesh[device_id=3]", 8) == [[3]]


def _sub_axis_reference(size: int, refs: list[tuple[int, int]]) -> list[list[int]]:
    """XLA's comment in replica_group.cc, spelled out for one mesh axis of ``size`` over iota devices:
    {a:(1)2} -> reshape [8]->[1,2,4], aggregate over [1]; {a:(1)2, a:(4)2} -> [2,2,2], aggregate [0,2]."""
    dims: list[int] = []
    agg: list[int] = []
    prefix = 1
    for pre, sz in sorted(refs):
        if pre != prefix:
            dims.append(pre // prefix)
            prefix = pre
        agg.append(len(dims))
        dims.append(sz)
        prefix *= sz
    if prefix != size:
        dims.append(size // prefix)
    # the listed order of refs decides the order inside a group
    order = [agg[sorted(refs).index(r)] for r in refs]
    rest = [d for d in range(len(dims)) if d not in order]
    arr = np.arange(size).reshape(dims).transpose(rest + order)
    return arr.reshape(-1, math.prod(sz for _, sz in refs)).tolist()


@pytest.mark.parametrize(
    "refs",
    [[(1, 2)], [(2, 2)], [(4, 2)], [(1, 4)], [(2, 4)], [(1, 2), (4, 2)], [(4, 2), (1, 2)], [(1, 2), (2, 2)]],
)
def test_mesh_axes_sub_axes_follow_xla(refs: list[tuple[int, int]]) -> None:
    text = "mesh['a'=8] {" + ",".join(f"'a':({pre}){size}" for pre, size in refs) + "}"
    assert hlo.parse_replica_groups(text, 8) == _sub_axis_reference(8, refs)


def test_mesh_axes_with_device_ids_and_several_axes() -> None:
    # The module's own mesh: 'axis_0'=4 made of devices iota(8).reshape(2,2,2).transpose(0,2,1).
    text = "mesh['axis_0'=4,'axis_1'=2], device_ids=([2,2,2]T(0,2,1)) {'axis_0'}"
    arr = np.arange(8).reshape(2, 2, 2).transpose(0, 2, 1).reshape(4, 2)
    assert hlo.parse_replica_groups(text, 8) == arr.T.tolist()
    # Grouping over both axes, minor one listed first: groups run axis_1-major.
    both = hlo.parse_replica_groups("mesh['x'=2,'y'=4] {'y','x'}", 8)
    assert both == [np.arange(8).reshape(2, 4).T.reshape(-1).tolist()]
    # Unquoted names (older XLA) and an explicit device list.
    assert hlo.parse_replica_groups("mesh[x=2,y=2], device_ids=(3,2,1,0) {x}", 4) == [[3, 1], [2, 0]]


@pytest.mark.parametrize(
    "text", ["[3,3]<=[8]", "{{0,1}", "mesh['a'=8] {'b'}", "replicas(0)", "[2,4]<=[8]T(0,0)", "mesh['a'=8] {'a':(3)2}"]
)
def test_unreadable_replica_groups_are_refused_not_guessed(text: str) -> None:
    with pytest.raises(hlo.HloParseError):
        hlo.parse_replica_groups(text, 8)


# -------------------------------------------------------------- real modules JAX compiles here


@pytest.mark.parametrize("order", [None, RING])
@pytest.mark.parametrize("axes", [("x",), ("y",), ("x", "y")])
def test_psum_groups_are_the_devices_along_its_axes(order: list[int] | None, axes: tuple[str, ...]) -> None:
    mesh = mesh_of((2, 4), ("x", "y"), order)
    f = jax.shard_map(lambda x: jax.lax.psum(x, axes), mesh=mesh, in_specs=P("x", "y"), out_specs=P("x", "y"))
    text, cs, assignment = compiled_collectives(f, sharded(mesh, P("x", "y")))
    assert [c.op for c in cs] == kinds_by_regex(text) == ["all-reduce"]
    assert device_groups(cs[0], assignment) == expected_groups(mesh, axes)
    groups, _ = map_to_devices(cs[0], assignment)
    report = hlo_axes.group_axes(groups, coords(mesh), mesh.axis_names)
    assert report.axes == axes and report.exact


def test_compiler_inserted_collectives_in_each_spelling() -> None:
    mesh = mesh_of((2, 2, 2), ("a", "b", "c"))
    x = sharded(mesh, P(("a", "c"), "b"))
    # A sum over a dimension split over (a, c): XLA writes the groups in the mesh-axes spelling.
    text, cs, assignment = compiled_collectives(lambda x: x.sum(0), x)
    assert kinds_by_regex(text) == ["all-reduce"]
    assert "mesh[" in cs[0].replica_groups
    assert device_groups(cs[0], assignment) == expected_groups(mesh, ("a", "c"))
    # x @ x.T: an all-gather and an all-reduce, in the iota spelling.
    text, cs, assignment = compiled_collectives(lambda x: x @ x.T, x)
    assert sorted(c.op for c in cs) == kinds_by_regex(text) == ["all-gather", "all-reduce"]
    gather = next(c for c in cs if c.op == "all-gather")
    reduce = next(c for c in cs if c.op == "all-reduce")
    assert "<=" in gather.replica_groups and "<=" in reduce.replica_groups
    assert device_groups(reduce, assignment) == expected_groups(mesh, ("b",))
    assert device_groups(gather, assignment) == expected_groups(mesh, ("a", "c"))


@pytest.mark.parametrize("order", [None, RING])
def test_shard_map_collectives_map_to_ids_and_axes(order: list[int] | None) -> None:
    mesh = mesh_of((2, 4), ("x", "y"), order)
    x = sharded(mesh, P("x", "y"))
    ids = mesh.device_ids
    cases: list[tuple[str, Callable[..., Any], P]] = [
        ("all-gather", lambda b: jax.lax.all_gather(b, "y", axis=1, tiled=True, to="invarying"), P("x", None)),
        (
            "reduce-scatter",
            lambda b: jax.lax.psum_scatter(b, "x", scatter_dimension=1, tiled=True),
            P(None, ("y", "x")),
        ),
        ("all-to-all", lambda b: jax.lax.all_to_all(b, "y", 1, 0, tiled=True), P(("x", "y"), None)),
    ]
    for op, body, out in cases:
        f = jax.shard_map(body, mesh=mesh, in_specs=P("x", "y"), out_specs=out)
        text, cs, assignment = compiled_collectives(f, x)
        assert [c.op for c in cs] == kinds_by_regex(text) == [op], op
        axis = "y" if op != "reduce-scatter" else "x"
        assert device_groups(cs[0], assignment) == expected_groups(mesh, (axis,)), op
        groups, _ = map_to_devices(cs[0], assignment)
        assert hlo_axes.group_axes(groups, coords(mesh), mesh.axis_names).axes == (axis,)
    # ppermute: each block moves one step along y; pairs map to the devices at those mesh positions.
    perm = [(i, (i + 1) % 4) for i in range(4)]
    f = jax.shard_map(lambda b: jax.lax.ppermute(b, "y", perm), mesh=mesh, in_specs=P("x", "y"), out_specs=P("x", "y"))
    text, cs, assignment = compiled_collectives(f, x)
    assert [c.op for c in cs] == kinds_by_regex(text) == ["collective-permute"]
    _, pairs = map_to_devices(cs[0], assignment)
    assert pairs is not None
    want = {(int(ids[r, s]), int(ids[r, t])) for r in range(2) for s, t in perm}
    assert {(a, b) for a, b in pairs} == want
    assert hlo_axes.pair_axes(pairs, coords(mesh), mesh.axis_names).axes == ("y",)
    rings = {tuple(g) for g in map_to_devices(cs[0], assignment)[0]}
    assert {frozenset(r) for r in rings} == expected_groups(mesh, ("y",))


def test_bytes_and_shapes_of_results() -> None:
    mesh = mesh_of((8,), ("x",))
    x = sharded(mesh, P("x", None), (8, 16))
    f = jax.shard_map(lambda b: jax.lax.all_gather(b, "x", tiled=True, to="invarying"), mesh=mesh,
                      in_specs=P("x", None), out_specs=P())  # fmt: skip
    _, cs, _ = compiled_collectives(f, x)
    assert cs[0].shapes == (hlo.ArrayShape("f32", (8, 16)),)
    assert cs[0].bytes == 8 * 16 * 4
    assert hlo.ArrayShape("bf16", (3,)).bytes == 6
    assert hlo.ArrayShape("pred", (5,)).bytes == 5
    assert hlo.ArrayShape("s4", (3,)).bytes == 2  # packed nibbles, rounded up
    assert hlo.ArrayShape("f32", ()).bytes == 4


ASYNC_HLO = "\n".join(
    [
        "HloModule m, num_partitions=4",
        "",
        "ENTRY %main (p: f32[4,8]) -> f32[16,8] {",
        "  %p = f32[4,8]{1,0} parameter(0)",
        "  %ag-start = (f32[4,8]{1,0}, f32[16,8]{1,0}) all-gather-start(%p), channel_id=1, "
        "replica_groups={{0,1,2,3}}, dimensions={0}, use_global_device_ids=true, "
        'metadata={op_name="jit(f)/all_gather"}',
        "  %ag-done = f32[16,8]{1,0} all-gather-done(%ag-start)",
        "  %ar-start = f32[16,8]{1,0} all-reduce-start(%ag-done), channel_id=2, replica_groups=[2,2]<=[4], "
        "to_apply=%add",
        "  %ar-done = f32[16,8]{1,0} all-reduce-done(%ar-start)",
        "  %cp-start = (f32[16,8]{1,0}, f32[16,8]{1,0}, u32[], u32[]) collective-permute-start(%ar-done), "
        "channel_id=3, source_target_pairs={{0,1},{1,0},{2,3}}",
        "  ROOT %cp-done = f32[16,8]{1,0} collective-permute-done(%cp-start)",
        "}",
    ]
)


def test_async_start_forms_count_once_with_their_results() -> None:
    cs = hlo.parse_collectives(ASYNC_HLO)
    assert [(c.op, c.is_async) for c in cs] == [
        ("all-gather", True),
        ("all-reduce", True),
        ("collective-permute", True),
    ]
    assert [c.bytes for c in cs] == [16 * 8 * 4] * 3
    assert cs[0].groups == ((0, 1, 2, 3),) and cs[0].dimensions == (0,) and cs[0].source == "jit(f)/all_gather"
    assert cs[1].groups == ((0, 1), (2, 3))
    assert cs[2].pairs == ((0, 1), (1, 0), (2, 3)) and cs[2].groups == ((0, 1), (2, 3))


def test_tuple_results_count_every_array() -> None:
    text = (
        "HloModule m, num_partitions=2\n\nENTRY %main () -> f32[] {\n"
        "  %a2a = (f32[2,2]{1,0}, bf16[2,2]{1,0}) all-to-all(%a, %b), channel_id=1, replica_groups={{0,1}}\n}\n"
    )
    (c,) = hlo.parse_collectives(text)
    assert c.shape_text == "(f32[2,2], bf16[2,2])" and c.bytes == 16 + 8


# ------------------------------------------------------------------------------- axes reports


def test_group_axes_names_sub_axes_and_flags_irregular_groups() -> None:
    mesh = mesh_of((2, 4), ("x", "y"))
    c = coords(mesh)
    assert hlo_axes.group_axes([[0, 2], [1, 3], [4, 6], [5, 7]], c, ("x", "y")) == hlo_axes.AxesReport(
        ("y:(1)2",), True
    )
    assert hlo_axes.group_axes([[0, 1], [2, 3], [4, 5], [6, 7]], c, ("x", "y")) == hlo_axes.AxesReport(
        ("y:(2)2",), True
    )
    assert hlo_axes.group_axes([[0, 4, 1, 5]], c, ("x", "y")).axes == ("y:(2)2", "x")  # y changes slowest
    diagonal = hlo_axes.group_axes([[0, 5], [1, 4]], c, ("x", "y"))
    assert not diagonal.exact and diagonal.text.startswith("part of")
    assert hlo_axes.group_axes([[0], [1]], c, ("x", "y")) == hlo_axes.AxesReport((), True)
    assert hlo_axes.sub_axis("y", [0, 3], 4) is None  # not evenly inside one block


@pytest.mark.parametrize("size", [2, 4, 8, 16])
def test_every_sub_axis_is_recognised(size: int) -> None:
    # For each way of splitting an axis into (pre, c, post), the groups of the middle part.
    for c in (d for d in range(2, size) if size % d == 0):
        for pre in (d for d in range(1, size // c + 1) if (size // c) % d == 0):
            post = size // (pre * c)
            arr = np.arange(size).reshape(pre, c, post)
            for i, k in itertools.product(range(pre), range(post)):
                assert hlo_axes.sub_axis("a", arr[i, :, k].tolist(), size) == f"a:({pre}){c}"


# ------------------------------------------------------------------------------------ origins


def _origins(f: Callable[..., Any], *args: Any, names: Sequence[str] = ("x", "w")) -> origins.OriginsReport:
    with tempfile.TemporaryDirectory() as dump:
        jax.jit(f).lower(*args).compile(
            compiler_options={"xla_dump_to": dump, "xla_dump_hlo_pass_re": "shardy-verbose"}
        )
        text = origins.read_dump(dump)
    assert text is not None, "Shardy wrote no propagation dump"
    return origins.parse_origins(text, names)


def test_origins_name_the_constraint_and_the_input_a_sharding_came_from() -> None:
    mesh = mesh_of((2, 4), ("x", "y"))
    x, w = sharded(mesh, P("x", "y"), (8, 8)), sharded(mesh, P(None, "y"), (8, 8))

    def f(x: jax.Array, w: jax.Array) -> jax.Array:
        y = jnp.sin(x @ w)
        return jax.lax.with_sharding_constraint(y, NamedSharding(mesh, P("x", None)))

    report = _origins(f, x, w)
    by_op = {e.op: e for e in report.entries}
    dot = by_op["stablehlo.dot"]
    assert {(o.axis, o.origin) for o in dot.origins} == {("x", "constraint_0"), ("y", "input: 1")}
    assert any("input 1 (w)" in o.meaning for o in dot.origins)
    assert by_op["sdy.reshard"].name == "constraint_0" and by_op["sdy.reshard"].sharding == "P('x')"
    args = [e for e in report.entries if e.op == "argument"]
    assert [a.value for a in args] == ["%arg0 (x)", "%arg1 (w)"]
    assert args[0].sharding == "P('x', 'y')"


def test_origins_of_a_shard_map_and_its_output() -> None:
    mesh = mesh_of((2, 4), ("x", "y"))
    x = sharded(mesh, P("x", "y"), (8, 16))
    f = jax.shard_map(lambda b: jax.lax.psum(b, "y"), mesh=mesh, in_specs=P("x", "y"), out_specs=P("x", None))
    g = jax.jit(f, out_shardings=NamedSharding(mesh, P(None, "y")))
    report = _origins(g, x, names=("x",))
    assert any(o.origin == "mc_0_input: 0" for e in report.entries for o in e.origins)
    out = report.outputs[0]
    assert out is not None and out.sharding == "P(None, 'y')"
    # jit's out_shardings reach Shardy as a sharding constraint on the result.
    assert {(o.axis, o.origin) for o in out.origins} >= {("y", "constraint_0")}
    assert any("shard_map #0" in o.meaning for e in report.entries for o in e.origins)


def test_sdy_shardings_as_specs() -> None:
    assert origins.sharding_to_spec('#sdy.sharding<@mesh, [{"x"}, {}]>') == "P('x')"
    assert origins.sharding_to_spec('#sdy.sharding<@mesh, [{}, {"x", "y"}]>') == "P(None, ('x', 'y'))"
    assert origins.sharding_to_spec('#sdy.sharding<@mesh, [{"x":(1)2}, {?}]>') == "P('x:(1)2', UNCONSTRAINED)"
    assert origins.sharding_to_spec("#sdy.sharding<@mesh, [{}, {}]>") == "P()"
    assert origins.explain("mc_2_output: 1") == "from shard_map #2's out_specs[1]"


# ---- the serialiser both the kernel lab and inspect_jit use -------------------------------------------


def test_read_collectives_maps_every_spelling_to_device_ids() -> None:
    """XLA's spellings (explicit, iota, mesh axes with device_ids and sub-axes), element types this CPU
    build never prints (f8e4m3fn) and collective-broadcast, read into device ids by the one serialiser."""
    hlo_text = "\n".join(
        [
            "HloModule m, num_partitions=4",
            "%a = f32[4,32]{1,0} all-reduce(%x), channel_id=1, replica_groups={{0,1},{2,3}}, to_apply=%add",
            "%b = f32[8]{0} all-gather(%y), replica_groups=[2,2]<=[2,2]T(1,0), dimensions={0}",
            "%c = f32[] all-reduce(%z), replica_groups=mesh['a'=2,'b'=2] {'a'}, to_apply=%add",
            "%d = (f32[2], bf16[4]) all-to-all(%p, %q), replica_groups={}",
            "%e = f8e4m3fn[16]{0} all-gather(%w), replica_groups=mesh['a'=2,'b'=2], device_ids=([2,2]T(1,0)) {'b'}",
            "%f = f32[4]{0} all-reduce(%v), replica_groups=mesh['a'=4] {'a':(2)2}, to_apply=%add",
            "%g = s32[3]{0} collective-broadcast(%u), replica_groups={{0,1,2,3}}",
            "ROOT %h = f32[2]{0} collective-permute(%t), source_target_pairs={{0,1},{1,0}}",
        ]
    )
    devices = [10, 11, 12, 13]
    got = read_collectives(hlo_text, [devices], [[10, 11], [12, 13]], ("a", "b"))
    assert [c["op"] for c in got] == [
        "all-reduce", "all-gather", "all-reduce", "all-to-all", "all-gather", "all-reduce",
        "collective-broadcast", "collective-permute",
    ]  # fmt: skip
    assert got[0]["groups"] == [[10, 11], [12, 13]] and got[0]["bytes"] == 512 and got[0]["axes"] == ["b"]
    assert got[1]["groups"] == [[10, 12], [11, 13]] and got[1]["axes"] == ["a"]  # iota [2,2] transposed
    assert got[2]["groups"] == [[10, 12], [11, 13]]  # along axis 'a'
    assert got[3]["groups"] == [[10, 11, 12, 13]] and got[3]["bytes"] == 16
    # device_ids=([2,2]T(1,0)) is the mesh [[0,2],[1,3]]: along 'b' the groups are its rows
    assert got[4]["groups"] == [[10, 12], [11, 13]] and got[4]["bytes"] == 16  # one byte per f8 element
    assert got[5]["groups"] == [[10, 11], [12, 13]]  # 'a':(2)2: the minor half of a (major sub-axis of size 2)
    assert got[6]["groups"] == [[10, 11, 12, 13]] and got[6]["bytes"] == 12
    assert got[7]["pairs"] == [[10, 11], [11, 10]] and got[7]["axes"] == ["b"]
    without_mesh = read_collectives(hlo_text, [devices], None, ())
    assert [c["groups"] for c in without_mesh] == [c["groups"] for c in got] and without_mesh[0]["axes"] is None
    per_slice = read_collectives(hlo_text, [devices, [20, 21, 22, 23]], None, ())
    assert per_slice[0]["groups"] == [[10, 11], [12, 13], [20, 21], [22, 23]]  # every copy of the program


def test_results_name_source_files_relative_to_their_package() -> None:
    text = (
        'metadata={op_name="jit(f)" source_file="/srv/app/sharding_core/kernels/catalog.py" source_line=3} '
        'metadata={source_file="/home/u/.venv/lib/python3.11/site-packages/optax/_src/base.py" source_line=9} '
        'metadata={source_file="/tmp/x/user_script.py"}\n'
        "FileNames\n"
        '1 "<string>"\n'
        '2 "/srv/app/sharding_core/kernels/worker.py"\n'
    )
    scrubbed = build.scrub_paths(text)
    assert '"sharding_core/kernels/catalog.py"' in scrubbed and '"site-packages/optax/_src/base.py"' in scrubbed
    assert '"user_script.py"' in scrubbed and "/srv" not in scrubbed and "/home" not in scrubbed
    assert '2 "sharding_core/kernels/worker.py"' in scrubbed and '1 "<string>"' in scrubbed
