"""Every spelling that differs across the declared JAX versions, handled by ``sharding_core.compat``.

The locked JAX has one spelling of each; the others are made here by taking the newer API away
(``monkeypatch.delattr``) or by stand-ins with the older answer's shape, and each form must give JAX's
own result. HLO text: collective lines as XLA printed them under JAX 0.8.0, 0.9.2, 0.10.2, 0.11.2 and 0.12.0.1
(one program each, compiled on 8 CPU devices) parse to the same groups, which are what ``psum`` over
those mesh axes means.
"""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

from sharding_core import compat
from sharding_core.hlo.text import parse_collectives, parse_replica_groups


def mesh_2x4(types: str = "Auto") -> jax.sharding.Mesh:
    return jax.make_mesh((2, 4), ("x", "y"), axis_types=(AxisType[types],) * 2)


# ---- shard_map -------------------------------------------------------------------------------------------


def test_shard_map_public_and_experimental_give_the_same_program(monkeypatch: pytest.MonkeyPatch) -> None:
    mesh = mesh_2x4()
    x = jax.device_put(jnp.arange(32.0).reshape(4, 8), NamedSharding(mesh, P("x", "y")))

    def total(a: jax.Array) -> jax.Array:
        return jax.lax.psum(a, ("x", "y"))

    public = jax.jit(compat.shard_map(total, mesh=mesh, in_specs=P("x", "y"), out_specs=P()))(x)
    monkeypatch.delattr(jax, "shard_map")  # JAX before 0.7: only jax.experimental.shard_map
    with pytest.warns(DeprecationWarning, match="shard_map"):  # the old module warns on import from 0.8
        old = compat.shard_map(total, mesh=mesh, in_specs=P("x", "y"), out_specs=P(), check=False)
    expected = np.asarray(x).reshape(2, 2, 4, 2).sum(axis=(0, 2))  # the sum of the 8 blocks
    np.testing.assert_array_equal(np.asarray(public), expected)
    np.testing.assert_array_equal(np.asarray(jax.jit(old)(x)), expected)


# ---- the mesh in effect -------------------------------------------------------------------------------------


def test_set_mesh_and_ambient_mesh_with_set_mesh() -> None:
    mesh = mesh_2x4()
    assert compat.ambient_mesh() is None
    with compat.set_mesh(mesh):
        assert compat.ambient_mesh() == mesh
    assert compat.ambient_mesh() is None


def test_ambient_mesh_on_jax_08_without_get_mesh(monkeypatch: pytest.MonkeyPatch) -> None:
    # JAX 0.8 has jax.set_mesh but no public jax.sharding.get_mesh: the private getter answers.
    monkeypatch.delattr(jax.sharding, "get_mesh")
    mesh = mesh_2x4()
    with compat.set_mesh(mesh):
        assert compat.ambient_mesh() == mesh
    assert compat.ambient_mesh() is None


def test_set_mesh_falls_back_to_the_legacy_with_mesh(monkeypatch: pytest.MonkeyPatch) -> None:
    # Neither jax.set_mesh nor jax.sharding.use_mesh: `with mesh:`, found through thread_resources.
    monkeypatch.delattr(jax, "set_mesh")
    monkeypatch.delattr(jax.sharding, "use_mesh", raising=False)
    mesh = mesh_2x4()
    with pytest.warns(DeprecationWarning, match="with mesh"), compat.set_mesh(mesh):  # deprecated since 0.7
        assert compat.ambient_mesh() == mesh
    assert compat.ambient_mesh() is None


def test_context_mesh_is_set_mesh_s_only_and_none_inside_jit(monkeypatch: pytest.MonkeyPatch) -> None:
    mesh = mesh_2x4("Explicit")
    assert compat.context_mesh() is None
    with compat.set_mesh(mesh):
        assert compat.context_mesh() == mesh
        seen = []
        jax.jit(lambda a: seen.append(compat.context_mesh()) or a)(jnp.ones(4))  # get_mesh refuses in a trace
        assert seen == [None]
        monkeypatch.delattr(jax.sharding, "get_mesh")  # JAX 0.8: the private get_concrete_mesh
        assert compat.context_mesh() == mesh
    assert compat.context_mesh() is None


def test_device_order_and_committed_are_what_jit_compares() -> None:
    mesh = jax.sharding.Mesh(np.array(jax.devices()[::-1]).reshape(2, 4), ("x", "y"))
    x = jax.device_put(jnp.ones((8, 8)), NamedSharding(mesh, P("x")))
    assert compat.device_order(x.sharding) == tuple(range(7, -1, -1))  # mesh order, not sorted
    one = jax.device_put(jnp.ones(4), jax.devices()[3])
    assert compat.device_order(one.sharding) == (3,)
    assert compat.committed(x) and compat.committed(one) and not compat.committed(jnp.ones(4))
    assert compat.committed(jax.ShapeDtypeStruct((4,), jnp.float32, sharding=x.sharding))
    assert not compat.committed(jax.ShapeDtypeStruct((4,), jnp.float32))

    class Public:  # a JAX that makes it public: ``committed``
        committed = False

    assert not compat.committed(Public())


# ---- axis types --------------------------------------------------------------------------------------------


def test_axis_types_by_name_and_the_mesh_constructor() -> None:
    assert compat.has_axis_types()
    assert compat.axis_types(["auto", "Explicit"]) == (AxisType.Auto, AxisType.Explicit)
    devices = np.array(jax.devices()[:8]).reshape(2, 4)
    mesh = compat.make_mesh(devices, ("x", "y"), ["Explicit", "Auto"])
    assert mesh.axis_types == (AxisType.Explicit, AxisType.Auto)
    assert compat.mesh_axis_types(mesh) == ("Explicit", "Auto")
    # jax.make_mesh's own default, whatever this JAX makes it (Explicit from 0.9, Auto in 0.8)
    want = jax.make_mesh((1,), ("a",), devices=jax.devices()[:1]).axis_types[0].name
    assert compat.make_mesh_axis_type(jax.devices()[0]) == want


def test_without_axis_types_every_axis_is_auto(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(jax.sharding, "AxisType")
    assert not compat.has_axis_types()
    assert compat.axis_types(["Auto", "auto"]) is None
    with pytest.raises(ValueError, match="Auto only"):
        compat.axis_types(["Explicit"])

    class OldMesh:  # a Mesh of a JAX without axis types
        axis_names = ("x", "y")

    assert compat.mesh_axis_types(OldMesh()) == ("Auto", "Auto")
    mesh = compat.make_mesh(np.array(jax.devices()[:8]).reshape(2, 4), ("x", "y"), ["Auto", "Auto"])
    assert mesh.axis_names == ("x", "y")  # built without axis_types=


# ---- PartitionSpec -------------------------------------------------------------------------------------------


def test_spec_entries_with_and_without_partitions() -> None:
    spec = P("x", None, ("x", "y"))
    assert compat.spec_entries(spec) == ("x", None, ("x", "y"))

    class Spec08(tuple):  # type: ignore[type-arg] - JAX 0.8 and 0.9: entries by iteration, no .partitions
        pass

    assert compat.spec_entries(Spec08(("x", None))) == ("x", None)


@pytest.mark.parametrize(
    ("printed", "canonical"),
    [
        ("P('x', None)", "P('x', None)"),  # JAX 0.9-0.11
        ("PartitionSpec('x', None)", "P('x', None)"),  # JAX 0.8
        ("PartitionSpec()", "P()"),
        ("P('x', unreduced={'y'}, unreduced_kind=sum)", "P('x', unreduced={'y'})"),  # 0.12: the default kind
        ("P('x', unreduced={'y'}, unreduced_kind=max)", "P('x', unreduced={'y'}, unreduced_kind=max)"),
        ("P('unreduced_kind=sum')", "P('unreduced_kind=sum')"),  # an axis name is not the keyword
    ],
)
def test_spec_repr_is_one_spelling(printed: str, canonical: str) -> None:
    class Printed:
        def __repr__(self) -> str:
            return printed

    assert compat.spec_repr(Printed()) == canonical


def test_spec_repr_of_this_jax() -> None:
    assert compat.spec_repr(P("x", None)) == "P('x', None)"
    assert compat.spec_repr(P(("x", "y"))) == "P(('x', 'y'),)"


def test_jax_012s_unreduced_kind_is_parsed_as_that_jax_takes_it(monkeypatch: pytest.MonkeyPatch) -> None:
    # JAX 0.12 prints `unreduced_kind=sum` in every unreduced spec (print(x.sharding) pastes carry it).
    from sharding_core.errors import ShardingError
    from sharding_core.spec import parse_spec

    plain = parse_spec("P('x', unreduced={'y'})")
    for text in ("sum", "UnreducedKind.sum", "jax.sharding.UnreducedKind.sum", "'sum'"):
        assert parse_spec(f"P('x', unreduced={{'y'}}, unreduced_kind={text})") == plain
    kinds = compat.unreduced_kinds()
    with pytest.raises(ShardingError) as err:
        parse_spec("P('x', unreduced={'y'}, unreduced_kind=mean)")
    assert err.value.code == "parse_error" and err.value.details["column"] == 40
    assert f"expected one of {', '.join(kinds)}" in err.value.message

    import enum

    class UnreducedKind(enum.Enum):  # JAX 0.12's
        sum = 1
        max = 2
        min = 3

    monkeypatch.setattr(jax.sharding, "UnreducedKind", UnreducedKind, raising=False)
    assert compat.unreduced_kinds() == {"sum": UnreducedKind.sum, "max": UnreducedKind.max, "min": UnreducedKind.min}


# ---- collectives inside shard_map ----------------------------------------------------------------------------


@pytest.mark.parametrize("form", ["to", "all_gather_invariant", "plain"])
def test_all_gather_invariant_in_each_form(form: str, monkeypatch: pytest.MonkeyPatch) -> None:
    mesh = mesh_2x4()
    x = jax.device_put(jnp.arange(32.0).reshape(8, 4), NamedSharding(mesh, P("y", None)))
    real = jax.lax.all_gather

    def old_all_gather(a: Any, axes: Any, *, axis: int = 0, tiled: bool = False) -> Any:
        return real(a, axes, axis=axis, tiled=tiled)

    def all_gather_invariant(a: Any, axes: Any, *, axis: int, tiled: bool) -> Any:
        return real(a, axes, axis=axis, tiled=tiled, to="invarying")

    if form != "to":  # JAX 0.8: no to= on all_gather (and before it, no all_gather_invariant either)
        monkeypatch.setattr(jax.lax, "all_gather", old_all_gather)
    if form == "all_gather_invariant":
        monkeypatch.setattr(jax.lax, "all_gather_invariant", all_gather_invariant, raising=False)
    else:
        monkeypatch.delattr(jax.lax, "all_gather_invariant", raising=False)
    check = None if form != "plain" else False  # a plain gather is varying: only unchecked specs take it
    f = compat.shard_map(
        lambda a: compat.all_gather_invariant(a, "y", axis=0, tiled=True),
        mesh=mesh, in_specs=P("y", None), out_specs=P(None, None), check=check,
    )  # fmt: skip
    np.testing.assert_array_equal(np.asarray(jax.jit(f)(x)), np.arange(32.0).reshape(8, 4))


# ---- compiled programs ------------------------------------------------------------------------------------


class Compiled:
    """A stand-in with an older JAX's answers."""

    def __init__(self, input_shardings: Any = None, cost: Any = None) -> None:
        self.input_shardings = input_shardings
        self._cost = cost

    def cost_analysis(self) -> Any:
        return self._cost


def test_input_shardings_in_each_form() -> None:
    mesh = mesh_2x4()
    x = jax.device_put(jnp.ones((8, 16)), NamedSharding(mesh, P("x", "y")))
    compiled = jax.jit(lambda a, *, b: a * b).lower(x, b=2.0).compile()
    args, kwargs = compat.input_shardings(compiled)  # this JAX: the pytree (args, kwargs)
    assert args[0].is_equivalent_to(x.sharding, 2) and set(kwargs) == {"b"}
    flat = compat.input_shardings(Compiled(input_shardings=[x.sharding, x.sharding]))  # older: one per argument
    assert flat == ((x.sharding, x.sharding), {})


def test_cost_analysis_dict_list_or_nothing() -> None:
    compiled = jax.jit(lambda a: a @ a).lower(jnp.ones((8, 8))).compile()
    cost = compat.cost_analysis(compiled)
    assert cost["flops"] == 2 * 8**3  # XLA's count of a matmul: 2 n^3
    assert compat.cost_analysis(Compiled(cost=[{"flops": 3.0}, {"flops": 9.0}])) == {"flops": 3.0}  # older JAX
    assert compat.cost_analysis(Compiled(cost=[])) == {}
    assert compat.cost_analysis(Compiled(cost=None)) == {}


# ---- shardings ----------------------------------------------------------------------------------------------


SPEC_PAIRS = [
    (P("x"), P("x", None), True),
    (P(("x",)), P("x"), True),
    (P(("x", "y")), P(("x", "y"), None), True),
    (P("x"), P("y"), False),
    (P(("x", "y")), P(("y", "x")), False),
    (P(None, "y"), P("y"), False),
    (P(), P(None, None), True),
]


@pytest.mark.parametrize(("a", "b", "same"), SPEC_PAIRS)
def test_equivalent_is_jaxs_and_the_fallback_agrees(
    a: Any, b: Any, same: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    mesh = mesh_2x4()
    sa, sb = NamedSharding(mesh, a), NamedSharding(mesh, b)
    assert sa.is_equivalent_to(sb, 2) is same  # JAX's answer is the oracle
    assert compat.equivalent(sa, sb, 2) is same

    class WithoutMethod:  # a sharding of a JAX without is_equivalent_to
        def __init__(self, s: Any) -> None:
            self.device_set = s.device_set
            self.devices_indices_map = s.devices_indices_map

    assert compat.equivalent(WithoutMethod(sa), WithoutMethod(sb), 2) is same


def test_a_flax_box_on_its_declared_spec_written_another_way_is_not_marked() -> None:
    # Regression guard (issue 21): capture's own spec comparison (_same_spec) re-derived what
    # is_equivalent_to decides; P('x') and P('x', None) declared vs held must not be flagged.
    from sharding_core.capturing import _sharded_as_declared

    mesh = mesh_2x4()
    held = jax.device_put(jnp.ones((8, 16)), NamedSharding(mesh, P("x", None)))
    assert _sharded_as_declared(held, P("x"), 2)
    assert _sharded_as_declared(held, P(("x",), None), 2)
    assert not _sharded_as_declared(held, P("y"), 2)
    assert not _sharded_as_declared(held, P("nope"), 2)  # an axis the mesh lacks: not as declared
    assert not _sharded_as_declared(np.ones((8, 16)), P("x"), 2)  # host data has no named sharding


# ---- HLO text of every declared version ----------------------------------------------------------------------

# (program, mesh shape, axes the collective runs over) -> {JAX version: the collective line XLA printed}.
# Programs on 8 CPU devices: shard_map psum/all_gather/psum_scatter/all_to_all/ppermute over mesh axes, and
# jit reductions the SPMD partitioner turns into all-reduces. Metadata trimmed.
_AR = "use_global_device_ids=true, to_apply=%region_0.0"
SAMPLES: dict[tuple[str, tuple[int, ...], tuple[str, ...]], dict[str, str]] = {
    ("shard_map psum x", (2, 4), ("x",)): {
        "0.8.0": "ROOT %psum_invariant.7 = f32[4,4]{1,0} all-reduce(%param.1), channel_id=1, "
        f"replica_groups={{{{0,4}},{{1,5}},{{2,6}},{{3,7}}}}, {_AR}",
        "0.12.0.1": "ROOT %psum_invariant.7 = f32[4,4]{1,0} all-reduce(%param.1), channel_id=1, "
        f"replica_groups=mesh['x'=2,'y'=4] {{'x'}}, {_AR}",
    },
    ("shard_map psum y", (2, 4), ("y",)): {
        "0.9.2": "ROOT %psum_invariant.7 = f32[4,4]{1,0} all-reduce(%param.1), channel_id=1, "
        f"replica_groups={{{{0,1,2,3}},{{4,5,6,7}}}}, {_AR}",
        "0.12.0.1": "ROOT %psum_invariant.7 = f32[4,4]{1,0} all-reduce(%param.1), channel_id=1, "
        f"replica_groups=mesh['x'=2,'y'=4] {{'y'}}, {_AR}",
    },
    ("shard_map psum x,y", (2, 4), ("x", "y")): {
        "0.10.2": "ROOT %psum_invariant.7 = f32[4,4]{1,0} all-reduce(%param.1), channel_id=1, "
        f"replica_groups={{{{0,1,2,3,4,5,6,7}}}}, {_AR}",
        "0.12.0.1": "ROOT %psum_invariant.7 = f32[4,4]{1,0} all-reduce(%param.1), channel_id=1, "
        f"replica_groups=mesh['x'=2,'y'=4] {{'x','y'}}, {_AR}",
    },
    ("shard_map psum x,z", (2, 2, 2), ("x", "z")): {
        "0.8.0": "ROOT %psum.7 = f32[2,2,2]{2,1,0} all-reduce(%param.1), channel_id=1, "
        f"replica_groups={{{{0,1,4,5}},{{2,3,6,7}}}}, {_AR}",
        "0.12.0.1": "ROOT %psum.7 = f32[2,2,2]{2,1,0} all-reduce(%param.1), channel_id=1, "
        f"replica_groups=mesh['x'=2,'y'=2,'z'=2] {{'x','z'}}, {_AR}",
    },
    ("shard_map psum z,x", (2, 2, 2), ("z", "x")): {  # group members in the order the axes are named
        "0.8.0": "ROOT %psum.7 = f32[2,2,2]{2,1,0} all-reduce(%param.1), channel_id=1, "
        f"replica_groups={{{{0,4,1,5}},{{2,6,3,7}}}}, {_AR}",
        "0.11.2": "ROOT %psum.7 = f32[2,2,2]{2,1,0} all-reduce(%param.1), channel_id=1, "
        f"replica_groups=mesh['x'=2,'y'=2,'z'=2] {{'z','x'}}, {_AR}",
    },
    ("shard_map all_gather y", (2, 4), ("y",)): {
        "0.8.0": "%all_gather.3 = f32[4,16]{0,1} all-gather(%copy.2), channel_id=1, "
        "replica_groups={{0,1,2,3},{4,5,6,7}}, dimensions={1}, use_global_device_ids=true",
        "0.12.0.1": "%all_gather.3 = f32[4,16]{0,1} all-gather(%wrapped_copy), channel_id=1, "
        "replica_groups=mesh['x'=2,'y'=4] {'y'}, dimensions={1}, use_global_device_ids=true",
    },
    ("shard_map psum_scatter y", (2, 4), ("y",)): {
        "0.8.0": "%reduce_scatter.7 = f32[4,4]{0,1} reduce-scatter(%copy.2), channel_id=1, "
        "replica_groups={{0,1,2,3},{4,5,6,7}}, use_global_device_ids=true, dimensions={1}, to_apply=%r",
        "0.12.0.1": "%reduce_scatter.7 = f32[4,4]{0,1} reduce-scatter(%wrapped_copy), channel_id=1, "
        "replica_groups=mesh['x'=2,'y'=4] {'y'}, use_global_device_ids=true, dimensions={1}, to_apply=%r",
    },
    ("shard_map all_to_all y", (2, 4), ("y",)): {
        "0.10.2": "%all-to-all = (f32[1,4]{1,0}, f32[1,4]{1,0}, f32[1,4]{1,0}, f32[1,4]{1,0}) all-to-all(%s0, %s1, "
        "%s2, %s3), channel_id=1, replica_groups={{0,1,2,3},{4,5,6,7}}",
        "0.12.0.1": "%all-to-all = (f32[1,4]{1,0}, f32[1,4]{1,0}, f32[1,4]{1,0}, f32[1,4]{1,0}) all-to-all(%s0, %s1, "
        "%s2, %s3), channel_id=1, replica_groups=mesh['x'=2,'y'=4] {'y'}",
    },
    ("jit sum over dim 0 of P('x', 'y')", (2, 4), ("x",)): {
        "0.8.0": "ROOT %all-reduce = f32[4]{0} all-reduce(%wrapped_reduce), channel_id=1, "
        "replica_groups=[4,2]<=[2,4]T(1,0), use_global_device_ids=true, to_apply=%region_0.0.clone",
        "0.10.2": "ROOT %all-reduce = f32[4]{0} all-reduce(%wrapped_reduce), channel_id=1, "
        "replica_groups=mesh['axis_0'=2,'axis_1'=4] {'axis_0'}, use_global_device_ids=true, "
        "to_apply=%region_0.0.clone",
        "0.12.0.1": "ROOT %all-reduce = f32[4]{0} all-reduce(%wrapped_reduce), channel_id=1, "
        "replica_groups=mesh['x'=2,'y'=4] {'x'}, use_global_device_ids=true, to_apply=%region_0.0.clone, "
        'frontend_attributes={is_spmd_generated="true"}',
    },
    ("jit sum over dim 1 of P('x', 'y')", (2, 4), ("y",)): {
        "0.9.2": "ROOT %all-reduce = f32[4]{0} all-reduce(%wrapped_reduce), channel_id=1, "
        "replica_groups=[2,4]<=[8], use_global_device_ids=true, to_apply=%region_0.0.clone",
        "0.10.2": "ROOT %all-reduce = f32[4]{0} all-reduce(%wrapped_reduce), channel_id=1, "
        "replica_groups=mesh['axis_0'=2,'axis_1'=4] {'axis_1'}, use_global_device_ids=true, "
        "to_apply=%region_0.0.clone",
        "0.12.0.1": "ROOT %all-reduce = f32[4]{0} all-reduce(%wrapped_reduce), channel_id=1, "
        "replica_groups=mesh['x'=2,'y'=4] {'y'}, use_global_device_ids=true, to_apply=%region_0.0.clone, "
        'frontend_attributes={is_spmd_generated="true"}',
    },
}


def along(shape: tuple[int, ...], names: tuple[str, ...], axes: tuple[str, ...]) -> list[list[int]]:
    """Partition ids a collective over ``axes`` joins on a mesh of ``shape`` (partition ids in mesh order):
    those that agree on every other axis, listed along ``axes`` in the order named — ``psum(x, axes)``."""
    ids = np.arange(math.prod(shape)).reshape(shape)
    grouped = [names.index(a) for a in axes]
    rest = [d for d in range(len(shape)) if d not in grouped]
    rows: list[list[int]] = ids.transpose(rest + grouped).reshape(-1, math.prod(shape[d] for d in grouped)).tolist()
    return rows


@pytest.mark.parametrize("program", list(SAMPLES), ids=[p[0] for p in SAMPLES])
def test_every_versions_spelling_parses_to_the_same_groups(
    program: tuple[str, tuple[int, ...], tuple[str, ...]],
) -> None:
    _, shape, axes = program
    names = ("x", "y", "z")[: len(shape)]
    want = along(shape, names, axes)
    texts = SAMPLES[program]
    assert len(texts) >= 2  # at least two versions' spellings of the same program
    for version, line in texts.items():
        (collective,) = parse_collectives(f"HloModule m, num_partitions={math.prod(shape)}\n{line}")
        assert [list(g) for g in collective.groups] == want, (version, collective.replica_groups)


def test_the_samples_cover_every_spelling() -> None:
    # explicit lists, iota lists with and without a transpose, the partitioner's mesh['axis_0'=..] and the
    # replica-group v3 mesh['x'=..] {...} of shard_map (jax-ml/jax#36354), one axis and several
    lines = [line for texts in SAMPLES.values() for line in texts.values()]
    assert any("replica_groups={{" in t for t in lines)
    assert any("<=[2,4]T(1,0)" in t for t in lines) and any("<=[8]," in t for t in lines)
    assert any("mesh['axis_0'=" in t for t in lines)
    assert any("mesh['x'=2,'y'=2,'z'=2] {'z','x'}" in t for t in lines)
    versions = {v for texts in SAMPLES.values() for v in texts}
    assert versions == {"0.8.0", "0.9.2", "0.10.2", "0.11.2", "0.12.0.1"}


def test_mesh_axes_groups_with_device_ids_and_sub_axes_equal_the_explicit_lists() -> None:
    # The v3 form's optional parts, against the explicit list the same groups print as.
    explicit = parse_replica_groups("{{0,2},{1,3}}", 4)
    assert parse_replica_groups("mesh['a'=2,'b'=2], device_ids=([2,2]T(1,0)) {'b'}", 4) == explicit
    assert parse_replica_groups("mesh['a'=2,'b'=2], device_ids=(0,2,1,3) {'b'}", 4) == explicit
    assert parse_replica_groups("mesh['a'=4] {'a':(1)2}", 4) == explicit  # the major half of 'a'
    assert parse_replica_groups("mesh['a'=4] {'a':(2)2}", 4) == [[0, 1], [2, 3]]  # the minor half
