"""Memory timelines of programs compiled for a GPU set with no GPU: run in the gpu extra's environment (``make
gpu-env``), by tests/test_memory_timeline.py. Plans a few training steps on ``gpu:h100:2x8`` (``sharding_core.plan``:
the timeline read from XLA's dumps), compiles each again with JAX alone for XLA's own ``peak_memory_in_bytes``, and
prints one ``RESULT`` JSON line. Standard library, JAX and the checkout only: no pytest in that environment.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

os.environ["JAX_PLATFORMS"] = "cpu"  # no GPU here: JAX must not start its CUDA backend
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import shardscope
from sharding_core import plan
from tests.timeline_programs import programs


def main() -> None:
    m = shardscope.mesh("gpu:h100:2x8", (16,), ("data",))
    out: dict[str, object] = {}
    for name, fn, args in programs(m, NamedSharding, P, jax, jnp):
        snap = plan(fn, *args)
        xla = fn.lower(*args).compile().memory_analysis()
        t = snap["memory_timeline"]
        out[name] = {"xla_peak": int(xla.peak_memory_in_bytes), "peak_bytes": t["peak_bytes"],
                     "timeline_peak_bytes": t["timeline_peak_bytes"], "max_point": max(b for _, b in t["points"]),
                     "note": t["note"]}  # fmt: skip
    print("RESULT " + json.dumps(out))


if __name__ == "__main__":
    main()
