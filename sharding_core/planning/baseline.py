"""Two plans of one program compared: a CI gate for sharding regressions (``shardscope plan --baseline``).

A plan regressed when

* its peak HBM per device grew by more than ``max_peak_growth`` (a fraction of the baseline's peak) —
  the peak is ``memory_analysis().peak_memory_in_bytes``, or what XLA said it needed when it refused; a
  plan XLA refuses for memory when the baseline fit has always regressed; or
* it has a finding (:mod:`sharding_core.findings`) the baseline does not have (same kind at the same line); or
* collectives that the baseline does not have move more than ``max_new_collective_bytes`` per step in all
  (each collective's result bytes times how many times it runs per step). Collectives are matched by
  what they do — op, mesh axes, bytes and repeat count — not by instruction name, which changes from one
  compile to the next.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from sharding_core.errors import ShardingError
from sharding_core.snapshot.format import FORMAT
from sharding_core.units import fmt_bytes

DEFAULT_MAX_PEAK_GROWTH = 0.02
DEFAULT_MAX_NEW_COLLECTIVE_BYTES = 1 << 20
BAD_BASELINE = "bad_baseline"


def peak_bytes(snap: Mapping[str, Any]) -> int | None:
    """A plan's peak HBM per device: XLA's peak, or what it said it needed when it refused."""
    stats = (snap.get("jit") or {}).get("memory_per_device") or {}
    if stats.get("peak_memory_in_bytes") is not None:
        return int(stats["peak_memory_in_bytes"])
    refusal = (snap.get("plan") or {}).get("refusal") or {}
    required = refusal.get("required_bytes")
    return int(required) if required is not None else None


def signature(c: Mapping[str, Any]) -> tuple[Any, ...]:
    return (c.get("op"), tuple(c.get("axes") or ()), int(c.get("bytes") or 0), int(c.get("repeat", 1) or 1))


def _new_findings(baseline: Mapping[str, Any], current: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The current plan's findings the baseline does not have, matched by kind and source line (a baseline written
    before plans carried findings has none to compare: nothing is new)."""
    if "findings" not in baseline:
        return []
    have = Counter((f.get("kind"), f.get("source")) for f in baseline.get("findings") or ())
    out: list[dict[str, Any]] = []
    for f in current.get("findings") or ():
        key = (f.get("kind"), f.get("source"))
        if have[key] > 0:
            have[key] -= 1
        else:
            out.append(dict(f))
    return out


def check_plan(snap: Any, what: str) -> None:
    if not isinstance(snap, dict) or snap.get("format") != FORMAT or not isinstance(snap.get("plan"), dict):
        raise ShardingError(
            BAD_BASELINE,
            f"the {what} is not a plan: expected the JSON `shardscope plan --json` writes",
            hint="write one with shardscope plan FILE.py:FN --devices D --json plan.json",
        )


def compare(
    baseline: Mapping[str, Any],
    current: Mapping[str, Any],
    *,
    max_peak_growth: float = DEFAULT_MAX_PEAK_GROWTH,
    max_new_collective_bytes: int = DEFAULT_MAX_NEW_COLLECTIVE_BYTES,
) -> dict[str, Any]:
    """``{"regressed", "reasons", "peak": {...}, "new_collectives": [...], "thresholds": {...}}``."""
    reasons: list[str] = []
    base_peak, peak = peak_bytes(baseline), peak_bytes(current)
    base_refused = (baseline.get("plan") or {}).get("refusal") is not None
    refused = (current.get("plan") or {}).get("refusal") is not None
    growth = None
    if base_peak and peak is not None:
        growth = (peak - base_peak) / base_peak
        if growth > max_peak_growth:
            reasons.append(
                f"peak HBM per device grew {growth:+.1%}: {fmt_bytes(base_peak)} -> {fmt_bytes(peak)} "
                f"(threshold {max_peak_growth:+.1%})"
            )
    if refused and not base_refused:
        reasons.append("XLA refuses the program for memory; the baseline fit")
    have = Counter(signature(c) for c in baseline.get("collectives") or ())
    new: list[dict[str, Any]] = []
    for c in current.get("collectives") or ():
        sig = signature(c)
        if have[sig] > 0:
            have[sig] -= 1
            continue
        moved = int(c.get("bytes") or 0) * int(c.get("repeat", 1) or 1)
        new.append({"op": c.get("op"), "axes": c.get("axes"), "bytes": c.get("bytes"), "repeat": c.get("repeat", 1),
                    "bytes_per_step": moved, "name": c.get("name"), "source": c.get("source")})  # fmt: skip
    new_findings = _new_findings(baseline, current)
    if new_findings:
        reasons.append(
            f"{len(new_findings)} new finding(s): "
            + "; ".join(f"{f['kind']} at {f.get('source') or '—'}" for f in new_findings[:5])
        )
    new_bytes = sum(n["bytes_per_step"] for n in new)
    if new_bytes > max_new_collective_bytes:
        reasons.append(
            f"{len(new)} new collective(s) move {fmt_bytes(new_bytes)} per step (threshold "
            f"{fmt_bytes(max_new_collective_bytes)})"
        )
    return {
        "regressed": bool(reasons),
        "reasons": reasons,
        "peak": {"baseline_bytes": base_peak, "bytes": peak, "growth": growth},
        "new_collectives": sorted(new, key=lambda n: -n["bytes_per_step"]),
        "new_collective_bytes_per_step": new_bytes,
        "new_findings": new_findings,
        "thresholds": {"max_peak_growth": max_peak_growth, "max_new_collective_bytes": max_new_collective_bytes},
    }
