"""Scale-out of a search (issue 34): the same ``shardscope search --server`` finished by one replica, then by two
replicas on one PostgreSQL, each with one search worker (``--setting max_search_workers 1``), on loopback.

Starts a PostgreSQL cluster of its own (Debian's ``postgresql``, as the tests do) and ``shardscope serve --db
postgresql://...`` replicas; runs the CLI as a user does (``--json``) and reads, from the answer, which replica
compiled each candidate. ``--pin`` gives each replica (and the search workers it starts) one CPU core of its own,
as two one-core machines would have, and the single replica one core too: on a 2-core machine one libtpu compile
already uses both cores, so two unpinned replicas share the cores and the figure measures the machine, not the
scale-out. The search's own steps (probing the model, ranking, planning the pick) run in the CLI in both runs.

Run: ``.venv/bin/python bench/bench_search_replicas.py [--target bench/search_models.py:llama_tiny]
[--devices tpu:v5p:2x2x2] [--max-compiles 16] [--pin]``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.plugins.live import Server, start, stop  # noqa: E402
from tests.plugins.postgres import cluster  # noqa: E402

SETTINGS = {"max_search_workers": 1, "max_kernel_job_silence_seconds": 15}


def search(server: Server, args: argparse.Namespace, out: Path) -> tuple[float, dict[str, Any]]:
    cmd = [str(ROOT / ".venv/bin/shardscope"), "search", args.target, "--devices", args.devices, "--budget", "1h",
           "--server", f"http://127.0.0.1:{server.port}", "--json", str(out)]  # fmt: skip
    if args.axes:
        cmd += ["--axes", args.axes]
    if args.max_compiles:
        cmd += ["--max-compiles", str(args.max_compiles)]
    t0 = time.perf_counter()
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - t0
    if done.returncode not in (0, 3):
        raise SystemExit(f"the search failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return seconds, json.loads(out.read_text())


def replicas(url: str, tmp: Path, n: int, pin: bool) -> list[Server]:
    servers = []
    for i in range(n):
        srv = start(url, tmp / f"replica-{n}-{i}.log", SETTINGS)  # type: ignore[arg-type]
        if pin:  # every thread of the replica: a search slot's thread starts the worker, which inherits its CPUs
            for task in Path(f"/proc/{srv.proc.pid}/task").iterdir():
                os.sched_setaffinity(int(task.name), {i % (os.cpu_count() or 1)})
        servers.append(srv)
    return servers


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--target", default="bench/search_models.py:llama_tiny")
    p.add_argument("--devices", default="tpu:v5p:2x2x2")
    p.add_argument("--axes", default=None)
    p.add_argument("--max-compiles", type=int, default=8)
    p.add_argument("--pin", action="store_true", help="one CPU core per replica (see the module docstring)")
    args = p.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as d, cluster() as postgres:
        tmp = Path(d)
        for n in (1, 2):
            servers = replicas(postgres.fresh_url(), tmp, n, args.pin)
            try:
                seconds, result = search(servers[0], args, tmp / f"search-{n}.json")
            finally:
                for srv in servers:
                    stop(srv)
            shares = Counter(c.get("replica") for c in result["candidates"] if c.get("compiled"))
            pick = result["pick"]
            rows.append({"replicas": n, "seconds": round(seconds, 1), "compiled": result["compiled"],
                         "enumerated": result["enumerated"], "compile_seconds": result["compile_seconds"],
                         "shares": sorted(shares.values(), reverse=True),
                         "pick": pick["strategy"] if pick else None,
                         "pick_step": result["candidates"][0]["expected_seconds"] if pick else None})  # fmt: skip
            print(json.dumps(rows[-1]), flush=True)
    one, two = rows
    same = (one["pick"], one["pick_step"]) == (two["pick"], two["pick_step"])
    pinned = " (pinned: one core a replica)" if args.pin else ""
    print(f"\n{args.target} on {args.devices}, {one['compiled']} candidates compiled{pinned}")
    print("| replicas | search (s) | candidates each | pick |\n|---|---|---|---|")
    for r in rows:
        print(f"| {r['replicas']} | {r['seconds']:.1f} | {' + '.join(map(str, r['shares']))} | {r['pick']} |")
    print(f"\ntwo replicas / one: {two['seconds'] / one['seconds']:.2f}x; same pick and step: {same}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
