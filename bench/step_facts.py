"""The published runs' compiled facts (``bench/run_facts.json.gz``) and the scoreboard they give.

:func:`run_facts` reads one cached compile (``bench/bench_steps.py compile``) as a plan holds it — the schedule,
the collectives with their device groups, the work counted through loops, XLA's memory figures — with nothing
the cost model adds; :func:`snapshot` turns stored facts back into a plan snapshot, and
:func:`sharding_core.cost.annotate.snapshot_with_estimates` puts today's figures on it, as on any stored plan.
:func:`report` refits the step model on the training split and prints the scoreboard.
"""

from __future__ import annotations

import gzip
import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from sharding_core.cost import runs as R
from sharding_core.cost import step_fit
from sharding_core.cost.step_fit import decode_groups, encode_groups

FACTS = Path(__file__).with_name("run_facts.json.gz")
_KEEP = ("op", "name", "is_async", "bytes", "pairs", "axes", "repeat", "widened", "source")


def run_facts(cache: Path, name: str) -> dict[str, Any]:
    """One cached compile's facts (``name``: the run id, with ``-L<layers>`` for a reduced copy)."""
    from sharding_core.hlo.collectives import read_collectives
    from sharding_core.hlo.program import program_facts
    from sharding_core.hlo.schedule import schedule_of
    from sharding_core.program.report import work_facts

    meta = json.loads((cache / f"{name}.json").read_text())
    timing = {k: meta.get(k) for k in ("compile_seconds", "cpu_seconds", "peak_rss_bytes")}
    out: dict[str, Any] = {"name": name, "id": meta["id"], "layers": meta.get("layers"),
                           "mode": meta.get("mode", "full"), "compile": timing}  # fmt: skip
    if meta.get("refusal"):
        out["refusal"] = meta["refusal"]
        return out
    hlo = gzip.decompress((cache / f"{name}.hlo.gz").read_bytes()).decode()
    t = time.process_time()
    facts = program_facts(hlo)
    grid = np.asarray(meta["device_ids"]).reshape(meta["mesh_shape"]).tolist()
    collectives = read_collectives(hlo, [meta["device_ids"]], grid, meta["axis_names"], facts)
    out["collectives"] = [{**{k: c.get(k) for k in _KEEP}, "groups": encode_groups(c["groups"])} for c in collectives]
    out["schedule"] = schedule_of(facts)
    out["work"] = work_facts(_Cost(meta.get("cost") or {}), facts)
    out["memory"] = meta["memory"]
    out["buffer_assignment_bytes"] = meta.get("buffer_assignment_bytes")
    out["read_seconds"] = time.process_time() - t
    return out


class _Cost:
    """A compiled executable's ``cost_analysis`` as the cache stored it (for :func:`work_facts`)."""

    def __init__(self, cost: dict[str, float]) -> None:
        self.cost = cost

    def cost_analysis(self) -> dict[str, float]:
        return self.cost


def write_facts(cache: Path, out: Path = FACTS) -> None:
    """Each cached compile's facts into ``out``; the compiles ``out`` already holds and the cache lacks are kept
    (a cache with some runs recompiled updates those rows only)."""
    names = sorted(p.name.removesuffix(".json") for p in cache.glob("*.json"))
    kept = {r["name"]: r for r in load(out)} if out.exists() else {}
    for name in names:
        kept[name] = run_facts(cache, name)
        print(f"{name}: read", flush=True)
    rows = [kept[n] for n in sorted(kept)]
    data = {"runs": rows, "note": "bench/bench_steps.py facts; compiled facts only, no estimates"}
    out.write_bytes(gzip.compress(json.dumps(data, separators=(",", ":")).encode(), 9))
    print(f"wrote {out} ({out.stat().st_size / 1e6:.2f} MB, {len(rows)} compiles)")


def load(path: Path = FACTS) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = json.loads(gzip.decompress(path.read_bytes()))["runs"]
    return rows


def snapshot(facts: dict[str, Any]) -> dict[str, Any]:
    """A plan snapshot with a run's stored facts (nothing estimated yet)."""
    run = R.BY_ID[facts["id"]]
    collectives = [{**{k: v for k, v in c.items() if k != "groups"}, "groups": decode_groups(c["groups"])}
                   for c in facts.get("collectives") or []]  # fmt: skip
    return {
        "target": {"devices": run.devices, "compile_only": True, "slices": run.slices, "platform": "tpu"},
        "platform": "tpu",
        "program": {"work": facts.get("work"), "memory": facts.get("memory")},
        "collectives": collectives,
        "plan": {"schedule": facts.get("schedule"), "refusal": facts.get("refusal")},
    }


def planned(facts: dict[str, Any]) -> dict[str, Any]:
    """The run's plan with today's figures (what ``shardscope plan`` would print for it)."""
    from sharding_core.cost.annotate import snapshot_with_estimates

    out = snapshot_with_estimates(snapshot(facts))
    if facts.get("mode") == "schedule" and out.get("plan") and not facts.get("refusal"):
        # a schedule-only compile stops before XLA's memory_analysis: whether it fits is its buffer assignment's
        # total in HBM against the chip's capacity (a refusal for memory came before it)
        placed, capacity = facts.get("buffer_assignment_bytes"), out["plan"].get("capacity_bytes")
        out["plan"]["fits"] = placed <= capacity if placed is not None and capacity else None
        out["plan"]["buffer_assignment_bytes"] = placed
    return out


def normalized(facts: dict[str, Any]) -> list[Any]:
    """A run's schedule with instruction names replaced by what they are (each chain by its collective's op and
    bytes), sequences in order: two compiles of the same program compare equal whatever XLA numbered."""
    by_name = {c["name"]: (c["op"], c["bytes"]) for c in facts.get("collectives") or []}
    schedule = facts["schedule"]
    chains = {k: next((by_name[n] for n in v if n in by_name), None) for k, v in schedule["chains"].items()}
    order = {name: i for i, name in enumerate(schedule["sequences"])}

    def event(e: list[Any]) -> Any:
        if e[0] in ("start", "done", "sync"):
            return [e[0], chains.get(e[1])]
        if e[0] == "loop":
            return ["loop", order.get(e[1]), e[2]]
        if e[0] == "work":
            w = e[1]
            return ["work", sorted(map(tuple, w["mm"])), w["hbm"], w["ops"], [k[0] for k in w["kernels"]]]
        return [e[0]]

    return [[schedule["runs"][n], [event(e) for e in seq]] for n, seq in schedule["sequences"].items()]


def prepared(
    rows: dict[str, dict[str, Any]], ids: Any = None
) -> tuple[dict[str, dict[str, Any]], list[step_fit.Prepared]]:
    """Each run's plan with today's figures (``ids``: only those runs) and the runs ready to replay (those XLA did
    not refuse)."""
    plans = {i: planned(f) for i, f in rows.items() if f["id"] == i and (ids is None or i in ids)}
    for i in list(plans):
        if f"{i}-full" in rows:  # compiled to the end: XLA's memory figures say whether it fits
            plans[i]["plan"]["fits"] = planned(rows[f"{i}-full"])["plan"]["fits"]
    preps = [step_fit.prepare(R.BY_ID[i], p) for i, p in plans.items() if not p["plan"].get("refusal")]
    return plans, preps


def report(path: Path = FACTS) -> str:
    """The refit on the training split, the scoreboard and leave-one-source-out, as Markdown; and the checks that
    a schedule-only compile reads the full compile's schedule."""
    from sharding_core.cost.step import FITTED

    rows = {f["name"]: f for f in load(path)}
    plans, preps = prepared(rows)
    train = [p for p in preps if p.split == R.TRAIN]
    t = time.perf_counter()
    eff = step_fit.fit_training(preps)
    fit_seconds = time.perf_counter() - t
    scored = {s.id: s for s in step_fit.score(preps, eff)}
    lines = [f"refit on {len(train)} training runs in {fit_seconds:.1f} s: {eff} (shipped: {FITTED['tpu']})", ""]
    lines += scoreboard(plans, scored)
    for split in (R.TRAIN, R.HELD_OUT):
        s = step_fit.summary([x for x in scored.values() if x.split == split])
        lines.append(f"{split}: {s}")
    loso = step_fit.leave_one_source_out(preps, lambda p: p.split == R.TRAIN)
    lines.append(f"leave-one-source-out (training sources): {step_fit.summary(loso)}")
    lines += [schedule_only_check(rows[name.removesuffix("-full")], f) for name, f in rows.items()
              if name.endswith("-full") and name.removesuffix("-full") in rows]  # fmt: skip
    return "\n".join(lines)


def schedule_only_check(early: dict[str, Any], full: dict[str, Any]) -> str:
    """One run compiled schedule-only and to the end: whether the two read the same schedule and collectives (and so
    the same expected step), and the bytes the buffer assignment placed against XLA's final peak."""
    from sharding_core.units import fmt_bytes, fmt_seconds

    def key(c: dict[str, Any]) -> tuple[Any, ...]:
        return c["op"], c["bytes"], c.get("repeat"), str(c["groups"])

    same = normalized(early) == normalized(full) and sorted(map(key, early["collectives"])) == sorted(
        map(key, full["collectives"])
    )
    steps = [(planned(f)["plan"].get("step_time") or {}).get("expected_seconds") for f in (early, full)]
    placed, peak = early.get("buffer_assignment_bytes"), (full.get("memory") or {}).get("peak_memory_in_bytes")
    seconds = [(f.get("compile") or {}).get("compile_seconds") or 0.0 for f in (early, full)]
    return (
        f"schedule-only compile of {early['name']}: {'as compiled to the end' if same else 'DIFFERS'} "
        f"({len(full['collectives'])} collectives; expected {' / '.join(fmt_seconds(s) for s in steps if s)}; "
        f"placed {fmt_bytes(placed) if placed else '?'}, XLA's peak {fmt_bytes(peak) if peak else '?'}; "
        f"compiled in {seconds[0]:.0f} s against {seconds[1]:.0f} s)"
    )


def scoreboard(plans: dict[str, dict[str, Any]], scored: dict[str, Any]) -> list[str]:
    from sharding_core.units import fmt_bytes, fmt_seconds

    out = ["| run | devices | measured | at 100 % MFU | expected | error | split | fits |",
           "|---|---|---:|---:|---:|---:|---|---|"]  # fmt: skip
    for run in R.RUNS:
        head = f"| {run.id} | `{run.devices}`{f' × {run.slices}' if run.slices > 1 else ''} | "
        head += f"{fmt_seconds(run.measured_seconds)} | "
        plan = (plans.get(run.id) or {}).get("plan")
        s = scored.get(run.id)
        if run.not_compiled or plan is None or s is None:
            why = f"not compiled: {run.not_compiled}" if run.not_compiled else "not in the facts"
            if plan is not None:
                why = "does not fit" if plan.get("fits") is False else why
            out.append(f"{head}— | — | — | {run.split} | {why} |")
            continue
        fits = {True: "fits", False: "does not fit", None: "not known"}[plan.get("fits")]
        placed, capacity = plan.get("buffer_assignment_bytes"), plan.get("capacity_bytes")
        if placed and capacity:
            fits += f" ({fmt_bytes(placed)} of {fmt_bytes(capacity)})"
        out.append(
            f"{head}{fmt_seconds(s.lower)} | {fmt_seconds(s.expected)} | {s.error:+.0%} | {run.split} | {fits} |"
        )
    return out
