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
from sharding_core.cost.context import CostContext, context_for, context_for_devices, no_figures
from sharding_core.cost.roofline import roofline
from sharding_core.hardware import hbm_per_device
from sharding_core.kernels.memory import fmt_bytes
from sharding_core.planning import loops
from sharding_core.planning import memory as mem
from sharding_core.planning.targets import Target, target_of
from sharding_core.units import fmt_seconds
from sharding_core.why.fixes import Budget

PLAN_ROOFLINE = (
    "the compiled program with its loops counted (flops and bytes from the optimized HLO, every loop body "
    "times its trip count) on the device set's hardware"
)
DCN_NOTE = (
    "cross-slice (DCN) transfers of libtpu's multi-slice program: megascale host sends, one per transfer, "
    "with the collective they carry and this device's bytes; they name no devices and are not in the "
    "communication term"
)
EXPECTED_NOTE = (
    "lower bound: the roofline at spec-sheet figures, everything overlapped; expected: the same with each "
    "collective at its fabric's fitted efficiency and latency (the cost model's expected time); upper bound: the "
    "serial sum (nothing overlapped)"
)
_HLO_DTYPES = {"bf16": "bfloat16", "f32": "float32", "f16": "float16", "s8": "int8", "u8": "int8", "f64": "float32"}


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


def context_and_target(devices: Sequence[Any]) -> tuple[CostContext, Target | None]:
    """The cost context for a program's devices: the whole device set a compile-only device came from (its
    torus and hosts), else the process's devices of that platform."""
    import jax

    if not devices:
        return no_figures("no devices", "cpu", "no devices"), None
    target = target_of(devices[0])
    if target is not None:
        return context_for(target.devset), target
    platform = str(devices[0].platform)
    try:
        every = list(jax.devices(platform))
    except RuntimeError:  # devices of a backend this process did not start (a topology made elsewhere)
        every = list(devices)
    return context_for_devices(every), None


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
    from sharding_core.cost.annotate import with_estimates
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
    hardware, target = context_and_target(devices)
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
    counts = None
    unread = None
    if hlo:
        try:
            counts = loops.count(hlo)
        except (ValueError, KeyError, IndexError) as e:  # an HLO spelling the reader does not know: say so
            unread = f"the loop reader could not read this HLO ({str(e)[:200]}): no loop-corrected figures"
    facts = None
    if compiled is not None and hlo is not None:
        slices = int(snap.get("target", {}).get("slices") or 1) if target is not None else 1
        ids = [int(d.id) for d in devices]
        if slices > 1:
            # libtpu compiles one slice's program; partition p of slice s is the p-th device of slice s.
            assignments = [[i for d, i in zip(devices, ids, strict=True) if _slice(d) == s] for s in range(slices)]
        else:
            assignments = [ids]
        try:
            facts = program_facts(hlo)
        except HloParseError:
            facts = None
        collectives = read_collectives(hlo, assignments, id_grid, axis_names, facts)
        # The HLO reader's repeat counts loops XLA annotated (known_trip_count: GPU); libtpu's TPU loops carry
        # none, and the loop reader reads their conditions: its multiplicity covers both.
        where = loops.computation_of(hlo, [c["name"] for c in collectives]) if counts else {}
        for c in collectives:
            if counts is not None and c["name"] in where:
                c["repeat"] = counts.multiplicity.get(where[c["name"]]) or c.get("repeat", 1)
        snap["collectives"] = with_estimates(collectives, hardware)
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
    snap["plan"] = plan_section(
        compiled=compiled,
        counts=counts,
        stats=stats,
        collectives=snap.get("collectives") or [],
        hardware=hardware,
        breakdown=breakdown,
        temporaries=report,
        refused=refused,
        mesh_axes=dict(zip(axis_names, (int(s) for s in mesh.devices.shape), strict=True)) if mesh is not None else {},
        timing={"lower_seconds": t1 - t0, "compile_seconds": t2 - t1},
    )
    if unread is not None and snap["plan"].get("work") is not None:
        snap["plan"]["work"]["note"] = unread
    if why is not None and compiled is not None and snap.get("collectives"):
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
    if hlo and int((snap.get("target") or {}).get("slices") or 1) > 1:
        # libtpu's multi-slice program sends what crosses slices over DCN as megascale host transfers,
        # which name no devices: listed apart, not in the collectives or the communication term.
        snap["plan"]["dcn_transfers"] = megascale_transfers(hlo)
        snap["plan"]["dcn_note"] = DCN_NOTE
    return snap


def _slice(device: Any) -> int:
    return int(getattr(device, "slice_index", 0) or 0)


def _program_mesh(shardings: list[Any]) -> Any:
    import jax

    for s in shardings:
        if isinstance(s, jax.sharding.NamedSharding) and isinstance(s.mesh, jax.sharding.Mesh):
            return s.mesh
    return None


def _dominant_dtype(counts: loops.ProgramCounts | None) -> str:
    if counts is None or not counts.matmul_flops:
        return "float32"
    hlo_dtype = max(counts.matmul_flops, key=lambda k: counts.matmul_flops[k])
    return _HLO_DTYPES.get(hlo_dtype, "float32")


def _xla_cost(compiled: Any) -> dict[str, float | None]:
    try:
        cost = cost_analysis(compiled)
    except Exception:  # noqa: BLE001 - some backends answer with an error instead of nothing
        cost = {}
    return {"flops": cost.get("flops"), "bytes_accessed": cost.get("bytes accessed")}


def plan_section(
    *,
    compiled: Any,
    counts: loops.ProgramCounts | None,
    stats: Mapping[str, int] | None,
    collectives: Sequence[Mapping[str, Any]],
    hardware: CostContext,
    breakdown: Mapping[str, Any],
    temporaries: Mapping[str, Any] | None,
    refused: Mapping[str, Any] | None,
    mesh_axes: Mapping[str, int],
    timing: Mapping[str, float],
) -> dict[str, Any]:
    """The plan: work, memory, step time and verdict of one compiled program on one device set."""
    capacity = None
    if hardware.hardware is not None:
        cap = hbm_per_device(hardware.hardware).value
        capacity = int(cap) if cap is not None else None
    out: dict[str, Any] = {
        "partitioner": partitioner(),
        "hardware": hardware.label,
        "capacity_bytes": capacity,
        "arguments": dict(breakdown),
        "temporaries": dict(temporaries) if temporaries is not None else None,
        "refusal": None,
        **{k: float(v) for k, v in timing.items()},
    }
    if refused is not None:
        r = dict(refused)
        if r.get("available_bytes") is None:
            r["available_bytes"] = capacity
        if temporaries is not None and not r.get("largest"):
            r["largest"] = list(temporaries.get("largest") or [])
        r["advice"] = mem.advice(r, breakdown, mesh_axes)
        out["refusal"] = r
        over = r.get("over_bytes")
        parts = [f"does not fit: XLA refused the program for memory — over by {fmt_bytes(int(over))}" if over
                 else "does not fit: XLA refused the program for memory"]  # fmt: skip
        if r.get("required_bytes") and r.get("available_bytes"):
            parts.append(
                f"{r.get('what') or 'needed'} {fmt_bytes(int(r['required_bytes']))} > "
                f"{fmt_bytes(int(r['available_bytes']))} available per device"
            )
        out.update(fits=False, over_bytes=over, work=None, step_time=None, verdict="; ".join(parts))
        return out
    xla = _xla_cost(compiled)
    work = {
        "flops": counts.flops if counts else None,
        "transcendentals": counts.transcendentals if counts else None,
        "bytes_accessed": counts.bytes_accessed if counts else None,
        "flops_loops_once": counts.flops_once if counts else None,
        "bytes_accessed_loops_once": counts.bytes_once if counts else None,
        "flops_xla": xla["flops"],
        "bytes_accessed_xla": xla["bytes_accessed"],
        "matmul_flops_by_dtype": dict(counts.matmul_flops) if counts else {},
        "loops": counts.loops_json() if counts else [],
        "note": "flops and bytes per device and step, counted from the optimized HLO with every loop body times "
        "its trip count (XLA's cost_analysis counts each body once: flops_xla)",
    }
    out["work"] = work
    peak = (stats or {}).get("peak_memory_in_bytes")
    # The roofline multiplies each collective's estimate by its repeat count; its memory term is the bytes
    # the loop reader counts (given alone, the cost model's HBM-traffic rule falls back to them).
    line = roofline(
        {"flops": xla["flops"], "loop_corrected_flops": work["flops"], "bytes_accessed": work["bytes_accessed"]},
        {"peak_bytes": peak} if peak is not None else None,
        collectives,
        hardware,
        _dominant_dtype(counts),
        PLAN_ROOFLINE,
    )
    out["roofline"] = line
    out["communication"] = {
        "collectives": len(collectives),
        "per_step": sum(int(c.get("repeat", 1)) for c in collectives),
        "bytes_per_step": sum(int(c.get("bytes") or 0) * int(c.get("repeat", 1)) for c in collectives),
        "seconds_per_step": line.get("communication_seconds"),
    }
    known = [line.get(k) for k in ("compute_seconds", "memory_seconds", "communication_expected_seconds")]
    expected = max((v for v in known if v is not None), default=None) if line.get("bound") else None
    out["step_time"] = {
        "lower_bound_seconds": line.get("lower_bound_seconds"),
        "expected_seconds": expected,
        "upper_bound_seconds": line.get("serial_seconds"),
        "bound": line.get("bound"),
        "compute_seconds": line.get("compute_seconds"),
        "memory_seconds": line.get("memory_seconds"),
        "communication_seconds": line.get("communication_seconds"),
        "communication_expected_seconds": line.get("communication_expected_seconds"),
        "note": EXPECTED_NOTE,
    }
    hbm = line.get("hbm") or {}
    out["fits"] = hbm.get("fits")
    out["over_bytes"] = hbm.get("over_bytes")
    out["verdict"] = verdict(out, hbm, peak)
    return out


def verdict(plan: Mapping[str, Any], hbm: Mapping[str, Any], peak: int | None) -> str:
    """One line: fits / over by X; which term bounds the step and the band."""
    parts = [
        str(hbm.get("text") or (f"peak {fmt_bytes(peak)} per device" if peak is not None else "no memory figures"))
    ]
    st = plan.get("step_time") or {}
    bound = st.get("bound")
    if bound:
        low, high = st.get("lower_bound_seconds"), st.get("upper_bound_seconds")
        terms = ", ".join(
            f"{k} {fmt_seconds(st.get(f'{k}_seconds'))}"
            for k in ("compute", "memory", "communication")
            if st.get(f"{k}_seconds") is not None
        )
        parts.append(f"{bound}-bound: step {fmt_seconds(low)} to {fmt_seconds(high)} ({terms})")
    elif plan.get("roofline", {}).get("why") and str(plan["roofline"]["why"]) not in parts:
        parts.append(str(plan["roofline"]["why"]))  # said once: without hardware figures HBM says the same
    return "; ".join(parts)


def plan(f: Callable[..., Any], *args: Any, **kwargs: Any) -> dict[str, Any]:
    """``inspect_jit`` with the details a plan shows: XLA's buffer assignment read for the largest
    temporaries (with the ops and source lines that make them). Returns the snapshot; ``["plan"]["verdict"]``
    is the one-line answer."""
    return inspect_program(f, args, kwargs, detailed=True)
