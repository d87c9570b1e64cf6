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

from server.api.deps import PoolDep, SettingsDep, device_set
from server.api.kernels import (
    RUN_ERRORS,
    KernelDType,
    KernelMemory,
    KernelTiming,
    KernelTpu,
    finished,
    submit_plan,
)
from server.api.schema import (
    ArrayDim,
    ChipsPerHost,
    Collective,
    Communication,
    DevicesText,
    MeshInfo,
    MeshRequest,
    Reply,
    Request,
    Roofline,
    Slices,
    SpecText,
)
from server.jsonio import OrjsonResponse, OrjsonRoute
from server.settings import Settings
from sharding_core.kernels.plan import KernelPlan
from sharding_core.kernels.reshard import plan_reshard, reshard_json
from sharding_core.layout import MAX_RANK

RESHARD_PATH = "/api/reshard"

router = APIRouter(route_class=OrjsonRoute, default_response_class=OrjsonResponse, tags=["cost"])


class ReshardRequest(Request):
    devices: DevicesText
    mesh: MeshRequest
    shape: list[ArrayDim] = Field(max_length=MAX_RANK, description="The array's shape")
    dtype: KernelDType = "float32"
    source: SpecText = Field(alias="from", description="The sharding the array has, e.g. P('x', None)")
    to: SpecText = Field(description="The sharding to move it to, e.g. P(None, 'y')")
    slices: Slices = 1
    chips_per_host: ChipsPerHost = None


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
    max_abs_error: float | None = Field(description="The output against the input (0: moved, not changed)")
    collectives: list[Collective] = Field(description="One per collective in the compiled HLO, with its estimate")
    communication: Communication = Field(
        description="The headline program's collectives in total (an estimate): the TPU program's on a tpu: set "
        "compiled for libtpu, else these collectives'"
    )
    roofline: Roofline
    memory: KernelMemory
    timing: KernelTiming
    compiler_log: list[str] = Field(description="XLA's warnings, e.g. involuntary full rematerialization")
    tpu: ReshardTpu | None = Field(None, description="tpu: sets: the same move compiled for libtpu's topology")


def plan_reshard_request(body: ReshardRequest, settings: Settings) -> KernelPlan:
    device_set(settings, body.devices, body.slices, body.chips_per_host)  # the server's max_devices
    return plan_reshard(
        body.devices,
        body.mesh.to_spec(),
        body.shape,
        body.dtype,
        body.source,
        body.to,
        slices=body.slices,
        chips_per_host=body.chips_per_host,
        max_devices=settings.max_kernel_devices,
        max_elements=settings.max_kernel_elements,
        max_bytes=settings.worker_memory(),
    )


@router.post(RESHARD_PATH, response_model=ReshardResponse, responses=RUN_ERRORS)
async def reshard(body: ReshardRequest, pool: PoolDep, settings: SettingsDep) -> Response:
    """The collectives (with estimates) that moving the array from ``from`` to ``to`` compiles to."""
    plan = await run_in_threadpool(plan_reshard_request, body, settings)
    raw = await finished(submit_plan(pool, plan))
    return OrjsonResponse(await run_in_threadpool(lambda: reshard_json(orjson.loads(raw))))  # off the loop
