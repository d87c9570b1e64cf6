"""The ``shardscope`` command: ``serve`` the dashboard, ``preview`` a layout in the terminal, list the ``settings``,
``nccl-fit`` a GPU cost profile to your own nccl-tests output."""

from __future__ import annotations

import argparse
import ipaddress
import os
import sys
from collections.abc import Sequence

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")


def _ints(text: str, sep: str) -> tuple[int, ...]:
    parts = [p.strip() for p in text.replace(" ", "").split(sep) if p.strip()]
    try:
        return tuple(int(p) for p in parts)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected integers separated by {sep!r}, got {text!r}") from None


def is_loopback(host: str) -> bool:
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="shardscope", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)

    s = sub.add_parser("serve", help="serve the dashboard (loopback only unless --host says otherwise)")
    s.add_argument("--host", default="127.0.0.1")
    s.add_argument("--port", type=int, default=8000)
    s.add_argument("--db", default=None, help="SQLite file for share links (default: the user data directory)")
    s.add_argument(
        "--token",
        default=os.environ.get("SHARDSCOPE_TOKEN") or None,
        help="for a shared server: every write (share links, kernel runs, snapshots) needs this token, as "
        "'Authorization: Bearer TOKEN' or the cookie a browser gets by opening the dashboard once at ?token=TOKEN; "
        "at least 16 printable ASCII characters; default $SHARDSCOPE_TOKEN (an environment variable keeps it out "
        "of the process list)",
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
        "--setting",
        nargs=2,
        action="append",
        default=[],
        metavar=("NAME", "VALUE"),
        help="change a limit, e.g. --setting max_kernel_workers 4 (repeatable; `shardscope settings` lists them)",
    )

    sub.add_parser("settings", help="list every setting: name, default, whether --setting can change it, what it does")

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

    n = sub.add_parser(
        "nccl-fit",
        help="refit the GPU cost profile (NVLink for one host, the network for several) to nccl-tests "
        "all_reduce_perf output",
    )
    n.add_argument("file", help="a file with all_reduce_perf's output as printed ('-': standard input)")
    n.add_argument("--gpu", default=None, help="the GPU kind (h100, h200, b200, ...) when the output names another")
    n.add_argument("--json", action="store_true", help="print the fit as JSON")
    return p


def nccl_fit(args: argparse.Namespace) -> int:
    from sharding_core.cost.efficiency import MAX_NCCL_TEXT_CHARS, fit_nccl_tests, fmt_profile, rel
    from sharding_core.cost.efficiency import FabricProfile as Profile
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
            print(layout.json_text)
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


def settings_table() -> int:
    from server.settings import SETTINGS

    width = max(len(s.name) for s in SETTINGS)
    print(f"{'name':<{width}}  {'default':>12}  {'--setting':<12}  what it limits")
    for row in SETTINGS:
        how = "fixed" if row.fixed else f"{row.minimum}..{row.maximum}" if row.maximum else f">= {row.minimum}"
        print(f"{row.name:<{width}}  {row.default:>12}  {how:<12}  {row.help}")
    reasons = sorted({row.fixed for row in SETTINGS if row.fixed})
    print("\nfixed: " + "; ".join(reasons))
    return 0


PLACEHOLDER_TOKENS = ("change-me", "changeme", "placeholder", "your-token", "secret")


def token_problem(token: str | None) -> str | None:
    """Why ``token`` cannot guard a server, or None: too short, not printable ASCII (an HTTP header can't
    carry it everywhere), or a placeholder left in from an example."""
    if token is None:
        return None
    if len(token) < 16:
        return f"the token has {len(token)} characters; use at least 16 (random, e.g. secrets.token_urlsafe(32))"
    if not token.isascii() or not token.isprintable() or " " in token:
        return "the token must be printable ASCII without spaces (it travels in an HTTP Authorization header)"
    if any(p in token.lower() for p in PLACEHOLDER_TOKENS):
        return "the token is a placeholder from an example; set your own random one"
    return None


def serve(args: argparse.Namespace) -> int:
    import uvicorn

    from server.app import create_app
    from server.http import RESERVED_FDS, protocol_class, raise_open_file_limit
    from server.settings import Settings
    from sharding_core.errors import ShardingError

    try:
        settings = Settings().with_values((name, value) for name, value in args.setting)
    except ShardingError as e:
        print(f"error [{e.code}]: {e.message}", file=sys.stderr)
        if e.hint:
            print(f"hint: {e.hint}", file=sys.stderr)
        return 2
    problem = token_problem(args.token)
    if problem:
        print(f"error [bad_token]: {problem}", file=sys.stderr)
        print("hint: e.g. export SHARDSCOPE_TOKEN=$(python3 -c 'import secrets; print(secrets.token_urlsafe(32))')",
              file=sys.stderr)  # fmt: skip
        return 2
    if not is_loopback(args.host):
        guard = "writes need the token" if args.token else "anyone who can reach it can write: consider --token"
        hosts = ", ".join(args.allowed_host) if args.allowed_host else "any Host (consider --allowed-host)"
        print(f"warning: binding {args.host}: reachable from other machines; {guard}; answers {hosts}", file=sys.stderr)
    try:
        app = create_app(
            db_path=args.db, bind_host=args.host, token=args.token, settings=settings, allowed_hosts=args.allowed_host
        )
    except ShardingError as e:  # the store cannot be opened (server.store.StoreUnavailable): one line, no traceback
        print(f"error [{e.code}]: {e.message}", file=sys.stderr)
        return 2
    max_open = settings.max_open_connections
    limits = raise_open_file_limit()
    if limits is not None:
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
            max_open = room
    uvicorn.run(
        app,
        host=args.host,
        port=args.port,
        log_level="info",
        # server/http.py: head and body deadlines, bounded open connections, uvicorn's own answers in
        # our error shape. Requests in progress are bounded inside the app (max_connections), so no
        # limit_concurrency: uvicorn's counts idle connections too.
        http=protocol_class(settings, max_open),
        h11_max_incomplete_event_size=settings.max_header_bytes,
        timeout_keep_alive=settings.max_keep_alive_seconds,
        server_header=False,  # no "server: uvicorn" (the Date header stays: RFC 9110 asks for it)
    )
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "preview":
        return preview(args)
    if args.command == "settings":
        return settings_table()
    if args.command == "nccl-fit":
        return nccl_fit(args)
    return serve(args)
