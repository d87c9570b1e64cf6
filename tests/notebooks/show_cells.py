"""The notebook the notebook tests run (in a kernel with nbclient, and in JupyterLab in Chromium):
``shardscope.show`` on an array, a hypothetical TPU layout, a Flax model's train state and an
``inspect_jit`` capture of its training step, on 8 CPU devices; and a 4096-device layout.

Kept as Python (``CELLS``) and written out as ``.ipynb`` by :func:`write`, so it reads and diffs as
code. ``SHOW_CELLS`` are the indices of the cells whose output must be a widget.
"""

from __future__ import annotations

from pathlib import Path

import nbformat

SETUP = """\
import os
os.environ.setdefault("JAX_PLATFORMS", "cpu")
import jax
jax.config.update("jax_num_cpu_devices", 8)
import jax.numpy as jnp
import flax.linen as nn
import optax
from flax.training import train_state
from jax.sharding import AxisType, NamedSharding, PartitionSpec as P

import shardscope
from sharding_core import inspect_jit

mesh = jax.make_mesh((2, 4), ("x", "y"), axis_types=(AxisType.Auto, AxisType.Auto))"""

ARRAY = """\
x = jax.device_put(jnp.arange(8 * 16, dtype=jnp.float32).reshape(8, 16), NamedSharding(mesh, P("x", "y")))
shardscope.show(x)"""

HYPOTHETICAL = """\
shardscope.show(devices="tpu:v5e:16x16", mesh="16x16", axes="x,y", spec="P('x', None)", shape=(1024, 1024))"""

MODEL = """\
class MLP(nn.Module):
    @nn.compact
    def __call__(self, x):
        init = nn.initializers.lecun_normal()
        x = nn.Dense(64, kernel_init=nn.with_logical_partitioning(init, ("embed", "hidden")))(x)
        x = nn.relu(x)
        return nn.Dense(16, kernel_init=nn.with_logical_partitioning(init, ("hidden", "embed")))(x)


RULES = (("batch", "x"), ("hidden", "y"), ("embed", None))
model = MLP()
batch = jax.device_put(jnp.ones((8, 16)), NamedSharding(mesh, P("x", None)))


def init(key, x):
    return train_state.TrainState.create(apply_fn=model.apply, params=model.init(key, x)["params"], tx=optax.adam(1e-3))


with jax.set_mesh(mesh), nn.logical_axis_rules(RULES):
    abstract = jax.eval_shape(init, jax.random.key(0), batch)
    shardings = nn.logical_to_mesh_sharding(nn.get_partition_spec(abstract), mesh, RULES)
    state = jax.jit(init, out_shardings=shardings)(jax.random.key(0), batch)
shardscope.show(state, "train state", rules=RULES)"""

STEP = """\
def train_step(state, x):
    def loss(params):
        return jnp.mean(state.apply_fn({"params": params}, x) ** 2)

    return state.apply_gradients(grads=jax.grad(loss)(state.params))


with jax.set_mesh(mesh), nn.logical_axis_rules(RULES):
    step = inspect_jit(jax.jit(train_step), state, batch)
shardscope.show(step)"""

LARGE = """\
shardscope.show(devices="tpu:v4:16x16x16", mesh="16x256", axes="x,y", spec="P('x', 'y')", shape=(4096, 4096))"""

CELLS = [SETUP, ARRAY, HYPOTHETICAL, MODEL, STEP, LARGE]
SHOW_CELLS = {"array": 1, "hypothetical": 2, "model": 3, "step": 4, "large": 5}


def notebook() -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(source) for source in CELLS]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return nb


def write(path: Path) -> Path:
    nbformat.write(notebook(), str(path))
    return path
