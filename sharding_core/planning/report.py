"""A plan as text: what ``shardscope plan`` prints (the JSON it writes is the snapshot itself)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sharding_core.units import fmt_bytes, fmt_seconds

MAX_COLLECTIVE_ROWS = 40
_MEMORY_ROWS = (
    ("arguments", "argument_size_in_bytes"),
    ("outputs", "output_size_in_bytes"),
    ("aliased (donated)", "alias_size_in_bytes"),
    ("temporaries", "temp_size_in_bytes"),
    ("peak", "peak_memory_in_bytes"),
)


def _b(n: Any) -> str:
    return fmt_bytes(int(n)) if n is not None else "—"


def _flops(x: Any) -> str:
    return f"{float(x):.3e}" if x is not None else "—"


def render(snap: Mapping[str, Any]) -> str:
    """The plan's table: target, verdict, HBM, arguments by group, temporaries, work, collectives, band."""
    plan = snap.get("plan") or {}
    target = snap.get("target") or {}
    lines: list[str] = []
    mesh = (snap.get("meshes") or [{}])[0]
    axes = " × ".join(f"{a}={s}" for a, s in zip(mesh.get("axis_names", []), mesh.get("shape", []), strict=False))
    where = target.get("devices") or f"{len(snap['devices']['id'])} {snap.get('device_kind')}"
    lines.append(
        f"plan {snap.get('name')} on {where} ({target.get('num_devices', len(snap['devices']['id']))} × "
        f"{snap.get('device_kind')}, {target.get('hosts', 1)} host(s), {target.get('slices', 1)} slice(s))"
    )
    lines.append(
        f"  mesh {axes or '—'}; partitioner {plan.get('partitioner')}; compiled by {target.get('source', 'XLA')}"
    )
    lines.append(f"verdict: {plan.get('verdict')}")
    # XLA's refusal, or a compiled program past the chip's HBM (XLA's GPU compiler refuses nothing): read alike
    refusal = plan.get("refusal") or plan.get("over_capacity")
    stats = (snap.get("jit") or {}).get("memory_per_device")
    lines.append("")
    lines.append("HBM per device (XLA's memory_analysis)")
    if stats:
        for label, key in _MEMORY_ROWS:
            lines.append(f"  {label:<20} {_b(stats.get(key)):>12}")
    if plan.get("capacity_bytes"):
        lines.append(f"  {'capacity':<20} {_b(plan['capacity_bytes']):>12}  ({plan.get('hardware')})")
    if refusal:
        lines.append(f"  refused: {refusal.get('message')}")
        lines.append(
            f"  needed {_b(refusal.get('required_bytes'))} ({refusal.get('what')}), available "
            f"{_b(refusal.get('available_bytes'))}, over by {_b(refusal.get('over_bytes'))}"
        )
        for tip in refusal.get("advice") or ():
            lines.append(f"  - {tip}")
    args = plan.get("arguments") or {}
    if args.get("groups"):
        lines.append("arguments by group (bytes per device)")
        for g in args["groups"][:12]:  # the dashboard's names: the function's parameters (params, opt_state.mu)
            host = int(g.get("host_bytes_per_device") or 0)
            where = f"  ({_b(host)} in host memory)" if host else ""
            lines.append(f"  {g.get('name') or g['group']:<40} {_b(g['bytes_per_device']):>12}  {g['leaves']} leaves"
                         f"{where}")  # fmt: skip
    temps = (refusal or {}).get("largest") or (plan.get("temporaries") or {}).get("largest") or []
    if temps:
        lines.append(f"largest {'allocations' if refusal else 'temporaries'} (XLA's buffer assignment)")
        report = plan.get("temporaries") or {}
        chip = [
            f"{_b(s['bytes'])} in {s['memory_space'].upper()}"
            for s in report.get("memory_spaces") or ()
            if int(s["bytes"]) >= 65536 and not str(s["memory_space"]).startswith("color")  # VMEM, v4's CMEM
        ]
        if report.get("temp_size_in_bytes") is not None and chip:  # TPU: on-chip memory beside XLA's HBM figure
            lines.append(f"  XLA's temporaries {_b(report['temp_size_in_bytes'])} in HBM; on-chip {', '.join(chip)}")
        for t in temps[:8]:
            where = t.get("source") or t.get("op") or t.get("instruction")
            space = t.get("memory_space")
            space = f" [{space.upper()}]" if space and space != "default" else ""
            lines.append(f"  {_b(t.get('bytes')):>10}{space}  {t.get('shape')}  {where}")
    for section in (_work(plan.get("work")), _collectives(snap, plan), _why(snap), _step(plan.get("step_time"))):
        if section:
            lines.extend(["", *section])
    lines.append(f"lowered in {plan.get('lower_seconds', 0):.2f} s, compiled in {plan.get('compile_seconds', 0):.2f} s")
    return "\n".join(lines) + "\n"


def _work(work: Mapping[str, Any] | None) -> list[str]:
    if not work:
        return []
    out = [
        f"work per device and step (loops counted): {_flops(work.get('flops'))} flops, "
        f"{_b(work.get('bytes_accessed'))} accessed; XLA's cost_analysis (loops once): "
        f"{_flops(work.get('flops_xla'))} flops"
    ]
    out += [
        f"  loop {lp['name']}: × {lp['trip_count']} ({lp['how']}) {lp.get('source') or ''}"
        for lp in work.get("loops") or ()
    ]
    return out


def _collectives(snap: Mapping[str, Any], plan: Mapping[str, Any]) -> list[str]:
    colls = snap.get("collectives") or []
    if not colls:
        return []
    comm = plan.get("communication") or {}
    out = [
        f"collectives: {len(colls)} in the program, {comm.get('per_step')} per step, "
        f"{_b(comm.get('bytes_per_step'))} per step",
        f"  {'op':<20} {'axes':<16} {'bytes':>10} {'×':>5} {'each':>10} {'per step':>10}",
    ]
    ranked = sorted(colls, key=lambda c: -((c.get("estimate") or {}).get("seconds") or 0) * int(c.get("repeat", 1)))
    for c in ranked[:MAX_COLLECTIVE_ROWS]:
        each = (c.get("estimate") or {}).get("seconds")
        per = each * int(c.get("repeat", 1)) if each is not None else None
        axes = ",".join(c.get("axes") or []) or "—"
        out.append(
            f"  {c['op']:<20} {axes:<16} {_b(c.get('bytes')):>10} {c.get('repeat', 1):>5} "
            f"{fmt_seconds(each):>10} {fmt_seconds(per):>10}"
        )
    if len(ranked) > MAX_COLLECTIVE_ROWS:
        out.append(f"  ... {len(ranked) - MAX_COLLECTIVE_ROWS} more (--json has them all)")
    return out


MAX_WHY_ROWS = 5
MAX_WHY_FIXES = 4
"""Fixes printed for one why (every one the search kept, up to this)."""


def _why(snap: Mapping[str, Any]) -> list[str]:
    """The costliest collectives' why (sharding_core.why), each said once for its line (the forward pass, its remat
    and the backward pass often make one collective each at the same line, for the same reason), with every fix
    searched for it."""
    colls = [c for c in snap.get("collectives") or [] if c.get("why")]
    if not colls:
        return []
    groups: dict[tuple[str, str, str], list[Mapping[str, Any]]] = {}
    for c in colls:
        why = c["why"]
        groups.setdefault((str(c["op"]), str(why.get("source")), str(why.get("explanation"))), []).append(c)
    per_step = {k: sum(int(c.get("bytes") or 0) * int(c.get("repeat", 1)) for c in g) for k, g in groups.items()}
    out = ["why (the costliest collectives)"]
    for key in sorted(groups, key=lambda k: -per_step[k])[:MAX_WHY_ROWS]:
        group = groups[key]
        why = group[0]["why"]
        many = f" ({len(group)} collectives, {_b(per_step[key])} per step)" if len(group) > 1 else ""
        out.append(f"  {key[0]} at {why.get('source') or 'no line'}{many}: {why.get('explanation')}")
        fixes = [f for c in group for f in (c["why"].get("fixes") or [])]
        for f in fixes[:MAX_WHY_FIXES]:
            out.append(
                f"    fix: {f['text']} -> {f['collectives_after']} collectives, {_b(f['bytes_after'])} "
                f"(from {_b(f.get('bytes_before'))}), peak {_b(f.get('peak_after'))}"
            )
        if not fixes and why.get("fixes_note"):
            out.append(f"    ({why['fixes_note']})")
    search = snap.get("why_search") or {}
    if search.get("searched"):
        out.append(
            f"  fix search: {search.get('recompiles')} programs compiled in {search.get('search_seconds', 0):.1f} s"
        )
    return out


def _step(st: Mapping[str, Any] | None) -> list[str]:
    if not st:
        return []
    lines = [
        f"step time: {fmt_seconds(st.get('expected_seconds'))} expected; {fmt_seconds(st.get('lower_bound_seconds'))} "
        f"at 100 % MFU (the roofline, {st.get('bound')}-bound); {fmt_seconds(st.get('upper_bound_seconds'))} with "
        "nothing overlapped",
        f"  at 100 % MFU: compute {fmt_seconds(st.get('compute_seconds'))}, "
        f"memory {fmt_seconds(st.get('memory_seconds'))}, communication {fmt_seconds(st.get('communication_seconds'))}",
    ]
    ex = st.get("expected")
    if ex:
        lines.append(
            f"  expected: compute {fmt_seconds(ex.get('compute_seconds'))} "
            f"(matmuls {fmt_seconds(ex.get('matmul_seconds'))}, memory-bound {fmt_seconds(ex.get('memory_seconds'))}, "
            f"attention kernels {fmt_seconds(ex.get('kernel_seconds'))}), "
            f"collectives {fmt_seconds(ex.get('communication_seconds'))} of which "
            f"{fmt_seconds(ex.get('exposed_communication_seconds'))} not hidden under compute"
        )
        lines.append(f"  efficiencies: {ex.get('efficiency_from')}")
    return lines


def render_comparison(result: Mapping[str, Any]) -> str:
    t = result["thresholds"]
    peak = result["peak"]
    lines = [
        f"baseline: thresholds peak HBM growth {t['max_peak_growth']:+.1%}, new collectives "
        f"{fmt_bytes(int(t['max_new_collective_bytes']))} per step",
        f"  peak {_b(peak.get('baseline_bytes'))} -> {_b(peak.get('bytes'))}"
        + (f" ({peak['growth']:+.2%})" if peak.get("growth") is not None else ""),
        f"  new collectives: {len(result['new_collectives'])}, "
        f"{fmt_bytes(int(result['new_collective_bytes_per_step']))} per step",
    ]
    for n in result["new_collectives"][:10]:
        lines.append(f"    {n['op']} over {','.join(n.get('axes') or []) or '—'}: {_b(n['bytes'])} × {n['repeat']}")
    for f in result.get("new_findings") or ():
        lines.append(f"  new finding [{f['kind']}] at {f.get('source') or '—'}: {_b(f.get('bytes_per_step'))} per step")
    lines.append("REGRESSED: " + "; ".join(result["reasons"]) if result["regressed"] else "no regression")
    return "\n".join(lines) + "\n"


def render_values(snap: Mapping[str, Any], count: int) -> str:
    """``shardscope plan --values [N]``: each value's sharding in program order (``N`` > 0: the N largest per
    device, largest first)."""
    rows = list(snap.get("values") or ())
    if not rows:
        return "values: none read (the compile wrote no partitioner input)\n"
    shown = sorted(rows, key=lambda v: -int(v["bytes"]))[:count] if count > 0 else rows
    head = f"the {len(shown)} largest of {len(rows)} values" if count > 0 else f"{len(rows)} values in program order"
    lines = [f"{head} (the sharding the partitioner chose; bytes per device, × runs per step)"]
    for v in shown:
        typed = v.get("typed") or f"{v['dtype']}{v['shape']} {v.get('sharding')}"
        repeat = f" ×{v['repeat']}" if int(v.get("repeat") or 1) != 1 else ""
        lines.append(f"  {_b(v['bytes']):>10}{repeat:<5} {typed:<48} {v.get('spec') or '—':<24} {v['op']:<20} "
                     f"{_short(v.get('source'))}")  # fmt: skip
    return "\n".join(lines) + "\n"


def _short(source: Any) -> str:
    """``/long/path/to/model.py:12`` -> ``model.py:12``."""
    if not source:
        return "—"
    return str(source).rsplit("/", 1)[-1]


def render_findings(snap: Mapping[str, Any]) -> str:
    """``shardscope plan --findings``: what the program wastes, largest first, each with its line and fix."""
    found = list(snap.get("findings") or ())
    if not found:
        return "findings: none (no silent waste found)\n"
    lines = [f"findings: {len(found)} (largest bytes per step first)"]
    for f in found:
        share = f.get("share")
        share_text = f", {share:.0%} of the step's collective bytes" if share is not None else ""
        repeat = int(f.get("repeat") or 1)
        each = f" ({repeat} × {_b(f.get('bytes'))})" if repeat > 1 else ""
        lines.append(f"  [{f['kind']}] {f.get('title') or ''}: {_b(f['bytes_per_step'])} per step{each}{share_text} "
                     f"at {f.get('source') or '—'}")  # fmt: skip
        lines.append(f"    {f['text']}")
        fix = f.get("fix")
        if fix:
            checked = ""
            if fix.get("expected_seconds_after") is not None or fix.get("peak_after") is not None:
                memory = ""
                if fix.get("peak_after") is not None:
                    memory = f", peak {_b(fix['peak_after'])}"
                elif fix.get("placed_after") is not None:  # a TPU set's candidate, scheduled, not compiled to the end
                    memory = f", {_b(fix['placed_after'])} placed (from {_b(fix.get('placed_before'))})"
                checked = f" (recompiled: {_b(fix.get('bytes_after'))} of collectives per step{memory})"
            lines.append(f"    fix at {fix.get('line') or '—'}: {fix['text']}{checked}")
    return "\n".join(lines) + "\n"


def render_fit(fit: Mapping[str, Any]) -> str:
    """``shardscope plan --fit``: the fixes compiled, those that fit first (fastest step first), each with its peak,
    step time and when the search verified it; those it left for lack of time."""
    if not fit.get("needed"):
        return "fit: not needed (the program fits with the headroom asked)\n"
    fixes = list(fit.get("fixes") or ())
    fitting = sum(1 for f in fixes if f.get("fits"))
    lines = [f"fit: {len(fixes)} fix(es) compiled in {fmt_seconds(fit.get('seconds'))}, {fitting} fit "
             "(those that fit first, fastest step first)"]  # fmt: skip
    for k, f in enumerate(fixes, 1):
        if not f.get("verified"):
            lines.append(f"  {k}. {f['text']}: not compiled ({f.get('error') or 'failed'})")
            continue
        verdict = "fits" if f.get("fits") else "does not fit"
        step = f", step {fmt_seconds(f['expected_seconds_after'])} expected" if f.get("expected_seconds_after") else ""
        after = f.get("verified_after_seconds")
        when = f" (verified after {fmt_seconds(after)})" if after is not None else ""
        lines.append(f"  {k}. {f['text']}: {verdict}, peak {_b(f.get('peak_after'))}{step}{when}")
    left = list(fit.get("not_tried") or ())
    if left:
        lines.append(f"  not tried (no time left for one more compile): {', '.join(left)}")
    return "\n".join(lines) + "\n"
