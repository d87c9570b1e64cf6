"""Results stored before the program report existed, read into today's shape: the one place old stored things are
upgraded, where they are read (:func:`sharding_core.cost.annotate.snapshot_with_estimates` for snapshots and
share links, :func:`sharding_core.cost.annotate.result_with_figures` for kernel runs and jobs), so every reader sees
one shape and one memory vocabulary — XLA's.

* A snapshot from ``inspect_jit``, ``explain`` or a plan without ``program``: its report is rebuilt from where those
  facts were kept — ``jit.memory_per_device`` (already XLA's names), ``plan.work`` (or ``jit``'s loop facts),
  ``plan.temporaries`` and ``plan.refusal``, the collectives without their figures and whys. What was never stored
  (the device assignment, the DCN steps, origins, the compiler log) is empty. Its fixes likewise.
* A kernel run (or reshard) whose ``memory`` used the kernel lab's own names (``peak_bytes``, ``temp_bytes``, ...)
  and whose ``cost`` held XLA's cost analysis beside the loop-corrected counts: ``program`` is built from them and
  its sections', and ``estimate_on`` from its device set and inputs; the figures it was stored with are dropped
  (they are added again when it is read).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sharding_core.program.report import FORMAT, LOCAL

KERNEL_MEMORY = {
    "argument_bytes": "argument_size_in_bytes",
    "output_bytes": "output_size_in_bytes",
    "temp_bytes": "temp_size_in_bytes",
    "alias_bytes": "alias_size_in_bytes",
    "generated_code_bytes": "generated_code_size_in_bytes",
    "peak_bytes": "peak_memory_in_bytes",
}
"""The kernel lab's memory names before the report (stored results only) -> XLA's."""

FIGURES = ("roofline", "communication", "figures_from")
"""What a kernel result's figures were stored as (added again when read)."""


def upgrade_snapshot(snap: Mapping[str, Any]) -> dict[str, Any]:
    """``snap`` with a ``program`` report (rebuilt when it was stored without one), its fixes' too."""
    out = dict(snap)
    if out.get("fixes"):
        out["fixes"] = [upgrade_snapshot(f) for f in out["fixes"]]
    if out.get("program") is not None or not (out.get("jit") or isinstance(out.get("plan"), Mapping)):
        return out
    jit = out.get("jit") or {}
    plan = out.get("plan") or {}
    timings = {k: float(plan[k]) for k in ("lower_seconds", "compile_seconds") if plan.get(k) is not None}
    out["program"] = {
        "format": FORMAT,
        "target": dict(out.get("target") or _local_target(out)),
        "partitioner": plan.get("partitioner") or (out.get("why_search") or {}).get("partitioner"),
        "memory": jit.get("memory_per_device"),
        "work": plan.get("work") if plan else _work_of_jit(jit),
        "collectives": [_facts(c) for c in out.get("collectives") or []],
        "dcn": [],
        "device_assignment": [],
        "origins": None,
        "timings": timings,
        "compiler_log": [],
        "temporaries": plan.get("temporaries"),
        "refusal": _refusal(plan.get("refusal"), plan.get("temporaries")),
    }
    return out


def upgrade_kernel_result(result: Mapping[str, Any]) -> dict[str, Any]:
    """A kernel run's result with its ``program`` reports and ``estimate_on`` (built when it was stored without
    them), without any figure it was stored with."""
    out = {k: v for k, v in result.items() if k not in FIGURES}
    if out.get("program") is not None:
        return out
    timing = out.get("timing") or {}
    out["program"] = _run_program(out, timing.get("lower_ms"), timing.get("compile_ms"))
    for key in ("memory", "cost", "device_assignment", "compiler_log", "origins"):
        out.pop(key, None)
    for kind in ("tpu", "gpu"):
        section = out.get(kind)
        if isinstance(section, Mapping) and section.get("collectives") is not None:
            upgraded = {k: v for k, v in section.items() if k not in ("memory", "cost", "device_assignment")}
            upgraded["program"] = _run_program(section, None, section.get("compile_ms"))
            upgraded.pop("compile_ms", None)
            out[kind] = upgraded
    out["estimate_on"] = {"devices": out.get("devices_key"), "dtype": _dominant_dtype(out.get("inputs") or [])}
    return out


def _facts(collective: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in collective.items() if k not in ("estimate", "why", "line")}


def _local_target(snap: Mapping[str, Any]) -> dict[str, Any]:
    table = snap.get("devices") or {}
    ids = table.get("id") or []
    return {
        "devices": "local",
        "platform": str(snap.get("platform") or ""),
        "device_kind": str(snap.get("device_kind") or ""),
        "compile_only": False,
        "num_devices": len(ids),
        "hosts": len(set(table.get("process_index") or [0])),
        "slices": len(set(table.get("slice_index") or [0])),
        "topology": None,
        "chips_per_host": None,
        "source": LOCAL,
    }


def _work_of_jit(jit: Mapping[str, Any]) -> dict[str, Any] | None:
    """``inspect_jit``'s loop facts (issue 19's ``jit`` fields) as a report's work, for captures made before plans."""
    if jit.get("flops") is None and jit.get("loop_corrected_flops") is None:
        return None
    return {"flops": jit.get("loop_corrected_flops"), "flops_xla": jit.get("flops"), "loops": jit.get("loops") or [],
            "unknown_trip_counts": jit.get("unknown_trip_counts") or []}  # fmt: skip


def _refusal(refusal: Any, temporaries: Any) -> dict[str, Any] | None:
    """XLA's refusal as the report holds it: without what the plan adds (its advice, and the buffer assignment's
    largest temporaries where XLA listed none)."""
    if not isinstance(refusal, Mapping):
        return None
    out = {k: v for k, v in refusal.items() if k != "advice"}
    if isinstance(temporaries, Mapping) and out.get("largest") and out["largest"] == temporaries.get("largest"):
        out["largest"] = []
    return out


def _run_program(run: Mapping[str, Any], lower_ms: Any, compile_ms: Any) -> dict[str, Any]:
    """A kernel run's (or its section's) stored facts as a report."""
    memory = run.get("memory")
    cost = run.get("cost")
    timings = {k: float(v) / 1e3 for k, v in (("lower_seconds", lower_ms), ("compile_seconds", compile_ms))
               if v is not None}  # fmt: skip
    return {
        "format": FORMAT,
        "target": {
            "devices": run.get("devices_key"),
            "device_kind": run.get("device_kind"),
            "source": run.get("source") or run.get("executed_on"),
        },
        "partitioner": (run.get("why_search") or {}).get("partitioner"),
        "memory": {KERNEL_MEMORY.get(k, k): v for k, v in memory.items()} if isinstance(memory, Mapping) else None,
        "work": _work_of_cost(cost) if isinstance(cost, Mapping) else None,
        "collectives": [_facts(c) for c in run.get("collectives") or []],
        "dcn": [_facts(s) for s in run.get("dcn") or []],
        "device_assignment": list(run.get("device_assignment") or []),
        "origins": run.get("origins"),
        "timings": timings,
        "compiler_log": list(run.get("compiler_log") or []),
        "temporaries": None,
        "refusal": None,
    }


def _work_of_cost(cost: Mapping[str, Any]) -> dict[str, Any]:
    """The kernel lab's stored ``cost`` (XLA's cost analysis beside the loop reader's corrections) as a work."""
    return {
        "flops": cost.get("loop_corrected_flops", cost.get("flops")),
        "transcendentals": cost.get("transcendentals"),
        "bytes_accessed": cost.get("loop_corrected_bytes_accessed", cost.get("bytes_accessed")),
        "flops_xla": cost.get("flops"),
        "bytes_accessed_xla": cost.get("bytes_accessed"),
        "matmul_flops_by_dtype": dict(cost.get("matmul_flops_by_dtype") or {}),
        "matmul_traffic_bytes": cost.get("matmul_traffic_bytes"),
        "loops": list(cost.get("loops") or []),
        "unknown_trip_counts": list(cost.get("unknown_trip_counts") or []),
    }


def _dominant_dtype(inputs: Any) -> str:
    """The dtype most of a run's input bytes have (what its compute term reads; the arrays the kernel created count
    too: a stored result does not say which inputs they were)."""
    weight: dict[str, int] = {}
    for i in inputs:
        dtype = str(i.get("dtype") or "float32")
        weight[dtype] = weight.get(dtype, 0) + int(i.get("logical_bytes") or 0)
    return max(weight, key=lambda d: weight[d]) if weight else "float32"
