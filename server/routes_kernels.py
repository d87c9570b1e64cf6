"""The kernel lab's API: the catalog, synchronous runs, and jobs whose state the page polls.

``POST /api/kernels/run`` answers when the run is done (the contract); ``POST /api/kernels/jobs``
answers at once with a job id and ``GET /api/kernels/jobs/{id}`` reports queued / compiling /
running / done / error, which is what the page shows while it waits. Both validate on the
simulated devices first (``plan_run``: a 422 before any worker is involved), then go through the
same pool, cache and limits (:mod:`server.kernels`). Routes are ``async``: waiting for a worker
holds no thread.
"""

from __future__ import annotations

import asyncio
import functools
from typing import Annotated, Any

import orjson
from fastapi import APIRouter, Depends, Request
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from server.errors import ApiError, error_response
from server.jsonio import OrjsonResponse, OrjsonRoute
from server.kernels import BUSY, Busy, Job, KernelPool
from server.models import (
    ErrorResponse,
    KernelCatalogResponse,
    KernelJobCreated,
    KernelJobResponse,
    KernelRunRequest,
    KernelRunResponse,
)
from server.settings import MAX_KERNEL_DEVICES, MAX_KERNEL_ELEMENTS
from sharding_core.errors import NOT_FOUND
from sharding_core.kernels.catalog import KERNEL_DTYPES, kernels
from sharding_core.kernels.plan import KernelPlan, RunInput, plan_run

KERNEL_ERROR_STATUS = 422

_DESCRIPTIONS = {
    400: "Malformed request: invalid JSON, or a Host header this server does not answer to (bad_host)",
    403: "A cross-site request that would change state (cross_site_request)",
    404: "No such job (not_found): unknown, or forgotten (setting max_kernel_jobs)",
    413: "Request body over its limit (too_large)",
    415: "A body that is not application/json (unsupported_media_type)",
    422: "Input refused before or during the run: validation_error, unknown_kernel, unavailable, bad_inputs, "
    "the layout codes (parse_error, unknown_axis, indivisible, ...), too_large, kernel_error (JAX refused the "
    "kernel: its message and what to change), timeout (setting max_kernel_seconds), worker_crashed",
    429: "Every worker is busy and the queue is full (busy); the Retry-After header says when to try again",
    500: "A bug; the body has the same shape and no traceback (internal_error)",
}


def _errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    return {s: {"model": ErrorResponse, "description": _DESCRIPTIONS[s]} for s in statuses}


router = APIRouter(route_class=OrjsonRoute, default_response_class=OrjsonResponse, tags=["kernels"])


def get_pool(request: Request) -> KernelPool:
    pool: KernelPool = request.app.state.kernels
    return pool


PoolDep = Annotated[KernelPool, Depends(get_pool)]


@functools.lru_cache(maxsize=8)
def _catalog(names: tuple[str, ...], timeout_s: float, workers: int, queue: int) -> bytes:
    # Keyed by the kernels' names too: tests register and unregister hook kernels.
    return orjson.dumps(
        {
            "kernels": [k.catalog_entry() for k in kernels()],
            "dtypes": list(KERNEL_DTYPES),
            "limits": {
                "max_kernel_devices": MAX_KERNEL_DEVICES,
                "max_kernel_elements": MAX_KERNEL_ELEMENTS,
                "max_kernel_seconds": int(timeout_s),
                "max_kernel_workers": workers,
                "max_kernel_queue": queue,
            },
        }
    )


@router.get("/api/kernels", response_model=KernelCatalogResponse, responses=_errors(400, 500))
async def kernel_catalog(pool: PoolDep) -> Response:
    """The catalog: each kernel's doc, source, default inputs, mesh and parameters.

    Asking for it also starts the workers, so they are warm by the time the page's first run arrives.
    """
    pool.warm()
    names = tuple(k.name for k in kernels())
    return OrjsonResponse(_catalog(names, pool.timeout_s, pool.workers, pool.queue_limit))


def _plan(body: KernelRunRequest) -> KernelPlan:
    mesh_spec = body.mesh.to_spec()
    inputs = [RunInput(tuple(i.shape), i.spec, i.dtype) for i in body.inputs] if body.inputs is not None else None
    return plan_run(
        body.kernel,
        body.devices,
        mesh_spec,
        inputs,
        body.out_specs,
        body.params,
        slices=body.slices,
        chips_per_host=body.chips_per_host,
    )


def _busy(e: Busy) -> Response:
    return error_response(
        429,
        BUSY,
        f"every kernel worker is busy and the queue is full ({e.in_flight} runs in flight, at most {e.limit}: "
        "settings max_kernel_workers + max_kernel_queue)",
        hint=f"try again in {e.retry_after} s",
        headers={"Retry-After": str(e.retry_after)},
        details={"retry_after": e.retry_after, "limit": e.limit},
    )


async def _submit(pool: KernelPool, body: KernelRunRequest) -> Job | Response:
    # Planning computes layouts on the simulated devices (JAX work): off the event loop.
    plan = await run_in_threadpool(_plan, body)
    try:
        return pool.submit(plan)
    except Busy as e:
        return _busy(e)


def _failure(job: Job) -> ApiError:
    failure = dict(job.failure or {"code": "kernel_error", "message": "the run failed"})
    code = str(failure.pop("code"))
    message = str(failure.pop("message", ""))
    hint = failure.pop("hint", None)
    return ApiError(KERNEL_ERROR_STATUS, code, message, hint, **failure)


RUN_ERRORS = _errors(400, 403, 413, 415, 422, 429, 500)


@router.post("/api/kernels/run", response_model=KernelRunResponse, responses=RUN_ERRORS)
async def run_kernel(body: KernelRunRequest, pool: PoolDep) -> Response:
    """Runs a kernel and answers when it is done: output layouts, collectives, memory, cost, errors, HLO."""
    job = await _submit(pool, body)
    if isinstance(job, Response):
        return job
    await asyncio.wrap_future(job.future)
    if job.result is None:
        raise _failure(job)
    return Response(job.response_bytes(), media_type="application/json")


@router.post("/api/kernels/jobs", status_code=202, response_model=KernelJobCreated, responses=RUN_ERRORS)
async def start_job(body: KernelRunRequest, pool: PoolDep) -> Response:
    """Starts a run and answers at once; poll the job's url for its state and result."""
    job = await _submit(pool, body)
    if isinstance(job, Response):
        return job
    return OrjsonResponse({"id": job.id, "state": job.state, "url": f"/api/kernels/jobs/{job.id}"}, status_code=202)


@router.get("/api/kernels/jobs/{job_id}", response_model=KernelJobResponse, responses=_errors(400, 404, 422, 500))
async def job_status(job_id: str, pool: PoolDep) -> Response:
    """A job's state (queued, compiling, running, done, error) and, once done, its result or failure."""
    job = pool.get(job_id)
    if job is None:
        raise ApiError(404, NOT_FOUND, "no such kernel job", hint="jobs are kept in memory; start the run again")
    state, result, failure, ahead = pool.status(job)
    head = {
        "id": job.id,
        "kernel": job.key.kernel,
        "state": state,
        "queued_ahead": ahead,
        "elapsed_ms": job.elapsed_ms,
        "failure": failure,
    }
    # The result is already encoded (and cached) bytes: splice it in rather than decode and re-encode.
    body = orjson.dumps(head)
    return Response(body[:-1] + b',"result":' + (result or b"null") + b"}", media_type="application/json")
