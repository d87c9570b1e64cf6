"""The FastAPI application behind ``shardscope serve``: the feature routers, the store, the worker pool,
the middleware stack and the static dashboard, configured by one :class:`~server.settings.Settings`."""

from __future__ import annotations

import gc
import os
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from importlib.metadata import version
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from starlette.exceptions import HTTPException
from starlette.routing import BaseRoute, Match, Mount, Route
from starlette.staticfiles import StaticFiles

from server import docs, vendor
from server.api import compare, cost, kernels, layout, links, meta, reshard, session, snapshots, topology
from server.api.compare import COMPARE_PATH
from server.api.kernels import JOBS_PATH, RUN_PATH
from server.api.links import LINKS_PATH
from server.api.reshard import RESHARD_PATH
from server.api.snapshots import SNAPSHOTS_PATH
from server.auth import TOKEN_HINT, Sessions, token_problem
from server.errors import EXCEPTION_HANDLERS
from server.http import ConnectionGuard
from server.jsonio import OrjsonResponse
from server.middleware import (
    LOOPBACK_HOSTS,
    BodyLimit,
    CatchAll,
    ChunkedSend,
    ConcurrencyLimit,
    CrossSiteCheck,
    HostCheck,
    JsonOnly,
    Receive,
    Scope,
    SecurityHeaders,
    Send,
    TokenCheck,
    is_loopback,
)
from server.pool import WorkerPool
from server.quota import WriteQuota
from server.services.jobs import JobBoard
from server.services.kernels import KernelRuns
from server.services.snapshots import SnapshotRepository
from server.settings import Settings
from server.store import Store, open_store
from sharding_core import cache
from sharding_core.errors import ShardingError
from sharding_core.kernels import worker
from shardscope.assets import frontend_dir

Extra = Callable[[], AbstractAsyncContextManager[None]]
"""An extra route's lifespan: entered when the app starts, left when it stops."""

FRONTEND_DIR = frontend_dir()
"""The static dashboard (no build step), served at ``/``."""

_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")

ROUTERS = (
    meta.router,
    layout.router,
    topology.router,
    links.router,
    snapshots.router,
    kernels.router,
    reshard.router,
    compare.router,
    cost.router,
    session.router,
)
"""Every feature's router, in the order the app includes them."""

WRITE_PATHS = (LINKS_PATH, SNAPSHOTS_PATH, RUN_PATH, JOBS_PATH, RESHARD_PATH, COMPARE_PATH)
"""The POSTs that store something or start work: with ``--token`` they need it; every read stays open."""


class FrontendFiles:
    """The catch-all mount at ``/``: static files from the frontend directory, and the 404/405 answers
    for API paths no route took.

    Files are served by Starlette's ``StaticFiles``, which resolves every path and refuses anything
    outside the directory (``..``, encoded ``%2e%2e``, symlinks out), answering 404.
    """

    def __init__(self, directory: Path, routes: Sequence[BaseRoute]) -> None:
        self.files = StaticFiles(directory=directory, html=True)
        self.routes = routes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        # A mount at "/" matches every path fully, so the router never reports "right path, wrong
        # method" for the routes it tried first; look for that here, probing each method through
        # the public ``matches`` (which works for plain routes and included routers alike).
        allowed = [
            method
            for method in _METHODS
            if any(
                not isinstance(route, Mount) and route.matches({**scope, "method": method})[0] is Match.FULL
                for route in self.routes
            )
        ]
        if allowed:
            raise HTTPException(405, headers={"Allow": ", ".join(allowed)})
        if path == "/api" or path.startswith("/api/"):
            raise HTTPException(404)
        await self.files(scope, receive, send)


def create_app(
    db_path: str | os.PathLike[str] | None,
    bind_host: str = "127.0.0.1",
    *,
    frontend_dir: str | os.PathLike[str] | None = None,
    allowed_hosts: Iterable[str] | None = None,
    token: str | None = None,
    settings: Settings | None = None,
    kernel_pool: WorkerPool | None = None,
    extra_routes: Sequence[tuple[Route, Extra | None]] = (),
) -> FastAPI:
    """The dashboard app.

    ``db_path``: the store, ``--db``: a SQLite file (None: ``links.db`` in the user data directory) or a
    ``postgresql://`` URL that replicas share (:func:`server.store.open_store`).
    ``bind_host``: where the server listens; on a loopback address the ``Host`` header must be a
    loopback name (DNS-rebinding defence). ``allowed_hosts`` replaces that list (e.g. a reverse
    proxy's name); on a non-loopback bind without it, any Host is accepted. ``token``: when set,
    every write (:data:`WRITE_PATHS`: share links, kernel runs, snapshots) needs it, as a bearer
    header or the cookie that opening a page at ``?token=`` sets.
    ``settings``: the limits (default: every setting's default; ``shardscope serve --setting``).
    ``kernel_pool``: the kernel lab's worker processes (default: a pool with the settings' limits);
    its workers start on first use and stop with the app.
    ``extra_routes``: routes to answer before the front end's catch-all, each with the lifespan it needs
    (``shardscope serve --mcp`` adds the Model Context Protocol's ``/mcp``: :func:`shardscope.mcp.http.route`).
    """
    settings = settings if settings is not None else Settings()
    problem = token_problem(token)
    if problem is not None:
        raise ShardingError("bad_token", problem, hint=TOKEN_HINT)
    cache.configure(settings.max_cache_bytes)
    store = open_store(
        db_path,
        max_bytes=settings.max_store_bytes,
        max_days={"links": settings.max_link_days, "snapshots": settings.max_snapshot_days},
        max_connections=settings.max_db_connections,
    )
    kernels = kernel_pool if kernel_pool is not None else kernel_worker_pool(settings)
    jobs = JobBoard(store, kernels, settings)
    frontend = Path(frontend_dir) if frontend_dir is not None else FRONTEND_DIR

    app = FastAPI(
        title="Shardscope",
        version=version("shardscope"),  # pyproject's, from the installed package's metadata
        summary="See how JAX arrays are sharded across devices: layouts, meshes, topology, share links.",
        description='Every 4xx and 5xx has the body `{"error": {"code", "message", "hint"?, ...}}`.',
        docs_url=None,  # our own /docs (server.docs): FastAPI's uses inline script, which the CSP blocks
        redoc_url=None,
        lifespan=_lifespan(store, kernels, jobs, [life for _, life in extra_routes if life is not None]),
        exception_handlers=EXCEPTION_HANDLERS,
        default_response_class=OrjsonResponse,
    )
    app.state.store = store
    app.state.kernels = kernels
    app.state.settings = settings
    app.state.quota = quota = WriteQuota(settings.max_client_store_bytes_per_hour)
    app.state.snapshots = SnapshotRepository(store, settings, quota)
    app.state.jobs = jobs
    app.state.runs = KernelRuns(kernels, settings, jobs)
    app.state.sessions = Sessions(settings.max_sessions, settings.max_session_seconds)
    # The connection layer's limits and what readers hold (server/http.py): `shardscope serve` gives uvicorn
    # a protocol class on this guard, so what ChunkedSend holds for a reader counts there.
    app.state.connections = ConnectionGuard.from_settings(settings)
    for router in ROUTERS:
        app.include_router(router)
    app.include_router(docs.router)
    app.include_router(vendor.router)
    for route, _ in extra_routes:
        app.router.routes.append(route)  # before the front end's catch-all mount
    app.mount("/", FrontendFiles(frontend, app.router.routes), name="frontend")

    _add_middleware(app, settings, token, _allowed_hosts(allowed_hosts, bind_host))
    return app


def _lifespan(store: Store, kernels: WorkerPool, jobs: JobBoard, extra: Sequence[Extra]) -> Callable[[FastAPI], Any]:
    """What the app opens when it starts and closes when it stops: the store, the worker pool, the job board
    and the extra routes' lifespans."""

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        # The store is already open (so an unwritable path fails here, at start-up, not on the
        # first link); opening again is a no-op, and reopens it if an earlier lifespan closed it.
        store.open()
        # Everything imported so far (JAX's large heap above all) lives as long as the server:
        # moving it to the permanent generation keeps full GC passes from re-scanning it while a
        # request builds a 6144-device topology (halves that request's time).
        gc.freeze()
        kernels.open()
        jobs.start()
        try:
            async with AsyncExitStack() as stack:
                for life in extra:
                    await stack.enter_async_context(life())
                yield
        finally:
            kernels.close()  # its last jobs' states (shutting down) reach the store before it closes
            jobs.stop()
            store.close()

    return lifespan


def _allowed_hosts(allowed_hosts: Iterable[str] | None, bind_host: str) -> Iterable[str] | None:
    if allowed_hosts is None and is_loopback(bind_host):
        # The usual loopback names, and the bind address itself (e.g. 127.0.0.2, or [::1]).
        return {*LOOPBACK_HOSTS, f"[{bind_host}]" if ":" in bind_host else bind_host}
    return allowed_hosts


def _add_middleware(app: FastAPI, settings: Settings, token: str | None, allowed_hosts: Iterable[str] | None) -> None:
    """The middleware stack: each a small pure-ASGI layer (server.middleware), innermost first."""
    sessions, connections = app.state.sessions, app.state.connections
    # add_middleware puts each new layer outside the previous ones: innermost first.
    app.add_middleware(  # once the body is in: sheds load before the app does any work
        ConcurrencyLimit, max_requests=settings.max_connections, max_client_requests=settings.max_client_requests
    )
    app.add_middleware(
        BodyLimit,
        max_bytes=settings.max_body_bytes,
        path_limits={SNAPSHOTS_PATH: (settings.max_snapshot_bytes, "max_snapshot_bytes")},
    )
    app.add_middleware(JsonOnly)
    app.add_middleware(TokenCheck, token=token, paths=WRITE_PATHS, sessions=sessions)  # before any body is read
    app.add_middleware(CrossSiteCheck)
    app.add_middleware(HostCheck, allowed=allowed_hosts)
    app.add_middleware(CatchAll)
    app.add_middleware(ChunkedSend, held=connections.held)
    app.add_middleware(SecurityHeaders, csp_overrides={"/docs": docs.DOCS_CSP})


def kernel_worker_pool(settings: Settings, setup: Sequence[str] = ()) -> WorkerPool:
    """The kernel lab's worker pool with the settings' limits (``setup``: hooks run in every worker)."""
    return WorkerPool(
        worker.main,
        name="shardscope-kernel",
        options={"max_text_chars": settings.max_kernel_text_chars},
        workers=settings.max_kernel_workers,
        queue=settings.max_kernel_queue,
        timeout_s=settings.max_kernel_seconds,
        cache_entries=settings.max_kernel_cache_entries,
        max_jobs=settings.max_kernel_jobs,
        max_result_bytes=settings.max_kernel_result_bytes,
        memory_limit=settings.worker_memory(),
        total_memory=settings.kernel_memory(),
        setup=setup,
    )
