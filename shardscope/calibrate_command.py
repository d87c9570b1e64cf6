"""``shardscope calibrate [--json OUT]``: measure collectives and matmuls on this process's devices through JAX and
write a cost profile (:mod:`sharding_core.cost.calibrate`) that ``shardscope plan --profile OUT`` and
``sharding_core.estimate_collective(..., profile=OUT)`` use. Exit status: 0, or 2 for bad input."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from sharding_core.cost.calibrate import DEFAULT_SHAPES, DEFAULT_SIZES, describe


def add_parser(sub: Any, ints: Any) -> None:
    c = sub.add_parser(
        "calibrate",
        help="measure collectives and matmuls on this process's devices and write a cost profile (--json OUT) that "
        "plan --profile uses",
        description=__doc__,
    )
    c.add_argument("--json", default=None, metavar="OUT", help="write the profile (shardscope.profile/1) to OUT")
    c.add_argument("--devices", default="local", help="local (jax.devices(), default) or cpu:N (N forced CPU devices)")
    c.add_argument(
        "--sizes",
        type=lambda t: ints(t, ","),
        default=None,
        help="collective sizes, bytes per device (default 4096,65536,1048576,8388608)",
    )
    c.add_argument("--shapes", default=None, help="matmul shapes MxKxN, comma-separated (default 512x512x512,...)")
    c.add_argument("--repeats", type=int, default=5, help="timed runs per point (the median is kept)")
    c.add_argument("--warmup", type=int, default=2, help="untimed runs before them")


def _shapes(text: str | None) -> tuple[tuple[int, int, int], ...]:
    from sharding_core.errors import ShardingError

    if text is None:
        return tuple((m, k, n) for m, k, n in DEFAULT_SHAPES)
    out = []
    for part in text.split(","):
        dims = part.strip().lower().split("x")
        if len(dims) != 3 or not all(d.isdigit() for d in dims):
            raise ShardingError("bad_calibration", f"a matmul shape is MxKxN, got {part!r}", hint="e.g. 1024x1024x1024")
        m, k, n = (int(d) for d in dims)
        out.append((m, k, n))
    return tuple(out)


def _devices(text: str) -> None:
    """``cpu:N`` forces N CPU devices (before JAX starts); ``local`` leaves the process's devices."""
    from sharding_core.errors import ShardingError

    if text == "local":
        return
    kind, _, count = text.partition(":")
    if kind != "cpu" or not count.isdigit() or not 1 <= int(count) <= 2048:
        raise ShardingError("bad_calibration", f"--devices is local or cpu:N (1..2048), got {text!r}")
    os.environ["JAX_PLATFORMS"] = "cpu"
    import jax

    jax.config.update("jax_num_cpu_devices", int(count))


def summary(profile: dict[str, Any]) -> str:
    from sharding_core.units import fmt_bytes, fmt_seconds

    lines = [describe(profile)]
    lines.append(f"  {'collective':<20} {'fabric':<10} {'latency':>10} {'bus bandwidth':>14} {'efficiency':>10}")
    for op, fit in profile["collectives"].items():
        bw = fit.get("bus_bandwidth")
        eff = fit.get("efficiency")
        lines.append(
            f"  {op:<20} {fit['fabric']:<10} {fmt_seconds(fit['latency_seconds']):>10} "
            f"{(fmt_bytes(bw) + '/s') if bw else '—':>14} {f'{eff:.3f}' if eff is not None else '—':>10}"
        )
    mm = profile["matmul"]
    eff = mm.get("efficiency")
    shown = f"{eff:.3f}" if eff is not None else "— (no peak for this device in the hardware table)"
    lines.append(f"  matmul ({mm['dtype']}): {mm['flops_per_second'] / 1e12:.3g} TFLOP/s, efficiency {shown}")
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace) -> int:
    from sharding_core.errors import ShardingError

    try:
        _devices(args.devices)
        from sharding_core.cost.calibrate import calibrate

        profile = calibrate(
            sizes=tuple(args.sizes) if args.sizes else DEFAULT_SIZES,
            shapes=_shapes(args.shapes),
            repeats=args.repeats,
            warmup=args.warmup,
        )
    except ShardingError as e:
        print(f"error [{e.code}]: {e.message}", file=sys.stderr)
        if e.hint:
            print(f"hint: {e.hint}", file=sys.stderr)
        return 2
    if args.json:
        out = Path(args.json)
        profile["source"] = out.name
        try:
            out.write_text(json.dumps(profile, indent=1, allow_nan=False) + "\n")
        except OSError as e:
            print(f"error: cannot write {out}: {e.strerror}", file=sys.stderr)
            return 2
    sys.stdout.write(summary(profile))
    if args.json:
        print(f"wrote {args.json} (use it: shardscope plan ... --profile {args.json})")
    return 0
