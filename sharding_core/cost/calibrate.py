"""Measured, not estimated, where the user has the hardware: ``shardscope calibrate`` runs a short set of
collectives (all-gather, all-reduce, reduce-scatter, all-to-all, a ring permute, over every device of the process,
a few sizes) and matmuls (a few shapes, bf16 and f32) on ``jax.devices()`` through JAX, times them (warm-up
runs, ``block_until_ready``, several repeats, the median), and writes a **profile**::

    {"format": "shardscope.profile/1", "created": iso, "jax_version": str,
     "devices": {"platform", "device_kind", "count", "process_count"},
     "collectives": {"<op>": {"fabric": str, "efficiency": float | null, "latency_seconds": float,
                              "bus_bandwidth": float, "points": [{"bytes", "group_size", "seconds"}]}},
     "matmul": {"efficiency": float | null, "flops_per_second": float,
                "points": [{"m", "k", "n", "dtype", "seconds"}]}}

``bytes`` are the HLO's bytes per device (an all-gather's result, a reduce-scatter's result, a permute's send).
Each operation's points are fitted to a line, ``seconds = latency + bus bytes / bus bandwidth`` (nccl-tests' bus
bytes: all-reduce ``2 (n − 1) / n`` of the bytes, all-gather and all-to-all ``(n − 1) / n``, reduce-scatter
``n − 1`` results, a permute its bytes); where the devices have hardware figures (a TPU or GPU the hardware table
knows) ``efficiency`` is the spec-sheet bandwidth time of the cost model's bound over the measured bandwidth time
(the efficiency the expected time uses) and ``fabric`` the profile key it is for (``ici_line``, ``nvlink``, ...);
a CPU has no figures (``efficiency`` null, ``fabric`` ``cpu``); over one device nothing moves (``fabric``
``none``). ``matmul.efficiency`` is the best achieved
FLOP/s over the device's peak for the dtype (null without a peak).

A profile makes the cost model use it (:func:`profiles_for`, :func:`estimate_with_profile`; a snapshot's or a
plan's figures: :func:`apply_profile`): the expected time of
each measured operation over its fabric is the profile's line instead of the published fit, on device sets of the
same hardware; every figure says which profile it came from (``"calibrated: <file> (<device_kind> x N, <date>)"``).
A profile measured on other hardware is refused with what to do (:data:`PROFILE_MISMATCH`).
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import json
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from sharding_core.cost.efficiency import EFFICIENCY_GRID, LATENCY_GRID, PROFILES, FabricProfile, terms_of
from sharding_core.errors import ShardingError

FORMAT = "shardscope.profile/1"
OPS = ("all-gather", "all-reduce", "reduce-scatter", "all-to-all", "collective-permute")
KIND_OF = {"all-gather": "all-gather", "all-reduce": "all-reduce", "reduce-scatter": "reduce-scatter",
           "all-to-all": "all-to-all", "collective-permute": "permute"}  # fmt: skip
OP_OF = {kind: op for op, kind in KIND_OF.items()}
DEFAULT_SIZES = (1 << 12, 1 << 16, 1 << 20, 1 << 23)
DEFAULT_SHAPES = ((512, 512, 512), (1024, 1024, 1024), (2048, 2048, 2048))
DTYPES = ("bfloat16", "float32")
MAX_SIZE = 1 << 28
"""The largest collective size (bytes per device) ``calibrate`` accepts: 256 MiB."""
MAX_DIM = 16384
MAX_REPEATS = 100
MAX_PROFILE_BYTES = 1 << 20
"""A profile file larger than this is refused (one is a few kilobytes)."""
MAX_POINTS = 256

BAD_PROFILE = "bad_profile"
PROFILE_MISMATCH = "profile_mismatch"
BAD_CALIBRATION = "bad_calibration"


class ProfileError(ShardingError):
    pass


# ------------------------------------------------------------------------------------------- measuring


def median_seconds(f: Callable[[], Any], repeats: int, warmup: int) -> float:
    """The median wall time of ``f()`` to its result being ready, after ``warmup`` untimed calls."""
    import jax

    for _ in range(warmup):
        jax.block_until_ready(f())
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        jax.block_until_ready(f())
        times.append(time.perf_counter() - t)
    return float(statistics.median(times))


def _collective(op: str, mesh: Any, nbytes: int) -> tuple[Callable[[Any], Any], Any]:
    """A jitted ``shard_map`` of ``op`` over every device of ``mesh`` (axis ``d``) and its f32 input, sized so
    the HLO's bytes per device are ``nbytes`` (an all-gather's result, a reduce-scatter's result, a send)."""
    import jax
    import jax.numpy as jnp
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    n = mesh.devices.size
    elems = max(1, nbytes // 4)
    per = {  # elements of the input on each device
        "all-gather": max(1, elems // n),
        "reduce-scatter": elems * n,
        "all-to-all": max(n, elems - elems % n),
    }.get(op, elems)
    body: Callable[[Any], Any] = {
        "all-gather": lambda x: jax.lax.all_gather(x, "d", tiled=True),
        "all-reduce": lambda x: jax.lax.psum(x, "d"),
        "reduce-scatter": lambda x: jax.lax.psum_scatter(x, "d", tiled=True),
        "all-to-all": lambda x: jax.lax.all_to_all(x, "d", 0, 0, tiled=True),
        "collective-permute": lambda x: jax.lax.ppermute(x, "d", [(i, (i + 1) % n) for i in range(n)]),
    }[op]
    f = jax.jit(jax.shard_map(body, mesh=mesh, in_specs=P("d"), out_specs=P("d"), check_vma=False))
    x = jax.device_put(jnp.ones((n * per,), jnp.float32), NamedSharding(mesh, P("d")))
    return f, x


def _hlo_bytes(op: str, n: int, per: int) -> int:
    return {"all-gather": per * n, "reduce-scatter": per // n}.get(op, per) * 4


def bus_bytes(op: str, nbytes: float, n: int) -> float:
    """nccl-tests' bus bytes of ``op`` with ``nbytes`` per device (HLO) over ``n`` devices."""
    if n <= 1:
        return 0.0
    return {
        "all-reduce": 2 * (n - 1) / n * nbytes,
        "all-gather": (n - 1) / n * nbytes,
        "all-to-all": (n - 1) / n * nbytes,
        "reduce-scatter": (n - 1) * nbytes,
    }.get(op, nbytes)


def fit_line(points: Sequence[tuple[float, float]]) -> tuple[float, float]:
    """(latency, bandwidth) of ``seconds = latency + x / bandwidth`` through ``(x, seconds)`` points (least
    squares, latency ≥ 0; bandwidth infinite — ``inf`` — when the time does not grow with ``x``)."""
    x = np.array([p[0] for p in points], dtype=float)
    t = np.array([p[1] for p in points], dtype=float)
    if len(points) >= 2 and np.ptp(x) > 0:
        slope, intercept = np.polyfit(x, t, 1)
    else:
        slope, intercept = 0.0, float(np.mean(t))
    if intercept < 0:
        intercept = 0.0
        slope = float(np.dot(x, t) / np.dot(x, x)) if np.dot(x, x) > 0 else 0.0
    return float(intercept), (1.0 / float(slope) if slope > 0 else float("inf"))


def _fabric_fit(op: str, points: list[dict[str, Any]], ctx: Any, group: list[int]) -> tuple[str, float | None]:
    """The profile key the operation ran over and its efficiency against the cost model's bound, where ``ctx``
    has hardware figures; ``("cpu", None)`` where it has none. The efficiency and latency minimise Σ |log(expected
    / measured)| on the fit's grids, ``expected = latency + bandwidth time / efficiency``."""
    from sharding_core.cost.collectives import estimate_one

    if ctx is None or ctx.why is not None:
        return "cpu", None
    terms = []
    for p in points:
        c = {"op": op, "bytes": p["bytes"], "groups": [group], "pairs": None}
        if op == "collective-permute":
            c["pairs"] = [[group[i], group[(i + 1) % len(group)]] for i in range(len(group))]
        est = estimate_one(c, ctx)
        found, _ = terms_of(est)
        if not found:
            return str(est.get("fabric") or "cpu"), None
        terms.append(max(found, key=lambda t: t.bandwidth_seconds))
    b = np.array([t.bandwidth_seconds for t in terms])[:, None, None]
    measured = np.array([p["seconds"] for p in points])[:, None, None]
    expected = LATENCY_GRID[None, None, :] + b / EFFICIENCY_GRID[None, :, None]
    loss = np.abs(np.log(expected / measured)).sum(axis=0)
    i, _ = np.unravel_index(int(np.argmin(loss)), loss.shape)
    return terms[0].key, float(EFFICIENCY_GRID[i])


def _check(sizes: Sequence[int], shapes: Sequence[Sequence[int]], repeats: int, warmup: int) -> None:
    if not sizes or any(not 4 <= s <= MAX_SIZE for s in sizes):
        raise ShardingError(BAD_CALIBRATION, f"sizes must be between 4 bytes and {MAX_SIZE} bytes per device")
    if any(len(s) != 3 or not all(1 <= d <= MAX_DIM for d in s) for s in shapes):
        raise ShardingError(BAD_CALIBRATION, f"matmul shapes are (m, k, n), each between 1 and {MAX_DIM}")
    if not 1 <= repeats <= MAX_REPEATS or not 0 <= warmup <= MAX_REPEATS:
        raise ShardingError(BAD_CALIBRATION, f"repeats between 1 and {MAX_REPEATS}, warm-up 0 to {MAX_REPEATS}")


def calibrate(
    devices: Sequence[Any] | None = None,
    *,
    sizes: Sequence[int] = DEFAULT_SIZES,
    shapes: Sequence[Sequence[int]] = DEFAULT_SHAPES,
    dtypes: Sequence[str] = DTYPES,
    repeats: int = 5,
    warmup: int = 2,
) -> dict[str, Any]:
    """Measures the collectives over ``devices`` (default ``jax.devices()``) and the matmuls on the first of them,
    and returns the profile (the module docstring's format)."""
    import jax

    from sharding_core.cost.context import context_for_devices

    _check(sizes, shapes, repeats, warmup)
    devices = list(devices if devices is not None else jax.devices())
    first = devices[0]
    ctx = context_for_devices(devices) if str(first.platform) != "cpu" else None
    mesh = jax.sharding.Mesh(np.array(devices), ("d",))
    group = [int(d.id) for d in devices]
    collectives: dict[str, Any] = {}
    for op in OPS:
        points = []
        for size in sorted(set(sizes)):
            f, x = _collective(op, mesh, size)
            seconds = median_seconds(functools.partial(f, x), repeats, warmup)
            per = int(x.shape[0]) // len(devices)
            points.append({"bytes": _hlo_bytes(op, len(devices), per), "group_size": len(devices), "seconds": seconds})
        latency, bandwidth = fit_line([(bus_bytes(op, p["bytes"], len(devices)), p["seconds"]) for p in points])
        fabric, efficiency = _fabric_fit(op, points, ctx, group) if len(devices) > 1 else ("none", None)
        collectives[op] = {
            "fabric": fabric,
            "efficiency": efficiency,
            "latency_seconds": latency,
            "bus_bandwidth": bandwidth if np.isfinite(bandwidth) else None,
            "points": points,
        }
    return {
        "format": FORMAT,
        "created": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "jax_version": jax.__version__,
        "devices": {
            "platform": str(first.platform),
            "device_kind": str(first.device_kind),
            "count": len(devices),
            "process_count": int(jax.process_count()),
        },
        "collectives": collectives,
        "matmul": _matmuls(first, shapes, dtypes, repeats, warmup),
    }


def _matmuls(
    device: Any, shapes: Sequence[Sequence[int]], dtypes: Sequence[str], repeats: int, warmup: int
) -> dict[str, Any]:
    import jax
    import jax.numpy as jnp

    from sharding_core.hardware import figures_for_kind, peak_flops

    hw = figures_for_kind(str(device.platform), str(device.device_kind))
    mm = jax.jit(jnp.matmul)
    points = []
    best: dict[str, float] = {}
    for dtype in dtypes:
        for m, k, n in shapes:
            a = jax.device_put(jnp.ones((m, k), dtype), device)
            b = jax.device_put(jnp.ones((k, n), dtype), device)
            seconds = median_seconds(functools.partial(mm, a, b), repeats, warmup)
            points.append({"m": m, "k": k, "n": n, "dtype": dtype, "seconds": seconds})
            best[dtype] = max(best.get(dtype, 0.0), 2.0 * m * k * n / seconds)
    dominant = "bfloat16" if "bfloat16" in best else next(iter(best))
    efficiency = None
    if hw is not None:
        peak, _ = peak_flops(hw, dominant)
        if peak is not None and peak.value:
            efficiency = best[dominant] / peak.value
    return {"efficiency": efficiency, "flops_per_second": best[dominant], "dtype": dominant, "points": points}


# ------------------------------------------------------------------------------------------- using one


def load_profile(source: str | Path | Mapping[str, Any]) -> dict[str, Any]:
    """A profile from a file or a dict, checked (:data:`BAD_PROFILE` with what is wrong). The file's name is kept
    as ``source`` (what figures name it by)."""
    if isinstance(source, Mapping):
        profile, name = dict(source), str(source.get("source") or "profile")
    else:
        path = Path(source)
        try:
            if path.stat().st_size > MAX_PROFILE_BYTES:
                raise ProfileError(BAD_PROFILE, f"{path} is larger than {MAX_PROFILE_BYTES} bytes: not a profile")
            profile = json.loads(path.read_text())
        except (OSError, ValueError) as e:
            raise ProfileError(BAD_PROFILE, f"cannot read the profile {path}: {e}", hint=CALIBRATE_HINT) from None
        name = path.name
    _validate(profile)
    return {**profile, "source": name}


CALIBRATE_HINT = "make one with `shardscope calibrate --json profile.json` on the devices it is for"


def _validate(profile: Any) -> None:
    def bad(why: str) -> ProfileError:
        return ProfileError(BAD_PROFILE, f"not a {FORMAT} profile: {why}", hint=CALIBRATE_HINT)

    if not isinstance(profile, dict) or profile.get("format") != FORMAT:
        raise bad(f"'format' must be {FORMAT!r}")
    devices = profile.get("devices")
    if not isinstance(devices, dict) or not all(isinstance(devices.get(k), str) for k in ("platform", "device_kind")):
        raise bad("'devices' needs 'platform' and 'device_kind'")
    if not isinstance(devices.get("count"), int) or devices["count"] < 1:
        raise bad("'devices.count' must be a positive integer")
    collectives = profile.get("collectives")
    if not isinstance(collectives, dict) or not collectives:
        raise bad("'collectives' must map operations to their fits")
    for op, fit in collectives.items():
        if op not in OPS or not isinstance(fit, dict):
            raise bad(f"unknown operation {op!r} (one of {', '.join(OPS)})")
        eff, lat = fit.get("efficiency"), fit.get("latency_seconds")
        if eff is not None and not (isinstance(eff, (int, float)) and 0 < eff < 10):
            raise bad(f"{op}: 'efficiency' must be a positive number or null")
        if not isinstance(lat, (int, float)) or not 0 <= lat < 10:
            raise bad(f"{op}: 'latency_seconds' must be seconds")
        if not isinstance(fit.get("points"), list) or len(fit["points"]) > MAX_POINTS:
            raise bad(f"{op}: 'points' must be a list of at most {MAX_POINTS}")
    matmul = profile.get("matmul")
    if not isinstance(matmul, dict) or "efficiency" not in matmul:
        raise bad("'matmul' needs 'efficiency' (a number or null)")


def describe(profile: Mapping[str, Any]) -> str:
    """How figures name the profile they came from: ``calibrated: <file> (<device_kind> x N, <date>)``."""
    d = profile["devices"]
    created = str(profile.get("created") or "")[:10]
    return f"calibrated: {profile.get('source') or 'profile'} ({d['device_kind']} x {d['count']}, {created})"


def check_matches(profile: Mapping[str, Any], ctx: Any) -> None:
    """Refuses (:data:`PROFILE_MISMATCH`) a profile measured on other hardware than ``ctx``'s devices."""
    from sharding_core.hardware import figures_for_kind

    d = profile["devices"]
    platform = str(d["platform"])
    measured = f"{d['count']} {platform} device(s) of kind {d['device_kind']!r}"
    if ctx is None:
        raise ProfileError(PROFILE_MISMATCH, "no device set to apply the profile to")
    if platform == "cpu" and ctx.platform == "cpu":
        return
    hw = figures_for_kind(platform, str(d["device_kind"])) if platform != "cpu" else None
    if hw is not None and ctx.hardware is not None and hw.name == ctx.hardware.name:
        return
    raise ProfileError(
        PROFILE_MISMATCH,
        f"the profile was measured on {measured}; these figures are for {ctx.label}",
        hint="calibrate on the target's devices (shardscope calibrate --json FILE there), or leave the profile out "
        "to use the fit to published measurements",
    )


def profiles_for(profile: Mapping[str, Any], ctx: Any) -> dict[str, FabricProfile]:
    """The shipped profiles with each operation the profile measured taking its measured efficiency and latency
    on the fabric it ran over (hardware checked: :func:`check_matches`)."""
    check_matches(profile, ctx)
    out = dict(PROFILES)
    name = describe(profile)
    for op, fit in profile["collectives"].items():
        key, eff = str(fit.get("fabric")), fit.get("efficiency")
        if key not in out or eff is None:
            continue
        p = out[key]
        ops = {**dict(p.op_efficiency), KIND_OF[op]: float(eff)}
        lat = {**dict(p.op_latency), KIND_OF[op]: float(fit["latency_seconds"])}
        out[key] = dataclasses.replace(
            p,
            op_efficiency=tuple(sorted(ops.items())),
            op_latency=tuple(sorted(lat.items())),
            borrowed=None,
            source=name,
        )
    return out


def cpu_estimate(c: Mapping[str, Any], profile: Mapping[str, Any]) -> dict[str, Any]:
    """A collective on CPU devices from a CPU profile's measured line (no bound: CPUs have no hardware figures)."""
    from sharding_core.cost.collectives import KIND, none

    op = str(c.get("op"))
    kind = KIND.get(op)
    fit = profile["collectives"].get(OP_OF.get(kind or "", ""))
    nbytes = c.get("bytes")
    if kind is None or fit is None or nbytes is None:
        return none(f"the profile measured no {op!r}" if kind else f"no model for {op!r}")
    groups = c.get("groups") or []
    n = 2 if kind == "permute" else max((len(g) for g in groups), default=1)
    if n <= 1:
        nothing = "every group is a single device: nothing moves"
        return {"seconds": None, "bound_seconds": None, "expected_seconds": 0.0, "fabric": "cpu",
                "profile": describe(profile), "why_no_bound": nothing}  # fmt: skip
    x = bus_bytes(OP_OF[kind], float(nbytes), n)
    bandwidth = fit.get("bus_bandwidth")
    seconds = float(fit["latency_seconds"]) + (x / float(bandwidth) if bandwidth else 0.0)
    return {
        "seconds": None,
        "bound_seconds": None,
        "expected_seconds": seconds,
        "fabric": "cpu",
        "formula": "latency + bus bytes / bus bandwidth, the line the profile measured",
        "inputs": {
            "op": op,
            "bytes": nbytes,
            "group_size": n,
            "bus_bytes": x,
            "latency_seconds": fit["latency_seconds"],
            "bus_bandwidth": bandwidth,
        },
        "profile": describe(profile),
        "why_no_bound": "no hardware figures for CPU device sets: the expected time is the profile's measurement",
    }


def estimate_with_profile(c: Mapping[str, Any], ctx: Any, profile: Mapping[str, Any]) -> dict[str, Any]:
    """One collective (the HLO reader's dict) on ``ctx`` with ``profile``'s measurements."""
    from sharding_core.cost.collectives import estimate_one

    check_matches(profile, ctx)
    if ctx.platform == "cpu" and ctx.hardware is None:
        return cpu_estimate(c, profile)
    est = estimate_one(c, ctx, profiles_for(profile, ctx))
    if est.get("seconds") is not None:
        est["profile"] = describe(profile)
    return est


def apply_profile(snapshot: Mapping[str, Any], profile: str | Path | Mapping[str, Any]) -> dict[str, Any]:
    """A snapshot (``inspect_jit``'s, ``plan``'s) with its figures from a calibrated ``profile``: every collective's
    estimate, the plan's roofline and step time. The profile is kept in the snapshot (``cost_profile``), so a
    reader of the stored snapshot gets the same figures; one for other hardware is refused."""
    from sharding_core.cost.annotate import snapshot_context, snapshot_with_estimates

    loaded = load_profile(profile)
    check_matches(loaded, snapshot_context(snapshot))
    return snapshot_with_estimates({**snapshot, "cost_profile": loaded})
