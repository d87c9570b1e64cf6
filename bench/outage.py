"""A PostgreSQL outage under load (issue 29): 64 clients on two replicas while the database is stopped for 20 s.

Starts a PostgreSQL cluster of its own (Debian's ``postgresql``, as the tests start it, tests/plugins/postgres.py)
and two ``shardscope serve --db postgresql://...`` on it; ``--clients`` threads (each on its own loopback address
and keep-alive connection) write share links and read back the acknowledged ones, spread over both replicas, while
one probe each asks ``GET /api/health`` and ``POST /api/layout`` (routes that need no database) every 50 ms of the
first replica (tests/plugins/outage.py). The database is stopped (``pg_ctl stop -m fast``: its sessions end, as
in a restart or a failover) and ``--outage`` seconds later started again; with ``--job``, a kernel job started on
the first replica is running when it stops. Prints, per phase (before, during, after) and kind, the requests,
their statuses and p50 / p99 / slowest times; the acknowledged writes that do not read back (lost); how long each
replica took to find the database back; and the job's final state, read through the second replica.
docs/operating.md records its figures.

Run: ``.venv/bin/python bench/outage.py [--clients 64] [--outage 20] [--before 10] [--after 10] [--job]``.
"""

from __future__ import annotations

import argparse
import collections
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.plugins.live import Server, start, stop
from tests.plugins.outage import Answer, Load, lost, percentile
from tests.plugins.postgres import cluster

SETTINGS = {"max_kernel_workers": 1, "max_kernel_seconds": 600}
JOB = {
    "kernel": "matmul_xxt",
    "devices": "cpu:8",
    "mesh": {"shape": [2, 4], "axis_names": ["x", "y"], "axis_types": ["auto", "auto"]},
    "inputs": [{"shape": [3072, 4096], "spec": "P('x', 'y')", "dtype": "float32"}],
}


def get_json(server: Server, path: str) -> Any:
    return orjson.loads(server.request("GET", path)[2])


def wait(check: Any, seconds: float) -> float:
    """Seconds until ``check()`` is true (raises past ``seconds``)."""
    began = time.monotonic()
    while not check():
        if time.monotonic() - began > seconds:
            raise TimeoutError(f"not within {seconds} s")
        time.sleep(0.1)
    return time.monotonic() - began


def row(phase: str, kind: str, answers: list[Answer]) -> str:
    statuses = collections.Counter(a.status for a in answers)
    shown = ", ".join(f"{s}×{n}" for s, n in sorted(statuses.items()))
    times = [a.seconds * 1e3 for a in answers]
    return (
        f"| {phase} | {kind} | {len(answers)} | {shown} | {percentile(times, 0.5):.1f} | {percentile(times, 0.99):.1f} "
        f"| {max(times, default=float('nan')):.1f} |"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--outage", type=float, default=20.0)
    parser.add_argument("--before", type=float, default=10.0)
    parser.add_argument("--after", type=float, default=10.0)
    parser.add_argument("--job", action="store_true", help="a kernel job running across the outage (it takes the CPU)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, cluster() as postgres:
        url = postgres.url()
        a = start(url, Path(tmp) / "a.log", SETTINGS, ready_s=300)  # type: ignore[arg-type]
        b = start(url, Path(tmp) / "b.log", SETTINGS, ready_s=300)  # type: ignore[arg-type]
        try:
            job = a.post_json("/api/kernels/jobs", JOB)[1]["id"] if args.job else None
            if job is not None:
                wait(lambda: get_json(b, f"/api/kernels/jobs/{job}")["state"] == "running", 300)
            with Load([a.port, b.port], args.clients) as load:
                began = time.monotonic()
                time.sleep(args.before)
                job_then = get_json(b, f"/api/kernels/jobs/{job}")["state"] if job is not None else None
                stopped = time.monotonic()
                postgres.stop()
                time.sleep(max(0.0, args.outage - (time.monotonic() - stopped)))
                back = time.monotonic()
                postgres.start()
                found = [wait(lambda s=s: get_json(s, "/api/health")["status"] == "ok", 60) for s in (a, b)]
                time.sleep(args.after)
                ended = time.monotonic()
            final = None
            if job is not None:
                wait(lambda: get_json(b, f"/api/kernels/jobs/{job}")["state"] in ("done", "error"), 600)
                final = get_json(b, f"/api/kernels/jobs/{job}")
            missing = lost([a.port, b.port], load.acknowledged)
        finally:
            stop(a)
            stop(b)
    print(f"\n{args.clients} clients on two replicas, a {args.outage:g} s PostgreSQL outage (pg_ctl stop -m fast)\n")
    print("| phase | kind | requests | statuses | p50 ms | p99 ms | slowest ms |")
    print("|---|---|---|---|---|---|---|")
    for phase, start_at, end_at in (("before", began, stopped), ("during", stopped, back), ("after", back, ended)):
        for kind in ("write", "read", "health", "layout"):
            print(row(phase, kind, load.between(start_at, end_at, [kind])))
        print(row(phase, "every answer", load.between(start_at, end_at)))
    refused = load.between(stopped, back, ["write", "read"])
    codes = collections.Counter((a.code, a.retry_after) for a in refused if a.status == 503)
    print(f"\n503s during the outage (code, Retry-After): {dict(codes)}")
    for phase, start_at, end_at in (("before", began, stopped), ("after", back, ended)):
        why = collections.Counter(a.message[:60] for a in load.between(start_at, end_at) if a.status == 503)
        print(f"503s {phase} the outage: {dict(why)}")
    print("\nsecond by second (statuses of the database requests sent in it):")
    for second in range(int(ended - began) + 1):
        sent = load.between(began + second, began + second + 1, ["write", "read"])
        mark = " <- stopped" if began + second <= stopped < began + second + 1 else ""
        mark += " <- started again" if began + second <= back < began + second + 1 else ""
        print(f"  {second:3d} s: {dict(sorted(collections.Counter(a.status for a in sent).items()))}{mark}")
    print(f"health and layout p99 throughout: {ms(load.between(began, ended, ['health']))} ms, "
          f"{ms(load.between(began, ended, ['layout']))} ms")  # fmt: skip
    print(f"acknowledged writes: {len(load.acknowledged)}, lost: {len(missing)}")
    print(f"replicas back {found[0]:.1f} s and {found[1]:.1f} s after the database was")
    if final is not None:
        result = " with its result" if final.get("result") else ""
        failure = f"; failure {final['failure']}" if final.get("failure") else ""
        print(f"kernel job: {job_then} when the database stopped, then {final['state']}{result}{failure}")
    return 0


def ms(answers: list[Answer]) -> str:
    return f"{percentile([a.seconds for a in answers], 0.99) * 1e3:.1f}"


if __name__ == "__main__":
    raise SystemExit(main())
