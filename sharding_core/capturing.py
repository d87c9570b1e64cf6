"""Capture the shardings of the user's own program: :func:`capture` and :func:`inspect_jit`.

Runs in the user's process (their training script or notebook), on their real devices, and reads
every number from JAX itself: ``sharding.devices_indices_map(shape)`` for each device's block (the
same call ``/api/layout`` answers from), ``shard_shape``, ``is_fully_addressable``,
``sharding.device_set``, ``memory_kind`` and each device's ``process_index``; for ``inspect_jit`` the
compiled executable's ``input_shardings`` / ``out_info`` and its optimized HLO, read by
:mod:`sharding_core.hlo` exactly as the kernel lab reads it. Each layout is
:meth:`sharding_core.layout.Layout.from_sharding`. The result is the plain-data snapshot described
in :mod:`sharding_core.snapshot.format` (JSON-serialisable, versioned).

Flax is optional: its boxes and nnx variables are recognised only when the program already imported
Flax (we look in ``sys.modules``), so capturing plain JAX never imports it.

Module named ``capturing`` (not ``capture``) so that ``sharding_core.capture`` stays the function.
"""

from __future__ import annotations

import functools
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from sharding_core.compat import (
    ambient_mesh,
    context_mesh,
    equivalent,
    refuses_devices,
    sharded_type_text,
    typeof_text,
)
from sharding_core.cost.annotate import snapshot_context, snapshot_with_estimates, with_estimates
from sharding_core.errors import TOO_LARGE, ShardingError
from sharding_core.findings import waste
from sharding_core.findings.constraints import Target, constrained
from sharding_core.findings.mesh_order import mesh_order_findings, user_line
from sharding_core.layout import Layout
from sharding_core.planning import fit as fitting
from sharding_core.planning.program import (
    Planned,
    argument_names,
    explain_planned,
    function_name,
    mesh_axes,
    plan_program,
    program_reading,
    reading_for,
)
from sharding_core.planning.program import planned as planned_of
from sharding_core.program import early
from sharding_core.program.compile import Program, lower
from sharding_core.program.report import LOCAL, read_report
from sharding_core.program.targets import target_of
from sharding_core.program.values import spec_axes_by_dim
from sharding_core.searching import run as searching
from sharding_core.searching.compiling import build, candidate_mesh
from sharding_core.searching.space import Grid
from sharding_core.snapshot.format import FORMAT, MAX_SNAPSHOT_LEAVES, MAX_SNAPSHOT_NAME_CHARS, VERSION
from sharding_core.snapshot.leaves import ROOT_PATH
from sharding_core.snapshot.leaves import flax_box_types as _flax_box_types
from sharding_core.snapshot.leaves import is_capture_leaf as _is_capture_leaf
from sharding_core.snapshot.leaves import nnx_variable_types as _nnx_variable_types
from sharding_core.snapshot.rules import Rule, check_rules, logical_to_mesh_axes, rules_json
from sharding_core.spec import canonical_spec
from sharding_core.why import Budget, lines
from sharding_core.why.fixes import current_budget
from sharding_core.why.program import light_whys


def capture(tree: Any, name: str | None = None, *, rules: Any = None, mesh: Any = None) -> dict[str, Any]:
    """A JSON-serialisable snapshot of every array-like leaf of ``tree``.

    Leaves: ``jax.Array`` (also ``jax.live_arrays()``), ``jax.ShapeDtypeStruct`` (with or without a
    sharding, e.g. an Orbax restore target or ``jax.eval_shape`` output), bare ``Sharding`` and
    ``PartitionSpec`` objects, NumPy arrays (host data), Flax linen ``Partitioned`` /
    ``LogicallyPartitioned`` boxes and Flax nnx variables (an nnx ``Module`` is captured through its
    variables). Optax states and other pytrees are walked like any pytree.

    ``rules``: the logical → mesh axis rules for logically named leaves whose box carries none
    (default: Flax's ``nn.get_logical_axis_rules()`` context, when Flax is loaded). ``mesh``: the mesh
    for boxes that name axes but hold no sharded value (default: the mesh of ``jax.set_mesh``).
    """
    import jax

    builder = _Builder(rules, mesh)
    flat, _ = jax.tree_util.tree_flatten_with_path(tree, is_leaf=_is_capture_leaf)
    if len(flat) > MAX_SNAPSHOT_LEAVES:
        raise ShardingError(
            TOO_LARGE,
            f"the tree has {len(flat)} leaves; a snapshot holds at most {MAX_SNAPSHOT_LEAVES}",
            hint="capture a subtree (e.g. the parameters without the optimizer state)",
            limit=MAX_SNAPSHOT_LEAVES,
        )
    paths = [jax.tree_util.keystr(path, simple=True, separator="/") or ROOT_PATH for path, _ in flat]
    for text, (_, leaf) in zip(paths, flat, strict=True):
        builder.add(text, leaf)
    snap = builder.snapshot(name if name is not None else "snapshot")
    # under jax.set_mesh: leaves jit would refuse beside the context mesh (MaxText #2863)
    snap["findings"] = mesh_order_findings((p, _unboxed(x)) for p, (_, x) in zip(paths, flat, strict=True))
    return snap


def inspect_jit(f: Callable[..., Any], *args: Any, **kwargs: Any) -> dict[str, Any]:
    """Lowers and compiles ``f`` for these arguments in this process and captures what XLA chose.

    ``f`` is a function or a ``jax.jit``-wrapped one (keep static arguments in its ``jax.jit``). The
    arguments may be arrays or abstract: ``jax.ShapeDtypeStruct``s (``jax.eval_shape`` trees, Flax NNX
    abstract state) sharded over compile-only devices (:func:`shardscope.mesh`: libtpu's topology for
    ``tpu:`` sets, XLA's GPU compiler for ``gpu:`` sets) — nothing is allocated and nothing runs. The
    snapshot's leaves are ``inputs/args/...``, ``inputs/kwargs/...`` and ``outputs/...`` with the
    compiled executable's shardings; ``program`` is the compiled program's report (:mod:`sharding_core.program`:
    XLA's ``memory_analysis`` exactly, the work with loops counted, the collectives with repeat counts);
    ``target`` says what it was compiled for; ``collectives`` lists every collective in the optimized HLO with its
    device groups, its estimate on this hardware and how many times it runs per step (``repeat``); ``jit``
    carries XLA's ``memory_analysis`` as ``memory_per_device``; ``plan`` the loop-corrected flops, the step-time
    band and a verdict (:mod:`sharding_core.planning.program`). When XLA refuses the program for memory,
    ``plan.refusal`` holds its figures and there are no outputs.
    """
    # detailed: XLA's buffer assignment too (the memory timeline the contract has every capture carry; measured
    # within the noise of the compile on a llama step)
    return _refused_beside_context_mesh(f, args, kwargs) or program_snapshot(f, args, kwargs, detailed=True)


def explain(f: Callable[..., Any], *args: Any, **kwargs: Any) -> dict[str, Any]:
    """:func:`inspect_jit` that also says why every collective is there and looks for fixes.

    ``inspect_jit`` gives each collective the line and op that asked for it (from the same compile, at no
    cost); ``explain`` compiles the program once more with Shardy's sharding origins written (that compile
    is read for the why only: the figures stay the plain compile's), names the operand moved, its shardings
    before and after, the input leaves and origins that decided them and a sentence, and compiles candidate
    changes (an input's PartitionSpec, an output's out_sharding, a JAX option), keeping those that make the
    program's collectives cheaper (:mod:`sharding_core.why.fixes`). The snapshot's ``fixes`` hold the
    recompiled programs ("try this fix"), ``why_search`` what the search did. The work is bounded:
    :func:`sharding_core.why_budget` (default 8 recompiles and 20 s per call; ``recompiles=0``: explain only)."""
    return _refused_beside_context_mesh(f, args, kwargs) or program_snapshot(
        f, args, kwargs, detailed=True, why=current_budget()
    )


def _refused_beside_context_mesh(f: Callable[..., Any], args: Any, kwargs: Any) -> dict[str, Any] | None:
    """Under ``jax.set_mesh``, arguments committed to other devices (or the same in another order) than the
    context mesh are refused by JAX before anything compiles ("incompatible devices", MaxText #2863). Then the
    snapshot is the arguments' capture, whose ``findings`` say what to change, with JAX's own words; None
    when JAX lowers the program (the usual case: no context mesh, or arguments on it)."""
    import jax

    if context_mesh() is None:
        return None
    inputs = {"inputs": {"args": list(args), "kwargs": dict(kwargs)}}
    source = user_line()
    flat, _ = jax.tree_util.tree_flatten_with_path(inputs, is_leaf=_is_capture_leaf)
    leaves = [(jax.tree_util.keystr(p, simple=True, separator="/"), _unboxed(x)) for p, x in flat]
    if not mesh_order_findings(leaves, source=source):
        return None
    jitted = f if hasattr(f, "lower") else jax.jit(f)
    try:
        jitted.lower(*args, **kwargs)
    except ValueError as e:
        if not refuses_devices(e):
            raise
        name = getattr(f, "__name__", None) or getattr(getattr(f, "__wrapped__", None), "__name__", None) or "jit"
        snap = capture(inputs, f"jit({name})")
        for finding in snap["findings"]:
            finding["source"] = finding["fix"]["line"] = source
            finding["text"] += f" JAX: {str(e).splitlines()[0][:600]}"
        return snap
    return None  # this JAX lowers it after all: nothing to report


def plan(f: Callable[..., Any], *args: Any, fit: bool | float = False, **kwargs: Any) -> dict[str, Any]:
    """``inspect_jit`` with the details a plan shows: XLA's buffer assignment read for the largest
    temporaries (with the ops and source lines that make them) and the memory over program order
    (``memory_timeline``). Returns the snapshot; ``["plan"]["verdict"]`` is the one-line answer.

    ``fit`` (True, or the headroom to keep as a fraction of HBM): when the program does not fit, or fits with less
    headroom, ``["plan"]["fit"]["fixes"]`` holds candidate changes each compiled and planned
    (:mod:`sharding_core.planning.fit`)."""
    snap = program_snapshot(f, args, kwargs, detailed=True)
    if fit is not False:
        snap["plan"]["fit"] = fit_plan(snap, f, args, kwargs, 0.0 if fit is True else float(fit))
    return snap


def fit_plan(
    snap: dict[str, Any],
    f: Callable[..., Any],
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
    headroom: float = 0.0,
    variants: Sequence[fitting.Candidate] = (),
) -> dict[str, Any]:
    """``plan.fit``: the fixes :mod:`sharding_core.planning.fit` finds for this program and ``variants`` (the
    caller's own: the model's knobs), each compiled and planned; none when the plan fits with the headroom."""
    if not fitting.needs_fit(snap, headroom):
        return {"needed": False, "fixes": []}
    donated = int((snap.get("jit") or {}).get("donated_inputs") or 0)
    # the outputs' shardings last: a pinned out_sharding is rarely what overflows, and the budget goes first to
    # the arguments, donation and the model's own knobs
    found = [
        fitting.sharded_further(f, args, kwargs),
        fitting.donated(f, args, kwargs, donated),
        *variants,
        fitting.sharded_outputs(f, args, kwargs),
    ]
    result = fitting.verify([c for c in found if c is not None],
                            lambda fn, a, k: program_snapshot(fn, a, k, detailed=False))  # fmt: skip
    return {"needed": True, **result}


def search(fn: Callable[..., Any], devices: str, **options: Any) -> dict[str, Any]:
    """Which mesh and logical-axis rules to use for ``fn(mesh, rules, **knobs) -> (jitted, args)`` on ``devices``
    (``tpu:GEN:TOPO``, ``gpu:KIND:HxG``; compile-only): candidates enumerated, the most promising compiled within
    ``budget`` (seconds, or ``"10m"``) and ranked by the compiled program's expected step time among those that fit
    the HBM less ``hbm_headroom``. Returns the search's JSON; ``["pick"]["plan"]`` is the pick's plan (as
    :func:`plan` gives it). Options: ``slices``, ``budget``, ``hbm_headroom``, ``workers``, ``max_compiles``,
    ``exhaustive``, ``knobs`` ({name: [values]}), ``axes``, ``memory_bytes``, ``compile_seconds``, ``progress``
    (a callable given each progress line), ``server`` (a team's server whose replicas compile the candidates) and
    ``token`` (its write token). See :mod:`sharding_core.searching`."""
    o = searching.options(**options)
    result = searching.search(fn, devices, o)
    pick = result["pick"]
    if pick is not None:
        mesh = pick["mesh"]
        dcn = tuple(mesh.get("dcn_shape") or (1,) * len(mesh["shape"]))
        layout = Grid(tuple(zip(mesh["axis_names"], mesh["shape"], strict=True)), dcn)
        rules = tuple((n, tuple(a) if isinstance(a, list) else a) for n, a in pick["rules"])
        searching.say(o, f"planning the pick, {pick['strategy']} (one more compile, with XLA's buffer assignment)")
        jitted, args, kwargs = build(fn, candidate_mesh(devices, o.slices, layout), rules, pick["knobs"])
        plan_snap = program_snapshot(jitted, args, kwargs, detailed=True)
        plan_snap["name"] = f"{getattr(fn, '__name__', 'fn')} on {devices}: {pick['strategy']}"
        plan_snap["search"] = searching.summary(result)  # published or shown, the plan draws the front beside it
        pick["plan"] = plan_snap
    return result


def program_snapshot(
    f: Callable[..., Any],
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
    *,
    detailed: bool,
    why: Budget | None = None,
    check_fixes: bool = False,
) -> dict[str, Any]:
    """What :func:`inspect_jit`, :func:`explain`, :func:`plan` and ``shardscope plan`` return: the program compiled
    and read once (:func:`sharding_core.planning.program.plan_program`), captured as a snapshot, explained with
    ``why`` (a budget: fixes compiled within it), and its figures added once, as any reader adds them."""
    planned = plan_program(f, args, kwargs, detailed=detailed)
    snap = planned_snapshot(planned, len(args), light=why is None)
    program = planned.program
    if why is not None and program is not None and program.executable is not None and snap.get("collectives"):
        estimate = functools.partial(with_estimates, ctx=snapshot_context(snap))
        explained = explain_planned(planned, snap["collectives"], why, estimate)
        snap["plan"].update(why_compile_seconds=explained.compile_seconds, why_seconds=explained.seconds)
        snap["why_search"] = explained.summary
        if explained.fixes:
            snap["fixes"] = [planned_snapshot(p, len(args), light=False) for p in explained.fixes]
            _name_fixes(snap)
    snap = snapshot_with_estimates(snap)
    if check_fixes and planned.mesh is not None:
        checked_constraint_fixes(snap, f, args, kwargs, planned.mesh, planned.program)
    return snap


def _name_fixes(snap: dict[str, Any]) -> None:
    """Each fix's program named by its fix ("jit(layer), fixed: shard inputs/args/2 as P('model') instead of ..."):
    a compare of the program with its fix then says which side is which (issue 28: both read "jit(layer)")."""
    texts: dict[int, str] = {}
    for c in snap.get("collectives") or ():
        for fix in (c.get("why") or {}).get("fixes") or ():
            if isinstance(fix.get("result"), int):
                texts.setdefault(fix["result"], str(fix.get("text") or ""))
    for k, fixed in enumerate(snap["fixes"]):
        if texts.get(k):
            fixed["name"] = f"{snap.get('name')}, fixed: {texts[k]}"[:MAX_SNAPSHOT_NAME_CHARS]


MAX_CONSTRAINT_CANDIDATES = 3
"""Lines a finding's constraint fix is tried at (each a compile)."""


def checked_constraint_fixes(snap: dict[str, Any], f: Any, args: Sequence[Any], kwargs: Mapping[str, Any],
                             mesh: Any, program: Program | None = None) -> None:  # fmt: skip
    """Checks each finding's ``with_sharding_constraint`` fix by recompiling (:mod:`sharding_core.findings.
    constraints`): at up to :data:`MAX_CONSTRAINT_CANDIDATES` lines, ranked by step time and memory together (the
    sum of their ratios to the program's own: a fix that halves the step but doubles the memory is no better than
    none); the best gives the fix its line, the collective bytes, step time and memory after.

    On a compile-only TPU set the candidates compile at once, each until libtpu has scheduled and placed it
    (:mod:`sharding_core.program.early`: the schedule and collectives the full compile has, in seconds rather than
    minutes); their memory is the bytes the buffer assignment placed (``placed_after``, ranked against the
    program's own ``placed``), XLA's final peak is not read (``peak_after`` null). Elsewhere each is compiled in
    full (``peak_after``: XLA's peak). ``program``: the program's own compile (its donations, its placed bytes)."""
    base = _figures(snap)
    base["placed"] = program.placed if program is not None else None
    donated = _donated(program)
    early_ok = _early_target(mesh) and base["placed"] is not None
    for finding in snap.get("findings") or ():
        fix = finding.get("fix") or {}
        candidates = []
        for target in _constraint_targets(finding, snap, mesh):
            try:
                fixed, hits = constrained(f, args, dict(kwargs), target, donated=donated)
            except Exception:  # noqa: BLE001, S112 - a line the rewrite cannot constrain is no fix
                continue
            if hits:
                candidates.append((target, fixed))
        if early_ok:
            assert program is not None
            tried = _try_early(candidates, args, kwargs, mesh, finding["kind"], program)
        else:
            tried = [t for t in (_try_constraint(fx, args, kwargs, target, finding["kind"])
                                 for target, fx in candidates) if t is not None]  # fmt: skip
        if not tried:
            continue
        best = min(tried, key=lambda t: _score(t, base))
        target, after = best
        line = target.line
        spec = canonical_spec(target.sharding.spec)
        how = "scheduled by libtpu, before code generation" if after.get("early") else "recompiled"
        fix.update(
            line=line,
            spec=spec,
            text=f"x = jax.lax.with_sharding_constraint(x, {spec}) after line {line} (x: the {target.shape} value made "
            f"there; {how}{', gone' if after['gone'] else ''}: best of {len(tried)} line(s) tried, ranked by "
            f"step time and memory)",
            bytes_after=after["bytes"],
            expected_seconds_after=after["seconds"],
            peak_after=after["peak"],
            placed_after=after.get("placed"),
            placed_before=base["placed"] if after.get("early") else None,
        )


def _figures(snap: Mapping[str, Any]) -> dict[str, Any]:
    step = (snap.get("plan") or {}).get("step_time") or {}
    return {
        "bytes": sum(int(c.get("bytes") or 0) * int(c.get("repeat") or 1) for c in snap.get("collectives") or ()),
        "seconds": step.get("expected_seconds"),
        "peak": ((snap.get("jit") or {}).get("memory_per_device") or {}).get("peak_memory_in_bytes"),
    }


def _score(tried: tuple[Any, dict[str, Any]], base: Mapping[str, Any]) -> float:
    after = tried[1]
    score = 0.0
    for key in ("seconds", "placed" if after.get("early") else "peak", "bytes"):
        if after.get(key) is not None and base.get(key):
            score += float(after[key]) / float(base[key])
            if key == "seconds":
                break  # with a step time, bytes are in it: time and memory rank
    return score


def _donated(program: Program | None) -> tuple[tuple[int, ...], tuple[str, ...]]:
    """The positional arguments and keyword arguments the program donates (a fix keeps them donated: its memory
    is then the program's own plus what the fix changes)."""
    import jax

    if program is None:
        return (), ()
    args, kwargs = program.lowered.args_info

    def whole(info: Any) -> bool:
        leaves = jax.tree.leaves(info)
        return bool(leaves) and all(bool(getattr(x, "donated", False)) for x in leaves)

    return tuple(i for i, a in enumerate(args) if whole(a)), tuple(k for k, a in dict(kwargs).items() if whole(a))


def _early_target(mesh: Any) -> bool:
    """Whether a fix's compile may stop before code generation: a compile-only TPU set (libtpu's)."""
    target = target_of(mesh.devices.flat[0]) if mesh is not None else None
    return target is not None and target.devset.platform == "tpu" and target.devset.simulated


def _constraint_targets(finding: Mapping[str, Any], snap: Mapping[str, Any], mesh: Any) -> list[Any]:
    """Where a finding's fix constrains, in program order: the values it involves (their line, shape, spec)."""
    import jax

    spec = (finding.get("fix") or {}).get("spec")
    if not spec or finding["kind"] not in (waste.BATCH_NOT_SPLIT, waste.REPLICATED_BETWEEN_SPLIT):
        return []
    sharding = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec(*_spec_entries(spec)))
    lines = {str(v.split(" at ", 1)[1]) for v in finding.get("involved") or () if " at " in v}
    out: list[Any] = []
    for v in snap.get("values") or ():
        fits = len(v["shape"]) == len(_spec_entries(spec)) or finding["kind"] == waste.BATCH_NOT_SPLIT
        if v.get("source") in lines and fits and not any(t.line == v["source"] for t in out):
            out.append(Target(v["source"], tuple(v["shape"]), sharding))
        if len(out) >= MAX_CONSTRAINT_CANDIDATES:
            break
    return out


def _spec_entries(spec: str) -> list[Any]:
    return [None if not d else d[0] if len(d) == 1 else tuple(d) for d in spec_axes_by_dim(spec)]


def _try_constraint(fixed: Any, args: Sequence[Any], kwargs: Mapping[str, Any], target: Any,
                    kind: str) -> tuple[Any, dict[str, Any]] | None:  # fmt: skip
    """The program with the constraint, compiled: its figures, and whether the finding is gone (None: its compile
    failed)."""
    try:
        snap = program_snapshot(fixed, args, kwargs, detailed=False)
    except Exception:  # noqa: BLE001 - a candidate that does not compile is no fix
        return None
    figures = _figures(snap)
    figures["gone"] = not any(x.get("kind") == kind for x in snap.get("findings") or ())
    return target, figures


def _try_early(candidates: Sequence[tuple[Any, Any]], args: Sequence[Any], kwargs: Mapping[str, Any], mesh: Any,
               kind: str, program: Program) -> list[tuple[Any, dict[str, Any]]]:  # fmt: skip
    """The candidates compiled at once until libtpu has scheduled and placed them, each read as a plan reads its
    program: figures, and whether the finding is gone. The array leaves ``program`` donates stay donated."""
    import jax

    if not candidates:
        return []
    donate = [i for i, a in enumerate(jax.tree.leaves(program.lowered.args_info)) if getattr(a, "donated", False)]
    results = early.compile_early([fx for _, fx in candidates], args, dict(kwargs), mesh, donate)
    out = []
    for (target, fixed), got in zip(candidates, results, strict=True):
        if got.hlo is None:
            if got.error is not None and got.error.startswith(early.NOT_EXPORTED):  # compiled here, to the end
                full = _try_constraint(fixed, args, kwargs, target, kind)
                out += [full] if full is not None else []
            continue
        try:
            scheduled = lower(fixed, args, kwargs, echo=False).read_early(got.hlo, got.entering, got.placed,
                                                                          got.seconds)  # fmt: skip
            report = read_report(scheduled, reading_for(mesh))
            planned_fix = planned_of(function_name(fixed), fixed, report, mesh, scheduled)
            snap = snapshot_with_estimates(planned_snapshot(planned_fix, len(args), light=True))
        except Exception:  # noqa: BLE001, S112 - a candidate whose module cannot be read is no fix
            continue
        figures = _figures(snap)
        figures.update(peak=None, placed=got.placed, early=True,
                       gone=not any(x.get("kind") == kind for x in snap.get("findings") or ()))  # fmt: skip
        out.append((target, figures))
    return out


def planned_snapshot(planned: Planned, nargs: int, *, light: bool) -> dict[str, Any]:
    """The snapshot of a compiled program: its inputs and outputs as compiled, captured; its report as
    ``program``; its collectives (each with its ``line``, and ``light``: the op and line that asked for it, as
    :func:`sharding_core.why.program.light_whys` gives them); ``jit`` and the plan's facts. No figures."""
    report = planned.report
    signature = report.signature
    assert signature is not None
    inputs = signature.inputs()
    tree: dict[str, Any] = {"inputs": {"args": list(inputs[0]), "kwargs": inputs[1]}}
    if signature.out_info is not None:
        tree["outputs"] = signature.out_info
    snap = capture(tree, f"jit({planned.name})")
    if report.target.get("source") != LOCAL:
        snap["target"] = dict(report.target)  # a set shardscope.mesh made (compile-only, or cpu:N / local)
    if report.refusal is None and planned.program is not None and planned.program.hlo:
        snap["collectives"] = report.collectives_json()
        sources = lines(snap["collectives"], planned.program.hlo)
        if light:
            light_whys(snap["collectives"], sources, report.partitioner)
    elif planned.collectives is not None:
        snap["collectives"] = [dict(c) for c in planned.collectives]
    snap["jit"] = _jit_section(planned, nargs, signature.donated)
    snap["plan"] = dict(planned.plan)
    snap["program"] = report.json()
    if planned.program is not None:
        read = program_reading(planned.program, report, snap.get("collectives") or [], mesh_axes(planned.mesh),
                               argument_names(planned.fn, nargs))  # fmt: skip
        if "findings" in read:
            read["findings"] = [*snap.get("findings", []), *read["findings"]]
        snap.update(read)
    elif report.values is not None:
        snap["values"] = list(report.values)
    return snap


def _jit_section(planned: Planned, nargs: int, donated: int) -> dict[str, Any]:
    """``jit``: the function, XLA's memory figures (the report's, by their XLA names) and the loop facts where
    inspect_jit has carried them (issue 19)."""
    report = planned.report
    out: dict[str, Any] = {
        "function": planned.name,
        "memory_per_device": report.memory,
        "donated_inputs": donated,
        "arguments": argument_names(planned.fn, nargs),
    }
    work = report.work
    if work is not None and work.get("flops_loops_once") is not None:  # the loop reader read this HLO
        out.update(
            flops=work["flops_xla"],
            loop_corrected_flops=work["flops"],
            loops=work["loops"],
            unknown_trip_counts=work["unknown_trip_counts"],
        )
    return out


def array_kind(x: Any) -> str:
    """What kind of array ``x`` is, in the terms of JAX's jax.Array migration guide.

    ``single_device`` (one device), ``sharded`` (several devices, all addressable by this process:
    fully addressable) or ``global`` (spans processes: ``is_fully_addressable`` is False).
    """
    if len(x.sharding.device_set) == 1:
        return "single_device"
    return "sharded" if x.is_fully_addressable else "global"


# ---- walking the tree ------------------------------------------------------------------------------


def _sharded_as_declared(value: Any, declared: Any, rank: int) -> bool:
    """Whether ``value`` is placed as ``declared`` (a PartitionSpec on the value's own mesh) places it:
    JAX's ``is_equivalent_to`` (``P('x')`` is ``P('x', None)``, ``P(('x',))`` is ``P('x')``)."""
    import jax

    sharding = getattr(value, "sharding", None)
    if not isinstance(sharding, jax.sharding.NamedSharding):
        return False
    try:
        wanted = jax.sharding.NamedSharding(sharding.mesh, declared)
    except (ValueError, TypeError):  # the declaration names an axis the value's mesh lacks
        return False
    return equivalent(sharding, wanted, rank)


class _Builder:
    """Collects leaves, deduplicating meshes and devices and caching layouts per (sharding, shape)."""

    def __init__(self, rules: Any, mesh: Any) -> None:
        import jax

        self.jax = jax
        if rules is None:
            spmd = sys.modules.get("flax.core.spmd")
            rules = spmd.get_logical_axis_rules() if spmd is not None else None
        self.rules: tuple[Rule, ...] | None = check_rules(rules) if rules else None
        self.mesh = mesh if mesh is not None else ambient_mesh()
        self.leaves: list[dict[str, Any]] = []
        self.skipped = 0
        self.meshes: list[dict[str, Any]] = []
        self.mesh_index: dict[Any, int] = {}
        self.devices: dict[int, Any] = {}
        self.layouts: list[dict[str, Any]] = []
        self.layout_index: dict[tuple[Any, ...], int] = {}

    # -- leaves

    def add(self, path: str, x: Any) -> None:
        record = self.leaf(path, x)
        if record is None:
            self.skipped += 1
        else:
            self.leaves.append(record)

    def leaf(self, path: str, x: Any) -> dict[str, Any] | None:
        jax = self.jax
        boxes = _flax_box_types()
        if boxes and isinstance(x, boxes):
            return self.box(path, x)
        variables = _nnx_variable_types()
        if variables and isinstance(x, variables):
            return self.nnx_variable(path, x)
        if isinstance(x, jax.core.Tracer):
            rec = _record(path, "shape_dtype_struct", _type_name(x), tuple(x.shape), x.dtype)
            rec["typed"] = typeof_text(x)  # inside jit the type still carries an Explicit sharding
            rec["note"] = "a traced value (captured inside jit): call capture outside the traced function"
            return rec
        if isinstance(x, jax.Array):
            return self.array(path, x)
        if isinstance(x, jax.ShapeDtypeStruct):
            rec = _record(path, "shape_dtype_struct", "jax.ShapeDtypeStruct", tuple(x.shape), x.dtype)
            if x.sharding is not None:
                self.fill(rec, x.sharding, tuple(x.shape), x.dtype)
            else:
                rec["note"] = "no sharding given"
            rec["typed"] = _typed(x, rec["typed"])
            return rec
        if isinstance(x, jax.sharding.Sharding):
            rec = _record(path, "sharding", _type_name(x), None, None)
            self.fill(rec, x, None, None)
            return rec
        if isinstance(x, jax.sharding.PartitionSpec):
            rec = _record(path, "partition_spec", "jax.sharding.PartitionSpec", None, None)
            rec["spec"] = repr(x)
            return rec
        if isinstance(x, (np.ndarray, np.generic)):
            rec = _record(path, "host", _type_name(x), tuple(np.shape(x)), x.dtype)
            rec["note"] = "host (NumPy) data: on no device"
            return rec
        return None

    def array(self, path: str, x: Any) -> dict[str, Any]:
        rec = _record(path, "array", "jax.Array", tuple(x.shape), x.dtype)
        if x.is_deleted():
            rec["note"] = "deleted (donated or freed): its buffers are gone"
            return rec
        sharding = x.sharding
        self.fill(rec, sharding, tuple(x.shape), x.dtype)
        rec["typed"] = _typed(x, rec["typed"])  # the value's own type (a weak type included)
        rec["fully_addressable"] = bool(x.is_fully_addressable)
        rec["array_kind"] = array_kind(x)
        if not rec["fully_addressable"]:
            rec["addressable_devices"] = sorted(int(d.id) for d in sharding.addressable_devices)
        return rec

    def fill(self, rec: dict[str, Any], sharding: Any, shape: tuple[int, ...] | None, dtype: Any) -> None:
        """Spec, mesh, memory kind, devices and (with a shape) the layout of ``sharding``."""
        jax = self.jax
        rec["sharding"] = type(sharding).__name__
        rec["memory_kind"] = getattr(sharding, "memory_kind", None)
        if isinstance(sharding, jax.sharding.NamedSharding):
            rec["spec"] = canonical_spec(sharding.spec)
            if shape is not None and dtype is not None:
                rec["typed"] = sharded_type_text(shape, dtype, sharding)
            if not isinstance(sharding.mesh, jax.sharding.Mesh):
                rec["mesh_axes"] = dict(sharding.mesh.shape)
                rec["note"] = "an abstract mesh (no devices): the layout needs a concrete mesh"
                return
            rec["mesh"] = self.mesh_id(sharding.mesh)
        device_set = sharding.device_set
        rec["num_devices"] = len(device_set)
        for d in device_set:
            self.devices.setdefault(d.id, d)
        if shape is not None:
            try:
                rec["layout"] = self.layout(sharding, shape, dtype)
            except (ValueError, TypeError, NotImplementedError, AssertionError) as e:
                rec["note"] = f"JAX cannot give this sharding's device indices: {e}"

    def box(self, path: str, box: Any) -> dict[str, Any]:
        """A Flax linen ``Partitioned`` / ``LogicallyPartitioned`` box (or other ``AxisMetadata``)."""
        jax = self.jax
        names = getattr(box, "names", None)
        value = box.unbox(apply_constraint=False) if names is None else box.value
        rec = self.leaf(path, value) or _record(path, "host", _type_name(value), None, None)
        rec["box"] = type(box).__name__
        if names is None:
            return rec
        names = tuple(names)
        spmd = sys.modules.get("flax.linen.spmd")
        logical = spmd is not None and isinstance(box, spmd.LogicallyPartitioned)
        own_mesh = getattr(box, "mesh", None)
        rules_known = True
        if logical:
            box_rules = getattr(box, "rules", None)
            rec["logical_axes"] = list(names)
            rec["rules"] = rules_json(check_rules(box_rules)) if box_rules else None
            # The rules in effect when the box was made: its own, else those given to capture or in
            # Flax's logical_axis_rules context now (Flax does not record the context in the box).
            effective = check_rules(box_rules) if box_rules else (self.rules or ())
            rules_known = bool(box_rules) or self.rules is not None
            declared = jax.sharding.PartitionSpec(*logical_to_mesh_axes(names, effective))
        else:
            declared = jax.sharding.PartitionSpec(*names)
        rec["declared_spec"] = canonical_spec(declared)
        if rec.get("layout") is not None or rec["kind"] == "array":
            if not rules_known:
                # a value already sharded under rules this capture was not told: nothing to compare with
                rec["declared_spec"] = None
            elif rec.get("spec") is not None and not _sharded_as_declared(value, declared, len(rec["shape"] or ())):
                rec["note"] = f"the value is sharded {rec['spec']}, not as the box declares ({rec['declared_spec']})"
            if logical and rec.get("mesh") is None and own_mesh is not None:
                rec["mesh"] = self.mesh_id(own_mesh)
            return rec
        mesh = own_mesh if own_mesh is not None else self.mesh
        rec["spec"] = rec["declared_spec"]
        rec["note"] = None  # the value has no sharding of its own: the box's declaration is its layout
        if mesh is None:
            rec["note"] = "no mesh: give the box a mesh, call jax.set_mesh, or pass capture(..., mesh=mesh)"
            return rec
        rec["mesh"] = self.mesh_id(mesh)
        if rec["shape"] is None:
            return rec
        try:
            sharding = jax.sharding.NamedSharding(mesh, declared)
        except (ValueError, TypeError) as e:
            rec["note"] = f"JAX refuses {rec['declared_spec']} on this mesh: {e}"
            return rec
        self.fill(rec, sharding, tuple(rec["shape"]), np.dtype(rec["dtype"]) if rec["dtype"] else None)
        return rec

    def nnx_variable(self, path: str, var: Any) -> dict[str, Any]:
        """A Flax nnx variable: its value, and the sharding names and rules in its metadata."""
        meta = dict(var.get_metadata()) if hasattr(var, "get_metadata") else dict(getattr(var, "metadata", {}))
        value = var.get_value() if hasattr(var, "get_value") else var.value
        rec = self.leaf(path, value) or _record(path, "host", _type_name(value), None, None)
        rec["box"] = f"nnx.{type(var).__name__}"
        names = meta.get("out_sharding", meta.get("sharding_names", meta.get("sharding")))
        if not isinstance(names, (tuple, list)):
            return rec
        var_rules = meta.get("sharding_rules")
        mesh = meta.get("mesh") or (self.mesh_of(rec) if rec.get("mesh") is not None else self.mesh)
        axes = set(mesh.axis_names) if mesh is not None else set()
        if var_rules or any(isinstance(n, str) and n not in axes for n in names):
            rec["logical_axes"] = list(names)
            rec["rules"] = rules_json(check_rules(var_rules)) if var_rules else None
        rec["declared_spec"] = repr(self.jax.sharding.PartitionSpec(*names))
        if rec.get("mesh") is None and mesh is not None:
            rec["mesh"] = self.mesh_id(mesh)
        return rec

    # -- meshes, devices, layouts

    def mesh_of(self, rec: dict[str, Any]) -> Any:
        return self.mesh_objects[rec["mesh"]]

    @property
    def mesh_objects(self) -> list[Any]:
        out: list[Any] = [None] * len(self.meshes)
        for mesh, i in self.mesh_index.items():
            out[i] = mesh
        return out

    def mesh_id(self, mesh: Any) -> int:
        found = self.mesh_index.get(mesh)
        if found is not None:
            return found
        for d in mesh.devices.flat:
            self.devices.setdefault(d.id, d)
        self.mesh_index[mesh] = len(self.meshes)
        self.meshes.append(
            {
                "shape": [int(s) for s in mesh.devices.shape],
                "axis_names": [str(a) for a in mesh.axis_names],
                "axis_types": [str(t.name) for t in mesh.axis_types],
                "device_ids": mesh.device_ids.tolist(),
            }
        )
        return self.mesh_index[mesh]

    def layout(self, sharding: Any, shape: tuple[int, ...], dtype: Any) -> int:
        """The index of this layout in the snapshot's table (a model's leaves share a few dozen)."""
        key = (sharding, shape, str(dtype))
        found = self.layout_index.get(key)
        if found is None:
            found = self.layout_index[key] = len(self.layouts)
            self.layouts.append(Layout.from_sharding(sharding, shape, dtype).to_json(context=False))
        return found

    def snapshot(self, name: str) -> dict[str, Any]:
        jax = self.jax
        local = jax.devices()
        # The process's devices are listed when the leaves are on them (or on none): a snapshot of
        # arrays shows the whole machine. Leaves sharded over compile-only devices (a TPU topology
        # planned from a laptop) are listed alone: the CPU device running the plan is no part of it.
        if not self.devices or any(self.devices.get(d.id) is d for d in local):
            for d in local:
                self.devices.setdefault(d.id, d)
        devs = [self.devices[i] for i in sorted(self.devices)]
        first = devs[0]
        target = target_of(first)
        coords = [getattr(d, "coords", None) for d in devs]
        # Real TPU devices have 3-D coords; CPU and GPU devices none: one column for all or none.
        table = [[int(c) for c in xyz] for xyz in coords if xyz is not None]
        out: dict[str, Any] = {
            "format": FORMAT,
            "version": VERSION,
            "name": name,
            "created": time.time(),
            "jax_version": jax.__version__,
            "process_index": int(jax.process_index()),
            "process_count": int(jax.process_count()),
            "run": None,
            "platform": str(first.platform),
            "device_kind": str(first.device_kind),
            "devices": {
                "id": [int(d.id) for d in devs],
                "process_index": [int(d.process_index) for d in devs],
                "core_on_chip": [int(getattr(d, "core_on_chip", 0) or 0) for d in devs],
                "coords": table if len(table) == len(devs) else None,
            },
            "meshes": self.meshes,
            "rules": rules_json(self.rules) if self.rules else None,
            "layouts": self.layouts,
            "leaves": self.leaves,
            "skipped": self.skipped,
            "collectives": None,
            "jit": None,
        }
        described = target.describe() if target is not None else None
        if described is not None and described["compile_only"]:
            # compile-only devices (shardscope.mesh): hosts of a slice this process does not run on. The process's
            # own CPUs (local, or a cpu:N set an earlier plan named) are no target: a capture of them is the same
            # whichever sets this process planned on before.
            out["target"] = described
        return out


def _record(path: str, kind: str, type_name: str, shape: tuple[int, ...] | None, dtype: Any) -> dict[str, Any]:
    return {
        "path": path,
        "kind": kind,
        "type": type_name,
        "box": None,
        "shape": [int(s) for s in shape] if shape is not None else None,
        "dtype": str(dtype) if dtype is not None else None,
        "sharding": None,
        "spec": None,
        "typed": None,
        "declared_spec": None,
        "logical_axes": None,
        "rules": None,
        "mesh": None,
        "mesh_axes": None,
        "memory_kind": None,
        "array_kind": None,
        "fully_addressable": None,
        "num_devices": None,
        "addressable_devices": None,
        "layout": None,
        "note": None,
    }


def _unboxed(x: Any) -> Any:
    """The value inside a Flax box or nnx variable (what jit is given), else ``x``."""
    boxes = _flax_box_types() + _nnx_variable_types()
    if boxes and isinstance(x, boxes):
        getter = getattr(x, "get_value", None)
        return getter() if callable(getter) else getattr(x, "value", x)
    return x


def _typed(x: Any, otherwise: str | None) -> str | None:
    """``x``'s own type as ``jax.typeof`` prints it, else ``otherwise`` (its sharding's)."""
    try:
        return typeof_text(x)
    except (TypeError, ValueError, AttributeError, NotImplementedError, AssertionError):
        return otherwise


def _type_name(x: Any) -> str:
    import jax

    if isinstance(x, jax.Array) and not isinstance(x, jax.core.Tracer):
        return "jax.Array"  # not the implementation class (jaxlib's ArrayImpl)
    t = type(x)
    module = t.__module__.split(".")[0]
    return f"{module}.{t.__qualname__}" if module not in ("builtins",) else t.__qualname__
