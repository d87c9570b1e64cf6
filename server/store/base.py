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
import hashlib
import hmac
import logging
import re
import secrets
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any, Final, NamedTuple, Protocol

from server.errors import ApiError
from sharding_core.errors import ShardingError
from sharding_core.snapshot.format import ID_PATTERN

ID_BYTES: Final = 16  # 128 bits, the contract's minimum
_ID_RE: Final = re.compile(ID_PATTERN)  # token_urlsafe(16) is 22 characters; up to 64 for longer ids later
TABLES: Final = ("links", "snapshots")
SCHEMA_VERSION: Final = 4
"""1 links; 2 snapshots and runs; 3 record sizes, the byte total, retention indexes, run read ids and run keys;
4 kernel jobs and shared kernel results."""

MAX_STORE_BYTES: Final = 1024**3
"""The default byte budget (setting ``max_store_bytes``): 1 GiB, about 16 of the largest snapshots
or 4 million typical share links."""
MAX_LINK_DAYS: Final = 365
MAX_SNAPSHOT_DAYS: Final = 90
MAX_DB_CONNECTIONS: Final = 10
"""The default of setting ``max_db_connections``: connections one replica's PostgreSQL pool holds at most."""
RECORD_OVERHEAD: Final = 128
"""Bytes counted per record on top of its payload: the row, its id and index entries."""
KEY_OVERHEAD: Final = 64
"""Bytes counted per run key (``run_keys`` row) on top of its key and value text."""
EXPIRE_EVERY_SECONDS: Final = 3600.0
DAY: Final = 86400.0

INSUFFICIENT_STORAGE: Final = "insufficient_storage"
STORE_UNAVAILABLE: Final = "store_unavailable"
STORE_CORRUPT: Final = "store_corrupt"
STATES: Final = ("ok", "read_only", "corrupt")
"""What ``GET /api/health`` says of the store (:attr:`Store.state`)."""
JOB_FINAL: Final = ("done", "error")
"""A kernel job's states after which nothing changes it."""

log = logging.getLogger("shardscope.store")


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


class Store:
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
    ) -> None:
        self.max_bytes = max_bytes
        self.max_days: dict[str, float] = {"links": MAX_LINK_DAYS, "snapshots": MAX_SNAPSHOT_DAYS}
        for table, days in (max_days or {}).items():
            _check_table(table)
            self.max_days[table] = days
        self.clock = clock
        self._lock = threading.Lock()
        self._run_key = b""
        self._expired_at = float("-inf")
        self.deletions = 0  # bumped whenever this process deletes records: caches of what was read key on it
        self._corrupt: str | None = None  # what the database said when it found its data damaged after start
        self._write_failed: str | None = None  # the last write's refusal (read-only, I/O error), until one succeeds

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

    @property
    def state(self) -> str:
        """``corrupt`` once the database found its data damaged, ``read_only`` when the last write was refused,
        else ``ok``."""
        if self._corrupt is not None:
            return "corrupt"
        if self._write_failed is not None:
            return "read_only"
        return "ok"

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
        return ApiError(
            503,
            STORE_UNAVAILABLE,
            f"this server's store cannot be written right now ({_clip(str(error))}): nothing was stored",
            hint="try again later; the server's log names the store",
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
        with self._lock:
            if self._corrupt is not None:
                raise self._corrupt_error(self._corrupt)  # nothing more is acknowledged on a damaged store
            try:
                now = self.clock()
                if now - self._expired_at >= EXPIRE_EVERY_SECONDS:
                    with self._write_tx() as conn:
                        deleted, freed = self._expire_in(conn, now)
                    self._expired(deleted, freed)
                with self._write_tx() as conn:
                    yield conn
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
        holds the total's row from then on)."""
        used = int(conn.execute("SELECT value FROM meta WHERE key = 'bytes'").fetchone()[0])
        if self.max_bytes is not None and used + size > self.max_bytes:
            raise self._full(used, size)
        conn.execute("UPDATE meta SET value = value + ? WHERE key = 'bytes'", (size,))

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
            f"INSERT INTO {table} (id, created, payload, size) VALUES (?, ?, ?, ?)",  # noqa: S608 - table from TABLES
            (record_id, created, payload, size),
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
        """The payload stored under ``record_id``, or None (also for ids that cannot exist)."""
        _check_table(table)
        if not is_valid_id(record_id):
            return None
        rows = self._read(f"SELECT payload FROM {table} WHERE id = ?", (record_id,))  # noqa: S608 - table from TABLES
        return bytes(rows[0][0]) if rows else None

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
        with self._lock:
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
        already: a job another replica marked failed stays failed). A finished job trims the finished ones to
        the newest ``max_jobs`` holding at most ``max_bytes`` of results (the newest is always kept)."""
        size = len(job.result or b"") + len(job.failure or "")

        def write(conn: Conn) -> None:
            conn.execute(
                "INSERT INTO kernel_jobs (id, owner, kernel, state, created, beat, finished, peak_memory, result, "
                "failure, size) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET "
                "state = excluded.state, beat = excluded.beat, finished = excluded.finished, "
                "peak_memory = excluded.peak_memory, result = excluded.result, failure = excluded.failure, "
                "size = excluded.size WHERE kernel_jobs.state NOT IN ('done', 'error')",
                (job.id, job.owner, job.kernel, job.state, job.created, now, job.finished, job.peak_memory,
                 job.result, job.failure, size),
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

    def jobs_lost(self, now: float, silence: float, failure: str) -> int:
        """Marks failed (``failure``: the error as JSON) every unfinished job whose owner has not beaten for
        ``silence`` seconds: its replica stopped. Any replica may do it; a job is marked once. Returns how many."""
        return int(
            self._job_write(
                lambda conn: (
                    conn.execute(
                        "UPDATE kernel_jobs SET state = 'error', finished = ?, failure = ?, size = ? "
                        "WHERE state NOT IN ('done', 'error') AND beat < ?",
                        (now, failure, len(failure), now - silence),
                    ).rowcount
                )
            )
        )

    def result(self, key: str) -> tuple[bytes | None, str | None] | None:
        """A shared kernel result (``(response, None)`` or ``(None, failure JSON)``), or None."""
        rows = self._read("SELECT result, failure FROM kernel_results WHERE key = ?", (key,))
        if not rows:
            return None
        result, failure = rows[0]
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
