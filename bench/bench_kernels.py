"""Kernel lab latency through a real ``shardscope serve``: cold compile and warm (cached) runs.

For every catalog kernel at 8 and 64 CPU devices (``cpu:8`` on the kernel's default mesh, ``cpu:64``
on an 8x8 or 64 mesh with the same axis names), against a server whose workers are already up:

* cold: ``POST /api/kernels/run`` for a configuration the server has never seen (another input
  dtype each round; for Flax's init another width), so a worker traces, lowers, compiles (with
  Shardy's dump), runs and checks the kernel; median of ``--cold`` rounds, with the compile time the
  server reports. Both workers have run a kernel and imported Flax before (one-time costs);
* cached: the same request again, answered from the result cache; median of ``--warm`` rounds.

The Flax kernels run at the guide's width (1024). Prints a markdown table (docs/benchmarks.md has one run).

    .venv/bin/python bench/bench_kernels.py [--cold 3] [--warm 20]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sharding_core.kernels import catalog  # noqa: E402

CLI = Path(sys.executable).parent / "shardscope"
DTYPES = ("float32", "bfloat16", "float16", "int32")  # a new dtype is a new program: a cold compile


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def post(base: str, path: str, body: Any) -> tuple[int, Any, float]:
    data = orjson.dumps(body)
    req = urllib.request.Request(base + path, data=data, method="POST", headers={"Content-Type": "application/json"})
    t0 = time.perf_counter()
    try:
        with urllib.request.urlopen(req, timeout=300) as r:
            payload = r.read()
            status = r.status
    except urllib.error.HTTPError as e:
        payload, status = e.read(), e.code
    return status, orjson.loads(payload), (time.perf_counter() - t0) * 1e3


def body_for(kernel: catalog.Kernel, devices: int, round_: int) -> dict[str, Any]:
    """The kernel's default request at ``devices``; each round a new configuration (dtype, or Flax's width)."""
    line = len(kernel.mesh_shape) == 1
    mesh = list(kernel.mesh_shape) if devices == 8 else ([64] if line else [8, 8])
    inputs = []
    for i in kernel.inputs:
        shape = list(i.shape)
        if devices == 64 and not kernel.requires:
            shape = [64 * -(-d // 64) for d in shape]  # sharded dimensions must divide by up to 64 (or 8 squared)
        inputs.append({"shape": shape, "spec": i.spec, "dtype": DTYPES[round_ % len(DTYPES)]})
    b: dict[str, Any] = {
        "kernel": kernel.name,
        "devices": f"cpu:{devices}",
        "mesh": {"shape": mesh, "axis_names": list(kernel.axis_names), "axis_types": [kernel.axis_types] * len(mesh)},
        "inputs": inputs,
    }
    if any(p.name == "depth" for p in kernel.params):
        b["params"] = {"depth": str(1024 + 64 * round_)}
    return b


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cold", type=int, default=3)
    ap.add_argument("--warm", type=int, default=20)
    args = ap.parse_args()
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    tmp = tempfile.mkdtemp()
    log = open(os.path.join(tmp, "server.log"), "w+")  # noqa: SIM115 - lives as long as the server
    proc = subprocess.Popen(
        [str(CLI), "serve", "--port", str(port), "--db", os.path.join(tmp, "links.db")],
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**os.environ, "JAX_PLATFORMS": "cpu"},
    )
    rows = []
    try:
        for _ in range(300):
            try:
                urllib.request.urlopen(base + "/api/kernels", timeout=5).read()  # also starts the workers
                break
            except OSError:
                time.sleep(0.2)
        # Throwaway runs on both workers at once, so each has started JAX and imported Flax (one-time
        # costs of a worker) before anything is timed.
        flax_init = catalog.get_kernel("flax_init")
        assert flax_init is not None
        warmups = [body_for(flax_init, 8, 0) | {"params": {"depth": str(64 + 8 * w)}} for w in range(2)]
        with concurrent.futures.ThreadPoolExecutor(2) as ex:
            list(ex.map(lambda b: post(base, "/api/kernels/run", b), warmups))
        for kernel in catalog.BUILTIN:
            row: dict[str, Any] = {"kernel": kernel.name}
            for devices in (8, 64):
                cold, compile_ms = [], []
                for r in range(args.cold):
                    status, result, ms = post(base, "/api/kernels/run", body_for(kernel, devices, r))
                    if status != 200:
                        raise SystemExit(f"{kernel.name} at {devices}: HTTP {status} {result}")
                    cold.append(ms)
                    compile_ms.append(result["timing"]["lower_ms"] + result["timing"]["compile_ms"])
                    row[f"ops{devices}"] = ", ".join(sorted({c["op"] for c in result["collectives"]})) or "—"
                warm = []
                b = body_for(kernel, devices, 0)
                for _ in range(args.warm):
                    status, result, ms = post(base, "/api/kernels/run", b)
                    assert status == 200 and result["cached"]
                    warm.append(ms)
                row[f"cold{devices}"] = statistics.median(cold)
                row[f"compile{devices}"] = statistics.median(compile_ms)
                row[f"warm{devices}"] = statistics.median(warm)
            rows.append(row)
            print(f"  {kernel.name}: done", file=sys.stderr)
    finally:
        proc.terminate()
        proc.wait(30)
    print(
        f"Kernel runs through `shardscope serve` (2 warm workers), medians: cold = {args.cold} never-seen "
        f"configurations, cached = {args.warm} repeats. Times in ms.\n"
    )
    print("| kernel | 8 dev cold | of which lower+compile | 8 dev cached | 64 dev cold | of which lower+compile "
          "| 64 dev cached | collectives (8 / 64) |")  # fmt: skip
    print("|---|---:|---:|---:|---:|---:|---:|---|")
    for r in rows:
        ops = r["ops8"] if r["ops8"] == r["ops64"] else f"{r['ops8']} / {r['ops64']}"
        print(
            f"| `{r['kernel']}` | {r['cold8']:.0f} | {r['compile8']:.0f} | {r['warm8']:.1f} | {r['cold64']:.0f} "
            f"| {r['compile64']:.0f} | {r['warm64']:.1f} | {ops} |"
        )
    over = [r["kernel"] for r in rows if r["cold8"] >= 1000]
    slow = [r["kernel"] for r in rows if max(r["warm8"], r["warm64"]) >= 10]
    print(
        f"\ncold at 8 devices under 1 s: {len(rows) - len(over)}/{len(rows)}"
        + (f" (not: {', '.join(over)})" if over else "")
    )
    print(f"cached under 10 ms: {len(rows) - len(slow)}/{len(rows)}" + (f" (not: {', '.join(slow)})" if slow else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
