"""JAX tutorial "Distributed arrays and automatic parallelization" (the jax.Array notebook),
section "Constraining shardings of intermediates in jitted code": x is placed with a (4, 2) tiling
and `f` constrains `x + 1` to a (2, 4) tiling with `jax.lax.with_sharding_constraint`.

Source: https://docs.jax.dev/en/latest/notebooks/Distributed_arrays_and_automatic_parallelization.html
(docs/notebooks/Distributed_arrays_and_automatic_parallelization.md)

The tutorial spells the tilings with PositionalSharding (removed since); on a (4, 2) mesh
('a', 'b') they are P('a', 'b') and the transposed tiling P('b', 'a'). The constraint forces a
relayout of the whole array between the two. If the program wants P('b', 'a') -- that is what
the constraint says -- the input should arrive that way. 8192x8192 scaled to 2048x2048.
"""

import jax
import jax.numpy as jnp
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P


def build():
    mesh = jax.make_mesh((4, 2), ("a", "b"), axis_types=(AxisType.Auto,) * 2)

    @jax.jit
    def f(x):
        x = x + 1
        y = jax.lax.with_sharding_constraint(x, NamedSharding(mesh, P("b", "a")))
        return y

    x = jax.ShapeDtypeStruct((2048, 2048), jnp.float32, sharding=NamedSharding(mesh, P("a", "b")))
    return f, (x,)
