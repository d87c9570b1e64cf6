"""Fitting the step model's constants to published runs, and scoring them: the training split only.

The compiled facts of each run of :mod:`sharding_core.cost.runs` (``bench/run_facts.json.gz``, written by
``bench/bench_steps.py``: each run's schedule, collectives and work as a plan holds them) are replayed by
:mod:`sharding_core.cost.step` under candidate constants; the fit minimises the squared log error
``Σ log(expected / measured)²`` over the **training** runs, one constant at a time over a fixed grid (three
rounds, from a fixed start), so a refit from the same facts gives the same constants (``tests/
test_cost_step.py`` refits and compares with :data:`sharding_core.cost.step.FITTED`). Held-out runs are only
ever predicted. Leave-one-source-out refits without each training source and predicts its runs.

The collectives' expected times are the cost model's of today (re-estimated from the stored groups), so a change
to the collective fits moves these predictions and a refit says by how much.
"""

from __future__ import annotations

import base64
import dataclasses
import math
import statistics
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from sharding_core.cost.context import context_for
from sharding_core.cost.runs import TRAIN
from sharding_core.cost.step import Efficiency, _Replay, collective_seconds, hw_for
from sharding_core.devices import parse_devices

# The grid each constant is searched on (lowest, highest, step) and the fit's start.
GRID: dict[str, tuple[float, float, float]] = {
    "matmul": (0.30, 1.00, 0.005),
    "memory": (0.10, 1.00, 0.01),
    "kernel": (0.05, 1.00, 0.01),
    "launch": (0.0, 20e-6, 0.5e-6),
}
START = Efficiency(matmul=0.8, memory=0.8, kernel=0.5, launch=2e-6)
ROUNDS = 3


def encode_groups(groups: Sequence[Sequence[int]]) -> dict[str, Any]:
    """A collective's device groups, compactly: equal-sized rows of int32 ids, zlib-compressed, base64."""
    sizes = {len(g) for g in groups}
    arr = np.asarray([i for g in groups for i in g], dtype="<i4")
    return {"size": sizes.pop() if len(sizes) == 1 else 0, "rows": [len(g) for g in groups] if len(sizes) > 1 else None,
            "ids": base64.b64encode(zlib.compress(arr.tobytes(), 9)).decode()}  # fmt: skip


def decode_groups(enc: Mapping[str, Any]) -> list[list[int]]:
    ids = np.frombuffer(zlib.decompress(base64.b64decode(enc["ids"])), dtype="<i4").tolist()
    if enc.get("rows"):
        out, at = [], 0
        for n in enc["rows"]:
            out.append(ids[at : at + n])
            at += n
        return out
    size = int(enc["size"]) or len(ids)
    return [ids[i : i + size] for i in range(0, len(ids), size)] if ids else []


@dataclasses.dataclass
class Prepared:
    """One run's facts, ready to replay under any constants."""

    id: str
    source: str
    split: str
    measured: float
    schedule: Mapping[str, Any]
    durations: dict[str, float]
    hw: Any
    lower: float  # the roofline's lower bound (at 100 % MFU)
    upper_parts: float  # the collectives' expected total (the serial sum's communication)


def prepare(run: Any, snap: Mapping[str, Any]) -> Prepared:
    """A run (:class:`sharding_core.cost.runs.Run`) and its plan with today's figures (the snapshot after
    :func:`sharding_core.cost.annotate.snapshot_with_estimates`)."""
    plan = snap["plan"]
    ctx = context_for(parse_devices(run.devices, slices=run.slices))
    if ctx.hardware is None:
        raise ValueError(f"{run.devices} has no hardware figures: {ctx.why}")
    schedule = plan["schedule"]
    durations, _ = collective_seconds(schedule, snap.get("collectives") or [])
    st = plan.get("step_time") or {}
    lower = float(st.get("lower_bound_seconds") or 0.0)
    comm = float(st.get("communication_expected_seconds") or 0.0)
    hw = hw_for(ctx.hardware, schedule)
    return Prepared(run.id, run.source, run.split, run.measured_seconds, schedule, durations, hw, lower, comm)


def predict(p: Prepared, eff: Efficiency) -> float:
    """The expected step of a prepared run under ``eff`` (as :func:`sharding_core.cost.step.expected_step`
    gives it, never below the roofline's lower bound)."""
    replay = _Replay(p.schedule, p.durations, p.hw, eff)
    return max(replay.run(str(p.schedule.get("entry")), 0.0, 1.0), p.lower)


def loss(preps: Iterable[Prepared], eff: Efficiency) -> float:
    return sum(math.log(predict(p, eff) / p.measured) ** 2 for p in preps)


def fit(preps: Sequence[Prepared], start: Efficiency = START) -> Efficiency:
    """The constants minimising the squared log error over ``preps`` (coordinate search on :data:`GRID`)."""
    eff = start
    if not preps:
        return eff
    for _ in range(ROUNDS):
        for name, (lo, hi, step) in GRID.items():
            n = round((hi - lo) / step)
            values = [round(lo + i * step, 12) for i in range(n + 1)]
            best = min(values, key=lambda v: (loss(preps, dataclasses.replace(eff, **{name: v})), v))
            eff = dataclasses.replace(eff, **{name: best})
    return eff


def fit_training(preps: Sequence[Prepared]) -> Efficiency:
    """The fit on the training split of ``preps`` (the runs whose source is declared ``train``): the held-out runs
    are dropped here, before anything reads their measurements."""
    return fit([p for p in preps if p.split == TRAIN])


@dataclasses.dataclass(frozen=True)
class Scored:
    id: str
    source: str
    split: str
    measured: float
    lower: float
    expected: float

    @property
    def error(self) -> float:
        return (self.expected - self.measured) / self.measured


def score(preps: Sequence[Prepared], eff: Efficiency) -> list[Scored]:
    return [Scored(p.id, p.source, p.split, p.measured, p.lower, predict(p, eff)) for p in preps]


def leave_one_source_out(preps: Sequence[Prepared], train: Callable[[Prepared], bool]) -> list[Scored]:
    """Each training source's runs predicted by a fit on the other training sources."""
    out: list[Scored] = []
    sources = sorted({p.source for p in preps if train(p)})
    for source in sources:
        rest = [p for p in preps if train(p) and p.source != source]
        eff = fit(rest)
        out.extend(score([p for p in preps if train(p) and p.source == source], eff))
    return out


def summary(scored: Sequence[Scored]) -> dict[str, float | int | None]:
    errors = [abs(s.error) for s in scored]
    return {
        "runs": len(errors),
        "median": statistics.median(errors) if errors else None,
        "worst": max(errors) if errors else None,
        "above": sum(1 for s in scored if s.error > 0),
    }
