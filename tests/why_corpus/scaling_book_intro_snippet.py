"""Scaling book, part 3 ("Sharded Matrices and How to Multiply Them"), the code preview in
"A quick aside: how would we describe this in code?".

Source: https://jax-ml.github.io/scaling-book/sharding/  (repo jax-ml/scaling-book, sharding.md)

The book shards A[B, D] as P('X', 'Y') -- "both A and B over the non-contracting dimension and A
over the contracting dim" -- and B[D, F] as P(None, 'Y'), then asks for out_shardings P('X', 'Y').
A's contracting dim D is split over Y while B's is not, and B's F also wants Y, so XLA all-gathers
A over Y before the matmul (Case 2 + Case 4 of the chapter). Sharding A only over its batch dim,
A[B_X, D], makes this Case 1: A[B_X, D] . B[D, F_Y] -> C[B_X, F_Y] with no communication.
Shapes as in the book (bf16 8x2048 and 2048x8192), compile only.
"""

import jax
import jax.numpy as jnp
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P


def build():
    mesh = jax.make_mesh((4, 2), ("X", "Y"), axis_types=(AxisType.Auto,) * 2)

    def S(*spec):
        return NamedSharding(mesh, P(*spec))

    A = jax.ShapeDtypeStruct((8, 2048), jnp.bfloat16, sharding=S("X", "Y"))
    B = jax.ShapeDtypeStruct((2048, 8192), jnp.bfloat16, sharding=S(None, "Y"))
    matmul = jax.jit(lambda A, B: jnp.einsum("BD,DF->BF", A, B), out_shardings=S("X", "Y"))
    return matmul, (A, B)
