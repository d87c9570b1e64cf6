"""Figures added when a result is read: a compiled program's report (:mod:`sharding_core.program.report`) holds
facts — XLA's memory figures, the work counted through loops, the collectives and DCN steps — and
:func:`program_figures` turns one report into figures on a cost context, once, from the one hardware table: each
collective's and DCN step's estimate, the roofline and the step-time band. Where a result is read — the server
for a kernel run, a reshard or a stored snapshot (never the worker), the caller of ``inspect_jit`` — its
containers get them: :func:`estimate_run` for kernel results (the headline program's), :func:`snapshot_with_estimates`
for snapshots (a plan's HBM fit and verdict with :func:`plan_with_figures`). Nothing stored holds an estimate: a
snapshot's or a run's figures are always today's table's, and a result stored before the report existed is read
into today's shape first (:mod:`sharding_core.program.upgrade`).
"""

from __future__ import annotations

import types
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from sharding_core.cost.calibrate import ProfileError, check_matches, estimate_with_profile, load_profile
from sharding_core.cost.collectives import communication, estimate_dcn_step, estimate_one, none
from sharding_core.cost.context import NO_CPU_FIGURES, CostContext, context_for, context_for_devices, no_figures
from sharding_core.cost.roofline import roofline
from sharding_core.cost.step import LOWER_WORDS, step_band
from sharding_core.devices import devices_of_key, parse_devices
from sharding_core.errors import ShardingError
from sharding_core.hardware import hbm_per_device
from sharding_core.program.memory import over_capacity
from sharding_core.program.upgrade import upgrade_kernel_result, upgrade_snapshot
from sharding_core.units import fmt_bytes, fmt_seconds

CPU_ROOFLINE = "the CPU-compiled program (XLA's CPU cost and memory analyses) on the device set's hardware"
TPU_ROOFLINE = "the TPU compile (libtpu, compile-only: XLA's TPU cost and memory analyses)"
GPU_ROOFLINE = (
    "the GPU compile (XLA's GPU compiler with the GPU's target config, compile-only: its memory analysis; flops "
    "and bytes counted from its HLO)"
)


def with_estimates(
    collectives: Sequence[Mapping[str, Any]], ctx: CostContext | None, profile: Mapping[str, Any] | None = None
) -> list[dict[str, Any]]:
    """The collectives, each with its ``estimate`` on ``ctx`` (any stored one replaced); with a calibrated
    ``profile`` (:mod:`sharding_core.cost.calibrate`) its measurements, where they apply."""
    if profile is not None:
        try:
            return [{**c, "estimate": estimate_with_profile(c, ctx, profile)} for c in collectives]
        except ProfileError as e:  # a stored profile that does not apply: said on every estimate, none invented
            return [{**c, "estimate": none(e.message)} for c in collectives]
    return [{**c, "estimate": estimate_one(c, ctx)} for c in collectives]


def dcn_with_estimates(steps: Sequence[Mapping[str, Any]], ctx: CostContext | None) -> list[dict[str, Any]]:
    return [{**s, "estimate": estimate_dcn_step(s, ctx)} for s in steps]


def program_figures(
    program: Mapping[str, Any],
    collectives: Sequence[Mapping[str, Any]],
    ctx: CostContext,
    *,
    source: str,
    dtype: str | None = None,
    dcn: Sequence[Mapping[str, Any]] | None = None,
    schedule: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """One program report's figures on ``ctx``: its ``collectives`` (the container's: the report's facts with their
    ``line`` and ``why``) and ``dcn`` steps each with its ``estimate``, the ``roofline`` (the work counted through
    loops, XLA's memory figures and the communication term: the collectives and the DCN steps given; ``dtype``: the
    element type whose peak FLOP/s the compute term reads, by default the one most matmul flops are in), the
    ``communication`` totals and the ``step_time`` band (with the compiled ``schedule``: the step model's)."""
    estimated = with_estimates(collectives, ctx)
    steps = dcn_with_estimates(dcn, ctx) if dcn is not None else None
    figures = figures_of(program, [*estimated, *(steps or [])], ctx, source=source, dtype=dtype, schedule=schedule)
    return {"collectives": estimated, "dcn": steps, **figures}


def figures_of(
    program: Mapping[str, Any],
    estimated: Sequence[Mapping[str, Any]],
    ctx: CostContext,
    *,
    source: str,
    dtype: str | None = None,
    schedule: Mapping[str, Any] | None = None,
    profile: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The ``roofline``, ``communication`` totals and ``step_time`` band of a program report whose communication
    steps (``estimated``) already carry their estimates: the band's lower bound is the roofline (at 100 % MFU), its
    expected time the step model's replay of the compiled ``schedule`` (:func:`sharding_core.cost.step.step_band`;
    ``profile``: a calibrated profile whose matmul efficiency replaces the fitted one), else the roofline's."""
    work = program.get("work") or {}
    line = roofline(work, program.get("memory"), estimated, ctx, dtype or _dominant_dtype(work), source)
    band = step_band(line, schedule, estimated, ctx.hardware, profile)
    return {"roofline": line, "communication": communication(estimated), "step_time": band}


def result_with_figures(result: Mapping[str, Any]) -> dict[str, Any]:
    """A kernel run's (or a reshard's) result as stored — facts, and where its figures are for (``estimate_on``:
    the device set and the dtype the compute term reads) — with today's figures (:func:`estimate_run`)."""
    facts = upgrade_kernel_result(result)
    on = facts.get("estimate_on") or {}
    try:
        ctx = context_for(devices_of_key(str(on.get("devices") or facts.get("devices_key"))))
    except (ShardingError, TypeError, ValueError) as e:  # a set this server cannot place (another version's)
        ctx = no_figures(str(facts.get("devices_key") or "run"), str(facts.get("platform") or ""), str(e))
    return estimate_run(facts, ctx, str(on.get("dtype") or "float32"))


def estimate_run(result: Mapping[str, Any], ctx: CostContext, dtype: str) -> dict[str, Any]:
    """A kernel run's (or a reshard's) result with its estimates: every collective's, the hardware program's and
    its DCN steps', and one roofline — the headline program's — with ``communication`` the totals of that same
    program and ``figures_from`` saying which program it is: the TPU compile (libtpu) on a ``tpu:`` set, the GPU
    compile (XLA's GPU compiler) on a ``gpu:`` set where the gpu extra is installed, else the CPU-compiled
    program (on a ``gpu:`` set without the extra: the CPU stand-in, and it says so)."""
    out = dict(result)
    ran = f" ({result['executed_on']})" if result.get("executed_on") else ""
    cpu = program_figures(result.get("program") or {}, result.get("collectives") or [], ctx, source=CPU_ROOFLINE,
                          dtype=dtype)  # fmt: skip
    out["collectives"] = cpu["collectives"]
    headline, program = cpu, f"the compiled program{ran}"
    figures_from = {"program": "cpu", "description": f"the CPU-compiled program{ran}"}
    for kind, source, name in (("tpu", TPU_ROOFLINE, "TPU"), ("gpu", GPU_ROOFLINE, "GPU")):
        section = result.get(kind)
        if section is None or section.get("collectives") is None:
            continue
        found = program_figures(section.get("program") or {}, section["collectives"], ctx, source=source, dtype=dtype,
                                dcn=section.get("dcn"))  # fmt: skip
        section = {**section, "collectives": found["collectives"]}
        if section.get("dcn") is not None:
            section["dcn"] = found["dcn"]
        section["roofline"] = None  # one roofline per result: the headline program's, in ``roofline``
        out[kind] = section
        headline, program = found, f"{name} compile-only ({section.get('topology')})"
        figures_from = {"program": kind, "description": f"the {name} compile: {section.get('source') or program}"}
        break
    gpu = result.get("gpu")
    if figures_from["program"] == "cpu" and gpu is not None:
        why = gpu.get("skipped") or ((gpu.get("error") or {}).get("message"))
        figures_from["description"] = f"the CPU stand-in: the CPU-compiled program{ran}, not a GPU program ({why})"
    out["roofline"] = headline["roofline"]
    out["communication"] = {**headline["communication"], "program": program}
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
    out = upgrade_snapshot(snap)
    collectives = out.get("collectives")
    plan = out.get("plan")
    if not collectives and not isinstance(plan, Mapping):
        return out
    try:
        ctx: CostContext | None = snapshot_context(snap)
        why = None
    except (TypeError, ValueError, KeyError, IndexError) as e:  # a devices table the context cannot read
        ctx, why = None, f"the snapshot's devices cannot be placed: {e}"
    if collectives:
        if ctx is not None:
            # a calibrated profile the snapshot was made with (``shardscope plan --profile``) stays its figures' source
            out["collectives"] = with_estimates(collectives, ctx, snap.get("cost_profile"))
        else:
            out["collectives"] = [{**c, "estimate": none(str(why))} for c in collectives]
    if out.get("fixes"):
        # An explained snapshot's fixes are programs of their own: estimated alike, and each fix's seconds
        # before and after follow today's figures (sharding_core.why.fixes).
        out["fixes"] = [snapshot_with_estimates(f) for f in out["fixes"]]
        out["collectives"] = with_fix_seconds(out.get("collectives") or [], out["fixes"])
    if isinstance(plan, Mapping):
        ctx = ctx if ctx is not None else no_figures("snapshot", "", str(why))
        out["plan"] = plan_with_figures(out, ctx, snap.get("cost_profile"))
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
                "verdict", "over_capacity")  # fmt: skip
"""What :func:`plan_with_figures` adds to a plan's facts (and :func:`facts_only` takes away)."""

PLAN_ROOFLINE = (
    "the compiled program with its loops counted (flops: XLA's with every loop body times its trip count; HBM "
    "traffic: the cost model's rule) on the device set's hardware"
)
_HLO_DTYPES = {"bf16": "bfloat16", "f32": "float32", "f16": "float16", "s8": "int8", "u8": "int8", "f64": "float32"}


def _dominant_dtype(work: Mapping[str, Any]) -> str:
    """The element type most matmul flops are in (the peak FLOP/s the compute term reads), float32 without any."""
    by_dtype = work.get("matmul_flops_by_dtype") or {}
    if not by_dtype:
        return "float32"
    return _HLO_DTYPES.get(max(by_dtype, key=lambda k: by_dtype[k]), "float32")


def plan_with_figures(
    snap: Mapping[str, Any], ctx: CostContext, profile: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """A plan's facts (``plan``: XLA's refusal with what to change, the compiled schedule; ``program``: the report,
    with the work counted through loops and XLA's memory figures; the estimated ``collectives``) with today's figures
    on ``ctx``: HBM capacity and fit, the roofline (:func:`figures_of`: the cost model's one rule for each term), the
    communication totals, the step-time band (the step model's replay of the schedule; ``profile``: a calibrated
    profile) and the verdict line."""
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
    program = snap.get("program") or {}
    collectives = snap.get("collectives") or []
    figures = figures_of(
        program, collectives, ctx, source=PLAN_ROOFLINE, schedule=plan.get("schedule"), profile=profile
    )
    line = figures["roofline"]
    out["roofline"] = line
    out["communication"] = {
        "collectives": len(collectives),
        "per_step": sum(int(c.get("repeat", 1)) for c in collectives),
        "bytes_per_step": sum(int(c.get("bytes") or 0) * int(c.get("repeat", 1)) for c in collectives),
        "seconds_per_step": line.get("communication_seconds"),
    }
    out["step_time"] = figures["step_time"]
    hbm = line.get("hbm") or {}
    out["fits"] = hbm.get("fits")
    out["over_bytes"] = hbm.get("over_bytes")
    stats = program.get("memory") or {}
    out["verdict"] = verdict(out, hbm, stats.get("peak_memory_in_bytes"))
    if out["fits"] is False and stats.get("peak_memory_in_bytes") is not None and capacity:
        # XLA's GPU compiler compiles a program past the chip's HBM without a word (XLA:TPU refuses it): it reads
        # as a refusal (what is over, the largest allocations, what to change) with no step time: it cannot run

        r = over_capacity(stats, capacity, plan, _mesh_axes(snap), donated=int((snap.get("jit") or {}).get(
            "donated_inputs") or 0), devices=(snap.get("target") or {}).get("devices"))  # fmt: skip
        out.update(over_capacity=r, step_time=None, verdict=capacity_verdict(r))
    return out


def with_fix_seconds(
    collectives: Sequence[Mapping[str, Any]], fixes: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """The collectives with each fix's ``seconds_before`` / ``seconds_after`` taken from the estimates they and
    the fix's compiled program (``fixes[result]``) carry now: figures follow the hardware table, never the
    day the snapshot was made."""
    before = _seconds(collectives)
    out: list[dict[str, Any]] = []
    for c in collectives:
        why = c.get("why")
        if not why or not why.get("fixes"):
            out.append(dict(c))
            continue
        refreshed = []
        for fix in why["fixes"]:
            r = fix.get("result")
            after = _seconds(fixes[r].get("collectives") or []) if r is not None and r < len(fixes) else None
            refreshed.append({**fix, "seconds_before": before, "seconds_after": after})
        out.append({**c, "why": {**why, "fixes": refreshed}})
    return out


def _seconds(collectives: Sequence[Mapping[str, Any]]) -> float | None:
    """A program's collectives' estimated seconds per step, None unless every one has an estimate (why's totals)."""
    totals = communication(collectives)
    return float(totals["seconds"]) if totals["without_estimate"] == 0 and totals["seconds"] is not None else None


def _mesh_axes(snap: Mapping[str, Any]) -> dict[str, int]:
    mesh = (snap.get("meshes") or [{}])[0]
    return {str(a): int(n) for a, n in zip(mesh.get("axis_names") or [], mesh.get("shape") or [], strict=False)}


def capacity_verdict(r: Mapping[str, Any]) -> str:
    """The verdict of a compiled program whose XLA peak is past the chip's HBM (:func:`over_capacity`)."""
    return (
        f"does not fit: XLA's peak {fmt_bytes(int(r['required_bytes']))} is over the "
        f"{fmt_bytes(int(r['available_bytes']))} of HBM per device by {fmt_bytes(int(r['over_bytes']))}; XLA "
        "compiled it, but it cannot run (no step time)"
    )


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


def apply_profile(snapshot: Mapping[str, Any], profile: str | Path | Mapping[str, Any]) -> dict[str, Any]:
    """A snapshot (``inspect_jit``'s, ``plan``'s) with its figures from a calibrated ``profile``: every collective's
    estimate, the plan's roofline and step time. The profile is kept in the snapshot (``cost_profile``), so a
    reader of the stored snapshot gets the same figures; one for other hardware is refused."""
    loaded = load_profile(profile)
    check_matches(loaded, snapshot_context(snapshot))
    return snapshot_with_estimates({**snapshot, "cost_profile": loaded})
