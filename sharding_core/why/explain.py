"""Why one collective is in the compiled program: the op that asked for it, the operand it moves, the
shardings before and after, the input leaves that decided them, and one sentence built from those facts.

The facts come from two places XLA writes in one compile (:mod:`sharding_core.program.shardy`):

* the optimized HLO — the collective, its bytes and mesh axes (:mod:`sharding_core.hlo`), and the metadata
  XLA copies from the op it partitioned: ``op_name`` (``jit(f)/dot_general``) and the user's call stack
  (:mod:`sharding_core.why.frames`);
* Shardy's module after propagation (:mod:`sharding_core.why.sdy`) — every value's sharding, where each of
  its axes came from (``sdy.sharding_origins``) and each op's sharding rule.

The module has no source locations, so the op is found by kind (the JAX primitive of ``op_name``) and by the
collective's own arithmetic: an all-gather over axes ``A`` returns the moved operand's local block times
``|A|`` elements, an all-to-all or a permute returns as many as it was given, an all-reduce returns the
op's local result (XLA:CPU writes a reduce-scatter as an all-reduce and a slice, so the result's elements
with ``A`` removed count too). Among the ops and operands that fit, the one whose sharding differs from what
the op's rule requires of it is the one XLA moved (:func:`required`). The rule says why: the moved
dimension must be whole (``need_replication``), or the axis is taken by another dimension of the op (a mesh
axis can split only one dimension of a value), or the operands disagree on a contracted dimension.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

import sharding_core.why.sdy as sdy
from sharding_core.units import fmt_bytes
from sharding_core.why.frames import InstructionSource, einsum_ranks, frames_json, primitive

# The Shardy op kinds a JAX primitive lowers to (stablehlo.<primitive> when not listed).
KINDS: dict[str, tuple[str, ...]] = {
    "dot_general": ("stablehlo.dot_general", "stablehlo.dot"),
    "conv_general_dilated": ("stablehlo.convolution",),
    "scatter": ("stablehlo.scatter", "stablehlo.dynamic_update_slice"),
    "scatter-add": ("stablehlo.scatter",),
    "scatter_add": ("stablehlo.scatter",),
    "dynamic_update_slice": ("stablehlo.dynamic_update_slice", "stablehlo.scatter"),
    "dynamic_slice": ("stablehlo.dynamic_slice", "stablehlo.gather"),
    "gather": ("stablehlo.gather", "stablehlo.dynamic_slice"),
    "shard_map": ("sdy.manual_computation",),
    "reduce_sum": ("stablehlo.reduce",),
    "reduce_max": ("stablehlo.reduce",),
    "reduce_min": ("stablehlo.reduce",),
    "reduce_prod": ("stablehlo.reduce",),
    "argmax": ("stablehlo.reduce",),
    "argmin": ("stablehlo.reduce",),
    "squeeze": ("stablehlo.reshape",),
    "expand_dims": ("stablehlo.reshape", "stablehlo.broadcast_in_dim"),
    "sharding_constraint": ("sdy.sharding_constraint", "sdy.reshard"),
    "reshard": ("sdy.reshard",),
    "max": ("stablehlo.maximum",),
    "min": ("stablehlo.minimum",),
    "mul": ("stablehlo.multiply",),
    "sub": ("stablehlo.subtract",),
    "div": ("stablehlo.divide",),
    "neg": ("stablehlo.negate",),
    "pow": ("stablehlo.power",),
    "rem": ("stablehlo.remainder",),
    "select_n": ("stablehlo.select",),
    "convert_element_type": ("stablehlo.convert",),
    "split": ("stablehlo.slice",),
    "cumsum": ("stablehlo.reduce_window",),
}

# Collectives a shard_map body asks for by name (jax.lax.psum, all_gather, ppermute, ...): the program's own.
EXPLICIT = frozenset({
    "psum", "psum_invariant", "pmax", "pmin", "pmean", "all_gather", "all_gather_invariant", "all_to_all",
    "ppermute", "psum_scatter", "reduce_scatter", "pbroadcast", "ragged_all_to_all", "axis_index",
})  # fmt: skip

GATHERS = ("all-gather", "all-to-all", "collective-permute", "ragged-all-to-all", "collective-broadcast")
REDUCTIONS = ("all-reduce", "reduce-scatter")

_VERB = {
    "all-gather": "all-gathers {it} over {axes}",
    "all-to-all": "moves {it} over {axes} with an all-to-all",
    "collective-permute": "sends {it} over {axes} with a collective-permute",
    "all-reduce": "all-reduces {it} over {axes}",
    "reduce-scatter": "reduce-scatters {it} over {axes}",
    "ragged-all-to-all": "moves {it} over {axes} with a ragged all-to-all",
    "collective-broadcast": "broadcasts {it} over {axes}",
}


def verb(kind: str, it: str, axes: Sequence[str]) -> str:
    """``XLA <verb>``: what the collective does to ``it`` over ``axes``."""
    return _VERB.get(kind, kind + "s {it} over {axes}").format(it=it, axes="/".join(axes) or "no mesh axis")


@dataclasses.dataclass(frozen=True)
class Leaf:
    """An input or output of the program as the snapshot names it."""

    path: str  # "inputs/args/0/w2", "inputs/kwargs/x", "outputs/0"
    shape: tuple[int, ...]
    dtype: str
    spec: str | None  # "P('x', None)"


@dataclasses.dataclass(frozen=True)
class View:
    """What the explainer reads of one compiled program."""

    hlo: str
    module: sdy.Module | None
    partitioner: str  # "shardy" | "gspmd"
    inputs: tuple[Leaf, ...]  # kept flat inputs in parameter order: Shardy's "input: N" is inputs[N]
    outputs: tuple[Leaf, ...]  # flat outputs: "output: N"
    mesh: Mapping[str, int]  # axis -> size, mesh order
    root: str | None = None  # paths shown relative to this directory (default: the working directory)


def base_axes(axes: Sequence[str] | None) -> list[str]:
    """``['y:(1)2', 'x']`` -> ``['y', 'x']`` (sub-axes by their axis)."""
    out: list[str] = []
    for a in axes or ():
        name = a.split(":")[0]
        if name not in out:
            out.append(name)
    return out


def pad(dims: sdy.Dims | None, rank: int) -> sdy.Dims:
    d = tuple(dims or ())
    return (d + ((),) * rank)[:rank]


def local_elements(shape: Sequence[int], dims: sdy.Dims, mesh: Mapping[str, int]) -> int:
    n = 1
    for size, axes in zip(shape, pad(dims, len(shape)), strict=True):
        split = math.prod(_axis_size(a, mesh) for a in axes)
        n *= size // split if split and size % split == 0 else size
    return n


def _axis_size(axis: str, mesh: Mapping[str, int]) -> int:
    m = re.fullmatch(r"([^:]+):\((\d+)\)(\d+)", axis)
    if m:
        return int(m.group(3))
    return int(mesh.get(axis, 1))


def elements(shape_text: str) -> int:
    """Elements of an HLO shape (a tuple's arrays summed): ``(f32[1,256], f32[1,256])`` -> 512."""
    return sum(math.prod(int(d) for d in dims.split(",") if d) for dims in re.findall(r"\[([\d,]*)\]", shape_text))


def required(op: sdy.Op, k: int, module: sdy.Module) -> sdy.Dims | None:
    """The sharding op ``op`` requires of its operand ``k``: from a shard_map's in_specs, or from the op's
    sharding rule — a factor that needs replication (or is permuted) unsplit, a factor the result has as the
    result has it, a reduced factor split only over the axes every operand that has it agrees on."""
    if op.kind == "sdy.manual_computation":
        return op.in_shardings[k] if k < len(op.in_shardings) else None
    rule = op.rule
    if rule is None or k >= len(rule.operands) or not op.shardings:
        return None
    res_factors = rule.results[0] if rule.results else ()
    res_dims = pad(op.shardings[0], len(res_factors))
    by_factor = {f: res_dims[i] for i, f in enumerate(res_factors)}
    out: list[tuple[str, ...]] = []
    for f in rule.operands[k]:
        if f in rule.need_replication or f in rule.permutation:
            out.append(())
        elif f in by_factor:
            out.append(by_factor[f])
        else:
            sets = []
            for j, fs in enumerate(rule.operands):
                if f in fs and j < len(op.operands):
                    sets.append(pad(module.sharding_of(op.operands[j]), len(fs))[fs.index(f)])
            out.append(tuple(a for a in sets[0] if all(a in s for s in sets)) if sets else ())
    return tuple(out)


def _kinds(prim: str | None) -> tuple[str, ...]:
    if not prim:
        return ()
    return KINDS.get(prim, ("stablehlo." + prim,))


@dataclasses.dataclass
class Match:
    op: sdy.Op
    operand: int | None  # the moved operand; None for a reduction (the op's partial result is what moves)
    score: int


def match(
    module: sdy.Module,
    kind: str,
    axes: Sequence[str],
    elems: int,
    prim: str | None,
    taken: Sequence[tuple[int, int | None]] = (),
    ranks: tuple[int, ...] | None = None,
    in_loop: bool | None = None,
) -> Match | None:
    """The Shardy op (and operand) this collective most likely serves (see the module docstring). ``taken``:
    (op, operand) pairs already matched to an earlier collective of the same kind and line — a Python loop
    unrolled into several ops gives several alike collectives, matched to those ops in program order."""
    kinds = _kinds(prim)
    candidates = [op for op in module.ops if op.kind in kinds]
    if not candidates:
        candidates = [op for op in module.ops if op.rule is not None or op.kind == "sdy.manual_computation"]
    if ranks is not None:
        # an einsum's subscripts in the op name give its operands' and result's ranks
        fitting = [op for op in candidates if tuple(t.rank for t in (*op.operand_types, *op.result_types[:1])) == ranks]
        candidates = fitting or candidates
    if in_loop is not None:
        # a collective in a loop body comes from an op in a loop's region (a scan), and not otherwise
        placed = [op for op in candidates if (op.depth > 0) == in_loop]
        candidates = placed or candidates
    want = [a for a in axes if a in module.mesh]
    n_axes = math.prod(module.mesh[a] for a in want) or 1
    best: Match | None = None
    for op in candidates:
        if kind in REDUCTIONS:
            if not op.result_types:
                continue
            res = op.result_types[0]
            dims = pad(op.shardings[0] if op.shardings else None, res.rank)
            unsplit = tuple(tuple(a for a in d if a not in want) for d in dims)
            score = (
                2
                if elems
                in (local_elements(res.shape, dims, module.mesh), local_elements(res.shape, unsplit, module.mesh))
                else 0
            )
            carried = {
                a
                for v, t in zip(op.operands, op.operand_types, strict=False)
                for d in pad(module.sharding_of(v), t.rank)
                for a in d
            }
            if want and set(want) & carried:
                score += 1
            if op.rule is not None and op.rule.reduction:
                score += 1
            if (op.index, None) in taken:
                score -= 1
            if best is None or score > best.score:
                best = Match(op, None, score)
            continue
        for k, (v, t) in enumerate(zip(op.operands, op.operand_types, strict=False)):
            if t.rank == 0:
                continue
            dims = pad(module.sharding_of(v), t.rank)
            have = {a.split(":")[0] for d in dims for a in d}
            need = required(op, k, module)
            # (an all-to-all can also move an axis *onto* an operand: then the required side has it)
            onto = need is not None and set(want) & {a for d in need for a in d}
            if want and not set(want) & have and kind != "collective-permute" and not onto:
                continue
            ln = local_elements(t.shape, dims, module.mesh)
            expect = ln * n_axes if kind == "all-gather" else ln
            score = 2 if expect == elems else (1 if kind == "collective-permute" and elems <= ln else 0)
            if need is not None and pad(need, t.rank) != dims:
                score += 1
            if (op.index, k) in taken:
                score -= 1
            if best is None or score > best.score:
                best = Match(op, k, score)
    return best


# ------------------------------------------------------------------------------------------- origins


def origin_leaf(origin: str, view: View) -> str | None:
    m = re.fullmatch(r"(input|output): (\d+)", origin)
    if not m:
        return None
    table = view.inputs if m.group(1) == "input" else view.outputs
    i = int(m.group(2))
    return table[i].path if i < len(table) else None


def origin_words(origin: str, view: View) -> str:
    """Shardy's origin text in words, with the leaf it names."""
    if origin == "self":
        return "given here"
    leaf = origin_leaf(origin, view)
    if leaf is not None:
        return leaf
    m = re.fullmatch(r"mc_(\d+)_(input|output): (\d+)", origin)
    if m:
        specs = "in_specs" if m.group(2) == "input" else "out_specs"
        return f"shard_map #{m.group(1)}'s {specs}[{m.group(3)}]"
    m = re.fullmatch(r"constraint_(\d+)", origin)
    if m:
        return f"sharding constraint #{m.group(1)}: a with_sharding_constraint, reshard or out_sharding"
    return origin


def _value_name(value: str, module: sdy.Module, view: View) -> str:
    a = module.arg_index(value)
    if a is not None and a < len(view.inputs):
        return view.inputs[a].path
    p = module.producer(value)
    if p is not None:
        return f"{p[0].short}'s result {value}"
    return value


def _manual_operand_leaf(op: sdy.Op, n: int, module: sdy.Module, view: View) -> str | None:
    if n < len(op.operands):
        a = module.arg_index(op.operands[n])
        if a is not None and a < len(view.inputs):
            return view.inputs[a].path
    return None


def _edges_json(edges: Sequence[sdy.Edge], axes: Sequence[str]) -> list[dict[str, Any]]:
    return [
        {"step": e.step, "axis": e.axis, "source": e.source, "to": list(e.targets)}
        for e in edges
        if e.axis.split(":")[0] in axes
    ]


# ------------------------------------------------------------------------------------------- explain


def explain(
    view: View,
    collective: Mapping[str, Any],
    source: InstructionSource | None,
    taken: dict[tuple[str, str | None, str | None], list[tuple[int, int | None]]] | None = None,
) -> dict[str, Any]:
    """The ``why`` of one collective (a :func:`sharding_core.hlo.collectives.read_collectives` entry); its
    ``fixes`` are found by :mod:`sharding_core.why.fixes`. ``taken``: the matches of earlier collectives,
    by (kind, op name, line), shared across the calls for one program."""
    kind = str(collective.get("op"))
    axes = base_axes(collective.get("axes"))
    why = located(collective, source, view.partitioner, view.root)
    if why.get("kind") == "explicit":
        return why
    op_name = why["op"]
    prim = why["primitive"]
    size = _size(collective)
    module = view.module
    if module is None:
        why["kind"] = "unexplained"
        why["explanation"] = (
            f"XLA {verb(kind, 'an operand of ' + (prim or 'an op'), axes)} at {why['source'] or 'an unknown line'} "
            f"({size} per device). GSPMD propagated this program's shardings (no Shardy module), so there are no "
            "sharding origins to say which input decided it."
        )
        return why
    if not op_name:
        return _boundary(why, view, module, collective, axes, size)
    prng = "threefry" in op_name  # JAX's PRNG (its own jit(_threefry_split), ...): candidates are options
    key = (kind, op_name, why["source"])
    earlier = taken.setdefault(key, []) if taken is not None else []
    loops = "/while/body/" in op_name or "/scan/" in op_name or "/while/" in op_name
    found = match(
        module, kind, axes, elements(str(collective.get("shape", ""))), prim, earlier, einsum_ranks(op_name), loops
    )
    if found is not None:
        earlier.append((found.op.index, found.operand))
    if found is None:
        why["kind"] = "unexplained"
        why["explanation"] = (
            f"XLA {verb(kind, 'an operand of ' + str(prim), axes)} at {why['source'] or 'an unknown line'} "
            f"({size} per device); no op of that kind in Shardy's module fits it."
        )
        return why
    why["matched"] = {"value": found.op.results[0] if found.op.results else None, "op": found.op.kind}
    if found.operand is None:
        _reduction(why, view, module, found.op, axes, kind, size)
    else:
        _moved(why, view, module, found.op, found.operand, axes, kind, size)
    why["kind"] = "prng" if prng else "reshard" if found.operand is not None else "reduction"
    return why


def located(
    collective: Mapping[str, Any], source: InstructionSource | None, partitioner: str, root: str | None = None
) -> dict[str, Any]:
    """The part of a why the compiled HLO alone gives: the op that asked, its line and call stack — and
    whether the program asked for the collective itself (a shard_map's psum, all_gather, ...)."""
    frame = source.user_frame() if source is not None else None
    op_name = source.op_name if source is not None else None
    prim = primitive(op_name)
    why: dict[str, Any] = {
        "source": frame.text(root) if frame is not None else None,
        "stack": frames_json(source.user_stack(), root) if source is not None else [],
        "op": op_name,
        "primitive": prim,
        "jaxpr": None,
        "operands": [],
        "leaves": [],
        "origin": [],
        "partitioner": partitioner,
        "explanation": "",
        "fixes": [],
        "matched": None,
    }
    axes = base_axes(collective.get("axes"))
    size = _size(collective)
    if op_name and "/shard_map/" in op_name and prim in EXPLICIT:
        why["explanation"] = (
            f"The shard_map body asks for it: {prim} over {'/'.join(axes) or 'no mesh axis'} at "
            f"{why['source'] or 'its line'} ({size} per device). It is the program's own communication, not a "
            "resharding."
        )
        why["kind"] = "explicit"
        return why
    kind = str(collective.get("op"))
    where = f" at {why['source']}" if why["source"] else ""
    if op_name:
        why["explanation"] = f"XLA {verb(kind, 'an operand of ' + str(prim), axes)}{where} ({size} per device)."
    else:
        why["explanation"] = (
            f"This {kind} over {'/'.join(axes) or 'no mesh axis'} carries no HLO metadata: no op asked for it, as "
            f"XLA's relayouts at the program's edge (out_shardings) do ({size} per device)."
        )
    why["kind"] = "located"
    return why


def _size(collective: Mapping[str, Any]) -> str:
    b = collective.get("bytes")
    return fmt_bytes(int(b)) if b is not None else "unknown bytes"


def _add_leaf(why: dict[str, Any], leaf: str | None) -> None:
    if leaf and leaf not in why["leaves"]:
        why["leaves"].append(leaf)


def _origin(why: dict[str, Any], view: View, side: str, axis: str, origin: str, edges: Sequence[sdy.Edge] = ()) -> None:
    leaf = origin_leaf(origin, view)
    why["origin"].append(
        {
            "side": side,
            "axis": axis,
            "origin": origin,
            "meaning": origin_words(origin, view),
            "leaf": leaf,
            "edges": _edges_json(edges, [axis]),
        }
    )
    _add_leaf(why, leaf)


def _moved(
    why: dict[str, Any], view: View, module: sdy.Module, op: sdy.Op, k: int, axes: list[str], kind: str, size: str
) -> None:
    value = op.operands[k]
    t = op.operand_types[k]
    before = pad(module.sharding_of(value), t.rank)
    need = required(op, k, module)
    after = pad(need, t.rank) if need is not None else None
    arg = module.arg_index(value)
    leaf = view.inputs[arg].path if arg is not None and arg < len(view.inputs) else None
    why["operands"] = [
        {
            "value": value,
            "name": _value_name(value, module, view),
            "operand": k,
            "shape": list(t.shape),
            "dtype": t.dtype,
            "before": sdy.spec_text(before),
            "after": sdy.spec_text(after),
            "leaf": leaf,
        }
    ]
    # The moved operand's side: a main argument is its own leaf (Shardy names the source that agrees on the
    # axis name, which for a user-fixed argument can be a downstream consumer); else where its axes came from.
    origins = module.origins_of(value)
    for a in axes:
        if leaf is not None:
            _origin(why, view, "moved operand", a, f"input: {arg}")
        elif a in origins:
            _origin(why, view, "moved operand", a, origins[a], _producer_edges(module, value))
    # The other side: what the op wanted instead (a shard_map's in_specs; else the axes' origins on its result).
    if op.kind == "sdy.manual_computation":
        name = op.origin_name or "mc_?"
        for a in axes:
            _origin(why, view, "shard_map in_specs", a, f"{name}_input: {k}")
    else:
        res = op.origins[0] if op.origins else {}
        for a in axes:
            if a in res:
                _origin(why, view, "op result", a, res[a], op.edges)
        # operands that put the axis where the op wants it (e.g. the other side of a dot)
        for j, v in enumerate(op.operands):
            if j == k:
                continue
            vd = pad(module.sharding_of(v), op.operand_types[j].rank if j < len(op.operand_types) else 0)
            ja = module.arg_index(v)
            if ja is not None and any(a in d for d in vd for a in axes):
                _origin(why, view, f"operand {j}", next(a for a in axes if any(a in d for d in vd)), f"input: {ja}")
    why["explanation"] = _moved_sentence(why, view, module, op, k, axes, kind, size, before, after)


def _producer_edges(module: sdy.Module, value: str) -> tuple[sdy.Edge, ...]:
    p = module.producer(value)
    return p[0].edges if p is not None else ()


def _dim_of(dims: sdy.Dims, axis: str) -> int | None:
    for i, d in enumerate(dims):
        if any(a.split(":")[0] == axis for a in d):
            return i
    return None


def _moved_sentence(
    why: dict[str, Any],
    view: View,
    module: sdy.Module,
    op: sdy.Op,
    k: int,
    axes: list[str],
    kind: str,
    size: str,
    before: sdy.Dims,
    after: sdy.Dims | None,
) -> str:
    prim = why.get("primitive") or op.short
    where = f" at {why['source']}" if why.get("source") else ""
    operand = why["operands"][0]
    typed = sdy.TensorType(tuple(operand["shape"]), operand["dtype"]).text()
    maker = module.producer(op.operands[k])
    made = f", computed by {maker[0].short}" if maker is not None else ""
    name = operand["leaf"] or f"operand {k} of {prim} ({typed}{made})"
    origin_of = {o["axis"]: o["meaning"] for o in why["origin"] if o["side"] == "moved operand"}
    result_of = {o["axis"]: o["meaning"] for o in why["origin"] if o["side"] == "op result"}
    parts: list[str] = []
    for a in axes:
        d = _dim_of(before, a)
        from_text = f" (from {origin_of[a]})" if a in origin_of and origin_of[a] != name else ""
        if op.kind == "sdy.manual_computation":
            want = sdy.spec_text(after) if after is not None else "another layout"
            parts.append(
                f"{name} is {sdy.spec_text(before)}{from_text} but shard_map #{(op.origin_name or 'mc_?')[3:]} takes "
                f"it as in_specs {want}"
            )
            continue
        rule = op.rule
        factor = rule.operands[k][d] if rule is not None and d is not None and d < len(rule.operands[k]) else None
        if d is None:
            want_d = _dim_of(after or (), a)
            parts.append(
                f"{prim}{where} wants {name} split over {a} on dimension {want_d} but it is {sdy.spec_text(before)}"
                f"{from_text}"
            )
            continue
        head = f"dimension {d} of {name} is split over {a}{from_text}"
        if rule is not None and factor is not None and (factor in rule.need_replication or factor in rule.permutation):
            parts.append(f"{head}, but {prim} needs that dimension whole")
            continue
        res_dims = pad(op.shardings[0] if op.shardings else None, len(rule.results[0]) if rule and rule.results else 0)
        r = _dim_of(res_dims, a)
        res_factor = rule.results[0][r] if rule is not None and rule.results and r is not None else None
        if r is not None and res_factor != factor:
            decided = f" (decided by {result_of[a]})" if a in result_of else ""
            parts.append(
                f"{head}, but {prim} puts {a} on dimension {r} of its result{decided}, and a mesh axis can split "
                "only one dimension"
            )
            continue
        if rule is not None and factor is not None and factor in rule.reduction:
            others = [j for j, fs in enumerate(rule.operands) if j != k and factor in fs and j < len(op.operands)]
            other = _value_name(op.operands[others[0]], module, view) if others else "the other operand"
            parts.append(f"{head}, which {prim} contracts, but the matching dimension of {other} is not split over {a}")
            continue
        want = sdy.spec_text(after) if after is not None else "another layout"
        parts.append(f"{head}, but {prim} needs it as {want}")
    reason = "; ".join(parts) if parts else f"{prim} needs {name} laid out differently"
    return f"{_cap(reason)}, so XLA {verb(kind, 'it', axes)}{where} ({size} per device)."


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:] if text else text


def _reduction(
    why: dict[str, Any], view: View, module: sdy.Module, op: sdy.Op, axes: list[str], kind: str, size: str
) -> None:
    res = op.result_types[0]
    spec = sdy.spec_text(pad(op.shardings[0] if op.shardings else None, res.rank))
    why["operands"] = [
        {
            "value": op.results[0],
            "name": f"the result of {op.short}",
            "operand": None,
            "shape": list(res.shape),
            "dtype": res.dtype,
            "before": f"{spec} partial sums over {'/'.join(axes)}",
            "after": spec,
            "leaf": None,
        }
    ]
    rule = op.rule
    contracted: list[str] = []
    for j, v in enumerate(op.operands):
        if j >= len(op.operand_types):
            break
        dims = pad(module.sharding_of(v), op.operand_types[j].rank)
        for a in axes:
            d = _dim_of(dims, a)
            if d is None:
                continue
            ja = module.arg_index(v)
            origin = f"input: {ja}" if ja is not None else module.origins_of(v).get(a)
            if origin is not None:
                _origin(why, view, f"operand {j}", a, origin, _producer_edges(module, v) if ja is None else ())
            factor = (
                rule.operands[j][d]
                if rule is not None and j < len(rule.operands) and d < len(rule.operands[j])
                else None
            )
            if rule is None or factor is None or factor in rule.reduction:
                contracted.append(f"dimension {d} of {_value_name(v, module, view)} (split over {a})")
    # An output whose sharding asks for the reduced result whole: its out_sharding is on the other side.
    for i, r in enumerate(module.returned):
        p = module.producer(r)
        if r in op.results or (p is not None and op.results and op.results[0] in p[0].operands):
            _origin(why, view, "result", "-", f"output: {i}")
    prim = why.get("primitive") or op.short
    where = f" at {why['source']}" if why.get("source") else ""
    what = " and ".join(dict.fromkeys(contracted)) or "a dimension split over " + "/".join(axes)
    why["explanation"] = (
        f"The {prim}{where} sums over {what}: each device holds a partial sum of the result, so XLA "
        f"{verb(kind, 'it', axes)} ({size} per device)."
    )


def _reaches_root(hlo: str, name: str, hops: int = 8) -> bool:
    """Whether instruction ``name`` of the entry computation feeds its ROOT within a few hops."""
    at = hlo.find("\nENTRY ")
    if at < 0:
        return False
    users: dict[str, list[str]] = {}
    root = None
    for line in hlo[at:].splitlines()[1:]:
        m = re.match(r"\s*(ROOT )?%([\w.\-]+) = ", line)
        if not m:
            if line.startswith("}"):
                break
            continue
        if m.group(1):
            root = m.group(2)
        for ref in re.findall(r"%([\w.\-]+)", line[m.end() :]):
            users.setdefault(ref, []).append(m.group(2))
    frontier = [name]
    seen: set[str] = set()
    for _ in range(hops):
        if root in frontier:
            return True
        nxt = []
        for n in frontier:
            for u in users.get(n, []):
                if u not in seen:
                    seen.add(u)
                    nxt.append(u)
        frontier = nxt
    return root in frontier


_SUB_AXIS = re.compile(r"(?P<axis>[^:]+):\((?P<pre>\d+)\)(?P<size>\d+)")


def _spec_words(dims: sdy.Dims, view: View) -> str:
    """A spec with Shardy's sub-axes said in words: ``P('data', None, 'model:(1)2')`` reads ``P('data', None,
    'model:(1)2') (model:(1)2: 2 of model's 4 ways)``."""
    text = str(sdy.spec_text(dims))
    notes = []
    for d in dims:
        for a in d:
            m = _SUB_AXIS.fullmatch(a)
            if m is not None:
                total = view.mesh.get(m["axis"])
                notes.append(f"{a}: {m['size']} of {m['axis']}'s {total if total else '?'} ways")
    return f"{text} ({'; '.join(notes)})" if notes else text


def _output_words(wanted: Mapping[str, str], before: sdy.Dims, i: int) -> str:
    """What the output's sharding is: its out_sharding where the jit gives one (Shardy's origin "self" or
    "output: i"), else the sharding the output was left with, and why where a sub-axis cannot leave the program."""
    if not wanted or any(o == "self" or o.startswith("output") for o in wanted.values()):
        return "its out_sharding"
    if any(_SUB_AXIS.fullmatch(a) for d in before for a in d):
        return (
            "the output's sharding: this jit names no out_shardings for it, and an output's PartitionSpec cannot "
            "split a dimension over part of an axis"
        )
    return "the output's sharding (this jit names no out_shardings for it)"


MAX_SPLIT_WALK = 10_000
"""Values looked at walking back from an output to the op that split an axis into sub-axes."""


def _splitter(module: sdy.Module, value: str, axes: Sequence[str]) -> sdy.Op | None:
    """The op (a reshape, most often) whose result first splits one of ``axes`` into sub-axes, walking back from
    ``value`` through the ops that produce it; None when no op does."""

    def subs(dims: sdy.Dims | None) -> bool:
        return any(":" in a and a.split(":")[0] in axes for d in dims or () for a in d)

    def whole(dims: sdy.Dims | None) -> bool:
        return any(a in axes for d in dims or () for a in d)

    todo: list[str] = [value]
    seen: set[str] = set()
    while todo and len(seen) < MAX_SPLIT_WALK:
        v = todo.pop()
        if v in seen:
            continue
        seen.add(v)
        found = module.producer(v)
        if found is None or not subs(module.sharding_of(v)):
            continue
        op, _ = found
        if any(whole(module.sharding_of(o)) for o in op.operands):
            return op  # an operand holds the whole axis, the result parts of it
        todo.extend(op.operands)
    return None


def split_sentence(why: Mapping[str, Any], collective: Mapping[str, Any], line: str | None) -> str:
    """What a relayout's why adds when an op split the collective's axis into sub-axes on the way (``split_by``)."""
    axes = " and ".join(repr(a) for a in base_axes(collective.get("axes")) or ["the axis"])
    where = f"The {why['split_by']} at {line}" if line else f"A {why['split_by']}"
    return (
        f" {where} split {axes} into parts (Shardy's sub-axes); dropping {axes} from the input it came from, or a "
        f"sharding whose dimensions the {why['split_by']} keeps whole, removes the relayout."
    )


def _boundary(
    why: dict[str, Any], view: View, module: sdy.Module, collective: Mapping[str, Any], axes: list[str], size: str
) -> dict[str, Any]:
    """A collective without metadata: XLA's relayout at the program's edge, for an output whose computed
    sharding differs from its out_sharding."""
    kind = str(collective.get("op"))
    why["kind"] = "boundary"
    if _reaches_root(view.hlo, str(collective.get("name"))):
        for i, v in enumerate(module.returned):
            result = module.results[i] if i < len(module.results) else None
            t = module.type_of(v)
            rank = t.rank if t is not None else 0
            before = pad(module.sharding_of(v), rank)
            after = pad(result.sharding if result is not None else None, rank)
            if before == after:
                continue
            leaf = view.outputs[i].path if i < len(view.outputs) else f"outputs/{i}"
            why["operands"] = [
                {
                    "value": v,
                    "name": leaf,
                    "operand": None,
                    "shape": list(t.shape) if t is not None else None,
                    "dtype": t.dtype if t is not None else None,
                    "before": sdy.spec_text(before),
                    "after": sdy.spec_text(after),
                    "leaf": leaf,
                }
            ]
            # The result's sharding is its out_sharding, given there (Shardy names whichever source agrees on the
            # axis name, e.g. the shard_map that computes it: kept as "shardy").
            wanted = result.origins if result is not None else {}
            for a in axes:
                _origin(why, view, "output sharding", a, f"output: {i}")
                if wanted.get(a) not in (None, "self"):
                    why["origin"][-1]["shardy"] = wanted[a]
            # Shardy keys a sub-axis as "model:(1)2": matched to the collective's axes by its axis
            computed = {k: o for k, o in module.origins_of(v).items() if k.split(":")[0] in base_axes(axes)}
            for a, o in computed.items():
                _origin(why, view, "returned value", a, o, _producer_edges(module, v))
            came = ", ".join(dict.fromkeys(origin_words(o, view) for o in computed.values()))
            why["explanation"] = (
                f"No op asked for this {kind} (it carries no HLO metadata): it is XLA's relayout of {leaf} from "
                f"{_spec_words(before, view)}, as the program computes it{f' ({came})' if came else ''}, to "
                f"{sdy.spec_text(after)}, {_output_words(wanted, before, i)} ({size} per device)."
            )
            split = _splitter(module, v, base_axes(axes))
            if split is not None:
                why["split_by"] = split.short  # said, with its line where the jaxpr has one, by split_sentence
            return why
    why["kind"] = "unexplained"
    why["explanation"] = (
        f"This {kind} over {'/'.join(axes) or 'no mesh axis'} carries no HLO metadata (no op, no line) and does not "
        f"feed an output whose sharding changes ({size} per device)."
    )
    return why
