"""The ``shardscope`` command: ``serve`` the dashboard, ``preview`` a layout in the terminal, ``plan`` a program for a
device set you don't have, list the ``settings``, look after a server's ``store``, ``nccl-fit`` a GPU cost profile to
your own nccl-tests output, ``calibrate`` a cost profile on the devices you have."""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import socket
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from server.hosts import is_loopback  # the one loopback check (standard library only: the CLI stays light)

__all__ = ["is_loopback", "main"]


def _ints(text: str, sep: str) -> tuple[int, ...]:
    parts = [p.strip() for p in text.replace(" ", "").split(sep) if p.strip()]
    try:
        return tuple(int(p) for p in parts)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected integers separated by {sep!r}, got {text!r}") from None


def _serve_parser(sub: Any) -> None:
    """``shardscope serve``'s options."""
    s = sub.add_parser("serve", help="serve the dashboard (loopback only unless --host says otherwise)")
    s.add_argument("--host", default="127.0.0.1")
    s.add_argument(
        "--port",
        type=int,
        default=8000,
        help="the port to listen on (0: a free one the system picks; either way the server prints "
        "'shardscope: listening on http://HOST:PORT' once it holds it)",
    )
    s.add_argument(
        "--db",
        default=None,
        help="the store: a SQLite file (default: links.db in the user data directory), or "
        "postgresql://user@host:port/database, which replicas of this server share (password: PGPASSWORD or "
        "~/.pgpass; needs the postgres extra)",
    )
    s.add_argument(
        "--token",
        default=os.environ.get("SHARDSCOPE_TOKEN") or None,
        help="for a shared server: every write (share links, kernel runs, snapshots) needs this token, as "
        "'Authorization: Bearer TOKEN', or the session a browser gets by opening the dashboard once at ?token=TOKEN; "
        "at least 128 bits of randomness (e.g. secrets.token_urlsafe(32)); default $SHARDSCOPE_TOKEN (an "
        "environment variable keeps it out of the process list)",
    )
    s.add_argument(
        "--allowed-host",
        action="append",
        default=None,
        metavar="NAME",
        help="a Host name this server answers to (repeatable; e.g. the name a proxy or other containers use). "
        "Loopback binds answer loopback names by default; a non-loopback bind without it answers any Host",
    )
    s.add_argument(
        "--mcp",
        action="store_true",
        help="also answer the Model Context Protocol at /mcp (streamable HTTP; with --token, every MCP request needs "
        "it as a bearer token): the quick tools and publish; needs the mcp extra",
    )
    s.add_argument(
        "--mcp-allow-code",
        action="store_true",
        help="with --mcp, let plan, why, findings and search run the Python callers send (in worker processes "
        "bounded in time and memory, not sandboxed): for a trusted team's server only",
    )
    s.add_argument(
        "--trusted-proxy",
        action="append",
        default=[],
        metavar="ADDRESS",
        help="a reverse proxy's address or network (e.g. 10.0.0.5, 172.18.0.0/16; repeatable): requests from it "
        "are taken to come from the client its X-Forwarded-For names and over the scheme its X-Forwarded-Proto "
        "names (per-client quotas, sessions, the session cookie's Secure); from anyone else those headers are "
        "ignored",
    )
    s.add_argument(
        "--setting",
        nargs=2,
        action="append",
        default=[],
        metavar=("NAME", "VALUE"),
        help="change a limit, e.g. --setting max_kernel_workers 4 (repeatable; `shardscope settings` lists them)",
    )


def _store_parser(sub: Any) -> None:
    """``shardscope store info|prune|delete``'s options."""
    st = sub.add_parser("store", help="look after a server's store: what it holds, prune it, delete records")
    actions = st.add_subparsers(dest="action", required=True)
    for action, what in (
        ("info", "records, bytes and runs, and the byte total against the budget"),
        ("prune", "delete by age (--older-than DAYS) and/or the oldest until the store is under --max-bytes"),
        (
            "delete",
            "delete one run (--run=READ_ID), snapshot (--snapshot=ID), link and what it opens (--link=ID) or kernel "
            "job (--job=ID); give the id after '=': one may begin with '-'",
        ),
    ):
        a = actions.add_parser(action, help=what, description=what)
        a.add_argument(
            "--db", default=None, help="the store: its SQLite file (default: the user data directory's) or its URL"
        )
        if action == "prune":
            a.add_argument("--older-than", metavar="DAYS", help="delete every record made more than DAYS days ago")
            a.add_argument("--max-bytes", metavar="N", help="then delete the oldest records until at most N bytes")
        if action == "delete":
            one = a.add_mutually_exclusive_group(required=True)
            one.add_argument("--run", metavar="READ_ID", help="a run's read id (its /api/snapshots/runs/ id)")
            one.add_argument("--snapshot", metavar="ID", help="a snapshot's id")
            one.add_argument("--link", metavar="ID", help="a share link's id (after /s/): it and what it opens")
            one.add_argument("--job", metavar="ID", help="a kernel job's id (one the server says is damaged)")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="shardscope", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)

    _serve_parser(sub)
    se = sub.add_parser(
        "settings", help="list every setting: name, default, whether --setting can change it, what it does"
    )
    se.add_argument("--json", action="store_true", help="print the settings as JSON")

    _store_parser(sub)

    _add_preview(sub)
    _add_topology(sub)
    _add_mcp(sub)
    _add_nccl_fit(sub)

    from shardscope.calibrate_command import add_parser as add_calibrate_parser

    add_calibrate_parser(sub, _ints)
    from shardscope.plan_command import add_parser as add_plan_parser

    add_plan_parser(sub, _ints)
    from shardscope.search_command import add_parser as add_search_parser

    add_search_parser(sub)
    return p


def _add_preview(sub: Any) -> None:
    v = sub.add_parser("preview", help="print an array's layout, like jax.debug.visualize_array_sharding, any rank")
    v.add_argument("--devices", required=True, help="cpu:N, gpu:KIND:HxG, tpu:GEN:TOPO or local")
    v.add_argument("--slices", type=int, default=1, help="slices of a tpu: set (multi-slice)")
    v.add_argument("--mesh", required=True, type=lambda t: _ints(t.lower(), "x"), help="mesh shape, e.g. 2x4")
    v.add_argument("--axes", required=True, help="mesh axis names, e.g. x,y")
    v.add_argument("--spec", required=True, help="the PartitionSpec, e.g. \"P('x', None)\"")
    v.add_argument("--shape", required=True, type=lambda t: _ints(t, ","), help="array shape, e.g. 4,8")
    v.add_argument("--dtype", default="float32")
    v.add_argument("--order", default="make_mesh", choices=["make_mesh", "iota"], help="mesh device order")
    v.add_argument("--dims", type=lambda t: _ints(t, ","), default=None, help="array dims of each grid, e.g. 0,2")
    v.add_argument("--compact", action="store_true", help="device ids as ranges (0-3,8-11)")
    v.add_argument("--json", action="store_true", help="print the layout JSON instead of the grid")
    v.add_argument("--width", type=int, default=80, help="maximum line width")


def _add_topology(sub: Any) -> None:
    t = sub.add_parser(
        "topology", help="a device set's interconnect and, with --mesh, each mesh axis laid on it (the topology tool)"
    )
    t.add_argument("--devices", default=None, help="cpu:N, gpu:KIND:HxG or tpu:GEN:TOPO (none: the device sets)")
    t.add_argument("--slices", type=int, default=1, help="slices of a tpu: set (multi-slice)")
    t.add_argument("--mesh", type=lambda s: _ints(s.lower(), "x"), default=None, help="mesh shape, e.g. 16x4")
    t.add_argument("--axes", default=None, help="mesh axis names, e.g. fsdp,tp")
    t.add_argument("--json", action="store_true", help="print the JSON the MCP topology (or device_sets) tool answers")


def _add_mcp(sub: Any) -> None:
    m = sub.add_parser(
        "mcp",
        help="serve the Model Context Protocol over stdio for a coding agent (layout, plan, why, compare, publish ...)",
        description="Tools, their arguments and when to use which: docs/agents.md. Needs the mcp extra.",
    )
    m.add_argument(
        "--url",
        default=None,
        help="the dashboard answers link to and publish goes to (default $SHARDSCOPE_URL; without either, links "
        "point at http://127.0.0.1:8000 and plans are not published)",
    )
    m.add_argument("--token", default=None, help="the dashboard's write token (default $SHARDSCOPE_TOKEN)")
    m.add_argument("--max-seconds", type=int, default=None, help="a compiling call's time limit (default 600)")
    m.add_argument(
        "--max-memory", type=int, default=None, metavar="BYTES", help="a compiling call's memory limit (default 8 GiB)"
    )
    m.add_argument("--max-jobs", type=int, default=None, help="compiling calls at once (default 2)")


def _add_nccl_fit(sub: Any) -> None:
    n = sub.add_parser(
        "nccl-fit",
        help="refit the GPU cost profile (NVLink for one host, the network for several) to nccl-tests "
        "all_reduce_perf output",
    )
    n.add_argument("file", help="a file with all_reduce_perf's output as printed ('-': standard input)")
    n.add_argument("--gpu", default=None, help="the GPU kind (h100, h200, b200, ...) when the output names another")
    n.add_argument("--json", action="store_true", help="print the fit as JSON")


def nccl_fit(args: argparse.Namespace) -> int:
    from sharding_core.cost.efficiency import MAX_NCCL_TEXT_CHARS, fit_nccl_tests, fmt_profile, rel
    from sharding_core.cost.profiles import FabricProfile as Profile
    from sharding_core.errors import ShardingError
    from sharding_core.units import fmt_bytes, fmt_seconds

    try:
        stream = sys.stdin if args.file == "-" else open(args.file, encoding="utf-8", errors="replace")  # noqa: SIM115
        with stream:
            text = stream.read(MAX_NCCL_TEXT_CHARS + 1)
        result = fit_nccl_tests(text, args.gpu)
    except OSError as e:
        print(f"error: cannot read {args.file}: {e.strerror}", file=sys.stderr)
        return 2
    except ShardingError as e:
        print(f"error [{e.code}]: {e.message}", file=sys.stderr)
        if e.hint:
            print(f"hint: {e.hint}", file=sys.stderr)
        return 2
    if args.json:
        import orjson

        print(orjson.dumps(result, option=orjson.OPT_INDENT_2).decode())
        return 0
    print(f"{result['ranks']} ranks on {result['hosts']} host(s) of {result['hardware']} ({result['devices']}): "
          f"all-reduce over {result['fabric']}")  # fmt: skip
    print(f"  refitted: {fmt_profile(Profile(**result['profile']))}")
    print(f"  shipped:  {fmt_profile(Profile(**result['shipped_profile']))}")
    print(f"  {'bytes':>10}  {'measured':>10}  {'bound':>10}  {'shipped':>10}  {'refit':>10}  refit error")
    for row in result["rows"]:
        error = (row["refit_seconds"] - row["measured_seconds"]) / row["measured_seconds"]
        keys = ("measured_seconds", "bound_seconds", "expected_seconds", "refit_seconds")
        cells = [fmt_seconds(row[k]) for k in keys]
        print(f"  {fmt_bytes(row['bytes']):>10}  " + "  ".join(f"{c:>10}" for c in cells) + f"  {rel(error):>11}")
    for name, errors in result["errors"].items():
        print(
            f"  |error| {name:>7}: median {errors['median_abs'] * 100:.0f} %, worst {errors['worst_abs'] * 100:.0f} %"
        )
    return 0


def preview(args: argparse.Namespace) -> int:
    os.environ.setdefault("JAX_PLATFORMS", "cpu")  # simulated devices need no accelerator
    from sharding_core.devices import parse_devices
    from sharding_core.errors import ShardingError
    from sharding_core.layout import Layout
    from sharding_core.mesh import MeshSpec
    from sharding_core.render import render_text

    try:
        devset = parse_devices(args.devices, slices=args.slices)
        mesh = MeshSpec(tuple(args.mesh), tuple(a.strip() for a in args.axes.split(",")), order=args.order)
        layout = Layout.from_named(devset, mesh, args.spec, args.shape, args.dtype)
        if args.json:
            print(layout.json_text)  # the layout tool's `layout`: POST /api/layout's JSON
        else:
            sys.stdout.write(
                render_text(layout, dims=args.dims, compact=args.compact, summary=True, max_width=args.width)
            )
    except ShardingError as e:
        print(f"error [{e.code}]: {e.message}", file=sys.stderr)
        column = e.details.get("column")
        if isinstance(column, int):
            print(f"  {args.spec}\n  {' ' * (column - 1)}^ column {column}", file=sys.stderr)
        if e.hint:
            print(f"hint: {e.hint}", file=sys.stderr)
        return 2
    return 0


def topology_command(args: argparse.Namespace) -> int:
    """``shardscope topology``: the MCP ``topology`` tool's answer (``device_sets``' without ``--devices``)."""
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    import orjson

    from sharding_core.errors import ShardingError
    from sharding_core.linking import DEFAULT_URL, URL_ENV
    from shardscope.mcp import answers

    try:
        if args.devices is None:
            data = answers.device_sets()
            text = "device sets: " + ", ".join(data["forms"])
        else:
            if (args.mesh is None) != (args.axes is None):
                raise ShardingError("bad_mesh", "--mesh and --axes go together", hint="e.g. --mesh 16x4 --axes fsdp,tp")
            names = [a.strip() for a in args.axes.split(",")] if args.axes else []
            mesh = {"shape": list(args.mesh), "axis_names": names} if args.mesh else None
            url = os.environ.get(URL_ENV, DEFAULT_URL).rstrip("/")
            data = answers.topology(args.devices, args.slices, mesh, url=url)
            text = f"{data['text']}\n{data['link']}"
    except ShardingError as e:
        return refuse(e)
    print(orjson.dumps(data, option=orjson.OPT_INDENT_2).decode() if args.json else text)
    return 0


def mcp_command(args: argparse.Namespace) -> int:
    """``shardscope mcp``: the MCP server over stdio (docs/agents.md)."""
    try:
        from shardscope.mcp.jobs import Limits
        from shardscope.mcp.server import Options, run_stdio
    except ImportError as e:
        print(f"error [missing_extra]: shardscope mcp needs the mcp extra ({e.name} is not installed)", file=sys.stderr)
        print("hint: pip install 'shardscope[mcp]'", file=sys.stderr)
        return 2
    from sharding_core.dashboard import TOKEN_ENV, URL_ENV, _base_url
    from sharding_core.errors import ShardingError

    url = args.url or os.environ.get(URL_ENV)
    try:
        base = _base_url(url) if url else "http://127.0.0.1:8000"
        limits = Limits()
        for name, value in (("seconds", args.max_seconds), ("memory", args.max_memory), ("jobs", args.max_jobs)):
            if value is not None and value < 1:
                raise ShardingError("bad_option", f"--max-{name} must be at least 1, got {value}")
        limits = Limits(
            seconds=args.max_seconds or limits.seconds,
            memory_bytes=args.max_memory or limits.memory_bytes,
            max_jobs=args.max_jobs or limits.max_jobs,
        )
    except ShardingError as e:
        return refuse(e)
    token = args.token or os.environ.get(TOKEN_ENV) or None
    run_stdio(Options(url=base, publish=url is not None, token=token, limits=limits))
    return 0


def store_command(args: argparse.Namespace) -> int:
    """``shardscope store info|prune|delete``: an operator's look at and deletions in a store, while the servers
    run or not (each write takes the byte total's row first, so they are serialised with the servers' writes;
    the total is kept in the same transactions). Expiry by age is left to the server's settings: nothing expires
    by opening the store here."""
    import orjson

    from server.settings import whole_number
    from server.store import Pruned, default_db_path, is_url, open_store
    from sharding_core.errors import ShardingError

    try:
        older = whole_number("--older-than", args.older_than) if getattr(args, "older_than", None) else None
        max_bytes = whole_number("--max-bytes", args.max_bytes) if getattr(args, "max_bytes", None) else None
        if args.action == "prune" and older is None and max_bytes is None:
            raise ShardingError("bad_request", "prune needs --older-than DAYS, --max-bytes N or both")
        db = args.db if is_url(args.db) else Path(args.db) if args.db else default_db_path()
        if isinstance(db, Path) and not db.is_file():
            raise ShardingError("store_unavailable", f"there is no store at {db}", hint="pass --db the server's file")
        store = open_store(db, max_bytes=None, max_days={"links": 0, "snapshots": 0})
    except ShardingError as e:
        return refuse(e)
    with store:
        if args.action == "info":
            print(orjson.dumps(store.summary(), option=orjson.OPT_INDENT_2).decode())
            return 0
        if args.action == "prune":
            done = store.prune(older_than_days=older, max_bytes=max_bytes)
        elif args.run:
            done = store.delete_run(args.run)
        elif args.snapshot:
            done = store.delete("snapshots", args.snapshot)
        elif args.job:
            done = Pruned(store.job_delete(args.job), 0)
        else:
            try:
                payload = store.get("links", args.link)
                state = orjson.loads(payload).get("state", {}) if payload is not None else {}
            except (ShardingError, orjson.JSONDecodeError, AttributeError):  # a damaged link: it alone goes
                state = {}
            state = state if isinstance(state, dict) else {}
            done = store.delete("links", args.link)
            if isinstance(state.get("run"), str):
                run = store.delete_run(state["run"])
                done = Pruned(done.records + run.records, done.bytes + run.bytes)
            elif isinstance(state.get("snapshot"), str):
                snap = store.delete("snapshots", state["snapshot"])
                done = Pruned(done.records + snap.records, done.bytes + snap.bytes)
        used, _ = store.usage()
        print(f"deleted {done.records} records, {done.bytes} bytes; the store now counts {used} bytes")
        return 0 if done.records or args.action == "prune" else 1


def settings_table(as_json: bool = False) -> int:
    from server.settings import SETTINGS

    if as_json:
        import orjson

        rows = [{"name": r.name, "default": r.default, "minimum": r.minimum, "maximum": r.maximum,
                 "fixed": r.fixed, "help": r.help} for r in SETTINGS]  # fmt: skip
        print(orjson.dumps({"settings": rows}, option=orjson.OPT_INDENT_2).decode())
        return 0

    width = max(len(s.name) for s in SETTINGS)
    print(f"{'name':<{width}}  {'default':>12}  {'--setting':<12}  what it limits")
    for row in SETTINGS:
        how = "fixed" if row.fixed else f"{row.minimum}..{row.maximum}" if row.maximum else f">= {row.minimum}"
        print(f"{row.name:<{width}}  {row.default:>12}  {how:<12}  {row.help}")
    reasons = sorted({row.fixed for row in SETTINGS if row.fixed})
    print("\nfixed: " + "; ".join(reasons))
    return 0


def refuse(error: Exception) -> int:
    """A start-up refusal as one line on stderr (``error [code]: message (hint)``, no traceback); exit code 2."""
    code = getattr(error, "code", "error")
    hint = getattr(error, "hint", None)
    text = " ".join(f"{getattr(error, 'message', error)}".split())
    print(f"error [{code}]: {text}" + (f" (hint: {' '.join(hint.split())})" if hint else ""), file=sys.stderr)
    return 2


GC_THRESHOLD = 50_000
"""Allocations between the cyclic collector's youngest-generation passes in ``shardscope serve`` (Python's is 700)."""


def _open_connections(max_open: int) -> int:
    """Raises the open-file limit to its hard limit and says so; ``max_open`` lowered to what it leaves room for."""
    from server.http import RESERVED_FDS, raise_open_file_limit

    limits = raise_open_file_limit()
    if limits is None:
        return max_open
    before, after = limits
    raised = f"raised from {before} to {after}" if after > before else f"{after} (its hard limit)"
    print(f"shardscope: open-file limit (RLIMIT_NOFILE) {raised}", file=sys.stderr)
    room = max(16, after - RESERVED_FDS)
    if room < max_open:
        print(
            f"warning: the open-file limit leaves room for {room} connections: max_open_connections "
            f"lowered from {max_open} to {room} (raise the hard limit, `ulimit -Hn`, for more)",
            file=sys.stderr,
        )
        return room
    return max_open


BACKLOG = 2048
"""Connections the listening socket queues before they are accepted (uvicorn's default ``backlog``)."""


def listen(host: str, port: int) -> socket.socket:
    """The server's listening socket, bound before anything else starts: a port that is taken is a one-line
    refusal rather than an error after start-up, and ``--port 0`` knows its port before the app is built (the
    MCP route names its own URL). Bound as uvicorn's own ``Config.bind_socket`` binds (IPv6 when the host has a
    colon; SO_REUSEADDR), listening at once with uvicorn's default backlog; not inherited by the kernel workers
    (Python's default: only uvicorn's multi-process mode, not used here, needs it)."""
    sock = socket.socket(family=socket.AF_INET6 if ":" in host else socket.AF_INET)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(BACKLOG)  # connections wait in the queue while the app starts, rather than being refused
    except BaseException:
        sock.close()
        raise
    return sock


def serve(args: argparse.Namespace) -> int:
    from server.auth import TOKEN_HINT, token_problem
    from server.settings import Settings
    from sharding_core.errors import ShardingError

    try:
        settings = Settings().with_values((name, value) for name, value in args.setting)
    except ShardingError as e:
        return refuse(e)
    problem = token_problem(args.token)
    if problem:
        return refuse(ShardingError("bad_token", problem, hint=TOKEN_HINT))
    oversubscribed = settings.memory_problem()
    if oversubscribed is not None:
        return refuse(oversubscribed)
    if not is_loopback(args.host):
        guard = "writes need the token" if args.token else "anyone who can reach it can write: consider --token"
        hosts = ", ".join(args.allowed_host) if args.allowed_host else "any Host (consider --allowed-host)"
        print(f"warning: binding {args.host}: reachable from other machines; {guard}; answers {hosts}", file=sys.stderr)
    if not 0 <= args.port <= 65535:
        return refuse(ShardingError("bad_port", f"--port {args.port} is not a port (0 to 65535; 0 picks a free one)"))
    try:
        sock = listen(args.host, args.port)
    except OSError as e:
        problem = f"cannot listen on {args.host}:{args.port}: {e.strerror or e}"
        return refuse(ShardingError("address_unavailable", problem, hint="another --port, or --port 0 for a free one"))
    with sock:
        return _serve_on(args, sock, settings)


def _serve_on(args: argparse.Namespace, sock: socket.socket, settings: Any) -> int:
    """``shardscope serve`` once its socket is held."""
    import uvicorn

    from server.app import create_app
    from server.http import protocol_class
    from sharding_core.errors import ShardingError

    port = int(sock.getsockname()[1])
    shown_host = f"[{args.host}]" if ":" in args.host else args.host
    mcp = None
    if args.mcp or args.mcp_allow_code:
        try:
            from shardscope.mcp.http import route as mcp_route
            from shardscope.mcp.server import Options
        except ImportError as e:
            return refuse(ShardingError("missing_extra", f"--mcp needs the mcp extra ({e.name} is not installed)",
                                        hint="pip install 'shardscope[mcp]'"))  # fmt: skip
        own = f"http://{'localhost' if is_loopback(args.host) else shown_host}:{port}"
        mcp = Options(url=own, publish=True, token=args.token, allow_code=args.mcp_allow_code,
                      max_devices=settings.max_devices)  # fmt: skip
    try:
        app = create_app(
            db_path=args.db,
            bind_host=args.host,
            token=args.token,
            settings=settings,
            allowed_hosts=args.allowed_host,
            extra_routes=[mcp_route(mcp, args.token, settings.max_body_bytes)] if mcp is not None else (),
            trusted_proxies=args.trusted_proxy,
        )
    except ShardingError as e:  # the store cannot be opened (server.store.StoreUnavailable): one line, no traceback
        return refuse(e)
    max_open = _open_connections(settings.max_open_connections)
    # The server's own objects are freed by reference counting (a connection's leave no cycle, server/http.py),
    # so the cyclic collector can run rarely: at its default pace, full passes over a flood's thousands of live
    # connection objects stalled the event loop 0.1-0.25 s several times a second.
    thresholds = gc.get_threshold()
    gc.set_threshold(GC_THRESHOLD, 20, 10)
    print(f"shardscope: listening on http://{shown_host}:{port}", file=sys.stderr, flush=True)
    server = uvicorn.Server(
        uvicorn.Config(
            app,
            host=args.host,
            port=port,
            log_level="info",
            # server/http.py: head and body deadlines, bounded open connections, uvicorn's own answers in
            # our error shape. Requests in progress are bounded inside the app (max_connections), so no
            # limit_concurrency: uvicorn's counts idle connections too.
            http=protocol_class(settings, max_open, guard=app.state.connections),
            h11_max_incomplete_event_size=settings.max_header_bytes,
            timeout_keep_alive=settings.max_keep_alive_seconds,
            server_header=False,  # no "server: uvicorn" (the Date header stays: RFC 9110 asks for it)
            # Forwarded headers count only from --trusted-proxy (server.middleware.TrustedProxies): uvicorn's own
            # handling believed X-Forwarded-For from 127.0.0.1 by default, so any local client chose its address.
            proxy_headers=False,
            backlog=BACKLOG,
        )
    )
    try:
        with contextlib.suppress(KeyboardInterrupt):  # as uvicorn.run: Ctrl+C is a clean stop
            server.run(sockets=[sock])
    finally:
        gc.set_threshold(*thresholds)
    return 0 if server.started else STARTUP_FAILURE


STARTUP_FAILURE = 3
"""``shardscope serve``'s exit status when the app did not start (uvicorn's own ``STARTUP_FAILURE``)."""


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "preview":
        return preview(args)
    if args.command == "settings":
        return settings_table(args.json)
    if args.command == "topology":
        return topology_command(args)
    if args.command == "mcp":
        return mcp_command(args)
    if args.command == "store":
        return store_command(args)
    if args.command == "plan":
        from shardscope.plan_command import run as plan

        return plan(args)
    if args.command == "search":
        from shardscope.search_command import run as search

        return search(args)
    if args.command == "nccl-fit":
        return nccl_fit(args)
    if args.command == "calibrate":
        from shardscope.calibrate_command import run as calibrate

        return calibrate(args)
    return serve(args)
