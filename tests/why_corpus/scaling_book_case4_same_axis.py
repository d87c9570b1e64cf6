"""Scaling book, part 3, "Case 4: both multiplicands have a non-contracting dimension sharded along
the same axis": A[I_X, J] . B[J, K_X] is invalid as-is; "we cannot proceed without AllGathering one
of the two inputs first".

Source: https://jax-ml.github.io/scaling-book/sharding/#case-4-both-multiplicands-have-a-non-contracting-dimension-sharded-along-the-same-axis

On the book's 4x2 mesh ('X', 'Y'), B's output dim is sharded over X -- the axis A's batch dim
already uses. Sharding B's K over the other axis, B[J, K_Y], is Case 1 (A[I_X, J] . B[J, K_Y] ->
C[I_X, K_Y]) with no communication.
"""

import jax
import jax.numpy as jnp
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P


def build():
    mesh = jax.make_mesh((4, 2), ("X", "Y"), axis_types=(AxisType.Auto,) * 2)

    def S(*spec):
        return NamedSharding(mesh, P(*spec))

    A = jax.ShapeDtypeStruct((1024, 512), jnp.float32, sharding=S("X", None))
    B = jax.ShapeDtypeStruct((512, 256), jnp.float32, sharding=S(None, "X"))

    @jax.jit
    def matmul(A, B):
        return A @ B

    return matmul, (A, B)
