"""Which sharding is cheaper: ``POST /api/compare`` puts two kernel runs, reshards or snapshots side by side,
and ``GET /api/hardware`` lists the hardware figures every estimate reads, with their sources.

A side is a kernel run request (as ``POST /api/kernels/run`` takes it), a reshard request (as ``POST
/api/reshard``) or a snapshot reference (as ``POST /api/snapshots/diff``). Runs go through the kernel lab's
worker pool and cache (so a compare starts work: with ``--token`` it needs the token); the comparison itself
is :func:`sharding_core.cost.compare.compare`.
"""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
from fastapi import APIRouter
from pydantic import Field
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from server.api.deps import RunsDep, SnapshotsDep, responses
from server.api.schema import (
    Communication,
    HbmFit,
    KernelRunRequest,
    Reply,
    Request,
    ReshardRequest,
    Roofline,
    SnapshotRef,
)
from server.errors import ApiError
from server.jsonio import OrjsonResponse, OrjsonRoute
from server.pool import Job
from server.services.kernels import KernelRuns
from server.services.snapshots import SnapshotRepository
from sharding_core.cost.compare import compare, kernel_summary, snapshot_summary
from sharding_core.hardware import table_json
from sharding_core.kernels.plan import KernelPlan

COMPARE_PATH = "/api/compare"
HARDWARE_PATH = "/api/hardware"
BAD_COMPARE = "bad_compare"

router = APIRouter(route_class=OrjsonRoute, default_response_class=OrjsonResponse, tags=["cost"])


class CompareSide(Request):
    """One side: exactly one of ``kernel``, ``reshard`` or ``snapshot``."""

    label: str | None = Field(None, max_length=128, description="What to call it (default A / B)")
    kernel: KernelRunRequest | None = Field(None, description="A kernel run, as POST /api/kernels/run takes it")
    reshard: ReshardRequest | None = Field(None, description="A reshard, as POST /api/reshard takes it")
    snapshot: SnapshotRef | None = Field(None, description="A stored snapshot or run, as /api/snapshots/diff takes it")


class CompareRequest(Request):
    a: CompareSide
    b: CompareSide


class CompareCollective(Reply):
    op: str | None
    name: str | None
    source: str | None = Field(None, description="The op of the program it came from (jit(f)/dot_general)")
    shape: str | None
    bytes: int | None
    axes_text: str | None
    groups: str = Field(description="How many groups of how many devices (or source → target pairs)")
    fabric: str | None
    repeat: int = Field(1, description="Runs per program run (loops counted); seconds are per run")
    seconds: float | None = Field(description="Its estimate, the bound (null: none, see why)")
    expected_seconds: float | None = Field(None, description="Its expected time (fitted efficiencies)")
    formula: str | None
    why: str | None


class CompareSummary(Reply):
    label: str
    kind: str = Field(description="kernel (a kernel run or a reshard) or snapshot")
    title: str
    program: str = Field(description="Which compiled program the costs are of")
    mesh: str
    specs: list[str | None] = Field(description="The run's input specs then output specs")
    collectives: list[CompareCollective]
    communication: Communication
    roofline: Roofline | None
    hbm: HbmFit | None
    lower_bound_seconds: float | None


class CompareRow(Reply):
    op: str | None
    axes_text: str | None
    a: CompareCollective | None
    b: CompareCollective | None
    delta_seconds: float | None = Field(description="B − A (estimates)")
    delta_bytes: float | None = Field(description="B − A")


class CompareVerdict(Reply):
    cheaper: str | None = Field(description="a, b, or null: about the same")
    by: str = Field(description="The measure: lower bound on run time, communication estimate, or bytes moved")
    a: float
    b: float
    ratio: float | None
    text: str
    notes: list[str]


class CompareResponse(Reply):
    a: CompareSummary
    b: CompareSummary
    collectives: list[CompareRow] = Field(description="The two sides' collectives matched up")
    verdict: CompareVerdict
    note: str


async def _prepare(
    side: CompareSide, default: str, runs: KernelRuns, snapshots: SnapshotRepository
) -> tuple[str, KernelPlan | dict[str, Any]]:
    """A side's label and its checked run plan, or its snapshot's summary (nothing is started yet)."""
    chosen = [k for k in ("kernel", "reshard", "snapshot") if getattr(side, k) is not None]
    if len(chosen) != 1:
        raise ApiError(
            422,
            BAD_COMPARE,
            f"side {default} must give exactly one of kernel, reshard or snapshot; got {', '.join(chosen) or 'none'}",
            hint='e.g. {"kernel": {"kernel": "sum_axis0", "devices": "tpu:v5e:2x4", "mesh": {...}}}',
        )
    label = side.label or default
    if side.snapshot is not None:
        ref = side.snapshot
        return label, await run_in_threadpool(lambda: snapshot_summary(snapshots.load(ref), label))
    if side.kernel is not None:
        return label, await run_in_threadpool(runs.plan_kernel, side.kernel)
    assert side.reshard is not None
    return label, await run_in_threadpool(runs.plan_reshard, side.reshard)


COMPARE_ERRORS = responses(
    400,
    401,
    403,
    404,
    413,
    415,
    422,
    429,
    500,
    s404="No such snapshot or run (not_found)",
    s422="bad_compare (a side must give exactly one of kernel, reshard or snapshot), and every refusal of a kernel run "
    "or a reshard: validation_error, unknown_kernel, the layout codes, too_large, kernel_error, timeout, ...",
)


@router.post(COMPARE_PATH, response_model=CompareResponse, responses=COMPARE_ERRORS)
async def compare_route(body: CompareRequest, runs: RunsDep, snapshots: SnapshotsDep) -> Response:
    """Two runs, reshards or snapshots side by side: collectives matched up, bytes, estimates, memory,
    roofline, and a verdict (every time an estimate on public hardware figures)."""
    label_a, a = await _prepare(body.a, "A", runs, snapshots)
    label_b, b = await _prepare(body.b, "B", runs, snapshots)
    # Both sides' runs are queued together or not at all: a 429 leaves nothing running for this compare.
    plans = [p for p in (a, b) if isinstance(p, KernelPlan)]
    await runs.share(*plans)  # what another replica computed is served from the store
    jobs = runs.submit(*plans)
    pending = iter(jobs)

    async def summary(label: str, prepared: KernelPlan | dict[str, Any], job: Job | None) -> dict[str, Any]:
        if job is None:
            assert isinstance(prepared, dict)
            return prepared
        raw = await runs.result(job)
        return await run_in_threadpool(lambda: kernel_summary(orjson.loads(raw), label))  # megabytes: off the loop

    try:
        sa, sb = await asyncio.gather(
            summary(label_a, a, next(pending) if isinstance(a, KernelPlan) else None),
            summary(label_b, b, next(pending) if isinstance(b, KernelPlan) else None),
        )
    except BaseException:
        runs.withdraw(jobs)  # one side failed: the other, if still queued for this compare alone, never runs
        raise
    return OrjsonResponse(compare(sa, sb))


@router.get(HARDWARE_PATH, responses=responses(400, 500))
async def hardware() -> Response:
    """The hardware table: per TPU generation and GPU kind, every figure with its unit, source and note."""
    return OrjsonResponse(table_json())
