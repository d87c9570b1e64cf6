"""Send a snapshot to a running dashboard: :func:`publish` (``shardscope.show`` draws one inline instead).

Standard library only (``urllib``, ``json``): a training script needs none of the server's packages
to publish. The server never runs user code; it stores what it is sent and answers a share link.
"""

from __future__ import annotations

import json
import os
import secrets
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

import numpy as np

from sharding_core.capturing import capture
from sharding_core.errors import ShardingError
from sharding_core.snapshot.format import FORMAT, RUN_ID_RE

DEFAULT_URL = "http://127.0.0.1:8000"
URL_ENV = "SHARDSCOPE_URL"
TOKEN_ENV = "SHARDSCOPE_TOKEN"  # noqa: S105 - the name of an environment variable, not a secret
DASHBOARD_UNREACHABLE = "dashboard_unreachable"
BAD_URL = "bad_url"
BAD_RUN_ID = "bad_run_id"


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


def new_run_id() -> str:
    """A fresh run id: 128 random bits, URL-safe (what every process of one job must share).

    It is the run's write secret: whoever has it can add a part to the run. The dashboard stores
    the run under a read id derived from it (an HMAC), and links carry only that, so share the
    link, never the run id."""
    return secrets.token_urlsafe(16)


def is_snapshot(value: Any) -> bool:
    return isinstance(value, dict) and value.get("format") == FORMAT and "leaves" in value


def publish(
    tree: Any,
    name: str = "snapshot",
    url: str | None = None,
    *,
    token: str | None = None,
    run_id: str | None = None,
    timeout: float = 60.0,
    rules: Any = None,
    mesh: Any = None,
) -> str:
    """Captures ``tree`` (or takes a snapshot from :func:`capture` / :func:`inspect_jit`), posts it to
    the dashboard at ``url`` and returns the full share link.

    ``url`` defaults to ``$SHARDSCOPE_URL`` or http://127.0.0.1:8000; ``token`` to ``$SHARDSCOPE_TOKEN``
    (for a server started with ``shardscope serve --token``). In a ``jax.distributed`` job every
    process must call ``publish`` (it is a collective when ``run_id`` is not given: process 0 draws
    the run id and broadcasts it); each posts what it can address under that run id and gets the
    link of the merged run. The run id is the run's write secret: the link names the run by its
    read id, which cannot add parts. Raises :class:`PublishError` when the dashboard cannot be reached or
    refuses the snapshot; :func:`sharding_core.capture` works without a dashboard.
    """
    base = _base_url(url if url is not None else os.environ.get(URL_ENV, DEFAULT_URL))
    if is_snapshot(tree):
        snap = dict(tree)
        if name != "snapshot":
            snap["name"] = name
    else:
        snap = capture(tree, name, rules=rules, mesh=mesh)
    if run_id is not None and not RUN_ID_RE.fullmatch(run_id):
        raise PublishError(
            BAD_RUN_ID,
            "a run id is 22 to 64 characters of A-Z a-z 0-9 _ - (it is the run's secret)",
            hint="use sharding_core.new_run_id() on one process and pass it to all, or leave run_id out",
            url=base,
        )
    if run_id is not None or snap["process_count"] > 1:
        rid = run_id if run_id is not None else _shared_run_id()
        snap["run"] = {"id": rid, "process_index": snap["process_index"], "process_count": snap["process_count"]}
    answer = post_json(base, "/api/snapshots", snap, token=token, timeout=timeout)
    return base + str(answer["url"])


def post_json(base: str, path: str, payload: Any, *, token: str | None = None, timeout: float = 60.0) -> Any:
    """POSTs JSON to the dashboard; the answer as data, or a :class:`PublishError` saying what to do."""
    body = json.dumps(payload, separators=(",", ":"), allow_nan=False).encode()
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    token = token if token is not None else os.environ.get(TOKEN_ENV) or None
    if token:
        if not token.isascii() or not token.isprintable() or " " in token:
            raise PublishError(
                "bad_token",
                "the token must be printable ASCII without spaces: it travels in an HTTP Authorization header",
                hint="use the token `shardscope serve --token` was started with (serve refuses any other kind)",
                url=base,
            )
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(base + path, data=body, method="POST", headers=headers)  # noqa: S310 - http(s) only
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


def _shared_run_id() -> str:
    """Process 0's fresh run id, broadcast to every process of the job (a collective)."""
    from jax.experimental import multihost_utils

    mine = np.frombuffer(new_run_id().encode().ljust(32), dtype=np.uint8)
    shared = multihost_utils.broadcast_one_to_all(mine)
    return bytes(np.asarray(shared, dtype=np.uint8)).decode().strip()
