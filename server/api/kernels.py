"""The kernel lab's API: the catalog, synchronous runs, and jobs whose state the page polls.

``POST /api/kernels/run`` answers when the run is done (the contract); ``POST /api/kernels/jobs``
answers at once with a job id and ``GET /api/kernels/jobs/{id}`` reports queued / compiling /
running / done / error, which is what the page shows while it waits. Both validate on the
simulated devices first (``plan_run``: a 422 before any worker is involved), then go through the
same worker pool, cache and limits (:class:`server.services.kernels.KernelRuns`). Routes are ``async``:
waiting for a worker holds no thread.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, NotRequired

from fastapi import APIRouter
from pydantic import Field, with_config
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response
from typing_extensions import TypedDict

from server.api.deps import KERNEL_MEANING, RUN_ERRORS, RunsDep, responses
from server.api.schema import (
    CLOSED,
    MAX_FINDINGS,
    MAX_VALUES,
    Collective,
    Communication,
    ErrorDetail,
    FiguresFrom,
    Finding,
    KernelRunRequest,
    KernelTiming,
    KernelTpu,
    Layout,
    MemoryTimeline,
    MeshInfo,
    ProgramReport,
    ProgramValue,
    Reply,
    Roofline,
    vocab,
)
from server.jsonio import OrjsonResponse, OrjsonRoute
from server.pool import JOB_STATES
from sharding_core.kernels.catalog import MODES, PARAM_KINDS
from sharding_core.kernels.plan import MAX_VALUES_SHOWN

if TYPE_CHECKING:
    KernelState = str
    KernelMode = str
    ParamKind = str
else:
    KernelState = vocab(JOB_STATES)
    KernelMode = vocab(MODES)
    ParamKind = vocab(PARAM_KINDS)

RUN_PATH = "/api/kernels/run"
JOBS_PATH = "/api/kernels/jobs"
router = APIRouter(route_class=OrjsonRoute, default_response_class=OrjsonResponse, tags=["kernels"])


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
    max_compile_seconds: int = Field(description="Seconds a compile-only run may take (its compile-time budget)")
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


class EstimateOn(Reply):
    """What a run's figures are for: they are added when the result is read, never stored with it."""

    devices: str = Field(description="The device set's key (with its slices and host block when given)")
    dtype: str = Field(description="The element type whose peak FLOP/s the compute term reads")


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
    program: ProgramReport = Field(
        description="The compiled program's report (sharding_core.program): XLA's memory_analysis fields by their "
        "names, the work with loops counted, the collectives' facts, device assignment, origins, compiler log"
    )
    timing: KernelTiming
    stablehlo: str = Field(description="The lowered StableHLO with its sdy shardings")
    stablehlo_truncated: bool
    hlo: str = Field(description="The compiled (partitioned) HLO")
    hlo_truncated: bool
    origins_note: str = Field(description="What program.origins are (Shardy's sharding origins), or why there are none")
    why_search: dict[str, Any] | None = Field(
        None, description="What the worker's search for fixes of the collectives did (sharding_core.why)"
    )
    roofline: Roofline = Field(
        description="Compute, memory and communication time of the headline program (the TPU compile's on a tpu: "
        "set with libtpu, else the compiled program's) on the device set's hardware, the bound, a lower bound on "
        "run time and HBM fit (estimates; CPU sets say why there are none)"
    )
    figures_from: FiguresFrom
    compile_only: bool = Field(
        description="Compiled for the device set's hardware only, never run: no values, no max_abs_error"
    )
    tpu: KernelTpu | None = Field(
        None, description="tpu: sets with the optional tpu extra: the kernel compiled for libtpu's topology"
    )
    gpu: KernelTpu | None = Field(
        None,
        description="gpu: sets: the kernel compiled by XLA's GPU compiler (the optional gpu extra), or why not "
        "(null for other sets)",
    )
    estimate_on: EstimateOn
    values: list[ProgramValue] | None = Field(
        None,
        max_length=MAX_VALUES,
        description="Every value's sharding in the headline program (sharding_core.program.values), as plans and "
        "captures carry it",
    )
    findings: list[Finding] | None = Field(
        None, max_length=MAX_FINDINGS, description="What to change (sharding_core.findings), with its fix"
    )
    memory_timeline: MemoryTimeline | None = Field(
        None, description="Memory over program order (sharding_core.program.timeline), peak_bytes XLA's"
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


@router.get("/api/kernels", response_model=KernelCatalogResponse, responses=responses(400, 500, **KERNEL_MEANING))
async def kernel_catalog(runs: RunsDep) -> Response:
    """The catalog: each kernel's doc, source, default inputs, mesh and parameters.

    Asking for it also starts the workers, so they are warm by the time the page's first run arrives.
    """
    runs.pool.warm()
    return OrjsonResponse(runs.catalog())


@router.post(RUN_PATH, response_model=KernelRunResponse, responses=RUN_ERRORS)
async def run_kernel(body: KernelRunRequest, runs: RunsDep) -> Response:
    """Runs a kernel and answers when it is done: output layouts, collectives, memory, cost, errors, HLO."""
    return Response(await runs.run_request(body), media_type="application/json")


@router.post(JOBS_PATH, status_code=202, response_model=KernelJobCreated, responses=RUN_ERRORS)
async def start_job(body: KernelRunRequest, runs: RunsDep) -> Response:
    """Starts a run and answers at once; poll the job's url for its state and result."""
    job = await runs.start_request(body)
    return OrjsonResponse({"id": job.id, "state": job.state, "url": f"/api/kernels/jobs/{job.id}"}, status_code=202)


@router.get(
    "/api/kernels/jobs/{job_id}",
    response_model=KernelJobResponse,
    responses=responses(400, 404, 422, 500, **KERNEL_MEANING),
)
async def job_status(job_id: str, runs: RunsDep) -> Response:
    """A job's state (queued, compiling, running, done, error) and, once done, its result or failure."""
    return Response(await run_in_threadpool(runs.job_json, job_id), media_type="application/json")
