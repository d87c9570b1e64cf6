"""The space a search walks: the model as its logical axes see it, meshes of named axes, rules, knobs.

* :func:`probe` calls ``FN(mesh, rules, **knobs)`` once on a one-device mesh whose axes are named after the
  logical axes (``batch``, ``embed``, ``heads`` ...) with the rules ``(name, name)``: every abstract argument's
  sharding then names, dimension by dimension, the logical axis the model gave it — its shapes, dtypes and logical
  names, read from JAX's own ``NamedSharding``s. The lowered program's sharding constraints name the logical
  axes only activations carry (``act_embed``, ``groups``, ``activation_length``).
* :func:`meshes`: every factorisation of a slice's chips into the named axes ``data``, ``fsdp``, ``sequence``,
  ``expert`` and ``tensor`` (ICI, within a slice; MaxText's names) the model has logical axes for, with the
  slices on ``data`` (DCN, across slices).
* :func:`rules_for`: the rules of a mesh, MaxText's way (``base.yml``'s ``logical_axis_rules``: the batch over
  every data-like axis, weights' ``embed`` over ``fsdp`` (and ``sequence``, ``expert``), heads, MLP and vocabulary
  over ``tensor``, experts over ``expert``), with Flax's fallbacks, and every rule that would split a dimension
  unevenly dropped.
* :func:`knob_values`: the keyword knobs ``FN`` takes (booleans and ``Literal`` choices searched unless given).
"""

from __future__ import annotations

import dataclasses
import inspect
import itertools
import math
import re
import typing
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from sharding_core.errors import ShardingError
from sharding_core.snapshot.rules import Rule, logical_to_mesh_axes

AXES = ("data", "fsdp", "sequence", "expert", "tensor")
"""The mesh axes a search names, in mesh order: ``tensor`` last (``jax.make_mesh`` puts the last axis on the
nearest devices: the chips of a host on GPUs, a torus line on TPUs), ``data`` first (across slices)."""

BATCH = ("batch", "activation_batch", "groups", "cache_batch")
LENGTH = ("length", "activation_length", "sequence", "seq")
EMBED = ("embed",)
TENSOR = ("heads", "q_heads", "kv_heads", "activation_heads", "activation_kv_heads", "mlp", "activation_mlp",
          "vocab", "activation_vocab")  # fmt: skip
EXPERT = ("expert", "exp", "activation_exp")
OTHER = ("layers", "stage", "act_embed", "activation_embed", "norm", "kv", "head_dim", "kv_head_dim")
VOCABULARY = (*BATCH, *LENGTH, *EMBED, *TENSOR, *EXPERT, *OTHER)
"""The logical axis names a search knows (MaxText's and the Flax examples'); any other name stays unsharded."""

NO_RULES = "no_rules_parameter"
PROBE_FAILED = "search_probe_failed"
MAX_KNOB_COMBINATIONS = 8


@dataclasses.dataclass(frozen=True)
class Leaf:
    """One abstract argument: its shape, bytes per element and each dimension's logical name."""

    shape: tuple[int, ...]
    itemsize: int
    names: tuple[str | None, ...]
    weight: bool  # carries no batch axis: a parameter or optimizer state
    param: bool = True  # a parameter (the first positional argument, or ``params``), not optimizer state


@dataclasses.dataclass(frozen=True)
class Model:
    """What the probe read: the arguments by logical axis, the names activations use too, the knobs."""

    leaves: tuple[Leaf, ...]
    names: frozenset[str]
    knobs: Mapping[str, tuple[Any, ...]]

    def size_of(self, names: Sequence[str], default: int = 1) -> int:
        """The size of the first dimension named one of ``names`` (over all arguments)."""
        for leaf in self.leaves:
            for n, s in zip(leaf.names, leaf.shape, strict=True):
                if n in names:
                    return s
        return default

    def has(self, names: Sequence[str]) -> bool:
        return any(n in self.names for n in names)


def rules_parameter(fn: Callable[..., Any]) -> None:
    """Refuses a function without a ``rules`` parameter, saying what to add."""
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return
    if "rules" in params or any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return
    name = getattr(fn, "__name__", "FN")
    raise ShardingError(
        NO_RULES,
        f"{name}({', '.join(params)}) takes no rules: a search hands each candidate's logical-axis rules to it",
        hint=f"add a rules parameter — def {name}(mesh, rules=None, **knobs) — and name every dimension by a "
        "logical axis (batch, embed, heads, mlp, vocab, expert ...), turning names into PartitionSpecs with "
        "flax.linen.logical_to_mesh_axes(names, rules) (or under nn.logical_axis_rules(rules))",
    )


def knob_values(fn: Callable[..., Any], given: Mapping[str, Sequence[Any]] | None) -> dict[str, tuple[Any, ...]]:
    """Knob -> the values searched (the default first): those ``given`` (for a named parameter, or through
    ``**knobs`` when FN has one), else each keyword parameter with a ``bool`` default or a ``Literal`` annotation;
    others keep their default."""
    try:
        params = inspect.signature(fn).parameters
        hints = typing.get_type_hints(fn)
    except (TypeError, ValueError, NameError):
        params, hints = inspect.signature(fn).parameters, {}
    out: dict[str, tuple[Any, ...]] = {}
    for name, p in params.items():
        if name in ("mesh", "rules") or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        if given is not None and name in given:
            out[name] = _given(name, given[name])  # one value given: that value, not FN's default
            continue
        if isinstance(p.default, bool):
            values = (p.default, not p.default)
        elif typing.get_origin(hints.get(name)) is typing.Literal and p.default is not p.empty:
            choices = typing.get_args(hints[name])
            values = (p.default, *(c for c in choices if c != p.default))
        else:
            continue
        if len(values) > 1:
            out[name] = values
    unknown = sorted(set(given or {}) - set(params))
    if unknown and not any(p.kind is p.VAR_KEYWORD for p in params.values()):
        raise ShardingError("bad_knobs", f"{getattr(fn, '__name__', 'FN')} takes no knob(s) {', '.join(unknown)}",
                            hint=f"its parameters: {', '.join(params)}")  # fmt: skip
    for name in unknown:  # FN(mesh, rules, **knobs) takes them through its **knobs
        out[name] = _given(name, (given or {})[name])
    return out


def _given(name: str, values: Sequence[Any]) -> tuple[Any, ...]:
    if isinstance(values, str) or not isinstance(values, Sequence) or not values:
        raise ShardingError("bad_knobs", f"knob {name[:80]!r} needs a list of one or more values, got {values!r:.80}",
                            hint=f"e.g. knobs={{{name!r}: [True, False]}} (--knob {name}=true,false)")  # fmt: skip
    return tuple(values)


def knob_combinations(knobs: Mapping[str, tuple[Any, ...]]) -> list[tuple[tuple[str, Any], ...]]:
    """Every combination of the knobs' values (the defaults first), at most :data:`MAX_KNOB_COMBINATIONS`."""
    names = sorted(knobs)
    combos = [tuple(zip(names, values, strict=True)) for values in itertools.product(*(knobs[n] for n in names))]
    return combos[:MAX_KNOB_COMBINATIONS]


def probe(fn: Callable[..., Any], knobs: Mapping[str, tuple[Any, ...]]) -> Model:
    """The model's arguments by logical axis (see the module docstring), on this process's first CPU device."""
    import jax

    device = jax.devices("cpu")[0]
    mesh = jax.sharding.Mesh(np.array([device]).reshape((1,) * len(VOCABULARY)), VOCABULARY)
    rules = tuple((n, n) for n in VOCABULARY)
    try:
        made = fn(mesh, rules)
        jitted, args = made
        leaves = jax.tree.leaves(args)
        text = jitted.lower(**args).as_text() if isinstance(args, dict) else jitted.lower(*args).as_text()
    except Exception as e:  # noqa: BLE001 - the user's code: said with what it raised
        raise ShardingError(
            PROBE_FAILED,
            f"{getattr(fn, '__name__', 'FN')}(mesh, rules) failed on a probe mesh whose axes are the logical axis "
            f"names: {type(e).__name__}: {str(e)[:500]}",
            hint="FN must return (jitted_fn, args) with abstract args (jax.ShapeDtypeStruct) and name mesh axes only "
            "through the rules it is given",
        ) from None
    params = {id(x) for x in jax.tree.leaves(_params_of(args))}
    read = tuple(_leaf(x, mesh, id(x) in params) for x in leaves if hasattr(x, "shape") and hasattr(x, "dtype"))
    named = {n for leaf in read for n in leaf.names if n is not None}
    named |= constrained(text)
    return Model(read, frozenset(named), dict(knobs))


def constrained(text: str) -> set[str]:
    """The logical axes the lowered program's shardings name (Shardy's ``#sdy.sharding<@mesh, [{"batch"}, {}]>``
    and ``sdy.sharding_constraint``: each dimension's axes in braces; the mesh's own ``["batch"=1]`` is not)."""
    groups = [g for g in re.findall(r"\{([^{}\n]*)\}", text) if "=" not in g]  # a dimension's axes: {"a", "b"}
    names = {n for group in groups for n in re.findall(r'"(\w+)"', group)}
    return names & set(VOCABULARY)


def _params_of(args: Any) -> Any:
    """The parameters among the arguments: the first positional one (``(params, opt_state, batch)``), ``params``
    of keyword ones, else all of them."""
    if isinstance(args, (tuple, list)) and len(args) > 1:
        return args[0]
    if isinstance(args, dict) and "params" in args:
        return args["params"]
    return args


def _leaf(x: Any, mesh: Any, param: bool) -> Leaf:
    import jax

    shape = tuple(int(s) for s in x.shape)
    sharding = getattr(x, "sharding", None)
    names: list[str | None] = [None] * len(shape)
    if isinstance(sharding, jax.sharding.NamedSharding) and sharding.mesh.axis_names == mesh.axis_names:
        for i, entry in enumerate(tuple(sharding.spec)[: len(shape)]):
            first = entry[0] if isinstance(entry, tuple) and entry else entry
            names[i] = first if isinstance(first, str) else None
    itemsize = int(getattr(x.dtype, "itemsize", 4))
    weight = not any(n in BATCH for n in names)
    return Leaf(shape, itemsize, tuple(names), weight=weight, param=weight and param)


@dataclasses.dataclass(frozen=True)
class Grid:
    """A mesh a search may pick: each named axis's size (ICI x DCN) and the DCN part."""

    sizes: tuple[tuple[str, int], ...]
    dcn: tuple[int, ...]

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(s for _, s in self.sizes)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(a for a, _ in self.sizes)

    def size(self, axis: str) -> int:
        return dict(self.sizes).get(axis, 1)

    def text(self) -> str:
        return " × ".join(f"{a} {s}" for a, s in self.sizes)


def meshes(chips: int, slices: int, model: Model, axes: Sequence[str] | None = None) -> Iterator[Grid]:
    """Every factorisation of ``chips`` (one slice) into the axes the model has logical axes for (or ``axes``),
    the slices on ``data``; axes of size 1 left out, but ``data`` across slices."""
    usable = [a for a in AXES if (axes is None or a in axes) and _usable(a, model)]
    for sizes in _factorisations(chips, len(usable)):
        picked = [(a, s) for a, s in zip(usable, sizes, strict=True) if s > 1 or (a == "data" and slices > 1)]
        if slices > 1:
            if not any(a == "data" for a, _ in picked):
                continue
            picked = [(a, s * slices if a == "data" else s) for a, s in picked]
        if not picked:
            picked = [("data", 1)]
        dcn = tuple(slices if a == "data" else 1 for a, _ in picked)
        yield Grid(tuple(picked), dcn)


def _usable(axis: str, model: Model) -> bool:
    return {
        "data": model.has(BATCH),
        "fsdp": model.has(BATCH) and model.has(EMBED),
        "sequence": model.has(LENGTH),
        "expert": model.has(EXPERT),
        "tensor": model.has(TENSOR),
    }[axis]


def _factorisations(n: int, k: int) -> Iterator[tuple[int, ...]]:
    if k == 0:
        if n == 1:
            yield ()
        return
    for d in range(1, n + 1):
        if n % d == 0:
            for rest in _factorisations(n // d, k - 1):
                yield (d, *rest)


def _subsets(axes: Sequence[str]) -> list[Any]:
    """A rule's mesh side and its fallbacks, longest first (Flax skips a rule whose axes another dim took)."""
    out: list[Any] = []
    for r in range(len(axes), 0, -1):
        for combo in itertools.combinations(axes, r):
            out.append(combo if len(combo) > 1 else combo[0])
    return out


def rules_for(layout: Grid, model: Model, variant: str = "maxtext") -> tuple[Rule, ...] | None:
    """The rules of ``layout`` for the model's logical axes (see the module docstring); None when the batch cannot
    be split over every data-like axis (the step's work would be repeated). ``variant``: ``maxtext`` (weights'
    ``embed`` over fsdp, sequence and expert) or ``fsdp`` (over fsdp alone)."""
    present = [a for a, s in layout.sizes if s > 1]
    has = set(present)
    batch_axes = [a for a in ("data", "fsdp", "expert") if a in has]
    embed_axes = [a for a in (("fsdp", "sequence", "expert") if variant == "maxtext" else ("fsdp",)) if a in has]
    wanted: list[tuple[Sequence[str], list[Any]]] = [
        (EXPERT, ["expert"] if "expert" in has else []),
        (TENSOR, ["tensor"] if "tensor" in has else []),
        (LENGTH, ["sequence"] if "sequence" in has else []),
        (BATCH, _subsets(batch_axes)),
        (EMBED, _subsets(embed_axes)),
    ]
    rules: list[Rule] = [(n, side) for names, sides in wanted for n in names if n in model.names for side in sides]
    rules = _even(rules, layout, model)
    need = math.prod(layout.size(a) for a in batch_axes)
    for leaf in model.leaves:
        for n in leaf.names:
            if n in BATCH and _shards(logical_to_mesh_axes(leaf.names, rules), leaf.names.index(n), layout) != need:
                return None
    return tuple(rules)


def _shards(spec: Sequence[Any], i: int, layout: Grid) -> int:
    entry = spec[i]
    axes = entry if isinstance(entry, tuple) else (entry,) if entry is not None else ()
    return math.prod(layout.size(a) for a in axes)


def _even(rules: list[Rule], layout: Grid, model: Model) -> list[Rule]:
    """``rules`` without those that would split some argument's dimension unevenly (JAX refuses those)."""
    for _ in range(len(rules) + 1):
        bad = None
        for leaf in model.leaves:
            spec = logical_to_mesh_axes(leaf.names, rules)
            for i, s in enumerate(leaf.shape):
                if s % _shards(spec, i, layout):
                    bad = next(r for r in rules if r[0] == leaf.names[i] and r[1] == spec[i])
                    break
            if bad is not None:
                break
        if bad is None:
            return rules
        rules = [r for r in rules if r != bad]
    return rules


def shard_bytes(model: Model, rules: Sequence[Rule], layout: Grid) -> int:
    """The arguments' bytes per device under ``rules`` (each dimension over its mesh axes, evenly)."""
    total = 0
    for leaf in model.leaves:
        spec = logical_to_mesh_axes(leaf.names, rules)
        total += leaf.itemsize * math.prod(s // _shards(spec, i, layout) for i, s in enumerate(leaf.shape))
    return total
