"""The why of a program compiled in the user's process: ``inspect_jit`` and plans.

:func:`explain_snapshot` takes what :func:`sharding_core.planning.program.inspect_program` already has (the
jitted function, its arguments, the lowering, the compiled program, the Shardy dump and the snapshot with its
collectives) and gives every collective its ``why``. Fixes are compiled here too: a candidate spec for an
input leaf is the same program lowered on abstract arguments with that leaf's sharding replaced (nothing is
allocated; compile-only devices stay compile-only), an output's is the function jitted again with that
``out_shardings``, a JAX option's is the program traced again with the option set. Each compile is read by
``inspect_program`` itself, so a fix's result is a whole snapshot, the one "try this fix" shows.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from sharding_core.why import Budget, Candidate, Leaf, Outcome, View, attach
from sharding_core.why import sdy as sdy_module
from sharding_core.why.dump import Dump
from sharding_core.why.sdy import Dims

MAX_EQUATION_CHARS = 240


def spec_dims(spec: Any, rank: int) -> Dims:
    """A PartitionSpec as Dims, padded to ``rank``."""
    from sharding_core.compat import spec_entries

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


def paths(tree: Any) -> list[str]:
    """Snapshot paths of a tree's leaves, exactly as :func:`sharding_core.capture` writes them."""
    import jax

    from sharding_core.capturing import ROOT_PATH, _is_capture_leaf

    flat, _ = jax.tree_util.tree_flatten_with_path(tree, is_leaf=_is_capture_leaf)
    return [jax.tree_util.keystr(p, simple=True, separator="/") or ROOT_PATH for p, _ in flat]


@contextlib.contextmanager
def _option(name: str, value: bool) -> Iterator[None]:
    import jax

    before = getattr(jax.config, name)
    jax.config.update(name, value)
    try:
        yield
    finally:
        jax.config.update(name, before)


def _abstract(x: Any) -> Any:
    """An array as the abstract value it is to jit (no data needed to lower and compile)."""
    import jax

    if isinstance(x, jax.Array) and not isinstance(x, jax.core.Tracer):
        return jax.ShapeDtypeStruct(
            x.shape, x.dtype, sharding=x.sharding, weak_type=bool(getattr(x, "weak_type", False))
        )
    return x


def equations(
    jitted: Any, args: Sequence[Any], kwargs: Mapping[str, Any]
) -> Callable[[str | None, str | None], str | None]:
    """(primitive, "file:line") -> the text of the jaxpr equation there (traced once, on first use)."""
    cache: list[list[tuple[str, str, int, str]]] = []

    def table() -> list[tuple[str, str, int, str]]:
        if cache:
            return cache[0]
        from sharding_core.compat import equation_frame
        from sharding_core.why.frames import short_path

        rows: list[tuple[str, str, int, str]] = []

        def walk(jaxpr: Any, depth: int) -> None:
            if depth > 8:
                return
            for eqn in getattr(jaxpr, "eqns", ()):
                where = equation_frame(eqn)
                if where is not None:
                    text = " ".join(str(eqn).split())
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
    from sharding_core.why.explain import located

    for c in collectives:
        why = located(c, sources.get(str(c.get("name"))), partitioner)
        if why.get("kind") != "explicit":
            why["explanation"] += (
                " sharding_core.explain (or shardscope plan --why) says why, from Shardy's origins, and which spec "
                "removes it."
            )
        why["fixes_note"] = "fixes not searched: sharding_core.explain compiles candidates (shardscope plan --fixes N)"
        c["why"] = why


def explain_snapshot(
    snap: dict[str, Any],
    *,
    jitted: Any,
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
    lowered: Any,
    compiled: Any,
    dump: Dump,
    tree: Any,
    in_avals: Any,
    in_shardings: Any,
    budget: Budget,
    inspect: Callable[[Any, Sequence[Any], Mapping[str, Any]], dict[str, Any]],
) -> None:
    """Gives every collective of ``snap`` its ``why`` (fixes within ``budget``); ``snap["fixes"]`` holds the
    snapshots of the fixes kept and ``snap["why_search"]`` what the search did. ``inspect`` compiles a
    candidate program into a snapshot (``inspect_program`` without a why)."""
    import jax

    from sharding_core.spec import parse_spec

    collectives = snap.get("collectives") or []
    if not collectives:
        return
    all_paths = paths(tree)
    in_paths = [p for p in all_paths if p.startswith("inputs/")]
    out_paths = [p for p in all_paths if p == "outputs" or p.startswith("outputs/")]
    flat_avals = jax.tree.leaves(in_avals)
    flat_in = jax.tree.leaves(in_shardings, is_leaf=lambda x: x is None or isinstance(x, jax.sharding.Sharding))
    inputs = [_leaf(p, a, s) for p, a, s in zip(in_paths, flat_avals, flat_in, strict=False)]
    out_avals = jax.tree.leaves(compiled.out_info)
    out_sh = jax.tree.leaves(compiled.output_shardings)
    outputs = [_leaf(p, a, s) for p, a, s in zip(out_paths, out_avals, out_sh, strict=False)]
    module = sdy_module.parse_module(dump.mlir) if dump.mlir else None
    from sharding_core.compat import kept_inputs

    kept = kept_inputs(lowered, len(inputs), len(module.args)) if module is not None else list(range(len(inputs)))
    mesh = _mesh_axes(module, [*flat_in, *out_sh])
    view = View(compiled.as_text() or "", module, dump.partitioner, tuple(inputs[i] for i in kept if i < len(inputs)),
                tuple(outputs), mesh)  # fmt: skip
    fixable: dict[str, tuple[Dims, tuple[int, ...]]] = {}
    for leaf, sharding in [*zip(inputs, flat_in, strict=False), *zip(outputs, out_sh, strict=False)]:
        if isinstance(sharding, jax.sharding.NamedSharding):
            fixable[leaf.path] = (spec_dims(sharding.spec, len(leaf.shape)), leaf.shape)
    base = getattr(jitted, "__wrapped__", None)
    flat_args, arg_tree = jax.tree_util.tree_flatten((tuple(args), dict(kwargs)))
    from sharding_core.compat import jit_like, pins_inputs

    def recompile(c: Candidate) -> Outcome:
        f, a, k = jitted, tuple(args), dict(kwargs)
        if c.kind == "input":
            if len(flat_args) != len(flat_avals):
                raise ValueError("the program has static arguments: its inputs cannot be matched to its leaves")
            i = in_paths.index(str(c.leaf))
            new = jax.ShapeDtypeStruct(
                flat_avals[i].shape,
                flat_avals[i].dtype,
                sharding=jax.sharding.NamedSharding(flat_in[i].mesh, parse_spec(str(c.spec))),
            )
            leaves = [_abstract(x) for x in flat_args]
            leaves[i] = new
            a, k = jax.tree_util.tree_unflatten(arg_tree, leaves)
            if base is not None and pins_inputs(jitted):
                # The jit pins its inputs' shardings: the same jit, pinning the new one.
                f = jit_like(jitted, in_shardings=tuple(jax.tree.map(lambda x: x.sharding, x) for x in a))
        elif c.kind == "output":
            if base is None:
                raise ValueError("the function is not a jax.jit object: its out_shardings cannot be changed")
            j = out_paths.index(str(c.leaf))
            shardings = list(out_sh)
            shardings[j] = jax.sharding.NamedSharding(out_sh[j].mesh, parse_spec(str(c.spec)))
            f = jit_like(
                jitted, out_shardings=jax.tree_util.tree_unflatten(jax.tree.structure(compiled.out_info), shardings)
            )
        option = c.option
        from sharding_core.kernels.runner import captured_stderr

        # A candidate's compile warnings (involuntary rematerialization, ...) are kept with it, not printed.
        with captured_stderr(echo=False) as log, _option(*option) if option is not None else contextlib.nullcontext():
            fixed = inspect(f, a, k)
        stats = (fixed.get("jit") or {}).get("memory_per_device") or {}
        return Outcome(list(fixed.get("collectives") or []), stats.get("peak_memory_in_bytes"), fixed, log=log)

    stats = (snap.get("jit") or {}).get("memory_per_device") or {}
    found = attach(
        collectives,
        view,
        fixable=fixable,
        recompile=recompile if budget.recompiles > 0 else None,
        budget=budget,
        peak=stats.get("peak_memory_in_bytes"),
        outputs_fixable=base is not None,
        equation=equations(jitted, args, kwargs),
        note=dump.note,
    )
    snap["why_search"] = found["summary"]
    if found["results"]:
        snap["fixes"] = found["results"]


def _mesh_axes(module: sdy_module.Module | None, shardings: Sequence[Any]) -> dict[str, int]:
    if module is not None and module.mesh:
        return dict(module.mesh)
    import jax

    for s in shardings:
        if isinstance(s, jax.sharding.NamedSharding):
            return {str(a): int(n) for a, n in s.mesh.shape.items()}
    return {}
