"""Training steps whose memory timelines the tests compare with XLA's peak (CPU, TPU and, in the gpu extra's
environment, GPU sets): MLPs unrolled and a remat'ed scan, with and without donation. Imports nothing but what it
is given, so the GPU environment (no pytest) runs it too."""

from __future__ import annotations

from typing import Any


def programs(mesh: Any, NamedSharding: Any, P: Any, jax: Any, jnp: Any) -> list[tuple[str, Any, tuple[Any, ...]]]:
    def loss(w: Any, x: Any) -> Any:
        h = x
        for i in range(w.shape[0]):
            h = jnp.tanh(h @ w[i].astype(h.dtype))
        return jnp.mean(h.astype(jnp.float32) ** 2)

    def step(w: Any, x: Any) -> Any:
        return w - 0.1 * jax.grad(loss)(w, x)

    def scanned(w: Any, x: Any) -> Any:
        def body(h: Any, wi: Any) -> Any:
            return jnp.tanh(h @ wi.astype(h.dtype)), None

        def f(w: Any, x: Any) -> Any:
            return jnp.mean(jax.lax.scan(jax.checkpoint(body), x, w)[0].astype(jnp.float32) ** 2)

        return w - 0.1 * jax.grad(f)(w, x)

    n = mesh.devices.size
    out = []
    for layers, d, b in ((2, 1024, 64 * n), (3, 2048, 2048 * n)):
        w = jax.ShapeDtypeStruct((layers, d, d), jnp.float32, sharding=NamedSharding(mesh, P()))
        x = jax.ShapeDtypeStruct((b, d), jnp.bfloat16, sharding=NamedSharding(mesh, P("data")))
        out.append((f"mlp{layers}x{d}", jax.jit(step), (w, x)))
    w = jax.ShapeDtypeStruct((8, 2048, 2048), jnp.float32, sharding=NamedSharding(mesh, P(None, "data")))
    x = jax.ShapeDtypeStruct((1024 * n, 2048), jnp.bfloat16, sharding=NamedSharding(mesh, P("data")))
    out.append(("scan", jax.jit(scanned), (w, x)))
    out.append(("scan-donated", jax.jit(scanned, donate_argnums=0), (w, x)))
    return out
