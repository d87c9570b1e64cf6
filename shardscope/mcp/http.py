"""The MCP server over the dashboard's HTTP: ``shardscope serve --mcp`` answers MCP's streamable-HTTP transport
at ``/mcp``, behind the server's token.

Every request to ``/mcp`` (POST, GET, DELETE) passes the app's middleware like any other — the Host check
(DNS rebinding), the cross-site check, JSON bodies only, the body limit, load shedding — and then
:class:`BearerOnly`: with ``--token``, the token as ``Authorization: Bearer`` (a tool call may compile for
minutes or publish: it is a write; browser sessions do not count, an agent is a script). The transport is
stateless (no session the server must keep between requests, so replicas behind a proxy answer any request);
each call's progress notifications go out on its own response stream, and closing that stream cancels the call.
"""

from __future__ import annotations

import hmac
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from mcp.server import MCPServer
from mcp.server.transport_security import TransportSecuritySettings
from starlette.routing import Route

from server.errors import ApiError, send_error
from server.middleware import ASGIApp, Receive, Scope, Send, bad_token, header
from shardscope.mcp.server import Options, build

MCP_PATH = "/mcp"


class BearerOnly:
    """Technique: **bearer-token authentication with a constant-time comparison** for every method of one
    endpoint (:class:`server.middleware.TokenCheck` guards the dashboard's writes; an MCP endpoint has no reads
    a link could stand for). Without a token configured it passes everything (the loopback default)."""

    def __init__(self, app: ASGIApp, token: str | None) -> None:
        self.app = app
        self.token = token.encode() if token else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.token is None or scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        given = header(scope, b"authorization") or ""
        scheme, _, credentials = given.strip().partition(" ")
        bearer = credentials.strip() if scheme.lower() == "bearer" else ""
        if not bearer:
            await send_error(
                send,
                ApiError(
                    401,
                    "unauthorized",
                    "this server's MCP endpoint answers only with its token",
                    hint="send Authorization: Bearer <token> (the token `shardscope serve --token` was started with)",
                    headers={"www-authenticate": 'Bearer realm="shardscope"'},
                ),
            )
            return
        if not hmac.compare_digest(bearer.encode("utf-8", "surrogateescape"), self.token):
            await send_error(send, bad_token("the token is not this server's", "use the token"))
            return
        await self.app(scope, receive, send)


def mount(mcp: MCPServer, token: str | None, max_body_bytes: int) -> tuple[ASGIApp, Any]:
    """The ASGI app to route ``/mcp`` to, and the lifespan context the host app must enter (a mounted app's own
    lifespan never runs). The host app's middleware checks Host and Origin, so the SDK's own check is off."""
    app = mcp.streamable_http_app(
        streamable_http_path=MCP_PATH,
        stateless_http=True,
        max_request_body_size=max_body_bytes,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )

    @asynccontextmanager
    async def lifespan() -> AsyncIterator[None]:
        async with mcp.session_manager.run():
            yield

    return BearerOnly(app, token), lifespan


def route(options: Options, token: str | None, max_body_bytes: int) -> tuple[Route, Any]:
    """The ``/mcp`` route (every method, behind the token) and the lifespan its session manager needs, for
    :func:`server.app.create_app`'s ``extra_routes``."""
    endpoint, lifespan = mount(build(options), token, max_body_bytes)
    return Route(MCP_PATH, endpoint=endpoint), lifespan
