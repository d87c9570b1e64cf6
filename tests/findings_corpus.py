"""Reproducers of silent waste, each named after the public source it follows, and clean programs (issue 32).

Each case is ``build() -> (jitted, args)`` on this process's 8 CPU devices (abstract arguments: nothing runs).
A reproducer names the finding kind it must raise and, where one exists, ``fixed() -> (jitted, args)``: the same
step written with the fix, which the test compiles with JAX to check the step's collective bytes fall by half.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

from sharding_core.compat import shard_map

Build = Callable[[], tuple[Any, tuple[Any, ...]]]


@dataclasses.dataclass(frozen=True)
class Case:
    name: str
    source: str  # the public source it follows
    kind: str | None  # the finding it must raise (None: a clean program)
    build: Build
    fixed: Build | None = None
    line_marker: str | None = None  # a text on the line the finding must point at
    repeat: int | None = None  # runs per step (a loop's trip count), as the program writes it: bytes checked in HLO
    tpu: bool = False  # compiled for libtpu's compile-only devices (TPU)


def mesh1(name: str, explicit: bool = False) -> Any:
    kind = AxisType.Explicit if explicit else AxisType.Auto
    return jax.make_mesh((8,), (name,), axis_types=(kind,))


def mesh2(a: str, b: str, shape: tuple[int, int] = (2, 4)) -> Any:
    return jax.make_mesh(shape, (a, b), axis_types=(AxisType.Auto, AxisType.Auto))


def sds(mesh: Any, shape: tuple[int, ...], spec: P, dtype: Any = jnp.float32) -> jax.ShapeDtypeStruct:
    return jax.ShapeDtypeStruct(shape, dtype, sharding=NamedSharding(mesh, spec))


def _mse(w: Any, x: Any) -> Any:
    return jnp.mean(jnp.tanh(x @ w) ** 2)


# ---- a reduction every iteration of an accumulation loop -------------------------------------------------


def maxtext_5056() -> tuple[Any, tuple[Any, ...]]:
    """MaxText PR #5056: explicit sharding, four microbatches, gradients all-reduced inside the accumulation loop."""
    mesh = mesh1("data", explicit=True)

    def step(w: Any, batch: Any) -> Any:
        def body(acc: Any, mb: Any) -> tuple[Any, None]:
            return acc + jax.grad(_mse)(w, mb), None  # the gradient of each microbatch

        acc, _ = jax.lax.scan(body, jnp.zeros_like(w), batch)
        return w - 0.1 * acc / 4

    with jax.set_mesh(mesh):
        args = (sds(mesh, (512, 512), P()), sds(mesh, (4, 64, 512), P(None, "data")))
    return _under(mesh, step), args


def maxtext_5056_fixed() -> tuple[Any, tuple[Any, ...]]:
    """The fix: accumulate each device's partial gradients and reduce once, after the loop."""
    mesh = mesh1("data")

    def local(w: Any, batch: Any) -> Any:
        def body(acc: Any, mb: Any) -> tuple[Any, None]:
            return acc + jax.grad(_mse)(w, mb) / 8, None

        acc, _ = jax.lax.scan(body, jnp.zeros_like(w), batch)
        return jax.lax.psum(acc, "data")

    def step(w: Any, batch: Any) -> Any:
        grads = shard_map(local, mesh=mesh, in_specs=(P(), P(None, "data")), out_specs=P(), check=False)(w, batch)
        return w - 0.1 * grads / 4

    return jax.jit(step), (sds(mesh, (512, 512), P()), sds(mesh, (4, 64, 512), P(None, "data")))


def _under(mesh: Any, step: Callable[..., Any]) -> Any:
    """``jax.jit(step)`` lowered under ``jax.set_mesh(mesh)`` (explicit axes need the mesh in context)."""
    jitted = jax.jit(step)

    class UnderMesh:
        __name__ = step.__name__
        __wrapped__ = step

        def lower(self, *args: Any, **kwargs: Any) -> Any:
            with jax.set_mesh(mesh):
                return jitted.lower(*args, **kwargs)

    return UnderMesh()


def optax_multisteps_dp() -> tuple[Any, tuple[Any, ...]]:
    """Optax's MultiSteps / Flax's gradient accumulation written as a fori_loop under data parallelism: each
    microbatch's gradients are all-reduced over ``data`` before they are added."""
    mesh = mesh1("data")

    def step(w: Any, batch: Any) -> Any:
        def body(i: Any, acc: Any) -> Any:
            return acc + jax.grad(_mse)(w, batch[i])

        return w - 0.1 * jax.lax.fori_loop(0, 8, body, jnp.zeros_like(w))

    return jax.jit(step), (sds(mesh, (256, 1024), P()), sds(mesh, (8, 64, 256), P(None, "data")))


def optax_multisteps_dp_fixed() -> tuple[Any, tuple[Any, ...]]:
    mesh = mesh1("data")

    def local(w: Any, batch: Any) -> Any:
        def body(i: Any, acc: Any) -> Any:
            return acc + jax.grad(_mse)(w, batch[i]) / 8

        return jax.lax.psum(jax.lax.fori_loop(0, 8, body, jnp.zeros_like(w)), "data")

    def step(w: Any, batch: Any) -> Any:
        return w - 0.1 * shard_map(local, mesh=mesh, in_specs=(P(), P(None, "data")), out_specs=P(), check=False)(
            w, batch
        )

    return jax.jit(step), (sds(mesh, (256, 1024), P()), sds(mesh, (8, 64, 256), P(None, "data")))


def scaling_book_accumulation_2d() -> tuple[Any, tuple[Any, ...]]:
    """The scaling book's data parallelism on a 2D mesh (its "Training" chapter): weights split over ``model``,
    the batch over ``data``, microbatches accumulated in a scan — each microbatch's gradient reduced over data."""
    mesh = mesh2("data", "model", (4, 2))

    def step(w: Any, batch: Any) -> Any:
        def body(acc: Any, mb: Any) -> tuple[Any, None]:
            return acc + jax.grad(_mse)(w, mb), None

        acc, _ = jax.lax.scan(body, jnp.zeros_like(w), batch)
        return w - 0.1 * acc

    return jax.jit(step), (sds(mesh, (512, 1024), P(None, "model")), sds(mesh, (4, 64, 512), P(None, "data")))


def scaling_book_accumulation_2d_fixed() -> tuple[Any, tuple[Any, ...]]:
    mesh = mesh2("data", "model", (4, 2))

    def local(w: Any, batch: Any) -> Any:
        def body(acc: Any, mb: Any) -> tuple[Any, None]:
            x = jax.lax.all_gather(mb, "model", axis=1, tiled=True)
            return acc + jax.grad(lambda w: jnp.mean(jnp.tanh(x @ w) ** 2) / 4)(w), None

        acc, _ = jax.lax.scan(body, jnp.zeros_like(w), batch)
        return jax.lax.psum(acc, "data")

    def step(w: Any, batch: Any) -> Any:
        specs = (P(None, "model"), P(None, "data", "model"))
        return w - 0.1 * shard_map(local, mesh=mesh, in_specs=specs, out_specs=P(None, "model"), check=False)(w, batch)

    return jax.jit(step), (sds(mesh, (512, 1024), P(None, "model")), sds(mesh, (4, 64, 512), P(None, "data")))


# ---- a collective of a loop-invariant operand inside a loop ----------------------------------------------


TPU = "tpu:v5p:2x2x2"
"""The loop-invariant cases compile for libtpu's compile-only v5p devices: XLA:CPU hoists their collectives out
of the loop itself (its loop-invariant code motion), XLA:TPU keeps them in it."""


def tpu_mesh(name: str) -> Any:
    from sharding_core.program.targets import mesh

    return mesh(TPU, (8,), (name,))


def albert_shared_layer() -> tuple[Any, tuple[Any, ...]]:
    """ALBERT's cross-layer parameter sharing (Lan et al., 2019) scanned with one FSDP-split weight closed over:
    the weight is gathered again in every iteration though it never changes."""
    mesh = tpu_mesh("fsdp")

    def step(w: Any, x: Any) -> Any:
        def layer(h: Any, _: Any) -> tuple[Any, None]:
            full = jax.lax.with_sharding_constraint(w, NamedSharding(mesh, P()))  # the same w every layer
            return jnp.tanh(h @ full), None

        h, _ = jax.lax.scan(layer, x, None, length=6)
        return h

    return jax.jit(step), (sds(mesh, (1024, 1024), P("fsdp")), sds(mesh, (64, 1024), P("fsdp")))


def albert_shared_layer_fixed() -> tuple[Any, tuple[Any, ...]]:
    mesh = tpu_mesh("fsdp")

    def step(w: Any, x: Any) -> Any:
        full = jax.lax.with_sharding_constraint(w, NamedSharding(mesh, P()))  # gathered once, before the loop

        def layer(h: Any, _: Any) -> tuple[Any, None]:
            return jnp.tanh(h @ jax.lax.optimization_barrier(full)), None

        h, _ = jax.lax.scan(layer, x, None, length=6)
        return h

    return jax.jit(step), (sds(mesh, (1024, 1024), P("fsdp")), sds(mesh, (64, 1024), P("fsdp")))


def jax_fori_loop_norm() -> tuple[Any, tuple[Any, ...]]:
    """JAX's ``fori_loop`` docs pattern, power iteration with a normalisation by a sharded constant's norm
    computed inside the loop: the norm's all-reduce runs every iteration."""
    mesh = tpu_mesh("data")

    def step(a: Any, v: Any, scale: Any) -> Any:
        def body(i: Any, x: Any) -> Any:
            table = jax.lax.with_sharding_constraint(scale, NamedSharding(mesh, P()))  # scale never changes
            return jnp.tanh(a @ x) + table[i % 8]

        return jax.lax.fori_loop(0, 10, body, v)

    return jax.jit(step), (sds(mesh, (512, 512), P(None, "data")), sds(mesh, (512, 256), P("data")),
                           sds(mesh, (8, 512, 256), P(None, "data")))  # fmt: skip


def jax_fori_loop_norm_fixed() -> tuple[Any, tuple[Any, ...]]:
    mesh = tpu_mesh("data")

    def step(a: Any, v: Any, scale: Any) -> Any:
        table = jax.lax.with_sharding_constraint(scale, NamedSharding(mesh, P()))  # once, before the loop

        def body(i: Any, x: Any) -> Any:
            return jnp.tanh(a @ x) + jax.lax.optimization_barrier(table)[i % 8]

        return jax.lax.fori_loop(0, 10, body, v)

    return jax.jit(step), (sds(mesh, (512, 512), P(None, "data")), sds(mesh, (512, 256), P("data")),
                           sds(mesh, (8, 512, 256), P(None, "data")))  # fmt: skip


# ---- the batch not split over an axis that splits the parameters ----------------------------------------


def naive_fsdp(d: int = 256, layers: int = 2, batch: int = 16, seq: int = 128, fixed: bool = False) -> Any:
    """Issue 32's naive-FSDP decoder, small: tokens ``P('fsdp', None)``, every weight split on ``fsdp`` over
    d_model; Shardy moves ``fsdp`` from the batch to d_model of the residual stream."""
    mesh = mesh1("fsdp")
    vocab, heads = 512, 4

    def block(x: Any, w: Any) -> tuple[Any, None]:
        x = jax.lax.with_sharding_constraint(x, NamedSharding(mesh, P("fsdp", None, None))) if fixed else x
        q, k, v = (jnp.einsum("bsd,dhk->bshk", x, w[n]) for n in ("wq", "wk", "wv"))
        scores = jnp.einsum("bqhk,bshk->bhqs", q, k) / 8.0
        attn = jnp.einsum("bhqs,bshk->bqhk", jax.nn.softmax(scores, axis=-1), v)
        x = x + jnp.einsum("bqhk,hkd->bqd", attn, w["wo"])  # the residual stream
        return x + jax.nn.gelu(x @ w["w1"]) @ w["w2"], None

    def loss(params: Any, tokens: Any) -> Any:
        x = params["embed"][tokens]
        x, _ = jax.lax.scan(jax.checkpoint(block), x, params["layers"])
        logits = x @ params["unembed"]
        return jnp.mean(jax.nn.logsumexp(logits, axis=-1))

    def step(params: Any, tokens: Any) -> Any:
        grads = jax.grad(loss)(params, tokens)
        return jax.tree.map(lambda p, g: p - 1e-3 * g, params, grads)

    hk = d // heads
    params = {
        "embed": sds(mesh, (vocab, d), P(None, "fsdp")),
        "unembed": sds(mesh, (d, vocab), P("fsdp")),
        "layers": {
            "wq": sds(mesh, (layers, d, heads, hk), P(None, "fsdp")),
            "wk": sds(mesh, (layers, d, heads, hk), P(None, "fsdp")),
            "wv": sds(mesh, (layers, d, heads, hk), P(None, "fsdp")),
            "wo": sds(mesh, (layers, heads, hk, d), P(None, None, None, "fsdp")),
            "w1": sds(mesh, (layers, d, 4 * d), P(None, "fsdp")),
            "w2": sds(mesh, (layers, 4 * d, d), P(None, None, "fsdp")),
        },
    }
    return jax.jit(step), (params, sds(mesh, (batch, seq), P("fsdp", None), jnp.int32))


def naive_fsdp_mlp(fixed: bool = False) -> tuple[Any, tuple[Any, ...]]:
    """The scaling book's FSDP section done naively on an MLP: batch on ``fsdp``, weights split on ``fsdp``
    along d_model; the hidden states take ``fsdp`` on d_model instead of the batch."""
    mesh = mesh1("fsdp")

    def step(w1: Any, w2: Any, x: Any) -> Any:
        def loss(w1: Any, w2: Any) -> Any:
            h = x @ w1
            h = jax.lax.with_sharding_constraint(h, NamedSharding(mesh, P("fsdp", None))) if fixed else h
            return jnp.mean((jax.nn.relu(h) @ w2 + x) ** 2)

        g1, g2 = jax.grad(loss, argnums=(0, 1))(w1, w2)
        return w1 - 1e-3 * g1, w2 - 1e-3 * g2

    return jax.jit(step), (sds(mesh, (1024, 4096), P(None, "fsdp")), sds(mesh, (4096, 1024), P(None, "fsdp")),
                           sds(mesh, (256, 1024), P("fsdp")))  # fmt: skip


# ---- padding, replication between splits ------------------------------------------------------------------


def gpt2_heads_over_8() -> tuple[Any, tuple[Any, ...]]:
    """GPT-2 small's 12 attention heads split over 8-way tensor parallelism (12 is not a multiple of 8): every
    device holds 2 heads' room, a quarter of it padding."""
    mesh = mesh1("model")

    def step(x: Any, wq: Any) -> Any:
        q = jnp.einsum("bsd,dhk->bshk", x, wq)
        q = jax.lax.with_sharding_constraint(q, NamedSharding(mesh, P(None, None, "model")))
        return jnp.sum(jnp.tanh(q), axis=(2, 3))

    return jax.jit(step), (sds(mesh, (8, 1024, 768), P()), sds(mesh, (768, 12, 64), P()))


def uneven_batch_over_8() -> tuple[Any, tuple[Any, ...]]:
    """JAX's sharded-computation tutorial with a batch of 12 over 8 devices: the batch is padded to 16."""
    mesh = mesh1("data")

    def step(x: Any, w: Any) -> Any:
        h = jax.lax.with_sharding_constraint(x @ w, NamedSharding(mesh, P("data")))
        return jnp.sum(jnp.tanh(h), axis=0)

    return jax.jit(step), (sds(mesh, (12, 256), P()), sds(mesh, (256, 262144), P()))


def debug_constraint_to_replicated() -> tuple[Any, tuple[Any, ...]]:
    """``with_sharding_constraint(x, P())`` left in a model (the JAX sharding guide's constraint, written to
    replicate for a debugging print) between two values split over ``model``."""
    mesh = mesh1("model")

    def step(x: Any) -> Any:
        a = jnp.tanh(x)
        b = jax.lax.with_sharding_constraint(a * 2.0, NamedSharding(mesh, P()))
        c = jax.lax.with_sharding_constraint(jnp.exp(b), NamedSharding(mesh, P(None, "model")))
        return c

    return jax.jit(step), (sds(mesh, (1024, 4096), P(None, "model")),)


def debug_constraint_removed() -> tuple[Any, tuple[Any, ...]]:
    mesh = mesh1("model")

    def step(x: Any) -> Any:
        return jnp.exp(jnp.tanh(x) * 2.0)

    return jax.jit(step), (sds(mesh, (1024, 4096), P(None, "model")),)


# ---- partitioner fallback ---------------------------------------------------------------------------------

VOCAB = 131072  # a Llama 3-sized vocabulary (128k)


def tpu_inference_3511_topk() -> tuple[Any, tuple[Any, ...]]:
    """vLLM's TPU sampler before vllm-project/tpu-inference #3511: top-k over logits whose vocabulary is split over
    tensor parallelism. XLA's partitioner cannot pick along a split dimension: every device gathers the whole
    (batch, vocab) logits and takes the top k of all of them."""
    mesh = mesh1("model")

    def sample(logits: Any) -> Any:
        return jax.lax.top_k(logits, 8)  # the sampler's top-k

    return jax.jit(sample), (sds(mesh, (64, VOCAB), P(None, "model")),)


def tpu_inference_3511_topk_fixed() -> tuple[Any, tuple[Any, ...]]:
    """The PR's fix: each vocabulary shard keeps its own top k, and only those candidates are gathered."""
    mesh = mesh1("model")

    def local(block: Any) -> Any:
        values, index = jax.lax.top_k(block, 8)
        index = index + jax.lax.axis_index("model") * block.shape[-1]
        values = jax.lax.all_gather(values, "model", axis=1, tiled=True)
        index = jax.lax.all_gather(index, "model", axis=1, tiled=True)
        top, where = jax.lax.top_k(values, 8)
        return top, jnp.take_along_axis(index, where, axis=1)

    f = shard_map(local, mesh=mesh, in_specs=P(None, "model"), out_specs=(P(), P()), check=False)
    return jax.jit(f), (sds(mesh, (64, VOCAB), P(None, "model")),)


REPRODUCERS = [
    Case("maxtext_5056", "https://github.com/AI-Hypercomputer/maxtext/pull/5056", "reduced_every_iteration",
         maxtext_5056, maxtext_5056_fixed, "jax.grad(_mse)", 4),
    Case("optax_multisteps_dp", "https://optax.readthedocs.io (optax.MultiSteps, gradient accumulation)",
         "reduced_every_iteration", optax_multisteps_dp, optax_multisteps_dp_fixed, "jax.grad(_mse)", 8),
    Case("scaling_book_accumulation_2d", "https://jax-ml.github.io/scaling-book/training/",
         "reduced_every_iteration", scaling_book_accumulation_2d, scaling_book_accumulation_2d_fixed,
         "jax.grad(_mse)", 4),
    Case("albert_shared_layer", "https://arxiv.org/abs/1909.11942 (ALBERT: cross-layer parameter sharing)",
         "loop_invariant_collective", albert_shared_layer, albert_shared_layer_fixed, "the same w every layer", 6,
         True),
    Case("jax_fori_loop_norm", "https://docs.jax.dev/en/latest/_autosummary/jax.lax.fori_loop.html",
         "loop_invariant_collective", jax_fori_loop_norm, jax_fori_loop_norm_fixed, "scale never changes", 10, True),
    Case("shardscope_issue_32_naive_fsdp", "Shardscope issue 32 (the naive-FSDP decoder)", "batch_not_split",
         naive_fsdp, partial(naive_fsdp, fixed=True), "the residual stream"),
    Case("scaling_book_naive_fsdp_mlp", "https://jax-ml.github.io/scaling-book/training/ (FSDP)",
         "batch_not_split", naive_fsdp_mlp),
    Case("gpt2_heads_over_8", "https://huggingface.co/openai-community/gpt2 (12 heads)", "uneven_padding",
         gpt2_heads_over_8),
    Case("uneven_batch_over_8", "https://docs.jax.dev/en/latest/sharded-computation.html", "uneven_padding",
         uneven_batch_over_8),
    Case("debug_constraint_to_replicated", "https://docs.jax.dev/en/latest/notebooks/Distributed_arrays_and_"
         "automatic_parallelization.html (with_sharding_constraint)", "replicated_between_split",
         debug_constraint_to_replicated, debug_constraint_removed),
    Case("tpu_inference_3511_topk", "https://github.com/vllm-project/tpu-inference/pull/3511 (top-k over "
         "vocab-split logits)", "partitioner_fallback", tpu_inference_3511_topk, tpu_inference_3511_topk_fixed,
         "the sampler's top-k", 1),  # its bytes checked against the all-gather in XLA's HLO
]  # fmt: skip


# ---- clean programs: no finding ----------------------------------------------------------------------------


def example(module: str, name: str, shape: tuple[int, ...], axes: tuple[str, ...]) -> Build:
    """A plan function of ``examples/`` on the CPU devices."""

    def build() -> tuple[Any, tuple[Any, ...]]:
        import importlib

        fn = getattr(importlib.import_module(f"examples.{module}"), name)
        return fn(jax.make_mesh(shape, axes, axis_types=(AxisType.Auto,) * len(axes)))  # type: ignore[no-any-return]

    return build


def llama_tp() -> tuple[Any, tuple[Any, ...]]:
    """The examples' tensor-parallel Llama step, tiny with 8 KV heads (8-way tp splits them evenly)."""
    from examples import llama

    cfg = llama.Config(vocab=1024, d_model=256, n_layers=2, n_heads=8, n_kv_heads=8, head_dim=32, d_ff=512)
    return llama.plan_fn(cfg, "tp", 16, 128)(jax.make_mesh((8,), ("tp",), axis_types=(AxisType.Auto,)))


def flax_mlp_step() -> tuple[Any, tuple[Any, ...]]:
    from examples import flax_mlp

    _, state, x = flax_mlp.build(num_layers=2, depth=512)
    return jax.jit(flax_mlp.train_step), (state, x)


def megatron_mlp() -> tuple[Any, tuple[Any, ...]]:
    mesh = mesh2("data", "model")

    def step(x: Any, w1: Any, w2: Any) -> Any:
        return jnp.sum(jax.nn.gelu(x @ w1) @ w2)

    return jax.jit(step), (sds(mesh, (64, 1024), P("data")), sds(mesh, (1024, 4096), P(None, "model")),
                           sds(mesh, (4096, 1024), P("model")))  # fmt: skip


def dp_step() -> tuple[Any, tuple[Any, ...]]:
    mesh = mesh1("data")

    def step(w: Any, x: Any) -> Any:
        return w - 0.1 * jax.grad(_mse)(w, x)

    return jax.jit(step), (sds(mesh, (512, 512), P()), sds(mesh, (256, 512), P("data")))


def fsdp_mlp() -> tuple[Any, tuple[Any, ...]]:
    """FSDP as the scaling book writes it: weights split on fsdp, gathered for each matmul; the batch stays split."""
    mesh = mesh1("fsdp")

    def step(w1: Any, w2: Any, x: Any) -> Any:
        def loss(w1: Any, w2: Any) -> Any:
            gather = partial(jax.lax.with_sharding_constraint, shardings=NamedSharding(mesh, P()))
            h = jax.lax.with_sharding_constraint(x @ gather(w1), NamedSharding(mesh, P("fsdp")))
            return jnp.mean((jax.nn.relu(h) @ gather(w2) + x) ** 2)

        g1, g2 = jax.grad(loss, argnums=(0, 1))(w1, w2)
        return w1 - 1e-3 * g1, w2 - 1e-3 * g2

    return jax.jit(step), (sds(mesh, (1024, 4096), P("fsdp")), sds(mesh, (4096, 1024), P("fsdp")),
                           sds(mesh, (256, 1024), P("fsdp")))  # fmt: skip


def scanned_tp_layers() -> tuple[Any, tuple[Any, ...]]:
    """Megatron layers in a scan: the residual stream's all-reduce runs every layer, as it must."""
    mesh = mesh2("data", "model")

    def step(x: Any, w1: Any, w2: Any) -> Any:
        def layer(h: Any, w: Any) -> tuple[Any, None]:
            return h + jax.nn.gelu(h @ w[0]) @ w[1], None

        y, _ = jax.lax.scan(layer, x, (w1, w2))
        return jnp.sum(y)

    return jax.jit(step), (sds(mesh, (64, 512), P("data")), sds(mesh, (4, 512, 2048), P(None, None, "model")),
                           sds(mesh, (4, 2048, 512), P(None, "model")))  # fmt: skip


def scanned_fsdp_layers() -> tuple[Any, tuple[Any, ...]]:
    """Stacked FSDP weights in a scan: each layer's own slice gathered once per layer, with its gradient."""
    mesh = mesh1("fsdp")

    def step(x: Any, ws: Any) -> Any:
        def loss(ws: Any) -> Any:
            def layer(h: Any, w: Any) -> tuple[Any, None]:
                w = jax.lax.with_sharding_constraint(w, NamedSharding(mesh, P()))
                return jax.lax.with_sharding_constraint(jnp.tanh(h @ w), NamedSharding(mesh, P("fsdp"))), None

            y, _ = jax.lax.scan(layer, x, ws)
            return jnp.mean(y**2)

        return ws - 1e-3 * jax.grad(loss)(ws)

    return jax.jit(step), (sds(mesh, (128, 512), P("fsdp")), sds(mesh, (4, 512, 512), P(None, "fsdp")))


def even_heads() -> tuple[Any, tuple[Any, ...]]:
    mesh = mesh1("model")

    def step(x: Any, wq: Any) -> Any:
        q = jax.lax.with_sharding_constraint(
            jnp.einsum("bsd,dhk->bshk", x, wq), NamedSharding(mesh, P(None, None, "model"))
        )
        return jnp.sum(jnp.tanh(q), axis=(2, 3))  # fmt: skip

    return jax.jit(step), (sds(mesh, (8, 1024, 512), P()), sds(mesh, (512, 8, 64), P(None, "model")))


def even_batch() -> tuple[Any, tuple[Any, ...]]:
    mesh = mesh1("data")

    def step(x: Any, w: Any) -> Any:
        return jnp.sum(jnp.tanh(x @ w), axis=0)

    return jax.jit(step), (sds(mesh, (16, 256), P("data")), sds(mesh, (256, 65536), P()))


def embedding_vocab_split() -> tuple[Any, tuple[Any, ...]]:
    mesh = mesh2("data", "model")

    def step(table: Any, ids: Any) -> Any:
        return jnp.sum(table[ids], axis=-1)

    return jax.jit(step), (sds(mesh, (32768, 256), P("model")), sds(mesh, (64, 128), P("data"), jnp.int32))


def explicit_matmul() -> tuple[Any, tuple[Any, ...]]:
    mesh = jax.make_mesh((2, 4), ("x", "y"), axis_types=(AxisType.Explicit,) * 2)

    def step(a: Any, b: Any) -> Any:
        return jnp.tanh(jnp.matmul(a, b, out_sharding=NamedSharding(mesh, P("x", "y"))))

    with jax.set_mesh(mesh):
        args = (sds(mesh, (256, 512), P("x", None)), sds(mesh, (512, 1024), P(None, "y")))
    return _under(mesh, step), args


def ring_permute() -> tuple[Any, tuple[Any, ...]]:
    mesh = mesh1("x")

    def local(v: Any) -> Any:
        def body(i: Any, acc: Any) -> Any:
            return jax.lax.ppermute(acc, "x", [(j, (j + 1) % 8) for j in range(8)]) * 0.5 + v

        return jax.lax.fori_loop(0, 7, body, v)

    return jax.jit(shard_map(local, mesh=mesh, in_specs=P("x"), out_specs=P("x"))), (sds(mesh, (64, 1024), P("x")),)


def power_iteration() -> tuple[Any, tuple[Any, ...]]:
    """Each iteration's all-reduce reduces a new product: it must run every time."""
    mesh = mesh1("data")

    def step(a: Any, v: Any) -> Any:
        return jax.lax.fori_loop(0, 10, lambda i, x: jnp.tanh(a @ x), v)

    return jax.jit(step), (sds(mesh, (512, 512), P(None, "data")), sds(mesh, (512, 256), P("data")))


def conv_dp() -> tuple[Any, tuple[Any, ...]]:
    mesh = mesh1("data")

    def step(x: Any, k: Any) -> Any:
        y = jax.lax.conv_general_dilated(x, k, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
        return jnp.mean(jax.nn.relu(y))

    return jax.jit(step), (sds(mesh, (16, 32, 32, 16), P("data")), sds(mesh, (3, 3, 16, 32), P()))


CLEAN = [
    Case("examples_llama_tiny_fsdp", "examples/llama.py", None, example("llama", "tiny_fsdp", (8,), ("fsdp",))),
    Case("examples_llama_tp", "examples/llama.py", None, llama_tp),
    Case("examples_llama_tiny_fsdp_tp", "examples/llama.py", None,
         example("llama", "tiny_fsdp_tp", (2, 4), ("fsdp", "tp"))),
    Case("examples_moe_tiny_ep", "examples/moe.py", None, example("moe", "tiny_ep", (2, 4), ("data", "expert"))),
    Case("examples_flax_mlp", "examples/flax_mlp.py", None, flax_mlp_step),
    Case("megatron_mlp", "Megatron-LM tensor parallelism", None, megatron_mlp),
    Case("dp_step", "data parallelism", None, dp_step),
    Case("fsdp_mlp", "the scaling book's FSDP", None, fsdp_mlp),
    Case("scanned_tp_layers", "tensor-parallel layers in a scan", None, scanned_tp_layers),
    Case("scanned_fsdp_layers", "FSDP layers in a scan", None, scanned_fsdp_layers),
    Case("even_heads", "8 heads over 8", None, even_heads),
    Case("even_batch", "16 over 8", None, even_batch),
    Case("embedding_vocab_split", "a vocabulary-split embedding", None, embedding_vocab_split),
    Case("explicit_matmul", "explicit sharding", None, explicit_matmul),
    Case("ring_permute", "a ring in shard_map", None, ring_permute),
    Case("power_iteration", "a fori_loop whose reduction changes", None, power_iteration),
    Case("conv_dp", "a data-parallel convolution", None, conv_dp),
    Case("maxtext_5056_fixed", "the fix of MaxText #5056", None, maxtext_5056_fixed),
    Case("optax_multisteps_dp_fixed", "accumulated, reduced once", None, optax_multisteps_dp_fixed),
    Case("naive_fsdp_fixed", "issue 32's decoder with the constraint", None, partial(naive_fsdp, fixed=True)),
    Case("naive_fsdp_mlp_fixed", "the MLP with the constraint", None, partial(naive_fsdp_mlp, fixed=True)),
    Case("albert_shared_layer_fixed", "gathered once before the loop", None, albert_shared_layer_fixed, tpu=True),
    Case("scaling_book_accumulation_2d_fixed", "reduced once after the loop", None,
         scaling_book_accumulation_2d_fixed),
    Case("jax_fori_loop_norm_fixed", "gathered once before the loop", None, jax_fori_loop_norm_fixed, tpu=True),
    Case("tpu_inference_3511_topk_fixed", "top-k per vocabulary shard, candidates gathered", None,
         tpu_inference_3511_topk_fixed),
]  # fmt: skip
