"""A search's worker process: ``python -m sharding_core.searching.worker FILE.py FN`` compiles candidates of
``FN`` one after another (:func:`sharding_core.searching.compiling.compile_job`), each asked for as one JSON line on
standard input and answered as one JSON line on the protocol's descriptor (standard output as the process
started; the user's prints go to standard error). It imports JAX and starts the compile-only target once for
all its candidates; its parent (:mod:`sharding_core.searching.pool`) bounds its time and memory and stops it, and
on Linux the kernel stops it when its parent goes (:func:`die_with_parent`)."""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sharding_core.errors import ShardingError
from sharding_core.processes import PARENT_ENV as PARENT_ENV  # the pool names its workers' parent by it
from sharding_core.processes import die_with_parent
from sharding_core.searching.compiling import Job, compile_job


def load(path: str, name: str) -> Callable[..., Any]:
    """The function ``name`` of the Python file ``path`` (its directory on sys.path, as python does)."""
    file = Path(path)
    sys.path.insert(0, str(file.resolve().parent))
    spec = importlib.util.spec_from_file_location(f"_shardscope_search_{file.stem}", file)
    if spec is None or spec.loader is None:
        raise ShardingError("bad_target", f"cannot import {path} as Python")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    fn = getattr(module, name, None)
    if not callable(fn):
        raise ShardingError("bad_target", f"{path} has no function {name!r}")
    return fn  # type: ignore[no-any-return]


def failure(e: BaseException) -> dict[str, Any]:
    if isinstance(e, ShardingError):
        return {"code": e.code, "message": e.message, "hint": e.hint}
    tail = "".join(traceback.format_exception(type(e), e, e.__traceback__))[-1500:]
    return {
        "code": "compile_failed",
        "message": f"{type(e).__name__}: {str(e)[:1000]}",
        "hint": None,
        "traceback": tail,
    }


def main(argv: list[str]) -> int:
    die_with_parent()
    protocol = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # what the user's code prints goes to standard error, never into the protocol
    os.environ.setdefault("JAX_PLATFORMS", "cpu")  # compile-only: no accelerator is started (nor needed)
    fn: Callable[..., Any] | None = None
    for line in sys.stdin:
        request = json.loads(line)
        try:
            devices = str(request["devices"])
            count = devices.partition(":")[2]
            if fn is None and devices.startswith("cpu:") and count.isdigit():
                import jax

                jax.config.update("jax_num_cpu_devices", int(count))
            fn = fn or load(argv[0], argv[1])
            answer: dict[str, Any] = {"index": request["index"], "result": compile_job(fn, Job.from_json(request))}
        except Exception as e:  # noqa: BLE001 - every failure goes back to the parent as data
            answer = {"index": request.get("index"), "error": failure(e)}
        protocol.write(json.dumps(answer, allow_nan=False) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
