"""The store's interface, and everything its two implementations share: share links, snapshots and runs as
immutable JSON payloads under unguessable ids, inside a byte budget, kept for a bounded number of days; and
the kernel jobs and results that replicas of one server share.

:class:`Store` holds the logic once, in SQL both databases run (``?`` placeholders; the PostgreSQL side turns
them into psycopg's): ids, the byte budget, runs and their keys, expiry, an operator's deletions, kernel jobs.
An implementation supplies connections and transactions, streaming reads and the translation of its driver's
errors: :class:`server.store.sqlite.SqliteStore` (one file, the embedded default) and
:class:`server.store.postgres.PostgresStore` (one database that any number of replicas share).
:func:`server.store.open_store` picks one by the ``--db`` value.

**Bounded.** Every record counts its payload plus :data:`RECORD_OVERHEAD` bytes, and a running total of those
is kept in the ``meta`` table, updated in the same transaction as each insert and delete (no scan per write).
A write that would take the total past ``max_bytes`` is refused with 507 ``insufficient_storage`` naming the
setting; nothing already stored is dropped to make room. Every write transaction holds the total's row
until it commits (SQLite's ``BEGIN IMMEDIATE``; PostgreSQL's row lock, :meth:`Store._lock_total` before a
write reads what it changes), so writes are serial across every process that shares the store and the budget
holds across replicas. Records older than their table's
``max_days`` are deleted at start-up and then at most hourly (on the next write), which frees their bytes.

**Runs.** A multi-process run is written with its *secret* (the ``run_id`` its processes share) and read with
its *read id*, an HMAC of the secret under a key kept in the database (:meth:`Store.run_read_id`), so every
replica derives the same read id. Share links and the merged view carry the read id only, so reading a run
never gives the means to write to it. ``run_keys`` holds, per run, what every part must agree on (the process
count, each leaf's spec/shape/dtype, each device's process): a new part is checked against it in the
transaction that stores the part.

**Kernel jobs** (schema 4). A job's state, result or failure is a ``kernel_jobs`` row written by the replica
that runs it (its *owner*), which also beats for its unfinished jobs; any replica reads it, and a job whose
owner stopped beating is marked failed by whichever replica looks first (:meth:`Store.jobs_lost`). Results the
worker pool caches are shared in ``kernel_results``. Both are caches of work, not users' records: outside the
byte budget, bounded by their own limits (oldest first), written without waiting for the disk.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import logging
import math
import re
import secrets
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any, Final, NamedTuple, Protocol

import orjson

from server.errors import ApiError
from server.store.checks import RECORD_OVERHEAD, damaged, digest, payload_problem, size_problem
from sharding_core.errors import ShardingError
from sharding_core.snapshot.format import ID_PATTERN

ID_BYTES: Final = 16  # 128 bits, the contract's minimum
_ID_RE: Final = re.compile(ID_PATTERN)  # token_urlsafe(16) is 22 characters; up to 64 for longer ids later
TABLES: Final = ("links", "snapshots")
SCHEMA_VERSION: Final = 6
"""1 links; 2 snapshots and runs; 3 record sizes, the byte total, retention indexes, run read ids and run keys;
4 kernel jobs and shared kernel results; 5 each link's and snapshot's digest (server.store.checks); 6 searches and
their candidates' compile jobs (server.services.searches)."""

MAX_STORE_BYTES: Final = 1024**3
"""The default byte budget (setting ``max_store_bytes``): 1 GiB, about 16 of the largest snapshots
or 4 million typical share links."""
MAX_LINK_DAYS: Final = 365
MAX_SNAPSHOT_DAYS: Final = 90
MAX_DB_CONNECTIONS: Final = 10
"""The default of setting ``max_db_connections``: connections one replica's PostgreSQL pool holds at most."""
MAX_DB_WAIT_MS: Final = 2000
"""The default of setting ``max_db_wait_ms``: the longest a request waits on the store before its 503."""
MAX_DB_STATEMENT_MS: Final = 30_000
"""The default of setting ``max_db_statement_ms``: the longest one PostgreSQL statement may run."""
MAX_STORE_QUEUE_MS: Final = 10_000
"""The default of setting ``max_store_queue_ms``: the longest a request waits for its turn (this server's one writer
at a time, a turn among ``max_store_requests``) before its 503."""
WATCH_UP_S: Final = 2.0
"""How often the store's watch looks at a store that answers (is it there, is its schema whole)."""
WATCH_DOWN_S: Final = 0.5
"""How often it looks again at one that does not answer (requests meanwhile get 503 at once)."""
KEY_OVERHEAD: Final = 64
"""Bytes counted per run key (``run_keys`` row) on top of its key and value text."""
EXPIRE_EVERY_SECONDS: Final = 3600.0
DAY: Final = 86400.0

INSUFFICIENT_STORAGE: Final = "insufficient_storage"
STORE_UNAVAILABLE: Final = "store_unavailable"
STORE_CORRUPT: Final = "store_corrupt"
STATES: Final = ("ok", "read_only", "corrupt", "unavailable")
"""What ``GET /api/health`` says of the store (:attr:`Store.state`)."""
JOB_FINAL: Final = ("done", "error")
"""A kernel job's states after which nothing changes it."""
JOB_STATES: Final = ("queued", "compiling", "running", *JOB_FINAL)
SEARCH_JOB_STATES: Final = ("queued", "compiling", "done")
"""A search candidate's compile job: waiting, claimed by a replica (its lease: ``beat``), answered."""
"""Every state a stored kernel job may be in (a row in another is damaged)."""
LOST: Final = '"lost":true'
"""What the failure of a job marked failed for its owner's silence holds (its owner may still overwrite it)."""
SEARCH_ABANDONED_S: Final = 120.0
"""A search whose client has not polled it for this long is abandoned: its queued candidates are not compiled, and
it is deleted when the next search is stored."""

log = logging.getLogger("shardscope.store")


def schema_5(blob: str) -> list[str]:
    """What schema 5 adds: each link's and snapshot's digest (NULL for records stored before)."""
    return [f"ALTER TABLE {t} ADD COLUMN digest {blob}" for t in TABLES]


def schema_6(blob: str, real: str, integer: str) -> list[str]:
    """What schema 6 adds: searches whose candidates the replicas compile (:class:`server.services.searches.
    SearchBoard`), and each candidate's compile job."""
    return [
        f"CREATE TABLE searches (id TEXT PRIMARY KEY, code {blob} NOT NULL, function TEXT NOT NULL, "
        f"file TEXT NOT NULL, devices TEXT NOT NULL, created {real} NOT NULL, deadline {real} NOT NULL, "
        f"polled {real} NOT NULL, size {integer} NOT NULL)",
        f"CREATE TABLE search_jobs (search TEXT NOT NULL, idx {integer} NOT NULL, position {integer} NOT NULL, "
        f"job {blob} NOT NULL, state TEXT NOT NULL, owner TEXT, beat {real} NOT NULL, seconds {real}, "
        f"result {blob}, PRIMARY KEY (search, idx))",
        "CREATE INDEX search_jobs_queue ON search_jobs (state, search, position)",
    ]


def recount_sql() -> str:
    """The byte total as the records count it (what ``meta.bytes`` keeps, recomputed)."""
    sums = (f"(SELECT coalesce(sum(size), 0) FROM {t})" for t in (*TABLES, "run_keys"))  # noqa: S608 - constants
    return "SELECT " + " + ".join(sums)


def schema_4(blob: str, real: str, integer: str) -> list[str]:
    """The tables schema 4 adds, with the column types each database spells its own way."""
    return [
        f"CREATE TABLE kernel_jobs (id TEXT PRIMARY KEY, owner TEXT NOT NULL, kernel TEXT NOT NULL, "
        f"state TEXT NOT NULL, created {real} NOT NULL, beat {real} NOT NULL, finished {real}, "
        f"peak_memory {integer}, result {blob}, failure TEXT, size {integer} NOT NULL)",
        "CREATE INDEX kernel_jobs_queue ON kernel_jobs (owner, state, created)",
        "CREATE INDEX kernel_jobs_beat ON kernel_jobs (state, beat)",
        f"CREATE TABLE kernel_results (key TEXT PRIMARY KEY, result {blob}, failure TEXT, created {real} NOT NULL, "
        f"size {integer} NOT NULL)",
    ]


def is_valid_id(text: str) -> bool:
    return _ID_RE.fullmatch(text) is not None


class Cursor(Protocol):
    """What a statement gives back (``sqlite3.Cursor``, ``psycopg.Cursor``)."""

    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...

    def __iter__(self) -> Iterator[Any]: ...


class Conn(Protocol):
    """A connection inside one transaction, taking SQL with ``?`` placeholders."""

    def execute(self, sql: str, args: Sequence[Any] = (), /) -> Cursor: ...

    def executemany(self, sql: str, args: Iterable[Sequence[Any]], /) -> Any: ...


class StoreClosed(RuntimeError):
    pass


class StoreUnavailable(ShardingError):
    """The store cannot be opened: the message is one line naming the store and what to do."""

    def __init__(self, message: str) -> None:
        super().__init__(STORE_UNAVAILABLE, message)


class Blob:
    """One stored payload, read piece by piece: ``length``, :meth:`seek`, :meth:`read`, :meth:`close`
    (idempotent). Each implementation reads its own way; none holds the whole payload."""

    length: int
    digest: bytes | None = None  # the SHA-256 it was stored with (None: stored before schema 5)

    def seek(self, offset: int) -> None:
        raise NotImplementedError

    def read(self, size: int) -> bytes:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError


class RunPart(NamedTuple):
    snapshot_id: str
    link_id: str | None


class Pruned(NamedTuple):
    """What an operator's deletion took: records (links and snapshots, run parts included) and bytes freed."""

    records: int
    bytes: int


class JobRecord(NamedTuple):
    """A kernel job as the store holds it (times are seconds since the epoch)."""

    id: str
    owner: str
    kernel: str
    state: str
    created: float
    beat: float = 0.0  # the owner's last heartbeat (read back only; a write's own time is its beat)
    finished: float | None = None
    peak_memory: int | None = None
    result: bytes | None = None  # the run's response once done
    failure: str | None = None  # the error as JSON once failed
    ahead: int | None = None  # queued jobs of the same owner created before it (read back only)


def _clip(text: str, limit: int = 200) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _check_table(table: str) -> None:
    if table not in TABLES:
        raise ValueError(f"unknown table {table!r}; tables are {TABLES}")


class SearchClaim(NamedTuple):
    """A search candidate's compile job one replica claimed: what its worker needs."""

    search: str
    candidate: int
    job: bytes
    code: bytes
    function: str
    file: str
    deadline: float


class SearchRow(NamedTuple):
    """A search as stored: its device set, deadline, and each candidate's ``(index, state, owner, seconds,
    result)``."""

    id: str
    devices: str
    created: float
    deadline: float
    jobs: list[tuple[int, str, str | None, float | None, bytes | None]]


class SearchStore:
    """The store's searches (schema 6), mixed into :class:`Store`: the candidates' compile jobs that any replica
    running searches claims (a lease it beats), answers, or gives back when its replica goes silent."""

    def search_create(
        self: Any, search_id: str, *, code: bytes, function: str, file: str, devices: str,
        jobs: Sequence[tuple[int, bytes]],
        now: float, deadline: float, max_searches: int,
    ) -> bool:  # fmt: skip
        """Stores a search and its candidates' jobs (``(candidate index, job)``, queued in ``jobs``' order); False
        when ``max_searches`` searches are stored already (those abandoned by their client for
        :data:`SEARCH_ABANDONED_S` are deleted first)."""
        size = len(code) + sum(len(j) for _, j in jobs)

        def write(conn: Conn) -> bool:
            gone = [r[0] for r in conn.execute("SELECT id FROM searches WHERE polled < ?", (now - SEARCH_ABANDONED_S,))]
            for old in gone:
                conn.execute("DELETE FROM search_jobs WHERE search = ?", (old,))
                conn.execute("DELETE FROM searches WHERE id = ?", (old,))
            if int(conn.execute("SELECT count(*) FROM searches").fetchone()[0]) >= max_searches:
                return False
            conn.execute(
                "INSERT INTO searches (id, code, function, file, devices, created, deadline, polled, size) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (search_id, code, function, file, devices, now, deadline, now, size),
            )
            conn.executemany(
                "INSERT INTO search_jobs (search, idx, position, job, state, owner, beat) "
                "VALUES (?, ?, ?, ?, 'queued', NULL, ?)",
                [(search_id, index, position, job, now) for position, (index, job) in enumerate(jobs)],
            )
            return True

        return bool(self._job_write(write))

    def search_claim(self: Any, owner: str, now: float) -> SearchClaim | None:
        """Claims the first queued candidate of the oldest search whose client still polls and whose deadline is
        ahead (the claim is a conditional update: of two replicas, one gets it); None when there is none."""

        def write(conn: Conn) -> SearchClaim | None:
            for _ in range(8):
                row = conn.execute(
                    "SELECT j.search, j.idx, j.job, s.code, s.function, s.file, s.deadline FROM search_jobs j "
                    "JOIN searches s ON s.id = j.search WHERE j.state = 'queued' AND s.polled >= ? AND s.deadline > ? "
                    "ORDER BY s.created, j.search, j.position LIMIT 1",
                    (now - SEARCH_ABANDONED_S, now),
                ).fetchone()
                if row is None:
                    return None
                taken = conn.execute(
                    "UPDATE search_jobs SET state = 'compiling', owner = ?, beat = ? "
                    "WHERE search = ? AND idx = ? AND state = 'queued'",
                    (owner, now, row[0], row[1]),
                ).rowcount
                if taken == 1:
                    return SearchClaim(str(row[0]), int(row[1]), bytes(row[2]), bytes(row[3]), str(row[4]),
                                       str(row[5]), float(row[6]))  # fmt: skip
            return None

        return self._job_write(write)  # type: ignore[no-any-return]

    def search_answer(self: Any, search: str, index: int, owner: str, result: bytes, seconds: float | None) -> bool:
        """Stores what a claimed candidate's compile gave; False when the claim was lost (given back for the
        owner's silence and answered by another replica: the first answer stays)."""

        def write(conn: Conn) -> bool:
            return bool(
                conn.execute(
                    "UPDATE search_jobs SET state = 'done', result = ?, seconds = ?, owner = ? "
                    "WHERE search = ? AND idx = ? AND state <> 'done'",
                    (result, seconds, owner, search, index),
                ).rowcount
            )

        return bool(self._job_write(write))

    def search_beat(self: Any, owner: str, now: float) -> int:
        """The owner's heartbeat for the candidates it compiles; how many it has."""
        return int(
            self._job_write(
                lambda conn: (
                    conn.execute(
                        "UPDATE search_jobs SET beat = ? WHERE owner = ? AND state = 'compiling'", (now, owner)
                    ).rowcount
                )
            )
        )

    def search_requeue(self: Any, now: float, silence: float, *, by: str = "") -> int:
        """Gives back (queued again, for any replica) every candidate whose compiling replica has not beaten for
        ``silence`` seconds (it stopped); ``by``'s own are never among them. How many."""
        return int(
            self._job_write(
                lambda conn: (
                    conn.execute(
                        "UPDATE search_jobs SET state = 'queued', owner = NULL WHERE state = 'compiling' AND beat < ? "
                        "AND owner <> ?",
                        (now - silence, by),
                    ).rowcount
                )
            )
        )

    def search_typical(self: Any, search: str) -> list[float]:
        """The compile seconds of a search's answered candidates (a replica's clock: will one more end in time)."""
        rows = self._read("SELECT seconds FROM search_jobs WHERE search = ? AND seconds IS NOT NULL", (search,))
        return [float(r[0]) for r in rows]

    def search(self: Any, search_id: str, now: float) -> SearchRow | None:
        """A search and its candidates as stored (the read is its client's poll: the search stays alive)."""
        if not is_valid_id(search_id):
            return None

        def write(conn: Conn) -> SearchRow | None:
            head = conn.execute("SELECT devices, created, deadline FROM searches WHERE id = ?", (search_id,)).fetchone()
            if head is None:
                return None
            conn.execute("UPDATE searches SET polled = ? WHERE id = ?", (now, search_id))
            jobs = [
                (int(i), str(state), None if owner is None else str(owner), None if sec is None else float(sec),
                 None if result is None else bytes(result))
                for i, state, owner, sec, result in conn.execute(
                    "SELECT idx, state, owner, seconds, result FROM search_jobs WHERE search = ? ORDER BY idx",
                    (search_id,),
                )
            ]  # fmt: skip
            return SearchRow(search_id, str(head[0]), float(head[1]), float(head[2]), jobs)

        return self._job_write(write)  # type: ignore[no-any-return]

    def search_delete(self: Any, search_id: str) -> int:
        """Deletes a search and its candidates (its client has read them all, or gave up); how many searches (0, 1)."""

        def write(conn: Conn) -> int:
            conn.execute("DELETE FROM search_jobs WHERE search = ?", (search_id,))
            return int(conn.execute("DELETE FROM searches WHERE id = ?", (search_id,)).rowcount)

        return int(self._job_write(write))


class Store(SearchStore):
    """The record store: ``put(table, payload) -> id``, ``get(table, id) -> payload | None``, runs,
    expiry and the byte budget, kernel jobs and shared results; ``close()``.

    ``max_bytes``: the budget (None: none, for tools that only read). ``max_days``: per table, days a
    record is kept (0: forever; tables left out keep the defaults). ``clock``: seconds since the epoch
    (tests move it). ``where``: what messages name (a path, or a URL without its password).
    """

    where: str = ""
    kind: str = ""
    durable_note: str = ""
    _errors: tuple[type[BaseException], ...] = ()
    """The driver's errors, which :meth:`_write_error` translates."""
    _integrity: tuple[type[BaseException], ...] = ()
    """The driver's unique-key violation: an id drawn twice, or a run part written by two processes at once."""

    def __init__(
        self,
        *,
        max_bytes: int | None = MAX_STORE_BYTES,
        max_days: Mapping[str, float] | None = None,
        clock: Callable[[], float] = time.time,
        wait_ms: int = MAX_DB_WAIT_MS,
        statement_ms: int = MAX_DB_STATEMENT_MS,
        queue_ms: int = MAX_STORE_QUEUE_MS,
    ) -> None:
        self.max_bytes = max_bytes
        self.max_days: dict[str, float] = {"links": MAX_LINK_DAYS, "snapshots": MAX_SNAPSHOT_DAYS}
        for table, days in (max_days or {}).items():
            _check_table(table)
            self.max_days[table] = days
        self.clock = clock
        self.wait_s = wait_ms / 1000  # the longest a request waits on the store (setting max_db_wait_ms)
        self.statement_ms = statement_ms
        self.queue_s = queue_ms / 1000  # the longest a write waits for this process's writer (max_store_queue_ms)
        self._lock = threading.Lock()
        self._run_key = b""
        self._expired_at = float("-inf")
        self.deletions = 0  # bumped whenever this process deletes records: caches of what was read key on it
        self._corrupt: str | None = None  # what the database said when it found its data damaged after start
        self._write_failed: str | None = None  # the last write's refusal (read-only, I/O error), until one succeeds
        self._down: str | None = None  # why the store does not answer now (requests get 503 at once), until it does
        self._down_since = 0.0
        self._recounted = False  # the write in progress recounted the byte total (under the writer lock)
        self._watch_stop = threading.Event()
        self._watch_wake = threading.Event()  # set to have the watch look now (a connection just failed its check)
        self._watch_thread: threading.Thread | None = None

    @property
    def retry_after(self) -> int:
        """Seconds a client is told to wait before trying again while the store does not answer."""
        return max(1, math.ceil(self.wait_s))

    def kept_days(self, table: str) -> float | None:
        """Days the store keeps a record of ``table`` (None: until deleted)."""
        days = self.max_days.get(table)
        return days if days is not None and days > 0 else None

    # ---- what an implementation supplies ---------------------------------------------------------------

    def open(self) -> None:
        """Opens the store (done by the constructor); reopens a closed one. Idempotent. Raises
        :class:`StoreUnavailable`, one line naming the store and what to do, when it cannot be used."""
        raise NotImplementedError

    def close(self) -> None:
        """Closes every connection; safe to call more than once."""
        raise NotImplementedError

    @property
    def closed(self) -> bool:
        raise NotImplementedError

    def _write_tx(self) -> AbstractContextManager[Conn]:
        """One write transaction holding the byte total's row (called under ``_lock``): committed, durably,
        when the block ends; rolled back if it raises."""
        raise NotImplementedError

    def _job_tx(self) -> AbstractContextManager[Conn]:
        """One transaction of kernel-job bookkeeping: committed without waiting for the disk (a job's state is
        worth nothing once its replica is gone), and without the byte total's row."""
        raise NotImplementedError

    def _read(self, sql: str, args: Sequence[Any]) -> list[Any]:
        """The rows of one read-only statement."""
        raise NotImplementedError

    def open_blob(self, table: str, record_id: str) -> Blob | None:
        """The payload stored under ``record_id`` to read piece by piece, or None."""
        raise NotImplementedError

    def _write_error(self, error: BaseException) -> BaseException:
        """The driver's error as the ApiError a client gets (507 full, 503 unavailable or corrupt), or itself."""
        return error

    def _probe(self) -> str | None:
        """One look at the store for its watch: raises the driver's error when it does not answer; else what is
        missing from its schema (:func:`server.store.checks.schema_problem`), or None."""
        return None

    def _down_reason(self, error: BaseException) -> str | None:
        """Why ``error`` means the store does not answer at all (no server, no connection), in words for
        ``/api/health`` (no address: the log has it); None for any other error."""
        return None

    @property
    def state(self) -> str:
        """``corrupt`` once the database found its data damaged (or a table missing), ``unavailable`` while it does
        not answer, ``read_only`` when the last write was refused, else ``ok``."""
        if self._corrupt is not None:
            return "corrupt"
        if self._down is not None:
            return "unavailable"
        if self._write_failed is not None:
            return "read_only"
        return "ok"

    @property
    def problem(self) -> str | None:
        """What is wrong with the store, in a few words (no address, no password): what ``/api/health`` says
        beside :attr:`state`; None when it is ``ok``."""
        if self._corrupt is not None:
            return _clip(self._corrupt, 160)
        if self._down is not None:
            return f"{self._down} (for {max(0.0, time.monotonic() - self._down_since):.0f} s)"
        if self._write_failed is not None:
            return "the last write was refused"
        return None

    # ---- the watch: is the store there, and whole ----------------------------------------------------------

    def start_watch(self) -> None:
        """Starts the thread that looks at the store every :data:`WATCH_UP_S` (every :data:`WATCH_DOWN_S` while it
        does not answer), so ``/api/health`` says what is wrong without waiting on it, and requests get their 503
        at once while it is down rather than each waiting ``max_db_wait_ms``. Idempotent; :meth:`close` stops it."""
        if self._watch_thread is not None and self._watch_thread.is_alive():
            return
        self._watch_stop.clear()
        self._watch_wake.clear()
        self._watch_thread = threading.Thread(target=self._watch, name="shardscope-store-watch", daemon=True)
        self._watch_thread.start()

    def stop_watch(self) -> None:
        thread, self._watch_thread = self._watch_thread, None
        self._watch_stop.set()
        self._watch_wake.set()
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=self.wait_s + 5)

    def wake_watch(self) -> None:
        """Has the watch look now rather than at its next turn (a connection was just found broken)."""
        self._watch_wake.set()

    def _watch(self) -> None:
        while not self._watch_stop.is_set():
            self._watch_wake.wait(WATCH_DOWN_S if self._down is not None else WATCH_UP_S)
            self._watch_wake.clear()
            if self._watch_stop.is_set():
                break
            self.look()

    def look(self) -> None:
        """One look (the watch's): marks the store down, back, or its schema broken."""
        try:
            problem = self._probe()
        except Exception as e:  # noqa: BLE001 - whatever the driver says, the watch goes on
            reason = self._down_reason(e)
            if reason is not None:
                self.mark_down(reason, e)
            else:  # it answered, with an error (busy, a timeout): not an outage, so nothing is refused for it
                log.warning("%s: the store's watch could not look at it: %s", self.where, _clip(str(e)))
            return
        if problem is not None:
            self._found_corrupt(RuntimeError(f"{problem}: restore the store from a backup"))
        self.mark_up()

    def mark_down(self, reason: str, error: BaseException | None = None) -> None:
        """The store does not answer: requests get 503 ``store_unavailable`` at once until the watch finds it back."""
        if self._down is None:
            self._down_since = time.monotonic()
            log.error("%s does not answer (%s): requests get 503 until it does", self.where, error or reason)
        self._down = reason
        self.start_watch()

    def mark_up(self) -> None:
        if self._down is not None:
            log.warning("%s answers again after %.1f s", self.where, time.monotonic() - self._down_since)
            self._down = None

    def _check_up(self) -> None:
        """503 at once while the store is known not to answer."""
        error = self.down_error()
        if error is not None:
            raise error

    def down_error(self) -> ApiError | None:
        """The 503 a request that needs the store gets while it is known not to answer; None while it answers."""
        down = self._down
        return None if down is None else self._unavailable_error(f"this server's store does not answer ({down})")

    def _unavailable_error(self, message: str) -> ApiError:
        seconds = self.retry_after
        return ApiError(
            503,
            STORE_UNAVAILABLE,
            message,
            hint=f"try again in {seconds} s; the server's log names the store",
            headers={"Retry-After": str(seconds)},
            retry_after=seconds,
        )

    @contextmanager
    def _writer(self) -> Iterator[None]:
        """This process's one writer at a time, waited for at most ``max_store_queue_ms`` (then 503 with
        Retry-After: the store is too busy to take the write in time). It is a queue, not a wait on the database:
        while the store is down each write before it fails at once, so the queue empties in milliseconds."""
        if not self._lock.acquire(timeout=self.queue_s):
            raise self._unavailable_error(
                f"this server's store did not take the write within {self.queue_s * 1000:.0f} ms (setting "
                "max_store_queue_ms): the writes before it still hold it; nothing was stored"
            )
        try:
            yield
        finally:
            self._lock.release()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- errors both implementations give ---------------------------------------------------------------

    def _disk_full(self, error: BaseException) -> ApiError:
        log.error("%s: the disk is full (%s); writes get 507 until space is freed", self.where, error)
        return ApiError(
            507,
            INSUFFICIENT_STORAGE,
            "the disk holding this server's store is full: nothing was stored",
            hint="try again later; the server's operator can free disk space or move --db to a larger disk",
        )

    def _cannot_write(self, error: BaseException) -> ApiError:
        log.error("%s: cannot write (%s)", self.where, error)
        self._write_failed = str(error)
        return self._unavailable_error(
            f"this server's store cannot be written right now ({_clip(str(error))}): nothing was stored"
        )

    def _found_corrupt(self, error: BaseException) -> ApiError:
        """The database found its data damaged after start: from now on nothing more is written (damage can lose
        what a later write puts beside it), and every request that meets the damage gets 503."""
        if self._corrupt is None:
            self._corrupt = str(error)
            log.error(
                "%s is damaged (%s): the server takes no more writes; stop it, then restore the store from a "
                "backup or recover it",
                self.where,
                error,
            )
        return self._corrupt_error(str(error))

    def _corrupt_error(self, text: str) -> ApiError:
        return ApiError(
            503,
            STORE_CORRUPT,
            f"this server's store is damaged ({_clip(text)}): it answers what it can still read and stores nothing "
            "more",
            hint="tell the server's operator: the log names the store, and restoring it from a backup fixes this",
        )

    # ---- writes --------------------------------------------------------------------------------------

    @contextmanager
    def _transaction(self) -> Iterator[Conn]:
        """One write transaction under the lock: committed (and durable) when the block ends, rolled back if it
        raises. A full disk becomes 507 and an unwritable store 503; nothing is half-stored."""
        self._check_up()
        with self._writer():
            self._check_up()  # it may have gone down while this write waited for its turn
            if self._corrupt is not None:
                raise self._corrupt_error(self._corrupt)  # nothing more is acknowledged on a damaged store
            try:
                now = self.clock()
                if now - self._expired_at >= EXPIRE_EVERY_SECONDS:
                    with self._write_tx() as conn:
                        deleted, freed = self._expire_in(conn, now)
                    self._expired(deleted, freed)
                self._recounted = False
                try:
                    with self._write_tx() as conn:
                        yield conn
                except BaseException:
                    if self._recounted:  # the write was refused, and the total it mended rolled back with it
                        with contextlib.suppress(Exception):
                            self._total_mended()
                    raise
                self._write_failed = None
            except self._errors as e:
                translated = self._write_error(e)
                if translated is e:
                    raise
                raise translated from e

    def _lock_total(self, conn: Conn) -> None:
        """Takes the byte total's row before a write transaction reads what it then changes (SQLite's ``BEGIN
        IMMEDIATE`` already has: a no-op there). A write that only adds takes it in :meth:`_reserve`."""

    def _reserve(self, conn: Conn, size: int) -> None:
        """Counts ``size`` more bytes, or refuses with 507 if that passes the budget (in the transaction, which
        holds the total's row from then on). A total that cannot be right (below zero) is counted again first."""
        used = int(conn.execute("SELECT value FROM meta WHERE key = 'bytes'").fetchone()[0])
        if used < 0:
            used = self._recount(conn, used)
        if self.max_bytes is not None and used + size > self.max_bytes:
            raise self._full(used, size)
        conn.execute("UPDATE meta SET value = value + ? WHERE key = 'bytes'", (size,))

    def _total_mended(self) -> None:
        """After a write that recounted the total was refused (its transaction, and so the recount, rolled back):
        the recount again, in a transaction of its own."""
        with self._write_tx() as conn:
            self._lock_total(conn)
            (was,) = conn.execute("SELECT value FROM meta WHERE key = 'bytes'").fetchone()
            self._recount(conn, int(was))

    def _recount(self, conn: Conn, was: int) -> int:
        """Sets the byte total to what the records count (in the open transaction, holding its row) and returns
        it: done when the total cannot be right, and at start when it differs (someone changed the tables by
        hand, or a bug): writes then cannot pass the budget on a wrong total."""
        (counted,) = conn.execute(recount_sql()).fetchone()
        counted = int(counted)
        self._recounted = True
        if counted != was:
            log.error("%s: the byte total was %d where the records count %d: set to %d", self.where, was, counted,
                      counted)  # fmt: skip
            conn.execute("UPDATE meta SET value = ? WHERE key = 'bytes'", (counted,))
        return counted

    def check_total(self) -> int:
        """Counts the byte total again (at start): what it is now."""
        with self._transaction() as conn:
            self._lock_total(conn)
            (was,) = conn.execute("SELECT value FROM meta WHERE key = 'bytes'").fetchone()
            return self._recount(conn, int(was))

    def _full(self, used: int, size: int) -> ApiError:
        """507: ``size`` more bytes would take the total, ``used``, past the budget."""
        assert self.max_bytes is not None
        return ApiError(
            507,
            INSUFFICIENT_STORAGE,
            f"this server's store is full: {used} of {self.max_bytes} bytes are used and this write needs {size} "
            "(setting max_store_bytes); nothing was stored",
            hint="try again after old records expire (settings max_link_days, max_snapshot_days), or ask the "
            "server's operator to raise max_store_bytes",
            limit=self.max_bytes,
            used=used,
            needed=size,
        )

    def _insert(self, conn: Conn, table: str, record_id: str, payload: bytes, size: int, created: float) -> None:
        conn.execute(
            f"INSERT INTO {table} (id, created, payload, size, digest) VALUES (?, ?, ?, ?, ?)",  # noqa: S608
            (record_id, created, payload, size, digest(payload)),
        )

    def put(self, table: str, payload: bytes) -> str:
        """Stores ``payload`` under a new random id and returns the id once it is durable.

        Raises 507 ``insufficient_storage`` past the budget or on a full disk (nothing stored)."""
        _check_table(table)
        size = len(payload) + RECORD_OVERHEAD
        while True:
            new_id = secrets.token_urlsafe(ID_BYTES)
            try:
                with self._transaction() as conn:
                    self._reserve(conn, size)
                    self._insert(conn, table, new_id, payload, size, self.clock())
            except self._integrity:  # a 2^-128 collision: draw again rather than overwrite
                continue
            return new_id

    def put_linked(self, table: str, payload: bytes, link: Callable[[str], bytes]) -> tuple[str, str]:
        """Stores ``payload`` and a share link to it (``link(record id)`` is the link's payload) in one
        transaction: both or neither. Returns ``(record id, link id)``."""
        _check_table(table)
        while True:
            new_id, link_id = secrets.token_urlsafe(ID_BYTES), secrets.token_urlsafe(ID_BYTES)
            link_payload = link(new_id)
            size, link_size = len(payload) + RECORD_OVERHEAD, len(link_payload) + RECORD_OVERHEAD
            try:
                with self._transaction() as conn:
                    self._reserve(conn, size + link_size)
                    now = self.clock()
                    self._insert(conn, table, new_id, payload, size, now)
                    self._insert(conn, "links", link_id, link_payload, link_size, now)
            except self._integrity:
                continue
            return new_id, link_id

    # ---- runs ------------------------------------------------------------------------------------------

    def run_read_id(self, secret: str) -> str:
        """The read id of the run whose write secret is ``secret``: an HMAC of it under this store's own
        key, 128 bits, URL-safe. The same secret always gives the same read id here (in every replica), and
        the read id does not give the secret back."""
        if not self._run_key:
            raise StoreClosed(f"the store {self.where} is closed")
        digest = hmac.new(self._run_key, secret.encode(), hashlib.sha256).digest()[:ID_BYTES]
        return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()

    def run_exists(self, run: str) -> bool:
        """Whether a run with read id ``run`` has any part."""
        return bool(self.run_parts(run))

    def put_run_part(
        self,
        run: str,
        process_index: int,
        payload: bytes,
        *,
        keys: Mapping[str, str],
        check: Callable[[Mapping[str, str]], None] | None = None,
        link: bytes | None = None,
    ) -> RunPart | None:
        """Stores process ``process_index``'s snapshot of the run with read id ``run``; None if that
        process already published to the run.

        ``keys``: what every part must agree on (key -> JSON text). ``check`` gets the run's keys so
        far and raises to refuse the part; the part's keys the run does not have yet are then added.
        ``link``: a share link payload stored with the part. All of it commits as one transaction.
        """
        if not is_valid_id(run):
            raise ValueError("run read ids are 22 to 64 URL-safe characters")
        size = len(payload) + 2 * RECORD_OVERHEAD  # the snapshot and its runs row
        while True:
            new_id = secrets.token_urlsafe(ID_BYTES)
            link_id = secrets.token_urlsafe(ID_BYTES) if link is not None else None
            try:
                with self._transaction() as conn:
                    self._lock_total(conn)  # the run's parts and keys are read, then added to
                    taken = conn.execute(
                        "SELECT 1 FROM runs WHERE run = ? AND process_index = ?", (run, process_index)
                    ).fetchone()
                    if taken is not None:
                        return None
                    existing = {
                        str(k): str(v) for k, v in conn.execute("SELECT key, value FROM run_keys WHERE run = ?", (run,))
                    }
                    if check is not None:
                        check(existing)
                    new_keys = [
                        (run, k, v, len(k.encode()) + len(v.encode()) + KEY_OVERHEAD)
                        for k, v in keys.items()
                        if k not in existing
                    ]
                    link_size = len(link) + RECORD_OVERHEAD if link is not None else 0
                    self._reserve(conn, size + link_size + sum(row[3] for row in new_keys))
                    # One time for the snapshot and its runs row: they expire together.
                    now = self.clock()
                    self._insert(conn, "snapshots", new_id, payload, size, now)
                    conn.execute(
                        "INSERT INTO runs (run, process_index, snapshot_id, created) VALUES (?, ?, ?, ?)",
                        (run, process_index, new_id, now),
                    )
                    if new_keys:
                        conn.executemany("INSERT INTO run_keys (run, key, value, size) VALUES (?, ?, ?, ?)", new_keys)
                    if link is not None and link_id is not None:
                        self._insert(conn, "links", link_id, link, link_size, now)
            except self._integrity:  # an id collision, or another process's part won the race: look again
                continue
            return RunPart(new_id, link_id)

    def run_parts(self, run: str) -> list[tuple[int, str]]:
        """``(process_index, snapshot id)`` of every process that published to the run with read id
        ``run``, in order."""
        if not is_valid_id(run):
            return []
        rows = self._read("SELECT process_index, snapshot_id FROM runs WHERE run = ? ORDER BY process_index", (run,))
        return [(int(p), str(i)) for p, i in rows]

    # ---- reads ---------------------------------------------------------------------------------------

    def get(self, table: str, record_id: str) -> bytes | None:
        """The payload stored under ``record_id``, or None (also for ids that cannot exist); 500
        ``stored_record_damaged`` when it is not what was stored (its digest, or its length)."""
        _check_table(table)
        if not is_valid_id(record_id):
            return None
        rows = self._read(f"SELECT payload, size, digest FROM {table} WHERE id = ?", (record_id,))  # noqa: S608
        if not rows:
            return None
        payload, size, stored = bytes(rows[0][0]), int(rows[0][1]), rows[0][2]
        problem = payload_problem(payload, size, bytes(stored) if stored is not None else None)
        if problem is not None:
            raise damaged(table, record_id, problem)
        return payload

    def _blob_checked(self, table: str, record_id: str, length: int, size: int) -> None:
        """A payload about to be streamed whose length is not what was stored is damaged (cut short, grown)."""
        problem = size_problem(length, size)
        if problem is not None:
            raise damaged(table, record_id, problem)

    def exists(self, table: str, record_id: str) -> bool:
        """Whether ``record_id`` is stored (a point lookup; what a cache of parsed records checks, since another
        process — an operator's ``shardscope store delete``, another replica's expiry — changes nothing this
        process counts)."""
        _check_table(table)
        if not is_valid_id(record_id):
            return False
        return bool(self._read(f"SELECT 1 FROM {table} WHERE id = ?", (record_id,)))  # noqa: S608 - from TABLES

    def usage(self) -> tuple[int, int | None]:
        """``(bytes counted, budget)``: the running total, read in one lookup."""
        (used,) = self._read("SELECT value FROM meta WHERE key = 'bytes'", ())[0]
        return int(used), self.max_bytes

    # ---- an operator's deletions (`shardscope store prune|delete`) ----------------------------------------

    def prune(self, *, older_than_days: float | None = None, max_bytes: int | None = None) -> Pruned:
        """Deletes, in one transaction, every record (link, snapshot, run part) older than ``older_than_days``,
        then the oldest records until the store counts at most ``max_bytes``. A run keeps the parts that
        stay; one left without parts loses its keys. Links to what went then open "no such snapshot"."""
        with self._transaction() as conn:
            self._lock_total(conn)
            doomed: list[tuple[str, str, int]] = []  # (table, id, size)
            if older_than_days is not None:
                cutoff = self.clock() - older_than_days * DAY
                for table in TABLES:
                    doomed += [
                        (table, str(i), int(size))
                        for i, size in conn.execute(
                            f"SELECT id, size FROM {table} WHERE created < ?",  # noqa: S608 - table from TABLES
                            (cutoff,),
                        )
                    ]
            if max_bytes is not None:
                used = int(conn.execute("SELECT value FROM meta WHERE key = 'bytes'").fetchone()[0])
                used -= sum(size for _, _, size in doomed)
                taken = {(t, i) for t, i, _ in doomed}
                rows = conn.execute(
                    "SELECT t, id, size FROM (SELECT 'links' AS t, id, size, created FROM links UNION ALL "
                    "SELECT 'snapshots' AS t, id, size, created FROM snapshots) AS records ORDER BY created"
                )
                for table, record_id, size in rows.fetchall():
                    if used <= max_bytes:
                        break
                    if (table, record_id) not in taken:
                        doomed.append((str(table), str(record_id), int(size)))
                        used -= int(size)
            freed = self._delete_records(conn, doomed)
        return Pruned(len(doomed), freed)

    def delete(self, table: str, record_id: str) -> Pruned:
        """Deletes one link or snapshot (a snapshot that is a run's part leaves its run)."""
        _check_table(table)
        with self._transaction() as conn:
            self._lock_total(conn)
            row = conn.execute(f"SELECT size FROM {table} WHERE id = ?", (record_id,)).fetchone()  # noqa: S608
            doomed = [(table, record_id, int(row[0]))] if row is not None else []
            freed = self._delete_records(conn, doomed)
        return Pruned(len(doomed), freed)

    def delete_run(self, run: str) -> Pruned:
        """Deletes every part of the run with read id ``run``, and its keys."""
        with self._transaction() as conn:
            self._lock_total(conn)
            doomed = [
                ("snapshots", str(i), int(size))
                for i, size in conn.execute(
                    "SELECT s.id, s.size FROM runs r JOIN snapshots s ON s.id = r.snapshot_id WHERE r.run = ?", (run,)
                )
            ]
            freed = self._delete_records(conn, doomed)
            freed += self._drop_run_keys(conn, [run])
        return Pruned(len(doomed), freed)

    def _delete_records(self, conn: Conn, doomed: list[tuple[str, str, int]]) -> int:
        """Deletes ``(table, id, size)`` records in the open transaction: their runs rows with them, the keys
        of runs left without parts, and their bytes from the running total. Returns the bytes freed."""
        if not doomed:
            return 0
        freed = 0
        runs: set[str] = set()
        for table, record_id, size in doomed:
            conn.execute(f"DELETE FROM {table} WHERE id = ?", (record_id,))  # noqa: S608 - table from TABLES
            freed += size
            if table == "snapshots":
                runs.update(str(r) for (r,) in conn.execute("SELECT run FROM runs WHERE snapshot_id = ?", (record_id,)))
                conn.execute("DELETE FROM runs WHERE snapshot_id = ?", (record_id,))
        empty = [r for r in runs if conn.execute("SELECT 1 FROM runs WHERE run = ? LIMIT 1", (r,)).fetchone() is None]
        freed += self._drop_run_keys(conn, empty, counted=False)
        conn.execute("UPDATE meta SET value = value - ? WHERE key = 'bytes'", (freed,))
        self.deletions += 1
        return freed

    def _drop_run_keys(self, conn: Conn, runs: list[str], *, counted: bool = True) -> int:
        """Deletes the keys of ``runs``; their bytes leave the running total here when ``counted``."""
        freed = 0
        for run in runs:
            (size,) = conn.execute("SELECT coalesce(sum(size), 0) FROM run_keys WHERE run = ?", (run,)).fetchone()
            conn.execute("DELETE FROM run_keys WHERE run = ?", (run,))
            freed += int(size)
        if counted and freed:
            conn.execute("UPDATE meta SET value = value - ? WHERE key = 'bytes'", (freed,))
            self.deletions += 1
        return freed

    def summary(self) -> dict[str, Any]:
        """Records, bytes and the oldest record's time per table, runs, and the running total against the budget."""
        out: dict[str, Any] = {}
        for table in TABLES:
            count, size, oldest = self._read(
                f"SELECT count(*), coalesce(sum(size), 0), min(created) FROM {table}",  # noqa: S608
                (),
            )[0]
            out[table] = {"records": int(count), "bytes": int(size), "oldest": oldest}
        out["runs"] = int(self._read("SELECT count(DISTINCT run) FROM runs", ())[0][0])
        used, budget = self.usage()
        out["bytes"], out["max_bytes"] = used, budget
        return out

    # ---- expiry ----------------------------------------------------------------------------------------

    def expire(self, now: float | None = None) -> int:
        """Deletes records older than their table's ``max_days`` (and the runs left without parts),
        frees their bytes, and returns how many records went. Done at start-up and then at most
        hourly before a write."""
        self._check_up()
        with self._writer():
            try:
                with self._write_tx() as conn:
                    deleted, freed = self._expire_in(conn, self.clock() if now is None else now)
            except self._errors as e:
                translated = self._write_error(e)
                if translated is e:
                    raise
                raise translated from e
        self._expired(deleted, freed)
        return deleted

    def _expired(self, deleted: int, freed: int) -> None:
        if deleted or freed:
            self.deletions += 1
        if deleted:
            log.info("%s: %d expired records deleted, %d bytes freed", self.where, deleted, freed)

    def _expire_in(self, conn: Conn, now: float) -> tuple[int, int]:
        """The expired records deleted in the open transaction: ``(records, bytes freed)``."""
        self._expired_at = now
        self._lock_total(conn)
        cutoffs = {t: now - days * DAY for t, days in self.max_days.items() if days > 0}
        freed = deleted = 0
        for table, cutoff in cutoffs.items():
            # created is indexed: both statements visit only the expired rows.
            count, size = conn.execute(
                f"SELECT count(*), coalesce(sum(size), 0) FROM {table} WHERE created < ?",  # noqa: S608
                (cutoff,),
            ).fetchone()
            if count:
                conn.execute(f"DELETE FROM {table} WHERE created < ?", (cutoff,))  # noqa: S608
                freed, deleted = freed + int(size), deleted + int(count)
        if "snapshots" in cutoffs:
            # A runs row was written with its snapshot (same time), so it goes with it.
            cutoff = cutoffs["snapshots"]
            runs = [str(r) for (r,) in conn.execute("SELECT DISTINCT run FROM runs WHERE created < ?", (cutoff,))]
            conn.execute("DELETE FROM runs WHERE created < ?", (cutoff,))
            for run in runs:
                if conn.execute("SELECT 1 FROM runs WHERE run = ? LIMIT 1", (run,)).fetchone() is None:
                    freed += self._drop_run_keys(conn, [run], counted=False)
        if freed:
            conn.execute("UPDATE meta SET value = value - ? WHERE key = 'bytes'", (freed,))
        return deleted, freed

    # ---- kernel jobs and shared results ----------------------------------------------------------------------

    def _job_write(self, write: Callable[[Conn], Any]) -> Any:
        """Runs ``write`` in one job transaction, with the driver's errors translated as a write's."""
        if self._corrupt is not None:
            raise self._corrupt_error(self._corrupt)
        self._check_up()
        try:
            with self._job_tx() as conn:
                return write(conn)
        except self._errors as e:
            translated = self._write_error(e)
            if translated is e:
                raise
            raise translated from e

    def job_save(self, job: JobRecord, *, now: float, max_jobs: int, max_bytes: int) -> None:
        """Writes a job's state as its owner sees it (inserted, or updated unless the stored one is final
        already — but for a failure another replica wrote because its owner went silent: the owner was alive
        after all, as through a database outage, and what it says wins). A finished job trims the finished ones
        to the newest ``max_jobs`` holding at most ``max_bytes`` of results (the newest is always kept)."""
        size = len(job.result or b"") + len(job.failure or "")

        def write(conn: Conn) -> None:
            conn.execute(
                "INSERT INTO kernel_jobs (id, owner, kernel, state, created, beat, finished, peak_memory, result, "
                "failure, size) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET "
                "state = excluded.state, beat = excluded.beat, finished = excluded.finished, "
                "peak_memory = excluded.peak_memory, result = excluded.result, failure = excluded.failure, "
                "size = excluded.size WHERE kernel_jobs.state NOT IN ('done', 'error') OR (kernel_jobs.owner = "
                "excluded.owner AND kernel_jobs.state = 'error' AND kernel_jobs.failure LIKE ?)",
                (job.id, job.owner, job.kernel, job.state, job.created, now, job.finished, job.peak_memory,
                 job.result, job.failure, size, f"%{LOST}%"),
            )  # fmt: skip
            if job.state in JOB_FINAL:
                conn.execute(
                    "DELETE FROM kernel_jobs WHERE id IN (SELECT id FROM (SELECT id, row_number() OVER w AS n, "
                    "sum(size) OVER w AS total FROM kernel_jobs WHERE state IN ('done', 'error') "
                    "WINDOW w AS (ORDER BY finished DESC, id)) AS old WHERE n > 1 AND (n > ? OR total > ?))",
                    (max_jobs, max_bytes),
                )

        self._job_write(write)

    def job(self, job_id: str) -> JobRecord | None:
        """A job as stored, with the queued jobs of its owner ahead of it when it is queued; None if unknown."""
        if not is_valid_id(job_id):
            return None
        rows = self._read(
            "SELECT id, owner, kernel, state, created, beat, finished, peak_memory, result, failure FROM kernel_jobs "
            "WHERE id = ?",
            (job_id,),
        )
        if not rows:
            return None
        i, owner, kernel, state, created, beat, finished, peak, result, failure = rows[0]
        problem = _job_problem(str(state), result, failure)
        if problem is not None:
            raise damaged("kernel_jobs", job_id, problem)
        ahead = None
        if state == "queued":
            ahead = int(
                self._read(
                    "SELECT count(*) FROM kernel_jobs WHERE owner = ? AND state = 'queued' AND created < ?",
                    (owner, created),
                )[0][0]
            )
        return JobRecord(
            str(i),
            str(owner),
            str(kernel),
            str(state),
            float(created),
            float(beat),
            float(finished) if finished is not None else None,
            int(peak) if peak is not None else None,
            bytes(result) if result is not None else None,
            str(failure) if failure is not None else None,
            ahead,
        )

    def jobs_beat(self, owner: str, now: float) -> int:
        """The owner's heartbeat: its unfinished jobs are alive at ``now``. Returns how many it has."""
        return int(
            self._job_write(
                lambda conn: (
                    conn.execute(
                        "UPDATE kernel_jobs SET beat = ? WHERE owner = ? AND state NOT IN ('done', 'error')",
                        (now, owner),
                    ).rowcount
                )
            )
        )

    def jobs_lost(self, now: float, silence: float, failure: str, *, by: str = "") -> int:
        """Marks failed (``failure``: the error as JSON, holding :data:`LOST`) every unfinished job whose owner has
        not beaten for ``silence`` seconds: its replica stopped. Any replica may do it (``by``: its owner id; its
        own jobs are never among them: it is alive); a job is marked once. Returns how many."""
        return int(
            self._job_write(
                lambda conn: (
                    conn.execute(
                        "UPDATE kernel_jobs SET state = 'error', finished = ?, failure = ?, size = ? "
                        "WHERE state NOT IN ('done', 'error') AND beat < ? AND owner <> ?",
                        (now, failure, len(failure), now - silence, by),
                    ).rowcount
                )
            )
        )

    def job_delete(self, job_id: str) -> int:
        """Deletes one kernel job (an operator's ``shardscope store delete --job``); how many went (0 or 1)."""
        return int(
            self._job_write(lambda conn: conn.execute("DELETE FROM kernel_jobs WHERE id = ?", (job_id,)).rowcount)
        )

    def result(self, key: str) -> tuple[bytes | None, str | None] | None:
        """A shared kernel result (``(response, None)`` or ``(None, failure JSON)``), or None. A damaged one (not
        the JSON a run answers) is deleted and reads as None: it is a cache, so the run is simply run again."""
        rows = self._read("SELECT result, failure FROM kernel_results WHERE key = ?", (key,))
        if not rows:
            return None
        result, failure = rows[0]
        problem = _job_problem("done" if result is not None else "error", result, failure)
        if problem is not None:
            log.error("%s: the shared kernel result %s is damaged (%s): deleted; its run runs again", self.where,
                      key[:16], problem)  # fmt: skip
            with contextlib.suppress(Exception):
                self._job_write(lambda conn: conn.execute("DELETE FROM kernel_results WHERE key = ?", (key,)))
            return None
        return (bytes(result) if result is not None else None), (str(failure) if failure is not None else None)

    def result_save(
        self, key: str, result: bytes | None, failure: str | None, *, now: float, max_entries: int, max_bytes: int
    ) -> None:
        """Shares a kernel result under ``key`` (the first one stored stays), keeping the newest ``max_entries``
        holding at most ``max_bytes``."""
        size = len(result or b"") + len(failure or "")
        if max_entries <= 0 or size > max_bytes:
            return

        def write(conn: Conn) -> None:
            conn.execute(
                "INSERT INTO kernel_results (key, result, failure, created, size) VALUES (?, ?, ?, ?, ?) "
                "ON CONFLICT (key) DO NOTHING",
                (key, result, failure, now, size),
            )
            conn.execute(
                "DELETE FROM kernel_results WHERE key IN (SELECT key FROM (SELECT key, row_number() OVER w AS n, "
                "sum(size) OVER w AS total FROM kernel_results WINDOW w AS (ORDER BY created DESC, key)) AS old "
                "WHERE n > ? OR total > ?)",
                (max_entries, max_bytes),
            )

        self._job_write(write)


def _job_problem(state: str, result: Any, failure: Any) -> str | None:
    """Why a stored job (or shared result) cannot be answered with: a state no job is in, a result that is not a
    run's JSON object, a failure that is not an error's; None when it can."""
    if state not in JOB_STATES:
        return f"its state {_clip(state, 40)!r} is none of {', '.join(JOB_STATES)}"
    if result is not None:
        try:
            parsed = orjson.loads(bytes(result))
        except orjson.JSONDecodeError:
            return "its result is not JSON"
        if not isinstance(parsed, dict):
            return "its result is not a JSON object"
    elif state == "done":
        return "it is done without a result"
    if failure is not None:
        try:
            error = orjson.loads(str(failure))
        except orjson.JSONDecodeError:
            return "its failure is not JSON"
        if (
            not isinstance(error, dict)
            or not isinstance(error.get("code"), str)
            or not isinstance(error.get("message"), str)
        ):
            return "its failure is not an error (code, message)"
    elif state == "error":
        return "it failed without saying why"
    return None
