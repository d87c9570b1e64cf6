"""Topology JSON and mesh-on-topology metrics at 256, 4096 and 6144 chips, and the time for the
topology view to become interactive in headless Chromium.

In-process (cold: nothing cached): ``topology(devset)`` serialised with orjson, and
``mesh_on_topology`` plus the three orderings side by side (what ``POST /api/topology/mesh`` does).
In the browser: from navigation to the page marking its first drawing done (SVG for 2-D slices,
the Plotly WebGL lattice for 3-D ones), against a real ``shardscope serve``.
Run: ``.venv/bin/python bench/bench_topology.py``.
"""

from __future__ import annotations

import gc
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from urllib.parse import urlencode

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import orjson
from playwright.sync_api import sync_playwright

from sharding_core.devices import parse_devices
from sharding_core.mesh import MeshSpec, build_mesh
from sharding_core.topology import compare_orderings, mesh_on_topology, topology

CASES = [
    ("256", "tpu:v5e:16x16", (16, 16), ("x", "y")),
    ("4096", "tpu:v4:16x16x16", (16, 16, 16), ("x", "y", "z")),
    ("6144", "tpu:v5p:16x16x24", (16, 16, 24), ("x", "y", "z")),
]


def in_process(devices: str, shape: tuple[int, ...], names: tuple[str, ...]) -> tuple[float, float, int]:
    ds = parse_devices(devices)
    topo_ms, metric_ms = [], []
    for _ in range(5):
        t = time.perf_counter()
        size = len(orjson.dumps(topology(ds)))
        topo_ms.append((time.perf_counter() - t) * 1e3)
        t = time.perf_counter()
        mesh_on_topology(ds, build_mesh(ds, MeshSpec(shape, names)))
        compare_orderings(ds, shape, names)
        metric_ms.append((time.perf_counter() - t) * 1e3)
    return statistics.median(topo_ms), statistics.median(metric_ms), size


def in_browser(port: int) -> dict[str, float]:
    out = {}
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path="/usr/bin/chromium",
            args=["--no-sandbox", "--no-first-run", "--disable-background-networking", "--disable-component-update",
                  "--disable-sync"],
        )  # fmt: skip
        for label, devices, shape, names in CASES:
            times = []
            for _ in range(3):
                page = browser.new_page(viewport={"width": 1400, "height": 1000})
                query = urlencode({"devices": devices, "mesh": "x".join(map(str, shape)), "axes": ",".join(names),
                                   "spec": "P('x')", "shape": str(shape[0] * 4), "axis": "x"})  # fmt: skip
                t = time.perf_counter()
                page.goto(f"http://127.0.0.1:{port}/topology.html?{query}")
                page.wait_for_selector("body[data-rendered='1']", state="attached", timeout=120_000)
                times.append((time.perf_counter() - t) * 1e3)
                page.close()
            out[label] = statistics.median(times)
        browser.close()
    return out


def main() -> None:
    gc.freeze()  # as the server does at start-up (server/app.py): JAX's heap out of GC passes
    rows = [(label, devices, *in_process(devices, shape, names)) for label, devices, shape, names in CASES]
    with tempfile.TemporaryDirectory() as tmp:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        cli = Path(sys.executable).parent / "shardscope"
        proc = subprocess.Popen(
            [str(cli), "serve", "--port", str(port), "--db", f"{tmp}/links.db"],
            env={**os.environ, "JAX_PLATFORMS": "cpu"}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            for _ in range(300):
                try:
                    urllib.request.urlopen(f"http://127.0.0.1:{port}/api/health", timeout=1)
                    break
                except OSError:
                    time.sleep(0.1)
            browser = in_browser(port)
        finally:
            proc.terminate()
            proc.wait(10)
    print("| chips | set | topology JSON | mesh-on-topology + 3 orderings | JSON size | view interactive |")
    print("|---:|---|---:|---:|---:|---:|")
    for label, devices, topo_ms, metric_ms, size in rows:
        print(
            f"| {label} | `{devices}` | {topo_ms:.1f} ms | {metric_ms:.1f} ms | {size / 1024:.0f} KiB | "
            f"{browser[label]:.0f} ms |"
        )


if __name__ == "__main__":
    main()
