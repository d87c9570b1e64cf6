"""A pool of worker processes: a fixed number of workers, a bounded queue, a per-task timeout, a result cache.

Generic over the work: a :class:`Task` says what to send a worker (its hashable ``key``, also the
cache key), which worker suits it (``affinity``) and how to turn the worker's raw answer into the
response (``result``); the pool is given the worker's entry point (for the kernel lab,
:func:`sharding_core.kernels.worker.main`) and the options every task is sent with.

Why processes: JAX fixes its CPU device count per process and a kernel needs as many devices as
its mesh, a hung or crashing kernel must not take the server with it, and compiling is CPU-bound
work the event loop must not wait on. Workers are started with ``spawn`` (never ``fork``: a JAX
process has threads) and stay warm between tasks; the pool prefers a worker whose last task had
the same affinity (for kernels the mesh size: its compiled-executable caches are still alive) but
any will do.

Flow: :meth:`WorkerPool.submit` answers from the cache, joins an identical task in flight, refuses
when ``workers + queue`` tasks are already in flight (:class:`Busy`, a 429), or queues the job
(:meth:`WorkerPool.submit_all`: several, all or none).
Each worker has a slot thread that takes the next job, sends it over a pipe and waits for
progress messages (``compiling``, ``running``) and the result. Past the timeout it kills the
worker and starts a replacement; a worker that dies (``os._exit``, a segfault, the OOM killer)
is replaced the same way. The parent turns the worker's answer into the response with
:meth:`Task.result`, encodes it once, and caches the bytes.

Memory: one budget for all the workers (``total_memory``, ``max_kernel_memory``) besides each worker's
(``memory_limit``, ``max_worker_memory``). A job starts only when its estimate fits beside what the other workers
hold or are estimated to reach (a running job's estimate, and once compiled what XLA's figures say it needs; an
idle worker's baseline; or the resident memory the
watchdog last saw, whichever is more: a worker keeps some of its last run's heap); a watchdog thread sums the
workers' resident memory every 0.1 s and stops
the largest past the total; and the workers live in one parent memory cgroup capped at the total, each in a
child capped at its own limit, where the server may make them (:mod:`server.memcap`).
"""

from __future__ import annotations

import collections
import concurrent.futures
import contextlib
import dataclasses
import logging
import math
import multiprocessing
import os
import secrets
import signal
import threading
import time
from collections.abc import Callable, Hashable, Mapping, Sequence
from multiprocessing.connection import Connection
from multiprocessing.context import ForkServerContext, SpawnContext
from multiprocessing.process import BaseProcess
from typing import Any, Literal, Protocol

import orjson

from server.memcap import BACKSTOP_SLACK, CgroupCap
from server.settings import (
    MAX_KERNEL_CACHE_ENTRIES,
    MAX_KERNEL_JOBS,
    MAX_KERNEL_QUEUE,
    MAX_KERNEL_RESULT_BYTES,
    MAX_KERNEL_SECONDS,
    MAX_KERNEL_WORKERS,
)
from sharding_core.errors import ShardingError
from sharding_core.kernels.memory import WORKER_BASELINE_BYTES, resident_bytes
from sharding_core.units import fmt_bytes

log = logging.getLogger("shardscope.pool")

WATCH_S = 0.1
"""How often a running job's worker is looked at (its messages, and its resident memory)."""
TOO_LARGE = "too_large"
WORKER_START_TIMEOUT_S = 180.0  # importing JAX in a fresh process takes seconds on a busy machine
TIMEOUT = "timeout"
WORKER_CRASHED = "worker_crashed"
BUSY = "busy"
WORKER_ERROR = "worker_error"
CANCELLED = "cancelled"
KERNEL_ERROR = "kernel_error"
JOB_STATES = ("queued", "compiling", "running", "done", "error")
"""A job's states as the page polls them (a worker reports the middle two as progress)."""

Listener = Callable[["Job", bool], None]
"""Told of a job's every change of state (``job``, and whether its answer just went into the cache), from the
thread that changed it, outside the pool's lock: what shares a pool's jobs and results beyond its process."""
WorkerEntry = Callable[[Connection, Sequence[str]], None]
"""A worker process's main function: the pipe to the pool, and ``"module:function"`` set-up hooks."""


class Task(Protocol):
    """What the pool runs. ``key`` is sent to the worker and keys the cache (equal keys share a run). A task
    may also say the bytes its worker is estimated to need (``memory``, :func:`task_memory`), which a pool
    with a total memory budget reserves while it runs."""

    @property
    def key(self) -> Hashable: ...

    @property
    def affinity(self) -> int: ...

    def result(self, raw: Any) -> Any:
        """The response (JSON-ready data) for the worker's raw answer; raises ShardingError to refuse it."""
        ...


def task_memory(task: Task) -> int:
    """The bytes a task's worker is estimated to need (its ``memory``; 0 when it does not say), what a job
    reserves of the workers' total while it runs."""
    memory = getattr(task, "memory", 0)
    return int(memory) if isinstance(memory, int) else 0


def task_timeout(task: Task, default_s: float, setting: str) -> tuple[float, str]:
    """A task's time limit and the setting it comes from: its own (``timeout``: a compile-only kernel run's
    compile-time budget) or the pool's."""
    own = getattr(task, "timeout", None)
    return (float(own[0]), str(own[1])) if isinstance(own, tuple) else (default_s, setting)


class Busy(Exception):
    """Every worker is busy and the queue is full."""

    def __init__(self, in_flight: int, limit: int, retry_after: int) -> None:
        super().__init__(f"{in_flight} tasks in flight; at most {limit}")
        self.in_flight = in_flight
        self.limit = limit
        self.retry_after = retry_after


@dataclasses.dataclass(eq=False)
class Job:
    """One task's run: its state as the page polls it, and its answer (response bytes or an error body)."""

    id: str
    task: Task
    state: str = "queued"  # one of JOB_STATES
    created: float = dataclasses.field(default_factory=time.monotonic)
    started: float | None = None
    finished: float | None = None
    result: bytes | None = None  # the run response without its leading {"cached": ...}
    failure: ShardingError | None = None  # why it failed: code, message, hint and details
    cached: bool = False
    peak_memory: int | None = None  # the worker's largest resident memory seen while it ran (bytes)
    needs: int | None = None  # the bytes the run needs by XLA's figures, once its worker has compiled it
    owners: int = 1  # requests waiting for it (a compare withdraws its claim when its other side failed)
    future: concurrent.futures.Future[None] = dataclasses.field(default_factory=concurrent.futures.Future)

    @property
    def key(self) -> Hashable:
        return self.task.key

    @property
    def elapsed_ms(self) -> float:
        end = self.finished if self.finished is not None else time.monotonic()
        return (end - self.created) * 1e3

    def response_bytes(self) -> bytes:
        assert self.result is not None
        return b'{"cached":' + (b"true" if self.cached else b"false") + b"," + self.result[1:]


# ---------------------------------------------------------------------------------------- pool


def _held(result: bytes | None) -> int:
    """What a result body counts against ``max_result_bytes`` (a failure is a small error: 0)."""
    return len(result) if result is not None else 0


class _WorkerGone(Exception):
    pass


def crashed(message: str, hint: str | None = None) -> ShardingError:
    """A run whose worker died, could not start, or was stopped with the server."""
    return ShardingError(WORKER_CRASHED, message, hint)


SHUTTING_DOWN = "the server is shutting down"


def refusal(data: Mapping[str, Any]) -> ShardingError:
    """A worker's refusal (``("error", {"code", "message", "hint"?, ...details})`` on its pipe) as an error."""
    details = {k: v for k, v in data.items() if k not in ("code", "message", "hint")}
    return ShardingError(
        str(data.get("code", KERNEL_ERROR)), str(data.get("message", "the run failed")), data.get("hint"), **details
    )


def _memory_error(what: str, limit: int, setting: str, seen: str, then: str, hint: str) -> ShardingError:
    return ShardingError(
        TOO_LARGE, f"{what}, {fmt_bytes(limit)} (setting {setting}){seen}; {then}", hint=hint, limit=limit
    )


class _Slot:
    """One worker process and the thread that feeds it."""

    def __init__(self, pool: WorkerPool, index: int) -> None:
        self.pool = pool
        self.index = index
        self.proc: BaseProcess | None = None
        self.conn: Connection | None = None
        self.affinity: int | None = None  # of the last task run here
        self.cgroup: CgroupCap | None = None
        self.cgroup_tried = False
        self.killed_for_total: int | None = None  # the workers' sum when the total's watchdog killed this one
        self.job: Job | None = None  # the job it took last (running while the pool still counts it running)
        self.resident = 0  # its worker's resident bytes at the total's watchdog's last look
        self.thread = threading.Thread(target=self._loop, name=f"{pool.name}-slot-{index}", daemon=True)

    # -- process lifecycle

    def ensure_process(self) -> None:
        if self.proc is not None and self.proc.is_alive() and self.conn is not None:
            return
        self.stop_process()
        # spawn (or forkserver): a fresh interpreter, never a fork of this process and its JAX threads.
        ctx: SpawnContext | ForkServerContext = (
            multiprocessing.get_context("forkserver")
            if self.pool.start_method == "forkserver"
            else multiprocessing.get_context("spawn")
        )
        parent, child = ctx.Pipe()
        proc = ctx.Process(
            target=self.pool.entry, args=(child, tuple(self.pool.setup)), name=f"{self.pool.name}-{self.index}"
        )
        proc.daemon = True  # never outlives the server
        try:
            proc.start()
        except Exception as e:  # noqa: BLE001 - e.g. spawn refusing an unguarded __main__: report, don't die
            child.close()
            parent.close()
            raise _WorkerGone(f"a worker could not start: {e}") from None
        child.close()
        self.proc, self.conn, self.affinity = proc, parent, None
        self.killed_for_total = None  # a new process: whatever the watchdog did was to the last one
        self._cap(proc)
        deadline = time.monotonic() + WORKER_START_TIMEOUT_S
        while time.monotonic() < deadline and not self.pool.closing:
            if parent.poll(0.2):
                try:
                    kind, _ = parent.recv()
                except (EOFError, OSError):
                    break
                if kind == "ready":
                    return
            elif not proc.is_alive():
                break
        code = proc.exitcode
        self.stop_process()
        raise _WorkerGone(f"a worker did not start (exit code {code})")

    def _cap(self, proc: BaseProcess) -> None:
        """Moves a new worker into the slot's memory cgroup: a child of the pool's (made on first use, where
        the server may), capped at the worker's limit, under the parent's cap on all workers together."""
        parent = self.pool.cgroup()
        if parent is None or proc.pid is None:
            return
        if not self.cgroup_tried:
            self.cgroup_tried = True
            limit = self.pool.memory_limit
            if limit is not None:
                self.cgroup = parent.child(f"worker-{self.index}", int(limit * BACKSTOP_SLACK))
        (self.cgroup or parent).add(proc.pid)

    def pid(self) -> int | None:
        proc = self.proc
        return proc.pid if proc is not None else None

    def stop_process(self, kill: bool = False) -> None:
        proc, conn = self.proc, self.conn
        self.proc, self.conn, self.affinity = None, None, None
        if conn is not None:
            if not kill:
                with contextlib.suppress(OSError, ValueError):
                    conn.send(None)
            conn.close()
        if proc is not None:
            if kill:
                proc.kill()
            proc.join(timeout=2 if not kill else 10)
            if proc.is_alive():
                proc.kill()
                proc.join(timeout=10)
            proc.close()

    # -- running

    def _loop(self) -> None:
        try:
            self.ensure_process()
        except _WorkerGone as e:
            log.warning("%s", e)
        while True:
            job = self.pool.next_job(self)
            if job is None:
                break
            try:
                self.run(job)
            except Exception as e:  # the slot must outlive any one job, or the queue stalls
                log.exception("%s slot %d failed on a job", self.pool.name, self.index)
                self.stop_process(kill=True)
                self.pool.finish(job, failure=ShardingError(WORKER_ERROR, f"{type(e).__name__}: {e}"))
        self.stop_process()

    def run(self, job: Job) -> None:
        pool = self.pool
        try:
            self.ensure_process()
        except _WorkerGone as e:
            pool.finish(job, failure=crashed(str(e)))
            return
        assert self.conn is not None and self.proc is not None
        conn, proc = self.conn, self.proc
        job.started = time.monotonic()  # the state stays "queued" until the worker says "compiling"
        affinity = job.task.affinity
        retiring = False
        try:
            conn.send((job.key, pool.options))
        except (OSError, ValueError):
            self._replace(job, "the worker could not take the job")
            return
        timeout_s, setting = task_timeout(job.task, pool.timeout_s, pool.timeout_setting)
        deadline = time.monotonic() + timeout_s
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self.stop_process(kill=True)
                pool.finish(
                    job,
                    failure=ShardingError(
                        TIMEOUT,
                        f"the run took longer than {timeout_s:g} s (setting {setting}); "
                        "its worker was stopped and replaced",
                        hint="use smaller shapes or a smaller mesh (compiling for many devices takes longest)",
                        limit=timeout_s,
                    ),
                )
                self._respawn()
                return
            if self._over_memory(job, proc):
                return
            try:
                ready = conn.poll(min(remaining, WATCH_S))
                message = conn.recv() if ready else None
            except (EOFError, OSError):
                self._replace(job, f"the worker exited while running (exit code {self._exitcode(proc)})")
                return
            if message is None:
                if pool.closing:
                    self.stop_process(kill=True)
                    pool.finish(job, failure=crashed(SHUTTING_DOWN))
                    return
                if not proc.is_alive():
                    self._replace(job, f"the worker exited while running (exit code {proc.exitcode})")
                    return
                continue
            kind, data = message
            if kind == "state":
                if isinstance(data, tuple):  # ("running", bytes): what the run needs by XLA's figures
                    data, needs = data
                    with pool._lock:
                        job.needs = int(needs)
                        pool._lock.notify_all()
                job.state = str(data)
                pool.notify(job)
                continue
            if kind == "retiring":
                retiring = True
                continue
            self.affinity = affinity
            if kind == "result":
                pool.complete(job, data)
            else:
                pool.finish(job, failure=refusal(data), cache=data.get("code") != WORKER_ERROR)
            if retiring:
                self.stop_process()
                self._respawn()  # warm again before the next job arrives
            return

    def _over_memory(self, job: Job, proc: BaseProcess) -> bool:
        """The watchdog: past the memory limit, the worker is killed and the job refused as too large."""
        limit = self.pool.memory_limit
        if limit is None or proc.pid is None:
            return False
        used = resident_bytes(proc.pid)
        if used is None:
            return False
        job.peak_memory = max(job.peak_memory or 0, used)
        if used <= limit:
            return False
        self.stop_process(kill=True)
        self.pool.finish(job, failure=self.pool.memory_failure(used))
        self._respawn()
        return True

    @staticmethod
    def _exitcode(proc: BaseProcess) -> int | None:
        proc.join(timeout=2)
        return proc.exitcode

    def _replace(self, job: Job, message: str) -> None:
        self.stop_process(kill=True)
        total, self.killed_for_total = self.killed_for_total, None
        parent = self.pool.cgroup()
        if self.cgroup is not None and self.cgroup.killed_for_memory():  # past its own limit, in the kernel
            self.pool.finish(job, failure=self.pool.memory_failure(None))
            self._respawn()
            return
        if total is not None or (parent is not None and parent.killed_for_memory()):  # past the workers' total
            self.pool.finish(job, failure=self.pool.total_failure(total))
            self._respawn()
            return
        self.pool.finish(
            job,
            failure=crashed(
                message + "; it was replaced", "the run crashed its process (e.g. out of memory); try smaller shapes"
            ),
        )
        self._respawn()

    def _respawn(self) -> None:
        if self.pool.closing:
            return
        try:
            self.ensure_process()
        except _WorkerGone as e:
            log.warning("%s", e)


class WorkerPool:
    """Worker processes running tasks, with a bounded queue, a timeout and an LRU result cache.

    Thread-safe. Threads and processes start on first use (:meth:`warm` or :meth:`submit`) and
    stop in :meth:`close`, which is idempotent.
    """

    def __init__(
        self,
        entry: WorkerEntry,
        *,
        name: str = "shardscope-worker",
        options: Mapping[str, Any] | None = None,
        workers: int = MAX_KERNEL_WORKERS,
        queue: int = MAX_KERNEL_QUEUE,
        timeout_s: float = MAX_KERNEL_SECONDS,
        timeout_setting: str = "max_kernel_seconds",
        cache_entries: int = MAX_KERNEL_CACHE_ENTRIES,
        max_jobs: int = MAX_KERNEL_JOBS,
        max_result_bytes: int = MAX_KERNEL_RESULT_BYTES,
        refused_code: str = KERNEL_ERROR,
        memory_limit: int | None = None,
        memory_setting: str = "max_worker_memory",
        total_memory: int | None = None,
        total_setting: str = "max_kernel_memory",
        setup: Sequence[str] = (),
        start_method: Literal["spawn", "forkserver"] = "spawn",
    ) -> None:
        if workers < 1 or queue < 0 or timeout_s <= 0 or cache_entries < 0 or max_jobs < 1 or max_result_bytes < 1:
            raise ValueError("worker pool limits must be positive")
        self.entry = entry
        self.name = name
        self.options = dict(options or {})  # sent with every task
        self.timeout_setting = timeout_setting
        self.refused_code = refused_code  # the error code of a result the task refuses (Task.result raised)
        self.memory_limit = memory_limit  # resident bytes per worker (watchdog, and a cgroup where possible)
        self.memory_setting = memory_setting
        self.total_memory = total_memory  # resident bytes of every worker together (admission, watchdog, cgroup)
        self.total_setting = total_setting
        self.workers = workers
        self.queue_limit = queue
        self.timeout_s = timeout_s
        self.cache_entries = cache_entries
        self.max_jobs = max_jobs
        self.max_result_bytes = max_result_bytes  # held by the cache, and by the finished jobs, each
        self.setup = tuple(setup)  # "module:function" run in every worker (tests register hook kernels)
        self.start_method = start_method
        self.closing = False
        self._lock = threading.Condition()
        self._queue: collections.deque[Job] = collections.deque()
        self._running: set[Job] = set()
        self._in_flight: dict[Hashable, Job] = {}
        self._jobs: collections.OrderedDict[str, Job] = collections.OrderedDict()
        self._cache: collections.OrderedDict[Hashable, tuple[bytes | None, ShardingError | None]] = (
            collections.OrderedDict()
        )
        self._cache_bytes = 0
        self._job_bytes = 0  # of the remembered jobs' results
        self._slots: list[_Slot] = []
        self._avg_run_s = 1.0
        self.stats = collections.Counter[str]()
        self._cgroup: CgroupCap | None = None
        self._cgroup_tried = False
        self._watchdog: threading.Thread | None = None
        self.peak_total = 0  # the largest sum of the workers' resident memory the watchdog saw
        self.listeners: list[Listener] = []

    # -- lifecycle

    def open(self) -> None:
        """Makes a closed pool usable again (an app's lifespan may run more than once); else a no-op."""
        with self._lock:
            if self.closing:
                self.closing = False
                self._slots = []

    def warm(self) -> None:
        """Starts the workers (in the background) so the first run does not wait for JAX to import."""
        with self._lock:
            if self._slots or self.closing:
                return
            self._slots = [_Slot(self, i) for i in range(self.workers)]
            for slot in self._slots:
                slot.thread.start()
            if self.total_memory is not None:
                self._watchdog = threading.Thread(target=self._watch_total, name=f"{self.name}-watchdog", daemon=True)
                self._watchdog.start()

    def cgroup(self) -> CgroupCap | None:
        """The memory cgroup every worker goes under, capped at the total (made once, where the server may)."""
        with self._lock:
            if not self._cgroup_tried and (self.total_memory is not None or self.memory_limit is not None):
                self._cgroup_tried = True
                limit = self.total_memory if self.total_memory is not None else self.memory_limit or 0
                self._cgroup = CgroupCap.parent(self.name, int(limit * BACKSTOP_SLACK))
            return self._cgroup

    def _watch_total(self) -> None:
        """The watchdog on the sum: while the workers together hold more than the total, the largest is
        stopped (its run, if it had one, gets 422 too_large); the cgroup above them is the backstop."""
        assert self.total_memory is not None
        while not self.closing:
            time.sleep(WATCH_S)
            sizes = [(resident_bytes(pid) or 0, pid, slot) for slot in self._slots if (pid := slot.pid()) is not None]
            used = sum(size for size, _, _ in sizes)
            with self._lock:
                for slot in self._slots:
                    slot.resident = next((size for size, _, s in sizes if s is slot), 0)
                self._lock.notify_all()  # a worker that gave memory back may make room for a waiting run
            self.peak_total = max(self.peak_total, used)
            if used <= self.total_memory or not sizes:
                continue
            size, pid, slot = max(sizes, key=lambda s: s[0])
            slot.killed_for_total = used
            self.stats["killed_for_total"] += 1
            log.warning(
                "the kernel workers hold %s together, past %s (setting %s): stopping the largest (%s)",
                fmt_bytes(used), fmt_bytes(self.total_memory), self.total_setting, fmt_bytes(size),
            )  # fmt: skip
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    def close(self) -> None:
        with self._lock:
            if self.closing:
                return
            self.closing = True
            pending = list(self._queue)
            self._queue.clear()
            self._lock.notify_all()
        for job in pending:
            self.finish(job, failure=crashed(SHUTTING_DOWN))
        for slot in self._slots:
            if slot.thread.ident is not None:
                slot.thread.join(timeout=30)
            slot.stop_process(kill=True)
            if slot.cgroup is not None:
                slot.cgroup.remove()
        if self._watchdog is not None:
            self._watchdog.join(timeout=5)
            self._watchdog = None
        if self._cgroup is not None:
            self._cgroup.remove()
            self._cgroup, self._cgroup_tried = None, False

    # -- submitting

    def submit(self, task: Task) -> Job:
        """A job for ``task``: answered from the cache, joined to an identical one in flight, or queued."""
        return self.submit_all([task])[0]

    def submit_all(self, tasks: Sequence[Task]) -> list[Job]:
        """Jobs for ``tasks``, all or none (a compare's two sides): each answered from the cache, joined to
        an identical one in flight, or queued; :class:`Busy` when the new ones together do not fit, and
        then nothing was queued."""
        with self._lock:
            if self.closing:
                raise RuntimeError("the worker pool is closed")
            plan: list[tuple[str, Task, Job | None]] = []
            new: dict[Hashable, Job] = {}
            for task in tasks:
                key = task.key
                if key in self._cache:
                    plan.append(("cached", task, None))
                elif key in self._in_flight or key in new:
                    plan.append(("joined", task, self._in_flight.get(key) or new[key]))
                else:
                    new[key] = Job(secrets.token_urlsafe(16), task)
                    plan.append(("queued", task, new[key]))
            in_flight = len(self._queue) + len(self._running)
            limit = self.workers + self.queue_limit
            if new and in_flight + len(new) > limit:
                self.stats["busy"] += 1
                waves = math.ceil((len(self._queue) + len(new)) / self.workers)
                raise Busy(in_flight, limit, max(1, math.ceil(waves * self._avg_run_s)))
            jobs: list[Job] = []
            for how, task, job in plan:
                if how == "cached":
                    self._cache.move_to_end(task.key)
                    self.stats["cache_hits"] += 1
                    job = Job(secrets.token_urlsafe(16), task, cached=True)
                    job.result, job.failure = self._cache[task.key]
                    job.state = "done" if job.result is not None else "error"
                    job.finished = job.created
                    job.future.set_result(None)
                    self._remember(job)
                elif how == "joined":
                    assert job is not None
                    self.stats["joined"] += 1
                    job.owners += 1
                else:
                    assert job is not None
                    self._queue.append(job)
                    self._in_flight[task.key] = job
                    self._remember(job)
                jobs.append(job)
            if new:
                self._lock.notify_all()
        if new:
            self.warm()
        return jobs

    def withdraw(self, job: Job) -> bool:
        """Gives up one owner's claim on ``job`` (a compare whose other side failed); a job still queued
        that nobody else waits for is taken out of the queue and never runs. True when it was."""
        with self._lock:
            job.owners -= 1
            if job.owners > 0 or job not in self._queue:
                return False
            self._queue.remove(job)
        self.finish(job, failure=ShardingError(CANCELLED, "the run was withdrawn before it started"))
        return True

    def get(self, job_id: str) -> Job | None:
        with self._lock:
            return self._jobs.get(job_id)

    def status(self, job: Job) -> tuple[str, bytes | None, ShardingError | None, int | None]:
        """A consistent view of a job: state, response bytes, failure, runs queued ahead of it."""
        with self._lock:
            ahead = next((i for i, queued in enumerate(self._queue) if queued is job), None)
            body = job.response_bytes() if job.result is not None else None
            return job.state, body, job.failure, ahead

    def _remember(self, job: Job) -> None:
        self._jobs[job.id] = job
        self._job_bytes += _held(job.result)
        self._forget_old(keep=job)

    def _forget_old(self, keep: Job) -> None:
        """Drops the oldest finished jobs (never ``keep``, the newest) past ``max_jobs`` or ``max_result_bytes``."""
        if len(self._jobs) <= self.max_jobs and self._job_bytes <= self.max_result_bytes:
            return
        for old_id, old in list(self._jobs.items()):
            if len(self._jobs) <= self.max_jobs and self._job_bytes <= self.max_result_bytes:
                break
            if old is not keep and old.future.done():
                del self._jobs[old_id]
                self._job_bytes -= _held(old.result)

    # -- slots

    def next_job(self, slot: _Slot) -> Job | None:
        with self._lock:
            while True:
                if self.closing:
                    return None
                pick = self._admissible(slot)
                if pick is not None:
                    break
                if self._queue:
                    self.stats["memory_waits"] += 1
                self._lock.wait()
            self._queue.remove(pick)
            self._running.add(pick)
            slot.job = pick
            return pick

    def _admissible(self, slot: _Slot) -> Job | None:
        """The job this slot may start now (under the lock), or None. It prefers a job with the affinity of
        its worker's last one, else the oldest; with a total memory budget, a job starts only when its
        estimate fits beside the runs in progress and the other workers' baselines (a compare's two sides
        count together: one waits for the other rather than both run past the total). The oldest job is
        never passed over for a smaller one, so a large run waits its turn and is not starved; a job alone
        always starts (its estimate fits one worker's budget, which start-up checked against the total)."""
        if not self._queue:
            return None
        oldest = self._queue[0]
        pick = next((j for j in self._queue if j.task.affinity == slot.affinity), oldest)
        if self.total_memory is None or not self._running:
            return pick
        others = 0  # what the other workers hold or are estimated to reach, whichever is more
        for other in self._slots:
            if other is not slot:
                running = other.job if other.job in self._running else None
                estimate = 0 if running is None else max(task_memory(running.task), running.needs or 0)
                floor = max(estimate, WORKER_BASELINE_BYTES)
                others += max(floor, other.resident)  # an idle worker keeps some of its last run's heap
        for job in dict.fromkeys((pick, oldest)):
            if others + max(task_memory(job.task), slot.resident) <= self.total_memory:
                return job
        return None

    def complete(self, job: Job, raw: dict[str, Any]) -> None:
        try:
            body = orjson.dumps(job.task.result(raw))
        except ShardingError as e:
            self.finish(job, failure=ShardingError(self.refused_code, e.message, e.hint, **e.details), cache=True)
            return
        self.finish(job, result=body, cache=True)

    def finish(
        self, job: Job, *, result: bytes | None = None, failure: ShardingError | None = None, cache: bool = False
    ) -> None:
        with self._lock:
            job.result, job.failure = result, failure
            job.state = "done" if result is not None else "error"
            job.finished = time.monotonic()
            self._running.discard(job)
            if self._in_flight.get(job.key) is job:
                del self._in_flight[job.key]
            self._lock.notify_all()  # its memory is free: a run waiting for room may start
            if job.started is not None:
                self._avg_run_s = 0.8 * self._avg_run_s + 0.2 * (job.finished - job.started)
            if self._jobs.get(job.id) is job:
                self._job_bytes += _held(result)
                self._forget_old(keep=job)
            cached = cache and self._cache_put(job.key, result, failure)
            self.stats["done" if result is not None else failure.code if failure is not None else "error"] += 1
        self.notify(job, cached)
        if not job.future.done():
            job.future.set_result(None)

    def _cache_put(self, key: Hashable, result: bytes | None, failure: ShardingError | None) -> bool:
        """Caches an answer (under the lock), dropping the least recently used past the limits; False when it
        is not kept (no cache, or larger than the whole budget)."""
        if not self.cache_entries or _held(result) > self.max_result_bytes:
            return False
        old = self._cache.pop(key, None)
        self._cache_bytes += _held(result) - (_held(old[0]) if old else 0)
        self._cache[key] = (result, failure)
        while len(self._cache) > self.cache_entries or self._cache_bytes > self.max_result_bytes:
            _, (dropped, _) = self._cache.popitem(last=False)
            self._cache_bytes -= _held(dropped)
        return True

    def seed(self, task: Task, result: bytes | None, failure: ShardingError | None) -> bool:
        """Caches an answer computed elsewhere (another replica's, from the shared store), so the next
        :meth:`submit` of ``task`` is a cache hit. False when the task is cached already or nothing is kept."""
        with self._lock:
            if task.key in self._cache:
                return False
            return self._cache_put(task.key, result, failure)

    def notify(self, job: Job, cached: bool = False) -> None:
        """Tells the listeners of a job's change (outside the lock; a listener's failure is logged, never the
        job's)."""
        for listener in list(self.listeners):
            try:
                listener(job, cached)
            except Exception:
                log.exception("%s: a job listener failed", self.name)

    def total_failure(self, used: int | None) -> ShardingError:
        """The run's worker was stopped because the workers together passed ``total_memory``."""
        return _memory_error(
            "the kernel workers together needed more memory than they may use",
            self.total_memory or 0,
            self.total_setting,
            f" (they reached {fmt_bytes(used)})" if used else "",
            "the largest, this run's, was stopped and replaced",
            "use smaller shapes or fewer devices, or try again when fewer runs are in progress",
        )

    def memory_failure(self, used: int | None) -> ShardingError:
        """The run's worker was stopped because it passed ``memory_limit``."""
        return _memory_error(
            "the run needed more memory than a worker may use",
            self.memory_limit or 0,
            self.memory_setting,
            f" (it reached {fmt_bytes(used)})" if used else "",
            "its worker was stopped and replaced",
            "use smaller shapes or fewer devices: the shardings and collectives are the same at any multiple",
        )

    def cached(self, key: Hashable) -> bool:
        with self._lock:
            return key in self._cache

    def cache_info(self) -> dict[str, int]:
        with self._lock:
            return {
                "entries": len(self._cache),
                "limit": self.cache_entries,
                "bytes": self._cache_bytes,
                "job_bytes": self._job_bytes,
                "max_bytes": self.max_result_bytes,
            }

    def slot_threads(self) -> list[threading.Thread]:
        """The threads feeding the workers (for lifecycle tests)."""
        return [s.thread for s in self._slots]

    def memory_info(self) -> dict[str, int | None]:
        """The workers' resident memory now, in all and each, against the total (for tests and figures)."""
        sizes = [resident_bytes(pid) or 0 for slot in self._slots if (pid := slot.pid()) is not None]
        return {"used": sum(sizes), "largest": max(sizes, default=0), "total": self.total_memory,
                "peak": self.peak_total}  # fmt: skip

    def worker_pids(self) -> list[int]:
        """Process ids of the live workers (for tests that kill one)."""
        return [s.proc.pid for s in self._slots if s.proc is not None and s.proc.pid is not None]
