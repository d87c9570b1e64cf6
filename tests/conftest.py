"""Shared test set-up: JAX on CPU with 8 forced devices, fixed once per test process.

Simulated device sets need no devices at all; the 8 real CPU devices back the ``local`` set and
tests that compare against arrays JAX actually places.
"""

from __future__ import annotations

import os

os.environ["JAX_PLATFORMS"] = "cpu"

import jax  # noqa: E402

jax.config.update("jax_num_cpu_devices", 8)
