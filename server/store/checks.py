"""What the store checks of what it reads (issue 29): the schema at start and while it runs, and each record
before a client gets it.

* **The schema** — every table Shardscope reads, with every column it reads (:data:`COLUMNS`), not only the
  version number: a store missing a table (``links`` dropped by hand, a restore that left one out) is refused
  at start with one line naming the table, and found while running by the store's watch (``/api/health`` then
  says ``corrupt``, and nothing more is written).
* **Records** — a share link or a snapshot is stored with the SHA-256 of its payload (``digest``, schema 5)
  and its counted ``size``; a read checks both before anything is sent (records stored before schema 5 have no
  digest: their length against ``size``, and where the server parses them, the parse, stand in). A damaged
  record is answered 500 ``stored_record_damaged`` naming the record and the command that deletes it, never
  served as broken JSON with a 200: it is the server's fault (its data), not the request's, so not a 4xx, and
  not ``internal_error`` either, since it is understood and its remedy known (docs/reliability.md).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Mapping
from typing import Any, Final

from server.errors import ApiError

RECORD_DAMAGED: Final = "stored_record_damaged"
RECORD_OVERHEAD: Final = 128
"""Bytes counted per record on top of its payload: the row, its id and index entries (server.store.base)."""

COLUMNS: Final[Mapping[str, frozenset[str]]] = {
    "links": frozenset({"id", "created", "payload", "size", "digest"}),
    "snapshots": frozenset({"id", "created", "payload", "size", "digest"}),
    "runs": frozenset({"run", "process_index", "snapshot_id", "created"}),
    "run_keys": frozenset({"run", "key", "value", "size"}),
    "meta": frozenset({"key", "value"}),
    "kernel_jobs": frozenset(
        {"id", "owner", "kernel", "state", "created", "beat", "finished", "peak_memory", "result", "failure", "size"}
    ),
    "kernel_results": frozenset({"key", "result", "failure", "created", "size"}),
    "searches": frozenset({"id", "code", "function", "file", "devices", "created", "deadline", "polled", "size"}),
    "search_jobs": frozenset({"search", "idx", "position", "job", "state", "owner", "beat", "seconds", "result"}),
}
"""The tables every store has, each with the columns Shardscope reads (a PostgreSQL store also has ``secrets``)."""

DELETE_COMMANDS: Final[Mapping[str, str]] = {
    "links": "shardscope store delete --link={id}",
    "snapshots": "shardscope store delete --snapshot={id}",
    "kernel_jobs": "shardscope store delete --job={id}",
}
NAMES: Final[Mapping[str, str]] = {"links": "share link", "snapshots": "snapshot", "kernel_jobs": "kernel job"}

log = logging.getLogger("shardscope.store")


def digest(payload: bytes) -> bytes:
    """What a record is stored with to prove it unchanged when read: the SHA-256 of its payload."""
    return hashlib.sha256(payload).digest()


def schema_problem(found: Mapping[str, frozenset[str] | set[str]], extra: tuple[str, ...] = ()) -> str | None:
    """What is missing from a store whose tables have the columns ``found`` (table -> columns; a table not
    there is left out), or None. ``extra``: tables this kind of store has besides :data:`COLUMNS`."""
    missing = [t for t in (*COLUMNS, *extra) if t not in found]
    if len(missing) == 1:
        return f"the table {missing[0]} is missing"
    if missing:
        return f"the tables {', '.join(missing)} are missing"
    for table, columns in COLUMNS.items():
        lacking = sorted(columns - set(found[table]))
        if lacking:
            return f"the table {table} lacks the column{'s' if len(lacking) > 1 else ''} {', '.join(lacking)}"
    return None


def size_problem(length: int, size: int) -> str | None:
    """Why a payload of ``length`` bytes cannot be the record counted as ``size`` (its payload plus one record's
    overhead, or two for a run's part: its snapshot and its runs row), or None."""
    if size - length in (RECORD_OVERHEAD, 2 * RECORD_OVERHEAD):
        return None
    return f"its payload is {length} bytes where {size - RECORD_OVERHEAD} were stored"


def payload_problem(payload: bytes, size: int, stored_digest: bytes | None) -> str | None:
    """Why a stored payload is not what was written (its digest, or before schema 5 its length), or None."""
    if stored_digest is not None:
        return None if digest(payload) == bytes(stored_digest) else "its bytes are not those that were stored"
    return size_problem(len(payload), size)


def damaged(table: str, record_id: str, what: str) -> ApiError:
    """500 ``stored_record_damaged``: the record ``record_id`` of ``table`` cannot be answered with, why, and the
    command an operator deletes it with. Logged, since only the operator can act on it."""
    name = NAMES.get(table, "record")
    command = DELETE_COMMANDS.get(table, "shardscope store prune").format(id=record_id)
    log.error("the stored %s %s is damaged (%s): `%s --db <the store>` deletes it", name, record_id, what, command)
    return ApiError(
        500,
        RECORD_DAMAGED,
        f"the stored {name} {record_id} is damaged ({what}): this server cannot answer with it",
        hint=f"tell the server's operator: `{command} --db <the server's --db>` deletes it (or restore the store "
        "from a backup)",
        record=record_id,
        table=table,
    )


def snapshot_problem(snapshot: Any) -> str | None:
    """Why a parsed stored snapshot (or merged run) is not one, by the fields every reader of it uses, or None."""
    if not isinstance(snapshot, dict):
        return f"it is a JSON {type(snapshot).__name__}, not an object"
    for field, kind in (("devices", dict), ("meshes", list), ("layouts", list), ("leaves", list)):
        if not isinstance(snapshot.get(field), kind):
            return f"its field {field} is missing or not a JSON {'object' if kind is dict else 'array'}"
    return None


def link_problem(link: Any) -> str | None:
    """Why a parsed stored share link is not one (``{"view": str, "state": object}``), or None."""
    if not isinstance(link, dict) or not isinstance(link.get("view"), str) or not isinstance(link.get("state"), dict):
        return 'it is not {"view": text, "state": object}'
    return None
