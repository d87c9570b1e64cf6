"""Small models for the search tests (``tests/test_search.py``): ``FN(mesh, rules, **knobs) -> (jitted, args)``,
every dimension named by a logical axis and turned into a PartitionSpec through ``rules`` by Flax's own
``flax.linen.logical_to_mesh_axes``. Not collected (no ``test_`` prefix): worker processes import it by path."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

LAYERS, EMBED, MLP, BATCH = 2, 256, 1024, 64


def _sharding(mesh: Any, rules: Sequence[Any], names: tuple[str | None, ...]) -> NamedSharding:
    return NamedSharding(mesh, P(*nn.logical_to_mesh_axes(names, rules)))


def _step(mesh: Any, rules: Sequence[Any], remat: bool) -> Any:
    def layer(x: jax.Array, w_in: jax.Array, w_out: jax.Array) -> jax.Array:
        h = jax.lax.with_sharding_constraint(jnp.tanh(x @ w_in), _sharding(mesh, rules, ("batch", "mlp")))
        return x + h @ w_out

    run = jax.checkpoint(layer) if remat else layer

    def loss(params: dict[str, jax.Array], x: jax.Array) -> jax.Array:
        for i in range(LAYERS):
            x = run(x, params["w_in"][i], params["w_out"][i])
        return jnp.mean(x * x)

    def step(params: dict[str, jax.Array], x: jax.Array) -> tuple[dict[str, jax.Array], jax.Array]:
        value, grads = jax.value_and_grad(loss)(params, x)
        return jax.tree.map(lambda p, g: p - 0.01 * g, params, grads), value

    return step


def mlp(mesh: Any, rules: Sequence[Any] | None = None, remat: bool = False, batch: int = BATCH) -> tuple[Any, Any]:
    """A two-layer residual MLP's training step (plain SGD): weights [layers, embed, mlp] and [layers, mlp, embed],
    activations [batch, embed]."""
    rules = tuple(rules or ())

    def sds(shape: tuple[int, ...], names: tuple[str | None, ...]) -> jax.ShapeDtypeStruct:
        return jax.ShapeDtypeStruct(shape, jnp.float32, sharding=_sharding(mesh, rules, names))

    params = {"w_in": sds((LAYERS, EMBED, MLP), ("layers", "embed", "mlp")),
              "w_out": sds((LAYERS, MLP, EMBED), ("layers", "mlp", "embed"))}  # fmt: skip
    x = sds((batch, EMBED), ("batch", None))
    shardings = jax.tree.map(lambda s: s.sharding, (params, x))
    step = jax.jit(_step(mesh, rules, remat), in_shardings=shardings, out_shardings=(shardings[0], None))
    return step, (params, x)


def mlp_fixed(mesh: Any, rules: Sequence[Any] | None = None) -> tuple[Any, Any]:
    """The MLP without knobs (what most tests search: half the candidates)."""
    return mlp(mesh, rules)


def no_rules(mesh: Any) -> tuple[Any, Any]:
    """A model written for ``shardscope plan``: ``FN(mesh)``, no rules to search with."""
    return mlp(mesh, (("batch", mesh.axis_names[0]),))
