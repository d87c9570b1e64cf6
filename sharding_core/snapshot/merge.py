"""The merge of a multi-process run: one global picture from the snapshots each process published."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sharding_core.errors import NOT_FOUND, ShardingError
from sharding_core.snapshot.format import FORMAT, VERSION, layout_of, leaf_signature
from sharding_core.snapshot.memory import memory


def merge_run(run_id: str, parts: Sequence[tuple[int, str, Mapping[str, Any]]]) -> dict[str, Any]:
    """One global picture from the snapshots a ``jax.distributed`` job's processes published.

    ``parts`` is ``(process_index, snapshot id, snapshot)`` per process that reported. Each process
    sees the whole of a global array's sharding (``devices_indices_map`` covers every device) but
    holds only its own devices' shards; the merge keeps one leaf per path and says, per leaf, which
    processes reported it (``processes``), which devices' shards a reporting process holds
    (``held_devices``) and which it does not (``missing_devices``: their owner never reported).
    Processes that never reported are listed as missing.
    """
    if not parts:
        raise ShardingError(NOT_FOUND, "no such run")
    parts = sorted(parts, key=lambda p: p[0])
    count = max(p[2]["process_count"] for p in parts)
    reported = [p[0] for p in parts]
    base = parts[0][2]

    dev_rows: dict[int, tuple[int, int, Any]] = {}
    for _, _, snap in parts:
        d = snap["devices"]
        coords = d.get("coords")
        for k, dev_id in enumerate(d["id"]):
            dev_rows.setdefault(dev_id, (d["process_index"][k], d["core_on_chip"][k], coords[k] if coords else None))
    ids = sorted(dev_rows)
    has_coords = all(dev_rows[i][2] is not None for i in ids)
    devices = {
        "id": ids,
        "process_index": [dev_rows[i][0] for i in ids],
        "core_on_chip": [dev_rows[i][1] for i in ids],
        "coords": [dev_rows[i][2] for i in ids] if has_coords else None,
    }
    owner = {i: dev_rows[i][0] for i in ids}

    meshes: list[Mapping[str, Any]] = []
    layouts: list[Mapping[str, Any]] = []
    index_of: dict[tuple[str, str], int] = {}

    def intern(table: list[Mapping[str, Any]], kind: str, item: Mapping[str, Any]) -> int:
        key = (kind, repr(sorted(item.items())))
        if key not in index_of:
            index_of[key] = len(table)
            table.append(item)
        return index_of[key]

    leaves: dict[str, dict[str, Any]] = {}
    for proc, _, snap in parts:
        mesh_map = [intern(meshes, "mesh", m) for m in snap["meshes"]]
        layout_map = [intern(layouts, "layout", y) for y in snap["layouts"]]
        for leaf in snap["leaves"]:
            held = _held(snap, leaf, owner, proc)
            merged = leaves.get(leaf["path"])
            if merged is None:
                merged = dict(leaf)
                merged["mesh"] = mesh_map[leaf["mesh"]] if leaf["mesh"] is not None else None
                merged["layout"] = layout_map[leaf["layout"]] if leaf["layout"] is not None else None
                merged["processes"] = [proc]
                merged["held_devices"] = sorted(held)
                merged["conflict"] = None
                leaves[leaf["path"]] = merged
                continue
            merged["processes"].append(proc)
            merged["held_devices"] = sorted(set(merged["held_devices"]) | held)
            if merged["conflict"] is None and leaf_signature(leaf) != leaf_signature(merged):
                first = merged["processes"][0]
                merged["conflict"] = (
                    f"process {proc} reports {leaf.get('spec')} {leaf.get('shape')} {leaf.get('dtype')}, "
                    f"process {first} {merged.get('spec')} {merged.get('shape')} {merged.get('dtype')}"
                )
    out: dict[str, Any] = {
        "format": FORMAT,
        "version": VERSION,
        "name": base["name"],
        "created": min(p[2]["created"] for p in parts),
        "jax_version": base["jax_version"],
        "process_index": None,
        "process_count": count,
        "run": {"id": run_id, "process_index": None, "process_count": count},
        "platform": base["platform"],
        "device_kind": base["device_kind"],
        "devices": devices,
        "meshes": meshes,
        "rules": base.get("rules"),
        "layouts": layouts,
        "leaves": list(leaves.values()),
        "skipped": sum(p[2].get("skipped", 0) for p in parts),
        "collectives": base.get("collectives"),
        "jit": base.get("jit"),
    }
    for merged in out["leaves"]:
        layout = layout_of(out, merged)
        holders = {s["device_id"] for s in layout["shards"]} if layout else set()
        merged["missing_devices"] = sorted(holders - set(merged["held_devices"]))
    out["processes"] = {
        "count": count,
        "reported": reported,
        "missing": [p for p in range(count) if p not in reported],
        "snapshots": [{"process_index": p, "id": sid} for p, sid, _ in parts],
        "devices": [[i for i in ids if owner[i] == p] for p in range(count)],
    }
    out["memory"] = memory(out)
    return out


def _held(snap: Mapping[str, Any], leaf: Mapping[str, Any], owner: Mapping[int, int], proc: int) -> set[int]:
    """The devices whose shard of ``leaf`` process ``proc`` holds: its addressable ones."""
    layout = layout_of(snap, leaf)
    if layout is None or leaf["kind"] != "array":
        return set()  # planned leaves (ShapeDtypeStruct, boxes without values) hold nothing yet
    addressable = leaf.get("addressable_devices")
    if addressable is not None:
        return set(addressable)
    return {s["device_id"] for s in layout["shards"] if owner.get(s["device_id"]) == proc}
