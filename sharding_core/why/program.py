"""The why of a program compiled in the user's process: ``inspect_jit``, ``explain`` and plans.

:func:`explain_program` takes the program as the one pipeline compiled it (:mod:`sharding_core.program`), Shardy's
module from a compile that wrote it, and the collectives a snapshot lists, and gives every collective its ``why``.
Fixes are compiled through :func:`sharding_core.program.recompile.recompile`: a candidate spec for an input leaf is
the same program lowered on abstract arguments with that leaf's sharding replaced (nothing is allocated;
compile-only devices stay compile-only), an output's is the function jitted again with that ``out_shardings``, a
JAX option's is the program traced again with the option set. Each candidate is read into its own
:class:`~sharding_core.program.report.Report` — what the caller turns into the fix's snapshot ("try this fix").
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import sharding_core.why.sdy as sdy_module
from sharding_core.compat import equation_frame, kept_inputs, spec_entries
from sharding_core.program.compile import Program
from sharding_core.program.recompile import Change, Respecified, recompile
from sharding_core.program.report import Reading, Report
from sharding_core.program.shardy import Dump
from sharding_core.snapshot.leaves import paths
from sharding_core.why import Budget, Candidate, Estimator, Leaf, Outcome, View, attach, lines
from sharding_core.why.explain import located
from sharding_core.why.frames import short_path
from sharding_core.why.sdy import Dims

MAX_EQUATION_CHARS = 240


def spec_dims(spec: Any, rank: int) -> Dims:
    """A PartitionSpec as Dims, padded to ``rank``."""
    out: list[tuple[str, ...]] = []
    for entry in spec_entries(spec):
        if entry is None:
            out.append(())
        elif isinstance(entry, str):
            out.append((entry,))
        elif isinstance(entry, (tuple, list)):
            out.append(tuple(str(a) for a in entry))
        else:  # UNCONSTRAINED: nothing fixed here
            out.append(())
    return (tuple(out) + ((),) * rank)[:rank]


def _leaf(path: str, aval: Any, sharding: Any) -> Leaf:
    import jax

    spec = None
    if isinstance(sharding, jax.sharding.NamedSharding):
        spec = sdy_module.spec_text(spec_dims(sharding.spec, len(aval.shape))) or "P()"
    return Leaf(path, tuple(int(s) for s in aval.shape), str(aval.dtype), spec)


_ANSI = re.compile(r"\x1b\[[0-9;]*m")
"""A terminal colour code (the pretty printer's under IPython)."""


def equations(
    jitted: Any, args: Sequence[Any], kwargs: Mapping[str, Any]
) -> Callable[[str | None, str | None], str | None]:
    """(primitive, "file:line") -> the text of the jaxpr equation there (traced once, on first use)."""
    cache: list[list[tuple[str, str, int, str]]] = []

    def table() -> list[tuple[str, str, int, str]]:
        if cache:
            return cache[0]
        rows: list[tuple[str, str, int, str]] = []

        def walk(jaxpr: Any, depth: int) -> None:
            if depth > 8:
                return
            for eqn in getattr(jaxpr, "eqns", ()):
                where = equation_frame(eqn)
                if where is not None:
                    # JAX colours its printer under IPython (a Jupyter kernel): the codes are not text
                    text = " ".join(_ANSI.sub("", str(eqn)).split())
                    if len(text) > MAX_EQUATION_CHARS:
                        text = text[: MAX_EQUATION_CHARS - 80] + " … " + text[-70:]
                    rows.append((eqn.primitive.name, short_path(where[0]), where[1], text))
                for v in eqn.params.values():
                    for sub in v if isinstance(v, (tuple, list)) else (v,):
                        inner = getattr(sub, "jaxpr", sub)
                        if hasattr(inner, "eqns"):
                            walk(inner, depth + 1)

        traced = jitted.trace(*args, **kwargs)
        walk(traced.jaxpr.jaxpr, 0)
        cache.append(rows)
        return rows

    def lookup(prim: str | None, source: str | None) -> str | None:
        if source == "*":  # sharding_core.why.ANY_LINE: where the program's only equation of ``prim`` is
            at = {f"{r[1]}:{r[2]}" for r in table() if r[0] == prim}
            return at.pop() if len(at) == 1 else None
        if not source or ":" not in source:
            return None
        file, _, line = source.rpartition(":")
        hits = [r for r in table() if r[1] == file and str(r[2]) == line]
        exact = [r for r in hits if r[0] == prim]
        chosen = exact or hits
        if not chosen:
            return None
        more = f" (and {len(chosen) - 1} more on this line)" if len(chosen) > 1 else ""
        return chosen[0][3] + more

    return lookup


def light_whys(collectives: Sequence[dict[str, Any]], sources: Mapping[str, Any], partitioner: str) -> None:
    """What ``inspect_jit`` gives every collective without compiling again: the op that asked for it, its line
    and call stack (:func:`sharding_core.why.explain.located`); ``sharding_core.explain`` says the rest."""
    for c in collectives:
        why = located(c, sources.get(str(c.get("name"))), partitioner)
        if why.get("kind") != "explicit":
            why["explanation"] += (
                " sharding_core.explain (or shardscope plan --why) says why, from Shardy's origins, and which spec "
                "removes it."
            )
        why["fixes_note"] = "fixes not searched: sharding_core.explain compiles candidates (shardscope plan --fixes N)"
        c["why"] = why


@dataclasses.dataclass(frozen=True)
class Fixed:
    """A kept fix's program: its report and its collectives as the why read them (each with its ``line``)."""

    report: Report
    collectives: list[dict[str, Any]]


def explain_program(
    collectives: Sequence[dict[str, Any]],
    program: Program,
    dump: Dump,
    *,
    jitted: Any,
    reading: Reading,
    budget: Budget,
    peak: int | None,
    estimate: Estimator | None = None,
    compile_seconds: float = 0.0,
) -> dict[str, Any]:
    """Gives every collective its ``why`` (fixes within ``budget``, ranked by ``estimate``'s seconds where it gives
    them; ``peak``: the program's, for the memory guard; ``compile_seconds``: what a candidate's compile is expected
    to take at first). Returns the search's ``summary`` and ``results``: the
    :class:`Fixed` programs the fixes point at."""
    import jax

    signature = program.signature()
    tree = {"inputs": {"args": list(signature.in_avals[0]), "kwargs": signature.in_avals[1]},
            "outputs": signature.out_info}  # fmt: skip
    all_paths = paths(tree)
    in_paths = [p for p in all_paths if p.startswith("inputs/")]
    out_paths = [p for p in all_paths if p == "outputs" or p.startswith("outputs/")]
    respecified = Respecified(jitted, program.args, program.kwargs, program)
    inputs = [_leaf(p, a, s) for p, a, s in zip(in_paths, respecified.flat_avals, respecified.flat_in, strict=False)]
    out_avals = jax.tree.leaves(signature.out_info)
    out_sh = respecified.out_shardings
    outputs = [_leaf(p, a, s) for p, a, s in zip(out_paths, out_avals, out_sh, strict=False)]
    module = sdy_module.parse_module(dump.mlir) if dump.mlir else None
    kept = (
        kept_inputs(program.lowered, len(inputs), len(module.args)) if module is not None else list(range(len(inputs)))
    )
    mesh = _mesh_axes(module, [*respecified.flat_in, *out_sh])
    view = View(program.hlo or "", module, dump.partitioner, tuple(inputs[i] for i in kept if i < len(inputs)),
                tuple(outputs), mesh)  # fmt: skip
    fixable: dict[str, tuple[Dims, tuple[int, ...]]] = {}
    for leaf, sharding in [*zip(inputs, respecified.flat_in, strict=False), *zip(outputs, out_sh, strict=False)]:
        if isinstance(sharding, jax.sharding.NamedSharding):
            fixable[leaf.path] = (spec_dims(sharding.spec, len(leaf.shape)), leaf.shape)

    def candidate(c: Candidate) -> Outcome:
        change = Change(
            input=(in_paths.index(str(c.leaf)), str(c.spec)) if c.kind == "input" else None,
            output=(out_paths.index(str(c.leaf)), str(c.spec)) if c.kind == "output" else None,
        )
        fn, args, kwargs = respecified(change)
        fixed_program, report = recompile(fn, args, kwargs, reading, jax_option=c.option)
        fixed = report.collectives_json()
        lines(fixed, fixed_program.hlo or "")
        return Outcome(fixed, report.peak, Fixed(report, fixed), log=list(report.compiler_log))

    found = attach(
        collectives,
        view,
        fixable=fixable,
        recompile=candidate if budget.recompiles > 0 else None,
        budget=budget,
        peak=peak,
        outputs_fixable=respecified.outputs_fixable,
        equation=equations(jitted, program.args, program.kwargs),
        note=dump.note,
        estimate=estimate,
        compile_seconds=compile_seconds,
    )
    return found


def _mesh_axes(module: sdy_module.Module | None, shardings: Sequence[Any]) -> dict[str, int]:
    import jax

    if module is not None and module.mesh:
        return dict(module.mesh)

    for s in shardings:
        if isinstance(s, jax.sharding.NamedSharding):
            return {str(a): int(n) for a, n in s.mesh.shape.items()}
    return {}
