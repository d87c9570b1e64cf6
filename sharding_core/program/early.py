"""A libtpu compile read before its code generation: the program XLA partitioned, fused, scheduled and placed in
memory, in seconds instead of minutes — what a fix candidate is checked with on a TPU set (issue 32).

libtpu writes its optimized module to ``xla_dump_to`` (``*after_optimizations_after_buffer_assignment.txt``) once
its HLO passes are done — SPMD partitioning, fusion, the latency-hiding scheduler, buffer assignment — and only then
generates code, 80-90 % of a compile (issue 32's decoder for ``tpu:v5p:2x2x4``: HLO passes 0.4 s, code generation
42 s of a 46 s compile on a 2-core machine). Code generation reorders instructions and rewrites an async slice's
spelling, but leaves the schedule the step model replays and every collective as they were
(``tests/test_schedule_only.py`` compares the two modules of one compile; ``bench/bench_steps.py`` compares reduced
copies of published runs compiled both ways). What this compile does not give is XLA's final ``memory_analysis``:
its figure is the bytes the buffer assignment placed in HBM (``placed``: its memory-usage report's total of the
default memory space) — 3-24 % above XLA's final peak on the training steps compared, below it on a small
program (whose peak also holds a few MiB libtpu allocates later).

A compile cannot be stopped inside a process, so each runs in a child process (``python -m
sharding_core.program.early DIR``): the program exported with :mod:`jax.export` (flattened to its array leaves,
its donations carried), compiled in the child for the same compile-only devices in the same mesh order, with the
module entering the SPMD partitioner dumped too (every value's sharding, as a plan reads them). The child writes
what it read and exits without waiting for the code generation; its parent bounds its time and resident memory
and kills it past either, and on Linux the kernel kills it when its parent goes. Several run at once.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from sharding_core.devices import devices_of_key
from sharding_core.processes import PARENT_ENV, die_with_parent, resident_bytes
from sharding_core.program import values
from sharding_core.program.memory import is_memory_refusal, placed_bytes
from sharding_core.program.targets import set_target, target_of
from sharding_core.units import fmt_bytes

EARLY_FILE = "after_optimizations_after_buffer_assignment.txt"
"""The module libtpu writes after its HLO passes, before code generation."""
MAX_EARLY_SECONDS = 300.0
"""A child's compile is stopped past this."""
MAX_EARLY_MEMORY = 4 * 2**30
"""A child's resident memory is held under this (it is killed past it)."""
POLL_S = 0.05
NOT_EXPORTED = "could not export the program"
"""How an :class:`Early` whose program :mod:`jax.export` refused (a host callback) begins its error."""


@dataclasses.dataclass(frozen=True)
class Early:
    """What a compile stopped before code generation read: the scheduled module, the module entering the
    partitioner, the bytes placed in HBM; or why there is none (``error``)."""

    hlo: str | None
    entering: str | None
    placed: int | None
    error: str | None
    seconds: float


def compile_early(fns: Sequence[Any], args: Sequence[Any], kwargs: dict[str, Any], mesh: Any,
                  donated: Sequence[int]) -> list[Early]:  # fmt: skip
    """Each of ``fns`` (jitted functions of the same arguments) compiled for ``mesh``'s compile-only TPU devices
    until libtpu has scheduled and placed it, all at once in child processes. ``donated``: the indices of the
    argument leaves (``jax.tree.leaves((args, kwargs))``) the program donates."""
    target = target_of(mesh.devices.flat[0])
    if target is None or target.devset.platform != "tpu" or not target.devset.simulated:
        raise ValueError("an early compile is for a compile-only TPU set")
    common = {
        "devices": target.devset.key,
        "ids": [int(d.id) for d in mesh.devices.flat],
        "shape": [int(n) for n in mesh.devices.shape],
        "axes": [str(a) for a in mesh.axis_names],
        "donate": [int(i) for i in donated],
    }
    with tempfile.TemporaryDirectory(prefix="shardscope-early-") as tmp:
        children: list[tuple[subprocess.Popen[bytes] | None, Path, float, str | None]] = []
        for k, fn in enumerate(fns):
            work = Path(tmp) / str(k)
            work.mkdir()
            try:
                blob = _export(fn, args, kwargs)
            except Exception as e:  # noqa: BLE001 - a program JAX cannot export is not checked this way
                children.append((None, work, time.monotonic(), f"{NOT_EXPORTED}: {str(e)[:300]}"))
                continue
            (work / "spec.json").write_text(json.dumps({**common, "blob": base64.b64encode(blob).decode()}))
            children.append((_start(work), work, time.monotonic(), None))
        return [_wait(proc, work, t0, error) for proc, work, t0, error in children]


def _export(fn: Any, args: Sequence[Any], kwargs: dict[str, Any]) -> bytes:
    """``fn`` exported for TPU as a function of the arguments' array leaves, returning its output leaves (any
    pytree type the user's program uses stays on this side)."""
    import jax

    leaves, tree = jax.tree.flatten((tuple(args), dict(kwargs)))

    def flat(*xs: Any) -> Any:
        a, k = jax.tree.unflatten(tree, xs)
        return jax.tree.leaves(fn(*a, **k))

    shardings = [getattr(x, "sharding", None) for x in leaves]
    exported = jax.export.export(jax.jit(flat, in_shardings=shardings), platforms=("tpu",))(*leaves)
    return bytes(exported.serialize())


def _start(work: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "JAX_PLATFORMS": os.environ.get("JAX_PLATFORMS", "cpu"), PARENT_ENV: str(os.getpid())}
    log = (work / "log.txt").open("wb")
    try:
        return subprocess.Popen(  # noqa: S603 - our own module on our own temporary directory
            [sys.executable, "-m", "sharding_core.program.early", str(work)],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env,
        )  # fmt: skip
    finally:
        log.close()


def _wait(proc: subprocess.Popen[bytes] | None, work: Path, t0: float, error: str | None) -> Early:
    if proc is None:
        return Early(None, None, None, error, 0.0)
    out = work / "out.json"
    try:
        while proc.poll() is None:
            elapsed = time.monotonic() - t0
            if elapsed > MAX_EARLY_SECONDS:
                return Early(None, None, None, f"its compile ran past {MAX_EARLY_SECONDS:.0f} s", elapsed)
            rss = resident_bytes(proc.pid)
            if rss is not None and rss > MAX_EARLY_MEMORY:
                return Early(None, None, None, f"its compile used {fmt_bytes(rss)}, past {fmt_bytes(MAX_EARLY_MEMORY)}",
                             elapsed)  # fmt: skip
            time.sleep(POLL_S)
        elapsed = time.monotonic() - t0
        if not out.exists():
            tail = (work / "log.txt").read_text(errors="replace")[-600:] if (work / "log.txt").exists() else ""
            return Early(None, None, None, f"the compile stopped (exit code {proc.returncode}): {tail}", elapsed)
        got = json.loads(out.read_text())
        return Early(got.get("hlo"), got.get("entering"), got.get("placed"), got.get("error"), elapsed)
    finally:
        with contextlib.suppress(OSError):
            proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=5)


def main(work: Path) -> None:
    """In the child: compile the exported program of ``work/spec.json`` and write what the early dump says to
    ``work/out.json``, then exit without waiting for code generation."""
    die_with_parent()
    out = work / "out.json"
    try:
        result = _compile_spec(json.loads((work / "spec.json").read_text()), work / "dump")
    except Exception as e:  # noqa: BLE001 - said to the parent, which decides
        result = {"error": f"{type(e).__name__}: {str(e)[:600]}"}
    tmp = work / "out.json.part"
    tmp.write_text(json.dumps(result))
    tmp.replace(out)
    sys.stdout.flush()
    os._exit(0)  # the compile's thread is still generating code: stop here


def _compile_spec(spec: dict[str, Any], dump: Path) -> dict[str, Any]:
    import jax

    by_id = set_target(devices_of_key(spec["devices"])).by_id
    grid = np.array([by_id[i] for i in spec["ids"]], dtype=object).reshape(spec["shape"])
    mesh = jax.sharding.Mesh(grid, tuple(spec["axes"]))
    exported = jax.export.deserialize(bytearray(base64.b64decode(spec["blob"])))
    ins = exported.in_shardings_jax(mesh)
    avals = [jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=s) for a, s in zip(exported.in_avals, ins, strict=True)]
    fn = jax.jit(exported.call, in_shardings=ins, out_shardings=list(exported.out_shardings_jax(mesh)),
                 donate_argnums=tuple(spec["donate"]))  # fmt: skip
    lowered = fn.lower(*avals)
    dump.mkdir()
    options = {"xla_dump_to": str(dump), "xla_dump_hlo_pass_re": values.PARTITIONER_PASS}
    error: list[BaseException] = []

    def run() -> None:
        try:
            lowered.compile(compiler_options=options)
        except BaseException as e:  # noqa: BLE001 - read below
            error.append(e)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    last = -1
    while True:
        found = sorted(dump.glob(f"*{EARLY_FILE}"))
        if found:
            size = found[0].stat().st_size
            if size == last and size > 0 and placed_bytes(dump) is not None:
                break
            last = size
        elif error or not thread.is_alive():
            if error and is_memory_refusal(error[0]):
                return {"error": f"XLA refused it for memory: {str(error[0])[:400]}"}
            return {"error": str(error[0])[:600] if error else "the compile ended without its scheduled module"}
        time.sleep(0.1)
    return {"hlo": found[0].read_text(errors="replace"), "entering": values.dump_text(str(dump)),
            "placed": placed_bytes(dump)}  # fmt: skip


if __name__ == "__main__":
    main(Path(sys.argv[1]))
