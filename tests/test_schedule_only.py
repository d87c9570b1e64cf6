"""A compile that stops once libtpu has written its scheduled, buffer-assigned module (``bench/bench_steps.py``'s
schedule-only mode, what the scoreboard of published runs is compiled with) reads the schedule the full compile
runs: issue 31's "checked against the full compile".

libtpu writes ``*after_optimizations_after_buffer_assignment.txt`` to ``xla_dump_to`` before its code generation
(80-90 % of a compile), which then reorders instructions and adds backend configs to the module
``Compiled.as_text()`` returns. Here both come from one compile of small training steps (FSDP and tensor-parallel,
scanned remat layers, AdamW) for libtpu's compile-only topologies: the step model's schedule (the sequences, each
collective's start and done, the work between them, the loops and their trips, names aside) and every
collective (operation, bytes, device groups) are the same in the two. The bench records the same comparison on
reduced copies of published runs (docs/benchmarks.md#whole-step-runs)."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import pytest
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from bench.step_facts import normalized
from sharding_core.hlo.collectives import read_collectives
from sharding_core.hlo.program import program_facts
from sharding_core.hlo.schedule import schedule_of
from sharding_core.program.early import EARLY_FILE
from sharding_core.program.targets import mesh as target_mesh

pytestmark = pytest.mark.tpu

D, LAYERS, BATCH, SEQ, HEADS, VOCAB = 512, 2, 16, 256, 4, 4096


def step_for(mesh: Any, tensor: bool) -> tuple[Any, tuple[Any, ...]]:
    """A scanned decoder's training step: weights split on ``fsdp`` (or on ``tensor`` along the heads and the MLP),
    the batch on the other axis."""
    import optax

    def block(x: Any, w: Any) -> tuple[Any, None]:
        h = x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-6)
        q, k, v = (jnp.einsum("bsd,dhk->bshk", h, w[n]) for n in ("wq", "wk", "wv"))
        att = jax.nn.softmax(jnp.einsum("bqhk,bshk->bhqs", q, k) / 11.3, axis=-1)
        x = x + jnp.einsum("bqhk,hkd->bqd", jnp.einsum("bhqs,bshk->bqhk", att, v), w["wo"])
        h = x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-6)
        return x + jax.nn.gelu(h @ w["w1"]) @ w["w2"], None

    def loss(params: Any, tokens: Any) -> Any:
        x = params["embed"][tokens].astype(jnp.bfloat16)
        x, _ = jax.lax.scan(jax.checkpoint(block), x, jax.tree.map(lambda p: p.astype(jnp.bfloat16), params["layers"]))
        logits = (x @ params["unembed"].astype(jnp.bfloat16)).astype(jnp.float32)
        return jnp.mean(jax.nn.logsumexp(logits, axis=-1) - logits[..., 0])

    opt = optax.adamw(1e-4)

    def step(params: Any, state: Any, tokens: Any) -> Any:
        grads = jax.grad(loss)(params, tokens)
        updates, state = opt.update(grads, state, params)
        return optax.apply_updates(params, updates), state

    def s(shape: tuple[int, ...], spec: P, dtype: Any = jnp.float32) -> Any:
        return jax.ShapeDtypeStruct(shape, dtype, sharding=NamedSharding(mesh, spec))

    hk = D // HEADS
    if tensor:  # Megatron: heads and the MLP's hidden dimension split, the embeddings' vocabulary
        heads, wo, w1, w2 = P(None, None, "tensor"), P(None, "tensor"), P(None, None, "tensor"), P(None, "tensor")
        embed, unembed = P("tensor", None), P(None, "tensor")
    else:  # FSDP: every weight split along d_model
        heads, wo, w1, w2 = P(None, "fsdp"), P(None, None, None, "fsdp"), P(None, "fsdp"), P(None, None, "fsdp")
        embed, unembed = P(None, "fsdp"), P("fsdp")
    params = {"embed": s((VOCAB, D), embed), "unembed": s((D, VOCAB), unembed), "layers": {
        "wq": s((LAYERS, D, HEADS, hk), heads), "wk": s((LAYERS, D, HEADS, hk), heads),
        "wv": s((LAYERS, D, HEADS, hk), heads), "wo": s((LAYERS, HEADS, hk, D), wo),
        "w1": s((LAYERS, D, 4 * D), w1), "w2": s((LAYERS, 4 * D, D), w2)}}  # fmt: skip
    by_shape = {tuple(p.shape): p for p in jax.tree.leaves(params)}
    state = jax.eval_shape(opt.init, params)
    state = jax.tree.map(
        lambda a: s(a.shape, by_shape[tuple(a.shape)].sharding.spec if tuple(a.shape) in by_shape else P(), a.dtype),
        state,
    )
    tokens = s((BATCH, SEQ), P("data", None), jnp.int32)
    return jax.jit(step, donate_argnums=(0, 1)), (params, state, tokens)


def read(hlo: str, mesh: Any) -> dict[str, Any]:
    facts = program_facts(hlo)
    ids = [int(i) for i in mesh.device_ids.flatten()]
    collectives = read_collectives(hlo, [ids], mesh.device_ids.tolist(), [str(a) for a in mesh.axis_names], facts)
    return {
        "schedule": schedule_of(facts),
        "collectives": [{k: c.get(k) for k in ("op", "name", "bytes", "groups", "is_async")} for c in collectives],
    }


def without_names(c: dict[str, Any]) -> tuple[Any, ...]:
    return (c["op"], c["bytes"], c["is_async"], str(c["groups"]))


@pytest.mark.parametrize(
    ("devices", "axes", "tensor"),
    [("tpu:v5e:2x4", ("data", "fsdp"), False), ("tpu:v5p:2x2x2", ("data", "tensor"), True)],
    ids=["fsdp-v5e", "tensor-v5p"],
)
def test_the_scheduled_module_libtpu_writes_before_code_generation_is_the_compiled_schedule(
    devices: str, axes: tuple[str, str], tensor: bool
) -> None:
    mesh = target_mesh(devices, (2, 4), axes)
    step, args = step_for(mesh, tensor)
    with tempfile.TemporaryDirectory() as tmp:
        compiled = step.lower(*args).compile(compiler_options={"xla_dump_to": tmp})
        (early,) = sorted(Path(tmp).glob(f"*{EARLY_FILE}"))
        before_codegen = early.read_text()
    after = compiled.as_text()
    assert before_codegen != after  # code generation did change the module's text: the comparison below is not moot
    a, b = read(before_codegen, mesh), read(after, mesh)
    assert b["collectives"], "a sharded training step has collectives"
    assert sorted(map(without_names, a["collectives"])) == sorted(map(without_names, b["collectives"]))
    assert normalized(a) == normalized(b)
    # the replay reads names only to pair a start with its done: the schedules are the same program run in order
    loops = [e for seq in normalized(b) for e in seq[1] if e[0] == "loop"]
    assert loops and all(e[2] == LAYERS for e in loops if e[2] is not None), loops
