"""The shapes more than one feature speaks: request field types, the mesh request, the error body, and
the one JSON shape of a layout and of a collective (what ``sharding_core`` serialises).

Vocabularies (dtypes, mesh orders, axis types, collective ops, leaf kinds) are the domain's own
constants turned into the schema's enums here (:func:`vocab`), never retyped. Layouts and
collectives are ``TypedDict`` s: pydantic validates them into plain dicts (a 10,000-leaf snapshot
skips building tens of thousands of model objects), and the same class documents the responses
that carry them (``/api/layout``, kernel results, snapshots). Requests are strict and closed (no
``"2"`` for ``2``, unknown fields refused) so a typo is a 422 naming the field.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated, Any, Literal, NotRequired

from pydantic import BaseModel, ConfigDict, Field, with_config
from typing_extensions import TypedDict

from server.settings import MAX_DEVICES_CHARS
from sharding_core.cost.collectives import FABRICS
from sharding_core.devices import MAX_DEVICES, MAX_SLICES
from sharding_core.hlo.text import COLLECTIVE_OPS
from sharding_core.kernels.catalog import KERNEL_DTYPES
from sharding_core.kernels.plan import INPUT_DATA
from sharding_core.layout import DTYPES, MAX_ARRAY_ELEMENTS, MAX_RANK
from sharding_core.mesh import AXIS_TYPES, MAX_AXIS_NAME_CHARS, MAX_MESH_AXES, ORDERS, MeshSpec
from sharding_core.program import timeline as tl
from sharding_core.program.memory import MEMORY_FIELDS
from sharding_core.snapshot.format import (
    AXIS_TYPE_NAMES,
    ID_PATTERN,
    MAX_LEAF_PATH_CHARS,
    MAX_RULES,
    MAX_RUN_PROCESSES,
    MAX_SEARCH_CANDIDATES,
)
from sharding_core.spec import MAX_SPEC_CHARS


def vocab(values: Sequence[str]) -> Any:
    """A ``Literal`` of one of the domain's vocabularies, so the schema lists it as an enum."""
    return Literal[tuple(values)]


if TYPE_CHECKING:
    DType = str
    AxisTypeName = str
    MeshOrder = str
    AxisTypeOfMesh = str
    CollectiveOp = str
    Fabric = str
else:
    DType = vocab(DTYPES)
    AxisTypeName = vocab([*AXIS_TYPES, *AXIS_TYPE_NAMES])  # "auto" or "Auto": either spelling
    MeshOrder = vocab(ORDERS)
    AxisTypeOfMesh = vocab(AXIS_TYPE_NAMES)
    CollectiveOp = vocab(COLLECTIVE_OPS)
    Fabric = vocab(FABRICS)

MAX_DEVICE_ID = 2**31 - 1  # multi-slice ids reach (slices + 1) * 100000; int32 covers them with room

AxisSize = Annotated[int, Field(ge=1, le=MAX_DEVICES)]
AxisName = Annotated[str, Field(min_length=1, max_length=MAX_AXIS_NAME_CHARS)]
ArrayDim = Annotated[int, Field(ge=1, le=MAX_ARRAY_ELEMENTS)]
DeviceId = Annotated[int, Field(ge=0, le=MAX_DEVICE_ID)]
SpecText = Annotated[str, Field(max_length=MAX_SPEC_CHARS, description="A PartitionSpec, e.g. P('x', None)")]
LogicalRule = Annotated[
    list[AxisName | list[AxisName] | None],
    Field(min_length=2, max_length=2, description="[logical name, mesh axis | [mesh axes] | null], as Flax takes it"),
]
DevicesText = Annotated[
    str,
    Field(
        min_length=1,
        max_length=MAX_DEVICES_CHARS,
        description="A device set: cpu:N, gpu:KIND:HxG, tpu:GEN:TOPO or local",
        examples=["cpu:8", "tpu:v5e:4x4", "gpu:h100:2x8"],
    ),
]
Slices = Annotated[int, Field(ge=1, le=MAX_SLICES, description="Slices of a tpu: device set (multi-slice)")]
ChipsPerHost = Annotated[
    list[AxisSize] | None,
    Field(min_length=2, max_length=3, description="Chips per host block of a tpu: set, e.g. [2, 4, 1]"),
]


CompileOnly = Annotated[
    bool | None,
    Field(
        description="true: compile for the device set's hardware only (libtpu for tpu: sets, XLA's GPU compiler for "
        "gpu: sets with the gpu extra) on abstract inputs, at any size: nothing runs, bounded by max_compile_seconds; "
        "false: run on CPU devices (max_kernel_elements applies); null: run, unless the run is past the CPU limits "
        "on a set whose compiler is installed"
    ),
]


class Request(BaseModel):
    """A request body: strict, closed and immutable."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)


class Reply(BaseModel):
    """A response body the route sends as pre-encoded bytes; the model documents it (``additionalProperties:
    false``) and the schemathesis test checks every response against it."""

    model_config = ConfigDict(extra="forbid")


class MeshRequest(Request):
    shape: list[AxisSize] = Field(min_length=1, max_length=MAX_MESH_AXES, description="Mesh axis sizes")
    axis_names: list[AxisName] = Field(min_length=1, max_length=MAX_MESH_AXES, description="One name per axis")
    order: MeshOrder = Field(
        "make_mesh",
        description="make_mesh: jax.make_mesh(shape, axis_names, devices=devices); iota: a plain reshape of the "
        "device list; devices: device_ids in mesh order; hybrid: mesh_utils.create_hybrid_device_mesh with dcn_shape",
    )
    axis_types: list[AxisTypeName] | None = Field(
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


# ---- the error body ------------------------------------------------------------------------------


class ErrorDetail(BaseModel):
    model_config = ConfigDict(extra="allow")  # details vary by code: column, axis, limit, errors, ...

    code: str = Field(pattern=r"^[a-z][a-z0-9_]*$", description="Stable snake_case error code")
    message: str = Field(description="What was wrong and what is allowed")
    hint: str | None = Field(None, description="How to fix it")


class ErrorResponse(BaseModel):
    error: ErrorDetail


# ---- a layout: sharding_core.layout.Layout.to_json -------------------------------------------------

CLOSED = ConfigDict(strict=True, extra="forbid")
Count = Annotated[int, Field(ge=0, le=MAX_DEVICES)]
Dim = Annotated[int, Field(ge=0, le=MAX_ARRAY_ELEMENTS)]
ByteCount = Annotated[int, Field(ge=0, le=2**62)]
Bounds = Annotated[list[Dim], Field(min_length=2, max_length=2)]


@with_config(CLOSED)
class Shard(TypedDict):
    device_id: DeviceId
    index: Annotated[
        list[Bounds],
        Field(max_length=MAX_RANK, description="[start, stop) per dimension, as devices_indices_map gives them"),
    ]
    replica_id: Count
    tile: Annotated[Count, Field(description="Which distinct block the device holds (an index into tiles)")]


@with_config(CLOSED)
class DimSplit(TypedDict):
    dim: Annotated[int, Field(ge=0, lt=MAX_RANK)]
    size: Dim
    axes: Annotated[list[AxisName], Field(max_length=MAX_MESH_AXES)]
    axis_sizes: Annotated[list[AxisSize], Field(max_length=MAX_MESH_AXES)]
    blocks: Annotated[int, Field(ge=0, le=MAX_ARRAY_ELEMENTS)]
    text: Annotated[str, Field(max_length=1024)]


# Lists that scale with the device count (shards, tiles, device columns, groups) carry no maxItems:
# the domain checks them against the devices table and max_devices, and the body is bounded by its
# byte limit. Nested maxItems multiply: a schema-driven fuzzer would otherwise build bodies of
# hundreds of megabytes, refused by size (413) rather than by content.
@with_config(CLOSED)
class ArrayLayout(TypedDict):
    """One array's layout without its device set's context (``Layout.to_json(context=False)``): what a
    snapshot's ``layouts`` hold."""

    spec: Annotated[str | None, Field(max_length=MAX_SPEC_CHARS, description="As JAX prints it, e.g. P('x', None)")]
    typed: NotRequired[
        Annotated[
            str | None,
            Field(
                max_length=2 * MAX_SPEC_CHARS,
                description="The array's type with its sharding, as str(jax.typeof(x)) prints it: float32[8@x,16@y] "
                "where the mesh's axes are Explicit, {U:y} / {R:y} for unreduced / reduced axes (Auto and Manual "
                "axes are not in the type); null without a mesh. Absent from layouts stored before it existed",
            ),
        ]
    ]
    shape: Annotated[list[Dim], Field(max_length=MAX_RANK)]
    dtype: Annotated[str, Field(max_length=64)]
    itemsize: Annotated[int, Field(ge=0, le=1024)]
    shard_shape: Annotated[list[Dim], Field(max_length=MAX_RANK)]
    dims: Annotated[list[DimSplit], Field(max_length=MAX_RANK)]
    replication_factor: Count
    replicated_axes: Annotated[list[AxisName], Field(max_length=MAX_MESH_AXES)]
    unreduced_axes: Annotated[list[AxisName], Field(max_length=MAX_MESH_AXES)]
    bytes_per_device: ByteCount
    total_bytes: ByteCount
    logical_bytes: ByteCount
    shards: Annotated[list[Shard], Field(description="One entry per device, in mesh order")]
    tiles: Annotated[list[list[DeviceId]], Field(description="Device ids holding each distinct block")]


@with_config(CLOSED)
class MeshInfo(TypedDict):
    shape: Annotated[list[AxisSize], Field(min_length=1, max_length=MAX_MESH_AXES)]
    axis_names: Annotated[list[AxisName], Field(min_length=1, max_length=MAX_MESH_AXES)]
    axis_types: Annotated[list[AxisTypeOfMesh], Field(min_length=1, max_length=MAX_MESH_AXES)]
    device_ids: Annotated[list[Any], Field(min_length=1, description="Nested list of device ids in mesh order")]


@with_config(CLOSED)
class DeviceColumns(TypedDict):
    id: list[DeviceId]
    process_index: list[Count]
    core_on_chip: list[Annotated[int, Field(ge=0, le=1024)]]
    coords: list[Annotated[list[Annotated[int, Field(ge=0, le=MAX_DEVICES)]], Field(min_length=3, max_length=3)]] | None
    slice_index: NotRequired[list[Count]]


@with_config(CLOSED)
class Layout(ArrayLayout):
    """A whole layout (``Layout.to_json()``): the array's, with the device set's context."""

    devices_key: str | None
    platform: str
    device_kind: str
    mesh: MeshInfo | None
    devices: Annotated[DeviceColumns, Field(description="Device attributes as columns, in mesh order")]


# ---- a collective: sharding_core.hlo.collectives.collective_json ------------------------------------

MAX_COLLECTIVES = 4096  # an HLO module with more collectives than this is refused in a snapshot
ShortText = Annotated[str, Field(max_length=256)]
Seconds = Annotated[float | None, Field(ge=0, description="Seconds (an estimate); null when there is none")]


@with_config(CLOSED)
class Estimate(TypedDict):
    """A collective's time on the device set's hardware (sharding_core.cost.collectives): an estimate
    with its formula and inputs, or ``seconds: null`` and why there is none."""

    seconds: Seconds
    bound_seconds: NotRequired[
        Annotated[Seconds, Field(description="The bound: spec-sheet bandwidths and latencies (= seconds)")]
    ]
    expected_seconds: NotRequired[
        Annotated[
            Seconds,
            Field(
                description="Expected: each fabric at its efficiency for the operation, latency and size curve fitted "
                "to published measurements, or measured on the devices (a calibrated profile)"
            ),
        ]
    ]
    formula: NotRequired[Annotated[str, Field(max_length=4000, description="The formula, as the model uses it")]]
    inputs: NotRequired[
        Annotated[dict[str, Any], Field(description="What went into it: bytes, group size, bandwidth, hops...")]
    ]
    fabric: NotRequired[
        Annotated[Fabric, Field(description="What the data crosses: ici, dcn, nvlink or network (cpu: calibrated)")]
    ]
    why: NotRequired[Annotated[str, Field(max_length=1000, description="Why there is no estimate")]]
    profile: NotRequired[
        Annotated[
            str,
            Field(max_length=1000, description="The calibrated profile the expected time is from, when one was given"),
        ]
    ]
    why_no_bound: NotRequired[
        Annotated[str, Field(max_length=1000, description="Why a calibrated estimate has no bound (CPU sets)")]
    ]


@with_config(CLOSED)
class HbmFit(TypedDict):
    bytes_per_device: Annotated[ByteCount | None, Field(description="The program's peak memory per device")]
    capacity_bytes: Annotated[ByteCount | None, Field(description="HBM per device")]
    fits: bool | None
    over_bytes: ByteCount | None
    text: Annotated[str, Field(max_length=1000, description="fits: ... of ..., or over by ...")]


class Communication(Reply):
    """A program's collectives in total (sharding_core.cost.collectives.communication): reshard and compare."""

    count: int = Field(description="Collectives in the program")
    runs: int | None = Field(None, description="Collective runs per program run (loops counted)")
    bytes: int = Field(
        description="Bytes of their results per device, summed (each times its repeat count), at the width the "
        "program asked for (a bf16 collective XLA's CPU compiler widened to f32 counts its bf16 bytes)"
    )
    bytes_as_compiled: int | None = Field(
        None, description="The compiled program's own bytes, where they differ (the CPU compiler's f32)"
    )
    seconds: float | None = Field(description="Their bounds summed with repeat counts (null: none has one)")
    bound_seconds: float | None = Field(None, description="The same as seconds: the spec-sheet bound")
    expected_seconds: float | None = Field(None, description="Their expected times summed with repeat counts")
    without_estimate: int = Field(description="Collectives without an estimate (left out of the sum)")
    program: str | None = Field(None, description="Which compiled program they are of")


@with_config(CLOSED)
class Roofline(TypedDict):
    """A compiled program's roofline on the device set's hardware (sharding_core.cost.roofline), per device."""

    source: Annotated[str, Field(max_length=1000, description="Which program: the CPU run's or the TPU compile")]
    hardware: Annotated[str | None, Field(max_length=256)]
    dtype: Annotated[str, Field(max_length=64, description="Whose peak FLOP/s is used")]
    compute_seconds: Seconds
    memory_seconds: Seconds
    communication_seconds: Seconds
    communication_expected_seconds: NotRequired[Seconds]
    bound: Literal["compute", "memory", "communication"] | None
    lower_bound_seconds: Seconds
    serial_seconds: Seconds
    formula: Annotated[str, Field(max_length=2000)]
    inputs: dict[str, Any]
    hbm: HbmFit
    why: Annotated[str | None, Field(max_length=2000, description="What the model has no figures for")]


@with_config(CLOSED)
class LoopRef(TypedDict):
    loop: ShortText
    trip_count: Annotated[int, Field(ge=0, le=2**62)] | None
    how: NotRequired[Annotated[str, Field(max_length=32, description="backend_config, condition or unknown")]]


@with_config(CLOSED)
class Widened(TypedDict):
    dtype: Annotated[str, Field(max_length=16, description="The type the program asked for, e.g. bf16")]
    bytes: ByteCount


# ---- why a collective is there (sharding_core.why) ------------------------------------------------------

LongText = Annotated[str, Field(max_length=4096)]
LeafPath = Annotated[str, Field(max_length=1024)]


@with_config(CLOSED)
class WhyFrame(TypedDict):
    file: LongText
    line: Annotated[int, Field(ge=0, le=2**31)]
    function: LongText


@with_config(CLOSED)
class WhyOperand(TypedDict):
    value: ShortText
    name: LongText
    operand: Annotated[int, Field(ge=0, le=4096)] | None
    shape: Annotated[list[Dim], Field(max_length=MAX_RANK)] | None
    dtype: Annotated[str, Field(max_length=64)] | None
    before: LongText | None
    after: LongText | None
    leaf: LeafPath | None


@with_config(CLOSED)
class WhyEdge(TypedDict):
    step: Annotated[int, Field(ge=0, le=2**31)]
    axis: ShortText
    source: Annotated[ShortText, Field(description="operand-N or result-N the axis flowed from")]
    to: Annotated[list[ShortText], Field(max_length=64)]


@with_config(CLOSED)
class WhyOrigin(TypedDict):
    side: ShortText
    axis: ShortText
    origin: ShortText
    meaning: LongText
    leaf: LeafPath | None
    edges: Annotated[list[WhyEdge], Field(max_length=64, description="Shardy's propagation edges of the axis")]
    shardy: NotRequired[ShortText]


@with_config(CLOSED)
class WhyRun(TypedDict):
    inputs: Annotated[list[SpecText], Field(max_length=64)]
    out_specs: Annotated[list[SpecText], Field(max_length=64)] | None


@with_config(CLOSED)
class WhyFix(TypedDict):
    """A candidate change compiled again and kept because the program's collectives then cost less."""

    leaf: LeafPath | None
    spec: SpecText | None
    text: LongText
    kind: Literal["input", "output", "config"]
    collectives_after: Annotated[int, Field(ge=0, le=2**31)]
    bytes_after: ByteCount
    seconds_after: Seconds
    peak_after: ByteCount | None
    collectives_before: Annotated[int, Field(ge=0, le=2**31)]
    bytes_before: ByteCount
    seconds_before: Seconds
    peak_before: ByteCount | None
    saved: float
    ranked_by: Literal["seconds", "bytes"]
    target_bytes_after: ByteCount
    removes: bool
    halves: bool
    verified: bool
    compiler_log: Annotated[list[LongText], Field(max_length=16)]
    result: NotRequired[
        Annotated[int, Field(ge=0, le=64, description="The snapshot's fixes[result]: the fix compiled")]
    ]
    run: NotRequired[
        Annotated[WhyRun, Field(description="A kernel run's fix: the request to replay in the kernel lab")]
    ]


@with_config(CLOSED)
class WhyTried(TypedDict):
    candidates: Annotated[int, Field(ge=0, le=2**20)]
    compiled: Annotated[int, Field(ge=0, le=2**20)]
    refused: Annotated[int, Field(ge=0, le=2**20)]
    improving: Annotated[int, Field(ge=0, le=2**20)]


@with_config(CLOSED)
class Why(TypedDict):
    """Why a collective is in the program and which changes remove it (sharding_core.why)."""

    source: Annotated[LongText | None, Field(description="file:line of the user's frame")]
    stack: Annotated[list[WhyFrame], Field(max_length=16)]
    op: Annotated[LongText | None, Field(description="The JAX op name XLA kept in the HLO metadata")]
    primitive: ShortText | None
    jaxpr: LongText | None
    operands: Annotated[list[WhyOperand], Field(max_length=16)]
    leaves: Annotated[list[LeafPath], Field(max_length=64)]
    origin: Annotated[list[WhyOrigin], Field(max_length=64)]
    partitioner: Literal["shardy", "gspmd"]
    explanation: LongText
    fixes: Annotated[list[WhyFix], Field(max_length=8)]
    matched: dict[Literal["value", "op"], ShortText | None] | None
    kind: NotRequired[Literal["located", "explicit", "unexplained", "boundary", "reshard", "reduction", "prng"]]
    note: NotRequired[LongText | None]
    fixes_note: NotRequired[LongText]
    tried: NotRequired[WhyTried]


@with_config(CLOSED)
class Collective(TypedDict):
    """One collective instruction of compiled HLO with its device groups, as the kernel lab and
    ``inspect_jit`` report it."""

    op: CollectiveOp
    name: Annotated[ShortText, Field(description="The instruction's name in the compiled HLO")]
    shape: Annotated[str, Field(max_length=4096, description="Result shape per device as HLO writes it, f32[4,8]")]
    bytes: Annotated[ByteCount | None, Field(description="Bytes of the result per device")]
    groups: Annotated[
        list[list[DeviceId]] | None, Field(description="Replica groups as device ids (collective-permute: chains)")
    ]
    pairs: Annotated[
        list[Annotated[list[DeviceId], Field(min_length=2, max_length=2)]] | None,
        Field(description="collective-permute: [source, target] device ids"),
    ]
    is_async: NotRequired[Annotated[bool, Field(description="An async -start form")]]
    axes: NotRequired[
        Annotated[
            list[ShortText] | None,
            Field(max_length=2 * MAX_MESH_AXES, description="Mesh axes the groups span, major first (sub-axes y:(1)2)"),
        ]
    ]
    exact_axes: NotRequired[Annotated[bool | None, Field(description="Each group is exactly those axes' devices")]]
    axes_text: NotRequired[Annotated[str, Field(max_length=1024)]]
    replica_groups: NotRequired[
        Annotated[str, Field(max_length=2000, description="replica_groups / source_target_pairs as XLA printed it")]
    ]
    dimensions: NotRequired[
        Annotated[list[Annotated[int, Field(ge=0, lt=MAX_RANK)]], Field(max_length=MAX_RANK)] | None
    ]
    source: NotRequired[Annotated[str | None, Field(max_length=4096, description="The JAX op that asked for it")]]
    raw: NotRequired[Annotated[str | None, Field(max_length=400, description="Snapshots before 0.2: groups' text")]]
    repeat: NotRequired[
        Annotated[int, Field(ge=0, le=2**62, description="Runs per program run: its loops' trip counts multiplied")]
    ]
    loops: NotRequired[
        Annotated[list[LoopRef], Field(max_length=64, description="The while loops around it, outermost first")]
    ]
    widened: NotRequired[
        Annotated[
            Widened | None,
            Field(
                description="XLA promoted this 16-bit reduction to 32 bits: the type and bytes the program asked for"
            ),
        ]
    ]
    estimate: NotRequired[Annotated[Estimate, Field(description="Its time on the device set's hardware")]]
    line: NotRequired[Annotated[LongText | None, Field(description="file:line of the user's frame that asked for it")]]
    why: NotRequired[Annotated[Why, Field(description="Why it is there and what removes it (sharding_core.why)")]]


# ---- a reference to a stored snapshot: what diff, what-if and compare take -------------------------------

RecordId = Annotated[str, Field(pattern=rf"^{ID_PATTERN}$", description="An id from this server")]
RunId = Annotated[
    str,
    Field(
        pattern=rf"^{ID_PATTERN}$",
        description="A run's id, at least 128 random bits, URL-safe: in a snapshot's run, the run's secret "
        "(which writes); in a reference, the run's read id (which reads)",
    ),
]
ProcessIndex = Annotated[int, Field(ge=0, lt=MAX_RUN_PROCESSES)]


@with_config(CLOSED)
class SnapshotRef(TypedDict):
    """Which snapshot: ``{"snapshot": id}``, ``{"run": read id}`` (the merged run) or
    ``{"run": read id, "process": n}`` (one process's part of it); with ``"fix": k``, that snapshot's k-th
    fix as it was compiled (an ``explain`` capture's ``fixes[k]``)."""

    snapshot: NotRequired[RecordId]
    run: NotRequired[RunId]
    process: NotRequired[ProcessIndex]
    fix: NotRequired[
        Annotated[
            int, Field(ge=0, le=64, description="The snapshot as its fixes[fix] compiled it (sharding_core.explain)")
        ]
    ]


# ---- a finding: what a capture, plan or kernel run should change (sharding_core.findings) ---------------

Bytes = Annotated[int, Field(ge=0, le=2**62)]
MAX_TIMELINE_POINTS = 2 * tl.MAX_POINTS


@with_config(CLOSED)
class TimelineBuffer(TypedDict):
    """A buffer live at the peak of a memory timeline (sharding_core.program.timeline)."""

    bytes: Bytes
    logical_bytes: Bytes
    shape: Annotated[list[Annotated[int, Field(ge=0, le=2**62)]], Field(max_length=MAX_RANK + 1)]
    dtype: Annotated[str, Field(max_length=64)]
    what: Annotated[str, Field(max_length=64)]
    name: Annotated[str, Field(max_length=1024)]
    source: Annotated[str, Field(max_length=2048)] | None
    sharding: Annotated[str, Field(max_length=1024)] | None
    op: Annotated[str, Field(max_length=4096)] | None
    padded: bool
    memory_space: Annotated[str, Field(max_length=64)]


@with_config(CLOSED)
class HostTimeline(TypedDict):
    """Host memory over the same points, where the program offloads (XLA's host memory space)."""

    points: Annotated[list[Annotated[list[Annotated[int, Field(ge=0, le=2**62)]], Field(min_length=2, max_length=2)]],
                      Field(max_length=MAX_TIMELINE_POINTS)]  # fmt: skip
    peak_bytes: Bytes
    peak_index: Annotated[int, Field(ge=0, le=2**40)]
    resident_bytes: Bytes
    memory_space: Annotated[int, Field(ge=0, le=64)]


@with_config(CLOSED)
class MemoryTimeline(TypedDict):
    """Memory over program order (sharding_core.program.timeline.memory_timeline): points, XLA's peak, the buffers
    at the peak."""

    points: Annotated[list[Annotated[list[Annotated[int, Field(ge=0, le=2**62)]], Field(min_length=2, max_length=2)]],
                      Field(max_length=MAX_TIMELINE_POINTS)]  # fmt: skip
    length: Annotated[int, Field(ge=0, le=2**40)]
    peak_bytes: Bytes
    peak_index: Annotated[int, Field(ge=0, le=2**40)]
    timeline_peak_bytes: Bytes
    resident_bytes: Bytes
    peak_instruction: Annotated[str, Field(max_length=1024)] | None
    colors: Annotated[list[Annotated[int, Field(ge=0, le=64)]], Field(max_length=16)]
    at_peak: Annotated[list[TimelineBuffer], Field(max_length=tl.MAX_AT_PEAK)]
    at_peak_total: Annotated[int, Field(ge=0, le=2**40)]
    groups: Annotated[list[dict[Annotated[str, Field(max_length=64)], Any]], Field(max_length=16)]
    padded: Annotated[list[dict[Annotated[str, Field(max_length=64)], Any]], Field(max_length=tl.MAX_AT_PEAK)]
    note: Annotated[str, Field(max_length=2048)] | None
    source: Annotated[str, Field(max_length=512)]
    host: NotRequired[HostTimeline]


# ---- a search's candidates (sharding_core.searching: what a pick's plan carries as ``search``) ----

SEARCH_OPEN = ConfigDict(strict=True, extra="allow")
"""The figures the dashboard draws are typed and bounded; the rest of a search's JSON (estimates, advice, the
collectives' seconds) passes as sent, within the request's size limit, and is only ever shown as text."""
ShortName = Annotated[str, Field(max_length=256)]
CandidateIndex = Annotated[int, Field(ge=0, lt=MAX_SEARCH_CANDIDATES)]


@with_config(CLOSED)
class SearchMesh(TypedDict):
    shape: Annotated[list[Annotated[int, Field(ge=1, le=MAX_DEVICES)]], Field(min_length=1, max_length=8)]
    axis_names: Annotated[list[Annotated[str, Field(max_length=64)]], Field(min_length=1, max_length=8)]
    dcn_shape: NotRequired[Annotated[list[Annotated[int, Field(ge=1, le=MAX_DEVICES)]], Field(max_length=8)]]


SearchRule = Annotated[list[Annotated[str, Field(max_length=64)] | list[Annotated[str, Field(max_length=64)]] | None],
                       Field(min_length=2, max_length=2)]  # fmt: skip


@with_config(CLOSED)
class SearchPaste(TypedDict):
    python: Annotated[str, Field(max_length=16384)]
    maxtext: Annotated[str, Field(max_length=16384)]


@with_config(SEARCH_OPEN)
class SearchCandidate(TypedDict):
    """One candidate: its mesh, rules and knobs; XLA's peak and the plan's expected step when it was compiled."""

    mesh: SearchMesh
    rules: Annotated[list[SearchRule], Field(max_length=MAX_RULES)]
    knobs: Annotated[dict[Annotated[str, Field(max_length=64)], Any], Field(max_length=16)]
    strategy: ShortName
    compiled: bool
    fits: bool | None
    peak_bytes: Bytes | None
    expected_seconds: Seconds
    lost_on: Annotated[str, Field(max_length=2048)]
    current: NotRequired[bool]
    lower_bound_seconds: NotRequired[Seconds]
    upper_bound_seconds: NotRequired[Seconds]
    bound: NotRequired[Annotated[str, Field(max_length=64)] | None]
    collective_seconds: NotRequired[
        Annotated[dict[Annotated[str, Field(max_length=256)], Annotated[float, Field(ge=0)]], Field(max_length=16)]
    ]
    compile_seconds: NotRequired[Annotated[float, Field(ge=0)]]
    usable_bytes: NotRequired[Bytes | None]
    paste: NotRequired[SearchPaste]


@with_config(SEARCH_OPEN)
class SearchPick(TypedDict):
    index: CandidateIndex
    strategy: ShortName
    plan: NotRequired[None]


@with_config(SEARCH_OPEN)
class SearchSummary(TypedDict):
    """The search a pick's plan came from (sharding_core.search's JSON without the pick's plan)."""

    devices: ShortName
    enumerated: Annotated[int, Field(ge=0, le=MAX_SEARCH_CANDIDATES)]
    compiled: Annotated[int, Field(ge=0, le=MAX_SEARCH_CANDIDATES)]
    seconds: Annotated[float, Field(ge=0)]
    usable_bytes: Bytes | None
    candidates: Annotated[list[SearchCandidate], Field(max_length=MAX_SEARCH_CANDIDATES)]
    front: Annotated[list[CandidateIndex], Field(max_length=MAX_SEARCH_CANDIDATES)]
    current: CandidateIndex | None
    pick: SearchPick | None
    slices: NotRequired[Annotated[int, Field(ge=1, le=MAX_SLICES)]]
    why_no_pick: NotRequired[Annotated[str, Field(max_length=2048)]]


MAX_FINDINGS = 256
LineText = Annotated[str, Field(max_length=4096, description="file:line in the user's source")]


@with_config(CLOSED)
class FindingFix(TypedDict):
    text: Annotated[str, Field(max_length=4000, description="What to change, in words and code")]
    line: LineText | None
    leaf: Annotated[str | None, Field(max_length=MAX_LEAF_PATH_CHARS, description="The leaf to change (its path)")]
    spec: SpecText | None
    bytes_after: ByteCount
    expected_seconds_after: Annotated[float | None, Field(ge=0)]
    peak_after: ByteCount | None
    placed_after: NotRequired[
        Annotated[
            ByteCount | None,
            Field(description="A TPU set's fix, scheduled by libtpu and not compiled to the end: the bytes its "
                  "buffer assignment placed in HBM (no peak)"),
        ]
    ]  # fmt: skip
    placed_before: NotRequired[
        Annotated[ByteCount | None, Field(description="The program's own placed bytes, beside placed_after")]
    ]


@with_config(CLOSED)
class Finding(TypedDict):
    """``{"kind", "source", "bytes_per_step", "text", "fix"}``: e.g. ``mesh_device_order`` / ``mesh_devices``,
    arguments jit refuses beside the mesh of ``jax.set_mesh`` (sharding_core.findings.mesh_order), or silent waste
    in a compiled program (sharding_core.findings.waste: with ``title``, ``bytes``, ``repeat``, ``share`` and
    ``involved``)."""

    kind: Annotated[str, Field(max_length=64)]
    source: LineText | None
    bytes_per_step: ByteCount
    text: Annotated[str, Field(max_length=4000)]
    fix: FindingFix | None
    title: NotRequired[Annotated[str, Field(max_length=400, description="The finding in a few words")]]
    bytes: NotRequired[Annotated[ByteCount, Field(description="Bytes per device of one occurrence")]]
    repeat: NotRequired[Annotated[int, Field(ge=0, le=2**40, description="Occurrences per step (loops counted)")]]
    share: NotRequired[
        Annotated[float | None, Field(ge=0, description="bytes_per_step over the step's collective bytes or peak")]
    ]
    involved: NotRequired[
        Annotated[
            list[Annotated[str, Field(max_length=400)]],
            Field(max_length=16, description="The values or collectives involved"),
        ]
    ]


# ---- a value's sharding along the program (sharding_core.program.values) ---------------------------------

MAX_VALUES = 4000


@with_config(CLOSED)
class ProgramValue(TypedDict):
    """One intermediate value: the sharding the partitioner chose for it, where the program made it."""

    source: LineText | None
    function: Annotated[str | None, Field(max_length=256)]
    op: Annotated[str, Field(max_length=256)]
    shape: Annotated[list[Annotated[int, Field(ge=0, le=2**62)]], Field(max_length=64)]
    dtype: Annotated[str, Field(max_length=32)]
    spec: SpecText | None
    sharding: Annotated[str, Field(max_length=4096, description="XLA's HloSharding text")]
    typed: Annotated[str | None, Field(max_length=1024, description="The type as JAX prints it in explicit mode")]
    bytes: Annotated[ByteCount, Field(description="Bytes per device")]
    logical_bytes: ByteCount
    repeat: Annotated[int, Field(ge=0, le=2**40)]
    computation: Annotated[str, Field(max_length=512)]
    name: Annotated[str, Field(max_length=512)]


# ---- kernel runs and reshards: what the kernel lab, reshard and compare take and answer ----------------

if TYPE_CHECKING:
    KernelDType = str
    InputData = str
else:
    KernelDType = vocab(KERNEL_DTYPES)
    InputData = vocab(INPUT_DATA)

MAX_KERNEL_ARRAYS = 16  # inputs, out_specs and params per run; the catalog's kernels take at most 3
KernelName = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.-]+$")]


class KernelInputRequest(Request):
    shape: list[ArrayDim] = Field(max_length=MAX_RANK, description="The input's shape")
    spec: SpecText
    dtype: KernelDType = "float32"


class KernelRunRequest(Request):
    kernel: KernelName = Field(description="A name from GET /api/kernels", examples=["sum_axis0"])
    devices: DevicesText
    mesh: MeshRequest
    inputs: list[KernelInputRequest] | None = Field(
        None, max_length=MAX_KERNEL_ARRAYS, description="One per kernel input, in order (null: the catalog's defaults)"
    )
    out_specs: list[SpecText] | None = Field(
        None,
        max_length=MAX_KERNEL_ARRAYS,
        description="Output shardings: out_shardings of a jit kernel, out_specs of a shard_map kernel (null: JAX's)",
    )
    params: dict[Annotated[str, Field(max_length=64)], SpecText] | None = Field(
        None, max_length=MAX_KERNEL_ARRAYS, description="The kernel's parameters by name (null: defaults)"
    )
    slices: Slices = 1
    chips_per_host: ChipsPerHost = None
    data: InputData = Field("random", description="What the inputs hold: seeded random values, or 0, 1, 2, … (arange)")
    compile_only: CompileOnly = None


class ReshardRequest(Request):
    devices: DevicesText
    mesh: MeshRequest
    shape: list[ArrayDim] = Field(max_length=MAX_RANK, description="The array's shape")
    dtype: KernelDType = "float32"
    source: SpecText = Field(alias="from", description="The sharding the array has, e.g. P('x', None)")
    to: SpecText = Field(description="The sharding to move it to, e.g. P(None, 'y')")
    slices: Slices = 1
    chips_per_host: ChipsPerHost = None
    compile_only: CompileOnly = None


# ---- a compiled program's report (sharding_core.program.report): kernel runs, reshards and snapshots ------------

MAX_REPORT_ITEMS = 4096
Flops = Annotated[float | None, Field(ge=0)]

if TYPE_CHECKING:
    ProgramMemory = dict[str, int]
else:
    # Every Compiled.memory_analysis() field by its XLA name (the domain's list: sharding_core.program.memory).
    ProgramMemory = with_config(CLOSED)(
        TypedDict("ProgramMemory", {name: NotRequired[ByteCount] for name in MEMORY_FIELDS})
    )


@with_config(CLOSED)
class Loop(TypedDict):
    """A while loop of the program: its trip count and how many times its computation runs per program run."""

    name: ShortText
    computation: ShortText
    body: ShortText
    condition: NotRequired[ShortText | None]
    trip_count: Annotated[int | None, Field(ge=0, le=2**62, description="Runs of its body each time (null: unknown)")]
    how: NotRequired[
        Annotated[
            str | None,
            Field(
                max_length=32,
                description="Where the trip count comes from: backend_config (XLA's known_trip_count), condition "
                "(read from the loop's condition, body and start, as XLA's while-loop analysis reads it) or unknown",
            ),
        ]
    ]
    source: NotRequired[Annotated[str | None, Field(max_length=4096, description="The JAX op that made the loop")]]
    runs: Annotated[int, Field(ge=0, le=2**62, description="Runs of its computation per program run")]


@with_config(CLOSED)
class ProgramWork(TypedDict, total=False):
    """The work per device and step, loops counted (sharding_core.program.report.work_facts)."""

    flops: Annotated[Flops, Field(description="XLA's flops with every loop body counted as often as it runs")]
    transcendentals: Flops
    bytes_accessed: Annotated[Flops, Field(description="XLA's bytes accessed, loop bodies counted per run")]
    flops_loops_once: Flops
    bytes_accessed_loops_once: Flops
    flops_xla: Annotated[Flops, Field(description="XLA's cost_analysis: each loop body once")]
    bytes_accessed_xla: Flops
    matmul_flops_by_dtype: dict[Annotated[str, Field(max_length=16)], float]
    matmul_traffic_bytes: ByteCount | None
    loops: Annotated[list[Loop], Field(max_length=MAX_REPORT_ITEMS)]
    unknown_trip_counts: Annotated[list[ShortText], Field(max_length=MAX_REPORT_ITEMS)]
    note: Annotated[str, Field(max_length=2000)]


@with_config(CLOSED)
class ProgramTarget(TypedDict, total=False):
    """What the program was compiled for (sharding_core.program.targets.Target.describe, or the devices it ran on)."""

    devices: Annotated[str | None, Field(max_length=64)]
    platform: Annotated[str, Field(max_length=64)]
    device_kind: Annotated[str | None, Field(max_length=256)]
    compile_only: bool
    num_devices: Annotated[int, Field(ge=0, le=MAX_DEVICES)]
    hosts: Annotated[int, Field(ge=1, le=MAX_DEVICES)]
    slices: Annotated[int, Field(ge=1, le=MAX_SLICES)]
    topology: Annotated[str | None, Field(max_length=64)]
    chips_per_host: Annotated[list[Annotated[int, Field(ge=1, le=MAX_DEVICES)]] | None, Field(max_length=3)]
    source: Annotated[str | None, Field(max_length=512)]
    dropped_fields: Annotated[list[ShortText], Field(max_length=32)]


@with_config(CLOSED)
class Origin(TypedDict):
    axis: ShortText
    origin: Annotated[str, Field(max_length=256, description="Shardy's text: self, input: N, constraint_K, ...")]
    meaning: Annotated[str, Field(max_length=1024)]


@with_config(CLOSED)
class OriginEntry(TypedDict):
    value: ShortText
    op: ShortText
    sharding: Annotated[str | None, Field(max_length=1024)]
    name: Annotated[str | None, Field(max_length=256)]
    origins: Annotated[list[Origin], Field(max_length=64)]


@with_config(CLOSED)
class Origins(TypedDict):
    """Shardy's sharding origins (sharding_core.hlo.origins): where each value's sharding came from."""

    entries: Annotated[list[OriginEntry], Field(max_length=MAX_REPORT_ITEMS)]
    outputs: Annotated[list[OriginEntry | None], Field(max_length=MAX_REPORT_ITEMS)]
    truncated: bool


@with_config(CLOSED)
class DcnStep(TypedDict):
    """A cross-slice step of a multi-slice program, as libtpu wrote it (a megascale send)."""

    op: ShortText
    name: Annotated[str, Field(max_length=512, description="The transfer's rendezvous name in the TPU HLO")]
    transfer_type: Annotated[str, Field(max_length=64, description="ONE_TO_ONE, ALL_GATHER, ALL_REDUCE, ...")]
    reduce_operation: Annotated[str | None, Field(max_length=64)]
    target: Annotated[str, Field(max_length=2000, description="_xla_megascale_target as libtpu wrote it")]
    fabric: Annotated[str, Field(max_length=16, description="dcn")]
    bytes: Annotated[ByteCount | None, Field(description="The step's result per device (the recv's shape)")]
    sent_bytes: Annotated[ByteCount | None, Field(description="What each device sends")]
    shape: Annotated[str | None, Field(max_length=1024)]
    groups: Annotated[list[list[DeviceId]], Field(description="The global devices of each exchange")]
    pairs: Annotated[list[list[DeviceId]] | None, Field(description="A permute's source -> target devices")]
    axes: list[ShortText] | None
    axes_text: Annotated[str, Field(max_length=1024)]
    repeat: Annotated[int, Field(ge=0, le=2**62, description="Runs per program run (loops counted)")]
    loops: list[LoopRef]
    estimate: NotRequired[Annotated[Estimate, Field(description="Its time over DCN (added when a result is read)")]]


@with_config(CLOSED)
class ProgramReport(TypedDict):
    """A compiled program's report (sharding_core.program.report.Report.json): facts in XLA's own names, the same
    shape in kernel runs (and their tpu / gpu sections), reshards and snapshots; figures are never in it."""

    format: Annotated[int, Field(ge=1, le=64, description="The report's shape version")]
    target: ProgramTarget
    partitioner: Annotated[str | None, Field(max_length=16, description="shardy or gspmd (null: not recorded)")]
    memory: Annotated[ProgramMemory | None, Field(description="Every Compiled.memory_analysis() field, per device")]
    work: Annotated[ProgramWork | None, Field(description="Flops and bytes per device and step, loops counted")]
    collectives: Annotated[list[Collective], Field(max_length=MAX_COLLECTIVES, description="The HLO reader's facts")]
    dcn: Annotated[list[DcnStep], Field(max_length=MAX_COLLECTIVES, description="Multi-slice: cross-slice steps")]
    device_assignment: Annotated[list[DeviceId], Field(max_length=MAX_DEVICES, description="Device ids by partition")]
    origins: Origins | None
    timings: dict[Annotated[str, Field(max_length=32)], Annotated[float, Field(ge=0)]]
    compiler_log: Annotated[list[Annotated[str, Field(max_length=2000)]], Field(max_length=64)]
    temporaries: dict[str, Any] | None
    refusal: dict[str, Any] | None


class KernelTiming(Reply):
    lower_ms: float
    compile_ms: float
    run_ms: float | None = Field(description="null: a compile-only run (nothing ran)")
    reference_ms: float | None = Field(description="null: a compile-only run (no reference)")


class FiguresFrom(Reply):
    """Which compiled program a result's headline figures (communication, roofline) come from."""

    program: Literal["tpu", "gpu", "cpu"] = Field(
        description="tpu: libtpu's compile; gpu: XLA's GPU compile; cpu: the CPU-compiled program (for a gpu: set "
        "without the gpu extra, the CPU stand-in)"
    )
    description: str


class KernelTpu(Reply):
    """The kernel compiled (never run) for libtpu's real topology of a tpu: set; one of three shapes."""

    skipped: str | None = Field(None, description="Why there is no TPU compile (not a tpu: set, or no libtpu)")
    error: ErrorDetail | None = Field(None, description="The TPU compiler's refusal")
    topology: str | None = Field(None, description="libtpu's topology name, e.g. v5e:2x4")
    device_kind: str | None = None
    source: str | None = Field(None, description="What compiled it: the compiler and its topology or target config")
    slices: int | None = Field(None, description="Slices of the set (libtpu compiles one slice's program)")
    hlo: str | None = Field(None, description="The compiled TPU HLO")
    hlo_truncated: bool | None = None
    collectives: list[Collective] | None = Field(
        None, description="One per collective in the TPU HLO (ICI), its groups in every slice"
    )
    dcn: list[DcnStep] | None = Field(None, description="Multi-slice: the cross-slice (DCN) steps, with estimates")
    dcn_note: str | None = Field(None, description="How the DCN steps are found")
    program: ProgramReport | None = Field(None, description="The compiled program's report (memory, work, ...)")
    roofline: Roofline | None = Field(
        None, description="null: a result has one roofline, the headline program's (the TPU compile's), in roofline"
    )
    why_search: dict[str, Any] | None = Field(
        None, description="What the search for fixes of these collectives did (sharding_core.why): compiles, seconds"
    )
