"""jax-ml/jax #20381 "Unexplained all-gather in batched array shuffling" (open since 2024-03).

Source: https://github.com/jax-ml/jax/issues/20381

The reporter's program, as posted: an array fully sharded along its first dimension over a 1-D
mesh ('dp'), a replicated PRNG key, `jax.random.split(rng, batch_size)` and a vmapped
`jax.random.permutation` of each row; in_shardings (replicated key, P('dp', None, None)) and
out_shardings P('dp', None, None). "XLA decides to insert an all-gather ... for some reason that I
cannot understand." Here on 8 CPU devices (the report used all local devices), compile only; the
report's (24, 4096, 16) input is cut to (24, 64, 16) to keep the compile under 2 s
(on this 2-core machine: 4096 rows took 2.8 s, 64 rows 0.8-1.4 s).

JAX 0.10.2 note: with today's defaults this program compiles to NO collective. The report predates
JAX 0.5.0, which made `jax_threefry_partitionable=True` the default. To rebuild what the reporter
saw, the case is compiled with `jax_threefry_partitionable=False` set (CONFIG below: the 2024 default,
applied around the compile by the corpus test); then `jax.random.split` of the replicated key compiles
to collective-permutes and all-gathers. The fix is the flag (today's default), not a PartitionSpec: no
spec of the 2-word key removes it.
"""

import jax
import jax.numpy as jnp
import numpy as np

CONFIG = {"jax_threefry_partitionable": False}  # the default when the issue was filed; True is the fix


def func(rng, inputs):
    batch_size, _, _ = inputs.shape

    def _f(rng, input):
        return jax.random.permutation(rng, input)

    rng = jax.random.split(rng, batch_size)
    return jax.vmap(_f)(rng, inputs)


def build():
    mesh = jax.sharding.Mesh(np.array(jax.devices()), ("dp",))
    rng_sharding = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec())
    input_sharding = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("dp", None, None))
    f = jax.jit(func, in_shardings=(rng_sharding, input_sharding), out_shardings=input_sharding)
    rng = jax.ShapeDtypeStruct((2,), jnp.uint32, sharding=rng_sharding)  # jax.random.PRNGKey(0)
    inputs = jax.ShapeDtypeStruct((24, 64, 16), jnp.float32, sharding=input_sharding)
    return f, (rng, inputs)
