"""Searches whose candidates the replicas compile: :class:`SearchBoard`, one per app (``app.state.searches``).

``shardscope search FILE.py:FN --server URL`` (:mod:`sharding_core.searching.remote`) does what needs the model
where the user is — probe it, enumerate and estimate the space — and sends the search to a team's server: the
model's code and each candidate to compile, in estimate order (``POST /api/searches``). The candidates are rows of
the store (``search_jobs``, schema 6), so every replica sharing the store takes them: each of its
``max_search_workers`` slots claims the first queued candidate (a conditional update: one replica gets it), compiles
it in a search worker process (:mod:`sharding_core.searching.worker`: the same process, limits and figures as a
local search's) and stores what it gave. The client polls ``GET /api/searches/{id}``, ranks what came back and plans
the pick, exactly as a local search does: the replicas only share the compiling, which is the search's time.

**Leases.** A slot beats for the candidate it compiles every :data:`BEAT_S`; a candidate whose replica went silent
for ``max_kernel_job_silence_seconds`` (killed, its machine lost) is queued again by whichever replica sweeps first
(every :data:`SWEEP_S`), and compiled by another. A search whose client stopped polling (``SEARCH_ABANDONED_S``)
is not compiled further. **Budget.** A candidate is claimed only before the search's deadline, and started only
when the search's typical compile so far still ends before it; a compile running at the deadline is stopped.

The code runs on this server: ``max_search_workers`` is 0 by default, and ``POST /api/searches`` is then 403.
"""

from __future__ import annotations

import logging
import re
import secrets
import shutil
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Final

import orjson

from server.settings import Settings
from server.store import SearchClaim, Store
from sharding_core.searching.compiling import Job
from sharding_core.searching.pool import Limits, _wait, _Worker, not_compiled

BEAT_S: Final = 1.0
SWEEP_S: Final = 2.0
IDLE_S: Final = 0.5
"""How often an idle slot looks for a queued candidate (a new search wakes this replica's at once)."""
RESTART: Final = ("timeout", "too_large", "budget", "worker_crashed")
"""What a compile ended in that leaves its worker process unfit for the next (it is stopped)."""
FILE_RE: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,62}\.py")

log = logging.getLogger("shardscope.searches")


class _Deadline:
    """A search's clock as :func:`sharding_core.searching.pool._wait` asks it (monotonic), from the stored wall-clock
    deadline and the typical compile of the search so far."""

    def __init__(self, deadline: float, typical: float) -> None:
        self.end = time.monotonic() + (deadline - time.time())
        self.typical = typical

    def can_start(self) -> bool:
        return time.monotonic() + self.typical < self.end

    def deadline(self) -> float:
        return self.end


class SearchBoard:
    """This replica's search slots (see the module docstring). ``owner``: this replica's id (random per start)."""

    def __init__(self, store: Store, settings: Settings, *, owner: str | None = None) -> None:
        self.store = store
        self.settings = settings
        self.owner = owner or secrets.token_urlsafe(12)
        self.limits = Limits(1, settings.max_search_memory, Limits.seconds)
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._threads: list[threading.Thread] = []
        self._dir: Path | None = None
        self.compiled = 0  # candidates this replica answered (its share of the searches)

    @property
    def enabled(self) -> bool:
        return self.settings.max_search_workers > 0

    def start(self) -> None:
        if not self.enabled or self._threads:
            return
        self._stop.clear()
        self._dir = Path(tempfile.mkdtemp(prefix="shardscope-searches-"))
        for n in range(self.settings.max_search_workers):
            self._threads.append(threading.Thread(target=self._slot, name=f"shardscope-search-{n}", daemon=True))
        self._threads.append(threading.Thread(target=self._beat, name="shardscope-search-beat", daemon=True))
        for t in self._threads:
            t.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        for t in self._threads:
            t.join(15)
        self._threads = []
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    def wake(self) -> None:
        """A search was stored: this replica's idle slots look now."""
        self._wake.set()

    # ---- the threads -------------------------------------------------------------------------------------------

    def _beat(self) -> None:
        swept = 0.0
        while not self._stop.wait(BEAT_S):
            now = time.time()
            try:
                self.store.search_beat(self.owner, now)
                if now - swept >= SWEEP_S:
                    swept = now
                    back = self.store.search_requeue(now, self.settings.max_kernel_job_silence_seconds, by=self.owner)
                    if back:
                        log.warning("queued again %d search candidate(s) whose replica went silent", back)
                        self._wake.set()
            except Exception as e:  # noqa: BLE001 - the store away: beat again next time
                log.debug("search beat: %s", e)

    def _slot(self) -> None:
        worker: _Worker | None = None
        search: str | None = None
        try:
            while not self._stop.is_set():
                try:
                    claim = self.store.search_claim(self.owner, time.time())
                except Exception as e:  # noqa: BLE001 - the store away: look again
                    log.debug("search claim: %s", e)
                    claim = None
                if claim is None:  # the worker is kept for its search's next candidate (another search replaces it)
                    self._wake.wait(IDLE_S)
                    self._wake.clear()
                    continue
                if worker is not None and (claim.search != search or worker.proc.poll() is not None):
                    worker.stop()
                    worker = None
                if worker is None:
                    worker = _Worker((str(self._code_file(claim)), claim.function))
                    search = claim.search
                result = self._compile(worker, claim)
                if not result.get("compiled") and (result.get("error") or {}).get("code") in RESTART:
                    worker.stop()
                    worker = None
                self._answer(claim, result)
        finally:
            if worker is not None:
                worker.stop()

    def _code_file(self, claim: SearchClaim) -> Path:
        assert self._dir is not None
        folder = self._dir / claim.search
        folder.mkdir(exist_ok=True)
        path = folder / (claim.file if FILE_RE.fullmatch(claim.file) else "model.py")
        if not path.exists():
            path.write_bytes(claim.code)
        return path

    def _compile(self, worker: _Worker, claim: SearchClaim) -> dict[str, Any]:
        try:
            job = Job.from_json(orjson.loads(claim.job))
        except (ValueError, KeyError, TypeError) as e:
            return not_compiled("bad_candidate", f"the stored candidate is not one: {e}")
        seconds = self.store.search_typical(claim.search)
        clock = _Deadline(claim.deadline, statistics.median(seconds) if seconds else 0.0)
        if not clock.can_start():
            return not_compiled("budget", "not compiled: the search's time budget ran out first")
        return _wait(worker, job, clock, self.limits)

    def _answer(self, claim: SearchClaim, result: dict[str, Any]) -> None:
        result["replica"] = self.owner
        payload = orjson.dumps(result)
        attempt = 0
        while True:  # the store away: this slot waits (it could claim nothing meanwhile); stopped, the lease lapses
            try:
                self.store.search_answer(
                    claim.search, claim.candidate, self.owner, payload, result.get("compile_seconds")
                )
                self.compiled += 1
                return
            except Exception as e:  # noqa: BLE001
                attempt += 1
                log.debug("search answer (attempt %d): %s", attempt, e)
                if self._stop.wait(1.0):
                    return
