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

from collections.abc import Callable, Iterator
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

from sharding_core import inspect_jit
from sharding_core.cost.annotate import result_with_figures
from sharding_core.cost.collectives import communication, estimate_one
from sharding_core.cost.context import context_for
from sharding_core.cost.roofline import roofline
from sharding_core.devices import parse_devices
from sharding_core.hlo.collectives import device_assignment, read_collectives
from sharding_core.hlo.program import program_facts
from sharding_core.hlo.work import valid_positions
from sharding_core.kernels import catalog, runner
from sharding_core.kernels.catalog import Built, Kernel, KernelContext, KernelInput
from sharding_core.kernels.plan import RunInput, plan_run
from sharding_core.mesh import MeshSpec
from sharding_core.program.targets import mesh

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
    estimated = [{**x, "estimate": estimate_one(x, ctx)} for x in found]
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
    est = estimate_one(ar, gpu)
    assert est["inputs"]["bytes"] == ar["bytes"] // 2 and est["inputs"]["bytes_as_compiled"] == ar["bytes"]
    plain = estimate_one({**ar, "widened": None}, gpu)
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
    assert ar["repeat"] == 7 and ar["loops"] == [{"loop": "w", "trip_count": 7, "how": "backend_config"}]


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


def test_cpu_widened_gathers_with_a_fused_layout_change_are_estimated_at_bf16() -> None:
    """The convert to f32 fused with a transposing copy (a gather along a 2-D mesh's minor axis): the CPU
    stand-in of a gpu: set reshard showed 8 MiB where the GPU program gathers 4 MiB."""
    mesh = jax.make_mesh((2, 4), ("x", "y"), axis_types=(AxisType.Auto,) * 2, devices=jax.devices()[:8])
    x = jax.ShapeDtypeStruct((64, 128), jnp.bfloat16, sharding=NamedSharding(mesh, P("x", "y")))
    c = jax.jit(lambda a: a, out_shardings=NamedSharding(mesh, P("x", None))).lower(x).compile()
    ids = [int(d.id) for d in device_assignment(c)]
    (ag,) = read_collectives(c.as_text(), [ids], np.arange(8).reshape(2, 4).tolist(), ("x", "y"))
    assert ag["op"] == "all-gather" and ag["shape"] == "f32[32,128]"
    assert ag["widened"] == {"dtype": "bf16", "bytes": 32 * 128 * 2}


# ---- hand-written modules: loops read from their conditions, nested, unknown ---------------------------------

LOOP_HLO = """HloModule m, entry_computation_layout={()->f32[8,8]}

%fused (p0: f32[8,16], p1: f32[16,8]) -> f32[8,8] {
  %p0 = f32[8,16]{1,0} parameter(0)
  %p1 = f32[16,8]{1,0} parameter(1)
  ROOT %dot.1 = f32[8,8]{1,0} dot(%p0, %p1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}

%inner_body (t: (s32[], f32[8,8])) -> (s32[], f32[8,8]) {
  %t = (s32[], f32[8,8]{1,0}) parameter(0)
  %i = s32[] get-tuple-element(%t), index=0
  %x = f32[8,8]{1,0} get-tuple-element(%t), index=1
  %y = f32[8,8]{1,0} add(%x, %x)
  %one = s32[] constant(1)
  %i1 = s32[] add(%i, %one)
  ROOT %r = (s32[], f32[8,8]{1,0}) tuple(%i1, %y)
}

%inner_cond (t: (s32[], f32[8,8])) -> pred[] {
  %t = (s32[], f32[8,8]{1,0}) parameter(0)
  %i = s32[] get-tuple-element(%t), index=0
  %n = s32[] constant(5)
  ROOT %lt = pred[] compare(%i, %n), direction=LT
}

%outer_body (t: (s32[], f32[8,8])) -> (s32[], f32[8,8]) {
  %t = (s32[], f32[8,8]{1,0}) parameter(0)
  %a = f32[8,16]{1,0} constant({...})
  %b = f32[16,8]{1,0} constant({...})
  %f = f32[8,8]{1,0} fusion(%a, %b), kind=kOutput, calls=%fused
  %z = s32[] constant(2)
  %init = (s32[], f32[8,8]{1,0}) tuple(%z, %f)
  %w = (s32[], f32[8,8]{1,0}) while(%init), condition=%inner_cond, body=%inner_body
  ROOT %o = (s32[], f32[8,8]{1,0}) tuple(%z, %f)
}

%outer_cond (t: (s32[], f32[8,8])) -> pred[] {
  %t = (s32[], f32[8,8]{1,0}) parameter(0)
  ROOT %c = pred[] constant(true)
}

ENTRY %main () -> f32[8,8] {
  %zero = s32[] constant(0)
  %x0 = f32[8,8]{1,0} constant({...})
  %s = (s32[], f32[8,8]{1,0}) tuple(%zero, %x0)
  %w2 = (s32[], f32[8,8]{1,0}) while(%s), condition=%outer_cond, body=%outer_body,\
backend_config={"known_trip_count":{"n":"7"}}
  ROOT %out = f32[8,8]{1,0} get-tuple-element(%w2), index=1
}
"""


def test_nested_loops_from_xlas_annotation_and_from_a_condition() -> None:
    """An outer loop XLA annotated (known_trip_count 7) around one it did not (the TPU case): the inner one's trip
    count is read from its condition, body and start (i from 2 while i < 5, i += 1: 3 runs)."""
    facts = program_facts(LOOP_HLO)
    trips = {loop.name: (loop.trip_count, loop.how) for loop in facts.loops}
    assert trips == {"w2": (7, "backend_config"), "w": (3, "condition")}
    assert facts.runs["outer_body"] == 7 and facts.runs["inner_body"] == 21
    assert facts.runs["fused"] == 7
    assert facts.runs["inner_cond"] == 28  # a condition runs once more than its body
    dot, add, counter, compare = 2 * 8 * 8 * 16, 8 * 8, 1, 1
    assert facts.work.flops == 7 * dot + 21 * (add + counter) + 28 * compare
    assert facts.work.flops_once == dot + add + counter + compare
    # the book's arithmetic-intensity denominator: a matmul reads its operands and writes its result, per run
    assert facts.matmul_traffic() == 7 * (2 * 8 * 16 * 4 + 8 * 8 * 4)
    assert facts.enclosing_loops("inner_body") == [
        {"loop": "w2", "trip_count": 7, "how": "backend_config"},
        {"loop": "w", "trip_count": 3, "how": "condition"},
    ]


@pytest.mark.parametrize(
    ("inp", "out", "kernel", "stride", "pad", "lhs", "rhs"),
    [(8, 8, 3, 1, 1, 1, 1), (5, 3, 2, 2, 0, 1, 1), (4, 13, 3, 1, 2, 4, 1), (6, 4, 2, 1, 0, 1, 2)],
)
def test_conv_valid_positions_brute_force(
    inp: int, out: int, kernel: int, stride: int, pad: int, lhs: int, rhs: int
) -> None:
    dilated = [None] * ((inp - 1) * lhs + 1)
    for i in range(inp):
        dilated[i * lhs] = i
    want = 0
    for o in range(out):
        for k in range(kernel):
            pos = o * stride - pad + k * rhs
            if 0 <= pos < len(dilated) and dilated[pos] is not None:
                want += 1
    assert valid_positions(inp, out, kernel, stride, pad, lhs, rhs) == want


def counted_loop(
    start: str, bound: int, step: int, direction: str, bound_first: bool, update: str = "add", copied: bool = False
) -> str:
    """A module with one loop ``for (i = start; i DIR bound; i += step)`` in the spelling libtpu writes (no
    known_trip_count; the counter copied in the body and at the start, as in libtpu's scans), whose body
    all-reduces and multiplies 8 floats. ``start`` is a constant's value, or ``param`` for a counter that starts
    from an argument; ``copied``: the increment a copy of its constant too (libtpu's microbatch loops)."""
    compare = "compare(%n, %i)" if bound_first else "compare(%i, %n)"
    increment = f"%k0 = s32[]{{:T(128)}} constant({step})\n  %k = s32[]{{:T(128)}} copy(%k0)" if copied else (
        f"%k = s32[]{{:T(128)}} constant({step})")  # fmt: skip
    init = "%s0 = s32[] parameter(1)" if start == "param" else f"%s0 = s32[]{{:T(128)}} constant({start})"
    return f"""HloModule m, num_partitions=2

%add (a: f32[], b: f32[]) -> f32[] {{
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}}

%body (t: (s32[], f32[8])) -> (s32[], f32[8]) {{
  %t = (s32[]{{:T(128)}}, f32[8]{{0}}) parameter(0)
  %i = s32[]{{:T(128)}} get-tuple-element(%t), index=0
  %c = s32[]{{:T(128)S(6)}} copy(%i)
  {increment}
  %next = s32[]{{:T(128)}} {update}(%k, %c)
  %v = f32[8]{{0}} get-tuple-element(%t), index=1
  %ar = f32[8]{{0}} all-reduce(%v), channel_id=1, replica_groups={{{{0,1}}}}, to_apply=%add
  %m = f32[8]{{0}} multiply(%ar, %ar)
  ROOT %r = (s32[]{{:T(128)}}, f32[8]{{0}}) tuple(%next, %m)
}}

%cond (t: (s32[], f32[8])) -> pred[] {{
  %t = (s32[]{{:T(128)}}, f32[8]{{0}}) parameter(0)
  %i = s32[]{{:T(128)}} get-tuple-element(%t), index=0
  %n = s32[]{{:T(128)}} constant({bound})
  ROOT %cmp = pred[]{{:T(512)}} {compare}, direction={direction}
}}

ENTRY %main (x: f32[8], p: s32[]) -> f32[8] {{
  %x = f32[8]{{0}} parameter(0)
  {init}
  %s = s32[]{{:T(128)}} copy(%s0)
  %t0 = (s32[]{{:T(128)}}, f32[8]{{0}}) tuple(%s, %x)
  %w = (s32[]{{:T(128)}}, f32[8]{{0}}) while(%t0), condition=%cond, body=%body
  ROOT %out = f32[8]{{0}} get-tuple-element(%w), index=1
}}
"""


def simulated_trips(start: int, bound: int, step: int, direction: str, bound_first: bool) -> int:
    """The oracle: run the loop's counter in Python."""
    holds = {
        "LT": lambda a, b: a < b, "LE": lambda a, b: a <= b, "GT": lambda a, b: a > b, "GE": lambda a, b: a >= b
    }[direction]  # fmt: skip
    i, n = start, 0
    while (holds(bound, i) if bound_first else holds(i, bound)) and n < 10_000:
        i, n = i + step, n + 1
    return n


@pytest.mark.parametrize(
    ("start", "bound", "step", "direction", "bound_first"),
    [
        (0, 10, 1, "LT", False),  # a scan of 10
        (2, 5, 1, "LT", False),
        (1, 9, 2, "LE", False),  # i <= 9 from 1 by 2: 1, 3, 5, 7, 9
        (0, 6, 4, "GT", True),  # 6 > i: 0, 4
        (0, 10, 3, "GE", True),  # 10 >= i: 0, 3, 6, 9
        (-4, 4, 3, "LT", False),  # -4, -1, 2
        (7, 7, 1, "LT", False),  # never runs
    ],
)
@pytest.mark.parametrize("copied", [False, True], ids=["constant", "copied-constant"])
def test_trip_counts_read_from_the_loop_as_it_runs(
    start: int, bound: int, step: int, direction: str, bound_first: bool, copied: bool
) -> None:
    """Regression (issue 25): libtpu's TPU loops carry no known_trip_count, and the kernel lab, reshard and
    inspect_jit counted a collective inside a scanned layer once; the one reader reads the loop itself.
    Regression (issue 33's #4117 bench): libtpu copies the increment of a microbatch loop around a scanned
    model (``add(copy(gte(param, 0)), copy(constant 1))``); read as unknown, the loop counted once, and a step
    of 4 microbatches was estimated at a third of the unsplit step."""
    hlo = counted_loop(str(start), bound, step, direction, bound_first, copied=copied)
    want = simulated_trips(start, bound, step, direction, bound_first)
    facts = program_facts(hlo)
    (loop,) = facts.loops
    assert (loop.trip_count, loop.how) == (want, "condition")
    (ar,) = read_collectives(hlo, [[10, 11]], None, ())
    assert ar["repeat"] == want and ar["loops"] == [{"loop": "w", "trip_count": want, "how": "condition"}]
    # body: the counter's add and 8 multiplies per run; condition: one compare per run, once more than the body
    assert facts.work.flops == want * (1 + 8) + (want + 1) * 1
    assert facts.corrected(1000.0) == 1000.0 + facts.work.flops - facts.work.flops_once


@pytest.mark.parametrize(
    ("start", "direction", "update", "why"),
    [
        ("param", "LT", "add", "the counter starts from an argument"),
        ("0", "NE", "add", "i != N is not a counted loop"),
        ("0", "LT", "multiply", "the counter is multiplied, not incremented"),
    ],
)
def test_a_loop_the_reader_cannot_count_is_counted_once_and_named(
    start: str, direction: str, update: str, why: str
) -> None:
    hlo = counted_loop(start, 10, 2, direction, False, update)
    facts = program_facts(hlo)
    (loop,) = facts.loops
    assert (loop.trip_count, loop.how) == (None, "unknown"), why
    assert facts.unknown_loops == ("w",)
    (ar,) = read_collectives(hlo, [[10, 11]], None, ())
    assert ar["repeat"] == 1 and ar["loops"] == [{"loop": "w", "trip_count": None, "how": "unknown"}]
    cost = facts.cost({"flops": 100.0})
    assert cost["unknown_trip_counts"] == ["w"] and cost["loops"][0]["how"] == "unknown"
    line = roofline(cost, None, [], context_for(parse_devices("tpu:v5e:2x2")), "float32", "test")
    assert "1 loop(s) without a known trip count are counted once (w)" in line["why"]


# ---- real libtpu programs: TPU loops carry no known_trip_count -------------------------------------------


def _scan_layers(ctx: KernelContext) -> Built:
    """tanh(h @ w[i]) for each layer i under lax.scan; h's columns and w's rows sharded: one all-reduce a layer."""

    def f(h: jax.Array, ws: jax.Array) -> jax.Array:
        return jax.lax.scan(lambda c, w: (jnp.tanh(c @ w), None), h, ws)[0]

    return Built(f)


SCAN = Kernel(
    "test_scan_layers",
    "test: scanned layers",
    "tanh(h @ w) for each of w's layers, under lax.scan.",
    _scan_layers,
    (KernelInput("h", (256, 256), "P(None, 'x')"), KernelInput("w", (4, 256, 256), "P(None, 'x', None)")),
    mesh_shape=(4,),
    axis_names=("x",),
)


@pytest.fixture
def scan_kernel() -> Iterator[Kernel]:
    catalog.register(SCAN)
    yield SCAN
    catalog.unregister(SCAN.name)


def unrolled_tpu_flops(devices: str, layers: int) -> float:
    """The oracle: XLA's own cost_analysis of the same layers unrolled, compiled for the same TPU topology."""
    m = mesh(devices, (4,), ("x",))
    h = jax.ShapeDtypeStruct((256, 256), jnp.float32, sharding=NamedSharding(m, P(None, "x")))
    ws = jax.ShapeDtypeStruct((layers, 256, 256), jnp.float32, sharding=NamedSharding(m, P(None, "x", None)))
    return flops(compiled(unrolled, h, ws))


@pytest.mark.tpu
@pytest.mark.parametrize("layers", [2, 6])
def test_the_kernel_labs_tpu_compile_counts_a_scanned_layers_collectives_and_flops(
    scan_kernel: Kernel, layers: int
) -> None:
    """Regression (issue 25): the kernel lab's TPU section (and the headline it gives a tpu: set) counted the
    all-reduce of a scanned layer once and its flops once: libtpu writes no known_trip_count."""
    spec = MeshSpec((4,), ("x",), axis_types=("auto",))
    inputs = [RunInput((256, 256), "P(None, 'x')"), RunInput((layers, 256, 256), "P(None, 'x', None)")]
    plan = plan_run(scan_kernel.name, "tpu:v5e:2x2", spec, inputs)
    result = result_with_figures(plan.result(runner.run_job(plan.job)))
    tpu = result["tpu"]
    assert tpu.get("error") is None and ":T(" in tpu["hlo"], tpu.get("error")
    work = tpu["program"]["work"]
    (loop,) = work["loops"]
    assert (loop["trip_count"], loop["how"]) == (layers, "condition")
    in_loop = [c for c in tpu["collectives"] if c["loops"]]
    assert in_loop and all(c["repeat"] == layers for c in in_loop)
    assert result["communication"]["runs"] == sum(c["repeat"] for c in tpu["collectives"])  # the TPU headline
    # flops per step: XLA's own count of the unrolled layers, compiled for the same topology
    assert work["flops_xla"] < unrolled_tpu_flops("tpu:v5e:2x2", layers) / (layers - 0.5)  # XLA: one body
    assert work["flops"] == pytest.approx(unrolled_tpu_flops("tpu:v5e:2x2", layers), rel=0.05)
    # the CPU program's loop carries XLA's annotation: the same counts
    assert [c["repeat"] for c in result["collectives"] if c["loops"]] == [layers]


@pytest.mark.tpu
def test_inspect_jit_on_a_tpu_target_counts_loops_with_the_same_reader() -> None:
    m = mesh("tpu:v5e:2x2", (4,), ("x",))
    h = jax.ShapeDtypeStruct((256, 256), jnp.float32, sharding=NamedSharding(m, P(None, "x")))
    ws = jax.ShapeDtypeStruct((5, 256, 256), jnp.float32, sharding=NamedSharding(m, P(None, "x", None)))
    snap = inspect_jit(jax.jit(nested), h, ws)  # 3 x 5 layers
    in_loops = [c for c in snap["collectives"] if c["loops"]]
    assert in_loops and all(c["repeat"] == 15 for c in in_loops)
    assert all([lp["how"] for lp in c["loops"]] == ["condition", "condition"] for c in in_loops)
    work = snap["plan"]["work"]
    assert work["flops"] == pytest.approx(3 * unrolled_tpu_flops("tpu:v5e:2x2", 5), rel=0.05)
