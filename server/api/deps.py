"""What routes share: the app's store, settings and worker pool as dependencies, and the documented error
statuses of ``/openapi.json`` (one table; a feature adds what its statuses mean for it)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any

from fastapi import Depends, Request

from server.api.schema import ErrorResponse
from server.pool import WorkerPool
from server.settings import Settings
from server.store import Store
from sharding_core.devices import DeviceSet, parse_devices
from sharding_core.errors import TOO_LARGE, ShardingError

DESCRIPTIONS: dict[int, str] = {
    400: "Malformed request: invalid JSON, or a Host header this server does not answer to (bad_host)",
    401: "The server was started with --token and the request has no Authorization: Bearer header (unauthorized)",
    403: "A cross-site request that would change state (cross_site_request), or a token that is not the "
    "server's (bad_token)",
    404: "Unknown or malformed id (not_found)",
    409: "A conflicting write (run_conflict)",
    413: "Request body or payload over its limit (too_large)",
    415: "A body that is not application/json (unsupported_media_type)",
    422: "Input the request model or the domain refuses: validation_error, parse_error (with column), "
    "unknown_axis, duplicate_axis, rank_mismatch, indivisible, too_large, bad_devices, bad_mesh, ...",
    429: "Every worker is busy and the queue is full (busy); the Retry-After header says when to try again",
    500: "A bug; the body has the same shape and no traceback (internal_error)",
}


def responses(*statuses: int, **meaning: str) -> dict[int | str, dict[str, Any]]:
    """The ``responses=`` of a route: each status with the common error body; ``meaning`` (keys
    ``s404``, ``s422``, ...) says what a status means for this route when it says more than the table."""
    return {s: {"model": ErrorResponse, "description": meaning.get(f"s{s}", DESCRIPTIONS[s])} for s in statuses}


GET_ERRORS = responses(400, 500)
QUERY_ERRORS = responses(400, 422, 500)
POST_ERRORS = responses(400, 403, 413, 415, 422, 500)
WRITE_ERRORS = responses(400, 401, 403, 413, 415, 422, 500)  # writes need the token of `serve --token`
# 422 cannot happen for a plain string path parameter, but FastAPI documents one for any parameter;
# listing it keeps that entry in our error shape.
ID_ERRORS = responses(400, 404, 422, 500)


def get_store(request: Request) -> Store:
    store: Store = request.app.state.store
    return store


def get_settings(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


def get_pool(request: Request) -> WorkerPool:
    pool: WorkerPool = request.app.state.kernels
    return pool


StoreDep = Annotated[Store, Depends(get_store)]
SettingsDep = Annotated[Settings, Depends(get_settings)]
PoolDep = Annotated[WorkerPool, Depends(get_pool)]


def device_set(
    settings: Settings, devices: str, slices: int = 1, chips_per_host: Sequence[int] | None = None
) -> DeviceSet:
    """A request's device set, within the server's ``max_devices`` (which may be lower than the domain's)."""
    devset = parse_devices(devices, slices=slices, chips_per_host=chips_per_host)
    if len(devset) > settings.max_devices:
        raise ShardingError(
            TOO_LARGE,
            f"{devset.key} has {len(devset)} devices; this server allows at most {settings.max_devices} "
            "(setting max_devices)",
            hint="pick a smaller device set",
            limit=settings.max_devices,
        )
    return devset
