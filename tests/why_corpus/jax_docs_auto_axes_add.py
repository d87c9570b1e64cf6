"""JAX docs, "Distributed arrays and automatic parallelization" (explicit sharding), section
"With @auto_axes the compiler chooses shardings within the decorated function".

Source: https://docs.jax.dev/en/latest/201/sharding.html  (also docs/notebooks/explicit-sharding.md,
https://docs.jax.dev/en/latest/notebooks/explicit-sharding.html)

The docs add x: f32[4@X, 4] to y: f32[4, 4@X] -- an error in Explicit mode, because the result
would mention X twice -- and use `@auto_axes` with `out_sharding=P("X", None)` to let the compiler
do it. The compiler must move y's X sharding from columns to rows (a collective). Giving y the
result's layout, P("X", None), removes it. Shapes scaled from 4x4 to 1024x1024.
"""

import jax
import jax.numpy as jnp
from jax.sharding import AxisType, NamedSharding, auto_axes
from jax.sharding import PartitionSpec as P


@auto_axes
def add2(x, y):
    return x + y


def build():
    mesh = jax.make_mesh((4, 2), ("X", "Y"), axis_types=(AxisType.Explicit,) * 2)
    x = jax.ShapeDtypeStruct((1024, 1024), jnp.float32, sharding=NamedSharding(mesh, P("X", None)))
    y = jax.ShapeDtypeStruct((1024, 1024), jnp.float32, sharding=NamedSharding(mesh, P(None, "X")))

    @jax.jit
    def f(x, y):
        # the docs run this under jax.set_mesh(mesh); inside a jitted function the abstract mesh
        # is set with use_abstract_mesh (auto_axes needs a context mesh to switch to Auto)
        with jax.sharding.use_abstract_mesh(mesh.abstract_mesh):
            return add2(x, y, out_sharding=P("X", None))

    return f, (x, y)
