"""A search, start to end: the model probed, the space enumerated and estimated, the most promising candidates
compiled within the budget (:mod:`sharding_core.searching.pool`), and the answer ranked
(:mod:`sharding_core.searching.rank`). The pick's full plan is :func:`sharding_core.capturing.search`'s."""

from __future__ import annotations

import dataclasses
import math
import re
import statistics
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from sharding_core.cost.context import context_for
from sharding_core.devices import DeviceSet, parse_devices
from sharding_core.errors import MESH_UNPLACEABLE, ShardingError
from sharding_core.hardware import hbm_per_device
from sharding_core.searching import rank
from sharding_core.searching.compiling import Job
from sharding_core.searching.estimate import Estimate, estimate
from sharding_core.searching.pool import Limits, run_in_process, run_in_workers
from sharding_core.searching.remote import run_on_server
from sharding_core.searching.space import (
    AXES,
    Grid,
    Model,
    knob_combinations,
    knob_values,
    meshes,
    probe,
    rules_for,
    rules_parameter,
)
from sharding_core.snapshot.rules import Rule
from sharding_core.units import fmt_bytes, fmt_seconds

BAD_OPTION = "bad_search_option"
NO_FIGURES = "search_needs_figures"
MAX_BUDGET_SECONDS = 6 * 3600
ESTIMATOR = (
    "compile order: the arguments' bytes per device from the rules and shapes, and communication per step from the "
    "scaling book's formulas (Part 5) timed by the cost model; rank: the compiled program's expected step time "
    "(plan.step_time.expected_seconds) among those whose XLA peak fits the HBM less the headroom"
)


@dataclasses.dataclass(frozen=True)
class Options:
    slices: int = 1
    budget: float = 600.0
    hbm_headroom: float = 0.1
    workers: int = 2
    max_compiles: int | None = None
    exhaustive: bool = False
    knobs: Mapping[str, Sequence[Any]] | None = None
    axes: Sequence[str] | None = None
    current: Mapping[str, Any] | None = None  # {"mesh": {"shape", "axis_names"}, "rules": [...], "knobs": {...}}
    memory_bytes: int = Limits.memory_bytes
    compile_seconds: float = Limits.seconds
    progress: Callable[[str], None] | None = None
    server: str | None = None  # a team's server whose replicas compile the candidates (server.services.searches)
    token: str | None = None  # its write token (default $SHARDSCOPE_TOKEN)


def budget_seconds(value: Any) -> float:
    """``600``, ``"600"``, ``"600s"``, ``"10m"``, ``"1h"`` -> seconds."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = float(value)
    else:
        m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smh]?)\s*", str(value))
        if m is None:
            raise ShardingError(BAD_OPTION, f"budget {str(value)[:40]!r} is not a duration", hint="e.g. 600, 90s, 10m")
        seconds = float(m[1]) * {"": 1, "s": 1, "m": 60, "h": 3600}[m[2]]
    if not 0 < seconds <= MAX_BUDGET_SECONDS:
        raise ShardingError(BAD_OPTION, f"budget must be over 0 and at most {MAX_BUDGET_SECONDS} s, got {seconds:g}")
    return seconds


def options(**given: Any) -> Options:
    """Checked options (the keyword arguments of :func:`sharding_core.search`)."""
    known = {f.name for f in dataclasses.fields(Options)}
    unknown = sorted(set(given) - known)
    if unknown:
        raise ShardingError(BAD_OPTION, f"unknown search option(s) {', '.join(unknown)}", hint=", ".join(sorted(known)))
    if "budget" in given:
        given["budget"] = budget_seconds(given["budget"])
    o = Options(**given)
    if not 0 <= o.hbm_headroom < 1:
        raise ShardingError(BAD_OPTION, f"hbm_headroom must be in [0, 1), got {o.hbm_headroom}")
    if not 1 <= o.slices <= 64 or not 0 <= o.workers <= 8:
        raise ShardingError(BAD_OPTION, "slices must be 1..64 and workers 0..8")
    bad = sorted(set(o.axes or ()) - set(AXES))
    if bad:
        raise ShardingError(BAD_OPTION, f"unknown mesh axes {', '.join(bad)}", hint=f"the axes: {', '.join(AXES)}")
    return o


class Clock:
    """When compiles may start and when they must stop: a compile starts only when the typical one so far still
    ends before the deadline, which keeps room for the pick's own plan (one more compile)."""

    def __init__(self, budget: float) -> None:
        self.t0 = time.monotonic()
        self.budget = budget
        self.seconds: list[float] = []
        self.lock = threading.Lock()

    def typical(self) -> float:
        with self.lock:
            return statistics.median(self.seconds) if self.seconds else 0.0

    def deadline(self) -> float:
        """Compiles are stopped here: the budget less one typical compile (the pick's plan)."""
        return self.t0 + self.budget - self.typical()

    def can_start(self) -> bool:
        return time.monotonic() + self.typical() < self.deadline()

    def elapsed(self) -> float:
        return time.monotonic() - self.t0


def locate(fn: Callable[..., Any]) -> tuple[str, str] | None:
    """``(file, name)`` a worker process can import ``fn`` by, or None (a closure, a lambda, ``__main__``)."""
    module = sys.modules.get(getattr(fn, "__module__", "") or "")
    file = getattr(module, "__file__", None)
    name = getattr(fn, "__name__", "")
    if module is None or not file or module.__name__ == "__main__" or getattr(module, name, None) is not fn:
        return None
    return str(file), name


def say(o: Options, text: str) -> None:
    if o.progress is not None:
        o.progress(text)


@dataclasses.dataclass(frozen=True)
class Candidate:
    layout: Grid
    rules: tuple[Rule, ...]
    knobs: tuple[tuple[str, Any], ...]
    estimate: Estimate
    variant: str = ""  # what tells this rule set from another on the same mesh ("" for the first)

    def mesh_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"shape": list(self.layout.shape), "axis_names": list(self.layout.names)}
        if any(d > 1 for d in self.layout.dcn):
            out["dcn_shape"] = list(self.layout.dcn)
        return out

    def json(self) -> dict[str, Any]:
        return {
            "mesh": self.mesh_json(),
            "rules": [[n, list(a) if isinstance(a, tuple) else a] for n, a in self.rules],
            "knobs": dict(self.knobs),
            "strategy": self.layout.text() + (f" ({self.variant})" if self.variant else ""),
            "compiled": False,
            "fits": None,
            "peak_bytes": None,
            "expected_seconds": None,
            "estimate": self.estimate.json(),
        }


VARIANT_NOTES = {"maxtext": "", "fsdp": "weights' embed over fsdp alone"}
"""How a candidate's strategy names the rule-set variant it was built with (``space.rules_for``) when its mesh has
more than one: MaxText's puts weights' ``embed`` over fsdp, sequence and expert, the other over fsdp alone."""


def space(devices: str, devset: DeviceSet, model: Model, o: Options) -> list[Candidate]:
    """Every candidate (mesh x rule set x knobs), each rule set once per mesh; meshes JAX cannot place on the
    set's devices (``jax.make_mesh``'s refusal: an axis that is no product of physical axes) left out."""
    chips = len(devset.devices) // o.slices
    out: list[Candidate] = []
    for layout in meshes(chips, o.slices, model, o.axes):
        seen: set[tuple[Rule, ...]] = set()
        for variant in ("maxtext", "fsdp"):
            rules = rules_for(layout, model, variant)
            if rules is None or rules in seen:
                continue
            seen.add(rules)
            try:
                est = estimate(devices, devset, model, rules, layout)
            except ShardingError as e:  # a mesh jax.make_mesh cannot lay on the torus (4 x 8 x 8 as 2 x 128)
                if e.code != MESH_UNPLACEABLE:
                    raise
                break
            note = VARIANT_NOTES[variant] if seen != {rules} else ""  # a second rule set on this mesh says how
            out.extend(Candidate(layout, rules, knobs, est, note) for knobs in knob_combinations(model.knobs))
    return out


def usable_bytes(devset: DeviceSet, headroom: float) -> int | None:
    hw = context_for(devset).hardware
    capacity = hbm_per_device(hw).value if hw is not None else None
    return int(capacity * (1.0 - headroom)) if capacity else None


def search(fn: Callable[..., Any], devices: str, o: Options) -> dict[str, Any]:
    """The search's answer without the pick's plan (see the module docstring)."""
    clock = Clock(o.budget)
    rules_parameter(fn)
    devset = parse_devices(devices, slices=o.slices)
    usable = usable_bytes(devset, o.hbm_headroom)
    if usable is None or devset.platform == "cpu":
        raise ShardingError(
            NO_FIGURES,
            f"{devices} has no hardware figures: a search ranks by step time and HBM",
            hint="search a tpu: or gpu: set (compiled here, compile-only), e.g. tpu:v5p:2x2x2",
        )
    model = probe(fn, knob_values(fn, o.knobs))
    say(o, f"model: logical axes {', '.join(sorted(model.names))}; knobs {dict(model.knobs) or 'none'}")
    found = space(devices, devset, model, o)
    if not found:
        raise ShardingError("search_empty", f"no mesh of {devices} splits the model's batch evenly over its axes",
                            hint="make the global batch a multiple of the chips (or of a factor of them)")  # fmt: skip
    mine = with_current(devices, devset, model, found, o.current)
    entries = [c.json() for c in found]
    ranked = sorted(range(len(found)), key=lambda i: (found[i].estimate.seconds, found[i].estimate.argument_bytes, i))
    if mine is not None:
        entries[mine]["current"] = True
        ranked = [mine, *(i for i in ranked if i != mine)]  # the user's own sharding is compiled first
    jobs: list[Job] = []
    for i in ranked:
        if found[i].estimate.argument_bytes > usable and i != mine:
            entries[i]["error"] = {"code": "pruned", "message": (
                f"pruned: its arguments alone need {fmt_bytes(found[i].estimate.argument_bytes)} a device, over "
                f"the {fmt_bytes(usable)} usable")}  # fmt: skip
            entries[i]["fits"] = False
        elif o.exhaustive or o.max_compiles is None or len(jobs) < o.max_compiles:
            jobs.append(Job(i, devices, o.slices, found[i].layout, found[i].rules, found[i].knobs, o.hbm_headroom))
        else:
            entries[i]["error"] = {"code": "skipped", "message": f"past the {o.max_compiles} compiles asked for"}
    say(o, f"{len(found)} candidates; {len(jobs)} to compile in estimate order within {fmt_seconds(o.budget)}")
    _compile(fn, jobs, entries, clock, o)
    return answer(devices, model, entries, clock, o, usable)


def with_current(
    devices: str, devset: DeviceSet, model: Model, found: list[Candidate], current: Mapping[str, Any] | None
) -> int | None:
    """The index of the user's current sharding among the candidates (added when the space lacks it), or None."""
    if current is None:
        return None
    try:
        mesh = current["mesh"]
        dcn = tuple(int(d) for d in mesh.get("dcn_shape") or (1,) * len(mesh["shape"]))
        grid = Grid(tuple((str(a), int(s)) for a, s in zip(mesh["axis_names"], mesh["shape"], strict=True)), dcn)
        rules = tuple((str(n), tuple(a) if isinstance(a, list | tuple) else a) for n, a in current["rules"])
        knobs = tuple(sorted(dict(current.get("knobs") or {}).items()))
    except (KeyError, TypeError, ValueError) as e:
        raise ShardingError(BAD_OPTION, f"current must be {{'mesh': {{'shape', 'axis_names'}}, 'rules', 'knobs'}}: {e}",
                            hint="e.g. a previous search's pick") from None  # fmt: skip
    for i, c in enumerate(found):
        if (c.layout, c.rules, tuple(sorted(c.knobs))) == (grid, rules, knobs):
            return i
    found.append(Candidate(grid, rules, knobs, estimate(devices, devset, model, rules, grid)))
    return len(found) - 1


def _compile(fn: Callable[..., Any], jobs: list[Job], entries: list[dict[str, Any]], clock: Clock, o: Options) -> None:
    done_count = [0]

    def done(job: Job, result: dict[str, Any]) -> None:
        entries[job.index].update(result)
        if result.get("compiled"):
            done_count[0] += 1
            with clock.lock:
                clock.seconds.append(float(result.get("compile_seconds") or 0.0))
            e = entries[job.index]
            said = f"{fmt_seconds(e['expected_seconds'])} a step" if e.get("expected_seconds") is not None else "-"
            fits = "fits" if e.get("fits") else "does not fit"
            say(
                o,
                f"[{clock.elapsed():.0f} s] compiled {done_count[0]}: {e['strategy']} {dict(job.knobs) or ''}: "
                f"{fits}, peak {fmt_bytes(e.get('peak_bytes') or 0)}, {said} ({e['compile_seconds']:.0f} s)",
            )
        elif (result.get("error") or {}).get("code") != "budget":
            say(o, f"[{clock.elapsed():.0f} s] {entries[job.index]['strategy']}: {result['error']['message'][:200]}")

    if o.server is not None:
        target = locate(fn)
        if target is None:
            raise ShardingError(BAD_OPTION, "a search on a server needs FN defined at the top of a Python file (the "
                                "file is sent to the server and imported there)",
                                hint="move FN out of __main__, a closure or a notebook cell into a file")  # fmt: skip
        run_on_server(o.server, o.token, target, jobs, clock, done, lambda text: say(o, text))
        return
    target = locate(fn) if o.workers > 0 else None
    if target is None:
        run_in_process(fn, jobs, clock, done)
    else:
        run_in_workers(target, jobs, clock, done, Limits(o.workers, o.memory_bytes, o.compile_seconds))


def answer(devices: str, model: Model, entries: list[dict[str, Any]], clock: Clock, o: Options,
           usable: int) -> dict[str, Any]:  # fmt: skip
    """Ranked: candidates best first, the pick, the front, every candidate's lost_on, the pick ready to paste."""
    order = rank.order(entries)
    candidates = [entries[i] for i in order]
    for c in candidates:
        c.setdefault("usable_bytes", usable)
    pick = candidates[0] if candidates[0].get("fits") and candidates[0].get("expected_seconds") is not None else None
    on_front = rank.front(candidates)
    for i, c in enumerate(candidates):
        c["lost_on"] = rank.lost_on(c, pick, i in on_front, o.hbm_headroom)
        if c.get("current"):
            c["lost_on"] = f"your current sharding: {c['lost_on']}"
        if c.get("compiled"):  # any compiled candidate's mesh and rules, ready to paste (the front's too)
            c["paste"] = rank.paste(devices, o.slices, c["mesh"], c["rules"], c["knobs"])
    out: dict[str, Any] = {
        "devices": devices,
        "slices": o.slices,
        "budget_seconds": o.budget,
        "hbm_headroom": o.hbm_headroom,
        "usable_bytes": usable,
        "model": {"logical_axes": sorted(model.names), "knobs": {k: list(v) for k, v in model.knobs.items()}},
        "estimator": ESTIMATOR,
        "enumerated": len(candidates),
        "compiled": sum(1 for c in candidates if c.get("compiled")),
        "compile_seconds": round(sum(float(c.get("compile_seconds") or 0) for c in candidates), 3),
        "pick": None,
        "candidates": candidates,
        "front": on_front,
        "current": next((i for i, c in enumerate(candidates) if c.get("current")), None),
    }
    if pick is not None:
        out["pick"] = {"index": 0, "mesh": pick["mesh"], "rules": pick["rules"], "knobs": pick["knobs"],
                       "strategy": pick["strategy"], "plan": None,
                       "paste": rank.paste(devices, o.slices, pick["mesh"], pick["rules"], pick["knobs"])}  # fmt: skip
    else:
        out["closest"] = closest(candidates)
        if out["compiled"] == 0:
            out["why_no_pick"] = (
                f"no candidate compiled within the budget ({fmt_seconds(o.budget)}): a compile of this model takes "
                "longer here; give a larger budget (or fewer candidates: --axes, --max-compiles)"
            )
    out["seconds"] = round(clock.elapsed(), 3)
    return out


def summary(result: Mapping[str, Any]) -> dict[str, Any]:
    """The search without the pick's plan: what the pick's plan carries as ``search`` (the snapshot format's
    ``SEARCH_FIELDS``), so that a published or shown plan draws the front it was picked from."""
    out = {k: v for k, v in result.items() if k != "pick"}
    pick = result.get("pick")
    out["pick"] = None if pick is None else {k: v for k, v in pick.items() if k != "plan"}
    return out


def closest(candidates: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """When nothing fits: the compiled candidate nearest to fitting, and what to change."""
    compiled = [i for i, c in enumerate(candidates) if c.get("compiled") and c.get("peak_bytes")]
    if not compiled:
        return None
    i = min(compiled, key=lambda k: int(candidates[k]["peak_bytes"]))
    c = candidates[i]
    over = max(0, int(c["peak_bytes"]) - int(c.get("usable_bytes") or 0))
    change = list(c.get("advice") or []) or [
        f"it needs {fmt_bytes(over)} less a device: more chips (a larger slice or --slices), a smaller batch, "
        "rematerialised layers, or a lower headroom"]  # fmt: skip
    need = math.ceil(int(c["peak_bytes"]) / max(1, int(c.get("usable_bytes") or 1)))
    return {"index": i, "strategy": c["strategy"], "peak_bytes": c["peak_bytes"], "over_bytes": over,
            "change": change, "times_the_usable_hbm": need}  # fmt: skip
