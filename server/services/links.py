"""Share links in the store: a view and its state as compact JSON under an unguessable id."""

from __future__ import annotations

from typing import Any

import orjson

from server.errors import ApiError
from server.quota import WriteQuota
from server.store import RECORD_OVERHEAD, Store
from server.store.checks import damaged, link_problem

LINKS = "links"


def link_payload(view: str, state: dict[str, Any], max_bytes: int) -> bytes:
    """What a link stores: its view and state as compact JSON, within ``max_bytes`` (else 413)."""
    payload = orjson.dumps({"view": view, "state": state})
    if len(payload) > max_bytes:
        raise ApiError(
            413,
            "too_large",
            f"the link payload is {len(payload)} bytes as JSON; at most {max_bytes} are allowed "
            "(setting max_link_bytes)",
            hint="keep only what the view needs to reopen in the state",
            limit=max_bytes,
        )
    return payload


def store_link(store: Store, quota: WriteQuota, client: str, view: str, state: dict[str, Any], max_bytes: int) -> str:
    """Stores a link (links that come with a record are stored with it: Store.put_linked); its id.
    Past the client's write quota 429 quota_exceeded; past the store's byte budget, or on a full disk, 507
    insufficient_storage."""
    payload = link_payload(view, state, max_bytes)
    with quota.spending(client, len(payload) + RECORD_OVERHEAD):
        return store.put(LINKS, payload)


def read_link(store: Store, link_id: str) -> dict[str, Any] | None:
    """A stored link parsed and checked (``{"view": text, "state": object}``), or None when there is none; a
    damaged one is 500 ``stored_record_damaged`` naming it (never its bytes with a 200)."""
    payload = store.get(LINKS, link_id)
    if payload is None:
        return None
    try:
        link = orjson.loads(payload)
    except orjson.JSONDecodeError:
        raise damaged(LINKS, link_id, "it is not JSON") from None
    problem = link_problem(link)
    if problem is not None:
        raise damaged(LINKS, link_id, problem)
    parsed: dict[str, Any] = link
    return parsed
