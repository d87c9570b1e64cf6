"""Fixes for a collective, each checked by compiling the program again.

Candidates come from the why's facts (:mod:`sharding_core.why.explain`): for every leaf the why names (an
input, or an output whose out_sharding asks for a relayout) and every mesh axis the collective runs along,
the specs one step away from the leaf's own — the axis dropped (replicated), moved to another dimension it
divides, replaced by a mesh axis the leaf does not use, and a 2-D leaf's dimensions swapped. A collective of
JAX's non-partitionable PRNG gets one more: ``jax_threefry_partitionable=True``.

Each candidate is compiled by the caller's ``recompile`` (in the user's process for ``inspect_jit`` and plans,
in the kernel lab's worker for kernel runs, compile-only for TPU sets) and read like the original: *all* its
collectives and its peak memory. A candidate is a fix only when the program's collectives cost less in
total — estimated seconds where the device set has hardware figures, else the bytes they move per step — so
one that removes an all-gather but adds two all-gathers is not a fix. Fixes are ranked by time and memory
together: that total and the peak, each as a share of the program's own, the peak weighed by :data:`PEAK_WEIGHT`
(a fix that removes the collectives but grows the peak 1.5x ranks after one that keeps a little and lowers the
peak), with a memory guard besides: a fix whose peak grows by more than :data:`PEAK_GROWTH` ranks after every
fix that does not (replicating a weight removes every gather and multiplies its memory).

The search is bounded (:class:`Budget`): a number of recompiles and seconds per capture, shared by all its
collectives, the costliest explained first; candidates are compiled once whichever collectives share them.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import math
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from sharding_core.cost.collectives import communication, repeat_of
from sharding_core.why.explain import base_axes, pad
from sharding_core.why.sdy import Dims, spec_text

PEAK_GROWTH = 1.5
"""A fix whose peak memory grows past this factor ranks after every fix that does not. Replicating a weight
(which removes every gather of it) grew the peak 1.67x to 2.5x in the corpus; the Megatron layout of the
issue's walkthrough (w2 split on its rows) grows a toy MLP's peak 1.33x, its activations being most of it:
1.5 tells them apart (the research's 1.25 ranked the walkthrough's fix after one that keeps a gather)."""

PEAK_WEIGHT = 0.5
"""What the peak weighs beside the collectives' cost when fixes are ranked (each a share of the program's own:
cost_after / cost_before + PEAK_WEIGHT x peak_after / peak_before, least first). Two cases bound it: issue 28's
embedding lookup, where replicating the table (collectives gone, peak 1.5x) must rank after sharding it on its
other dimension (3 % of the traffic left, peak 0.63x), needs more than 0.034; the walkthrough's Megatron fix (a
quarter of the traffic, peak 1.33x) ranking above one that halves it at the same peak needs less than 0.75."""

MAX_FIXES = 3
"""Fixes kept per collective (the best by rank)."""

THREEFRY = "jax_threefry_partitionable"


@dataclasses.dataclass(frozen=True)
class Budget:
    """How much work explaining one capture may do: recompiles and wall-clock seconds, shared by every
    collective (0 recompiles: explain without looking for fixes)."""

    recompiles: int = 8
    seconds: float = 20.0

    def json(self) -> dict[str, Any]:
        return {"recompiles": self.recompiles, "seconds": self.seconds}


NO_FIXES = Budget(0, 0.0)

DEFAULT_BUDGET = Budget()
_BUDGET: contextvars.ContextVar[Budget | None] = contextvars.ContextVar("shardscope_why_budget", default=None)


def current_budget() -> Budget:
    """The budget :func:`sharding_core.explain` and ``shardscope plan --fixes`` search with (see :func:`why_budget`)."""
    return _BUDGET.get() or DEFAULT_BUDGET


@contextlib.contextmanager
def why_budget(recompiles: int = 8, seconds: float = 20.0) -> Iterator[Budget]:
    """``with sharding_core.why_budget(recompiles=16, seconds=60): sharding_core.explain(step, *args)`` —
    how much fix-searching an explain may do (the default: 8 recompiles, 20 s per capture)."""
    if recompiles < 0 or seconds < 0:
        raise ValueError(f"a budget needs recompiles >= 0 and seconds >= 0, got {recompiles} and {seconds}")
    chosen = Budget(int(recompiles), float(seconds))
    token = _BUDGET.set(chosen)
    try:
        yield chosen
    finally:
        _BUDGET.reset(token)


@dataclasses.dataclass(frozen=True)
class Candidate:
    kind: str  # "input" (a leaf's spec), "output" (an out_sharding), "config" (a JAX option)
    leaf: str | None
    spec: str | None
    text: str
    option: tuple[str, bool] | None = None  # ("jax_threefry_partitionable", True) for a config candidate

    @property
    def key(self) -> tuple[str, str | None, str | None]:
        return (self.kind, self.leaf, self.spec)


@dataclasses.dataclass
class Outcome:
    """What a recompile gave: the program's collectives (each with ``line``, and ``estimate`` where the caller
    estimates), its peak memory, and the caller's result (a snapshot, a kernel run) for "try this fix"."""

    collectives: list[dict[str, Any]]
    peak: int | None
    result: Any = None
    error: str | None = None
    log: list[str] = dataclasses.field(default_factory=list)  # the compiler's warnings for this candidate


Recompile = Callable[[Candidate], Outcome]
Estimator = Callable[[Sequence[Mapping[str, Any]]], list[dict[str, Any]]]
"""A program's collectives -> the same with each one's ``estimate`` (the cost model's, on the caller's hardware)."""


def _as_is(collectives: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    return [dict(c) for c in collectives]


@dataclasses.dataclass(frozen=True)
class Totals:
    count: int
    bytes: int
    seconds: float | None

    @staticmethod
    def of(collectives: Sequence[Mapping[str, Any]]) -> Totals:
        t = communication(collectives)
        seconds = t["seconds"] if t["without_estimate"] == 0 else None
        return Totals(int(t["count"]), int(t["bytes"]), float(seconds) if seconds is not None else None)

    def cost(self, other: Totals) -> tuple[float, str]:
        """This program's cost in the unit both it and ``other`` have: seconds, else bytes."""
        if self.seconds is not None and other.seconds is not None:
            return self.seconds, "seconds"
        return float(self.bytes), "bytes"


# ------------------------------------------------------------------------------------------- candidates


def one_step_specs(dims: Dims, shape: Sequence[int], axes: Sequence[str], mesh: Mapping[str, int]) -> list[Dims]:
    """Specs one step from ``dims`` along ``axes``: each axis dropped, moved to another dimension it divides,
    replaced by a mesh axis the spec does not use; and a 2-D spec's dimensions swapped."""
    order = list(mesh)
    rank = len(shape)
    dims = pad(dims, rank)

    def fits(j: int, ax: tuple[str, ...]) -> bool:
        return shape[j] % math.prod(mesh.get(x, 1) for x in ax) == 0

    def ordered(ax: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(sorted(ax, key=lambda x: order.index(x) if x in order else len(order)))

    used = {a.split(":")[0] for d in dims for a in d}
    out: list[Dims] = []
    for a in axes:
        where = [i for i, d in enumerate(dims) if any(x.split(":")[0] == a for x in d)]
        base = tuple(tuple(x for x in d if x.split(":")[0] != a) for d in dims)
        if where:
            out.append(base)
        for j in range(rank):
            if where and j == where[0]:
                continue
            moved = list(base)
            moved[j] = ordered(base[j] + (a,))
            if fits(j, moved[j]):
                out.append(tuple(moved))
        for i in where:
            for b in order:
                if b not in used and b != a:
                    swapped = list(base)
                    swapped[i] = ordered(base[i] + (b,))
                    if fits(i, swapped[i]):
                        out.append(tuple(swapped))
    if rank == 2 and any(dims):
        t = (dims[1], dims[0])
        if fits(0, t[0]) and fits(1, t[1]):
            out.append(t)
    seen: set[Dims] = {dims}
    unique: list[Dims] = []
    for d in out:
        if d not in seen:
            seen.add(d)
            unique.append(d)
    return unique


def candidates(
    why: Mapping[str, Any],
    collective: Mapping[str, Any],
    leaves: Mapping[str, tuple[Dims, tuple[int, ...]]],
    mesh: Mapping[str, int],
    outputs_fixable: bool,
) -> list[Candidate]:
    """The candidates for one collective, in the order they are tried. ``leaves``: every fixable leaf's
    current spec and shape by path."""
    out: list[Candidate] = []
    if why.get("kind") in ("explicit",):
        return out
    if "threefry" in str(why.get("op") or ""):
        # JAX's original threefry PRNG splits keys with collectives when they are sharded; the partitionable
        # one (the default since JAX 0.5.0) needs none. Not a spec: a JAX option, compiled to check.
        out.append(
            Candidate(
                "config",
                None,
                None,
                f"set {THREEFRY}=True (jax.config.update): key splitting and random bits then partition without "
                "communication",
                (THREEFRY, True),
            )
        )
        return out
    axes = base_axes(collective.get("axes"))
    for leaf in why.get("leaves") or ():
        if leaf not in leaves:
            continue
        if leaf.startswith("outputs") and not outputs_fixable:
            continue
        dims, shape = leaves[leaf]
        before = spec_text(dims) or "P()"
        for d in one_step_specs(dims, shape, axes, mesh):
            spec = spec_text(d) or "P()"
            if leaf.startswith("outputs"):
                text = f"ask for {leaf} as {spec} (out_shardings) instead of {before}"
                out.append(Candidate("output", leaf, spec, text))
            else:
                text = f"shard {leaf} as {spec} instead of {before}"
                out.append(Candidate("input", leaf, spec, text))
    return out


# ------------------------------------------------------------------------------------------- search


@dataclasses.dataclass
class Tried:
    candidate: Candidate
    outcome: Outcome
    totals: Totals | None


class Search:
    """Compiles candidates within a budget, each once, and ranks them for each collective."""

    def __init__(
        self,
        recompile: Recompile,
        baseline: Sequence[Mapping[str, Any]],
        peak: int | None,
        budget: Budget,
        estimate: Estimator | None = None,
        compile_seconds: float = 0.0,
    ):
        self.recompile = recompile
        self.estimate: Estimator = estimate or _as_is
        self.baseline = Totals.of(self.estimate(baseline))
        self.baseline_collectives = list(baseline)
        self.peak = peak
        self.budget = budget
        self.started = time.perf_counter()
        self.tried: dict[tuple[str, str | None, str | None], Tried] = {}
        self.skipped = 0
        # what one more compile is expected to take: the slowest so far, at first the program's own (issue 28:
        # "--fix-seconds 300" ran 377.6 s, a compile started at 299 s of a large program's)
        self.slowest = max(0.0, compile_seconds)

    @property
    def spent(self) -> float:
        return time.perf_counter() - self.started

    def _room(self) -> bool:
        """Recompiles left, and time for one more: none is started that would end past the budget's seconds."""
        return len(self.tried) < self.budget.recompiles and self.spent + self.slowest <= self.budget.seconds

    def evaluate(self, candidate: Candidate) -> Tried | None:
        found = self.tried.get(candidate.key)
        if found is not None:
            return found
        if not self._room():
            self.skipped += 1
            return None
        t0 = time.perf_counter()
        try:
            outcome = self.recompile(candidate)
        except Exception as e:  # noqa: BLE001 - JAX refuses a spec in many ways (types, divisibility, ...)
            outcome = Outcome([], None, None, _first_line(e))
        self.slowest = max(self.slowest, time.perf_counter() - t0)
        totals = Totals.of(self.estimate(outcome.collectives)) if outcome.error is None else None
        tried = Tried(candidate, outcome, totals)
        self.tried[candidate.key] = tried
        return tried

    def fixes_for(
        self, why: Mapping[str, Any], collective: Mapping[str, Any], cands: Sequence[Candidate]
    ) -> list[Tried]:
        """The candidates that make the program's collectives cheaper, best first (see the module docstring)."""
        good: list[Tried] = []
        for c in cands:
            t = self.evaluate(c)
            if t is None or t.totals is None:
                continue
            after, _ = t.totals.cost(self.baseline)
            before, _ = self.baseline.cost(t.totals)
            if after < before:
                good.append(t)
        peak0 = self.peak or 0

        def rank(t: Tried) -> tuple[bool, float, float, int, int]:
            assert t.totals is not None
            peak = t.outcome.peak or 0
            grows = peak0 > 0 and peak > PEAK_GROWTH * peak0
            after, _ = t.totals.cost(self.baseline)
            before, _ = self.baseline.cost(t.totals)
            # time and memory together (issue 28): the collectives' cost and the peak, each as a share of the
            # program's own, the peak weighed by PEAK_WEIGHT
            share = peak / peak0 if peak0 > 0 and peak > 0 else 1.0
            score = (after / before if before > 0 else 0.0) + PEAK_WEIGHT * share
            return (grows, score, after, peak, t.totals.count)

        good.sort(key=rank)
        return good[:MAX_FIXES]

    def fix_json(self, t: Tried, collective: Mapping[str, Any], line: str | None) -> dict[str, Any]:
        """One fix as the contract spells it, with what it does to this collective and to the program."""
        assert t.totals is not None
        c = t.candidate
        op = collective.get("op")
        src = collective.get("source")
        target_before = _target_bytes(self.baseline_collectives, op, src, line)
        target_after = _target_bytes(t.outcome.collectives, op, src, line)
        unit_cost, unit = t.totals.cost(self.baseline)
        base_cost, _ = self.baseline.cost(t.totals)
        return {
            "leaf": c.leaf,
            "spec": c.spec,
            "text": c.text,
            "kind": c.kind,
            "collectives_after": t.totals.count,
            "bytes_after": t.totals.bytes,
            "seconds_after": t.totals.seconds,
            "peak_after": t.outcome.peak,
            "collectives_before": self.baseline.count,
            "bytes_before": self.baseline.bytes,
            "seconds_before": self.baseline.seconds,
            "peak_before": self.peak,
            "saved": base_cost - unit_cost,
            "ranked_by": unit,
            "target_bytes_after": target_after,
            "removes": target_after == 0 and target_before > 0,
            "halves": target_before > 0 and 2 * target_after <= target_before,
            "verified": True,
            "compiler_log": list(t.outcome.log[:8]),
        }


def _target_bytes(collectives: Sequence[Mapping[str, Any]], op: Any, source: Any, line: str | None) -> int:
    """Bytes per step of the collectives of this kind asked for by the same op at the same line."""
    return sum(
        int(c.get("bytes") or 0) * repeat_of(c)
        for c in collectives
        if c.get("op") == op and c.get("source") == source and c.get("line") == line
    )


def _first_line(e: BaseException) -> str:
    text = str(e).strip().split("\n")[0] or type(e).__name__
    return f"{type(e).__name__}: {text[:300]}"
