"""Expected times: each fabric's efficiency per operation, its latency and its size curve, fitted to published
measurements on a declared training split of their sources.

A collective's estimate is a few *terms* — one per fabric it crosses (:class:`sharding_core.cost.collectives.Part`):
a bandwidth time ``b`` from the spec sheet (the book's formulas: the **bound**), the operation, and its phases
(two for an all-reduce — a reduce-scatter then an all-gather — one otherwise). The **expected** time of a term is::

    expected = max(α · phases, bound latency) + b / e_op · (1 + (b½ / b)^k)

* ``e_op``: the fabric's efficiency for that operation (measured bandwidth / spec-sheet bandwidth), fitted per
  (operation, fabric) where the training sources measure that operation on that fabric, else the fabric's one
  efficiency over all its training rows (``efficiency``);
* ``α``: the fabric's latency per phase, fitted (the α of the α–β model nccl-tests' ``doc/PERFORMANCE.md``
  describes: "time ... roughly equal to overhead + size / bw"); the bound's own latency (the book's 1 µs per ICI
  hop times the hops, the network's measured step latency times the steps) is a floor under it, so a slice
  larger than any measured one gets the book's per-hop figure, not an extrapolated fit;
* ``(b½, k)``: the fabric's saturating bandwidth curve — the achieved fraction of ``e_op`` is ``1 / (1 +
  (b½ / b)^k)``, a Hill curve in the bandwidth time: NCCL reaches its bandwidth only on large messages (it
  splits a message over fewer channels and smaller chunks when it is small; the nccl-tests sweeps in the
  training split show the ramp), ``b½ = 0`` where a fabric's training rows show none.

The constants are fitted to the training rows of :data:`sharding_core.cost.measurements.MEASUREMENTS` (least
absolute deviations of log(expected / measured) — the median-seeking fit, so one source's outlier does not
drag a fabric — on grids fine enough to be exact to the digits kept, by coordinate descent over the fabrics and
their parameters) and written below; ``tests/test_cost_measured.py`` refits on the training split alone and
fails when the constants drift. A fabric no published measurement covers borrows the closest one's fit and says
so (``borrowed``). :func:`fit_nccl_tests` refits the NVLink or network profile from a user's own
``all_reduce_perf`` output; :mod:`sharding_core.cost.calibrate` measures one on the user's own devices.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from sharding_core.errors import ShardingError

# The fabrics with a profile of their own, and where one without measurements borrows its fit.
KEYS = ("ici_torus", "ici_line", "dcn", "nvlink", "network")
BORROW = {"ici_torus": "ici_line", "dcn": "network"}
OPS = ("all-gather", "reduce-scatter", "all-reduce", "all-to-all", "permute")

EFFICIENCY_GRID = np.round(np.arange(0.20, 1.6001, 0.005), 3)
LATENCY_GRID = np.unique(
    [0.0, *(round(m * 10.0**e, 12) for e in range(-7, -2) for m in np.round(np.arange(1.0, 9.995, 0.01), 2))]
)  # 0, and 100 ns to 10 ms at three significant digits
HALF_SIZE_GRID = np.unique([0.0, *(float(f"{x:.3g}") for x in np.geomspace(1e3, 1e11, 321))])
EXPONENT_GRID = np.round(np.arange(0.05, 1.0001, 0.05), 2)
ROUNDS = 8
START_LATENCIES = (1e-5, 1e-6)
"""Where coordinate descent starts the latency (one descent each; the lowest loss is kept)."""


def phases_of(kind: str) -> int:
    """Sequential phases of a collective: an all-reduce is a reduce-scatter then an all-gather."""
    return 2 if kind == "all-reduce" else 1


@dataclasses.dataclass(frozen=True)
class FabricProfile:
    """A fabric's fitted figures: its efficiency for operations without their own (``efficiency``) and per
    operation (``op_efficiency``), its latency per phase (``step_latency``), and its saturating size curve
    (``half_size``: the per-rank buffer in bytes at which half the efficiency is reached; ``exponent``)."""

    efficiency: float
    step_latency: float  # seconds per phase
    half_size: float = 0.0  # bytes
    exponent: float = 1.0
    op_efficiency: tuple[tuple[str, float], ...] = ()
    op_latency: tuple[tuple[str, float], ...] = ()  # a calibrated profile's latency per operation (seconds)
    rows: int = 0  # training measurements it was fitted to
    borrowed: str | None = None  # the fabric whose fit it uses, when it has no measurements of its own
    source: str = "fitted"  # "fitted", or where a calibrated profile came from

    def efficiency_of(self, kind: str) -> float:
        return dict(self.op_efficiency).get(kind, self.efficiency)

    def fitted_for(self, kind: str) -> bool:
        """Whether ``kind`` has an efficiency of its own (else the fabric's is used)."""
        return kind in dict(self.op_efficiency)

    def term(self, kind: str, bandwidth_seconds: float, size: float, steps: int, floor: float = 0.0) -> float:
        """The expected time of one term: ``steps`` latency steps (at least ``floor``, the bound's latency) plus
        the bandwidth time at the operation's efficiency on the saturating curve (``size``: the per-rank buffer)."""
        measured = dict(self.op_latency).get(kind)
        if measured is not None:  # a calibrated profile: the operation's own latency, the α–β line it measured
            return max(measured, floor) + bandwidth_seconds / self.efficiency_of(kind)
        return float(_term(bandwidth_seconds, size, steps, floor, self.efficiency_of(kind), self.step_latency,
                           self.half_size, self.exponent))  # fmt: skip

    def json(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["op_efficiency"] = dict(self.op_efficiency)
        out["op_latency"] = dict(self.op_latency)
        return out

    def summary_json(self) -> dict[str, Any]:
        """The four figures ``POST /api/cost/nccl-fit`` answers with (its schema's ``NcclProfile``)."""
        return {"efficiency": self.efficiency_of("all-reduce"), "step_latency": self.step_latency,
                "rows": self.rows, "borrowed": self.borrowed}  # fmt: skip


def _term(b: Any, size: Any, steps: Any, floor: Any, e: Any, alpha: Any, half: Any, k: Any) -> Any:
    """``max(α · steps, floor) + b / e · (1 + (S½ / S)^k)``, broadcasting over numpy arrays (the fit's grids)."""
    size = max(float(size), 1.0)
    ramp = np.where(np.asarray(half) > 0, (np.asarray(half, dtype=float) / size) ** np.asarray(k, dtype=float), 0.0)
    return np.maximum(np.asarray(alpha) * steps, floor) + b / e * (1.0 + ramp)


def profile_key(fabric: str, wraparound: bool = False) -> str:
    if fabric == "ici":
        return "ici_torus" if wraparound else "ici_line"
    return fabric


# Fitted to the training split of sharding_core.cost.measurements.MEASUREMENTS by fit_profiles()
# (tests/test_cost_measured.py refits on the training rows alone and checks they are what it gives;
# `python -m sharding_core.cost.accuracy` prints the refit in this form).
SHIPPED: dict[str, dict[str, Any]] = {
    "ici_line": {
        "efficiency": 0.88,
        "step_latency": 1.28e-05,
        "half_size": 21100.0,
        "exponent": 1.0,
        "op_efficiency": (("all-gather", 0.88), ("all-reduce", 0.63)),
        "rows": 9,
    },
    "nvlink": {
        "efficiency": 0.805,
        "step_latency": 3.89e-06,
        "half_size": 750000.0,
        "exponent": 0.4,
        "op_efficiency": (
            ("all-gather", 0.775),
            ("all-reduce", 0.945),
            ("all-to-all", 0.77),
            ("reduce-scatter", 0.785),
        ),
        "rows": 32,
    },
    "network": {
        "efficiency": 1.07,
        "step_latency": 1.84e-05,
        "half_size": 18800000.0,
        "exponent": 0.55,
        "op_efficiency": (("all-reduce", 1.07),),
        "rows": 9,
    },
}


def _shipped() -> dict[str, FabricProfile]:
    ici = FabricProfile(**SHIPPED["ici_line"])
    network = FabricProfile(**SHIPPED["network"])
    return {
        "ici_line": ici,
        "ici_torus": dataclasses.replace(ici, rows=0, borrowed="ici_line"),
        "nvlink": FabricProfile(**SHIPPED["nvlink"]),
        "network": network,
        "dcn": dataclasses.replace(network, rows=0, borrowed="network"),
    }


PROFILES: dict[str, FabricProfile] = _shipped()


# ------------------------------------------------------------------------------------------------ fit


@dataclasses.dataclass(frozen=True)
class Term:
    key: str
    kind: str
    bandwidth_seconds: float  # the expected time's bandwidth term at full efficiency (a ring's, across GPU hosts)
    size: float  # the per-rank buffer (bytes) the size curve reads
    steps: int  # latency steps of the expected time
    floor: float  # the bound's latency


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
    terms = tuple(
        Term(
            str(t["key"]),
            str(t["kind"]),
            float(t["expected_bandwidth_seconds"]),
            float(t["size"]),
            int(t["expected_steps"]),
            float(t["latency_seconds"]),
        )
        for t in inputs.get("terms") or ()
    )
    return terms, str(inputs.get("combine") or "sum")


def expected_of(row: Row, profiles: Mapping[str, FabricProfile]) -> float:
    values = [profiles[t.key].term(t.kind, t.bandwidth_seconds, t.size, t.steps, t.floor) for t in row.terms]
    if not values:
        return 0.0
    return float(sum(values) if row.combine == "sum" else max(values))


@dataclasses.dataclass
class _State:
    """One fabric's parameters while fitting."""

    ops: dict[str, float]
    alpha: float
    half: float
    k: float
    common: float = 0.8

    def profile(self, rows: int) -> FabricProfile:
        return FabricProfile(
            self.common, self.alpha, self.half, self.k, op_efficiency=tuple(sorted(self.ops.items())), rows=rows
        )


def _loss(
    rows: Sequence[Row],
    key: str,
    states: Mapping[str, _State],
    *,
    e: Mapping[str, Any] | None = None,
    alpha: Any = None,
    half: Any = None,
    k: Any = None,
) -> Any:
    """Σ |log(expected / measured)| over ``rows``, fabric ``key``'s parameters replaced by the given ones (numpy
    grids: one loss per grid point; ``e`` by operation)."""
    total: Any = 0.0
    for row in rows:
        joined: Any = None
        for t in row.terms:
            s = states[t.key]
            ev, av, hv, kv = s.ops.get(t.kind, s.common), s.alpha, s.half, s.k
            if t.key == key:
                ev = e[t.kind] if e is not None and t.kind in e else ev
                av = av if alpha is None else alpha
                hv = hv if half is None else half
                kv = kv if k is None else k
            v = _term(t.bandwidth_seconds, t.size, t.steps, t.floor, ev, av, hv, kv)
            joined = v if joined is None else (joined + v if row.combine == "sum" else np.maximum(joined, v))
        total = total + np.abs(np.log(np.maximum(joined, 1e-30) / row.measured))
    return total


def _argmin(loss: Any, grid: np.ndarray) -> float:
    return float(grid[int(np.argmin(np.broadcast_to(loss, grid.shape)))])


def _fit_fabric(rows: Sequence[Row], key: str, states: dict[str, _State]) -> None:
    """One round of coordinate descent on fabric ``key``: each operation's efficiency, the latency, then the size
    curve (``b½`` and ``k`` together), each on its grid with everything else held."""
    s = states[key]
    for kind in sorted(s.ops):
        mine = [r for r in rows if any(t.key == key and t.kind == kind for t in r.terms)]
        s.ops[kind] = _argmin(_loss(mine, key, states, e={kind: EFFICIENCY_GRID}), EFFICIENCY_GRID)
    s.alpha = _argmin(_loss(rows, key, states, alpha=LATENCY_GRID), LATENCY_GRID)
    half, k = np.meshgrid(HALF_SIZE_GRID, EXPONENT_GRID, indexing="ij")
    loss = np.broadcast_to(_loss(rows, key, states, half=half, k=k), half.shape)
    i, j = np.unravel_index(int(np.argmin(loss)), loss.shape)
    s.half, s.k = float(HALF_SIZE_GRID[i]), float(EXPONENT_GRID[j])
    if s.half == 0.0:
        s.k = 1.0


def _descend(
    rows: Sequence[Row], start: Mapping[str, FabricProfile], covered: Sequence[str], alpha: float
) -> dict[str, _State]:
    """Coordinate descent (:data:`ROUNDS` rounds or until nothing moves) from efficiency 0.8, latency ``alpha``
    and no size curve on the ``covered`` fabrics; the others held at ``start``."""
    states: dict[str, _State] = {}
    for key in KEYS:
        p = start.get(key)
        ops = sorted({t.kind for r in rows for t in r.terms if t.key == key}) if key in covered else []
        if p is not None and key not in covered:
            states[key] = _State(dict(p.op_efficiency), p.step_latency, p.half_size, p.exponent, p.efficiency)
        else:
            states[key] = _State({kind: 0.8 for kind in ops}, alpha, 0.0, 1.0)
    for _ in range(ROUNDS):
        before = {k: dataclasses.astuple(s) for k, s in states.items()}
        for key in covered:
            _fit_fabric([r for r in rows if any(t.key == key for t in r.terms)], key, states)
        if before == {k: dataclasses.astuple(s) for k, s in states.items()}:
            break
    return states


def fit_profiles(
    rows: Sequence[Row], start: Mapping[str, FabricProfile] | None = None, only: str | None = None
) -> dict[str, FabricProfile]:
    """One profile per fabric from ``rows`` (coordinate descent, :data:`ROUNDS` rounds or until nothing moves);
    fabrics no row covers keep ``start``'s profile or borrow :data:`BORROW`'s fit. ``only``: fit that fabric
    alone, the others held at ``start`` (a user's own nccl-tests run)."""
    start = dict(start or {})
    covered = [k for k in KEYS if any(t.key == k for r in rows for t in r.terms) and (only is None or k == only)]
    # Coordinate descent can stop where no single parameter moves downhill (a model run at 5 us per step, started
    # at 10 us, stopped at 0.73 for 0.70 with a size curve making up the rest): descend from each start latency
    # and keep the lowest loss.
    best: tuple[float, dict[str, _State]] | None = None
    for alpha in START_LATENCIES:
        states = _descend(rows, start, covered, alpha)
        loss = sum(float(_loss([r for r in rows if any(t.key == k for t in r.terms)], k, states)) for k in covered)
        if best is None or loss < best[0] - 1e-12:
            best = (loss, states)
    assert best is not None
    states = best[1]
    profiles: dict[str, FabricProfile] = dict(start)
    for key in covered:
        mine = [r for r in rows if any(t.key == key for t in r.terms)]
        s = states[key]
        common = _loss(mine, key, states, e=dict.fromkeys(s.ops, EFFICIENCY_GRID))
        s.common = _argmin(common, EFFICIENCY_GRID)
        profiles[key] = s.profile(len(mine))
    for key, lender in BORROW.items():
        if key not in covered and (only is None or key not in profiles):
            profiles[key] = dataclasses.replace(profiles[lender], rows=0, borrowed=lender)
    return profiles


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
    from sharding_core.cost.collectives import estimate_one
    from sharding_core.cost.context import context_for
    from sharding_core.devices import parse_devices
    from sharding_core.hardware import GPU_FIGURES, GpuFigures, figures_for_kind

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
        est = estimate_one({"op": "all-reduce", "bytes": size, "groups": ids}, ctx)
        if est.get("seconds") is None:
            raise NcclParseError(f"no estimate for {hw.title}: {est.get('why')}")
        terms, combine = terms_of(est)
        rows.append(Row(terms, combine, seconds, float(est["bound_seconds"])))
    key = "network" if run.hosts > 1 else "nvlink"
    fitted = fit_profiles(rows, start=PROFILES, only=key)
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
        "profile": fitted[key].summary_json(),
        "shipped_profile": PROFILES[key].summary_json(),
        "rows": table,
        "errors": {
            "bound": summary([error(r["bound_seconds"], r["measured_seconds"]) for r in table]),
            "shipped": summary([error(r["expected_seconds"], r["measured_seconds"]) for r in table]),
            "refit": summary([error(r["refit_seconds"], r["measured_seconds"]) for r in table]),
        },
    }


def error(predicted: float, measured: float) -> float:
    """Signed relative error of a prediction: (predicted − measured) / measured."""
    return (predicted - measured) / measured


def summary(errors: Sequence[float]) -> dict[str, float]:
    """Median and worst |error| of a list of relative errors (NaN-free), and how many."""
    a = np.abs(np.asarray(errors, dtype=float))
    if not len(a):
        return {"median_abs": math.nan, "worst_abs": math.nan, "rows": 0}
    return {"median_abs": float(np.median(a)), "worst_abs": float(a.max()), "rows": len(a)}


def fmt_profile(p: FabricProfile) -> str:
    lat = p.step_latency * 1e6
    return f"efficiency {p.efficiency_of('all-reduce'):.3g}, latency {lat:.3g} µs per step" + (
        f" (borrowed from {p.borrowed})" if p.borrowed else f" ({p.rows} rows)"
    )


def rel(x: float) -> str:
    return f"{x * 100:+.0f} %" if math.isfinite(x) else "—"
