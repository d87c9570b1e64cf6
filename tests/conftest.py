"""Shared test set-up: JAX on CPU with 8 forced devices, fixed once per test process.

Simulated device sets need no devices at all; the 8 real CPU devices back the ``local`` set and
tests that compare against arrays JAX actually places.
"""

from __future__ import annotations

import os

os.environ["JAX_PLATFORMS"] = "cpu"
# libtpu (the tpu extra, for compile-only topologies) must never query a cloud metadata server.
os.environ["TPU_SKIP_MDS_QUERY"] = "1"

import jax

# The fuzz tests' example counts scale with SHARDSCOPE_FUZZ_SCALE: 1 in CI (thousands of inputs,
# a minute), e.g. 50 for a nightly run (`SHARDSCOPE_FUZZ_SCALE=50 make test`).
FUZZ_SCALE = max(1, int(os.environ.get("SHARDSCOPE_FUZZ_SCALE", "1")))


def fuzz_examples(n: int) -> int:
    return n * FUZZ_SCALE


jax.config.update("jax_num_cpu_devices", 8)

# The live-server fixture (a real `shardscope serve`), shared by the live and browser tests.
pytest_plugins = ["tests.live"]
