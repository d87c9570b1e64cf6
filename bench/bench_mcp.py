"""Latency of the MCP server's quick tools (no compile), as an agent sees it: a real ``shardscope mcp`` over stdio,
driven by the SDK's own client, each call timed from ``call_tool`` to its result (the JSON-RPC round trip through
the pipes included). The goal (issue 36): every non-compiling call answers in <= 200 ms.

    .venv/bin/python bench/bench_mcp.py [--calls 30]

Prints one row per case: median, p95 and max of ``--calls`` warm calls (after one warm-up call per case, which is
reported apart: the first layout of a device set builds and caches it), and the machine's load average.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import anyio
from mcp import Client

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.mcp_helpers import stdio_params

V5P = {"shape": [16, 4], "axis_names": ["fsdp", "tp"]}
CASES: list[tuple[str, str, dict[str, Any]]] = [
    ("device_sets (catalog)", "device_sets", {}),
    ("device_sets tpu:v5p:4x4x4", "device_sets", {"devices": "tpu:v5p:4x4x4"}),
    ("topology tpu:v5p:4x4x4 + mesh 16x4", "topology", {"devices": "tpu:v5p:4x4x4", "mesh": V5P}),
    ("layout tpu:v5p:4x4x4 P('fsdp','tp')", "layout",
     {"devices": "tpu:v5p:4x4x4", "mesh": V5P, "spec": "P('fsdp', 'tp')", "shape": [4096, 14336], "dtype": "bfloat16"}),
    ("layout tpu:v5e:16x16 (256 devices)", "layout",
     {"devices": "tpu:v5e:16x16", "mesh": {"shape": [16, 16], "axis_names": ["x", "y"]}, "spec": "P('x', 'y')",
      "shape": [8192, 8192]}),
    ("layout, a bad spec (tool error)", "layout",
     {"devices": "tpu:v5p:4x4x4", "mesh": V5P, "spec": "P('fsdp', 'q')", "shape": [4096, 14336]}),
    ("collective_cost all-gather 1 GiB v5p-64", "collective_cost",
     {"devices": "tpu:v5p:4x4x4", "op": "all-gather", "bytes": 1 << 30}),
]  # fmt: skip


async def bench(calls: int) -> list[dict[str, Any]]:
    rows = []
    async with Client(stdio_params()) as client:
        for label, tool, arguments in CASES:
            t0 = time.perf_counter()
            await client.call_tool(tool, arguments)
            first = time.perf_counter() - t0
            times = []
            for _ in range(calls):
                t0 = time.perf_counter()
                await client.call_tool(tool, arguments)
                times.append(time.perf_counter() - t0)
            times.sort()
            rows.append({"case": label, "first": first, "median": statistics.median(times),
                         "p95": times[int(0.95 * (len(times) - 1))], "max": times[-1]})  # fmt: skip
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=30)
    args = parser.parse_args()
    before = os.getloadavg()
    rows = anyio.run(bench, args.calls)
    after = os.getloadavg()
    print(f"load average before {before[0]:.1f}, after {after[0]:.1f}; {args.calls} warm calls per case")
    print("| case | first call | median | p95 | max |\n|---|---|---|---|---|")
    for r in rows:
        ms = {k: f"{r[k] * 1000:.0f} ms" for k in ("first", "median", "p95", "max")}
        print(f"| {r['case']} | {ms['first']} | {ms['median']} | {ms['p95']} | {ms['max']} |")


if __name__ == "__main__":
    main()
