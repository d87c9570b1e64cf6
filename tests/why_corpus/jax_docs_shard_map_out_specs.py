"""JAX docs, "Manual parallelism with shard_map", "Controlling how each output assembled by
concatenation, block transposition, and untiling using out_specs": f3 sums blocks over 'j' with a
psum and returns out_specs=P('i', None). The tutorial: "Physical data movement is not possible on
outputs, no matter the output pspec. Instead, out_specs just encodes how to assemble the block
outputs" -- so if the caller wants another layout, the data moves after the shard_map, in jit.

Source: https://docs.jax.dev/en/latest/201/shard-map.html  (docs/notebooks/shard_map.md)

Here the jitted caller asks for out_shardings P(None, 'i') (rows whole, columns split over 'i')
while the shard_map produced P('i', None): XLA relayouts the result after the boundary. Asking
for the layout out_specs already gives, P('i', None), removes that collective (the psum inside is
the tutorial's own and stays). 12x12 scaled to 1024x1024.
"""

import jax
import jax.numpy as jnp
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P


def build():
    mesh = jax.make_mesh((4, 2), ("i", "j"), axis_types=(AxisType.Auto,) * 2)

    def f3_block(x_block):
        return jax.lax.psum(x_block, "j")

    def f(x):
        return jax.shard_map(f3_block, mesh=mesh, in_specs=P("i", "j"), out_specs=P("i", None))(x)

    x = jax.ShapeDtypeStruct((1024, 1024), jnp.float32, sharding=NamedSharding(mesh, P("i", "j")))
    return jax.jit(f, out_shardings=NamedSharding(mesh, P(None, "i"))), (x,)
