"""A mixture-of-experts decoder (Mixtral-style) with expert parallelism, for planning: shapes only.

The Llama-style decoder of ``examples/llama.py`` with each layer's MLP replaced by ``n_experts`` SwiGLU
experts and a top-``k`` router. Tokens are dispatched GShard-style (Lepikhin et al. 2020): each sequence is a
group, every expert takes at most ``capacity`` tokens of a group, and a one-hot dispatch tensor moves tokens
into ``[experts, groups, capacity, d_model]``. Expert parallelism puts the experts on the mesh's ``expert``
axis while the groups (the batch) are sharded over ``data`` × ``expert``: moving tokens from their group's
devices to their expert's devices and back is an **all-to-all** over ``expert`` — the collective expert
parallelism is known for — which the plan lists with its bytes, repeat count and estimate.

    shardscope plan examples/moe.py:mixtral_ep --devices tpu:v5p:4x4x4 --mesh 8x8 --axes data,expert
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from typing import Any

import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

try:  # run as examples.moe (tests, python -m) or as a script next to llama.py (shardscope plan)
    from examples import llama
except ImportError:  # pragma: no cover - shardscope plan puts this file's directory on sys.path
    import llama  # type: ignore[no-redef]


@dataclasses.dataclass(frozen=True)
class MoeConfig(llama.Config):
    n_experts: int = 8
    top_k: int = 2
    capacity_factor: float = 1.25


MOE_CONFIGS: dict[str, MoeConfig] = {
    # Mixtral 8x7B's shapes (Mistral AI's config.json): 32 layers, d 4096, 8 experts of d_ff 14336, top 2
    "mixtral": MoeConfig(vocab=32000, d_model=4096, n_layers=32, n_heads=32, n_kv_heads=8, head_dim=128, d_ff=14336,
                         rope_theta=1e6, n_experts=8, top_k=2),
    # MaxText's src/MaxText/configs/models/mixtral-8x22b.yml: 56 layers, d 6144, 48 heads, 8 experts of 16384
    "mixtral-8x22b": MoeConfig(vocab=32768, d_model=6144, n_layers=56, n_heads=48, n_kv_heads=8, head_dim=128,
                               d_ff=16384, rope_theta=1e6, n_experts=8, top_k=2),
    "tiny": MoeConfig(vocab=1024, d_model=256, n_layers=2, n_heads=8, n_kv_heads=4, head_dim=32, d_ff=512,
                      n_experts=4, top_k=2),
}  # fmt: skip

# Expert parallelism: experts over `expert`, the batch over data x expert, weights FSDP over `data`.
# FSDP alone (MaxText's Mixtral 8x7B on v6e-256): every expert on every device, sharded along `embed`.
# FSDP x EP (MaxText's Mixtral 8x22B: ici_fsdp 64 x ici_expert 4).
RULES: dict[str, tuple[tuple[str, Any], ...]] = {
    "ep": (("batch", ("data", "expert")), ("expert", "expert"), ("groups", "data"), ("embed", "data")),
    "fsdp": (("batch", "fsdp"), ("groups", "fsdp"), ("embed", "fsdp")),
    "fsdp_ep": (("batch", ("fsdp", "expert")), ("expert", "expert"), ("groups", "fsdp"), ("embed", "fsdp")),
}

LOGICAL: dict[str, tuple[str | None, ...]] = {
    **{k: v for k, v in llama.LOGICAL.items() if k not in ("layers/w_gate", "layers/w_up", "layers/w_down")},
    "layers/router": ("layers", "embed", None),
    "layers/w_gate": ("layers", "expert", "embed", "mlp"),
    "layers/w_up": ("layers", "expert", "embed", "mlp"),
    "layers/w_down": ("layers", "expert", "mlp", "embed"),
}


def param_shapes(cfg: MoeConfig) -> dict[str, Any]:
    shapes = llama.param_shapes(cfg)
    L, d, f, e = cfg.n_layers, cfg.d_model, cfg.d_ff, cfg.n_experts
    shapes["layers"].update(router=(L, d, e), w_gate=(L, e, d, f), w_up=(L, e, d, f), w_down=(L, e, f, d))
    return shapes


def capacity(cfg: MoeConfig, seq: int) -> int:
    """Tokens an expert takes from one group (sequence): top_k · seq / experts · capacity factor."""
    return max(1, math.ceil(cfg.top_k * seq / cfg.n_experts * cfg.capacity_factor))


def moe_block(model: llama.Model, h: jax.Array, w: Mapping[str, jax.Array]) -> Any:
    """The routed experts' SwiGLU of the normed input ``h``, GShard-style dispatch and combine (MaxText's
    dropping path, ``capacity_factor``), with MaxText's checkpoint names on the experts' matmuls."""
    cfg = model.cfg
    assert isinstance(cfg, MoeConfig)
    groups, seq, _ = h.shape
    e, k, cap = cfg.n_experts, cfg.top_k, capacity(cfg, seq)
    probs = jax.nn.softmax(jnp.einsum("gsd,de->gse", h, w["router"]).astype(jnp.float32), axis=-1)
    weight, expert = jax.lax.top_k(probs, k)  # [g, s, k]
    chosen = jax.nn.one_hot(expert, e, dtype=jnp.int32)  # [g, s, k, e]
    # each token's place in its expert's buffer: the tokens before it (in sequence, then choice order)
    flat = chosen.reshape(groups, seq * k, e)
    position = (jnp.cumsum(flat, axis=1) - 1).reshape(groups, seq, k, e)
    keep = chosen * (position < cap)
    slots = jax.nn.one_hot(jnp.sum(position * keep, axis=-1), cap, dtype=h.dtype)  # [g, s, k, cap]
    dispatch = jnp.einsum("gske,gskc->gsec", keep.astype(h.dtype), slots)
    combine = jnp.einsum("gske,gskc,gsk->gsec", keep.astype(h.dtype), slots, weight.astype(h.dtype))
    # dispatched where the tokens are (groups sharded over the batch's axes), then moved to their experts'
    # devices (experts over expert, groups over the rest): a reshard of one dimension to another, an all-to-all
    tokens = model.constrain(jnp.einsum("gsec,gsd->egcd", dispatch, h), (None, "batch", None, "act_embed"))
    tokens = model.constrain(tokens, ("expert", "groups", None, "act_embed"))
    gate = checkpoint_name(jnp.einsum("egcd,edf->egcf", tokens, w["w_gate"]), "mlpwi_0")
    up = checkpoint_name(jnp.einsum("egcd,edf->egcf", tokens, w["w_up"]), "mlpwi_1")
    out = checkpoint_name(jnp.einsum("egcf,efd->egcd", jax.nn.silu(gate) * up, w["w_down"]), "mlpwo")
    out = model.constrain(out, ("expert", "groups", None, "act_embed"))
    out = model.constrain(out, (None, "batch", None, "act_embed"))  # back to the groups' devices: all-to-all
    back = jnp.einsum("gsec,egcd->gsd", combine, out)
    return model.constrain(back, ("batch", None, "act_embed"))


def moe_layer(model: llama.Model, x: jax.Array, w: Mapping[str, jax.Array]) -> Any:
    """A decoder layer whose MLP is the routed experts."""
    return llama.decoder_layer(model, x, w, mlp=moe_block)


def plan_fn(
    cfg: MoeConfig | str, strategy: str, batch: int, seq: int, *, name: str | None = None, **defaults: Any
) -> Callable[..., tuple[Any, tuple[Any, ...]]]:
    """A ``fn(mesh, rules=None, **knobs) -> (jitted_step, (params, opt_state, batch))`` for ``shardscope plan``
    (the knobs of :data:`examples.llama.KNOBS`)."""
    config = MOE_CONFIGS[cfg] if isinstance(cfg, str) else cfg
    own = RULES[strategy]
    base = {"batch": batch, "seq": seq, **defaults}
    built = llama.resolve_knobs(config, 1, base, {})[1]

    def fn(mesh: jax.sharding.Mesh, rules: llama.Rules | None = None, **knobs: Any) -> tuple[Any, tuple[Any, ...]]:
        model_cfg, k = llama.resolve_knobs(config, int(mesh.devices.size), base, knobs)
        r = tuple(rules) if rules is not None else own
        model = llama.Model(model_cfg, mesh, r, k)
        params = llama.abstract_params(model_cfg, mesh, r, param_shapes(model_cfg), LOGICAL)
        opt = llama.optimizer()
        opt_state, on_device = llama.optimizer_placement(llama.abstract_opt_state(opt, params, mesh), k)
        data = llama.abstract_batch(k.batch, k.seq, mesh, r)
        shardings = jax.tree.map(lambda s: s.sharding, (params, opt_state, data))
        out = (shardings[0], shardings[1], NamedSharding(mesh, P()))
        step = llama.make_step(model, opt, moe_layer, opt_on_device=on_device)
        return jax.jit(step, in_shardings=shardings, out_shardings=out, donate_argnums=(0, 1)), (
            params,
            opt_state,
            data,
        )

    fn.__name__ = name or f"moe_{config.n_experts}x_{strategy}"
    fn.knobs = dataclasses.asdict(built)  # type: ignore[attr-defined]  # what FN(mesh) builds with (`--fit` varies them)
    return fn


mixtral_ep = plan_fn("mixtral", "ep", 64, 4096)
tiny_ep = plan_fn("tiny", "ep", 16, 128)
