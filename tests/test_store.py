"""The link store: round trips, ids, lifecycle, and durability across ``kill -9``."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from server.store import TABLES, Store, StoreClosed, default_db_path, is_valid_id


def test_round_trip_and_ids(tmp_path: Path) -> None:
    with Store(tmp_path / "links.db") as store:
        ids = [store.put("links", f'{{"n":{i}}}'.encode()) for i in range(50)]
        assert len(set(ids)) == 50
        assert all(is_valid_id(i) and len(i) >= 22 for i in ids)  # 16 bytes of token_urlsafe
        assert [store.get("links", i) for i in ids] == [f'{{"n":{i}}}'.encode() for i in range(50)]
        assert store.get("links", "A" * 22) is None
        assert store.get("links", "not an id; DROP TABLE links") is None


def test_wal_and_full_sync(tmp_path: Path) -> None:
    store = Store(tmp_path / "links.db")
    conn = store._connection()
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
    store.close()


def test_close_is_idempotent_and_open_reopens(tmp_path: Path) -> None:
    store = Store(tmp_path / "links.db")
    store.close()
    store.close()
    assert store.closed
    with pytest.raises(StoreClosed):
        store.put("links", b"{}")
    store.open()  # what the app's lifespan does on a second start-up
    store.open()
    link = store.put("links", b"{}")
    store.close()
    store.open()
    assert store.get("links", link) == b"{}"
    store.close()


def test_unknown_table_is_a_programming_error(tmp_path: Path) -> None:
    with Store(tmp_path / "links.db") as store, pytest.raises(ValueError, match="unknown table"):
        store.put("users; --", b"{}")
    assert TABLES == ("links", "snapshots")  # snapshots: issue 7 (sharding_core.publish)


def test_reopen_keeps_links(tmp_path: Path) -> None:
    with Store(tmp_path / "links.db") as store:
        link = store.put("links", b'{"a":1}')
    with Store(tmp_path / "links.db") as store:
        assert store.get("links", link) == b'{"a":1}'


def test_concurrent_writers_share_one_connection(tmp_path: Path) -> None:
    with Store(tmp_path / "links.db") as store:
        ids: list[str] = []

        def write() -> None:
            for _ in range(20):
                ids.append(store.put("links", b"{}"))

        threads = [threading.Thread(target=write) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(set(ids)) == 80
        assert all(store.get("links", i) == b"{}" for i in ids)


def test_default_path_is_in_the_user_data_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    path = default_db_path()
    assert path.name == "links.db" and "shardscope" in path.parts
    with Store() as store:
        assert store.path == path
        assert path.exists()


def test_no_file_descriptor_leak(tmp_path: Path) -> None:
    fds = Path("/proc/self/fd")

    def count() -> int:
        return len(list(fds.iterdir()))

    Store(tmp_path / "warm.db").close()
    before = count()
    for i in range(20):
        Store(tmp_path / f"s{i}.db").close()
    assert count() == before


WRITER = """
import sys
from server.store import Store

store = Store(sys.argv[1])
i = 0
while True:
    link = store.put("links", b'{"n":%d}' % i)
    print(link, i, flush=True)  # acknowledged only once put() returned
    i += 1
"""


def test_acknowledged_links_survive_kill_9(tmp_path: Path) -> None:
    db = tmp_path / "links.db"
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(db)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=Path(__file__).resolve().parent.parent,
        text=True,
    )
    assert proc.stdout is not None
    acknowledged: list[tuple[str, int]] = []
    deadline = time.monotonic() + 60
    try:
        while len(acknowledged) < 200 and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            link, n = line.split()
            acknowledged.append((link, int(n)))
        os.kill(proc.pid, signal.SIGKILL)  # mid-stream: it is writing the next one
    finally:
        proc.kill()
        proc.wait(10)
        stderr = proc.stderr.read() if proc.stderr else ""
    # Lines the writer printed before the kill but we had not read yet were acknowledged too.
    acknowledged += [(line.split()[0], int(line.split()[1])) for line in proc.stdout.read().splitlines() if line]
    proc.stdout.close()
    if proc.stderr:
        proc.stderr.close()
    assert len(acknowledged) >= 200, f"writer stopped early: {stderr[-2000:]}"
    with Store(db) as store:
        for link, n in acknowledged:
            assert store.get("links", link) == b'{"n":%d}' % n
    conn = sqlite3.connect(db)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        conn.close()


def test_app_lifespans_leak_no_file_descriptors(tmp_path: Path) -> None:
    # Regression: the store was opened in create_app only, so after a first lifespan ended (the
    # schemathesis loader runs one) the next start-up served every link write as a 500.
    from fastapi.testclient import TestClient

    from server.app import create_app

    fds = Path("/proc/self/fd")
    app = create_app(str(tmp_path / "links.db"), "127.0.0.1")
    with TestClient(app, base_url="http://127.0.0.1") as client:  # warm: imports, thread pools
        client.post("/api/links", json={"view": "v", "state": {}})
    before = len(list(fds.iterdir()))
    for _ in range(5):
        with TestClient(app, base_url="http://127.0.0.1") as client:  # each start-up reopens the store
            assert client.post("/api/links", json={"view": "v", "state": {}}).status_code == 201
        assert app.state.store.closed  # each shutdown closes it
    assert len(list(fds.iterdir())) == before
