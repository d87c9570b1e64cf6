"""Scaling book, part 3, "Case 2: one multiplicand has a sharded contracting dimension":
A[I, J_X] . B[J, K] -> C[I, K]  ("we first AllGather the shards of A together locally").

Source: https://jax-ml.github.io/scaling-book/sharding/#case-2-one-multiplicand-has-a-sharded-contracting-dimension

Here A (activations, I=batch) is sharded over X on its contracting dim J and B (a weight) is
replicated. Sharding A over its batch dim instead, A[I_X, J], is Case 1: no communication.
"""

import jax
import jax.numpy as jnp
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P


def build():
    mesh = jax.make_mesh((4, 2), ("X", "Y"), axis_types=(AxisType.Auto,) * 2)

    def S(*spec):
        return NamedSharding(mesh, P(*spec))

    A = jax.ShapeDtypeStruct((512, 1024), jnp.float32, sharding=S(None, "X"))
    B = jax.ShapeDtypeStruct((1024, 256), jnp.float32, sharding=S())

    @jax.jit
    def matmul(A, B):
        return A @ B

    return matmul, (A, B)
