"""``inspect_jit`` and the kernel lab read compiled HLO with one reader and report the same collectives.

Each program below is run by the kernel lab's runner (the code a worker runs, here in-process on
this process's 8 CPU devices) and captured by ``inspect_jit`` on the same devices at the same mesh
positions; the two must report the same ops, device groups, permute pairs and byte counts. The
programs cover every spelling of replica groups this XLA prints — ``mesh[...]`` with and without
``device_ids=(...)``, groups that are sub-axes of the user's mesh, explicit ``{{...}}`` lists and
``source_target_pairs`` — and byte counts; some groups are checked against the mesh itself (JAX's
``Mesh.device_ids``). Spellings and element types this CPU build never prints (iota lists, named
sub-axes, ``f8e4m3fn``, ``collective-broadcast``) are read by the same reader and unit-tested on
XLA's own text in ``tests/test_hlo.py``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import AxisType, Mesh, NamedSharding

import sharding_core
from sharding_core.kernels import catalog, runner
from sharding_core.kernels.catalog import Built, Kernel, KernelContext, KernelInput
from sharding_core.kernels.plan import plan_run
from sharding_core.mesh import MeshSpec
from sharding_core.spec import parse_spec


@dataclasses.dataclass(frozen=True)
class Program:
    name: str
    mesh_shape: tuple[int, ...]
    axis_names: tuple[str, ...]
    device_ids: tuple[int, ...]  # real = simulated ids (cpu:8), in mesh order
    spec: str
    shape: tuple[int, ...]
    fn: Callable[[KernelContext], Callable[..., Any]]
    mode: str = "jit"


def _jit(f: Callable[..., Any]) -> Callable[[KernelContext], Callable[..., Any]]:
    return lambda ctx: f


def _ppermute(ctx: KernelContext) -> Callable[..., Any]:
    n = ctx.mesh.shape["x"]
    return jax.shard_map(
        lambda v: jax.lax.ppermute(v, "x", [(i, (i + 3) % n) for i in range(n)]),
        mesh=ctx.mesh,
        in_specs=ctx.in_specs,
        out_specs=ctx.in_specs[0],
    )


def _all_to_all(ctx: KernelContext) -> Callable[..., Any]:
    return jax.shard_map(
        lambda v: jax.lax.all_to_all(v, "x", 0, 0, tiled=True),
        mesh=ctx.mesh,
        in_specs=ctx.in_specs,
        out_specs=ctx.in_specs[0],
    )


def _gather(ctx: KernelContext) -> Callable[..., Any]:
    replicated = NamedSharding(ctx.mesh, parse_spec("P()"))
    return lambda v: jax.lax.with_sharding_constraint(v * 2, replicated)


IOTA = tuple(range(8))
SHUFFLED = (3, 1, 0, 2, 7, 5, 4, 6)
PROGRAMS = (
    # the example: P('y', 'x') summed over dim 0 -> all-reduce over y, mesh[...] with device_ids=(...)
    Program("sum0_yx", (2, 4), ("x", "y"), IOTA, "P('y', 'x')", (8, 16), _jit(lambda v: v.sum(0))),
    Program("sum1_xy", (2, 4), ("x", "y"), IOTA, "P('x', 'y')", (8, 16), _jit(lambda v: v.sum(1))),  # plain mesh[...]
    Program("sum0_shuffled", (2, 4), ("x", "y"), SHUFFLED, "P('y', 'x')", (8, 16), _jit(lambda v: v.sum(0))),
    # a reduction over part of the axis x: groups that are sub-axes of the user's 1-D mesh
    Program("reshape_sum", (8,), ("x",), IOTA, "P('x')", (8, 16), _jit(lambda v: v.reshape(2, 4, 16).sum(0))),
    Program("gather", (2, 4), ("x", "y"), SHUFFLED, "P(('x', 'y'))", (8, 16), _gather),
    Program("ppermute", (8,), ("x",), SHUFFLED, "P('x')", (8, 4), _ppermute, "shard_map"),
    Program("all_to_all", (8,), ("x",), IOTA, "P('x')", (64, 4), _all_to_all, "shard_map"),
)


@pytest.fixture(scope="module", autouse=True)
def kernels() -> Iterator[None]:
    for p in PROGRAMS:
        catalog.register(
            Kernel(
                f"agree_{p.name}",
                p.name,
                "a test program",
                lambda ctx, p=p: Built(p.fn(ctx)),  # type: ignore[misc]
                (KernelInput("a", p.shape, p.spec),),
                mode=p.mode,
                mesh_shape=p.mesh_shape,
                axis_names=p.axis_names,
                outputs=None,
            )
        )
    yield
    for p in PROGRAMS:
        catalog.unregister(f"agree_{p.name}")


def kernel_lab(p: Program) -> list[dict[str, Any]]:
    mesh = MeshSpec(p.mesh_shape, p.axis_names, axis_types=("auto",) * len(p.mesh_shape), order="devices",
                    device_ids=p.device_ids)  # fmt: skip
    plan = plan_run(f"agree_{p.name}", "cpu:8", mesh, None)
    result = runner.run_job(plan.job)
    collectives: list[dict[str, Any]] = result["collectives"]
    return collectives


def captured(p: Program) -> list[dict[str, Any]]:
    devices = {d.id: d for d in jax.devices()}
    grid = np.empty(len(p.device_ids), dtype=object)
    grid[:] = [devices[i] for i in p.device_ids]
    mesh = Mesh(grid.reshape(p.mesh_shape), p.axis_names, axis_types=(AxisType.Auto,) * len(p.mesh_shape))
    spec = parse_spec(p.spec)
    ctx = KernelContext(mesh, (spec,), (p.shape,), None, {})
    arg = jax.ShapeDtypeStruct(p.shape, jnp.float32, sharding=NamedSharding(mesh, spec))
    with jax.set_mesh(mesh):
        snap = sharding_core.inspect_jit(p.fn(ctx), arg)
    collectives: list[dict[str, Any]] = snap["collectives"]
    return collectives


def summary(collectives: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [(c["op"], c["groups"], c["pairs"], c["bytes"], c["axes"]) for c in collectives]


@pytest.mark.parametrize("p", PROGRAMS, ids=lambda p: p.name)
def test_inspect_jit_reports_what_the_kernel_lab_reports(p: Program) -> None:
    lab, cap = kernel_lab(p), captured(p)
    assert lab, f"{p.name} compiled no collective"
    assert summary(cap) == summary(lab)
    assert all(c["groups"] is not None for c in cap)


def test_the_programs_cover_every_spelling_this_xla_prints() -> None:
    texts = [c["replica_groups"] for p in PROGRAMS for c in kernel_lab(p)]
    assert any(t.startswith("mesh[") and "device_ids=(" in t for t in texts)
    assert any(t.startswith("mesh[") and "device_ids" not in t for t in texts)
    assert any(t.startswith("{{") for t in texts)  # explicit lists (and source_target_pairs)


def test_groups_are_the_meshs_own() -> None:
    rows = np.asarray(IOTA).reshape(2, 4)
    (reduce,) = captured(PROGRAMS[0])
    assert reduce["op"] == "all-reduce" and reduce["groups"] == rows.tolist()  # along y: the mesh's rows
    assert reduce["axes"] == ["y"] and reduce["exact_axes"] is True
    shuffled = np.asarray(SHUFFLED).reshape(2, 4)
    (reduce,) = captured(PROGRAMS[2])
    assert sorted(map(sorted, reduce["groups"])) == sorted(map(sorted, shuffled.tolist()))
    (sub,) = [c for c in captured(PROGRAMS[3]) if c["op"] == "all-reduce"]
    assert sub["groups"] == [[i, i + 4] for i in range(4)] and sub["axes"] == ["x:(1)2"]
    gathers = captured(PROGRAMS[4])
    assert [(c["shape"], c["bytes"], c["groups"]) for c in gathers] == [("f32[8,16]", 8 * 16 * 4, [list(SHUFFLED)])]
    (permute,) = captured(PROGRAMS[5])
    assert permute["pairs"] == [[SHUFFLED[i], SHUFFLED[(i + 3) % 8]] for i in range(8)]
