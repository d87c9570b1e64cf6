"""Compiling a search's candidates on a team's server (``shardscope search --server URL``): the model's file and
the candidates, in estimate order, go to ``POST /api/searches``; every replica of the server that shares its store
compiles them (:mod:`server.services.searches`), each candidate once; this process polls ``GET
/api/searches/{id}`` and answers each candidate as its figures arrive, exactly as :mod:`sharding_core.searching.
pool` answers a local worker's. The search is ranked and its pick planned here, as a local search's is.

The file is sent whole and imported on the server by its name: it must import only installed packages (not a
sibling module of its own), as a file a worker process imports by path does."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from sharding_core.dashboard import PublishError, base_url, get_json, post_json
from sharding_core.errors import ShardingError
from sharding_core.searching.compiling import Job
from sharding_core.searching.pool import Clock, Done, not_compiled

POLL_S = 1.0
GRACE_S = 30.0
"""How long past the search's deadline this process waits for the server to answer what it was compiling."""
MAX_FILE_BYTES = 256 * 1024
UNREACHABLE_S = 60.0
"""How long the server may not answer polls before the search gives up on it."""


def run_on_server(
    url: str,
    token: str | None,
    target: tuple[str, str],
    jobs: Sequence[Job],
    clock: Clock,
    done: Done,
    say: Callable[[str], None],
) -> None:
    """The jobs compiled by the server at ``url`` (see the module docstring): ``done`` is called once per job."""
    if not jobs:
        return
    base = base_url(url)
    path = Path(target[0])
    code = path.read_bytes()
    if len(code) > MAX_FILE_BYTES:
        raise ShardingError(
            "too_large",
            f"{path.name} is {len(code)} bytes; a search sends at most {MAX_FILE_BYTES} to the server",
            hint="search on this machine (without --server)",
        )
    remaining = clock.deadline() - time.monotonic()
    body = {
        "code": code.decode("utf-8"),
        "function": target[1],
        "file": path.name,
        "devices": jobs[0].devices,
        "budget_seconds": max(1.0, remaining),
        "jobs": [j.json() for j in jobs],
    }
    try:
        created = post_json(base, "/api/searches", body, token=token, timeout=60.0)
    except PublishError as e:
        raise ShardingError(e.code, f"the server did not take the search: {e.message}", hint=e.hint) from None
    by_index = {j.index: j for j in jobs}
    answered: set[int] = set()
    said = ""
    last_answer = time.monotonic()
    t0 = time.monotonic()
    while len(answered) < len(jobs):
        try:
            state: dict[str, Any] = get_json(base, str(created["url"]), timeout=30.0)
            last_answer = time.monotonic()
        except PublishError as e:
            if time.monotonic() - last_answer > UNREACHABLE_S:
                _give_up(by_index, answered, done, f"the server stopped answering: {e.message}")
                return
            time.sleep(POLL_S)
            continue
        for c in state["candidates"]:
            i = int(c["index"])
            if c["state"] == "done" and i not in answered and i in by_index:
                answered.add(i)
                done(by_index[i], dict(c["result"] or not_compiled("worker_crashed", "the server answered nothing")))
        counts = state["counts"]
        now = (f"on the server: {counts.get('done', 0)} of {len(jobs)} answered, {counts.get('compiling', 0)} "
               f"compiling, {len(state['replicas'])} replica(s) sharing")  # fmt: skip
        if now != said:
            said = now
            say(f"[{time.monotonic() - t0:.0f} s] {now}")
        if time.monotonic() > clock.deadline() + GRACE_S:
            _give_up(by_index, answered, done, "not compiled: the search's time budget ran out first", "budget")
            return
        if len(answered) < len(jobs):
            time.sleep(POLL_S)


def _give_up(by_index: dict[int, Job], answered: set[int], done: Done, message: str, code: str = "unreachable") -> None:
    for i, job in by_index.items():
        if i not in answered:
            answered.add(i)
            done(job, not_compiled(code, message))
