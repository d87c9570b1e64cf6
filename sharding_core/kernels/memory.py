"""How much memory a kernel run takes: the estimate before anything runs, and the process figures it is
checked against.

A run's worker holds, all in host RAM (its devices are CPU devices): the JAX runtime and one thread
pool per device; the inputs as NumPy arrays (logical bytes) and placed on the devices (physical bytes:
every device's shard, replicas included); the arrays the kernel creates while it is built (e.g. a Flax
model's parameters and its optimizer state, as placed); what XLA allocates to run the program
(arguments, outputs and temporaries per device, from ``compiled.memory_analysis()``); and the unsharded
reference it is compared with. :func:`estimate` adds the parts known before compiling (the parent
refuses a run past the budget with 422 ``too_large``); the worker checks again with XLA's own figures
after compiling and before allocating, and the server caps the worker's resident memory hard.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping

from sharding_core.processes import peak_resident_bytes as peak_resident_bytes  # re-exported: the kernels' callers
from sharding_core.processes import resident_bytes as resident_bytes
from sharding_core.units import fmt_bytes

__all__ = ["Estimate", "estimate", "peak_resident_bytes", "physical_ram", "resident_bytes"]

MIB = 1024 * 1024
WORKER_BASELINE_BYTES = 320 * MIB
"""A worker's resident memory with JAX imported and its CPU client started (measured: 250–300 MiB)."""
PER_DEVICE_BYTES = 3 * MIB // 2
"""Resident memory each CPU device adds: its runtime state and its share of compiling (measured: 2048 devices
 add 0.2 GiB on an elementwise program and about 1.5 GiB on the Flax train step)."""


@dataclasses.dataclass(frozen=True)
class Estimate:
    """The parts of a run's memory, in bytes, and their sum."""

    parts: Mapping[str, int]

    @property
    def total(self) -> int:
        return sum(self.parts.values())

    def describe(self) -> str:
        shown = [f"{name.replace('_', ' ')} {fmt_bytes(v)}" for name, v in self.parts.items() if v]
        return f"{fmt_bytes(self.total)} ({', '.join(shown)})"


def estimate(
    devices: int, inputs_logical: int, inputs_physical: int, created: int, reference: int, program: int = 0
) -> Estimate:
    """The run's memory: runtime, inputs on the host and on the devices, created arrays, XLA's program
    (0 before compiling), the reference."""
    return Estimate(
        {
            "runtime": WORKER_BASELINE_BYTES + PER_DEVICE_BYTES * devices,
            "inputs_on_host": inputs_logical,
            "inputs_on_devices": inputs_physical,
            "created_arrays": created,
            "program": program,
            "reference": reference,
        }
    )


def physical_ram() -> int:
    """Bytes of RAM this process may use: the machine's, or its memory cgroup's limit when lower."""
    total = int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            with open(path) as f:
                text = f.read().strip()
        except OSError:
            continue
        if text.isdigit() and 0 < int(text) < total:
            total = int(text)
    return total
