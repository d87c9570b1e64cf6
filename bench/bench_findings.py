"""How long issue 32's naive-FSDP decoder takes to be found and its constraint fix verified: the plan (one libtpu
compile to the end), its findings, and the fix candidates — each compiled until libtpu has scheduled it, in child
processes at once (``sharding_core.program.early``), or with ``--full`` compiled to the end one after another in
this process, as before. Prints the seconds, the step before and after and the fix's memory figures.

Run (a few minutes on a quiet 2-core machine)::

    .venv/bin/python bench/bench_findings.py [--full] [--repeat N]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--full", action="store_true", help="compile every candidate to the end, in this process")
    p.add_argument("--repeat", type=int, default=1)
    a = p.parse_args()

    from sharding_core import capturing
    from sharding_core.capturing import program_snapshot
    from sharding_core.program.targets import mesh as target_mesh
    from tests.test_findings_fix import decoder

    if a.full:
        capturing._early_target = lambda mesh: False  # type: ignore[assignment]
    mesh = target_mesh("tpu:v5p:2x2x4", (16,), ("fsdp",))
    for k in range(a.repeat):
        f, args = decoder(mesh)
        t0, c0 = time.perf_counter(), os.times()
        snap = program_snapshot(f, args, {}, detailed=False, check_fixes=True)
        t1, c1 = time.perf_counter(), os.times()
        f, args = decoder(mesh)
        t2 = time.perf_counter()
        plain = program_snapshot(f, args, {}, detailed=False)
        t3 = time.perf_counter()
        fix = next(x["fix"] for x in snap["findings"] if x["kind"] == "batch_not_split")
        before = plain["plan"]["step_time"]["expected_seconds"]
        cpu = (c1.user + c1.system + c1.children_user + c1.children_system) - (
            c0.user + c0.system + c0.children_user + c0.children_system
        )
        print(f"run {k + 1}: {'full' if a.full else 'early'}: found and verified {t1 - t0:.1f} s (CPU, "
              f"children included: {cpu:.0f} s); the plan alone {t3 - t2:.1f} s; step {before * 1e3:.1f} ms -> "
              f"{fix['expected_seconds_after'] * 1e3:.1f} ms ({before / fix['expected_seconds_after']:.1f}x); peak "
              f"{fix['peak_after']}, placed {fix['placed_before']} -> {fix['placed_after']}; {fix['text']}",
              flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
