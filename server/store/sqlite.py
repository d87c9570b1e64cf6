"""The embedded store: one SQLite file (stdlib ``sqlite3``), the default for ``shardscope serve``.

Durability: WAL journal with ``synchronous=FULL``, so a write is on disk (WAL fsynced) before a
``put`` returns; a record the server acknowledged survives ``kill -9`` and power loss. One
connection guarded by a lock is the single writer: SQLite allows one writer at a time anyway, and
serialising in-process avoids ``database is locked`` retries. Reads are point lookups on the primary
key from a pool of read-only connections (WAL lets them run while the writer fsyncs).

Ids are ``secrets.token_urlsafe(16)`` (128 random bits): knowing an id is the only way to read it,
so there is no listing. Records are never updated; they are deleted only when they expire. A disk that
fills before the budget does gives 507 (``SQLITE_FULL``), with the transaction rolled back: nothing
acknowledged is lost.

**Start-up.** Opening checks the file (``PRAGMA quick_check``, which reads every page, so a file
corrupted mid-way is noticed), that it can be written, and migrates older schemas. Any failure is
one :class:`StoreUnavailable` whose message names the path and what to do; ``shardscope serve``
prints it as one line and exits non-zero.

Schema versions (``PRAGMA user_version``, :data:`~server.store.base.SCHEMA_VERSION`). Opening an older file
migrates it in one transaction; runs stored before 3 keep their old id (it was already in their share links)
as their read id, so every old link still opens. Their id was public, so it can no longer write to them.
"""

from __future__ import annotations

import os
import queue
import sqlite3
import time
import urllib.parse
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final

import platformdirs

from server.errors import ApiError
from server.store.base import (
    MAX_DB_STATEMENT_MS,
    MAX_DB_WAIT_MS,
    MAX_STORE_BYTES,
    MAX_STORE_QUEUE_MS,
    SCHEMA_VERSION,
    TABLES,
    Blob,
    Conn,
    Store,
    StoreClosed,
    StoreUnavailable,
    _check_table,
    _clip,
    is_valid_id,
    log,
    schema_4,
    schema_5,
    schema_6,
)
from server.store.checks import COLUMNS, RECORD_OVERHEAD, schema_problem

JOURNAL_SIZE_LIMIT: Final = 64 * 1024 * 1024
"""The WAL file is truncated back to this after a checkpoint (it grows by one transaction's pages)."""
IDLE_READERS: Final = 8
"""Read connections kept open between reads; more are opened under load and closed after."""
READER_CACHE_KIB: Final = 256
"""Page cache of a read connection: a blob streamed to a slow reader passes through it, so it stays small."""

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
_TO_4: Final = schema_4("BLOB", "REAL", "INTEGER")
_MIGRATIONS: Final = {2: [*_SCHEMA_2, *_TO_3], 3: _TO_4, 4: schema_5("BLOB"), 5: schema_6("BLOB", "REAL", "INTEGER")}
"""Each version's steps to the next; a file at version v < 2 starts with schema 2's (which creates what it lacks)."""

_RECOVER: Final = "`sqlite3 FILE .recover` can save what is readable"


def default_db_path() -> Path:
    """``links.db`` in the user's data directory (e.g. ``~/.local/share/shardscope``)."""
    return Path(platformdirs.user_data_dir("shardscope", appauthor=False)) / "links.db"


class SqliteBlob(Blob):
    """A payload read with SQLite's incremental blob I/O, in its own read transaction (one snapshot of the
    store) until :meth:`close`."""

    def __init__(self, store: SqliteStore, conn: sqlite3.Connection, blob: sqlite3.Blob, length: int) -> None:
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


class SqliteStore(Store):
    """The store in one SQLite file (``path``; None: ``links.db`` in the user data directory)."""

    kind = "sqlite"
    _errors = (sqlite3.Error,)
    _integrity = (sqlite3.IntegrityError,)

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        max_bytes: int | None = MAX_STORE_BYTES,
        max_days: Mapping[str, float] | None = None,
        clock: Callable[[], float] = time.time,
        wait_ms: int = MAX_DB_WAIT_MS,
        statement_ms: int = MAX_DB_STATEMENT_MS,
        queue_ms: int = MAX_STORE_QUEUE_MS,
    ) -> None:
        super().__init__(
            max_bytes=max_bytes,
            max_days=max_days,
            clock=clock,
            wait_ms=wait_ms,
            statement_ms=statement_ms,
            queue_ms=queue_ms,
        )
        self.path = Path(path) if path is not None else default_db_path()
        self.where = str(self.path)
        self._conn: sqlite3.Connection | None = None
        self._readers: queue.SimpleQueue[sqlite3.Connection] = queue.SimpleQueue()
        self.open()

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
        self.start_watch()

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
                    for step in range(max(version, 2), SCHEMA_VERSION):
                        for statement in _MIGRATIONS[step]:
                            conn.execute(statement)
                    conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
                    if version:
                        log.warning("%s: migrated the store from schema %d to %d", self.path, version, SCHEMA_VERSION)
                problem = schema_problem(_columns(conn))
                if problem is not None:
                    raise StoreUnavailable(
                        f"{self.path} is not a whole Shardscope store ({problem}): restore it from a backup, or move "
                        "it aside to start with an empty store"
                    )
                self._recount(conn, int(conn.execute("SELECT value FROM meta WHERE key = 'bytes'").fetchone()[0]))
                self._run_key = bytes(conn.execute("SELECT value FROM meta WHERE key = 'run_key'").fetchone()[0])
                # A file SQLite could only open read-only (no write permission, a read-only bind mount) still
                # passes BEGIN IMMEDIATE when there is nothing to migrate: only a real write proves it.
                try:
                    conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('opened', ?)", (self.clock(),))
                    conn.execute("COMMIT")
                except sqlite3.Error as e:  # a full disk proves the file writable: open, and writes get 507
                    if _primary_code(e) != sqlite3.SQLITE_FULL:
                        raise
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    log.warning("%s: the disk is full; the store opens, and writes get 507 until space is freed",
                                self.path)  # fmt: skip
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            conn.execute(f"PRAGMA busy_timeout={max(1, round(self.wait_s * 1000))}")  # another process's write
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
        self.stop_watch()
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

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            raise StoreClosed(f"the store {self.path} is closed")
        return self._conn

    # ---- transactions ------------------------------------------------------------------------------

    @contextmanager
    def _write_tx(self) -> Iterator[Conn]:
        conn = self._connection()
        conn.execute("BEGIN IMMEDIATE")  # the one writer: the byte total's row is ours until COMMIT
        try:
            yield conn
            conn.execute("COMMIT")  # with synchronous=FULL, durable when this returns
        except BaseException:
            if conn.in_transaction:  # SQLite may already have rolled back (SQLITE_FULL does)
                conn.execute("ROLLBACK")
            raise

    @contextmanager
    def _job_tx(self) -> Iterator[Conn]:
        # The same writer, but this commit does not wait for an fsync (WAL with synchronous=NORMAL stays
        # consistent; a crash may lose the last job states, which died with their server anyway).
        with self._writer():
            conn = self._connection()
            conn.execute("PRAGMA synchronous=NORMAL")
            try:
                with self._write_tx() as tx:
                    yield tx
            finally:
                conn.execute("PRAGMA synchronous=FULL")

    def _write_error(self, error: BaseException) -> BaseException:
        if not isinstance(error, sqlite3.Error):
            return error
        primary = _primary_code(error)
        if primary in (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB):
            return self._found_corrupt(error)
        if primary == sqlite3.SQLITE_FULL or "disk is full" in str(error):
            return self._disk_full(error)
        if primary in (sqlite3.SQLITE_READONLY, sqlite3.SQLITE_IOERR, sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_PERM):
            return self._cannot_write(error)
        return error

    @property
    def state(self) -> str:
        """``corrupt`` once SQLite found the file damaged, ``read_only`` when the last write was refused or the
        file or its directory cannot be written now (a read-only remount), else ``ok``."""
        if self._corrupt is None and self._write_failed is None and _read_only(self.path):
            return "read_only"
        return super().state

    def _probe(self) -> str | None:
        conn = self._reader()
        try:
            return schema_problem(_columns(conn))
        finally:
            self._release(conn)

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
            conn = sqlite3.connect(uri, uri=True, check_same_thread=False, isolation_level=None, timeout=self.wait_s)
            conn.execute(f"PRAGMA cache_size=-{READER_CACHE_KIB}")
            return conn

    def _release(self, conn: sqlite3.Connection) -> None:
        """Back to the pool, or closed: when the store closed meanwhile, or the pool already holds enough."""
        if self._conn is None or self._readers.qsize() >= IDLE_READERS:
            conn.close()
        else:
            self._readers.put(conn)

    def _read(self, sql: str, args: Sequence[Any]) -> list[Any]:
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
                f"SELECT rowid, length(payload), size, digest FROM {table} WHERE id = ?",  # noqa: S608 - from TABLES
                (record_id,),
            ).fetchone()
            if row is not None:
                self._blob_checked(table, record_id, int(row[1]), int(row[2]))
                blob = SqliteBlob(self, conn, conn.blobopen(table, "payload", row[0], readonly=True), int(row[1]))
                blob.digest = bytes(row[3]) if row[3] is not None else None
                return blob
        except sqlite3.DatabaseError as e:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            self._release(conn)
            raise self._read_error(e) from e
        except ApiError:  # damaged
            conn.execute("ROLLBACK")
            self._release(conn)
            raise
        conn.execute("ROLLBACK")
        self._release(conn)
        return None


def _columns(conn: sqlite3.Connection) -> dict[str, set[str]]:
    """The columns of each of the store's tables there is (what :func:`server.store.checks.schema_problem` reads)."""
    found: dict[str, set[str]] = {}
    for table in COLUMNS:
        columns = {str(row[1]) for row in conn.execute(f"PRAGMA table_info({table})")}
        if columns:
            found[table] = columns
    return found


def _primary_code(error: sqlite3.Error) -> int:
    code = getattr(error, "sqlite_errorcode", None)
    return int(code) & 0xFF if isinstance(code, int) else -1


def _read_only(path: Path) -> bool:
    """The file or its directory (where the WAL goes) cannot be written: a read-only mount, or permissions."""
    return any(p.exists() and not os.access(p, os.W_OK) for p in (path, path.parent))
