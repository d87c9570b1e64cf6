"""Damaged rows never reach a client as data (issue 29), on both stores (``db``: SQLite, then a real PostgreSQL).

Attacked as the issue did, by writing the tables behind the server's back: a link row that is not JSON came back
200 with its raw bytes; a snapshot cut to 100 bytes came back 200 with broken JSON (diff and what-if on it: a
generic 500); a job with an unknown state and a broken result, and kernel results that are not JSON, came back
200; with the ``links`` table dropped, health said ``ok`` and a restarted replica started on it; a byte total
driven negative let writes past the budget. Each is now answered with its own clear error, naming the record and
the command that deletes it, or mended (the byte total, a damaged cache entry).
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator, Sequence
from typing import Any

import jax.numpy as jnp
import pytest
from fastapi.testclient import TestClient

from server.store import RECORD_OVERHEAD, SCHEMA_VERSION, JobRecord, Store, StoreUnavailable, open_store
from server.store.checks import digest
from sharding_core import capture
from shardscope.cli import main
from tests.conftest import ClientFactory
from tests.helpers import assert_error, post

BROKEN = b'{"cached":true,broken'


def sql(db: str, statement: str, args: Sequence[Any] = ()) -> list[Any]:
    """One statement on the store's own database, behind the server's back (``?`` placeholders); its rows."""
    if db.startswith("postgresql://"):
        import psycopg

        with psycopg.connect(db, autocommit=True) as conn:
            cursor = conn.execute(statement.replace("?", "%s").encode(), args)
            return cursor.fetchall() if cursor.description else []
    with contextlib.closing(sqlite3.connect(db)) as conn, conn:
        return conn.execute(statement, args).fetchall()


@pytest.fixture
def app(make_client: ClientFactory, db: str) -> Iterator[TestClient]:
    yield make_client(db=db)


def damaged(response: Any, record: str, option: str) -> dict[str, Any]:
    """The answer to a damaged record: 500 stored_record_damaged naming it and the command that deletes it."""
    error = assert_error(response, 500, "stored_record_damaged")
    assert record in error["message"] and error["record"] == record
    assert f"shardscope store delete --{option}={record}" in error["hint"]
    return error


def test_a_link_row_that_is_not_json_is_answered_as_damaged(app: TestClient, db: str) -> None:
    made = post(app, "/api/links", {"view": "layout", "state": {"spec": "P('x')"}}).json()["id"]
    sql(db, "UPDATE links SET payload = ? WHERE id = ?", (b"not json at all", made))  # its digest then disagrees
    for path in (f"/api/links/{made}", f"/s/{made}"):
        error = damaged(app.get(path, follow_redirects=False), made, "link")
        assert "not those that were stored" in error["message"]
    # a link stored before digests (schema 4): its JSON is what is checked
    old = post(app, "/api/links", {"view": "layout", "state": {}}).json()["id"]
    raw = b"\xff\xfe not json"
    sql(
        db, "UPDATE links SET payload = ?, digest = NULL, size = ? WHERE id = ?", (raw, len(raw) + RECORD_OVERHEAD, old)
    )
    assert "not JSON" in damaged(app.get(f"/api/links/{old}"), old, "link")["message"]
    shaped = b'{"view": 3}'
    sql(db, "UPDATE links SET payload = ?, size = ? WHERE id = ?", (shaped, len(shaped) + RECORD_OVERHEAD, old))
    damaged(app.get(f"/s/{old}", follow_redirects=False), old, "link")
    for link in (made, old):  # the command the hint names deletes each, damaged as it is
        assert main(["store", "delete", "--db", db, f"--link={link}"]) == 0
        assert_error(app.get(f"/api/links/{link}"), 404, "not_found")


def test_a_snapshot_cut_to_100_bytes_is_answered_as_damaged_and_so_are_diff_and_whatif_on_it(
    app: TestClient, db: str
) -> None:
    whole = post(app, "/api/snapshots", capture({"x": jnp.ones(8)}, "whole")).json()["id"]
    cut = post(app, "/api/snapshots", capture({"x": jnp.ones(8)}, "cut")).json()["id"]
    sql(db, "UPDATE snapshots SET payload = substr(payload, 1, 100) WHERE id = ?", (cut,))
    error = damaged(app.get(f"/api/snapshots/{cut}"), cut, "snapshot")
    assert "its payload is 100 bytes where" in error["message"]
    damaged(post(app, "/api/snapshots/diff", {"a": {"snapshot": whole}, "b": {"snapshot": cut}}), cut, "snapshot")
    damaged(post(app, "/api/snapshots/whatif", {"ref": {"snapshot": cut}, "rules": []}), cut, "snapshot")
    assert app.get(f"/api/snapshots/{whole}").status_code == 200  # the rest of the store is served
    # same length, other bytes: the digest tells, before the first byte of the stream goes out
    other = post(app, "/api/snapshots", capture({"x": jnp.ones(8)}, "other")).json()["id"]
    ((payload,),) = sql(db, "SELECT payload FROM snapshots WHERE id = ?", (other,))
    sql(db, "UPDATE snapshots SET payload = ? WHERE id = ?", (bytes(payload).replace(b'"other"', b'"OTHER"'), other))
    assert "not those that were stored" in damaged(app.get(f"/api/snapshots/{other}"), other, "snapshot")["message"]


def test_a_job_with_an_unknown_state_or_a_broken_result_is_answered_as_damaged(app: TestClient, db: str) -> None:
    store: Store = app.app.state.store  # type: ignore[attr-defined]
    limits = {"max_jobs": 100, "max_bytes": 10**6}
    strange, broken = "s".ljust(22, "x"), "b".ljust(22, "x")
    for job_id in (strange, broken):
        store.job_save(JobRecord(job_id, "elsewhere", "elementwise", "queued", 1.0), now=1.0, **limits)
    sql(db, "UPDATE kernel_jobs SET state = 'exploded' WHERE id = ?", (strange,))
    sql(db, "UPDATE kernel_jobs SET state = 'done', result = ? WHERE id = ?", (BROKEN, broken))
    assert "exploded" in damaged(app.get(f"/api/kernels/jobs/{strange}"), strange, "job")["message"]
    assert "not JSON" in damaged(app.get(f"/api/kernels/jobs/{broken}"), broken, "job")["message"]
    # the command the hint names deletes it, while the server runs
    assert main(["store", "delete", "--db", db, f"--job={broken}"]) == 0
    assert_error(app.get(f"/api/kernels/jobs/{broken}"), 404, "not_found")


def test_a_shared_kernel_result_that_is_not_json_is_never_served(app: TestClient, db: str) -> None:
    """A cache: the damaged entry is deleted and the run is run again rather than answered from it."""
    from sharding_core.kernels.plan import plan_run
    from sharding_core.mesh import MeshSpec

    board = app.app.state.jobs  # type: ignore[attr-defined]
    plan = plan_run("elementwise", "cpu:8", MeshSpec((2, 4), ("x", "y")), None)
    key = board.digest(plan.key)
    store: Store = board.store
    store.result_save(key, b'{"ok":true}', None, now=1.0, max_entries=10, max_bytes=10**6)
    sql(db, "UPDATE kernel_results SET result = ? WHERE key = ?", (BROKEN, key))
    assert board.share([plan]) == 0 and not board.pool.cached(plan.key)  # nothing seeded from it
    assert store.result(key) is None  # and it is gone: the next run's answer is shared in its place
    store.result_save(key, b'{"ok":true}', None, now=2.0, max_entries=10, max_bytes=10**6)
    assert store.result(key) == (b'{"ok":true}', None)


def test_a_dropped_table_makes_health_say_so_and_a_restart_refuse(app: TestClient, db: str) -> None:
    store: Store = app.app.state.store  # type: ignore[attr-defined]
    assert app.get("/api/health").json()["status"] == "ok"
    sql(db, "DROP TABLE links")
    store.look()  # what its watch does every 2 s
    health = app.get("/api/health")
    assert health.status_code == 200
    body = health.json()
    assert body["status"] == "degraded" and body["store"] == "corrupt" and "links" in body["store_problem"]
    assert set(body) >= {"status", "jax_version", "store", "store_kind"}
    assert_error(post(app, "/api/links", {"view": "layout", "state": {}}), 503, "store_corrupt")
    with pytest.raises(StoreUnavailable) as refused:  # a replica started on it now
        open_store(db).close()
    message = refused.value.message
    assert "the table links is missing" in message and "backup" in message and "\n" not in message


def test_a_byte_total_that_cannot_be_right_is_counted_again(make_store_at: Any, db: str) -> None:
    with make_store_at(db, max_bytes=64 * 1024) as store:
        store.put("links", b"x" * 1000)
        stored = store.usage()[0]
        sql(db, "UPDATE meta SET value = ? WHERE key = 'bytes'", (-(10**9),))
        with pytest.raises(Exception, match="max_store_bytes") as full:  # counted again, not -1 GB plus this
            store.put("links", b"y" * 64 * 1024)
        assert getattr(full.value, "status", None) == 507
        assert store.usage()[0] == stored  # the recount stands
        store.put("links", b"z" * 1000)
        assert store.usage()[0] == stored + 1000 + RECORD_OVERHEAD
    sql(db, "UPDATE meta SET value = ? WHERE key = 'bytes'", (5,))  # inconsistent, though not negative
    with make_store_at(db) as reopened:
        assert reopened.usage()[0] == 2 * (1000 + RECORD_OVERHEAD)  # counted again at start


def test_records_carry_their_digest_and_older_ones_are_migrated_to_schema_5(db: str) -> None:
    with open_store(db) as store:
        link = store.put("links", b'{"view":"v","state":{}}')
        assert SCHEMA_VERSION >= 5
    if db.startswith("postgresql://"):
        import psycopg

        with psycopg.connect(db) as conn:
            row = conn.execute("SELECT digest FROM links WHERE id = %s", (link,)).fetchone()
    else:
        with contextlib.closing(sqlite3.connect(db)) as conn:
            row = conn.execute("SELECT digest FROM links WHERE id = ?", (link,)).fetchone()
    assert row is not None and bytes(row[0]) == digest(b'{"view":"v","state":{}}')


@pytest.fixture
def make_store_at() -> Iterator[Any]:
    opened: list[Store] = []

    def make(db: str, **options: Any) -> Store:
        store = open_store(db, **options)
        opened.append(store)
        return store

    yield make
    for store in opened:
        store.close()
