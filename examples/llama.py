"""A Llama-3-style decoder's training step, in plain JAX, for planning on hardware you don't have.

Shapes only: parameters, Adam's moments and the batch are ``jax.ShapeDtypeStruct``s sharded on the mesh
``shardscope plan`` (or :func:`shardscope.mesh`) gives, so nothing is allocated and no weights are
downloaded. The step is what a real training loop runs: token embedding, ``n_layers`` decoder layers
(RMSNorm, grouped-query attention with RoPE, SwiGLU) stacked on a leading axis and run by
``jax.lax.scan`` under ``jax.checkpoint`` (rematerialised: only each layer's input is saved), a
bf16 forward pass over fp32 parameters, cross-entropy, and ``optax.adamw``.

Sharding is named once, by logical axes (MaxText's convention): every parameter dimension has a logical
name (``embed``, ``heads``, ``mlp``, ``vocab`` ...) and :data:`RULES` map them to mesh axes for three
strategies — ``fsdp`` (parameters and optimizer state sharded over ``fsdp`` along ``embed``, the batch
over ``fsdp``), ``tp`` (Megatron-style: heads, MLP and vocabulary over ``tp``) and ``fsdp_tp`` (both).

    shardscope plan examples/llama.py:llama_8b_fsdp_tp --devices tpu:v5p:4x4x4 --mesh 16x4 --axes fsdp,tp
    shardscope plan examples/llama.py:llama_70b_fsdp --devices tpu:v5p:4x8x8 --mesh 256 --axes fsdp

Every ``llama_<size>_<strategy>(mesh)`` function returns ``(jitted_step, (params, opt_state, batch))``;
:func:`plan_fn` makes your own (any :class:`Config`, batch and sequence length).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Mapping
from typing import Any

import jax
import jax.numpy as jnp
import optax
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from sharding_core.snapshot.rules import logical_to_mesh_axes


@dataclasses.dataclass(frozen=True)
class Config:
    """A Llama-3-style decoder. Defaults are Llama 3 8B (Meta's model card / ``config.json``)."""

    vocab: int = 128256
    d_model: int = 4096
    n_layers: int = 32
    n_heads: int = 32
    n_kv_heads: int = 8
    head_dim: int = 128
    d_ff: int = 14336
    rope_theta: float = 500000.0
    param_dtype: str = "float32"
    compute_dtype: str = "bfloat16"
    remat: bool = True  # jax.checkpoint around each layer: only the layer's input is kept for the backward pass
    remat_policy: str = "nothing_saveable"  # the jax.checkpoint_policies name remat uses

    @property
    def params(self) -> int:
        """Parameters (embedding and unembedding untied, as in Llama 3 8B and 70B)."""
        d, h, kv, hd, f = self.d_model, self.n_heads, self.n_kv_heads, self.head_dim, self.d_ff
        layer = d * h * hd + 2 * d * kv * hd + h * hd * d + 3 * d * f + 2 * d
        return 2 * self.vocab * d + self.n_layers * layer + d


CONFIGS: dict[str, Config] = {
    "1b": Config(d_model=2048, n_layers=16, n_heads=32, n_kv_heads=8, head_dim=64, d_ff=8192),  # Llama 3.2 1B
    "8b": Config(),
    "70b": Config(d_model=8192, n_layers=80, n_heads=64, n_kv_heads=8, head_dim=128, d_ff=28672),
    # small enough to compile in seconds: what the tests plan
    "tiny": Config(vocab=1024, d_model=256, n_layers=2, n_heads=8, n_kv_heads=4, head_dim=32, d_ff=512),
}

# Logical axis -> mesh axis, per strategy (the first matching rule wins, as in Flax).
RULES: dict[str, tuple[tuple[str, Any], ...]] = {
    "fsdp": (("batch", "fsdp"), ("embed", "fsdp")),
    "tp": (("heads", "tp"), ("kv_heads", "tp"), ("mlp", "tp"), ("vocab", "tp")),
    "fsdp_tp": (
        ("batch", "fsdp"),
        ("embed", "fsdp"),
        ("heads", "tp"),
        ("kv_heads", "tp"),
        ("mlp", "tp"),
        ("vocab", "tp"),
    ),
}

# Each parameter's shape (from the config) and the logical name of each dimension.
LOGICAL: dict[str, tuple[str | None, ...]] = {
    "embed": ("vocab", "embed"),
    "layers/attn_norm": ("layers", None),
    "layers/wq": ("layers", "embed", "heads", None),
    "layers/wk": ("layers", "embed", "kv_heads", None),
    "layers/wv": ("layers", "embed", "kv_heads", None),
    "layers/wo": ("layers", "heads", None, "embed"),
    "layers/mlp_norm": ("layers", None),
    "layers/w_gate": ("layers", "embed", "mlp"),
    "layers/w_up": ("layers", "embed", "mlp"),
    "layers/w_down": ("layers", "mlp", "embed"),
    "final_norm": (None,),
    "unembed": ("embed", "vocab"),
}


def param_shapes(cfg: Config) -> dict[str, Any]:
    """The parameter tree's shapes: layers stacked on a leading axis (what ``lax.scan`` runs over)."""
    L, d, h, kv, hd, f, v = cfg.n_layers, cfg.d_model, cfg.n_heads, cfg.n_kv_heads, cfg.head_dim, cfg.d_ff, cfg.vocab
    return {
        "embed": (v, d),
        "layers": {
            "attn_norm": (L, d),
            "wq": (L, d, h, hd),
            "wk": (L, d, kv, hd),
            "wv": (L, d, kv, hd),
            "wo": (L, h, hd, d),
            "mlp_norm": (L, d),
            "w_gate": (L, d, f),
            "w_up": (L, d, f),
            "w_down": (L, f, d),
        },
        "final_norm": (d,),
        "unembed": (d, v),
    }


def spec_for(names: tuple[str | None, ...], rules: tuple[tuple[str, Any], ...]) -> P:
    """The PartitionSpec of a value whose dimensions carry these logical names, under ``rules``."""
    return P(*logical_to_mesh_axes(names, rules))


def abstract_params(
    cfg: Config,
    mesh: jax.sharding.Mesh,
    rules: tuple[tuple[str, Any], ...],
    shapes: dict[str, Any] | None = None,
    logical: Mapping[str, tuple[str | None, ...]] = LOGICAL,
) -> dict[str, Any]:
    """The parameters as sharded ``ShapeDtypeStruct``s (nothing allocated)."""
    dtype = jnp.dtype(cfg.param_dtype)

    def leaf(path: str, shape: tuple[int, ...]) -> jax.ShapeDtypeStruct:
        return jax.ShapeDtypeStruct(shape, dtype, sharding=NamedSharding(mesh, spec_for(logical[path], rules)))

    shapes = shapes if shapes is not None else param_shapes(cfg)
    return {
        k: {n: leaf(f"{k}/{n}", s) for n, s in v.items()} if isinstance(v, dict) else leaf(k, v)
        for k, v in shapes.items()
    }


def optimizer(learning_rate: float = 3e-4) -> optax.GradientTransformation:
    return optax.adamw(learning_rate, b1=0.9, b2=0.95, weight_decay=0.1)


def abstract_opt_state(opt: optax.GradientTransformation, params: Any, mesh: jax.sharding.Mesh) -> Any:
    """The optimizer state as ``ShapeDtypeStruct``s: each parameter-shaped moment sharded like its
    parameter (``optax.tree_map_params``), everything else (the step count) replicated."""
    state = jax.eval_shape(opt.init, params)
    replicated = NamedSharding(mesh, P())
    return optax.tree_map_params(
        opt,
        lambda s, p: jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=p.sharding),
        state,
        params,
        transform_non_params=lambda s: jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=replicated),
    )


def abstract_batch(
    batch: int, seq: int, mesh: jax.sharding.Mesh, rules: tuple[tuple[str, Any], ...]
) -> dict[str, jax.ShapeDtypeStruct]:
    sharding = NamedSharding(mesh, spec_for(("batch", None), rules))
    return {k: jax.ShapeDtypeStruct((batch, seq), jnp.int32, sharding=sharding) for k in ("tokens", "targets")}


# ---- the model ---------------------------------------------------------------------------------------


def rms_norm(x: jax.Array, scale: jax.Array, eps: float = 1e-5) -> jax.Array:
    x32 = x.astype(jnp.float32)
    normed = x32 * jax.lax.rsqrt(jnp.mean(x32 * x32, axis=-1, keepdims=True) + eps)
    return (normed * scale.astype(jnp.float32)).astype(x.dtype)


def rope(x: jax.Array, theta: float) -> jax.Array:
    """Rotary position embedding over the last axis of ``x`` [batch, seq, heads, head_dim]."""
    seq, dim = x.shape[1], x.shape[-1]
    freqs = 1.0 / (theta ** (jnp.arange(0, dim, 2, dtype=jnp.float32) / dim))
    angles = jnp.arange(seq, dtype=jnp.float32)[:, None] * freqs[None, :]
    sin, cos = jnp.sin(angles)[None, :, None, :], jnp.cos(angles)[None, :, None, :]
    x1, x2 = jnp.split(x.astype(jnp.float32), 2, axis=-1)
    return jnp.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1).astype(x.dtype)


def attention_block(cfg: Config, constrain: Callable[..., jax.Array], x: jax.Array, w: Mapping[str, jax.Array]) -> Any:
    """x + grouped-query causal self-attention of norm(x), RoPE on queries and keys."""
    h = rms_norm(x, w["attn_norm"])
    q = rope(jnp.einsum("bsd,dhk->bshk", h, w["wq"]), cfg.rope_theta)
    k = rope(jnp.einsum("bsd,dhk->bshk", h, w["wk"]), cfg.rope_theta)
    v = jnp.einsum("bsd,dhk->bshk", h, w["wv"])
    q = constrain(q, ("batch", None, "heads", None))
    b, s, _, hd = q.shape
    groups = cfg.n_heads // cfg.n_kv_heads
    q = q.reshape(b, s, cfg.n_kv_heads, groups, hd)  # grouped-query attention: each kv head serves `groups` heads
    scores = jnp.einsum("bqngk,bsnk->bngqs", q, k).astype(jnp.float32) / math.sqrt(hd)
    causal = jnp.tril(jnp.ones((s, s), dtype=bool))
    scores = jnp.where(causal, scores, jnp.finfo(jnp.float32).min)
    probs = jax.nn.softmax(scores, axis=-1).astype(x.dtype)
    attn = jnp.einsum("bngqs,bsnk->bqngk", probs, v).reshape(b, s, cfg.n_heads, hd)
    return x + constrain(jnp.einsum("bshk,hkd->bsd", attn, w["wo"]), ("batch", None, "act_embed"))


def mlp_block(cfg: Config, constrain: Callable[..., jax.Array], x: jax.Array, w: Mapping[str, jax.Array]) -> Any:
    """x + SwiGLU(norm(x))."""
    h = rms_norm(x, w["mlp_norm"])
    gate = constrain(jnp.einsum("bsd,df->bsf", h, w["w_gate"]), ("batch", None, "mlp"))
    up = jnp.einsum("bsd,df->bsf", h, w["w_up"])
    return x + constrain(jnp.einsum("bsf,fd->bsd", jax.nn.silu(gate) * up, w["w_down"]), ("batch", None, "act_embed"))


def decoder_layer(cfg: Config, constrain: Callable[..., jax.Array], x: jax.Array, w: Mapping[str, jax.Array]) -> Any:
    """One decoder layer: attention, then the MLP (the layer's weights cast to the compute dtype)."""
    w = {k: v.astype(jnp.dtype(cfg.compute_dtype)) for k, v in w.items()}
    return mlp_block(cfg, constrain, attention_block(cfg, constrain, x, w), w), None


def loss_fn(
    cfg: Config,
    constrain: Callable[..., jax.Array],
    params: Any,
    batch: Mapping[str, jax.Array],
    layer_fn: Callable[..., Any] = decoder_layer,
) -> Any:
    dt = jnp.dtype(cfg.compute_dtype)
    x = constrain(params["embed"].astype(dt)[batch["tokens"]], ("batch", None, "act_embed"))
    layer = functools.partial(layer_fn, cfg, constrain)
    if cfg.remat:
        layer = jax.checkpoint(layer, policy=getattr(jax.checkpoint_policies, cfg.remat_policy))
    x, _ = jax.lax.scan(layer, x, params["layers"])
    x = rms_norm(x, params["final_norm"])
    logits = constrain(jnp.einsum("bsd,dv->bsv", x, params["unembed"].astype(dt)), ("batch", None, "vocab"))
    logp = jax.nn.log_softmax(logits.astype(jnp.float32), axis=-1)
    return -jnp.mean(jnp.take_along_axis(logp, batch["targets"][..., None], axis=-1))


def make_step(
    cfg: Config,
    opt: optax.GradientTransformation,
    mesh: jax.sharding.Mesh,
    rules: tuple[tuple[str, Any], ...],
    layer_fn: Callable[..., Any] = decoder_layer,
) -> Callable[..., Any]:
    """The training step ``(params, opt_state, batch) -> (params, opt_state, loss)``, not yet jitted."""

    def constrain(x: jax.Array, names: tuple[str | None, ...]) -> jax.Array:
        return jax.lax.with_sharding_constraint(x, NamedSharding(mesh, spec_for(names, rules)))

    def step(params: Any, opt_state: Any, batch: Mapping[str, jax.Array]) -> Any:
        loss, grads = jax.value_and_grad(lambda p, b: loss_fn(cfg, constrain, p, b, layer_fn))(params, batch)
        updates, opt_state = opt.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    return step


def plan_fn(
    cfg: Config | str, strategy: str | tuple[tuple[str, Any], ...], batch: int, seq: int
) -> Callable[[jax.sharding.Mesh], tuple[Any, tuple[Any, ...]]]:
    """A ``fn(mesh) -> (jitted_step, (params, opt_state, batch))`` for ``shardscope plan``; ``strategy`` a
    key of :data:`RULES` or your own logical-axis rules."""
    config = CONFIGS[cfg] if isinstance(cfg, str) else cfg
    rules = RULES[strategy] if isinstance(strategy, str) else tuple(strategy)
    strategy = strategy if isinstance(strategy, str) else "custom"

    def fn(mesh: jax.sharding.Mesh, remat: bool | str | None = None) -> tuple[Any, tuple[Any, ...]]:
        """``remat``: a knob ``shardscope plan --fit`` varies (False: no remat; True or a jax.checkpoint_policies
        name: remat with that policy; None: the config's)."""
        cfg = config
        if remat is not None:
            if isinstance(remat, str) and not hasattr(jax.checkpoint_policies, remat):
                raise ValueError(f"no jax.checkpoint_policies.{remat}")
            policy = remat if isinstance(remat, str) else config.remat_policy
            cfg = dataclasses.replace(config, remat=bool(remat), remat_policy=policy)
        params = abstract_params(cfg, mesh, rules)
        opt = optimizer()
        opt_state = abstract_opt_state(opt, params, mesh)
        data = abstract_batch(batch, seq, mesh, rules)
        shardings = jax.tree.map(lambda s: s.sharding, (params, opt_state, data))
        out = (shardings[0], shardings[1], NamedSharding(mesh, P()))
        step = jax.jit(
            make_step(cfg, opt, mesh, rules), in_shardings=shardings, out_shardings=out, donate_argnums=(0, 1)
        )
        return step, (params, opt_state, data)

    fn.__name__ = f"llama_{config.n_layers}l_{strategy}"
    return fn


# The shapes: Llama 3 8B at B=16, S=2048; 70B at B=64, S=1024 (S=4096 does not fit a v5p).
# Without remat (issue 33's --fit case): plan_fn(dataclasses.replace(CONFIGS["70b"], remat=False), ...).
llama_1b_fsdp = plan_fn("1b", "fsdp", 16, 2048)
llama_8b_fsdp = plan_fn("8b", "fsdp", 16, 2048)
llama_8b_tp = plan_fn("8b", "tp", 16, 2048)
llama_8b_fsdp_tp = plan_fn("8b", "fsdp_tp", 16, 2048)
llama_70b_fsdp = plan_fn("70b", "fsdp", 64, 1024)
llama_70b_fsdp_tp = plan_fn("70b", "fsdp_tp", 64, 1024)
llama_70b_fsdp_tp_s4096 = plan_fn("70b", "fsdp_tp", 64, 4096)
tiny_fsdp = plan_fn("tiny", "fsdp", 16, 128)
tiny_fsdp_tp = plan_fn("tiny", "fsdp_tp", 16, 128)
llama_70b_fsdp_tp_s4096_no_remat = plan_fn(dataclasses.replace(CONFIGS["70b"], remat=False), "fsdp_tp", 64, 4096)
tiny_fsdp_no_remat = plan_fn(dataclasses.replace(CONFIGS["tiny"], remat=False), "fsdp", 16, 128)
