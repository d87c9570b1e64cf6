"""The shared store: one PostgreSQL database (psycopg 3 and its connection pool) that any number of
``shardscope serve`` replicas use at once, so that any replica answers any request.

Durability: a write is acknowledged once PostgreSQL committed it (its own ``synchronous_commit``, on by
default: flushed to its WAL). Every write transaction holds the byte total's row until it commits (taken by
the conditional ``UPDATE`` that counts its bytes, or ``SELECT ... FOR UPDATE`` before anything it reads):
writes are serial across replicas as SQLite's are in one process, so the budget, a run's write-once parts
and its keys hold whichever replica a request reaches. Each replica also keeps one
writer at a time of its own (the lock), so the rest of its pool serves reads. Reads are single statements in
autocommit; a large payload is streamed with ``substring`` in pieces (the payload columns are stored
uncompressed, ``STORAGE EXTERNAL``, so a piece reads only its own TOAST chunks).

Bounded waits (issue 29): every wait on the database is at most ``max_db_wait_ms`` (2 s) — a connection from
the pool, a row lock another replica holds (``lock_timeout``), connecting (``connect_timeout``, whole seconds,
at least 2), the server acknowledging what was sent (``tcp_user_timeout``; keepalives find one that went
silent) — and a statement runs at most ``max_db_statement_ms``; past any of them the request gets 503
``store_unavailable`` with ``Retry-After`` and nothing is stored. A connection that fails as a database gone
would (refused, lost, shut down) marks the store down: from then on requests get their 503 at once, without
waiting, until the store's watch (a connection of its own every 0.5 s) finds it back; ``/api/health`` says
``unavailable`` meanwhile. The pool's own back-off is capped at :data:`RECONNECT_S`.
A full disk (SQLSTATE 53100) is 507 as in SQLite; a database that refuses writes (a standby, a read-only
role) is 503 and ``/api/health`` says ``read_only``; damaged data (XX001, XX002), or a table gone (42P01), is
``store_corrupt``.

**Start-up.** Opening connects once directly (so an unreachable server, a wrong password or a missing
database is one line naming the URL without its password, and what to do), creates or checks the schema
under an advisory lock (replicas starting together migrate once: a new database is made at schema 4 and
migrated like an old one), checks every table and column (:mod:`server.store.checks`), counts the byte total
again, and proves it can write. The schema is :data:`~server.store.base.SCHEMA_VERSION`, recorded in ``meta``; a
database from a newer Shardscope, one whose ``meta`` table is not Shardscope's, or one missing a table, is
refused.
"""

from __future__ import annotations

import math
import secrets
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from functools import lru_cache
from typing import Any, Final

import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import ConnectionPool, PoolTimeout

from server.errors import ApiError
from server.store.base import (
    MAX_DB_CONNECTIONS,
    MAX_DB_STATEMENT_MS,
    MAX_DB_WAIT_MS,
    MAX_STORE_BYTES,
    MAX_STORE_QUEUE_MS,
    SCHEMA_VERSION,
    TABLES,
    Blob,
    Conn,
    Cursor,
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
from server.store.checks import schema_problem

MIN_CONNECT_TIMEOUT_S: Final = 2
"""libpq's ``connect_timeout`` counts whole seconds and treats 1 as 2: what the connect wait is at least."""
RECONNECT_S: Final = 4.0
"""How long the pool retries a connection it could not open before it gives up and waits to be asked again (its
back-off doubles from 1 s: at most this long after the database is back before a connection is)."""
IDLE_IN_TRANSACTION_MS: Final = 60_000
WAIT_SLICE_S: Final = 0.1
"""A wait for a pooled connection looks again this often whether the store was found down meanwhile."""
MIGRATION_LOCK: Final = 0x5348_5344_5350  # pg_advisory_xact_lock key: "SHSDSP"
"""Held while the schema is created or checked, so replicas that start together do it once."""

_SCHEMA: Final = [
    *(
        stmt
        for t in TABLES
        for stmt in (
            f"CREATE TABLE {t} (id TEXT PRIMARY KEY, created DOUBLE PRECISION NOT NULL, payload BYTEA NOT NULL, "
            "size BIGINT NOT NULL)",
            # Uncompressed: substring() then reads only the chunks of the piece it is asked for.
            f"ALTER TABLE {t} ALTER COLUMN payload SET STORAGE EXTERNAL",
        )
    ),
    "CREATE TABLE runs (run TEXT NOT NULL, process_index INTEGER NOT NULL, snapshot_id TEXT NOT NULL, "
    "created DOUBLE PRECISION NOT NULL, PRIMARY KEY (run, process_index))",
    "CREATE TABLE run_keys (run TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL, size BIGINT NOT NULL, "
    "PRIMARY KEY (run, key))",
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value BIGINT NOT NULL)",
    "CREATE TABLE secrets (key TEXT PRIMARY KEY, value BYTEA NOT NULL)",
    *(f"CREATE INDEX {t}_created ON {t} (created)" for t in (*TABLES, "runs")),
    "CREATE INDEX runs_snapshot ON runs (snapshot_id)",
    *schema_4("BYTEA", "DOUBLE PRECISION", "BIGINT"),
    "INSERT INTO meta (key, value) VALUES ('bytes', 0), ('schema', 4), ('opened', 0)",
]
"""Schema 4, the first PostgreSQL had; a new database takes the migrations from it, as an old one does."""
_MIGRATIONS: Final = {4: schema_5("BYTEA"), 5: schema_6("BYTEA", "DOUBLE PRECISION", "BIGINT")}
"""Each version's steps to the next."""
_COLUMNS_SQL: Final = (
    "SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = current_schema()"
)


def redact(url: str) -> str:
    """The URL without its password (in the user part or as a ``password=`` parameter): what messages name."""
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return url.split("://", 1)[0] + "://…"
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, _, hostport = netloc.rpartition("@")
        netloc = f"{userinfo.split(':', 1)[0]}@{hostport}"
    query = "&".join(p for p in parts.query.split("&") if p and p.split("=", 1)[0].lower() != "password")
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, query, ""))


@lru_cache(maxsize=256)
def _pg(sql: str) -> str:
    """The shared SQL (``?`` placeholders, never a literal ``?`` or ``%``) in psycopg's placeholder style."""
    return sql.replace("?", "%s")


class _Tx:
    """A psycopg connection taking the shared SQL (:class:`~server.store.base.Conn`)."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self.conn = conn

    def execute(self, sql: str, args: Sequence[Any] = (), /) -> Cursor:
        return self.conn.execute(_pg(sql), args)

    def executemany(self, sql: str, args: Iterable[Sequence[Any]], /) -> None:
        with self.conn.cursor() as cursor:
            cursor.executemany(_pg(sql), list(args))


def _found(rows: Iterable[Sequence[Any]]) -> dict[str, set[str]]:
    """``(table, column)`` rows as each table's columns."""
    found: dict[str, set[str]] = {}
    for table, column in rows:
        found.setdefault(str(table), set()).add(str(column))
    return found


_DOWN_WORDS: Final = (
    ("refused", "the connection was refused"),
    ("timeout expired", "connecting timed out"),
    ("timed out", "the connection timed out"),
    ("administrator command", "the database shut down"),
    ("shutting down", "the database is shutting down"),
    ("starting up", "the database is starting up"),
    ("closed the connection", "the connection was lost"),
    ("consuming input failed", "the connection was lost"),
    ("no route", "there is no route to it"),
    ("could not translate host", "its host name does not resolve"),
)


class PgBlob(Blob):
    """A payload read in pieces, each one ``substring`` query (no connection is held between pieces, so a
    slow reader holds none). A record deleted while it is read ends the read early."""

    def __init__(self, store: PostgresStore, table: str, record_id: str, length: int) -> None:
        self.store, self.table, self.record_id, self.length = store, table, record_id, length
        self.position = 0

    def seek(self, offset: int) -> None:
        self.position = offset

    def read(self, size: int) -> bytes:
        if self.position >= self.length or size <= 0:
            return b""
        rows = self.store._read(
            f"SELECT substring(payload FROM ? FOR ?) FROM {self.table} WHERE id = ?",  # noqa: S608 - from TABLES
            (self.position + 1, size, self.record_id),
        )
        piece = bytes(rows[0][0]) if rows else b""
        self.position += len(piece)
        return piece

    def close(self) -> None:
        pass


class PostgresStore(Store):
    """The store in one PostgreSQL database (``url``: ``postgresql://user@host:port/database``; a password
    is best left to ``PGPASSWORD`` or ``~/.pgpass``, which libpq reads). ``max_connections``: this process's
    pool (setting ``max_db_connections``)."""

    kind = "postgresql"
    _errors = (psycopg.Error,)
    _integrity = (psycopg.errors.UniqueViolation,)

    def __init__(
        self,
        url: str,
        *,
        max_bytes: int | None = MAX_STORE_BYTES,
        max_days: Mapping[str, float] | None = None,
        clock: Callable[[], float] = time.time,
        max_connections: int = MAX_DB_CONNECTIONS,
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
        self.url = url
        self.where = redact(url)
        self.max_connections = max_connections
        self._pool: ConnectionPool[psycopg.Connection[Any]] | None = None
        self._open_lock = threading.Lock()
        self.open()

    # ---- lifecycle ---------------------------------------------------------------------------------

    def open(self) -> None:
        """Connects and checks the schema (done by the constructor); reopens a closed store. Idempotent."""
        with self._open_lock:
            if self._pool is not None:
                return
            try:
                params = conninfo_to_dict(self.url)
            except psycopg.Error as e:
                raise StoreUnavailable(
                    f"--db {self.where} is not a PostgreSQL URL libpq accepts ({self._hide(str(e))}): write "
                    "postgresql://user@host:port/database"
                ) from None
            try:
                with psycopg.connect(self.url, autocommit=True, **self._connect_args()) as conn:
                    self._migrate(conn)
            except StoreUnavailable:
                raise
            except psycopg.Error as e:
                raise self._unavailable(e, params) from None
            self._pool = self._new_pool()
            self._down = None
        try:
            self.expire()
        except (ApiError, psycopg.Error) as e:
            log.warning("%s: could not delete expired records at start-up: %s", self.where, e)
        self.start_watch()

    def _new_pool(self) -> ConnectionPool[psycopg.Connection[Any]]:
        """A pool of connections (opened; it connects in the background)."""
        pool: ConnectionPool[psycopg.Connection[Any]] = ConnectionPool(
            self.url,
            min_size=1,
            max_size=self.max_connections,
            open=False,
            timeout=self.wait_s,
            reconnect_timeout=RECONNECT_S,
            configure=self._configure,
            check=self._check,  # a connection the server dropped is replaced, not used
            kwargs={**self._connect_args(), "application_name": "shardscope"},
            name="shardscope",
        )
        pool.open()
        return pool

    def mark_up(self) -> None:
        """Back: a fresh pool takes over (the old one's connections died with the database, and its reconnecting
        may be in a back-off of seconds), and the old one is closed once what it lent out is back."""
        if self._down is None:
            return
        with self._open_lock:
            old = self._pool
            if old is not None:
                self._pool = self._new_pool()
        super().mark_up()
        if old is not None:
            threading.Thread(target=_close_later, args=(old, self.wait_s + 1), daemon=True).start()

    def _connect_args(self) -> dict[str, Any]:
        """Every connection's bounded waits: to connect (whole seconds, at least 2), and for the server to
        acknowledge what was sent (``tcp_user_timeout``; keepalives find a server that went silent while a
        connection waits for its answer), each about ``max_db_wait_ms``."""
        wait_ms = max(1, round(self.wait_s * 1000))
        return {
            "connect_timeout": max(MIN_CONNECT_TIMEOUT_S, math.ceil(self.wait_s)),
            "tcp_user_timeout": wait_ms,
            "keepalives": 1,
            "keepalives_idle": max(1, math.ceil(self.wait_s)),
            "keepalives_interval": 1,
            "keepalives_count": 2,
        }

    def _configure(self, conn: psycopg.Connection[Any]) -> None:
        """Every pooled connection: autocommit (reads are single statements; writes open their own transaction)
        and bounded waits: a row lock within ``max_db_wait_ms``, a statement within ``max_db_statement_ms``."""
        conn.autocommit = True
        conn.execute(f"SET statement_timeout = {int(self.statement_ms)}")
        conn.execute(f"SET lock_timeout = {max(1, round(self.wait_s * 1000))}")
        conn.execute(f"SET idle_in_transaction_session_timeout = {IDLE_IN_TRANSACTION_MS}")

    def _migrate(self, conn: psycopg.Connection[Any]) -> None:
        """Creates the schema in an empty database, or checks the one there; reads the run key; proves that
        this role may write. One transaction under an advisory lock."""
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
            meta = conn.execute("SELECT to_regclass('meta') IS NOT NULL").fetchone()
            if meta is None or not meta[0]:
                for statement in _SCHEMA:
                    conn.execute(statement)
                conn.execute("INSERT INTO secrets (key, value) VALUES ('run_key', %s)", (secrets.token_bytes(32),))
                log.warning("%s: created the store's tables (schema %d)", self.where, SCHEMA_VERSION)
            try:
                row = conn.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
            except psycopg.errors.UndefinedColumn:
                row = None
            if row is None:
                raise StoreUnavailable(
                    f"{self.where} has a table meta that Shardscope did not make: pass --db a database (or a schema, "
                    "?options=-csearch_path%3DNAME) of Shardscope's own"
                )
            version = int(row[0])
            if version > SCHEMA_VERSION:
                raise StoreUnavailable(
                    f"{self.where} was written by a newer Shardscope (schema {version}; this one reads up to "
                    f"{SCHEMA_VERSION}): upgrade shardscope on every replica, or pass --db another database"
                )
            for step in range(version, SCHEMA_VERSION):
                for statement in _MIGRATIONS[step]:
                    conn.execute(statement)
            if version < SCHEMA_VERSION:
                conn.execute("UPDATE meta SET value = %s WHERE key = 'schema'", (SCHEMA_VERSION,))
            problem = schema_problem(_found(conn.execute(_COLUMNS_SQL).fetchall()), ("secrets",))
            if problem is not None:
                raise StoreUnavailable(
                    f"{self.where} is not a whole Shardscope store ({problem}): restore it from a backup, or pass "
                    "--db another database (an empty one starts an empty store)"
                )
            total = conn.execute("SELECT value FROM meta WHERE key = 'bytes' FOR UPDATE").fetchone()
            self._recount(_Tx(conn), int(total[0]) if total is not None else -1)
            key = conn.execute("SELECT value FROM secrets WHERE key = 'run_key'").fetchone()
            if key is None:
                raise StoreUnavailable(f"{self.where} lacks its run key (table secrets): restore it from a backup")
            self._run_key = bytes(key[0])
            # A standby, or a role that may only read, fails here (SQLSTATE 25006, 42501), not on the first link.
            conn.execute("UPDATE meta SET value = %s WHERE key = 'opened'", (int(self.clock()),))

    def _hide(self, text: str) -> str:
        """``text`` with the URL's password blanked, should a message ever carry it."""
        password = urllib.parse.urlsplit(self.url).password if "://" in self.url else None
        text = _clip(text, 300)
        return text.replace(password, "***") if password else text

    def _unavailable(self, error: psycopg.Error, params: Mapping[str, Any]) -> StoreUnavailable:
        """One line naming the URL (without its password), what went wrong and what to do."""
        text = self._hide(str(error))
        low = text.lower()
        where = self.where
        user = params.get("user") or "this user"
        database = params.get("dbname") or user
        host = f"{params.get('host') or 'localhost'}:{params.get('port') or 5432}"
        state = error.sqlstate or ""
        if state == "28P01" or "password authentication failed" in low or "no password supplied" in low:
            return StoreUnavailable(
                f"cannot log in to {where} as {user} ({text}): check the password (PGPASSWORD, ~/.pgpass, or the "
                "URL) and the user name in --db"
            )
        if state == "3D000" or ("database" in low and "does not exist" in low):
            return StoreUnavailable(
                f"the database {database} does not exist on {host} ({text}): create it (createdb -h "
                f"{params.get('host') or 'localhost'} -p {params.get('port') or 5432} -U {user} {database}), or fix "
                f"its name in --db {where}"
            )
        if "role" in low and "does not exist" in low:
            return StoreUnavailable(
                f"{host} has no user {user} ({text}): create it (createuser), or fix the user name in --db {where}"
            )
        if "pg_hba.conf" in low:
            return StoreUnavailable(
                f"{host} refuses {user} from this host ({text}): allow it in the server's pg_hba.conf, or pass --db "
                "another server"
            )
        if state.startswith("25") or state == "42501":
            return StoreUnavailable(
                f"{where} does not take writes ({text}): connect to the primary rather than a standby, and let "
                "this user create and write Shardscope's tables"
            )
        if isinstance(error, psycopg.OperationalError) and not state:
            return StoreUnavailable(
                f"cannot reach the PostgreSQL server at {where} ({text}): start it, or check the host and port in --db"
            )
        return StoreUnavailable(f"cannot use the PostgreSQL store {where} ({text}): check it, or pass --db another")

    def close(self) -> None:
        """Closes the pool and its connections; safe to call more than once."""
        self.stop_watch()
        with self._open_lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()

    @property
    def closed(self) -> bool:
        return self._pool is None

    @contextmanager
    def _connection(self) -> Iterator[psycopg.Connection[Any]]:
        """A connection from the pool, waited for at most ``max_db_wait_ms`` — in slices of :data:`WAIT_SLICE_S`,
        so that a wait begun just before the store was found down ends with its 503 then, not at the end."""
        pool = self._pool
        if pool is None:
            raise StoreClosed(f"the store {self.where} is closed")
        deadline = time.monotonic() + self.wait_s
        while True:
            self._check_up()
            left = deadline - time.monotonic()
            try:
                conn = pool.getconn(timeout=max(0.001, min(WAIT_SLICE_S, left)))
                break
            except PoolTimeout:
                if left <= WAIT_SLICE_S:
                    raise
        try:
            yield conn
        finally:
            pool.putconn(conn)

    def _check(self, conn: psycopg.Connection[Any]) -> None:
        """The pool's check of a connection before it is handed out: one the server dropped is replaced, not used,
        and the store's watch looks at once (a database that went away is then found down in milliseconds)."""
        try:
            ConnectionPool.check_connection(conn)
        except Exception:
            self.wake_watch()
            raise

    def _probe(self) -> str | None:
        # A connection of its own, not the pool's: a pool busy under load is not a database gone, and the look
        # finds the database back before the pool's back-off does.
        with psycopg.connect(self.url, autocommit=True, **self._connect_args()) as conn:
            conn.execute(f"SET statement_timeout = {max(1, round(self.wait_s * 1000))}")
            return schema_problem(_found(conn.execute(_COLUMNS_SQL).fetchall()), ("secrets",))

    def _down_reason(self, error: BaseException) -> str | None:
        if isinstance(error, PoolTimeout) or not isinstance(error, psycopg.OperationalError):
            return None
        state = error.sqlstate or ""
        if state and not state.startswith("08") and state not in ("57P01", "57P02", "57P03"):
            return None  # the server answered: a lock or statement timeout, a refusal
        low = str(error).lower()
        what = next((words for key, words in _DOWN_WORDS if key in low), "the connection failed")
        return f"PostgreSQL does not answer: {what}"

    def _timed_out(self, error: psycopg.Error) -> ApiError | None:
        """503 with Retry-After for a wait the server ended: a row lock another replica held past
        ``max_db_wait_ms`` (55P03), a statement past ``max_db_statement_ms`` (57014); None for other errors."""
        if isinstance(error, PoolTimeout):
            return self._unavailable_error(
                f"this server's store was busy: no connection to it was free within {self.wait_s * 1000:.0f} ms "
                "(settings max_db_wait_ms, max_db_connections); nothing was stored"
            )
        state = error.sqlstate or ""
        if state == "55P03":
            return self._unavailable_error(
                f"this server's store was busy: a row lock was not free within {self.wait_s * 1000:.0f} ms (setting "
                "max_db_wait_ms); nothing was stored"
            )
        if state == "57014":
            return self._unavailable_error(
                f"a statement took longer than {self.statement_ms} ms (setting max_db_statement_ms); nothing was stored"
            )
        return None

    def _lost(self, error: BaseException) -> ApiError | None:
        """The store went away (:meth:`_down_reason`): marked down (requests get 503 at once until the watch finds
        it back), and this request's 503; None for other errors."""
        reason = self._down_reason(error)
        if reason is None:
            return None
        self.mark_down(reason, error)
        return self._unavailable_error(f"this server's store does not answer ({reason}): nothing was stored")

    # ---- transactions ------------------------------------------------------------------------------

    @contextmanager
    def _write_tx(self) -> Iterator[Conn]:
        with self._connection() as conn, conn.transaction():
            yield _Tx(conn)

    def _lock_total(self, conn: Conn) -> None:
        # The byte total's row, locked until COMMIT: a write that reads before it writes takes it first, so
        # writes are serial across replicas as they are in one SQLite process.
        conn.execute("SELECT value FROM meta WHERE key = 'bytes' FOR UPDATE")

    def _reserve(self, conn: Conn, size: int) -> None:
        # One statement both checks and counts (the row is locked from here to COMMIT): a round trip less per
        # write, and a write that only adds never holds the row while it is still talking to the database.
        if self.max_bytes is None:
            conn.execute("UPDATE meta SET value = value + ? WHERE key = 'bytes'", (size,))
            return
        counted = conn.execute(
            "UPDATE meta SET value = value + ? WHERE key = 'bytes' AND value >= 0 AND value + ? <= ? RETURNING value",
            (size, size, self.max_bytes),
        ).fetchone()
        if counted is None:
            used = int(conn.execute("SELECT value FROM meta WHERE key = 'bytes'").fetchone()[0])
            if used < 0:  # a total that cannot be right: counted again (the row is ours), then the budget checked
                used = self._recount(conn, used)
                if used + size <= self.max_bytes:
                    conn.execute("UPDATE meta SET value = value + ? WHERE key = 'bytes'", (size,))
                    return
            raise self._full(used, size)

    @contextmanager
    def _job_tx(self) -> Iterator[Conn]:
        with self._connection() as conn, conn.transaction():
            # A job's state is worth nothing once its replica is gone: no waiting for the WAL flush.
            conn.execute("SET LOCAL synchronous_commit = off")
            yield _Tx(conn)

    def _write_error(self, error: BaseException) -> BaseException:
        if not isinstance(error, psycopg.Error) or isinstance(error, psycopg.IntegrityError):
            return error
        handled = self._lost(error) or self._timed_out(error)
        if handled is not None:
            return handled
        state = error.sqlstate or ""
        if state in ("XX001", "XX002"):
            return self._found_corrupt(error)
        if state == "53100":
            return self._disk_full(error)
        if isinstance(error, psycopg.OperationalError) or state.startswith("25") or state == "42501":
            return self._cannot_write(error)
        return error

    # ---- reads ---------------------------------------------------------------------------------------

    def _read(self, sql: str, args: Sequence[Any]) -> list[Any]:
        try:
            with self._connection() as conn:
                rows: list[Any] = conn.execute(_pg(sql), args).fetchall()
                return rows
        except psycopg.Error as e:
            raise self._read_error(e) from e

    def _read_error(self, error: psycopg.Error) -> Exception:
        if (error.sqlstate or "") in ("XX001", "XX002"):
            return self._found_corrupt(error)
        if (error.sqlstate or "") == "42P01":  # a table is gone: the schema is no longer whole
            return self._found_corrupt(error)
        handled = self._lost(error) or self._timed_out(error)
        if handled is not None:
            return handled
        if isinstance(error, psycopg.OperationalError):
            log.error("%s: cannot read (%s)", self.where, error)
            return self._unavailable_error(f"this server's store cannot be read right now ({_clip(str(error))})")
        return error

    def open_blob(self, table: str, record_id: str) -> Blob | None:
        """The payload stored under ``record_id`` to read in pieces, or None."""
        _check_table(table)
        if not is_valid_id(record_id):
            return None
        rows = self._read(f"SELECT length(payload), size, digest FROM {table} WHERE id = ?", (record_id,))  # noqa: S608
        if not rows:
            return None
        length, size, stored = int(rows[0][0]), int(rows[0][1]), rows[0][2]
        self._blob_checked(table, record_id, length, size)
        blob = PgBlob(self, table, record_id, length)
        blob.digest = bytes(stored) if stored is not None else None
        return blob


def _close_later(pool: ConnectionPool[psycopg.Connection[Any]], seconds: float) -> None:
    """Closes a pool a fresh one replaced, once the requests that held its connections are done."""
    time.sleep(seconds)
    pool.close(timeout=seconds)
