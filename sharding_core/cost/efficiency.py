"""Expected times: one efficiency and one latency per fabric, fitted to published measurements.

A collective's estimate is a few *terms* — one per fabric it crosses (:class:`sharding_core.cost.collectives.Part`):
a bandwidth time from the spec sheet and a number of latency steps. The **bound** takes each term at its
spec-sheet bandwidth and latency (the book's formulas); the **expected** time takes the α–β model nccl-tests
describes (``doc/PERFORMANCE.md``: "time ... roughly equal to overhead + size / bw")::

    expected term = bandwidth time / efficiency + steps · latency per step

with one ``(efficiency, latency per step)`` pair per fabric: ICI with wraparound (``ici_torus``), ICI without
(``ici_line``), DCN, NVLink, and the network between GPU hosts (InfiniBand/RoCE). The pairs are fitted to the
rows of :data:`sharding_core.cost.measurements.MEASUREMENTS` (least squares on log(expected / measured), a
grid fine enough to be exact to the digits kept, the other fabrics held at their values, twice round) and
written below; ``tests/test_cost_measured.py`` refits and fails when the constants drift from the table.
A fabric no published measurement covers borrows the closest one's fit and says so (``borrowed``).

:func:`fit_nccl_tests` refits the NVLink or network pair from a user's own ``all_reduce_perf`` output.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from sharding_core.cost.collectives import estimate_collective
from sharding_core.cost.context import context_for
from sharding_core.cost.measurements import MEASUREMENTS
from sharding_core.cost.profiles import BORROW, KEYS, PROFILES, FabricProfile
from sharding_core.devices import parse_devices
from sharding_core.errors import ShardingError
from sharding_core.hardware import GPU_FIGURES, GpuFigures, figures_for_kind
from sharding_core.units import fmt_bytes, fmt_seconds

EFFICIENCY_GRID = np.round(np.arange(0.20, 1.6001, 0.005), 3)
LATENCY_GRID = np.round(np.arange(0.0, 40.0001, 0.1), 1) * 1e-6


# ------------------------------------------------------------------------------------------------ fit


@dataclasses.dataclass(frozen=True)
class Term:
    key: str
    bandwidth_seconds: float
    steps: int


@dataclasses.dataclass(frozen=True)
class Row:
    """A measurement as the fit sees it: its estimate's terms, how they combine, and the measured time."""

    terms: tuple[Term, ...]
    combine: str  # "sum" or "max"
    measured: float
    bound: float


def terms_of(estimate: Mapping[str, Any]) -> tuple[tuple[Term, ...], str]:
    """The terms an estimate was built from (``inputs.terms``) and how they combine."""
    inputs = estimate.get("inputs") or {}
    terms = tuple(Term(t["key"], float(t["bandwidth_seconds"]), int(t["steps"])) for t in inputs.get("terms") or ())
    return terms, str(inputs.get("combine") or "sum")


def expected_of(row: Row, profiles: Mapping[str, FabricProfile]) -> float:
    values = [
        t.bandwidth_seconds / profiles[t.key].efficiency + t.steps * profiles[t.key].step_latency for t in row.terms
    ]
    if not values:
        return 0.0
    return float(sum(values) if row.combine == "sum" else max(values))


def _fit_one(rows: Sequence[Row], key: str, profiles: Mapping[str, FabricProfile]) -> tuple[float, float]:
    """The (efficiency, latency) on the grids that minimise Σ log²(expected / measured) over ``rows``, the
    other fabrics held at ``profiles``."""
    eff = EFFICIENCY_GRID[:, None]
    lat = LATENCY_GRID[None, :]
    loss = np.zeros((len(EFFICIENCY_GRID), len(LATENCY_GRID)))
    for row in rows:
        mine = [t for t in row.terms if t.key == key]
        others = [
            t.bandwidth_seconds / profiles[t.key].efficiency + t.steps * profiles[t.key].step_latency
            for t in row.terms
            if t.key != key
        ]
        value: np.ndarray = np.zeros(loss.shape)
        for t in mine:
            value = value + t.bandwidth_seconds / eff + t.steps * lat
        if others:
            rest = sum(others) if row.combine == "sum" else max(others)
            value = value + rest if row.combine == "sum" else np.maximum(value, rest)
        loss += np.log(np.maximum(value, 1e-30) / row.measured) ** 2
    i, j = np.unravel_index(int(np.argmin(loss)), loss.shape)
    return float(EFFICIENCY_GRID[i]), float(LATENCY_GRID[j])


def fit_profiles(rows: Sequence[Row], start: Mapping[str, FabricProfile] | None = None) -> dict[str, FabricProfile]:
    """One profile per fabric from ``rows`` (coordinate descent: each fabric in turn, twice round); fabrics
    no row covers borrow :data:`BORROW`'s fit."""
    profiles = dict(start or {k: FabricProfile(1.0, 0.0) for k in KEYS})
    covered = [k for k in KEYS if any(t.key == k for r in rows for t in r.terms)]
    for _ in range(2):
        for key in covered:
            mine = [r for r in rows if any(t.key == key for t in r.terms)]
            eff, lat = _fit_one(mine, key, profiles)
            profiles[key] = FabricProfile(eff, lat, rows=len(mine))
    for key, lender in BORROW.items():
        if key not in covered:
            profiles[key] = dataclasses.replace(profiles[lender], rows=0, borrowed=lender)
    return profiles


def measured_rows() -> list[tuple[Any, Row]]:
    """The published measurements with their estimates' terms."""
    out = []
    for m in MEASUREMENTS:
        devset = m.devset()
        est = estimate_collective(m.collective(devset), context_for(devset))
        terms, combine = terms_of(est)
        out.append((m, Row(terms, combine, m.seconds, float(est["bound_seconds"]))))
    return out


def error(predicted: float, measured: float) -> float:
    """Signed relative error of a prediction: (predicted − measured) / measured."""
    return (predicted - measured) / measured


def summary(errors: Sequence[float]) -> dict[str, float]:
    """Median and worst |error| of a list of relative errors."""
    a = np.abs(np.asarray(errors, dtype=float))
    return {"median_abs": float(np.median(a)), "worst_abs": float(a.max()), "rows": len(a)}


def evaluate(profiles: Mapping[str, FabricProfile] | None = None) -> dict[str, Any]:
    """Every measurement row with its bound and expected time and their errors; medians and worst cases, and
    the leave-one-out errors of the expected time (each row predicted by a fit made without it)."""
    profiles = profiles if profiles is not None else PROFILES
    pairs = measured_rows()
    rows = [r for _, r in pairs]
    table = []
    loo = []
    for i, (m, row) in enumerate(pairs):
        expected = expected_of(row, profiles)
        without = fit_profiles(rows[:i] + rows[i + 1 :])
        loo.append(error(expected_of(row, without), row.measured))
        table.append(
            {
                "name": m.name,
                "devices": m.devices,
                "op": m.op,
                "bytes": m.bytes,
                "fabrics": sorted({t.key for t in row.terms}),
                "measured_seconds": row.measured,
                "bound_seconds": row.bound,
                "expected_seconds": expected,
                "bound_error": error(row.bound, row.measured),
                "expected_error": error(expected, row.measured),
                "url": m.url,
                "read": m.read,
            }
        )
    return {
        "rows": table,
        "bound": summary([r["bound_error"] for r in table]),
        "expected": summary([r["expected_error"] for r in table]),
        "expected_leave_one_out": summary(loo),
        "profiles": {k: p.json() for k, p in profiles.items()},
    }


# ------------------------------------------------------------------------------- nccl-tests refit

MAX_NCCL_TEXT_CHARS = 65_536
"""A pasted ``all_reduce_perf`` output longer than this is refused (a full 8 B – 16 GiB sweep is ~10 kB; the
limit keeps any JSON spelling of the text under the 1 MiB request body)."""
MAX_NCCL_ROWS = 64
"""Data rows in one pasted output (a sweep by factors of 2 from 8 B to 16 GiB has 32)."""

_RANK = re.compile(
    r"^#\s+Rank\s+(?P<rank>\d{1,6})\s+(?:Group\s+\d+\s+)?Pid\s+\d+\s+on\s+(?P<host>\S{1,255})\s+device\s+\d+\s+"
    r"\[[^\]]{0,64}\]\s+(?P<kind>.{1,128}?)\s*$"
)
_ROW = re.compile(
    r"^\s*(?P<size>\d{1,15})\s+(?P<count>\d{1,15})\s+(?P<type>[a-z0-9_]{1,16})\s+(?P<redop>[a-z]{1,8})\s+"
    r"(?P<root>-?\d{1,6})\s+(?P<time>\d{1,12}(?:\.\d{1,6})?)\s+(?P<algbw>\d{1,9}(?:\.\d{1,6})?)\s+"
    r"(?P<busbw>\d{1,9}(?:\.\d{1,6})?)\s+(?P<wrong>\S{1,12})\b"
)


BAD_NCCL_OUTPUT = "bad_nccl_output"
NCCL_HINT = (
    "paste the whole output of nccl-tests' all_reduce_perf (e.g. all_reduce_perf -b 8 -e 8G -f 2 -g 1): its "
    "'#  Rank ...' lines and its data rows"
)


class NcclParseError(ShardingError):
    """The pasted text is not an ``all_reduce_perf`` output this parser reads (it says where and why)."""

    def __init__(self, message: str, hint: str | None = NCCL_HINT) -> None:
        super().__init__(BAD_NCCL_OUTPUT, message, hint)


@dataclasses.dataclass(frozen=True)
class NcclRun:
    """What an ``all_reduce_perf`` output says: its ranks (host and device kind each) and (size, time) rows."""

    ranks: int
    hosts: int
    device_kind: str
    rows: tuple[tuple[int, float], ...]  # (bytes per rank, out-of-place seconds)


def parse_all_reduce_perf(text: str) -> NcclRun:
    """Reads nccl-tests' ``all_reduce_perf`` output strictly: the ``# Rank`` lines (ranks, hosts, GPU kind)
    and the data rows (size, count, type, redop, root, out-of-place time, algbw, busbw, #wrong, ...).
    Anything that looks like a data row but does not parse is an error, never skipped."""
    if len(text) > MAX_NCCL_TEXT_CHARS:
        raise NcclParseError(f"the text has {len(text)} characters; at most {MAX_NCCL_TEXT_CHARS} are read")
    ranks: dict[int, tuple[str, str]] = {}
    rows: list[tuple[int, float]] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line:
            continue
        if line.startswith("#"):
            m = _RANK.match(line)
            if m:
                ranks[int(m.group("rank"))] = (m.group("host"), m.group("kind").strip())
            continue
        if not line[0].isdigit():
            continue  # NCCL's own log lines, mpirun's, the command
        m = _ROW.match(line)
        if not m:
            raise NcclParseError(f"line {number} starts like a data row but is not one: {line[:80]!r}")
        if m.group("redop") != "sum":
            raise NcclParseError(f"line {number}: reduction {m.group('redop')!r}; the fit reads all_reduce_perf sums")
        if len(rows) >= MAX_NCCL_ROWS:
            raise NcclParseError(f"more than {MAX_NCCL_ROWS} data rows")
        seconds = float(m.group("time")) / 1e6
        if seconds <= 0:
            raise NcclParseError(f"line {number}: a time of {m.group('time')} us")
        rows.append((int(m.group("size")), seconds))
    if not ranks:
        raise NcclParseError("no '#  Rank N Group G Pid P on HOST device D [BUS] KIND' lines: paste the whole output")
    if sorted(ranks) != list(range(len(ranks))):
        raise NcclParseError(f"rank lines are not 0..{len(ranks) - 1}")
    if not rows:
        raise NcclParseError("no data rows (size count type redop root time algbw busbw #wrong ...)")
    kinds = {k for _, k in ranks.values()}
    if len(kinds) != 1:
        raise NcclParseError(f"the ranks run on different GPU kinds: {sorted(kinds)}")
    hosts = len({h for h, _ in ranks.values()})
    return NcclRun(len(ranks), hosts, kinds.pop(), tuple(rows))


def fit_nccl_tests(text: str, gpu: str | None = None) -> dict[str, Any]:
    """Refits the NVLink profile (one host) or the network profile (several) from ``all_reduce_perf`` output.

    The run's GPUs are found from its ``# Rank`` lines (``gpu`` — a kind of the hardware table, e.g. ``h100``
    — overrides); every row becomes an all-reduce of ``size`` bytes over all ranks on ``gpu:KIND:HxG``. Returns
    the fitted profile, the shipped one, and each row's measured, bound and expected times (both profiles).
    """
    run = parse_all_reduce_perf(text)
    hw: GpuFigures | None
    if gpu is not None:
        hw = GPU_FIGURES.get(gpu)
        if hw is None:
            raise NcclParseError(f"no GPU kind {gpu!r}; the hardware table has {', '.join(GPU_FIGURES)}")
    else:
        found = figures_for_kind("gpu", run.device_kind)
        if not isinstance(found, GpuFigures):
            raise NcclParseError(
                f"the hardware table has no figures for {run.device_kind!r}; name the kind (one of "
                f"{', '.join(GPU_FIGURES)})"
            )
        hw = found
    if run.ranks % run.hosts:
        raise NcclParseError(f"{run.ranks} ranks do not split evenly over {run.hosts} hosts")
    devset = parse_devices(f"gpu:{hw.name}:{run.hosts}x{run.ranks // run.hosts}")
    ctx = context_for(devset)
    ids = [[d.id for d in devset.devices]]
    rows = []
    for size, seconds in run.rows:
        est = estimate_collective({"op": "all-reduce", "bytes": size, "groups": ids}, ctx)
        if est.get("seconds") is None:
            raise NcclParseError(f"no estimate for {hw.title}: {est.get('why')}")
        terms, combine = terms_of(est)
        rows.append(Row(terms, combine, seconds, float(est["bound_seconds"])))
    key = "network" if run.hosts > 1 else "nvlink"
    fitted = dict(PROFILES)
    for _ in range(2):
        eff, lat = _fit_one(rows, key, fitted)
        fitted[key] = FabricProfile(eff, lat, rows=len(rows))
    table = [
        {
            "bytes": size,
            "measured_seconds": row.measured,
            "bound_seconds": row.bound,
            "expected_seconds": expected_of(row, PROFILES),
            "refit_seconds": expected_of(row, fitted),
        }
        for (size, _), row in zip(run.rows, rows, strict=True)
    ]
    return {
        "gpu": hw.name,
        "hardware": hw.title,
        "devices": devset.key,
        "ranks": run.ranks,
        "hosts": run.hosts,
        "fabric": key,
        "profile": fitted[key].json(),
        "shipped_profile": PROFILES[key].json(),
        "rows": table,
        "errors": {
            "bound": summary([error(r["bound_seconds"], r["measured_seconds"]) for r in table]),
            "shipped": summary([error(r["expected_seconds"], r["measured_seconds"]) for r in table]),
            "refit": summary([error(r["refit_seconds"], r["measured_seconds"]) for r in table]),
        },
    }


def markdown_table(result: Mapping[str, Any] | None = None) -> str:
    """The measurement table with its errors, as ``docs/cost-model.md`` prints it (a test checks it is current)."""
    result = result if result is not None else evaluate()
    lines = [
        "| # | measurement (source) | devices | bytes | fabrics | measured | bound | expected | bound error | "
        "expected error |",
        "|---:|---|---|---:|---|---:|---:|---:|---:|---:|",
    ]
    for k, r in enumerate(result["rows"], start=1):
        lines.append(
            f"| {k} | [{r['name']}]({r['url']}) | `{r['devices']}` | {fmt_bytes(r['bytes'])} | "
            f"{', '.join(r['fabrics'])} | {fmt_seconds(r['measured_seconds'])} | {fmt_seconds(r['bound_seconds'])} | "
            f"{fmt_seconds(r['expected_seconds'])} | {rel(r['bound_error'])} | {rel(r['expected_error'])} |"
        )
    lines += ["", summary_line(result)]
    return "\n".join(lines)


SUMMARIES = (("bound", "bound"), ("expected", "expected"), ("expected, leave-one-out", "expected_leave_one_out"))


def summary_line(result: Mapping[str, Any]) -> str:
    """``|error|`` of the bound, the expected time and the expected time left one out, as the docs say it."""
    parts = []
    for name, key in SUMMARIES:
        e = result[key]
        parts.append(f"{name}: median {e['median_abs'] * 100:.0f} %, worst {e['worst_abs'] * 100:.0f} %")
    return f"|error| over {len(result['rows'])} measurements — " + "; ".join(parts) + "."


def fmt_profile(p: FabricProfile) -> str:
    lat = p.step_latency * 1e6
    return f"efficiency {p.efficiency:.3g}, latency {lat:.3g} µs per step" + (
        f" (borrowed from {p.borrowed})" if p.borrowed else f" ({p.rows} rows)"
    )


def rel(x: float) -> str:
    return f"{x * 100:+.0f} %" if math.isfinite(x) else "—"
