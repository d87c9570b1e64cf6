"""Long-running tool calls: one worker process per job, bounded in time, memory and number, reporting progress,
stopped the moment the client cancels.

Generic over the work: :meth:`Jobs.run` takes the worker's entry point and the request it is sent, and an
async ``progress`` callback (the MCP tool's ``ctx.report_progress``). While the worker runs, the parent looks
at it every :data:`POLL_S`: it forwards the worker's stage messages, reports progress at least every
:data:`HEARTBEAT_S` (seconds elapsed against the time limit, so the value always increases, as the protocol
asks), kills the worker past its time limit (``timeout``) or its resident-memory limit (``too_large``), and
kills it when the awaiting task is cancelled — the MCP SDK cancels a tool call's task on the client's
``notifications/cancelled`` (or when the HTTP request carrying it is closed) — before the cancellation goes on.
A job past :attr:`Limits.max_jobs` in flight is refused at once (``busy``), never queued without bound; a result
past :attr:`Limits.max_result_bytes` is refused while it is read, never held.

Workers are started with ``spawn`` (never ``fork``: the MCP server's process has threads, and JAX's CPU
device count is fixed per process).
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import time
from collections.abc import Awaitable, Callable
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import Any

import anyio
import orjson

from sharding_core.errors import ShardingError
from sharding_core.kernels.memory import resident_bytes
from sharding_core.units import fmt_bytes

POLL_S = 0.1
HEARTBEAT_S = 2.0
MAX_JOB_SECONDS = 600
"""A job's wall-clock limit (a Llama-3-8B plan compiles in 30-60 s; 70B with fixes takes minutes)."""
MAX_JOB_MEMORY = 8 * 2**30
"""A job's resident-memory limit (a Llama-3-70B plan peaks near 2 GiB: docs/planning.md)."""
MAX_JOBS = 2
"""Jobs in flight at once per server (each is a process compiling on the CPU)."""
MAX_RESULT_BYTES = 256 * 2**20
"""The largest answer a worker may send back (a plan of a large model is megabytes)."""

Progress = Callable[[float, float | None, str], Awaitable[None]]
"""``(progress, total, message)``: what the MCP tool reports to the client."""


@dataclasses.dataclass(frozen=True)
class Limits:
    seconds: float = MAX_JOB_SECONDS
    memory_bytes: int = MAX_JOB_MEMORY
    max_jobs: int = MAX_JOBS
    max_result_bytes: int = MAX_RESULT_BYTES


class Jobs:
    """The worker processes of one MCP server (see the module docstring)."""

    def __init__(self, limits: Limits | None = None) -> None:
        self.limits = limits if limits is not None else Limits()
        self.in_flight = 0
        self.started = 0
        self.context = multiprocessing.get_context("spawn")

    async def run(
        self, entry: Callable[[Connection, dict[str, Any]], None], request: dict[str, Any], progress: Progress
    ) -> dict[str, Any]:
        """Runs ``entry(conn, request)`` in a fresh process; its answer, or a ShardingError saying what went wrong."""
        if self.in_flight >= self.limits.max_jobs:
            raise ShardingError(
                "busy",
                f"{self.in_flight} compiling call(s) already run on this server (at most {self.limits.max_jobs})",
                hint="wait for one to finish, or cancel it, and call again",
            )
        self.in_flight += 1
        self.started += 1
        ours, theirs = self.context.Pipe(duplex=False)
        proc = self.context.Process(target=entry, args=(theirs, request), name="shardscope-mcp-job", daemon=True)
        try:
            proc.start()
            theirs.close()
            return await self._watch(proc, ours, progress)
        finally:
            self.in_flight -= 1
            _stop(proc)  # also on cancellation: the worker never outlives the call
            ours.close()

    async def _watch(self, proc: BaseProcess, conn: Connection, progress: Progress) -> dict[str, Any]:
        limits = self.limits
        t0 = time.monotonic()
        stage, last = "starting the worker (importing JAX)", -HEARTBEAT_S
        while True:
            elapsed = time.monotonic() - t0
            message = None
            while conn.poll():
                try:
                    kind, payload = _receive(conn, limits.max_result_bytes)
                except EOFError:
                    break
                if kind == "stage":
                    stage, last = str(payload), -HEARTBEAT_S
                    continue
                if kind == "done":
                    return dict(orjson.loads(payload))
                message = payload
                break
            if message is not None:
                details = {k: v for k, v in message.items() if k not in ("code", "message", "hint")}
                raise ShardingError(str(message["code"]), str(message["message"]), message.get("hint"), **details)
            if not proc.is_alive() and not conn.poll():
                raise ShardingError(
                    "worker_crashed",
                    f"the worker stopped (exit code {proc.exitcode}) after {elapsed:.1f} s without an answer",
                    hint="a crash in XLA or the user's code, or the machine ran out of memory; try a smaller program",
                )
            if elapsed > limits.seconds:
                raise ShardingError(
                    "timeout",
                    f"the call ran past its limit of {limits.seconds:.0f} s ({stage}) and was stopped",
                    hint="plan a smaller configuration, or start the server with a larger --max-seconds",
                )
            rss = resident_bytes(proc.pid) if proc.pid is not None else None
            if rss is not None and rss > limits.memory_bytes:
                raise ShardingError(
                    "too_large",
                    f"the worker used {fmt_bytes(rss)}, past its limit of {fmt_bytes(limits.memory_bytes)} "
                    f"({stage}), and was stopped",
                    hint="plan a smaller configuration, or start the server with a larger --max-memory",
                )
            if elapsed - last >= HEARTBEAT_S:
                last = elapsed
                await progress(round(elapsed, 1), float(limits.seconds), f"{stage} ({elapsed:.0f} s)")
            await anyio.sleep(POLL_S)


def _receive(conn: Connection, max_bytes: int) -> tuple[str, Any]:
    """One message from the worker, refused past ``max_bytes`` while it is read."""
    try:
        raw = conn.recv_bytes(max_bytes)
    except OSError:
        raise ShardingError(
            "too_large",
            f"the answer is larger than {fmt_bytes(max_bytes)}",
            hint="plan a smaller program",
        ) from None
    import pickle

    kind, payload = pickle.loads(raw)  # noqa: S301 - our own worker's message over our own pipe
    return str(kind), payload


def _stop(proc: BaseProcess) -> None:
    if proc.pid is None:
        return
    if proc.is_alive():
        proc.kill()
    proc.join(timeout=5)
