"""The server itself: ``/api/health`` (readiness, JAX version) and ``/api/platforms`` (the pickers' catalog)."""

from __future__ import annotations

import functools
from typing import Literal

import jax
import orjson
from fastapi import APIRouter
from pydantic import Field
from starlette.responses import Response

from server.api.deps import GET_ERRORS, StoreDep
from server.api.schema import Reply
from server.jsonio import OrjsonResponse, OrjsonRoute
from sharding_core.devices import platforms_catalog

router = APIRouter(route_class=OrjsonRoute, default_response_class=OrjsonResponse)


class HealthResponse(Reply):
    status: Literal["ok"]
    jax_version: str
    store: Literal["ok", "read_only", "corrupt"] = Field(
        description="ok; read_only when it cannot be written now (a refused write, a read-only file or mount, a "
        "PostgreSQL that stopped taking writes: writes get 503 store_unavailable); corrupt once the database found "
        "its data damaged (writes get 503 store_corrupt)"
    )


class TpuPlatform(Reply):
    name: str
    device_kind: str
    cores_per_chip: int
    dims: int
    topologies: list[str]
    custom_rule: str | None
    max_chips: int
    chips_per_host: list[int]
    chips_per_host_note: str


class GpuPlatform(Reply):
    name: str
    device_kind: str
    memory_gib: int


class CpuPlatform(Reply):
    max_devices: int


class PlatformsResponse(Reply):
    max_devices: int
    max_slices: int
    tpu: list[TpuPlatform]
    gpu: list[GpuPlatform]
    cpu: CpuPlatform


@router.get("/api/health", response_model=HealthResponse, responses=GET_ERRORS)
async def health(store: StoreDep) -> Response:
    """The server answers (``status``), its JAX, and whether its store takes writes (``store``)."""
    # async: nothing here blocks (the store's state is a flag and two access(2) calls), so it skips the
    # threadpool hop and readiness probes stay cheap.
    return OrjsonResponse({"status": "ok", "jax_version": jax.__version__, "store": store.state})


@functools.cache
def _platforms() -> bytes:
    return orjson.dumps(platforms_catalog())


@router.get("/api/platforms", response_model=PlatformsResponse, responses=GET_ERRORS)
async def platforms() -> Response:
    """The pickers' catalog: TPU generations and their slices, GPU kinds, the device limits."""
    return OrjsonResponse(_platforms())
