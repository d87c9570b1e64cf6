"""A search's answer from its candidates: the order (the fastest that fits first, by the compiled program's
expected step time), the pick, the Pareto front of step time against HBM, what every other candidate lost on,
and the pick's mesh and rules ready to paste (Python, and MaxText's config keys)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sharding_core.searching.space import AXES
from sharding_core.units import fmt_bytes, fmt_seconds


def order(candidates: Sequence[Mapping[str, Any]]) -> list[int]:
    """Indices, best first: those that fit by expected seconds, then those over HBM by their peak, then the rest
    (not compiled, or without figures) by their estimate."""

    def key(i: int) -> tuple[int, float, float]:
        c = candidates[i]
        est = float((c.get("estimate") or {}).get("communication_seconds") or 0.0)
        if c.get("fits") and c.get("expected_seconds") is not None:
            return (0, float(c["expected_seconds"]), float(c.get("peak_bytes") or 0))
        if c.get("compiled") and c.get("fits") is False:
            return (1, float(c.get("peak_bytes") or 0), est)
        if c.get("compiled"):
            return (2, est, 0.0)
        pruned = (c.get("error") or {}).get("code") == "pruned"  # over HBM by its arguments alone: last
        return (4 if pruned else 3, est, float((c.get("estimate") or {}).get("argument_bytes") or 0))

    return sorted(range(len(candidates)), key=key)


def front(candidates: Sequence[Mapping[str, Any]]) -> list[int]:
    """The candidates that fit and that no other beats on both step time and peak HBM, fastest first."""
    ok = [i for i, c in enumerate(candidates) if c.get("fits") and c.get("expected_seconds") is not None]
    out = []
    for i in ok:
        t, m = candidates[i]["expected_seconds"], candidates[i]["peak_bytes"] or 0
        beaten = any(
            (candidates[j]["expected_seconds"] <= t and (candidates[j]["peak_bytes"] or 0) <= m)
            and (candidates[j]["expected_seconds"] < t or (candidates[j]["peak_bytes"] or 0) < m)
            for j in ok
            if j != i
        )
        if not beaten:
            out.append(i)
    return sorted(out, key=lambda i: (candidates[i]["expected_seconds"], i))


def lost_on(c: Mapping[str, Any], pick: Mapping[str, Any] | None, on_front: bool, headroom: float) -> str:
    """What the candidate lost on, in words (see the module docstring)."""
    if pick is not None and c is pick:
        return (f"picked: the fastest that fits ({fmt_seconds(c['expected_seconds'])} a step expected, peak "
                f"{fmt_bytes(c['peak_bytes'])} of {fmt_bytes(c.get('usable_bytes') or 0)} usable)")  # fmt: skip
    if not c.get("compiled"):
        return _not_compiled(c, pick)
    if c.get("fits") is False:
        return _over(c, headroom)
    if c.get("expected_seconds") is None:
        return f"no step time: {c.get('verdict') or 'the set has no hardware figures'}"
    text = why_slower(c)
    if pick is not None:
        ratio = c["expected_seconds"] / pick["expected_seconds"] if pick["expected_seconds"] else float("inf")
        text = f"slower: {fmt_seconds(c['expected_seconds'])} a step, {ratio:.2f}× the pick's; {text}"
    if on_front and pick is not None and (c.get("peak_bytes") or 0) < (pick.get("peak_bytes") or 0):
        text = f"on the front: less HBM ({fmt_bytes(c['peak_bytes'])} against {fmt_bytes(pick['peak_bytes'])}); {text}"
    return text


def why_slower(c: Mapping[str, Any]) -> str:
    """``communication-bound: all-gathers over fsdp 61 % of the step`` — the bound and the largest share."""
    step = float(c.get("expected_seconds") or 0.0)
    shares = c.get("collective_seconds") or {}
    bound = f"{c.get('bound') or 'compute'}-bound"
    if not shares or step <= 0:
        return bound
    top, seconds = next(iter(shares.items()))
    return f"{bound}: {top} {min(100.0, 100.0 * seconds / step):.0f} % of the step"


def _over(c: Mapping[str, Any], headroom: float) -> str:
    peak, usable = c.get("peak_bytes"), c.get("usable_bytes")
    if peak is not None and usable:
        room = f" ({headroom:.0%} headroom kept)" if headroom else ""
        return f"over HBM by {fmt_bytes(max(0, int(peak) - int(usable)))}: peak {fmt_bytes(peak)} against " \
               f"{fmt_bytes(usable)} usable{room}"  # fmt: skip
    over = c.get("over_bytes")
    return f"over HBM by {fmt_bytes(over)}" if over else str(c.get("verdict") or "does not fit")


def _not_compiled(c: Mapping[str, Any], pick: Mapping[str, Any] | None) -> str:
    error = c.get("error") or {}
    est = c.get("estimate") or {}
    if error.get("code") == "pruned":
        return str(error["message"])
    seconds = est.get("communication_seconds")
    said = f" (estimated communication {fmt_seconds(seconds)} a step)" if seconds is not None else ""
    if error.get("code") == "skipped":
        return f"not compiled: {error['message']}{said}"
    if error.get("code") == "budget" or not error:
        return f"not compiled: the search's time ran out before it{said}"
    return f"not compiled: {error.get('message')}{said}"


def axes_text(mesh: Mapping[str, Any]) -> str:
    return " × ".join(f"{a} {s}" for a, s in zip(mesh["axis_names"], mesh["shape"], strict=True))


def paste(
    devices: str, slices: int, mesh: Mapping[str, Any], rules: Sequence[Any], knobs: Mapping[str, Any]
) -> dict[str, str]:
    """The pick ready to paste: Python (the mesh, the rules, the knobs) and MaxText's config keys."""
    shape, names = tuple(mesh["shape"]), tuple(mesh["axis_names"])
    dcn = tuple(mesh.get("dcn_shape") or (1,) * len(shape))
    extra = f", slices={slices}, order='hybrid', dcn_shape={dcn}" if slices > 1 else ""
    lines = [
        f"# {axes_text(mesh)} on {devices}" + (f" x {slices} slices" if slices > 1 else ""),
        f"mesh = shardscope.mesh({devices!r}, {shape}, {names}{extra})",
        f"# on the hardware itself: mesh = jax.make_mesh({shape}, {names})",
        "rules = (",
        *(f"    ({n!r}, {tuple(a) if isinstance(a, list) else a!r})," for n, a in rules),
        ")",
    ]
    if knobs:
        lines.append(f"knobs = {dict(knobs)!r}")
    sizes = dict(zip(names, shape, strict=True))
    dcn_of = dict(zip(names, dcn, strict=True))
    keys = [f"ici_{a}_parallelism: {sizes.get(a, 1) // dcn_of.get(a, 1)}" for a in AXES]
    keys += [f"dcn_{a}_parallelism: {dcn_of[a]}" for a in names if dcn_of.get(a, 1) > 1]
    listed = ", ".join(
        f"['{n}', {[*a] if isinstance(a, list | tuple) else repr(a) if a else 'null'}]" for n, a in rules
    )
    keys.append(f"logical_axis_rules: [{listed}]")
    return {"python": "\n".join(lines) + "\n", "maxtext": "\n".join(keys) + "\n"}
