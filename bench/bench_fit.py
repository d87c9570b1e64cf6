"""``shardscope plan --fit`` on the issue's big cases (issue 33), with the wall time of the whole run:

* ``--case 70b`` (the default): Llama 3 70B, B=64, S=4096, without remat, on v5p 4x8x8 (256 chips), FSDP 64 x TP
  4 — refused by XLA for memory — and the fixes ``--fit`` compiles for it (the knobs ``examples/llama.py``
  takes: JAX's checkpoint policies by name, a fused attention, vocabulary tiles, microbatches);
* ``--case 4117``: shaped like MaxText #4117 — a 52B decoder on two v4-384 slices (``--slices 2``, the batch over
  ``data`` across them and ``fsdp`` within one), over HBM by a few GiB.

Big: not in CI. One run at a time, under a 12 GiB memory cap: ``/work/bin/memrun 12G .venv/bin/python
bench/bench_fit.py [--case 4117] [--no-fit]`` (needs the tpu extra). Prints one JSON line; docs/benchmarks.md
keeps the figures.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from examples import llama  # noqa: E402 - the checkout's examples, beside the bench

# A case shaped like MaxText #4117: a ~52B decoder on two v4-384 slices (192 chips each, 32 GiB of HBM a chip),
# the batch over both slices (DCN) and FSDP within one, full remat, MaxText's dot-product attention: over HBM by
# a few GiB ("Used 33.27G of 30.75G" there), which toggling a fused attention and vocabulary tiling fixed.
# d_model 9216 (72 heads of 128): FSDP over a slice's 192 chips needs the embedding dimension divisible by 192;
# Llama 3's vocabulary, so the logits weigh as they do in MaxText's configs.
CONFIG_52B = llama.Config(d_model=9216, n_layers=45, n_heads=72, n_kv_heads=8, head_dim=128, d_ff=32768)
maxtext_4117_shaped = llama.plan_fn(CONFIG_52B, (("batch", ("data", "fsdp")), ("embed", "fsdp")), 7 * 384, 2048,
                                    name="maxtext_4117_shaped", remat="full")  # fmt: skip

CASES = {
    "70b": ["examples/llama.py:llama_70b_fsdp_tp_s4096_no_remat", "--devices", "tpu:v5p:4x8x8", "--mesh", "64x4",
            "--axes", "fsdp,tp"],
    "4117": ["bench/bench_fit.py:maxtext_4117_shaped", "--devices", "tpu:v4:4x4x12", "--slices", "2", "--mesh",
             "2x192", "--axes", "data,fsdp"],
}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--case", choices=sorted(CASES), default="70b")
    parser.add_argument("--no-fit", action="store_true", help="the plan alone")
    case = parser.parse_args()
    out = Path(f"/tmp/shardscope-bench-fit-{case.case}.json")
    t0 = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "shardscope", "plan", *CASES[case.case], *([] if case.no_fit else ["--fit"]),
         "--json", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=3600,
    )  # fmt: skip
    seconds = time.perf_counter() - t0
    if not out.exists():
        sys.exit(done.stderr[-3000:])
    snap = json.loads(out.read_text())
    plan = snap["plan"]
    refusal = plan.get("refusal") or {}
    timeline = snap.get("memory_timeline") or {}
    print(json.dumps({
        "case": case.case, "exit": done.returncode, "seconds": round(seconds, 1), "fits": plan.get("fits"),
        "peak_bytes": ((snap.get("program") or {}).get("memory") or {}).get("peak_memory_in_bytes"),
        "capacity_bytes": plan.get("capacity_bytes"),
        "expected_seconds": (plan.get("step_time") or {}).get("expected_seconds"),
        "over_bytes": refusal.get("over_bytes"), "timeline_peak_bytes": timeline.get("timeline_peak_bytes"),
        "timeline_groups": timeline.get("groups"), "fit_seconds": (plan.get("fit") or {}).get("seconds"),
        "fixes": (plan.get("fit") or {}).get("fixes"), "not_tried": (plan.get("fit") or {}).get("not_tried"),
    }))  # fmt: skip


if __name__ == "__main__":
    main()
