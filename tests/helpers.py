"""What several test modules use (tests import this module, never each other): request helpers for
the in-process client, the fuzz scale, job polling, and a fake ASGI scope for middleware tests."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
import subprocess
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import orjson
import pytest
from fastapi.testclient import TestClient

from server.middleware import Message, Receive, Scope, Send
from server.store import TABLES, SqliteStore, Store

BASE = "http://127.0.0.1:8000"
"""The in-process client's base URL: the app is bound to loopback and checks the Host header."""
HOST = {"host": "127.0.0.1:8000"}
JSON = {"content-type": "application/json"}

# The fuzz tests' example counts scale with SHARDSCOPE_FUZZ_SCALE: 1 in CI (thousands of inputs,
# a minute), e.g. 50 for a nightly run (`SHARDSCOPE_FUZZ_SCALE=50 make test`).
FUZZ_SCALE = max(1, int(os.environ.get("SHARDSCOPE_FUZZ_SCALE", "1")))


def fuzz_examples(n: int) -> int:
    return n * FUZZ_SCALE


def layout_request(**overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "devices": "cpu:8",
        "mesh": {"shape": [2, 4], "axis_names": ["x", "y"]},
        "spec": "P('x', None)",
        "shape": [4, 8],
        "dtype": "float32",
    }
    body.update(overrides)
    return body


def post(client: TestClient, url: str, body: Any, headers: dict[str, str] | None = None) -> Any:
    return client.post(url, content=orjson.dumps(body), headers={**JSON, **(headers or {})})


def assert_error(response: Any, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"}, body
    error: dict[str, Any] = body["error"]
    assert error["code"] == code, error
    assert isinstance(error["message"], str) and error["message"]
    return error


def wait_job(client: TestClient, job_id: str, timeout: float = 120) -> dict[str, Any]:
    """Polls a kernel job until it is done or failed."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job: dict[str, Any] = client.get(f"/api/kernels/jobs/{job_id}").json()
        if job["state"] in ("done", "error"):
            return job
        time.sleep(0.02)
    pytest.fail(f"job {job_id} did not finish")


def submit_all(client: TestClient, bodies: dict[Any, dict[str, Any]]) -> dict[Any, str]:
    """Every kernel run submitted up front as a job (so the workers run them while a test computes JAX's
    answers); the job ids by the caller's keys."""
    out = {}
    for key, body in bodies.items():
        r = client.post("/api/kernels/jobs", content=orjson.dumps(body), headers=JSON)
        assert r.status_code == 202, r.text
        out[key] = r.json()["id"]
    return out


# ---- a store as an older Shardscope wrote it -----------------------------------------------------------

SCHEMA_2 = (
    "CREATE TABLE links (id TEXT PRIMARY KEY, created REAL NOT NULL, payload BLOB NOT NULL);"
    "CREATE TABLE snapshots (id TEXT PRIMARY KEY, created REAL NOT NULL, payload BLOB NOT NULL);"
    "CREATE TABLE runs (run_id TEXT NOT NULL, process_index INTEGER NOT NULL, "
    "snapshot_id TEXT NOT NULL, created REAL NOT NULL, PRIMARY KEY (run_id, process_index));"
    "PRAGMA user_version=2;"
)


def schema_2_store(db: Path, run_id: str, part: bytes) -> str:
    """A store as schema 2 wrote it: one run part and its share link (which carried the run id)."""
    now = time.time()
    with contextlib.closing(sqlite3.connect(db)) as conn:
        conn.executescript(SCHEMA_2)
        link = orjson.dumps({"view": "snapshots", "state": {"run": run_id}})
        conn.execute("INSERT INTO links VALUES (?, ?, ?)", ("L" * 22, now, link))
        conn.execute("INSERT INTO snapshots VALUES (?, ?, ?)", ("S" * 22, now, part))
        conn.execute("INSERT INTO runs VALUES (?, ?, ?, ?)", (run_id, 0, "S" * 22, now))
        conn.commit()
    return "L" * 22


# ---- stores: what the running total must be, a small real filesystem, damage ----------------------------


class FailingWrites:
    """A store's writer connection, but every INSERT fails with ``error()`` as SQLite would."""

    def __init__(self, conn: sqlite3.Connection, error: Any) -> None:
        self.conn, self.error = conn, error

    def execute(self, sql: str, *args: Any) -> Any:
        if sql.lstrip().upper().startswith("INSERT"):
            raise self.error()
        return self.conn.execute(sql, *args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.conn, name)


def FullDisk(conn: sqlite3.Connection) -> FailingWrites:
    """Every INSERT fails as SQLite does on a full disk (SQLITE_FULL)."""
    return FailingWrites(conn, lambda: sqlite3.OperationalError("database or disk is full"))


def ReadOnlyDisk(conn: sqlite3.Connection) -> FailingWrites:
    """Every INSERT fails as SQLite does on a file it may no longer write (SQLITE_READONLY)."""

    def error() -> sqlite3.Error:
        e = sqlite3.OperationalError("attempt to write a readonly database")
        e.sqlite_errorcode = sqlite3.SQLITE_READONLY
        return e

    return FailingWrites(conn, error)


def counted(where: Path | str | Store) -> int:
    """What the running total must equal: every record's size and every run key's, summed afresh by the
    database itself (``where``: a SQLite file, a PostgreSQL URL, or the store using either)."""
    sums = [f"SELECT coalesce(sum(size), 0) FROM {t}" for t in (*TABLES, "run_keys")]
    if isinstance(where, Store):
        where = where.path if isinstance(where, SqliteStore) else where.url  # type: ignore[attr-defined]
    if isinstance(where, str) and "://" in where:
        import psycopg

        with psycopg.connect(where) as pg:
            return sum(int(pg.execute(q.encode()).fetchone()[0]) for q in sums)  # type: ignore[index]
    with contextlib.closing(sqlite3.connect(where)) as conn:
        return sum(conn.execute(q).fetchone()[0] for q in sums)


@contextlib.contextmanager
def tmpfs(where: Path, size: str) -> Iterator[Path]:
    """A real filesystem of ``size`` at ``where`` (root only; skips where mounting is not allowed)."""
    where.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def corrupt_middle(db: Path) -> None:
    """Overwrites one page in the middle of a closed store's file (its WAL already checkpointed)."""
    with contextlib.closing(sqlite3.connect(db)) as conn:
        page = conn.execute("PRAGMA page_size").fetchone()[0]
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
    assert pages > 20 and not Path(f"{db}-wal").exists()
    with db.open("r+b") as f:
        f.seek(page * (pages // 2))
        f.write(b"\xa5" * page)


def filled(db: Path) -> list[str]:
    with SqliteStore(db) as store:
        return [
            store.put("links", orjson.dumps({"view": "layout", "state": {"n": i, "pad": "p" * 400}}))
            for i in range(500)
        ]


def big_snapshot(mib: float, name: str = "big") -> bytes:
    """A snapshot as ``capture`` makes it, grown to about ``mib`` MiB of JSON with leaves that repeat its one
    leaf under other paths, each with a 2 KiB note (as a checked, enriched snapshot is stored)."""
    import jax.numpy as jnp

    from sharding_core import capture
    from sharding_core.snapshot.memory import enrich

    snap: dict[str, Any] = capture({"x": jnp.ones(8)}, name)
    leaf = {**snap["leaves"][0], "note": "n" * 2000}
    leaves = max(1, int(mib * 2**20 / len(orjson.dumps(leaf))))
    snap["leaves"] = [{**leaf, "path": f"layers/{i:06d}/kernel"} for i in range(leaves)]
    return orjson.dumps(enrich(snap))


def stored_snapshot(db: Path, payload: bytes) -> str:
    """Stores ``payload`` as a snapshot with its share link, as publishing does, before a server opens ``db``."""
    from server.services.links import link_payload

    with SqliteStore(db, max_bytes=None) as store:
        snapshot_id, _ = store.put_linked(
            "snapshots", payload, lambda i: link_payload("snapshots", {"snapshot": i}, 4096)
        )
    return snapshot_id


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def cpu_stall_seconds() -> float | None:
    """Seconds, since boot, during which some task on this machine waited for a CPU (the kernel's pressure stall
    information, ``/proc/pressure/cpu``, ``some total``); None where the kernel keeps none."""
    try:
        for line in Path("/proc/pressure/cpu").read_text().splitlines():
            if line.startswith("some "):
                return int(dict(f.split("=") for f in line.split()[1:])["total"]) / 1e6
    except (OSError, KeyError, ValueError):
        return None
    return None


def allow_open_files(needed: int) -> None:
    """Lets this test process hold ``needed`` sockets (raising its soft limit if it must)."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft >= needed:
        return
    if hard != resource.RLIM_INFINITY and hard < needed:
        pytest.skip(f"the open-file hard limit ({hard}) is below the {needed} sockets this test holds")
    resource.setrlimit(resource.RLIMIT_NOFILE, (needed, hard))


def serve_refuses(*args: str, code: str) -> str:
    """The line ``shardscope serve ARGS`` prints when it refuses to start: exactly one line on stderr,
    ``error [code]: ...``, exit status 2, no traceback."""
    from tests.plugins.live import CLI, ROOT

    done = subprocess.run(
        [str(CLI), "serve", "--port", "0", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "JAX_PLATFORMS": "cpu"},
        cwd=ROOT,
    )
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and len(lines) == 1, done.stderr
    assert lines[0].startswith(f"error [{code}]: "), lines[0]
    return lines[0]


# ---- a fake ASGI request, for middleware on its own -----------------------------------------------


def scope(method: str = "GET", path: str = "/", headers: Sequence[tuple[str, str]] = (), **extra: Any) -> Scope:
    return {
        "type": "http",
        "method": method,
        "path": path,
        "headers": [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers],
        **extra,
    }


class Inner:
    """A downstream app that records that it ran and answers 200 (reading the body if asked)."""

    def __init__(self, read_body: bool = False) -> None:
        self.called = False
        self.read_body = read_body
        self.body = b""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self.called = True
        if self.read_body:
            while True:
                message = await receive()
                self.body += message.get("body", b"")
                if not message.get("more_body"):
                    break
        await send({"type": "http.response.start", "status": 200, "headers": [(b"x-inner", b"1")]})
        await send({"type": "http.response.body", "body": b"ok"})


def run(app: Any, sc: Scope, chunks: Sequence[bytes] = (b"",)) -> tuple[list[Message], int]:
    """Runs ``app`` on one request; returns what it sent and how many body chunks it pulled."""
    sent: list[Message] = []
    pulled = 0

    async def receive() -> Message:
        nonlocal pulled
        i = pulled
        pulled += 1
        if i < len(chunks):
            return {"type": "http.request", "body": chunks[i], "more_body": i < len(chunks) - 1}
        return {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        sent.append(message)

    asyncio.run(app(sc, receive, send))
    return sent, pulled


def status(sent: list[Message]) -> int:
    return int(sent[0]["status"])


def error_code(sent: list[Message]) -> str:
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    code: str = orjson.loads(body)["error"]["code"]
    return code


def headers(sent: list[Message]) -> dict[bytes, bytes]:
    return dict(sent[0]["headers"])
