"""Opening a merged multi-process run: every part parsed first, then merged (before issue 12), against
the server's merge, which parses, folds in and drops one part at a time.

    .venv/bin/python bench/bench_runs.py [--parts 12] [--mib 16]

Builds a store with one run of ``--parts`` processes, each part about ``--mib`` MiB of JSON (leaves
of distinct shapes on 8 CPU devices, so each has its own layout, as in a real model's optimizer
state), then opens the run each way in a fresh process: from reading the parts to the merged JSON
the route answers. Reports wall time and the process's peak resident memory above what it had
before (``VmHWM``, reset first), one run each on this machine.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ["JAX_PLATFORMS"] = "cpu"

LEAF_BYTES = 1400  # about: a leaf and its own layout on 8 devices, as JSON


def build(db: Path, parts: int, mib: float) -> str:
    import jax

    jax.config.update("jax_num_cpu_devices", 8)
    import jax.numpy as jnp
    import numpy as np
    import orjson
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P

    from server.store import SqliteStore
    from sharding_core import capture, new_run_id
    from sharding_core.snapshot.memory import enrich
    from sharding_core.snapshot.merge import part_keys

    mesh = Mesh(np.array(jax.devices()).reshape(2, 4), ("data", "model"))
    leaves = min(100_000, int(mib * 2**20 / LEAF_BYTES))
    tree = {
        f"layer_{i // 10:05d}/param_{i % 10}": jax.ShapeDtypeStruct(
            (8 * (1 + i % 211), 8 * (1 + i // 211)), jnp.float32, sharding=NamedSharding(mesh, P("data", "model"))
        )
        for i in range(leaves)
    }
    snap = capture(tree, "bench")
    secret = new_run_id()
    with SqliteStore(db, max_bytes=None) as store:
        read_id = store.run_read_id(secret)
        for p in range(parts):
            snap["process_index"], snap["process_count"] = p, parts
            snap["devices"]["process_index"] = [i * parts // 8 for i in range(8)]
            snap["run"] = {"id": read_id, "process_index": p, "process_count": parts}
            payload = orjson.dumps(enrich(snap))
            store.put_run_part(read_id, p, payload, keys=part_keys(snap))
        print(f"{parts} parts of {len(payload) / 2**20:.1f} MiB ({leaves} leaves, {len(snap['layouts'])} layouts)")
    return read_id


def measure(db: str, read_id: str, mode: str) -> None:
    import orjson

    from server.services.snapshots import SnapshotRepository
    from server.settings import Settings
    from server.store import SqliteStore
    from sharding_core.snapshot.merge import merge_run

    store = SqliteStore(db, max_bytes=None)
    parts = store.run_parts(read_id)
    Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM to the current RSS
    before = _status("VmRSS")
    start = time.perf_counter()
    if mode == "all at once":
        parsed = [(p, sid, orjson.loads(store.get("snapshots", sid) or b"")) for p, sid in parts]
        out = orjson.dumps(merge_run(read_id, parsed))
    else:
        out = SnapshotRepository(store, Settings()).merged_json(read_id)
    seconds = time.perf_counter() - start
    peak = _status("VmHWM") - before
    print(f"| {mode} | {seconds:.2f} s | +{peak / 1024:.0f} MiB | {len(out) / 2**20:.1f} MiB |")


def _status(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(field)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--parts", type=int, default=12)
    ap.add_argument("--mib", type=float, default=16)
    ap.add_argument("--measure", nargs=3, metavar=("DB", "RUN", "MODE"))
    args = ap.parse_args()
    if args.measure:
        measure(*args.measure)
        return
    with tempfile.TemporaryDirectory(prefix="shardscope-bench-") as tmp:
        db = Path(tmp) / "runs.db"
        read_id = build(db, args.parts, args.mib)
        print("\n| merge | time | peak memory | merged JSON |\n|---|---:|---:|---:|")
        for mode in ("all at once", "streamed"):
            subprocess.run([sys.executable, __file__, "--measure", str(db), read_id, mode], check=True, cwd=ROOT)


if __name__ == "__main__":
    main()
