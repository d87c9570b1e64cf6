"""End-to-end ``POST /api/layout`` against a real ``shardscope serve``, next to ``jax.debug.visualize_sharding``.

Run from the repository root: ``.venv/bin/python bench/bench_server.py [--quick]``.

* Latency: one keep-alive loopback connection, requests one after another; p50 and p99 for 8, 256
  and 4096 devices. *cold*: every request has a shape never asked before, so nothing is cached
  (neither the layout in sharding_core nor the encoded bytes in the server); *warm*: the same
  request repeated (both caches hit).
* Peer: ``jax.debug.visualize_sharding(shape, NamedSharding(mesh, spec))`` on the same sharding,
  in this process, output discarded: what a user runs today to see a layout. Also computed per
  distinct shape, and the ratio is its p50 over the server's cold p50.
* Load: 32 client threads, each with its own connection, for 10 s, on a mix of the three sizes over
  a bounded set of shapes; errors, throughput, p50/p99, and the server's RSS before and after.

Everything talks to 127.0.0.1 only and stops by itself. Prints a markdown table.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import io
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import orjson

ROOT = Path(__file__).resolve().parent.parent
CLI = ROOT / ".venv" / "bin" / "shardscope"

# (label, devices, mesh shape, axis names, spec, base array shape): the cold runs scale dim 0 by i.
CASES = [
    ("8 (cpu:8, 2x4)", "cpu:8", (2, 4), ("x", "y"), "P('x', 'y')", (2, 4)),
    ("256 (tpu:v5e:16x16, 16x16)", "tpu:v5e:16x16", (16, 16), ("x", "y"), "P('x', 'y')", (16, 16)),
    ("4096 (cpu:4096, 64x64)", "cpu:4096", (64, 64), ("x", "y"), "P('x', 'y')", (64, 64)),
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return -1


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


class Client:
    """One keep-alive HTTP/1.1 connection to the server."""

    def __init__(self, port: int) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)

    def layout(self, body: bytes) -> tuple[int, bytes]:
        self.conn.request("POST", "/api/layout", body=body, headers={"Content-Type": "application/json"})
        response = self.conn.getresponse()
        return response.status, response.read()

    def close(self) -> None:
        self.conn.close()


def request_body(
    devices: str, mesh: tuple[int, ...], names: tuple[str, ...], spec: str, shape: tuple[int, ...]
) -> bytes:
    return orjson.dumps(
        {"devices": devices, "mesh": {"shape": mesh, "axis_names": names}, "spec": spec, "shape": shape}
    )


def measure(client: Client, bodies: list[bytes]) -> tuple[list[float], int]:
    """Sends each body in turn; returns the latencies (ms) and the last response's size."""
    times, size = [], 0
    for body in bodies:
        start = time.perf_counter()
        status, data = client.layout(body)
        times.append((time.perf_counter() - start) * 1000)
        if status != 200:
            raise RuntimeError(f"HTTP {status}: {data[:300]!r}")
        size = len(data)
    return times, size


def visualize_ms(
    devices: str, mesh_shape: tuple[int, ...], names: tuple[str, ...], shapes: list[tuple[int, ...]]
) -> list[float]:
    import jax
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    from sharding_core.devices import parse_devices

    mesh = jax.make_mesh(mesh_shape, names, devices=parse_devices(devices).devices)
    sharding = NamedSharding(mesh, P(*names))
    sink = io.StringIO()
    with contextlib.redirect_stdout(sink):
        jax.debug.visualize_sharding(shapes[0], sharding)  # warm-up: imports, rich set-up
    out = []
    for shape in shapes:
        sink.seek(0)
        sink.truncate()
        start = time.perf_counter()
        with contextlib.redirect_stdout(sink):
            jax.debug.visualize_sharding(shape, sharding)
        out.append((time.perf_counter() - start) * 1000)
    return out


def load_run(port: int, seconds: float, clients: int) -> tuple[list[float], int, int]:
    bodies = [
        request_body(dev, mesh, names, spec, (base[0] * k, base[1]))
        for _, dev, mesh, names, spec, base in CASES[:2]
        for k in range(1, 17)
    ] + [request_body(*CASES[2][1:5], (64 * k, 64)) for k in range(1, 5)]
    latencies: list[float] = []
    errors = 0
    done = 0
    lock = threading.Lock()
    deadline = time.monotonic() + seconds

    def worker(seed: int) -> None:
        nonlocal errors, done
        client = Client(port)
        mine: list[float] = []
        bad = 0
        i = seed
        try:
            while time.monotonic() < deadline:
                body = bodies[i % len(bodies)]
                i += 7
                start = time.perf_counter()
                try:
                    status, _ = client.layout(body)
                    if status != 200:
                        bad += 1
                except (OSError, http.client.HTTPException):
                    bad += 1
                    client.close()
                    client = Client(port)
                mine.append((time.perf_counter() - start) * 1000)
        finally:
            client.close()
            with lock:
                latencies.extend(mine)
                errors += bad
                done += len(mine)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(seconds + 120)
    return latencies, errors, done


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer requests and a 3 s load run (a smoke test)")
    args = parser.parse_args()
    counts = {8: 300, 256: 150, 4096: 40} if not args.quick else {8: 30, 256: 15, 4096: 5}
    load_seconds = 3.0 if args.quick else 10.0

    port = free_port()
    tmp = Path(tempfile.mkdtemp(prefix="shardscope-bench-"))
    log_path = tmp / "server.log"
    log = log_path.open("wb")
    proc = subprocess.Popen(
        [str(CLI), "serve", "--port", str(port), "--db", str(tmp / "links.db")],
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**os.environ, "JAX_PLATFORMS": "cpu"},
        cwd=ROOT,
    )
    rows: list[str] = []
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
                conn.request("GET", "/api/health")
                if conn.getresponse().status == 200:
                    conn.close()
                    break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                print(log_path.read_text(), file=sys.stderr)
                return 1
            time.sleep(0.1)

        client = Client(port)
        # Warm the process: JAX's first NamedSharding, numpy, the threadpool.
        for _, dev, mesh, names, spec, base in CASES:
            client.layout(request_body(dev, mesh, names, spec, base))

        rss_start = rss_kib(proc.pid)
        rows.append(
            "| devices | server cold p50 | cold p99 | warm p50 | warm p99 | response | "
            "visualize_sharding p50 | cold speed-up |"
        )
        rows.append("|---|---|---|---|---|---|---|---|")
        for label, dev, mesh, names, spec, base in CASES:
            n = counts[int(label.split()[0])]
            # Distinct shapes: dim 0 = base * k, never requested before (k from 2; the warm-up used 1).
            cold_ms, size = measure(
                client, [request_body(dev, mesh, names, spec, (base[0] * k, base[1])) for k in range(2, n + 2)]
            )
            warm_ms, _ = measure(client, [request_body(dev, mesh, names, spec, base)] * n)
            viz = visualize_ms(dev, mesh, names, [(base[0] * k, base[1]) for k in range(2, min(n, 20) + 2)])
            speedup = statistics.median(viz) / statistics.median(cold_ms)
            rows.append(
                f"| {label} | {statistics.median(cold_ms):.2f} ms | {pct(cold_ms, 99):.2f} ms | "
                f"{statistics.median(warm_ms):.2f} ms | {pct(warm_ms, 99):.2f} ms | {size / 1024:.0f} KiB | "
                f"{statistics.median(viz):.2f} ms | {speedup:.1f}x |"
            )
        client.close()

        rss_before = rss_kib(proc.pid)
        latencies, errors, done = load_run(port, load_seconds, 32)
        rss_after = rss_kib(proc.pid)
        rows.append("")
        rows.append("| load: 32 clients, keep-alive, mixed 8/256/4096 | value |")
        rows.append("|---|---|")
        rows.append(f"| duration | {load_seconds:.0f} s |")
        rows.append(f"| requests | {done} ({done / load_seconds:.0f}/s) |")
        rows.append(f"| errors | {errors} |")
        rows.append(f"| p50 / p99 | {pct(latencies, 50):.1f} ms / {pct(latencies, 99):.1f} ms |")
        rows.append(
            f"| server RSS: start / before load / after load | {rss_start // 1024} / {rss_before // 1024} / "
            f"{rss_after // 1024} MiB |"
        )
        print("\n".join(rows))
        return 0 if errors == 0 else 1
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


if __name__ == "__main__":
    sys.exit(main())
