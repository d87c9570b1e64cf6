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
from typing import Any, TypedDict, Unpack

from sharding_core.kernels.plan import KernelPlan, RunInput, plan_run
from sharding_core.mesh import MeshSpec

RESHARD_KERNEL = "reshard"

TPU_KEYS = ("skipped", "error", "topology", "device_kind", "source", "slices", "collectives", "dcn", "dcn_note",
            "program")  # fmt: skip


class RunOptions(TypedDict, total=False):
    """What a reshard passes on to :func:`~sharding_core.kernels.plan.plan_run` (its keyword arguments)."""

    slices: int
    chips_per_host: Sequence[int] | None
    max_devices: int
    max_elements: int
    max_bytes: int | None
    compile_only: bool | None
    max_compile_seconds: float | None


def plan_reshard(
    devices: str,
    mesh_spec: MeshSpec,
    shape: Sequence[int],
    dtype: str,
    source: str,
    target: str,
    **options: Unpack[RunOptions],
) -> KernelPlan:
    """The run that moves a ``shape`` ``dtype`` array from spec ``source`` to spec ``target`` on the mesh (the
    device set's extras, the limits and the mode as :func:`~sharding_core.kernels.plan.plan_run` takes them)."""
    return plan_run(RESHARD_KERNEL, devices, mesh_spec, [RunInput(tuple(shape), source, dtype)], [target], **options)


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
        "program": result["program"],
        "timing": result["timing"],
        "tpu": sections["tpu"],
        "gpu": sections["gpu"],
    }
