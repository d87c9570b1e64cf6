"""Why is this collective here, and which spec removes it.

For every collective of a compiled program — a kernel-lab run, an ``inspect_jit`` capture, a plan — a ``why``::

    {"source": "train.py:30", "op": "jit(block)/dot_general", "operands": [...], "leaves": [...],
     "origin": [...], "partitioner": "shardy" | "gspmd", "explanation": "...",
     "fixes": [{"leaf", "spec", "text", "collectives_after", "bytes_after", "seconds_after", "peak_after"}]}

read from the optimized HLO's metadata and stack frames (:mod:`.frames`) and Shardy's module after
propagation (:mod:`.sdy`, written by one compile option: :mod:`.dump`), explained by :mod:`.explain`, with
fixes found by compiling candidates again (:mod:`.fixes`) — in the user's process for ``inspect_jit`` and
plans (:mod:`.program`), in the kernel lab's worker for kernel runs (:mod:`sharding_core.kernels.runner`).

:func:`attach` is what every caller shares: it gives each collective its ``line`` and ``why``, then searches
fixes within a :class:`~.fixes.Budget`. Nothing here imports JAX at import time.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from sharding_core.cost.collectives import repeat_of
from sharding_core.why.explain import Leaf, View, explain, split_sentence
from sharding_core.why.fixes import NO_FIXES, Budget, Candidate, Estimator, Outcome, Recompile, Search, candidates
from sharding_core.why.frames import instruction_sources
from sharding_core.why.sdy import Dims

__all__ = [
    "NO_FIXES",
    "Budget",
    "Candidate",
    "Estimator",
    "Leaf",
    "Outcome",
    "Recompile",
    "View",
    "attach",
    "lines",
]

EquationLookup = Callable[[str | None, str | None], str | None]
"""(primitive, "file:line") -> the jaxpr equation's text, or None; (primitive, :data:`ANY_LINE`) -> the "file:line"
of the program's only equation of that primitive (None for none or several)."""
ANY_LINE = "*"


def lines(collectives: Sequence[dict[str, Any]], hlo: str, root: str | None = None) -> dict[str, Any]:
    """Gives each collective its ``line`` ("file:line" of the user's frame, None without metadata); returns
    the instruction sources by name for :func:`attach`."""
    sources = instruction_sources(hlo, [str(c.get("name")) for c in collectives])
    for c in collectives:
        src = sources.get(str(c.get("name")))
        frame = src.user_frame() if src is not None else None
        c["line"] = frame.text(root) if frame is not None else None
    return sources


def _ranked(collectives: Sequence[dict[str, Any]], estimated: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Costliest first: by estimated seconds per step when every collective has an estimate (``estimated``: the same
    collectives, each with its ``estimate`` where the caller estimates), else by bytes."""
    timed = all((c.get("estimate") or {}).get("seconds") is not None for c in estimated)

    def cost(k: int) -> float:
        c = estimated[k]
        if timed:
            return float(c["estimate"]["seconds"]) * repeat_of(c)
        return float(c.get("bytes") or 0) * repeat_of(c)

    return [collectives[k] for k in sorted(range(len(collectives)), key=cost, reverse=True)]


def attach(
    collectives: Sequence[dict[str, Any]],
    view: View,
    *,
    fixable: Mapping[str, tuple[Dims, tuple[int, ...]]],
    recompile: Recompile | None,
    budget: Budget,
    peak: int | None,
    outputs_fixable: bool = True,
    equation: EquationLookup | None = None,
    note: str | None = None,
    estimate: Estimator | None = None,
    compile_seconds: float = 0.0,
) -> dict[str, Any]:
    """Every collective gets ``line`` and ``why``; with a budget and ``recompile``, fixes, ranked by the seconds
    ``estimate`` puts on a program's collectives (the cost model's, where the caller has hardware figures; else by
    bytes); ``compile_seconds`` (the program's own compile) is what the first candidate is expected to take: the
    search starts no compile it expects to end past the budget's seconds. Returns the search's summary and the
    results of the fixes kept (``results``: what each fix's ``result`` index points at)."""
    t0 = time.perf_counter()
    sources = lines(collectives, view.hlo, view.root)
    taken: dict[tuple[str, str | None, str | None], list[tuple[int, int | None]]] = {}
    for c in collectives:
        why = explain(view, c, sources.get(str(c.get("name"))), taken)
        if equation is not None and why.get("source"):
            try:
                why["jaxpr"] = equation(why.get("primitive"), why["source"])
            except Exception:  # noqa: BLE001 - the equation is a nicety: a trace that fails leaves it out
                why["jaxpr"] = None
        if why.get("split_by"):
            try:  # the line of the program's only equation of that primitive (a reshape), where there is one
                at = equation(str(why["split_by"]), ANY_LINE) if equation is not None else None
            except Exception:  # noqa: BLE001 - as above
                at = None
            why["split_line"] = at
            why["explanation"] += split_sentence(why, c, at)
        if note:
            why["note"] = note
        c["why"] = why
    explained = time.perf_counter() - t0
    summary: dict[str, Any] = {
        "partitioner": view.partitioner,
        "budget": budget.json(),
        "explain_seconds": explained,
        "recompiles": 0,
        "search_seconds": 0.0,
        "not_tried": 0,
        "searched": bool(recompile is not None and budget.recompiles > 0),
    }
    results: list[Any] = []
    if recompile is None or budget.recompiles <= 0:
        for c in collectives:
            c["why"].setdefault("fixes_note", "fixes not searched (explain with a recompile budget to find them)")
        return {"summary": summary, "results": results}
    search = Search(recompile, collectives, peak, budget, estimate, compile_seconds)
    index: dict[tuple[str, str | None, str | None], int] = {}
    for c in _ranked(collectives, search.estimate(collectives)):
        _fix(c, search, candidates(c["why"], c, fixable, view.mesh, outputs_fixable), index, results)
    summary.update(recompiles=len(search.tried), search_seconds=search.spent, not_tried=search.skipped)
    return {"summary": summary, "results": results}


def _fix(
    c: dict[str, Any],
    search: Search,
    cands: Sequence[Candidate],
    index: dict[tuple[str, str | None, str | None], int],
    results: list[Any],
) -> None:
    """One collective's fixes: its candidates compiled within what is left of the budget, the cheaper kept (each
    fix's ``result`` an index into ``results``, the programs the fixes compiled), and what the search did."""
    why = c["why"]
    budget = search.budget
    if not cands:
        why["fixes_note"] = "no candidate: " + (
            "the program asks for this collective itself"
            if why.get("kind") == "explicit"
            else "no input or output leaf of this program decided it"
        )
        return
    before = search.skipped
    found = search.fixes_for(why, c, cands)
    fixes = []
    for t in found:
        fix = search.fix_json(t, c, c.get("line"))
        if t.outcome.result is not None:
            key = t.candidate.key
            if key not in index:
                index[key] = len(results)
                results.append(t.outcome.result)
            fix["result"] = index[key]
        fixes.append(fix)
    why["fixes"] = fixes
    tried = sum(1 for k in (x.key for x in cands) if k in search.tried)
    refused = [
        search.tried[x.key].outcome.error for x in cands if x.key in search.tried and search.tried[x.key].outcome.error
    ]
    why["tried"] = {"candidates": len(cands), "compiled": tried, "refused": len(refused), "improving": len(fixes)}
    if search.skipped > before:
        why["fixes_note"] = (
            f"{search.skipped - before} candidate(s) not compiled: the budget "
            f"({budget.recompiles} recompiles, {budget.seconds:g} s) was spent"
            + (
                f", or too little of it was left for a compile of {search.slowest:.3g} s"
                if len(search.tried) < budget.recompiles
                else ""
            )
        )
    elif not fixes:
        why["fixes_note"] = f"none of the {len(cands)} candidates made the program's collectives cheaper"


def outcome_of(
    collectives: list[dict[str, Any]], hlo: str, peak: int | None, result: Any = None, root: str | None = None
) -> Outcome:
    """A recompile's :class:`~.fixes.Outcome`: its collectives with their ``line``."""
    lines(collectives, hlo, root)
    return Outcome(collectives, peak, result)
