"""The kernel lab's worker process entry point: set up JAX on CPU, then run jobs from a pipe until it closes.

Started by the server's process pool (:mod:`server.pool`) with ``spawn``; the protocol on the pipe:
the worker sends ``("ready", pid)`` once, then for each ``(job, options)`` it receives sends
``("state", "compiling" | "running")`` progress, optionally ``("retiring", None)``, and finally
``("result", data)`` or ``("error", {"code", "message", ...})``. ``None`` (or a closed pipe) ends it.
"""

from __future__ import annotations

import importlib
import os
import signal
from collections.abc import Mapping, Sequence
from multiprocessing.connection import Connection
from typing import Any

RECYCLE_ABOVE_DEVICES = 512
"""After a run on more devices than this the worker exits: a fresh one beats the gigabytes a large compile keeps."""


def main(conn: Connection, setup: Sequence[str]) -> None:
    """A worker process: import JAX on CPU, then run jobs from ``conn`` until it closes.

    ``setup``: ``"module:function"`` names called first (tests register kernels that hang or crash).
    """
    os.environ["JAX_PLATFORMS"] = "cpu"
    os.environ["TPU_SKIP_MDS_QUERY"] = "1"  # libtpu, if installed, must never query a metadata server
    # The device count comes from jax_num_cpu_devices; an inherited XLA flag for it would fight that.
    flags = os.environ.get("XLA_FLAGS", "").split()
    os.environ["XLA_FLAGS"] = " ".join(f for f in flags if "xla_force_host_platform_device_count" not in f)
    # Ctrl-C in a terminal reaches the whole process group; the server decides when workers stop.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    import jax  # noqa: F401 - imported here, after the environment is set

    from sharding_core.kernels import catalog, runner

    for name in setup:
        module, _, function = name.partition(":")
        getattr(importlib.import_module(module), function)()
    del catalog
    try:
        conn.send(("ready", os.getpid()))
    except OSError:  # the server stopped (or gave up on us) while JAX was importing: nothing to report to
        return
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return  # the server is gone
        if message is None:
            return
        job, options = message
        reply = _run(conn, job, options, runner)
        retire = job.size > int(options.get("recycle_above_devices", RECYCLE_ABOVE_DEVICES))
        try:
            if retire:
                conn.send(("retiring", None))  # before the answer, so the server never sends another job here
            conn.send(reply)
        except (OSError, ValueError):
            return
        if retire:
            return


def _run(conn: Connection, job: Any, options: Mapping[str, Any], runner: Any) -> tuple[str, Any]:
    try:
        runner.use_cpu_devices(job.size)
        result = runner.run_job(
            job,
            lambda state, needs: conn.send(("state", state if needs is None else (state, needs))),
            max_text_chars=int(options["max_text_chars"]),
        )
        return ("result", result)
    except runner.KernelRunError as e:
        return ("error", e.to_dict())
    except Exception as e:  # noqa: BLE001 - a bug in the runner must still answer the job
        return ("error", {"code": "worker_error", "message": f"{type(e).__name__}: {e}"[:4000]})
