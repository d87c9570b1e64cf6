"""What routes share: the app's store, settings and services as dependencies, and the documented error
statuses of ``/openapi.json`` (one table; a feature adds what its statuses mean for it)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends, Request

from server.api.schema import ErrorResponse
from server.auth import Sessions
from server.quota import WriteQuota, client_key
from server.services.kernels import KernelRuns
from server.services.snapshots import SnapshotRepository
from server.settings import Settings
from server.store import Store

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
    500: "A bug (internal_error), or a stored record found damaged (stored_record_damaged, naming the record and "
    "the command that deletes it); the body has the same shape and no traceback",
    503: "The store does not answer or is too busy (store_unavailable, with Retry-After), or is damaged "
    "(store_corrupt)",
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


KERNEL_MEANING = {
    "s404": "No such job (not_found): unknown, or forgotten (setting max_kernel_jobs)",
    "s422": "Input refused before or during the run: validation_error, unknown_kernel, unavailable, bad_inputs, "
    "the layout codes (parse_error, unknown_axis, indivisible, ...; a refusal of one input names it: input, "
    "input_name and field), too_large, kernel_error (JAX refused the kernel: its message and what to change), "
    "timeout (setting max_kernel_seconds), worker_crashed",
}
"""What the kernel lab's statuses mean (kernel runs, jobs, and the reshards and comparisons that start runs)."""
RUN_ERRORS = responses(400, 401, 403, 413, 415, 422, 429, 500, **KERNEL_MEANING)

STORE_ERRORS: dict[int | str, dict[str, Any]] = {
    429: {
        "model": ErrorResponse,
        "description": "This client address has written its share for now (quota_exceeded, setting "
        "max_client_store_bytes_per_hour); Retry-After says when it may again",
    },
    503: {
        "model": ErrorResponse,
        "description": "The store cannot be written right now: it does not answer, or not within max_db_wait_ms "
        "(store_unavailable, with Retry-After), or it is damaged (store_corrupt)",
    },
    507: {
        "model": ErrorResponse,
        "description": "The store is at its byte budget (setting max_store_bytes) or its disk is full "
        "(insufficient_storage); nothing was stored",
    },
}
"""What a route that writes to the store adds to its documented errors (server/store.py)."""


def _state(name: str) -> Any:
    """A dependency that gives the app's ``app.state.<name>`` (made once by server.app.create_app). Async, so it
    runs on the event loop: a sync one takes a worker thread, and with every thread waiting on a slow database
    even ``/api/health`` waited for one (issue 29)."""

    async def get(request: Request) -> Any:
        return getattr(request.app.state, name)

    return Depends(get)


StoreDep = Annotated[Store, _state("store")]
SettingsDep = Annotated[Settings, _state("settings")]
SnapshotsDep = Annotated[SnapshotRepository, _state("snapshots")]
RunsDep = Annotated[KernelRuns, _state("runs")]
SessionsDep = Annotated[Sessions, _state("sessions")]
QuotaDep = Annotated[WriteQuota, _state("quota")]


def client_of(request: Request) -> str:
    """Who sent ``request``, for per-client quotas (:func:`server.quota.client_key`)."""
    return client_key(request.client.host if request.client is not None else None)
