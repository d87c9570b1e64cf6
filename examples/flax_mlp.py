"""Flax's ``DotReluDot`` MLP (the scaling guide's logical-axis version) on a (data, model) 2x4 mesh,
captured and published to a running Shardscope dashboard.

    make serve                                   # in one terminal
    .venv/bin/python examples/flax_mlp.py        # in another: prints the share links

Without an accelerator it runs on 8 CPU devices (``jax_num_cpu_devices``). It publishes two
snapshots: the sharded train state (parameters as ``LogicallyPartitioned`` boxes with their
logical names, and Adam's moments), and ``inspect_jit`` of one training step (its input and output
shardings and the collectives XLA inserted). In the snapshot view, edit the rules (e.g. move
``hidden`` from ``model`` to ``data``) to see every parameter's new layout and the memory chart.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
import jax.numpy as jnp

if os.environ["JAX_PLATFORMS"] == "cpu":
    jax.config.update("jax_num_cpu_devices", 8)

import flax.linen as nn
import optax
from flax.training import train_state
from jax.experimental import mesh_utils
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from sharding_core import PublishError, inspect_jit, publish

# The guide's rules: batch over the data axis, hidden units over the model axis, embed replicated.
RULES = (("batch", "data"), ("hidden", "model"), ("embed", None))


class DotReluDot(nn.Module):
    """Dense (embed -> hidden), ReLU, then a matmul back (hidden -> embed), as in Flax's scaling guide."""

    depth: int
    dense_init: Callable[..., Any] = nn.initializers.xavier_normal()

    @nn.compact
    def __call__(self, x: jax.Array) -> tuple[jax.Array, None]:
        y = nn.Dense(
            self.depth,
            kernel_init=nn.with_logical_partitioning(self.dense_init, ("embed", "hidden")),
            use_bias=False,
        )(x)
        y = jax.nn.relu(y)
        y = nn.with_logical_constraint(y, ("batch", "hidden"))
        w2 = self.param(
            "W2", nn.with_logical_partitioning(self.dense_init, ("hidden", "embed")), (self.depth, x.shape[-1])
        )
        z = jnp.dot(y, w2)
        z = nn.with_logical_constraint(z, ("batch", "embed"))
        return z, None


class MLP(nn.Module):
    num_layers: int
    depth: int

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        for i in range(self.num_layers):
            x, _ = DotReluDot(self.depth, name=f"DotReluDot_{i}")(x)
        return x


def init_state(key: jax.Array, x: jax.Array, model: nn.Module, tx: optax.GradientTransformation) -> Any:
    params = model.init(key, x)["params"]
    return train_state.TrainState.create(apply_fn=model.apply, params=params, tx=tx)


def train_step(state: Any, x: jax.Array) -> Any:
    def loss(params: Any) -> jax.Array:
        return jnp.mean(state.apply_fn({"params": params}, x) ** 2)

    grads = jax.grad(loss)(state.params)
    return state.apply_gradients(grads=grads)


def build(num_layers: int = 3, depth: int = 1024, batch: int = 16, width: int = 256) -> tuple[Mesh, Any, jax.Array]:
    """The sharded train state and a batch, initialised under the rules with jit's out_shardings."""
    mesh = Mesh(mesh_utils.create_device_mesh((2, 4)), ("data", "model"))
    model = MLP(num_layers, depth)
    tx = optax.adam(1e-3)
    x = jax.device_put(jnp.ones((batch, width)), NamedSharding(mesh, P("data", None)))
    with jax.set_mesh(mesh), nn.logical_axis_rules(RULES):
        abstract = jax.eval_shape(functools.partial(init_state, model=model, tx=tx), jax.random.key(0), x)
        shardings = nn.logical_to_mesh_sharding(nn.get_partition_spec(abstract), mesh, RULES)
        init = jax.jit(
            functools.partial(init_state, model=model, tx=tx),
            in_shardings=(NamedSharding(mesh, P()), x.sharding),
            out_shardings=shardings,
        )
        state = init(jax.random.key(0), x)
    return mesh, state, x


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--url", default=os.environ.get("SHARDSCOPE_URL", "http://127.0.0.1:8000"), help="the dashboard")
    p.add_argument("--layers", type=int, default=3)
    p.add_argument("--depth", type=int, default=1024)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    mesh, state, x = build(args.layers, args.depth)
    try:
        print(
            "train state:",
            publish({"state": state, "batch": x}, "flax_mlp: DotReluDot train state", args.url, rules=RULES),
        )
        with jax.set_mesh(mesh), nn.logical_axis_rules(RULES):
            step = inspect_jit(jax.jit(train_step), state, x)
        print("train step: ", publish(step, "flax_mlp: train_step", args.url))
    except PublishError as e:
        print(f"error [{e.code}]: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
