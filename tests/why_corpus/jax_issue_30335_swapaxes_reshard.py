"""jax-ml/jax #30335 "Segfault while Performing All-to-All Collective Operation on 8xH100 SXM5 (Shard +
Swapaxes + Shard)" (2025-07).

Source: https://github.com/jax-ml/jax/issues/30335

The reporter's program: an array of shape (n, 2, n, 3) sharded along its leading axis over a 1-D mesh of
all n devices ('devices'), `jnp.swapaxes(x, 0, 2)`, a reshape to (-1, 3) and a constraint sharding the
result along its leading axis again: moving the split from the old leading axis to the new one is an
all-to-all (the segfault was a GPU driver matter; the all-to-all is what the program asks for as written).
Here with n = 8 CPU devices, compile only, the first constraint given as the input's sharding, and axis 2
scaled from n to 64 n rows (so the final reshape is to (n, -1, 3)). Placing the
input split along axis 2, the axis that becomes the leading one, makes every step local.

Held out: written after the explainer and its ranking were frozen; run once.
"""

import jax
import jax.numpy as jnp
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P


def build():
    mesh = jax.make_mesh((8,), ("devices",), axis_types=(AxisType.Auto,))
    sharding = NamedSharding(mesh, P("devices"))

    @jax.jit
    def f(x):
        x = jnp.swapaxes(x, 0, 2)
        x = jnp.reshape(x, (-1, 3))
        x = jax.lax.with_sharding_constraint(x, sharding)
        return jnp.reshape(x, (8, -1, 3))

    x = jax.ShapeDtypeStruct((8, 2, 8 * 64, 3), jnp.float32, sharding=sharding)
    return f, (x,)
