"""One candidate compiled and read: the mesh over the set's compile-only devices (:func:`sharding_core.mesh`),
``FN(mesh, rules, **knobs)``, the program through the one pipeline (:func:`sharding_core.planning.program.
plan_program`) and its figures as a plan's are (:func:`sharding_core.cost.annotate.snapshot_with_estimates`):
XLA's memory, its collectives with their repeat counts, the step-time band. What a search ranks."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from sharding_core.cost.annotate import snapshot_with_estimates
from sharding_core.errors import ShardingError
from sharding_core.planning.program import plan_program
from sharding_core.program.targets import mesh as target_mesh
from sharding_core.searching.space import Grid
from sharding_core.snapshot.rules import Rule

BAD_RETURN = "bad_target"


@dataclasses.dataclass(frozen=True)
class Job:
    """A candidate to compile, as plain data (it crosses to a worker process as JSON)."""

    index: int
    devices: str
    slices: int
    layout: Grid
    rules: tuple[Rule, ...]
    knobs: tuple[tuple[str, Any], ...]
    headroom: float

    def json(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "devices": self.devices,
            "slices": self.slices,
            "sizes": [list(p) for p in self.layout.sizes],
            "dcn": list(self.layout.dcn),
            "rules": [[n, list(a) if isinstance(a, tuple) else a] for n, a in self.rules],
            "knobs": dict(self.knobs),
            "headroom": self.headroom,
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Job:
        layout = Grid(tuple((str(a), int(s)) for a, s in d["sizes"]), tuple(int(x) for x in d["dcn"]))
        rules = tuple((str(n), tuple(a) if isinstance(a, list) else a) for n, a in d["rules"])
        return cls(int(d["index"]), str(d["devices"]), int(d["slices"]), layout, rules,
                   tuple(sorted(dict(d["knobs"]).items())), float(d["headroom"]))  # fmt: skip


def candidate_mesh(devices: str, slices: int, layout: Grid) -> Any:
    """The candidate's mesh over the set's devices (hybrid ICI x DCN across slices)."""
    if any(d > 1 for d in layout.dcn):
        return target_mesh(devices, layout.shape, layout.names, slices=slices, order="hybrid", dcn_shape=layout.dcn)
    return target_mesh(devices, layout.shape, layout.names, slices=slices)


def build(fn: Callable[..., Any], mesh: Any, rules: Sequence[Rule], knobs: Mapping[str, Any]) -> tuple[Any, Any, Any]:
    """``FN(mesh, rules, **knobs)`` as ``(jitted, positional args, keyword args)``."""
    made = fn(mesh, tuple(rules), **dict(knobs))
    if not isinstance(made, tuple) or len(made) != 2:
        raise ShardingError(BAD_RETURN, f"FN(mesh, rules) must return (jitted_fn, args), got {type(made).__name__}")
    jitted, args = made
    return (jitted, (), dict(args)) if isinstance(args, dict) else (jitted, tuple(args), {})


def compile_job(fn: Callable[..., Any], job: Job) -> dict[str, Any]:
    """The candidate compiled for the set and read: its figures (see :func:`figures`)."""
    t0 = time.perf_counter()
    mesh = candidate_mesh(job.devices, job.slices, job.layout)
    jitted, args, kwargs = build(fn, mesh, job.rules, dict(job.knobs))
    planned = plan_program(jitted, args, kwargs, detailed=False)
    report = planned.report
    signature = report.signature
    snap = {
        "target": dict(report.target),
        "plan": dict(planned.plan),
        "program": report.json(),
        "collectives": report.collectives_json(),
        "jit": {"donated_inputs": signature.donated if signature is not None else 0},
    }
    out = figures(snapshot_with_estimates(snap), job.headroom)
    out["compile_seconds"] = round(time.perf_counter() - t0, 3)
    return out


def figures(snap: Mapping[str, Any], headroom: float) -> dict[str, Any]:
    """What a search ranks, from a plan's figures: fits (XLA's peak within the HBM less ``headroom``), the peak,
    the step-time band, and the collectives' expected seconds per step by op and mesh axes."""
    plan = snap.get("plan") or {}
    memory = (snap.get("program") or {}).get("memory") or {}
    step = plan.get("step_time") or {}
    capacity = plan.get("capacity_bytes")
    peak = memory.get("peak_memory_in_bytes")
    refusal = plan.get("refusal") or plan.get("over_capacity")
    usable = int(capacity * (1.0 - headroom)) if capacity else None
    fits = plan.get("fits")
    if fits and peak is not None and usable is not None:
        fits = int(peak) <= usable
    by: dict[str, float] = {}
    for c in snap.get("collectives") or []:
        seconds = (c.get("estimate") or {}).get("expected_seconds")
        if seconds is not None:
            key = f"{c['op']}s over {c.get('axes_text') or 'no mesh axis'}"
            by[key] = by.get(key, 0.0) + float(seconds) * int(c.get("repeat", 1))
    return {
        "compiled": True,
        "fits": None if fits is None else bool(fits),
        "peak_bytes": int(peak) if peak is not None else (refusal or {}).get("required_bytes"),
        "capacity_bytes": capacity,
        "usable_bytes": usable,
        "over_bytes": plan.get("over_bytes"),
        "expected_seconds": step.get("expected_seconds") if refusal is None else None,
        "lower_bound_seconds": step.get("lower_bound_seconds"),
        "upper_bound_seconds": step.get("upper_bound_seconds"),
        "bound": step.get("bound"),
        "compute_seconds": step.get("compute_seconds"),
        "verdict": plan.get("verdict"),
        "advice": list((refusal or {}).get("advice") or []),
        "collective_seconds": dict(sorted(by.items(), key=lambda kv: -kv[1])[:6]),
    }
