"""jax-ml/jax #23052 "Scatter on Sharded Matrices has bugs" (problem 1 of the report).

Source: https://github.com/jax-ml/jax/issues/23052

"Using the array.at[].set() syntax is lowered to an all-gather operation, which leads to OOM
errors ... Technically, it should not be necessary to perform an all-gather operation on scatter".
The report shards x over devices along its first dimension (a (4, 1) PositionalSharding) and
writes rows with static indices: `res = x.at[0:3].set(updates)  # all-gather`. Same pattern on an
8-device 1-D mesh (PositionalSharding is gone; P('x', None) is its NamedSharding spelling).
"""

import jax
import jax.numpy as jnp
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P


def build():
    mesh = jax.make_mesh((8,), ("x",), axis_types=(AxisType.Auto,))
    x = jax.ShapeDtypeStruct((1024, 512), jnp.float32, sharding=NamedSharding(mesh, P("x", None)))
    updates = jax.ShapeDtypeStruct((3, 512), jnp.float32, sharding=NamedSharding(mesh, P()))

    @jax.jit
    def update(x, updates):
        res = x.at[0:3].set(updates)
        return res

    return update, (x, updates)
