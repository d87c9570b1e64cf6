"""Two replicas on one PostgreSQL (issue 24): two real ``shardscope serve`` processes sharing one database answer
for each other — a link, a snapshot and a run written through one are read through the other; a kernel job
created on one is polled to ``done`` on the other, and the result one computed is served by the other from the
store; ``kill -9`` of a replica during writes loses no acknowledged write, its unfinished job is reported failed
within the silence limit, and the other keeps serving."""

from __future__ import annotations

import contextlib
import http.client
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jax.numpy as jnp
import orjson
import pytest

from sharding_core import capture, new_run_id
from tests.plugins.live import Server, caddy, start, stop, two_replicas
from tests.plugins.postgres import Postgres

pytestmark = pytest.mark.live  # a real server on a socket

SILENCE = 3  # max_kernel_job_silence_seconds, at its minimum: the lease test waits for it
SETTINGS = {"max_kernel_workers": 1, "max_kernel_job_silence_seconds": SILENCE, "max_db_connections": 4}
KERNEL = {
    "kernel": "elementwise",
    "devices": "cpu:8",
    "mesh": {"shape": [2, 4], "axis_names": ["x", "y"], "axis_types": ["auto", "auto"]},
    "inputs": [{"shape": [16, 8], "spec": "P('x', 'y')", "dtype": "float32"}],
}


@pytest.fixture(scope="module")
def url(postgres: Postgres) -> str:
    return postgres.fresh_url()


@pytest.fixture(scope="module")
def replicas(url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, Server]]:
    with two_replicas(url, tmp_path_factory.mktemp("replicas"), SETTINGS) as both:
        yield both


def children(pid: int) -> list[int]:
    """The processes ``pid`` started (a server's kernel workers)."""
    found = []
    for status in Path("/proc").glob("[0-9]*/status"):
        with contextlib.suppress(OSError, ValueError, KeyError):
            fields = dict(line.split(":", 1) for line in status.read_text().splitlines() if ":" in line)
            if int(fields["PPid"]) == pid:
                found.append(int(status.parent.name))
    return found


def get_json(server: Server, path: str) -> tuple[int, Any]:
    status, _, data = server.request("GET", path)
    return status, orjson.loads(data)


def run_part(secret: str, process: int) -> dict[str, Any]:
    part: dict[str, Any] = capture({"w": jnp.ones((8, 4))}, "run")
    part["process_index"], part["process_count"] = process, 2
    n = len(part["devices"]["id"])
    part["devices"]["process_index"] = [i * 2 // n for i in range(n)]  # the devices split between the two
    part["run"] = {"id": secret, "process_index": process, "process_count": 2}
    return part


def test_links_snapshots_and_runs_written_through_one_are_read_through_the_other(
    replicas: tuple[Server, Server],
) -> None:
    a, b = replicas
    status, link = a.post_json("/api/links", {"view": "layout", "state": {"spec": "P('x')"}})
    assert status == 201
    assert get_json(b, f"/api/links/{link['id']}") == (200, {"view": "layout", "state": {"spec": "P('x')"}})

    snap = capture({"w": jnp.ones((8, 4))}, "replicated")
    status, created = b.post_json("/api/snapshots", snap)
    assert status == 201
    from_a, from_b = (
        a.request("GET", f"/api/snapshots/{created['id']}"),
        b.request("GET", f"/api/snapshots/{created['id']}"),
    )
    assert from_a[0] == from_b[0] == 200 and from_a[2] == from_b[2]
    assert orjson.loads(from_a[2])["name"] == "replicated"
    assert get_json(a, f"/api/links/{created['url'].removeprefix('/s/')}")[0] == 200

    secret = new_run_id()  # one part through each replica: one run, one read id
    parts = []
    for process, server in enumerate((a, b)):
        status, answer = server.post_json("/api/snapshots", run_part(secret, process))
        assert status == 201, answer
        parts.append(answer)
    read_id = parts[0]["run"]
    assert parts[1]["run"] == read_id
    for server in (a, b):
        status, merged = get_json(server, f"/api/snapshots/runs/{read_id}")
        assert status == 200 and merged["processes"]["reported"] == [0, 1], merged.get("processes")
    assert b.post_json("/api/snapshots", run_part(secret, 0))[0] == 409  # write-once per process, across replicas


def test_a_job_created_on_one_is_polled_to_done_on_the_other_and_its_result_shared(
    replicas: tuple[Server, Server],
) -> None:
    a, b = replicas
    status, job = a.post_json("/api/kernels/jobs", KERNEL)
    assert status == 202
    status, seen = get_json(b, job["url"])  # readable through the other replica at once
    assert status == 200 and seen["id"] == job["id"] and seen["state"] in ("queued", "compiling", "running", "done")
    deadline = time.monotonic() + 180
    while seen["state"] not in ("done", "error") and time.monotonic() < deadline:
        time.sleep(0.1)
        seen = get_json(b, job["url"])[1]
    assert seen["state"] == "done", seen
    assert seen["result"]["outputs"][0]["spec"] == "P('x', 'y')" and seen["elapsed_ms"] > 0
    assert get_json(a, job["url"])[1] == seen  # the same answer from both
    # The other replica serves the result from the store: a cache hit, without running it.
    status, _, body = b.request("POST", "/api/kernels/run", orjson.dumps(KERNEL), {"Content-Type": "application/json"})
    assert status == 200
    served = orjson.loads(body)
    assert served["cached"] is True and served["outputs"] == seen["result"]["outputs"]
    assert get_json(b, "/api/kernels/jobs/" + "A" * 22)[0] == 404


def test_the_compose_files_proxy_spreads_requests_over_both(replicas: tuple[Server, Server], tmp_path: Path) -> None:
    """docker-compose.yml's Caddyfile, run by Debian's caddy in front of the two replicas."""
    a, b = replicas
    served_before = [s.log.read_text().count('"POST /api/links HTTP/1.1" 201') for s in (a, b)]
    try:
        proxy = caddy([a.port, b.port], tmp_path)
        port = proxy.__enter__()
    except FileNotFoundError as e:
        pytest.skip(str(e))
    try:
        front = Server(port, tmp_path / "caddy.log", a.proc)
        assert get_json(front, "/api/health")[1]["status"] == "ok"
        written = {}
        for n in range(40):
            status, link = front.post_json("/api/links", {"view": "layout", "state": {"through": "proxy", "n": n}})
            assert status == 201, link
            written[link["id"]] = n
        for link, n in written.items():
            state = {"through": "proxy", "n": n}
            assert (
                get_json(a, f"/api/links/{link}")[1]["state"] == get_json(b, f"/api/links/{link}")[1]["state"] == state
            )
    finally:
        proxy.__exit__(None, None, None)
    served = [
        s.log.read_text().count('"POST /api/links HTTP/1.1" 201') - n
        for s, n in zip((a, b), served_before, strict=True)
    ]
    assert sum(served) == 40 and min(served) > 0, served  # both replicas answered some


def test_kill_9_of_a_replica_during_writes_loses_nothing_acknowledged(
    replicas: tuple[Server, Server], url: str, tmp_path: Path
) -> None:
    _, b = replicas
    doomed = start(url, tmp_path / "doomed.log", SETTINGS)  # type: ignore[arg-type]
    workers: list[int] = []
    try:
        # Unfinished when it dies: a matmul of tens of GFLOP on its one cold worker, and a run queued behind it.
        jobs = []
        for kernel, shape in (("matmul_xxt", [3072, 4096]), ("elementwise", [24, 8])):
            body = {**KERNEL, "kernel": kernel, "inputs": [{"shape": shape, "spec": "P('x', 'y')", "dtype": "float32"}]}
            status, job = doomed.post_json("/api/kernels/jobs", body)
            assert status == 202, job
            jobs.append(job["id"])
        acknowledged: list[tuple[str, int]] = []
        stop_writing = threading.Event()

        def write() -> None:
            conn = http.client.HTTPConnection("127.0.0.1", doomed.port, timeout=10)
            n = 0
            try:
                while not stop_writing.is_set():
                    body = orjson.dumps({"view": "layout", "state": {"n": n}})
                    try:
                        conn.request("POST", "/api/links", body, {"Content-Type": "application/json"})
                        response = conn.getresponse()
                        data = response.read()
                    except (OSError, http.client.HTTPException):
                        return  # the replica is gone: this write was never acknowledged
                    if response.status == 201:
                        acknowledged.append((orjson.loads(data)["id"], n))
                    n += 1
            finally:
                conn.close()  # a socket left open is reported when collected, in whichever test runs then

        writers = [threading.Thread(target=write) for _ in range(4)]
        for w in writers:
            w.start()
        deadline = time.monotonic() + 60
        while len(acknowledged) < 200 and time.monotonic() < deadline:
            time.sleep(0.01)
        unfinished = [j for j in jobs if get_json(b, f"/api/kernels/jobs/{j}")[1]["state"] not in ("done", "error")]
        workers += children(doomed.proc.pid)
        doomed.proc.kill()  # kill -9, mid-stream: four writes in flight
        killed_at = time.monotonic()
        doomed.proc.wait(10)
        stop_writing.set()
        for w in writers:
            w.join(15)
    finally:
        stop(doomed)
        for pid in workers:  # its kernel workers, orphaned and still computing
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    assert len(acknowledged) >= 200, doomed.log.read_text()[-3000:]
    for link, n in acknowledged:  # every acknowledged write, through the other replica
        assert get_json(b, f"/api/links/{link}") == (200, {"view": "layout", "state": {"n": n}})
    # The other keeps serving, writes included.
    assert get_json(b, "/api/health")[1]["store"] == "ok"
    assert b.post_json("/api/links", {"view": "layout", "state": {}})[0] == 201
    # A job whose replica died is reported failed once its silence passes the limit, never left running.
    assert unfinished, "both jobs finished before the kill: nothing to check"
    for job_id in unfinished:
        while True:
            seen = get_json(b, f"/api/kernels/jobs/{job_id}")[1]
            if seen["state"] in ("done", "error"):
                break
            assert time.monotonic() - killed_at < SILENCE + 10, seen
            time.sleep(0.2)
        assert seen["state"] == "error" and seen["failure"]["code"] == "worker_crashed", seen
        assert "max_kernel_job_silence_seconds" in seen["failure"]["message"]
