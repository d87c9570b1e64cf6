"""Kernel runs and reshards: :class:`KernelRuns`, one per app (``app.state.runs``).

Runs go through this server's own worker pool; their jobs and results are shared with every replica of it
through the store (:class:`server.services.jobs.JobBoard`): a job is polled through any replica, and a result
another replica computed is served from the store rather than run again.

A run is checked on the simulated devices first (:func:`sharding_core.kernels.plan.plan_run`, or
:func:`~sharding_core.kernels.reshard.plan_reshard`: a 422 before any worker is involved), then goes
through the worker pool (:mod:`server.pool`: its cache, queue, time and memory limits). Every refusal is
a :class:`~sharding_core.errors.ShardingError` with a code, message, hint and details; a refusal of one
input carries the input's index and name and the field that is wrong (``input``, ``input_name``,
``field``: ``shape``, ``spec`` or ``dtype``), so a page can mark it without asking again.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Sequence
from typing import Any

import orjson
from starlette.concurrency import run_in_threadpool

from server.api.schema import KernelRunRequest, ReshardRequest
from server.errors import ApiError
from server.pool import BUSY, Busy, Job, WorkerPool
from server.services.jobs import JobBoard, with_figures
from server.settings import Settings
from sharding_core.errors import ShardingError
from sharding_core.kernels.catalog import KERNEL_DTYPES, kernels
from sharding_core.kernels.plan import KernelPlan, RunInput, plan_run
from sharding_core.kernels.reshard import plan_reshard

KERNEL_ERROR_STATUS = 422


class KernelRuns:
    """Plans, submits and awaits kernel runs on one worker pool, within one server's settings."""

    def __init__(self, pool: WorkerPool, settings: Settings, board: JobBoard) -> None:
        self.pool = pool
        self.settings = settings
        self.board = board

    # ---- planning (JAX work on the simulated devices: callers run it off the event loop) ----------------

    def plan_kernel(self, body: KernelRunRequest) -> KernelPlan:
        """A kernel run request checked on the simulated devices (422 for anything a worker would refuse)."""
        self.settings.device_set(body.devices, body.slices, body.chips_per_host)  # the server's max_devices
        inputs = [RunInput(tuple(i.shape), i.spec, i.dtype) for i in body.inputs] if body.inputs is not None else None
        return plan_run(
            body.kernel,
            body.devices,
            body.mesh.to_spec(),
            inputs,
            body.out_specs,
            body.params,
            data=body.data,
            why_recompiles=self.settings.max_why_recompiles,
            why_seconds=self.settings.max_why_seconds,
            **self._limits(body.slices, body.chips_per_host, body.compile_only),
        )

    def plan_reshard(self, body: ReshardRequest) -> KernelPlan:
        """A reshard request as the kernel lab's ``reshard`` run, checked on the simulated devices."""
        self.settings.device_set(body.devices, body.slices, body.chips_per_host)
        return plan_reshard(
            body.devices,
            body.mesh.to_spec(),
            body.shape,
            body.dtype,
            body.source,
            body.to,
            **self._limits(body.slices, body.chips_per_host, body.compile_only),
        )

    def _limits(self, slices: int, chips_per_host: Sequence[int] | None, compile_only: bool | None) -> dict[str, Any]:
        """What a plan takes besides the request: the device set's extras, the run's mode and this server's limits."""
        settings = self.settings
        return {
            "slices": slices,
            "chips_per_host": chips_per_host,
            "max_devices": settings.max_kernel_devices,
            "max_elements": settings.max_kernel_elements,
            "max_bytes": settings.worker_memory(),
            "compile_only": compile_only,
            "max_compile_seconds": settings.max_compile_seconds,
        }

    # ---- running ---------------------------------------------------------------------------------------------

    def submit(self, *plans: KernelPlan) -> list[Job]:
        """Hands checked runs to the worker pool, all or none; 429 ``busy`` when they do not fit its queue."""
        try:
            return self.pool.submit_all(plans)
        except Busy as e:
            raise busy(e) from None

    def withdraw(self, jobs: Sequence[Job]) -> None:
        """Gives up waiting for ``jobs``: any still queued that nobody else waits for never runs."""
        for job in jobs:
            self.pool.withdraw(job)

    async def result(self, job: Job) -> bytes:
        """Waits for a run and answers its response bytes (``{"cached", ...the run}`` with today's figures: the pool
        keeps its facts), or raises its failure."""
        await asyncio.wrap_future(job.future)
        if job.result is None:
            raise failure(job.failure)
        return await run_in_threadpool(with_figures, job.response_bytes())  # megabytes: off the loop

    async def share(self, *plans: KernelPlan) -> None:
        """Seeds the pool's cache with what another replica already computed for ``plans`` (from the store)."""
        await run_in_threadpool(self.board.share, plans)

    async def run(self, plan: KernelPlan) -> bytes:
        """Submits one checked run and answers its response bytes."""
        await self.share(plan)
        (job,) = self.submit(plan)
        return await self.result(job)

    async def run_request(self, body: KernelRunRequest) -> bytes:
        plan = await run_in_threadpool(self.plan_kernel, body)
        return await self.run(plan)

    async def start_request(self, body: KernelRunRequest) -> Job:
        """Submits a run as a job, written to the store (so every replica answers for it) before this returns."""
        plan = await run_in_threadpool(self.plan_kernel, body)
        await self.share(plan)
        (job,) = self.submit(plan)
        await self.board.publish_async(job)
        return job

    # ---- jobs and the catalog ---------------------------------------------------------------------------------

    def job_json(self, job_id: str) -> bytes:
        """A job's state (queued, compiling, running, done, error) and, once done, its result or failure, as the
        store has it (whichever replica runs it)."""
        return self.board.job_json(job_id)

    def catalog(self) -> bytes:
        """The catalog: each kernel's doc, source, default inputs, mesh and parameters, and the limits."""
        return _catalog(tuple(k.name for k in kernels()), self.settings)


def busy(e: Busy) -> ApiError:
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


def failure(error: ShardingError | None) -> ApiError:
    """A failed run's error as the 422 it is answered with (a fresh one per request: a cached failure is
    shared by every request that gets it)."""
    if error is None:
        return ApiError(KERNEL_ERROR_STATUS, "kernel_error", "the run failed")
    return ApiError(KERNEL_ERROR_STATUS, error.code, error.message, error.hint, **error.details)


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
                "max_compile_seconds": settings.max_compile_seconds,
                "max_kernel_workers": settings.max_kernel_workers,
                "max_kernel_queue": settings.max_kernel_queue,
                "max_worker_memory": settings.worker_memory(),
            },
        }
    )
