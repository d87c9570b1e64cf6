"""Kernel jobs and results in the store: :class:`JobBoard`, one per app (``app.state.jobs``).

Replicas share one store, so a job's page may poll any of them. The replica that accepted a job runs it in its
own worker pool (workers, queue and memory stay per replica) and is its *owner*: the board writes the job's
state (queued, compiling, running, done, error), its result or failure and its peak memory to the store as the
pool reports them, and beats every :data:`BEAT_S` for the owner's unfinished jobs. ``GET
/api/kernels/jobs/{id}`` on any replica reads the store. A job whose owner stopped beating for
``max_kernel_job_silence_seconds`` (the replica died: ``kill -9``, a lost machine) is marked failed
(``worker_crashed``) by whichever replica reads it first, or sweeps first (every :data:`SWEEP_S`): never left
"running".

Results the pool caches are shared the same way (``kernel_results``, keyed by a digest of the run, the
versions, the program report's format and the worker options): before a run is queued, a result another replica
computed is looked up and seeded into the local cache, so it is served from the store instead of being run again.
What is cached and stored is the run's facts; its figures are added when it is answered (:func:`with_figures`), so
a store read by a server with an edited hardware table serves today's figures.

Writes go through one thread in the order the pool reported them (a slot thread never waits for the
database), except that creating a job is waited for before its id is answered, so the id is readable through
every replica the moment a client has it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import hashlib
import logging
import queue
import secrets
import threading
import time
from collections.abc import Callable, Iterable
from importlib.metadata import version
from typing import Any, Final

import jax
import orjson

from server.errors import ApiError
from server.pool import WORKER_CRASHED, Job, WorkerPool, refusal
from server.settings import Settings
from server.store import JOB_FINAL, JobRecord, Store
from sharding_core.cost.annotate import result_with_figures
from sharding_core.errors import NOT_FOUND, ShardingError
from sharding_core.program.report import FORMAT as REPORT_FORMAT

BEAT_S: Final = 1.0
"""How often the owner beats for its unfinished jobs (setting max_kernel_job_silence_seconds is the lease)."""
SWEEP_S: Final = 2.0
"""How often a replica marks failed the jobs whose owner went silent."""
STOP_S: Final = 10.0
"""How long closing waits for the last job states to be written."""

log = logging.getLogger("shardscope.jobs")

_STOP: Final = object()


def lost_failure(silence: int) -> str:
    """The error of a job whose owner stopped beating, as stored (JSON)."""
    error = ShardingError(
        WORKER_CRASHED,
        f"the server running this job stopped: no heartbeat for {silence} s (setting max_kernel_job_silence_seconds)",
        hint="start the run again: another server takes it",
    )
    return orjson.dumps(error.to_dict()).decode()


def with_figures(body: bytes) -> bytes:
    """A run's result as stored (facts: the pool's cache, the store's rows and job records) as answered: with
    today's figures (:func:`sharding_core.cost.annotate.result_with_figures`; a result stored before the program
    report is read into today's shape first)."""
    return orjson.dumps(result_with_figures(orjson.loads(body)))


class JobBoard:
    """One replica's kernel jobs and results in the shared store (see the module docstring).

    ``owner``: this replica's id (random per start, so a restarted replica never claims the jobs it lost).
    ``clock``: seconds since the epoch.
    """

    def __init__(
        self,
        store: Store,
        pool: WorkerPool,
        settings: Settings,
        *,
        owner: str | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.pool = pool
        self.settings = settings
        self.owner = owner or secrets.token_urlsafe(12)
        self.clock = clock
        self._published: dict[str, tuple[Job, float]] = {}  # in flight: id -> (job, its creation, wall clock)
        self._lock = threading.Lock()
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self.lost_text = lost_failure(settings.max_kernel_job_silence_seconds)
        self.stats = {"written": 0, "results": 0, "seeded": 0, "lost": 0, "failed_writes": 0}

    # ---- lifecycle ---------------------------------------------------------------------------------------

    def start(self) -> None:
        """Listens to the pool and starts the writer (an app's lifespan; idempotent)."""
        with self._lock:
            if self._thread is not None:
                return
            self.pool.listeners.append(self.changed)
            self._thread = threading.Thread(target=self._run, name="shardscope-jobs", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        """Writes what is pending (the pool's last states: close it first) and stops the writer."""
        with self._lock:
            thread, self._thread = self._thread, None
            if thread is None:
                return
            if self.changed in self.pool.listeners:
                self.pool.listeners.remove(self.changed)
        self._queue.put(_STOP)
        thread.join(STOP_S)

    # ---- what the pool and the routes call ----------------------------------------------------------------

    def changed(self, job: Job, cached: bool) -> None:
        """The pool's listener: a published job's new state is written; an answer it cached is shared."""
        if job.id in self._published:
            self._queue.put(("job", job, None))
        if cached:
            self._queue.put(("result", job, None))

    def publish(self, job: Job) -> concurrent.futures.Future[None]:
        """Makes ``job`` pollable through every replica: written (its current state) before the future is done."""
        now = self.clock()
        created = now - (time.monotonic() - job.created)  # the pool times on the monotonic clock
        with self._lock:
            self._published.setdefault(job.id, (job, created))
        done: concurrent.futures.Future[None] = concurrent.futures.Future()
        if self._thread is None:  # not started (no lifespan ran): written here and now
            self._write([("job", job, done)])
        else:
            self._queue.put(("job", job, done))
        return done

    async def publish_async(self, job: Job) -> None:
        await asyncio.wrap_future(self.publish(job))

    def digest(self, key: object) -> str:
        """A run's key in the shared results: its job (the key's ``repr``: plain data), the worker options and
        the versions that computed it, the program report's format among them (replicas of two versions never
        share)."""
        options = repr(sorted(self.pool.options.items()))
        text = "|".join((version("shardscope"), jax.__version__, f"report-{REPORT_FORMAT}", options, repr(key)))
        return hashlib.sha256(text.encode()).hexdigest()

    def share(self, tasks: Iterable[Any]) -> int:
        """Seeds the pool's cache with the stored results of ``tasks`` it lacks (another replica's); how many."""
        seeded = 0
        for task in tasks:
            if self.pool.cached(task.key):
                continue
            try:
                found = self.store.result(self.digest(task.key))
            except Exception as e:  # noqa: BLE001 - the store is down: the run is simply run here
                log.warning("cannot look up a shared kernel result: %s", e)
                return seeded
            if found is None:
                continue
            result, failure = found
            error = refusal(orjson.loads(failure)) if failure is not None else None
            if self.pool.seed(task, result, error):
                seeded += 1
        self.stats["seeded"] += seeded
        return seeded

    def job_json(self, job_id: str) -> bytes:
        """A job's state as stored, whichever replica runs it; 404 when no replica knows it. A job whose owner
        went silent is marked failed here and then."""
        record = self.store.job(job_id)
        if record is None:
            raise ApiError(
                404,
                NOT_FOUND,
                "no such kernel job",
                hint="finished jobs are kept for a while (settings max_kernel_jobs, max_kernel_result_bytes); start "
                "the run again",
            )
        now = self.clock()
        silence = self.settings.max_kernel_job_silence_seconds
        if record.state not in JOB_FINAL and record.beat < now - silence:
            self.stats["lost"] += self.store.jobs_lost(now, silence, self.lost_text)
            record = self.store.job(job_id) or record
        end = record.finished if record.finished is not None else now
        head = {
            "id": record.id,
            "kernel": record.kernel,
            "state": record.state,
            "queued_ahead": record.ahead,
            "elapsed_ms": max(0.0, end - record.created) * 1e3,
            "peak_memory_bytes": record.peak_memory,
            "failure": orjson.loads(record.failure) if record.failure is not None else None,
        }
        # The result is stored as encoded facts: its figures are added here, and spliced in.
        result = with_figures(record.result) if record.result is not None else b"null"
        return orjson.dumps(head)[:-1] + b',"result":' + result + b"}"

    # ---- the writer -----------------------------------------------------------------------------------------

    def record(self, job: Job, created: float) -> JobRecord:
        """A pool job as the store holds it (its times moved to the wall clock)."""
        state, body, failed, _ = self.pool.status(job)
        finished = created + (job.finished - job.created) if job.finished is not None else None
        kernel = getattr(getattr(job.task, "kernel", None), "name", "") or ""
        return JobRecord(
            job.id,
            self.owner,
            kernel,
            state,
            created,
            0.0,
            finished,
            job.peak_memory,
            body,
            orjson.dumps(failed.to_dict()).decode() if failed is not None else None,
        )

    def _run(self) -> None:
        last_beat = last_sweep = float("-inf")
        stopping = False
        while not stopping:
            try:
                items = [self._queue.get(timeout=BEAT_S)]
            except queue.Empty:
                items = []
            while True:  # everything pending at once: each job written once, in its latest state
                try:
                    items.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            stopping = any(item is _STOP for item in items)
            with self._lock:  # finished jobs whose last write failed (the store was down): written again
                again = [("job", job, None) for job, _ in self._published.values() if job.future.done()]
            self._write([item for item in items if item is not _STOP] + again)
            now = self.clock()
            try:
                if now - last_beat >= BEAT_S and self._published:  # only rows of its own unfinished jobs need it
                    last_beat = now
                    self.store.jobs_beat(self.owner, now)
                if now - last_sweep >= SWEEP_S:
                    last_sweep = now
                    silence = self.settings.max_kernel_job_silence_seconds
                    self.stats["lost"] += self.store.jobs_lost(now, silence, self.lost_text)
            except Exception as e:  # noqa: BLE001 - the store is down for now: beat again next time round
                self.stats["failed_writes"] += 1
                log.warning("kernel jobs: cannot beat or sweep: %s", e)

    def _write(self, items: list[tuple[str, Job, concurrent.futures.Future[None] | None]]) -> None:
        jobs: dict[str, Job] = {}
        results: dict[str, Job] = {}
        waiting: list[tuple[str, concurrent.futures.Future[None]]] = []
        for kind, job, done in items:
            (jobs if kind == "job" else results)[job.id] = job
            if done is not None:
                waiting.append((job.id, done))
        failures: dict[str, BaseException] = {}
        for job in jobs.values():
            with self._lock:
                entry = self._published.get(job.id)
            if entry is None:
                continue
            record = self.record(job, entry[1])
            try:
                self.store.job_save(
                    record,
                    now=self.clock(),
                    max_jobs=self.settings.max_kernel_jobs,
                    max_bytes=self.settings.max_kernel_result_bytes,
                )
                self.stats["written"] += 1
            except Exception as e:  # noqa: BLE001 - the writer outlives any one write; the publisher gets it
                failures[job.id] = e
                self.stats["failed_writes"] += 1
                log.warning("kernel job %s: cannot write its state: %s", job.id, e)
                continue
            if record.state in JOB_FINAL:
                with self._lock:
                    self._published.pop(job.id, None)
        for job in results.values():
            try:
                self.store.result_save(
                    self.digest(job.key),
                    job.result,
                    orjson.dumps(job.failure.to_dict()).decode() if job.failure is not None else None,
                    now=self.clock(),
                    max_entries=self.settings.max_kernel_cache_entries,
                    max_bytes=self.settings.max_kernel_result_bytes,
                )
                self.stats["results"] += 1
            except Exception as e:  # noqa: BLE001 - a cache: the run was answered all the same
                self.stats["failed_writes"] += 1
                log.warning("cannot share a kernel result: %s", e)
        for job_id, done in waiting:
            failure = failures.get(job_id)
            if failure is not None:
                done.set_exception(failure)
            else:
                done.set_result(None)
