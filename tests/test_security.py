"""Each security middleware on its own, driven with a fake ASGI scope (no server, no FastAPI)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from fastapi.testclient import TestClient
from uvicorn.config import Config
from uvicorn.server import ServerState

from server.docs import DOCS_CSP
from server.http import ConnectionGuard, GuardedH11Protocol, protocol_class
from server.middleware import (
    CSP,
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
    host_name,
    origin_host,
)
from tests.conftest import ClientFactory
from tests.helpers import Inner, error_code, headers, run, scope, status

# ---- SecurityHeaders --------------------------------------------------------------------------------


def test_security_headers_on_every_response_replacing_inner_ones() -> None:
    async def weak(scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 404, "headers": [(b"content-security-policy", b"*")]})
        await send({"type": "http.response.body", "body": b""})

    sent, _ = run(SecurityHeaders(weak), scope())
    h = headers(sent)
    assert h[b"content-security-policy"] == CSP.encode()
    assert [k for k, _ in sent[0]["headers"]].count(b"content-security-policy") == 1
    assert h[b"x-content-type-options"] == b"nosniff"
    assert h[b"referrer-policy"] == b"no-referrer"


def test_csp_is_strict() -> None:
    directives = dict(d.strip().split(" ", 1) for d in CSP.split(";"))
    assert directives["default-src"] == "'self'"
    assert directives["script-src"] == "'self'"
    assert directives["style-src"] == "'self'"
    assert directives["object-src"] == "'none'"
    assert directives["base-uri"] == "'none'"
    assert directives["frame-ancestors"] == "'none'"
    assert "unsafe" not in CSP


def test_csp_override_applies_to_its_path_only() -> None:
    app = SecurityHeaders(Inner(), csp_overrides={"/docs": DOCS_CSP})
    assert headers(run(app, scope(path="/docs"))[0])[b"content-security-policy"] == DOCS_CSP.encode()
    assert headers(run(app, scope(path="/docs/x"))[0])[b"content-security-policy"] == CSP.encode()
    assert "unsafe" not in DOCS_CSP and "'none'" in DOCS_CSP


# ---- CatchAll ------------------------------------------------------------------------------------------


def test_catch_all_answers_500_without_details(caplog: pytest.LogCaptureFixture) -> None:
    async def broken(scope: Scope, receive: Receive, send: Send) -> None:
        raise KeyError("password=hunter2")

    sent, _ = run(CatchAll(broken), scope())
    assert status(sent) == 500 and error_code(sent) == "internal_error"
    assert b"hunter2" not in sent[1]["body"]
    assert "hunter2" in caplog.text


def test_catch_all_reraises_once_the_response_started() -> None:
    async def half(scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        raise RuntimeError("mid-stream")

    with pytest.raises(RuntimeError):
        run(CatchAll(half), scope())


# ---- HostCheck -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "host", ["localhost", "localhost:8000", "127.0.0.1", "127.0.0.1:1", "[::1]", "[::1]:8000", "LOCALHOST:80"]
)
def test_host_check_accepts_loopback_names(host: str) -> None:
    inner = Inner()
    sent, _ = run(HostCheck(inner), scope(headers=[("host", host)]))
    assert inner.called and status(sent) == 200


@pytest.mark.parametrize(
    "host",
    [
        "evil.example",
        "evil.example:8000",
        "localhost.evil.example",
        "127.0.0.1.nip.io",
        "localhost.",
        "127.0.0.2",  # loopback, but not a name we answer to
        "[::1",
        "localhost:80x",
        "localhost:",
        "",
        "0.0.0.0:8000",
    ],
)
def test_host_check_refuses_other_names(host: str) -> None:
    inner = Inner()
    sent, _ = run(HostCheck(inner), scope(headers=[("host", host)]))
    assert not inner.called
    assert status(sent) == 400 and error_code(sent) == "bad_host"


def test_host_check_refuses_a_missing_host_and_can_be_disabled() -> None:
    assert status(run(HostCheck(Inner()), scope())[0]) == 400
    inner = Inner()
    assert status(run(HostCheck(inner, allowed=None), scope(headers=[("host", "anything")]))[0]) == 200
    assert inner.called


def test_host_name_parsing() -> None:
    assert host_name("[::1]:8000") == "[::1]"
    assert host_name("Example.COM:443") == "example.com"
    assert host_name("a:b") is None


# ---- CrossSiteCheck --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "hdrs",
    [
        [("sec-fetch-site", "cross-site")],
        [("sec-fetch-site", "same-site")],
        [("origin", "https://evil.example")],
        [("origin", "null")],
        [("origin", "http://127.0.0.1:9999")],  # another local app
        [("origin", "http://localhost:8000")],  # a different origin than 127.0.0.1:8000
    ],
)
def test_cross_site_posts_are_refused(hdrs: list[tuple[str, str]]) -> None:
    inner = Inner()
    sent, _ = run(CrossSiteCheck(inner), scope("POST", headers=[("host", "127.0.0.1:8000"), *hdrs]))
    assert not inner.called
    assert status(sent) == 403 and error_code(sent) == "cross_site_request"


@pytest.mark.parametrize(
    "hdrs",
    [
        [],  # a script: no Origin, no Fetch Metadata
        [("sec-fetch-site", "same-origin"), ("origin", "http://127.0.0.1:8000")],
        [("sec-fetch-site", "none")],  # typed into the address bar / a bookmark
        [("origin", "HTTP://127.0.0.1:8000")],
    ],
)
def test_same_origin_posts_pass(hdrs: list[tuple[str, str]]) -> None:
    inner = Inner()
    run(CrossSiteCheck(inner), scope("POST", headers=[("host", "127.0.0.1:8000"), *hdrs]))
    assert inner.called


def test_cross_site_gets_pass() -> None:
    # Reading is guarded by the same-origin policy; only state changes need the check.
    inner = Inner()
    run(CrossSiteCheck(inner), scope("GET", headers=[("host", "127.0.0.1"), ("sec-fetch-site", "cross-site")]))
    assert inner.called


def test_origin_host_parsing() -> None:
    assert origin_host("http://localhost:80") == "localhost"
    assert origin_host("https://x.example:443") == "x.example"
    assert origin_host("http://[::1]:8000") == "[::1]:8000"
    assert origin_host("null") is None
    assert origin_host("file://") is None


# ---- JsonOnly ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "content_type", ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "", "json"]
)
def test_non_json_bodies_are_refused(content_type: str) -> None:
    inner = Inner()
    hdrs = [("content-length", "2")] + ([("content-type", content_type)] if content_type else [])
    sent, _ = run(JsonOnly(inner), scope("POST", headers=hdrs))
    assert not inner.called
    assert status(sent) == 415 and error_code(sent) == "unsupported_media_type"


@pytest.mark.parametrize("content_type", ["application/json", "application/json; charset=utf-8", "Application/JSON"])
def test_json_bodies_pass(content_type: str) -> None:
    inner = Inner()
    run(JsonOnly(inner), scope("POST", headers=[("content-type", content_type), ("transfer-encoding", "chunked")]))
    assert inner.called


def test_bodiless_posts_and_gets_pass_json_only() -> None:
    for sc in (scope("POST"), scope("POST", headers=[("content-length", "0")]), scope("GET")):
        inner = Inner()
        run(JsonOnly(inner), sc)
        assert inner.called


# ---- BodyLimit ------------------------------------------------------------------------------------------------


def test_declared_length_over_the_limit_is_refused_unread() -> None:
    inner = Inner(read_body=True)
    sent, pulled = run(BodyLimit(inner, max_bytes=10), scope("POST", headers=[("content-length", "11")]), [b"x" * 11])
    assert not inner.called and pulled == 0
    assert status(sent) == 413 and error_code(sent) == "too_large"
    assert headers(sent)[b"connection"] == b"close"


def test_declared_length_at_the_limit_passes() -> None:
    inner = Inner(read_body=True)
    sent, _ = run(BodyLimit(inner, max_bytes=10), scope("POST", headers=[("content-length", "10")]), [b"x" * 10])
    assert status(sent) == 200 and inner.body == b"x" * 10


def test_streamed_body_is_cut_at_the_limit() -> None:
    inner = Inner(read_body=True)
    chunks = [b"x" * 4] * 100  # 400 bytes, chunked, no Content-Length
    sent, pulled = run(
        BodyLimit(inner, max_bytes=10), scope("POST", headers=[("transfer-encoding", "chunked")]), chunks
    )
    assert status(sent) == 413 and error_code(sent) == "too_large"
    assert pulled == 3  # 12 bytes: one chunk past the limit, and not one more
    assert len(sent) == 2  # the app's own answer after the cut was dropped


def test_streamed_body_at_the_limit_passes() -> None:
    inner = Inner(read_body=True)
    sent, _ = run(BodyLimit(inner, max_bytes=12), scope("POST"), [b"x" * 4] * 3)
    assert status(sent) == 200 and inner.body == b"x" * 12


def test_under_declared_length_is_still_counted() -> None:
    inner = Inner(read_body=True)
    sent, _ = run(BodyLimit(inner, max_bytes=10), scope("POST", headers=[("content-length", "5")]), [b"x" * 6] * 2)
    assert status(sent) == 413


# ---- ConcurrencyLimit ----------------------------------------------------------------------------------------------


def test_requests_past_the_limit_get_503_while_the_others_run() -> None:
    release = asyncio.Event()

    async def slow(scope: Scope, receive: Receive, send: Send) -> None:
        await release.wait()
        await Inner()(scope, receive, send)

    limit = ConcurrencyLimit(slow, max_requests=2)

    async def one() -> list[Any]:
        sent: list[Any] = []

        async def receive() -> Any:
            return {"type": "http.request", "body": b"", "more_body": False}

        async def send(message: Any) -> None:
            sent.append(message)

        await limit(scope(), receive, send)
        return sent

    async def main() -> list[list[Any]]:
        at_limit = [asyncio.create_task(one()) for _ in range(2)]
        await asyncio.sleep(0)
        past = await one()  # answered while the two are still in progress
        assert limit.active == 2
        release.set()
        return [past, *await asyncio.gather(*at_limit)]

    past, *served = asyncio.run(main())
    assert status(past) == 503 and error_code(past) == "overloaded"
    assert headers(past)[b"retry-after"] == b"1" and headers(past)[b"connection"] == b"close"
    assert [status(s) for s in served] == [200, 200]
    assert limit.active == 0
    assert status(run(limit, scope())[0]) == 200  # the slots came back


# ---- the connection layer (server/http.py) with a fake transport ----------------------------------------------


class FakeTransport:
    """A socket's transport: what was written, whether it was closed or aborted, and ``unread`` — how many of
    the written bytes a reader has not taken (the transport's buffer)."""

    def __init__(self, peer: str = "127.0.0.1", port: int = 50000) -> None:
        self.out = b""
        self.closed = False
        self.aborted = False
        self.unread = 0
        self.peer = (peer, port)

    def write(self, data: bytes) -> None:
        self.out += data

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.closed = self.aborted = True

    def is_closing(self) -> bool:
        return self.closed

    def get_write_buffer_size(self) -> int:
        return self.unread

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": self.peer, "sockname": ("127.0.0.1", 8000)}.get(name, default)

    def pause_reading(self) -> None: ...

    def resume_reading(self) -> None: ...


async def _never_answers(scope: Scope, receive: Receive, send: Send) -> None:
    await asyncio.sleep(3600)


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    loop = asyncio.new_event_loop()
    yield loop
    for task in asyncio.all_tasks(loop):
        task.cancel()
    loop.run_until_complete(asyncio.sleep(0.01))
    loop.close()


def _connect(
    cls: type[GuardedH11Protocol], loop: asyncio.AbstractEventLoop, state: ServerState
) -> tuple[GuardedH11Protocol, FakeTransport]:
    config = Config(app=_never_answers, log_config=None, h11_max_incomplete_event_size=1024)
    protocol = cls(config, state, {}, _loop=loop)
    transport = FakeTransport()
    protocol.connection_made(transport)  # type: ignore[arg-type]
    return protocol, transport


def _guarded(header_seconds: float = 5, body_seconds: float = 5, max_open: int = 64) -> type[GuardedH11Protocol]:
    guard = ConnectionGuard(header_seconds, body_seconds, max_open, max_header_bytes=1024)
    return type("Guarded", (GuardedH11Protocol,), {"guard": guard})


def _parse(raw: bytes) -> tuple[int, dict[bytes, bytes], Any]:
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    fields = dict(line.split(b": ", 1) for line in lines[1:])
    return int(lines[0].split(b" ")[1]), {k.lower(): v for k, v in fields.items()}, orjson.loads(body)


def _assert_ours(raw: bytes, status_code: int, code: str) -> None:
    got, fields, body = _parse(raw)
    assert got == status_code and set(body) == {"error"} and body["error"]["code"] == code, raw
    assert body["error"]["message"] and body["error"]["hint"]
    assert fields[b"content-type"] == b"application/json" and fields[b"connection"] == b"close"
    assert fields[b"content-security-policy"] == CSP.encode() and fields[b"x-content-type-options"] == b"nosniff"
    assert fields[b"referrer-policy"] == b"no-referrer" and fields[b"cross-origin-resource-policy"] == b"same-origin"
    assert b"server" not in fields


@pytest.mark.parametrize(
    ("head", "status_code", "code"),
    [
        (b"garbage\r\n\r\n", 400, "bad_request"),
        (b"GET / HTTP/1.1\r\n\r\n", 400, "bad_request"),  # no Host
        (b"GET / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\n", 400, "bad_request"),  # h11 hints 501
        (b"GET / HTTP/1.1\r\nHost: a\r\nX: " + b"a" * 2048, 431, "too_large"),
    ],
    ids=["request-line", "no-host", "transfer-encoding", "oversized-head"],
)
def test_malformed_heads_are_answered_in_our_shape(
    loop: asyncio.AbstractEventLoop, head: bytes, status_code: int, code: str
) -> None:
    protocol, transport = _connect(_guarded(), loop, ServerState())
    protocol.data_received(head)
    _assert_ours(transport.out, status_code, code)
    assert transport.closed


def test_a_late_head_gets_408_and_a_silent_socket_is_just_closed(loop: asyncio.AbstractEventLoop) -> None:
    cls, state = _guarded(header_seconds=0.05), ServerState()
    _, silent_t = _connect(cls, loop, state)
    partial, partial_t = _connect(cls, loop, state)
    partial.data_received(b"GET / HTTP/1.1\r\nHost: a\r\n")
    loop.run_until_complete(asyncio.sleep(0.02))
    assert not silent_t.closed and not partial_t.closed
    loop.run_until_complete(asyncio.sleep(0.1))
    assert silent_t.closed and silent_t.out == b""
    _assert_ours(partial_t.out, 408, "request_timeout")
    assert partial_t.closed


def test_a_late_body_gets_408(loop: asyncio.AbstractEventLoop) -> None:
    protocol, transport = _connect(_guarded(body_seconds=0.05), loop, ServerState())
    protocol.data_received(b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\n12345")
    loop.run_until_complete(asyncio.sleep(0.1))
    _assert_ours(transport.out, 408, "request_timeout")
    assert "max_body_seconds" in _parse(transport.out)[2]["error"]["message"]


def test_a_complete_head_stops_the_clock(loop: asyncio.AbstractEventLoop) -> None:
    protocol, transport = _connect(_guarded(header_seconds=0.05), loop, ServerState())
    protocol.data_received(b"GET / HTTP/1.1\r\n")
    protocol.data_received(b"Host: a\r\n\r\n")  # the app now runs (and never answers)
    loop.run_until_complete(asyncio.sleep(0.1))
    assert not transport.closed and transport.out == b""


def test_one_connection_too_many_closes_the_longest_idle_never_a_busy_one(loop: asyncio.AbstractEventLoop) -> None:
    cls, state = _guarded(max_open=3), ServerState()
    busy, busy_t = _connect(cls, loop, state)
    busy.data_received(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n")  # a request in progress
    (_, old_t), (_, mid_t) = _connect(cls, loop, state), _connect(cls, loop, state)
    assert not any(t.closed for t in (busy_t, old_t, mid_t))  # at the limit: nothing closed
    _, new_t = _connect(cls, loop, state)  # one past it
    assert old_t.closed and old_t.out == b""
    assert not busy_t.closed and not mid_t.closed and not new_t.closed
    assert len(state.connections) == 3


def test_protocol_class_takes_the_settings() -> None:
    from server.settings import Settings

    settings = Settings().with_values([("max_header_seconds", 7), ("max_body_seconds", 9)])
    cls = protocol_class(settings, max_open=100)
    assert issubclass(cls, GuardedH11Protocol)
    assert (cls.guard.header_seconds, cls.guard.body_seconds, cls.guard.max_open) == (7, 9, 100)
    assert cls.guard.max_header_bytes == settings.max_header_bytes


# ---- the stack, through the app ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def client(make_client: ClientFactory) -> TestClient:
    return make_client(base_url="http://localhost:8000")


@pytest.mark.parametrize(
    "path", ["/", "/js/views/layout.js", "/css/app.css", "/api/health", "/openapi.json", "/nope", "/docs"]
)
def test_every_response_has_the_headers(client: TestClient, path: str) -> None:
    response = client.get(path)
    assert response.headers["x-content-type-options"] == "nosniff"
    assert response.headers["referrer-policy"] == "no-referrer"
    assert "frame-ancestors 'none'" in response.headers["content-security-policy"]


@pytest.mark.parametrize(
    "raw_path", ["/../pyproject.toml", "/..%2fpyproject.toml", "/%2e%2e/pyproject.toml", "/frontend/../README.md"]
)
def test_static_files_do_not_escape_the_frontend_directory(client: TestClient, raw_path: str) -> None:
    # The ASGI scope as a server would build it (clients normalise "..", so go below them).
    from urllib.parse import unquote

    app = client.app
    sent, _ = run(
        app,
        scope(
            path=unquote(raw_path),
            headers=[("host", "localhost")],
            raw_path=raw_path.encode(),
            query_string=b"",
            root_path="",
            server=("localhost", 80),
            scheme="http",
        ),
    )
    assert status(sent) == 404


def test_bind_to_non_loopback_accepts_any_host(make_client: ClientFactory) -> None:
    c = make_client(bind_host="0.0.0.0", base_url="http://dashboard.internal")
    assert c.get("/api/health").status_code == 200
    # CSRF protection does not depend on the bind address.
    response = c.post("/api/links", json={"view": "v", "state": {}}, headers={"origin": "http://evil.example"})
    assert response.status_code == 403


def test_allowed_hosts_can_be_given(make_client: ClientFactory) -> None:
    c = make_client(bind_host="127.0.0.1", allowed_hosts=["dash.example"], base_url="http://dash.example")
    assert c.get("/api/health").status_code == 200
    assert c.get("/api/health", headers={"host": "localhost"}).status_code == 400


@pytest.mark.parametrize(
    ("bind", "host"), [("127.0.0.2", "127.0.0.2:8000"), ("::1", "[::1]:8000"), ("localhost", "localhost")]
)
def test_the_loopback_bind_address_itself_is_accepted(make_client: ClientFactory, bind: str, host: str) -> None:
    c = make_client(bind_host=bind, base_url="http://127.0.0.1")
    assert c.get("/api/health", headers={"host": host}).status_code == 200
    assert c.get("/api/health", headers={"host": "evil.example"}).status_code == 400


# ---- issue 20: bodies wait apart and at a pace, heads in one read, readers at a pace ----------------------------


def _guard(**limits: Any) -> type[GuardedH11Protocol]:
    guard = ConnectionGuard(5, 5, 64, max_header_bytes=1024, **limits)
    return type("Guarded", (GuardedH11Protocol,), {"guard": guard})


def _open(cls: type[GuardedH11Protocol], loop: asyncio.AbstractEventLoop, peer: str = "127.0.0.1", port: int = 50000
          ) -> tuple[GuardedH11Protocol, FakeTransport]:  # fmt: skip
    config = Config(app=_never_answers, log_config=None, h11_max_incomplete_event_size=1024)
    protocol = cls(config, ServerState(), {}, _loop=loop)
    transport = FakeTransport(peer, port)
    protocol.connection_made(transport)  # type: ignore[arg-type]
    return protocol, transport


WITHHELD = b"POST /api/layout HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n"


def test_a_head_past_the_limit_in_one_read_gets_431(loop: asyncio.AbstractEventLoop) -> None:
    """Issue 20: h11 bounds only an unfinished head, so 60 KB arriving in one read was served (200)."""
    start = b"GET / HTTP/1.1\r\nHost: a\r\nX-Pad: "
    at_limit = start + b"a" * (1024 - len(start) - 4) + b"\r\n\r\n"
    assert len(at_limit) == 1024
    protocol, transport = _open(_guard(), loop)
    protocol.data_received(at_limit)  # at the limit: the app runs (and never answers)
    assert transport.out == b"" and not transport.closed
    protocol, transport = _open(_guard(), loop)
    protocol.data_received(start + b"a" * (1024 - len(start) - 3) + b"\r\n\r\n")  # one byte past it
    _assert_ours(transport.out, 431, "too_large")
    assert transport.closed


class Clock:
    """The event loop as the guard's sweep sees it, at a time the test sets (no waiting, nothing flaky)."""

    def __init__(self, now: float, loop: asyncio.AbstractEventLoop) -> None:
        self.now, self.loop = now, loop

    def time(self) -> float:
        return self.now

    def call_later(self, delay: float, callback: Any, *args: Any) -> asyncio.TimerHandle:
        return asyncio.TimerHandle(self.now + delay, callback, args, self.loop)  # made, never scheduled


def sweep(cls: type[GuardedH11Protocol], at: float, loop: asyncio.AbstractEventLoop) -> None:
    cls.guard.sweeper = None
    cls.guard.sweep(Clock(at, loop))  # type: ignore[arg-type]


def test_bodies_waiting_are_bounded_and_the_longest_waiting_goes(loop: asyncio.AbstractEventLoop) -> None:
    cls = _guard(max_body_waits=8)
    waiting = [_open(cls, loop, f"10.0.0.{i}") for i in range(8)]
    for protocol, _ in waiting:
        protocol.data_received(WITHHELD)
    assert not any(t.closed for _, t in waiting) and len(cls.guard.waiting) == 8  # at the limit
    newest, _ = _open(cls, loop, "10.0.1.1")
    newest.data_received(WITHHELD)  # one past it: the one waiting longest is set aside, the newcomer waits
    assert waiting[0][0] in cls.guard.parked and waiting[0][0] not in cls.guard.waiting
    assert newest in cls.guard.waiting and len(cls.guard.waiting) == 8
    t0 = newest.body_since
    sweep(cls, t0 + 1.9, loop)
    assert waiting[0][1].out == b""  # answered only when a withheld body would have been (no spinning)
    sweep(cls, t0 + 4.1, loop)  # the grace (2 s) to twice it
    _assert_ours(waiting[0][1].out, 503, "overloaded")
    assert "max_body_waits" in _parse(waiting[0][1].out)[2]["error"]["message"]
    assert not cls.guard.parked


def test_one_client_may_have_only_so_many_bodies_waiting(loop: asyncio.AbstractEventLoop) -> None:
    cls = _guard(max_client_requests=2)
    mine = [_open(cls, loop, "10.0.0.1", 50000 + i) for i in range(3)]
    for protocol, _ in mine[:2]:
        protocol.data_received(WITHHELD)
    assert not any(t.closed for _, t in mine[:2])  # at the limit
    mine[2][0].data_received(WITHHELD)  # one past it, from the same address: set aside, answered later
    assert mine[2][0] in cls.guard.parked and mine[2][1].out == b""
    other, other_t = _open(cls, loop, "10.0.0.2")
    other.data_received(WITHHELD)  # another address has its own
    assert not other_t.closed and cls.guard.waits_by_client == {"10.0.0.1": 2, "10.0.0.2": 1}
    mine[0][0].connection_lost(None)
    assert cls.guard.waits_by_client["10.0.0.1"] == 1
    sweep(cls, other.body_since + 4.1, loop)
    _assert_ours(mine[2][1].out, 429, "busy")


def test_a_body_slower_than_the_pace_is_cut_and_one_that_keeps_it_is_not(loop: asyncio.AbstractEventLoop) -> None:
    cls = _guard(body_seconds_per_mib=1024)  # 1 KiB/s, from 2 s after the head
    slow, slow_t = _open(cls, loop, "10.0.0.1")
    steady, steady_t = _open(cls, loop, "10.0.0.2")
    slow.data_received(WITHHELD)
    steady.data_received(WITHHELD)
    # The earlier head (the slow one's, by the loop's real clock): under load the two are milliseconds apart, and
    # counting from the later one cut the slow body a sweep early (a flaky failure, not a change of rule).
    t0 = min(slow.body_since, steady.body_since)
    for second in range(1, 11):
        steady.data_received(b"1," * 512)  # 1 KiB a second
        if not slow_t.closed:
            slow.data_received(b"1")  # a byte a second
        sweep(cls, t0 + second, loop)
        assert slow_t.closed == (second >= 3), second  # cut once the grace has passed, not before
    _assert_ours(slow_t.out, 408, "request_timeout")
    assert "max_body_seconds_per_mib" in _parse(slow_t.out)[2]["error"]["message"]
    assert not steady_t.closed and cls.guard.cut["slow bodies"] == 1


def _sending(cls: type[GuardedH11Protocol], loop: asyncio.AbstractEventLoop, peer: str) -> tuple[Any, FakeTransport]:
    """A connection whose response is going out and whose reader has 64 KiB still to take."""
    protocol, transport = _open(cls, loop, peer)
    protocol.data_received(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n")
    transport.unread = 65536
    protocol.transport.write(b"x" * 65536)
    return protocol, transport


def test_a_reader_that_takes_nothing_is_cut_at_the_stall_deadline(loop: asyncio.AbstractEventLoop) -> None:
    cls = _guard(send_stall_seconds=10)
    stalled, stalled_t = _sending(cls, loop, "10.0.0.1")
    reading, reading_t = _sending(cls, loop, "10.0.0.2")
    t0 = stalled.backlog_since
    for step in range(1, 11):  # at the limit: 10 s without progress
        reading_t.unread -= 4096  # the other reader takes 4 KiB a second
        sweep(cls, t0 + step, loop)
    assert not stalled_t.closed
    reading_t.unread -= 4096
    sweep(cls, t0 + 10.5, loop)  # past it
    assert stalled_t.aborted and not reading_t.closed  # aborted: its buffer is dropped, not flushed
    assert stalled not in cls.guard.sending and reading in cls.guard.sending and cls.guard.cut["stalled"] == 1


def test_a_reader_behind_the_pace_is_cut(loop: asyncio.AbstractEventLoop) -> None:
    cls = _guard(send_stall_seconds=10, send_seconds_per_mib=256)  # 4 KiB/s after 10 s
    steady, steady_t = _sending(cls, loop, "10.0.0.1")
    trickle, trickle_t = _sending(cls, loop, "10.0.0.2")
    t0 = steady.backlog_since
    for step in range(1, 21):
        steady_t.unread -= 4096  # at the pace: 4 KiB a second
        trickle_t.unread -= 1  # a byte a second: never stalled, always behind
        sweep(cls, t0 + step, loop)
        assert trickle_t.closed == (step > 10), step  # cut once the stall time has passed, not before
    assert not steady_t.closed and cls.guard.cut["slow"] == 1 and trickle not in cls.guard.sending


def test_past_the_send_buffer_bound_the_slowest_reader_is_cut(loop: asyncio.AbstractEventLoop) -> None:
    cls = _guard(max_send_buffer_bytes=3 * 65536, send_stall_seconds=60)
    fast, fast_t = _sending(cls, loop, "10.0.0.1")
    slow, slow_t = _sending(cls, loop, "10.0.0.2")
    t0 = fast.backlog_since
    cls.guard.held[slow.client] = 65536  # the app holds more of its body
    sweep(cls, t0 + 1, loop)
    assert not fast_t.closed and not slow_t.closed  # 64 + 64 + 64 KiB: at the bound
    fast_t.unread -= 1000  # the fast one reads a little
    cls.guard.held[slow.client] = 65536 + 1001  # and the app holds 1,001 more bytes for the slow one: one past
    sweep(cls, t0 + 2, loop)
    assert slow_t.aborted and not fast_t.closed and cls.guard.cut["buffer"] == 1


# ---- the requests-in-progress gate counts a request once its body is in ---------------------------------------


def test_a_withheld_body_holds_no_request_slot() -> None:
    inner = Inner()
    limit = ConcurrencyLimit(inner, max_requests=1)
    never = asyncio.Event()

    async def withheld() -> Message:
        await never.wait()
        return {"type": "http.disconnect"}

    async def main() -> list[Any]:
        waiting = asyncio.create_task(limit(scope("POST", headers=[("content-length", "10")]), withheld, _sink([])))
        await asyncio.sleep(0.01)
        assert limit.active == 0  # waiting for its body: no slot
        sent: list[Any] = []
        await limit(scope(), _no_body, _sink(sent))
        waiting.cancel()
        return sent

    sent = asyncio.run(main())
    assert status(sent) == 200 and inner.called


def test_a_body_is_replayed_to_the_app_once_in() -> None:
    inner = Inner(read_body=True)
    sent, pulled = run(ConcurrencyLimit(inner, max_requests=1), scope("POST", headers=[("content-length", "6")]),
                       [b"ab", b"cd", b"ef"])  # fmt: skip
    assert status(sent) == 200 and inner.body == b"abcdef" and pulled == 3


def test_one_client_may_have_only_so_many_requests_in_progress() -> None:
    release = asyncio.Event()

    async def slow(scope: Scope, receive: Receive, send: Send) -> None:
        await release.wait()
        await Inner()(scope, receive, send)

    limit = ConcurrencyLimit(slow, max_requests=10, max_client_requests=2)

    async def main() -> tuple[list[Any], list[Any], list[Any]]:
        held = [asyncio.create_task(limit(scope(client=("10.0.0.1", 1)), _no_body, _sink([]))) for _ in range(2)]
        await asyncio.sleep(0.01)
        past: list[Any] = []
        await limit(scope(client=("10.0.0.1", 2)), _no_body, _sink(past))  # one past it: refused at once
        other: list[Any] = []
        other_task = asyncio.create_task(limit(scope(client=("10.0.0.2", 1)), _no_body, _sink(other)))
        await asyncio.sleep(0.01)
        release.set()
        await asyncio.gather(*held, other_task)
        return past, other, []

    past, other, _ = asyncio.run(main())
    assert status(past) == 429 and error_code(past) == "busy" and headers(past)[b"retry-after"] == b"1"
    assert status(other) == 200
    assert limit.by_client == {} and limit.active == 0


async def _no_body() -> Message:
    return {"type": "http.request", "body": b"", "more_body": False}


def _sink(into: list[Any]) -> Send:
    async def send(message: Message) -> None:
        into.append(message)

    return send


def test_big_bodies_go_out_in_pieces_and_what_is_held_is_reported() -> None:
    body = bytes(range(256)) * 1024  # 256 KiB
    held: dict[Any, int] = {}
    seen: list[tuple[int, bool, int | None]] = []

    async def big(scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": body})

    async def send(message: Message) -> None:
        if message["type"] == "http.response.body":
            seen.append((len(message["body"]), message["more_body"], held.get(("10.0.0.1", 1))))

    asyncio.run(ChunkedSend(big, held)(scope(client=("10.0.0.1", 1)), _no_body, send))
    assert seen == [(65536, True, 196608), (65536, True, 131072), (65536, True, 65536), (65536, False, 0)]
    assert held == {}


# ---- issue 30: one loopback check; the uvicorn this layer is tested with ------------------------------------------


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True), ("127.0.0.2", True), ("::1", True), ("[::1]", True), ("localhost", True),
        ("LOCALHOST", True), ("localhost.", True), ("0.0.0.0", False), ("::", False), ("192.168.1.2", False),
        ("[2001:db8::1]", False), ("example.com", False), ("localhost.example.com", False), ("", False),
        ("[::1", False),
    ],
)  # fmt: skip
def test_one_loopback_check_for_the_command_line_and_the_host_allowlist(host: str, loopback: bool) -> None:
    """Issue 30: ``shardscope/cli.py`` and ``server/middleware.py`` each had one, and they disagreed on ``[::1]``.
    The command line and the app (which picks the Host allowlist) now use server.hosts.is_loopback."""
    from server import app, hosts, middleware
    from shardscope import cli

    assert cli.is_loopback is hosts.is_loopback and app.is_loopback is hosts.is_loopback
    assert middleware.LOOPBACK_HOSTS is hosts.LOOPBACK_HOSTS
    assert hosts.is_loopback(host) is loopback


def test_the_uvicorn_admitted_is_the_uvicorn_tested() -> None:
    """Issue 30: server/http.py subclasses uvicorn's private H11Protocol while pyproject admitted any
    ``uvicorn>=0.30``. Now pyproject admits the tested release only, and importing the layer on another, or on
    one whose H11Protocol lost what the layer drives, fails at once naming what to install."""
    import tomllib

    import uvicorn
    from packaging.requirements import Requirement
    from uvicorn.protocols.http.h11_impl import H11Protocol

    from server.http import UVICORN_TESTED, uvicorn_problem

    pyproject = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())
    (spec,) = [Requirement(r).specifier for r in pyproject["project"]["dependencies"] if r.startswith("uvicorn")]
    major, minor = UVICORN_TESTED
    assert str(spec) == f"<{major}.{minor + 1},>={major}.{minor}" and uvicorn.__version__ in spec
    assert uvicorn_problem(uvicorn.__version__, H11Protocol) is None
    older = uvicorn_problem("0.30.6", H11Protocol)
    assert older is not None and "0.30.6" in older and f"uvicorn>={major}.{minor},<{major}.{minor + 1}" in older

    class Moved(H11Protocol):  # an H11Protocol whose internals moved
        handle_events = None  # type: ignore[assignment]
        send_400_response = None  # type: ignore[assignment]

    moved = uvicorn_problem(uvicorn.__version__, Moved)
    assert moved is not None and "lacks" in moved and "send_400_response, handle_events" in moved


# ---- issue 29: requests on the store hold a bounded number of turns ------------------------------------------------


def test_requests_on_the_store_take_a_bounded_number_of_turns_and_wait_holding_nothing() -> None:
    """Issue 29: with ~50 clients on one replica during a PostgreSQL outage, the requests waiting on the database took
    every worker thread, and health and layout (no database) hung. Now at most ``limit`` are in progress, each until
    its answer starts; more wait for a turn on the event loop, and get 503 store_unavailable with Retry-After past
    the queue's wait; a path that needs no store never waits."""
    release = asyncio.Event()
    started: list[str] = []

    async def slow(sc: Scope, receive: Receive, send: Send) -> None:
        if sc["path"] == "/api/layout":  # needs no store: answers at once
            await Inner()(sc, receive, send)
            return
        started.append(sc["path"])
        await release.wait()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await release.wait()  # the answer is under way (a stream to a slow reader): it holds no turn
        await send({"type": "http.response.body", "body": b"{}"})

    gate = StoreGate(slow, prefixes=["/api/links", "/s"], limit=2, wait_s=0.3)

    async def main() -> tuple[list[list[Any]], list[Any], list[Any]]:
        sent: list[list[Any]] = [[] for _ in range(4)]
        held = [asyncio.create_task(gate(scope(path="/api/links/x"), _no_body, _sink(sent[i]))) for i in range(2)]
        await asyncio.sleep(0.01)
        assert gate.active == 2 and started == ["/api/links/x"] * 2  # at the limit
        waiting = asyncio.create_task(gate(scope(path="/s/y"), _no_body, _sink(sent[2])))
        await asyncio.sleep(0.01)
        assert len(gate.waiting) == 1 and started == ["/api/links/x"] * 2  # one past it waits, without running
        free: list[Any] = []
        await asyncio.wait_for(gate(scope(path="/api/layout"), _no_body, _sink(free)), 1)  # no store: never waits
        release.set()  # the first two start their answers: their turns go, in order, to the one waiting
        await asyncio.gather(*held, waiting)
        release.clear()
        held = [asyncio.create_task(gate(scope(path="/api/links/x"), _no_body, _sink(sent[3]))) for _ in range(2)]
        await asyncio.sleep(0.01)
        late: list[Any] = []
        await gate(scope(path="/api/links/z"), _no_body, _sink(late))  # no turn comes round: 503 past the wait
        release.set()
        await asyncio.gather(*held)
        return sent, free, late

    sent, free, late = asyncio.run(main())
    assert status(free) == 200  # it never waited for a turn
    assert [status(s) for s in sent[:3]] == [200, 200, 200]
    assert status(late) == 503 and error_code(late) == "store_unavailable"
    assert headers(late)[b"retry-after"] == b"1" and gate.refused == 1 and gate.active == 0 and not gate.waiting


def test_while_the_store_is_known_down_its_requests_are_answered_before_any_route() -> None:
    from server.errors import ApiError

    inner = Inner()
    down = ApiError(503, "store_unavailable", "down", headers={"retry-after": "2"})
    state: dict[str, ApiError | None] = {"down": down}
    gate = StoreGate(inner, prefixes=["/api/links", "/api/kernels/jobs"], limit=4, wait_s=1,
                     down=lambda: state["down"], answered_anyway=["/api/kernels/jobs"])  # fmt: skip
    refused, _ = run(gate, scope(path="/api/links/abc"))
    assert status(refused) == 503 and headers(refused)[b"retry-after"] == b"2" and not inner.called
    polled, _ = run(gate, scope(path="/api/kernels/jobs/abc"))  # a job's owner answers it from its own workers
    assert status(polled) == 200 and inner.called
    state["down"] = None
    inner.called = False
    assert status(run(gate, scope(path="/api/links/abc"))[0]) == 200 and inner.called
