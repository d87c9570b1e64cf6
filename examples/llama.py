"""A decoder-only transformer's training step, in plain JAX, for planning on hardware you don't have.

Shapes only: parameters, Adam's moments and the batch are ``jax.ShapeDtypeStruct``s sharded on the mesh
``shardscope plan`` (or :func:`shardscope.mesh`) gives, so nothing is allocated and no weights are
downloaded. The step is what a real training loop runs: token embedding, ``n_layers`` decoder layers
stacked on a leading axis and run by ``jax.lax.scan`` under ``jax.checkpoint``, a bf16 forward pass over
fp32 (or bf16) parameters, cross-entropy, and ``optax.adamw``.

One :class:`Config` covers the model families MaxText's published runs use:

* **Llama 2 / 3 / 3.1, Mistral** (the default): RMSNorm, grouped-query attention with RoPE, SwiGLU, untied
  embeddings;
* **GPT-3** (``norm="layer", mlp="gelu", position="learned", tied=True``): LayerNorm, a GeLU MLP, learned
  positions, the embedding reused for the logits (``examples/gpt3.py``);
* **MaxText's 2023 default decoder** (``parallel=True, mlp="relu", tied=True``): attention and MLP read the
  same normed input and add (PaLM's parallel block) — the model of MaxText's v5e and v5p tables;
* the MoE layers of ``examples/moe.py`` replace the MLP.

Sharding is named once, by logical axes (MaxText's convention): every parameter dimension has a logical
name (``embed``, ``heads``, ``mlp``, ``vocab`` ...) and rules map them to mesh axes — :data:`RULES` for three
strategies: ``fsdp`` (parameters and optimizer state sharded over ``fsdp`` along ``embed``, the batch over
``fsdp``), ``tp`` (Megatron-style: heads, MLP and vocabulary over ``tp``) and ``fsdp_tp`` (both); ``fsdp_tp_sp``
(MaxText's rules: the activations' embedding dimension over ``tp`` too); and ``dp_fsdp_tp`` for several slices
(the batch over ``data`` too).

    shardscope plan examples/llama.py:llama_8b_fsdp_tp --devices tpu:v5p:4x4x4 --mesh 16x4 --axes fsdp,tp
    shardscope plan examples/llama.py:llama_70b_fsdp --devices tpu:v5p:4x8x8 --mesh 256 --axes fsdp

Every plan function has the form ``fn(mesh, rules=None, **knobs)`` and returns ``(jitted_step, (params,
opt_state, batch))``; ``rules`` is a sequence of ``(logical axis, mesh axis | tuple of mesh axes | None)``
pairs (as ``flax.linen.logical_axis_rules`` takes them; default: the function's own strategy) and the knobs
(:data:`KNOBS`) are keyword options with defaults:

* ``batch`` (global) or ``batch_per_device`` (times the mesh's devices; 0.5 allowed), ``seq``;
* ``remat`` — a rematerialisation policy by the name MaxText gives it (:data:`REMAT_POLICIES`: ``full``,
  ``minimal``, ``save_dot_except_mlpwi``, ``save_qkv_proj``, ``qkv_proj_offloaded``, ``custom`` with
  ``remat_offload`` / ``remat_save`` names ...), or ``none``;
* ``attention`` — ``dot`` (the S×S scores materialised), ``flash`` (Pallas: the TPU flash-attention kernel on a
  TPU mesh, the Triton kernel on a GPU mesh) or ``splash`` (the TPU splash-attention kernel MaxText runs),
  ``attention_block`` its block size;
* ``microbatches`` — gradient accumulation over that many slices of the batch;
* ``optimizer_offload`` — Adam's moments kept in pinned host memory between steps and brought to the devices
  for the update (MaxText's ``optimizer_memory_host_offload``), so they are not in HBM while the activations are;
* ``vocab_tiles`` — the logits and the loss computed that many slices of the sequence at a time, each slice's
  logits recomputed in the backward pass, so the [batch, seq, vocab] logits are never whole (MaxText's
  ``num_vocab_tiling``);
* ``param_dtype``, ``compute_dtype``.

    fn = plan_fn("70b", "fsdp", batch=1024, seq=4096)
    step, args = fn(mesh, batch_per_device=4, attention="splash", remat="save_dot_except_mlpwi")
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import optax
from jax.ad_checkpoint import checkpoint_name
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from sharding_core.snapshot.rules import logical_to_mesh_axes


@dataclasses.dataclass(frozen=True)
class Config:
    """A decoder. Defaults are Llama 3 8B (Meta's model card / ``config.json``)."""

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
    remat: bool = True  # jax.checkpoint around each layer (the `remat` knob names the policy; False: none)
    norm: str = "rms"  # "rms" (RMSNorm, a scale) or "layer" (LayerNorm, a scale and a bias: GPT-3)
    mlp: str = "swiglu"  # "swiglu" (gate, up, down), "gelu" or "relu" (up, down)
    parallel: bool = False  # attention and MLP read the same normed input and are added (PaLM; MaxText 2023)
    tied: bool = False  # the embedding table gives the logits (no separate unembedding)
    position: str = "rope"  # "rope", or "learned": a table of `max_position` position embeddings (GPT-3)
    max_position: int = 0

    @property
    def params(self) -> int:
        """Parameters (as :func:`param_shapes` lays them out)."""
        return sum(math.prod(s) for s in _leaves(param_shapes(self)))


def _leaves(tree: Mapping[str, Any]) -> list[tuple[int, ...]]:
    return [s for v in tree.values() for s in (_leaves(v) if isinstance(v, dict) else [v])]


def maxtext_2023(scale: int) -> Config:
    """MaxText's default decoder as of December 2023 (``MaxText/configs/base.yml`` at commit 76bd53b0f:
    d 2560, 8 heads of 256, MLP 8192 with ReLU, 16 layers, vocabulary 32768, parallel block, tied embeddings)
    at ``global_parameter_scale=scale``, doubled in turn as ``pyconfig.get_individual_scales`` does: heads and
    MLP, then the embedding, then the layers."""
    log2 = int(math.log2(scale))
    if 2**log2 != scale:
        raise ValueError(f"the scale must be a power of 2, got {scale}")
    base, rem = divmod(log2, 3)
    heads = mlp = base + int(rem > 0)
    emb = base + int(rem > 1)
    return Config(vocab=32768, d_model=2560 * 2**emb, n_layers=16 * 2**base, n_heads=8 * 2**heads,
                  n_kv_heads=8 * 2**heads, head_dim=256, d_ff=8192 * 2**mlp, rope_theta=10000.0, mlp="relu",
                  parallel=True, tied=True)  # fmt: skip


CONFIGS: dict[str, Config] = {
    "1b": Config(d_model=2048, n_layers=16, n_heads=32, n_kv_heads=8, head_dim=64, d_ff=8192),  # Llama 3.2 1B
    "8b": Config(),
    "70b": Config(d_model=8192, n_layers=80, n_heads=64, n_kv_heads=8, head_dim=128, d_ff=28672),
    # MaxText's model configs (src/MaxText/configs/models/*.yml) and Meta's config.json files
    "llama2-7b": Config(vocab=32000, n_kv_heads=32, d_ff=11008, rope_theta=10000.0),
    "llama2-70b": Config(vocab=32000, d_model=8192, n_layers=80, n_heads=64, n_kv_heads=8, d_ff=28672,
                         rope_theta=10000.0),
    "llama3.1-8b": Config(),
    "llama3.1-70b": Config(d_model=8192, n_layers=80, n_heads=64, n_kv_heads=8, d_ff=28672),
    "llama3.1-405b": Config(d_model=16384, n_layers=126, n_heads=128, n_kv_heads=8, d_ff=53248),
    "mistral-7b": Config(vocab=32000, rope_theta=1e6),
    # small enough to compile in seconds: what the tests plan
    "tiny": Config(vocab=1024, d_model=256, n_layers=2, n_heads=8, n_kv_heads=4, head_dim=32, d_ff=512),
}  # fmt: skip

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
    # MaxText's rules (base.yml, 2023): with tensor parallelism the activations' embedding dimension is sharded
    # over tp too (activation_embed -> tensor), so the residual stream between the layers is not replicated
    "fsdp_tp_sp": (
        ("batch", "fsdp"),
        ("act_embed", "tp"),
        ("embed", "fsdp"),
        ("heads", "tp"),
        ("kv_heads", "tp"),
        ("mlp", "tp"),
        ("vocab", "tp"),
    ),
    # several slices: the batch over data (DCN) and fsdp, parameters over fsdp and tp
    "dp_fsdp_tp": (
        ("batch", ("data", "fsdp")),
        ("embed", "fsdp"),
        ("heads", "tp"),
        ("kv_heads", "tp"),
        ("mlp", "tp"),
        ("vocab", "tp"),
    ),
}

# Each parameter's logical name per dimension (the norms' and biases' own rows are added by `logical_for`).
LOGICAL: dict[str, tuple[str | None, ...]] = {
    "embed": ("vocab", "embed"),
    "pos_embed": (None, "embed"),
    "layers/attn_norm": ("layers", None),
    "layers/attn_norm_bias": ("layers", None),
    "layers/wq": ("layers", "embed", "heads", None),
    "layers/wk": ("layers", "embed", "kv_heads", None),
    "layers/wv": ("layers", "embed", "kv_heads", None),
    "layers/wo": ("layers", "heads", None, "embed"),
    "layers/mlp_norm": ("layers", None),
    "layers/mlp_norm_bias": ("layers", None),
    "layers/w_gate": ("layers", "embed", "mlp"),
    "layers/w_up": ("layers", "embed", "mlp"),
    "layers/w_down": ("layers", "mlp", "embed"),
    "final_norm": (None,),
    "final_norm_bias": (None,),
    "unembed": ("embed", "vocab"),
}


def param_shapes(cfg: Config) -> dict[str, Any]:
    """The parameter tree's shapes: layers stacked on a leading axis (what ``lax.scan`` runs over)."""
    L, d, h, kv, hd, f, v = cfg.n_layers, cfg.d_model, cfg.n_heads, cfg.n_kv_heads, cfg.head_dim, cfg.d_ff, cfg.vocab
    layers: dict[str, tuple[int, ...]] = {"attn_norm": (L, d)}
    if cfg.norm == "layer":
        layers["attn_norm_bias"] = (L, d)
    layers.update(wq=(L, d, h, hd), wk=(L, d, kv, hd), wv=(L, d, kv, hd), wo=(L, h, hd, d))
    if not cfg.parallel:
        layers["mlp_norm"] = (L, d)
        if cfg.norm == "layer":
            layers["mlp_norm_bias"] = (L, d)
    if cfg.mlp == "swiglu":
        layers["w_gate"] = (L, d, f)
    layers.update(w_up=(L, d, f), w_down=(L, f, d))
    out: dict[str, Any] = {"embed": (v, d)}
    if cfg.position == "learned":
        out["pos_embed"] = (cfg.max_position, d)
    out.update(layers=layers, final_norm=(d,))
    if cfg.norm == "layer":
        out["final_norm_bias"] = (d,)
    if not cfg.tied:
        out["unembed"] = (d, v)
    return out


Rules = Sequence[tuple[str, Any]]


def spec_for(names: tuple[str | None, ...], rules: Rules) -> P:
    """The PartitionSpec of a value whose dimensions carry these logical names, under ``rules``."""
    return P(*logical_to_mesh_axes(names, tuple(rules)))


def abstract_params(
    cfg: Config,
    mesh: jax.sharding.Mesh,
    rules: Rules,
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


def optimizer_placement(opt_state: Any, knobs: Knobs) -> tuple[Any, Any]:
    """The optimizer state as the step takes it, and its shardings on the devices for the update (None: it stays
    there): with ``optimizer_offload`` the moments live in pinned host memory, the step count on the devices."""
    if not knobs.optimizer_offload:
        return opt_state, None
    on_device = jax.tree.map(lambda s: s.sharding, opt_state)
    offloaded = jax.tree.map(lambda s: s if s.ndim == 0 else jax.ShapeDtypeStruct(
        s.shape, s.dtype, sharding=s.sharding.with_memory_kind("pinned_host")), opt_state)  # fmt: skip
    return offloaded, on_device


def abstract_batch(batch: int, seq: int, mesh: jax.sharding.Mesh, rules: Rules) -> dict[str, jax.ShapeDtypeStruct]:
    sharding = NamedSharding(mesh, spec_for(("batch", None), rules))
    return {k: jax.ShapeDtypeStruct((batch, seq), jnp.int32, sharding=sharding) for k in ("tokens", "targets")}


# ---- how the step is built: the knobs ----------------------------------------------------------------

# MaxText's rematerialisation policies by name (src/MaxText/layers/decoders.py, `get_remat_policy`), as
# `jax.checkpoint_policies` over the `checkpoint_name`s the layers below carry (MaxText's names).
_QKV = ("query_proj", "value_proj", "key_proj", "qkv_proj")
_MINIMAL = (*_QKV, "out_proj", "mlpwi_0", "mlpwi_1", "mlpwi", "mlpwo")
REMAT_POLICIES: dict[str, tuple[str, tuple[str, ...]]] = {
    "full": ("nothing", ()),
    "nothing_saveable": ("nothing", ()),
    "minimal": ("save", _MINIMAL),
    "minimal_with_context": ("save", (*_MINIMAL, "context")),
    "minimal_flash": ("save", (*_MINIMAL, "context")),
    "save_dot_with_context_except_mlp": ("save", (*_QKV, "context", "out_proj")),
    "save_dot_except_mlpwi": ("save", (*_QKV, "out_proj", "mlpwo")),
    "save_dot_except_mlp": ("save", (*_QKV, "out_proj")),
    "save_qkv_proj": ("save", _QKV),
    "save_out_proj": ("save", ("out_proj",)),
    "qkv_proj_offloaded": ("offload", ("query_proj", "value_proj", "key_proj")),
    "minimal_offloaded": ("offload", _MINIMAL),
    # MaxText's "minimal" until 2024: every matmul result without a batch dimension is saved
    "dots_with_no_batch_dims": ("dots", ()),
    "custom": ("custom", ()),
}


@dataclasses.dataclass(frozen=True)
class Knobs:
    """How the step is built, beyond the model: see the module docstring."""

    batch: int
    seq: int
    remat: str = "full"
    remat_offload: tuple[str, ...] = ()
    remat_save: tuple[str, ...] = ()
    attention: str = "dot"
    attention_block: int = 512
    microbatches: int = 1
    vocab_tiles: int = 1
    optimizer_offload: bool = False


KNOBS = ("batch", "batch_per_device", "seq", "remat", "remat_offload", "remat_save", "attention",
         "attention_block", "microbatches", "vocab_tiles", "optimizer_offload", "param_dtype",
         "compute_dtype")  # fmt: skip


def remat_policy(knobs: Knobs) -> Any:
    """The ``jax.checkpoint`` policy of ``knobs.remat`` (None: nothing saved)."""
    if knobs.remat not in REMAT_POLICIES:
        raise ValueError(f"unknown remat policy {knobs.remat!r}; known: none, {', '.join(REMAT_POLICIES)}")
    kind, names = REMAT_POLICIES[knobs.remat]
    cp = jax.checkpoint_policies
    if kind == "nothing":
        return cp.nothing_saveable
    if kind == "save":
        return cp.save_only_these_names(*names)
    if kind == "dots":
        return cp.checkpoint_dots_with_no_batch_dims
    saved, offloaded = (knobs.remat_save, knobs.remat_offload) if kind == "custom" else ((), names)
    return cp.save_and_offload_only_these_names(
        names_which_can_be_saved=list(saved),
        names_which_can_be_offloaded=list(offloaded),
        offload_src="device",
        offload_dst="pinned_host",
    )


@dataclasses.dataclass(frozen=True)
class Model:
    """A config on a mesh under rules, with the knobs: what the layers read besides their weights."""

    cfg: Config
    mesh: jax.sharding.Mesh
    rules: Rules
    knobs: Knobs

    def constrain(self, x: jax.Array, names: tuple[str | None, ...]) -> jax.Array:
        return jax.lax.with_sharding_constraint(x, NamedSharding(self.mesh, spec_for(names, self.rules)))

    def spec(self, names: tuple[str | None, ...]) -> P:
        return spec_for(names, self.rules)

    @property
    def platform(self) -> str:
        return str(self.mesh.devices.flat[0].platform)


# ---- the model ---------------------------------------------------------------------------------------


def norm(cfg: Config, x: jax.Array, scale: jax.Array, bias: jax.Array | None = None, eps: float = 1e-5) -> jax.Array:
    """RMSNorm, or LayerNorm (``cfg.norm == "layer"``, with its bias), computed in float32."""
    x32 = x.astype(jnp.float32)
    if cfg.norm == "layer":
        x32 = x32 - jnp.mean(x32, axis=-1, keepdims=True)
    normed = x32 * jax.lax.rsqrt(jnp.mean(x32 * x32, axis=-1, keepdims=True) + eps) * scale.astype(jnp.float32)
    if bias is not None:
        normed = normed + bias.astype(jnp.float32)
    return normed.astype(x.dtype)


def rms_norm(x: jax.Array, scale: jax.Array, eps: float = 1e-5) -> jax.Array:
    return norm(Config(), x, scale, eps=eps)


def rope(x: jax.Array, theta: float) -> jax.Array:
    """Rotary position embedding over the last axis of ``x`` [batch, seq, heads, head_dim]."""
    seq, dim = x.shape[1], x.shape[-1]
    freqs = 1.0 / (theta ** (jnp.arange(0, dim, 2, dtype=jnp.float32) / dim))
    angles = jnp.arange(seq, dtype=jnp.float32)[:, None] * freqs[None, :]
    sin, cos = jnp.sin(angles)[None, :, None, :], jnp.cos(angles)[None, :, None, :]
    x1, x2 = jnp.split(x.astype(jnp.float32), 2, axis=-1)
    return jnp.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1).astype(x.dtype)


def dot_attention(cfg: Config, q: jax.Array, k: jax.Array, v: jax.Array) -> jax.Array:
    """Causal grouped-query attention with the S×S scores materialised: [b, s, h, d] -> [b, s, h, d]."""
    b, s, _, hd = q.shape
    groups = cfg.n_heads // cfg.n_kv_heads
    q = q.reshape(b, s, cfg.n_kv_heads, groups, hd)  # grouped-query attention: each kv head serves `groups` heads
    scores = jnp.einsum("bqngk,bsnk->bngqs", q, k).astype(jnp.float32) / math.sqrt(hd)
    causal = jnp.tril(jnp.ones((s, s), dtype=bool))
    scores = jnp.where(causal, scores, jnp.finfo(jnp.float32).min)
    probs = jax.nn.softmax(scores, axis=-1).astype(q.dtype)
    return jnp.einsum("bngqs,bsnk->bqngk", probs, v).reshape(b, s, cfg.n_heads, hd)


def _tpu_flash(q: jax.Array, k: jax.Array, v: jax.Array, block: int) -> jax.Array:
    """The Pallas TPU flash-attention kernel on one device's shard, [b, h, s, d] (MaxText's kernel until 2024)."""
    from jax.experimental.pallas.ops.tpu import flash_attention as fa

    s = q.shape[2]
    bq = min(block, s)
    sizes = fa.BlockSizes(block_q=bq, block_k_major=bq, block_k=bq, block_b=1, block_q_major_dkv=bq,
                          block_k_major_dkv=bq, block_k_dkv=bq, block_q_dkv=bq, block_k_major_dq=bq, block_k_dq=bq,
                          block_q_dq=bq)  # fmt: skip
    if k.shape[1] != q.shape[1]:  # the kernel takes as many kv heads as query heads
        k, v = (jnp.repeat(t, q.shape[1] // t.shape[1], axis=1) for t in (k, v))
    return fa.flash_attention(q, k, v, causal=True, sm_scale=1.0 / math.sqrt(q.shape[-1]), block_sizes=sizes)


def _tpu_splash(q: jax.Array, k: jax.Array, v: jax.Array, block: int) -> jax.Array:
    """The Pallas TPU splash-attention kernel (MaxText's ``attention=flash`` since 2024), causal, [b, h, s, d]:
    fully masked blocks are skipped, grouped-query heads read their kv head."""
    from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_kernel as sk
    from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_mask as sm

    s = q.shape[2]
    b = min(block, s)
    sizes = sk.BlockSizes(block_q=b, block_kv=b, block_kv_compute=b, block_q_dkv=b, block_kv_dkv=b,
                          block_kv_dkv_compute=b, block_q_dq=None, block_kv_dq=None,
                          use_fused_bwd_kernel=True)  # fmt: skip
    mask = sm.MultiHeadMask(masks=(sm.CausalMask(shape=(s, s)),) * q.shape[1])
    kernel = sk.make_splash_mha(mask=mask, head_shards=1, q_seq_shards=1, block_sizes=sizes)
    q = q / math.sqrt(q.shape[-1])
    return jax.vmap(kernel)(q, k, v)


def _gpu_flash(q: jax.Array, k: jax.Array, v: jax.Array, block: int) -> jax.Array:
    """The Pallas Triton flash-attention kernel (XLA's GPU target, no GPU needed to compile), [b, s, h, d]."""
    from jax.experimental.pallas.ops.gpu import attention as ga

    if k.shape[2] != q.shape[2]:
        k, v = (jnp.repeat(t, q.shape[2] // t.shape[2], axis=2) for t in (k, v))
    b = min(block, q.shape[1])
    sizes = ga.BlockSizes(block_q=b, block_k=b, block_q_dkv=b, block_kv_dkv=b, block_q_dq=b, block_kv_dq=b)
    return ga.mha(q, k, v, None, sm_scale=1.0 / math.sqrt(q.shape[-1]), causal=True, block_sizes=sizes)


def kernel_attention(model: Model, q: jax.Array, k: jax.Array, v: jax.Array) -> jax.Array:
    """Attention by a Pallas kernel, each device running it on its shard (``shard_map`` over the batch and
    head axes the rules name, as MaxText wraps its kernels): [b, s, h, d] -> [b, s, h, d]."""
    kind, block = model.knobs.attention, model.knobs.attention_block
    gpu = model.platform in ("gpu", "cuda", "rocm")
    qspec = model.spec(("batch", None, "heads", None))
    kvspec = model.spec(("batch", None, "kv_heads", None))
    if gpu:
        if kind != "flash":
            raise ValueError(f"attention={kind!r} is a TPU kernel; on a GPU mesh use attention='flash' (Triton)")
        body: Callable[..., jax.Array] = functools.partial(_gpu_flash, block=block)
    else:
        inner = _tpu_splash if kind == "splash" else _tpu_flash

        def body(q: jax.Array, k: jax.Array, v: jax.Array) -> jax.Array:
            t = (0, 2, 1, 3)
            return inner(q.transpose(t), k.transpose(t), v.transpose(t), block).transpose(t)

    run = jax.shard_map(body, mesh=model.mesh, in_specs=(qspec, kvspec, kvspec), out_specs=qspec, check_vma=False)
    return run(q, k, v)


def attention_block(model: Model, h: jax.Array, w: Mapping[str, jax.Array]) -> jax.Array:
    """Grouped-query causal self-attention of the normed input ``h`` (RoPE on queries and keys unless the
    positions are learned); the projections carry MaxText's checkpoint names."""
    cfg = model.cfg
    q = checkpoint_name(jnp.einsum("bsd,dhk->bshk", h, w["wq"]), "query_proj")
    k = checkpoint_name(jnp.einsum("bsd,dhk->bshk", h, w["wk"]), "key_proj")
    v = checkpoint_name(jnp.einsum("bsd,dhk->bshk", h, w["wv"]), "value_proj")
    if cfg.position == "rope":
        q, k = rope(q, cfg.rope_theta), rope(k, cfg.rope_theta)
    q = model.constrain(q, ("batch", None, "heads", None))
    dot = model.knobs.attention == "dot"
    attn = checkpoint_name(dot_attention(cfg, q, k, v) if dot else kernel_attention(model, q, k, v), "context")
    out = checkpoint_name(jnp.einsum("bshk,hkd->bsd", attn, w["wo"]), "out_proj")
    return model.constrain(out, ("batch", None, "act_embed"))


def mlp_block(model: Model, h: jax.Array, w: Mapping[str, jax.Array]) -> jax.Array:
    """SwiGLU, GeLU or ReLU of the normed input ``h``, with MaxText's checkpoint names."""
    cfg = model.cfg
    if cfg.mlp == "swiglu":
        gate = checkpoint_name(jnp.einsum("bsd,df->bsf", h, w["w_gate"]), "mlpwi_0")
        gate = model.constrain(gate, ("batch", None, "mlp"))
        up = checkpoint_name(jnp.einsum("bsd,df->bsf", h, w["w_up"]), "mlpwi_1")
        act = jax.nn.silu(gate) * up
    else:
        up = checkpoint_name(jnp.einsum("bsd,df->bsf", h, w["w_up"]), "mlpwi")
        up = model.constrain(up, ("batch", None, "mlp"))
        act = jax.nn.gelu(up) if cfg.mlp == "gelu" else jax.nn.relu(up)
    out = checkpoint_name(jnp.einsum("bsf,fd->bsd", act, w["w_down"]), "mlpwo")
    return model.constrain(out, ("batch", None, "act_embed"))


def decoder_layer(
    model: Model, x: jax.Array, w: Mapping[str, jax.Array], mlp: Callable[..., jax.Array] | None = None
) -> Any:
    """One decoder layer (the layer's weights cast to the compute dtype): attention then the MLP, each on its
    own normed input and added; or, with ``cfg.parallel``, both on one normed input."""
    cfg = model.cfg
    mlp = mlp or mlp_block
    w = {k: v.astype(jnp.dtype(cfg.compute_dtype)) for k, v in w.items()}
    x = checkpoint_name(x, "decoder_layer_input")
    h = norm(cfg, x, w["attn_norm"], w.get("attn_norm_bias"))
    if cfg.parallel:
        return x + attention_block(model, h, w) + mlp(model, h, w), None
    x = x + attention_block(model, h, w)
    return x + mlp(model, norm(cfg, x, w["mlp_norm"], w.get("mlp_norm_bias")), w), None


def loss_fn(
    model: Model, params: Any, batch: Mapping[str, jax.Array], layer_fn: Callable[..., Any] = decoder_layer
) -> Any:
    cfg = model.cfg
    dt = jnp.dtype(cfg.compute_dtype)
    x = params["embed"].astype(dt)[batch["tokens"]]
    if cfg.position == "learned":
        x = x + params["pos_embed"][: x.shape[1]].astype(dt)[None]
    x = model.constrain(x, ("batch", None, "act_embed"))
    layer = functools.partial(layer_fn, model)
    if cfg.remat and model.knobs.remat != "none":
        layer = jax.checkpoint(layer, policy=remat_policy(model.knobs))
    x, _ = jax.lax.scan(layer, x, params["layers"])
    x = norm(cfg, x, params["final_norm"], params.get("final_norm_bias"))
    unembed = (params["embed"].T if cfg.tied else params["unembed"]).astype(dt)
    tiles = model.knobs.vocab_tiles
    if tiles == 1:
        return jnp.mean(_token_losses(model, x, unembed, batch["targets"]))
    b, s, d = x.shape
    if tiles < 1 or s % tiles:
        raise ValueError(f"vocab_tiles={tiles} must divide the sequence length {s}")
    # MaxText's vocabulary tiling: the sequence in `tiles` slices, each slice's logits made, reduced to its loss
    # and recomputed in the backward pass (jax.checkpoint), so one slice's logits are live at a time
    xs = x.reshape(b, tiles, s // tiles, d).swapaxes(0, 1)
    ts = batch["targets"].reshape(b, tiles, s // tiles).swapaxes(0, 1)

    @jax.checkpoint
    def tile(total: jax.Array, slice_: tuple[jax.Array, jax.Array]) -> tuple[jax.Array, None]:
        return total + jnp.sum(_token_losses(model, slice_[0], unembed, slice_[1])), None

    total, _ = jax.lax.scan(tile, jnp.zeros((), jnp.float32), (xs, ts))
    return total / (b * s)


def _token_losses(model: Model, x: jax.Array, unembed: jax.Array, targets: jax.Array) -> jax.Array:
    """Each token's cross-entropy, [batch, seq], from the final hidden states."""
    logits = model.constrain(jnp.einsum("bsd,dv->bsv", x, unembed), ("batch", None, "vocab"))
    # cross-entropy as log-sum-exp minus the target's logit: reductions XLA fuses, so no float32 copy of the
    # [batch, seq, vocab] logits is kept (MaxText's cross_entropy_with_logits is the same sum)
    lse = jax.nn.logsumexp(logits.astype(jnp.float32), axis=-1)
    target = jnp.take_along_axis(logits, targets[..., None], axis=-1)[..., 0].astype(jnp.float32)
    return lse - target


def make_step(
    model: Model,
    opt: optax.GradientTransformation,
    layer_fn: Callable[..., Any] = decoder_layer,
    opt_on_device: Any = None,
) -> Callable[..., Any]:
    """The training step ``(params, opt_state, batch) -> (params, opt_state, loss)``, not yet jitted; with
    ``microbatches > 1`` the gradients of that many slices of the batch are accumulated (``lax.scan``) in the
    parameters' dtype before one optimizer update. ``opt_on_device`` (the optimizer state's shardings in device
    memory): the state arrives in host memory and is brought to the devices for the update."""
    n = model.knobs.microbatches
    grad_fn = jax.value_and_grad(lambda p, b: loss_fn(model, p, b, layer_fn))

    def step(params: Any, opt_state: Any, batch: Mapping[str, jax.Array]) -> Any:
        if n == 1:
            loss, grads = grad_fn(params, batch)
        else:
            split = {k: v.reshape(n, v.shape[0] // n, *v.shape[1:]) for k, v in batch.items()}

            def one(carry: Any, micro: Mapping[str, jax.Array]) -> Any:
                micro = {k: model.constrain(v, ("batch", None)) for k, v in micro.items()}
                loss, grads = grad_fn(params, micro)
                return jax.tree.map(jnp.add, carry, (loss, grads)), None

            zeros = (jnp.zeros((), jnp.float32), jax.tree.map(jnp.zeros_like, params))
            (loss, grads), _ = jax.lax.scan(one, zeros, split)
            loss, grads = loss / n, jax.tree.map(lambda g: g / n, grads)
        if opt_on_device is not None:
            opt_state = jax.device_put(opt_state, opt_on_device)
        updates, opt_state = opt.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    return step


def resolve_knobs(
    config: Config, devices: int, defaults: Mapping[str, Any], knobs: Mapping[str, Any]
) -> tuple[Config, Knobs]:
    """The config (dtypes, ``remat=False``) and :class:`Knobs` of one call: the plan function's defaults
    overridden by the call's knobs; an unknown knob is an error that lists the known ones."""
    unknown = sorted(set(knobs) - set(KNOBS))
    if unknown:
        raise TypeError(f"unknown knob(s) {', '.join(unknown)}; the knobs are {', '.join(KNOBS)}")
    k = {**defaults, **knobs}
    if "batch_per_device" in knobs:
        k["batch"] = max(1, round(float(knobs["batch_per_device"]) * devices))
    dtypes = {f: k.pop(f) for f in ("param_dtype", "compute_dtype") if f in k}
    k.pop("batch_per_device", None)
    config = dataclasses.replace(config, **dtypes)
    if k.get("remat") == "none":
        config = dataclasses.replace(config, remat=False)
    for name in ("remat_offload", "remat_save"):
        if name in k:
            k[name] = tuple(k[name])
    return config, Knobs(**k)


def plan_fn(
    cfg: Config | str,
    strategy: str | Rules,
    batch: int,
    seq: int,
    *,
    name: str | None = None,
    **defaults: Any,
) -> Callable[..., tuple[Any, tuple[Any, ...]]]:
    """A ``fn(mesh, rules=None, **knobs) -> (jitted_step, (params, opt_state, batch))`` for ``shardscope plan``
    (which calls ``fn(mesh)``) and searches (which vary ``rules`` and the knobs). ``strategy`` a key of
    :data:`RULES` or your own logical-axis rules; ``defaults`` the knobs' defaults (:data:`KNOBS`)."""
    config = CONFIGS[cfg] if isinstance(cfg, str) else cfg
    own = RULES[strategy] if isinstance(strategy, str) else tuple(strategy)
    label = strategy if isinstance(strategy, str) else "custom"
    base = {"batch": batch, "seq": seq, **defaults}
    built = resolve_knobs(config, 1, base, {})[1]  # a bad default fails where the function is made

    def fn(mesh: jax.sharding.Mesh, rules: Rules | None = None, **knobs: Any) -> tuple[Any, tuple[Any, ...]]:
        model_cfg, k = resolve_knobs(config, int(mesh.devices.size), base, knobs)
        r = tuple(rules) if rules is not None else own
        model = Model(model_cfg, mesh, r, k)
        params = abstract_params(model_cfg, mesh, r)
        opt = optimizer()
        opt_state, on_device = optimizer_placement(abstract_opt_state(opt, params, mesh), k)
        data = abstract_batch(k.batch, k.seq, mesh, r)
        shardings = jax.tree.map(lambda s: s.sharding, (params, opt_state, data))
        out = (shardings[0], shardings[1], NamedSharding(mesh, P()))
        step = jax.jit(make_step(model, opt, opt_on_device=on_device), in_shardings=shardings, out_shardings=out,
                       donate_argnums=(0, 1))  # fmt: skip
        return step, (params, opt_state, data)

    fn.__name__ = name or f"llama_{config.n_layers}l_{label}"
    fn.knobs = dataclasses.asdict(built)  # type: ignore[attr-defined]  # what FN(mesh) builds with (`--fit` varies them)
    return fn


# The shapes: Llama 3 8B at B=16, S=2048; 70B at B=64, S=1024 (S=4096 does not fit a v5p).
llama_1b_fsdp = plan_fn("1b", "fsdp", 16, 2048, name="llama_1b_fsdp")
llama_8b_fsdp = plan_fn("8b", "fsdp", 16, 2048, name="llama_8b_fsdp")
llama_8b_tp = plan_fn("8b", "tp", 16, 2048, name="llama_8b_tp")
llama_8b_fsdp_tp = plan_fn("8b", "fsdp_tp", 16, 2048, name="llama_8b_fsdp_tp")
llama_70b_fsdp = plan_fn("70b", "fsdp", 64, 1024, name="llama_70b_fsdp")
llama_70b_fsdp_tp = plan_fn("70b", "fsdp_tp", 64, 1024, name="llama_70b_fsdp_tp")
llama_70b_fsdp_tp_s4096 = plan_fn("70b", "fsdp_tp", 64, 4096, name="llama_70b_fsdp_tp_s4096")
tiny_fsdp = plan_fn("tiny", "fsdp", 16, 128, name="tiny_fsdp")
tiny_fsdp_tp = plan_fn("tiny", "fsdp_tp", 16, 128, name="tiny_fsdp_tp")
# MaxText's published runs: Llama 2 70B at 4 × 4096 tokens a chip with flash attention (v5p-512, v6e-256)
llama2_70b_maxtext = plan_fn("llama2-70b", "fsdp", 1024, 4096, name="llama2_70b_maxtext", attention="splash",
                             attention_block=1024, remat="full")  # fmt: skip
# Without remat (issue 33's --fit case): the Llama-3-70B step at S=4096, and a tiny one for tests.
llama_70b_fsdp_tp_s4096_no_remat = plan_fn("70b", "fsdp_tp", 64, 4096, name="llama_70b_fsdp_tp_s4096_no_remat",
                                           remat="none")  # fmt: skip
tiny_fsdp_no_remat = plan_fn("tiny", "fsdp", 16, 128, name="tiny_fsdp_no_remat", remat="none")
