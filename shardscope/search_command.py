"""``shardscope search FILE.py:FN --devices D``: which mesh and logical-axis rules to use for a model on a device set.

``FN(mesh, rules, **knobs)`` returns ``(jitted_fn, args)`` (abstract arguments, as for ``shardscope plan``), every
dimension named by a logical axis (batch, embed, heads, mlp, vocab, expert ...) and turned into a PartitionSpec
through ``rules``. The search enumerates meshes of named axes (data, fsdp, sequence, expert, tensor) with
MaxText-style rules and the knobs ``FN`` takes, compiles the most promising for the set (compile-only) within
``--budget`` and ranks them by the compiled program's expected step time among those that fit. Exit status: 0 with
a pick, 3 when nothing fits (the closest candidate and what to change are printed), 2 for bad input or a failing
script. Progress goes to standard error.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
from pathlib import Path
from typing import Any

EXIT_ERROR = 2
EXIT_NOTHING_FITS = 3
SHOWN = 12


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "search",
        help="find the mesh and logical-axis rules for your model on a device set: compiles the candidates",
        description=__doc__,
    )
    p.add_argument("target", metavar="FILE.py:FN", help="a Python file and its FN(mesh, rules, **knobs)")
    p.add_argument("--devices", required=True, help="tpu:GEN:TOPO or gpu:KIND:HxG (e.g. tpu:v5p:4x4x4)")
    p.add_argument("--slices", type=int, default=1, help="slices of a tpu: set (DCN across them, on the data axis)")
    p.add_argument("--budget", default="10m", help="the search's time: seconds, or 90s, 10m, 1h (default 10m)")
    p.add_argument(
        "--hbm-headroom", type=float, default=0.1, help="HBM kept free: a candidate fits under (1 - this) x HBM"
    )
    p.add_argument("--workers", type=int, default=2, help="compiling worker processes (0: in this process)")
    p.add_argument("--max-compiles", type=int, default=None, help="compile at most this many candidates")
    p.add_argument("--exhaustive", action="store_true", help="compile every candidate (past the budget's order)")
    p.add_argument("--axes", default=None, help="mesh axes to search, e.g. fsdp,tensor (default: all that apply)")
    p.add_argument(
        "--knob", action="append", default=[], metavar="NAME=V1,V2", help="values of a knob FN takes (repeat)"
    )
    p.add_argument(
        "--current",
        default=None,
        metavar="FILE.json",
        help="your current sharding, compiled first and compared: {mesh: {shape, axis_names}, rules, knobs} (or an "
        "earlier search's JSON: its pick)",
    )
    p.add_argument("--json", default=None, metavar="OUT", help="write the search as JSON to OUT ('-': stdout)")
    p.add_argument(
        "--publish",
        default=None,
        metavar="URL",
        help="publish the pick's plan, with the search's front and every candidate, to the dashboard at URL",
    )
    p.add_argument(
        "--server",
        default=None,
        metavar="URL",
        help="compile the candidates on a team's server (started with --setting max_search_workers N): every "
        "replica sharing its store takes a share; FILE is sent to it, and must import only installed packages",
    )
    p.add_argument("--token", default=None, help="the dashboard's write token (default $SHARDSCOPE_TOKEN)")


def knob(text: str) -> tuple[str, list[Any]]:
    """``remat=true,false`` -> ("remat", [True, False]) (each value as JSON where it reads as JSON, else text)."""
    from sharding_core.errors import ShardingError

    name, sep, values = text.partition("=")
    if not sep or not name.isidentifier() or not values:
        raise ShardingError("bad_knob", f"--knob {text[:80]!r} is not NAME=V1,V2", hint="e.g. --knob remat=true,false")
    out: list[Any] = []
    for v in values.split(","):
        try:
            out.append(json.loads(v))
        except ValueError:
            out.append(v)
    return name, out


def current(path: str) -> dict[str, Any]:
    """``--current FILE``: a sharding ({mesh, rules, knobs}) or an earlier search (its pick)."""
    from sharding_core.errors import ShardingError

    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as e:
        raise ShardingError("bad_current", f"cannot read {path}: {e}") from None
    if isinstance(data, dict) and isinstance(data.get("pick"), dict):
        data = data["pick"]
    if not isinstance(data, dict) or "mesh" not in data or "rules" not in data:
        raise ShardingError("bad_current", f"{path} holds no {{mesh, rules}}", hint='{"mesh": {"shape": [16, 4], '
                            '"axis_names": ["fsdp", "tensor"]}, "rules": [["batch", "fsdp"], ...]}')  # fmt: skip
    return {"mesh": data["mesh"], "rules": data["rules"], "knobs": data.get("knobs") or {}}


def options(args: argparse.Namespace) -> dict[str, Any]:
    knobs = dict(knob(k) for k in args.knob) or None
    return {
        "current": current(args.current) if args.current else None,
        "slices": args.slices,
        "budget": args.budget,
        "hbm_headroom": args.hbm_headroom,
        "workers": args.workers,
        "max_compiles": args.max_compiles,
        "exhaustive": args.exhaustive,
        "knobs": knobs,
        "axes": tuple(a.strip() for a in args.axes.split(",")) if args.axes else None,
        "server": args.server,
        "token": args.token,
        "progress": lambda text: print(text, file=sys.stderr, flush=True),
    }


def run(args: argparse.Namespace) -> int:
    os.environ.setdefault("JAX_PLATFORMS", "cpu")  # compile-only: no accelerator is started (nor needed)
    import sharding_core
    from sharding_core.errors import ShardingError
    from shardscope.plan_command import load_function

    try:
        fn = load_function(args.target)
        result = sharding_core.search(fn, args.devices, **options(args))
    except ShardingError as e:
        print(f"error [{e.code}]: {e.message}", file=sys.stderr)
        if e.hint:
            print(f"hint: {e.hint}", file=sys.stderr)
        return EXIT_ERROR
    except Exception:  # noqa: BLE001 - the user's script failed: show its traceback, exit 2
        traceback.print_exc()
        print(f"error [script_failed]: {args.target} raised (traceback above)", file=sys.stderr)
        return EXIT_ERROR
    out = sys.stderr if args.json == "-" else sys.stdout
    out.write(render(result))
    if not write(args, result, out):
        return EXIT_ERROR
    return 0 if result["pick"] is not None else EXIT_NOTHING_FITS


def render(result: dict[str, Any]) -> str:
    """The search as text: the candidates best first, the front, the pick ready to paste (or the closest)."""
    from sharding_core.units import fmt_bytes, fmt_seconds

    lines = [
        f"search on {result['devices']}" + (f" x {result['slices']} slices" if result["slices"] > 1 else "")
        + f": {result['enumerated']} candidates, {result['compiled']} compiled in {result['seconds']:.0f} s",
        "",
        f"{'#':>3}  {'mesh':<34} {'knobs':<18} {'fits':<5} {'peak':>10} {'step':>10}  lost on",
    ]  # fmt: skip
    for i, c in enumerate(result["candidates"][:SHOWN]):
        fits = "-" if c["fits"] is None else "yes" if c["fits"] else "no"
        peak = fmt_bytes(c["peak_bytes"]) if c["peak_bytes"] is not None else "-"
        step = fmt_seconds(c["expected_seconds"]) if c["expected_seconds"] is not None else "-"
        knobs = ",".join(f"{k}={v}" for k, v in c["knobs"].items()) or "-"
        mark = "*" if i in result["front"] else " "
        lines.append(f"{i:>3}{mark} {c['strategy']:<34} {knobs:<18} {fits:<5} {peak:>10} {step:>10}  {c['lost_on']}")
    if len(result["candidates"]) > SHOWN:
        lines.append(f"     ... {len(result['candidates']) - SHOWN} more (--json has them all)")
    lines.append("     * on the Pareto front (step time against peak HBM)")
    pick = result["pick"]
    if result.get("current") is not None:
        mine = result["candidates"][result["current"]]
        lines += ["", f"your current sharding (#{result['current']}, {mine['strategy']}): {mine['lost_on']}"]
    if pick is not None:
        lines += ["", f"pick: {pick['strategy']}", "", pick["paste"]["python"], "MaxText:", pick["paste"]["maxtext"]]
    else:
        lines += ["", result.get("why_no_pick") or "nothing fits."]
        closest = result.get("closest")
        if closest is not None:
            lines.append(f"closest: {closest['strategy']}, peak {fmt_bytes(closest['peak_bytes'])} "
                         f"({fmt_bytes(closest['over_bytes'])} over what is usable)")  # fmt: skip
            lines += [f"  - {c}" for c in closest["change"]]
    return "\n".join(lines) + "\n"


def write(args: argparse.Namespace, result: dict[str, Any], out: Any) -> bool:
    """``--json`` and ``--publish``; False when publishing failed (said on stderr)."""
    from sharding_core.publishing import PublishError, publish

    if args.json == "-":
        sys.stdout.write(json.dumps(result, allow_nan=False) + "\n")
    elif args.json:
        Path(args.json).write_text(json.dumps(result, allow_nan=False))
        print(f"wrote {args.json}", file=out)
    if args.publish and result["pick"] is not None:
        try:
            plan = result["pick"]["plan"]
            link = publish(plan, f"search pick {plan['name']}", args.publish, token=args.token)
            print(f"published the pick's plan and the search's front: {link}", file=out)
        except PublishError as e:
            print(f"error [{e.code}]: {e.message}", file=sys.stderr)
            return False
    return True
