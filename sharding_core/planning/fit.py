"""Fixes that make a plan fit (issue 33), each checked by compiling it: ``plan.fit = {"fixes": [...]}``.

A plan that does not fit (XLA refused it, or its peak is past the chip's HBM) or fits with less headroom than asked
gets candidate changes, each compiled through the one pipeline on the same compile-only devices and read as a plan
of its own (its fit and step time are the cost model's, as for any plan):

* the largest argument leaves sharded over the mesh axes their spec leaves unused (any program);
* the largest outputs sharded over the mesh axes their pinned ``out_shardings`` leave unused (a jit that pins them);
* the arguments donated (``donate_argnums``) where the step donates none and its jit pins no shardings;
* variants the caller builds (``shardscope plan --fit`` varies the keyword knobs ``FN(mesh, **knobs)`` accepts:
  ``remat=``, ``microbatches=``), passed in as ``(text, kind, fn, args, kwargs)``.

Fixes are ranked: those that fit first, then by the step time they cost (expected seconds after).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from sharding_core.compat import jit_like, pins_inputs
from sharding_core.program.recompile import abstract

MAX_FIXES = 8
LARGEST_SHARE = 0.1  # leaves holding at least this share of the arguments' bytes are sharded further

Candidate = tuple[str, str, Any, Sequence[Any], Mapping[str, Any]]  # (kind, text, fn, args, kwargs)
Planner = Callable[[Any, Sequence[Any], Mapping[str, Any]], dict[str, Any]]


def needs_fit(snap: Mapping[str, Any], headroom: float = 0.0) -> bool:
    """Whether a plan does not fit, or fits with less than ``headroom`` (a fraction of the chip's HBM) to spare."""
    plan = snap.get("plan") or {}
    if plan.get("fits") is False:
        return True
    capacity = plan.get("capacity_bytes")
    peak = _peak(snap)
    if not headroom or not capacity or peak is None:
        return False
    return bool(peak > (1 - headroom) * int(capacity))


def _widened(spec: tuple[Any, ...], shape: tuple[int, ...], axes: Mapping[str, int]) -> tuple[Any, ...] | None:
    """``spec`` with every mesh axis it leaves unused added to the largest dimension that divides evenly."""
    used = {a for entry in spec if entry is not None for a in (entry if isinstance(entry, tuple) else (entry,))}
    free = [a for a in axes if a not in used and axes[a] > 1]
    if not free:
        return None
    full = list(spec) + [None] * (len(shape) - len(spec))
    for dim in sorted(range(len(shape)), key=lambda d: -shape[d]):
        current = full[dim]
        names = () if current is None else current if isinstance(current, tuple) else (current,)
        split = 1
        for a in (*names, *free):
            split *= axes[a]
        if shape[dim] % split == 0:
            full[dim] = (*names, *free) if len(names) + len(free) > 1 else free[0]
            return tuple(full)
    return None


def sharded_further(jitted: Any, args: Sequence[Any], kwargs: Mapping[str, Any]) -> Candidate | None:
    """The largest argument leaves sharded over the mesh axes their specs leave unused."""
    import jax

    flat, tree = jax.tree_util.tree_flatten((tuple(args), dict(kwargs)))
    leaves = [abstract(x) for x in flat]
    sizes = [int(getattr(x, "size", 0) or 0) * int(getattr(getattr(x, "dtype", None), "itemsize", 0) or 0)
             for x in leaves]  # fmt: skip
    total = sum(sizes) or 1
    changed = []
    for i, x in enumerate(leaves):
        sharding = getattr(x, "sharding", None)
        if sizes[i] < LARGEST_SHARE * total or not isinstance(sharding, jax.sharding.NamedSharding):
            continue
        axes = dict(sharding.mesh.shape)
        spec = _widened(tuple(sharding.spec), tuple(x.shape), axes)
        if spec is None:
            continue
        new = jax.sharding.NamedSharding(sharding.mesh, jax.sharding.PartitionSpec(*spec))
        leaves[i] = jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=new)
        changed.append(f"{jax.tree_util.keystr(jax.tree_util.tree_flatten_with_path(flat)[0][i][0])} -> P{spec}")
    if not changed:
        return None
    a, k = jax.tree_util.tree_unflatten(tree, leaves)
    fn = jitted if hasattr(jitted, "lower") else jax.jit(jitted)
    if getattr(fn, "__wrapped__", None) is not None and pins_inputs(fn):
        fn = jit_like(fn, in_shardings=tuple(jax.tree.map(lambda x: x.sharding, x) for x in a))
    text = f"shard the largest arguments over the mesh axes their specs leave unused ({len(changed)} leaves)"
    return ("shard", text, fn, tuple(a), dict(k))


def sharded_outputs(jitted: Any, args: Sequence[Any], kwargs: Mapping[str, Any]) -> Candidate | None:
    """The largest outputs sharded over the mesh axes their pinned ``out_shardings`` leave unused: a jit that pins
    a result replicated (``P()``) writes it whole on every device. None when the jit pins no output sharding or
    none can be split further."""
    import jax

    info = getattr(jitted, "_jit_info", None)
    pinned = list(getattr(info, "out_shardings_leaves", ()) or ())
    if info is None or not hasattr(jitted, "lower") or not any(type(x).__name__ != "UnspecifiedValue" for x in pinned):
        return None
    try:
        out = jax.eval_shape(jitted, *args, **kwargs)
    except Exception:  # noqa: BLE001 - the plan itself says why the program does not trace; no fix to offer here
        return None
    prefix = jax.tree_util.tree_unflatten(info.out_shardings_treedef, pinned)
    try:  # out_shardings may be a prefix of the outputs' tree: each pinned sharding over its subtree
        per_leaf = jax.tree_util.tree_map(lambda s, sub: jax.tree.map(lambda _: s, sub), prefix, out,
                                          is_leaf=lambda x: type(x).__name__ == "UnspecifiedValue")  # fmt: skip
    except (ValueError, TypeError):
        return None
    leaves, tree = jax.tree_util.tree_flatten(out)
    shardings = jax.tree_util.tree_leaves(per_leaf, is_leaf=lambda x: type(x).__name__ == "UnspecifiedValue")
    if len(shardings) != len(leaves):
        return None
    sizes = [int(x.size) * int(x.dtype.itemsize) for x in leaves]
    total = sum(sizes) or 1
    changed = []
    new = list(shardings)
    for i, (x, sharding) in enumerate(zip(leaves, shardings, strict=True)):
        if sizes[i] < LARGEST_SHARE * total or not isinstance(sharding, jax.sharding.NamedSharding):
            continue
        spec = _widened(tuple(sharding.spec), tuple(x.shape), dict(sharding.mesh.shape))
        if spec is not None:
            new[i] = jax.sharding.NamedSharding(sharding.mesh, jax.sharding.PartitionSpec(*spec))
            changed.append(f"output {i} -> P{spec}")
    if not changed:
        return None
    fn = jit_like(jitted, out_shardings=jax.tree_util.tree_unflatten(tree, new))
    text = f"shard the largest outputs over the mesh axes their out_shardings leave unused ({', '.join(changed)})"
    return ("shard_outputs", text, fn, tuple(args), dict(kwargs))


def donated(jitted: Any, args: Sequence[Any], kwargs: Mapping[str, Any], donated: int) -> Candidate | None:
    """Every positional argument donated (its buffers reused for the outputs), where none is and the jit pins no
    shardings (its options are then the defaults)."""
    import jax

    fun = getattr(jitted, "__wrapped__", None) if hasattr(jitted, "lower") else jitted
    if donated or fun is None or not args or (hasattr(jitted, "lower") and pins_inputs(jitted)):
        return None
    fn = jax.jit(fun, donate_argnums=tuple(range(len(args))))
    return ("donate", "donate the arguments (donate_argnums) so the outputs reuse their buffers", fn, args, kwargs)


def _peak(snap: Mapping[str, Any]) -> int | None:
    memory = (snap.get("program") or {}).get("memory") or {}
    if memory.get("peak_memory_in_bytes") is not None:
        return int(memory["peak_memory_in_bytes"])
    refusal = (snap.get("plan") or {}).get("refusal") or {}
    return int(refusal["required_bytes"]) if refusal.get("required_bytes") is not None else None


def verify(
    candidates: Iterable[Candidate],
    plan_of: Planner,
    seconds: float = 300.0,
    clock: Callable[[], float] = time.perf_counter,
) -> dict[str, Any]:
    """Each candidate compiled and planned (``plan_of``), within ``seconds``: none is started that would end past
    them (a compile is expected to take as long as the slowest so far: the 70B's fit search ran 362 s of its
    300 when it started one more at 295 s); the fixes, those that fit first, then by expected step time, and
    ``not_tried``, the candidates left for lack of time or past :data:`MAX_FIXES`."""
    fixes: list[dict[str, Any]] = []
    todo = list(candidates)
    t0 = clock()
    slowest = 0.0
    for kind, text, fn, args, kwargs in todo:
        started = clock()
        if len(fixes) >= MAX_FIXES or started - t0 + slowest > seconds:
            break
        try:
            snap = plan_of(fn, args, kwargs)
        except Exception as e:  # noqa: BLE001 - a candidate JAX cannot lower or compile is not a fix
            fixes.append({"kind": kind, "text": text, "fits": False, "peak_after": None,
                          "expected_seconds_after": None, "verified": False, "error": str(e)[:300]})  # fmt: skip
            continue
        finally:
            slowest = max(slowest, clock() - started)
        plan = snap.get("plan") or {}
        expected = (plan.get("step_time") or {}).get("expected_seconds")
        fixes.append({"kind": kind, "text": text, "fits": plan.get("fits") is not False and _peak(snap) is not None,
                      "peak_after": _peak(snap), "expected_seconds_after": expected, "verified": True,
                      "verified_after_seconds": round(clock() - t0, 3)})  # fmt: skip
    not_tried = [text for _, text, *_ in todo[len(fixes) :]]
    fixes.sort(key=lambda f: (not f["fits"], not f["verified"], f["expected_seconds_after"] or float("inf")))
    return {"fixes": fixes, "seconds": clock() - t0, "not_tried": not_tried}
