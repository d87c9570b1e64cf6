"""Per-device memory of a snapshot: bytes summed over the leaves' shards, and how uneven that is."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sharding_core.snapshot.format import layout_of


def memory(snap: Mapping[str, Any], layouts: Mapping[int, Mapping[str, Any]] | None = None) -> dict[str, Any]:
    """Bytes per device summed over the leaves' shards, and how uneven that is.

    Every leaf with a layout counts, concrete arrays and planned ones (ShapeDtypeStruct, Flax boxes)
    alike: a planned leaf counts what it would take. ``layouts`` replaces leaves' layouts
    (the what-if). ``ratio`` is the busiest device over the mean; above 1.05 is flagged.
    """
    ids = list(snap["devices"]["id"])
    total = dict.fromkeys(ids, 0)
    override = layouts or {}
    # Leaves share a few layouts (thousands of leaves, dozens of layouts): count the leaves of each, then
    # walk each layout's shards once.
    uses: dict[int, list[Any]] = {}  # id(layout) -> [layout, leaves using it]
    for i, leaf in enumerate(snap["leaves"]):
        layout = override[i] if i in override else layout_of(snap, leaf)
        if layout is not None:
            uses.setdefault(id(layout), [layout, 0])[1] += 1
    for layout, count in uses.values():
        b = layout["bytes_per_device"] * count
        for shard in layout["shards"]:
            d = shard["device_id"]
            total[d] = total.get(d, 0) + b
    used = [d for d in ids if total[d] > 0] or ids
    values = [total[d] for d in used]
    mean = sum(values) / len(values) if values else 0.0
    peak = max(values) if values else 0
    ratio = peak / mean if mean else 1.0
    return {
        "device_ids": ids,
        "bytes": [total[d] for d in ids],
        "devices_with_data": len([d for d in ids if total[d] > 0]),
        "max_bytes": peak,
        "min_bytes": min(values) if values else 0,
        "mean_bytes": mean,
        "ratio": ratio,
        "imbalanced": ratio > 1.05,
        "heaviest": [d for d in used if total[d] == peak and peak > 0],
    }


def enrich(snap: dict[str, Any]) -> dict[str, Any]:
    """The stored form: the snapshot as published plus its per-device memory, and so is each program an
    explained capture's fixes compiled (the snapshot view opens one as a snapshot of its own)."""
    out = dict(snap)
    out["memory"] = memory(snap)
    if out.get("fixes"):
        out["fixes"] = [{**fix, "memory": memory(fix)} for fix in out["fixes"]]
    return out
