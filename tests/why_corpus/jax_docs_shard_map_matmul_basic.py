"""JAX docs, "Manual parallelism with shard_map", "So, let's see a shard_map!": matmul_basic with
in_specs=(P('x', 'y'), P('y', None)), out_specs=P('x', None) and a psum over 'y'. The tutorial
notes "Physical data movement is possible on inputs, as each device needs to have a copy of the
appropriate data": an argument placed differently from its in_spec is resharded at the boundary.

Source: https://docs.jax.dev/en/latest/201/shard-map.html  (docs/notebooks/shard_map.md)

Here b is placed P(None, 'y') (split on its columns) while in_specs asks for P('y', None), so XLA
moves b before the shard_map body runs (the psum inside is the tutorial's own and stays). Placing
b as the in_spec says, P('y', None), removes the boundary collective. Shapes scaled up from
8x16 / 16x4.
"""

import jax
import jax.numpy as jnp
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P


def build():
    mesh = jax.make_mesh((4, 2), ("x", "y"), axis_types=(AxisType.Auto,) * 2)

    def matmul_basic(a_block, b_block):
        c_partialsum = jnp.dot(a_block, b_block)
        c_block = jax.lax.psum(c_partialsum, "y")
        return c_block

    @jax.jit
    def f(a, b):
        # (the tutorial decorates matmul_basic with @jax.shard_map; calling it here keeps the
        # boundary's source line in this file)
        specs = {"in_specs": (P("x", "y"), P("y", None)), "out_specs": P("x", None)}
        return jax.shard_map(matmul_basic, mesh=mesh, **specs)(a, b)

    a = jax.ShapeDtypeStruct((512, 1024), jnp.float32, sharding=NamedSharding(mesh, P("x", "y")))
    b = jax.ShapeDtypeStruct((1024, 256), jnp.float32, sharding=NamedSharding(mesh, P(None, "y")))
    return f, (a, b)
