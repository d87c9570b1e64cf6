"""Resharding cost: what moving an array from one sharding to another compiles to.

A reshard is the catalog's ``reshard`` kernel — the identity, jitted with ``out_shardings=NamedSharding(mesh,
to)`` on an input placed with ``from`` — so it goes through the kernel lab's checks, worker pool, cache,
limits and TPU compile-only section, and its collectives carry estimates like any run's.
:func:`reshard_json` keeps what a reshard answer needs from the run's result: its ``communication`` and
``roofline`` are the headline program's — on a ``tpu:`` set compiled for libtpu, the TPU program (what the
slice would run; the CPU run's collectives are listed too, as what ran here), else the compiled program.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sharding_core.kernels.plan import MAX_KERNEL_DEVICES, MAX_KERNEL_ELEMENTS, KernelPlan, RunInput, plan_run
from sharding_core.mesh import MeshSpec

RESHARD_KERNEL = "reshard"

TPU_KEYS = ("skipped", "error", "topology", "device_kind", "source", "slices", "collectives", "dcn", "dcn_note",
            "memory", "cost", "compile_ms")  # fmt: skip


def plan_reshard(
    devices: str,
    mesh_spec: MeshSpec,
    shape: Sequence[int],
    dtype: str,
    source: str,
    target: str,
    *,
    slices: int = 1,
    chips_per_host: Sequence[int] | None = None,
    max_devices: int = MAX_KERNEL_DEVICES,
    max_elements: int = MAX_KERNEL_ELEMENTS,
    max_bytes: int | None = None,
    compile_only: bool | None = None,
    max_compile_seconds: float | None = None,
) -> KernelPlan:
    """The run that moves a ``shape`` ``dtype`` array from spec ``source`` to spec ``target`` on the mesh."""
    return plan_run(
        RESHARD_KERNEL,
        devices,
        mesh_spec,
        [RunInput(tuple(shape), source, dtype)],
        [target],
        slices=slices,
        chips_per_host=chips_per_host,
        max_devices=max_devices,
        max_elements=max_elements,
        max_bytes=max_bytes,
        compile_only=compile_only,
        max_compile_seconds=max_compile_seconds,
    )


def reshard_json(result: Mapping[str, Any]) -> dict[str, Any]:
    """A reshard's answer from its run's result (``POST /api/kernels/run``'s shape)."""
    source, target = result["inputs"][0], result["outputs"][0]
    sections = {
        k: {f: v.get(f) for f in TPU_KEYS} if (v := result.get(k)) is not None else None for k in ("tpu", "gpu")
    }
    return {
        "cached": result.get("cached", False),
        "kernel": result["kernel"],
        "devices_key": result["devices_key"],
        "platform": result["platform"],
        "executed_on": result["executed_on"],
        "jax_version": result["jax_version"],
        "mesh": result["mesh"],
        "shape": source["shape"],
        "dtype": source["dtype"],
        "from": source["spec"],
        "to": target["spec"],
        "from_bytes_per_device": source["bytes_per_device"],
        "to_bytes_per_device": target["bytes_per_device"],
        "compile_only": result.get("compile_only", False),
        "max_abs_error": result["max_abs_error"],
        "collectives": result["collectives"],
        # the headline: the TPU program's totals on a tpu: set compiled for libtpu, else the compiled program's
        "communication": result["communication"],
        "roofline": result["roofline"],
        "figures_from": result.get("figures_from"),
        "memory": result["memory"],
        "timing": result["timing"],
        "compiler_log": result["compiler_log"],
        "tpu": sections["tpu"],
        "gpu": sections["gpu"],
    }
