"""Send a snapshot to a running dashboard: :func:`publish` (``shardscope.show`` draws one inline instead).

Standard library only (``urllib``, ``json``): a training script needs none of the server's packages
to publish. The server runs none of it: it stores what it is sent and answers a share link.
"""

from __future__ import annotations

import os
import secrets
from typing import Any

import numpy as np

from sharding_core.capturing import capture
from sharding_core.dashboard import DEFAULT_URL, URL_ENV, _base_url
from sharding_core.dashboard import PublishError as PublishError  # where callers have always imported it from
from sharding_core.dashboard import post_json as post_json
from sharding_core.snapshot.format import FORMAT, RUN_ID_RE

BAD_RUN_ID = "bad_run_id"


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


def _shared_run_id() -> str:
    """Process 0's fresh run id, broadcast to every process of the job (a collective)."""
    from jax.experimental import multihost_utils

    mine = np.frombuffer(new_run_id().encode().ljust(32), dtype=np.uint8)
    shared = multihost_utils.broadcast_one_to_all(mine)
    return bytes(np.asarray(shared, dtype=np.uint8)).decode().strip()
