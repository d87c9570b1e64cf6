"""The worker process behind the MCP server's compiling tools: it runs one job and exits.

A job is a plain dict (:func:`main`'s ``request``): ``op`` (``plan``, ``why``, ``reshard``, ``findings``,
``search``), where the program comes from (``target`` ``FILE.py:FN``, or ``code`` with ``function``), the
device set and mesh. The worker builds the mesh over the set's devices (:func:`shardscope.mesh`: libtpu's
compile-only devices for ``tpu:`` sets, XLA's GPU compiler for ``gpu:`` sets, this process's CPU devices for
``cpu:N``), calls the function, and asks the public API (:func:`sharding_core.plan`,
:func:`sharding_core.explain`, :func:`sharding_core.inspect_jit`) for the snapshot. It sends
``("stage", text)`` messages while it works and one ``("done", bytes)`` or ``("error", dict)`` at the end,
over the pipe the parent gave it.

Its own process because a compile is CPU-bound and long (a Llama-3-8B step: tens of seconds), JAX fixes its
CPU device count per process, the user's code may hang or crash, and the parent must be able to stop it the
moment the client cancels (:mod:`shardscope.mcp.jobs`). Standard output is the MCP stdio transport's in the
parent, so the worker points its own at standard error before anything can print.
"""

from __future__ import annotations

import os
import sys
import tempfile
import traceback
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

SNIPPET_FILE = "snippet.py"
"""The file name a code snippet is written to (its lines appear in collectives' sources as ``snippet.py:N``)."""


def main(conn: Connection, request: dict[str, Any]) -> None:
    """The process's entry point (``multiprocessing`` spawn target)."""
    os.dup2(2, 1)  # stdout is the MCP stdio transport's in the parent: nothing the user's code prints goes there
    sys.stdout = sys.stderr
    os.environ.setdefault("JAX_PLATFORMS", "cpu")  # compile-only: no accelerator is started (nor needed)
    try:
        conn.send(("stage", "importing JAX and Shardscope"))
        result = run(request, lambda text: conn.send(("stage", text)))
        import orjson

        conn.send(("done", orjson.dumps(result, option=orjson.OPT_SERIALIZE_NUMPY)))
    except Exception as e:  # noqa: BLE001 - every failure goes back to the parent as data
        conn.send(("error", failure(e, request)))
    finally:
        conn.close()


def failure(e: BaseException, request: dict[str, Any]) -> dict[str, Any]:
    """An exception as the parent reports it: a ShardingError's code, message and hint; the user's own
    exception with the last lines of its traceback (what to change is in their code)."""
    from sharding_core.errors import ShardingError

    if isinstance(e, ShardingError):
        return {"code": e.code, "message": e.message, "hint": e.hint}
    where = request.get("target") or f"the code's {request.get('function', 'build')}"
    lines = traceback.format_exception(type(e), e, e.__traceback__)
    return {
        "code": "script_failed",
        "message": f"{where} raised {type(e).__name__}: {str(e)[:2000]}",
        "hint": "fix the program (traceback's last lines below) and call again",
        "traceback": "".join(lines)[-4000:],
    }


def run(request: dict[str, Any], stage: Callable[[str], None]) -> dict[str, Any]:
    """One job, in this process: the answer as JSON-ready data."""
    devices = str(request["devices"])
    _cpu_devices(devices)
    op = request["op"]
    if op == "reshard":
        return {"snapshot": _reshard(request, stage)}
    if op == "search":
        return _search(request, stage)
    fn = _function(request, stage)
    stage(f"building the mesh over {devices}")
    mesh = _mesh(request)
    stage("calling the function for the program and its abstract arguments")
    jitted, args, kwargs = _program(fn(mesh), request)
    import sharding_core

    if op == "why":
        budget = request.get("fixes", 4)
        stage(f"compiling, then compiling again with Shardy's origins and up to {budget} candidate fix(es)")
        with sharding_core.why_budget(recompiles=int(budget), seconds=float(request.get("fix_seconds", 60))):
            snap = sharding_core.explain(jitted, *args, **kwargs)
    else:
        stage("lowering and compiling (XLA), then reading the program")
        snap = (
            sharding_core.plan(jitted, *args, fit=True, **kwargs)
            if request.get("fit")
            else (sharding_core.plan(jitted, *args, **kwargs))
        )
    snap["name"] = str(request.get("name") or _name(request))
    out: dict[str, Any] = {"snapshot": snap}
    if op == "findings":
        findings = snap.get("findings")
        if findings is None:
            from sharding_core.errors import ShardingError

            raise ShardingError(
                "not_available",
                "findings are not available in this version: its plans carry no findings",
                hint="update Shardscope (findings arrive with issue 32)",
            )
        out["findings"] = findings
    return out


def _cpu_devices(devices: str) -> None:
    count = devices.partition(":")[2]
    if devices.startswith("cpu:") and count.isdigit() and 1 <= int(count) <= 2048:
        import jax

        jax.config.update("jax_num_cpu_devices", int(count))  # cpu:N runs on N of this process's CPU devices


def _name(request: dict[str, Any]) -> str:
    target = request.get("target")
    if target:
        file, _, fn = str(target).rpartition(":")
        return f"{Path(file).name}:{fn}"
    return f"{SNIPPET_FILE}:{request.get('function', 'build')}"


def _function(request: dict[str, Any], stage: Callable[[str], None]) -> Any:
    from shardscope.plan_command import load_function

    if request.get("target"):
        stage(f"importing {request['target']}")
        return load_function(str(request["target"]))
    import hashlib

    code = str(request["code"])
    # one directory per code text: the same snippet has the same source lines in every call (plan, then why)
    digest = hashlib.sha256(code.encode()).hexdigest()[:16]
    directory = Path(tempfile.gettempdir()) / f"shardscope-mcp-{os.getuid()}-{digest}"
    directory.mkdir(mode=0o700, exist_ok=True)
    if directory.is_symlink() or directory.stat().st_uid != os.getuid():  # not ours: a fresh one
        directory = Path(tempfile.mkdtemp(prefix="shardscope-mcp-"))
    path = directory / SNIPPET_FILE
    path.write_text(code, encoding="utf-8")
    stage("importing the code")
    return load_function(f"{path}:{request.get('function', 'build')}")


def _mesh(request: dict[str, Any]) -> Any:
    import shardscope

    mesh = request.get("mesh") or {}
    devices, slices = str(request["devices"]), int(request.get("slices", 1))
    shape = mesh.get("shape")
    names = mesh.get("axis_names") or ["data"]
    if not shape:
        from sharding_core.program.targets import compile_target

        shape = [len(compile_target(devices, slices=slices).devset)]
    options = {k: mesh[k] for k in ("order", "axis_types", "device_ids", "dcn_shape", "allow_split_physical_axes")}
    options = {k: v for k, v in options.items() if v is not None}
    return shardscope.mesh(devices, tuple(shape), tuple(names), slices=slices, **options)


def _program(made: Any, request: dict[str, Any]) -> tuple[Any, tuple[Any, ...], dict[str, Any]]:
    from sharding_core.errors import ShardingError

    if not isinstance(made, tuple) or len(made) != 2:
        raise ShardingError(
            "bad_target",
            f"{_name(request)} must return (jitted_fn, args), got {type(made).__name__}",
            hint="FN(mesh) returns the jitted step and its abstract arguments (a tuple, or a dict of keywords)",
        )
    jitted, fargs = made
    if isinstance(fargs, dict):
        return jitted, (), dict(fargs)
    return jitted, tuple(fargs), {}


def _reshard(request: dict[str, Any], stage: Callable[[str], None]) -> dict[str, Any]:
    """Moving an array from one spec to another: the identity jitted with ``out_shardings=to`` on an input
    placed with ``from`` (what the kernel lab's reshard kernel compiles), for the set's own compiler."""
    import jax

    import sharding_core
    from sharding_core.spec import parse_spec

    stage(f"building the mesh over {request['devices']}")
    mesh = _mesh(request)
    source = jax.sharding.NamedSharding(mesh, parse_spec(str(request["from_spec"])))
    target = jax.sharding.NamedSharding(mesh, parse_spec(str(request["to_spec"])))
    x = jax.ShapeDtypeStruct(tuple(request["shape"]), request.get("dtype", "float32"), sharding=source)

    def reshard(a: Any) -> Any:
        return a

    stage("compiling the reshard (XLA)")
    snap = sharding_core.inspect_jit(jax.jit(reshard, out_shardings=target), x)
    snap["name"] = f"reshard {request['from_spec']} -> {request['to_spec']}"
    return snap


def _search(request: dict[str, Any], stage: Callable[[str], None]) -> dict[str, Any]:
    """``sharding_core.search(fn, devices, **options)`` (issue 34), where this version has it."""
    import sharding_core

    search = getattr(sharding_core, "search", None)
    if search is None:
        from sharding_core.errors import ShardingError

        raise ShardingError("not_available", "search is not available in this version", hint="issue 34")
    fn = _function(request, stage)
    options: dict[str, Any] = {"slices": int(request.get("slices", 1))}
    if request.get("budget_seconds") is not None:
        options["budget"] = float(request["budget_seconds"])
    stage(f"searching meshes and rules on {request['devices']}")
    result: dict[str, Any] = search(fn, str(request["devices"]), **options)
    return {"search": result}
