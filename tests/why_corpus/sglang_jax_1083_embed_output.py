"""sgl-project/sglang-jax #1083 "fix(embed): preserve data sharding in Embed output" (2026-05).

Source: https://github.com/sgl-project/sglang-jax/pull/1083

The PR: `Embed.__call__` forced its output sharding to `P(None, ..., kernel_axes[-1])` with vocab-parallel
weights (`kernel_axes=("tensor", None)`), i.e. a replicated batch, while the token ids arrive `P("data")`;
"this forces XLA to insert two collectives at the embedding boundary": an all-reduce over `tensor` (the
intended cost of a vocab-parallel lookup) and an all-gather over `data` ("pure overhead"). The fix keeps the
batch split: `P("data", None)`.

Here the layer is the jitted function and its forced output spec is the jit's out_shardings (in the PR it is
the layer's own constraint on its output, the same boundary): a (2, 4) ('data', 'tensor') mesh, 256 token
ids, a 4096 x 512 table. The vocab-parallel lookup is a one-hot matmul, as a vocab-parallel embedding is
written when the gather itself must stay local.

Held out: written after the explainer and its ranking were frozen; run once.
"""

import jax
import jax.numpy as jnp
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P


def embed(ids, table):
    one_hot = jax.nn.one_hot(ids, table.shape[0], dtype=table.dtype)
    return one_hot @ table


def build():
    mesh = jax.make_mesh((2, 4), ("data", "tensor"), axis_types=(AxisType.Auto,) * 2)
    ids = jax.ShapeDtypeStruct((256,), jnp.int32, sharding=NamedSharding(mesh, P("data")))
    table = jax.ShapeDtypeStruct((4096, 512), jnp.float32, sharding=NamedSharding(mesh, P("tensor", None)))
    f = jax.jit(embed, out_shardings=NamedSharding(mesh, P(None, None)))  # the PR's "before" output spec
    return f, (ids, table)
