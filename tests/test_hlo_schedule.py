"""The schedule reader (``sharding_core.hlo.schedule``): what runs in what order and which collectives are in flight
while it does, read from scheduled HLO text — XLA's ``*-start`` / ``*-done`` pairs, ``async-start`` around a
collective, synchronous collectives, loops, and libtpu's async collective fusions — checked on a hand-written
module and on real TPU programs compiled by libtpu's compile-only topologies.

Regression for issue 31: libtpu spreads one asynchronous collective over several fusions (its start, the
continuation fusions that compute while it moves, its done), each holding a copy of the collective with the same
``channel_id`` and ``chain_id``; the collectives reader listed every copy, so a 17-step all-gather counted 17 times
in a plan's communication.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from sharding_core.hlo.program import program_facts
from sharding_core.hlo.schedule import schedule_facts
from sharding_core.hlo.text import parse_collectives

# A scheduled module: a fusion with a dot, an async all-gather around a fusion, a synchronous all-reduce, and a
# loop whose body carries libtpu's async collective fusion (start, a continuation that computes, done).
HLO = """HloModule jit_step, is_scheduled=true, num_partitions=4

%fused_dot (p0: bf16[128,256], p1: bf16[256,512]) -> bf16[128,512] {
  %p0 = bf16[128,256]{1,0} parameter(0)
  %p1 = bf16[256,512]{1,0} parameter(1)
  ROOT %dot.1 = bf16[128,512]{1,0} dot(%p0, %p1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}

%fused_add (p0: f32[1024]) -> f32[1024] {
  %p0 = f32[1024]{0} parameter(0)
  ROOT %add.1 = f32[1024]{0} add(%p0, %p0)
}

%sum (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %add.2 = f32[] add(%a, %b)
}

%ag_start (p0: bf16[64,512]) -> (bf16[64,512], bf16[256,512]) {
  %p0 = bf16[64,512]{1,0} parameter(0)
  %all-gather.7 = bf16[256,512]{1,0} all-gather(%p0), channel_id=9, replica_groups=[1,4]<=[4], dimensions={0}, frontend_attributes={chain_id="3"}
  ROOT %custom-call.1 = (bf16[64,512]{1,0}, bf16[256,512]{1,0}) custom-call(%all-gather.7), custom_call_target="AsyncCollectiveStart"
}

%ag_step (p0: bf16[64,512], p1: bf16[128,256], p2: bf16[256,512]) -> bf16[128,512] {
  %p0 = bf16[64,512]{1,0} parameter(0)
  %p1 = bf16[128,256]{1,0} parameter(1)
  %p2 = bf16[256,512]{1,0} parameter(2)
  %all-gather.8 = bf16[256,512]{1,0} all-gather(%p0), channel_id=9, replica_groups=[1,4]<=[4], dimensions={0}, frontend_attributes={chain_id="3"}
  ROOT %dot.2 = bf16[128,512]{1,0} dot(%p1, %p2), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}

%ag_done (p0: bf16[64,512]) -> bf16[256,512] {
  %p0 = bf16[64,512]{1,0} parameter(0)
  %all-gather.9 = bf16[256,512]{1,0} all-gather(%p0), channel_id=9, replica_groups=[1,4]<=[4], dimensions={0}, frontend_attributes={chain_id="3"}
  ROOT %custom-call.2 = bf16[256,512]{1,0} custom-call(%all-gather.9), custom_call_target="AsyncCollectiveDone"
}

%body (param: (s32[], bf16[64,512], bf16[128,256], bf16[256,512])) -> (s32[], bf16[64,512], bf16[128,256], bf16[256,512]) {
  %param = (s32[], bf16[64,512]{1,0}, bf16[128,256]{1,0}, bf16[256,512]{1,0}) parameter(0)
  %i = s32[] get-tuple-element(%param), index=0
  %w = bf16[64,512]{1,0} get-tuple-element(%param), index=1
  %x = bf16[128,256]{1,0} get-tuple-element(%param), index=2
  %y = bf16[256,512]{1,0} get-tuple-element(%param), index=3
  %one = s32[] constant(1)
  %next = s32[] add(%i, %one)
  %async-collective-start.1 = (bf16[64,512]{1,0}, bf16[256,512]{1,0}) fusion(%w), kind=kCustom, calls=%ag_start
  %fusion.5 = bf16[128,512]{1,0} fusion(%w, %x, %y), kind=kOutput, calls=%ag_step
  %async-collective-done.1 = bf16[256,512]{1,0} fusion(%w), kind=kCustom, calls=%ag_done
  ROOT %t = (s32[], bf16[64,512]{1,0}, bf16[128,256]{1,0}, bf16[256,512]{1,0}) tuple(%next, %w, %x, %async-collective-done.1)
}

%cond (param: (s32[], bf16[64,512], bf16[128,256], bf16[256,512])) -> pred[] {
  %param = (s32[], bf16[64,512]{1,0}, bf16[128,256]{1,0}, bf16[256,512]{1,0}) parameter(0)
  %i = s32[] get-tuple-element(%param), index=0
  %n = s32[] constant(6)
  ROOT %lt = pred[] compare(%i, %n), direction=LT
}

ENTRY %main (a: bf16[128,256], b: bf16[256,512], c: f32[1024], w: bf16[64,512]) -> f32[1024] {
  %a = bf16[128,256]{1,0} parameter(0)
  %b = bf16[256,512]{1,0} parameter(1)
  %c = f32[1024]{0} parameter(2)
  %w = bf16[64,512]{1,0} parameter(3)
  %all-gather-start = (bf16[64,512]{1,0}, bf16[256,512]{1,0}) all-gather-start(%w), channel_id=1, replica_groups=[1,4]<=[4], dimensions={0}
  %fusion.1 = bf16[128,512]{1,0} fusion(%a, %b), kind=kOutput, calls=%fused_dot
  %fusion.2 = f32[1024]{0} fusion(%c), kind=kLoop, calls=%fused_add
  %all-gather-done = bf16[256,512]{1,0} all-gather-done(%all-gather-start)
  %all-reduce.1 = f32[1024]{0} all-reduce(%fusion.2), channel_id=2, replica_groups=[1,4]<=[4], to_apply=%sum
  %zero = s32[] constant(0)
  %init = (s32[], bf16[64,512]{1,0}, bf16[128,256]{1,0}, bf16[256,512]{1,0}) tuple(%zero, %w, %a, %b)
  %while.1 = (s32[], bf16[64,512]{1,0}, bf16[128,256]{1,0}, bf16[256,512]{1,0}) while(%init), condition=%cond, body=%body
  ROOT %out = f32[1024]{0} copy(%all-reduce.1)
}
"""  # noqa: E501 - HLO as XLA prints it


def _kinds(events: list[list[Any]]) -> list[str]:
    return [e[0] for e in events]


def test_hand_written_module_reads_in_schedule_order() -> None:
    s = schedule_facts(HLO)
    entry = s["sequences"]["main"]
    # the async all-gather is in flight over the two fusions; the all-reduce is waited for where it stands
    assert _kinds(entry) == ["start", "work", "done", "sync", "loop", "work"]
    assert entry[0][1] == entry[2][1] == "all-gather-start"
    assert entry[3][1] == "all-reduce.1"
    work = entry[1][1]
    assert work["mm"] == [["bf16", 128, 512, 256, work["mm"][0][4], 1]]  # the dot: m 128, n 512, k 256
    assert work["hbm"] == 2 * 1024 * 4  # the add fusion reads and writes f32[1024]
    assert work["ops"] == 2
    assert entry[4] == ["loop", "body", 6]  # the trip count read from the loop (i < 6, from 0, step 1)
    body = s["sequences"]["body"]
    # libtpu's chain: the start fusion, a continuation that computes while it moves, the done fusion
    assert _kinds(body) == ["work", "start", "work", "done"]
    chain = body[1][1]
    assert body[3][1] == chain and s["chains"][chain] == ["all-gather.7", "all-gather.8", "all-gather.9"]
    assert body[2][1]["mm"][0][1:4] == [128, 512, 256]  # the continuation's dot is work under the all-gather
    assert s["runs"] == {"main": 1, "body": 6}


def test_a_libtpu_chain_is_one_collective() -> None:
    """Regression (issue 31): the three fused copies of one all-gather are one collective, not three."""
    names = [c.name for c in parse_collectives(HLO)]
    assert names == ["all-gather.7", "all-gather-start", "all-reduce.1"]
    facts = program_facts(HLO)
    assert facts.runs_of("ag_start") == 6  # and it runs once per iteration of the loop


def _channels(hlo: str) -> set[str]:
    """XLA numbers each collective's channel once (the oracle): the distinct channel ids of collective instructions."""
    ops = r"(?:all-gather|all-reduce|reduce-scatter|all-to-all|collective-permute)(?:-start)?"
    return set(re.findall(rf"\s{ops}\([^\n]*?channel_id=(\d+)", hlo))


@pytest.fixture(scope="module")
def tpu_step() -> tuple[str, Any]:
    """The tiny Llama training step, FSDP over libtpu's compile-only v5e 2x4 (its default flags fuse the
    all-gathers into async collective fusions)."""
    from examples import llama
    from sharding_core.program.targets import mesh

    m = mesh("tpu:v5e:2x4", (8,), ("fsdp",))
    step, args = llama.tiny_fsdp(m)
    return step.lower(*args).compile().as_text(), llama.CONFIGS["tiny"]


@pytest.mark.tpu
def test_libtpu_program_collectives_once_each(tpu_step: tuple[str, Any]) -> None:
    hlo, _ = tpu_step
    found = parse_collectives(hlo)
    assert re.search(r'chain_id="\d+"', hlo), "libtpu no longer fuses the all-gathers: the test needs a chain"
    assert len(found) == len(_channels(hlo)) == len({c.name for c in found})
    s = schedule_facts(hlo)
    names = {c.name for c in found}
    assert all(any(n in names for n in members) for members in s["chains"].values())


@pytest.mark.tpu
def test_libtpu_program_schedule(tpu_step: tuple[str, Any]) -> None:
    hlo, cfg = tpu_step
    s = schedule_facts(hlo)
    facts = program_facts(hlo)
    loops = [e for seq in s["sequences"].values() for e in seq if e[0] == "loop"]
    assert sorted(e[2] for e in loops) == [cfg.n_layers, cfg.n_layers]  # the forward and backward scans
    # every matmul the loop reader counts per step is on the schedule, once
    per_step = sum(
        s["runs"][name] * 2.0 * m * n * k * count
        for name, seq in s["sequences"].items()
        for e in seq
        if e[0] == "work"
        for _, m, n, k, _, count in e[1]["mm"]
    )
    assert per_step == pytest.approx(sum(facts.work.matmul_flops.values()), rel=0.01)
    # an async chain overlaps compute: work is scheduled between some start and its done
    overlapped = 0
    for seq in s["sequences"].values():
        open_chains: set[str] = set()
        for e in seq:
            if e[0] == "start":
                open_chains.add(e[1])
            elif e[0] == "done":
                open_chains.discard(e[1])
            elif e[0] == "work" and open_chains and e[1]["mm"]:
                overlapped += 1
    assert overlapped > 0


def test_cpu_program_schedule_against_its_collectives() -> None:
    """A scanned training step compiled by XLA's CPU backend (8 CPU devices): XLA:CPU runs every collective where it
    stands (no ``*-start`` / ``*-done`` pairs in its HLO), so each collective the collectives reader finds is one
    ``sync`` event on the schedule, the loop's body runs as many times as the scan has layers, and nothing is in
    flight under compute."""
    import jax
    import jax.numpy as jnp
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    m = jax.make_mesh((8,), ("x",), axis_types=(jax.sharding.AxisType.Auto,))
    w = jax.ShapeDtypeStruct((4, 256, 256), jnp.float32, sharding=NamedSharding(m, P(None, "x", None)))
    x = jax.ShapeDtypeStruct((64, 256), jnp.float32, sharding=NamedSharding(m, P()))

    def loss(w: jax.Array, x: jax.Array) -> jax.Array:
        def layer(h: jax.Array, wi: jax.Array) -> tuple[jax.Array, None]:
            return jnp.tanh(h @ wi), None

        return jax.lax.scan(layer, x, w)[0].sum()

    hlo = jax.jit(jax.grad(loss)).lower(w, x).compile().as_text()
    assert not re.search(r"\b(all-gather|all-reduce|collective-permute)-start\(", hlo)
    s = schedule_facts(hlo)
    events = [e for seq in s["sequences"].values() for e in seq]
    assert not [e for e in events if e[0] in ("start", "done")]
    synced = {n for e in events if e[0] == "sync" for n in s["chains"][e[1]]}
    assert synced == {c.name for c in parse_collectives(hlo)} and synced
    assert sorted(e[2] for e in events if e[0] == "loop") == [4, 4]  # the forward and backward scans


# An asynchronous slice into VMEM (memory space 1) as the module before libtpu's code generation writes it
# (`async-start` / `async-done` around a `slice`), and as code generation rewrites it (`slice-start` / `slice-done`).
_SLICE = """HloModule jit_f, is_scheduled=true

%async_computation (p: f32[2,128,256]) -> f32[1,128,256] {
  %p = f32[2,128,256]{2,1,0} parameter(0)
  ROOT %slice.1 = f32[1,128,256]{2,1,0:S(1)} slice(%p), slice={[0:1], [0:128], [0:256]}
}

%fused_add (p0: f32[1,128,256]) -> f32[1,128,256] {
  %p0 = f32[1,128,256]{2,1,0:S(1)} parameter(0)
  ROOT %add.1 = f32[1,128,256]{2,1,0} add(%p0, %p0)
}

ENTRY %main (x: f32[2,128,256]) -> f32[1,128,256] {
  %x = f32[2,128,256]{2,1,0} parameter(0)
  START
  DONE
  ROOT %fusion.1 = f32[1,128,256]{2,1,0} fusion(%slice-done.1), kind=kLoop, calls=%fused_add
}
"""
_BEFORE_CODEGEN = (
    "%slice-start.1 = ((f32[2,128,256]{2,1,0}), f32[1,128,256]{2,1,0:S(1)}, s32[]{:S(2)}) async-start(%x), "
    "calls=%async_computation",
    "%slice-done.1 = f32[1,128,256]{2,1,0:S(1)} async-done(%slice-start.1)",
)
_AFTER_CODEGEN = (
    "%slice-start.1 = ((f32[2,128,256]{2,1,0}), f32[1,128,256]{2,1,0:S(1)}, s32[]{:S(2)}) slice-start(%x), "
    "slice={[0:1], [0:128], [0:256]}",
    "%slice-done.1 = f32[1,128,256]{2,1,0:S(1)} slice-done(%slice-start.1)",
)


def test_an_async_slice_reads_the_same_before_and_after_code_generation() -> None:
    """Code generation's `slice-done` adds no second transfer: both spellings read as one (issue 31: the scoreboard's
    schedule-only compiles read the module before code generation; a plan reads the compiled one)."""
    read = [schedule_facts(_SLICE.replace("START", start).replace("DONE", done))
            for start, done in (_BEFORE_CODEGEN, _AFTER_CODEGEN)]  # fmt: skip
    before, after = (s["sequences"][s["entry"]] for s in read)
    assert before == after
    (work,) = before
    assert work[0] == "work" and work[1]["ops"] == 2  # the slice's start and the add; neither done is work
