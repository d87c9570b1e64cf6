"""Compile the user's own program for a device set and read everything a plan shows from XLA.

:func:`inspect_program` is what :func:`sharding_core.inspect_jit` and :func:`plan` share: lower, compile
(on compile-only devices nothing is allocated and nothing runs), and return the snapshot with

* ``target`` — what it was compiled for (platform, device kind, hosts, slices, topology, where the devices
  come from: libtpu's compile-only topology, XLA's GPU target config, or this process's devices);
* ``jit.memory_per_device`` — every field of ``Compiled.memory_analysis()`` exactly, peak included;
* ``collectives`` — every collective of the optimized HLO with its mesh axes, bytes, estimate and
  ``repeat`` (how many times it runs per step: the trip counts of the loops around it);
* ``plan`` — the loop-corrected flops and bytes, the step-time band, HBM against capacity with the
  arguments by leaf and group and the largest temporaries (with ``plan``), the partitioner that ran, and a
  verdict line; or, when XLA refuses the program for memory, the refusal as fields.
"""

from __future__ import annotations

import contextlib
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from sharding_core.compat import cost_analysis, input_shardings
from sharding_core.hlo.program import ProgramFacts
from sharding_core.hlo.schedule import schedule_of
from sharding_core.planning import memory as mem
from sharding_core.planning.targets import target_of
from sharding_core.why.fixes import Budget

DCN_NOTE = (
    "cross-slice (DCN) transfers of libtpu's multi-slice program: megascale host sends, one per transfer, "
    "with the collective they carry and this device's bytes; they name no devices and are not in the "
    "communication term"
)
WORK_NOTE = (
    "flops and bytes per device and step with every loop body counted as often as it runs: XLA's cost_analysis "
    "(which counts each body once: flops_xla, bytes_accessed_xla) plus each computation's further runs as the loop "
    "reader counts them (flops_loops_once: the reader's own count with each body once); without XLA's figures, the "
    "reader's count"
)


def partitioner() -> str:
    """Which SPMD partitioner JAX runs: Shardy (``jax_use_shardy_partitioner``) or GSPMD."""
    import jax

    return "shardy" if bool(getattr(jax.config, "jax_use_shardy_partitioner", False)) else "gspmd"


@contextlib.contextmanager
def _dump_dir(enabled: bool) -> Iterator[Path | None]:
    if not enabled:
        yield None
        return
    with tempfile.TemporaryDirectory(prefix="shardscope-plan-") as d:
        yield Path(d)


def _program_devices(args: Any, kwargs: Any) -> list[Any]:
    """The devices the abstract (or concrete) arguments are sharded over, in first-seen order."""
    import jax

    seen: dict[int, Any] = {}
    for leaf in jax.tree.leaves((args, kwargs)):
        sharding = getattr(leaf, "sharding", None)
        mesh = getattr(sharding, "mesh", None)
        devs = getattr(mesh, "devices", None)
        flat = list(devs.flat) if devs is not None else list(getattr(sharding, "_device_assignment", None) or [])
        for d in flat:
            seen.setdefault(id(d), d)
        if seen:
            break
    return list(seen.values())


def inspect_program(
    f: Callable[..., Any],
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
    *,
    detailed: bool,
    why: Budget | None = None,
    lines_only: bool = False,
) -> dict[str, Any]:
    """Lowers and compiles ``f`` for these arguments and returns the snapshot (see the module docstring).

    ``detailed``: also dump XLA's buffer assignment (the largest temporaries) — one more pass over files XLA
    writes into a temporary directory, removed afterwards. Every collective gets its ``line`` and a ``why``
    with what this compile's HLO says (its op, its source line and call stack, the jaxpr equation there);
    ``why`` (a budget): the whole why (:mod:`sharding_core.why`), read from a second compile that writes
    Shardy's origins — that option changes what XLA:TPU compiles (its memory figures, measured), so the
    snapshot's figures are always the first, plain compile's — with fixes compiled within the budget
    (``NO_FIXES``: none). ``lines_only``: lines and nothing else (a fix's own snapshot).
    """
    import jax

    from sharding_core.capturing import argument_names, capture
    from sharding_core.cost.annotate import snapshot_with_estimates
    from sharding_core.hlo.collectives import device_assignment, read_collectives
    from sharding_core.hlo.program import program_facts
    from sharding_core.hlo.text import HloParseError, megascale_transfers

    jitted = f if hasattr(f, "lower") else jax.jit(f)
    name = getattr(f, "__name__", None) or getattr(getattr(f, "__wrapped__", None), "__name__", None) or "jit"
    t0 = time.perf_counter()
    lowered = jitted.lower(*args, **kwargs)
    t1 = time.perf_counter()
    refused: dict[str, Any] | None = None
    compiled = None
    report: dict[str, Any] | None = None
    with _dump_dir(detailed) as dump:
        options = {"xla_dump_to": str(dump)} if dump is not None else None
        try:
            compiled = lowered.compile(compiler_options=options) if options else lowered.compile()
        except Exception as e:
            if not mem.is_memory_refusal(e):
                raise
            refused = mem.refusal(e)
        t2 = time.perf_counter()
        hlo = compiled.as_text() or "" if compiled is not None else None
        if dump is not None:
            report = mem.buffer_report(dump, hlo)
    devices = device_assignment(compiled) if compiled is not None else _program_devices(args, kwargs)
    target = target_of(devices[0]) if devices else None
    in_avals = lowered.in_avals
    if compiled is not None:
        in_shardings = input_shardings(compiled)
    else:
        in_shardings = jax.tree.map(lambda a: getattr(a, "sharding", None), (tuple(args), dict(kwargs)))

    def planned(aval: Any, sharding: Any) -> Any:
        return jax.ShapeDtypeStruct(aval.shape, aval.dtype, sharding=sharding)

    inputs = jax.tree.map(planned, in_avals, in_shardings)
    tree: dict[str, Any] = {"inputs": {"args": list(inputs[0]), "kwargs": inputs[1]}}
    if compiled is not None:
        tree["outputs"] = compiled.out_info
    snap = capture(tree, f"jit({name})")
    mesh = _program_mesh(
        [*jax.tree.leaves(in_shardings), *jax.tree.leaves(compiled.output_shardings if compiled else [])]
    )
    id_grid = mesh.device_ids.tolist() if mesh is not None else None
    axis_names = [str(a) for a in mesh.axis_names] if mesh is not None else []
    if target is not None:
        snap["target"] = target.describe()  # also for "local" targets: the program's own devices
        if target.dropped_fields:
            snap["target"]["dropped_fields"] = list(target.dropped_fields)
    facts = None
    unread = None
    if hlo:
        try:
            facts = program_facts(hlo)
            facts.work  # noqa: B018 - read now: an HLO spelling the reader does not know is said here
        except (HloParseError, ValueError, KeyError, IndexError) as e:
            facts = None
            unread = f"the loop reader could not read this HLO ({str(e)[:200]}): no loop-corrected figures"
    if compiled is not None and hlo is not None:
        slices = int(snap.get("target", {}).get("slices") or 1) if target is not None else 1
        ids = [int(d.id) for d in devices]
        if slices > 1:
            # libtpu compiles one slice's program; partition p of slice s is the p-th device of slice s.
            assignments = [[i for d, i in zip(devices, ids, strict=True) if _slice(d) == s] for s in range(slices)]
        else:
            assignments = [ids]
        # facts only: the estimates are added when the snapshot is read (below, and by every reader after)
        snap["collectives"] = read_collectives(hlo, assignments, id_grid, axis_names, facts)
        from sharding_core.why import lines

        sources = lines(snap["collectives"], hlo)
        if why is None and not lines_only:
            from sharding_core.why.program import light_whys

            light_whys(snap["collectives"], sources, partitioner())
    breakdown = mem.argument_breakdown(in_avals, in_shardings)
    stats = mem.memory_stats(compiled) if compiled is not None else None
    donated = [bool(getattr(a, "donated", False)) for a in jax.tree.leaves(lowered.args_info)]
    snap["jit"] = {
        "function": name,
        "memory_per_device": stats,
        "donated_inputs": sum(donated),
        "arguments": argument_names(f, len(args)),
        **(facts.json() if facts is not None else {}),  # the loops XLA annotated, with their trip counts
    }
    snap["plan"] = plan_facts(
        compiled=compiled,
        facts=facts,
        breakdown=breakdown,
        temporaries=report,
        refused=refused,
        mesh_axes=dict(zip(axis_names, (int(s) for s in mesh.devices.shape), strict=True)) if mesh is not None else {},
        timing={"lower_seconds": t1 - t0, "compile_seconds": t2 - t1},
    )
    if unread is not None and snap["plan"].get("work") is not None:
        snap["plan"]["work"]["note"] = unread
    work = snap["plan"].get("work")
    if work is not None and facts is not None:  # inspect_jit's loop facts, where issue 19 put them
        snap["jit"].update(
            flops=work["flops_xla"],
            loop_corrected_flops=work["flops"],
            loops=work["loops"],
            unknown_trip_counts=work["unknown_trip_counts"],
        )
    if hlo and int((snap.get("target") or {}).get("slices") or 1) > 1:
        # libtpu's multi-slice program sends what crosses slices over DCN as megascale host transfers,
        # which name no devices: listed apart, not in the collectives or the communication term.
        snap["plan"]["dcn_transfers"] = megascale_transfers(hlo)
        snap["plan"]["dcn_note"] = DCN_NOTE
    # the figures (estimates, roofline, step time, verdict) are the cost model's, added as any reader adds them
    snap = snapshot_with_estimates(snap)
    if why is not None and compiled is not None and snap.get("collectives"):
        # after the figures, so the search ranks fixes by estimated seconds where the set has hardware figures
        from sharding_core.why.dump import compile_with_dump
        from sharding_core.why.program import explain_snapshot

        t3 = time.perf_counter()
        _, shardy = compile_with_dump(lowered)
        snap["plan"]["why_compile_seconds"] = time.perf_counter() - t3
        explain_snapshot(
            snap,
            jitted=jitted,
            args=args,
            kwargs=kwargs,
            lowered=lowered,
            compiled=compiled,
            dump=shardy,
            tree=tree,
            in_avals=in_avals,
            in_shardings=in_shardings,
            budget=why,
            inspect=lambda f2, a2, k2: inspect_program(f2, a2, k2, detailed=False, lines_only=True),
        )
        snap["plan"]["why_seconds"] = time.perf_counter() - t3
        snap = snapshot_with_estimates(snap)  # the fixes' figures, and each fix's seconds before and after
    return snap


def _slice(device: Any) -> int:
    return int(getattr(device, "slice_index", 0) or 0)


def _program_mesh(shardings: list[Any]) -> Any:
    import jax

    for s in shardings:
        if isinstance(s, jax.sharding.NamedSharding) and isinstance(s.mesh, jax.sharding.Mesh):
            return s.mesh
    return None


def _xla_cost(compiled: Any) -> dict[str, Any]:
    try:
        return dict(cost_analysis(compiled))
    except Exception:  # noqa: BLE001 - some backends answer with an error instead of nothing
        return {}


def work_facts(compiled: Any, facts: ProgramFacts | None) -> dict[str, Any]:
    """The program's work per device and step: XLA's ``cost_analysis`` (each loop body once) corrected by the loop
    reader (:meth:`sharding_core.hlo.program.ProgramFacts.corrected`), with the reader's own counts, the matmul
    traffic and the loops."""
    xla = _xla_cost(compiled)
    flops_xla, bytes_xla = xla.get("flops"), xla.get("bytes accessed")
    out: dict[str, Any] = {
        "flops": None,
        "transcendentals": None,
        "bytes_accessed": None,
        "flops_loops_once": None,
        "bytes_accessed_loops_once": None,
        "flops_xla": float(flops_xla) if flops_xla is not None else None,
        "bytes_accessed_xla": float(bytes_xla) if bytes_xla is not None else None,
        "matmul_flops_by_dtype": {},
        "matmul_traffic_bytes": None,
        "loops": [],
        "unknown_trip_counts": [],
        "note": WORK_NOTE,
    }
    if facts is None:
        return out
    w = facts.work
    loops = facts.json()
    out.update(
        flops=facts.corrected(out["flops_xla"]),
        transcendentals=facts.corrected(xla.get("transcendentals"), "transcendentals"),
        bytes_accessed=facts.corrected(out["bytes_accessed_xla"], "bytes_accessed"),
        flops_loops_once=w.flops_once,
        bytes_accessed_loops_once=w.bytes_once,
        matmul_flops_by_dtype=dict(w.matmul_flops),
        matmul_traffic_bytes=w.matmul_traffic,
        loops=loops["loops"],
        unknown_trip_counts=loops["unknown_trip_counts"],
    )
    return out


def plan_facts(
    *,
    compiled: Any,
    facts: ProgramFacts | None,
    breakdown: Mapping[str, Any],
    temporaries: Mapping[str, Any] | None,
    refused: Mapping[str, Any] | None,
    mesh_axes: Mapping[str, int],
    timing: Mapping[str, float],
) -> dict[str, Any]:
    """The plan's facts: the partitioner, the arguments by group, the largest temporaries, XLA's refusal (with
    what to change) or the work counted through loops. Its figures — HBM capacity and fit, roofline, step time,
    verdict — are the cost model's, added when the plan is read (:func:`sharding_core.cost.annotate.
    plan_with_figures`)."""
    out: dict[str, Any] = {
        "partitioner": partitioner(),
        "arguments": dict(breakdown),
        "temporaries": dict(temporaries) if temporaries is not None else None,
        "refusal": None,
        **{k: float(v) for k, v in timing.items()},
    }
    if refused is not None:
        r = dict(refused)
        if temporaries is not None and not r.get("largest"):
            r["largest"] = list(temporaries.get("largest") or [])
        r["advice"] = mem.advice(r, breakdown, mesh_axes)
        out.update(refusal=r, work=None)
        return out
    out["work"] = work_facts(compiled, facts)
    # the compiled schedule (what overlaps what): the expected step time replays it (sharding_core.cost.step)
    out["schedule"] = schedule_of(facts) if facts is not None else None
    return out


def plan(f: Callable[..., Any], *args: Any, **kwargs: Any) -> dict[str, Any]:
    """``inspect_jit`` with the details a plan shows: XLA's buffer assignment read for the largest
    temporaries (with the ops and source lines that make them). Returns the snapshot; ``["plan"]["verdict"]``
    is the one-line answer."""
    return inspect_program(f, args, kwargs, detailed=True)
