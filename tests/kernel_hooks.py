"""Kernels that misbehave on purpose, registered in the test process and in every worker of the pools the
pool and memory tests start (``kernel_worker_pool(..., setup=("tests.kernel_hooks:register",))``)."""

from __future__ import annotations

import os
import time

import jax
import numpy as np

from sharding_core.kernels import catalog
from sharding_core.kernels.catalog import Built, Kernel, KernelContext, KernelInput, KernelParam


def _sleep(ctx: KernelContext) -> Built:
    time.sleep(ctx.params["tenths"] / 10)  # while "compiling": tracing is where a Python kernel hangs

    def f(x: jax.Array) -> jax.Array:
        return x + 1

    return Built(f)


def _crash(ctx: KernelContext) -> Built:
    os._exit(3)  # what a segfault or the OOM killer looks like from outside


HOOKS = (
    Kernel(
        "test_sleep",
        "test: sleeps",
        "Sleeps for a number of tenths of a second before building.",
        _sleep,
        (KernelInput("x", (8,), "P('x')"),),
        params=(KernelParam("tenths", "int", "1", "How long to sleep", 0, 100_000),),
        reference=lambda ctx, x: x + 1,
    ),
    Kernel("test_crash", "test: crashes", "Exits its process.", _crash, (KernelInput("x", (8,), "P('x')"),)),
)


def _hog(ctx: KernelContext) -> Built:
    """Allocates (and touches) memory its estimate knows nothing of, 64 MiB at a time, up to 4 GiB."""
    held = []
    for _ in range(64):
        held.append(np.ones(8 * 1024 * 1024))  # 64 MiB of float64, resident
        time.sleep(0.01)
    raise AssertionError(f"the cap should have stopped this worker ({len(held)} blocks held)")


HOG = Kernel("test_hog", "test: a runaway", "Allocates until it is stopped.", _hog, (KernelInput("x", (8,), "P('x')"),))
HOOKS = (*HOOKS, HOG)


def register() -> None:
    for k in HOOKS:
        if catalog.get_kernel(k.name) is None:
            catalog.register(k)
