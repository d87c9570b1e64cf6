"""Snapshots published by user programs (``sharding_core.publish``): store, read, merge, diff, what-if.

The server never runs user code: it checks what it is sent (the request model, then
:func:`sharding_core.snapshot.format.check_snapshot`), stores it, and computes from the stored data.
Routes are plain ``def`` (FastAPI's threadpool): SQLite and the domain's work keep off the event loop.

* ``POST /api/snapshots`` — store a snapshot (one process's part of a run when it names a run's
  secret); answers ``{"id", "url": "/s/<link>", "run": read id | null}``; 507 past the store's
  budget. With ``shardscope serve --token`` it needs ``Authorization: Bearer <token>``
  (:class:`server.middleware.TokenCheck`).
* ``GET /api/snapshots/{id}`` — the stored snapshot with its id and per-device memory.
* ``GET /api/snapshots/runs/{run_id}`` — the merged picture of a multi-process run, by its read id.
* ``POST /api/snapshots/diff`` — leaves whose sharding changed between two snapshots, bytes that move.
* ``POST /api/snapshots/whatif`` — every logically named leaf under other logical → mesh rules.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import threading
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Annotated, Any, Literal, NotRequired

import orjson
from fastapi import APIRouter
from pydantic import ConfigDict, Field, with_config
from starlette.responses import Response
from typing_extensions import TypedDict

from server.api.deps import SettingsDep, StoreDep, responses
from server.api.links import STORE_ERRORS, link_payload
from server.api.schema import (
    MAX_COLLECTIVES,
    ArrayLayout,
    AxisName,
    AxisSize,
    ByteCount,
    Collective,
    Count,
    DeviceId,
    Dim,
    ErrorDetail,
    LogicalRule,
    MeshInfo,
    Reply,
    Request,
    ShortText,
    SpecText,
    vocab,
)
from server.errors import ApiError, not_found
from server.jsonio import OrjsonResponse, OrjsonRoute
from server.settings import SNAPSHOT_CACHE_BYTES
from server.store import Store
from sharding_core.cache import BoundedCache
from sharding_core.cost.annotate import facts_only, snapshot_with_estimates
from sharding_core.errors import ShardingError
from sharding_core.layout import MAX_RANK
from sharding_core.mesh import MAX_MESH_AXES
from sharding_core.snapshot.diff import diff
from sharding_core.snapshot.format import (
    ARRAY_KINDS,
    FORMAT,
    LEAF_KINDS,
    MAX_LEAF_PATH_CHARS,
    MAX_RULES,
    MAX_RUN_PROCESSES,
    MAX_SNAPSHOT_LEAVES,
    MAX_SNAPSHOT_NAME_CHARS,
    RUN_CONFLICT,
    VERSION,
    check_snapshot,
)
from sharding_core.snapshot.memory import enrich
from sharding_core.snapshot.merge import check_part, merge_run, part_keys
from sharding_core.snapshot.whatif import whatif

if TYPE_CHECKING:
    LeafKind = str
    ArrayKind = str
    FormatName = str
    FormatVersion = int
else:
    LeafKind = vocab(LEAF_KINDS)
    ArrayKind = vocab(ARRAY_KINDS)
    FormatName = Literal[FORMAT]
    FormatVersion = Literal[VERSION]

SNAPSHOTS = "snapshots"
SNAPSHOTS_PATH = "/api/snapshots"
VIEW = "snapshots"

router = APIRouter(route_class=OrjsonRoute, default_response_class=OrjsonResponse, tags=["snapshots"])

# ---- the format: what sharding_core.capture makes and publish sends (sharding_core.snapshot.format) ----

_SNAPSHOT_CONFIG = ConfigDict(strict=True, extra="forbid")
ProcessIndex = Annotated[int, Field(ge=0, lt=MAX_RUN_PROCESSES)]
RecordId = Annotated[str, Field(pattern=r"^[A-Za-z0-9_-]{1,64}$", description="An id from this server")]
RunId = Annotated[
    str,
    Field(
        pattern=r"^[A-Za-z0-9_-]{22,64}$",
        description="A run's id, at least 128 random bits, URL-safe: in a snapshot's run, the run's secret "
        "(which writes); in a reference, the run's read id (which reads)",
    ),
]


@with_config(_SNAPSHOT_CONFIG)
class SnapshotDevices(TypedDict):
    id: Annotated[list[DeviceId], Field(min_length=1)]
    process_index: list[ProcessIndex]
    core_on_chip: list[Annotated[int, Field(ge=0, le=1024)]]
    coords: list[Annotated[list[Count], Field(min_length=3, max_length=3)]] | None


@with_config(_SNAPSHOT_CONFIG)
class SnapshotLeaf(TypedDict):
    path: Annotated[str, Field(max_length=MAX_LEAF_PATH_CHARS)]
    kind: LeafKind
    type: ShortText
    box: ShortText | None
    shape: Annotated[list[Dim], Field(max_length=MAX_RANK)] | None
    dtype: Annotated[str, Field(max_length=64)] | None
    sharding: ShortText | None
    spec: SpecText | None
    declared_spec: SpecText | None
    logical_axes: Annotated[list[AxisName | None], Field(max_length=MAX_RANK)] | None
    rules: Annotated[list[LogicalRule], Field(max_length=MAX_RULES)] | None
    mesh: Annotated[int, Field(ge=0, lt=MAX_SNAPSHOT_LEAVES)] | None
    mesh_axes: Annotated[dict[AxisName, AxisSize], Field(max_length=MAX_MESH_AXES)] | None
    memory_kind: Annotated[str, Field(max_length=64)] | None
    array_kind: ArrayKind | None
    fully_addressable: bool | None
    num_devices: Count | None
    addressable_devices: list[DeviceId] | None
    layout: Annotated[int, Field(ge=0, lt=MAX_SNAPSHOT_LEAVES)] | None
    note: Annotated[str, Field(max_length=2048)] | None


@with_config(_SNAPSHOT_CONFIG)
class SnapshotRun(TypedDict):
    id: RunId
    process_index: ProcessIndex
    process_count: Annotated[int, Field(ge=1, le=MAX_RUN_PROCESSES)]


@with_config(_SNAPSHOT_CONFIG)
class SnapshotLoop(TypedDict):
    name: ShortText
    computation: ShortText
    body: ShortText
    trip_count: Annotated[int, Field(ge=0, le=2**62)] | None
    runs: Annotated[int, Field(ge=1, le=2**62)]


@with_config(_SNAPSHOT_CONFIG)
class SnapshotJit(TypedDict):
    function: ShortText
    memory_per_device: Annotated[dict[Annotated[str, Field(max_length=64)], ByteCount], Field(max_length=16)] | None
    donated_inputs: Annotated[int, Field(ge=0, le=MAX_SNAPSHOT_LEAVES)]
    arguments: NotRequired[
        Annotated[
            list[ShortText | None],
            Field(max_length=MAX_SNAPSHOT_LEAVES, description="The parameter each inputs/args/N leaf was passed as"),
        ]
    ]
    flops: NotRequired[Annotated[float, Field(ge=0)] | None]
    loop_corrected_flops: NotRequired[Annotated[float, Field(ge=0)] | None]
    loops: NotRequired[Annotated[list[SnapshotLoop], Field(max_length=MAX_COLLECTIVES)]]
    unknown_trip_counts: NotRequired[Annotated[list[ShortText], Field(max_length=MAX_COLLECTIVES)]]


@with_config(_SNAPSHOT_CONFIG)
class Snapshot(TypedDict):
    """What ``sharding_core.capture`` returns and ``publish`` posts (see sharding_core.snapshot.format)."""

    format: FormatName
    version: FormatVersion
    name: Annotated[str, Field(max_length=MAX_SNAPSHOT_NAME_CHARS)]
    created: Annotated[float, Field(ge=0, le=2**40)]
    jax_version: Annotated[str, Field(max_length=64)]
    process_index: ProcessIndex
    process_count: Annotated[int, Field(ge=1, le=MAX_RUN_PROCESSES)]
    run: SnapshotRun | None
    platform: Annotated[str, Field(max_length=64)]
    device_kind: ShortText
    devices: SnapshotDevices
    meshes: Annotated[list[MeshInfo], Field(max_length=MAX_SNAPSHOT_LEAVES)]
    rules: Annotated[list[LogicalRule], Field(max_length=MAX_RULES)] | None
    layouts: Annotated[list[ArrayLayout], Field(max_length=MAX_SNAPSHOT_LEAVES)]
    leaves: Annotated[list[SnapshotLeaf], Field(max_length=MAX_SNAPSHOT_LEAVES)]
    skipped: Annotated[int, Field(ge=0, le=2**40)]
    collectives: Annotated[list[Collective], Field(max_length=MAX_COLLECTIVES)] | None
    jit: SnapshotJit | None


class SnapshotCreated(Reply):
    id: str = Field(description="The stored snapshot's id (GET /api/snapshots/{id})")
    url: str = Field(description="/s/<link id>: the dashboard's snapshot view of it (of the merged run for a run)")
    run: str | None = Field(
        description="The run's read id (GET /api/snapshots/runs/{run}) when the snapshot is one process's part "
        "of a run; never the secret it was published with"
    )


class Memory(Reply):
    device_ids: list[int]
    bytes: list[int] = Field(description="Bytes per device (same order as device_ids), summed over the leaves")
    devices_with_data: int
    max_bytes: int
    min_bytes: int
    mean_bytes: float
    ratio: float = Field(description="The busiest device over the mean of the devices holding data")
    imbalanced: bool = Field(description="ratio above 1.05")
    heaviest: list[int]


class StoredLeaf(Reply):
    model_config = ConfigDict(extra="allow")  # merged runs add processes, held/missing devices, conflict

    path: str
    kind: str
    shape: list[int] | None
    dtype: str | None
    spec: str | None
    layout: int | None


class StoredSnapshot(Reply):
    """A stored snapshot as published (every field of the request), its id and per-device memory; for a
    run, the merge of its processes' snapshots with ``processes`` (reported, missing, device owners)."""

    model_config = ConfigDict(extra="allow")

    id: str | None = Field(None, description="The snapshot id (absent for a merged run)")
    format: FormatName
    version: FormatVersion
    name: str
    process_index: int | None
    process_count: int
    devices: dict[str, Any]
    meshes: list[dict[str, Any]]
    layouts: list[dict[str, Any]]
    leaves: list[StoredLeaf]
    collectives: list[Collective] | None = None
    memory: Memory


@with_config(_SNAPSHOT_CONFIG)
class SnapshotRef(TypedDict):
    """Which snapshot: ``{"snapshot": id}``, ``{"run": read id}`` (the merged run) or
    ``{"run": read id, "process": n}`` (one process's part of it)."""

    snapshot: NotRequired[RecordId]
    run: NotRequired[RunId]
    process: NotRequired[ProcessIndex]


class DiffRequest(Request):
    a: SnapshotRef = Field(description="The snapshot to start from")
    b: SnapshotRef = Field(description="The snapshot to compare with")


class DiffLeaf(Reply):
    path: str
    status: Literal["changed", "added", "removed"]
    shape: list[int] | None
    dtype: str | None
    a_spec: str | None
    b_spec: str | None
    a_mesh: str | None
    b_mesh: str | None
    bytes_to_move: int = Field(description="Bytes of its new blocks the devices did not hold before")


class DiffSummary(Reply):
    same: int
    changed: int
    added: int
    removed: int
    bytes_to_move: int


class DiffResponse(Reply):
    summary: DiffSummary
    leaves: list[DiffLeaf]


class WhatIfRequest(Request):
    ref: SnapshotRef
    rules: list[LogicalRule] = Field(max_length=MAX_RULES, description="Logical → mesh axis rules, in precedence")


class WhatIfLeaf(Reply):
    index: int = Field(description="The leaf's index in the snapshot")
    path: str
    spec: str | None
    layout: int | None = Field(description="Index into layouts")
    error: ErrorDetail | None
    changed: bool


class WhatIfResponse(Reply):
    rules: list[list[Any]]
    layouts: list[ArrayLayout]
    leaves: list[WhatIfLeaf]
    changed: int
    errors: int
    memory: Memory


# ---- routes ------------------------------------------------------------------------------------------

_MEANING = {
    "s403": "A cross-site request (cross_site_request), a token that is not the server's (bad_token), or a run "
    "id that is a run's read id, which cannot write (read_only_run)",
    "s404": "Unknown or malformed id (not_found)",
    "s409": "This process already published to this run (run_conflict), or the part disagrees with the run's "
    "other parts on process_count, a device's process or a leaf's spec, shape or dtype (run_mismatch, naming "
    "the field and leaf)",
}
READ_ONLY_RUN = "read_only_run"


@router.post(
    SNAPSHOTS_PATH,
    status_code=201,
    response_model=SnapshotCreated,
    responses={**responses(400, 401, 403, 409, 413, 415, 422, 500, **_MEANING), **STORE_ERRORS},
)
def create_snapshot(body: Snapshot, store: StoreDep, settings: SettingsDep) -> Response:
    """Stores a snapshot from ``sharding_core.publish`` and a share link to its view, together.

    A snapshot naming a ``run`` is one process's part of a multi-process run: each process posts its
    own, once, with the run's secret (``run.id``, which its processes share); the part is stored
    under the run's read id, which is what the answer, the link and ``GET /api/snapshots/runs/{run}``
    carry. The stored part holds the read id too: nothing a reader gets gives the secret back.
    """
    check_snapshot(body)
    snap = facts_only(enrich(dict(body)))  # estimates are added when it is read, from today's figures
    run = body["run"]
    if run is None:
        snapshot_id, link_id = store.put_linked(
            SNAPSHOTS,
            orjson.dumps(snap),
            lambda sid: link_payload(VIEW, {"snapshot": sid}, settings.max_link_bytes),
        )
        return OrjsonResponse({"id": snapshot_id, "url": f"/s/{link_id}", "run": None}, status_code=201)
    read_id = _read_id(store, run["id"])
    snap["run"] = {**run, "id": read_id}
    part = store.put_run_part(
        read_id,
        run["process_index"],
        orjson.dumps(snap),
        keys=part_keys(snap),
        check=functools.partial(_check_part, snap),
        link=link_payload(VIEW, {"run": read_id}, settings.max_link_bytes),
    )
    if part is None:
        raise ApiError(
            409,
            RUN_CONFLICT,
            f"process {run['process_index']} already published to this run; a run's parts are write-once",
            hint="publish a later state under a new run id (leave run_id out and one is drawn)",
        )
    return OrjsonResponse({"id": part.snapshot_id, "url": f"/s/{part.link_id}", "run": read_id}, status_code=201)


def _read_id(store: Store, secret: str) -> str:
    """The read id of the run whose secret is ``secret``; 403 if ``secret`` is itself a run's read id
    (taken from a share link: reading a run must never be enough to write to it)."""
    if store.run_exists(secret):
        raise ApiError(
            403,
            READ_ONLY_RUN,
            "this run id is a run's read id, as share links and /api/snapshots/runs/ carry it, and a read id "
            "cannot add parts: a part needs the run's secret, the run_id its processes share",
            hint="publish under a new run id (leave run_id out, or pass sharding_core.new_run_id() to every "
            "process); runs published before read ids existed keep their old id as read id and take no more parts",
        )
    return store.run_read_id(secret)


def _check_part(snap: dict[str, Any], run_keys: Mapping[str, str]) -> None:
    try:
        check_part(snap, run_keys)
    except ShardingError as e:  # the part is fine alone but conflicts with the run: 409
        raise ApiError(409, e.code, e.message, e.hint, **e.details) from None


@router.get("/api/snapshots/runs/{run_id}", response_model=StoredSnapshot, responses=responses(400, 404, 422, 500))
def get_run(run_id: str, store: StoreDep) -> Response:
    """The merged picture of a run (``run_id``: its read id): every process's leaves, which processes
    reported and which are missing, each device's owning process and, per leaf, the devices whose
    shards no reporting process holds."""
    return OrjsonResponse(_estimated(_merged_json(store, run_id)))


@router.get("/api/snapshots/{snapshot_id}", response_model=StoredSnapshot, responses=responses(400, 404, 422, 500))
def get_snapshot(snapshot_id: str, store: StoreDep) -> Response:
    """The stored snapshot, its id and per-device memory."""
    payload = store.get(SNAPSHOTS, snapshot_id)
    if payload is None:
        raise _no_snapshot(store)
    # The stored JSON is an object; splice the id in front rather than decode and re-encode megabytes.
    return OrjsonResponse(b'{"id":' + orjson.dumps(snapshot_id) + b"," + _estimated(payload)[1:])


def _estimated(payload: bytes) -> bytes:
    """A stored snapshot as read: one with ``inspect_jit`` collectives gets today's estimates (decoded only
    then: orjson writes a non-empty list as ``"collectives":[{``); any it was stored with are replaced."""
    if b'"collectives":[{' not in payload:
        return payload
    return orjson.dumps(snapshot_with_estimates(orjson.loads(payload)))


@router.post("/api/snapshots/diff", response_model=DiffResponse, responses=responses(400, 403, 404, 413, 415, 422, 500))
def diff_snapshots(body: DiffRequest, store: StoreDep) -> Response:
    """Leaves whose sharding changed from ``a`` to ``b`` (snapshots, or processes of a run), and the
    bytes each device would have to receive."""
    _check_ref(body.a)
    _check_ref(body.b)
    return OrjsonResponse(diff(load_snapshot(store, body.a), load_snapshot(store, body.b)))


@router.post(
    "/api/snapshots/whatif", response_model=WhatIfResponse, responses=responses(400, 403, 404, 413, 415, 422, 500)
)
def whatif_route(body: WhatIfRequest, store: StoreDep) -> Response:
    """Every leaf with Flax logical axis names re-laid out under other logical → mesh rules (Flax's
    ``logical_to_mesh_axes`` semantics, JAX's layouts on the snapshot's mesh) and the new memory."""
    return OrjsonResponse(whatif(load_snapshot(store, body.ref), body.rules))


def _check_ref(ref: SnapshotRef) -> None:
    snapshot, run, process = ref.get("snapshot"), ref.get("run"), ref.get("process")
    if (snapshot is None) == (run is None) or (process is not None and run is None):
        raise ApiError(
            422,
            "validation_error",
            'a snapshot reference is {"snapshot": id}, {"run": run_id} or {"run": run_id, "process": n}',
        )


def load_snapshot(store: Store, ref: SnapshotRef) -> dict[str, Any]:
    """The snapshot a reference names (a snapshot id, a run merged, or one process of a run), or the
    4xx that says why not: what diff, what-if and compare read."""
    _check_ref(ref)
    snapshot, run, process = ref.get("snapshot"), ref.get("run"), ref.get("process")
    if snapshot is not None:
        return _parsed(store, SNAPSHOTS, snapshot)
    assert run is not None
    if process is None:
        return _merged(store, run)
    parts = dict(store.run_parts(run))
    if process not in parts:
        raise _no_snapshot(store)
    return _parsed(store, SNAPSHOTS, parts[process])


def _merged(store: Store, run_id: str) -> dict[str, Any]:
    text = _merged_json(store, run_id)
    with _cyclic_gc_paused():
        merged: dict[str, Any] = orjson.loads(text)
    return merged


def _merged_json(store: Store, run_id: str) -> bytes:
    parts = store.run_parts(run_id)
    if not parts:
        raise _no_snapshot(store)
    return _merge_cached(run_id, tuple(parts), store)


_MERGED: BoundedCache[bytes] = BoundedCache(SNAPSHOT_CACHE_BYTES, len)
"""Merged runs as JSON (a fraction of the parsed objects' memory), keyed by the parts' ids: a run that gains
(or, expiring, loses) a process is merged afresh."""
_PARSED: BoundedCache[tuple[dict[str, Any], int]] = BoundedCache(SNAPSHOT_CACHE_BYTES, lambda hit: hit[1])
"""Parsed snapshots (immutable: what-if edits re-read the same one), with what each holds: about three times
its JSON as Python objects, counted as four. Keyed by the store's deletions, so expiry is seen at once."""
PARSED_PER_JSON_BYTE = 4


def _no_snapshot(store: Store) -> ApiError:
    """The 404 for a snapshot or run that is not (or no longer) stored, with this store's retention."""
    return not_found("snapshot", store.kept_days(SNAPSHOTS))


def _merge_cached(run_id: str, parts: tuple[tuple[int, str], ...], store: Store) -> bytes:
    key = (store, run_id, parts)
    hit = _MERGED.get(key)
    if hit is not None:
        return hit
    # Parts are parsed one at a time and dropped once folded in: a merge holds the result plus one part.
    with _cyclic_gc_paused():
        merged = merge_run(run_id, ((p, sid, _part(store, sid)) for p, sid in parts), text=_canonical)
        return _MERGED.put(key, orjson.dumps(merged))


def _canonical(item: Mapping[str, Any]) -> bytes:
    return orjson.dumps(item, option=orjson.OPT_SORT_KEYS)


_gc_lock = threading.Lock()
_gc_pauses = 0
_gc_was_enabled = False


@contextlib.contextmanager
def _cyclic_gc_paused() -> Iterator[None]:
    """Pauses Python's cyclic garbage collector while parts are parsed and merged (reference counting
    still frees everything: parsed JSON has no cycles). Otherwise each part's hundreds of thousands of
    new containers set off collections that walk them again and again: parsing a 4 MiB part took
    0.29 s instead of 0.03 s, and a 12-part merge 3.3 s instead of 1.5 s (bench/bench_runs.py).
    Counted, so concurrent merges re-enable it only when the last one ends."""
    global _gc_pauses, _gc_was_enabled
    with _gc_lock:
        if _gc_pauses == 0:
            _gc_was_enabled = gc.isenabled()
            gc.disable()
        _gc_pauses += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_pauses -= 1
            if _gc_pauses == 0 and _gc_was_enabled:
                gc.enable()


def _part(store: Store, snapshot_id: str) -> dict[str, Any]:
    payload = store.get(SNAPSHOTS, snapshot_id)
    if payload is None:  # expired since the parts were listed
        raise _no_snapshot(store)
    part: dict[str, Any] = orjson.loads(payload)
    return part


def _parsed(store: Store, table: str, record_id: str) -> dict[str, Any]:
    found = _parsed_cached(store, table, record_id)
    if found is None:
        raise _no_snapshot(store)
    return found


def _parsed_cached(store: Store, table: str, record_id: str) -> dict[str, Any] | None:
    key = (store, store.deletions, table, record_id)
    hit = _PARSED.get(key)
    if hit is not None:
        return hit[0]
    payload = store.get(table, record_id)
    if payload is None:
        return None
    parsed: dict[str, Any] = orjson.loads(payload)
    return _PARSED.put(key, (parsed, PARSED_PER_JSON_BYTE * len(payload)))[0]
