"""Silent waste in a compiled program: what runs, moves or is held that a one-line change removes, each a finding
in the contract's shape (:mod:`sharding_core.findings`) with ``title``, ``bytes`` (one occurrence, per device),
``repeat`` (occurrences per step, loops counted), ``share`` (of the step's collective bytes, or of the peak for
memory) and ``involved`` (the collectives or values, by name).

Kinds (each read from XLA's own output: the optimized HLO's collectives and loops, and the module entering the
partitioner — :mod:`sharding_core.program.values`):

* ``reduced_every_iteration`` — a reduction inside a loop added into a value the loop carries (MaxText #5056);
* ``loop_invariant_collective`` — a collective inside a loop whose operand is the same every iteration;
* ``gather_sliced_back`` — an all-gather whose result is only sliced back to the size it had;
* ``batch_not_split`` — the batch is split over a mesh axis that also splits the parameters, but the program's
  activations carry that axis on another dimension: every device computes the whole batch;
* ``replicated_between_split`` — a large value replicated over an axis that splits the same-shaped values it is
  made from and used by;
* ``uneven_padding`` — a large value split unevenly, padded past :data:`PADDING_SHARE`;
* ``partitioner_fallback`` — an op XLA's SPMD partitioner cannot split along the dimension it works along (a top-k
  over a split vocabulary, a cumulative sum over a split sequence, an FFT, a factorization): it gathers the whole
  dimension on every device, which then computes the op in full (vllm-project/tpu-inference #3511).

``bytes_per_step`` is ``repeat × bytes`` (for ``batch_not_split``: the collective bytes per step over that
axis). A fix is a sentence and the line to change; :mod:`sharding_core.findings.constraints` checks a
``with_sharding_constraint`` fix by recompiling.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

from sharding_core.findings import loops
from sharding_core.hlo.module import Computation, Op, parse_module
from sharding_core.hlo.program import ProgramFacts, program_facts
from sharding_core.hlo.text import HloParseError
from sharding_core.program.values import spec_axes_by_dim
from sharding_core.units import fmt_bytes
from sharding_core.why.frames import instruction_sources, is_library

REDUCED_EVERY_ITERATION = "reduced_every_iteration"
LOOP_INVARIANT = "loop_invariant_collective"
GATHER_SLICED_BACK = "gather_sliced_back"
BATCH_NOT_SPLIT = "batch_not_split"
REPLICATED_BETWEEN_SPLIT = "replicated_between_split"
UNEVEN_PADDING = "uneven_padding"
PARTITIONER_FALLBACK = "partitioner_fallback"
KINDS = (REDUCED_EVERY_ITERATION, LOOP_INVARIANT, GATHER_SLICED_BACK, BATCH_NOT_SPLIT,
         REPLICATED_BETWEEN_SPLIT, UNEVEN_PADDING, PARTITIONER_FALLBACK)  # fmt: skip
TOP_K = ("top_k", "approx_top_k")
"""JAX primitives that pick along a dimension (XLA's partitioner gathers it whole where it is split)."""
RUNNING = ("cumsum", "cumprod", "cummax", "cummin", "cumlogsumexp", "reduce_window_sum", "reduce_window_max",
           "reduce_window_min", "reduce_window")  # fmt: skip
"""JAX primitives that run along a dimension (a cumulative op lowers to a reduce-window the size of it)."""
WHOLE = ("fft", "cholesky", "triangular_solve", "eigh", "eig", "svd", "qr", "lu", "householder_product")
"""JAX primitives that need the whole of the dimensions they work on."""

LARGE_BYTES = 1 << 20
"""A value this large per device is worth a finding when replicated or padded."""
PADDING_SHARE = 0.25
"""An uneven split wasting this share of a value's shard (or more) is a finding."""
MAX_FINDINGS = 64


@dataclasses.dataclass(frozen=True)
class Inputs:
    """What the findings read: the optimized HLO, its collectives (with ``line``), the values (with ``name``),
    the mesh's axis sizes, and each input leaf as ``(path, shape, spec_axes_by_dim)``."""

    hlo: str
    collectives: Sequence[Mapping[str, Any]]
    values: Sequence[Mapping[str, Any]] | None
    axes: Mapping[str, int]
    leaves: Sequence[tuple[str, tuple[int, ...], list[list[str]]]]
    entering: str | None = None  # the module entering the partitioner (the values' names are its)


def waste_findings(inputs: Inputs) -> list[dict[str, Any]]:
    """Every finding, largest ``bytes_per_step`` first."""
    try:
        facts = program_facts(inputs.hlo)
        facts.runs  # noqa: B018 - read now: an HLO spelling the reader does not know gives no loop findings
    except (HloParseError, ValueError, KeyError, IndexError):
        facts = None
    by_name = {str(c.get("name")): c for c in inputs.collectives}
    total = sum(int(c.get("bytes") or 0) * int(c.get("repeat") or 1) for c in inputs.collectives)
    out: list[dict[str, Any]] = []
    if facts is not None:
        out += _loop_findings(facts, by_name, inputs.hlo)
        out += _gather_findings(facts, by_name)
    out += fallback_findings(inputs.collectives)
    out += batch_not_split(inputs)
    out += padding(inputs.values or (), inputs.axes)
    out += replicated_between_split(inputs)
    for f in out:
        share_of = total if f["kind"] not in (UNEVEN_PADDING, REPLICATED_BETWEEN_SPLIT) else 0
        f["share"] = round(f["bytes_per_step"] / share_of, 4) if share_of else None
    out.sort(key=lambda f: -int(f["bytes_per_step"]))
    return out[:MAX_FINDINGS]


def _describe(c: Mapping[str, Any]) -> str:
    axes = ", ".join(c.get("axes") or ()) or "no mesh axis"
    return f"{c.get('op')} {c.get('shape')} over {axes} ({c.get('name')})"


def finding(
    kind: str, title: str, source: str | None, nbytes: int, repeat: int, text: str, fix: dict[str, Any] | None,
    involved: Sequence[str], bytes_per_step: int | None = None,
) -> dict[str, Any]:  # fmt: skip
    return {
        "kind": kind,
        "title": title,
        "source": source,
        "bytes": int(nbytes),
        "repeat": int(repeat),
        "bytes_per_step": int(bytes_per_step if bytes_per_step is not None else nbytes * repeat),
        "share": None,
        "involved": [s[:400] for s in involved[:16]],
        "text": text,
        "fix": fix,
    }


def fix_of(text: str, line: str | None, bytes_after: int, *, leaf: str | None = None, spec: str | None = None,
           seconds: float | None = None, peak: int | None = None) -> dict[str, Any]:  # fmt: skip
    return {"text": text, "line": line, "leaf": leaf, "spec": spec, "bytes_after": int(bytes_after),
            "expected_seconds_after": seconds, "peak_after": peak}  # fmt: skip


def body_line(hlo: str, found: Sequence[tuple[Op, Any]]) -> dict[str, str | None]:
    """For collectives inside a loop: the line in the loop's body that led to each — the user frame just inside
    the loop's own call (``jax.lax.scan(...)``'s line, the ``while`` instruction's frame): ``g = jax.grad(loss)(w,
    x)`` in the body, not the matmul inside ``loss``. Without such a frame, the innermost user frame."""
    sources = instruction_sources(hlo, [op.name for op, _ in found] + [loop.name for _, loop in found])
    out: dict[str, str | None] = {}
    for op, loop in found:
        src = sources.get(op.name)
        users = [f for f in src.frames if not is_library(f.file)] if src is not None else []
        held = sources.get(loop.name)
        call = next((f for f in held.frames if not is_library(f.file)), None) if held is not None else None
        at = next((j for j, f in enumerate(users) if call is not None and (f.file, f.line) == (call.file, call.line)),
                  None)  # fmt: skip
        frame = users[at - 1] if at else (users[0] if users else None)
        out[op.name] = frame.text() if frame is not None else None
    return out


def _loop_findings(facts: ProgramFacts, by_name: Mapping[str, Mapping[str, Any]], hlo: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    accumulated = loops.accumulated_collectives(facts)
    invariant = loops.invariant_collectives(facts)
    where = body_line(hlo, [(op, loop) for op, loop, _ in accumulated] + invariant)
    for op, loop, _ in accumulated:
        c = by_name.get(op.name)
        if c is None:
            continue
        c = {**c, "line": where.get(op.name) or c.get("line")}
        n, repeat, trips = int(c.get("bytes") or 0), int(c.get("repeat") or 1), loop.trip_count or 1
        text = (f"{_describe(c)} runs in every one of the {trips} iterations of the loop at {_loop_line(loop)}, and "
                f"its result is added into a value the loop carries: the sum of the reductions is the reduction "
                f"of the sum, so it could run once, after the loop ({fmt_bytes(n * repeat)} per step, "
                f"{fmt_bytes(n * repeat // trips)} once). MaxText #5056 met this: gradients all-reduced per "
                f"microbatch inside the accumulation loop.")  # fmt: skip
        fix = fix_of("Accumulate the unreduced values and reduce once after the loop: under explicit sharding keep "
                     "the accumulator unreduced (P(unreduced={...}) / jax.lax.psum after the loop in a shard_map); "
                     "otherwise accumulate per-device partial sums in a shard_map and psum them after the loop",
                     c.get("line"), n * repeat // trips)  # fmt: skip
        out.append(finding(REDUCED_EVERY_ITERATION, f"{c.get('op')} every iteration of an accumulation loop",
                           c.get("line"), n, repeat, text, fix, [_describe(c)]))  # fmt: skip
    for op, loop in invariant:
        c = by_name.get(op.name)
        if c is None:
            continue
        c = {**c, "line": where.get(op.name) or c.get("line")}
        n, repeat, trips = int(c.get("bytes") or 0), int(c.get("repeat") or 1), loop.trip_count or 1
        text = (f"{_describe(c)} runs in every one of the {trips} iterations of the loop at {_loop_line(loop)}, "
                f"but its operand is the same in every iteration: it could run once, before the loop "
                f"({fmt_bytes(n * repeat)} per step, {fmt_bytes(n * repeat // trips)} once).")  # fmt: skip
        fix = fix_of("Move the collective's operand out of the loop: compute (or jax.lax.with_sharding_constraint) "
                     "the value it moves before the loop and pass it in, so it is gathered or reduced once",
                     c.get("line"), n * repeat // trips)  # fmt: skip
        out.append(finding(LOOP_INVARIANT, f"loop-invariant {c.get('op')} inside a loop", c.get("line"), n, repeat,
                           text, fix, [_describe(c)]))  # fmt: skip
    return out


def _loop_line(loop: Any) -> str:
    return f"{loop.name} ({loop.source})" if loop.source else str(loop.name)


def _users(comp: Computation) -> dict[str, list[Op]]:
    out: dict[str, list[Op]] = {}
    for op in comp.ops:
        for name in op.operands:
            out.setdefault(name, []).append(op)
    return out


def _result(comp: Computation, users: Mapping[str, list[Op]], op: Op) -> Op:
    """The op holding a collective's result (its ``-done`` for an async start)."""
    if op.opcode.endswith("-start"):
        done = [u for u in users.get(op.name, ()) if u.opcode.endswith("-done")]
        return done[0] if done else op
    return op


def _gather_findings(facts: ProgramFacts, by_name: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for comp in facts.module.computations.values():
        gathers = [op for op in comp.ops if op.opcode in ("all-gather", "all-gather-start") and op.name in by_name]
        if not gathers:
            continue
        users = _users(comp)
        # the same array gathered twice in one computation is not flagged: remat's recomputation does that by
        # design (a standard FSDP step with jax.checkpoint gathers each layer's weights twice)
        for op in gathers:
            c = by_name[op.name]
            n, repeat = int(c.get("bytes") or 0), int(c.get("repeat") or 1)
            sliced = _sliced_back(comp, users, op)
            if sliced:
                text = (f"{_describe(c)} is only sliced back ({sliced}) to the shape it had before the gather: "
                        f"{fmt_bytes(n * repeat)} per step moved to be dropped.")  # fmt: skip
                fix = fix_of("Keep the value in its sharding where it is sliced (a with_sharding_constraint on the "
                             "slice's result with the operand's spec), or slice before gathering",
                             c.get("line"), 0)  # fmt: skip
                out.append(finding(GATHER_SLICED_BACK, "all-gather sliced straight back", c.get("line"), n, repeat,
                                   text, fix, [_describe(c)]))  # fmt: skip
    return out


def primitive_of(source: str | None) -> str:
    """The JAX primitive an HLO instruction's ``op_name`` ends with: ``jit(f)/jit(cumsum)/reduce_window_sum`` →
    ``reduce_window_sum``, ``jit(f)/transpose(jvp(top_k))`` → ``top_k``."""
    last = (source or "").rsplit("/", 1)[-1]
    while "(" in last and last.endswith(")"):
        last = last[last.index("(") + 1 : -1]
    return last


def fallback_findings(collectives: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """All-gathers XLA's partitioner inserted for an op it cannot split along the dimension it works along (the
    op's own ``op_name`` on the gather says which), of :data:`LARGE_BYTES` or more."""
    out: list[dict[str, Any]] = []
    for c in collectives:
        prim = primitive_of(c.get("source"))
        if c.get("op") != "all-gather" or prim not in (*TOP_K, *RUNNING, *WHOLE):  # an async one's op is its base
            continue
        n, repeat = int(c.get("bytes") or 0), int(c.get("repeat") or 1)
        if n < LARGE_BYTES:
            continue
        dims = ", ".join(str(d) for d in c.get("dimensions") or ()) or "?"
        axes = ", ".join(c.get("axes") or ()) or "its mesh axes"
        text = (f"{prim} works along dimension {dims} of a value the program splits over {axes}; XLA's partitioner "
                f"cannot split it there, so every device gathers the whole {c.get('shape')} ({fmt_bytes(n)}"
                f"{f', {repeat} times per step' if repeat > 1 else ''}; {c.get('name')}) and computes {prim} on all "
                f"of it.")  # fmt: skip
        if prim in TOP_K:
            how = ("Take each shard's top k where the dimension is split — lax.top_k on the local block in a "
                   "shard_map — then gather only the n × k candidates (values and global indices) and take their "
                   "top k")  # fmt: skip
        elif prim in RUNNING:
            how = (f"Split another dimension of its operand instead (a with_sharding_constraint leaving dimension "
                   f"{dims} unsplit moves 1/n of the bytes), or scan in blocks in a shard_map: each shard's running "
                   f"result, then add the earlier shards' totals")  # fmt: skip
        else:
            how = (f"Split another dimension of its operand instead (a with_sharding_constraint leaving dimension "
                   f"{dims} unsplit), so each device computes its own slices of the op whole")  # fmt: skip
        out.append(finding(PARTITIONER_FALLBACK, f"partitioner fallback: {prim} over a split dimension",
                           c.get("line"), n, repeat, text, fix_of(how, c.get("line"), 0), [_describe(c)]))  # fmt: skip
    return out


def _sliced_back(comp: Computation, users: Mapping[str, list[Op]], op: Op) -> str | None:
    """The slice ops that alone use a gather's result, each back to the operand's shape; None otherwise."""
    result = _result(comp, users, op)
    readers = users.get(result.name, [])
    operand = comp.by_name.get(op.operands[0]) if op.operands else None
    if not readers or operand is None:
        return None
    want = operand.shape.split("{")[0]
    if all(u.opcode in ("slice", "dynamic-slice") and u.shape.split("{")[0] == want for u in readers):
        return ", ".join(u.name for u in readers[:3])
    return None


def _spec_axes(spec: str | None) -> list[list[str]]:
    return spec_axes_by_dim(spec) if spec else []


def batch_not_split(inputs: Inputs) -> list[dict[str, Any]]:
    """The batch split over an axis that splits parameters too, while the activations carry that axis on another
    dimension (the residual stream of a naive-FSDP decoder: tokens ``P('fsdp')``, weights split on ``fsdp``)."""
    values = inputs.values or ()
    out: list[dict[str, Any]] = []
    for axis in inputs.axes:
        if inputs.axes[axis] < 2:
            continue
        batches = {shape[0] for _, shape, dims in inputs.leaves if shape and dims and dims[0] == [axis]}
        params = [p for p, shape, dims in inputs.leaves if len(shape) >= 2 and any(axis in d for d in dims)
                  and not (dims and dims[0] == [axis] and shape[0] in batches and len(dims) <= 2 and
                           all(not d for d in dims[1:]))]  # fmt: skip
        if not batches or not params:
            continue
        moved = [
            v
            for v in values
            if len(v["shape"]) >= 2
            and v["shape"][0] in batches
            and v.get("spec")
            and axis not in (_spec_axes(v["spec"]) or [[]])[0]
            and any(axis in d for d in _spec_axes(v["spec"])[1:])
            and int(v["bytes"]) >= LARGE_BYTES // 16
        ]
        if not moved:
            continue
        out.append(_batch_finding(axis, moved, params, inputs))
    return out


def _batch_finding(
    axis: str, moved: Sequence[Mapping[str, Any]], params: Sequence[str], inputs: Inputs
) -> dict[str, Any]:
    first = moved[0]
    biggest = max(moved, key=lambda v: int(v["logical_bytes"]))
    over = [c for c in inputs.collectives if axis in (c.get("axes") or ())]
    moved_bytes = sum(int(c.get("bytes") or 0) * int(c.get("repeat") or 1) for c in over)
    dims = len(first["shape"])
    spec = "P(" + ", ".join([repr(axis), *(["None"] * (dims - 1))]) + ")"
    text = (
        f"The batch is split over {axis!r}, which also splits the parameters ({', '.join(params[:3])}), but the "
        f"partitioner moved {axis!r} off the batch: {first['op']} at {first['source']} is {first['typed']} "
        f"({first['spec']}), so every device along {axis!r} computes the whole batch ({len(moved)} values so, the "
        f"largest {biggest['typed']}); collectives over {axis!r} move {fmt_bytes(moved_bytes)} per step."
    )
    fix = fix_of(
        f"x = jax.lax.with_sharding_constraint(x, {spec}) on the value made at {first['source']} (the "
        f"residual stream): keeps the batch split over {axis!r}",
        first["source"],
        moved_bytes,
        spec=spec,
    )
    return finding(BATCH_NOT_SPLIT, f"batch not split over {axis}", first["source"], int(biggest["bytes"]), 1, text,
                   fix, [f"{v['typed']} {v['op']} at {v['source']}" for v in moved[:8]], moved_bytes)  # fmt: skip


def padding(values: Sequence[Mapping[str, Any]], axes: Mapping[str, int]) -> list[dict[str, Any]]:
    """Large values split unevenly, their shards padded past :data:`PADDING_SHARE` (one finding per line)."""
    best: dict[str, dict[str, Any]] = {}
    for v in values:
        dims = _spec_axes(v.get("spec"))
        shards = math.prod(axes.get(a, 1) for d in dims for a in d)
        if int(v["bytes"]) < LARGE_BYTES or shards < 2:
            continue
        useful = -(-int(v["logical_bytes"]) // shards)
        wasted = int(v["bytes"]) - useful
        if wasted < PADDING_SHARE * int(v["bytes"]):
            continue
        line = str(v.get("source"))
        if line in best and best[line]["bytes_per_step"] >= wasted * int(v["repeat"]):
            continue
        uneven = [f"{v['shape'][d]} over {'×'.join(a)}" for d, a in enumerate(dims) if a and
                  v["shape"][d] % math.prod(axes.get(x, 1) for x in a)]  # fmt: skip
        text = (f"{v['typed']} ({v['op']} at {v['source']}) is split unevenly ({', '.join(uneven)}): each device "
                f"holds {fmt_bytes(int(v['bytes']))} of which {fmt_bytes(wasted)} ({wasted / int(v['bytes']):.0%}) is "
                f"padding.")  # fmt: skip
        fix = fix_of(
            "Make the split dimension a multiple of the axes' size (pad it once, e.g. heads or vocabulary) "
            "or split it over an axis whose size divides it",
            v.get("source"),
            0,
        )
        best[line] = finding(UNEVEN_PADDING, "padding from an uneven split", v.get("source"), wasted,
                             int(v["repeat"]), text, fix, [f"{v['typed']} {v['op']}"])  # fmt: skip
    return list(best.values())


def replicated_between_split(inputs: Inputs) -> list[dict[str, Any]]:
    """Large values replicated over an axis that splits the same-shaped value they are made from and the one made
    from them (an all-gather and a re-split around it)."""
    if not inputs.entering or not inputs.values:
        return []
    try:
        module = parse_module(inputs.entering)
    except (HloParseError, ValueError, KeyError, IndexError):
        return []
    specs = {(v["computation"], v["name"]): v for v in inputs.values}
    out: list[dict[str, Any]] = []
    for (comp_name, name), v in specs.items():
        comp = module.computations.get(comp_name)
        op = comp.by_name.get(name) if comp is not None else None
        if op is None or int(v["bytes"]) < LARGE_BYTES or not v.get("spec"):
            continue
        have = {a for d in _spec_axes(v["spec"]) for a in d}
        around = _split_around(comp, op, v, specs, have)  # type: ignore[arg-type]
        if around is None:
            continue
        axis, before, after = around
        text = (
            f"{v['typed']} ({v['op']} at {v['source']}) is replicated over {axis!r}, while the value it is made "
            f"from ({before['typed']}, {before['op']}) and the one made from it ({after['typed']}, {after['op']}) "
            f"are split over {axis!r}: each device holds and computes {inputs.axes.get(axis, 1)}× its share."
        )
        fix = fix_of(f"jax.lax.with_sharding_constraint(x, {before['spec']}) on the value made at {v['source']}",
                     v.get("source"), 0, spec=before["spec"])  # fmt: skip
        out.append(finding(REPLICATED_BETWEEN_SPLIT, f"replicated over {axis} between values split over it",
                           v.get("source"), int(v["bytes"]), int(v["repeat"]), text, fix,
                           [f"{v['typed']} {v['op']}"]))  # fmt: skip
    return out


def _uncopied(comp: Computation, name: str) -> str:
    """The value a chain of copies copies."""
    for _ in range(16):
        op = comp.by_name.get(name)
        if op is None or op.opcode != "copy" or not op.operands:
            break
        name = op.operands[0]
    return name


def _split_around(
    comp: Computation, op: Op, v: Mapping[str, Any], specs: Mapping[tuple[str, str], Mapping[str, Any]], have: set[str]
) -> tuple[str, Mapping[str, Any], Mapping[str, Any]] | None:
    before = [specs.get((comp.name, _uncopied(comp, o))) for o in op.operands]
    names = {op.name}
    for u in comp.ops:  # the copies the partitioner's input makes of a value (text order: a copy follows its source)
        if u.opcode == "copy" and u.operands and u.operands[0] in names:
            names.add(u.name)
    after = [specs.get((comp.name, u.name)) for u in comp.ops if u.opcode != "copy" and names & set(u.operands)]
    for b in before:
        if b is None or b["shape"] != v["shape"] or not b.get("spec"):
            continue
        for axis in {a for d in _spec_axes(b["spec"]) for a in d} - have:
            for a in after:
                if a is not None and a["shape"] == v["shape"] and a.get("spec") == b["spec"]:
                    return axis, b, a
    return None


def input_leaves(signature: Any) -> list[tuple[str, tuple[int, ...], list[list[str]]]]:
    """Each input leaf as ``(path, shape, mesh axes per dimension)`` (no axes: not a NamedSharding)."""
    import jax

    flat, _ = jax.tree_util.tree_flatten_with_path(signature.in_avals)
    shardings = jax.tree_util.tree_leaves(signature.in_shardings)
    out: list[tuple[str, tuple[int, ...], list[list[str]]]] = []
    for (path, aval), sharding in zip(flat, shardings, strict=False):
        spec = getattr(sharding, "spec", None)
        dims: list[list[str]] = []
        if spec is not None:
            for entry in list(spec)[: len(aval.shape)]:
                names = entry if isinstance(entry, tuple) else (entry,)
                dims.append([str(n) for n in names if isinstance(n, str)])
        out.append((jax.tree_util.keystr(path, simple=True, separator="/"), tuple(aval.shape), dims))
    return out
