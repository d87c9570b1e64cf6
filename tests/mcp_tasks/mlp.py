"""The why walkthrough's MLP (tests/why_corpus/flax_gspmd_dot_relu_dot.py) as FN(mesh) for the MCP tools: w2
sharded (None, 'model') like the first weight, so XLA all-gathers the hidden activation over 'model'."""

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P


def dot_relu_dot(params, x):
    y = x @ params["dot1"]["kernel"]
    y = jax.nn.relu(y)
    return jnp.dot(y, params["w2"])


def build(mesh):
    def s(*spec):
        return NamedSharding(mesh, P(*spec))

    depth, hidden = 1024, 4096
    params = {
        "dot1": {"kernel": jax.ShapeDtypeStruct((depth, hidden), jnp.float32, sharding=s(None, "model"))},
        "w2": jax.ShapeDtypeStruct((hidden, depth), jnp.float32, sharding=s(None, "model")),
    }
    x = jax.ShapeDtypeStruct((64, depth), jnp.float32, sharding=s("data", None))
    return jax.jit(dot_relu_dot), (params, x)
