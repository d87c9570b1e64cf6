"""Topology JSON and mesh-on-topology metrics at 256, 4096 and 6144 chips; in headless Chromium, the
time to the topology view's first drawing and to redraw after choosing another ring axis.

In-process (cold: nothing cached): ``topology(devset)`` serialised with orjson, and
``mesh_on_topology`` plus the three orderings side by side (what ``POST /api/topology/mesh`` does).
In the browser, against a real ``shardscope serve``: from navigation to the page marking its first
drawing done (SVG for 2-D slices, the canvas lattice for 3-D ones: the fetches, JSON parsing and the
drawing included), and from choosing a ring axis to the frame after the redraw (the page's
``axis-switch`` measure), cycling the axes.
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

SWITCH_CASES = [
    ("64", "tpu:v4:4x4x4", (4, 4, 4), ("x", "y", "z")),
    ("4096", "tpu:v4:16x16x16", (16, 16, 16), ("x", "y", "z")),
]
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


def in_browser(port: int) -> tuple[dict[str, float], dict[str, list[float]]]:
    first: dict[str, float] = {}
    switches: dict[str, list[float]] = {}
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path="/usr/bin/chromium",
            args=["--no-sandbox", "--no-first-run", "--disable-background-networking", "--disable-component-update",
                  "--disable-sync"],
        )  # fmt: skip
        for label, devices, shape, names in CASES:
            times = []
            for _ in range(3):
                page = browser.new_page(viewport={"width": 1440, "height": 900})
                query = urlencode({"devices": devices, "mesh": "x".join(map(str, shape)), "axes": ",".join(names),
                                   "spec": "P('x')", "shape": str(shape[0] * 4), "axis": "x"})  # fmt: skip
                t = time.perf_counter()
                page.goto(f"http://127.0.0.1:{port}/topology.html?{query}")
                page.wait_for_selector("body[data-rendered='1']", state="attached", timeout=120_000)
                times.append((time.perf_counter() - t) * 1e3)
                page.close()
            first[label] = statistics.median(times)
        for label, devices, shape, names in SWITCH_CASES:
            page = browser.new_page(viewport={"width": 1440, "height": 900})
            query = urlencode({"devices": devices, "mesh": "x".join(map(str, shape)), "axes": ",".join(names),
                               "spec": "P('x', 'y')", "shape": f"{shape[0] * 4},{shape[1] * 4}"})  # fmt: skip
            page.goto(f"http://127.0.0.1:{port}/topology.html?{query}")
            page.wait_for_selector("body[data-rendered='1']", state="attached", timeout=120_000)
            times = []
            for i in range(12):
                count = int(page.get_attribute("body", "data-rendered") or "0")
                page.locator(f"[data-part=axis-buttons] input[value='{[*names, ''][i % (len(names) + 1)]}']").check()
                page.wait_for_selector(f"body[data-rendered='{count + 1}']", state="attached", timeout=60_000)
                page.wait_for_timeout(50)
                times.append(page.evaluate("() => performance.getEntriesByName('axis-switch').at(-1).duration"))
            switches[label] = times
            page.close()
        browser.close()
    return first, switches


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
            first, switches = in_browser(port)
        finally:
            proc.terminate()
            proc.wait(10)
    print("| chips | set | topology JSON | mesh-on-topology + 3 orderings | JSON size | first drawing | target |")
    print("|---:|---|---:|---:|---:|---:|---:|")
    for label, devices, topo_ms, metric_ms, size in rows:
        target = "1000 ms" if label == "6144" else "—"
        print(
            f"| {label} | `{devices}` | {topo_ms:.1f} ms | {metric_ms:.1f} ms | {size / 1024:.0f} KiB | "
            f"{first[label]:.0f} ms | {target} |"
        )
    print()
    print("| chips | set | ring-axis switch → painted median | worst | target |")
    print("|---:|---|---:|---:|---:|")
    for label, devices, _, _ in SWITCH_CASES:
        times = switches[label]
        print(f"| {label} | `{devices}` | {statistics.median(times):.0f} ms | {max(times):.0f} ms | 200 ms |")


if __name__ == "__main__":
    main()
