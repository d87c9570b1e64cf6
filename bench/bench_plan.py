"""Planning real models on hardware you don't have: plan time next to XLA's own compile time, in one run.

For each case two fresh processes (peak RSS is per process): one lowers and compiles the training step for
libtpu's compile-only topology and nothing else (XLA's compile: the floor), the other runs the whole plan
(``sharding_core.plan``: lower, compile with XLA's buffer assignment dumped, read the HLO's collectives, loops,
flops and bytes, the largest temporaries, estimates and the verdict). Cases (``examples/llama.py``, fp32
parameters, two Adam moments, scanned rematerialised layers):

* Llama 3 8B, B=16, S=2048 on v5p 4x4x4 (64 chips), FSDP 16 × TP 4;
* Llama 3 70B, B=64, S=1024 on v5p 4x8x8 (256 chips), FSDP 64 × TP 4;
* the same 70B at S=4096, rematerialised (as the example is) and without rematerialisation (every layer's
  activations kept for the backward pass): where XLA refuses for memory, the refusal as fields;
* the scaling book's 70B check ("Training LLaMA 3 on TPUs", "How to shard LLaMA 3-70B"), at its per-chip batch
  (about 500 tokens a chip: B=256, S=512 on 256 chips): pure FSDP 256 and FSDP 64 × TP 4, with the verdicts.

Goals (issue 25): each plan ≤ 30 s and ≤ 1.5 × the compile (the ratio column: CPU seconds), peak RSS ≤ 3 GiB.
Big: not in CI. Run it under a 12 GiB memory cap (its own cgroup): ``.venv/bin/python bench/bench_plan.py`` (needs
the tpu extra); ``--only 8b`` runs one case.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

CASES: dict[str, dict[str, Any]] = {
    "8b": {"devices": "tpu:v5p:4x4x4", "mesh": (16, 4), "axes": ("fsdp", "tp"), "config": "8b",
           "strategy": "fsdp_tp", "batch": 16, "seq": 2048},
    "70b": {"devices": "tpu:v5p:4x8x8", "mesh": (64, 4), "axes": ("fsdp", "tp"), "config": "70b",
            "strategy": "fsdp_tp", "batch": 64, "seq": 1024},
    "70b-s4096": {"devices": "tpu:v5p:4x8x8", "mesh": (64, 4), "axes": ("fsdp", "tp"), "config": "70b",
                  "strategy": "fsdp_tp", "batch": 64, "seq": 4096},
    "70b-s4096-no-remat": {"devices": "tpu:v5p:4x8x8", "mesh": (64, 4), "axes": ("fsdp", "tp"), "config": "70b",
                           "strategy": "fsdp_tp", "batch": 64, "seq": 4096, "remat": False},
    "70b-book-fsdp": {"devices": "tpu:v5p:4x8x8", "mesh": (256,), "axes": ("fsdp",), "config": "70b",
                      "strategy": "fsdp", "batch": 256, "seq": 512},
    "70b-book-fsdp-tp": {"devices": "tpu:v5p:4x8x8", "mesh": (64, 4), "axes": ("fsdp", "tp"), "config": "70b",
                         "strategy": "fsdp_tp", "batch": 256, "seq": 512},
}  # fmt: skip

CHILD = r"""
import json, os, resource, sys, time
def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime
os.environ.setdefault("JAX_PLATFORMS", "cpu")
sys.path.insert(0, ROOT)
from examples import llama
from sharding_core.program.targets import mesh
case = json.loads(CASE)
m = mesh(case["devices"], tuple(case["mesh"]), tuple(case["axes"]))
import dataclasses
config = dataclasses.replace(llama.CONFIGS[case["config"]], remat=case.get("remat", True))
step, args = llama.plan_fn(config, case["strategy"], case["batch"], case["seq"])(m)
out = {}
c0 = cpu()
t0 = time.perf_counter()
if MODE == "compile":
    lowered = step.lower(*args)
    try:
        lowered.compile()
        out["refused"] = False
    except Exception as e:
        out["refused"] = "RESOURCE_EXHAUSTED" in str(e)
        out["message"] = str(e)[:300]
else:
    from sharding_core.capturing import plan
    snap = plan(step, *args)
    p = snap["plan"]
    out.update(verdict=p["verdict"], refused=p["refusal"] is not None, bound=(p.get("step_time") or {}).get("bound"),
               peak=(snap["jit"]["memory_per_device"] or {}).get("peak_memory_in_bytes"),
               over=(p.get("refusal") or {}).get("over_bytes"), step_time=p.get("step_time"),
               flops=(p.get("work") or {}).get("flops"), flops_xla=(p.get("work") or {}).get("flops_xla"),
               bytes=(p.get("work") or {}).get("bytes_accessed"),
               bytes_once=(p.get("work") or {}).get("bytes_accessed_loops_once"),
               bytes_xla=(p.get("work") or {}).get("bytes_accessed_xla"),
               collectives=len(snap.get("collectives") or []), advice=(p.get("refusal") or {}).get("advice"),
               compile_seconds=p.get("compile_seconds"))
out["seconds"] = time.perf_counter() - t0
out["cpu"] = cpu() - c0
out["rss"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print("RESULT " + json.dumps(out))
"""


def run(case: dict[str, Any], mode: str) -> dict[str, Any]:
    code = CHILD.replace("ROOT", repr(str(ROOT))).replace("CASE", repr(json.dumps(case))).replace("MODE", repr(mode))
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "TPU_SKIP_MDS_QUERY": "1", "ALLOW_MULTIPLE_LIBTPU_LOAD": "1"}
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=1800)
    wall = time.perf_counter() - t0
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"{mode} failed ({done.returncode}): {done.stderr[-3000:]}")
    out: dict[str, Any] = json.loads(lines[-1][len("RESULT ") :])
    out["wall"] = wall
    return out


def gib(n: float | None) -> str:
    return f"{n / 2**30:.2f} GiB" if n is not None else "—"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--only", choices=list(CASES), action="append", default=None)
    args = p.parse_args()
    names = args.only or list(CASES)
    print("wall seconds (CPU seconds: this machine is shared, CPU time is the steadier figure)")
    print(f"{'case':<18} {'compile':>16} {'RSS':>10} {'plan':>16} {'RSS':>10} {'ratio':>6}  verdict")
    for name in names:
        case = CASES[name]
        compiled = run(case, "compile")
        planned = run(case, "plan")
        ratio = planned["cpu"] / compiled["cpu"]

        def secs(r: dict[str, Any]) -> str:
            return f"{r['seconds']:.1f} ({r['cpu']:.1f}) s"

        print(
            f"{name:<18} {secs(compiled):>16} {gib(compiled['rss']):>10} {secs(planned):>16} "
            f"{gib(planned['rss']):>10} {ratio:>5.2f}x  {planned['verdict']}",
            flush=True,
        )
        if planned.get("advice"):
            for tip in planned["advice"]:
                print(f"{'':<18}   - {tip}")
        keys = (
            "peak",
            "over",
            "flops",
            "flops_xla",
            "bytes",
            "bytes_once",
            "bytes_xla",
            "collectives",
            "compile_seconds",
        )
        detail = {k: planned.get(k) for k in keys}
        print(f"{'':<18}   {json.dumps(detail)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
