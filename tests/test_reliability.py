"""It survives bad input, load and crashes (issue 8): each test against a real ``shardscope serve``.

Every loop here is bounded in count and time and talks to 127.0.0.1 only.
"""

from __future__ import annotations

import contextlib
import http.client
import os
import selectors
import signal
import socket
import sqlite3
import statistics
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jax
import numpy as np
import orjson
import pytest
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from server.middleware import CSP
from server.settings import MAX_HEADER_BYTES, MAX_HEADER_SECONDS, MAX_KEEP_ALIVE_SECONDS
from sharding_core import capture
from tests.helpers import allow_open_files, big_snapshot, rss_kib, stored_snapshot
from tests.plugins.live import Server, start, stop

pytestmark = pytest.mark.live  # a real server on a socket


@pytest.fixture
def fresh(tmp_path: Path) -> Iterator[tuple[Server, Path]]:
    db = tmp_path / "store.db"
    srv = start(db, tmp_path / "server.log")
    try:
        yield srv, db
    finally:
        stop(srv)


def small_snapshot(i: int) -> dict[str, Any]:
    mesh = jax.make_mesh((2, 4), ("x", "y"), devices=jax.devices()[:8])
    x = jax.device_put(np.zeros((8, 4), np.float32), NamedSharding(mesh, P("x")))
    snap: dict[str, Any] = capture({"w": x}, f"burst-{i}")
    return snap


def test_kill_9_mid_burst_loses_no_acknowledged_write(tmp_path: Path) -> None:
    db = tmp_path / "store.db"
    srv = start(db, tmp_path / "server.log")
    snapshot = orjson.dumps(small_snapshot(0))
    acked: list[tuple[str, str]] = []  # (kind, id) the server answered 201 for
    lock = threading.Lock()
    stop_at = time.monotonic() + 20  # bound; the kill ends the burst long before

    def writer(seed: int) -> None:
        n = 0
        while time.monotonic() < stop_at:
            kind = "snapshot" if (seed + n) % 3 == 0 else "link"
            n += 1
            try:
                if kind == "link":
                    body = orjson.dumps({"view": "layout", "state": {"spec": f"P('x') {seed}-{n}"}})
                    status, _, data = srv.request("POST", "/api/links", body, {"Content-Type": "application/json"})
                else:
                    status, _, data = srv.request(
                        "POST", "/api/snapshots", snapshot, {"Content-Type": "application/json"}
                    )
            except (OSError, http.client.HTTPException):
                return  # the server is gone: writes from here on were never acknowledged
            if status == 201:
                with lock:
                    acked.append((kind, orjson.loads(data)["id"]))

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    while len(acked) < 60 and time.monotonic() < stop_at:
        time.sleep(0.01)
    os.kill(srv.proc.pid, signal.SIGKILL)  # in the middle of the burst
    srv.proc.wait(10)
    for t in threads:
        t.join(30)
    assert len(acked) >= 60
    assert {k for k, _ in acked} == {"link", "snapshot"}
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    again = start(db, tmp_path / "server.log")
    try:
        for kind, ident in acked:
            path = f"/api/links/{ident}" if kind == "link" else f"/api/snapshots/{ident}"
            status, _, _ = again.request("GET", path)
            assert status == 200, (kind, ident)
    finally:
        stop(again)


def test_many_concurrent_writers_never_see_database_is_locked(fresh: tuple[Server, Path]) -> None:
    srv, db = fresh
    statuses: list[int] = []
    bodies: list[bytes] = []
    lock = threading.Lock()

    def writer(seed: int) -> None:
        for n in range(25):
            body = orjson.dumps({"view": "layout", "state": {"n": seed * 100 + n}})
            status, _, data = srv.request("POST", "/api/links", body, {"Content-Type": "application/json"})
            with lock:
                statuses.append(status)
                bodies.append(data)

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(24)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert statuses == [201] * (24 * 25)
    assert not any(b"locked" in b for b in bodies)
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM links").fetchone() == (24 * 25,)
    assert b"database is locked" not in srv.log.read_bytes()


def test_slow_clients_do_not_stop_a_normal_request(fresh: tuple[Server, Path]) -> None:
    srv, _ = fresh
    trickles: list[socket.socket] = []
    try:
        for _ in range(200):
            s = socket.create_connection(("127.0.0.1", srv.port), timeout=5)
            s.sendall(b"POST /api/links HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # headers never finished
            trickles.append(s)
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:  # keep trickling a byte at a time on every socket
            for s in trickles:
                s.sendall(b"X")
            start_t = time.monotonic()
            status, _, _ = srv.request("GET", "/api/health")
            assert status == 200
            # served, never starved behind the trickles; the 1 s bound is a quiet machine's figure, which
            # bench/bench_server.py measures (docs/operating.md): at load 15 a request may wait a few seconds for a core
            assert time.monotonic() - start_t < 5.0
            time.sleep(0.2)
    finally:
        for s in trickles:
            s.close()


def _send_oversize(port: int, total: int, chunked: bool) -> tuple[int, int]:
    """Sends up to ``total`` bytes of body; returns (status, bytes the server let us send)."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    head = "POST /api/links HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
    head += "Transfer-Encoding: chunked\r\n\r\n" if chunked else f"Content-Length: {total}\r\n\r\n"
    sock.sendall(head.encode())
    chunk = b"[" + b"1," * 32767 + b"1"  # 64 KiB
    sent = 0
    try:
        while sent < total:
            piece = (b"%x\r\n" % len(chunk)) + chunk + b"\r\n" if chunked else chunk
            sock.sendall(piece)
            sent += len(chunk)
    except OSError:
        pass  # the server answered and closed: exactly what we want
    sock.settimeout(10)
    data = b""
    try:
        while b"\r\n" not in data:
            more = sock.recv(4096)
            if not more:
                break
            data += more
    except OSError:
        pass
    sock.close()
    status = int(data.split(b" ")[1]) if data.startswith(b"HTTP/1.1") else 0
    return status, sent


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_100_mb_body_is_refused_with_flat_memory(fresh: tuple[Server, Path], chunked: bool) -> None:
    srv, _ = fresh
    before = rss_kib(srv.proc.pid)
    status, _ = _send_oversize(srv.port, 100 * 1024 * 1024, chunked)
    assert status == 413
    after = rss_kib(srv.proc.pid)
    assert after - before < 16 * 1024, (before, after)  # the body was never held in memory
    # and the server still answers
    assert srv.request("GET", "/api/health")[0] == 200


def test_absurd_sizes_are_refused_before_anything_is_allocated(fresh: tuple[Server, Path]) -> None:
    srv, _ = fresh
    before = rss_kib(srv.proc.pid)
    cases = [
        ({"devices": "cpu:1000000000", "mesh": {"shape": [1], "axis_names": ["x"]}, "spec": "P()", "shape": [1]},
         "too_large"),
        ({"devices": "cpu:8", "mesh": {"shape": [8], "axis_names": ["x"]}, "spec": "P()", "shape": [2**20, 2**20]},
         "too_large"),
        ({"devices": "tpu:v5p:1000x1000x1000", "mesh": {"shape": [1], "axis_names": ["x"]}, "spec": "P()",
          "shape": [1]}, "bad_devices"),
    ]  # fmt: skip
    for body, code in cases:
        status, answer = srv.post_json("/api/layout", body)
        assert status == 422 and answer["error"]["code"] == code, answer
    status, answer = srv.post_json("/api/topology/mesh", {"devices": "gpu:h100:100000x100000",
                                                          "mesh": {"shape": [1], "axis_names": ["x"]}})  # fmt: skip
    assert status == 422 and answer["error"]["code"] == "too_large"
    assert rss_kib(srv.proc.pid) - before < 16 * 1024


def _raw(port: int, head: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(head)
        data = b""
        while True:
            try:
                more = s.recv(65536)
            except OSError:
                break
            if not more:
                break
            data += more
            if b"\r\n\r\n" in data:
                break
        return data


def test_unfinished_request_head_limit_at_and_past(fresh: tuple[Server, Path]) -> None:
    """A client trickling an endless head is cut off once it has sent more than max_header_bytes."""
    srv, _ = fresh
    start_line = b"GET /api/health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Pad: "
    with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as s:
        # at the limit, unfinished: the server waits for the rest and then serves it
        s.sendall(start_line + b"a" * (MAX_HEADER_BYTES - len(start_line) - 100))
        time.sleep(0.3)
        s.sendall(b"\r\n\r\n")
        assert s.recv(65536).startswith(b"HTTP/1.1 200")
    with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as s:
        # past it, still unfinished: refused without waiting for the end of the head
        s.sendall(start_line)
        for _ in range(MAX_HEADER_BYTES // 4096 + 2):
            try:
                s.sendall(b"a" * 4096)
            except OSError:
                break
            time.sleep(0.02)
        answer = b""
        with contextlib.suppress(OSError):
            answer = s.recv(65536)
        assert not answer.startswith(b"HTTP/1.1 200")
        assert answer == b"" or answer.startswith(b"HTTP/1.1 4")
    assert srv.request("GET", "/api/health")[0] == 200


def test_idle_keep_alive_connections_are_closed(fresh: tuple[Server, Path]) -> None:
    srv, _ = fresh
    with socket.create_connection(("127.0.0.1", srv.port), timeout=MAX_KEEP_ALIVE_SECONDS + 10) as s:
        s.sendall(b"GET /api/health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        started = time.monotonic()
        data = b""
        while True:  # the response, then nothing until the server closes the idle connection
            more = s.recv(65536)
            if not more:
                break
            data += more
        health = f'{{"status":"ok","jax_version":"{jax.__version__}","store":"ok",'.encode()
        assert data.startswith(b"HTTP/1.1 200") and health in data and data.endswith(b"}")
        assert time.monotonic() - started < MAX_KEEP_ALIVE_SECONDS + 5


# ---- the connection layer (issue 12): idle sockets, slow heads and bodies, the server's own answers ------


HEALTH = b"GET /api/health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
DEADLINES = {"max_header_seconds": 2, "max_body_seconds": 2}


@pytest.fixture(scope="module")
def deadlines(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One server with 2-second head and body deadlines, for the tests that wait them out."""
    tmp = tmp_path_factory.mktemp("deadlines")
    srv = start(tmp / "store.db", tmp / "server.log", DEADLINES)
    try:
        yield srv
    finally:
        stop(srv)


def _connect(port: int, timeout: float = 10) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=timeout)


def _until_closed(s: socket.socket, deadline_s: float = 15) -> bytes:
    """Everything the server sends until it closes the connection."""
    s.settimeout(deadline_s)
    data = b""
    with contextlib.suppress(OSError):
        while more := s.recv(65536):
            data += more
    return data


def _parse(raw: bytes) -> tuple[int, dict[str, str], bytes]:
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    fields = dict(line.split(": ", 1) for line in lines[1:])
    return int(lines[0].split(" ")[1]), {k.lower(): v for k, v in fields.items()}, body


def _assert_ours(raw: bytes, status: int, code: str) -> dict[str, str]:
    """``raw`` is one answer in our error shape, with the security headers and no ``server`` header."""
    got, fields, body = _parse(raw)
    error = orjson.loads(body)
    assert got == status and set(error) == {"error"} and error["error"]["code"] == code, raw
    assert isinstance(error["error"]["message"], str) and error["error"]["message"]
    assert fields["content-type"] == "application/json"
    assert fields["content-security-policy"] == CSP and fields["x-content-type-options"] == "nosniff"
    assert fields["referrer-policy"] == "no-referrer" and fields["cross-origin-resource-policy"] == "same-origin"
    assert "server" not in fields
    return fields


def _readable(socks: list[socket.socket], wait: float = 0.3) -> list[socket.socket]:
    """The sockets with something to read (data or the server's close) within ``wait`` seconds."""
    with selectors.DefaultSelector() as sel:
        for s in socks:
            sel.register(s, selectors.EVENT_READ)
        ready = [key.fileobj for key, _ in sel.select(timeout=wait)]
    return [s for s in socks if s in ready]


IDLE_SOCKETS = 2000
HOLD_SECONDS = 30


def test_2000_idle_sockets_do_not_deny_service(fresh: tuple[Server, Path]) -> None:
    """Issue 12: ~1,030 sockets that never sent a byte made every request a 503, for as long as they
    were held. Now 2,000 of them, topped up for 30 s as the server closes them, leave /api/health
    answering within a second, and the server closes each after max_header_seconds."""
    srv, _ = fresh
    allow_open_files(IDLE_SOCKETS + 512)
    rss_before = rss_kib(srv.proc.pid)
    sel = selectors.DefaultSelector()
    opened_at: dict[socket.socket, float] = {}
    lifetimes: list[float] = []
    latencies: list[float] = []
    rss_held = 0

    def open_one() -> None:
        # the clock starts before connecting: the server cannot have the socket earlier, so a stall of this process
        # between connecting and reading the clock (a loaded CI host) cannot make a lifetime read short
        t = time.monotonic()
        s = _connect(srv.port)
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ)
        opened_at[s] = t

    try:
        for _ in range(IDLE_SOCKETS):
            open_one()
        began = time.monotonic()
        while time.monotonic() - began < HOLD_SECONDS:
            tick = time.monotonic()
            status, _, _ = srv.request("GET", "/api/health")
            latencies.append(time.monotonic() - tick)
            assert status == 200, latencies
            for key, _ in sel.select(timeout=0):
                s = key.fileobj
                assert isinstance(s, socket.socket)
                try:
                    data = s.recv(1)
                except BlockingIOError:
                    continue
                except ConnectionResetError:
                    data = b""
                assert data == b"", "the server wrote to a socket that never sent a byte"
                lifetimes.append(time.monotonic() - opened_at.pop(s))
                sel.unregister(s)
                s.close()
                open_one()  # keep 2,000 held all along
            if not rss_held and time.monotonic() - began > 2:
                rss_held = rss_kib(srv.proc.pid)
            time.sleep(max(0.0, 0.5 - (time.monotonic() - tick)))
        assert len(opened_at) == IDLE_SOCKETS
    finally:
        for s in opened_at:
            s.close()
        sel.close()
    ordered = sorted(latencies)
    print(
        f"\n{IDLE_SOCKETS} idle sockets for {HOLD_SECONDS} s: {len(latencies)} health requests, "
        f"p50 {statistics.median(ordered) * 1000:.1f} ms, p99 {ordered[int(len(ordered) * 0.99)] * 1000:.1f} ms, "
        f"max {ordered[-1] * 1000:.1f} ms; {len(lifetimes)} idle sockets closed by the server after "
        f"{min(lifetimes):.2f}-{max(lifetimes):.2f} s; server RSS {rss_before // 1024} MiB before, "
        f"{rss_held // 1024} MiB holding them"
    )
    assert len(latencies) >= HOLD_SECONDS  # measured every ~0.5 s
    assert max(latencies) < 5.0  # answered throughout (the 1 s bound: the quiet-machine figure printed above)
    # The first two batches were closed by the server, none before the head deadline.
    assert len(lifetimes) >= 2 * IDLE_SOCKETS
    assert min(lifetimes) >= MAX_HEADER_SECONDS - 0.05 and max(lifetimes) <= MAX_HEADER_SECONDS + 8
    assert b"Traceback" not in srv.log.read_bytes()


def test_a_head_trickling_slower_than_the_deadline_is_cut(deadlines: Server) -> None:
    srv = deadlines
    # Within the deadline: the head in 8 pieces over ~1.2 s of 2 s is served.
    with _connect(srv.port) as s:
        for i in range(0, len(HEALTH), -(-len(HEALTH) // 8)):
            s.sendall(HEALTH[i : i + -(-len(HEALTH) // 8)])
            time.sleep(0.15)
        assert _until_closed(s).startswith(b"HTTP/1.1 200")
    # Past it: a byte every 0.1 s keeps arriving, and the connection is still cut at 2 s.
    endless = b"GET /api/health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"a" * 200
    began = time.monotonic()  # before the server's clock starts (at the connection), never after
    with _connect(srv.port) as s:
        answer = b""
        for byte in endless:
            if _readable([s], wait=0.1):  # the server's answer (or close) comes first: stop sending
                answer = _until_closed(s)
                break
            try:
                s.sendall(bytes([byte]))
            except OSError:
                break
        cut_after = time.monotonic() - began
        assert 1.95 <= cut_after < 10, cut_after  # a tick early at most; late only by a busy machine's scheduling
        assert answer == b"" or _assert_ours(answer, 408, "request_timeout")
    # The same on a kept-alive connection: the clock starts at the next request's first byte.
    with _connect(srv.port) as s:
        s.sendall(b"GET /api/health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        first = s.recv(65536)
        assert first.startswith(b"HTTP/1.1 200")
        began = time.monotonic()
        s.sendall(b"GET /api/health HTTP/1.1\r\n")  # and then nothing more
        _assert_ours(_until_closed(s), 408, "request_timeout")
        assert 1.95 <= time.monotonic() - began < 10


def test_a_silent_socket_is_closed_at_the_head_deadline_and_not_before(deadlines: Server) -> None:
    srv = deadlines
    began = time.monotonic()
    with _connect(srv.port) as s:
        assert not _readable([s], wait=1.5)  # at the limit: still open
        assert _until_closed(s) == b""  # past it: closed without a word (browsers pre-connect like this)
        assert 2 <= time.monotonic() - began < 10


def test_a_body_slower_than_its_deadline_gets_408(deadlines: Server) -> None:
    srv = deadlines
    body = orjson.dumps({"view": "layout", "state": {"slow": True}})
    head = (
        b"POST /api/links HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nConnection: close\r\n"
        b"Content-Length: %d\r\n\r\n" % len(body)
    )
    half = len(body) // 2
    # within the deadline: the second half 1.2 s after the first is still taken
    with _connect(srv.port) as s:
        s.sendall(head + body[:half])
        time.sleep(1.2)
        s.sendall(body[half:])
        assert _until_closed(s).startswith(b"HTTP/1.1 201")
    # past it: half a body, then nothing
    with _connect(srv.port) as s:
        began = time.monotonic()
        s.sendall(head + body[:half])
        fields = _assert_ours(_until_closed(s), 408, "request_timeout")
        assert fields["connection"] == "close"
        assert 2 <= time.monotonic() - began < 10
    assert srv.request("GET", "/api/health")[0] == 200
    assert b"Traceback" not in srv.log.read_bytes()  # the abandoned request ended quietly


def test_the_servers_own_answers_have_our_shape_and_headers(deadlines: Server) -> None:
    """uvicorn answered a malformed head with a text/plain 400 and no security headers, and every
    response said ``server: uvicorn``."""
    srv = deadlines
    with _connect(srv.port) as s:
        s.sendall(b"NOT HTTP AT ALL\r\n\r\n")
        _assert_ours(_until_closed(s), 400, "bad_request")
    with _connect(srv.port) as s:
        s.sendall(b"GET /api/health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Pad: " + b"a" * (MAX_HEADER_BYTES + 1024))
        _assert_ours(_until_closed(s), 431, "too_large")
    with _connect(srv.port) as s:
        s.sendall(b"GET /api/health HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # and no more
        _assert_ours(_until_closed(s), 408, "request_timeout")
    with _connect(srv.port) as s:
        s.sendall(b"GET /api/nope HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        _assert_ours(_until_closed(s), 404, "not_found")
    for path in ("/api/health", "/", "/js/views/layout.js"):
        status, fields, _ = srv.request("GET", path)
        assert status == 200 and "server" not in fields and fields["content-security-policy"] == CSP


def _in_progress(port: int, snapshot_id: str) -> socket.socket:
    """A request the app is working on: a GET of a large snapshot whose reader takes nothing (its response
    waits on the reader until max_send_stall_seconds cuts it). A request waiting for its body is not in
    progress (issue 20: such requests held slots, so withheld bodies could take them all)."""
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before connecting: a small window
    s.settimeout(10)
    s.connect(("127.0.0.1", port))
    s.sendall(f"GET /api/snapshots/{snapshot_id} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
    return s


def _withheld_body(port: int) -> socket.socket:
    s = _connect(port)
    s.sendall(
        b"POST /api/links HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"
    )
    return s


def test_requests_in_progress_limit_at_and_past(tmp_path: Path) -> None:
    """max_connections counts requests in progress, not open connections, nor requests waiting for their
    bodies (issues 12 and 20)."""
    limit = 8
    db = tmp_path / "store.db"
    snapshot_id = stored_snapshot(db, big_snapshot(16))  # more than the kernel buffers of a stalled reader
    srv = start(db, tmp_path / "server.log", {"max_connections": limit})
    held: list[socket.socket] = []
    try:
        held += [_connect(srv.port) for _ in range(3 * limit)]  # idle connections do not count
        held += [_withheld_body(srv.port) for _ in range(2 * limit)]  # nor bodies still arriving
        held += [_in_progress(srv.port, snapshot_id) for _ in range(limit - 1)]
        time.sleep(1)
        # at the limit, this request included: served
        with _connect(srv.port) as s:
            s.sendall(HEALTH)
            assert _until_closed(s).startswith(b"HTTP/1.1 200")
        # one past it: 503 in our shape, at once
        held.append(_in_progress(srv.port, snapshot_id))
        time.sleep(1)
        with _connect(srv.port) as s:
            s.sendall(HEALTH)
            fields = _assert_ours(_until_closed(s), 503, "overloaded")
            assert fields["retry-after"] == "1"
        for s in held:
            s.close()
        held.clear()
        time.sleep(0.5)
        assert srv.request("GET", "/api/health")[0] == 200  # the slots came back
    finally:
        for s in held:
            s.close()
        stop(srv)


def test_open_connections_limit_at_and_past(tmp_path: Path) -> None:
    """At max_open_connections a newcomer closes the longest-idle connection, so a flood of idle
    sockets can neither lock out new clients nor run the server out of file descriptors."""
    limit = 32
    srv = start(tmp_path / "store.db", tmp_path / "server.log", {"max_open_connections": limit})
    held: list[socket.socket] = []
    try:
        held += [_connect(srv.port) for _ in range(limit - 1)]
        time.sleep(0.5)
        # at the limit (the health request's own connection is the last one): nobody is closed
        assert srv.request("GET", "/api/health")[0] == 200
        assert _readable(held) == []
        # one past it: the newcomer is served and the longest-idle connection closed
        held.append(_connect(srv.port))
        time.sleep(0.5)
        assert srv.request("GET", "/api/health")[0] == 200
        closed = _readable(held)
        assert closed == [held[0]] and _until_closed(held[0]) == b""
    finally:
        for s in held:
            s.close()
        stop(srv)
    assert b"setting max_open_connections" in srv.log.read_bytes()


# ---- issue 20: stopping, and killing, a server whose kernel workers are starting ---------------------------


def test_stopping_while_the_workers_start_logs_no_traceback(tmp_path: Path) -> None:
    """Issue 20: a stop during the workers' start logged BrokenPipeError tracebacks (a worker announcing it
    was ready on a pipe the server had closed)."""
    for delay in (0.5, 2.0, 4.0):  # before, while and after JAX imports in the workers
        log = tmp_path / f"server-{delay}.log"
        srv = start(tmp_path / "store.db", log)
        assert srv.request("GET", "/api/kernels")[0] == 200  # starts the workers
        time.sleep(delay)
        stop(srv)
        text = log.read_text()
        assert "Traceback" not in text and "BrokenPipeError" not in text, text
        assert "Finished server process" in text  # a graceful stop (uvicorn then re-raises the SIGTERM)


def _memory_cgroup() -> Path | None:
    from server.memcap import _own_cgroup

    found = _own_cgroup()
    return found[1] if found is not None else None


def test_cgroups_a_killed_server_left_are_removed_by_the_next(tmp_path: Path) -> None:
    """Issue 20: memory cgroups were left behind after kill -9. The next server removes those whose server is
    gone (its workers exit when their pipe closes)."""
    base = _memory_cgroup()
    if base is None:
        pytest.skip("this process may not make memory cgroups here")
    srv = start(tmp_path / "store.db", tmp_path / "server.log")
    try:
        assert srv.request("GET", "/api/kernels")[0] == 200
        mine = f"shardscope-{srv.proc.pid}-"
        deadline = time.monotonic() + 120
        while not [p for p in base.iterdir() if p.name.startswith(mine)] and time.monotonic() < deadline:
            time.sleep(0.2)
        left = [p for p in base.iterdir() if p.name.startswith(mine)]
        assert left, "the server made no memory cgroup for its workers"
        os.kill(srv.proc.pid, signal.SIGKILL)
        srv.proc.wait(10)
    finally:
        stop(srv)
    # A worker notices its server gone once it has imported JAX (it then finds its pipe closed): 17 s for the
    # import alone at load average 10 on the shared 2-core machine, so the margin is minutes, not seconds.
    deadline = time.monotonic() + 180
    while any((p / "worker-0" / "cgroup.procs").read_text().strip() for p in left if (p / "worker-0").exists()):
        assert time.monotonic() < deadline, "the killed server's workers did not exit"
        time.sleep(0.2)
    assert all(p.exists() for p in left)  # left behind by kill -9
    again = start(tmp_path / "store.db", tmp_path / "again.log")
    try:
        assert again.request("GET", "/api/kernels")[0] == 200
        deadline = time.monotonic() + 120
        while any(p.exists() for p in left) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not any(p.exists() for p in left)
        assert b"left by a server that was killed" in again.log.read_bytes()
    finally:
        stop(again)
