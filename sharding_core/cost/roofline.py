"""A compiled program's roofline on the device set's hardware, and whether it fits in HBM.

Per device (XLA's ``cost_analysis`` and ``memory_analysis`` describe one device's program)::

    compute        = flops / peak FLOP/s for the kernel's dtype
    memory         = HBM traffic / HBM bandwidth
    communication  = Σ the collectives' estimates × their repeat counts (ICI, DCN, NVLink, network)
    lower bound    = max(compute, memory, communication)   — everything overlapped
    serial         = compute + memory + communication      — nothing overlapped

``flops`` are XLA's with every dot and convolution counted as often as its loop runs (XLA counts a loop body
once: :meth:`sharding_core.hlo.program.ProgramFacts.corrected_flops`). The HBM traffic is the book's
arithmetic-intensity denominator (roofline chapter, "arithmetic intensity": a matmul loads its inputs and
writes its output): the larger of the arguments read once plus the outputs written once (``memory_analysis``)
and the bytes every matmul reads and writes, each as often as it runs. Not XLA's ``bytes accessed``: on TPU
that counts bitcast fusions and VMEM prefetches (3–5× the HBM traffic) and a loop body once; it is kept in
``inputs`` for reference. So ``bound`` follows the book's rule: compute-bound exactly when the program's
intensity (flops / traffic) exceeds the hardware's (peak FLOP/s / HBM bandwidth).

HBM fit compares the program's peak memory per device (``peak_memory_in_bytes``, else arguments + outputs +
temporaries − aliased) with the device's HBM. All of it is an estimate with its formula and inputs; without
hardware figures (CPU sets) it says why.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sharding_core.cost.collectives import total_seconds
from sharding_core.cost.context import CostContext
from sharding_core.hardware import hbm_bandwidth_per_device, hbm_per_device, peak_flops
from sharding_core.units import fmt_bytes

FORMULA = (
    "lower bound = max(flops / peak FLOP/s, HBM traffic / HBM bandwidth, Σ collective estimates × repeats), all "
    "per device and overlapped; serial = their sum. flops: XLA's, loop bodies counted per run; HBM traffic: "
    "max(arguments + outputs, Σ matmul operands + results per run)"
)


def program_bytes(memory: Mapping[str, Any] | None) -> int | None:
    """A program's memory per device (``memory``: ``Compiled.memory_analysis()``'s fields by their XLA names): XLA's
    peak, else arguments + outputs + temporaries − aliased."""
    if not memory:
        return None
    peak = memory.get("peak_memory_in_bytes")
    if peak is not None:
        return int(peak)
    parts = [memory.get(f"{k}_size_in_bytes") for k in ("argument", "output", "temp")]
    if all(p is None for p in parts):
        return None
    return int(sum(p or 0 for p in parts) - (memory.get("alias_size_in_bytes") or 0))


def hbm_fit(nbytes: int | None, ctx: CostContext) -> dict[str, Any]:
    """``{"bytes_per_device", "capacity_bytes", "fits", "over_bytes", "text"}``: fits, or over by how much."""
    out: dict[str, Any] = {"bytes_per_device": nbytes, "capacity_bytes": None, "fits": None, "over_bytes": None}
    if ctx.hardware is None:
        out["text"] = ctx.why or "no hardware figures"
        return out
    cap = hbm_per_device(ctx.hardware)
    if cap.value is None:
        out["text"] = f"no HBM capacity for {ctx.hardware.title}: {cap.note}"
        return out
    out["capacity_bytes"] = int(cap.value)
    if nbytes is None:
        out["text"] = "XLA reported no memory for this program"
        return out
    over = nbytes - int(cap.value)
    out["fits"] = over <= 0
    out["over_bytes"] = max(0, over)
    share = nbytes / cap.value
    out["text"] = (
        f"fits: {fmt_bytes(nbytes)} of {fmt_bytes(int(cap.value))} HBM per device ({share:.1%})"
        if over <= 0
        else f"over by {fmt_bytes(over)}: {fmt_bytes(nbytes)} needed, {fmt_bytes(int(cap.value))} HBM per device"
    )
    return out


def hbm_traffic(work: Mapping[str, Any] | None, memory: Mapping[str, Any] | None) -> tuple[float | None, str]:
    """The program's HBM traffic per device and where it came from (see the module docstring)."""
    work = work or {}
    memory = memory or {}
    parts = [memory.get("argument_size_in_bytes"), memory.get("output_size_in_bytes")]
    io = float(sum(p or 0 for p in parts)) if any(p is not None for p in parts) else None
    matmul = work.get("matmul_traffic_bytes")
    candidates = [(v, name) for v, name in ((io, "arguments + outputs"), (matmul, "matmul operands + results"))
                  if v is not None]  # fmt: skip
    if candidates:
        value, name = max(candidates, key=lambda c: float(c[0]))
        return float(value), name
    accessed = work.get("bytes_accessed")
    if accessed is not None:
        return float(accessed), "XLA's bytes accessed (no memory analysis)"
    return None, "no figure"


def roofline(
    work: Mapping[str, Any] | None,
    memory: Mapping[str, Any] | None,
    collectives: Sequence[Mapping[str, Any]],
    ctx: CostContext,
    dtype: str,
    source: str,
) -> dict[str, Any]:
    """The roofline of one compiled program (``source`` says which: the CPU run's or the TPU compile) from its report
    (:mod:`sharding_core.program.report`): ``work`` (flops and bytes with loops counted) and ``memory`` (XLA's
    ``memory_analysis`` fields), with its ``collectives``' estimates."""
    comm, missing = total_seconds(collectives)
    comm_expected, _ = total_seconds(collectives, "expected_seconds")
    work = work or {}
    flops = work.get("flops")
    traffic, traffic_from = hbm_traffic(work, memory)
    out: dict[str, Any] = {
        "source": source,
        "hardware": ctx.hardware.title if ctx.hardware is not None else None,
        "dtype": dtype,
        "compute_seconds": None,
        "memory_seconds": None,
        "communication_seconds": None,
        "communication_expected_seconds": None,
        "bound": None,
        "lower_bound_seconds": None,
        "serial_seconds": None,
        "formula": FORMULA,
        "inputs": {
            "flops": flops,
            "flops_xla": work.get("flops_xla"),
            "hbm_traffic_bytes": traffic,
            "hbm_traffic_from": traffic_from,
            "bytes_accessed": work.get("bytes_accessed"),
            "loops": len(work.get("loops") or []),
            "collectives": len(collectives),
            "collectives_without_estimate": missing,
        },
        "hbm": hbm_fit(program_bytes(memory), ctx),
        "why": None,
    }
    hw = ctx.hardware
    if hw is None:
        out["why"] = ctx.why or "no hardware figures"
        return out
    notes = _compute_and_memory(out, hw, dtype, flops, traffic)
    if missing:
        notes.append(f"{missing} of {len(collectives)} collectives have no estimate; the sum leaves them out")
    unknown = work.get("unknown_trip_counts") or []
    if unknown:
        notes.append(f"{len(unknown)} loop(s) without a known trip count are counted once ({', '.join(unknown[:3])})")
    if len(collectives) > missing or not collectives:
        out["communication_seconds"] = comm
        out["communication_expected_seconds"] = comm_expected
    terms = {k: out[f"{k}_seconds"] for k in ("compute", "memory", "communication")}
    known = {k: v for k, v in terms.items() if v is not None}
    if known:
        out["bound"] = max(known, key=lambda k: known[k])
        out["lower_bound_seconds"] = max(known.values())
        out["serial_seconds"] = sum(known.values())
    if flops is None:
        notes.append("XLA reported no flops for this program")
    out["why"] = "; ".join(notes) or None
    return out


def _compute_and_memory(
    out: dict[str, Any], hw: Any, dtype: str, flops: float | None, traffic: float | None
) -> list[str]:
    """The compute and memory terms on ``hw`` (written into ``out``), and what the hardware table lacks for them."""
    notes: list[str] = []
    peak, peak_note = peak_flops(hw, dtype)
    if peak is not None and peak.value:
        out["inputs"].update(peak_flops=peak.value, peak_note=peak_note or peak.note)
        if flops is not None:
            out["compute_seconds"] = float(flops) / peak.value
    else:
        notes.append(f"compute: {peak_note}")
    bandwidth = hbm_bandwidth_per_device(hw)
    if bandwidth.value:
        out["inputs"]["hbm_bandwidth"] = bandwidth.value
        if traffic is not None:
            out["memory_seconds"] = traffic / bandwidth.value
        if peak is not None and peak.value:
            out["inputs"]["critical_intensity"] = peak.value / bandwidth.value
            if flops is not None and traffic:
                out["inputs"]["intensity"] = float(flops) / traffic
    else:
        notes.append(f"memory: {bandwidth.note}")
    return notes
