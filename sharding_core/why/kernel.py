"""The why of a kernel-lab run, in its worker: the same explainer as ``inspect_jit``, and fixes compiled by
the worker itself — the kernel built again with a candidate input spec (or out_specs), on the run's CPU
devices, or compile-only on libtpu's topology for a TPU set. A fix carries the ``run`` to replay it in the
kernel lab (its inputs' specs and out_specs): the lab's own run of that request is the fix's result.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import sharding_core.why.sdy as sdy_module
from sharding_core.compat import kept_inputs
from sharding_core.program.compile import Program
from sharding_core.program.report import Report
from sharding_core.program.shardy import Dump
from sharding_core.snapshot.leaves import paths
from sharding_core.spec import parse_spec
from sharding_core.why import NO_FIXES, Budget, Candidate, Outcome, View, attach, outcome_of
from sharding_core.why.explain import Leaf
from sharding_core.why.program import spec_dims
from sharding_core.why.sdy import Dims

CompileJob = Callable[[tuple[str, ...], tuple[str, ...] | None], tuple[Program, Report]]
"""(input specs, out_specs) -> the candidate compiled and read (:func:`sharding_core.program.recompile.recompile`)."""


def explain_run(
    collectives: list[dict[str, Any]],
    *,
    hlo: str,
    dump: Dump,
    lowered: Any,
    arg_leaves: Sequence[Any],
    mesh_axes: dict[str, int],
    input_specs: tuple[str, ...],
    out_specs: tuple[str, ...] | None,
    outputs_fixable: bool,
    compile_job: CompileJob | None,
    budget: Budget,
    peak: int | None,
    note: str | None = None,
) -> dict[str, Any]:
    """Gives the run's collectives their ``line`` and ``why``; ``arg_leaves``: the arguments the kernel was
    lowered with (its inputs as abstract arrays, then its extra arguments). Returns the search's summary."""
    import jax

    tree = {"inputs": {"args": list(arg_leaves)}, "outputs": lowered.out_info}
    all_paths = paths(tree)
    in_paths = [p for p in all_paths if p.startswith("inputs/")]
    out_paths = [p for p in all_paths if p == "outputs" or p.startswith("outputs/")]
    flat_in = jax.tree.leaves(list(arg_leaves))

    inputs = [_leaf(p, x) for p, x in zip(in_paths, flat_in, strict=False)]
    outputs = [_leaf(p, x) for p, x in zip(out_paths, jax.tree.leaves(lowered.out_info), strict=False)]
    view = _view(hlo, dump, lowered, inputs, outputs, mesh_axes)
    # Fixable: the run's own inputs (the kernel's extra arguments are the kernel's) and, for a jit kernel, its
    # outputs' out_specs — what a kernel-lab request can change.
    fixable: dict[str, tuple[Dims, tuple[int, ...]]] = {}
    for k in range(len(input_specs)):
        path = f"inputs/args/{k}"
        if path in in_paths:
            i = in_paths.index(path)
            fixable[path] = (_dims(inputs[i].spec, len(inputs[i].shape)), inputs[i].shape)
    if outputs_fixable:
        for o in outputs:
            fixable[o.path] = (_dims(o.spec, len(o.shape)), o.shape)

    def recompile(c: Candidate) -> Outcome:
        specs, outs = list(input_specs), list(out_specs) if out_specs is not None else None
        if c.kind == "input":
            specs[int(str(c.leaf).rsplit("/", 1)[1])] = str(c.spec)
        elif c.kind == "output":
            j = out_paths.index(str(c.leaf))
            outs = outs if outs is not None else [o.spec or "P()" for o in outputs]
            outs[j] = str(c.spec)
        else:
            raise ValueError("the kernel lab changes specs only: a JAX option is the user's own program's fix")
        assert compile_job is not None
        program, report = compile_job(tuple(specs), tuple(outs) if outs is not None else None)
        outcome = outcome_of(
            report.collectives_json(), program.hlo or "", report.peak, {"inputs": specs, "out_specs": outs}
        )
        outcome.log = list(report.compiler_log)
        return outcome

    searching = compile_job is not None and budget.recompiles > 0
    found = attach(
        collectives,
        view,
        fixable=fixable,
        recompile=recompile if searching else None,
        budget=budget if searching else NO_FIXES,
        peak=peak,
        outputs_fixable=outputs_fixable,
        note=note,
    )
    runs = found["results"]
    for c in collectives:
        for fix in c["why"].get("fixes") or ():
            r = fix.pop("result", None)
            if r is not None:
                fix["run"] = runs[r]
    summary: dict[str, Any] = found["summary"]
    return summary


def _leaf(path: str, x: Any) -> Leaf:
    sharding = getattr(x, "sharding", None)
    spec = getattr(sharding, "spec", None)
    shape = tuple(int(s) for s in getattr(x, "shape", ()))
    text = sdy_module.spec_text(spec_dims(spec, len(shape))) if spec is not None else None
    return Leaf(path, shape, str(getattr(x, "dtype", "")), text)


def _view(
    hlo: str, dump: Dump, lowered: Any, inputs: list[Leaf], outputs: list[Leaf], mesh_axes: dict[str, int]
) -> View:
    """What the explainer reads of the run's program: its HLO, Shardy's module, the kept inputs and the outputs."""
    module = sdy_module.parse_module(dump.mlir) if dump.mlir else None
    kept = kept_inputs(lowered, len(inputs), len(module.args)) if module is not None else list(range(len(inputs)))
    mesh = dict(module.mesh) if module is not None and module.mesh else mesh_axes
    return View(hlo, module, dump.partitioner, tuple(inputs[i] for i in kept if i < len(inputs)), tuple(outputs), mesh)


def _dims(spec: str | None, rank: int) -> Dims:
    if not spec:
        return ((),) * rank
    return spec_dims(parse_spec(spec), rank)
