"""openxla/xla #15048 "Strange Sharding with pipeline parallel around Scatter op - TP/PP/DP".

Source: https://github.com/openxla/xla/issues/15048

The report (AXLearn's pipelined transformer) shows collectives XLA put around the pipeline's
state update: every iteration the next microbatch is written into stage 0 of a stage-sharded
state buffer (a scatter / dynamic-update-slice) and the buffer is shifted one stage
(collective-permute). This is a much smaller rebuild of that pattern, not the report's HLO: a
(pipe=2, data=4) mesh, state[stages, mb, d] sharded P('pipe', 'data', None), per-stage weights
P('pipe', None, None), and the microbatch stack xs[num_micro, mb, d] -- which here is sharded over
'pipe' on its microbatch index (the mistake): reading xs[t] then needs data held by the other
pipeline stage. xs sharded like the state rows, P(None, 'data', None), reads locally; the stage
shift's collective-permute is inherent to pipelining and stays.
"""

import jax
import jax.numpy as jnp
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

NUM_STAGES, NUM_MICRO, MB, D = 2, 4, 32, 256


def pipeline(ws, xs):
    state = jnp.zeros((NUM_STAGES, MB, D), xs.dtype)
    for t in range(NUM_MICRO):
        state = state.at[0].set(xs[t])
        state = jax.vmap(lambda w, s: jnp.tanh(s @ w))(ws, state)
        state = jnp.roll(state, 1, axis=0)
    return state


def build():
    mesh = jax.make_mesh((2, 4), ("pipe", "data"), axis_types=(AxisType.Auto,) * 2)

    def S(*spec):
        return NamedSharding(mesh, P(*spec))

    ws = jax.ShapeDtypeStruct((NUM_STAGES, D, D), jnp.float32, sharding=S("pipe", None, None))
    xs = jax.ShapeDtypeStruct((NUM_MICRO, MB, D), jnp.float32, sharding=S("pipe", "data", None))
    return jax.jit(pipeline), (ws, xs)
