"""Security controls and limits, each a small pure-ASGI middleware (no request object, no buffering).

Outermost first, as :func:`server.app.create_app` stacks them:

1. :class:`SecurityHeaders` — response headers on every response (CSP, nosniff, no-referrer).
2. :class:`ChunkedSend` — response bodies go out in 64 KiB pieces, paced by the reader.
3. :class:`CatchAll` — an unexpected exception becomes a 500 in the usual error shape, no traceback.
4. :class:`HostCheck` — DNS-rebinding defence: a loopback-bound server answers loopback names only.
5. :class:`CrossSiteCheck` — CSRF defence: state-changing requests from another origin are refused.
6. :class:`JsonOnly` — POST bodies must be ``application/json`` (a second CSRF wall: forms cannot send it).
7. :class:`TokenCheck` — with ``shardscope serve --token``, writes need the token (or a browser session).
8. :class:`BodyLimit` — request bodies over the limit get 413 before the rest is read.
9. :class:`ConcurrencyLimit` — load shedding once the body is in: past ``max_connections`` requests in
   progress 503, past ``max_client_requests`` from one address 429.

Each answers refusals itself with the common error shape, so even requests that never reach a
route get ``{"error": {"code", "message"}}``. What the HTTP server answers before there is a
request (a malformed or late head) is in :mod:`server.http`, with the same shape and headers.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import hmac
import ipaddress
import logging
import math
import urllib.parse
from collections.abc import Awaitable, Callable, Iterable, Mapping, MutableMapping
from typing import Any

from server.auth import Sessions
from server.errors import ApiError, send_error
from server.hosts import LOOPBACK_HOSTS
from server.jsonio import CHUNK_BYTES
from server.quota import client_key
from server.settings import MAX_CLIENT_REQUESTS

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

log = logging.getLogger("shardscope.server")

UNSAFE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def header(scope: Scope, name: bytes) -> str | None:
    """The first value of header ``name`` (lower-case bytes), decoded as latin-1 like HTTP does."""
    for key, value in scope.get("headers", ()):
        if key == name:
            return bytes(value).decode("latin-1")
    return None


# ---- 1. response headers ------------------------------------------------------------------------

# img-src blob: lets the PNG export draw the grid's SVG through a blob URL (never a remote image).
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; object-src 'none'; "
    "base-uri 'none'; frame-ancestors 'none'; form-action 'self'"
)
"""The dashboard's Content-Security-Policy: scripts and styles from this origin only, never inline."""

SECURITY_HEADERS: tuple[tuple[bytes, bytes], ...] = (
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    # Other sites may not embed our responses (JSON, scripts) as no-cors resources.
    (b"cross-origin-resource-policy", b"same-origin"),
)


def security_headers(csp: str = CSP) -> list[tuple[bytes, bytes]]:
    """The headers every response carries (for answers written below ASGI, by :mod:`server.http`)."""
    return [(b"content-security-policy", csp.encode()), *SECURITY_HEADERS]


class SecurityHeaders:
    """Technique: a strict **Content-Security-Policy** (script-src 'self', no inline script, no framing:
    XSS and clickjacking containment), **X-Content-Type-Options: nosniff** (no MIME sniffing) and
    **Referrer-Policy: no-referrer** (share-link ids never leak in Referer), set on every response,
    errors and static files included, replacing whatever an inner layer set.

    ``csp_overrides`` maps exact paths to a different policy (``/docs``: see :mod:`server.docs`).
    """

    def __init__(self, app: ASGIApp, csp: str = CSP, csp_overrides: Mapping[str, str] | None = None) -> None:
        self.app = app
        self.csp = csp.encode()
        self.overrides = {path: policy.encode() for path, policy in (csp_overrides or {}).items()}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        csp = self.overrides.get(scope.get("path", ""), self.csp)
        ours = {name for name, _ in SECURITY_HEADERS} | {b"content-security-policy"}

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                kept = [(k, v) for k, v in message.get("headers", ()) if bytes(k).lower() not in ours]
                message["headers"] = [*kept, (b"content-security-policy", csp), *SECURITY_HEADERS]
            await send(message)

        await self.app(scope, receive, send_with_headers)


# ---- 2. unexpected exceptions --------------------------------------------------------------------


class CatchAll:
    """Technique: **fail closed without information leakage** — an unhandled exception is logged
    server-side with its traceback and answered with a bare 500 ``internal_error`` (no stack trace,
    no exception text), inside :class:`SecurityHeaders` so the 500 carries them too.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def tracking_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, receive, tracking_send)
        except Exception:
            log.exception("unhandled error in %s %s", scope.get("method"), scope.get("path"))
            if started:  # too late for a clean answer; let the server drop the connection
                raise
            await send_error(
                send,
                ApiError(500, "internal_error", "the server hit an unexpected error; it has been logged"),
            )


# ---- 2b. who the client is, behind a proxy -------------------------------------------------------------------


FORWARDED_PEER = "shardscope.peer"
"""Where :class:`TrustedProxies` keeps the socket's own peer when it names the client a proxy forwarded."""


def proxy_networks(proxies: Iterable[str]) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    """``--trusted-proxy`` values (an address, ``[::1]``, or a network) as networks; ValueError names a bad one."""
    return tuple(ipaddress.ip_network(p.strip().strip("[]"), strict=False) for p in proxies)


class TrustedProxies:
    """Technique: **forwarded headers from configured proxies only** (as nginx's ``set_real_ip_from`` or
    uvicorn's ``forwarded_allow_ips``). A request whose socket peer is one of ``proxies`` (addresses or networks,
    ``shardscope serve --trusted-proxy``) is taken to come from the client its ``X-Forwarded-For`` names — the
    rightmost address that is not itself a trusted proxy — and over the scheme its ``X-Forwarded-Proto`` names;
    from any other peer both headers are ignored, so a client cannot pick the address its write quota, request
    count and session are kept under (issue 29: anyone escaped their quota by adding ``X-Forwarded-For``, which
    uvicorn believed from 127.0.0.1 by default; ``shardscope serve`` now turns uvicorn's own handling off). The
    socket's peer is kept in ``scope["shardscope.peer"]``.
    """

    def __init__(self, app: ASGIApp, proxies: Iterable[str] = ()) -> None:
        self.app = app
        self.networks = proxy_networks(proxies)

    def trusted(self, address: str) -> bool:
        try:
            ip = ipaddress.ip_address(address.strip().strip("[]"))
        except ValueError:
            return False
        return any(ip in network for network in self.networks)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        client = scope.get("client")
        if scope["type"] not in ("http", "websocket") or not self.networks or not client or not self.trusted(client[0]):
            await self.app(scope, receive, send)
            return
        forwarded = ",".join(bytes(v).decode("latin-1") for k, v in scope.get("headers", ()) if k == b"x-forwarded-for")
        address = client[0]
        for hop in reversed([h.strip().strip("[]") for h in forwarded.split(",") if h.strip()]):
            try:
                ipaddress.ip_address(hop)
            except ValueError:
                break  # not an address (a proxy would not write one): trust goes no further
            address = hop
            if not self.trusted(hop):
                break
        proto = (header(scope, b"x-forwarded-proto") or "").split(",")[-1].strip().lower()
        scheme = scope.get("scheme", "http")
        if proto in ("http", "https"):
            scheme = proto if scope["type"] == "http" else {"http": "ws", "https": "wss"}[proto]
        scope = {**scope, "client": (address, 0), "scheme": scheme, FORWARDED_PEER: client}
        await self.app(scope, receive, send)


# ---- 3. Host header ------------------------------------------------------------------------------


def host_name(value: str) -> str | None:
    """The host part of a ``Host`` header (``[::1]:8000`` -> ``[::1]``), or None when malformed."""
    value = value.strip().lower()
    if value.startswith("["):
        end = value.find("]")
        if end < 0:
            return None
        name, rest = value[: end + 1], value[end + 1 :]
    else:
        name, _, port = value.partition(":")
        rest = ":" + port if _ else ""
    if rest and not (rest.startswith(":") and rest[1:].isdigit() and len(rest) <= 6):
        return None
    return name or None


class HostCheck:
    """Technique: **Host header allowlist against DNS rebinding**. A page on ``evil.example`` that
    re-points its own name to 127.0.0.1 can make the browser send requests here that count as
    same-origin to it; they still carry ``Host: evil.example``. Bound to loopback, the server answers
    only ``localhost``, ``127.0.0.1`` and ``[::1]`` (any port), and refuses the rest with 400
    ``bad_host``. ``allowed=None`` disables the check (a server bound to a public address, where the
    operator chose exposure and the names it is reached by are unknown).
    """

    def __init__(self, app: ASGIApp, allowed: Iterable[str] | None = LOOPBACK_HOSTS) -> None:
        self.app = app
        self.allowed = None if allowed is None else frozenset(h.lower() for h in allowed)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket") or self.allowed is None:
            await self.app(scope, receive, send)
            return
        value = header(scope, b"host")
        name = host_name(value) if value is not None else None
        if name in self.allowed:
            await self.app(scope, receive, send)
            return
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
            return
        await send_error(
            send,
            ApiError(
                400,
                "bad_host",
                "this server answers requests for localhost, 127.0.0.1 and [::1] only (the Host header is checked "
                "against DNS rebinding)",
                hint="open the dashboard at http://127.0.0.1:<port>/",
            ),
        )


# ---- 4. cross-site requests ----------------------------------------------------------------------


def origin_host(origin: str) -> str | None:
    """``http://127.0.0.1:8000`` -> ``127.0.0.1:8000`` (default ports dropped); None for ``null`` or junk."""
    scheme, sep, rest = origin.strip().lower().partition("://")
    if not sep or scheme not in ("http", "https") or not rest or "/" in rest:
        return None
    default = ":80" if scheme == "http" else ":443"
    return rest[: -len(default)] if rest.endswith(default) else rest


def _strip_default_port(host: str) -> str:
    host = host.strip().lower()
    return host[:-3] if host.endswith(":80") else host[:-4] if host.endswith(":443") else host


class CrossSiteCheck:
    """Technique: **Fetch Metadata and Origin verification (CSRF defence)**. A state-changing request
    (POST, PUT, PATCH, DELETE) is refused with 403 ``cross_site_request`` when the browser marks it
    ``Sec-Fetch-Site: cross-site`` or ``same-site`` (another port or subdomain is another app), or
    when its ``Origin`` is not this server's own (compared with the ``Host`` header). Requests
    without either header (curl, scripts, ``sharding_core.publish``) are not from a browser page
    and pass.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") not in UNSAFE_METHODS:
            await self.app(scope, receive, send)
            return
        fetch_site = header(scope, b"sec-fetch-site")
        origin = header(scope, b"origin")
        refused = None
        if fetch_site is not None and fetch_site.strip().lower() in ("cross-site", "same-site"):
            refused = f"Sec-Fetch-Site is {fetch_site.strip().lower()}"
        elif origin is not None:
            host = header(scope, b"host")
            if host is None or origin_host(origin) != _strip_default_port(host):
                refused = "the Origin header does not match this server"
        if refused is None:
            await self.app(scope, receive, send)
            return
        await send_error(
            send,
            ApiError(
                403,
                "cross_site_request",
                f"cross-site requests may not change anything here ({refused})",
                hint="use the dashboard itself, or call the API from a script (no Origin header)",
            ),
        )


# ---- 5. JSON bodies only -------------------------------------------------------------------------


def media_type(value: str | None) -> str:
    return (value or "").split(";", 1)[0].strip().lower()


class JsonOnly:
    """Technique: **Content-Type allowlisting**. Non-empty bodies of POST/PUT/PATCH must be
    ``application/json`` (415 ``unsupported_media_type`` otherwise). Besides keeping parsing to one
    format, it closes the "simple request" CSRF hole: an HTML form or a no-cors ``fetch`` cannot send
    ``application/json`` cross-origin without a CORS preflight, which this server never grants.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") not in ("POST", "PUT", "PATCH"):
            await self.app(scope, receive, send)
            return
        length = header(scope, b"content-length")
        empty = length.strip() == "0" if length is not None else header(scope, b"transfer-encoding") is None
        if empty:
            # No body at all (HTTP/1.1: neither Content-Length nor Transfer-Encoding): nothing to
            # type-check, and the route answers (405, or 422 for a missing body) more precisely.
            await self.app(scope, receive, send)
            return
        got = media_type(header(scope, b"content-type"))
        if got == "application/json":
            await self.app(scope, receive, send)
            return
        await send_error(
            send,
            ApiError(
                415,
                "unsupported_media_type",
                f"request bodies must be application/json, got {got[:64]!r}"
                if got
                else "request bodies must be application/json, and this request has no Content-Type",
                hint="send the header Content-Type: application/json",
            ),
        )


# ---- 6. body size --------------------------------------------------------------------------------


class BodyTooLarge(Exception):
    """Raised from ``receive`` once a streamed body passes the limit (the 413 is already sent)."""


class BodyLimit:
    """Technique: **request size limiting at the transport edge**. A declared ``Content-Length`` over
    ``max_bytes`` is refused with 413 ``too_large`` before one body byte is read; a chunked or
    under-declared body is counted as ``receive`` hands it over, and the moment it passes the limit
    the 413 goes out and the application's ``receive`` raises, so at most one chunk past the limit
    is ever held. The 413 says ``Connection: close`` so the server does not drain the rest.

    ``path_limits`` gives exact paths their own limit and setting name (``/api/snapshots``: a
    published snapshot is megabytes); every other path keeps ``max_bytes``.
    """

    def __init__(self, app: ASGIApp, max_bytes: int, path_limits: Mapping[str, tuple[int, str]] | None = None) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.path_limits = dict(path_limits or {})

    async def _refuse(self, send: Send, limit: int, setting: str) -> None:
        await send_error(
            send,
            ApiError(
                413,
                "too_large",
                f"the request body is larger than {limit} bytes (setting {setting})",
                hint="send less: layouts and links need only a few kilobytes"
                if setting == "max_body_bytes"
                else f"send less, or start the server with a larger {setting}",
                headers={"connection": "close"},
            ),
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit, setting = self.path_limits.get(scope.get("path", ""), (self.max_bytes, "max_body_bytes"))
        declared = header(scope, b"content-length")
        if declared is not None and declared.strip().isdigit() and int(declared) > limit:
            await self._refuse(send, limit, setting)
            return
        received = 0
        started = False
        refused = False

        async def counting_receive() -> Message:
            nonlocal received, refused
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    if not started and not refused:
                        refused = True
                        await self._refuse(send, limit, setting)
                    raise BodyTooLarge
            return message

        async def guarded_send(message: Message) -> None:
            nonlocal started
            if refused:
                return  # we already answered; whatever the app says after catching BodyTooLarge is moot
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, counting_receive, guarded_send)
        except BodyTooLarge:
            if not refused:
                raise


# ---- 6. bearer token for writes -------------------------------------------------------------------


TOKEN_COOKIE = "shardscope_token"  # noqa: S105 - the name of the cookie older servers set (it held the token)
SESSION_COOKIE = "shardscope_session"


class TokenCheck:
    """Technique: **bearer-token authentication with a constant-time comparison, and server-side browser
    sessions** (:mod:`server.auth`), for shared servers (``shardscope serve --token``). A POST to one of
    ``paths`` (the writes: links, kernel runs, snapshots) must carry the token as ``Authorization: Bearer
    <token>`` (scripts, ``publish()``) or a live session as the ``shardscope_session`` cookie (the pages):
    neither gets 401 ``unauthorized`` with ``WWW-Authenticate: Bearer``, another token 403 ``bad_token``
    (compared with :func:`hmac.compare_digest`, no timing leak of how much matched), an ended session 401,
    all before any of the body is read. Reads stay open (a link is itself an unguessable secret).

    A teammate's browser gets a session once, as Jupyter hands its token over: opening any page with
    ``?token=<token>`` sets the session cookie (``HttpOnly``: no script reads it; ``SameSite=Strict``: no
    other site's request carries it) and redirects to the same path on this server without the token, so
    the token leaves neither the address bar, the history nor a copied link, and never becomes a cookie.
    ``DELETE /api/session`` ends the caller's session. A cookie from an older server that held the raw
    token authorizes nothing and is cleared. ``token=None`` disables the check (the loopback default).
    """

    def __init__(self, app: ASGIApp, token: str | None, paths: Iterable[str], sessions: Sessions | None = None) -> None:
        self.app = app
        self.token = token.encode() if token else None
        self.paths = frozenset(paths)
        self.sessions = sessions if sessions is not None else Sessions()

    def _matches(self, given: str) -> bool:
        assert self.token is not None
        return hmac.compare_digest(given.encode("utf-8", "surrogateescape"), self.token)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.token is None or scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if cookie(scope, TOKEN_COOKIE) is not None:
            send = _clearing(send, TOKEN_COOKIE)  # an older server's cookie held the token itself: gone
        method, path = scope.get("method"), scope.get("path")
        if method == "GET" and _query_has(scope, "token"):
            await self._adopt(scope, send)
            return
        if method != "POST" or path not in self.paths:
            await self.app(scope, receive, send)
            return
        given = header(scope, b"authorization")
        scheme, _, credentials = (given or "").strip().partition(" ")
        bearer = credentials.strip() if given is not None and scheme.lower() == "bearer" else ""
        session = cookie(scope, SESSION_COOKIE)
        if bearer:
            if not self._matches(bearer):
                await send_error(send, bad_token("the token is not this server's", "use the token"))
                return
        elif not session or not self.sessions.valid(session, client_of(scope)):
            await send_error(
                send,
                ApiError(
                    401,
                    "unauthorized",
                    "this server takes writes (share links, kernel runs, snapshots) only with its token"
                    + (
                        ", and this browser's session has ended (or was opened from another address)" if session else ""
                    ),
                    hint="scripts: Authorization: Bearer <token> (publish(..., token=...) or $SHARDSCOPE_TOKEN); "
                    "browsers: open the dashboard once at ?token=<token>",
                    headers={"www-authenticate": 'Bearer realm="shardscope"'},
                ),
            )
            return
        await self.app(scope, receive, send)

    async def _adopt(self, scope: Scope, send: Send) -> None:
        """``GET ...?token=T``: the right token opens a session, and the address loses the token."""
        pairs = urllib.parse.parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
        given = next((v for k, v in pairs if k == "token"), "")
        if not self._matches(given):
            await send_error(
                send, bad_token("the token in the address is not this server's", "ask for the link with the token")
            )
            return
        rest = urllib.parse.urlencode([(k, v) for k, v in pairs if k != "token"])
        location = own_path(scope.get("path", "/")) + (f"?{rest}" if rest else "")
        session = (
            f"{SESSION_COOKIE}={self.sessions.open(client_of(scope))}; Path=/; HttpOnly; SameSite=Strict; "
            f"Max-Age={int(self.sessions.lifetime_s)}" + ("; Secure" if scope.get("scheme") == "https" else "")
        )
        await send(
            {
                "type": "http.response.start",
                "status": 303,
                "headers": [(b"location", location.encode("latin-1")), (b"set-cookie", session.encode("latin-1")),
                            (b"cache-control", b"no-store"), (b"content-length", b"0")],
            }
        )  # fmt: skip
        await send({"type": "http.response.body", "body": b""})


def client_of(scope: Scope) -> str:
    """Who sent a request, as quotas and sessions count clients (:func:`server.quota.client_key` of its address:
    the socket's peer, or the client a trusted proxy names, :class:`TrustedProxies`)."""
    client = scope.get("client")
    return client_key(client[0] if client else None)


def bad_token(message: str, what: str) -> ApiError:
    return ApiError(403, "bad_token", message, hint=f"{what} `shardscope serve --token` was started with")


def own_path(path: str) -> str:
    """``path`` as a redirect target that stays on this server: one leading slash, so ``//evil.example/`` (a
    scheme-relative URL, another host) becomes the path ``/evil.example/``; backslashes, which browsers read
    as slashes, are escaped."""
    return urllib.parse.quote("/" + path.lstrip("/\\"), safe="/:@!$&'()*+,;=-._~")


def expired_cookie(name: str) -> bytes:
    return f"{name}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0".encode("latin-1")


def _clearing(send: Send, name: str) -> Send:
    """``send`` with a Set-Cookie that deletes the cookie ``name`` added to the response."""

    async def clearing_send(message: Message) -> None:
        if message["type"] == "http.response.start":
            message["headers"] = [*message.get("headers", ()), (b"set-cookie", expired_cookie(name))]
        await send(message)

    return clearing_send


def _query_has(scope: Scope, name: str) -> bool:
    query = scope.get("query_string", b"")
    if name.encode() not in query:
        return False
    return any(k == name for k, _ in urllib.parse.parse_qsl(query.decode("latin-1"), keep_blank_values=True))


def cookie(scope: Scope, name: str) -> str | None:
    raw = header(scope, b"cookie")
    if not raw:
        return None
    for part in raw.split(";"):
        key, _, value = part.strip().partition("=")
        if key == name:
            return urllib.parse.unquote(value)
    return None


# ---- load shedding: requests in progress -----------------------------------------------------------


class ConcurrencyLimit:
    """Technique: **load shedding with a bounded number of requests in progress, counted once their body is
    in** (a gate in front of the app, as a reverse proxy that buffers request bodies is). A request's body is
    read here first, holding nothing but the bytes; only then does it count: with ``max_requests`` in
    progress the next gets 503 ``overloaded``, with ``max_client_requests`` from its client address 429
    ``busy``, both at once with ``Retry-After: 1`` and ``Connection: close``, and nothing else runs for it.
    A client that goes away (or is cut by the connection layer for its pace) before its body is in is
    dropped without a word. Idle, half-sent and kept-alive connections, and bodies still arriving, do not
    count: those are bounded and timed out by the connection layer (:mod:`server.http`), so no number of
    silent sockets or withheld bodies can turn requests away. (uvicorn's ``limit_concurrency`` counted open
    connections, and answered in plain text; before issue 20 this gate counted from the head, so 1,030
    withheld bodies made every request a 503.)
    """

    def __init__(self, app: ASGIApp, max_requests: int, max_client_requests: int = MAX_CLIENT_REQUESTS) -> None:
        self.app = app
        self.max_requests = max_requests
        self.max_client_requests = max_client_requests
        self.active = 0
        self.by_client: collections.Counter[str] = collections.Counter()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        body: collections.deque[Message] = collections.deque()
        if declares_body(scope):
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    return  # gone before its body was in: there is nobody to answer
                body.append(message)
                if not message.get("more_body", False):
                    break
        who = client_of(scope)
        refusal = None
        if self.active >= self.max_requests:
            refusal = ApiError(
                503,
                "overloaded",
                f"the server is answering {self.max_requests} requests already (setting max_connections)",
                hint="try again in a moment",
                headers={"retry-after": "1", "connection": "close"},
            )
        elif self.by_client[who] >= self.max_client_requests:
            refusal = ApiError(
                429,
                "busy",
                f"this client address has {self.max_client_requests} requests in progress already (setting "
                "max_client_requests)",
                hint="wait for an answer before sending more",
                headers={"retry-after": "1", "connection": "close"},
            )
        if refusal is not None:
            await send_error(send, refusal)
            return

        async def replay() -> Message:
            return body.popleft() if body else await receive()

        self.active += 1
        self.by_client[who] += 1
        try:
            await self.app(scope, replay, send)
        finally:
            self.active -= 1
            self.by_client[who] -= 1
            if not self.by_client[who]:
                del self.by_client[who]


def declares_body(scope: Scope) -> bool:
    """Whether a request says a body follows (a non-zero Content-Length, or Transfer-Encoding)."""
    length = header(scope, b"content-length")
    return (length is not None and length.strip() != "0") or header(scope, b"transfer-encoding") is not None


# ---- requests that wait on the store ------------------------------------------------------------------------


class StoreGate:
    """Technique: **a bulkhead** — requests to the paths that use the store (``prefixes``: a path equal to one,
    or under it) are at most ``limit`` in progress at once, each from its start until its answer starts (a
    snapshot streamed to a slow reader holds no turn while it is read). One more waits for a turn *on the event
    loop*, holding no worker thread, for at most ``wait_s`` (``max_store_queue_ms``); then 503 ``store_unavailable``
    with ``Retry-After``.
    So however slow the database is (an outage, a lock held by a frozen replica), the requests waiting on it hold
    at most ``limit`` worker threads and the routes that need no database (health, layout, topology, the pages)
    find the rest free (issue 29: with ~50 clients on one replica during a PostgreSQL outage, health answered
    twice in 45 s and ``POST /api/layout``, which needs no database, once). Turns are handed over in order. While
    the store is known down (``down`` gives its 503), the requests are answered with it here, before any route
    runs — but for ``answered_anyway`` (a kernel job's poll, which its owner answers from its own workers).
    """

    def __init__(
        self,
        app: ASGIApp,
        prefixes: Iterable[str],
        limit: int,
        wait_s: float,
        down: Callable[[], ApiError | None] = lambda: None,
        answered_anyway: Iterable[str] = (),
    ) -> None:
        self.app = app
        self.prefixes = tuple(p.rstrip("/") for p in prefixes)
        self.limit = limit
        self.wait_s = wait_s
        self.down = down
        self.answered_anyway = tuple(p.rstrip("/") for p in answered_anyway)
        self.active = 0
        self.waiting: collections.deque[asyncio.Future[None]] = collections.deque()
        self.refused = 0

    def gated(self, path: str) -> bool:
        return any(path == p or path.startswith(p + "/") for p in self.prefixes)

    async def _enter(self) -> bool:
        if self.active < self.limit and not self.waiting:
            self.active += 1
            return True
        turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.waiting.append(turn)
        try:
            await asyncio.wait_for(asyncio.shield(turn), self.wait_s)
        except TimeoutError:
            if turn.done() and not turn.cancelled():
                return True  # handed over just as the wait ended: it is ours
            turn.cancel()
            with contextlib.suppress(ValueError):
                self.waiting.remove(turn)
            return False
        except BaseException:  # the request went away while it waited: its turn, if it got one, goes on
            if turn.done() and not turn.cancelled():
                self._leave()
            else:
                turn.cancel()
            raise
        return True

    def _leave(self) -> None:
        while self.waiting:
            turn = self.waiting.popleft()
            if not turn.done():
                turn.set_result(None)  # the turn goes to the next one waiting: active stays
                return
        self.active -= 1

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] != "http" or not self.gated(path):
            await self.app(scope, receive, send)
            return
        down = self.down()
        if down is not None and not any(path == p or path.startswith(p + "/") for p in self.answered_anyway):
            await send_error(send, down)  # the store is known down: its 503 costs no route, no thread, no wait
            return
        if not await self._enter():
            self.refused += 1
            seconds = max(1, min(10, math.ceil(self.wait_s)))
            await send_error(
                send,
                ApiError(
                    503,
                    "store_unavailable",
                    f"{self.limit} requests are waiting on this server's store already (setting max_store_requests), "
                    f"and none finished within {self.wait_s * 1000:.0f} ms (setting max_store_queue_ms)",
                    hint=f"try again in {seconds} s",
                    headers={"retry-after": str(seconds)},
                    retry_after=seconds,
                ),
            )
            return
        held = True

        def leave() -> None:
            nonlocal held
            if held:
                held = False
                self._leave()

        async def send_and_leave(message: Message) -> None:
            if message["type"] == "http.response.start":
                leave()  # its answer has started: what remains (a stream to a slow reader) holds no turn
            await send(message)

        try:
            await self.app(scope, receive, send_and_leave)
        finally:
            leave()


# ---- responses in pieces ---------------------------------------------------------------------------------


class ChunkedSend:
    """Technique: **write-side flow control**. A response body larger than :data:`server.jsonio.CHUNK_BYTES`
    goes out in pieces of that size, each send awaiting the transport (uvicorn pauses a send while the
    transport holds more than its high-water mark), so a reader that does not read holds one piece in the
    transport rather than a copy of the whole body (issue 20: 20 sockets that never read a 50 MiB snapshot
    held +979 MiB). What the app still holds for a reader is reported in ``held`` (by the connection's peer
    address), which the connection layer counts towards ``max_send_buffer_bytes``, cutting the slowest
    readers past it (:class:`server.http.ConnectionGuard`).
    """

    def __init__(self, app: ASGIApp, held: MutableMapping[Any, int] | None = None) -> None:
        self.app = app
        self.held: MutableMapping[Any, int] = held if held is not None else {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        client = scope.get("client")
        peer = tuple(client) if client else None  # (host, port), as the connection layer keys it
        held = self.held

        async def send_in_pieces(message: Message) -> None:
            body = message.get("body", b"") if message["type"] == "http.response.body" else b""
            if len(body) <= CHUNK_BYTES:
                await send(message)
                return
            more = message.get("more_body", False)
            view = memoryview(body)
            try:
                for start in range(0, len(body), CHUNK_BYTES):
                    end = min(start + CHUNK_BYTES, len(body))
                    if peer is not None:
                        held[peer] = len(body) - end
                    await send({"type": "http.response.body", "body": bytes(view[start:end]),
                                "more_body": more or end < len(body)})  # fmt: skip
            finally:
                view.release()
                if peer is not None:
                    held.pop(peer, None)

        await self.app(scope, receive, send_in_pieces)
