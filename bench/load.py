"""Load: 32 concurrent clients for 30 s on loopback, mixing layout, topology, share-link and kernel-run requests.

Starts its own ``shardscope serve`` (throwaway store) on a free 127.0.0.1 port; each client thread
keeps one keep-alive connection and loops for a bounded time. Reports requests, errors (any status
other than the expected one, or a socket error), p50/p99 per kind and overall, and the server's RSS
before the load, after it, and after a second identical round (growth between the two rounds is
what a leak would show; the first round fills the bounded caches), with its kernel workers' RSS.
A kernel run answered 429 ``busy`` (every worker busy and the queue full) is counted apart: it is
the documented answer under load, not an error. Prints a markdown table.

``--replicas``: the same load against two replicas behind a proxy, as docker-compose.yml's ``replicas`` profile
runs them — a PostgreSQL cluster of its own (Debian's ``postgresql``, as the tests start it), two ``shardscope
serve --db postgresql://...`` and Debian's ``caddy`` with the compose file's Caddyfile in front; the RSS
figures are the two replicas' together.

Run: ``.venv/bin/python bench/load.py [--seconds 30] [--clients 32] [--replicas]``.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import orjson

LAYOUTS = [
    ("cpu:8", [2, 4], "P('x', 'y')", [8, 16]),
    ("tpu:v5e:16x16", [16, 16], "P('x', 'y')", [64, 64]),
    ("tpu:v4:4x4x4", [4, 16], "P(None, ('x', 'y'))", [8, 64]),
    ("cpu:4096", [64, 64], "P('x', 'y')", [64, 64]),
]
TOPOLOGIES = ["tpu:v5e:16x16", "tpu:v4:4x4x4", "gpu:h100:4x8", "tpu:v5p:8x8x8"]
KERNELS = [("elementwise", "P('x', 'y')"), ("sum_axis0", "P('x', 'y')"), ("matmul_xxt", "P('x', 'y')")]


def worker_rss_mib(pid: int) -> float:
    """The kernel workers' resident memory: the server's child processes (any thread may have started them)."""
    total = 0.0
    for status in Path("/proc").glob("[0-9]*/status"):
        with contextlib.suppress(OSError, ValueError):
            fields = dict(line.split(":", 1) for line in status.read_text().splitlines() if ":" in line)
            if int(fields["PPid"]) == pid:
                total += int(fields["VmRSS"].split()[0]) / 1024
    return total


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] if values else float("nan")


def run_round(port: int, seconds: float, clients: int) -> tuple[dict[str, list[float]], int, int]:
    lat: dict[str, list[float]] = {"layout": [], "topology": [], "link write": [], "link read": [], "kernel run": []}
    lock = threading.Lock()
    errors = [0]
    busy = [0]
    deadline = time.monotonic() + seconds

    def worker(seed: int) -> None:
        rng = random.Random(seed)
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        local: dict[str, list[float]] = {k: [] for k in lat}
        bad = 0
        full = 0
        ids: list[str] = []
        while time.monotonic() < deadline:
            kind = rng.choices(["layout", "topology", "link write", "link read", "kernel run"], [6, 2, 1, 1, 1])[0]
            if kind == "link read" and not ids:
                kind = "link write"
            if kind == "layout":
                devices, mesh, spec, shape = rng.choice(LAYOUTS)
                # a bounded set of shapes: some requests hit the caches, some do not
                shape = [shape[0] * rng.randint(1, 8), *shape[1:]]
                body = {"devices": devices, "mesh": {"shape": mesh, "axis_names": ["x", "y"]}, "spec": spec,
                        "shape": shape, "dtype": "float32"}  # fmt: skip
                args = ("POST", "/api/layout", orjson.dumps(body), {"Content-Type": "application/json"})
                want = 200
            elif kind == "topology":
                args = ("GET", f"/api/topology?devices={rng.choice(TOPOLOGIES)}", None, {})
                want = 200
            elif kind == "link write":
                body = {"view": "layout", "state": {"devices": "cpu:8", "spec": f"P('x') #{rng.random()}"}}
                args = ("POST", "/api/links", orjson.dumps(body), {"Content-Type": "application/json"})
                want = 201
            elif kind == "kernel run":
                name, spec = rng.choice(KERNELS)
                # a bounded set of runs: the first round fills the result cache, the second mostly hits it
                x = {"shape": [8 * rng.randint(1, 4), 8], "spec": spec, "dtype": "float32"}
                mesh = {"shape": [2, 4], "axis_names": ["x", "y"], "axis_types": ["auto", "auto"]}
                body = {"kernel": name, "devices": "cpu:8", "mesh": mesh, "inputs": [x]}
                args = ("POST", "/api/kernels/run", orjson.dumps(body), {"Content-Type": "application/json"})
                want = 200
            else:
                args = ("GET", f"/api/links/{rng.choice(ids)}", None, {})
                want = 200
            t = time.perf_counter()
            try:
                conn.request(*args)
                response = conn.getresponse()
                data = response.read()
                ok = response.status == want
                if kind == "kernel run" and response.status == 429:
                    ok, full = True, full + 1
                if ok and kind == "link write":
                    ids.append(orjson.loads(data)["id"])
            except (OSError, http.client.HTTPException):
                ok = False
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            local[kind].append((time.perf_counter() - t) * 1e3)
            bad += not ok
        conn.close()
        with lock:
            for k, v in local.items():
                lat[k].extend(v)
            errors[0] += bad
            busy[0] += full

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(clients)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    print(f"kernel runs answered 429 busy: {busy[0]}", file=sys.stderr)
    return lat, sum(len(v) for v in lat.values()), errors[0]


def serve(port: int, db: str, log: Path) -> subprocess.Popen[bytes]:
    cli = Path(sys.executable).parent / "shardscope"
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [str(cli), "serve", "--port", str(port), "--db", db],
            env={**os.environ, "JAX_PLATFORMS": "cpu"}, stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    for _ in range(600):
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
            c.request("GET", "/api/health")
            if c.getresponse().status == 200:
                break
        except OSError:
            time.sleep(0.1)
    return proc


@contextlib.contextmanager
def servers(tmp: str, replicas: bool) -> Iterator[tuple[int, list[int]]]:
    """The port to load and the server processes behind it: one on SQLite, or two on PostgreSQL behind caddy."""
    if not replicas:
        port = free_port()
        proc = serve(port, f"{tmp}/links.db", Path(tmp) / "server.log")
        try:
            yield port, [proc.pid]
        finally:
            proc.terminate()
            proc.wait(10)
        return
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from tests.plugins.live import caddy
    from tests.plugins.postgres import cluster

    with cluster() as postgres:
        url = postgres.url()
        procs = [serve(free_port(), url, Path(tmp) / f"replica-{i}.log") for i in (1, 2)]
        ports = [int(p.args[3]) for p in procs]  # type: ignore[index]
        try:
            with caddy(ports, Path(tmp)) as port:
                yield port, [p.pid for p in procs]
        finally:
            for p in procs:
                p.terminate()
                p.wait(10)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--replicas", action="store_true", help="two replicas on PostgreSQL behind caddy")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, servers(tmp, args.replicas) as (port, pids):
        before = sum(rss_mib(p) for p in pids)
        lat1, n1, err1 = run_round(port, args.seconds, args.clients)
        after1, workers1 = sum(rss_mib(p) for p in pids), sum(worker_rss_mib(p) for p in pids)
        lat2, n2, err2 = run_round(port, args.seconds, args.clients)
        after2, workers2 = sum(rss_mib(p) for p in pids), sum(worker_rss_mib(p) for p in pids)
    where = "two replicas on PostgreSQL behind caddy" if args.replicas else "one server on SQLite"
    print(f"{args.clients} clients, 2 rounds of {args.seconds:.0f} s, loopback, {where}")
    print()
    print("| round | requests | req/s | errors | p50 | p99 | server RSS after |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for i, (lat, n, err, rss) in enumerate(((lat1, n1, err1, after1), (lat2, n2, err2, after2)), 1):
        every = [x for v in lat.values() for x in v]
        print(f"| {i} | {n} | {n / args.seconds:.0f} | {err} | {statistics.median(every):.1f} ms | "
              f"{pct(every, 0.99):.1f} ms | {rss:.0f} MiB |")  # fmt: skip
    print()
    print(f"server RSS before load: {before:.0f} MiB; growth during round 2: {after2 - after1:+.1f} MiB; "
          f"kernel workers' RSS after each round: {workers1:.0f} / {workers2:.0f} MiB")  # fmt: skip
    print()
    print("| kind (round 2) | requests | p50 | p99 |")
    print("|---|---:|---:|---:|")
    for kind, v in lat2.items():
        print(f"| {kind} | {len(v)} | {statistics.median(v):.1f} ms | {pct(v, 0.99):.1f} ms |")
    return 0 if err1 + err2 == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
