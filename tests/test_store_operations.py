"""Running a store (issue 20): a store SQLite can only open read-only refuses to start; damage found after
start is 503 ``store_corrupt`` and no write is acknowledged from then on; ``/api/health`` says when the
store cannot be written; an operator prunes (by age, by size) and deletes (a run, a snapshot, a link and
what it opens) with ``shardscope store``; per-client write quotas; snapshots are read piece by piece."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jax.numpy as jnp
import orjson
import pytest
from fastapi.testclient import TestClient

from server.app import create_app
from server.quota import HOUR, WriteQuota, client_key
from server.settings import Settings
from server.store import DAY, RECORD_OVERHEAD, SqliteStore, Store, StoreUnavailable, open_store
from sharding_core import capture, new_run_id
from shardscope.cli import main
from tests.conftest import ClientFactory
from tests.helpers import BASE, ReadOnlyDisk, assert_error, counted, filled, post, serve_refuses

# ---- a file SQLite can only read --------------------------------------------------------------------------


@contextlib.contextmanager
def read_only_file(db: Path) -> Iterator[None]:
    """Makes the file ``db`` (not its directory) read-only: a read-only bind mount of the file for root (who
    ignores permissions), its permissions otherwise."""
    if os.geteuid() == 0:
        for args in (["mount", "--bind", str(db), str(db)], ["mount", "-o", "remount,bind,ro", str(db)]):
            done = subprocess.run(args, capture_output=True)
            if done.returncode != 0:
                subprocess.run(["umount", str(db)], check=False, capture_output=True)
                pytest.skip(f"cannot bind-mount a file read-only: {done.stderr.decode().strip()}")
        try:
            yield
        finally:
            subprocess.run(["umount", str(db)], check=False)
    else:
        db.chmod(0o444)
        try:
            yield
        finally:
            db.chmod(0o644)


@pytest.mark.workers  # worker processes or subprocesses
def test_a_read_only_file_in_a_writable_directory_is_refused_at_start(tmp_path: Path) -> None:
    """Issue 20: SQLite falls back to read-only, and BEGIN IMMEDIATE on an up-to-date schema writes nothing,
    so the server started "ok" and answered every write 503."""
    db = tmp_path / "s.db"
    SqliteStore(db).close()
    with read_only_file(db):
        assert os.access(tmp_path, os.W_OK)  # the directory stays writable: SQLite can make its -wal and -shm
        with pytest.raises(StoreUnavailable) as refused:
            SqliteStore(db)
        assert str(db) in refused.value.message and "read-only" in refused.value.message
        assert "\n" not in refused.value.message
        assert "read-only" in serve_refuses("--db", str(db), code="store_unavailable")


# ---- damage found after start --------------------------------------------------------------------------------


def test_damage_after_start_is_503_and_no_more_writes_are_acknowledged(tmp_path: Path) -> None:
    """Issue 20: corruption after start gave 500s on the damaged rows while writes kept being acknowledged."""
    db = tmp_path / "s.db"
    ids = filled(db)
    with TestClient(create_app(str(db)), base_url=BASE) as client:
        store: SqliteStore = client.app.state.store  # type: ignore[attr-defined]
        assert client.get("/api/health").json()["store"] == "ok"
        for conn in (store._connection(),):
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        corrupt_middle_live(db)
        answers = [client.get(f"/api/links/{i}") for i in ids]
        damaged = [a for a in answers if a.status_code != 200]
        assert damaged, "the damaged page held no link"
        for answer in damaged:
            assert_error(answer, 503, "store_corrupt")
        assert {a.status_code for a in answers} <= {200, 503}  # never a 500
        refused = post(client, "/api/links", {"view": "layout", "state": {}})
        error = assert_error(refused, 503, "store_corrupt")
        assert "stores nothing more" in error["message"]
        assert client.get("/api/health").json()["store"] == "corrupt"
    with contextlib.closing(sqlite3.connect(db)) as conn:
        assert conn.execute("SELECT count(*) FROM links").fetchone()[0] <= len(ids)  # nothing was added


def corrupt_middle_live(db: Path) -> None:
    """Overwrites the middle of a store's file while it is open (after a checkpoint emptied its WAL)."""
    with contextlib.closing(sqlite3.connect(db)) as conn:
        page = conn.execute("PRAGMA page_size").fetchone()[0]
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
    with db.open("r+b") as f:
        for k in range(pages // 3, 2 * pages // 3):
            f.seek(page * k + 8)
            f.write(b"\xa5" * (page - 16))


def test_health_says_when_the_store_cannot_be_written(make_client: ClientFactory) -> None:
    c = make_client()
    store: SqliteStore = c.app.state.store  # type: ignore[attr-defined]
    assert c.get("/api/health").json()["store"] == "ok"
    real = store._conn
    store._conn = ReadOnlyDisk(real)  # type: ignore[assignment]  # the file went read-only under the server
    try:
        assert_error(post(c, "/api/links", {"view": "layout", "state": {}}), 503, "store_unavailable")
        health = c.get("/api/health")
        assert health.status_code == 200 and health.json()["store"] == "read_only"
    finally:
        store._conn = real
    assert post(c, "/api/links", {"view": "layout", "state": {}}).status_code == 201
    assert c.get("/api/health").json()["store"] == "ok"  # a write that succeeds clears it


# ---- an operator's deletions --------------------------------------------------------------------------------


def snapshot_body(name: str = "s") -> dict[str, Any]:
    snap: dict[str, Any] = capture({"x": jnp.ones(8)}, name)
    return snap


def run_part(process: int, count: int, secret: str) -> dict[str, Any]:
    snap = snapshot_body("run")
    snap["process_index"], snap["process_count"] = process, count
    snap["devices"]["process_index"] = [process] * len(snap["devices"]["id"])
    snap["run"] = {"id": secret, "process_index": process, "process_count": count}
    return snap


def test_prune_by_age_and_by_size(db: str) -> None:
    now = [1_000_000.0]
    with open_store(db, max_bytes=None, max_days={"links": 0, "snapshots": 0}, clock=lambda: now[0]) as store:
        old = [store.put("links", b"o" * 1000) for _ in range(3)]
        now[0] += 10 * DAY
        mid = [store.put("snapshots", b"m" * 2000) for _ in range(3)]
        now[0] += 10 * DAY
        new = [store.put("links", b"n" * 1000) for _ in range(3)]
        now[0] += 1
        # by age: the oldest are 20 days and a second old
        assert store.prune(older_than_days=21).records == 0
        assert store.prune(older_than_days=20) == (3, 3 * (1000 + RECORD_OVERHEAD))
        assert [store.get("links", i) for i in old] == [None] * 3 and store.usage()[0] == counted(store)
        # by size: the oldest go until the total fits
        total = store.usage()[0]
        assert store.prune(max_bytes=total) == (0, 0)  # at the limit: nothing goes
        done = store.prune(max_bytes=total - 1)  # one byte past: the oldest record goes
        assert done == (1, 2000 + RECORD_OVERHEAD) and store.get("snapshots", mid[0]) is None
        assert store.prune(max_bytes=3 * (1000 + RECORD_OVERHEAD)).records == 2
        assert all(store.get("links", i) is not None for i in new) and store.usage()[0] == counted(store)


def test_delete_a_run_a_snapshot_or_a_link_and_what_it_opens(make_client: ClientFactory, db: str) -> None:
    c = make_client(db=db)
    store: Store = c.app.state.store  # type: ignore[attr-defined]
    secret = new_run_id()
    parts = [post(c, "/api/snapshots", run_part(p, 2, secret)).json() for p in range(2)]
    read_id = parts[0]["run"]
    single = post(c, "/api/snapshots", snapshot_body()).json()
    other = post(c, "/api/snapshots", snapshot_body("other")).json()
    ref = {"snapshot": single["id"]}
    assert post(c, "/api/snapshots/diff", {"a": ref, "b": ref}).status_code == 200  # parsed and cached
    # the CLI is another process's view: nothing it deletes is counted in this one
    assert main(["store", "delete", "--db", db, f"--run={read_id}"]) == 0
    assert_error(c.get(f"/api/snapshots/runs/{read_id}"), 404, "not_found")
    assert store.run_parts(read_id) == []
    assert main(["store", "delete", "--db", db, f"--snapshot={single['id']}"]) == 0
    assert_error(c.get(f"/api/snapshots/{single['id']}"), 404, "not_found")
    assert_error(
        post(c, "/api/snapshots/diff", {"a": ref, "b": ref}), 404, "not_found"
    )  # the cached parse is not served
    link = other["url"].removeprefix("/s/")
    assert main(["store", "delete", "--db", db, f"--link={link}"]) == 0
    assert_error(c.get(f"/api/links/{link}"), 404, "not_found")
    assert_error(c.get(f"/api/snapshots/{other['id']}"), 404, "not_found")
    assert main(["store", "delete", "--db", db, "--snapshot", "A" * 22]) == 1  # nothing to delete
    assert store.usage()[0] == counted(store)
    assert store._read("SELECT count(*) FROM run_keys", ())[0][0] == 0  # the run's keys went with it


def test_the_store_command_refuses_bad_input_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["store", "info", "--db", str(tmp_path / "none.db")]) == 2
    assert capsys.readouterr().err.count("\n") == 1
    db = tmp_path / "s.db"
    filled(db)
    for bad in (["prune"], ["prune", "--older-than", "²"], ["prune", "--max-bytes", "9" * 5000]):
        assert main(["store", *bad, "--db", str(db)]) == 2
        err = capsys.readouterr().err
        assert err.startswith("error [") and err.count("\n") == 1, err
    assert main(["store", "info", "--db", str(db)]) == 0
    info = orjson.loads(capsys.readouterr().out)
    assert info["links"]["records"] == 500 and info["bytes"] == counted(db)


# ---- per-client write quotas ----------------------------------------------------------------------------------


def test_a_client_writes_its_quota_and_then_waits(make_client: ClientFactory) -> None:
    """Issue 20: anyone with the token filled the store in 14 s, and every write was 507 for 90 days."""
    per_hour = 64 * 1024
    c = make_client(settings=Settings().with_values([("max_client_store_bytes_per_hour", per_hour)]))
    quota: WriteQuota = c.app.state.quota  # type: ignore[attr-defined]
    clock = [0.0]
    quota.clock = lambda: clock[0]
    state = {"s": "x" * 1000}
    size = len(orjson.dumps({"view": "v", "state": state})) + RECORD_OVERHEAD
    fits = per_hour // size
    for _ in range(fits):  # up to the quota
        assert post(c, "/api/links", {"view": "v", "state": state}).status_code == 201
    refused = post(c, "/api/links", {"view": "v", "state": state})  # one past it
    error = assert_error(refused, 429, "quota_exceeded")
    assert "max_client_store_bytes_per_hour" in error["message"] and error["limit"] == per_hour
    wait = int(refused.headers["retry-after"])
    assert wait == error["retry_after"] and 0 < wait <= HOUR * size / per_hour + 1
    clock[0] += wait  # refilled continuously: after Retry-After the write fits
    assert post(c, "/api/links", {"view": "v", "state": state}).status_code == 201


def test_a_write_the_store_refuses_costs_no_quota(make_client: ClientFactory) -> None:
    c = make_client(settings=Settings().with_values([("max_store_bytes", 65536)]))
    quota: WriteQuota = c.app.state.quota  # type: ignore[attr-defined]
    quota.clock = lambda: 0.0  # no refill while the test runs
    before = quota.left("testclient")
    assert_error(post(c, "/api/links", {"view": "v", "state": {"s": "x" * 70000}}), 413, "too_large")
    for _ in range(2):
        assert post(c, "/api/links", {"view": "v", "state": {"s": "x" * 30000}}).status_code == 201
    assert_error(post(c, "/api/links", {"view": "v", "state": {"s": "x" * 30000}}), 507, "insufficient_storage")
    stored = c.app.state.store.usage()[0]  # type: ignore[attr-defined]
    assert before - quota.left("testclient") == stored  # the 413 and the 507 cost nothing


def test_quotas_are_per_client_and_bounded() -> None:
    clock = [0.0]
    quota = WriteQuota(per_hour=1000, max_clients=4, clock=lambda: clock[0])
    quota.charge("a", 1000)
    with pytest.raises(Exception, match="quota"):
        quota.charge("a", 1)
    quota.charge("b", 1000)  # another client has its own
    for name in "cdefg":
        quota.charge(name, 1)
    assert len(quota._buckets) == 4
    assert client_key("2001:db8::1") == client_key("2001:db8::ffff") == "2001:db8::/64"
    assert client_key("::ffff:10.0.0.1") == "10.0.0.1" and client_key("10.0.0.1") != client_key("10.0.0.2")


# ---- a snapshot is read piece by piece ------------------------------------------------------------------------


def test_a_snapshot_is_served_from_the_store_as_stored(make_client: ClientFactory, db: str) -> None:
    client = make_client(db=db)
    created = post(client, "/api/snapshots", snapshot_body()).json()
    store: Store = client.app.state.store  # type: ignore[attr-defined]
    stored = store.get("snapshots", created["id"])
    assert stored is not None
    served = client.get(f"/api/snapshots/{created['id']}")
    assert served.status_code == 200 and served.headers["content-type"] == "application/json"
    expected = b'{"id":' + orjson.dumps(created["id"]) + b"," + stored[1:]
    assert served.content == expected and int(served.headers["content-length"]) == len(expected)
    if isinstance(store, SqliteStore):
        assert store._readers.qsize() >= 1  # its read connection went back to the pool


def test_a_snapshot_with_collectives_is_estimated_once_for_every_reader(client: TestClient) -> None:
    """A snapshot with ``inspect_jit`` collectives gets today's estimates when read (decoded, estimated and
    encoded): once, kept for every reader, never a copy per reader."""
    import jax
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    from sharding_core import inspect_jit

    x = jax.device_put(jnp.ones((16, 4)), NamedSharding(jax.make_mesh((8,), ("d",)), P("d")))
    created = post(client, "/api/snapshots", inspect_jit(lambda a: a.sum(axis=0), x)).json()
    repo = client.app.state.snapshots  # type: ignore[attr-defined]
    before = len(repo.estimated)
    first, second = (client.get(f"/api/snapshots/{created['id']}") for _ in range(2))
    assert first.status_code == second.status_code == 200 and first.content == second.content
    assert first.json()["collectives"] and all("estimate" in c for c in first.json()["collectives"])
    assert len(repo.estimated) == before + 1
