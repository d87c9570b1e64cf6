"""Compile the published training runs of ``sharding_core/cost/runs.py`` and store what the step model reads.

Big: each run is a full training step compiled for libtpu's compile-only topology (the run's own XLA flags in
``LIBTPU_INIT_ARGS``), one fresh process at a time under a memory cap. Three phases:

* ``compile`` — each reproducible run not yet cached: its optimized HLO (gzipped), XLA's ``memory_analysis``,
  the mesh's device ids and the compile's wall and CPU seconds, into ``--cache`` (default ``build/run-hlo``);
* ``facts`` — from the cache, each run's facts as a plan holds them (the schedule, the collectives with their
  groups, the work counted through loops, XLA's memory figures): ``bench/run_facts.json.gz``, what
  ``tests/test_cost_step.py`` refits from;
* ``fit`` — the step model's constants refitted on the training split, the scoreboard (measured, at 100 % MFU,
  expected, error, split) and leave-one-source-out, as Markdown (``docs/cost-model.md`` shows it).

Run (about an hour on a quiet 2-core machine; each compile 1-5 CPU minutes)::

    .venv/bin/python bench/bench_steps.py compile [--only RUN_ID ...] [--schedule-only | --reduced]
    .venv/bin/python bench/bench_steps.py facts
    .venv/bin/python bench/bench_steps.py fit
"""

from __future__ import annotations

import argparse
import dataclasses
import gzip
import json
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sharding_core.cost import runs as R  # noqa: E402
from sharding_core.program.early import EARLY_FILE  # noqa: E402
from sharding_core.program.memory import placed_bytes  # noqa: E402

CACHE = ROOT / "build" / "run-hlo"
FACTS = ROOT / "bench" / "run_facts.json.gz"
MEMRUN = "/work/bin/memrun"
# Reduced copies (the scanned layer identical, two of them), compiled both schedule-only and to the end: ``fit``
# checks that the two read the same schedule and collectives (one per generation; the 8B v6e recipe's copy, with
# its host-offload flags, did not finish a full compile in 20 CPU minutes here).
REDUCED = {"maxtext2023-16b-v5e-256-x1": 2, "maxtext2023-32b-v5p-128-x1": 2, "recipes-llama2-70b-v6e-256-bs4": 2}


def config_of(run: R.Run, layers: int | None = None) -> Any:
    """The example's config for a run (``layers``: that many scanned layers instead)."""
    from examples import gpt3, llama, moe

    if run.model.startswith("maxtext_2023:"):
        cfg = llama.maxtext_2023(int(run.model.split(":")[1]))
    elif run.example == "moe":
        cfg = moe.MOE_CONFIGS[run.model]
    elif run.example == "gpt3":
        cfg = gpt3.CONFIGS[run.model]
    else:
        cfg = llama.CONFIGS[run.model]
    return dataclasses.replace(cfg, n_layers=layers) if layers else cfg


def build(run: R.Run, layers: int | None = None) -> tuple[Any, Any, Any]:
    """The run's mesh, jitted step and abstract arguments."""
    import shardscope
    from examples import llama, moe
    from sharding_core.errors import ShardingError

    kwargs: dict[str, Any] = {"slices": run.slices}
    if run.slices > 1:
        kwargs.update(order="hybrid", dcn_shape=(run.slices,) + (1,) * (len(run.mesh) - 1))
    try:
        mesh = shardscope.mesh(run.devices, run.mesh, run.axes, **kwargs)
    except ShardingError:
        # a mesh axis no product of the torus axes (64 x 4 on 16x16): MaxText's create_device_mesh with
        # allow_split_physical_axes, as those runs set it
        mesh = shardscope.mesh(run.devices, run.mesh, run.axes, allow_split_physical_axes=True, **kwargs)
    module = moe if run.example == "moe" else llama
    fn = module.plan_fn(config_of(run, layers), run.strategy, 1, int(run.knobs["seq"]), name=run.id)
    step, args = fn(mesh, **run.knobs)
    return mesh, step, args


FULL = ("recipes-llama2-70b-v6e-256-bs4", "maxtext-llama2-70b-v5p-512")
"""Runs also compiled to the end (XLA's memory_analysis: does the plan fit where the run ran?); every run is
compiled until libtpu has written its scheduled HLO (:func:`scheduled_hlo`)."""


def scheduled_hlo(lowered: Any, timeout: float = 7200.0) -> tuple[str | None, int | None, BaseException | None]:
    """The optimized, scheduled HLO of a libtpu compile and the bytes its buffer assignment places in HBM, without
    waiting for its code generation.

    libtpu writes the module after its HLO passes (scheduling and buffer assignment included) to ``xla_dump_to``
    before its backend passes, which take 80-90 % of a compile here and come after both (``fit`` compares the
    reduced copies compiled both ways, where both are cached). The compile runs in a thread; once the file is
    complete the HLO and the buffer assignment's total (its memory-usage report, default memory space) are
    returned and the caller exits the process. A compile that fails first (a memory refusal) gives its error."""
    import shutil
    import tempfile
    import threading

    dump = Path(tempfile.mkdtemp(prefix="bench-steps-"))
    error: list[BaseException] = []

    def run() -> None:
        try:
            lowered.compile(compiler_options={"xla_dump_to": str(dump)})
        except BaseException as e:
            error.append(e)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    deadline = time.monotonic() + timeout
    last = -1
    try:
        while time.monotonic() < deadline:
            found = sorted(dump.glob(f"*{EARLY_FILE}"))
            if found:
                size = found[0].stat().st_size
                if size == last:
                    return found[0].read_text(), placed_bytes(dump), None
                last = size
            elif error or not thread.is_alive():
                return None, None, error[0] if error else RuntimeError("the compile ended without its scheduled HLO")
            time.sleep(2.0)
        return None, None, TimeoutError(f"no scheduled HLO after {timeout:.0f} s")
    finally:
        shutil.rmtree(dump, ignore_errors=True)


def argument_bytes(args: Any) -> int:
    """Bytes per device of the abstract arguments (their shards): the roofline's argument figure when the compile
    stops before XLA's memory_analysis."""
    import jax

    total = 0
    for leaf in jax.tree.leaves(args):
        shape = leaf.sharding.shard_shape(leaf.shape)
        total += int(np.prod(shape, dtype=np.int64)) * leaf.dtype.itemsize
    return total


def compile_one(run_id: str, cache: Path, layers: int | None, full: bool) -> None:
    """In this process: compile one run and write its HLO and figures to the cache."""
    from sharding_core.program import memory as mem

    run = R.BY_ID[run_id]
    name = job_name(run, layers, full)
    t0, c0 = time.perf_counter(), time.process_time()
    mesh, step, args = build(run, layers)
    lowered = step.lower(*args)
    t1 = time.perf_counter()
    out: dict[str, Any] = {"id": run_id, "layers": layers, "libtpu_args": os.environ.get("LIBTPU_INIT_ARGS", ""),
                           "mode": "full" if full else "schedule"}  # fmt: skip
    hlo: str | None = None
    error: BaseException | None = None
    if full:
        try:
            compiled = lowered.compile()
            hlo = compiled.as_text()
            out["memory"] = mem.memory_stats(compiled)
            from sharding_core.compat import cost_analysis

            cost = dict(cost_analysis(compiled) or {})
            out["cost"] = {k: float(v) for k, v in cost.items() if k in ("flops", "bytes accessed")}
        except Exception as e:
            error = e
    else:
        hlo, placed, error = scheduled_hlo(lowered)
        nbytes = argument_bytes(args)
        out["memory"] = {
            "argument_size_in_bytes": nbytes,
            "output_size_in_bytes": nbytes,
            "alias_size_in_bytes": nbytes,
        }
        out["buffer_assignment_bytes"] = placed
    if error is not None:
        if not mem.is_memory_refusal(error):
            raise error
        out["refusal"] = mem.refusal(error)
    if hlo is not None:
        (cache / f"{name}.hlo.gz").write_bytes(gzip.compress(hlo.encode(), 6))
    out.update(
        lower_seconds=t1 - t0,
        compile_seconds=time.perf_counter() - t1,
        cpu_seconds=time.process_time() - c0,
        peak_rss_bytes=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        device_ids=[int(i) for i in mesh.device_ids.flatten()],
        mesh_shape=list(mesh.devices.shape),
        axis_names=list(mesh.axis_names),
    )
    (cache / f"{name}.json").write_text(json.dumps(out))
    sys.stdout.flush()
    os._exit(0)  # a schedule-only compile's thread is still generating code: stop the process here


def jobs(only: list[str], reduced: bool = False, full: bool = True) -> list[tuple[R.Run, int | None, bool]]:
    """(run, layers, full) to compile: every reproducible run schedule-only; the ``FULL`` runs and the reduced copies
    also to the end (their memory, and the check that a schedule-only compile gives the full compile's schedule).
    ``reduced``: the reduced copies only; ``full=False``: no compile to the end."""
    runs = [r for r in R.RUNS if r.not_compiled is None and (not only or r.id in only) and not reduced]
    out: list[tuple[R.Run, int | None, bool]] = [(r, None, False) for r in runs]
    out += [(r, None, True) for r in runs if r.id in FULL]
    for i, n in REDUCED.items():
        if not only or i in only:
            out += [(R.BY_ID[i], n, False), (R.BY_ID[i], n, True)]
    if not full:
        out = [t for t in out if not t[2]]
    # schedule-only compiles first (seconds each), the small ones first; full compiles (minutes to hours) last
    return sorted(out, key=lambda t: (t[2], t[0].chips, t[0].id, t[1] or 0))


def job_name(run: R.Run, layers: int | None, full: bool) -> str:
    return run.id + (f"-L{layers}" if layers else "") + ("-full" if full else "")


def compile_all(cache: Path, only: list[str], force: bool, cap: str, timeout: float, reduced: bool = False,
                schedule_only: bool = False) -> None:  # fmt: skip
    cache.mkdir(parents=True, exist_ok=True)
    for run, layers, full in jobs(only, reduced, full=not schedule_only):
        name = job_name(run, layers, full)
        if (cache / f"{name}.json").exists() and not force:
            continue
        env = {**os.environ, "LIBTPU_INIT_ARGS": run.libtpu_args, "JAX_PLATFORMS": "cpu", "TPU_SKIP_MDS_QUERY": "1"}
        cmd = [sys.executable, __file__, "_one", run.id, "--cache", str(cache)]
        cmd += (["--layers", str(layers)] if layers else []) + (["--full"] if full else [])
        if Path(MEMRUN).exists():
            cmd = [MEMRUN, cap, *cmd]
        t = time.perf_counter()
        # its own process group: a compile past the timeout is stopped whole (memrun and the compiler under it)
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                                start_new_session=True)  # fmt: skip
        try:
            _, err = proc.communicate(timeout=timeout)
            status = "ok" if proc.returncode == 0 else f"failed ({proc.returncode}): {err.strip()[-600:]}"
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            status = f"timed out after {timeout:.0f} s"
        print(f"{name}: {status} in {time.perf_counter() - t:.0f} s", flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("compile")
    c.add_argument("--only", action="append", default=[])
    c.add_argument("--force", action="store_true")
    c.add_argument("--cap", default="8G", help="memory cap per compile (memrun)")
    c.add_argument("--timeout", type=float, default=3600.0)
    c.add_argument("--reduced", action="store_true", help="only the reduced copies, schedule-only and to the end")
    c.add_argument("--schedule-only", action="store_true", help="no compile to the end")
    one = sub.add_parser("_one")
    one.add_argument("run")
    one.add_argument("--layers", type=int)
    one.add_argument("--full", action="store_true")
    for s in (c, one):
        s.add_argument("--cache", type=Path, default=CACHE)
    f = sub.add_parser("facts")
    f.add_argument("--cache", type=Path, default=CACHE)
    f.add_argument("--out", type=Path, default=FACTS)
    sub.add_parser("fit")
    args = p.parse_args()
    if args.cmd == "_one":
        compile_one(args.run, args.cache, args.layers, args.full)
    elif args.cmd == "compile":
        compile_all(args.cache, args.only, args.force, args.cap, args.timeout, args.reduced, args.schedule_only)
    elif args.cmd == "facts":
        from bench.step_facts import write_facts

        write_facts(args.cache, args.out)
    else:
        from bench.step_facts import report

        print(report())


if __name__ == "__main__":
    main()
