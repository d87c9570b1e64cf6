"""A 10,000-leaf snapshot: capture, publish to a real ``shardscope serve``, and open in Chromium.

    .venv/bin/python bench/bench_snapshots.py

Two trees of 10,000 leaves on 8 CPU devices (a (data, model) 2x4 mesh): "model-like" (leaves share
64 shapes, as a layered model's do) and "all distinct" (every leaf its own shape, so its own layout).
Each step is timed separately, medians of a few rounds, in one run: ``capture`` (in the user's
process), ``publish`` (JSON encoding, the POST, the server's validation, checks and fsync'd store),
``open`` (from navigating to the share link to the table, the memory chart and the page's
``data-loaded`` mark, in headless Chromium, through the ``/s/`` redirect); "open: table" and "open:
chart" are when the snapshot page (after the redirect) first showed table rows and the chart.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ["JAX_PLATFORMS"] = "cpu"
import jax

jax.config.update("jax_num_cpu_devices", 8)

import jax.numpy as jnp  # noqa: E402 - after the CPU device count is set
import numpy as np  # noqa: E402 - after the CPU device count is set
from jax.sharding import Mesh, NamedSharding  # noqa: E402 - after the CPU device count is set
from jax.sharding import PartitionSpec as P  # noqa: E402 - after the CPU device count is set
from playwright.sync_api import sync_playwright  # noqa: E402 - after the CPU device count is set

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sharding_core import capture, publish  # noqa: E402
from tests.plugins.live import Server, free_port, wait_ready  # noqa: E402

LEAVES = 10_000
ROUNDS = 3
SPECS = [P("data", "model"), P(None, "model"), P("model", None), P("data"), P()]


def tree(distinct: bool) -> dict[str, jax.ShapeDtypeStruct]:
    mesh = Mesh(np.array(jax.devices()).reshape(2, 4), ("data", "model"))
    out = {}
    for i in range(LEAVES):
        k = i if distinct else i % 64
        shape = (8 * (1 + k % 97), 8 * (1 + k // 97))
        spec = SPECS[k % len(SPECS)]
        out[f"layer_{i // 10:04d}/param_{i % 10}"] = jax.ShapeDtypeStruct(
            shape, jnp.float32, sharding=NamedSharding(mesh, spec)
        )
    return out


def main() -> None:
    tmp = Path(tempfile.mkdtemp(prefix="shardscope-bench-"))
    port = free_port()
    log = (tmp / "server.log").open("wb")
    proc = subprocess.Popen(
        [str(Path(sys.executable).parent / "shardscope"), "serve", "--port", str(port), "--db", str(tmp / "s.db")],
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**os.environ, "JAX_PLATFORMS": "cpu"},
    )
    server = Server(port, tmp / "server.log", proc)
    rows = []
    try:
        wait_ready(server)
        url = f"http://127.0.0.1:{port}"
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox", "--disable-gpu"])
            for label, distinct in (("model-like (64 shapes)", False), ("all distinct shapes", True)):
                t = tree(distinct)
                caps, pubs, opens, tables, charts = [], [], [], [], []
                size = 0
                for _ in range(ROUNDS):
                    t0 = time.perf_counter()
                    snap = capture(t, label)
                    t1 = time.perf_counter()
                    link = publish(snap, label, url)
                    t2 = time.perf_counter()
                    size = len(__import__("json").dumps(snap))
                    page = browser.new_page(viewport={"width": 1400, "height": 1000})
                    t3 = time.perf_counter()
                    page.goto(link)
                    page.wait_for_selector("body[data-loaded='1']", state="attached", timeout=60_000)
                    page.wait_for_selector("[data-part=memory-chart][data-plotted]", state="attached", timeout=60_000)
                    page.wait_for_selector("[data-part=leaf-rows] tr.leaf", state="attached", timeout=60_000)
                    t4 = time.perf_counter()
                    tables.append(float(page.evaluate("() => document.body.dataset.rowsAt")) / 1000)
                    charts.append(float(page.evaluate("() => document.body.dataset.plottedAt")) / 1000)
                    page.close()
                    caps.append(t1 - t0)
                    pubs.append(t2 - t1)
                    opens.append(t4 - t3)
                med = [statistics.median(x) for x in (caps, pubs, opens, tables, charts)]
                rows.append((label, len(snap["layouts"]), size, *med))
            browser.close()
    finally:
        proc.terminate()
        proc.wait(10)
        log.close()
    print(
        f"| tree ({LEAVES} leaves, 8 devices) | layouts | JSON | capture | publish | open: table | open: chart "
        "| open (from /s/ link) | publish + open |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for label, layouts, size, cap, pub, opn, table, chart in rows:
        print(
            f"| {label} | {layouts} | {size / 2**20:.1f} MiB | {cap * 1000:.0f} ms | {pub * 1000:.0f} ms "
            f"| {table * 1000:.0f} ms | {chart * 1000:.0f} ms | {opn * 1000:.0f} ms | {(pub + opn) * 1000:.0f} ms |"
        )


if __name__ == "__main__":
    main()
