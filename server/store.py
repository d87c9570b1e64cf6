"""Share links in SQLite (stdlib ``sqlite3``): immutable JSON payloads under unguessable ids.

Durability: WAL journal with ``synchronous=FULL``, so a write is on disk (WAL fsynced) before
:meth:`Store.put` returns; a link the server acknowledged survives ``kill -9`` and power loss.
One connection guarded by a lock is the single writer: SQLite allows one writer at a time anyway,
and serialising in-process avoids ``database is locked`` retries. Reads are point lookups on the
primary key, fast enough to share the lock.

Ids are ``secrets.token_urlsafe(16)`` (128 random bits): knowing a link is the only way to read it,
so there is no listing. Rows are never updated or deleted.

Extending: each kind of record is a table of the same shape (id, created, payload) named in
``TABLES``; a new kind (e.g. ``snapshots``) is a new entry there and a schema version bump.
"""

from __future__ import annotations

import os
import queue
import re
import secrets
import sqlite3
import threading
import time
import urllib.parse
from pathlib import Path
from typing import Final

import platformdirs

ID_BYTES: Final = 16  # 128 bits, the contract's minimum
# token_urlsafe(16) is 22 characters; accept up to 64 so longer ids can be introduced later.
_ID_RE: Final = re.compile(r"[A-Za-z0-9_-]{22,64}")
TABLES: Final = ("links", "snapshots")
SCHEMA_VERSION: Final = 2  # 2: snapshots, and the runs index (run id, process) -> snapshot id
_SCHEMA: Final = "".join(
    f"CREATE TABLE IF NOT EXISTS {table} (id TEXT PRIMARY KEY, created REAL NOT NULL, payload BLOB NOT NULL);"
    for table in TABLES
) + (
    # One row per process of a multi-process run; the primary key makes each process's part
    # write-once, like every other record.
    "CREATE TABLE IF NOT EXISTS runs (run_id TEXT NOT NULL, process_index INTEGER NOT NULL, "
    "snapshot_id TEXT NOT NULL, created REAL NOT NULL, PRIMARY KEY (run_id, process_index));"
)


def default_db_path() -> Path:
    """``links.db`` in the user's data directory (e.g. ``~/.local/share/shardscope``)."""
    return Path(platformdirs.user_data_dir("shardscope", appauthor=False)) / "links.db"


def is_valid_id(text: str) -> bool:
    return _ID_RE.fullmatch(text) is not None


class StoreClosed(RuntimeError):
    pass


class Store:
    """The link store: ``put(table, payload) -> id``, ``get(table, id) -> payload | None``, ``close()``."""

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self.path = Path(path) if path is not None else default_db_path()
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._readers: queue.SimpleQueue[sqlite3.Connection] = queue.SimpleQueue()
        self.open()

    def open(self) -> None:
        """Opens the connection (done by the constructor); reopens a closed store. Idempotent."""
        with self._lock:
            if self._conn is not None:
                return
            # check_same_thread=False: routes run in a threadpool; the lock serialises every use.
            # isolation_level=None: explicit transactions only, so a commit is exactly where we say.
            conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=10)
            try:
                mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
                if str(mode).lower() != "wal":
                    raise RuntimeError(
                        f"{self.path}: SQLite refused WAL mode (got {mode!r}); is it on a network drive?"
                    )
                conn.execute("PRAGMA synchronous=FULL")
                conn.executescript(f"BEGIN; {_SCHEMA} PRAGMA user_version={SCHEMA_VERSION}; COMMIT;")
            except BaseException:
                conn.close()
                raise
            self._conn = conn

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            raise StoreClosed(f"the store {self.path} is closed")
        return self._conn

    def put(self, table: str, payload: bytes) -> str:
        """Stores ``payload`` under a new random id and returns the id once it is durable."""
        _check_table(table)
        with self._lock:
            conn = self._connection()
            while True:
                new_id = secrets.token_urlsafe(ID_BYTES)
                try:
                    # Autocommit mode: the INSERT is its own transaction, committed (and, with
                    # synchronous=FULL, fsynced) before execute returns.
                    conn.execute(
                        f"INSERT INTO {table} (id, created, payload) VALUES (?, ?, ?)",  # noqa: S608 - table from TABLES
                        (new_id, time.time(), payload),
                    )
                except sqlite3.IntegrityError:  # a 2^-128 collision: draw again rather than overwrite
                    continue
                return new_id

    def put_run_part(self, run_id: str, process_index: int, payload: bytes) -> str | None:
        """Stores one process's snapshot of run ``run_id``; its id, or None if that process already
        published to the run. The snapshot and its run row commit together (one transaction)."""
        if not is_valid_id(run_id):
            raise ValueError("run ids are 22 to 64 URL-safe characters")
        with self._lock:
            conn = self._connection()
            new_id = secrets.token_urlsafe(ID_BYTES)
            now = time.time()
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.execute(
                    "INSERT INTO runs (run_id, process_index, snapshot_id, created) VALUES (?, ?, ?, ?)",
                    (run_id, process_index, new_id, now),
                )
                conn.execute("INSERT INTO snapshots (id, created, payload) VALUES (?, ?, ?)", (new_id, now, payload))
            except sqlite3.IntegrityError:
                conn.execute("ROLLBACK")
                return None
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")  # with synchronous=FULL, durable when this returns
            return new_id

    def run_parts(self, run_id: str) -> list[tuple[int, str]]:
        """``(process_index, snapshot id)`` of every process that published to ``run_id``, in order."""
        if not is_valid_id(run_id):
            return []
        with self._lock:
            rows = (
                self._connection()
                .execute(
                    "SELECT process_index, snapshot_id FROM runs WHERE run_id = ? ORDER BY process_index", (run_id,)
                )
                .fetchall()
            )
        return [(int(p), str(i)) for p, i in rows]

    def _reader(self) -> sqlite3.Connection:
        """A read-only connection from the pool, or a new one. WAL lets readers run while the single
        writer fsyncs, so a share-link read never waits behind a burst of writes."""
        try:
            return self._readers.get_nowait()
        except queue.Empty:
            if self._conn is None:
                raise StoreClosed(f"the store {self.path} is closed") from None
            uri = f"file:{urllib.parse.quote(str(self.path))}?mode=ro"
            return sqlite3.connect(uri, uri=True, check_same_thread=False, isolation_level=None, timeout=10)

    def get(self, table: str, record_id: str) -> bytes | None:
        """The payload stored under ``record_id``, or None (also for ids that cannot exist)."""
        _check_table(table)
        if not is_valid_id(record_id):
            return None
        conn = self._reader()
        try:
            row = conn.execute(
                f"SELECT payload FROM {table} WHERE id = ?",  # noqa: S608 - table from TABLES
                (record_id,),
            ).fetchone()
        finally:
            if self._conn is None:
                conn.close()  # closed meanwhile: do not pool it
            else:
                self._readers.put(conn)
        return bytes(row[0]) if row is not None else None

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


def _check_table(table: str) -> None:
    if table not in TABLES:
        raise ValueError(f"unknown table {table!r}; tables are {TABLES}")
