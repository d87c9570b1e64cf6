"""Request and response models: separate classes, every field bounded, every payload documented.

Requests are strict (no ``"2"`` for ``2``, no ``true`` for ``1``) and refuse unknown fields, so a
typo is a 422 naming the field rather than a silently ignored option. Their bounds are the domain's
own limits (:mod:`server.settings`), checked here before any JAX work starts.

Responses describe exactly what the routes send (``extra="forbid"`` makes the schema say
``additionalProperties: false``); the schemathesis test checks every response against them, so
``/openapi.json`` cannot drift from the real payloads. The routes send pre-encoded bytes for
speed; these models document them rather than build them.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, NotRequired

from pydantic import BaseModel, ConfigDict, Field, with_config
from typing_extensions import TypedDict

from server.settings import (
    MAX_AXIS_NAME_CHARS,
    MAX_DEVICES,
    MAX_DEVICES_CHARS,
    MAX_MESH_AXES,
    MAX_RANK,
    MAX_SLICES,
    MAX_SPEC_CHARS,
    MAX_VIEW_CHARS,
)
from sharding_core.layout import MAX_ARRAY_ELEMENTS
from sharding_core.mesh import MeshSpec
from sharding_core.snapshot import (
    MAX_LEAF_PATH_CHARS,
    MAX_RULES,
    MAX_RUN_PROCESSES,
    MAX_SNAPSHOT_LEAVES,
    MAX_SNAPSHOT_NAME_CHARS,
)

MAX_DEVICE_ID = 2**31 - 1  # multi-slice ids reach (slices + 1) * 100000; int32 covers them with room
MAX_STATE_KEYS = 4096  # the byte limit (max_link_bytes) is the real bound; this stops absurd objects early

# The dtypes sharding_core.layout.DTYPES knows, spelled out so the schema lists them (a test keeps
# the two in step).
DType = Literal[
    "bool",
    "int4",
    "uint4",
    "int8",
    "uint8",
    "float8_e4m3fn",
    "float8_e5m2",
    "int16",
    "uint16",
    "float16",
    "bfloat16",
    "int32",
    "uint32",
    "float32",
    "int64",
    "uint64",
    "float64",
    "complex64",
    "complex128",
]
AxisType = Literal["auto", "explicit", "manual", "Auto", "Explicit", "Manual"]

AxisSize = Annotated[int, Field(ge=1, le=MAX_DEVICES)]
AxisName = Annotated[str, Field(min_length=1, max_length=MAX_AXIS_NAME_CHARS)]
ArrayDim = Annotated[int, Field(ge=1, le=MAX_ARRAY_ELEMENTS)]
DeviceId = Annotated[int, Field(ge=0, le=MAX_DEVICE_ID)]
DevicesText = Annotated[
    str,
    Field(
        min_length=1,
        max_length=MAX_DEVICES_CHARS,
        description="A device set: cpu:N, gpu:KIND:HxG, tpu:GEN:TOPO or local",
        examples=["cpu:8", "tpu:v5e:4x4", "gpu:h100:2x8"],
    ),
]


class _Request(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)


class _Response(BaseModel):
    model_config = ConfigDict(extra="forbid")


# ---- requests ---------------------------------------------------------------------------------


class MeshRequest(_Request):
    shape: list[AxisSize] = Field(min_length=1, max_length=MAX_MESH_AXES, description="Mesh axis sizes")
    axis_names: list[AxisName] = Field(min_length=1, max_length=MAX_MESH_AXES, description="One name per axis")
    order: Literal["make_mesh", "iota", "devices", "hybrid"] = Field(
        "make_mesh",
        description="make_mesh: jax.make_mesh(shape, axis_names, devices=devices); iota: a plain reshape of the "
        "device list; devices: device_ids in mesh order; hybrid: mesh_utils.create_hybrid_device_mesh with dcn_shape",
    )
    axis_types: list[AxisType] | None = Field(
        None, min_length=1, max_length=MAX_MESH_AXES, description="Per-axis AxisType (default: as JAX's constructor)"
    )
    device_ids: list[DeviceId] | None = Field(
        None, min_length=1, max_length=MAX_DEVICES, description="Device ids in mesh order (order 'devices')"
    )
    dcn_shape: list[AxisSize] | None = Field(
        None, min_length=1, max_length=MAX_MESH_AXES, description="DCN part of each axis (order 'hybrid')"
    )
    allow_split_physical_axes: bool | None = Field(None, description="Passed to mesh_utils.create_device_mesh when set")

    def to_spec(self) -> MeshSpec:
        """The domain's mesh description (validated there: unique names, orders, dcn_shape...)."""
        return MeshSpec(
            tuple(self.shape),
            tuple(self.axis_names),
            axis_types=tuple(self.axis_types) if self.axis_types is not None else None,
            order=self.order,
            device_ids=tuple(self.device_ids) if self.device_ids is not None else None,
            allow_split_physical_axes=self.allow_split_physical_axes,
            dcn_shape=tuple(self.dcn_shape) if self.dcn_shape is not None else None,
        )


class LayoutRequest(_Request):
    devices: DevicesText
    mesh: MeshRequest
    spec: str = Field(max_length=MAX_SPEC_CHARS, description="A PartitionSpec, e.g. P('x', None)")
    shape: list[ArrayDim] = Field(max_length=MAX_RANK, description="The array's shape")
    dtype: DType = "float32"
    slices: int = Field(1, ge=1, le=MAX_SLICES, description="Slices of a tpu: device set (multi-slice)")
    chips_per_host: list[AxisSize] | None = Field(
        None, min_length=2, max_length=3, description="Chips per host block of a tpu: set, e.g. [2, 4, 1]"
    )


class LinkRequest(_Request):
    view: str = Field(
        min_length=1,
        max_length=MAX_VIEW_CHARS,
        pattern=r"^[A-Za-z][A-Za-z0-9_.-]*$",
        description="Which view of the dashboard the link opens",
        examples=["layout"],
    )
    state: dict[str, Any] = Field(max_length=MAX_STATE_KEYS, description="The view's state (any JSON object)")


# ---- responses --------------------------------------------------------------------------------


class ErrorDetail(BaseModel):
    model_config = ConfigDict(extra="allow")  # details vary by code: column, axis, limit, errors, ...

    code: str = Field(pattern=r"^[a-z][a-z0-9_]*$", description="Stable snake_case error code")
    message: str = Field(description="What was wrong and what is allowed")
    hint: str | None = Field(None, description="How to fix it")


class ErrorResponse(BaseModel):
    error: ErrorDetail


class HealthResponse(_Response):
    status: Literal["ok"]
    jax_version: str


class TpuPlatform(_Response):
    name: str
    device_kind: str
    cores_per_chip: int
    dims: int
    topologies: list[str]
    custom_rule: str | None
    max_chips: int
    chips_per_host: list[int]
    chips_per_host_note: str


class GpuPlatform(_Response):
    name: str
    device_kind: str
    memory_gib: int


class CpuPlatform(_Response):
    max_devices: int


class PlatformsResponse(_Response):
    max_devices: int
    max_slices: int
    tpu: list[TpuPlatform]
    gpu: list[GpuPlatform]
    cpu: CpuPlatform


class MeshResponse(_Response):
    shape: list[int]
    axis_names: list[str]
    axis_types: list[str]
    device_ids: list[Any] = Field(description="Nested list of device ids in mesh order (one level per mesh axis)")


class Shard(_Response):
    device_id: int
    index: list[Annotated[list[int], Field(min_length=2, max_length=2)]] = Field(
        description="[start, stop) bounds per array dimension, as devices_indices_map gives them"
    )
    replica_id: int
    tile: int = Field(description="Which distinct block the device holds (an index into tiles)")


class DimSplitResponse(_Response):
    dim: int
    size: int
    axes: list[str]
    axis_sizes: list[int]
    blocks: int
    text: str


class DeviceColumns(_Response):
    id: list[int]
    process_index: list[int]
    core_on_chip: list[int]
    coords: list[list[int]] | None
    slice_index: list[int] | None = None


class LayoutResponse(_Response):
    devices_key: str
    platform: str
    device_kind: str
    spec: str = Field(description="The canonical repr, as JAX prints it, e.g. P('x', None)")
    shape: list[int]
    dtype: str
    itemsize: int
    mesh: MeshResponse
    shard_shape: list[int]
    shards: list[Shard] = Field(description="One entry per device of the mesh, in mesh order")
    tiles: list[list[int]] = Field(description="Device ids holding each distinct block")
    dims: list[DimSplitResponse]
    replication_factor: int
    replicated_axes: list[str]
    unreduced_axes: list[str]
    bytes_per_device: int
    total_bytes: int
    logical_bytes: int
    devices: DeviceColumns = Field(description="Device attributes as columns, in mesh order")


class TopologyDevice(_Response):
    id: int
    process_index: int
    coords: list[int] | None
    core_on_chip: int
    slice_index: int | None = None


class TopologyLink(_Response):
    a: int
    b: int
    wraparound: bool
    kind: str = Field(description="ici, on_chip or nvlink")
    axis: int | None = Field(None, description="The torus axis of an ici link")


class TopologyHost(_Response):
    process_index: int
    device_ids: list[int]


class TopologyFabric(_Response):
    kind: str = Field(description="dcn (between slices) or network (between GPU hosts)")
    joins: str = Field(description="slices or hosts")
    members: list[list[int]] = Field(description="The device ids of each slice or host it joins")


class TopologyResponse(_Response):
    devices_key: str
    platform: str
    device_kind: str
    topology: list[int] | None
    chips_per_host: list[int] | None
    wraparound: list[bool]
    devices: list[TopologyDevice]
    links: list[TopologyLink]
    hosts: list[TopologyHost]
    slices: int
    fabrics: list[TopologyFabric]


class LinkCreated(_Response):
    id: str = Field(description="At least 128 random bits, URL-safe")
    url: str = Field(description="/s/<id>: the dashboard opened at this state")


class LinkResponse(_Response):
    view: str
    state: dict[str, Any]


# ---- topology: the mesh laid on the interconnect ------------------------------------------------


class TopologyMeshRequest(_Request):
    devices: DevicesText
    mesh: MeshRequest
    slices: int = Field(1, ge=1, le=MAX_SLICES, description="Slices of a tpu: device set (multi-slice)")
    chips_per_host: list[AxisSize] | None = Field(
        None, min_length=2, max_length=3, description="Host block of a tpu: set (chips per axis)"
    )


class MeshAxisOnTopology(_Response):
    name: str
    size: int
    groups: list[list[int]] = Field(
        description="Device ids of each group a collective over this axis involves, in ring order"
    )
    hops: list[list[int]] = Field(
        description="Links between consecutive members of each group; the last entry closes the ring"
    )
    max_hop: int
    mean_hop: float
    is_ring: bool = Field(description="Every group is a ring of nearest neighbours (every hop at most 1)")
    groups_not_rings: int
    crosses_hosts: bool
    groups_crossing_hosts: int
    crosses_slices: bool
    interconnect: str = Field(description="ici, dcn, nvlink, network or host")


class OrderingAxis(_Response):
    name: str
    max_hop: int
    mean_hop: float
    is_ring: bool
    groups_not_rings: int
    crosses_hosts: bool


class Ordering(_Response):
    order: str = Field(description="make_mesh, iota or split (allow_split_physical_axes)")
    device_ids: list[Any] | None = None
    axes: list[OrderingAxis] | None = None
    error: ErrorDetail | None = None


class TopologyGroupsRequest(_Request):
    devices: DevicesText
    groups: list[list[DeviceId]] = Field(
        min_length=1,
        max_length=MAX_DEVICES,
        description="Equally long device-id groups, each in the order a collective visits them "
        "(e.g. a collective's replica groups); at most max_devices ids in all",
    )
    name: str = Field("groups", max_length=128, description="A label for the groups, e.g. all-reduce over x")
    slices: int = Field(1, ge=1, le=MAX_SLICES, description="Slices of a tpu: device set (multi-slice)")
    chips_per_host: list[AxisSize] | None = Field(
        None, min_length=2, max_length=3, description="Host block of a tpu: set (chips per axis)"
    )


class MeshOnTopologyMesh(_Response):
    shape: list[int]
    axis_names: list[str]
    device_ids: list[Any]


class TopologyMeshResponse(_Response):
    mesh: MeshOnTopologyMesh
    axes: list[MeshAxisOnTopology]
    orderings: list[Ordering]


# ---- snapshots: what sharding_core.capture makes and publish sends ---------------------------------
#
# TypedDicts, not BaseModels: pydantic validates them into plain dicts, which the domain
# (sharding_core.snapshot) reads directly. For a 10,000-leaf snapshot that skips building and
# dumping tens of thousands of model objects. Strict and closed like the other requests.
# Lists that scale with the device count (device columns, shards, tiles, groups) carry no maxItems
# here: the domain checks them against the devices table and max_devices, and the body is bounded
# by max_snapshot_bytes. Nested maxItems multiply: a schema-driven fuzzer would otherwise build
# bodies of hundreds of megabytes, refused by size (413) rather than by content.

_SNAPSHOT_CONFIG = ConfigDict(strict=True, extra="forbid")
MAX_COLLECTIVES = 4096  # an HLO module with more collectives than this is cut by inspect_jit
SnapshotDim = Annotated[int, Field(ge=0, le=MAX_ARRAY_ELEMENTS)]
ByteCount = Annotated[int, Field(ge=0, le=2**62)]
SmallText = Annotated[str, Field(max_length=256)]
SpecText = Annotated[str, Field(max_length=MAX_SPEC_CHARS)]
ProcessIndex = Annotated[int, Field(ge=0, lt=MAX_RUN_PROCESSES)]
CountOfDevices = Annotated[int, Field(ge=0, le=MAX_DEVICES)]
RecordId = Annotated[str, Field(pattern=r"^[A-Za-z0-9_-]{1,64}$", description="An id from this server")]
RunId = Annotated[
    str, Field(pattern=r"^[A-Za-z0-9_-]{22,64}$", description="A run's id: at least 128 random bits, URL-safe")
]
LogicalRule = Annotated[
    list[AxisName | list[AxisName] | None],
    Field(min_length=2, max_length=2, description="[logical name, mesh axis | [mesh axes] | null], as Flax takes it"),
]
Bounds = Annotated[list[SnapshotDim], Field(min_length=2, max_length=2)]


@with_config(_SNAPSHOT_CONFIG)
class SnapshotDevices(TypedDict):
    id: Annotated[list[DeviceId], Field(min_length=1)]
    process_index: list[ProcessIndex]
    core_on_chip: list[Annotated[int, Field(ge=0, le=1024)]]
    coords: list[Annotated[list[Annotated[int, Field(ge=0, le=MAX_DEVICES)]], Field(min_length=3, max_length=3)]] | None


@with_config(_SNAPSHOT_CONFIG)
class SnapshotMesh(TypedDict):
    shape: Annotated[list[AxisSize], Field(min_length=1, max_length=MAX_MESH_AXES)]
    axis_names: Annotated[list[AxisName], Field(min_length=1, max_length=MAX_MESH_AXES)]
    axis_types: Annotated[list[Literal["Auto", "Explicit", "Manual"]], Field(min_length=1, max_length=MAX_MESH_AXES)]
    device_ids: Annotated[list[Any], Field(min_length=1, description="Nested, mesh order")]


@with_config(_SNAPSHOT_CONFIG)
class SnapshotShard(TypedDict):
    device_id: DeviceId
    index: Annotated[list[Bounds], Field(max_length=MAX_RANK)]
    replica_id: CountOfDevices
    tile: CountOfDevices


@with_config(_SNAPSHOT_CONFIG)
class SnapshotDimSplit(TypedDict):
    dim: Annotated[int, Field(ge=0, lt=MAX_RANK)]
    size: SnapshotDim
    axes: Annotated[list[AxisName], Field(max_length=MAX_MESH_AXES)]
    axis_sizes: Annotated[list[AxisSize], Field(max_length=MAX_MESH_AXES)]
    blocks: Annotated[int, Field(ge=0, le=MAX_ARRAY_ELEMENTS)]
    text: Annotated[str, Field(max_length=1024)]


@with_config(_SNAPSHOT_CONFIG)
class SnapshotLayout(TypedDict):
    """One array's layout, the fields /api/layout gives for it."""

    spec: SpecText | None
    shape: Annotated[list[SnapshotDim], Field(max_length=MAX_RANK)]
    dtype: Annotated[str, Field(max_length=64)]
    itemsize: Annotated[int, Field(ge=0, le=1024)]
    shard_shape: Annotated[list[SnapshotDim], Field(max_length=MAX_RANK)]
    shards: list[SnapshotShard]
    tiles: list[list[DeviceId]]
    dims: Annotated[list[SnapshotDimSplit], Field(max_length=MAX_RANK)]
    replication_factor: CountOfDevices
    replicated_axes: Annotated[list[AxisName], Field(max_length=MAX_MESH_AXES)]
    unreduced_axes: Annotated[list[AxisName], Field(max_length=MAX_MESH_AXES)]
    bytes_per_device: ByteCount
    total_bytes: ByteCount
    logical_bytes: ByteCount


@with_config(_SNAPSHOT_CONFIG)
class SnapshotLeaf(TypedDict):
    path: Annotated[str, Field(max_length=MAX_LEAF_PATH_CHARS)]
    kind: Literal["array", "shape_dtype_struct", "sharding", "partition_spec", "host"]
    type: SmallText
    box: SmallText | None
    shape: Annotated[list[SnapshotDim], Field(max_length=MAX_RANK)] | None
    dtype: Annotated[str, Field(max_length=64)] | None
    sharding: SmallText | None
    spec: SpecText | None
    declared_spec: SpecText | None
    logical_axes: Annotated[list[AxisName | None], Field(max_length=MAX_RANK)] | None
    rules: Annotated[list[LogicalRule], Field(max_length=MAX_RULES)] | None
    mesh: Annotated[int, Field(ge=0, lt=MAX_SNAPSHOT_LEAVES)] | None
    mesh_axes: Annotated[dict[AxisName, AxisSize], Field(max_length=MAX_MESH_AXES)] | None
    memory_kind: Annotated[str, Field(max_length=64)] | None
    array_kind: Literal["single_device", "sharded", "global"] | None
    fully_addressable: bool | None
    num_devices: CountOfDevices | None
    addressable_devices: list[DeviceId] | None
    layout: Annotated[int, Field(ge=0, lt=MAX_SNAPSHOT_LEAVES)] | None
    note: Annotated[str, Field(max_length=2048)] | None


@with_config(_SNAPSHOT_CONFIG)
class SnapshotRun(TypedDict):
    id: RunId
    process_index: ProcessIndex
    process_count: Annotated[int, Field(ge=1, le=MAX_RUN_PROCESSES)]


@with_config(_SNAPSHOT_CONFIG)
class SnapshotCollective(TypedDict):
    op: Literal["all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute"]
    name: SmallText
    shape: Annotated[str, Field(max_length=4096)]
    bytes: ByteCount | None
    groups: list[list[DeviceId]] | None
    pairs: list[Annotated[list[DeviceId], Field(min_length=2, max_length=2)]] | None
    raw: Annotated[str, Field(max_length=400)] | None


@with_config(_SNAPSHOT_CONFIG)
class SnapshotJit(TypedDict):
    function: SmallText
    memory_per_device: Annotated[dict[Annotated[str, Field(max_length=64)], ByteCount], Field(max_length=16)] | None
    donated_inputs: Annotated[int, Field(ge=0, le=MAX_SNAPSHOT_LEAVES)]


@with_config(_SNAPSHOT_CONFIG)
class Snapshot(TypedDict):
    """What ``sharding_core.capture`` returns and ``publish`` posts (version 1; see sharding_core.snapshot)."""

    format: Literal["shardscope.snapshot"]
    version: Literal[1]
    name: Annotated[str, Field(max_length=MAX_SNAPSHOT_NAME_CHARS)]
    created: Annotated[float, Field(ge=0, le=2**40)]
    jax_version: Annotated[str, Field(max_length=64)]
    process_index: ProcessIndex
    process_count: Annotated[int, Field(ge=1, le=MAX_RUN_PROCESSES)]
    run: SnapshotRun | None
    platform: Annotated[str, Field(max_length=64)]
    device_kind: SmallText
    devices: SnapshotDevices
    meshes: Annotated[list[SnapshotMesh], Field(max_length=MAX_SNAPSHOT_LEAVES)]
    rules: Annotated[list[LogicalRule], Field(max_length=MAX_RULES)] | None
    layouts: Annotated[list[SnapshotLayout], Field(max_length=MAX_SNAPSHOT_LEAVES)]
    leaves: Annotated[list[SnapshotLeaf], Field(max_length=MAX_SNAPSHOT_LEAVES)]
    skipped: Annotated[int, Field(ge=0, le=2**40)]
    collectives: Annotated[list[SnapshotCollective], Field(max_length=MAX_COLLECTIVES)] | None
    jit: SnapshotJit | None


class SnapshotCreated(_Response):
    id: str = Field(description="The stored snapshot's id (GET /api/snapshots/{id})")
    url: str = Field(description="/s/<link id>: the dashboard's snapshot view of it (of the merged run for a run)")
    run: str | None = Field(description="The run id when the snapshot is one process's part of a run")


class Memory(_Response):
    device_ids: list[int]
    bytes: list[int] = Field(description="Bytes per device (same order as device_ids), summed over the leaves")
    devices_with_data: int
    max_bytes: int
    min_bytes: int
    mean_bytes: float
    ratio: float = Field(description="The busiest device over the mean of the devices holding data")
    imbalanced: bool = Field(description="ratio above 1.05")
    heaviest: list[int]


class StoredLeaf(_Response):
    model_config = ConfigDict(extra="allow")  # merged runs add processes, held/missing devices, conflict

    path: str
    kind: str
    shape: list[int] | None
    dtype: str | None
    spec: str | None
    layout: int | None


class StoredSnapshot(_Response):
    """A stored snapshot as published (every field of the request), its id and per-device memory; for a
    run, the merge of its processes' snapshots with ``processes`` (reported, missing, device owners)."""

    model_config = ConfigDict(extra="allow")

    id: str | None = Field(None, description="The snapshot id (absent for a merged run)")
    format: Literal["shardscope.snapshot"]
    version: Literal[1]
    name: str
    process_index: int | None
    process_count: int
    devices: dict[str, Any]
    meshes: list[dict[str, Any]]
    layouts: list[dict[str, Any]]
    leaves: list[StoredLeaf]
    memory: Memory


@with_config(_SNAPSHOT_CONFIG)
class SnapshotRef(TypedDict):
    """Which snapshot: ``{"snapshot": id}``, ``{"run": run_id}`` (the merged run) or
    ``{"run": run_id, "process": n}`` (one process's part of it)."""

    snapshot: NotRequired[RecordId]
    run: NotRequired[RunId]
    process: NotRequired[ProcessIndex]


class DiffRequest(_Request):
    a: SnapshotRef = Field(description="The snapshot to start from")
    b: SnapshotRef = Field(description="The snapshot to compare with")


class DiffLeaf(_Response):
    path: str
    status: Literal["changed", "added", "removed"]
    shape: list[int] | None
    dtype: str | None
    a_spec: str | None
    b_spec: str | None
    a_mesh: str | None
    b_mesh: str | None
    bytes_to_move: int = Field(description="Bytes of its new blocks the devices did not hold before")


class DiffSummary(_Response):
    same: int
    changed: int
    added: int
    removed: int
    bytes_to_move: int


class DiffResponse(_Response):
    summary: DiffSummary
    leaves: list[DiffLeaf]


class WhatIfRequest(_Request):
    ref: SnapshotRef
    rules: list[LogicalRule] = Field(max_length=MAX_RULES, description="Logical → mesh axis rules, in precedence")


class WhatIfLeaf(_Response):
    index: int = Field(description="The leaf's index in the snapshot")
    path: str
    spec: str | None
    layout: int | None = Field(description="Index into layouts")
    error: ErrorDetail | None
    changed: bool


class WhatIfResponse(_Response):
    rules: list[list[Any]]
    layouts: list[dict[str, Any]]
    leaves: list[WhatIfLeaf]
    changed: int
    errors: int
    memory: Memory


# ---- the kernel lab -----------------------------------------------------------------------------

KernelDType = Literal["float32", "bfloat16", "float16", "int32"]  # sharding_core.kernels.catalog.KERNEL_DTYPES
KernelState = Literal["queued", "compiling", "running", "done", "error"]
MAX_KERNEL_ARRAYS = 16  # inputs, out_specs and params per run; the catalog's kernels take at most 3
KernelName = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.-]+$")]
KernelSpec = Annotated[str, Field(max_length=MAX_SPEC_CHARS, description="A PartitionSpec, e.g. P('x', None)")]


class KernelInputRequest(_Request):
    shape: list[ArrayDim] = Field(max_length=MAX_RANK, description="The input's shape")
    spec: KernelSpec
    dtype: KernelDType = "float32"


class KernelRunRequest(_Request):
    kernel: KernelName = Field(description="A name from GET /api/kernels", examples=["sum_axis0"])
    devices: DevicesText
    mesh: MeshRequest
    inputs: list[KernelInputRequest] | None = Field(
        None, max_length=MAX_KERNEL_ARRAYS, description="One per kernel input, in order (null: the catalog's defaults)"
    )
    out_specs: list[KernelSpec] | None = Field(
        None,
        max_length=MAX_KERNEL_ARRAYS,
        description="Output shardings: out_shardings of a jit kernel, out_specs of a shard_map kernel (null: JAX's)",
    )
    params: dict[Annotated[str, Field(max_length=64)], Annotated[str, Field(max_length=MAX_SPEC_CHARS)]] | None = Field(
        None, max_length=MAX_KERNEL_ARRAYS, description="The kernel's parameters by name (null: defaults)"
    )
    slices: int = Field(1, ge=1, le=MAX_SLICES, description="Slices of a tpu: device set (multi-slice)")
    chips_per_host: list[AxisSize] | None = Field(
        None, min_length=2, max_length=3, description="Chips per host block of a tpu: set, e.g. [2, 4, 1]"
    )


class KernelInputInfo(_Response):
    name: str
    shape: list[int]
    spec: str
    dtype: str


class KernelParamInfo(_Response):
    name: str
    kind: Literal["spec", "axis", "int"]
    default: str
    doc: str
    minimum: int | None = None
    maximum: int | None = None


class KernelMeshInfo(_Response):
    shape: list[int]
    axis_names: list[str]
    axis_types: list[str]


class KernelInfo(_Response):
    name: str
    title: str
    doc: str
    mode: Literal["jit", "shard_map"]
    source: str = Field(description="The kernel's Python source: exactly what runs")
    inputs: list[KernelInputInfo] = Field(description="Inputs with their default shapes, specs and dtypes")
    outputs: list[str] | None = Field(description="Output names; null for a pytree the kernel names itself")
    params: list[KernelParamInfo]
    devices: str = Field(description="Default device set")
    mesh: KernelMeshInfo = Field(description="Default mesh")
    reference: str = Field(description="What the sharded result is compared with")
    requires: str | None = Field(description="An optional package (extra) the kernel needs")
    available: bool
    tutorial: str | None
    explicit: str | None = Field(description="What happens with Explicit axis types, when it differs")


class KernelLimits(_Response):
    max_kernel_devices: int
    max_kernel_elements: int
    max_kernel_seconds: int
    max_kernel_workers: int
    max_kernel_queue: int


class KernelCatalogResponse(_Response):
    kernels: list[KernelInfo]
    dtypes: list[str]
    limits: KernelLimits


class KernelArray(LayoutResponse):
    """An input as placed or an output: its layout exactly as POST /api/layout gives it, and more."""

    name: str
    typeof: str = Field(description="jax.typeof(array), e.g. float32[8@x,8@y] with Explicit axes")
    max_abs_error: float | None = Field(
        None, description="Outputs: max |sharded - unsharded| (null when not comparable)"
    )


class KernelCollective(_Response):
    op: Literal[
        "all-reduce",
        "all-gather",
        "reduce-scatter",
        "all-to-all",
        "collective-permute",
        "ragged-all-to-all",
        "collective-broadcast",
    ]
    name: str = Field(description="The instruction's name in the compiled HLO")
    is_async: bool = Field(description="An async -start form")
    shape: str = Field(description="The result shape per device, as HLO writes it, e.g. f32[4,8]")
    bytes: int = Field(description="Bytes of the result per device")
    groups: list[list[int]] = Field(description="Replica groups as device ids (collective-permute: rings/chains)")
    pairs: list[list[int]] | None = Field(description="collective-permute: [source, target] device ids")
    axes: list[str] = Field(description="Mesh axes the groups span, major first; sub-axes as y:(1)2")
    exact_axes: bool = Field(description="Every group is exactly the devices along those axes")
    axes_text: str
    replica_groups: str = Field(description="The replica_groups (or source_target_pairs) text from the HLO")
    dimensions: list[int] | None
    source: str | None = Field(description="The JAX operation that asked for it (HLO metadata op_name)")


class KernelMemory(_Response):
    argument_bytes: int | None = None
    output_bytes: int | None = None
    temp_bytes: int | None = None
    alias_bytes: int | None = None
    generated_code_bytes: int | None = None
    peak_bytes: int | None = None


class KernelCost(_Response):
    flops: float | None = None
    bytes_accessed: float | None = None
    transcendentals: float | None = None
    optimal_seconds: float | None = None


class KernelTiming(_Response):
    lower_ms: float
    compile_ms: float
    run_ms: float
    reference_ms: float


class KernelOrigin(_Response):
    axis: str
    origin: str = Field(description="Shardy's text: self, input: N, output: N, constraint_K, mc_K_input: N, ...")
    meaning: str


class KernelOriginEntry(_Response):
    value: str
    op: str
    sharding: str | None
    name: str | None
    origins: list[KernelOrigin]


class KernelOrigins(_Response):
    entries: list[KernelOriginEntry]
    outputs: list[KernelOriginEntry | None]
    truncated: bool


class KernelTpu(_Response):
    """The kernel compiled (never run) for libtpu's real topology of a tpu: set; one of three shapes."""

    skipped: str | None = Field(None, description="Why there is no TPU compile (not a tpu: set, or no libtpu)")
    error: ErrorDetail | None = Field(None, description="The TPU compiler's refusal")
    topology: str | None = Field(None, description="libtpu's topology name, e.g. v5e:2x4")
    device_kind: str | None = None
    hlo: str | None = Field(None, description="The compiled TPU HLO")
    hlo_truncated: bool | None = None
    collectives: list[KernelCollective] | None = Field(None, description="One per collective in the TPU HLO")
    device_assignment: list[int] | None = Field(None, description="Device ids by partition id")
    memory: KernelMemory | None = Field(None, description="compiled.memory_analysis() on TPU, per device")
    cost: KernelCost | None = Field(None, description="compiled.cost_analysis() on TPU, per device")
    compile_ms: float | None = None


class KernelRunResponse(_Response):
    cached: bool = Field(description="Answered from the result cache")
    kernel: str
    title: str
    devices_key: str
    platform: str = Field(description="The device set's platform (the run itself is on CPU devices)")
    executed_on: str
    jax_version: str
    mesh: MeshResponse
    params: dict[str, str]
    out_specs: list[str] | None
    inputs: list[KernelArray] = Field(description="Inputs as placed (and arrays the kernel created, e.g. parameters)")
    outputs: list[KernelArray] = Field(description="One per output, with the sharding JAX gave it")
    max_abs_error: float | None
    reference: str
    collectives: list[KernelCollective] = Field(description="One per collective in the compiled HLO")
    memory: KernelMemory = Field(description="compiled.memory_analysis(), per device")
    cost: KernelCost = Field(description="compiled.cost_analysis(), per device")
    timing: KernelTiming
    device_assignment: list[int] = Field(description="Device ids by partition id (what HLO device numbers index)")
    stablehlo: str = Field(description="The lowered StableHLO with its sdy shardings")
    stablehlo_truncated: bool
    hlo: str = Field(description="The compiled (partitioned) HLO")
    hlo_truncated: bool
    origins: KernelOrigins | None
    origins_note: str
    compiler_log: list[str] = Field(description="XLA's warnings while compiling")
    tpu: KernelTpu | None = Field(
        None, description="tpu: sets with the optional tpu extra: the kernel compiled for libtpu's topology"
    )


class KernelJobCreated(_Response):
    id: str
    state: KernelState
    url: str = Field(description="Where to poll: /api/kernels/jobs/<id>")


class KernelJobResponse(_Response):
    id: str
    kernel: str
    state: KernelState
    queued_ahead: int | None = Field(description="Runs ahead of this one in the queue (null unless queued)")
    elapsed_ms: float
    result: KernelRunResponse | None
    failure: ErrorDetail | None = Field(description="Why the run failed (state error)")
