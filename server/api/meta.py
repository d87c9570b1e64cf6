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
    status: Literal["ok", "degraded"] = Field(
        description="ok: the server and its store answer; degraded: the server answers (HTTP 200 all the same: "
        "it is alive, and what needs no database works) but its store does not, or not fully (store says how)"
    )
    jax_version: str
    store: Literal["ok", "read_only", "corrupt", "unavailable"] = Field(
        description="ok; unavailable while the database does not answer (reads and writes get 503 store_unavailable "
        "with Retry-After at once, until a look every 0.5 s finds it back); read_only when it cannot be written now "
        "(a refused write, a read-only file or mount, a PostgreSQL that stopped taking writes: writes get 503 "
        "store_unavailable); corrupt once the database found its data damaged or a table missing (writes get 503 "
        "store_corrupt)"
    )
    store_kind: Literal["sqlite", "postgresql"] = Field(description="Which store this server uses (--db)")
    store_problem: str | None = Field(
        description="What is wrong with the store, in a few words (no address: the server's log names it); null "
        "when store is ok"
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
    """The server answers (``status``), its JAX, and its store's state (``store``, ``store_kind``,
    ``store_problem``). Always 200 while the server answers: an orchestrator restarting replicas because their
    shared database is down would only add restarts to the outage; a load balancer that should send traffic
    elsewhere reads ``status``."""
    # async, with an async dependency: nothing here waits (the store's state is what its watch last saw, and two
    # access(2) calls), so no worker thread is needed and a database outage cannot make health wait.
    state = store.state
    return OrjsonResponse(
        {
            "status": "ok" if state == "ok" else "degraded",
            "jax_version": jax.__version__,
            "store": state,
            "store_kind": store.kind,
            "store_problem": store.problem,
        }
    )


@functools.cache
def _platforms() -> bytes:
    return orjson.dumps(platforms_catalog())


@router.get("/api/platforms", response_model=PlatformsResponse, responses=GET_ERRORS)
async def platforms() -> Response:
    """The pickers' catalog: TPU generations and their slices, GPU kinds, the device limits."""
    return OrjsonResponse(_platforms())
