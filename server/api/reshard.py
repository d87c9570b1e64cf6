"""``POST /api/reshard``: the collectives that moving an array from one sharding to another compiles to.

The run is the kernel lab's ``reshard`` kernel (``jax.jit(lambda x: x, out_shardings=NamedSharding(mesh,
to))`` on an input placed with ``from``), checked on the simulated devices first and run through the same
worker pool, cache and limits as kernel runs (so it starts work: with ``--token`` it needs the token);
TPU sets are compiled compile-only for libtpu's topology too. Every collective carries its estimate.
"""

from __future__ import annotations

import orjson
from fastapi import APIRouter
from pydantic import Field
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from server.api.deps import RUN_ERRORS, RunsDep
from server.api.schema import (
    Collective,
    Communication,
    FiguresFrom,
    KernelTiming,
    KernelTpu,
    MeshInfo,
    ProgramReport,
    Reply,
    ReshardRequest,
    Roofline,
)
from server.jsonio import OrjsonResponse, OrjsonRoute
from sharding_core.kernels.reshard import reshard_json

RESHARD_PATH = "/api/reshard"

router = APIRouter(route_class=OrjsonRoute, default_response_class=OrjsonResponse, tags=["cost"])


class ReshardTpu(KernelTpu):
    """The reshard compiled (never run) for libtpu's topology of a tpu: set, or why not: the kernel lab's
    TPU section (without its HLO text); its totals are the answer's headline ``communication``."""


class ReshardResponse(Reply):
    cached: bool = Field(description="Answered from the kernel lab's result cache")
    kernel: str = Field(description="reshard: the catalog kernel that ran")
    devices_key: str
    platform: str
    executed_on: str
    jax_version: str
    mesh: MeshInfo
    shape: list[int]
    dtype: str
    source: str = Field(alias="from", description="The input's spec as JAX reports it")
    to: str = Field(description="The output's spec as JAX reports it")
    from_bytes_per_device: int
    to_bytes_per_device: int
    compile_only: bool = Field(description="Compiled for the device set's hardware only, never run (no max_abs_error)")
    max_abs_error: float | None = Field(
        description="The output against the input (0: moved, not changed; null: compile-only)"
    )
    collectives: list[Collective] = Field(description="One per collective in the compiled HLO, with its estimate")
    communication: Communication = Field(
        description="The headline program's collectives in total (an estimate): the TPU program's on a tpu: set "
        "compiled for libtpu, else these collectives'"
    )
    roofline: Roofline
    figures_from: FiguresFrom
    program: ProgramReport = Field(description="The compiled program's report (its compiler_log: XLA's warnings)")
    timing: KernelTiming
    tpu: ReshardTpu | None = Field(None, description="tpu: sets: the same move compiled for libtpu's topology")
    gpu: ReshardTpu | None = Field(None, description="gpu: sets: the same move compiled by XLA's GPU compiler")


@router.post(RESHARD_PATH, response_model=ReshardResponse, responses=RUN_ERRORS)
async def reshard(body: ReshardRequest, runs: RunsDep) -> Response:
    """The collectives (with estimates) that moving the array from ``from`` to ``to`` compiles to."""
    plan = await run_in_threadpool(runs.plan_reshard, body)
    raw = await runs.run(plan)
    return OrjsonResponse(await run_in_threadpool(lambda: reshard_json(orjson.loads(raw))))  # off the loop
