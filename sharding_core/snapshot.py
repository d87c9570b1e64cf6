"""Snapshots as data: the versioned JSON that :func:`sharding_core.capture` makes, and what the dashboard
computes from it — per-device memory, the merge of a multi-process run, the diff of two snapshots and
the "what-if" of other Flax logical-axis rules.

A snapshot (``"version": 1``)::

    {"format": "shardscope.snapshot", "version": 1, "name", "created", "jax_version",
     "process_index", "process_count", "run": {"id", "process_index", "process_count"} | null,
     "platform", "device_kind",
     "devices": {"id": [...], "process_index": [...], "core_on_chip": [...], "coords": [[x,y,z]] | null},
     "meshes": [{"shape", "axis_names", "axis_types", "device_ids" (nested, mesh order)}],
     "rules": [[logical, mesh axis | [mesh axes] | null], ...] | null,
     "layouts": [layout, ...], "leaves": [leaf, ...], "skipped": int,
     "collectives": [...] | null, "jit": {...} | null}

and a leaf::

    {"path", "kind" (array | shape_dtype_struct | sharding | partition_spec | host), "type", "box",
     "shape", "dtype", "sharding", "spec", "logical_axes", "rules", "mesh" (index into meshes),
     "memory_kind", "array_kind" (single_device | sharded | global), "fully_addressable",
     "num_devices", "addressable_devices", "layout" (index into layouts), "note"}

A layout carries the same fields as ``POST /api/layout`` answers for one array (``spec``,
``shard_shape``, ``shards`` [{device_id, index, replica_id, tile}], ``tiles``, ``dims``, byte
counts). Layouts, meshes and devices are listed once per snapshot and referred to by index: the
leaves of a model share a few dozen layouts, so a 10,000-leaf snapshot stays a few megabytes.

This module is pure Python over plain dicts (no JAX at import): the server imports it to check,
merge and compare what user programs publish, and never runs their code.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from sharding_core.errors import NOT_FOUND, TOO_LARGE, ShardingError

FORMAT = "shardscope.snapshot"
VERSION = 1

MAX_SNAPSHOT_LEAVES = 100_000
"""Leaves in one snapshot (a large model with its optimizer state has a few thousand)."""

MAX_LEAF_PATH_CHARS = 1024
MAX_SNAPSHOT_NAME_CHARS = 256
MAX_RUN_PROCESSES = 4096
MAX_RULES = 256

BAD_SNAPSHOT = "bad_snapshot"
BAD_RULES = "bad_rules"
RUN_CONFLICT = "run_conflict"

LEAF_KINDS = ("array", "shape_dtype_struct", "sharding", "partition_spec", "host")
ARRAY_KINDS = ("single_device", "sharded", "global")
LEAF_LAYOUT_KEYS = (
    "spec",
    "shape",
    "dtype",
    "itemsize",
    "shard_shape",
    "shards",
    "tiles",
    "dims",
    "replication_factor",
    "replicated_axes",
    "unreduced_axes",
    "bytes_per_device",
    "total_bytes",
    "logical_bytes",
)
"""The fields of a leaf's layout: those of ``/api/layout``'s answer that belong to one array."""

RUN_ID_RE = re.compile(r"[A-Za-z0-9_-]{22,64}")
"""Run ids are secrets shared by a job's processes (``secrets.token_urlsafe(16)``: 128 random bits)."""

Rule = tuple[str, Any]  # (logical name, mesh axis | tuple of mesh axes | None)


def _bad(message: str, hint: str | None = None, **details: Any) -> ShardingError:
    return ShardingError(BAD_SNAPSHOT, message, hint=hint, **details)


# ---- Flax's logical axis rules ---------------------------------------------------------------------


def check_rules(rules: Any) -> tuple[Rule, ...]:
    """Rules as Flax takes them: pairs ``(logical name, mesh axis | (mesh axes...) | None)``."""
    if not isinstance(rules, (list, tuple)):
        raise ShardingError(BAD_RULES, f"rules must be a list of (logical name, mesh axes) pairs, got {_kind(rules)}")
    if len(rules) > MAX_RULES:
        raise ShardingError(TOO_LARGE, f"at most {MAX_RULES} rules are allowed, got {len(rules)}", limit=MAX_RULES)
    out: list[Rule] = []
    for i, rule in enumerate(rules):
        if not isinstance(rule, (list, tuple)) or len(rule) != 2 or not isinstance(rule[0], str):
            raise ShardingError(
                BAD_RULES,
                f"rule {i} must be a pair (logical name, mesh axes), got {_clip(repr(rule))}",
                hint="e.g. ('batch', 'data'), ('hidden', 'model'), ('embed', None)",
                rule=i,
            )
        target = rule[1]
        if isinstance(target, (list, tuple)):
            if not all(isinstance(a, str) for a in target):
                raise ShardingError(BAD_RULES, f"rule {i}: mesh axes must be names, got {_clip(repr(target))}", rule=i)
            target = tuple(target)
        elif target is not None and not isinstance(target, str):
            raise ShardingError(
                BAD_RULES, f"rule {i}: the mesh side must be an axis name, a tuple of them or None", rule=i
            )
        out.append((rule[0], target))
    return tuple(out)


def logical_to_mesh_axes(names: Sequence[str | None], rules: Sequence[Rule]) -> list[Any]:
    """The PartitionSpec entries for an array whose dimensions carry logical ``names``.

    Exactly ``flax.linen.logical_to_mesh_axes`` (tests compare the two): rules are taken in order of
    precedence; a rule ``(name, mesh)`` applies to the dimension called ``name`` if that dimension is
    still unassigned and none of the rule's mesh axes is already used by another dimension. A rule
    to ``None`` assigns "unsharded", so later rules for that name no longer apply. Dimensions left
    unassigned, and ``None`` names, are not sharded. A name used twice is an error (as in Flax).
    """
    strings = [n for n in names if isinstance(n, str)]
    dups = sorted({n for n in strings if strings.count(n) > 1})
    if dups:
        raise ShardingError(
            BAD_RULES,
            f"logical names {tuple(dups)} occur more than once in {tuple(names)}; each names one dimension",
            names=list(dups),
        )
    unassigned = object()
    result: list[Any] = [unassigned if isinstance(n, str) else n for n in names]
    for logical, mesh in rules:
        if logical not in names:
            continue
        pos = list(names).index(logical)
        if result[pos] is not unassigned:
            continue
        wanted = set(mesh if isinstance(mesh, tuple) else (mesh,)) - {None}
        used = {a for entry in result for a in (entry if isinstance(entry, tuple) else (entry,)) if isinstance(a, str)}
        if wanted & used:
            continue
        result[pos] = mesh
    return [None if r is unassigned else r for r in result]


# ---- checking what a program published --------------------------------------------------------------


def check_snapshot(snap: Mapping[str, Any]) -> None:
    """Cross-checks a snapshot whose field types are already valid (the server's request model).

    Every index must point at something that exists: meshes at device ids in the devices table,
    leaves at meshes, shards at devices and in-bounds index ranges. Raises ``bad_snapshot`` naming
    the leaf and field, so a broken producer is told exactly what it sent.
    """
    if snap.get("version") != VERSION:
        raise _bad(f"snapshot version {snap.get('version')!r} is not supported; this server reads version {VERSION}")
    from sharding_core.devices import MAX_DEVICES

    devices = snap["devices"]
    ids = devices["id"]
    n = len(ids)
    if n > MAX_DEVICES:
        raise _bad(f"the devices table has {n} devices; at most {MAX_DEVICES} (setting max_devices)")
    for column in ("process_index", "core_on_chip"):
        if len(devices[column]) != n:
            raise _bad(f"devices.{column} has {len(devices[column])} entries for {n} devices")
    if devices.get("coords") is not None and len(devices["coords"]) != n:
        raise _bad(f"devices.coords has {len(devices['coords'])} entries for {n} devices")
    known = set(ids)
    if len(known) != n:
        raise _bad("devices.id lists a device more than once")
    if not 1 <= snap["process_count"] <= MAX_RUN_PROCESSES or not 0 <= snap["process_index"] < snap["process_count"]:
        raise _bad(f"process_index {snap['process_index']} is not in range(process_count={snap['process_count']})")
    if any(not 0 <= p < snap["process_count"] for p in devices["process_index"]):
        raise _bad(f"devices.process_index must be in range(process_count={snap['process_count']})")
    meshes = snap["meshes"]
    for m, mesh in enumerate(meshes):
        shape = mesh["shape"]
        if len(mesh["axis_names"]) != len(shape) or len(mesh["axis_types"]) != len(shape):
            raise _bad(f"meshes[{m}]: shape, axis_names and axis_types must have one entry per axis")
        if len(set(mesh["axis_names"])) != len(shape):
            raise _bad(f"meshes[{m}]: axis names must be unique, got {mesh['axis_names']}")
        if math.prod(shape) > n:
            raise _bad(f"meshes[{m}] has {math.prod(shape)} positions but the devices table {n} devices")
        flat = flatten_ids(mesh["device_ids"], shape, f"meshes[{m}].device_ids")
        missing = [d for d in flat if d not in known]
        if missing:
            raise _bad(f"meshes[{m}] uses devices {missing[:8]} that are not in the devices table")
    run = snap.get("run")
    if run is not None:
        if not RUN_ID_RE.fullmatch(run["id"]):
            raise _bad("run.id must be 22 to 64 characters of A-Z a-z 0-9 _ - (at least 128 random bits)")
        if run["process_index"] != snap["process_index"] or run["process_count"] != snap["process_count"]:
            raise _bad("run.process_index and run.process_count must equal the snapshot's own")
    for k, layout in enumerate(snap["layouts"]):
        _check_layout(k, layout, known)
    for c, coll in enumerate(snap.get("collectives") or ()):
        members = [d for table in (coll["groups"] or (), coll["pairs"] or ()) for row in table for d in row]
        if len(members) > 2 * n or any(d not in known for d in members):
            raise _bad(f"collectives[{c}] names devices that are not in the devices table")
    for i, leaf in enumerate(snap["leaves"]):
        _check_leaf(i, leaf, snap, known)


def flatten_ids(nested: Any, shape: Sequence[int], where: str) -> list[int]:
    """The ids of a nested list in mesh order, checked against the mesh shape (never deeper than it)."""
    out: list[int] = []

    def walk(node: Any, depth: int) -> None:
        if depth == len(shape):
            if isinstance(node, bool) or not isinstance(node, int):
                raise _bad(f"{where}: expected a device id at depth {depth}, got {_kind(node)}")
            out.append(node)
            return
        if not isinstance(node, list) or len(node) != shape[depth]:
            raise _bad(f"{where}: expected a list of {shape[depth]} at depth {depth} (mesh shape {list(shape)})")
        for child in node:
            walk(child, depth + 1)

    walk(nested, 0)
    return out


def _check_layout(k: int, layout: Mapping[str, Any], known: set[int]) -> None:
    where = f"layouts[{k}]"
    shape = layout["shape"]
    rank = len(shape)
    if len(layout["shard_shape"]) != rank or len(layout["dims"]) != rank:
        raise _bad(f"{where}: shard_shape and dims need one entry per dimension (rank {rank})")
    if layout["bytes_per_device"] != math.prod(layout["shard_shape"]) * layout["itemsize"]:
        raise _bad(f"{where}: bytes_per_device must be the shard shape's size times itemsize")
    tiles = layout["tiles"]
    if len(layout["shards"]) > len(known) or sum(len(t) for t in tiles) > len(known):
        raise _bad(f"{where}: more shards or tile members than devices in the devices table")
    for s, shard in enumerate(layout["shards"]):
        if shard["device_id"] not in known:
            raise _bad(f"{where}: shard {s} is on device {shard['device_id']}, which is not in the devices table")
        index = shard["index"]
        if len(index) != rank or any(
            len(b) != 2 or not 0 <= b[0] <= b[1] <= d for b, d in zip(index, shape, strict=False)
        ):
            raise _bad(f"{where}: shard {s} has index bounds {_clip(repr(index))} outside the shape {shape}")
        if not 0 <= shard["tile"] < len(tiles):
            raise _bad(f"{where}: shard {s} names tile {shard['tile']}, but there are {len(tiles)} tiles")


def _check_leaf(i: int, leaf: Mapping[str, Any], snap: Mapping[str, Any], known: set[int]) -> None:
    where = f"leaves[{i}] ({_clip(leaf['path'])})"
    num_meshes = len(snap["meshes"])
    if leaf["mesh"] is not None and not 0 <= leaf["mesh"] < num_meshes:
        raise _bad(f"{where}: mesh {leaf['mesh']} is not an index into meshes (there are {num_meshes})")
    if leaf["layout"] is not None:
        if not 0 <= leaf["layout"] < len(snap["layouts"]):
            raise _bad(f"{where}: layout {leaf['layout']} is not an index into layouts")
        if leaf["shape"] is None or list(snap["layouts"][leaf["layout"]]["shape"]) != list(leaf["shape"]):
            raise _bad(f"{where}: a leaf with a layout needs a shape, equal to the layout's")
    addressable = leaf.get("addressable_devices")
    if addressable is not None and (len(addressable) > len(known) or any(d not in known for d in addressable)):
        raise _bad(f"{where}: addressable_devices lists devices not in the devices table")


def layout_of(snap: Mapping[str, Any], leaf: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The leaf's layout (leaves refer to the snapshot's ``layouts`` by index)."""
    k = leaf.get("layout")
    return snap["layouts"][k] if k is not None else None


# ---- per-device memory ----------------------------------------------------------------------------


def memory(snap: Mapping[str, Any], layouts: Mapping[int, Mapping[str, Any]] | None = None) -> dict[str, Any]:
    """Bytes per device summed over the leaves' shards, and how uneven that is.

    Every leaf with a layout counts, concrete arrays and planned ones (ShapeDtypeStruct, Flax boxes)
    alike: a planned leaf counts what it would take. ``layouts`` replaces leaves' layouts
    (the what-if). ``ratio`` is the busiest device over the mean; above 1.05 is flagged.
    """
    ids = list(snap["devices"]["id"])
    total = dict.fromkeys(ids, 0)
    override = layouts or {}
    for i, leaf in enumerate(snap["leaves"]):
        layout = override[i] if i in override else layout_of(snap, leaf)
        if layout is None:
            continue
        b = layout["bytes_per_device"]
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
    """The stored form: the snapshot as published plus its per-device memory."""
    out = dict(snap)
    out["memory"] = memory(snap)
    return out


# ---- multi-process runs --------------------------------------------------------------------------


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
            if merged["conflict"] is None and _signature(leaf) != _signature(merged):
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


def _signature(leaf: Mapping[str, Any]) -> tuple[Any, ...]:
    return (leaf.get("spec"), leaf.get("shape"), leaf.get("dtype"))


# ---- diff --------------------------------------------------------------------------------------------


def diff(a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, Any]:
    """Leaves whose sharding differs between two snapshots (matched by path), and the bytes that move.

    A leaf is ``changed`` when its spec, shape, dtype, mesh (axes and device order) or any device's
    block differs. ``bytes_to_move`` counts, for every device in the new layout, the bytes of its new
    block that it did not hold before (the overlap of old and new blocks on the same device stays):
    the data each device must receive to go from ``a`` to ``b``, whichever device sends it. An added
    leaf moves all its bytes, a removed one none.
    """
    a_leaves = {leaf["path"]: leaf for leaf in a["leaves"]}
    b_leaves = {leaf["path"]: leaf for leaf in b["leaves"]}
    rows: list[dict[str, Any]] = []
    counts = {"same": 0, "changed": 0, "added": 0, "removed": 0}
    moved_total = 0
    for path in [*a_leaves, *(p for p in b_leaves if p not in a_leaves)]:
        la, lb = a_leaves.get(path), b_leaves.get(path)
        if la is None:
            assert lb is not None
            yb = layout_of(b, lb)
            status, moved = "added", int(yb["total_bytes"]) if yb else 0
        elif lb is None:
            status, moved = "removed", 0
        else:
            status, moved = _compare(a, la, b, lb)
        counts[status] += 1
        moved_total += moved
        if status == "same":
            continue
        shown = lb if lb is not None else la
        assert shown is not None
        rows.append(
            {
                "path": path,
                "status": status,
                "shape": shown.get("shape"),
                "dtype": shown.get("dtype"),
                "a_spec": la.get("spec") if la else None,
                "b_spec": lb.get("spec") if lb else None,
                "a_mesh": _mesh_text(a, la) if la else None,
                "b_mesh": _mesh_text(b, lb) if lb else None,
                "bytes_to_move": moved,
            }
        )
    return {"summary": {**counts, "bytes_to_move": moved_total}, "leaves": rows}


def _mesh_of(snap: Mapping[str, Any], leaf: Mapping[str, Any]) -> Mapping[str, Any] | None:
    m = leaf.get("mesh")
    return snap["meshes"][m] if m is not None else None


def _mesh_text(snap: Mapping[str, Any], leaf: Mapping[str, Any]) -> str | None:
    mesh = _mesh_of(snap, leaf)
    if mesh is None:
        return None
    return " × ".join(f"{n}({s})" for n, s in zip(mesh["axis_names"], mesh["shape"], strict=True))


def _blocks(layout: Mapping[str, Any]) -> dict[int, list[list[int]]]:
    return {s["device_id"]: s["index"] for s in layout["shards"]}


def _compare(
    a: Mapping[str, Any], la: Mapping[str, Any], b: Mapping[str, Any], lb: Mapping[str, Any]
) -> tuple[str, int]:
    ya, yb = layout_of(a, la), layout_of(b, lb)
    ma, mb = _mesh_of(a, la), _mesh_of(b, lb)
    same_mesh = (ma is None and mb is None) or (
        ma is not None
        and mb is not None
        and (ma["shape"], ma["axis_names"], ma["device_ids"]) == (mb["shape"], mb["axis_names"], mb["device_ids"])
    )
    same_meta = _signature(la) == _signature(lb) and same_mesh
    if yb is None:
        return ("same" if same_meta and ya is None else "changed"), 0
    if ya is None:
        return "changed", int(yb["total_bytes"])
    old, new = _blocks(ya), _blocks(yb)
    if same_meta and old == new:
        return "same", 0
    if list(la.get("shape") or []) != list(lb.get("shape") or []) or la.get("dtype") != lb.get("dtype"):
        return "changed", int(yb["total_bytes"])
    if old == new:
        return "changed", 0  # e.g. the same blocks under another mesh's axis names
    moved = 0
    for dev, block in new.items():
        need = math.prod(hi - lo for lo, hi in block)
        have = old.get(dev)
        overlap = (
            math.prod(max(0, min(h1, h2) - max(l1, l2)) for (l1, h1), (l2, h2) in zip(block, have, strict=True))
            if have is not None
            else 0
        )
        moved += (need - overlap) * int(yb["itemsize"])
    return "changed", moved


# ---- what-if rules --------------------------------------------------------------------------------


def whatif(snap: Mapping[str, Any], rules: Any) -> dict[str, Any]:
    """Every logically named leaf re-laid out under other logical → mesh ``rules``, and the new memory.

    The new spec follows :func:`logical_to_mesh_axes` (Flax's semantics); the new layout is JAX's
    ``NamedSharding(mesh, spec).devices_indices_map(shape)`` on the snapshot's own mesh, rebuilt from
    simulated devices with the same ids, order and hosts (the server never has the user's devices).
    A leaf the new rules cannot shard (an unknown mesh axis, an indivisible dimension) gets its error
    and keeps its captured layout in the memory sums. Layouts are listed once and referred to by index.
    """
    from jax.sharding import PartitionSpec

    from sharding_core.layout import compute_layout
    from sharding_core.mesh import MeshSpec
    from sharding_core.spec import canonical_spec

    checked = check_rules(rules)
    devset = _devset(snap)
    rows: list[dict[str, Any]] = []
    layouts: list[dict[str, Any]] = []
    seen: dict[int, int] = {}
    overrides: dict[int, Mapping[str, Any]] = {}
    for i in logical_leaves(snap):
        leaf = snap["leaves"][i]
        row: dict[str, Any] = {"index": i, "path": leaf["path"], "spec": None, "layout": None, "error": None}
        try:
            pspec = PartitionSpec(*logical_to_mesh_axes(leaf["logical_axes"], checked))
            row["spec"] = canonical_spec(pspec)
            mesh = snap["meshes"][leaf["mesh"]]
            mesh_spec = MeshSpec(
                tuple(mesh["shape"]),
                tuple(mesh["axis_names"]),
                axis_types=tuple(t.lower() for t in mesh["axis_types"]),
                order="devices",
                device_ids=tuple(flatten_ids(mesh["device_ids"], mesh["shape"], "mesh")),
            )
            layout = compute_layout(devset, mesh_spec, pspec, leaf["shape"], leaf["dtype"] or "")
            if id(layout) not in seen:  # compute_layout returns the same cached object for the same input
                full = layout.json
                seen[id(layout)] = len(layouts)
                layouts.append({k: full[k] for k in LEAF_LAYOUT_KEYS})
            row["layout"] = seen[id(layout)]
            overrides[i] = layouts[row["layout"]]
        except ShardingError as e:
            row["error"] = e.to_dict()
        old = layout_of(snap, leaf)
        new = overrides.get(i)
        row["changed"] = new is not None and (
            row["spec"] != leaf.get("spec") or old is None or _blocks(old) != _blocks(new)
        )
        rows.append(row)
    return {
        "rules": [[k, list(v) if isinstance(v, tuple) else v] for k, v in checked],
        "layouts": layouts,
        "leaves": rows,
        "changed": sum(1 for r in rows if r["changed"]),
        "errors": sum(1 for r in rows if r["error"] is not None),
        "memory": memory(snap, overrides),
    }


def _devset(snap: Mapping[str, Any]) -> Any:
    d = snap["devices"]
    coords = d.get("coords")
    key = (
        str(snap.get("platform") or "cpu"),
        str(snap.get("device_kind") or "cpu"),
        tuple(d["id"]),
        tuple(d["process_index"]),
        tuple(d["core_on_chip"]),
        tuple(tuple(c) for c in coords) if coords else None,
    )
    return _devset_cached(key)


@functools.lru_cache(maxsize=16)
def _devset_cached(key: tuple[Any, ...]) -> Any:
    """Simulated devices with a snapshot's ids, hosts and coords (cached, so JAX's caches hit)."""
    from sharding_core.devices import DeviceSet, SimDevice

    platform, kind, ids, procs, cores, coords = key
    devices = tuple(
        SimDevice(i, platform, kind, p, tuple(coords[k]) if coords else None, c)
        for k, (i, p, c) in enumerate(zip(ids, procs, cores, strict=True))
    )
    return DeviceSet(f"snapshot:{platform}:{len(ids)}", platform, devices)


def logical_leaves(snap: Mapping[str, Any]) -> list[int]:
    """Indices of leaves whose dimensions carry Flax logical names and that a what-if can re-lay out."""
    return [
        i
        for i, leaf in enumerate(snap["leaves"])
        if leaf.get("logical_axes") is not None and leaf.get("shape") is not None and leaf.get("mesh") is not None
    ]


def _kind(value: Any) -> str:
    return type(value).__name__


def _clip(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
