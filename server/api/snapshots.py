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

from typing import TYPE_CHECKING, Annotated, Any, Literal, NotRequired

from fastapi import APIRouter
from fastapi import Request as FastApiRequest
from pydantic import ConfigDict, Field, with_config
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response
from typing_extensions import TypedDict

from server.api.deps import STORE_ERRORS, SnapshotsDep, client_of, responses
from server.api.schema import (
    MAX_COLLECTIVES,
    MAX_FINDINGS,
    MAX_VALUES,
    ArrayLayout,
    AxisName,
    AxisSize,
    ByteCount,
    Collective,
    Count,
    DeviceId,
    Dim,
    ErrorDetail,
    Finding,
    LogicalRule,
    MemoryTimeline,
    MeshInfo,
    ProcessIndex,
    ProgramReport,
    ProgramValue,
    Reply,
    Request,
    RunId,
    SearchSummary,
    ShortText,
    SnapshotRef,
    SpecText,
    vocab,
)
from server.jsonio import OrjsonResponse, OrjsonRoute, StreamedJsonResponse
from sharding_core.devices import MAX_DEVICES, MAX_SLICES
from sharding_core.layout import MAX_RANK
from sharding_core.mesh import MAX_MESH_AXES
from sharding_core.snapshot.format import (
    ARRAY_KINDS,
    FORMAT,
    LEAF_KINDS,
    MAX_FIX_SNAPSHOTS,
    MAX_LEAF_PATH_CHARS,
    MAX_RULES,
    MAX_RUN_PROCESSES,
    MAX_SNAPSHOT_LEAVES,
    MAX_SNAPSHOT_NAME_CHARS,
    VERSION,
)

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

SNAPSHOTS_PATH = "/api/snapshots"

router = APIRouter(route_class=OrjsonRoute, default_response_class=OrjsonResponse, tags=["snapshots"])

# ---- the format: what sharding_core.capture makes and publish sends (sharding_core.snapshot.format) ----

_SNAPSHOT_CONFIG = ConfigDict(strict=True, extra="forbid")


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
    typed: NotRequired[
        Annotated[
            str | None,
            Field(
                max_length=1024,
                description="The leaf's type as str(jax.typeof(x)) prints it: float32[8@x,16@y] where the mesh's axes "
                "are Explicit (the sharding is in the type), {U:y} / {R:y} for unreduced / reduced axes",
            ),
        ]
    ]
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
    runs: Annotated[int, Field(ge=0, le=2**62)]
    condition: NotRequired[ShortText]
    how: NotRequired[Annotated[str, Field(max_length=32)]]
    source: NotRequired[Annotated[str, Field(max_length=4096)] | None]


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
class SnapshotTarget(TypedDict):
    """What an ``inspect_jit`` / plan compiled for (sharding_core.program.targets.Target.describe)."""

    devices: Annotated[str, Field(max_length=64)]
    platform: Annotated[str, Field(max_length=64)]
    device_kind: ShortText
    compile_only: bool
    num_devices: Annotated[int, Field(ge=1, le=MAX_DEVICES)]
    hosts: Annotated[int, Field(ge=1, le=MAX_DEVICES)]
    slices: Annotated[int, Field(ge=1, le=MAX_SLICES)]
    topology: Annotated[str, Field(max_length=64)] | None
    chips_per_host: Annotated[list[Annotated[int, Field(ge=1, le=MAX_DEVICES)]], Field(max_length=3)] | None
    source: Annotated[str, Field(max_length=512)]
    dropped_fields: NotRequired[Annotated[list[ShortText], Field(max_length=32)]]


@with_config(_SNAPSHOT_CONFIG)
class SnapshotProgram(TypedDict):
    """One program's snapshot: a capture, or a fix's recompiled program inside an explained snapshot (which
    carries no fixes of its own, so the schema is not recursive)."""

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
    findings: NotRequired[
        Annotated[
            list[Finding],
            Field(max_length=MAX_FINDINGS, description="What to change (sharding_core.findings), with its fix"),
        ]
    ]
    values: NotRequired[
        Annotated[
            list[ProgramValue],
            Field(max_length=MAX_VALUES, description="Every value's sharding (sharding_core.program.values)"),
        ]
    ]
    target: NotRequired[SnapshotTarget]
    memory_timeline: NotRequired[
        Annotated[MemoryTimeline, Field(description="Memory over program order (sharding_core.program.timeline)")]
    ]
    program: NotRequired[
        Annotated[ProgramReport, Field(description="The compiled program's report (sharding_core.program.report)")]
    ]
    plan: NotRequired[
        Annotated[
            dict[Annotated[str, Field(max_length=64)], Any],
            Field(
                max_length=64,
                description="A plan's facts (sharding_core.planning.program.plan_facts) and figures "
                "(sharding_core.cost.annotate.plan_with_figures: added when it is read)",
            ),
        ]
    ]
    cost_profile: NotRequired[
        Annotated[
            dict[Annotated[str, Field(max_length=64)], Any],
            Field(
                max_length=16,
                description="The calibrated profile (shardscope.profile/1, `shardscope calibrate`) the figures are "
                "from (sharding_core.cost.annotate.apply_profile)",
            ),
        ]
    ]


@with_config(_SNAPSHOT_CONFIG)
class Snapshot(SnapshotProgram):
    """What ``sharding_core.capture`` returns and ``publish`` posts (see sharding_core.snapshot.format)."""

    fixes: NotRequired[
        Annotated[
            list[SnapshotProgram],
            Field(
                max_length=MAX_FIX_SNAPSHOTS,
                description="sharding_core.explain: the programs its collectives' fixes compiled (a why fix's result)",
            ),
        ]
    ]
    why_search: NotRequired[
        Annotated[
            dict[Annotated[str, Field(max_length=64)], Any],
            Field(max_length=32, description="What the search for fixes did (sharding_core.why.attach)"),
        ]
    ]
    search: NotRequired[
        Annotated[
            SearchSummary,
            Field(
                description="The search a pick's plan came from (sharding_core.search; `shardscope search "
                "--publish`): every candidate, the front, the current sharding"
            ),
        ]
    ]


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


@router.post(
    SNAPSHOTS_PATH,
    status_code=201,
    response_model=SnapshotCreated,
    responses={**responses(400, 401, 403, 409, 413, 415, 422, 500, **_MEANING), **STORE_ERRORS},
)
def create_snapshot(body: Snapshot, request: FastApiRequest, snapshots: SnapshotsDep) -> Response:
    """Stores a snapshot from ``sharding_core.publish`` and a share link to its view, together.

    A snapshot naming a ``run`` is one process's part of a multi-process run: each process posts its
    own, once, with the run's secret (``run.id``, which its processes share); the part is stored
    under the run's read id, which is what the answer, the link and ``GET /api/snapshots/runs/{run}``
    carry. The stored part holds the read id too: nothing a reader gets gives the secret back.
    """
    return OrjsonResponse(snapshots.publish(body, client_of(request)), status_code=201)


@router.get("/api/snapshots/runs/{run_id}", response_model=StoredSnapshot, responses=responses(400, 404, 422, 500))
async def get_run(run_id: str, snapshots: SnapshotsDep) -> Response:
    """The merged picture of a run (``run_id``: its read id): every process's leaves, which processes
    reported and which are missing, each device's owning process and, per leaf, the devices whose
    shards no reporting process holds."""
    return OrjsonResponse(await snapshots.served_run(run_id))


@router.get("/api/snapshots/{snapshot_id}", response_model=StoredSnapshot, responses=responses(400, 404, 422, 500))
async def get_snapshot(snapshot_id: str, snapshots: SnapshotsDep) -> Response:
    """The stored snapshot, its id and per-device memory (sent piece by piece, straight from the store), and
    today's estimates for its ``inspect_jit`` collectives."""
    served = await run_in_threadpool(snapshots.open_snapshot, snapshot_id)
    if isinstance(served, bytes):
        return OrjsonResponse(served)
    prefix, blob = served
    return StreamedJsonResponse(prefix, blob, skip=1)  # the stored JSON's "{" is the prefix's


@router.post("/api/snapshots/diff", response_model=DiffResponse, responses=responses(400, 403, 404, 413, 415, 422, 500))
def diff_snapshots(body: DiffRequest, snapshots: SnapshotsDep) -> Response:
    """Leaves whose sharding changed from ``a`` to ``b`` (snapshots, or processes of a run), and the
    bytes each device would have to receive."""
    return OrjsonResponse(snapshots.diff(body.a, body.b))


@router.post(
    "/api/snapshots/whatif", response_model=WhatIfResponse, responses=responses(400, 403, 404, 413, 415, 422, 500)
)
def whatif_route(body: WhatIfRequest, snapshots: SnapshotsDep) -> Response:
    """Every leaf with Flax logical axis names re-laid out under other logical → mesh rules (Flax's
    ``logical_to_mesh_axes`` semantics, JAX's layouts on the snapshot's mesh) and the new memory."""
    return OrjsonResponse(snapshots.whatif(body.ref, body.rules))
