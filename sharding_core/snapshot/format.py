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
     "collectives": [...] | null, "jit": {...} | null,
     "target": {...}, "plan": {...}, "program": {...},   (optional: inspect_jit and plans; program: the compiled
                                                          program's report, sharding_core.program.report)
     "fixes": [snapshot, ...], "why_search": {...},   (optional: sharding_core.explain, sharding_core.why)
     "search": {...}}   (optional: the search a pick's plan came from, sharding_core.search, without the plan)

and a leaf::

    {"path", "kind" (array | shape_dtype_struct | sharding | partition_spec | host), "type", "box",
     "shape", "dtype", "sharding", "spec", "typed" (jax.typeof as JAX prints it), "logical_axes", "rules",
     "mesh" (index into meshes),
     "memory_kind", "array_kind" (single_device | sharded | global), "fully_addressable",
     "num_devices", "addressable_devices", "layout" (index into layouts), "note"}

A layout is :meth:`sharding_core.layout.Layout.to_json` without the device-set context (the
snapshot's own ``meshes`` and ``devices`` tables hold it): the same fields as ``POST /api/layout``
answers for one array (``spec``, ``shard_shape``, ``shards`` [{device_id, index, replica_id, tile}],
``tiles``, ``dims``, byte counts). Layouts, meshes and devices are listed once per snapshot and
referred to by index: the leaves of a model share a few dozen layouts, so a 10,000-leaf snapshot
stays a few megabytes.

This module owns the format: its constants and limits, and :func:`check_snapshot`. The package is
pure Python over plain dicts (no JAX at import, but for the what-if's layouts): the server imports it
to check, merge and compare what user programs publish, and never runs their code.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from sharding_core.devices import MAX_DEVICES
from sharding_core.errors import ShardingError

FORMAT = "shardscope.snapshot"
VERSION = 1

MAX_SNAPSHOT_LEAVES = 100_000
"""Leaves in one snapshot (a large model with its optimizer state has a few thousand)."""

MAX_LEAF_PATH_CHARS = 1024
MAX_FIX_SNAPSHOTS = 64
"""Recompiled programs an explained snapshot carries in ``fixes`` (one per fix kept: bounded by the budget)."""
MAX_SNAPSHOT_NAME_CHARS = 256
MAX_RUN_PROCESSES = 4096
MAX_RULES = 256

BAD_SNAPSHOT = "bad_snapshot"
RUN_CONFLICT = "run_conflict"

LEAF_KINDS = ("array", "shape_dtype_struct", "sharding", "partition_spec", "host")
ARRAY_KINDS = ("single_device", "sharded", "global")
AXIS_TYPE_NAMES = ("Auto", "Explicit", "Manual")
"""Mesh axis types as JAX names them (``AxisType.<name>``), in the snapshot's ``meshes``."""

SNAPSHOT_FIELDS = ("format", "version", "name", "created", "jax_version", "process_index", "process_count", "run",
                   "platform", "device_kind", "devices", "meshes", "rules", "layouts", "leaves", "skipped",
                   "collectives", "jit")  # fmt: skip
"""Every snapshot's fields (what :func:`sharding_core.capture` writes)."""
PROGRAM_FIELDS = ("findings", "values", "target", "memory_timeline", "program", "plan", "cost_profile")
"""What ``inspect_jit``, ``explain`` and plans add (:mod:`sharding_core.capturing`): the silent waste found and every
value's sharding (``findings`` also on a capture whose arrays jit would refuse), the target, memory over program
order (plans), the program report, the plan, and the calibrated profile its figures came from; a fix's snapshot has
them too."""
EXPLAINED_FIELDS = ("fixes", "why_search")
"""What ``explain`` adds besides (its fixes' snapshots carry none of these two)."""
SEARCH_FIELDS = ("search",)
"""What a search's pick's plan adds (:func:`sharding_core.search`): the search it came from, every candidate with
its compiled figures and the front, so the dashboard and the widget draw the front beside the pick's plan."""
MAX_SEARCH_CANDIDATES = 4096
"""Candidates a published search lists (a 4 x 8 x 8 slice's space with three knobs is a few hundred)."""
DEVICE_COLUMNS = ("id", "process_index", "core_on_chip", "coords")
MESH_FIELDS = ("shape", "axis_names", "axis_types", "device_ids")
RUN_FIELDS = ("id", "process_index", "process_count")
LEAF_FIELDS = ("path", "kind", "type", "box", "shape", "dtype", "sharding", "spec", "typed", "declared_spec",
               "logical_axes", "rules", "mesh", "mesh_axes", "memory_kind", "array_kind", "fully_addressable",
               "num_devices", "addressable_devices", "layout", "note")  # fmt: skip
"""The format's fields, written once: the server's request model (``server/api/snapshots.py``) declares exactly
these (``tests/test_snapshots_api.py`` checks it) and :func:`check_snapshot` cross-checks what they point at."""

ID_PATTERN = r"[A-Za-z0-9_-]{22,64}"
"""Every id the dashboard makes and takes — share links, snapshots, runs (their secret and their read id), kernel
jobs: ``secrets.token_urlsafe(16)`` (128 random bits, 22 characters; up to 64 so longer ids can come later). The
one pattern: the store, the request models and the front end (a generated module) read it from here."""
RUN_ID_RE = re.compile(ID_PATTERN)
"""Run ids are secrets shared by a job's processes (``secrets.token_urlsafe(16)``: 128 random bits)."""


def bad(message: str, hint: str | None = None, **details: Any) -> ShardingError:
    return ShardingError(BAD_SNAPSHOT, message, hint=hint, **details)


def check_snapshot(snap: Mapping[str, Any]) -> None:
    """Cross-checks a snapshot whose field types are already valid (the server's request model).

    Every index must point at something that exists: meshes at device ids in the devices table,
    leaves at meshes, shards at devices and in-bounds index ranges. Raises ``bad_snapshot`` naming
    the leaf and field, so a broken producer is told exactly what it sent.
    """
    if snap.get("version") != VERSION:
        raise bad(f"snapshot version {snap.get('version')!r} is not supported; this server reads version {VERSION}")
    n, known = _check_devices(snap)
    _check_meshes(snap["meshes"], n, known)
    run = snap.get("run")
    if run is not None:
        if not RUN_ID_RE.fullmatch(run["id"]):
            raise bad("run.id must be 22 to 64 characters of A-Z a-z 0-9 _ - (at least 128 random bits)")
        if run["process_index"] != snap["process_index"] or run["process_count"] != snap["process_count"]:
            raise bad("run.process_index and run.process_count must equal the snapshot's own")
    for k, layout in enumerate(snap["layouts"]):
        _check_layout(k, layout, known)
    _check_collectives("collectives", snap.get("collectives") or (), n, known)
    program = snap.get("program")
    if program is not None:
        _check_collectives("program.collectives", program.get("collectives") or (), n, known)
    for i, leaf in enumerate(snap["leaves"]):
        _check_leaf(i, leaf, snap, known)
    _check_fixes(snap)


def _check_devices(snap: Mapping[str, Any]) -> tuple[int, set[int]]:
    """The devices table's columns agree and its processes (or a compile-only target's hosts) are in range."""
    devices = snap["devices"]
    ids = devices["id"]
    n = len(ids)
    if n > MAX_DEVICES:
        raise bad(f"the devices table has {n} devices; at most {MAX_DEVICES} (setting max_devices)")
    for column in ("process_index", "core_on_chip"):
        if len(devices[column]) != n:
            raise bad(f"devices.{column} has {len(devices[column])} entries for {n} devices")
    if devices.get("coords") is not None and len(devices["coords"]) != n:
        raise bad(f"devices.coords has {len(devices['coords'])} entries for {n} devices")
    known = set(ids)
    if len(known) != n:
        raise bad("devices.id lists a device more than once")
    if not 1 <= snap["process_count"] <= MAX_RUN_PROCESSES or not 0 <= snap["process_index"] < snap["process_count"]:
        raise bad(f"process_index {snap['process_index']} is not in range(process_count={snap['process_count']})")
    target = snap.get("target")
    if target is not None and target.get("compile_only"):
        # Compiled for a slice this process does not run on (shardscope.mesh): its devices sit on the
        # slice's hosts, which are no processes of this program.
        hosts = int(target["hosts"])
        if any(not 0 <= p < hosts for p in devices["process_index"]):
            raise bad(f"devices.process_index must be in range(target.hosts={hosts}) for a compile-only target")
    elif any(not 0 <= p < snap["process_count"] for p in devices["process_index"]):
        raise bad(
            f"devices.process_index must be in range(process_count={snap['process_count']})",
            hint="a program compiled for devices of other hosts (a TPU slice planned from a laptop) carries a "
            "target with compile_only true and the slice's hosts (sharding_core.inspect_jit adds it)",
        )
    return n, known


def _check_meshes(meshes: Sequence[Mapping[str, Any]], n: int, known: set[int]) -> None:
    for m, mesh in enumerate(meshes):
        shape = mesh["shape"]
        if len(mesh["axis_names"]) != len(shape) or len(mesh["axis_types"]) != len(shape):
            raise bad(f"meshes[{m}]: shape, axis_names and axis_types must have one entry per axis")
        if len(set(mesh["axis_names"])) != len(shape):
            raise bad(f"meshes[{m}]: axis names must be unique, got {mesh['axis_names']}")
        if math.prod(shape) > n:
            raise bad(f"meshes[{m}] has {math.prod(shape)} positions but the devices table {n} devices")
        flat = flatten_ids(mesh["device_ids"], shape, f"meshes[{m}].device_ids")
        missing = [d for d in flat if d not in known]
        if missing:
            raise bad(f"meshes[{m}] uses devices {missing[:8]} that are not in the devices table")


def _check_collectives(where: str, collectives: Sequence[Mapping[str, Any]], n: int, known: set[int]) -> None:
    for c, coll in enumerate(collectives):
        # Groups list each device at most once (a full ring permute: all n); pairs at most one per source
        # (n pairs, 2n members). Both bounded by the devices table before anything is walked.
        groups = coll["groups"] or ()
        pairs = coll["pairs"] or ()
        if sum(len(g) for g in groups) > n or len(pairs) > n:
            raise bad(
                f"{where}[{c}] lists more group members ({sum(len(g) for g in groups)}) or pairs "
                f"({len(pairs)}) than the {n} devices of the devices table"
            )
        if any(d not in known for table in (groups, pairs) for row in table for d in row):
            raise bad(f"{where}[{c}] names devices that are not in the devices table")


def _check_fixes(snap: Mapping[str, Any]) -> None:
    """Each fix's program is a snapshot of its own (sharding_core.explain), never with fixes of its own, and every
    fix a collective's why lists points at one."""
    fixes = snap.get("fixes") or ()
    for k, fixed in enumerate(fixes):
        if fixed.get("fixes"):
            raise bad(f"fixes[{k}] carries fixes of its own: a fix's snapshot is one program")
        try:
            check_snapshot(fixed)
        except ShardingError as e:
            raise bad(f"fixes[{k}]: {e.message}", e.hint) from None
    for c, coll in enumerate(snap.get("collectives") or ()):
        for fix in (coll.get("why") or {}).get("fixes") or ():
            result = fix.get("result")
            if result is not None and not 0 <= result < len(fixes):
                raise bad(f"collectives[{c}]: a fix names result {result}, but the snapshot has {len(fixes)} fixes")


def flatten_ids(nested: Any, shape: Sequence[int], where: str) -> list[int]:
    """The ids of a nested list in mesh order, checked against the mesh shape (never deeper than it)."""
    out: list[int] = []

    def walk(node: Any, depth: int) -> None:
        if depth == len(shape):
            if isinstance(node, bool) or not isinstance(node, int):
                raise bad(f"{where}: expected a device id at depth {depth}, got {kind_name(node)}")
            out.append(node)
            return
        if not isinstance(node, list) or len(node) != shape[depth]:
            raise bad(f"{where}: expected a list of {shape[depth]} at depth {depth} (mesh shape {list(shape)})")
        for child in node:
            walk(child, depth + 1)

    walk(nested, 0)
    return out


def _check_layout(k: int, layout: Mapping[str, Any], known: set[int]) -> None:
    where = f"layouts[{k}]"
    shape = layout["shape"]
    rank = len(shape)
    if len(layout["shard_shape"]) != rank or len(layout["dims"]) != rank:
        raise bad(f"{where}: shard_shape and dims need one entry per dimension (rank {rank})")
    if layout["bytes_per_device"] != math.prod(layout["shard_shape"]) * layout["itemsize"]:
        raise bad(f"{where}: bytes_per_device must be the shard shape's size times itemsize")
    tiles = layout["tiles"]
    if len(layout["shards"]) > len(known) or sum(len(t) for t in tiles) > len(known):
        raise bad(f"{where}: more shards or tile members than devices in the devices table")
    for s, shard in enumerate(layout["shards"]):
        if shard["device_id"] not in known:
            raise bad(f"{where}: shard {s} is on device {shard['device_id']}, which is not in the devices table")
        index = shard["index"]
        if len(index) != rank or any(
            len(b) != 2 or not 0 <= b[0] <= b[1] <= d for b, d in zip(index, shape, strict=False)
        ):
            raise bad(f"{where}: shard {s} has index bounds {clip(repr(index))} outside the shape {shape}")
        if not 0 <= shard["tile"] < len(tiles):
            raise bad(f"{where}: shard {s} names tile {shard['tile']}, but there are {len(tiles)} tiles")


def _check_leaf(i: int, leaf: Mapping[str, Any], snap: Mapping[str, Any], known: set[int]) -> None:
    where = f"leaves[{i}] ({clip(leaf['path'])})"
    num_meshes = len(snap["meshes"])
    if leaf["mesh"] is not None and not 0 <= leaf["mesh"] < num_meshes:
        raise bad(f"{where}: mesh {leaf['mesh']} is not an index into meshes (there are {num_meshes})")
    if leaf["layout"] is not None:
        if not 0 <= leaf["layout"] < len(snap["layouts"]):
            raise bad(f"{where}: layout {leaf['layout']} is not an index into layouts")
        if leaf["shape"] is None or list(snap["layouts"][leaf["layout"]]["shape"]) != list(leaf["shape"]):
            raise bad(f"{where}: a leaf with a layout needs a shape, equal to the layout's")
    addressable = leaf.get("addressable_devices")
    if addressable is not None and (len(addressable) > len(known) or any(d not in known for d in addressable)):
        raise bad(f"{where}: addressable_devices lists devices not in the devices table")


def layout_of(snap: Mapping[str, Any], leaf: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The leaf's layout (leaves refer to the snapshot's ``layouts`` by index)."""
    k = leaf.get("layout")
    return snap["layouts"][k] if k is not None else None


def leaf_signature(leaf: Mapping[str, Any]) -> tuple[Any, ...]:
    """What two reports of one leaf must agree on: spec, shape and dtype."""
    return (leaf.get("spec"), leaf.get("shape"), leaf.get("dtype"))


def blocks(layout: Mapping[str, Any]) -> dict[int, list[list[int]]]:
    """Each device's block (index bounds) in a layout."""
    return {s["device_id"]: s["index"] for s in layout["shards"]}


def kind_name(value: Any) -> str:
    return type(value).__name__


def clip(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
