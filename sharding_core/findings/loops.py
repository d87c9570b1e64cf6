"""Collectives a loop runs more often than it needs to, read from the optimized HLO's ``while`` bodies.

* :func:`invariant_collectives` — a collective inside a loop body whose operand is the same every iteration (it
  depends on no loop-carried value that changes: only on carried values the body passes through unchanged, and
  on constants): it could run once, before the loop.
* :func:`accumulated_collectives` — a reduction (all-reduce, reduce-scatter) inside a loop body whose result is
  added into a value the loop carries (the carried value at the same tuple index feeds the body's result) and
  whose operand does not depend on that value: the
  sum of the reductions is the reduction of the sum, so it could run once, after the loop (MaxText #5056: the
  gradients of each microbatch all-reduced inside the accumulation loop).

Pure text: :mod:`sharding_core.hlo.module`'s parse and :mod:`sharding_core.hlo.program`'s loops.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sharding_core.hlo.module import Computation, Op
from sharding_core.hlo.program import ProgramFacts

REDUCTIONS = frozenset(("all-reduce", "reduce-scatter", "all-reduce-start"))
COLLECTIVES = frozenset(
    ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute", "all-reduce-start",
     "all-gather-start", "collective-permute-start", "ragged-all-to-all")
)  # fmt: skip
MAX_VISITS = 20_000
"""Instructions one walk through a body visits (a larger body is read up to here)."""


def _index(op: Op | None) -> int | None:
    if op is None or op.opcode != "get-tuple-element":
        return None
    text = op.attrs.get("index", "")
    return int(text) if text.isdigit() else None


def _carried(comp: Computation, op: Op | None) -> int | None:
    """``i`` when ``op`` is ``get-tuple-element(parameter(0)), index=i`` (through copies)."""
    for _ in range(16):
        if op is None:
            return None
        if op.opcode in ("copy", "bitcast") and op.operands:
            op = comp.by_name.get(op.operands[0])
            continue
        if op.opcode == "get-tuple-element" and op.operands:
            src = comp.by_name.get(op.operands[0])
            return _index(op) if src is not None and src.parameter_number == 0 else None
        return None
    return None


def invariant_indices(body: Computation) -> set[int]:
    """The tuple indices the body passes through unchanged (its root's element i is its parameter's element i)."""
    root = body.root
    if root is None or root.opcode != "tuple":
        return set()
    return {i for i, name in enumerate(root.operands) if _carried(body, body.by_name.get(name)) == i}


def _ancestors(body: Computation, names: Iterable[str]) -> tuple[set[int], bool]:
    """The carried indices ``names`` depend on, and whether they depend on anything else that varies (the whole
    parameter, a call whose result is not known)."""
    seen: set[str] = set()
    stack = list(names)
    indices: set[int] = set()
    opaque = False
    while stack and len(seen) < MAX_VISITS:
        name = stack.pop()
        if name in seen:
            continue
        seen.add(name)
        op = body.by_name.get(name)
        if op is None:
            continue
        k = _carried(body, op)
        if k is not None:
            indices.add(k)
            continue
        if op.opcode == "parameter":
            opaque = True
            continue
        if op.opcode in ("rng", "rng-bit-generator", "rng-get-and-update-state", "infeed", "recv"):
            opaque = True
        stack.extend(op.operands)
    return indices, opaque


def _users(body: Computation) -> dict[str, list[Op]]:
    out: dict[str, list[Op]] = {}
    for op in body.ops:
        for name in op.operands:
            out.setdefault(name, []).append(op)
    return out


def _reaches_root(body: Computation, start: Op) -> set[int]:
    """The root tuple indices the value ``start`` flows into (through anything but another collective)."""
    users = _users(body)
    root = body.root
    if root is None or root.opcode != "tuple":
        return set()
    out: set[int] = set()
    seen: set[str] = set()
    stack = [start.name]
    while stack and len(seen) < MAX_VISITS:
        name = stack.pop()
        if name in seen:
            continue
        seen.add(name)
        for user in users.get(name, ()):
            if user is root:
                out.update(i for i, o in enumerate(root.operands) if o == name)
            elif user.opcode.endswith("-done") or user.opcode not in COLLECTIVES:
                stack.append(user.name)
    return out


_PASS_THROUGH = frozenset(("copy", "bitcast", "convert", "reshape"))


def _accumulates(facts: ProgramFacts, body: Computation, k: int) -> bool:
    """Whether the body's result k is an ``add`` of its carried value k and something else (directly, or as a
    fusion whose root is an add)."""
    assert body.root is not None
    op = body.by_name.get(body.root.operands[k])
    for _ in range(16):
        if op is None or op.opcode not in _PASS_THROUGH or not op.operands:
            break
        op = body.by_name.get(op.operands[0])
    if op is None:
        return False
    carried = any(_carried(body, body.by_name.get(o)) == k for o in op.operands)
    if op.opcode == "add":
        return carried
    if op.opcode != "fusion" or not carried:
        return False
    fused = facts.module.computations.get(next(iter(op.called("calls")), ""))
    inner = fused.root if fused is not None else None
    for _ in range(16):
        if inner is None or inner.opcode not in _PASS_THROUGH or not inner.operands:
            break
        inner = fused.by_name.get(inner.operands[0]) if fused is not None else None
    return inner is not None and inner.opcode == "add"


def loop_bodies(facts: ProgramFacts) -> dict[str, Any]:
    """Each loop body's name -> its loop (:class:`sharding_core.hlo.program.Loop`)."""
    return {loop.body: loop for loop in facts.loops}


def invariant_collectives(facts: ProgramFacts) -> list[tuple[Op, Any]]:
    """(collective, its loop) for every collective in a loop body whose operands are the same every iteration."""
    found: list[tuple[Op, Any]] = []
    for body_name, loop in loop_bodies(facts).items():
        body = facts.module.computations.get(body_name)
        if body is None or (loop.trip_count is not None and loop.trip_count < 2):
            continue
        keep = invariant_indices(body)
        for op in body.ops:
            if op.opcode not in COLLECTIVES:
                continue
            indices, opaque = _ancestors(body, op.operands)
            if not opaque and indices <= keep:
                found.append((op, loop))
    return found


def accumulated_collectives(facts: ProgramFacts) -> list[tuple[Op, Any, int]]:
    """(reduction, its loop, the carried index it is added into) for every reduction in a loop body whose result
    is added into a value the loop carries, while its operand changes from one iteration to the next."""
    found: list[tuple[Op, Any, int]] = []
    for body_name, loop in loop_bodies(facts).items():
        body = facts.module.computations.get(body_name)
        if body is None or body.root is None or (loop.trip_count is not None and loop.trip_count < 2):
            continue
        keep = invariant_indices(body)
        for op in body.ops:
            if op.opcode not in REDUCTIONS:
                continue
            indices, opaque = _ancestors(body, op.operands)
            if not opaque and indices <= keep:
                continue  # the same every iteration: invariant_collectives says so
            for k in sorted(_reaches_root(body, op)):
                # added into the carried value k, which the reduced operand does not depend on (a scanned layer's
                # residual stream, x + all_reduce(f(x)), depends on x: that reduction must run every iteration;
                # a scan's stacked outputs are written, not added: dynamic-update-slice)
                if k not in keep and k not in indices and _accumulates(facts, body, k):
                    found.append((op, loop, k))
                    break
    return found
