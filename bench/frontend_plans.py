"""The plans ``bench/bench_frontend.py`` opens: a small one (a 4-layer MLP training step, here) and Llama 70B
(``examples/llama.py``), for ``shardscope plan FILE.py:FN``.

``mlp_4layer(mesh)``: four dense layers of width 1024 on a ``('data', 'model')`` mesh, weights split
Megatron-style (column then row parallel), the batch over ``data``; one SGD step with the loss.
"""

from __future__ import annotations

from typing import Any

WIDTH, BATCH, LAYERS = 1024, 64, 4


def mlp_4layer(mesh: Any) -> tuple[Any, tuple[Any, ...]]:
    import jax
    import jax.numpy as jnp
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    def spec(i: int) -> P:
        return P(None, "model") if i % 2 == 0 else P("model", None)

    params = [
        jax.ShapeDtypeStruct((WIDTH, WIDTH), jnp.float32, sharding=NamedSharding(mesh, spec(i))) for i in range(LAYERS)
    ]
    x = jax.ShapeDtypeStruct((BATCH, WIDTH), jnp.float32, sharding=NamedSharding(mesh, P("data", None)))

    def loss(ws: list[jax.Array], x: jax.Array) -> jax.Array:
        h = x
        for w in ws:
            h = jnp.tanh(h @ w)
        return jnp.mean((h - x) ** 2)

    def step(ws: list[jax.Array], x: jax.Array) -> tuple[list[jax.Array], jax.Array]:
        value, grads = jax.value_and_grad(loss)(ws, x)
        return [w - 1e-3 * g for w, g in zip(ws, grads, strict=True)], value

    shardings = [p.sharding for p in params]
    return jax.jit(step, out_shardings=(shardings, NamedSharding(mesh, P())), donate_argnums=0), (params, x)


def llama_70b_fsdp(mesh: Any) -> tuple[Any, tuple[Any, ...]]:
    """Llama 3 70B, FSDP over all 256 chips of a v5p 4x8x8 at the scaling book's B=256, S=512
    (``examples/llama.py:llama_70b_fsdp``'s B=64 does not divide over 256 devices)."""
    from examples import llama

    return llama.plan_fn("70b", "fsdp", 256, 512)(mesh)
