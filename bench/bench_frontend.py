"""Keystroke in the PartitionSpec box → grid painted, in headless Chromium, for 8, 256 and 4096 devices.

The page records a ``keystroke-to-paint`` performance measure from the last ``input`` event to the
animation frame after the new grid is in the DOM (fetch, JSON parse, SVG build and layout
included; the 40 ms typing debounce too). Starts its own ``shardscope serve`` on a free loopback
port. Run: ``.venv/bin/python bench/bench_frontend.py``.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from urllib.parse import urlencode

from playwright.sync_api import sync_playwright

ROOT = Path(__file__).resolve().parent.parent
# Every round types a spec this server has not seen, so its layout cache never answers.
SPECS = ["P('x', 'y')", "P('y', 'x')", "P('x')", "P(None, 'y')", "P(('x', 'y'))", "P(None, ('y', 'x'))",
         "P('y')", "P(None, 'x')", "P(('y', 'x'))", "P(None, ('x', 'y'))"]  # fmt: skip
CASES = [
    ("8", {"devices": "cpu:8", "mesh": "2x4", "axes": "x,y", "shape": "64,64"}),
    ("256", {"devices": "tpu:v5e:16x16", "mesh": "16x16", "axes": "x,y", "shape": "1024,1024"}),
    ("4096", {"devices": "tpu:v4:16x16x16", "mesh": "64x64", "axes": "x,y", "order": "iota", "shape": "4096,4096"}),
]
REPEAT = len(SPECS) - 1


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        sock = __import__("socket").socket()
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        sock.close()
        env = {**os.environ, "JAX_PLATFORMS": "cpu"}
        cli = Path(sys.executable).parent / "shardscope"
        proc = subprocess.Popen(
            [str(cli), "serve", "--port", str(port), "--db", f"{tmp}/links.db"],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            for _ in range(300):
                try:
                    urllib.request.urlopen(f"http://127.0.0.1:{port}/api/health", timeout=1)
                    break
                except OSError:
                    time.sleep(0.1)
            rows = run(port)
        finally:
            proc.terminate()
            proc.wait(10)
    print("| devices | keystroke → painted p50 | max | of which fetch p50 | DOM build p50 | target |")
    print("|---:|---:|---:|---:|---:|---:|")
    targets = {"8": "100 ms", "256": "—", "4096": "400 ms"}
    for label, times, fetches, builds in rows:
        print(
            f"| {label} | {statistics.median(times):.0f} ms | {max(times):.0f} ms | "
            f"{statistics.median(fetches):.0f} ms | {statistics.median(builds):.0f} ms | {targets[label]} |"
        )


def run(port: int) -> list[tuple[str, list[float], list[float], list[float]]]:
    rows = []
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path="/usr/bin/chromium",
            args=["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync"],
        )  # fmt: skip
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        for label, params in CASES:
            page.goto(f"http://127.0.0.1:{port}/?{urlencode({**params, 'spec': SPECS[0]})}")
            page.wait_for_selector("body[data-rendered='1']", state="attached", timeout=60_000)
            box = page.get_by_label("PartitionSpec")
            times, fetches, builds = [], [], []
            for i in range(REPEAT):
                count = int(page.get_attribute("body", "data-rendered") or "0")
                spec = SPECS[i + 1]
                box.fill(spec[:-1])
                box.press(spec[-1])
                page.wait_for_selector(f"body[data-rendered='{count + 1}']", state="attached", timeout=60_000)
                page.wait_for_timeout(50)
                last = page.evaluate(
                    "() => ['keystroke-to-paint', 'fetch-layout', 'build-dom']"
                    ".map(n => performance.getEntriesByName(n).at(-1).duration)"
                )
                times.append(last[0])
                fetches.append(last[1])
                builds.append(last[2])
            rows.append((label, times, fetches, builds))
        browser.close()
    return rows


if __name__ == "__main__":
    main()
