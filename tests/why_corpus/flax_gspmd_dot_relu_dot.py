"""Flax guide "Scale up on multiple devices" (NNX): the DotReluDot model on a 2x4 ('data', 'model')
mesh, with `dot1`'s kernel partitioned (None, 'model') and `w2` partitioned ('model', None) --
Megatron-style: the hidden activation stays split over 'model' and the second matmul contracts it
locally, ending in one reduction.

Source: https://flax.readthedocs.io/en/latest/guides/flax_gspmd.html
(Linen version: https://flax.readthedocs.io/en/v0.6.10/guides/flax_on_pjit.html)

This rebuild (plain JAX, parameters as the guide's tree {'dot1': {'kernel'}, 'w2'}) makes the
mistake of issue 22's walkthrough: w2 is partitioned (None, 'model') like dot1's kernel. Then the
hidden activation's contracting dim is split over 'model' but w2's is not, and XLA all-gathers the
activation over 'model'. The guide's w2 spec, P('model', None), fixes it (one all-reduce of the
output instead). Deviation from the guide: its DotReluDot is square (depth -> depth -> depth); this
uses a transformer MLP's 4x hidden width (depth -> 4*depth -> depth) as in the issue's walkthrough.
With a square block the all-gather and the fix's all-reduce move the same number of bytes, and
no spec "fixes" it by bytes (measured: 128 KiB either way).
"""

import jax
import jax.numpy as jnp
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P


def dot_relu_dot(params, x):
    y = x @ params["dot1"]["kernel"]
    y = jax.nn.relu(y)
    z = jnp.dot(y, params["w2"])
    return z


def build():
    mesh = jax.make_mesh((2, 4), ("data", "model"), axis_types=(AxisType.Auto,) * 2)

    def S(*spec):
        return NamedSharding(mesh, P(*spec))

    depth, hidden = 1024, 4096
    params = {
        "dot1": {"kernel": jax.ShapeDtypeStruct((depth, hidden), jnp.float32, sharding=S(None, "model"))},
        "w2": jax.ShapeDtypeStruct((hidden, depth), jnp.float32, sharding=S(None, "model")),  # guide: ('model', None)
    }
    x = jax.ShapeDtypeStruct((64, depth), jnp.float32, sharding=S("data", None))
    return jax.jit(dot_relu_dot), (params, x)
