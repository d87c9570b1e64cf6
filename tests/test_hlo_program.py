"""Loop facts of compiled HLO (``sharding_core.hlo.program``) and the collective facts built on them, on
programs this process compiles with JAX: a collective inside a ``lax.scan`` runs once per step (``repeat``),
nested loops multiply, a loop XLA cannot count is said to be counted once, dots in a loop body are counted
per step (the oracle: XLA's own ``cost_analysis`` of the same program unrolled), and a bf16 reduction that
XLA's CPU compiler widened to f32 says so with the bytes the program asked for.

Regression tests for issue 19: "a ``lax.scan`` of 10 steps with one all-reduce each reports one all-reduce,
and totals and rooflines are 10× low"; "``cost_analysis`` flops have the same problem"; "DCN steps and every
GPU estimate take the CPU program's bytes, where XLA's CPU compiler widens bf16 reductions to f32".
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

from sharding_core.cost.collectives import communication, estimate_collective
from sharding_core.cost.context import context_for
from sharding_core.devices import parse_devices
from sharding_core.hlo.collectives import device_assignment, read_collectives
from sharding_core.hlo.program import program_facts

MESH = jax.make_mesh((4,), ("x",), axis_types=(AxisType.Auto,), devices=jax.devices()[:4])


def compiled(f: Callable[..., Any], *args: Any) -> Any:
    return jax.jit(f).lower(*args).compile()


def flops(c: Any) -> float:
    cost = c.cost_analysis()
    cost = cost[0] if isinstance(cost, list) else cost
    return float(cost["flops"])


def collectives(c: Any) -> list[dict[str, Any]]:
    ids = [int(d.id) for d in device_assignment(c)]
    return read_collectives(c.as_text(), [ids], np.asarray([0, 1, 2, 3]).tolist(), ("x",))


def sds(shape: tuple[int, ...], spec: P, dtype: Any = jnp.float32) -> jax.ShapeDtypeStruct:
    return jax.ShapeDtypeStruct(shape, dtype, sharding=NamedSharding(MESH, spec))


X = sds((64, 64), P(None, "x"))  # h @ w contracts the sharded dimension: one all-reduce per layer
W = sds((10, 64, 64), P(None, "x", None))


def layer(h: jax.Array, w: jax.Array) -> tuple[jax.Array, None]:
    return jnp.tanh(h @ w), None


def scanned(h: jax.Array, ws: jax.Array) -> jax.Array:
    return jax.lax.scan(layer, h, ws)[0]


def unrolled(h: jax.Array, ws: jax.Array) -> jax.Array:
    for i in range(ws.shape[0]):
        h = layer(h, ws[i])[0]
    return h


def nested(h: jax.Array, ws: jax.Array) -> jax.Array:
    return jax.lax.scan(lambda c, _: (scanned(c, ws), None), h, None, length=3)[0]


def test_a_collective_in_a_scan_runs_once_per_step() -> None:
    c = compiled(scanned, X, W)
    found = collectives(c)
    assert [x["op"] for x in found] == ["all-reduce"]
    assert found[0]["repeat"] == 10
    assert [loop["trip_count"] for loop in found[0]["loops"]] == [10]
    facts = program_facts(c.as_text())
    assert [loop.trip_count for loop in facts.loops] == [10] and not facts.unknown_loops
    once = collectives(compiled(lambda h, ws: layer(h, ws[0])[0], X, W))
    assert once[0]["repeat"] == 1 and once[0]["loops"] == []


def test_nested_loops_multiply() -> None:
    c = compiled(nested, X, W)
    found = collectives(c)
    assert found[0]["repeat"] == 30
    assert [loop["trip_count"] for loop in found[0]["loops"]] == [3, 10]  # outermost first


def test_totals_multiply_by_the_repeat_count() -> None:
    ctx = context_for(parse_devices("tpu:v5e:2x2"))
    found = collectives(compiled(scanned, X, W))
    estimated = [{**x, "estimate": estimate_collective(x, ctx)} for x in found]
    one = estimated[0]["estimate"]["seconds"]
    totals = communication(estimated)
    assert totals["count"] == 1 and totals["runs"] == 10
    assert totals["seconds"] == pytest.approx(10 * one)
    assert totals["bytes"] == 10 * found[0]["bytes"]


def test_loop_bodies_flops_are_counted_per_step() -> None:
    scan = compiled(scanned, X, W)
    flat = compiled(unrolled, X, W)
    xla = flops(scan)
    want = flops(flat)  # XLA's own count of the same ten layers, unrolled
    assert xla < want / 5  # XLA counts the scan's body once
    corrected = program_facts(scan.as_text()).corrected_flops(xla)
    assert corrected == pytest.approx(want, rel=0.05)
    nest = compiled(nested, X, W)
    assert program_facts(nest.as_text()).corrected_flops(flops(nest)) == pytest.approx(3 * want, rel=0.05)


def test_a_loop_of_unknown_length_is_counted_once_and_said() -> None:
    def until(h: jax.Array) -> jax.Array:
        def body(carry: tuple[jax.Array, jax.Array]) -> tuple[jax.Array, jax.Array]:
            v, i = carry
            return jnp.tanh(v @ v), i + 1

        return jax.lax.while_loop(lambda c: c[0].sum() < 3.0, body, (h, 0))[0]

    c = compiled(until, X)
    facts = program_facts(c.as_text())
    assert len(facts.loops) == 1 and facts.loops[0].trip_count is None
    assert facts.unknown_loops == (facts.loops[0].name,)
    assert all(x["repeat"] == 1 for x in collectives(c))


def test_cpu_widened_bf16_reductions_are_estimated_at_bf16() -> None:
    c = compiled(
        lambda h, w: h @ w, sds((64, 64), P(None, "x"), jnp.bfloat16), sds((64, 64), P("x", None), jnp.bfloat16)
    )
    (ar,) = collectives(c)
    assert ar["op"] == "all-reduce" and ar["shape"].startswith("f32")  # the CPU program reduces in f32
    assert ar["widened"] == {"dtype": "bf16", "bytes": ar["bytes"] // 2}
    gpu = context_for(parse_devices("gpu:h100:1x4"))
    est = estimate_collective(ar, gpu)
    assert est["inputs"]["bytes"] == ar["bytes"] // 2 and est["inputs"]["bytes_as_compiled"] == ar["bytes"]
    plain = estimate_collective({**ar, "widened": None}, gpu)
    assert est["seconds"] == pytest.approx(plain["seconds"] / 2)
    f32 = collectives(compiled(lambda h, w: h @ w, sds((64, 64), P(None, "x")), sds((64, 64), P("x", None))))
    assert f32[0]["widened"] is None


HAND_WRITTEN = """HloModule m, num_partitions=2

%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}

%branch (p: f32[8]) -> f32[8] {
  %p = f32[8]{0} parameter(0)
  ROOT %ar = f32[8]{0} all-reduce(%p), channel_id=1, replica_groups={{0,1}}, to_apply=%add
}

%body (t: (s32[], f32[8])) -> (s32[], f32[8]) {
  %t = (s32[], f32[8]{0}) parameter(0)
  %i = s32[] get-tuple-element(%t), index=0
  %v = f32[8]{0} get-tuple-element(%t), index=1
  %c = f32[8]{0} call(%v), to_apply=%branch
  ROOT %r = (s32[], f32[8]{0}) tuple(%i, %c)
}

%cond (t: (s32[], f32[8])) -> pred[] {
  %t = (s32[], f32[8]{0}) parameter(0)
  %i = s32[] get-tuple-element(%t), index=0
  %n = s32[] constant(7)
  ROOT %lt = pred[] compare(%i, %n), direction=LT
}

ENTRY %main (x: f32[8]) -> f32[8] {
  %x = f32[8]{0} parameter(0)
  %z = s32[] constant(0)
  %t0 = (s32[], f32[8]{0}) tuple(%z, %x)
  %w = (s32[], f32[8]{0}) while(%t0), condition=%cond, body=%body, backend_config={"known_trip_count":{"n":"7"}}
  ROOT %out = f32[8]{0} get-tuple-element(%w), index=1
}
"""


def test_a_collective_in_a_computation_a_loop_calls_runs_with_the_loop() -> None:
    facts = program_facts(HAND_WRITTEN)
    assert facts.runs_of("body") == 7 and facts.runs_of("cond") == 8 and facts.runs_of("branch") == 7
    assert facts.runs_of("add") == 1  # a reducer is per element, not program work
    (ar,) = read_collectives(HAND_WRITTEN, [[10, 11]], None, ())
    assert ar["repeat"] == 7 and ar["loops"] == [{"loop": "w", "trip_count": 7}]


def test_cpu_widened_bf16_gathers_are_estimated_at_bf16() -> None:
    """The CPU compiler also wraps a bf16 all-gather in converts to f32 and back (a reshard of bf16[4096, 2048]
    showed 32 MiB where the TPU program gathers 16 MiB)."""
    mesh = jax.make_mesh((4,), ("x",), axis_types=(AxisType.Auto,), devices=jax.devices()[:4])
    x = jax.ShapeDtypeStruct((64, 32), jnp.bfloat16, sharding=NamedSharding(mesh, P("x", None)))
    c = jax.jit(lambda a: a, out_shardings=NamedSharding(mesh, P())).lower(x).compile()
    (ag,) = collectives(c)
    assert ag["op"] == "all-gather" and ag["shape"] == "f32[64,32]"
    assert ag["widened"] == {"dtype": "bf16", "bytes": 64 * 32 * 2}
    f32 = jax.ShapeDtypeStruct((64, 32), jnp.float32, sharding=NamedSharding(mesh, P("x", None)))
    plain = jax.jit(lambda a: a, out_shardings=NamedSharding(mesh, P())).lower(f32).compile()
    assert collectives(plain)[0]["widened"] is None
