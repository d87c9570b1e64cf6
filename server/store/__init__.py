"""Share links, snapshots, runs and kernel jobs: one storage interface (:class:`Store`), two implementations.

* :class:`~server.store.sqlite.SqliteStore` — one SQLite file, the embedded default (``--db PATH``);
* :class:`~server.store.postgres.PostgresStore` — one PostgreSQL database that replicas share
  (``--db postgresql://user@host:port/database``; the ``postgres`` extra).

:func:`open_store` picks one by the ``--db`` value. What both share — ids, the byte budget, runs, expiry, an
operator's deletions, kernel jobs — is written once in :mod:`server.store.base`.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Mapping
from typing import Final

from server.store.base import (
    DAY,
    EXPIRE_EVERY_SECONDS,
    ID_BYTES,
    INSUFFICIENT_STORAGE,
    JOB_FINAL,
    JOB_STATES,
    KEY_OVERHEAD,
    LOST,
    MAX_DB_CONNECTIONS,
    MAX_DB_STATEMENT_MS,
    MAX_DB_WAIT_MS,
    MAX_LINK_DAYS,
    MAX_SNAPSHOT_DAYS,
    MAX_STORE_BYTES,
    MAX_STORE_QUEUE_MS,
    SCHEMA_VERSION,
    SEARCH_ABANDONED_S,
    STATES,
    STORE_CORRUPT,
    STORE_UNAVAILABLE,
    TABLES,
    Blob,
    JobRecord,
    Pruned,
    RunPart,
    SearchClaim,
    SearchRow,
    Store,
    StoreClosed,
    StoreUnavailable,
    is_valid_id,
)
from server.store.checks import RECORD_DAMAGED, RECORD_OVERHEAD
from server.store.sqlite import SqliteStore, default_db_path

__all__ = [
    "DAY",
    "EXPIRE_EVERY_SECONDS",
    "ID_BYTES",
    "INSUFFICIENT_STORAGE",
    "JOB_FINAL",
    "JOB_STATES",
    "KEY_OVERHEAD",
    "LOST",
    "MAX_DB_CONNECTIONS",
    "MAX_DB_STATEMENT_MS",
    "MAX_DB_WAIT_MS",
    "MAX_LINK_DAYS",
    "MAX_SNAPSHOT_DAYS",
    "MAX_STORE_BYTES",
    "MAX_STORE_QUEUE_MS",
    "RECORD_DAMAGED",
    "RECORD_OVERHEAD",
    "SCHEMA_VERSION",
    "SEARCH_ABANDONED_S",
    "STATES",
    "STORE_CORRUPT",
    "STORE_UNAVAILABLE",
    "TABLES",
    "Blob",
    "JobRecord",
    "Pruned",
    "RunPart",
    "SearchClaim",
    "SearchRow",
    "SqliteStore",
    "Store",
    "StoreClosed",
    "StoreUnavailable",
    "default_db_path",
    "is_url",
    "is_valid_id",
    "open_store",
]

POSTGRES_SCHEMES: Final = ("postgresql", "postgres")
_URL: Final = re.compile(
    r"([A-Za-z][A-Za-z0-9+.-]+):(?=/)|(postgres|postgresql|sqlite|sqlite3|mysql|mariadb|redis|mongodb|file):",
    re.IGNORECASE,
)
"""What starts like a URL: ``scheme:/`` (two letters or more, so ``C:/`` stays a path), or a database's scheme
with its colon however it goes on (``postgresql:host/db`` is a mistyped URL, not a directory to create)."""
STORE_HINT: Final = "pass --db a file path (SQLite) or postgresql://user@host:port/database"


def is_url(db: str | os.PathLike[str] | None) -> bool:
    """Whether ``--db`` names a database server rather than a file."""
    return db is not None and _URL.match(os.fspath(db)) is not None


def open_store(
    db: str | os.PathLike[str] | None,
    *,
    max_bytes: int | None = MAX_STORE_BYTES,
    max_days: Mapping[str, float] | None = None,
    clock: Callable[[], float] = time.time,
    max_connections: int = MAX_DB_CONNECTIONS,
    wait_ms: int = MAX_DB_WAIT_MS,
    statement_ms: int = MAX_DB_STATEMENT_MS,
    queue_ms: int = MAX_STORE_QUEUE_MS,
) -> Store:
    """The store ``--db`` names: a file path (SQLite; None: the user data directory's ``links.db``) or a
    ``postgresql://`` URL. Anything else that looks like a URL is refused (:class:`StoreUnavailable`):
    ``postgresql://...`` used to become a SQLite file in a directory named ``postgresql:``."""
    text = os.fspath(db) if db is not None else None
    match = _URL.match(text) if text is not None else None
    if text is None or match is None:
        return SqliteStore(
            text,
            max_bytes=max_bytes,
            max_days=max_days,
            clock=clock,
            wait_ms=wait_ms,
            statement_ms=statement_ms,
            queue_ms=queue_ms,
        )
    scheme = (match.group(1) or match.group(2)).lower()
    if scheme not in POSTGRES_SCHEMES or not text[len(scheme) :].startswith("://"):
        shown = text.split("://", 1)[0] + "://…" if "://" in text else text[: len(scheme) + 2] + "…"
        raise StoreUnavailable(f"--db {shown} is neither a file path nor a store Shardscope knows: {STORE_HINT}")
    try:
        from server.store.postgres import PostgresStore
    except ImportError as e:
        raise StoreUnavailable(
            f"--db postgresql://… needs PostgreSQL support, which is not installed ({e}): pip install "
            "'shardscope[postgres]'"
        ) from None
    return PostgresStore(
        text,
        max_bytes=max_bytes,
        max_days=max_days,
        clock=clock,
        max_connections=max_connections,
        wait_ms=wait_ms,
        statement_ms=statement_ms,
        queue_ms=queue_ms,
    )
