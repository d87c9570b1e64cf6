"""``shardscope plan FILE.py:FN --devices D``: compile the user's own program for a device set and print the plan.

``FN(mesh)`` returns ``(jitted_fn, args)`` — ``args`` a tuple of abstract arguments (``jax.ShapeDtypeStruct``s
sharded on ``mesh``) or a dict of keyword arguments. The mesh is :func:`shardscope.mesh` over the set
(libtpu's compile-only devices for ``tpu:`` sets, XLA's GPU compiler for ``gpu:`` sets). Exit status: 0 when
the program fits, 3 when it does not (XLA refused it for memory, or its peak is past the chip's HBM), 1 when
``--baseline`` finds a regression past the printed thresholds or a finding the baseline does not have, 2 for bad
input or a failing script.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import re
import sys
import traceback
from pathlib import Path
from typing import Any

EXIT_REGRESSED = 1
EXIT_ERROR = 2
EXIT_DOES_NOT_FIT = 3

_MISSING_AXIS = re.compile(r"Resource axis: (?P<axis>\S+) of (?P<spec>.+?) is not found in mesh: (?P<mesh>\(.*?\))")


def add_parser(sub: Any, ints: Any) -> None:
    p = sub.add_parser(
        "plan",
        help="compile your program for a device set you don't have (TPU slice, GPU hosts) and print its plan",
        description=__doc__,
    )
    p.add_argument(
        "target", metavar="FILE.py:FN", help="a Python file and the function in it: FN(mesh) -> (jitted, args)"
    )
    p.add_argument("--devices", required=True, help="tpu:GEN:TOPO, gpu:KIND:HxG or cpu:N (e.g. tpu:v5p:4x4x4)")
    p.add_argument("--slices", type=int, default=1, help="slices of a tpu: set (multi-slice)")
    p.add_argument(
        "--mesh",
        type=lambda t: ints(t.lower(), "x"),
        default=None,
        help="mesh shape, e.g. 16x4 (default: all devices on one axis)",
    )
    p.add_argument("--axes", default=None, help="mesh axis names, e.g. fsdp,tp (default: data)")
    p.add_argument(
        "--dcn",
        type=lambda t: ints(t.lower(), "x"),
        default=None,
        help="with --slices: how many slices each mesh axis spans, e.g. 2x1 (a hybrid mesh: ICI within a slice, DCN "
        "across; default: the first axis spans the slices, as MaxText's dcn_data_parallelism)",
    )
    p.add_argument(
        "--json",
        default=None,
        metavar="OUT",
        help="write the plan (a snapshot with its plan) as JSON to OUT ('-': standard output, the report then goes "
        "to standard error)",
    )
    p.add_argument("--publish", default=None, metavar="URL", help="publish the plan to the dashboard at URL")
    p.add_argument("--token", default=None, help="the dashboard's write token (default $SHARDSCOPE_TOKEN)")
    p.add_argument(
        "--baseline", default=None, metavar="PLAN.json", help="compare with an earlier plan: exit 1 on a regression"
    )
    p.add_argument(
        "--max-peak-growth",
        type=float,
        default=None,
        help="baseline threshold: peak HBM growth as a fraction (default 0.02)",
    )
    p.add_argument(
        "--max-new-collective-bytes",
        type=int,
        default=None,
        help="baseline threshold: bytes per step new collectives may move (default 1 MiB)",
    )
    p.add_argument("--no-temporaries", action="store_true", help="skip reading XLA's buffer assignment (faster)")
    _add_reading_options(p)


def _add_reading_options(p: Any) -> None:
    """What more a plan reads: a measured profile, the why and its fixes, the values, the findings, the fit."""
    p.add_argument(
        "--profile",
        default=None,
        metavar="FILE",
        help="a cost profile from `shardscope calibrate --json FILE` on the target's hardware: the collectives' "
        "expected times are its measurements instead of the fit to published measurements",
    )
    p.add_argument(
        "--why",
        action="store_true",
        help="say why each collective is there (one more compile, with Shardy's sharding origins)",
    )
    p.add_argument(
        "--fixes",
        type=int,
        default=0,
        metavar="N",
        help="with --why, look for fixes too, compiling up to N candidate programs (implies --why)",
    )
    p.add_argument(
        "--fix-seconds", type=float, default=120.0, metavar="S", help="the time the fix search may take (default 120)"
    )
    _add_program_options(p)


def _add_program_options(p: Any) -> None:
    """``--values`` and ``--findings``: what the program does with each value, and what it wastes."""
    p.add_argument(
        "--values",
        type=int,
        nargs="?",
        const=30,
        default=None,
        metavar="N",
        help="print each value's sharding along the program: the N largest per device (default 30; 0: every value, "
        "in program order)",
    )
    p.add_argument(
        "--findings",
        action="store_true",
        help="print the silent waste found (a collective reduced every iteration of an accumulation loop, the batch "
        "not split over the parameters' axis, ...), each with its line and fix; with --baseline, a new finding is a "
        "regression",
    )
    p.add_argument(
        "--fit",
        nargs="?",
        const=0.0,
        default=None,
        type=float,
        metavar="HEADROOM",
        help="when the program does not fit (or keeps less than HEADROOM, a fraction of HBM, free), compile candidate "
        "fixes and rank those that fit by step time: the largest arguments sharded further, donation, and the keyword "
        "knobs FN(mesh, **knobs) accepts (remat=, microbatches=)",
    )


def load_function(spec: str) -> Any:
    """``path/to/script.py:fn`` -> the function (the script's directory goes on sys.path, as python does)."""
    from sharding_core.errors import ShardingError

    path_text, sep, fn_name = spec.rpartition(":")
    if not sep or not path_text or not fn_name.isidentifier():
        raise ShardingError(
            "bad_target", f"expected FILE.py:FN, got {spec[:200]!r}", hint="e.g. examples/llama.py:llama_8b_fsdp"
        )
    path = Path(path_text)
    if not path.is_file():
        raise ShardingError("bad_target", f"no such file: {path_text[:200]}")
    sys.path.insert(0, str(path.resolve().parent))
    module_name = f"_shardscope_plan_{path.stem}"
    loader = importlib.util.spec_from_file_location(module_name, path)
    if loader is None or loader.loader is None:
        raise ShardingError("bad_target", f"cannot import {path_text[:200]} as Python")
    module = importlib.util.module_from_spec(loader)
    sys.modules[module_name] = module
    loader.loader.exec_module(module)
    fn = getattr(module, fn_name, None)
    if not callable(fn):
        names = sorted(n for n, v in vars(module).items() if callable(v) and not n.startswith("_"))[:20]
        raise ShardingError("bad_target", f"{path_text} has no function {fn_name!r}", hint=f"it has {', '.join(names)}")
    return fn


def run(args: argparse.Namespace) -> int:
    os.environ.setdefault("JAX_PLATFORMS", "cpu")  # compile-only: no accelerator is started (nor needed)
    count = args.devices.partition(":")[2]
    if args.devices.startswith("cpu:") and count.isdigit() and 1 <= int(count) <= 2048:
        import jax

        jax.config.update("jax_num_cpu_devices", int(count))  # cpu:N runs on N of this process's CPU devices
    from sharding_core.capturing import fit_plan, program_snapshot
    from sharding_core.cost.annotate import apply_profile
    from sharding_core.errors import ShardingError
    from sharding_core.planning import baseline as base
    from sharding_core.planning.report import render_comparison
    from sharding_core.program.targets import compile_target, mesh
    from sharding_core.why import NO_FIXES, Budget

    n_devices: int | None = None
    try:
        if args.values is not None and args.values < 0:
            raise ShardingError("bad_values", "--values N takes N >= 0 (0: every value)")
        profile = _profile(args) if args.profile else None
        previous = _baseline(args.baseline) if args.baseline else None
        fn = load_function(args.target)
        names = tuple(a.strip() for a in args.axes.split(",")) if args.axes else ("data",)
        shape = tuple(args.mesh) if args.mesh else None
        if shape is None:
            shape = (len(compile_target(args.devices, slices=args.slices).devset),)
        m = mesh(args.devices, shape, names, slices=args.slices, **_hybrid(args, shape))
        n_devices = int(m.devices.size)
        made = fn(m)
        if not isinstance(made, tuple) or len(made) != 2:
            raise ShardingError("bad_target", f"{args.target} must return (jitted_fn, args), got {type(made).__name__}")
        jitted, fargs = made
        pos, kw = ((), fargs) if isinstance(fargs, dict) else (tuple(fargs), {})
        if args.fixes < 0 or args.fix_seconds < 0:
            raise ShardingError("bad_budget", "--fixes and --fix-seconds must be >= 0")
        budget = Budget(args.fixes, args.fix_seconds) if args.fixes else NO_FIXES if args.why else None
        snap = program_snapshot(
            jitted, pos, kw, detailed=not args.no_temporaries, why=budget, check_fixes=args.findings or bool(args.fixes)
        )
        if args.fit is not None:
            snap["plan"]["fit"] = fit_plan(snap, jitted, pos, kw, args.fit, knob_variants(fn, m))
        file, _, fn_name = args.target.rpartition(":")
        snap["name"] = f"{Path(file).name}:{fn_name}"
        if profile is not None:
            snap = apply_profile(snap, profile)
    except ShardingError as e:
        print(f"error [{e.code}]: {e.message}", file=sys.stderr)
        if e.hint:
            print(f"hint: {e.hint}", file=sys.stderr)
        return EXIT_ERROR
    except Exception as e:  # noqa: BLE001 - the user's script failed: show its traceback, exit 2
        bad = _axes_error(e, args, n_devices)
        if bad is not None:
            print(f"error [{bad.code}]: {bad.message}", file=sys.stderr)
            print(f"hint: {bad.hint}", file=sys.stderr)
            return EXIT_ERROR
        traceback.print_exc()
        print(f"error [script_failed]: {args.target} raised (traceback above)", file=sys.stderr)
        return EXIT_ERROR
    report = sys.stderr if args.json == "-" else sys.stdout  # stdout carries the JSON alone
    if not _write(args, snap, profile, report):
        return EXIT_ERROR
    if previous is not None:
        options: dict[str, Any] = {}
        if args.max_peak_growth is not None:
            options["max_peak_growth"] = args.max_peak_growth
        if args.max_new_collective_bytes is not None:
            options["max_new_collective_bytes"] = args.max_new_collective_bytes
        result = base.compare(previous, snap, **options)
        report.write(render_comparison(result))
        if result["regressed"] and (snap.get("plan") or {}).get("fits") is not False:
            return EXIT_REGRESSED
    return EXIT_DOES_NOT_FIT if (snap.get("plan") or {}).get("fits") is False else 0


def _hybrid(args: argparse.Namespace, shape: tuple[int, ...]) -> dict[str, Any]:
    """The mesh's order over several slices: ``--dcn``, or the first axis across the slices (``dcn_shape``
    ``(slices, 1, ...)``) when it divides; one slice, or a first axis the slices do not divide: ``jax.make_mesh``'s
    order (its error then names ``--dcn``)."""
    from sharding_core.errors import ShardingError

    dcn = tuple(args.dcn) if args.dcn else None
    if dcn is None and args.slices > 1 and shape[0] % args.slices == 0:
        dcn = (args.slices,) + (1,) * (len(shape) - 1)
    if dcn is None:
        return {}
    if len(dcn) != len(shape) or math.prod(dcn) != args.slices:
        raise ShardingError("bad_mesh", f"--dcn {'x'.join(map(str, dcn))} must have one entry per mesh axis "
                            f"({len(shape)}) and multiply to --slices ({args.slices})",
                            hint=f"e.g. --dcn {'x'.join([str(args.slices)] + ['1'] * (len(shape) - 1))}")  # fmt: skip
    return {"order": "hybrid", "dcn_shape": dcn}


KNOBS: dict[str, tuple[Any, ...]] = {
    # examples/llama.py's names (MaxText's), most memory saved first: "full" keeps only each layer's input
    "remat": ("full", "minimal", "dots_with_no_batch_dims"),
    "attention": ("splash", "flash"),  # fused kernels: the S x S scores never whole (where the model has the switch)
    "vocab_tiles": (4,),  # the logits a slice of the sequence at a time (MaxText's num_vocab_tiling)
    "optimizer_offload": (True,),  # Adam's moments in host memory between steps (optimizer_memory_host_offload)
    "microbatches": (2, 4, 8),
}


def saves_more(knob: str, value: Any, current: Any) -> bool:
    """Whether ``knob=value`` can keep less in memory than FN's own ``current`` value (None: not known, so every
    value is tried): a remat policy listed before the current one, a fused attention instead of ``dot``, more vocab
    tiles or microbatches. A variant that keeps as much or more is no fix and costs a compile."""
    if current is None:
        return True
    if value == current:
        return False
    if knob == "remat":
        order = KNOBS["remat"]
        return bool(current == "none" or current not in order or order.index(value) < order.index(current))
    if knob == "attention":
        return bool(current == "dot")
    if isinstance(value, int) and isinstance(current, int):
        return bool(value > current)
    return True


def knob_variants(fn: Any, m: Any) -> list[tuple[str, str, Any, tuple[Any, ...], dict[str, Any]]]:
    """``FN(mesh, **knobs)``'s variants for ``--fit``: each keyword knob FN accepts (``remat=``: JAX's checkpoint
    policies by name; ``attention=``, ``vocab_tiles=``, ``microbatches=``), one value at a time, those that can
    keep less than FN's own values (``FN.knobs``, where FN says them: :func:`saves_more`); a value FN refuses is
    skipped."""
    import inspect

    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return []
    own = getattr(fn, "knobs", None)
    own = own if isinstance(own, dict) else {}
    out = []
    any_knob = any(p.kind is p.VAR_KEYWORD for p in params.values())  # FN(mesh, rules=None, **knobs)
    for knob, values in KNOBS.items():
        if knob not in params and not any_knob:
            continue
        current = own.get(knob, params[knob].default if knob in params else None)
        current = None if current is inspect.Parameter.empty else current
        for value in values:
            if not saves_more(knob, value, current):
                continue
            try:
                made = fn(m, **{knob: value})
            except (TypeError, ValueError):
                continue
            jitted, fargs = made
            pos, kw = ((), dict(fargs)) if isinstance(fargs, dict) else (tuple(fargs), {})
            out.append((knob, f"{knob}={value!r}", jitted, pos, kw))
    return out


def _baseline(path: str) -> dict[str, Any]:
    """``--baseline FILE``: a plan's JSON, read and checked before anything compiles."""
    from sharding_core.errors import ShardingError
    from sharding_core.planning import baseline as base

    try:
        previous: dict[str, Any] = json.loads(Path(path).read_text())
    except (OSError, ValueError) as e:
        raise ShardingError(base.BAD_BASELINE, f"cannot read the baseline {path}: {e}") from None
    base.check_plan(previous, f"baseline {path}")
    return previous


def _write(args: argparse.Namespace, snap: dict[str, Any], profile: dict[str, Any] | None, report: Any) -> bool:
    """The plan as text on ``report``, its JSON (``--json``) and its link (``--publish``); False when publishing
    failed (said on stderr)."""
    from sharding_core.publishing import PublishError, publish

    report.write(_rendered(snap, args))
    if profile is not None:
        from sharding_core.cost.calibrate import describe

        print(f"collectives' expected times: {describe(profile)}", file=report)
    if args.json == "-":
        sys.stdout.write(json.dumps(snap, allow_nan=False) + "\n")
    elif args.json:
        Path(args.json).write_text(json.dumps(snap, allow_nan=False))
        print(f"wrote {args.json}", file=report)
    if args.publish:
        try:
            link = publish(snap, f"plan {snap['name']} on {args.devices}", args.publish, token=args.token)
            print(f"published: {link}", file=report)
        except PublishError as e:
            print(f"error [{e.code}]: {e.message}", file=sys.stderr)
            return False
    return True


def _rendered(snap: dict[str, Any], args: argparse.Namespace) -> str:
    """The plan as text, with its values (``--values``), findings (``--findings``) and fixes (``--fit``)."""
    from sharding_core.planning.report import render, render_findings, render_fit, render_values

    text = render(snap)
    if args.values is not None:
        text += "\n" + render_values(snap, args.values)
    if args.findings:
        text += "\n" + render_findings(snap)
    if (snap.get("plan") or {}).get("fit") is not None:
        text += "\n" + render_fit(snap["plan"]["fit"])
    return text


def _profile(args: argparse.Namespace) -> dict[str, Any]:
    """``--profile FILE``, read and checked against the target's hardware before anything compiles."""
    from sharding_core.cost.calibrate import check_matches, load_profile
    from sharding_core.cost.context import context_for
    from sharding_core.devices import parse_devices

    profile = load_profile(args.profile)
    check_matches(profile, context_for(parse_devices(args.devices, slices=args.slices)))
    return profile


def _axes_error(e: BaseException, args: argparse.Namespace, n: int | None) -> Any:
    """A spec naming an axis the mesh lacks (``FN(mesh)`` or the program's own constraints) as bad input with the
    flags to pass, or None for any other error: without ``--axes`` the mesh is one ``data`` axis."""
    from sharding_core.errors import ShardingError

    missing = _MISSING_AXIS.search(str(e)) if isinstance(e, ValueError) else None
    if missing is None:
        return None
    axis = missing["axis"]
    default = "" if args.axes else " (without --axes the mesh is one axis, 'data', over every device)"
    two = f" or --mesh 2x{n // 2} --axes data,{axis}" if n and n % 2 == 0 and n > 2 else ""
    return ShardingError(
        "bad_axes",
        f"{args.target} shards over mesh axis {axis} ({missing['spec']}), but the mesh's axes are "
        f"{missing['mesh']}{default}",
        hint=f"pass the mesh axes your function uses: --axes {axis} (one axis over every device){two}",
    )
