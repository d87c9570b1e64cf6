"""The kernel lab's API: the catalog, synchronous runs, and jobs whose state the page polls.

``POST /api/kernels/run`` answers when the run is done (the contract); ``POST /api/kernels/jobs``
answers at once with a job id and ``GET /api/kernels/jobs/{id}`` reports queued / compiling /
running / done / error, which is what the page shows while it waits. Both validate on the
simulated devices first (``plan_run``: a 422 before any worker is involved), then go through the
same worker pool, cache and limits (:mod:`server.pool`). Routes are ``async``: waiting for a worker
holds no thread.
"""

from __future__ import annotations

import asyncio
import functools
from typing import TYPE_CHECKING, Annotated, NotRequired

import orjson
from fastapi import APIRouter
from pydantic import Field, with_config
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response
from typing_extensions import TypedDict

from server.api.deps import PoolDep, SettingsDep, device_set, responses
from server.api.schema import (
    CLOSED,
    ArrayDim,
    ChipsPerHost,
    Collective,
    Communication,
    DevicesText,
    ErrorDetail,
    Estimate,
    Layout,
    MeshInfo,
    MeshRequest,
    Reply,
    Request,
    Roofline,
    Slices,
    SpecText,
    vocab,
)
from server.errors import ApiError
from server.jsonio import OrjsonResponse, OrjsonRoute
from server.pool import BUSY, JOB_STATES, Busy, Job, WorkerPool
from server.settings import Settings
from sharding_core.errors import NOT_FOUND
from sharding_core.kernels.catalog import KERNEL_DTYPES, MODES, PARAM_KINDS, kernels
from sharding_core.kernels.plan import INPUT_DATA, MAX_VALUES_SHOWN, KernelPlan, RunInput, plan_run
from sharding_core.layout import MAX_RANK

if TYPE_CHECKING:
    KernelDType = str
    InputData = str
    KernelState = str
    KernelMode = str
    ParamKind = str
else:
    KernelDType = vocab(KERNEL_DTYPES)
    InputData = vocab(INPUT_DATA)
    KernelState = vocab(JOB_STATES)
    KernelMode = vocab(MODES)
    ParamKind = vocab(PARAM_KINDS)

KERNEL_ERROR_STATUS = 422
RUN_PATH = "/api/kernels/run"
JOBS_PATH = "/api/kernels/jobs"
MAX_KERNEL_ARRAYS = 16  # inputs, out_specs and params per run; the catalog's kernels take at most 3
KernelName = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.-]+$")]

router = APIRouter(route_class=OrjsonRoute, default_response_class=OrjsonResponse, tags=["kernels"])


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


class KernelInputInfo(Reply):
    name: str
    shape: list[int]
    spec: str
    dtype: str


class KernelParamInfo(Reply):
    name: str
    kind: ParamKind
    default: str
    doc: str
    minimum: int | None = None
    maximum: int | None = None


class KernelMeshInfo(Reply):
    shape: list[int]
    axis_names: list[str]
    axis_types: list[str]


class KernelInfo(Reply):
    name: str
    title: str
    doc: str
    mode: KernelMode
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


class KernelLimits(Reply):
    max_kernel_devices: int
    max_kernel_elements: int
    max_kernel_seconds: int
    max_kernel_workers: int
    max_kernel_queue: int
    max_worker_memory: int = Field(description="Bytes of memory one kernel worker may use")


class KernelCatalogResponse(Reply):
    kernels: list[KernelInfo]
    dtypes: list[str]
    limits: KernelLimits


@with_config(CLOSED)
class KernelValues(TypedDict):
    flat: Annotated[
        list[float | int | bool | None], Field(max_length=MAX_VALUES_SHOWN, description="The first values, row-major")
    ]
    size: Annotated[int, Field(ge=0, description="How many values the output has")]


@with_config(CLOSED)
class KernelArray(Layout):
    """An input as placed or an output: its layout exactly as POST /api/layout gives it, and more."""

    name: str
    typeof: Annotated[str, Field(description="jax.typeof(array), e.g. float32[8@x,8@y] with Explicit axes")]
    max_abs_error: NotRequired[
        Annotated[float | None, Field(description="Outputs: max |sharded - unsharded| (null when not comparable)")]
    ]
    max_abs_reference: NotRequired[
        Annotated[float | None, Field(description="Outputs: max |unsharded|, the scale of the error (null: none)")]
    ]
    values: NotRequired[Annotated[KernelValues | None, Field(description="Outputs: the first values, row-major")]]


class KernelMemory(Reply):
    argument_bytes: int | None = None
    output_bytes: int | None = None
    temp_bytes: int | None = None
    alias_bytes: int | None = None
    generated_code_bytes: int | None = None
    peak_bytes: int | None = None


class KernelLoop(Reply):
    name: str = Field(description="The while instruction")
    computation: str = Field(description="The computation holding it")
    body: str
    trip_count: int | None = Field(description="XLA's known_trip_count (null: unknown, counted once)")
    runs: int = Field(description="Runs of its computation per program run (outer loops multiplied)")


class KernelCost(Reply):
    flops: float | None = None
    bytes_accessed: float | None = None
    transcendentals: float | None = None
    optimal_seconds: float | None = None
    loop_corrected_flops: float | None = Field(
        None,
        description="flops with every dot and convolution counted as often as its loop runs (XLA counts a body once)",
    )
    matmul_traffic_bytes: int | None = Field(None, description="Bytes the dots read and write, per run of each")
    loops: list[KernelLoop] | None = None
    unknown_trip_counts: list[str] | None = Field(None, description="Loops whose trip count XLA does not know")


class KernelTiming(Reply):
    lower_ms: float
    compile_ms: float
    run_ms: float
    reference_ms: float


class KernelOrigin(Reply):
    axis: str
    origin: str = Field(description="Shardy's text: self, input: N, output: N, constraint_K, mc_K_input: N, ...")
    meaning: str


class KernelOriginEntry(Reply):
    value: str
    op: str
    sharding: str | None
    name: str | None
    origins: list[KernelOrigin]


class KernelOrigins(Reply):
    entries: list[KernelOriginEntry]
    outputs: list[KernelOriginEntry | None]
    truncated: bool


class DcnStep(Reply):
    """A cross-slice step of a multi-slice program, as libtpu wrote it (a megascale send)."""

    op: str
    name: str = Field(description="The transfer's rendezvous name in the TPU HLO")
    transfer_type: str = Field(description="_xla_megascale_transfer_type: ONE_TO_ONE, ALL_GATHER, ALL_REDUCE, ...")
    reduce_operation: str | None = None
    target: str = Field(description="_xla_megascale_target as libtpu wrote it")
    fabric: str = Field(description="dcn")
    bytes: int | None = Field(description="The step's result per device (the recv's shape)")
    sent_bytes: int | None = Field(description="What each device sends")
    shape: str | None
    groups: list[list[int]] = Field(description="The global devices of each exchange")
    pairs: list[list[int]] | None = Field(description="A permute's source -> target devices")
    axes: list[str] | None
    axes_text: str
    repeat: int = Field(description="Runs per program run (loops counted)")
    loops: list[dict[str, str | int | None]]
    estimate: Estimate = Field(description="The step's time over DCN (an estimate: formula and inputs)")


class KernelTpu(Reply):
    """The kernel compiled (never run) for libtpu's real topology of a tpu: set; one of three shapes."""

    skipped: str | None = Field(None, description="Why there is no TPU compile (not a tpu: set, or no libtpu)")
    error: ErrorDetail | None = Field(None, description="The TPU compiler's refusal")
    topology: str | None = Field(None, description="libtpu's topology name, e.g. v5e:2x4")
    device_kind: str | None = None
    slices: int | None = Field(None, description="Slices of the set (libtpu compiles one slice's program)")
    hlo: str | None = Field(None, description="The compiled TPU HLO")
    hlo_truncated: bool | None = None
    collectives: list[Collective] | None = Field(
        None, description="One per collective in the TPU HLO (ICI), its groups in every slice"
    )
    dcn: list[DcnStep] | None = Field(None, description="Multi-slice: the cross-slice (DCN) steps")
    dcn_note: str | None = Field(None, description="How the DCN steps are found")
    device_assignment: list[int] | None = Field(None, description="Device ids by partition id")
    memory: KernelMemory | None = Field(None, description="compiled.memory_analysis() on TPU, per device")
    cost: KernelCost | None = Field(None, description="compiled.cost_analysis() on TPU, per device")
    compile_ms: float | None = None
    roofline: Roofline | None = Field(
        None, description="null: a result has one roofline, the headline program's (the TPU compile's), in roofline"
    )


class KernelRunResponse(Reply):
    cached: bool = Field(description="Answered from the result cache")
    kernel: str
    title: str
    devices_key: str
    platform: str = Field(description="The device set's platform (the run itself is on CPU devices)")
    executed_on: str
    jax_version: str
    mesh: MeshInfo
    params: dict[str, str]
    out_specs: list[str] | None
    inputs: list[KernelArray] = Field(description="Inputs as placed (and arrays the kernel created, e.g. parameters)")
    outputs: list[KernelArray] = Field(description="One per output, with the sharding JAX gave it")
    max_abs_error: float | None
    reference: str
    collectives: list[Collective] = Field(description="One per collective in the compiled HLO")
    communication: Communication = Field(
        description="The headline program's collectives in total: the TPU compile's on a tpu: set with libtpu, "
        "else the compiled program's (estimates)"
    )
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
    roofline: Roofline = Field(
        description="Compute, memory and communication time of the headline program (the TPU compile's on a tpu: "
        "set with libtpu, else the compiled program's) on the device set's hardware, the bound, a lower bound on "
        "run time and HBM fit (estimates; CPU sets say why there are none)"
    )
    tpu: KernelTpu | None = Field(
        None, description="tpu: sets with the optional tpu extra: the kernel compiled for libtpu's topology"
    )


class KernelJobCreated(Reply):
    id: str
    state: KernelState
    url: str = Field(description="Where to poll: /api/kernels/jobs/<id>")


class KernelJobResponse(Reply):
    id: str
    kernel: str
    state: KernelState
    queued_ahead: int | None = Field(description="Runs ahead of this one in the queue (null unless queued)")
    elapsed_ms: float
    peak_memory_bytes: int | None = Field(
        description="The worker's largest resident memory seen while this run ran (null: not measured, or cached)"
    )
    result: KernelRunResponse | None
    failure: ErrorDetail | None = Field(description="Why the run failed (state error)")


_MEANING = {
    "s404": "No such job (not_found): unknown, or forgotten (setting max_kernel_jobs)",
    "s422": "Input refused before or during the run: validation_error, unknown_kernel, unavailable, bad_inputs, "
    "the layout codes (parse_error, unknown_axis, indivisible, ...), too_large, kernel_error (JAX refused the "
    "kernel: its message and what to change), timeout (setting max_kernel_seconds), worker_crashed",
}


@functools.lru_cache(maxsize=8)
def _catalog(names: tuple[str, ...], settings: Settings) -> bytes:
    # Keyed by the kernels' names too: tests register and unregister hook kernels.
    return orjson.dumps(
        {
            "kernels": [k.catalog_entry() for k in kernels()],
            "dtypes": list(KERNEL_DTYPES),
            "limits": {
                "max_kernel_devices": settings.max_kernel_devices,
                "max_kernel_elements": settings.max_kernel_elements,
                "max_kernel_seconds": settings.max_kernel_seconds,
                "max_kernel_workers": settings.max_kernel_workers,
                "max_kernel_queue": settings.max_kernel_queue,
                "max_worker_memory": settings.worker_memory(),
            },
        }
    )


@router.get("/api/kernels", response_model=KernelCatalogResponse, responses=responses(400, 500, **_MEANING))
async def kernel_catalog(pool: PoolDep, settings: SettingsDep) -> Response:
    """The catalog: each kernel's doc, source, default inputs, mesh and parameters.

    Asking for it also starts the workers, so they are warm by the time the page's first run arrives.
    """
    pool.warm()
    return OrjsonResponse(_catalog(tuple(k.name for k in kernels()), settings))


def plan_request(body: KernelRunRequest, settings: Settings) -> KernelPlan:
    device_set(settings, body.devices, body.slices, body.chips_per_host)  # the server's max_devices
    inputs = [RunInput(tuple(i.shape), i.spec, i.dtype) for i in body.inputs] if body.inputs is not None else None
    return plan_run(
        body.kernel,
        body.devices,
        body.mesh.to_spec(),
        inputs,
        body.out_specs,
        body.params,
        slices=body.slices,
        chips_per_host=body.chips_per_host,
        max_devices=settings.max_kernel_devices,
        max_elements=settings.max_kernel_elements,
        max_bytes=settings.worker_memory(),
        data=body.data,
    )


def _busy(e: Busy) -> ApiError:
    return ApiError(
        429,
        BUSY,
        f"every kernel worker is busy and the queue is full ({e.in_flight} runs in flight, at most {e.limit}: "
        "settings max_kernel_workers + max_kernel_queue)",
        hint=f"try again in {e.retry_after} s",
        headers={"Retry-After": str(e.retry_after)},
        retry_after=e.retry_after,
        limit=e.limit,
    )


async def _submit(pool: WorkerPool, body: KernelRunRequest, settings: Settings) -> Job:
    # Planning computes layouts on the simulated devices (JAX work): off the event loop.
    plan = await run_in_threadpool(plan_request, body, settings)
    return submit_plan(pool, plan)


def submit_plan(pool: WorkerPool, plan: KernelPlan) -> Job:
    """Hands a checked run to the worker pool (its cache, queue and limits); 429 when it is full."""
    try:
        return pool.submit(plan)
    except Busy as e:
        raise _busy(e) from None


async def finished(job: Job) -> bytes:
    """Waits for a run and answers its response bytes (``{"cached", ...the run}``), or raises its failure."""
    await asyncio.wrap_future(job.future)
    if job.result is None:
        raise _failure(job)
    return job.response_bytes()


def _failure(job: Job) -> ApiError:
    failure = dict(job.failure or {"code": "kernel_error", "message": "the run failed"})
    code = str(failure.pop("code"))
    message = str(failure.pop("message", ""))
    hint = failure.pop("hint", None)
    return ApiError(KERNEL_ERROR_STATUS, code, message, hint, **failure)


RUN_ERRORS = responses(400, 401, 403, 413, 415, 422, 429, 500, **_MEANING)


@router.post(RUN_PATH, response_model=KernelRunResponse, responses=RUN_ERRORS)
async def run_kernel(body: KernelRunRequest, pool: PoolDep, settings: SettingsDep) -> Response:
    """Runs a kernel and answers when it is done: output layouts, collectives, memory, cost, errors, HLO."""
    job = await _submit(pool, body, settings)
    return Response(await finished(job), media_type="application/json")


@router.post(JOBS_PATH, status_code=202, response_model=KernelJobCreated, responses=RUN_ERRORS)
async def start_job(body: KernelRunRequest, pool: PoolDep, settings: SettingsDep) -> Response:
    """Starts a run and answers at once; poll the job's url for its state and result."""
    job = await _submit(pool, body, settings)
    return OrjsonResponse({"id": job.id, "state": job.state, "url": f"/api/kernels/jobs/{job.id}"}, status_code=202)


@router.get(
    "/api/kernels/jobs/{job_id}", response_model=KernelJobResponse, responses=responses(400, 404, 422, 500, **_MEANING)
)
async def job_status(job_id: str, pool: PoolDep) -> Response:
    """A job's state (queued, compiling, running, done, error) and, once done, its result or failure."""
    job = pool.get(job_id)
    if job is None:
        raise ApiError(404, NOT_FOUND, "no such kernel job", hint="jobs are kept in memory; start the run again")
    state, result, failure, ahead = pool.status(job)
    assert isinstance(job.task, KernelPlan)
    head = {
        "id": job.id,
        "kernel": job.task.kernel.name,
        "state": state,
        "queued_ahead": ahead,
        "elapsed_ms": job.elapsed_ms,
        "peak_memory_bytes": job.peak_memory,
        "failure": failure,
    }
    # The result is already encoded (and cached) bytes: splice it in rather than decode and re-encode.
    body = orjson.dumps(head)
    return Response(body[:-1] + b',"result":' + (result or b"null") + b"}", media_type="application/json")
