"""The worker pool's bounds: a hung kernel times out and its worker is replaced, a crashing one
likewise, and a full queue answers 429 with Retry-After — each followed by runs that succeed.

The kernels that hang or crash are in ``tests/kernel_hooks.py``: its ``register`` adds them to the
catalog of this process (for planning) and of every worker (``kernel_worker_pool(setup=...)``).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from server.app import kernel_worker_pool
from server.pool import WorkerPool
from server.settings import Settings
from sharding_core.kernels import catalog
from tests.conftest import ClientFactory
from tests.helpers import post
from tests.kernel_hooks import HOOKS, register

pytestmark = pytest.mark.workers  # worker processes or subprocesses

TIMEOUT_S = 8  # every run here takes well under a second on a quiet machine, and under 8 s at load 15
COMPILE_S = 30  # a compile-only run's own limit, well past TIMEOUT_S and past libtpu's start on a busy machine
WORKERS = 2
QUEUE = 1


SETTINGS = Settings().with_values(
    [
        ("max_kernel_workers", WORKERS),
        ("max_kernel_queue", QUEUE),
        ("max_kernel_seconds", TIMEOUT_S),
        ("max_compile_seconds", COMPILE_S),
    ]
)


@pytest.fixture(scope="module")
def pool() -> Iterator[WorkerPool]:
    register()
    p = kernel_worker_pool(SETTINGS, setup=("tests.kernel_hooks:register",))
    yield p
    pids, threads = p.worker_pids(), p.slot_threads()
    p.close()
    for k in HOOKS:
        catalog.unregister(k.name)
    # close() leaves nothing behind: every worker process has exited and been reaped.
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    assert threads and not any(t.is_alive() for t in threads)


@pytest.fixture(scope="module")
def client(pool: WorkerPool, make_client: ClientFactory) -> TestClient:
    c = make_client(kernel_pool=pool, settings=SETTINGS)
    pool.warm()
    return c


def body(kernel: str, n: int = 8, tenths: int | None = None) -> dict[str, Any]:
    b: dict[str, Any] = {
        "kernel": kernel,
        "devices": "cpu:8",
        "mesh": {"shape": [8], "axis_names": ["x"], "axis_types": ["auto"]},
        "inputs": [{"shape": [n], "spec": "P('x')", "dtype": "float32"}],
    }
    if tenths is not None:
        b["params"] = {"tenths": str(tenths)}
    return b


def wait_for_workers(pool: WorkerPool, gone: set[int] = frozenset()) -> list[int]:  # type: ignore[assignment]
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        pids = pool.worker_pids()
        if len(pids) == WORKERS and not gone & set(pids):
            return pids
        time.sleep(0.05)
    pytest.fail(f"workers were not (re)started: {pool.worker_pids()}")


def wait_job(client: TestClient, job_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        job: dict[str, Any] = client.get(f"/api/kernels/jobs/{job_id}").json()
        if job["state"] in ("done", "error"):
            return job
        time.sleep(0.02)
    pytest.fail("job did not finish")


def both_workers_run(client: TestClient, n: int) -> None:
    """Two runs at once, so both workers (the replacement included) must answer."""
    ids = [post(client, "/api/kernels/jobs", body("elementwise", n * k)).json()["id"] for k in (1, 2)]
    for job_id in ids:
        job = wait_job(client, job_id)
        assert job["state"] == "done", job["failure"]


def test_a_run_inside_the_time_limit_succeeds(client: TestClient, pool: WorkerPool) -> None:
    wait_for_workers(pool)
    r = post(client, "/api/kernels/run", body("test_sleep", tenths=2))
    assert r.status_code == 200, r.text
    assert r.json()["outputs"][0]["max_abs_error"] < 1e-6  # float32 x + 1 against float64


def test_a_hung_run_times_out_and_its_worker_is_replaced(client: TestClient, pool: WorkerPool) -> None:
    before = set(wait_for_workers(pool))
    r = post(client, "/api/kernels/run", body("test_sleep", tenths=100_000))
    assert r.status_code == 422
    err = r.json()["error"]
    assert err["code"] == "timeout" and "max_kernel_seconds" in err["message"] and err["limit"] == TIMEOUT_S
    after = set(wait_for_workers(pool, gone=before - set(pool.worker_pids())))
    assert len(before - after) == 1  # exactly the hung worker was replaced
    both_workers_run(client, 16)


def compile_only_body(tenths: int) -> dict[str, Any]:
    return {"kernel": "test_sleep", "devices": "tpu:v5e:2x2", "compile_only": True, "params": {"tenths": str(tenths)},
            "mesh": {"shape": [4], "axis_names": ["x"], "axis_types": ["auto"]},
            "inputs": [{"shape": [8], "spec": "P('x')", "dtype": "float32"}]}  # fmt: skip


@pytest.mark.tpu
def test_a_compile_only_run_is_bounded_by_its_compile_budget(client: TestClient, pool: WorkerPool) -> None:
    """A compile-only run (issue 25) is bounded by max_compile_seconds, not max_kernel_seconds: one that takes
    longer than the run limit completes inside the budget; one that outruns the budget is stopped with it named."""
    wait_for_workers(pool)
    r = post(client, "/api/kernels/run", compile_only_body(tenths=10 * TIMEOUT_S + 10))  # 9 s: past the run limit
    assert r.status_code == 200, r.text
    assert r.json()["compile_only"] is True and r.json()["timing"]["run_ms"] is None
    before = set(wait_for_workers(pool))
    r = post(client, "/api/kernels/run", compile_only_body(tenths=100_000))
    assert r.status_code == 422
    err = r.json()["error"]
    assert err["code"] == "timeout" and "max_compile_seconds" in err["message"] and err["limit"] == COMPILE_S
    after = set(wait_for_workers(pool, gone=before - set(pool.worker_pids())))
    assert len(before - after) == 1  # the worker that outran the budget was replaced
    both_workers_run(client, 16)


def test_a_crashing_run_is_reported_and_its_worker_is_replaced(client: TestClient, pool: WorkerPool) -> None:
    before = set(wait_for_workers(pool))
    r = post(client, "/api/kernels/run", body("test_crash"))
    assert r.status_code == 422
    err = r.json()["error"]
    assert err["code"] == "worker_crashed" and "exit code 3" in err["message"]
    after = set(wait_for_workers(pool, gone=before - set(pool.worker_pids())))
    assert len(before - after) == 1
    both_workers_run(client, 24)
    # A crash is not cached: the same run crashes (and is reported) again.
    assert post(client, "/api/kernels/run", body("test_crash")).json()["error"]["code"] == "worker_crashed"


def test_a_full_queue_answers_429_with_retry_after(client: TestClient, pool: WorkerPool) -> None:
    wait_for_workers(pool)
    # workers + queue runs may be in flight: at the limit every one is accepted ...
    accepted = [post(client, "/api/kernels/jobs", body("test_sleep", tenths=8 + k)) for k in range(WORKERS + QUEUE)]
    assert [r.status_code for r in accepted] == [202] * (WORKERS + QUEUE)
    # ... and one past it is refused, with the standard error body and a Retry-After.
    r = post(client, "/api/kernels/run", body("test_sleep", tenths=20))
    assert r.status_code == 429
    assert int(r.headers["retry-after"]) >= 1
    err = r.json()["error"]
    assert err["code"] == "busy" and err["limit"] == WORKERS + QUEUE and "max_kernel_queue" in err["message"]
    # An identical run joins the one in flight instead of taking a place in the queue.
    same = post(client, "/api/kernels/jobs", body("test_sleep", tenths=8))
    assert same.status_code == 202 and same.json()["id"] == accepted[0].json()["id"]
    states = [wait_job(client, a.json()["id"])["state"] for a in accepted]
    assert states == ["done"] * (WORKERS + QUEUE)
    assert post(client, "/api/kernels/run", body("elementwise", 32)).status_code == 200


def test_a_worker_retires_after_a_large_mesh_and_the_next_run_gets_a_fresh_one(
    client: TestClient, pool: WorkerPool, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = set(wait_for_workers(pool))
    # The threshold is 512 devices; a lower one makes an 8-device run "large" here.
    monkeypatch.setitem(pool.options, "recycle_above_devices", 4)  # sent to the worker with each job
    assert post(client, "/api/kernels/run", body("elementwise", 40)).status_code == 200
    monkeypatch.setitem(pool.options, "recycle_above_devices", 512)
    assert post(client, "/api/kernels/run", body("elementwise", 48)).status_code == 200
    both_workers_run(client, 56)
    assert len(before - set(wait_for_workers(pool))) == 1
