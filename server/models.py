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

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

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
    platform: str
    device_kind: str
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


class LinkCreated(_Response):
    id: str = Field(description="At least 128 random bits, URL-safe")
    url: str = Field(description="/s/<id>: the dashboard opened at this state")


class LinkResponse(_Response):
    view: str
    state: dict[str, Any]
