"""It survives bad input, load and crashes (issue 8): each test against a real ``shardscope serve``.

Every loop here is bounded in count and time and talks to 127.0.0.1 only.
"""

from __future__ import annotations

import contextlib
import http.client
import os
import signal
import socket
import sqlite3
import subprocess
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

from server.settings import MAX_CONNECTIONS, MAX_HEADER_BYTES, MAX_KEEP_ALIVE_SECONDS
from sharding_core import capture
from tests.plugins.live import CLI, ROOT, Server, free_port, wait_ready

pytestmark = pytest.mark.slow  # a real server, worker processes or a browser: not in the fast inner loop


def start(db: Path, log: Path) -> Server:
    port = free_port()
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [str(CLI), "serve", "--port", str(port), "--db", str(db)],
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "JAX_PLATFORMS": "cpu"},
            cwd=ROOT,
        )
    srv = Server(port, log, proc)
    wait_ready(srv)
    return srv


def stop(srv: Server) -> None:
    if srv.proc.poll() is None:
        srv.proc.terminate()
        try:
            srv.proc.wait(10)
        except subprocess.TimeoutExpired:
            srv.proc.kill()
            srv.proc.wait(10)


@pytest.fixture
def fresh(tmp_path: Path) -> Iterator[tuple[Server, Path]]:
    db = tmp_path / "store.db"
    srv = start(db, tmp_path / "server.log")
    try:
        yield srv, db
    finally:
        stop(srv)


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


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
            assert time.monotonic() - start_t < 1.0  # the bound: served within a second
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
        assert data.startswith(b"HTTP/1.1 200") and data.endswith(f'"jax_version":"{jax.__version__}"}}'.encode())
        assert time.monotonic() - started < MAX_KEEP_ALIVE_SECONDS + 5


def test_connection_limit_at_and_past(fresh: tuple[Server, Path]) -> None:
    srv, _ = fresh
    held: list[socket.socket] = []
    try:
        # one short of the limit, counting the request's own connection: served
        while len(held) < MAX_CONNECTIONS - 2:
            held.append(socket.create_connection(("127.0.0.1", srv.port), timeout=10))
        time.sleep(0.3)
        assert _raw(srv.port, b"GET /api/health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").startswith(b"HTTP/1.1 200")
        # at the limit: 503, and nothing breaks
        held.append(socket.create_connection(("127.0.0.1", srv.port), timeout=10))
        time.sleep(0.3)
        assert _raw(srv.port, b"GET /api/health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").startswith(b"HTTP/1.1 503")
    finally:
        for s in held:
            s.close()
    time.sleep(0.3)
    assert srv.request("GET", "/api/health")[0] == 200
