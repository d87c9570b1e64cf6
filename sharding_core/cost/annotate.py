"""Estimates added when a result is read: the HLO reader gives facts (collectives, loops, DCN steps, flops),
and this module puts figures on them once, from the one hardware table, where the result is read — the
server process for a kernel run or a reshard (never the worker), the caller of ``inspect_jit``, the server
again for a stored snapshot. Nothing stored holds an estimate: a snapshot's or a cached run's figures are
always today's table's.
"""

from __future__ import annotations

import types
from collections.abc import Mapping, Sequence
from typing import Any

from sharding_core.cost.collectives import communication, estimate_collective, estimate_dcn_step, none
from sharding_core.cost.context import NO_CPU_FIGURES, CostContext, context_for_devices, no_figures
from sharding_core.cost.roofline import roofline

CPU_ROOFLINE = "the CPU-compiled program (XLA's CPU cost and memory analyses) on the device set's hardware"
TPU_ROOFLINE = "the TPU compile (libtpu, compile-only: XLA's TPU cost and memory analyses)"


def with_estimates(collectives: Sequence[Mapping[str, Any]], ctx: CostContext | None) -> list[dict[str, Any]]:
    """The collectives, each with its ``estimate`` on ``ctx`` (any stored one replaced)."""
    return [{**c, "estimate": estimate_collective(c, ctx)} for c in collectives]


def dcn_with_estimates(steps: Sequence[Mapping[str, Any]], ctx: CostContext | None) -> list[dict[str, Any]]:
    return [{**s, "estimate": estimate_dcn_step(s, ctx)} for s in steps]


def estimate_run(result: Mapping[str, Any], ctx: CostContext, dtype: str) -> dict[str, Any]:
    """A kernel run's (or a reshard's) result with its estimates: every collective's, the TPU program's and its
    DCN steps', and one roofline — the TPU compile's when there is one (the program a TPU set runs), else the
    compiled program's — with ``communication`` the totals of that same program."""
    out = dict(result)
    out["collectives"] = with_estimates(result.get("collectives") or [], ctx)
    tpu = result.get("tpu")
    ran = f" ({result['executed_on']})" if result.get("executed_on") else ""
    headline: tuple[list[dict[str, Any]], Any, Any, str, str] = (
        out["collectives"], result.get("cost"), result.get("memory"), CPU_ROOFLINE, f"the compiled program{ran}"
    )  # fmt: skip
    if tpu is not None and tpu.get("collectives") is not None:
        tpu = dict(tpu)
        tpu["collectives"] = with_estimates(tpu["collectives"], ctx)
        tpu["dcn"] = dcn_with_estimates(tpu.get("dcn") or [], ctx) if tpu.get("dcn") is not None else None
        steps = [*tpu["collectives"], *(tpu["dcn"] or [])]
        headline = (
            steps,
            tpu.get("cost"),
            tpu.get("memory"),
            TPU_ROOFLINE,
            f"TPU compile-only ({tpu.get('topology')})",
        )
        tpu["roofline"] = None  # one roofline per result: the headline program's, in ``roofline``
        out["tpu"] = tpu
    steps, cost, memory, source, program = headline
    out["roofline"] = roofline(cost, memory, steps, ctx, dtype, source)
    out["communication"] = communication(steps, program)
    return out


# ------------------------------------------------------------------------------------------- snapshots


def snapshot_context(snap: Mapping[str, Any]) -> CostContext:
    """The cost context of a snapshot's own devices table (platform, device kind, coordinates, slices)."""
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
    """A stored snapshot with its ``inspect_jit`` collectives estimated on its own devices, today (an estimate
    it was stored with is replaced: snapshots from before estimates existed, or from older figures, open)."""
    out = dict(snap)
    collectives = snap.get("collectives")
    if collectives:
        try:
            ctx = snapshot_context(snap)
        except (TypeError, ValueError, KeyError, IndexError) as e:  # a devices table the context cannot read
            out["collectives"] = [
                {**c, "estimate": none(f"the snapshot's devices cannot be placed: {e}")} for c in collectives
            ]
            return out
        out["collectives"] = with_estimates(collectives, ctx)
    if snap.get("fixes"):
        # An explained snapshot's fixes are programs of their own: estimated alike, and each fix's seconds
        # before and after follow today's figures (sharding_core.why.fixes).
        from sharding_core.why import with_fix_seconds

        out["fixes"] = [snapshot_with_estimates(f) for f in snap["fixes"]]
        out["collectives"] = with_fix_seconds(out.get("collectives") or [], out["fixes"])
    return out


def facts_only(snap: Mapping[str, Any]) -> dict[str, Any]:
    """A snapshot as stored: its collectives without estimates (figures are added when it is read)."""
    out = dict(snap)
    if snap.get("collectives"):
        out["collectives"] = [{k: v for k, v in c.items() if k != "estimate"} for c in snap["collectives"]]
    if snap.get("fixes"):
        out["fixes"] = [facts_only(f) for f in snap["fixes"]]
    return out
