"""What the panel tests show, built the same way in a notebook's kernel (``shardscope.show``) and in the test
process (``shardscope.link`` and ``publish`` to the dashboard): an array, a Flax model's train state and an
``inspect_jit`` capture of its training step on 8 CPU devices, and half of a two-process run (process 1 never
reported). Imported by the notebooks' cells (``tests/notebooks/show_cells.py`` puts the repository on the
kernel's path) and by the tests.
"""

from __future__ import annotations

import json
import urllib.request
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import optax
from flax.training import train_state as flax_train_state
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

from sharding_core import capture, inspect_jit
from sharding_core.publishing import new_run_id, post_json

RULES = (("batch", "x"), ("hidden", "y"), ("embed", None))
"""Flax logical → mesh axis rules for the model."""


def mesh() -> jax.sharding.Mesh:
    return jax.make_mesh((2, 4), ("x", "y"), axis_types=(AxisType.Auto, AxisType.Auto))


def array() -> jax.Array:
    """arange(128) as (8, 16), P('x', 'y') on the (2, 4) mesh."""
    return jax.device_put(jnp.arange(8 * 16, dtype=jnp.float32).reshape(8, 16), NamedSharding(mesh(), P("x", "y")))


class MLP(nn.Module):
    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        init = nn.initializers.lecun_normal()
        x = nn.Dense(64, kernel_init=nn.with_logical_partitioning(init, ("embed", "hidden")))(x)
        x = nn.relu(x)
        return nn.Dense(16, kernel_init=nn.with_logical_partitioning(init, ("hidden", "embed")))(x)


def batch() -> jax.Array:
    return jax.device_put(jnp.ones((8, 16)), NamedSharding(mesh(), P("x", None)))


def train_state() -> Any:
    """The MLP's train state (Adam), initialised sharded as the rules say."""
    model = MLP()

    def init(key: jax.Array, x: jax.Array) -> Any:
        params = model.init(key, x)["params"]
        return flax_train_state.TrainState.create(apply_fn=model.apply, params=params, tx=optax.adam(1e-3))

    with jax.set_mesh(mesh()), nn.logical_axis_rules(RULES):
        abstract = jax.eval_shape(init, jax.random.key(0), batch())
        shardings = nn.logical_to_mesh_sharding(nn.get_partition_spec(abstract), mesh(), RULES)
        return jax.jit(init, out_shardings=shardings)(jax.random.key(0), batch())


def train_step_capture(state: Any) -> dict[str, Any]:
    """``inspect_jit`` of one training step of ``state`` on the batch."""

    def train_step(state: Any, x: jax.Array) -> Any:
        def loss(params: Any) -> jax.Array:
            return jnp.mean(state.apply_fn({"params": params}, x) ** 2)

        return state.apply_gradients(grads=jax.grad(loss)(state.params))

    with jax.set_mesh(mesh()), nn.logical_axis_rules(RULES):
        return inspect_jit(jax.jit(train_step), state, batch())


def half_run() -> dict[str, Any]:
    """Process 0's part of a two-process run whose devices 4-7 are process 1's (which never reports): a weight
    split over all 8 devices, of which this process holds devices 0-3's shards."""
    snap = capture({"w": jax.device_put(jnp.ones((8, 16)), NamedSharding(mesh(), P("x", "y")))}, "half a run")
    snap["process_count"] = 2
    snap["devices"]["process_index"] = [0 if i < 4 else 1 for i in snap["devices"]["id"]]
    for leaf in snap["leaves"]:
        leaf["addressable_devices"] = [0, 1, 2, 3]
        leaf["array_kind"] = "global"
    snap["run"] = {"id": new_run_id(), "process_index": 0, "process_count": 2}
    return snap


def merged_half_run(url: str) -> dict[str, Any]:
    """The dashboard's merge of :func:`half_run` (what the snapshots page shows of the run)."""
    answer = post_json(url, "/api/snapshots", half_run())
    with urllib.request.urlopen(f"{url}/api/snapshots/runs/{answer['run']}", timeout=60) as r:
        merged: dict[str, Any] = json.loads(r.read())
    return merged
