"""The store: round trips, ids, lifecycle, durability across ``kill -9``, the byte budget and expiry, a
full disk, start-up checks (read-only, corrupt, newer) and the schema migrations.

The tests of what the storage interface promises run against both implementations (``make_store``:
SQLite, and a real PostgreSQL from ``tests/plugins/postgres.py``); those of one database's own behaviour
(SQLite's WAL, its file checks) name it. tests/test_store_postgres.py has PostgreSQL's own, and replicas."""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest

from server.errors import ApiError
from server.settings import Settings
from server.store import (
    DAY,
    KEY_OVERHEAD,
    RECORD_OVERHEAD,
    SCHEMA_VERSION,
    TABLES,
    JobRecord,
    SqliteStore,
    Store,
    StoreClosed,
    StoreUnavailable,
    default_db_path,
    is_valid_id,
    open_store,
)
from sharding_core import capture
from sharding_core.errors import ShardingError
from tests.conftest import ClientFactory
from tests.helpers import (
    FullDisk,
    assert_error,
    corrupt_middle,
    counted,
    filled,
    post,
    schema_2_store,
    serve_refuses,
    tmpfs,
)

MakeStore = Callable[..., Store]


@pytest.fixture
def make_store(db: str) -> Iterator[MakeStore]:
    """Opens the test's store (``db``, from tests/plugins/postgres.py: SQLite and PostgreSQL in turn) with
    ``open_store``'s options as keywords; every one opened is closed at the end."""
    opened: list[Store] = []

    def make(**options: Any) -> Store:
        store = open_store(db, **options)
        opened.append(store)
        return store

    yield make
    for store in opened:
        store.close()


def test_round_trip_and_ids(make_store: MakeStore) -> None:
    with make_store() as store:
        ids = [store.put("links", f'{{"n":{i}}}'.encode()) for i in range(50)]
        assert len(set(ids)) == 50
        assert all(is_valid_id(i) and len(i) >= 22 for i in ids)  # 16 bytes of token_urlsafe
        assert [store.get("links", i) for i in ids] == [f'{{"n":{i}}}'.encode() for i in range(50)]
        assert store.get("links", "A" * 22) is None
        assert store.get("links", "not an id; DROP TABLE links") is None


def test_wal_and_full_sync(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "links.db")
    conn = store._connection()
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
    store.close()


def test_close_is_idempotent_and_open_reopens(make_store: MakeStore) -> None:
    store = make_store()
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


def test_unknown_table_is_a_programming_error(make_store: MakeStore) -> None:
    with make_store() as store, pytest.raises(ValueError, match="unknown table"):
        store.put("users; --", b"{}")
    assert TABLES == ("links", "snapshots")  # snapshots: issue 7 (sharding_core.publish)


def test_reopen_keeps_links(make_store: MakeStore) -> None:
    with make_store() as store:
        link = store.put("links", b'{"a":1}')
    with make_store() as store:
        assert store.get("links", link) == b'{"a":1}'


def test_concurrent_writers(make_store: MakeStore) -> None:
    with make_store() as store:
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
    with SqliteStore() as store:
        assert store.path == path
        assert path.exists()


def test_no_file_descriptor_leak(tmp_path: Path) -> None:
    fds = Path("/proc/self/fd")

    def count() -> int:
        return len(list(fds.iterdir()))

    SqliteStore(tmp_path / "warm.db").close()
    before = count()
    for i in range(20):
        SqliteStore(tmp_path / f"s{i}.db").close()
    assert count() == before


WRITER = """
import sys
from server.store import open_store

store = open_store(sys.argv[1])
i = 0
while True:
    link = store.put("links", b'{"n":%d}' % i)
    print(link, i, flush=True)  # acknowledged only once put() returned
    i += 1
"""


def test_acknowledged_links_survive_kill_9(db: str) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, db],
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
    with open_store(db) as store:
        for link, n in acknowledged:
            assert store.get("links", link) == b'{"n":%d}' % n
        assert store.usage()[0] == counted(store)  # the total committed with every link it counts
    if "://" not in db:
        with contextlib.closing(sqlite3.connect(db)) as conn:
            assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


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


# ---- the byte budget and expiry ------------------------------------------------------------------------


def test_budget_at_the_limit_and_one_past(make_store: MakeStore) -> None:
    budget = 10 * (1000 + RECORD_OVERHEAD)
    with make_store(max_bytes=budget) as store:
        ids = [store.put("links", b"x" * 1000) for _ in range(9)]
        assert store.usage() == (9 * (1000 + RECORD_OVERHEAD), budget)
        with pytest.raises(ApiError) as over:  # one byte past the budget
            store.put("links", b"x" * 1001)
        error = over.value
        assert (error.status, error.code) == (507, "insufficient_storage")
        assert "max_store_bytes" in error.message and error.details["limit"] == budget
        last = store.put("links", b"x" * 1000)  # exactly at the budget
        assert store.usage()[0] == budget == counted(store)
        with pytest.raises(ApiError, match="max_store_bytes"):
            store.put("links", b"")
        assert all(store.get("links", i) == b"x" * 1000 for i in [*ids, last])  # nothing was dropped
    with make_store(max_bytes=budget) as store:  # the total is kept in the database
        assert store.usage()[0] == budget
        with pytest.raises(ApiError, match="max_store_bytes"):
            store.put("links", b"{}")


def test_a_record_and_its_link_are_stored_together_or_not_at_all(make_store: MakeStore) -> None:
    budget = 2 * RECORD_OVERHEAD + 1000 + 50
    with make_store(max_bytes=budget) as store:
        with pytest.raises(ApiError, match="max_store_bytes"):
            store.put_linked("snapshots", b"s" * 1000, lambda sid: b"l" * 51)
        assert store.usage()[0] == 0
        sid, link = store.put_linked("snapshots", b"s" * 1000, lambda sid: sid.encode() + b"l" * (50 - len(sid)))
        assert store.get("snapshots", sid) == b"s" * 1000 and store.get("links", link).startswith(sid.encode())
        assert store.usage()[0] == budget


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000_000.0

    def __call__(self) -> float:
        return self.now


def test_old_records_expire_and_free_their_bytes(make_store: MakeStore) -> None:
    clock = Clock()
    store = make_store(max_days={"links": 2, "snapshots": 1}, clock=clock)
    old_link = store.put("links", b"old")
    old_snap = store.put("snapshots", b"old")
    part = store.put_run_part("R" * 22, 0, b"part", keys={"process_count": "[2,0]", "leaf:x": "[null,[2],null,0]"})
    assert part is not None
    clock.now += 1.5 * DAY
    assert store.expire() == 2  # the snapshot and the run part are past a day; links keep two
    new_link = store.put("links", b"new")
    assert store.get("snapshots", old_snap) is None and store.get("snapshots", part.snapshot_id) is None
    assert store.run_parts("R" * 22) == [] and store.get("links", old_link) == b"old"
    assert store.usage()[0] == counted(store) == 2 * (3 + RECORD_OVERHEAD)
    clock.now += 1 * DAY
    store.put("links", b"newer")  # an hour has passed since the last sweep: this write sweeps first
    assert store.get("links", old_link) is None and store.get("links", new_link) == b"new"
    assert store.usage()[0] == counted(store) == 2 * RECORD_OVERHEAD + 8
    store.close()
    # 0 keeps records forever
    with make_store(max_days={"links": 0, "snapshots": 0}, clock=clock) as forever:
        clock.now += 10_000 * DAY
        assert forever.expire() == 0 and forever.get("links", new_link) == b"new"


@pytest.mark.parametrize(("table", "days"), [("links", 3), ("snapshots", 2)])
def test_retention_at_the_limit_and_one_past(make_store: MakeStore, table: str, days: int) -> None:
    clock = Clock()
    with make_store(max_days={table: days}, clock=clock) as store:
        kept = store.put(table, b"{}")
        clock.now += days * DAY  # exactly max_days old: kept
        assert store.expire() == 0 and store.get(table, kept) == b"{}"
        clock.now += 1  # one second past
        assert store.expire() == 1 and store.get(table, kept) is None
        assert store.usage()[0] == 0


def test_expired_records_free_room_in_a_full_store(make_store: MakeStore) -> None:
    clock = Clock()
    budget = 3 * (100 + RECORD_OVERHEAD)
    with make_store(max_bytes=budget, max_days={"links": 1}, clock=clock) as store:
        for _ in range(3):
            store.put("links", b"x" * 100)
        with pytest.raises(ApiError, match="max_store_bytes"):
            store.put("links", b"x" * 100)
        clock.now += 2 * DAY
        assert is_valid_id(store.put("links", b"x" * 100))  # the sweep before the write made room
        assert store.usage()[0] == 100 + RECORD_OVERHEAD


def test_run_parts_count_their_keys_and_a_failed_check_stores_nothing(make_store: MakeStore) -> None:
    with make_store() as store:
        keys = {"process_count": "[2,0]", "leaf:w": '["P()",[4],"float32",0]'}
        first = store.put_run_part("R" * 22, 0, b"{}", keys=keys, link=b"link")
        assert first is not None and store.get("links", first.link_id or "") == b"link"
        want = (
            2 + 2 * RECORD_OVERHEAD + 4 + RECORD_OVERHEAD + sum(len(k) + len(v) + KEY_OVERHEAD for k, v in keys.items())
        )
        assert store.usage()[0] == counted(store) == want
        assert store.put_run_part("R" * 22, 0, b"{}", keys=keys) is None  # write-once per process

        def refuse(run: Any) -> None:
            assert dict(run) == keys
            raise ApiError(409, "run_mismatch", "no")

        with pytest.raises(ApiError, match="no"):
            store.put_run_part("R" * 22, 1, b"{}", keys=keys, check=refuse, link=b"link")
        assert store.run_parts("R" * 22) == [(0, first.snapshot_id)] and store.usage()[0] == want


# ---- a full disk ---------------------------------------------------------------------------------------


def test_sqlite_full_is_507_and_acknowledged_writes_survive_a_restart(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    store = SqliteStore(db)
    acked = {store.put("links", b'{"n":%d}' % i): i for i in range(20)}
    real = store._conn
    assert real is not None
    store._conn = FullDisk(real)  # type: ignore[assignment]
    for attempt in (lambda: store.put("links", b"lost"), lambda: store.put_linked("snapshots", b"s", lambda _: b"l")):
        with pytest.raises(ApiError) as full:
            attempt()
        assert (full.value.status, full.value.code) == (507, "insufficient_storage")
        assert "disk" in full.value.message and "nothing was stored" in full.value.message
    assert not real.in_transaction
    store._conn = real  # space is back: the same connection writes again
    acked[store.put("links", b'{"n":20}')] = 20
    store.close()
    with SqliteStore(db) as again:
        assert {i: again.get("links", i) for i in acked} == {i: b'{"n":%d}' % n for i, n in acked.items()}
        assert again.usage()[0] == counted(db) == sum(len(b'{"n":%d}' % n) + RECORD_OVERHEAD for n in acked.values())
    with contextlib.closing(sqlite3.connect(db)) as conn:
        assert conn.execute("SELECT count(*) FROM links").fetchone() == (21,)
        assert conn.execute("SELECT count(*) FROM snapshots").fetchone() == (0,)


def test_a_real_sqlite_full_is_507(tmp_path: Path) -> None:
    # SQLite's own SQLITE_FULL (the file may not grow past max_page_count), not a raised imitation.
    db = tmp_path / "s.db"
    store = SqliteStore(db, max_bytes=None)
    conn = store._connection()
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    conn.execute(f"PRAGMA max_page_count = {pages + 8}")
    acked = []
    with pytest.raises(ApiError) as full:
        for _ in range(100):
            acked.append(store.put("links", b"x" * 3000))
    assert full.value.status == 507 and 0 < len(acked) < 100
    store.close()
    with SqliteStore(db) as again:
        assert all(again.get("links", i) == b"x" * 3000 for i in acked)
        assert again.usage()[0] == counted(db) == len(acked) * (3000 + RECORD_OVERHEAD)


def test_a_really_full_disk_is_507_and_loses_nothing_acknowledged(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "disk", "1m") as disk:
        db = disk / "s.db"
        store = SqliteStore(db, max_bytes=None)  # no budget: the disk is the limit
        acked: list[str] = []
        with pytest.raises(ApiError) as full:
            for _ in range(1000):
                acked.append(store.put("links", os.urandom(8192).hex().encode()[:8192]))
        assert full.value.status == 507 and len(acked) > 10
        payloads = {i: store.get("links", i) for i in acked}
        store.close()
        with SqliteStore(db, max_bytes=None) as again:
            assert {i: again.get("links", i) for i in acked} == payloads
            assert all(p is not None and len(p) == 8192 for p in payloads.values())
        with contextlib.closing(sqlite3.connect(db)) as conn:
            assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)


# ---- start-up: read-only, corrupt, newer ----------------------------------------------------------------


def test_a_store_corrupted_mid_file_is_refused_at_start(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    filled(db)
    corrupt_middle(db)
    # The bug this guards: opening, reading the schema and the version all still work on such a file,
    # so without PRAGMA quick_check the damage showed only as a 500 on the links stored on that page.
    with contextlib.closing(sqlite3.connect(db)) as conn:
        assert conn.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
    with pytest.raises(StoreUnavailable) as refused:
        SqliteStore(db)
    message = refused.value.message
    assert str(db) in message and "corrupt" in message and "backup" in message and "\n" not in message


def test_not_a_database_and_newer_schema_are_refused(tmp_path: Path) -> None:
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"this is not SQLite" * 1000)
    with pytest.raises(StoreUnavailable, match="is not a SQLite database") as refused:
        SqliteStore(junk)
    assert str(junk) in refused.value.message
    newer = tmp_path / "newer.db"
    SqliteStore(newer).close()
    with contextlib.closing(sqlite3.connect(newer)) as conn:
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    with pytest.raises(StoreUnavailable, match="newer Shardscope"):
        SqliteStore(newer)


@contextlib.contextmanager
def read_only(directory: Path) -> Iterator[None]:
    """Makes ``directory`` read-only for this process: a read-only remount of a tmpfs for root (who
    ignores permissions), plain permissions otherwise."""
    if os.geteuid() == 0:
        done = subprocess.run(["mount", "-o", "remount,ro", str(directory)], capture_output=True)
        if done.returncode != 0:
            pytest.skip(f"cannot remount read-only: {done.stderr.decode().strip()}")
        try:
            yield
        finally:
            subprocess.run(["mount", "-o", "remount,rw", str(directory)], check=False)
    else:
        for p in directory.iterdir():
            p.chmod(0o444)
        directory.chmod(0o555)
        try:
            yield
        finally:
            directory.chmod(0o755)


def store_dir(tmp_path: Path) -> contextlib.AbstractContextManager[Path]:
    if os.geteuid() == 0:
        return tmpfs(tmp_path / "disk", "4m")
    (tmp_path / "disk").mkdir()
    return contextlib.nullcontext(tmp_path / "disk")


def test_a_read_only_store_is_refused_at_start(tmp_path: Path) -> None:
    with store_dir(tmp_path) as disk:
        db = disk / "s.db"
        SqliteStore(db).close()
        with read_only(disk), pytest.raises(StoreUnavailable) as refused:
            SqliteStore(db)
        message = refused.value.message
        assert str(db) in message and "read-only" in message and "--db" in message


# ---- `shardscope serve` on a store it cannot use: one line, non-zero exit --------------------------------


def serve_fails(db: Path) -> str:
    line = serve_refuses("--db", str(db), code="store_unavailable")
    assert str(db) in line
    return line


@pytest.mark.workers  # worker processes or subprocesses
def test_serve_refuses_a_corrupt_store_in_one_line(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    filled(db)
    corrupt_middle(db)
    assert "corrupt" in serve_fails(db)
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"x" * 10000)
    assert "is not a SQLite database" in serve_fails(junk)


@pytest.mark.workers  # worker processes or subprocesses
def test_serve_refuses_a_read_only_store_in_one_line(tmp_path: Path) -> None:
    with store_dir(tmp_path) as disk:
        db = disk / "s.db"
        SqliteStore(db).close()
        with read_only(disk):
            assert "read-only" in serve_fails(db)


# ---- schema 2 -> 3 ---------------------------------------------------------------------------------------


def test_schema_2_migrates_and_keeps_old_runs_readable(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    link = schema_2_store(db, "r" * 22, b'{"part":0}')
    with SqliteStore(db) as store:
        assert store.get("links", link) == b'{"view":"snapshots","state":{"run":"' + b"r" * 22 + b'"}}'
        assert store.run_parts("r" * 22) == [(0, "S" * 22)]  # the old id is the read id
        assert store.run_read_id("r" * 22) != "r" * 22
        link_bytes = len(store.get("links", link) or b"") + RECORD_OVERHEAD
        assert store.usage()[0] == counted(db) == link_bytes + len(b'{"part":0}') + 2 * RECORD_OVERHEAD
    with contextlib.closing(sqlite3.connect(db)) as conn:
        assert conn.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        key = conn.execute("SELECT value FROM meta WHERE key = 'run_key'").fetchone()[0]
    with SqliteStore(db) as store:  # opening again changes nothing: same key, same total
        with contextlib.closing(sqlite3.connect(db)) as conn:
            assert conn.execute("SELECT value FROM meta WHERE key = 'run_key'").fetchone()[0] == key
        assert store.usage()[0] == counted(db)


# ---- through the API: 507 with the one error shape -------------------------------------------------------


def link_of_size(size: int) -> dict[str, Any]:
    """A link request whose stored payload is ``size`` bytes."""
    empty = len(orjson.dumps({"view": "layout", "state": {"s": ""}}))
    return {"view": "layout", "state": {"s": "a" * (size - empty)}}


@pytest.mark.parametrize("extra", [0, 1], ids=["at the budget", "one past"])
def test_a_full_store_answers_507_naming_the_setting(make_client: ClientFactory, db: str, extra: int) -> None:
    budget = 64 * 1024  # the setting's minimum
    c = make_client(settings=Settings().with_values([("max_store_bytes", budget)]), db=db)
    first = post(c, "/api/links", link_of_size(budget - RECORD_OVERHEAD + extra))
    if extra:
        error = assert_error(first, 507, "insufficient_storage")
        assert "max_store_bytes" in error["message"] and error["limit"] == budget
        return
    assert first.status_code == 201
    for path, body in (("/api/links", link_of_size(2)), ("/api/snapshots", capture({"x": np.ones(2)}))):
        error = assert_error(post(c, path, body), 507, "insufficient_storage")
        assert "max_store_bytes" in error["message"] and "max_snapshot_days" in error["hint"]
    assert c.get(f"/api/links/{first.json()['id']}").status_code == 200  # reads go on


def test_a_full_disk_answers_507_and_keeps_what_it_acknowledged(make_client: ClientFactory) -> None:
    c = make_client()
    store = c.app.state.store  # type: ignore[attr-defined]
    acked = [post(c, "/api/links", link_of_size(100 + i)).json()["id"] for i in range(5)]
    snapshot = post(c, "/api/snapshots", capture({"x": np.ones(2)})).json()
    real = store._conn
    store._conn = FullDisk(real)
    try:
        for path, body in (("/api/links", link_of_size(50)), ("/api/snapshots", capture({"y": np.ones(2)}))):
            error = assert_error(post(c, path, body), 507, "insufficient_storage")
            assert "nothing was stored" in error["message"] and str(store.path) not in error["message"]
    finally:
        store._conn = real
    with SqliteStore(store.path) as again:  # what a restart reads
        assert [len(again.get("links", i) or b"") for i in acked] == [100 + i for i in range(5)]
        assert again.get("snapshots", snapshot["id"]) is not None
        assert again.usage()[0] == counted(store.path)


def test_store_settings_reach_the_store_and_are_bounded(make_client: ClientFactory) -> None:
    settings = Settings().with_values([("max_store_bytes", 65536), ("max_link_days", 0), ("max_snapshot_days", 7)])
    store = make_client(settings=settings).app.state.store  # type: ignore[attr-defined]
    assert store.max_bytes == 65536 and store.max_days == {"links": 0, "snapshots": 7}
    defaults = Settings()
    assert (defaults.max_store_bytes, defaults.max_link_days, defaults.max_snapshot_days) == (2**30, 365, 90)
    with pytest.raises(ShardingError, match="max_store_bytes must be 65536 to 17592186044416"):
        Settings().with_values([("max_store_bytes", 65535)])
    with pytest.raises(ShardingError, match="max_link_days must be 0 to 36500"):
        Settings().with_values([("max_link_days", -1)])


# ---- kernel jobs and shared results (schema 4) -------------------------------------------------------------


def job_record(job_id: str, state: str, created: float, **fields: Any) -> JobRecord:
    return JobRecord(job_id, fields.pop("owner", "replica-a"), "elementwise", state, created, **fields)


def test_a_job_is_saved_read_back_and_never_reopened(make_store: MakeStore) -> None:
    ids = [f"job{i}".ljust(22, "x") for i in range(3)]
    with make_store() as store:
        limits = {"max_jobs": 100, "max_bytes": 10**6}
        for i, job_id in enumerate(ids):
            store.job_save(job_record(job_id, "queued", 100.0 + i), now=100.0 + i, **limits)
        store.job_save(job_record("other".ljust(22, "x"), "queued", 50.0, owner="replica-b"), now=50.0, **limits)
        # queued ahead: the same owner's queued jobs made before it (another replica's queue is its own)
        assert [store.job(i).ahead for i in ids] == [0, 1, 2]  # type: ignore[union-attr]
        store.job_save(job_record(ids[0], "running", 100.0), now=103.0, **limits)
        assert [store.job(i).ahead for i in ids] == [None, 0, 1]  # type: ignore[union-attr]
        failure = '{"code":"timeout","message":"too long"}'
        store.job_save(job_record(ids[0], "error", 100.0, finished=104.0, failure=failure), now=104.0, **limits)
        store.job_save(job_record(ids[0], "running", 100.0), now=105.0, **limits)  # too late: it stays failed
        done = store.job(ids[0])
        assert done is not None and (done.state, done.failure, done.finished) == ("error", failure, 104.0)
        store.job_save(job_record(ids[1], "done", 101.0, finished=106.0, result=b'{"r":1}', peak_memory=7), now=106.0,
                       **limits)  # fmt: skip
        got = store.job(ids[1])
        assert got is not None and (got.result, got.peak_memory, got.kernel) == (b'{"r":1}', 7, "elementwise")
        assert store.job("nope") is None and store.job("A" * 22) is None


def test_a_silent_owners_jobs_fail_at_the_limit_and_one_past(make_store: MakeStore) -> None:
    with make_store() as store:
        limits = {"max_jobs": 100, "max_bytes": 10**6}
        a, b = "a".ljust(22, "x"), "b".ljust(22, "x")
        store.job_save(job_record(a, "running", 10.0), now=10.0, **limits)
        store.job_save(job_record(b, "queued", 10.0, owner="replica-b"), now=10.0, **limits)
        assert store.jobs_beat("replica-b", 20.0) == 1  # replica-b is alive; replica-a went silent at 10
        lost = '{"code":"worker_crashed","message":"gone"}'
        assert store.jobs_lost(25.0, 15, lost) == 0  # exactly 15 s of silence: still running
        assert store.jobs_lost(25.5, 15, lost) == 1  # past it: failed, once
        assert store.jobs_lost(26.0, 15, lost) == 0
        first = store.job(a)
        assert first is not None and (first.state, first.failure, first.finished) == ("error", lost, 25.5)
        second = store.job(b)
        assert second is not None and second.state == "queued" and second.beat == 20.0


def body(size: int, letter: str = "r") -> bytes:
    """A run's JSON object of exactly ``size`` bytes (what a job's result and a shared result hold)."""
    return b'{"r":"' + letter.encode() * (size - 8) + b'"}'


def test_finished_jobs_and_shared_results_are_kept_within_their_limits(make_store: MakeStore) -> None:
    with make_store() as store:
        for i in range(3):  # at most two finished jobs: the oldest finished goes
            job = job_record(f"j{i}".ljust(22, "x"), "done", 1.0, finished=10.0 + i, result=body(100))
            store.job_save(job, now=10.0 + i, max_jobs=2, max_bytes=10**6)
        assert [store.job(f"j{i}".ljust(22, "x")) is not None for i in range(3)] == [False, True, True]
        big = job_record("big".ljust(22, "x"), "done", 1.0, finished=20.0, result=body(5000))
        store.job_save(big, now=20.0, max_jobs=10, max_bytes=1000)  # larger than the budget: kept alone
        assert store.job(big.id) is not None and store.job("j2".ljust(22, "x")) is None
        limits = {"max_entries": 2, "max_bytes": 250}
        refused = '{"code":"kernel_error","message":"m"}'
        store.result_save("k1", body(100, "a"), None, now=1.0, **limits)
        store.result_save("k2", None, refused, now=2.0, **limits)
        assert store.result("k1") == (body(100, "a"), None) and store.result("k2") == (None, refused)
        store.result_save("k1", body(20, "o"), None, now=2.5, **limits)  # the first one stored stays
        assert store.result("k1") == (body(100, "a"), None)
        store.result_save("k3", body(100, "c"), None, now=3.0, **limits)  # a third entry: the oldest goes
        assert store.result("k1") is None and store.result("k3") is not None
        store.result_save("k4", body(150, "d"), None, now=4.0, **limits)  # three again: the oldest goes
        assert store.result("k2") is None and store.result("k3") is not None and store.result("k4") is not None
        store.result_save("k5", body(251, "e"), None, now=5.0, **limits)  # alone larger than the limit: not kept
        assert store.result("k5") is None and store.result("k4") is not None
