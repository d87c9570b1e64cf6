"""Compiling a search's candidates: in bounded worker processes (:mod:`sharding_core.searching.worker`), or in this
process one after another when ``FN`` cannot be imported by its file and name (a closure) or ``workers=0``.

At most :attr:`Limits.workers` processes at once, each compiling one candidate at a time; the parent looks at
each every :data:`POLL_S` and stops one past its resident-memory limit (``too_large``), past its time for one
compile (``timeout``) or at the search's deadline (``budget``): that candidate is answered as not compiled, with
why, and the next one gets a fresh process. Workers are started with ``subprocess`` (a search may itself run in a
daemonic process, the MCP server's job, which ``multiprocessing`` forbids to have children)."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from typing import IO, Any, Protocol

from sharding_core.kernels.memory import resident_bytes
from sharding_core.searching.compiling import Job, compile_job
from sharding_core.searching.worker import PARENT_ENV, failure
from sharding_core.units import fmt_bytes

POLL_S = 0.2
MAX_WORKERS = 8
Done = Callable[[Job, dict[str, Any]], None]


class Clock(Protocol):
    def can_start(self) -> bool: ...  # whether a compile may start now
    def deadline(self) -> float: ...  # time.monotonic() at which compiles are stopped


@dataclasses.dataclass(frozen=True)
class Limits:
    workers: int = 2
    memory_bytes: int = 8 * 2**30  # a Llama-3-70B plan peaks near 2 GiB (docs/planning.md)
    seconds: float = 600.0  # one compile (a Llama-3-70B step compiles in 20-90 s on 2 cores)


def not_compiled(code: str, message: str, hint: str | None = None) -> dict[str, Any]:
    return {"compiled": False, "error": {"code": code, "message": message, "hint": hint}}


def run_in_process(fn: Callable[..., Any], jobs: Sequence[Job], clock: Clock, done: Done) -> None:
    """Each job compiled here, in order, while the clock lets one start."""
    for job in jobs:
        if not clock.can_start():
            done(job, not_compiled("budget", "not compiled: the search's time budget ran out first"))
            continue
        try:
            result = compile_job(fn, job)
        except Exception as e:  # noqa: BLE001 - a candidate the model or XLA refuses is data
            result = {"compiled": False, "error": failure(e)}
        done(job, result)


def run_in_workers(target: tuple[str, str], jobs: Sequence[Job], clock: Clock, done: Done, limits: Limits) -> None:
    """The jobs compiled by up to ``limits.workers`` worker processes on ``target`` (file, function name)."""
    todo: queue.Queue[Job] = queue.Queue()
    for job in jobs:
        todo.put(job)
    lock = threading.Lock()

    def report(job: Job, result: dict[str, Any]) -> None:
        with lock:
            done(job, result)

    count = max(1, min(limits.workers, MAX_WORKERS, len(jobs)))
    threads = [threading.Thread(target=_slot, args=(target, todo, clock, report, limits), daemon=True)
               for _ in range(count)]  # fmt: skip
    for t in threads:
        t.start()
    for t in threads:
        t.join()


class _Worker:
    """One worker process and the thread that reads its answers."""

    def __init__(self, target: tuple[str, str]) -> None:
        self.log: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115 - closed by stop(), with the process
        env = {**os.environ, "JAX_PLATFORMS": os.environ.get("JAX_PLATFORMS", "cpu"), PARENT_ENV: str(os.getpid())}
        self.proc = subprocess.Popen(  # noqa: S603 - our own module, with the user's file and function as arguments
            [sys.executable, "-m", "sharding_core.searching.worker", *target],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, env=env, text=True,
        )  # fmt: skip
        self.answers: queue.Queue[str] = queue.Queue()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.answers.put(line)

    def ask(self, job: Job) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(job.json()) + "\n")
        self.proc.stdin.flush()

    def tail(self) -> str:
        self.log.seek(0)
        return self.log.read().decode("utf-8", errors="replace")[-1500:]

    def stop(self) -> None:
        with contextlib.suppress(OSError):
            self.proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=5)
        self.reader.join(timeout=5)  # the pipe is at its end once the process is gone
        for pipe in (self.proc.stdin, self.proc.stdout):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()
        self.log.close()


def _slot(target: tuple[str, str], todo: queue.Queue[Job], clock: Clock, done: Done, limits: Limits) -> None:
    worker: _Worker | None = None
    try:
        while True:
            try:
                job = todo.get_nowait()
            except queue.Empty:
                return
            if not clock.can_start():
                done(job, not_compiled("budget", "not compiled: the search's time budget ran out first"))
                continue
            worker = worker if worker is not None and worker.proc.poll() is None else _Worker(target)
            result = _wait(worker, job, clock, limits)
            if not result.get("compiled") and (result.get("error") or {}).get("code") in (
                "timeout",
                "too_large",
                "budget",
                "worker_crashed",
            ):
                worker.stop()
                worker = None
            done(job, result)
    finally:
        if worker is not None:
            worker.stop()


def _wait(worker: _Worker, job: Job, clock: Clock, limits: Limits) -> dict[str, Any]:
    """The worker's answer for ``job``, or why there is none (see the module docstring)."""
    worker.ask(job)
    t0 = time.monotonic()
    while True:
        try:
            answer = json.loads(worker.answers.get(timeout=POLL_S))
        except queue.Empty:
            answer = None
        if answer is not None:
            if "error" in answer:
                return {"compiled": False, "error": answer["error"]}
            return dict(answer["result"])
        elapsed = time.monotonic() - t0
        if worker.proc.poll() is not None and worker.answers.empty():
            return not_compiled("worker_crashed", f"the worker stopped (exit code {worker.proc.returncode}) after "
                                f"{elapsed:.0f} s compiling it: {worker.tail()[-600:]}")  # fmt: skip
        if elapsed > limits.seconds:
            return not_compiled("timeout", f"its compile ran past {limits.seconds:.0f} s and was stopped")
        if time.monotonic() > clock.deadline():
            return not_compiled("budget", f"its compile was stopped after {elapsed:.0f} s: the search's time ran out")
        rss = resident_bytes(worker.proc.pid)
        if rss is not None and rss > limits.memory_bytes:
            return not_compiled("too_large", f"its compile used {fmt_bytes(rss)}, past the worker's limit of "
                                f"{fmt_bytes(limits.memory_bytes)}, and was stopped")  # fmt: skip
