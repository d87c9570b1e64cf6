"""``shardscope plan --fit`` on the issue's big case (issue 33): Llama 3 70B, B=64, S=4096, without remat, on v5p
4x8x8 (256 chips), FSDP 64 x TP 4 — refused by XLA for memory — and the fixes ``--fit`` compiles for it (the
``remat=`` knob ``examples/llama.py`` takes: JAX's checkpoint policies by name), with the wall time of the whole run.

Big: not in CI. One run at a time, under a 10 GiB memory cap: ``/work/bin/memrun 10G .venv/bin/python
bench/bench_fit.py`` (needs the tpu extra). Prints one JSON line; docs/benchmarks.md keeps the figures.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    out = Path("/tmp/shardscope-bench-fit.json")
    t0 = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "shardscope", "plan", "examples/llama.py:llama_70b_fsdp_tp_s4096_no_remat",
         "--devices", "tpu:v5p:4x8x8", "--mesh", "64x4", "--axes", "fsdp,tp", "--fit", "--json", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=3600,
    )  # fmt: skip
    seconds = time.perf_counter() - t0
    snap = json.loads(out.read_text())
    plan = snap["plan"]
    refusal = plan.get("refusal") or {}
    timeline = snap.get("memory_timeline") or {}
    print(json.dumps({
        "exit": done.returncode, "seconds": round(seconds, 1), "fits": plan.get("fits"),
        "over_bytes": refusal.get("over_bytes"), "timeline_peak_bytes": timeline.get("timeline_peak_bytes"),
        "timeline_groups": timeline.get("groups"), "fit_seconds": (plan.get("fit") or {}).get("seconds"),
        "fixes": (plan.get("fit") or {}).get("fixes"),
    }))  # fmt: skip


if __name__ == "__main__":
    main()
