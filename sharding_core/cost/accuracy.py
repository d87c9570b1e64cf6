"""How far the expected times are from published measurements: every row of
:data:`sharding_core.cost.measurements.MEASUREMENTS` with its bound, its expected time and their errors; the
training split's errors (in sample), the held-out split's (never fitted), and leave-one-source-out (each training
source predicted by a fit made without it); per fabric, with the share of rows predicted above measured (a
one-sided fabric leans one way). ``docs/cost-model.md`` prints :func:`markdown_table`; ``bench/bench_cost.py``
prints it with the time the refits take; ``python -m sharding_core.cost.accuracy`` prints the refit of the
training split as :data:`sharding_core.cost.efficiency.SHIPPED` spells it.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any

from sharding_core.cost.efficiency import (
    KEYS,
    PROFILES,
    FabricProfile,
    Row,
    error,
    expected_of,
    fit_profiles,
    rel,
    summary,
    terms_of,
)
from sharding_core.cost.measurements import HELD_OUT, REPLICATES, SOURCES, TRAIN, Measurement

FABRICS = ("ici", "nvlink", "network")


@functools.cache
def measured_rows(replicates: bool = False) -> tuple[tuple[Measurement, Row, str], ...]:
    """The published measurements (or their :data:`REPLICATES`) with their estimates' terms and the fabric each
    is counted under (the estimate's: ``ici``, ``nvlink``, ``network``)."""
    from sharding_core.cost.collectives import estimate_one
    from sharding_core.cost.context import context_for
    from sharding_core.cost.measurements import MEASUREMENTS

    out = []
    for m in REPLICATES if replicates else MEASUREMENTS:
        devset = m.devset()
        est = estimate_one(m.collective(devset), context_for(devset))
        terms, combine = terms_of(est)
        row = Row(terms, combine, m.seconds, float(est["bound_seconds"]))
        out.append((m, row, str(est["fabric"])))
    return tuple(out)


def training_rows() -> list[Row]:
    return [row for m, row, _ in measured_rows() if m.split == TRAIN]


def refit() -> dict[str, FabricProfile]:
    """The profiles the training split alone gives (what :data:`PROFILES` must equal)."""
    return fit_profiles(training_rows())


def _leave_one_source_out() -> dict[str, float]:
    """Each training row predicted by a fit made without its source: {row name: error}."""
    rows = measured_rows()
    out: dict[str, float] = {}
    for key in sorted({m.source for m, _, _ in rows if m.split == TRAIN}):
        without = fit_profiles([row for m, row, _ in rows if m.split == TRAIN and m.source != key])
        for m, row, _ in rows:
            if m.source == key:
                out[m.name] = error(expected_of(row, without), row.measured)
    return out


def _above(errors: Sequence[float]) -> float | None:
    return sum(e > 0 for e in errors) / len(errors) if errors else None


@functools.cache
def _evaluate_shipped() -> dict[str, Any]:
    return _evaluate(PROFILES)


def evaluate(profiles: Mapping[str, FabricProfile] | None = None) -> dict[str, Any]:
    """Every row with its bound and expected time and their errors, the split's summaries (in sample, held out,
    leave-one-source-out) overall and per fabric, and the share of each fabric's rows predicted above measured."""
    return _evaluate_shipped() if profiles is None else _evaluate(profiles)


def _evaluate(profiles: Mapping[str, FabricProfile]) -> dict[str, Any]:
    loso = _leave_one_source_out()
    table: list[dict[str, Any]] = []
    for m, row, fabric in measured_rows():
        expected = expected_of(row, profiles)
        table.append({
            "name": m.name, "devices": m.devices, "op": m.op, "bytes": m.bytes, "fabric": fabric,
            "fabrics": sorted({t.key for t in row.terms}), "source": m.source, "split": m.split,
            "measured_seconds": row.measured, "bound_seconds": row.bound, "expected_seconds": expected,
            "bound_error": error(row.bound, row.measured), "expected_error": error(expected, row.measured),
            "leave_one_source_out_error": loso.get(m.name), "url": m.url, "read": m.read,
        })  # fmt: skip
    replicates = []
    for m, row, _ in measured_rows(replicates=True):
        expected = expected_of(row, profiles)
        replicates.append({"name": m.name, "devices": m.devices, "replicate_of": m.replicate_of,
                           "measured_seconds": row.measured, "expected_seconds": expected,
                           "expected_error": error(expected, row.measured)})  # fmt: skip

    def pick(split: str | None = None, fabric: str | None = None, key: str = "expected_error") -> list[float]:
        return [float(r[key]) for r in table if (split is None or r["split"] == split)
                and (fabric is None or r["fabric"] == fabric) and r[key] is not None]  # fmt: skip

    per_fabric = {
        f: {
            "in_sample": summary(pick(TRAIN, f)),
            "held_out": summary(pick(HELD_OUT, f)),
            "leave_one_source_out": summary(pick(TRAIN, f, "leave_one_source_out_error")),
            "above_measured": _above(pick(None, f)),
            "held_out_above_measured": _above(pick(HELD_OUT, f)),
            "sources": len({r["source"] for r in table if r["fabric"] == f}),
        }
        for f in FABRICS
    }
    return {
        "rows": table,
        "replicates": replicates,
        "bound": summary(pick(key="bound_error")),
        "in_sample": summary(pick(TRAIN)),
        "held_out": summary(pick(HELD_OUT)),
        "leave_one_source_out": summary(pick(TRAIN, key="leave_one_source_out_error")),
        "fabrics": per_fabric,
        "sources": {k: s.json() for k, s in SOURCES.items()},
        "profiles": {k: p.json() for k, p in profiles.items()},
    }


def markdown_table(result: Mapping[str, Any] | None = None) -> str:
    """The measurement table with its errors and split, as ``docs/cost-model.md`` prints it (a test checks it is
    current)."""
    from sharding_core.units import fmt_bytes, fmt_seconds

    result = result if result is not None else evaluate()
    lines = [
        "| # | measurement (source) | devices | bytes | fabric | split | measured | bound | expected | error | "
        "left out |",
        "|---:|---|---|---:|---|---|---:|---:|---:|---:|---:|",
    ]
    for k, r in enumerate(result["rows"], start=1):
        loso = r["leave_one_source_out_error"]
        lines.append(
            f"| {k} | [{r['name']}]({r['url']}) | `{r['devices']}` | {fmt_bytes(r['bytes'])} | {r['fabric']} | "
            f"{'held out' if r['split'] == HELD_OUT else 'train'} | {fmt_seconds(r['measured_seconds'])} | "
            f"{fmt_seconds(r['bound_seconds'])} | {fmt_seconds(r['expected_seconds'])} | {rel(r['expected_error'])} | "
            f"{rel(loso) if loso is not None else '—'} |"
        )
    lines += ["", summary_table(result)]
    return "\n".join(lines)


def _cell(e: Mapping[str, Any]) -> str:
    if not e["rows"]:
        return "—"
    return f"{e['median_abs'] * 100:.0f} % / {e['worst_abs'] * 100:.0f} % ({e['rows']})"


def summary_table(result: Mapping[str, Any]) -> str:
    """Median / worst |error| (rows) per fabric: in sample, held out, leave-one-source-out; and the share of rows
    predicted above measured."""
    lines = [
        "| fabric | sources | in sample | held out | left out (by source) | predicted above measured (held out) |",
        "|---|---:|---|---|---|---|",
    ]
    for f, e in result["fabrics"].items():
        above, held = e["above_measured"], e["held_out_above_measured"]
        share = f"{above * 100:.0f} %" if above is not None else "—"
        share += f" ({held * 100:.0f} %)" if held is not None else ""
        lines.append(f"| {f} | {e['sources']} | {_cell(e['in_sample'])} | {_cell(e['held_out'])} | "
                     f"{_cell(e['leave_one_source_out'])} | {share} |")  # fmt: skip
    above = _above([r["expected_error"] for r in result["rows"]]) or 0.0
    lines.append(
        f"| all | {len({r['source'] for r in result['rows']})} | {_cell(result['in_sample'])} | "
        f"{_cell(result['held_out'])} | {_cell(result['leave_one_source_out'])} | {above * 100:.0f} % |"
    )
    return "\n".join(lines)


def profiles_table(profiles: Mapping[str, FabricProfile] | None = None) -> str:
    """The shipped profiles as ``docs/cost-model.md`` prints them."""
    from sharding_core.units import fmt_bytes

    profiles = profiles if profiles is not None else PROFILES
    lines = [
        "| fabric | efficiency by operation (else) | latency per step | size curve S½, k | fitted to |",
        "|---|---|---:|---|---|",
    ]
    for key in KEYS:
        p = profiles[key]
        ops = ", ".join(f"{op} {e:g}" for op, e in p.op_efficiency)
        eff = f"{ops} (else {p.efficiency:g})" if ops else f"{p.efficiency:g}"
        curve = f"{fmt_bytes(p.half_size)}, {p.exponent:g}" if p.half_size else "none"
        fitted = f"none: borrows `{p.borrowed}`" if p.borrowed else f"{p.rows} training rows"
        lines.append(f"| `{key}` | {eff} | {p.step_latency * 1e6:.3g} µs | {curve} | {fitted} |")
    return "\n".join(lines)


def shipped_literal(profiles: Mapping[str, FabricProfile]) -> str:
    """``SHIPPED`` as :mod:`sharding_core.cost.efficiency` spells it, for pasting after a refit."""
    lines = ["SHIPPED: dict[str, dict[str, Any]] = {"]
    for key in ("ici_line", "nvlink", "network"):
        p = profiles[key]
        lines.append(
            f'    "{key}": {{"efficiency": {p.efficiency!r}, "step_latency": {p.step_latency!r}, '
            f'"half_size": {p.half_size!r}, "exponent": {p.exponent!r}, "op_efficiency": {p.op_efficiency!r}, '
            f'"rows": {p.rows}}},'
        )
    lines.append("}")
    return "\n".join(lines)


if __name__ == "__main__":
    print(shipped_literal(refit()))
