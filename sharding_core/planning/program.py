"""Plans of the user's own program: compiled for a device set through the one pipeline (:mod:`sharding_core.program`:
on compile-only devices nothing is allocated and nothing runs), read into its report, with the plan's own facts
beside it — the arguments per device by leaf and group, the largest temporaries, XLA's refusal with what to change.

:func:`plan_program` is what ``inspect_jit``, ``explain`` and ``shardscope plan`` share; :func:`explain_planned`
adds why's explanation and fixes, each fix a program of its own. :mod:`sharding_core.capturing` turns a
:class:`Planned` into the snapshot; its figures — HBM capacity and fit, roofline, step time, verdict — are the cost
model's, added when the snapshot is read (:func:`sharding_core.cost.annotate.plan_with_figures`).
"""

from __future__ import annotations

import dataclasses
import inspect
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from sharding_core.findings import waste
from sharding_core.program import memory as mem
from sharding_core.program.compile import Options, Program, compile_program
from sharding_core.program.report import Reading, Report, read_report
from sharding_core.program.timeline import memory_timeline
from sharding_core.why import Budget, Estimator
from sharding_core.why.program import Fixed, explain_program

DCN_NOTE = (
    "cross-slice (DCN) transfers of libtpu's multi-slice program: megascale host sends, one per transfer, "
    "with the collective they carry and this device's bytes; they name no devices and are not in the "
    "communication term"
)


@dataclasses.dataclass(frozen=True)
class Planned:
    """A program compiled and read: its ``report``, the plan's facts (``plan``: :func:`plan_facts`), the mesh its
    shardings name, and the compile itself (``program``; None for a candidate fix, whose executable is not kept)."""

    name: str
    fn: Any
    report: Report
    plan: dict[str, Any]
    mesh: Any | None
    program: Program | None = None
    collectives: list[dict[str, Any]] | None = None  # a fix's, as the why read them (with their lines)


def function_name(f: Any) -> str:
    return getattr(f, "__name__", None) or getattr(getattr(f, "__wrapped__", None), "__name__", None) or "jit"


def plan_program(f: Callable[..., Any], args: Sequence[Any], kwargs: Mapping[str, Any], *, detailed: bool) -> Planned:
    """Lowers and compiles ``f`` for these arguments and reads it. ``detailed``: also XLA's buffer assignment (the
    largest temporaries: one more pass over files XLA writes into a temporary directory, removed afterwards)."""
    program = compile_program(f, args, kwargs, Options(buffers=detailed, refuse_memory=True, values=True))
    signature = program.signature()
    out = program.executable.output_shardings if program.executable is not None else []
    mesh = program_mesh([*_leaves(signature.in_shardings), *_leaves(out)])
    report = read_report(program, reading_for(mesh))
    return planned(function_name(f), f, report, mesh, program)


def planned(name: str, fn: Any, report: Report, mesh: Any | None, program: Program | None = None) -> Planned:
    signature = report.signature
    names = argument_names(fn, len(signature.in_avals[0])) if signature is not None else None
    return Planned(name, fn, report, plan_facts(report, mesh_axes(mesh), names), mesh, program)


def argument_names(f: Callable[..., Any], count: int) -> list[str | None]:
    """The names of ``f``'s first ``count`` positional parameters (what ``inputs/args/N`` leaves were passed
    as), None past them or when the signature cannot be read (a builtin, ``*args``)."""

    target = getattr(f, "__wrapped__", f)  # jax.jit keeps the function it wraps here
    try:
        params = list(inspect.signature(target).parameters.values())
    except (TypeError, ValueError):
        return [None] * count
    positional = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return [positional[i] if i < len(positional) else None for i in range(count)]


def reading_for(mesh: Any | None) -> Reading:
    """The program's devices named by their own ids, its collectives' axes by the mesh its shardings name."""
    if mesh is None:
        return Reading(None, ())
    return Reading(mesh.device_ids.tolist(), tuple(str(a) for a in mesh.axis_names))


def mesh_axes(mesh: Any | None) -> dict[str, int]:
    if mesh is None:
        return {}
    return dict(zip((str(a) for a in mesh.axis_names), (int(s) for s in mesh.devices.shape), strict=True))


def program_mesh(shardings: list[Any]) -> Any:
    import jax

    for s in shardings:
        if isinstance(s, jax.sharding.NamedSharding) and isinstance(s.mesh, jax.sharding.Mesh):
            return s.mesh
    return None


def _leaves(tree: Any) -> list[Any]:
    import jax

    return list(jax.tree.leaves(tree))


def plan_facts(
    report: Report, mesh_axes: Mapping[str, int], names: Sequence[str | None] | None = None
) -> dict[str, Any]:
    """The plan's facts: the partitioner, the arguments by group, the largest temporaries, XLA's refusal (with
    what to change) or the work counted through loops, the timings, and a multi-slice program's DCN transfers. Its
    figures are the cost model's, added when the plan is read (:func:`sharding_core.cost.annotate.
    plan_with_figures`). ``names``: the function's positional parameters (arguments are grouped by them)."""
    signature = report.signature
    breakdown = (
        mem.argument_breakdown(signature.in_avals, signature.in_shardings, names) if signature is not None else {}
    )
    temporaries = report.temporaries
    out: dict[str, Any] = {
        "partitioner": report.partitioner,
        "arguments": dict(breakdown),
        "temporaries": dict(temporaries) if temporaries is not None else None,
        "refusal": None,
        **{k: float(v) for k, v in report.timings.items()},
    }
    if report.refusal is not None:
        r = dict(report.refusal)
        if temporaries is not None and not r.get("largest"):
            r["largest"] = list(temporaries.get("largest") or [])
        donated = signature.donated if signature is not None else 0
        r["advice"] = mem.advice(r, breakdown, mesh_axes, donated=donated, devices=report.target.get("devices"))
        out.update(refusal=r, work=None)
        return out
    out["work"] = dict(report.work) if report.work is not None else None
    # the compiled schedule (what overlaps what): the step model replays it (sharding_core.cost.step)
    out["schedule"] = dict(report.schedule) if report.schedule is not None else None
    if int(report.target.get("slices") or 1) > 1:
        # libtpu's multi-slice program sends what crosses slices over DCN as megascale host transfers,
        # which name no devices: listed apart, not in the collectives or the communication term.
        out["dcn_transfers"] = [{"op": s["op"], "rendezvous": s["name"], "bytes": s["sent_bytes"]} for s in report.dcn]
        out["dcn_note"] = DCN_NOTE
    return out


def timeline_of(report: Report, hlo: str | None, names: Sequence[str | None] | None = None) -> dict[str, Any] | None:
    """The program's ``memory_timeline`` (:mod:`sharding_core.program.timeline`) with the buffers at its peak named by
    argument leaf (the function's parameter ``names``) or by the op and source line that made them; None when the
    compile wrote no dumps."""
    signature = report.signature
    if report.timeline is None or signature is None:
        return None
    leaves = mem.flat_leaves(signature.in_avals, signature.in_shardings, names)
    platform = str(report.target.get("platform") or "")
    return memory_timeline(report.timeline, report.memory, leaves, hlo or "", platform)


def program_reading(
    program: Program,
    report: Report,
    collectives: Sequence[Mapping[str, Any]],
    axes: Mapping[str, int],
    names: Sequence[str | None] | None = None,
) -> dict[str, Any]:
    """What the contract has every plan, capture and kernel run carry beside its report: ``values`` (each value's
    sharding, when the compile dumped the partitioner's input), ``findings`` (:mod:`sharding_core.findings.waste`)
    and ``memory_timeline`` (when it dumped the buffer assignment)."""
    out: dict[str, Any] = {}
    if report.values is not None:
        out["values"] = list(report.values)
    if report.refusal is None and program.hlo and report.signature is not None:
        inputs = waste.Inputs(
            hlo=program.hlo,
            collectives=collectives,
            values=report.values,
            axes=axes,
            leaves=waste.input_leaves(report.signature),
            entering=program.partitioner_input,
        )
        out["findings"] = waste.waste_findings(inputs)
    timeline = timeline_of(report, program.hlo, names)
    if timeline is not None:
        out["memory_timeline"] = timeline
    return out


@dataclasses.dataclass(frozen=True)
class Explained:
    """What :func:`explain_planned` did: the search's summary, the fixes' programs, and its timings."""

    summary: dict[str, Any]
    fixes: list[Planned]
    compile_seconds: float
    seconds: float


def explain_planned(
    planned: Planned, collectives: Sequence[dict[str, Any]], budget: Budget, estimate: Estimator | None = None
) -> Explained:
    """Gives every collective its why (:mod:`sharding_core.why`), read from a second compile that writes Shardy's
    origins — that option changes what XLA:TPU compiles (its memory figures, measured), so a plan's figures are
    always the first, plain compile's — with fixes compiled within ``budget`` and ranked by ``estimate``'s seconds
    (the cost model's, where the set has hardware figures)."""
    assert planned.program is not None
    t0 = time.perf_counter()
    dump = planned.program.again(Options(shardy=True)).shardy
    compiled = time.perf_counter() - t0
    assert dump is not None
    found = explain_program(
        collectives,
        planned.program,
        dump,
        jitted=planned.program.fn,
        reading=reading_for(planned.mesh),
        budget=budget,
        peak=planned.report.peak,
        estimate=estimate,
        compile_seconds=compiled,  # the dump's compile: what each candidate's is expected to take at first
    )
    fixes: list[Planned] = []
    for fixed in found["results"]:
        assert isinstance(fixed, Fixed)
        p = planned_fix(planned, fixed)
        fixes.append(p)
    return Explained(found["summary"], fixes, compiled, time.perf_counter() - t0)


def planned_fix(base: Planned, fixed: Fixed) -> Planned:
    """A fix's program as a plan of its own (the snapshot "try this fix" opens)."""
    return dataclasses.replace(planned(base.name, base.fn, fixed.report, base.mesh), collectives=fixed.collectives)
