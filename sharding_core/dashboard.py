"""The dashboard's HTTP API as a client calls it: :func:`post_json`, :func:`get_json` and :class:`PublishError`.

Standard library only (``urllib``, ``json``), below everything that talks to a dashboard (:mod:`.publishing`, a
search on a team's server: :mod:`.searching.remote`), so that none of them imports another for it.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from sharding_core.errors import ShardingError

DEFAULT_URL = "http://127.0.0.1:8000"
URL_ENV = "SHARDSCOPE_URL"
TOKEN_ENV = "SHARDSCOPE_TOKEN"  # noqa: S105 - the name of an environment variable, not a secret
DASHBOARD_UNREACHABLE = "dashboard_unreachable"
BAD_URL = "bad_url"


class PublishError(ShardingError):
    """The dashboard did not take the snapshot: not reachable, a token it refused, or a snapshot it refused.

    ``url`` is the dashboard tried; ``status`` the HTTP status when it answered (None when it did not).
    """

    def __init__(
        self, code: str, message: str, hint: str | None = None, *, url: str, status: int | None = None, **details: Any
    ) -> None:
        super().__init__(code, message, hint, url=url, status=status, **details)
        self.url = url
        self.status = status


def post_json(base: str, path: str, payload: Any, *, token: str | None = None, timeout: float = 60.0) -> Any:
    """POSTs JSON to the dashboard; the answer as data, or a :class:`PublishError` saying what to do."""
    return _send(base, path, json.dumps(payload, separators=(",", ":"), allow_nan=False).encode(), token, timeout)


def get_json(base: str, path: str, *, timeout: float = 60.0) -> Any:
    """GETs JSON from the dashboard (reads need no token); the answer as data, or a :class:`PublishError`."""
    return _send(base, path, None, None, timeout)


def _send(base: str, path: str, body: bytes | None, token: str | None, timeout: float) -> Any:
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    token = None if body is None else token if token is not None else os.environ.get(TOKEN_ENV) or None
    if token:
        if not token.isascii() or not token.isprintable() or " " in token:
            raise PublishError(
                "bad_token",
                "the token must be printable ASCII without spaces: it travels in an HTTP Authorization header",
                hint="use the token `shardscope serve --token` was started with (serve refuses any other kind)",
                url=base,
            )
        headers["Authorization"] = f"Bearer {token}"
    method = "GET" if body is None else "POST"
    request = urllib.request.Request(base + path, data=body, method=method, headers=headers)  # noqa: S310 - http(s) only
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 - scheme checked in _base_url
            return json.loads(response.read())
    except urllib.error.HTTPError as e:
        raise _refused(base, e) from None
    except (TimeoutError, urllib.error.URLError, OSError) as e:
        reason = getattr(e, "reason", e)
        raise PublishError(
            DASHBOARD_UNREACHABLE,
            f"could not reach the Shardscope dashboard at {base} ({reason})",
            hint="start it with `shardscope serve` (or `make serve`), or pass url= / set $SHARDSCOPE_URL; "
            "sharding_core.capture(tree) needs no dashboard and returns the snapshot as data",
            url=base,
        ) from None


def _refused(base: str, e: urllib.error.HTTPError) -> PublishError:
    try:
        error = json.loads(e.read()).get("error") or {}
    except (ValueError, AttributeError, OSError):
        error = {}
    code = str(error.get("code") or f"http_{e.code}")
    message = str(error.get("message") or f"the dashboard at {base} answered HTTP {e.code}")
    hint = error.get("hint")
    if e.code in (401, 403) and code in ("unauthorized", "bad_token"):
        hint = "pass token= (or set $SHARDSCOPE_TOKEN) to the token the server was started with"
    details = {k: v for k, v in error.items() if k not in ("code", "message", "hint", "url", "status")}
    return PublishError(code, message, hint, url=base, status=e.code, **details)


def base_url(url: str) -> str:
    """The dashboard's address as requests are made to it (http(s) only; :class:`PublishError` otherwise)."""
    return _base_url(url)


def _base_url(url: str) -> str:
    parsed = urllib.parse.urlsplit(url.strip())
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise PublishError(
            BAD_URL,
            f"the dashboard URL must be http:// or https:// with a host, got {url[:200]!r}",
            hint=f"e.g. {DEFAULT_URL}",
            url=url[:200],
        )
    return urllib.parse.urlunsplit((parsed.scheme, parsed.netloc, parsed.path.rstrip("/"), "", ""))
