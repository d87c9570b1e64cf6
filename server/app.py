"""The FastAPI application behind ``shardscope serve``: the feature routers, the store, the worker pool,
the middleware stack and the static dashboard, configured by one :class:`~server.settings.Settings`."""

from __future__ import annotations

import gc
import os
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from importlib.metadata import version
from pathlib import Path

import anyio.to_thread
from fastapi import FastAPI
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.responses import FileResponse, Response
from starlette.routing import BaseRoute, Match, Mount, Route
from starlette.staticfiles import NotModifiedResponse, StaticFiles

from server import docs, vendor
from server.api import compare, cost, kernels, layout, links, meta, reshard, searches, session, snapshots, topology
from server.api.compare import COMPARE_PATH
from server.api.kernels import JOBS_PATH, RUN_PATH
from server.api.links import LINKS_PATH
from server.api.reshard import RESHARD_PATH
from server.api.searches import SEARCHES_PATH
from server.api.snapshots import SNAPSHOTS_PATH
from server.auth import TOKEN_HINT, Sessions, token_problem
from server.bundles import BUNDLE_PATH, PageBundles
from server.early import link_header
from server.errors import EXCEPTION_HANDLERS
from server.hosts import LOOPBACK_HOSTS, is_loopback
from server.http import ConnectionGuard
from server.jsonio import OrjsonResponse
from server.middleware import (
    BodyLimit,
    CatchAll,
    ChunkedSend,
    ConcurrencyLimit,
    CrossSiteCheck,
    HostCheck,
    JsonOnly,
    Message,
    Receive,
    Scope,
    SecurityHeaders,
    Send,
    StoreGate,
    TokenCheck,
    TrustedProxies,
    proxy_networks,
)
from server.pool import WorkerPool
from server.quota import WriteQuota
from server.services.jobs import JobBoard
from server.services.kernels import KernelRuns
from server.services.searches import SearchBoard
from server.services.snapshots import SnapshotRepository
from server.settings import SPARE_THREADS, Settings
from server.store import Store, open_store
from server.vendor import REVALIDATE
from sharding_core import cache
from sharding_core.errors import ShardingError
from sharding_core.kernels import worker
from shardscope.assets import frontend_dir

Extra = Callable[[], AbstractAsyncContextManager[None]]
"""An extra route's lifespan: entered when the app starts, left when it stops."""

FRONTEND_DIR = frontend_dir()
"""The static dashboard (no build step), served at ``/``."""

STATIC_CACHE_CONTROL = REVALIDATE.encode()
"""The static files' Cache-Control (:class:`FrontendFiles`)."""

MAX_CACHED_FILE_BYTES = 1 << 20
"""The largest front-end file the server keeps in memory (larger ones are streamed from disk)."""
MAX_CACHED_BYTES = 16 << 20
"""The most the server keeps in memory of front-end files, all together."""

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
    searches.router,
    session.router,
)
"""Every feature's router, in the order the app includes them."""

WRITE_PATHS = (LINKS_PATH, SNAPSHOTS_PATH, RUN_PATH, JOBS_PATH, RESHARD_PATH, COMPARE_PATH, SEARCHES_PATH)
"""The POSTs that store something or start work: with ``--token`` they need it; every read stays open."""
STORE_PATHS = (LINKS_PATH, "/s", SNAPSHOTS_PATH, JOBS_PATH, SEARCHES_PATH)
"""The paths whose work is the store's (share links and their pages, snapshots and runs, diffs and what-ifs,
kernel jobs, searches): at most ``max_store_requests`` in progress (:class:`server.middleware.StoreGate`), so the routes
that need no database always find a worker thread."""


def _preload(scope: Scope) -> bytes | None:
    """The ``Link: rel=preload`` of the data a page's address names (:mod:`server.early`), if any."""
    path = scope.get("path", "")
    if path not in ("/snapshots.html", "/compare.html"):
        return None
    host = Headers(scope=scope).get("host", "")
    return link_header(path, scope.get("query_string", b"").decode("latin-1"), host)


class _MemoryFiles(StaticFiles):
    """Starlette's ``StaticFiles`` (its path checks, its ETag and Last-Modified, its 304s), answering each file
    from memory: read once, and again only when its size or modification time changes. A page asks for 40-odd
    modules at once; streamed from disk, each took three thread hops (open, read, close) beside the path's
    lookup, and a fresh browser waited on them before it could draw. The front end is under a megabyte
    (:data:`MAX_CACHED_FILE_BYTES` bounds a file, :data:`MAX_CACHED_BYTES` the whole)."""

    def __init__(self, *, directory: Path) -> None:
        super().__init__(directory=directory, html=True)
        self._cache: dict[str, tuple[tuple[int, int], bytes]] = {}
        self._cached_bytes = 0

    def file_response(
        self, full_path: str | os.PathLike[str], stat_result: os.stat_result, scope: Scope, status_code: int = 200
    ) -> Response:
        key = os.fspath(full_path)
        version = (stat_result.st_mtime_ns, stat_result.st_size)
        hit = self._cache.get(key)
        if hit is None or hit[0] != version:
            if hit is not None:  # an older version: dropped, whether or not the new one is kept
                del self._cache[key]
                self._cached_bytes -= len(hit[1])
            if stat_result.st_size > MAX_CACHED_FILE_BYTES:
                return super().file_response(full_path, stat_result, scope, status_code)
            with open(key, "rb") as f:  # a small file, once per version: the event loop barely notices
                body = f.read(MAX_CACHED_FILE_BYTES + 1)
            if len(body) != stat_result.st_size:  # changed between the stat and the read: stream this one
                return super().file_response(full_path, stat_result, scope, status_code)
            if self._cached_bytes + len(body) > MAX_CACHED_BYTES:
                return super().file_response(full_path, stat_result, scope, status_code)
            hit = (version, body)
            self._cache[key] = hit
            self._cached_bytes += len(body)
        # FileResponse's own headers (content type, length, ETag, Last-Modified), without opening the file
        headers = FileResponse(key, stat_result=stat_result).headers
        if self.is_not_modified(headers, Headers(scope=scope)):
            return NotModifiedResponse(headers)
        return Response(hit[1], status_code=status_code, headers=dict(headers.items()))


class FrontendFiles:
    """The catch-all mount at ``/``: static files from the frontend directory, and the 404/405 answers
    for API paths no route took.

    Files are served by Starlette's ``StaticFiles``, which resolves every path and refuses anything
    outside the directory (``..``, encoded ``%2e%2e``, symlinks out), answering 404. Each carries
    ``Cache-Control: no-cache`` beside StaticFiles' ``ETag`` and ``Last-Modified``: the browser keeps the
    pages and modules but asks again before using them (a 304 when unchanged), so a server upgraded
    under an open dashboard never mixes old modules with new ones (the heuristic freshness browsers give
    files without a Cache-Control would).
    """

    def __init__(self, directory: Path, routes: Sequence[BaseRoute]) -> None:
        self.files = _MemoryFiles(directory=directory)
        self.bundles = PageBundles(directory)
        self.routes = routes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        api = path == "/api" or path.startswith("/api/")

        async def revalidated(message: Message) -> None:
            if message["type"] == "http.response.start" and message["status"] in (200, 304):
                message["headers"] = [*message.get("headers", ()), (b"cache-control", STATIC_CACHE_CONTROL)]
                if message["status"] == 200 and (preload := _preload(scope)) is not None:
                    message["headers"].append((b"link", preload))
            await send(message)

        if not api and scope.get("method") in ("GET", "HEAD") and (bundle := BUNDLE_PATH.fullmatch(path)):
            answer = await self._bundle(bundle["view"], scope)
            if answer is not None:
                await answer(scope, receive, revalidated)
                return
        if not api and scope.get("method") in ("GET", "HEAD"):
            # A page, a module, a stylesheet: a file there is served at once. Only when there is none are the
            # routes probed below (that probe, every method against every route, took two thirds of a
            # static file's time: 30-odd files per page).
            response = await self._file(scope)
            if response is not None:
                await response(scope, receive, revalidated)
                return
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
        if api:
            raise HTTPException(404)
        await self.files(scope, receive, revalidated)

    async def _bundle(self, view: str, scope: Scope) -> Response | None:
        """A page's modules as one script (:mod:`server.bundles`), or its 304; None for a view no page runs."""
        built = await anyio.to_thread.run_sync(self.bundles.get, view)
        if built is None:
            return None
        request = Headers(scope=scope)
        gzipped = vendor.accepts_gzip(request.get("accept-encoding", ""))
        etag = built.etag[:-1] + '-gz"' if gzipped else built.etag  # one ETag per representation
        headers = {"etag": etag, "content-type": "text/javascript; charset=utf-8", "vary": "Accept-Encoding"}
        if self.files.is_not_modified(Headers(headers), request):
            return NotModifiedResponse(Headers(headers))
        if gzipped:
            return Response(built.gzipped, headers={**headers, "content-encoding": "gzip"})
        return Response(built.text, headers=headers)

    async def _file(self, scope: Scope) -> Response | None:
        """The file the path names (or its 304), or None when there is none."""
        if not self.files.config_checked:
            await self.files.check_config()
            self.files.config_checked = True
        try:
            response = await self.files.get_response(self.files.get_path(scope), scope)
        except HTTPException as e:
            if e.status_code == 404:
                return None
            raise
        return None if response.status_code == 404 else response


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
    trusted_proxies: Iterable[str] = (),
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
    its workers start on first use and stop with the app. ``trusted_proxies``: addresses or networks
    (``--trusted-proxy``) whose ``X-Forwarded-For`` and ``X-Forwarded-Proto`` name the client and its scheme
    (quotas, sessions, the cookie's ``Secure``); from any other peer they are ignored.
    ``extra_routes``: routes to answer before the front end's catch-all, each with the lifespan it needs
    (``shardscope serve --mcp`` adds the Model Context Protocol's ``/mcp``: :func:`shardscope.mcp.http.route`).
    """
    settings = settings if settings is not None else Settings()
    problem = token_problem(token)
    if problem is not None:
        raise ShardingError("bad_token", problem, hint=TOKEN_HINT)
    proxies = _checked_proxies(trusted_proxies)
    cache.configure(settings.max_cache_bytes)
    store = open_store(
        db_path,
        max_bytes=settings.max_store_bytes,
        max_days={"links": settings.max_link_days, "snapshots": settings.max_snapshot_days},
        max_connections=settings.max_db_connections,
        wait_ms=settings.max_db_wait_ms,
        statement_ms=settings.max_db_statement_ms,
        queue_ms=settings.max_store_queue_ms,
    )
    kernels = kernel_pool if kernel_pool is not None else kernel_worker_pool(settings)
    jobs = JobBoard(store, kernels, settings)
    searching = SearchBoard(store, settings)
    frontend = Path(frontend_dir) if frontend_dir is not None else FRONTEND_DIR
    app = FastAPI(
        title="Shardscope",
        version=version("shardscope"),  # pyproject's, from the installed package's metadata
        summary="See how JAX arrays are sharded across devices: layouts, meshes, topology, share links.",
        description='Every 4xx and 5xx has the body `{"error": {"code", "message", "hint"?, ...}}`.',
        docs_url=None,  # our own /docs (server.docs): FastAPI's uses inline script, which the CSP blocks
        redoc_url=None,
        lifespan=_lifespan(
            store, kernels, jobs, searching, settings, [life for _, life in extra_routes if life is not None]
        ),
        exception_handlers=EXCEPTION_HANDLERS,
        default_response_class=OrjsonResponse,
    )
    _services(app, store, kernels, jobs, settings)
    app.state.searches = searching
    for router in ROUTERS:
        app.include_router(router)
    app.include_router(docs.router)
    app.include_router(vendor.router)
    for route, _ in extra_routes:
        app.router.routes.append(route)  # before the front end's catch-all mount
    app.mount("/", FrontendFiles(frontend, app.router.routes), name="frontend")

    if allowed_hosts is None and is_loopback(bind_host):
        # The usual loopback names, and the bind address itself (e.g. 127.0.0.2, or [::1]).
        allowed_hosts = {*LOOPBACK_HOSTS, f"[{bind_host}]" if ":" in bind_host else bind_host}
    _stack(app, settings, token=token, allowed_hosts=allowed_hosts, proxies=proxies)
    return app


def _services(app: FastAPI, store: Store, kernels: WorkerPool, jobs: JobBoard, settings: Settings) -> None:
    """What the routers find on ``app.state``: the store, the pool, the settings, the services and guards."""
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


def _checked_proxies(trusted_proxies: Iterable[str]) -> list[str]:
    """``--trusted-proxy`` values, each an address or a network, or ``bad_trusted_proxy`` naming the bad one."""
    proxies = list(trusted_proxies)
    try:
        proxy_networks(proxies)
    except ValueError as e:
        raise ShardingError(
            "bad_trusted_proxy",
            f"--trusted-proxy takes an address or a network (10.0.0.5, 10.0.0.0/8, ::1): {e}",
            hint="name the reverse proxy's own address as this server sees it",
        ) from None
    return proxies


def _lifespan(
    store: Store,
    kernels: WorkerPool,
    jobs: JobBoard,
    searching: SearchBoard,
    settings: Settings,
    extra: Sequence[Extra] = (),
) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
    """What the app does when it starts and stops (``extra``: the extra routes' lifespans, entered last)."""

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        # The store is already open (so an unwritable path fails here, at start-up, not on the
        # first link); opening again is a no-op, and reopens it if an earlier lifespan closed it.
        store.open()
        # Worker threads for sync routes: the store's requests hold at most max_store_requests of them (StoreGate),
        # so the others keep SPARE_THREADS at least for the routes that need no database.
        limiter = anyio.to_thread.current_default_thread_limiter()
        limiter.total_tokens = max(limiter.total_tokens, settings.max_store_requests + SPARE_THREADS)
        # Everything imported so far (JAX's large heap above all) lives as long as the server:
        # moving it to the permanent generation keeps full GC passes from re-scanning it while a
        # request builds a 6144-device topology (halves that request's time).
        gc.freeze()
        kernels.open()
        jobs.start()
        searching.start()
        try:
            async with AsyncExitStack() as stack:
                for life in extra:
                    await stack.enter_async_context(life())
                yield
        finally:
            kernels.close()  # its last jobs' states (shutting down) reach the store before it closes
            jobs.stop()
            searching.stop()
            store.close()

    return lifespan


def _stack(
    app: FastAPI, settings: Settings, *, token: str | None, allowed_hosts: Iterable[str] | None, proxies: list[str]
) -> None:
    """The middleware around the app (server/middleware.py), on what ``app.state`` holds: ``add_middleware`` puts
    each new layer outside the previous ones, so innermost first."""
    state = app.state
    app.add_middleware(  # innermost: turns on the store, waited for on the event loop
        StoreGate,
        prefixes=STORE_PATHS,
        limit=settings.max_store_requests,
        wait_s=settings.max_store_queue_ms / 1000,
        down=state.store.down_error,
        answered_anyway=(JOBS_PATH,),
    )
    app.add_middleware(  # once the body is in: sheds load before the app does any work
        ConcurrencyLimit, max_requests=settings.max_connections, max_client_requests=settings.max_client_requests
    )
    app.add_middleware(
        BodyLimit,
        max_bytes=settings.max_body_bytes,
        path_limits={SNAPSHOTS_PATH: (settings.max_snapshot_bytes, "max_snapshot_bytes")},
    )
    app.add_middleware(JsonOnly)
    app.add_middleware(TokenCheck, token=token, paths=WRITE_PATHS, sessions=state.sessions)  # before any body
    app.add_middleware(CrossSiteCheck)
    app.add_middleware(HostCheck, allowed=allowed_hosts)
    app.add_middleware(CatchAll)
    app.add_middleware(TrustedProxies, proxies=proxies)  # inside ChunkedSend: it keys what it holds by the socket
    app.add_middleware(ChunkedSend, held=state.connections.held)
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
