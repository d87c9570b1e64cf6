"""The HTTP/1.1 connection layer under ``shardscope serve``: uvicorn's h11 protocol with the connection
deadlines, bounds and pace checks it lacks, and its own answers in our error shape.

Technique: **per-phase read deadlines, minimum data rates, bounded waiting and write-side flow
limits (Slowloris and slow-read defences)**, as ``client_header_timeout`` / ``client_body_timeout`` /
``send_timeout`` in nginx, ``RequestReadTimeout ... MinRate`` in Apache or ``ReadHeaderTimeout`` /
``WriteTimeout`` in Go. uvicorn (0.54) has none of them: its only timer is the keep-alive one, and its
``limit_concurrency`` counts open connections. :class:`GuardedH11Protocol`, passed to
``uvicorn.run(http=...)``, adds, per connection:

* a **head deadline** — the whole request head must arrive within ``max_header_seconds`` of the
  connection opening (or of the first byte of the next request on a kept-alive connection), however
  slowly it trickles; past it the connection is closed, with 408 ``request_timeout`` when part of a
  head had arrived (a socket that never said anything, such as a browser's pre-connection, is just
  closed, which browsers expect); a head longer than ``max_header_bytes`` is 431 however it arrives
  (h11 bounds only a head that is still incomplete, so 60 KB in one read passed);
* **bodies wait apart** — a request waiting for its body holds no request slot (the app's
  ``max_connections`` gate counts it once its body is in, :class:`server.middleware.ConcurrencyLimit`).
  At most ``max_body_waits`` wait at once (one more sets aside the one waiting longest, to be answered 503
  ``overloaded``), at most ``max_client_requests`` from one client address (one more is set aside, to be
  answered 429 ``busy``); a request set aside is read no more and answered after 2 s, so a client that
  reconnects the moment it is answered cannot spin the server; each waits within
  ``max_body_seconds`` and at a pace of at least 1 MiB per ``max_body_seconds_per_mib`` seconds from 2 s
  after its head (408 ``request_timeout``): withheld bodies can no longer take every slot (issue 20:
  1,030 of them made ``/api/health`` 503);
* **the reader keeps the pace** — once a response backs up here (the transport buffers what the kernel
  will not take yet; responses are written 64 KiB at a time, :class:`server.middleware.ChunkedSend`), the
  bytes its reader takes — what the reader's TCP acknowledged: written, less what the transport still
  buffers, less what the kernel still holds unacknowledged (``SIOCOUTQ``, on Linux) — must move: a reader that
  takes nothing for ``max_send_stall_seconds``, or less than 1 MiB per ``max_send_seconds_per_mib`` seconds
  (4 KiB/s) on average from then on, with ``max_send_stall_seconds`` of grace, is cut; and when what all
  readers hold here passes ``max_send_buffer_bytes`` the slowest are cut first, never the server (issue 20:
  60 sockets that never read a 50 MiB snapshot held +2.9 GiB, for ever). Counting at the transport alone (the
  rule before issue 29) saw nothing move while the kernel's send buffer (4 MiB on loopback) drained, so
  steady readers at 8-128 KiB/s were cut after 11-20 s. Acknowledgements come in steps of the reader's
  receive window (its kernel reopens it only once a good part is free: about 93 KiB, 23 s at 4 KiB/s, on
  loopback), hence the 60 s of ``max_send_stall_seconds``;
* **shedding** — at ``max_open_connections`` open connections, a new one closes the connection that
  has been idle longest (waiting for a head or on keep-alive), never one with a request in progress,
  so a flood of idle sockets cannot lock newcomers out or run the process out of file descriptors.

The checks that need a clock run in one sweep every :data:`SWEEP_S` seconds over the connections that
have something to check. The answers uvicorn itself gives (400 for a malformed head, 431 for an
oversized one) are rebuilt here through :func:`server.errors.error_body` with the security headers of
:mod:`server.middleware`.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import inspect
import logging
import random
import socket
import struct
import sys
from typing import Any, ClassVar, Literal

import h11
import uvicorn
from uvicorn.config import Config
from uvicorn.protocols.http.h11_impl import STATUS_PHRASES, H11Protocol
from uvicorn.server import ServerState

from server.errors import ApiError, error_body
from server.middleware import security_headers
from server.quota import client_key
from server.settings import (
    MAX_BODY_SECONDS_PER_MIB,
    MAX_BODY_WAITS,
    MAX_CLIENT_REQUESTS,
    MAX_SEND_BUFFER_BYTES,
    MAX_SEND_SECONDS_PER_MIB,
    MAX_SEND_STALL_SECONDS,
    MIB,
    Settings,
)

log = logging.getLogger("uvicorn.error")

UVICORN_TESTED: tuple[int, int] = (0, 54)
"""The uvicorn release (major, minor) this layer is tested against: pyproject.toml admits ``>=0.54,<0.55`` only,
since :class:`GuardedH11Protocol` subclasses uvicorn's private ``H11Protocol`` and drives its internals
(tests/test_security.py holds pyproject to this)."""
H11_METHODS: tuple[str, ...] = (
    "connection_made", "data_received", "connection_lost", "on_response_complete", "send_400_response",
    "handle_events", "eof_received", "timeout_keep_alive_handler",
)  # fmt: skip
"""``H11Protocol``'s methods this layer overrides or relies on."""
H11_ATTRIBUTES: tuple[str, ...] = (
    "conn", "cycle", "transport", "connections", "server_state", "client", "loop", "flow",
)  # fmt: skip
"""The attributes ``H11Protocol`` sets on itself that this layer reads or replaces (``conn``, ``transport``)."""


def uvicorn_problem(version: str, protocol: type[Any]) -> str | None:
    """Why this layer cannot run on uvicorn ``version`` (its ``H11Protocol``: ``protocol``), or None: another
    release than the one tested, or a method or attribute it relies on gone (each named)."""
    parts = tuple(int(p) for p in version.split(".")[:2] if p.isdigit())
    problems = []
    if parts != UVICORN_TESTED:
        problems.append(f"uvicorn {version} is installed, and this server is tested with "
                        f"{UVICORN_TESTED[0]}.{UVICORN_TESTED[1]}.x only")  # fmt: skip
    missing = [name for name in H11_METHODS if not callable(getattr(protocol, name, None))]
    try:
        source = inspect.getsource(protocol)
    except (OSError, TypeError):
        source = None  # no source to read (a frozen install): the version check stands alone
    if source is not None:
        missing += [name for name in H11_ATTRIBUTES if f"self.{name} =" not in source and f"self.{name}:" not in source]
    if missing:
        problems.append(f"its H11Protocol lacks {', '.join(missing)}")
    if not problems:
        return None
    return (
        "; ".join(problems) + f": server/http.py drives uvicorn's private H11Protocol; install "
        f"'uvicorn>={UVICORN_TESTED[0]}.{UVICORN_TESTED[1]},<{UVICORN_TESTED[0]}.{UVICORN_TESTED[1] + 1}' "
        "(what shardscope's own requirements say)"
    )


_PROBLEM = uvicorn_problem(uvicorn.__version__, H11Protocol)
if _PROBLEM is not None:
    raise ImportError(_PROBLEM)

RESERVED_FDS = 256
"""File descriptors kept free of connections: the SQLite store, the kernel workers' pipes, JAX."""

SHED_WARNING_INTERVAL_S = 10.0
SWEEP_S = 0.25
"""How often the pace of bodies and readers, and the bytes readers hold, are looked at."""
BODY_GRACE_S = 2.0
"""Seconds after its head before a body's pace is checked (a client sends its body right after its head), and
before a request set aside (past the bounds on bodies waiting) is refused."""
PARKED: Literal["parked"] = "parked"

if sys.platform.startswith("linux"):
    import fcntl
    import termios

    _OUTQ: int | None = termios.TIOCOUTQ
else:  # pragma: no cover - what the reader took is then counted at the transport only
    _OUTQ = None


def kernel_unacknowledged(sock: Any) -> int:
    """Bytes of a TCP socket's send queue its peer has not acknowledged (Linux's ``SIOCOUTQ``, which is
    ``TIOCOUTQ``); 0 for anything else, or where the kernel does not say."""
    if _OUTQ is None or sock is None:
        return 0
    try:
        return max(0, int(struct.unpack("i", fcntl.ioctl(sock.fileno(), _OUTQ, b"\0\0\0\0"))[0]))
    except (OSError, ValueError, struct.error):
        return 0


def _declares_body(event: h11.Request) -> bool:
    for name, value in event.headers:
        if name == b"transfer-encoding" or (name == b"content-length" and value.strip() != b"0"):
            return True
    return False


def _head_bytes(event: h11.Request) -> int:
    """The size of a request head as sent: request line, each header line, the blank line."""
    line = len(event.method) + len(event.target) + len(b"  HTTP/1.1\r\n")
    return line + sum(len(k) + len(v) + 4 for k, v in event.headers.raw_items()) + 2


@dataclasses.dataclass
class ConnectionGuard:
    """The limits of one server, and the connections its clock looks at.

    ``idle``: connections waiting for a head or on keep-alive, longest idle first (what shedding closes).
    ``waiting``: requests whose body is still arriving, longest waiting first; ``waits_by_client`` counts
    them per client address. ``sending``: connections with bytes the reader has not taken. ``held``: bytes
    of response bodies the app holds for a connection (by its peer address) beyond what its transport
    buffers, reported by :class:`server.middleware.ChunkedSend`: part of what readers hold in all.
    """

    header_seconds: float
    body_seconds: float
    max_open: int
    max_header_bytes: int
    max_body_waits: int = MAX_BODY_WAITS
    max_client_requests: int = MAX_CLIENT_REQUESTS
    body_seconds_per_mib: float = MAX_BODY_SECONDS_PER_MIB
    send_stall_seconds: float = MAX_SEND_STALL_SECONDS
    send_seconds_per_mib: float = MAX_SEND_SECONDS_PER_MIB
    max_send_buffer_bytes: int = MAX_SEND_BUFFER_BYTES
    body_grace_s: float = BODY_GRACE_S
    idle: dict[GuardedH11Protocol, None] = dataclasses.field(default_factory=dict)
    waiting: dict[GuardedH11Protocol, None] = dataclasses.field(default_factory=dict)
    waits_by_client: collections.Counter[str] = dataclasses.field(default_factory=collections.Counter)
    sending: dict[GuardedH11Protocol, None] = dataclasses.field(default_factory=dict)
    parked: dict[GuardedH11Protocol, float] = dataclasses.field(default_factory=dict)  # -> when it is answered
    held: dict[Any, int] = dataclasses.field(default_factory=dict)
    shed: int = 0
    cut: collections.Counter[str] = dataclasses.field(default_factory=collections.Counter)
    warned_at: dict[str, float] = dataclasses.field(default_factory=dict)
    sweeper: asyncio.TimerHandle | None = None

    @classmethod
    def from_settings(cls, settings: Settings, max_open: int | None = None) -> ConnectionGuard:
        """The guard for ``settings`` (``max_open``: the bound on open connections, when the open-file limit
        leaves less room than ``settings.max_open_connections``)."""
        return cls(
            header_seconds=settings.max_header_seconds,
            body_seconds=settings.max_body_seconds,
            max_open=max_open if max_open is not None else settings.max_open_connections,
            max_header_bytes=settings.max_header_bytes,
            max_body_waits=settings.max_body_waits,
            max_client_requests=settings.max_client_requests,
            body_seconds_per_mib=settings.max_body_seconds_per_mib,
            send_stall_seconds=settings.max_send_stall_seconds,
            send_seconds_per_mib=settings.max_send_seconds_per_mib,
            max_send_buffer_bytes=settings.max_send_buffer_bytes,
        )

    def warn(self, loop: asyncio.AbstractEventLoop, what: str, message: str, *args: object) -> None:
        """Logs ``message`` at most once per :data:`SHED_WARNING_INTERVAL_S` for each kind of ``what``."""
        now = loop.time()
        if now - self.warned_at.get(what, float("-inf")) >= SHED_WARNING_INTERVAL_S:
            self.warned_at[what] = now
            log.warning(message, *args)

    # ---- the sweep: paces and the bytes readers hold ------------------------------------------------------

    def watch(self, loop: asyncio.AbstractEventLoop) -> None:
        """Makes sure the sweep runs while there is something to look at."""
        if self.sweeper is None and (self.waiting or self.sending or self.parked):
            self.sweeper = loop.call_later(SWEEP_S, self.sweep, loop)

    def sweep(self, loop: asyncio.AbstractEventLoop) -> None:
        self.sweeper = None
        now = loop.time()
        for protocol, answer_at in list(self.parked.items()):
            if now >= answer_at and protocol.refusal is not None:
                protocol.answer(protocol.refusal)
        for protocol in list(self.waiting):
            protocol.check_body_pace(now)
        total = 0
        behind: list[tuple[float, GuardedH11Protocol, int]] = []
        for protocol in list(self.sending):
            queued = protocol.check_send_pace(now)
            if queued:
                total += queued + self.held.get(protocol.client, 0)
                behind.append((protocol.send_rate(now), protocol, queued + self.held.get(protocol.client, 0)))
        if total > self.max_send_buffer_bytes:
            # What every reader holds is past the bound: the slowest go first, until it fits.
            for _, protocol, queued in sorted(behind, key=lambda b: b[0]):
                if total <= self.max_send_buffer_bytes:
                    break
                protocol.cut_reader(
                    "buffer",
                    "readers hold more than max_send_buffer_bytes (%d bytes): the slowest cut",
                    self.max_send_buffer_bytes,
                )
                total -= queued
        self.watch(loop)


class _Connection(h11.Connection):
    """h11's server connection, telling its protocol when a request head and a request end are parsed
    (uvicorn's ``handle_events`` is one long loop with no hook of its own). A head the protocol refuses
    is answered here and reported as ``PAUSED``: uvicorn then stops reading and starts no request."""

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
                refusal = self.protocol.head_received(event)
                if refusal is not None:
                    if refusal != PARKED:
                        self.protocol.answer(refusal)
                    return h11.PAUSED
            elif isinstance(event, h11.EndOfMessage):
                self.protocol.body_received()
        return event


class _CountingTransport(asyncio.Transport):
    """The connection's transport, counting the bytes written to it (what the reader has taken is that less
    what the transport still buffers)."""

    def __init__(self, transport: asyncio.Transport, protocol: GuardedH11Protocol) -> None:
        super().__init__()
        self._transport = transport
        self._protocol: GuardedH11Protocol | None = protocol
        self.written = 0

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.written += len(data)
        self._transport.write(data)
        if self._transport.get_write_buffer_size() and self._protocol is not None:
            self._protocol.backlogged()

    def release(self) -> None:
        """Forgets the protocol (the connection is gone): no reference cycle between the two."""
        self._protocol = None

    def get_write_buffer_size(self) -> int:
        return self._transport.get_write_buffer_size()

    def kernel_queued(self) -> int:
        """Bytes the kernel holds for the reader and it has not acknowledged (0 where the kernel does not say)."""
        return kernel_unacknowledged(self._transport.get_extra_info("socket"))

    def is_closing(self) -> bool:
        return self._transport.is_closing()

    def close(self) -> None:
        self._transport.close()

    def abort(self) -> None:
        self._transport.abort()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self._transport.get_extra_info(name, default)

    def pause_reading(self) -> None:
        self._transport.pause_reading()

    def resume_reading(self) -> None:
        self._transport.resume_reading()

    def is_reading(self) -> bool:
        return self._transport.is_reading()

    def set_protocol(self, protocol: asyncio.BaseProtocol) -> None:
        self._transport.set_protocol(protocol)

    def get_protocol(self) -> asyncio.BaseProtocol:
        return self._transport.get_protocol()


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with head and body deadlines, bounded and paced bodies, paced readers,
    idle-connection shedding and error answers in our shape. :func:`protocol_class` makes the subclass for
    one server's settings."""

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
        self.who = ""  # the client address, as quotas count it
        self.body_since = 0.0  # when the awaited body's head arrived
        self.body_bytes = 0  # of it, so far
        self.counting: _CountingTransport | None = None
        self.backlog_since: float | None = None  # when the reader first fell behind (bytes buffered here)
        self.backlog_sent = 0  # what it had taken then
        self.progress = (0, 0.0)  # (bytes taken, when) at the last sweep that saw it take more
        self.refusal: ApiError | None = None  # what a request set aside is answered with (park)

    # ---- the connection's life ------------------------------------------------------------------

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self.counting = _CountingTransport(transport, self)
        self.transport = self.counting  # what each request's cycle writes through
        self.who = client_key(self.client[0] if self.client else None)
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
        elif self in self.guard.waiting:
            self.body_bytes += len(data)
        super().data_received(data)

    def head_received(self, event: h11.Request) -> ApiError | Literal["parked"] | None:
        """A whole request head was parsed: the head deadline is met, the body's starts. Returns the answer
        when the request is refused at once (an oversized head), or :data:`PARKED` when it is set aside to be
        refused later (too many bodies waiting from this client)."""
        self._disarm()
        self.guard.idle.pop(self, None)
        size = _head_bytes(event)
        if size > self.guard.max_header_bytes:
            return self._head_too_large()
        if not _declares_body(event):
            return None
        guard = self.guard
        if guard.waits_by_client[self.who] >= guard.max_client_requests:
            self.park(
                ApiError(
                    429,
                    "busy",
                    f"this client address already has {guard.max_client_requests} requests waiting for their "
                    "bodies (setting max_client_requests)",
                    hint="send each request's body with it, and fewer at once",
                    headers={"retry-after": "1"},
                )
            )
            return PARKED
        while len(guard.waiting) >= guard.max_body_waits:
            oldest = next(iter(guard.waiting))
            guard.warn(
                self.loop,
                "waits",
                "%d requests waiting for their bodies (setting max_body_waits): setting aside the longest waiting",
                guard.max_body_waits,
            )
            oldest.park(
                ApiError(
                    503,
                    "overloaded",
                    f"{guard.max_body_waits} requests were waiting for their bodies and this one had waited longest "
                    "(setting max_body_waits)",
                    hint="send the body with the head, and try again in a moment",
                    headers={"retry-after": "1"},
                )
            )
        self._arm("body", started=True)
        guard.waiting[self] = None
        guard.waits_by_client[self.who] += 1
        self.body_since = self.loop.time()
        self.body_bytes = 0
        guard.watch(self.loop)
        return None

    def park(self, refusal: ApiError) -> None:
        """Sets this request aside: nothing more is read from it, it holds no place among the bodies waiting,
        and it is refused with ``refusal`` once :data:`BODY_GRACE_S` (to twice that) has passed — when a
        withheld body would have been. Answering at once would let a client that reconnects the moment it is
        answered spin the server as fast as it can accept connections; set aside, each connection lasts seconds."""
        self._stop_waiting()
        self._disarm()
        self.refusal = refusal
        # Spread over a second grace period: requests set aside together (a flood) are answered, and come back,
        # spread out rather than in one wave.
        self.guard.parked[self] = self.loop.time() + self.guard.body_grace_s * (1 + random.random())  # noqa: S311
        with contextlib.suppress(RuntimeError, OSError):  # closing already
            self.transport.pause_reading()
        self.guard.watch(self.loop)

    def body_received(self) -> None:
        """A request's last byte was parsed."""
        self._stop_waiting()
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
        self._stop_waiting()
        self.guard.idle.pop(self, None)
        self.guard.sending.pop(self, None)
        self.guard.parked.pop(self, None)
        self.guard.held.pop(self.client, None)
        super().connection_lost(exc)
        # No reference cycle left behind: a connection's objects are then freed the moment it ends, not by
        # the cyclic collector, whose full passes over thousands of them stalled the loop for 0.1-0.25 s each
        # under a flood of connections.
        if isinstance(self.conn, _Connection):
            self.conn.protocol = None
        if self.counting is not None:
            self.counting.release()

    def _stop_waiting(self) -> None:
        guard = self.guard
        if guard.waiting.pop(self, False) is None:
            guard.waits_by_client[self.who] -= 1
            if guard.waits_by_client[self.who] <= 0:
                del guard.waits_by_client[self.who]

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

    # ---- paces --------------------------------------------------------------------------------------

    def check_body_pace(self, now: float) -> None:
        """Cuts a body that arrives slower than 1 MiB per ``max_body_seconds_per_mib`` seconds (after
        :data:`BODY_GRACE_S`)."""
        late = now - self.body_since - self.guard.body_grace_s
        if late <= 0 or self.body_bytes >= late * MIB / self.guard.body_seconds_per_mib:
            return
        if self.cycle is not None and self.cycle.response_started:
            self._close()  # answered already (e.g. 401 before the body): only the rest of the body was missing
            return
        rate = MIB / self.guard.body_seconds_per_mib
        self.guard.cut["slow bodies"] += 1
        self.answer(
            ApiError(
                408,
                "request_timeout",
                f"the request body arrived slower than {rate:.0f} bytes/s (setting max_body_seconds_per_mib)",
                hint="send the whole request at once; the server does not wait for slow or stalled clients",
            )
        )

    def backlogged(self) -> None:
        """The transport holds bytes the reader has not taken: from now on its pace is watched."""
        if self.backlog_since is None:
            now = self.loop.time()
            self.backlog_since, self.backlog_sent = now, self.taken()
            self.progress = (self.backlog_sent, now)
            self.guard.sending[self] = None
            self.guard.watch(self.loop)

    def taken(self) -> int:
        """Bytes the reader has taken: written to the transport, less what it still buffers, less what the kernel
        holds that the reader's TCP has not acknowledged."""
        assert self.counting is not None
        return self.counting.written - self.counting.get_write_buffer_size() - self.counting.kernel_queued()

    def send_rate(self, now: float) -> float:
        """Bytes a second the reader has taken since it fell behind."""
        since = self.backlog_since if self.backlog_since is not None else now
        return (self.taken() - self.backlog_sent) / max(now - since, 1e-3)

    def check_send_pace(self, now: float) -> int:
        """Cuts a reader that takes nothing for ``max_send_stall_seconds``, or falls behind 1 MiB per
        ``max_send_seconds_per_mib`` seconds after that; returns the bytes it still holds here (0 once it
        has caught up, or was cut)."""
        assert self.counting is not None and self.backlog_since is not None
        queued = self.counting.get_write_buffer_size()
        if queued == 0:
            self.backlog_since = None
            self.guard.sending.pop(self, None)
            return 0
        taken = self.taken()
        if taken > self.progress[0]:
            self.progress = (taken, now)
        guard = self.guard
        if now - self.progress[1] > guard.send_stall_seconds:
            self.cut_reader(
                "stalled", "readers that took nothing for %g s cut (setting max_send_stall_seconds)",
                guard.send_stall_seconds,
            )  # fmt: skip
            return 0
        late = now - self.backlog_since - guard.send_stall_seconds
        if late > 0 and taken - self.backlog_sent < late * MIB / guard.send_seconds_per_mib:
            self.cut_reader(
                "slow", "readers slower than 1 MiB per %g s cut (setting max_send_seconds_per_mib)",
                guard.send_seconds_per_mib,
            )  # fmt: skip
            return 0
        return queued

    def cut_reader(self, why: str, message: str, *args: object) -> None:
        """Drops the connection at once: a reset (``SO_LINGER`` 0), so what the kernel holds for the reader is
        freed too rather than offered to a closed window for minutes, and ``abort``, so what the transport
        buffers is freed, not flushed; the response's app sees the client gone."""
        self.guard.cut[why] += 1
        self.guard.warn(self.loop, why, message + " (%d so far)", *args, self.guard.cut[why])
        self.guard.sending.pop(self, None)
        self.backlog_since = None
        self._disarm()
        self.guard.idle.pop(self, None)
        sock = self.transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.transport.abort()

    # ---- shedding -------------------------------------------------------------------------------

    def _shed(self) -> None:
        """One connection too many: close the longest-idle one (this one only when no other is idle)."""
        guard = self.guard
        victim = next((p for p in guard.idle if p is not self), self)
        victim._close()
        self.connections.discard(victim)  # closing: no longer counts against the limit
        guard.shed += 1
        guard.warn(
            self.loop,
            "shed",
            "%d connections open (setting max_open_connections): closing the longest-idle ones (%d so far)",
            guard.max_open,
            guard.shed,
        )

    # ---- answers ----------------------------------------------------------------------------------

    def _close(self) -> None:
        self._disarm()
        self._stop_waiting()
        self.guard.idle.pop(self, None)
        self.guard.parked.pop(self, None)
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

    def _head_too_large(self) -> ApiError:
        return ApiError(
            431,
            "too_large",
            f"the request head is longer than {self.guard.max_header_bytes} bytes (setting max_header_bytes)",
            hint="send fewer or shorter headers",
        )

    def send_400_response(self, msg: str) -> None:
        """uvicorn's answer to a request h11 cannot parse, in our shape (431 for an oversized head)."""
        error = self.conn.error if isinstance(self.conn, _Connection) else None
        if error is not None and error.error_status_hint == 431:
            self.answer(self._head_too_large())
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


def protocol_class(
    settings: Settings, max_open: int | None = None, guard: ConnectionGuard | None = None
) -> type[GuardedH11Protocol]:
    """The protocol class for ``uvicorn.run(http=...)`` with these settings' deadlines and bounds
    (``max_open``: the bound on open connections, when the open-file limit leaves less room than
    ``settings.max_open_connections``; ``guard``: the app's, so that what it holds for readers counts)."""
    if guard is None:
        guard = ConnectionGuard.from_settings(settings, max_open)
    elif max_open is not None:
        guard.max_open = max_open
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
