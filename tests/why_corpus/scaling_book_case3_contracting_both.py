"""Scaling book, part 3, "Case 3: both multiplicands have sharded contracting dimensions":
A[I, J_X] . B[J_X, K] -> C[I, K] {U_X}, then AllReduce_X -- or, if the result may stay sharded,
a ReduceScatter "resolves partial sums ... but results in an output scattered", which moves half
the bytes of the AllReduce ("an AllReduce is twice as expensive as an AllGather").

Source: https://jax-ml.github.io/scaling-book/sharding/#case-3-both-multiplicands-have-sharded-contracting-dimensions

Here the result is asked for replicated (out_shardings P()), which forces the AllReduce. The fix
is the output's spec: out_shardings P('X', None) turns it into a ReduceScatter.
"""

import jax
import jax.numpy as jnp
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P


def build():
    mesh = jax.make_mesh((8,), ("X",), axis_types=(AxisType.Auto,))

    def S(*spec):
        return NamedSharding(mesh, P(*spec))

    A = jax.ShapeDtypeStruct((512, 1024), jnp.float32, sharding=S(None, "X"))
    B = jax.ShapeDtypeStruct((1024, 512), jnp.float32, sharding=S("X", None))

    def matmul(A, B):
        return A @ B

    return jax.jit(matmul, out_shardings=S()), (A, B)
