"""The merge of a multi-process run: one global picture from the snapshots each process published.

Parts are folded in one at a time (:class:`RunMerger`): the caller parses a part, adds it and drops
it, so merging holds the merged result plus one part, however many processes reported.
:func:`part_keys` and :func:`check_part` say what every part of one run must agree on, so a part
that would make the merge meaningless is refused when it is published rather than merged silently.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from sharding_core.errors import NOT_FOUND, ShardingError
from sharding_core.snapshot.format import FORMAT, VERSION, clip, layout_of, leaf_signature
from sharding_core.snapshot.memory import memory

RUN_MISMATCH = "run_mismatch"
PROCESS_COUNT_KEY = "process_count"
_LEAF = "leaf:"
_DEVICE = "device:"
_SIGNATURE_FIELDS = ("spec", "shape", "dtype")  # the order of leaf_signature


def part_keys(snap: Mapping[str, Any]) -> dict[str, str]:
    """What every part of a run must agree on, as key -> compact JSON: the process count, each leaf's
    spec, shape and dtype (by path), and each device's process. Each value also names the process
    that reported it first, for the message when a later part disagrees."""
    proc = snap["process_index"]
    keys = {PROCESS_COUNT_KEY: _json([snap["process_count"], proc])}
    for leaf in snap["leaves"]:
        keys[_LEAF + leaf["path"]] = _json([*leaf_signature(leaf), proc])
    devices = snap["devices"]
    for dev, owner in zip(devices["id"], devices["process_index"], strict=True):
        keys[f"{_DEVICE}{dev}"] = _json([owner, proc])
    return keys


def check_part(snap: Mapping[str, Any], run: Mapping[str, str]) -> None:
    """Refuses a part that disagrees with the run's keys so far (:func:`part_keys` of the earlier
    parts) with ``run_mismatch``, naming the field and, for a leaf, its path."""
    proc = snap["process_index"]
    known = run.get(PROCESS_COUNT_KEY)
    if known is not None:
        count, first = json.loads(known)
        if count != snap["process_count"]:
            raise ShardingError(
                RUN_MISMATCH,
                f"process {proc} reports process_count {snap['process_count']}, but process {first} of this run "
                f"reported {count}: every process of a run must report the same process_count",
                hint="processes of different jobs need different run ids (leave run_id out and one is drawn)",
                field="process_count",
            )
    devices = snap["devices"]
    for dev, owner in zip(devices["id"], devices["process_index"], strict=True):
        known = run.get(f"{_DEVICE}{dev}")
        if known is not None:
            their_owner, first = json.loads(known)
            if their_owner != owner:
                raise ShardingError(
                    RUN_MISMATCH,
                    f"process {proc} says device {dev} belongs to process {owner}, but process {first} of this run "
                    f"says process {their_owner} (field devices.process_index)",
                    hint="every process of a run must see the same global device table (jax.devices())",
                    field="devices.process_index",
                    device=dev,
                )
    for leaf in snap["leaves"]:
        known = run.get(_LEAF + leaf["path"])
        if known is None:
            continue
        *theirs, first = json.loads(known)
        for field, mine, other in zip(_SIGNATURE_FIELDS, leaf_signature(leaf), theirs, strict=True):
            if mine != other:
                raise ShardingError(
                    RUN_MISMATCH,
                    f"leaf {clip(leaf['path'])!r}: process {proc} reports {field} {_show(mine)}, but process {first} "
                    f"of this run reported {_show(other)}: the parts of a run must agree on each leaf's spec, shape "
                    "and dtype",
                    hint="publish each process's state from the same step of the same program, or use a new run id",
                    field=field,
                    leaf=clip(leaf["path"], 256),
                )


class RunMerger:
    """Folds the snapshots of a ``jax.distributed`` job's processes into one global picture.

    Each process sees the whole of a global array's sharding (``devices_indices_map`` covers every
    device) but holds only its own devices' shards; the merge keeps one leaf per path and says, per
    leaf, which processes reported it (``processes``), which devices' shards a reporting process
    holds (``held_devices``) and which it does not (``missing_devices``: their owner never reported).
    Processes that never reported are listed as missing.

    :meth:`add` a part at a time, in process order; it keeps only what the merged picture needs (the
    first part's run-wide fields, the leaves, layouts and meshes not seen before), so the part itself
    can be dropped. :meth:`result` gives the merge.
    """

    def __init__(self, run_id: str, *, text: Callable[[Mapping[str, Any]], bytes] | None = None) -> None:
        self.run_id = run_id
        # Layouts and meshes equal in content are listed once; ``text`` is their canonical text (the
        # server passes orjson's with sorted keys, 4x faster than this default).
        self._text = text or _repr_text
        self._base: dict[str, Any] | None = None
        self._count = 0
        self._created = float("inf")
        self._skipped = 0
        self._parts: list[tuple[int, str]] = []
        self._devices: dict[int, tuple[int, int, Any]] = {}
        self._meshes: list[Mapping[str, Any]] = []
        self._layouts: list[Mapping[str, Any]] = []
        self._index_of: dict[bytes, int] = {}
        self._leaves: dict[str, dict[str, Any]] = {}
        self._held: dict[str, set[int]] = {}

    def add(self, proc: int, snapshot_id: str, snap: Mapping[str, Any]) -> None:
        """Folds in process ``proc``'s snapshot (stored as ``snapshot_id``)."""
        if self._base is None:
            fields = ("name", "jax_version", "platform", "device_kind", "rules", "collectives", "jit")
            self._base = {k: snap.get(k) for k in fields}
        self._parts.append((proc, snapshot_id))
        self._count = max(self._count, snap["process_count"])
        self._created = min(self._created, snap["created"])
        self._skipped += snap.get("skipped", 0)
        d = snap["devices"]
        coords = d.get("coords")
        owner: dict[int, int] = {}
        for k, dev_id in enumerate(d["id"]):
            row = self._devices.setdefault(
                dev_id, (d["process_index"][k], d["core_on_chip"][k], coords[k] if coords else None)
            )
            owner[dev_id] = row[0]
        mesh_map = [self._intern(self._meshes, m) for m in snap["meshes"]]
        layout_map = [self._intern(self._layouts, y) for y in snap["layouts"]]
        for leaf in snap["leaves"]:
            held = _held(snap, leaf, owner, proc)
            merged = self._leaves.get(leaf["path"])
            if merged is None:
                merged = dict(leaf)
                merged["mesh"] = mesh_map[leaf["mesh"]] if leaf["mesh"] is not None else None
                merged["layout"] = layout_map[leaf["layout"]] if leaf["layout"] is not None else None
                merged["processes"] = [proc]
                merged["conflict"] = None
                self._leaves[leaf["path"]] = merged
                self._held[leaf["path"]] = held
                continue
            merged["processes"].append(proc)
            self._held[leaf["path"]] |= held
            # Published parts are checked (check_part), so this is for parts stored before that check.
            if merged["conflict"] is None and leaf_signature(leaf) != leaf_signature(merged):
                first = merged["processes"][0]
                merged["conflict"] = (
                    f"process {proc} reports {leaf.get('spec')} {leaf.get('shape')} {leaf.get('dtype')}, "
                    f"process {first} {merged.get('spec')} {merged.get('shape')} {merged.get('dtype')}"
                )

    def _intern(self, table: list[Mapping[str, Any]], item: Mapping[str, Any]) -> int:
        # A digest of the item's text, not the text, as the key: the index stays small next to big layouts.
        key = hashlib.sha256(self._text(item)).digest()
        index = self._index_of.get(key)
        if index is None:
            index = self._index_of[key] = len(table)
            table.append(item)
        return index

    def result(self) -> dict[str, Any]:
        """The merged run (the format's fields, with ``processes`` and ``memory``)."""
        base = self._base
        if base is None:
            raise ShardingError(NOT_FOUND, "no such run")
        ids = sorted(self._devices)
        has_coords = all(self._devices[i][2] is not None for i in ids)
        devices = {
            "id": ids,
            "process_index": [self._devices[i][0] for i in ids],
            "core_on_chip": [self._devices[i][1] for i in ids],
            "coords": [self._devices[i][2] for i in ids] if has_coords else None,
        }
        owner = {i: self._devices[i][0] for i in ids}
        count = self._count
        parts = sorted(self._parts)
        reported = [p for p, _ in parts]
        out: dict[str, Any] = {
            "format": FORMAT,
            "version": VERSION,
            "name": base["name"],
            "created": self._created,
            "jax_version": base["jax_version"],
            "process_index": None,
            "process_count": count,
            "run": {"id": self.run_id, "process_index": None, "process_count": count},
            "platform": base["platform"],
            "device_kind": base["device_kind"],
            "devices": devices,
            "meshes": self._meshes,
            "rules": base.get("rules"),
            "layouts": self._layouts,
            "leaves": list(self._leaves.values()),
            "skipped": self._skipped,
            "collectives": base.get("collectives"),
            "jit": base.get("jit"),
        }
        for merged in out["leaves"]:
            held = self._held[merged["path"]]
            merged["held_devices"] = sorted(held)
            layout = layout_of(out, merged)
            holders = {s["device_id"] for s in layout["shards"]} if layout else set()
            merged["missing_devices"] = sorted(holders - held)
        out["processes"] = {
            "count": count,
            "reported": reported,
            "missing": [p for p in range(count) if p not in set(reported)],
            "snapshots": [{"process_index": p, "id": sid} for p, sid in parts],
            "devices": [[i for i in ids if owner[i] == p] for p in range(count)],
        }
        out["memory"] = memory(out)
        return out


def merge_run(
    run_id: str,
    parts: Iterable[tuple[int, str, Mapping[str, Any]]],
    *,
    text: Callable[[Mapping[str, Any]], bytes] | None = None,
) -> dict[str, Any]:
    """The merge of ``(process_index, snapshot id, snapshot)`` parts; pass a generator that parses
    each part as it is asked for, and only one part is held at a time."""
    merger = RunMerger(run_id, text=text)
    for proc, snapshot_id, snap in parts:
        merger.add(proc, snapshot_id, snap)
        del snap  # before the next part is parsed
    return merger.result()


def _repr_text(item: Mapping[str, Any]) -> bytes:
    return repr(sorted(item.items())).encode()


def _held(snap: Mapping[str, Any], leaf: Mapping[str, Any], owner: Mapping[int, int], proc: int) -> set[int]:
    """The devices whose shard of ``leaf`` process ``proc`` holds: its addressable ones."""
    layout = layout_of(snap, leaf)
    if layout is None or leaf["kind"] != "array":
        return set()  # planned leaves (ShapeDtypeStruct, boxes without values) hold nothing yet
    addressable = leaf.get("addressable_devices")
    if addressable is not None:
        return set(addressable)
    return {s["device_id"] for s in layout["shards"] if owner.get(s["device_id"]) == proc}


def _json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _show(value: Any) -> str:
    return clip(_json(value) if not isinstance(value, str) else value)
