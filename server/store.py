"""Share links, snapshots and runs in SQLite (stdlib ``sqlite3``): immutable JSON payloads under
unguessable ids, inside a byte budget, kept for a bounded number of days.

Durability: WAL journal with ``synchronous=FULL``, so a write is on disk (WAL fsynced) before a
``put`` returns; a record the server acknowledged survives ``kill -9`` and power loss. One
connection guarded by a lock is the single writer: SQLite allows one writer at a time anyway, and
serialising in-process avoids ``database is locked`` retries. Reads are point lookups on the primary
key from a pool of read-only connections (WAL lets them run while the writer fsyncs).

Ids are ``secrets.token_urlsafe(16)`` (128 random bits): knowing an id is the only way to read it,
so there is no listing. Records are never updated; they are deleted only when they expire.

**Bounded.** Every record counts its payload plus :data:`RECORD_OVERHEAD` bytes, and a running
total of those is kept in the ``meta`` table, updated in the same transaction as each insert and
delete (no scan per write). A write that would take the total past ``max_bytes`` is refused with
507 ``insufficient_storage`` naming the setting; nothing already stored is dropped to make room.
Records older than their table's ``max_days`` are deleted at start-up and then at most hourly (on
the next write), which frees their bytes. A disk that fills before the budget does gives the same
507 (``SQLITE_FULL``), with the transaction rolled back: nothing acknowledged is lost.

**Start-up.** Opening checks the file (``PRAGMA quick_check``, which reads every page, so a file
corrupted mid-way is noticed), that it can be written, and migrates older schemas. Any failure is
one :class:`StoreUnavailable` whose message names the path and what to do; ``shardscope serve``
prints it as one line and exits non-zero.

**Runs.** A multi-process run is written with its *secret* (the ``run_id`` its processes share) and
read with its *read id*, an HMAC of the secret under a key kept in the database
(:meth:`Store.run_read_id`). Share links and the merged view carry the read id only, so reading a
run never gives the means to write to it. ``run_keys`` holds, per run, what every part must agree
on (the process count, each leaf's spec/shape/dtype, each device's process): a new part is checked
against it in the transaction that stores the part.

Schema versions (``PRAGMA user_version``): 1 links; 2 snapshots and runs; 3 record sizes, the byte
total, retention indexes, run read ids and run keys. Opening an older file migrates it in one
transaction; runs stored before 3 keep their old id (it was already in their share links) as their
read id, so every old link still opens. Their id was public, so it can no longer write to them.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import os
import queue
import re
import secrets
import sqlite3
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final, NamedTuple

import platformdirs

from server.errors import ApiError
from sharding_core.errors import ShardingError

ID_BYTES: Final = 16  # 128 bits, the contract's minimum
# token_urlsafe(16) is 22 characters; accept up to 64 so longer ids can be introduced later.
_ID_RE: Final = re.compile(r"[A-Za-z0-9_-]{22,64}")
TABLES: Final = ("links", "snapshots")
SCHEMA_VERSION: Final = 3  # see the module docstring for what each version added

MAX_STORE_BYTES: Final = 1024**3
"""The default byte budget (setting ``max_store_bytes``): 1 GiB, about 16 of the largest snapshots
or 4 million typical share links."""
MAX_LINK_DAYS: Final = 365
MAX_SNAPSHOT_DAYS: Final = 90
RECORD_OVERHEAD: Final = 128
"""Bytes counted per record on top of its payload: the row, its id and index entries."""
KEY_OVERHEAD: Final = 64
"""Bytes counted per run key (``run_keys`` row) on top of its key and value text."""
EXPIRE_EVERY_SECONDS: Final = 3600.0
JOURNAL_SIZE_LIMIT: Final = 64 * 1024 * 1024
"""The WAL file is truncated back to this after a checkpoint (it grows by one transaction's pages)."""
DAY: Final = 86400.0

INSUFFICIENT_STORAGE: Final = "insufficient_storage"
STORE_UNAVAILABLE: Final = "store_unavailable"
STORE_CORRUPT: Final = "store_corrupt"
STATES: Final = ("ok", "read_only", "corrupt")
"""What ``GET /api/health`` says of the store (:attr:`Store.state`)."""
IDLE_READERS: Final = 8
"""Read connections kept open between reads; more are opened under load and closed after."""
READER_CACHE_KIB: Final = 256
"""Page cache of a read connection: a blob streamed to a slow reader passes through it, so it stays small."""

log = logging.getLogger("shardscope.store")

# Schema 2 as it was created, so that a file of any older version gains what it lacks before the
# 2 -> 3 steps run; a new file takes the same path (one migration, always exercised).
_SCHEMA_2: Final = [
    *(
        f"CREATE TABLE IF NOT EXISTS {t} (id TEXT PRIMARY KEY, created REAL NOT NULL, payload BLOB NOT NULL)"
        for t in TABLES
    ),
    "CREATE TABLE IF NOT EXISTS runs (run_id TEXT NOT NULL, process_index INTEGER NOT NULL, "
    "snapshot_id TEXT NOT NULL, created REAL NOT NULL, PRIMARY KEY (run_id, process_index))",
]
_TO_3: Final = [
    *(f"ALTER TABLE {t} ADD COLUMN size INTEGER NOT NULL DEFAULT 0" for t in TABLES),
    *(f"UPDATE {t} SET size = length(payload) + {RECORD_OVERHEAD}" for t in TABLES),  # noqa: S608 - constants
    # A run part also has its runs row: counted with its snapshot, which it expires with.
    f"UPDATE snapshots SET size = size + {RECORD_OVERHEAD} WHERE id IN (SELECT snapshot_id FROM runs)",  # noqa: S608
    # runs.run is now the read id. Runs stored before keep their old id as read id: it is in their links.
    "ALTER TABLE runs RENAME COLUMN run_id TO run",
    "CREATE TABLE run_keys (run TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL, size INTEGER NOT NULL, "
    "PRIMARY KEY (run, key)) WITHOUT ROWID",
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value NOT NULL)",
    "INSERT INTO meta (key, value) VALUES ('run_key', randomblob(32))",
    "INSERT INTO meta (key, value) VALUES ('bytes', "  # noqa: S608 - tables from TABLES
    + " + ".join(f"(SELECT coalesce(sum(size), 0) FROM {t})" for t in TABLES)  # noqa: S608
    + ")",
    *(f"CREATE INDEX {t}_created ON {t} (created)" for t in (*TABLES, "runs")),
]


def default_db_path() -> Path:
    """``links.db`` in the user's data directory (e.g. ``~/.local/share/shardscope``)."""
    return Path(platformdirs.user_data_dir("shardscope", appauthor=False)) / "links.db"


def is_valid_id(text: str) -> bool:
    return _ID_RE.fullmatch(text) is not None


class StoreClosed(RuntimeError):
    pass


class StoreUnavailable(ShardingError):
    """The store cannot be opened: the message is one line naming the path and what to do."""

    def __init__(self, message: str) -> None:
        super().__init__(STORE_UNAVAILABLE, message)


class Blob:
    """One stored payload, read piece by piece: ``length``, :meth:`read`, :meth:`close` (idempotent)."""

    def __init__(self, store: Store, conn: sqlite3.Connection, blob: sqlite3.Blob, length: int) -> None:
        self.store, self.conn, self.blob, self.length = store, conn, blob, length
        self.closed = False

    def seek(self, offset: int) -> None:
        self.blob.seek(offset)

    def read(self, size: int) -> bytes:
        try:
            return self.blob.read(size)
        except sqlite3.DatabaseError as e:
            raise self.store._read_error(e) from e

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self.blob.close()
        if self.conn.in_transaction:
            self.conn.execute("ROLLBACK")  # ends the read transaction (nothing was written)
        self.store._release(self.conn)


class RunPart(NamedTuple):
    snapshot_id: str
    link_id: str | None


class Store:
    """The record store: ``put(table, payload) -> id``, ``get(table, id) -> payload | None``, runs,
    expiry and the byte budget; ``close()``.

    ``max_bytes``: the budget (None: none, for tools that only read). ``max_days``: per table, days a
    record is kept (0: forever; tables left out keep the defaults). ``clock``: seconds since the epoch
    (tests move it).
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        max_bytes: int | None = MAX_STORE_BYTES,
        max_days: Mapping[str, float] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.path = Path(path) if path is not None else default_db_path()
        self.max_bytes = max_bytes
        self.max_days: dict[str, float] = {"links": MAX_LINK_DAYS, "snapshots": MAX_SNAPSHOT_DAYS}
        for table, days in (max_days or {}).items():
            _check_table(table)
            self.max_days[table] = days
        self.clock = clock
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._run_key = b""
        self._expired_at = float("-inf")
        self.deletions = 0  # bumped whenever expiry deletes records: caches of what was read key on it
        self._corrupt: str | None = None  # what SQLite said when it found the file damaged after start
        self._write_failed: str | None = None  # the last write's refusal (read-only, I/O error), until one succeeds
        self._readers: queue.SimpleQueue[sqlite3.Connection] = queue.SimpleQueue()
        self.open()

    def kept_days(self, table: str) -> float | None:
        """Days the store keeps a record of ``table`` (None: until deleted)."""
        days = self.max_days.get(table)
        return days if days is not None and days > 0 else None

    # ---- lifecycle ---------------------------------------------------------------------------------

    def open(self) -> None:
        """Opens the connection (done by the constructor); reopens a closed store. Idempotent.

        Raises :class:`StoreUnavailable` when the file cannot be used (unwritable, read-only, not a
        database, corrupt, from a newer Shardscope, on a full disk).
        """
        with self._lock:
            if self._conn is not None:
                return
            try:
                conn = self._connect()
            except StoreUnavailable:
                raise
            except (sqlite3.Error, OSError) as e:
                raise self._unavailable(e) from None
            self._conn = conn
        try:
            self.expire()
        except (ApiError, sqlite3.Error) as e:  # a disk so full that even deleting fails: start anyway, say so
            log.warning("%s: could not delete expired records at start-up: %s", self.path, e)

    def _connect(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        # check_same_thread=False: routes run in a threadpool; the lock serialises every use.
        # isolation_level=None: explicit transactions only, so a commit is exactly where we say.
        conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=10)
        try:
            # Reads every page of every table and index: a file damaged anywhere fails here, at
            # start-up, rather than as a 500 when someone opens the link stored on that page.
            problems = [str(row[0]) for row in conn.execute("PRAGMA quick_check(3)").fetchall()]
            if problems != ["ok"]:
                raise StoreUnavailable(
                    f"{self.path} is corrupt (PRAGMA quick_check: {_clip('; '.join(problems))}): restore it from "
                    f"a backup, or move it aside to start with an empty store ({_RECOVER})"
                )
            version = int(conn.execute("PRAGMA user_version").fetchone()[0])
            if version > SCHEMA_VERSION:
                raise StoreUnavailable(
                    f"{self.path} was written by a newer Shardscope (schema {version}; this one reads up to "
                    f"{SCHEMA_VERSION}): upgrade shardscope, or pass --db another path"
                )
            mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise StoreUnavailable(
                    f"{self.path}: SQLite refused WAL mode (got {mode!r}), as on some network drives: "
                    "pass --db a path on a local disk"
                )
            conn.execute("PRAGMA synchronous=FULL")
            conn.execute(f"PRAGMA journal_size_limit={JOURNAL_SIZE_LIMIT}")
            conn.execute("BEGIN IMMEDIATE")  # also proves the file can be written (read-only fails here)
            try:
                if version < SCHEMA_VERSION:
                    for statement in (*_SCHEMA_2, *_TO_3, f"PRAGMA user_version={SCHEMA_VERSION}"):
                        conn.execute(statement)
                    if version:
                        log.warning("%s: migrated the store from schema %d to %d", self.path, version, SCHEMA_VERSION)
                self._run_key = bytes(conn.execute("SELECT value FROM meta WHERE key = 'run_key'").fetchone()[0])
                # A file SQLite could only open read-only (no write permission, a read-only bind mount) still
                # passes BEGIN IMMEDIATE when there is nothing to migrate: only a real write proves it.
                conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('opened', ?)", (self.clock(),))
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        except BaseException:
            conn.close()
            raise
        return conn

    def _unavailable(self, error: sqlite3.Error | OSError) -> StoreUnavailable:
        """One line naming the path, what went wrong and what to do."""
        path = self.path
        if isinstance(error, OSError):
            return StoreUnavailable(
                f"cannot create {error.filename or path.parent} for the store {path} ({error.strerror or error}): "
                "pass --db a path in a writable directory"
            )
        primary = _primary_code(error)
        text = str(error)
        if primary in (sqlite3.SQLITE_READONLY, sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_PERM) and _read_only(path):
            return StoreUnavailable(
                f"{path} is read-only ({text}): make it and its directory writable by this user (SQLite also "
                f"writes {path.name}-wal and {path.name}-shm beside it), or pass --db a writable path"
            )
        if primary in (sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_PERM, sqlite3.SQLITE_READONLY):
            return StoreUnavailable(
                f"cannot open {path} ({text}): check that it and its directory are readable and writable by this "
                "user, or pass --db another path"
            )
        if primary == sqlite3.SQLITE_CORRUPT:
            return StoreUnavailable(
                f"{path} is corrupt ({text}): restore it from a backup, or move it aside to start with an empty "
                f"store ({_RECOVER})"
            )
        if primary == sqlite3.SQLITE_NOTADB:
            return StoreUnavailable(
                f"{path} is not a SQLite database ({text}): pass --db the store's file, or move this one aside to "
                "start with an empty store"
            )
        if primary == sqlite3.SQLITE_FULL:
            return StoreUnavailable(f"the disk holding {path} is full ({text}): free space, or pass --db another disk")
        if primary in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
            return StoreUnavailable(
                f"{path} is locked by another process ({text}): stop the other program using it, or pass --db "
                "another path"
            )
        return StoreUnavailable(f"cannot use the store {path} ({text}): check the file, or pass --db another path")

    def close(self) -> None:
        """Closes the writer and every pooled reader; safe to call more than once."""
        with self._lock:
            conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()
        while True:
            try:
                self._readers.get_nowait().close()
            except queue.Empty:
                break

    @property
    def closed(self) -> bool:
        return self._conn is None

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            raise StoreClosed(f"the store {self.path} is closed")
        return self._conn

    # ---- writes --------------------------------------------------------------------------------------

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction under the lock: committed (and fsynced) when the block ends, rolled
        back if it raises. A full disk becomes 507 and an unwritable store 503; nothing is half-stored."""
        with self._lock:
            conn = self._connection()
            if self._corrupt is not None:
                raise self._corrupt_error(self._corrupt)  # nothing more is acknowledged on a damaged file
            try:
                now = self.clock()
                if now - self._expired_at >= EXPIRE_EVERY_SECONDS:
                    self._expire(conn, now)
                conn.execute("BEGIN IMMEDIATE")
                try:
                    yield conn
                    conn.execute("COMMIT")  # with synchronous=FULL, durable when this returns
                except BaseException:
                    if conn.in_transaction:  # SQLite may already have rolled back (SQLITE_FULL does)
                        conn.execute("ROLLBACK")
                    raise
                self._write_failed = None
            except sqlite3.Error as e:
                translated = self._write_error(e)
                if translated is e:
                    raise
                raise translated from e

    def _write_error(self, error: sqlite3.Error) -> Exception:
        primary = _primary_code(error)
        if primary in (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB):
            return self._found_corrupt(error)
        if primary == sqlite3.SQLITE_FULL or "disk is full" in str(error):
            log.error("%s: the disk is full (%s); writes get 507 until space is freed", self.path, error)
            return ApiError(
                507,
                INSUFFICIENT_STORAGE,
                "the disk holding this server's store is full: nothing was stored",
                hint="try again later; the server's operator can free disk space or move --db to a larger disk",
            )
        if primary in (sqlite3.SQLITE_READONLY, sqlite3.SQLITE_IOERR, sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_PERM):
            log.error("%s: cannot write (%s)", self.path, error)
            self._write_failed = str(error)
            return ApiError(
                503,
                STORE_UNAVAILABLE,
                f"this server's store cannot be written right now ({error}): nothing was stored",
                hint="try again later; the server's log names the file",
            )
        return error

    def _found_corrupt(self, error: sqlite3.Error) -> ApiError:
        """SQLite found the file damaged after start: from now on nothing more is written (a damaged b-tree
        can lose what a later write puts on it), and every request that meets the damage gets 503."""
        if self._corrupt is None:
            self._corrupt = str(error)
            log.error(
                "%s is damaged (%s): the server takes no more writes; stop it, then restore the file from a "
                "backup or recover it (%s)",
                self.path,
                error,
                _RECOVER,
            )
        return self._corrupt_error(str(error))

    def _corrupt_error(self, text: str) -> ApiError:
        return ApiError(
            503,
            STORE_CORRUPT,
            f"this server's store is damaged ({text}): it answers what it can still read and stores nothing more",
            hint="tell the server's operator: the log names the file, and restoring it from a backup fixes this",
        )

    @property
    def state(self) -> str:
        """``corrupt`` once SQLite found the file damaged, ``read_only`` when the last write was refused or the
        file or its directory cannot be written now (a read-only remount), else ``ok``."""
        if self._corrupt is not None:
            return "corrupt"
        if self._write_failed is not None or _read_only(self.path):
            return "read_only"
        return "ok"

    def _reserve(self, conn: sqlite3.Connection, size: int) -> None:
        """Counts ``size`` more bytes, or refuses with 507 if that passes the budget (in the transaction)."""
        used = int(conn.execute("SELECT value FROM meta WHERE key = 'bytes'").fetchone()[0])
        if self.max_bytes is not None and used + size > self.max_bytes:
            raise ApiError(
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
        conn.execute("UPDATE meta SET value = value + ? WHERE key = 'bytes'", (size,))

    def _insert(
        self, conn: sqlite3.Connection, table: str, record_id: str, payload: bytes, size: int, created: float
    ) -> None:
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
            except sqlite3.IntegrityError:  # a 2^-128 collision: draw again rather than overwrite
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
            except sqlite3.IntegrityError:
                continue
            return new_id, link_id

    # ---- runs ------------------------------------------------------------------------------------------

    def run_read_id(self, secret: str) -> str:
        """The read id of the run whose write secret is ``secret``: an HMAC of it under this store's own
        key, 128 bits, URL-safe. The same secret always gives the same read id here, and the read id
        does not give the secret back."""
        if not self._run_key:
            raise StoreClosed(f"the store {self.path} is closed")
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
                    taken = conn.execute(
                        "SELECT 1 FROM runs WHERE run = ? AND process_index = ?", (run, process_index)
                    ).fetchone()
                    if taken is not None:
                        return None
                    existing = dict(conn.execute("SELECT key, value FROM run_keys WHERE run = ?", (run,)).fetchall())
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
                    conn.executemany("INSERT INTO run_keys (run, key, value, size) VALUES (?, ?, ?, ?)", new_keys)
                    if link is not None and link_id is not None:
                        self._insert(conn, "links", link_id, link, link_size, now)
            except sqlite3.IntegrityError:  # an id collision: draw again
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

    def _reader(self) -> sqlite3.Connection:
        """A read-only connection from the pool, or a new one. WAL lets readers run while the single
        writer fsyncs, so a share-link read never waits behind a burst of writes."""
        try:
            return self._readers.get_nowait()
        except queue.Empty:
            if self._conn is None:
                raise StoreClosed(f"the store {self.path} is closed") from None
            uri = f"file:{urllib.parse.quote(str(self.path))}?mode=ro"
            conn = sqlite3.connect(uri, uri=True, check_same_thread=False, isolation_level=None, timeout=10)
            conn.execute(f"PRAGMA cache_size=-{READER_CACHE_KIB}")
            return conn

    def _release(self, conn: sqlite3.Connection) -> None:
        """Back to the pool, or closed: when the store closed meanwhile, or the pool already holds enough."""
        if self._conn is None or self._readers.qsize() >= IDLE_READERS:
            conn.close()
        else:
            self._readers.put(conn)

    def _read(self, sql: str, args: tuple[Any, ...]) -> list[Any]:
        conn = self._reader()
        try:
            return conn.execute(sql, args).fetchall()
        except sqlite3.DatabaseError as e:
            raise self._read_error(e) from e
        finally:
            self._release(conn)

    def _read_error(self, error: sqlite3.Error) -> Exception:
        if _primary_code(error) in (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB):
            return self._found_corrupt(error)
        return error

    def open_blob(self, table: str, record_id: str) -> Blob | None:
        """The payload stored under ``record_id`` to read piece by piece (SQLite's incremental blob I/O), or
        None. It reads one snapshot of the store (its own read transaction) until :meth:`Blob.close`."""
        _check_table(table)
        if not is_valid_id(record_id):
            return None
        conn = self._reader()
        try:
            conn.execute("BEGIN")
            row = conn.execute(
                f"SELECT rowid, length(payload) FROM {table} WHERE id = ?",  # noqa: S608 - table from TABLES
                (record_id,),
            ).fetchone()
            if row is not None:
                return Blob(self, conn, conn.blobopen(table, "payload", row[0], readonly=True), int(row[1]))
        except sqlite3.DatabaseError as e:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            self._release(conn)
            raise self._read_error(e) from e
        conn.execute("ROLLBACK")
        self._release(conn)
        return None

    def get(self, table: str, record_id: str) -> bytes | None:
        """The payload stored under ``record_id``, or None (also for ids that cannot exist)."""
        _check_table(table)
        if not is_valid_id(record_id):
            return None
        rows = self._read(f"SELECT payload FROM {table} WHERE id = ?", (record_id,))  # noqa: S608 - table from TABLES
        return bytes(rows[0][0]) if rows else None

    def exists(self, table: str, record_id: str) -> bool:
        """Whether ``record_id`` is stored (a point lookup; what a cache of parsed records checks, since an
        operator's ``shardscope store delete`` in another process changes nothing this process counts)."""
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
            doomed: list[tuple[str, str, int]] = []  # (table, id, size)
            if older_than_days is not None:
                cutoff = self.clock() - older_than_days * DAY
                for table in TABLES:
                    doomed += [
                        (table, i, int(size))
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
                    "SELECT 'snapshots' AS t, id, size, created FROM snapshots) ORDER BY created"
                )
                for table, record_id, size in rows:
                    if used <= max_bytes:
                        break
                    if (table, record_id) not in taken:
                        doomed.append((table, record_id, int(size)))
                        used -= int(size)
            freed = self._delete_records(conn, doomed)
        return Pruned(len(doomed), freed)

    def delete(self, table: str, record_id: str) -> Pruned:
        """Deletes one link or snapshot (a snapshot that is a run's part leaves its run)."""
        _check_table(table)
        with self._transaction() as conn:
            row = conn.execute(f"SELECT size FROM {table} WHERE id = ?", (record_id,)).fetchone()  # noqa: S608
            doomed = [(table, record_id, int(row[0]))] if row is not None else []
            freed = self._delete_records(conn, doomed)
        return Pruned(len(doomed), freed)

    def delete_run(self, run: str) -> Pruned:
        """Deletes every part of the run with read id ``run``, and its keys."""
        with self._transaction() as conn:
            doomed = [
                ("snapshots", i, int(size))
                for i, size in conn.execute(
                    "SELECT s.id, s.size FROM runs r JOIN snapshots s ON s.id = r.snapshot_id WHERE r.run = ?", (run,)
                )
            ]
            freed = self._delete_records(conn, doomed)
            freed += self._drop_run_keys(conn, [run])
        return Pruned(len(doomed), freed)

    def _delete_records(self, conn: sqlite3.Connection, doomed: list[tuple[str, str, int]]) -> int:
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
                runs.update(r for (r,) in conn.execute("SELECT run FROM runs WHERE snapshot_id = ?", (record_id,)))
                conn.execute("DELETE FROM runs WHERE snapshot_id = ?", (record_id,))
        empty = [r for r in runs if conn.execute("SELECT 1 FROM runs WHERE run = ? LIMIT 1", (r,)).fetchone() is None]
        freed += self._drop_run_keys(conn, empty, counted=False)
        conn.execute("UPDATE meta SET value = value - ? WHERE key = 'bytes'", (freed,))
        self.deletions += 1
        return freed

    def _drop_run_keys(self, conn: sqlite3.Connection, runs: list[str], *, counted: bool = True) -> int:
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
            conn = self._connection()
            try:
                return self._expire(conn, self.clock() if now is None else now)
            except sqlite3.Error as e:
                translated = self._write_error(e)
                if translated is e:
                    raise
                raise translated from e

    def _expire(self, conn: sqlite3.Connection, now: float) -> int:
        self._expired_at = now
        cutoffs = {t: now - days * DAY for t, days in self.max_days.items() if days > 0}
        if not cutoffs:
            return 0
        conn.execute("BEGIN IMMEDIATE")
        try:
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
                runs = [r for (r,) in conn.execute("SELECT DISTINCT run FROM runs WHERE created < ?", (cutoff,))]
                conn.execute("DELETE FROM runs WHERE created < ?", (cutoff,))
                for run in runs:
                    if conn.execute("SELECT 1 FROM runs WHERE run = ? LIMIT 1", (run,)).fetchone() is None:
                        (size,) = conn.execute(
                            "SELECT coalesce(sum(size), 0) FROM run_keys WHERE run = ?", (run,)
                        ).fetchone()
                        conn.execute("DELETE FROM run_keys WHERE run = ?", (run,))
                        freed += int(size)
            if freed:
                conn.execute("UPDATE meta SET value = value - ? WHERE key = 'bytes'", (freed,))
            conn.execute("COMMIT")
            if deleted or freed:
                self.deletions += 1
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        if deleted:
            log.info("%s: %d expired records deleted, %d bytes freed", self.path, deleted, freed)
        return deleted


class Pruned(NamedTuple):
    """What an operator's deletion took: records (links and snapshots, run parts included) and bytes freed."""

    records: int
    bytes: int


_RECOVER: Final = "`sqlite3 FILE .recover` can save what is readable"


def _primary_code(error: sqlite3.Error) -> int:
    code = getattr(error, "sqlite_errorcode", None)
    return int(code) & 0xFF if isinstance(code, int) else -1


def _read_only(path: Path) -> bool:
    """The file or its directory (where the WAL goes) cannot be written: a read-only mount, or permissions."""
    return any(p.exists() and not os.access(p, os.W_OK) for p in (path, path.parent))


def _clip(text: str, limit: int = 200) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _check_table(table: str) -> None:
    if table not in TABLES:
        raise ValueError(f"unknown table {table!r}; tables are {TABLES}")
