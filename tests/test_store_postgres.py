"""The PostgreSQL store's own behaviour (issue 24), against a real PostgreSQL (tests/plugins/postgres.py): ``--db``
chooses the store and refuses what it cannot use in one line; stores on one database — what replicas are —
share records, run keys and one byte budget, whatever order their writes race in; large payloads are read in
pieces. What both stores promise alike is tested in tests/test_store.py, against both."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import psycopg
import pytest

from server.errors import ApiError
from server.pool import Job
from server.store import RECORD_OVERHEAD, SCHEMA_VERSION, SqliteStore, StoreUnavailable, open_store
from server.store.postgres import PostgresStore, redact
from sharding_core.kernels.plan import RunInput, plan_run
from sharding_core.mesh import MeshSpec
from shardscope.cli import main
from tests.conftest import ClientFactory
from tests.helpers import counted, serve_refuses
from tests.plugins.live import free_port
from tests.plugins.postgres import Postgres

# ---- --db: a file path or a postgresql:// URL, nothing else ------------------------------------------------


@pytest.mark.parametrize(
    "db", ["mysql://u@db/x", "sqlite:///tmp/x.db", "postgresql:/x", "Postgresql:x/y", "redis://:pw@h:6379/0"]
)
def test_a_db_that_is_neither_a_path_nor_a_known_url_is_refused(tmp_path: Path, db: str) -> None:
    """Issue 24: ``--db postgresql://...`` (and any other URL) became a SQLite file under a directory named
    ``postgresql:``."""
    cwd = Path.cwd()
    with pytest.raises(StoreUnavailable) as refused:
        open_store(db)
    message = refused.value.message
    assert "neither a file path nor" in message and "postgresql://user@host:port/database" in message
    assert "\n" not in message and "pw" not in message
    assert not any(cwd.glob("*:")) and not (tmp_path / "postgresql:").exists()


def test_paths_that_look_a_little_like_urls_stay_paths(tmp_path: Path) -> None:
    for name in ("a:b.db", "C:links.db"):
        with open_store(tmp_path / name) as store:
            assert isinstance(store, SqliteStore) and store.path == tmp_path / name


def test_the_url_is_named_without_its_password() -> None:
    assert redact("postgresql://alice:s3cr%40t@db.internal:5433/shard") == "postgresql://alice@db.internal:5433/shard"
    assert redact("postgres://db/x?password=hunter2&sslmode=require") == "postgres://db/x?sslmode=require"


# ---- start-up: one line naming the URL without its password, and what to do ---------------------------------


def refused(url: str) -> str:
    with pytest.raises(StoreUnavailable) as error:
        PostgresStore(url)
    message = error.value.message
    assert "\n" not in message, message
    return message


def test_start_up_refusals_say_what_to_do(postgres: Postgres) -> None:
    wrong = refused(postgres.url(password="not-the-password"))
    assert "cannot log in" in wrong and "PGPASSWORD" in wrong and "not-the-password" not in wrong
    missing = refused(postgres.url("nodb"))
    assert "the database nodb does not exist" in missing and "createdb" in missing
    port = free_port()  # nothing listens there
    unreachable = refused(postgres.url().replace(f":{postgres.port}/", f":{port}/"))
    assert "cannot reach the PostgreSQL server" in unreachable and f":{port}/" in unreachable
    assert postgres.password not in wrong + missing + unreachable
    read_only = postgres.fresh_url() + "%20-cdefault_transaction_read_only%3Don"
    assert "does not take writes" in refused(read_only)


def test_a_database_of_someone_elses_or_from_a_newer_shardscope_is_refused(postgres: Postgres) -> None:
    foreign = postgres.fresh_url()
    schema = foreign.rsplit("%3D", 1)[1]
    postgres.execute(f"CREATE TABLE {schema}.meta (name TEXT, value TEXT)")
    assert "did not make" in refused(foreign)
    newer = postgres.fresh_url()
    PostgresStore(newer).close()
    with psycopg.connect(newer, autocommit=True) as conn:
        conn.execute("UPDATE meta SET value = value + 1 WHERE key = 'schema'")
    assert f"newer Shardscope (schema {SCHEMA_VERSION + 1}" in refused(newer)


@pytest.mark.workers  # worker processes or subprocesses
def test_serve_refuses_a_bad_db_in_one_line(postgres: Postgres) -> None:
    line = serve_refuses("--db", "mysql://root@db/shard", code="store_unavailable")
    assert "neither a file path nor" in line
    line = serve_refuses("--db", postgres.url(password="wrong-password"), code="store_unavailable")
    assert "cannot log in" in line and "wrong-password" not in line and postgres.password not in line


# ---- replicas: stores on one database --------------------------------------------------------------------------


def test_two_stores_on_one_database_share_records_run_keys_and_the_budget(postgres: Postgres) -> None:
    url = postgres.fresh_url()
    budget = 10 * (1000 + RECORD_OVERHEAD)
    with PostgresStore(url, max_bytes=budget) as a, PostgresStore(url, max_bytes=budget) as b:
        assert a.run_read_id("secret") == b.run_read_id("secret")  # every replica derives the same read id
        ids = [(a if i % 2 else b).put("links", b"x" * 1000) for i in range(10)]
        assert all(a.get("links", i) == b.get("links", i) == b"x" * 1000 for i in ids)
        assert a.usage()[0] == b.usage()[0] == budget == counted(url)
        for store in (a, b):  # full for both: the total is the database's, not a replica's
            with pytest.raises(ApiError, match="max_store_bytes"):
                store.put("links", b"")
        assert a.delete("links", ids[0]).bytes == 1000 + RECORD_OVERHEAD
        assert b.put("links", b"y" * 1000) and b.usage()[0] == budget == counted(url)


def test_racing_writers_on_two_stores_never_pass_the_budget(postgres: Postgres) -> None:
    """Every write locks the total's row first: eight threads on two stores writing past the budget at once end
    with the total exactly the sum of what was acknowledged, never above the budget."""
    url = postgres.fresh_url()
    size = 500 + RECORD_OVERHEAD
    budget = 37 * size + 100
    acknowledged: list[str] = []
    refusals: list[int] = []
    with PostgresStore(url, max_bytes=budget) as a, PostgresStore(url, max_bytes=budget) as b:

        def write(store: PostgresStore) -> None:
            for _ in range(10):
                try:
                    acknowledged.append(store.put("links", b"z" * 500))
                except ApiError as e:
                    refusals.append(e.status)

        threads = [threading.Thread(target=write, args=(s,)) for s in (a, b) * 4]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(acknowledged) == 37 and set(refusals) == {507} and len(refusals) == 80 - 37
        assert a.usage()[0] == counted(url) == 37 * size <= budget


def test_one_process_index_per_run_whichever_replica_wins(postgres: Postgres) -> None:
    url = postgres.fresh_url()
    keys = {"process_count": "[2,0]"}
    results: list[object] = []
    with PostgresStore(url) as a, PostgresStore(url) as b:
        barrier = threading.Barrier(8)

        def publish(store: PostgresStore) -> None:
            barrier.wait()
            results.append(store.put_run_part("R" * 22, 0, b"{}", keys=keys, link=b"l"))

        threads = [threading.Thread(target=publish, args=(s,)) for s in (a, b) * 4]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sum(r is not None for r in results) == 1 and len(a.run_parts("R" * 22)) == 1
        assert a.usage()[0] == counted(url)


# ---- large payloads are read in pieces ----------------------------------------------------------------------


def test_a_large_payload_is_read_in_pieces(postgres: Postgres) -> None:
    payload = bytes(range(256)) * (3 * 4096 + 7)  # 3 MiB and a bit: pieces that do not divide it
    with PostgresStore(postgres.fresh_url(), max_bytes=None) as store:
        sid = store.put("snapshots", payload)
        blob = store.open_blob("snapshots", sid)
        assert blob is not None and blob.length == len(payload)
        blob.seek(1)
        pieces = []
        while piece := blob.read(1 << 20):
            assert len(piece) <= 1 << 20
            pieces.append(piece)
        assert b"".join(pieces) == payload[1:] and len(pieces) == 4
        blob.close()
        assert store.open_blob("snapshots", "A" * 22) is None and store.open_blob("snapshots", "bad id") is None
        gone = store.open_blob("snapshots", sid)
        assert gone is not None
        store.delete("snapshots", sid)  # deleted while it is read: the read ends early, nothing else
        assert gone.read(10) == b""


def test_the_store_command_looks_after_a_postgresql_store(
    postgres: Postgres, capsys: pytest.CaptureFixture[str]
) -> None:
    url = postgres.fresh_url()
    with PostgresStore(url) as store:
        link = store.put("links", b'{"view":"layout","state":{}}')
    assert main(["store", "info", "--db", url]) == 0
    assert '"records": 1' in capsys.readouterr().out
    assert main(["store", "delete", "--db", url, f"--link={link}"]) == 0
    assert "deleted 1 records" in capsys.readouterr().out
    assert main(["store", "info", "--db", postgres.url(password="nope")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error [store_unavailable]: cannot log in") and err.count("\n") == 1


def test_a_really_full_disk_is_507_and_loses_nothing_acknowledged(postgres: Postgres) -> None:
    """The tables in a tablespace on a real 1 MiB tmpfs: PostgreSQL's own disk_full (SQLSTATE 53100), not an
    imitation, is 507 with nothing stored, and what was acknowledged before it reads back after a restart."""
    import os
    import pwd

    from tests.helpers import tmpfs

    with tmpfs(postgres.directory / "tiny", "1m") as disk:
        if postgres.as_user:
            owner = pwd.getpwnam("postgres")
            os.chown(disk, owner.pw_uid, owner.pw_gid)
        name = "tiny_" + disk.parent.name.replace("-", "_").lower()[-8:]
        postgres.execute(f"CREATE TABLESPACE {name} LOCATION '{disk}'")
        url = postgres.fresh_url() + f"%20-cdefault_tablespace%3D{name}"
        try:
            store = PostgresStore(url, max_bytes=None)  # no budget: the disk is the limit
            acked: list[str] = []
            with pytest.raises(ApiError) as full:
                for i in range(1000):
                    acked.append(store.put("links", bytes([65 + i % 26]) * 8192))
            assert full.value.status == 507 and full.value.code == "insufficient_storage" and len(acked) > 10
            assert "nothing was stored" in full.value.message and store.state == "ok"
            store.close()
            with PostgresStore(url, max_bytes=None) as again:
                assert all(again.get("links", i) == bytes([65 + n % 26]) * 8192 for n, i in enumerate(acked))
                assert again.usage()[0] == counted(url) == len(acked) * (8192 + RECORD_OVERHEAD)
        finally:
            schema = url.split("%3D")[1].split("%20")[0]
            postgres.execute(f"DROP SCHEMA {schema} CASCADE")
            postgres.execute(f"DROP TABLESPACE {name}")


def test_apps_on_one_database_share_kernel_results_and_jobs(make_client: ClientFactory, postgres: Postgres) -> None:
    """In-process, without workers: a result one app's pool cached reaches the store, and another app serves it
    as a cache hit; a job one app published is read through the other (tests/test_replicas.py does it all with
    real servers and workers)."""
    url = postgres.fresh_url()
    a, b = make_client(db=url), make_client(db=url)
    plan = plan_run("elementwise", "cpu:8", MeshSpec((2, 4), ("x", "y")), [RunInput((8, 8), "P('x', 'y')")])
    pool_a, pool_b = a.app.state.kernels, b.app.state.kernels  # type: ignore[attr-defined]
    board_a, board_b = a.app.state.jobs, b.app.state.jobs  # type: ignore[attr-defined]
    assert board_a.owner != board_b.owner and board_a.digest(plan.key) == board_b.digest(plan.key)
    assert board_b.share([plan]) == 0  # nothing computed yet
    pool_a.finish(Job("seed", plan), result=b'{"r":1}', cache=True)  # as a worker's answer is
    deadline = time.monotonic() + 10
    while b.app.state.store.result(board_b.digest(plan.key)) is None:  # type: ignore[attr-defined]
        assert time.monotonic() < deadline, board_a.stats
        time.sleep(0.02)
    assert not pool_b.cached(plan.key) and board_b.share([plan]) == 1 and pool_b.cached(plan.key)
    hit = pool_b.submit(plan)
    assert hit.cached and hit.result == b'{"r":1}'
    board_b.publish(hit).result(10)
    seen = a.get(f"/api/kernels/jobs/{hit.id}")
    assert seen.status_code == 200
    job = seen.json()
    # the result as stored (its facts), with today's figures added when it is read (issue 30)
    assert (job["state"], job["kernel"]) == ("done", "elementwise")
    assert job["result"]["cached"] is True and job["result"]["r"] == 1
