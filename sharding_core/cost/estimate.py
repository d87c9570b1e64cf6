"""``sharding_core.estimate_collective(devices, op, bytes, *, groups=None, pairs=None, dtype=None, profile=None)``:
the cost model for one collective on a device set, by name — what a plan puts on each collective of a compiled
program, for one you describe. ``op`` as in HLO: ``all-gather`` (``bytes``: the result per device),
``all-reduce``, ``reduce-scatter`` (the result per device), ``all-to-all``, ``collective-permute`` (the bytes
each device sends); ``groups``: lists of device ids (default one group of every device); ``pairs``: ``[src,
dst]`` for a permute (default each device to the next, a ring shift).

Returns the estimate (``bound_seconds``: the book's formulas on the spec sheet; ``expected_seconds``: the fit to
published measurements or a calibrated profile; ``fabric``; ``formula``; ``inputs``) with ``fit`` (which fit and
its held-out error on the estimate's fabric, :mod:`sharding_core.cost.accuracy`) and ``profile`` (which profile
the expected time came from). Bad input raises :class:`sharding_core.errors.ShardingError` with what to change.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from sharding_core.errors import ShardingError

BAD_COLLECTIVE = "bad_collective"
OPS = ("all-gather", "all-reduce", "reduce-scatter", "all-to-all", "collective-permute", "ragged-all-to-all",
       "collective-broadcast")  # fmt: skip
FIT_NAME = "published measurements: the training split of sharding_core/cost/measurements.py"
_ITEMSIZE = {"bf16": 2, "bfloat16": 2, "f16": 2, "float16": 2, "f32": 4, "float32": 4, "f64": 8, "float64": 8,
             "s8": 1, "int8": 1, "u8": 1, "uint8": 1, "s32": 4, "int32": 4, "f8e4m3fn": 1, "float8_e4m3fn": 1,
             "f8e5m2": 1, "float8_e5m2": 1, "pred": 1, "bool": 1}  # fmt: skip


@functools.cache
def held_out_errors() -> dict[str, dict[str, Any]]:
    """The shipped fit's held-out |error| per fabric and overall (no refits: quick)."""
    from sharding_core.cost.accuracy import FABRICS, measured_rows
    from sharding_core.cost.efficiency import PROFILES, error, expected_of, summary
    from sharding_core.cost.measurements import HELD_OUT

    errors: dict[str, list[float]] = {f: [] for f in (*FABRICS, "all")}
    for m, row, fabric in measured_rows():
        if m.split == HELD_OUT:
            e = error(expected_of(row, PROFILES), row.measured)
            errors.setdefault(fabric, []).append(e)
            errors["all"].append(e)
    return {f: summary(e) for f, e in errors.items()}


def _fit(fabric: str | None) -> dict[str, Any]:
    errors = held_out_errors()
    mine = errors.get(fabric or "") or {"median_abs": None, "rows": 0}
    if fabric == "dcn":
        mine = errors["network"]
    return {
        "name": FIT_NAME,
        "fabric": fabric,
        "held_out_median_error": mine["median_abs"] if mine.get("rows") else None,
        "held_out_rows": mine.get("rows", 0),
        "held_out_median_error_all": errors["all"]["median_abs"],
        "note": "dcn has no published measurement: it borrows the network's fit" if fabric == "dcn" else None,
    }


def _ids(value: Any, what: str, inner: int | None = None) -> list[list[int]]:
    if not isinstance(value, Sequence) or isinstance(value, (str, bytes)) or not value:
        raise ShardingError(BAD_COLLECTIVE, f"{what} must be a non-empty list of lists of device ids")
    out = []
    for g in value:
        if not isinstance(g, Sequence) or isinstance(g, (str, bytes)) or not g:
            raise ShardingError(BAD_COLLECTIVE, f"each of {what} must be a non-empty list of device ids, got {g!r}")
        if not all(isinstance(i, int) and not isinstance(i, bool) for i in g):
            raise ShardingError(BAD_COLLECTIVE, f"device ids are integers, got {list(g)!r} in {what}")
        if inner is not None and len(g) != inner:
            raise ShardingError(BAD_COLLECTIVE, f"each of {what} is [src, dst], got {list(g)!r}")
        out.append([int(i) for i in g])
    return out


def _collective(devset: Any, op: str, nbytes: int, groups: Any, pairs: Any, dtype: str | None) -> dict[str, Any]:
    if op not in OPS:
        raise ShardingError(BAD_COLLECTIVE, f"unknown collective {op!r}", hint=f"one of {', '.join(OPS)} (as in HLO)")
    if not isinstance(nbytes, int) or isinstance(nbytes, bool) or nbytes <= 0:
        raise ShardingError(BAD_COLLECTIVE, f"bytes must be a positive integer, got {nbytes!r}")
    if dtype is not None:
        size = _ITEMSIZE.get(str(dtype))
        if size is None:
            raise ShardingError(BAD_COLLECTIVE, f"unknown dtype {dtype!r}", hint=f"one of {', '.join(_ITEMSIZE)}")
        if nbytes % size:
            raise ShardingError(BAD_COLLECTIVE, f"{nbytes} bytes is not a whole number of {dtype} elements")
    ids = [int(d.id) for d in devset.devices]
    known = set(ids)
    c: dict[str, Any] = {"op": op, "bytes": nbytes, "groups": None, "pairs": None, "dtype": dtype}
    if op == "collective-permute":
        if groups is not None:
            raise ShardingError(BAD_COLLECTIVE, "a collective-permute takes pairs, not groups")
        ring = [[a, b] for a, b in zip(ids, ids[1:] + ids[:1], strict=True)]
        c["pairs"] = _ids(pairs, "pairs", 2) if pairs is not None else ring
        named = {i for p in c["pairs"] for i in p}
    else:
        if pairs is not None:
            raise ShardingError(BAD_COLLECTIVE, f"{op} takes groups, not pairs")
        c["groups"] = _ids(groups, "groups") if groups is not None else [ids]
        named = {i for g in c["groups"] for i in g}
        flat = [i for g in c["groups"] for i in g]
        if len(flat) != len(set(flat)):
            raise ShardingError(BAD_COLLECTIVE, "a device appears in more than one group (or twice in one)")
    missing = sorted(named - known)
    if missing:
        raise ShardingError(BAD_COLLECTIVE, f"device ids {missing[:8]} are not in {devset.key}",
                            hint=f"ids run {min(ids)}..{max(ids)}")  # fmt: skip
    return c


def estimate_collective(
    devices: str,
    op: str,
    bytes: int,
    *,
    groups: Sequence[Sequence[int]] | None = None,
    pairs: Sequence[Sequence[int]] | None = None,
    dtype: str | None = None,
    profile: str | Path | Mapping[str, Any] | None = None,
    slices: int = 1,
) -> dict[str, Any]:
    """The cost model's estimate of one collective on ``devices`` (``tpu:GEN:TOPO``, ``gpu:KIND:HxG``,
    ``cpu:N``; ``slices`` for a multi-slice TPU set); see the module docstring."""
    from sharding_core.cost.calibrate import describe, estimate_with_profile, load_profile
    from sharding_core.cost.collectives import estimate_one
    from sharding_core.cost.context import context_for
    from sharding_core.devices import parse_devices

    devset = parse_devices(devices, slices=slices)
    c = _collective(devset, op, bytes, groups, pairs, dtype)
    ctx = context_for(devset)
    if profile is not None:
        loaded = load_profile(profile)
        est = estimate_with_profile(c, ctx, loaded)
        est.setdefault("profile", describe(loaded))
    else:
        est = estimate_one(c, ctx)
        est["profile"] = "fitted: " + FIT_NAME
    if est.get("seconds") is None and est.get("expected_seconds") is None:
        raise ShardingError(BAD_COLLECTIVE, f"no estimate for {op} on {devset.key}: {est.get('why')}",
                            hint="CPU sets have no hardware figures: give a calibrated profile (profile=)")  # fmt: skip
    est.setdefault("bound_seconds", est.get("seconds"))
    est["devices"] = devset.key
    est["op"] = op
    est["bytes"] = bytes
    if str(est["profile"]).startswith("calibrated"):
        measured = "a calibrated profile: measured on the devices themselves, not fitted to published measurements"
        est["fit"] = {"name": est["profile"], "fabric": est.get("fabric"), "held_out_median_error": None,
                      "note": measured}  # fmt: skip
    else:
        est["fit"] = _fit(est.get("fabric"))
    return est
