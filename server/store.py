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
import re
import secrets
import sqlite3
import threading
import time
from pathlib import Path
from typing import Final

import platformdirs

ID_BYTES: Final = 16  # 128 bits, the contract's minimum
# token_urlsafe(16) is 22 characters; accept up to 64 so longer ids can be introduced later.
_ID_RE: Final = re.compile(r"[A-Za-z0-9_-]{22,64}")
TABLES: Final = ("links",)
SCHEMA_VERSION: Final = 1
_SCHEMA: Final = "".join(
    f"CREATE TABLE IF NOT EXISTS {table} (id TEXT PRIMARY KEY, created REAL NOT NULL, payload BLOB NOT NULL);"
    for table in TABLES
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

    def get(self, table: str, record_id: str) -> bytes | None:
        """The payload stored under ``record_id``, or None (also for ids that cannot exist)."""
        _check_table(table)
        if not is_valid_id(record_id):
            return None
        with self._lock:
            row = (
                self._connection()
                .execute(
                    f"SELECT payload FROM {table} WHERE id = ?",  # noqa: S608 - table from TABLES
                    (record_id,),
                )
                .fetchone()
            )
        return bytes(row[0]) if row is not None else None

    def close(self) -> None:
        """Closes the connection; safe to call more than once."""
        with self._lock:
            conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()

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
