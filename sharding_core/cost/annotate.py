"""Estimates added when a result is read: the HLO reader gives facts (collectives, loops, DCN steps, flops),
and this module puts figures on them once, from the one hardware table, where the result is read — the
server process for a kernel run or a reshard (never the worker), the caller of ``inspect_jit``, the server
again for a stored snapshot. Nothing stored holds an estimate: a snapshot's or a cached run's figures are
always today's table's. A plan (:mod:`sharding_core.planning.program`) is stored with its facts — XLA's
memory figures or refusal, the work the loop reader counts — and gets its roofline, step-time band and verdict
here (:func:`plan_with_figures`), so a stored plan opens with today's figures.
"""

from __future__ import annotations

import types
from collections.abc import Mapping, Sequence
from typing import Any

from sharding_core.cost.collectives import communication, estimate_collective, estimate_dcn_step, none
from sharding_core.cost.context import NO_CPU_FIGURES, CostContext, context_for, context_for_devices, no_figures
from sharding_core.cost.roofline import roofline
from sharding_core.cost.step import LOWER_WORDS, step_band
from sharding_core.devices import parse_devices
from sharding_core.errors import ShardingError
from sharding_core.hardware import hbm_per_device
from sharding_core.units import fmt_bytes, fmt_seconds

CPU_ROOFLINE = "the CPU-compiled program (XLA's CPU cost and memory analyses) on the device set's hardware"
TPU_ROOFLINE = "the TPU compile (libtpu, compile-only: XLA's TPU cost and memory analyses)"
GPU_ROOFLINE = (
    "the GPU compile (XLA's GPU compiler with the GPU's target config, compile-only: its memory analysis; flops "
    "and bytes counted from its HLO)"
)


def with_estimates(collectives: Sequence[Mapping[str, Any]], ctx: CostContext | None) -> list[dict[str, Any]]:
    """The collectives, each with its ``estimate`` on ``ctx`` (any stored one replaced)."""
    return [{**c, "estimate": estimate_collective(c, ctx)} for c in collectives]


def dcn_with_estimates(steps: Sequence[Mapping[str, Any]], ctx: CostContext | None) -> list[dict[str, Any]]:
    return [{**s, "estimate": estimate_dcn_step(s, ctx)} for s in steps]


def estimate_run(result: Mapping[str, Any], ctx: CostContext, dtype: str) -> dict[str, Any]:
    """A kernel run's (or a reshard's) result with its estimates: every collective's, the hardware program's and
    its DCN steps', and one roofline — the headline program's — with ``communication`` the totals of that same
    program and ``figures_from`` saying which program it is: the TPU compile (libtpu) on a ``tpu:`` set, the GPU
    compile (XLA's GPU compiler) on a ``gpu:`` set where the gpu extra is installed, else the CPU-compiled
    program (on a ``gpu:`` set without the extra: the CPU stand-in, and it says so)."""
    out = dict(result)
    out["collectives"] = with_estimates(result.get("collectives") or [], ctx)
    ran = f" ({result['executed_on']})" if result.get("executed_on") else ""
    headline: tuple[list[dict[str, Any]], Any, Any, str, str] = (
        out["collectives"], result.get("cost"), result.get("memory"), CPU_ROOFLINE, f"the compiled program{ran}"
    )  # fmt: skip
    figures_from = {"program": "cpu", "description": f"the CPU-compiled program{ran}"}
    for kind, source, name in (("tpu", TPU_ROOFLINE, "TPU"), ("gpu", GPU_ROOFLINE, "GPU")):
        section = result.get(kind)
        if section is None or section.get("collectives") is None:
            continue
        section = dict(section)
        section["collectives"] = with_estimates(section["collectives"], ctx)
        if section.get("dcn") is not None:
            section["dcn"] = dcn_with_estimates(section["dcn"], ctx)
        steps = [*section["collectives"], *(section.get("dcn") or [])]
        program = f"{name} compile-only ({section.get('topology')})"
        headline = (steps, section.get("cost"), section.get("memory"), source, program)
        figures_from = {"program": kind, "description": f"the {name} compile: {section.get('source') or program}"}
        section["roofline"] = None  # one roofline per result: the headline program's, in ``roofline``
        out[kind] = section
        break
    gpu = result.get("gpu")
    if figures_from["program"] == "cpu" and gpu is not None:
        why = gpu.get("skipped") or ((gpu.get("error") or {}).get("message"))
        figures_from["description"] = f"the CPU stand-in: the CPU-compiled program{ran}, not a GPU program ({why})"
    steps, cost, memory, source, program = headline
    out["roofline"] = roofline(cost, memory, steps, ctx, dtype, source)
    out["communication"] = communication(steps, program)
    out["figures_from"] = figures_from
    return out


# ------------------------------------------------------------------------------------------- snapshots


def snapshot_context(snap: Mapping[str, Any]) -> CostContext:
    """The cost context of a snapshot's devices: the whole device set a compile-only program was compiled for
    (``target.devices``: its torus, wraparound and hosts, as when it was planned), else its own devices table
    (platform, device kind, coordinates, slices)."""
    target = snap.get("target") or {}
    if target.get("compile_only") and isinstance(target.get("devices"), str):
        try:
            devset = parse_devices(
                target["devices"], slices=int(target.get("slices") or 1), chips_per_host=target.get("chips_per_host")
            )
        except (ShardingError, TypeError, ValueError):
            devset = None  # a target this server cannot place: the devices table below
        if devset is not None and devset.simulated:
            return context_for(devset)
    platform = str(snap.get("platform") or "")
    kind = str(snap.get("device_kind") or "")
    table = snap.get("devices") or {}
    ids = table.get("id") or []
    if platform == "cpu" or not ids:
        return no_figures(
            kind or platform or "snapshot", platform or "cpu", NO_CPU_FIGURES if platform == "cpu" else "no devices"
        )
    coords = table.get("coords")
    slices = table.get("slice_index")
    devices = [
        types.SimpleNamespace(
            id=int(i),
            platform=platform,
            device_kind=kind,
            process_index=int((table.get("process_index") or [0] * len(ids))[k]),
            core_on_chip=int((table.get("core_on_chip") or [0] * len(ids))[k]),
            coords=tuple(coords[k]) if coords is not None else None,
            slice_index=int(slices[k]) if slices is not None else None,
        )
        for k, i in enumerate(ids)
    ]
    return context_for_devices(devices, f"{len(devices)} {kind} device{'s' if len(devices) != 1 else ''}")


def snapshot_with_estimates(snap: Mapping[str, Any]) -> dict[str, Any]:
    """A stored snapshot with today's figures: its ``inspect_jit`` collectives estimated on its own devices and,
    for a plan, the plan's figures (:func:`plan_with_figures`). Any figure it was stored with is replaced:
    snapshots from before estimates existed, or from older figures, open."""
    out = dict(snap)
    collectives = snap.get("collectives")
    plan = snap.get("plan")
    if not collectives and not isinstance(plan, Mapping):
        return out
    try:
        ctx: CostContext | None = snapshot_context(snap)
        why = None
    except (TypeError, ValueError, KeyError, IndexError) as e:  # a devices table the context cannot read
        ctx, why = None, f"the snapshot's devices cannot be placed: {e}"
    if collectives:
        if ctx is not None:
            out["collectives"] = with_estimates(collectives, ctx)
        else:
            out["collectives"] = [{**c, "estimate": none(str(why))} for c in collectives]
    if snap.get("fixes"):
        # An explained snapshot's fixes are programs of their own: estimated alike, and each fix's seconds
        # before and after follow today's figures (sharding_core.why.fixes).
        from sharding_core.why import with_fix_seconds

        out["fixes"] = [snapshot_with_estimates(f) for f in snap["fixes"]]
        out["collectives"] = with_fix_seconds(out.get("collectives") or [], out["fixes"])
    if isinstance(plan, Mapping):
        out["plan"] = plan_with_figures(out, ctx if ctx is not None else no_figures("snapshot", "", str(why)))
    return out


def facts_only(snap: Mapping[str, Any]) -> dict[str, Any]:
    """A snapshot as stored: its collectives without estimates and its plan without figures (both are added when
    it is read)."""
    out = dict(snap)
    if snap.get("collectives"):
        out["collectives"] = [{k: v for k, v in c.items() if k != "estimate"} for c in snap["collectives"]]
    if snap.get("fixes"):
        out["fixes"] = [facts_only(f) for f in snap["fixes"]]
    if isinstance(snap.get("plan"), Mapping):
        out["plan"] = {k: v for k, v in snap["plan"].items() if k not in PLAN_FIGURES}
    return out


# ------------------------------------------------------------------------------------------------- plans

PLAN_FIGURES = ("hardware", "capacity_bytes", "roofline", "communication", "step_time", "fits", "over_bytes",
                "verdict")  # fmt: skip
"""What :func:`plan_with_figures` adds to a plan's facts (and :func:`facts_only` takes away)."""

PLAN_ROOFLINE = (
    "the compiled program with its loops counted (flops: XLA's with every loop body times its trip count; HBM "
    "traffic: the cost model's rule) on the device set's hardware"
)
_HLO_DTYPES = {"bf16": "bfloat16", "f32": "float32", "f16": "float16", "s8": "int8", "u8": "int8", "f64": "float32"}
# Compiled.memory_analysis() field -> the roofline's memory key.
_MEMORY_KEYS = {"argument_size_in_bytes": "argument_bytes", "output_size_in_bytes": "output_bytes",
                "temp_size_in_bytes": "temp_bytes", "alias_size_in_bytes": "alias_bytes",
                "peak_memory_in_bytes": "peak_bytes"}  # fmt: skip


def _dominant_dtype(work: Mapping[str, Any]) -> str:
    """The element type most matmul flops are in (the peak FLOP/s the compute term reads), float32 without any."""
    by_dtype = work.get("matmul_flops_by_dtype") or {}
    if not by_dtype:
        return "float32"
    return _HLO_DTYPES.get(max(by_dtype, key=lambda k: by_dtype[k]), "float32")


def plan_with_figures(
    snap: Mapping[str, Any], ctx: CostContext, profile: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """A plan's facts (``plan``: XLA's refusal, the work counted through loops; ``jit.memory_per_device``; the
    estimated ``collectives``) with today's figures on ``ctx``: HBM capacity and fit, the roofline (the cost
    model's one rule for each term), the communication totals, the step-time band (:func:`sharding_core.cost.step.
    step_band`; ``profile``: a calibrate profile whose matmul efficiency replaces the fitted one) and the verdict."""
    plan = {k: v for k, v in (snap.get("plan") or {}).items() if k not in PLAN_FIGURES}
    capacity = None
    if ctx.hardware is not None:
        cap = hbm_per_device(ctx.hardware).value
        capacity = int(cap) if cap is not None else None
    out: dict[str, Any] = {**plan, "hardware": ctx.label, "capacity_bytes": capacity}
    refusal = plan.get("refusal")
    if isinstance(refusal, Mapping):
        r = dict(refusal)
        if r.get("available_bytes") is None:
            r["available_bytes"] = capacity
        out["refusal"] = r
        out.update(fits=False, over_bytes=r.get("over_bytes"), step_time=None, verdict=refusal_verdict(r))
        return out
    work = plan.get("work") or {}
    stats = (snap.get("jit") or {}).get("memory_per_device") or {}
    memory = {key: stats[field] for field, key in _MEMORY_KEYS.items() if stats.get(field) is not None}
    collectives = snap.get("collectives") or []
    cost = {
        "flops": work.get("flops_xla"),
        "loop_corrected_flops": work.get("flops"),
        "matmul_traffic_bytes": work.get("matmul_traffic_bytes"),
        "bytes_accessed": work.get("bytes_accessed"),
        "loops": work.get("loops") or [],
        "unknown_trip_counts": work.get("unknown_trip_counts") or [],
    }
    line = roofline(cost, memory or None, collectives, ctx, _dominant_dtype(work), PLAN_ROOFLINE)
    out["roofline"] = line
    out["communication"] = {
        "collectives": len(collectives),
        "per_step": sum(int(c.get("repeat", 1)) for c in collectives),
        "bytes_per_step": sum(int(c.get("bytes") or 0) * int(c.get("repeat", 1)) for c in collectives),
        "seconds_per_step": line.get("communication_seconds"),
    }
    # the step-time band: the roofline at 100 % MFU, the schedule replayed at fitted efficiencies, nothing overlapped
    out["step_time"] = step_band(line, plan.get("schedule"), collectives, ctx.hardware, profile)
    hbm = line.get("hbm") or {}
    out["fits"] = hbm.get("fits")
    out["over_bytes"] = hbm.get("over_bytes")
    out["verdict"] = verdict(out, hbm, stats.get("peak_memory_in_bytes"))
    return out


def refusal_verdict(r: Mapping[str, Any]) -> str:
    """The verdict of a program XLA refused for memory, from its figures."""
    over = r.get("over_bytes")
    parts = [f"does not fit: XLA refused the program for memory — over by {fmt_bytes(int(over))}" if over
             else "does not fit: XLA refused the program for memory"]  # fmt: skip
    if r.get("required_bytes") and r.get("available_bytes"):
        parts.append(
            f"{r.get('what') or 'needed'} {fmt_bytes(int(r['required_bytes']))} > "
            f"{fmt_bytes(int(r['available_bytes']))} available per device"
        )
    return "; ".join(parts)


def verdict(plan: Mapping[str, Any], hbm: Mapping[str, Any], peak: int | None) -> str:
    """One line: fits / over by X; which term bounds the step and the band."""
    parts = [
        str(hbm.get("text") or (f"peak {fmt_bytes(peak)} per device" if peak is not None else "no memory figures"))
    ]
    st = plan.get("step_time") or {}
    bound = st.get("bound")
    if bound:
        low, mid, high = st.get("lower_bound_seconds"), st.get("expected_seconds"), st.get("upper_bound_seconds")
        terms = ", ".join(
            f"{k} {fmt_seconds(st.get(f'{k}_seconds'))}"
            for k in ("compute", "memory", "communication")
            if st.get(f"{k}_seconds") is not None
        )
        parts.append(
            f"{bound}-bound: step {fmt_seconds(mid)} expected, {fmt_seconds(low)} {LOWER_WORDS}, "
            f"{fmt_seconds(high)} with nothing overlapped ({terms})"
        )
    elif (plan.get("roofline") or {}).get("why") and str(plan["roofline"]["why"]) not in parts:
        parts.append(str(plan["roofline"]["why"]))  # said once: without hardware figures HBM says the same
    return "; ".join(parts)
