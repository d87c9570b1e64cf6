"""Snapshots published by user programs (``sharding_core.publish``): store, read, merge, diff, what-if.

The server never runs user code: it checks what it is sent (the request model, then
``sharding_core.snapshot.check_snapshot``), stores it, and computes from the stored data. Routes are
plain ``def`` (FastAPI's threadpool): SQLite and the domain's work keep off the event loop.

* ``POST /api/snapshots`` — store a snapshot (one process's part of a run when it names a run);
  answers ``{"id", "url": "/s/<link>", "run"}``. With ``shardscope serve --token`` it needs
  ``Authorization: Bearer <token>`` (:class:`SnapshotToken`).
* ``GET /api/snapshots/{id}`` — the stored snapshot with its id and per-device memory.
* ``GET /api/snapshots/runs/{run_id}`` — the merged picture of a multi-process run.
* ``POST /api/snapshots/diff`` — leaves whose sharding changed between two snapshots, bytes that move.
* ``POST /api/snapshots/whatif`` — every logically named leaf under other logical → mesh rules.
"""

from __future__ import annotations

import functools
import hmac
from typing import Annotated, Any

import orjson
from fastapi import APIRouter, Depends, Request
from starlette.responses import Response

from server.errors import ApiError
from server.jsonio import OrjsonResponse, OrjsonRoute
from server.middleware import ASGIApp, Receive, Scope, Send, header, send_error
from server.models import (
    DiffRequest,
    DiffResponse,
    ErrorResponse,
    Snapshot,
    SnapshotCreated,
    SnapshotRef,
    StoredSnapshot,
    WhatIfRequest,
    WhatIfResponse,
)
from server.store import Store
from sharding_core.errors import NOT_FOUND
from sharding_core.snapshot import RUN_CONFLICT, check_snapshot, diff, enrich, merge_run, whatif

SNAPSHOTS = "snapshots"
LINKS = "links"
SNAPSHOTS_PATH = "/api/snapshots"
VIEW = "snapshots"

_DESCRIPTIONS = {
    400: "Malformed request: invalid JSON, or a Host header this server does not answer to (bad_host)",
    401: "The server was started with --token and the request has no Authorization: Bearer header (unauthorized)",
    403: "A cross-site request (cross_site_request), or a token that is not the server's (bad_token)",
    404: "Unknown or malformed id (not_found)",
    409: "This process already published to this run (run_conflict)",
    413: "Request body over its limit (too_large; max_snapshot_bytes for POST /api/snapshots)",
    415: "A body that is not application/json (unsupported_media_type)",
    422: "Input the request model or the domain refuses: validation_error, bad_snapshot, bad_rules, too_large",
    500: "A bug; the body has the same shape and no traceback (internal_error)",
}


def _errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    return {s: {"model": ErrorResponse, "description": _DESCRIPTIONS[s]} for s in statuses}


router = APIRouter(route_class=OrjsonRoute, default_response_class=OrjsonResponse)


def get_store(request: Request) -> Store:
    store: Store = request.app.state.store
    return store


StoreDep = Annotated[Store, Depends(get_store)]


def _no_such_snapshot() -> ApiError:
    # Like links: unknown and malformed ids get the same answer, and the id is not echoed.
    return ApiError(404, NOT_FOUND, "no such snapshot", hint="check that the whole link was copied")


@router.post(
    SNAPSHOTS_PATH,
    status_code=201,
    response_model=SnapshotCreated,
    responses=_errors(400, 401, 403, 409, 413, 415, 422, 500),
)
def create_snapshot(body: Snapshot, store: StoreDep) -> Response:
    """Stores a snapshot from ``sharding_core.publish`` and a share link to its view.

    A snapshot naming a ``run`` is one process's part of a multi-process run: each process posts its
    own, once, and the link opens the merged run (``GET /api/snapshots/runs/{run_id}``).
    """
    check_snapshot(body)
    payload = orjson.dumps(enrich(dict(body)))
    run = body["run"]
    if run is None:
        snapshot_id = store.put(SNAPSHOTS, payload)
        state: dict[str, Any] = {"snapshot": snapshot_id}
    else:
        part = store.put_run_part(run["id"], run["process_index"], payload)
        if part is None:
            raise ApiError(
                409,
                RUN_CONFLICT,
                f"process {run['process_index']} already published to this run; a run's parts are write-once",
                hint="publish a later state under a new run id (leave run_id out and one is drawn)",
            )
        snapshot_id = part
        state = {"run": run["id"]}
    link_id = store.put(LINKS, orjson.dumps({"view": VIEW, "state": state}))
    return OrjsonResponse(
        {"id": snapshot_id, "url": f"/s/{link_id}", "run": run["id"] if run else None}, status_code=201
    )


@router.get("/api/snapshots/runs/{run_id}", response_model=StoredSnapshot, responses=_errors(400, 404, 422, 500))
def get_run(run_id: str, store: StoreDep) -> Response:
    """The merged picture of a run: every process's leaves, which processes reported and which are
    missing, each device's owning process and, per leaf, the devices whose shards no reporting
    process holds."""
    return OrjsonResponse(_merged(store, run_id))


@router.get("/api/snapshots/{snapshot_id}", response_model=StoredSnapshot, responses=_errors(400, 404, 422, 500))
def get_snapshot(snapshot_id: str, store: StoreDep) -> Response:
    """The stored snapshot, its id and per-device memory."""
    payload = store.get(SNAPSHOTS, snapshot_id)
    if payload is None:
        raise _no_such_snapshot()
    # The stored JSON is an object; splice the id in front rather than decode and re-encode megabytes.
    return OrjsonResponse(b'{"id":' + orjson.dumps(snapshot_id) + b"," + payload[1:])


@router.post("/api/snapshots/diff", response_model=DiffResponse, responses=_errors(400, 403, 404, 413, 415, 422, 500))
def diff_snapshots(body: DiffRequest, store: StoreDep) -> Response:
    """Leaves whose sharding changed from ``a`` to ``b`` (snapshots, or processes of a run), and the
    bytes each device would have to receive."""
    _check_ref(body.a)
    _check_ref(body.b)
    return OrjsonResponse(diff(_load(store, body.a), _load(store, body.b)))


@router.post(
    "/api/snapshots/whatif", response_model=WhatIfResponse, responses=_errors(400, 403, 404, 413, 415, 422, 500)
)
def whatif_route(body: WhatIfRequest, store: StoreDep) -> Response:
    """Every leaf with Flax logical axis names re-laid out under other logical → mesh rules (Flax's
    ``logical_to_mesh_axes`` semantics, JAX's layouts on the snapshot's mesh) and the new memory."""
    return OrjsonResponse(whatif(_load(store, body.ref), body.rules))


def _check_ref(ref: SnapshotRef) -> None:
    snapshot, run, process = ref.get("snapshot"), ref.get("run"), ref.get("process")
    if (snapshot is None) == (run is None) or (process is not None and run is None):
        raise ApiError(
            422,
            "validation_error",
            'a snapshot reference is {"snapshot": id}, {"run": run_id} or {"run": run_id, "process": n}',
        )


def _load(store: Store, ref: SnapshotRef) -> dict[str, Any]:
    _check_ref(ref)
    snapshot, run, process = ref.get("snapshot"), ref.get("run"), ref.get("process")
    if snapshot is not None:
        return _parsed(store, SNAPSHOTS, snapshot)
    assert run is not None
    if process is None:
        return _merged(store, run)
    parts = dict(store.run_parts(run))
    if process not in parts:
        raise _no_such_snapshot()
    return _parsed(store, SNAPSHOTS, parts[process])


def _merged(store: Store, run_id: str) -> dict[str, Any]:
    parts = store.run_parts(run_id)
    if not parts:
        raise _no_such_snapshot()
    return _merge_cached(run_id, tuple(parts), store)


@functools.lru_cache(maxsize=4)
def _merge_cached(run_id: str, parts: tuple[tuple[int, str], ...], store: Store) -> dict[str, Any]:
    # Keyed by the parts' ids: a run that gains a process is merged afresh. Callers only read it.
    return merge_run(run_id, [(p, sid, _parsed(store, SNAPSHOTS, sid)) for p, sid in parts])


def _parsed(store: Store, table: str, record_id: str) -> dict[str, Any]:
    found = _parsed_cached(store, table, record_id)
    if found is None:
        raise _no_such_snapshot()
    return found


@functools.lru_cache(maxsize=8)
def _parsed_cached(store: Store, table: str, record_id: str) -> dict[str, Any] | None:
    # Snapshots are immutable, so a parsed one can be reused (what-if edits re-read the same one).
    payload = store.get(table, record_id)
    if payload is None:
        return None
    parsed: dict[str, Any] = orjson.loads(payload)
    return parsed


class SnapshotToken:
    """Technique: **bearer-token authentication with a constant-time comparison**, for shared servers
    (``shardscope serve --token``). ``POST /api/snapshots`` must carry ``Authorization: Bearer
    <token>``: none gets 401 ``unauthorized`` with ``WWW-Authenticate: Bearer``, another token 403
    ``bad_token``, checked with :func:`hmac.compare_digest` (no timing leak of how much matched) and
    before any of the body is read. Reading snapshots needs their unguessable link, as for links.
    ``token=None`` disables the check (the loopback default).
    """

    def __init__(self, app: ASGIApp, token: str | None, paths: frozenset[str] = frozenset({SNAPSHOTS_PATH})) -> None:
        self.app = app
        self.token = token.encode() if token else None
        self.paths = paths

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            self.token is None
            or scope["type"] != "http"
            or scope.get("method") != "POST"
            or scope.get("path") not in self.paths
        ):
            await self.app(scope, receive, send)
            return
        given = header(scope, b"authorization")
        scheme, _, credentials = (given or "").strip().partition(" ")
        if given is None or scheme.lower() != "bearer" or not credentials.strip():
            await send_error(
                send,
                401,
                "unauthorized",
                "this server takes snapshots only with its token (Authorization: Bearer <token>)",
                hint="publish(..., token=...) or set $SHARDSCOPE_TOKEN to the token of `shardscope serve --token`",
                headers=[(b"www-authenticate", b'Bearer realm="shardscope"')],
            )
            return
        if not hmac.compare_digest(credentials.strip().encode("latin-1"), self.token):
            await send_error(
                send,
                403,
                "bad_token",
                "the token is not this server's",
                hint="use the token `shardscope serve --token` was started with",
            )
            return
        await self.app(scope, receive, send)
