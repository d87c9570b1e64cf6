"""Two runs (kernel lab results, reshards) or snapshots side by side: which is cheaper, and why.

Each side is summarised (:func:`kernel_summary`, :func:`snapshot_summary`): the program whose costs
count (a TPU set's TPU compile when there is one, else the compiled program the run has), its
collectives with their estimates, the communication total, the roofline and HBM fit. :func:`compare`
matches the collectives up (only the same op along the same mesh axes: by source line, then size), puts the numbers side
by side and gives a verdict by the best measure both sides have: the roofline's lower bound on run
time, else the communication estimate, else — without hardware figures — the bytes the collectives
move. Every number is an estimate and says so.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from typing import Any

from sharding_core.cost.annotate import snapshot_with_estimates
from sharding_core.cost.collectives import communication, repeat_of
from sharding_core.cost.context import NO_CPU_FIGURES, figures_only
from sharding_core.cost.roofline import hbm_fit
from sharding_core.hardware import figures_for_kind
from sharding_core.snapshot.memory import memory
from sharding_core.units import fmt_bytes, fmt_seconds

TIE = 0.01
"""Relative difference under which two sides are "about the same"."""

NOTE = (
    "Estimates from public hardware figures and the formulas of How to Scale Your Model: a lower bound on "
    "run time assumes compute, memory traffic and communication overlap perfectly. Compare them with each "
    "other, not with a stopwatch."
)


def _slim(c: Mapping[str, Any]) -> dict[str, Any]:
    est = c.get("estimate") or {"seconds": None, "why": "captured before estimates existed"}
    groups = c.get("groups") or []
    pairs = c.get("pairs")
    if pairs:
        shape = f"{len(pairs)} source → target pairs"
    else:
        shape = f"{len(groups)} group{'s' if len(groups) != 1 else ''} of {len(groups[0]) if groups else 0}"
    return {
        "op": c.get("op"),
        "name": c.get("name"),
        "source": c.get("source"),
        "line": c.get("line"),
        "shape": c.get("shape"),
        "bytes": c.get("bytes"),
        "axes_text": c.get("axes_text"),
        "groups": shape,
        "fabric": est.get("fabric") or c.get("fabric"),
        "repeat": repeat_of(c),
        "seconds": est.get("seconds"),
        "expected_seconds": est.get("expected_seconds"),
        "formula": est.get("formula"),
        "why": est.get("why"),
    }


def kernel_summary(result: Mapping[str, Any], label: str) -> dict[str, Any]:
    """A kernel run's (or a reshard's) costs, from its result (``POST /api/kernels/run``'s answer)."""
    tpu = result.get("tpu") or {}
    mesh = result.get("mesh") or {}
    if tpu.get("collectives") is not None:
        program = f"TPU compile-only ({tpu.get('topology')})"
        collectives = [*tpu["collectives"], *(tpu.get("dcn") or [])]
    else:
        program = "the compiled program of the run"
        collectives = list(result.get("collectives") or [])
    roof = result.get("roofline")  # the headline program's: the TPU compile's when there is one
    shape = mesh.get("shape") or []
    names = mesh.get("axis_names") or []
    return {
        "label": label,
        "kind": "kernel",
        "title": f"{result.get('kernel')} on {result.get('devices_key')}",
        "program": program,
        "mesh": ", ".join(f"{n}={s}" for n, s in zip(names, shape, strict=False)),
        "specs": [i.get("spec") for i in result.get("inputs") or []]
        + [o.get("spec") for o in result.get("outputs") or []],
        "collectives": [_slim(c) for c in collectives],
        "communication": communication(collectives, program),
        "roofline": roof,
        "hbm": (roof or {}).get("hbm"),
        "lower_bound_seconds": (roof or {}).get("lower_bound_seconds"),
    }


def snapshot_summary(snap: Mapping[str, Any], label: str) -> dict[str, Any]:
    """A snapshot's costs: its ``inspect_jit`` collectives and the memory XLA planned per device.

    Snapshots carry no ``cost_analysis``, so there is no compute or memory time (``roofline`` is None);
    without an ``inspect_jit`` capture the memory is the captured arrays' on the busiest device.
    """
    read = snapshot_with_estimates(snap)  # today's figures, not stored ones (a plan's roofline included)
    collectives = list(read.get("collectives") or [])
    per_device = (read.get("program") or {}).get("memory") or None
    nbytes = None
    if per_device:
        nbytes = int(
            sum(int(per_device.get(k) or 0) for k in ("argument_size_in_bytes", "output_size_in_bytes",
                                                      "temp_size_in_bytes"))
            - int(per_device.get("alias_size_in_bytes") or 0)
        )  # fmt: skip
    elif snap.get("leaves"):
        nbytes = int(memory(snap)["max_bytes"])  # the arrays the snapshot holds, on the busiest device
    platform, kind = str(snap.get("platform") or ""), str(snap.get("device_kind") or "")
    hw = figures_for_kind(platform, kind)
    why = NO_CPU_FIGURES if platform == "cpu" else f"no hardware figures for {platform} devices of kind {kind!r}"
    ctx = figures_only(kind, platform, hw, why)
    hbm = hbm_fit(nbytes, ctx)
    # a compiled program (inspect_jit, a plan, a fix's program) even with no collective at all (issue 28: a fix that
    # removed them all read "captured arrays")
    compiled = bool(collectives or read.get("jit") or read.get("program"))
    totals = communication(collectives, f"inspect_jit capture on {kind or platform}" if compiled else None)
    # A plan (sharding_core.planning) has a roofline with loops counted and XLA's peak: use it.
    planned = (read.get("plan") or {}).get("roofline")
    return {
        "label": label,
        "kind": "snapshot",
        "title": str(snap.get("name") or "snapshot"),
        "program": f"inspect_jit capture on {kind or platform}" if compiled else f"captured arrays on {kind}",
        "mesh": "",
        "specs": [],
        "collectives": [_slim(c) for c in collectives],
        "communication": totals,
        "roofline": planned,
        "hbm": planned["hbm"] if planned else hbm,
        "lower_bound_seconds": planned.get("lower_bound_seconds") if planned else None,
    }


MAX_SIZE_RATIO = 16.0
"""Two collectives of one op along the same axes, from no common line, more than this far apart in bytes are
different collectives (a 128 KiB reduction is not a 500 MiB one): each stands alone."""


def _size_ratio(ca: Mapping[str, Any], cb: Mapping[str, Any]) -> float:
    x, y = int(ca.get("bytes") or 0), int(cb.get("bytes") or 0)
    if x == y:
        return 1.0
    return max(x, y) / min(x, y) if min(x, y) > 0 else float("inf")


def _kinship(ca: Mapping[str, Any], cb: Mapping[str, Any]) -> int:
    """0: made at the same line of the user's code; 1: by the same JAX op (``op_name``); 2: neither."""
    if ca.get("line") and ca.get("line") == cb.get("line"):
        return 0
    if ca.get("source") and ca.get("source") == cb.get("source"):
        return 1
    return 2


NEAREST = 16
"""Per A collective, the B collectives of its op and axes considered: up to this many from its line, from its
JAX op and nearest in size (a bound: 4,096 collectives a side never make 16 M candidate pairs)."""


def _candidates(ca: Mapping[str, Any], b: Sequence[dict[str, Any]], index: Mapping[str, Any]) -> set[int]:
    """The B collectives (indices) of ``ca``'s op and axes worth weighing: same line, same op, nearest in size."""
    key = (ca["op"], ca["axes_text"])
    out: set[int] = set()
    for field in ("line", "source"):
        if ca.get(field):
            out.update(index[field].get((*key, ca[field]), ())[:NEAREST])
    sizes, order = index["sizes"].get(key, ([], []))
    at = bisect.bisect_left(sizes, int(ca.get("bytes") or 0))
    out.update(order[max(0, at - NEAREST // 2) : at + NEAREST // 2])
    return out


def _match(a: Sequence[dict[str, Any]], b: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Collectives paired only with the same op along the same mesh axes; among several such, first those made
    at the same source line (then by the same JAX op), then the nearest in size; two from no common line more
    than :data:`MAX_SIZE_RATIO` apart in bytes are not paired. Every other collective stands alone on its side
    (A's in program order, each unmatched B after them)."""
    index: dict[str, dict[Any, Any]] = {"line": {}, "source": {}, "sizes": {}}
    for j, cb in enumerate(b):
        key = (cb["op"], cb["axes_text"])
        for field in ("line", "source"):
            if cb.get(field):
                index[field].setdefault((*key, cb[field]), []).append(j)
        index["sizes"].setdefault(key, []).append(j)
    for key, js in index["sizes"].items():
        js.sort(key=lambda j: int(b[j].get("bytes") or 0))
        index["sizes"][key] = ([int(b[j].get("bytes") or 0) for j in js], js)
    candidates: list[tuple[int, float, int, int]] = []
    for i, ca in enumerate(a):
        for j in _candidates(ca, b, index):
            kin, ratio = _kinship(ca, b[j]), _size_ratio(ca, b[j])
            if kin < 2 or ratio <= MAX_SIZE_RATIO:
                candidates.append((kin, ratio, i, j))
    pair: dict[int, int] = {}
    used: set[int] = set()
    for _, _, i, j in sorted(candidates):
        if i not in pair and j not in used:
            pair[i] = j
            used.add(j)
    rows = [_row(ca, b[pair[i]] if i in pair else None) for i, ca in enumerate(a)]
    rows.extend(_row(None, cb) for j, cb in enumerate(b) if j not in used)
    return rows


def _row(a: dict[str, Any] | None, b: dict[str, Any] | None) -> dict[str, Any]:
    def delta(key: str) -> float | None:
        if a is None or b is None or a.get(key) is None or b.get(key) is None:
            return None
        return float(b[key]) - float(a[key])

    first = a or b or {}
    return {
        "op": first.get("op"),
        "axes_text": first.get("axes_text"),
        "a": a,
        "b": b,
        "delta_seconds": delta("seconds"),
        "delta_bytes": delta("bytes"),
    }


def _verdict(a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, Any]:
    """Which side is cheaper, by the best measure both have; a side that does not fit in HBM loses."""
    notes: list[str] = []
    measures: list[tuple[str, str, float | None, float | None]] = [
        ("lower bound on run time", "seconds", a.get("lower_bound_seconds"), b.get("lower_bound_seconds")),
        ("communication estimate", "seconds", a["communication"]["seconds"], b["communication"]["seconds"]),
        ("bytes the collectives move", "bytes", a["communication"]["bytes"], b["communication"]["bytes"]),
    ]
    by, unit, ra, rb = next((m for m in measures if m[2] is not None and m[3] is not None), measures[-1])
    va, vb = float(ra or 0), float(rb or 0)
    if by == measures[-1][0]:
        notes.append("no hardware figures for both sides: compared by the bytes their collectives move")

    def fmt(v: float) -> str:
        return fmt_seconds(v) if unit == "seconds" else fmt_bytes(int(v))

    fits = [(side.get("hbm") or {}).get("fits") for side in (a, b)]
    hi = max(va, vb)
    cheaper: str | None = None if hi == 0 or abs(va - vb) <= TIE * hi else ("a" if va < vb else "b")
    ratio = (max(va, vb) / min(va, vb)) if min(va, vb) > 0 and cheaper is not None else None
    if cheaper is None:
        text = f"about the same by {by}: A {fmt(va)}, B {fmt(vb)}"
    else:
        win, lose = (va, vb) if cheaper == "a" else (vb, va)
        times = f"{ratio:.2g}× " if ratio is not None else ""
        text = f"{cheaper.upper()} is {times}cheaper by {by}: {fmt(win)} vs {fmt(lose)}"
    if fits[0] is not None and fits[1] is not None and fits[0] != fits[1]:
        cheaper = "a" if fits[0] else "b"
        loser = b if cheaper == "a" else a
        text = f"only {cheaper.upper()} fits in HBM ({loser['hbm']['text']}); by {by}: A {fmt(va)}, B {fmt(vb)}"
    for key, side in (("A", a), ("B", b)):
        roof = side.get("roofline") or {}
        if roof.get("bound"):
            notes.append(f"{key} is {roof['bound']}-bound (an estimate)")
    return {"cheaper": cheaper, "by": by, "a": va, "b": vb, "ratio": ratio, "text": text, "notes": notes}


def compare(a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, Any]:
    """``{"a", "b", "collectives", "verdict", "note"}``: two summaries side by side."""
    return {
        "a": dict(a),
        "b": dict(b),
        "collectives": _match(a["collectives"], b["collectives"]),
        "verdict": _verdict(a, b),
        "note": NOTE,
    }
