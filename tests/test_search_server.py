"""A search whose candidates a team's server compiles (issue 34: "on a team server as jobs in its store, so that its
replicas share a search"): the store's leases on both databases, the route's refusals, and two real replicas on one
PostgreSQL sharing one search — each candidate compiled once, by either, with the figures a local search gives, and
a replica killed mid-compile losing nothing (its candidate compiled by the other)."""

from __future__ import annotations

import os
import secrets
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from fastapi.testclient import TestClient

import sharding_core
from server.settings import Settings
from server.store import SEARCH_ABANDONED_S, open_store
from sharding_core.errors import ShardingError
from sharding_core.searching.compiling import Job
from sharding_core.searching.space import Grid
from tests import search_models
from tests.plugins.live import Server, two_replicas
from tests.plugins.postgres import Postgres

DEVICES = "tpu:v5p:2x2x2"
SILENCE = 3
SEARCHING = {"max_search_workers": 1, "max_kernel_job_silence_seconds": SILENCE}
MODEL = Path(search_models.__file__).read_text()


def job(index: int, devices: str = DEVICES) -> dict[str, Any]:
    return Job(index, devices, 1, Grid((("fsdp", 8),), (1,)), (("batch", "fsdp"),), (), 0.1).json()


def body(**change: Any) -> dict[str, Any]:
    out = {"code": MODEL, "function": "mlp_fixed", "file": "search_models.py", "devices": DEVICES,
           "budget_seconds": 60.0, "jobs": [job(5), job(3)]}  # fmt: skip
    out.update(change)
    return out


# ---- the store: claims, leases, deadlines, bounds (SQLite and PostgreSQL) ---------------------------------------


def test_each_candidate_is_claimed_once_and_a_silent_replicas_is_claimed_again(db: str) -> None:
    store = open_store(db)
    store.open()
    try:
        now = 1000.0
        ids = "A" * 22, "B" * 22

        def create(search: str, jobs: list[tuple[int, bytes]], at: float, deadline: float) -> bool:
            return bool(store.search_create(search, code=b"x", function="f", file="m.py", devices=DEVICES, jobs=jobs,
                                            now=at, deadline=deadline, max_searches=2))  # fmt: skip

        assert create(ids[0], [(7, b"{}"), (2, b"{}"), (5, b"{}")], now, now + 60)
        first = [store.search_claim("r1", now), store.search_claim("r2", now), store.search_claim("r1", now)]
        # in the order sent (the estimate's), each under its candidate's own index
        assert [(c.search, c.candidate) for c in first if c] == [(ids[0], 7), (ids[0], 2), (ids[0], 5)]
        assert store.search_claim("r2", now) is None  # each once
        assert store.search_answer(ids[0], 7, "r1", b'{"compiled": true}', 1.5)
        # r2 goes silent; r1 beats: only r2's candidate is queued again, and r1 takes it
        assert store.search_beat("r1", now + 10) == 1
        assert store.search_requeue(now + 10, SILENCE, by="r1") == 1
        again = store.search_claim("r1", now + 10)
        assert again is not None and again.candidate == 2
        assert store.search_answer(ids[0], 2, "r1", b'{"compiled": true, "by": 1}', 2.0)
        assert not store.search_answer(ids[0], 2, "r2", b'{"compiled": true, "by": 2}', 9.0)  # the late one loses
        row = store.search(ids[0], now + 11)
        assert row is not None
        assert [(i, state, owner) for i, state, owner, _, _ in row.jobs] == [
            (2, "done", "r1"), (5, "compiling", "r1"), (7, "done", "r1")]  # fmt: skip
        assert orjson.loads(row.jobs[0][4] or b"") == {"compiled": True, "by": 1}
        assert sorted(store.search_typical(ids[0])) == [1.5, 2.0]
        # bounded: a second search fits, a third not; past its deadline nothing is claimed
        assert create(ids[1], [(0, b"{}")], now + 11, now + 12)
        assert not create("C" * 22, [(0, b"{}")], now + 11, now + 99)
        assert store.search_claim("r1", now + 13) is None
        # a search its client stopped polling is not compiled, and goes when the next is stored
        assert create("C" * 22, [(0, b"{}")], now + 11 + SEARCH_ABANDONED_S + 1, now + 9999)
        assert store.search(ids[1], now) is None
        assert store.search_delete("C" * 22) == 1 and store.search("C" * 22, now) is None
    finally:
        store.close()


# ---- the routes ---------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def allowed(make_client: Any) -> TestClient:
    """A server that takes searches (``max_search_workers`` 1) with its search slots stopped: what the routes store
    stays as stored (nothing compiles it)."""
    c: TestClient = make_client(settings=Settings().with_values([("max_search_workers", "1")]))
    c.app.state.searches.stop()  # type: ignore[attr-defined]
    return c


def test_a_server_runs_no_search_unless_its_operator_allows_it(client: TestClient) -> None:
    r = client.post("/api/searches", json=body())
    assert r.status_code == 403 and r.json()["error"]["code"] == "code_not_allowed"
    assert "max_search_workers" in r.json()["error"]["hint"]


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"jobs": []}, "jobs"),
        ({"jobs": [{"index": 0}]}, "jobs[0]"),
        ({"jobs": [job(0, "tpu:v5p:4x4x4")]}, "jobs[0]"),
        ({"jobs": [job(0), job(0)]}, "jobs[1]"),
        ({"function": "not a name"}, "function"),
        ({"file": "../etc/passwd.py"}, "file"),
        ({"budget_seconds": 0}, "budget_seconds"),
        ({"devices": "tpu:v5p:99x99x99"}, "devices"),
    ],
)
def test_a_malformed_search_is_a_4xx_naming_what_and_stores_nothing(
    allowed: TestClient, change: dict[str, Any], field: str
) -> None:
    r = allowed.post("/api/searches", json=body(**change))
    assert r.status_code == 422, r.text
    assert field in r.text
    assert allowed.app.state.store.search_claim("probe", time.time()) is None  # type: ignore[attr-defined]


def test_a_search_is_polled_by_its_id_and_an_unknown_id_is_404(allowed: TestClient) -> None:
    r = allowed.post("/api/searches", json=body())
    assert r.status_code == 202, r.text
    got = allowed.get(r.json()["url"]).json()
    assert got["counts"] == {"queued": 2, "compiling": 0, "done": 0} and not got["done"]
    assert [x["index"] for x in got["candidates"]] == [3, 5] and got["devices"] == DEVICES  # the candidates' own
    first = allowed.app.state.store.search_claim("probe", time.time())  # type: ignore[attr-defined]
    assert first is not None and first.candidate == 5  # claimed in the order sent
    assert allowed.get("/api/searches/" + "Z" * 22).status_code == 404
    allowed.app.state.store.search_delete(r.json()["id"])  # type: ignore[attr-defined]


def test_a_search_needs_the_token_of_a_server_started_with_one(make_client: Any) -> None:
    token = secrets.token_urlsafe(32)
    c = make_client(token=token, settings=Settings().with_values([("max_search_workers", "1")]))
    c.app.state.searches.stop()
    assert c.post("/api/searches", json=body()).status_code == 401
    ok = c.post("/api/searches", json=body(), headers={"Authorization": f"Bearer {token}"})
    assert ok.status_code == 202, ok.text


# ---- two replicas on one PostgreSQL ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def replicas(postgres: Postgres, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, Server]]:
    with two_replicas(postgres.fresh_url(), tmp_path_factory.mktemp("search-replicas"), SEARCHING) as both:
        yield both


def local(**options: Any) -> dict[str, Any]:
    return sharding_core.search(search_models.mlp_fixed, DEVICES, axes=("data", "fsdp", "tensor"), workers=0, **options)


def figures(result: dict[str, Any]) -> list[tuple[Any, ...]]:
    return sorted((c["strategy"], c["peak_bytes"], c["expected_seconds"]) for c in result["candidates"])


@pytest.mark.live
@pytest.mark.slow
def test_two_replicas_share_a_search_and_give_a_local_searchs_answer(replicas: tuple[Server, Server]) -> None:
    a, _ = replicas
    said: list[str] = []
    shared = local(server=f"http://127.0.0.1:{a.port}", progress=said.append)
    mine = local()
    assert shared["compiled"] == shared["enumerated"] == mine["compiled"] >= 8
    by = {c["replica"] for c in shared["candidates"]}
    assert len(by) == 2, by  # both replicas compiled a share (one search worker each)
    assert figures(shared) == figures(mine)  # every figure the compile gives, as this process compiled it
    assert shared["pick"]["strategy"] == mine["pick"]["strategy"]
    assert shared["pick"]["plan"]["plan"]["step_time"] == mine["pick"]["plan"]["plan"]["step_time"]
    # progress while it runs: the server's counts as they change, then each candidate as its figures arrive
    counts = [line for line in said if "on the server:" in line]
    assert (
        counts and "replica(s) sharing" in counts[-1] and f"{shared['compiled']} of {shared['compiled']}" in counts[-1]
    )
    assert sum(" compiled " in line for line in said) == shared["compiled"]
    assert said[-1].startswith("planning the pick")


def test_a_search_on_a_server_needs_fn_in_a_file() -> None:
    with pytest.raises(ShardingError, match="top of a Python file") as refused:
        sharding_core.search(
            lambda mesh, rules: search_models.mlp_fixed(mesh, rules), DEVICES, server="http://127.0.0.1:9", workers=0
        )
    assert refused.value.code == "bad_search_option"


@pytest.mark.live
@pytest.mark.slow
def test_a_replica_killed_while_it_compiles_loses_nothing(
    postgres: Postgres, tmp_path_factory: pytest.TempPathFactory
) -> None:
    url = postgres.fresh_url()
    with two_replicas(url, tmp_path_factory.mktemp("search-kill"), SEARCHING) as (a, b):
        out: dict[str, Any] = {}

        def run() -> None:
            try:
                out["result"] = local(server=f"http://127.0.0.1:{a.port}")
            except ShardingError as e:  # pragma: no cover - reported by the assertion below
                out["error"] = e

        thread = threading.Thread(target=run)
        thread.start()
        compiling: dict[int, str] = {}
        deadline = time.monotonic() + 120
        while len(set(compiling.values())) < 2 and time.monotonic() < deadline:  # both replicas hold a candidate
            compiling = {int(i): str(o) for i, o in _rows(url, "SELECT idx, owner FROM search_jobs WHERE state = "
                                                               "'compiling'")}  # fmt: skip
            time.sleep(0.05)
        assert len(set(compiling.values())) == 2, compiling
        os.kill(b.proc.pid, signal.SIGKILL)
        b.proc.wait(10)
        thread.join(240)
        assert "error" not in out and "result" in out
        result = out["result"]
        assert result["compiled"] == result["enumerated"]
        # the killed replica's candidate was queued again and compiled by the survivor
        answered = {int(i): str(o) for i, o in _rows(url, "SELECT idx, owner FROM search_jobs WHERE state = 'done'")}
        moved = [i for i, owner in compiling.items() if answered.get(i) != owner]
        assert len(moved) == 1, (compiling, answered)


def _rows(url: str, sql: str) -> list[Any]:
    """Rows of the replicas' store, read as they see it."""
    store = open_store(url)
    store.open()
    try:
        return store._read(sql, ())
    finally:
        store.close()
