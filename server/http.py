"""The HTTP/1.1 connection layer under ``shardscope serve``: uvicorn's h11 protocol with the connection
deadlines and the open-connection bound it lacks, and its own answers in our error shape.

Technique: **per-phase read deadlines and idle-connection shedding (a Slowloris defence)**, as
``client_header_timeout`` / ``client_body_timeout`` in nginx, ``RequestReadTimeout`` in Apache or
``ReadHeaderTimeout`` in Go. uvicorn (0.54) has none of them: its only timer is the keep-alive one,
armed after a response and cancelled by any byte, so a connection that never sends a byte, or
trickles its head one byte at a time, is held for ever (uvicorn issue 157 still lists
``--timeout-request-start`` as open); and its ``limit_concurrency`` counts *open connections*, so
about a thousand silent sockets turned every request into a 503. :class:`GuardedH11Protocol`, passed
to ``uvicorn.run(http=...)``, adds, per connection:

* a **head deadline** — the whole request head must arrive within ``max_header_seconds`` of the
  connection opening (or of the first byte of the next request on a kept-alive connection), however
  slowly it trickles; past it the connection is closed, with 408 ``request_timeout`` when part of a
  head had arrived (a socket that never said anything, such as a browser's pre-connection, is just
  closed, which browsers expect);
* a **body deadline** — a declared body must arrive within ``max_body_seconds`` of its head;
* **shedding** — at ``max_open_connections`` open connections, a new one closes the connection that
  has been idle longest (waiting for a head or on keep-alive), never one with a request in progress,
  so a flood of idle sockets cannot lock newcomers out or run the process out of file descriptors.

The requests-in-progress limit (``max_connections``) is :class:`server.middleware.ConcurrencyLimit`,
inside the app, so only requests count and its 503 carries the usual headers. The answers uvicorn
itself gives (400 for a malformed head, 431 for an oversized one) are rebuilt here through
:func:`server.errors.error_body` with the security headers of :mod:`server.middleware`.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import sys
from typing import Any, ClassVar, Literal

import h11
from uvicorn.config import Config
from uvicorn.protocols.http.h11_impl import STATUS_PHRASES, H11Protocol
from uvicorn.server import ServerState

from server.errors import ApiError, error_body
from server.middleware import security_headers
from server.settings import Settings

log = logging.getLogger("uvicorn.error")

RESERVED_FDS = 256
"""File descriptors kept free of connections: the SQLite store, the kernel workers' pipes, JAX."""

SHED_WARNING_INTERVAL_S = 10.0


def _declares_body(event: h11.Request) -> bool:
    for name, value in event.headers:
        if name == b"transfer-encoding" or (name == b"content-length" and value.strip() != b"0"):
            return True
    return False


@dataclasses.dataclass
class ConnectionGuard:
    """The limits of one server, and its idle connections, longest idle first (what shedding closes)."""

    header_seconds: float
    body_seconds: float
    max_open: int
    max_header_bytes: int
    idle: dict[GuardedH11Protocol, None] = dataclasses.field(default_factory=dict)
    shed: int = 0
    warned_at: float = float("-inf")


class _Connection(h11.Connection):
    """h11's server connection, telling its protocol when a request head and a request end are parsed
    (uvicorn's ``handle_events`` is one long loop with no hook of its own)."""

    def __init__(self, protocol: GuardedH11Protocol, max_incomplete_event_size: int | None) -> None:
        if max_incomplete_event_size is None:
            super().__init__(h11.SERVER)
        else:
            super().__init__(h11.SERVER, max_incomplete_event_size)
        self.protocol: GuardedH11Protocol | None = protocol
        self.error: h11.RemoteProtocolError | None = None

    def next_event(self) -> h11.Event | type[h11.NEED_DATA] | type[h11.PAUSED]:
        try:
            event = super().next_event()
        except h11.RemoteProtocolError as e:
            self.error = e
            raise
        if self.protocol is not None:
            if isinstance(event, h11.Request):
                self.protocol.head_received(event)
            elif isinstance(event, h11.EndOfMessage):
                self.protocol.body_received()
        return event


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with head and body deadlines, idle-connection shedding and error answers
    in our shape. :func:`protocol_class` makes the subclass for one server's settings."""

    guard: ClassVar[ConnectionGuard]

    def __init__(
        self,
        config: Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        super().__init__(config, server_state, app_state, _loop)
        self.conn = _Connection(self, config.h11_max_incomplete_event_size)
        self.deadline: asyncio.TimerHandle | None = None
        self.phase: Literal["head", "body"] = "head"
        self.head_started = False  # a byte of the awaited head has arrived (408 rather than a silent close)

    # ---- the connection's life ------------------------------------------------------------------

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self.guard.idle[self] = None
        self._arm("head", started=False)
        if len(self.connections) > self.guard.max_open:
            self._shed()

    def data_received(self, data: bytes) -> None:
        if self.deadline is None and self.conn.their_state is h11.IDLE:
            # The first byte of the next request on a kept-alive connection (uvicorn's keep-alive timer,
            # which this byte cancels, covered the wait before it).
            self._arm("head", started=True)
        elif self.phase == "head" and data:
            self.head_started = True
        super().data_received(data)

    def head_received(self, event: h11.Request) -> None:
        """A whole request head was parsed: the head deadline is met, the body's starts."""
        self._disarm()
        self.guard.idle.pop(self, None)
        if _declares_body(event):
            self._arm("body", started=True)

    def body_received(self) -> None:
        """A request's last byte was parsed."""
        if self.phase == "body":
            self._disarm()
        if self.conn.our_state is h11.DONE:
            # The response went out before the body was read; uvicorn starts the next cycle without
            # a keep-alive timer (a byte of this body cancelled it), so the wait for a head is ours.
            self._arm("head", started=False)

    def on_response_complete(self) -> None:
        if not self.transport.is_closing():
            self.guard.idle[self] = None  # at the end: idle from now on
        super().on_response_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        self.guard.idle.pop(self, None)
        super().connection_lost(exc)
        if isinstance(self.conn, _Connection):
            self.conn.protocol = None  # no reference cycle left behind

    # ---- deadlines ------------------------------------------------------------------------------

    def _arm(self, phase: Literal["head", "body"], *, started: bool) -> None:
        self._disarm()
        self.phase = phase
        self.head_started = started
        seconds = self.guard.header_seconds if phase == "head" else self.guard.body_seconds
        self.deadline = self.loop.call_later(seconds, self._expired)

    def _disarm(self) -> None:
        if self.deadline is not None:
            self.deadline.cancel()
            self.deadline = None

    def _expired(self) -> None:
        self.deadline = None
        if self.transport.is_closing():
            return
        if self.phase == "head":
            if not self.head_started:
                self._close()  # never said a word: nothing to answer
                return
            what, setting, seconds = "request head", "max_header_seconds", self.guard.header_seconds
        else:
            if self.cycle is not None and self.cycle.response_started:
                self._close()  # answered already: only the rest of the body was missing
                return
            what, setting, seconds = "request body", "max_body_seconds", self.guard.body_seconds
        self.answer(
            ApiError(
                408,
                "request_timeout",
                f"the {what} did not arrive within {seconds:g} s (setting {setting})",
                hint="send the whole request at once; the server does not wait for slow or stalled clients",
            )
        )

    # ---- shedding -------------------------------------------------------------------------------

    def _shed(self) -> None:
        """One connection too many: close the longest-idle one (this one only when no other is idle)."""
        guard = self.guard
        victim = next((p for p in guard.idle if p is not self), self)
        victim._close()
        self.connections.discard(victim)  # closing: no longer counts against the limit
        guard.shed += 1
        now = self.loop.time()
        if now - guard.warned_at >= SHED_WARNING_INTERVAL_S:
            guard.warned_at = now
            self.logger.warning(
                "%d connections open (setting max_open_connections): closing the longest-idle ones (%d so far)",
                guard.max_open,
                guard.shed,
            )

    # ---- answers ----------------------------------------------------------------------------------

    def _close(self) -> None:
        self._disarm()
        self.guard.idle.pop(self, None)
        if not self.transport.is_closing():
            with contextlib.suppress(h11.LocalProtocolError):  # mid-message: the close itself says it
                self.conn.send(h11.ConnectionClosed())
            self.transport.close()

    def answer(self, error: ApiError) -> None:
        """Writes ``error`` in our shape, with the security headers, and closes the connection."""
        body = error_body(error)
        headers = [
            *self.server_state.default_headers,
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"connection", b"close"),
            *security_headers(),
            *((k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in error.headers.items()),
        ]
        try:
            out = self.conn.send(
                h11.Response(status_code=error.status, headers=headers, reason=STATUS_PHRASES[error.status])
            )
            out = (out or b"") + (self.conn.send(h11.Data(data=body)) or b"")
            out += self.conn.send(h11.EndOfMessage()) or b""
        except h11.LocalProtocolError:
            out = b""  # a response is already under way: closing is all that is left
        if out:
            self.transport.write(out)
        self._close()

    def send_400_response(self, msg: str) -> None:
        """uvicorn's answer to a request h11 cannot parse, in our shape (431 for an oversized head)."""
        error = self.conn.error if isinstance(self.conn, _Connection) else None
        if error is not None and error.error_status_hint == 431:
            self.answer(
                ApiError(
                    431,
                    "too_large",
                    f"the request head is longer than {self.guard.max_header_bytes} bytes (setting max_header_bytes)",
                    hint="send fewer or shorter headers",
                )
            )
            return
        # Other hints (501 for an unknown Transfer-Encoding) are still bad input: 400, never 5xx.
        detail = str(error)[:120] if error is not None else msg
        self.answer(
            ApiError(
                400,
                "bad_request",
                f"this is not a valid HTTP/1.1 request ({detail})",
                hint="send an HTTP/1.1 request with a Host header",
            )
        )


def protocol_class(settings: Settings, max_open: int | None = None) -> type[GuardedH11Protocol]:
    """The protocol class for ``uvicorn.run(http=...)`` with these settings' deadlines and bound
    (``max_open``: the bound on open connections, when the open-file limit leaves less room than
    ``settings.max_open_connections``)."""
    guard = ConnectionGuard(
        header_seconds=settings.max_header_seconds,
        body_seconds=settings.max_body_seconds,
        max_open=max_open if max_open is not None else settings.max_open_connections,
        max_header_bytes=settings.max_header_bytes,
    )
    return type("GuardedH11Protocol", (GuardedH11Protocol,), {"guard": guard})


def raise_open_file_limit() -> tuple[int, int] | None:
    """Raises this process's open-file limit (``RLIMIT_NOFILE``) to its hard limit, so thousands of
    sockets do not end in ``EMFILE``; returns (before, after), or None where there is no such limit."""
    if sys.platform == "win32":
        return None
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    # An unlimited hard limit (macOS) cannot be the soft one; the kernel's per-process cap is lower.
    target = hard if hard != resource.RLIM_INFINITY else max(soft, 65536)
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError):
            return soft, soft
        return soft, target
    return soft, soft
