"""What a page's address determines it will ask for first, named in its response's ``Link`` header.

A shared link opens ``/snapshots.html?snapshot=<id>`` (or ``?run=<id>``; a compare page names two such pages
as its sides). The page needs that snapshot before it can draw anything, and its module asks for it only once
its forty-odd modules have arrived and run: on a 2-core machine, 300 ms after the page. Named here as
``rel=preload; as=fetch``, the browser asks for it with the page's first bytes, and the module's own
``fetch`` takes the preloaded answer (``crossorigin=anonymous``: the same request mode and credentials as
``fetch``'s defaults, without which the browser would ask twice). ``frontend/js/hosts/early.js`` does the
same from the page for what it can determine after the first module runs; this is the part the server can
name before any module, mirrored from it (``tests/test_snapshots_browser.py`` checks in Chromium that the page
asks once, through the preload; ``tests/test_api.py`` what each address names).

Only well-formed ids are named (the store's own pattern): anything else is the page's to report.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qs, urlsplit

from sharding_core.snapshot.format import ID_PATTERN

_ID = re.compile(ID_PATTERN)

MAX_QUERY_CHARS = 4096
"""A longer query names nothing early (the page reads it, and says what is wrong with it)."""


def _snapshot_of(query: dict[str, list[str]]) -> list[str]:
    """The snapshot (or merged run) a snapshots page's query opens first, if any (early.js ``snapshotOf``)."""
    run = query.get("run", [""])[0]
    if run:
        return [f"/api/snapshots/runs/{run}"] if _ID.fullmatch(run) else []
    snapshot = query.get("snapshot", [""])[0]
    return [f"/api/snapshots/{snapshot}"] if _ID.fullmatch(snapshot) else []


def _side_of(side: str, host: str) -> list[str]:
    """A compare side's snapshot, when the side is this server's snapshots page (early.js ``sideOf``)."""
    parts = urlsplit(side.strip())
    if parts.netloc not in ("", host) or parts.scheme not in ("", "http", "https") or parts.path != "/snapshots.html":
        return []  # another origin's page (or none): the compare panel says what it can
    return _snapshot_of(parse_qs(parts.query))


def first_fetches(path: str, query_string: str, host: str) -> list[str]:
    """The API addresses the page at ``path`` with ``query_string`` asks for before anything else (``host``: the
    request's, for a compare side written as an absolute address)."""
    if len(query_string) > MAX_QUERY_CHARS:
        return []
    query = parse_qs(query_string)
    if path == "/snapshots.html":
        wanted = _snapshot_of(query)
    elif path == "/compare.html":
        wanted = [*_side_of(query.get("a", [""])[0], host), *_side_of(query.get("b", [""])[0], host)]
    else:
        return []
    return list(dict.fromkeys(wanted))


def link_header(path: str, query_string: str, host: str) -> bytes | None:
    """The ``Link`` header preloading :func:`first_fetches` (None when the page needs none)."""
    urls = first_fetches(path, query_string, host)
    if not urls:
        return None
    return ", ".join(f"<{url}>; rel=preload; as=fetch; crossorigin=anonymous" for url in urls).encode("ascii")
