"""Sharding in types: where a mesh's axes are Explicit (``jax.make_mesh``'s default from JAX 0.9), an array's
sharding is part of its type, and layouts, captures, plans and ``shardscope preview`` show it as JAX prints it.

The oracle is ``str(jax.typeof(x))`` of a real array placed on this process's 8 CPU devices (or of the traced
value, or of the jitted function's real output); the product's ``typed`` comes from another path (a
``ShapeDtypeStruct`` on the layout's mesh, a compiled program's shardings). ``tests/wheel_surface.py`` runs the
same comparison from the installed wheel on the oldest declared JAX and, in ``make newest-jax``, the newest.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from fastapi.testclient import TestClient
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

import sharding_core
from sharding_core import compat
from sharding_core.devices import parse_devices
from sharding_core.layout import Layout
from sharding_core.mesh import MeshSpec
from sharding_core.render import summary_text

TYPES = {
    "explicit": (AxisType.Explicit, AxisType.Explicit),
    "mixed": (AxisType.Explicit, AxisType.Auto),
    "auto": (AxisType.Auto, AxisType.Auto),
}
SPECS = [
    P("x", "y"),
    P("y", "x"),
    P(("x", "y"), None),
    P(None, "y"),
    P(),
    P("x", None, unreduced={"y"}),
    P("x", None, reduced={"y"}),
    P(None, "y", unreduced={"x"}),
]


def unreduced_or_reduced(spec: P) -> bool:
    return bool(spec.unreduced or spec.reduced)


# unreduced and reduced axes must be Explicit: JAX refuses them on Auto axes (not a case to lay out)
CASES = [(t, s) for t in TYPES for s in SPECS if t == "explicit" or not unreduced_or_reduced(s)]


def mesh_of(types: str) -> jax.sharding.Mesh:
    return jax.make_mesh((2, 4), ("x", "y"), axis_types=TYPES[types])


def placed(mesh: jax.sharding.Mesh, spec: P, dtype: Any = jnp.float32) -> jax.Array:
    return jax.device_put(jnp.zeros((8, 16), dtype), NamedSharding(mesh, spec))


@pytest.mark.parametrize(("types", "spec"), CASES, ids=[f"{t}-{s!r}" for t, s in CASES])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "int8"])
def test_a_layouts_typed_is_jax_typeof_of_the_array_it_places(types: str, spec: P, dtype: str) -> None:
    x = placed(mesh_of(types), spec, dtype)
    want = str(jax.typeof(x))
    assert Layout.from_sharding(x.sharding, x.shape, x.dtype).typed == want
    # the layout explorer's path: the same mesh over simulated CPU devices
    names = ("explicit", "auto") if types == "mixed" else (types, types)
    named = Layout.from_named(
        parse_devices("cpu:8"), MeshSpec((2, 4), ("x", "y"), axis_types=names), spec, (8, 16), dtype
    )
    assert named.typed == want
    assert named.to_json()["typed"] == named.to_json(context=False)["typed"] == want
    explicit = {"explicit": {"x", "y"}, "mixed": {"x"}, "auto": set()}[types]
    entries = compat.spec_entries(spec)
    used = {a for e in entries for a in ((e,) if isinstance(e, str) else e or ())} | set(spec.unreduced | spec.reduced)
    # the type names an axis exactly where the spec uses it and it is Explicit (Auto axes are not in the type)
    assert ("@" in want or "{" in want) == bool(used & explicit), (want, used, explicit)


def test_the_states_of_unreduced_and_reduced_axes_are_in_the_type() -> None:
    mesh = mesh_of("explicit")
    for spec, mark in ((P("x", None, unreduced={"y"}), "{U:y}"), (P("x", None, reduced={"y"}), "{R:y}")):
        x = placed(mesh, spec)
        assert str(jax.typeof(x)).endswith(mark)  # JAX's own spelling (0.10), read off JAX, never rebuilt
        assert Layout.from_sharding(x.sharding, x.shape, x.dtype).typed == str(jax.typeof(x))


def test_api_layout_answers_typed(client: TestClient) -> None:
    body = {"devices": "cpu:8", "mesh": {"shape": [2, 4], "axis_names": ["x", "y"]}, "spec": "P('x', 'y')"}
    r = client.post("/api/layout", json={**body, "shape": [8, 16]})
    assert r.status_code == 200
    # jax.make_mesh's default axis type (Explicit on the locked JAX): the typed sharding
    assert r.json()["typed"] == str(jax.typeof(placed(jax.make_mesh((2, 4), ("x", "y")), P("x", "y"))))


def test_preview_prints_the_type_where_axes_are_explicit() -> None:
    for types, shown in (("explicit", True), ("mixed", True), ("auto", False)):
        x = placed(mesh_of(types), P("x", "y"))
        text = summary_text(Layout.from_sharding(x.sharding, x.shape, x.dtype))
        assert (f"\ntype {jax.typeof(x)} (jax.typeof: Explicit axes " in text) == shown, text


def test_captured_leaves_are_typed_as_jax_types_them() -> None:
    mesh = mesh_of("explicit")
    values = {
        "explicit": placed(mesh, P("x", "y")),
        "auto": placed(mesh_of("auto"), P("x", "y")),
        "weak": jnp.asarray(2.0),  # a weak type prints ~float32[]
        "planned": jax.ShapeDtypeStruct((4, 8), jnp.bfloat16, sharding=NamedSharding(mesh, P(None, ("x", "y")))),
        "unreduced": placed(mesh, P("x", None, unreduced={"y"})),
    }
    snap = sharding_core.capture(values)
    got = {leaf["path"]: leaf["typed"] for leaf in snap["leaves"]}
    assert got == {k: str(jax.typeof(v)) for k, v in values.items()}
    assert got["weak"].startswith("~")
    by_leaf = {
        leaf["path"]: snap["layouts"][leaf["layout"]]["typed"] for leaf in snap["leaves"] if leaf["layout"] is not None
    }
    assert by_leaf["explicit"] == got["explicit"] and by_leaf["unreduced"] == got["unreduced"]


def test_a_value_captured_inside_jit_has_its_traced_type() -> None:
    """Regression: capture inside a jitted function raised JAX's "`get_mesh` can only be used outside of
    `jax.jit`" (the capture asked for the concrete mesh of jax.set_mesh, which a trace does not give)."""
    mesh = mesh_of("explicit")
    seen: dict[str, Any] = {}

    @jax.jit
    def f(a: jax.Array) -> jax.Array:
        b = jax.sharding.reshard(a * 2, NamedSharding(mesh, P(None, ("x", "y"))))
        seen["snap"], seen["type"] = sharding_core.capture({"b": b}), str(jax.typeof(b))
        return b

    f(placed(mesh, P("x", "y")))
    assert seen["snap"]["leaves"][0]["typed"] == seen["type"] == "float32[8,16@(x,y)]"


@pytest.mark.parametrize(
    "f",
    [
        lambda a: a * 2,
        lambda a: a.sum(0),  # the sum over x leaves y's split in the type
        lambda a: jax.sharding.reshard(a, NamedSharding(mesh_of("explicit"), P(None, ("x", "y")))),
        lambda a: jax.sharding.reshard(a, NamedSharding(mesh_of("explicit"), P("y", None))),
    ],
    ids=["scale", "sum", "reshard-to-columns", "reshard-to-y"],
)
def test_inspect_jit_and_plan_leaves_are_the_types_jit_gives(f: Any) -> None:
    x = placed(mesh_of("explicit"), P("x", "y"))
    real = jax.jit(f)(x)
    for snap in (sharding_core.inspect_jit(jax.jit(f), x), sharding_core.plan(jax.jit(f), x)):
        leaves = {leaf["path"]: leaf for leaf in snap["leaves"]}
        assert leaves["inputs/args/0"]["typed"] == str(jax.typeof(x))
        assert leaves["outputs"]["typed"] == str(jax.typeof(real))
        assert snap["layouts"][leaves["outputs"]["layout"]]["typed"] == str(jax.typeof(real))


@pytest.mark.tpu
def test_a_planned_argument_on_compile_only_devices_is_typed_as_its_shape_dtype_struct() -> None:
    import shardscope

    mesh = shardscope.mesh("tpu:v5e:2x4", (2, 4), ("data", "model"), axis_types=("explicit", "explicit"))
    w = jax.ShapeDtypeStruct((1024, 512), jnp.bfloat16, sharding=NamedSharding(mesh, P("model", None)))
    snap = sharding_core.plan(jax.jit(lambda a: a * 2), w)
    leaves = {leaf["path"]: leaf for leaf in snap["leaves"]}
    assert leaves["inputs/args/0"]["typed"] == str(jax.typeof(w)) == "bfloat16[1024@model,512]"


# ---- the helpers (sharding_core.compat) -----------------------------------------------------------------


def test_typeof_text_is_jax_typeof_and_sharded_type_text_refuses_in_none() -> None:
    mesh = mesh_of("explicit")
    x = placed(mesh, P("x", "y"))
    assert compat.typeof_text(x) == str(jax.typeof(x))
    assert compat.sharded_type_text((8, 16), np.float32, x.sharding) == str(jax.typeof(x))
    assert compat.sharded_type_text((8,), np.float32, x.sharding) is None  # rank 1 under a rank-2 spec
    assert compat.has_explicit_axes(mesh) and not compat.has_explicit_axes(mesh_of("auto"))
    assert compat.has_explicit_axes(mesh_of("mixed"))


def test_a_trees_text_has_a_typed_column_where_axes_are_explicit() -> None:
    from shardscope.notebook import snapshot_text

    x = placed(mesh_of("explicit"), P("x", "y"))
    a = placed(mesh_of("auto"), P("x", "y"))
    text = snapshot_text(sharding_core.capture({"x": x, "a": a}))
    header, row_a, row_x = text.splitlines()[1:4]
    column = header.index("typed")
    assert row_x[column:].split()[0] == str(jax.typeof(x))
    assert row_a[column:].split()[0] == "-"  # an Auto mesh: nothing typed
    assert "typed" not in snapshot_text(sharding_core.capture({"a": a}))
