"""Flax's logical axis rules: checking them and :func:`logical_to_mesh_axes`, exactly as Flax applies them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from jax.sharding import PartitionSpec

from sharding_core.compat import spec_entries
from sharding_core.errors import TOO_LARGE, ShardingError
from sharding_core.snapshot.format import MAX_RULES, clip, kind_name
from sharding_core.spec import parse_spec

BAD_RULES = "bad_rules"

Rule = tuple[str, Any]  # (logical name, mesh axis | tuple of mesh axes | None)


def check_rules(rules: Any) -> tuple[Rule, ...]:
    """Rules as Flax takes them: pairs ``(logical name, mesh axis | (mesh axes...) | None)``."""
    if not isinstance(rules, (list, tuple)):
        raise ShardingError(
            BAD_RULES, f"rules must be a list of (logical name, mesh axes) pairs, got {kind_name(rules)}"
        )
    if len(rules) > MAX_RULES:
        raise ShardingError(TOO_LARGE, f"at most {MAX_RULES} rules are allowed, got {len(rules)}", limit=MAX_RULES)
    out: list[Rule] = []
    for i, rule in enumerate(rules):
        if not isinstance(rule, (list, tuple)) or len(rule) != 2 or not isinstance(rule[0], str):
            raise ShardingError(
                BAD_RULES,
                f"rule {i} must be a pair (logical name, mesh axes), got {clip(repr(rule))}",
                hint="e.g. ('batch', 'data'), ('hidden', 'model'), ('embed', None)",
                rule=i,
            )
        target = rule[1]
        if isinstance(target, (list, tuple)):
            if not all(isinstance(a, str) for a in target):
                raise ShardingError(BAD_RULES, f"rule {i}: mesh axes must be names, got {clip(repr(target))}", rule=i)
            target = tuple(target)
        elif target is not None and not isinstance(target, str):
            raise ShardingError(
                BAD_RULES, f"rule {i}: the mesh side must be an axis name, a tuple of them or None", rule=i
            )
        out.append((rule[0], target))
    return tuple(out)


def logical_to_mesh_axes(names: Sequence[str | None], rules: Sequence[Rule]) -> list[Any]:
    """The PartitionSpec entries for an array whose dimensions carry logical ``names``.

    Exactly ``flax.linen.logical_to_mesh_axes`` (tests compare the two): rules are taken in order of
    precedence; a rule ``(name, mesh)`` applies to the dimension called ``name`` if that dimension is
    still unassigned and none of the rule's mesh axes is already used by another dimension. A rule
    to ``None`` assigns "unsharded", so later rules for that name no longer apply. Dimensions left
    unassigned, and ``None`` names, are not sharded. A name used twice is an error (as in Flax).
    """
    strings = [n for n in names if isinstance(n, str)]
    dups = sorted({n for n in strings if strings.count(n) > 1})
    if dups:
        raise ShardingError(
            BAD_RULES,
            f"logical names {tuple(dups)} occur more than once in {tuple(names)}; each names one dimension",
            names=list(dups),
        )
    unassigned = object()
    result: list[Any] = [unassigned if isinstance(n, str) else n for n in names]
    for logical, mesh in rules:
        if logical not in names:
            continue
        pos = list(names).index(logical)
        if result[pos] is not unassigned:
            continue
        wanted = set(mesh if isinstance(mesh, tuple) else (mesh,)) - {None}
        used = {a for entry in result for a in (entry if isinstance(entry, tuple) else (entry,)) if isinstance(a, str)}
        if wanted & used:
            continue
        result[pos] = mesh
    return [None if r is unassigned else r for r in result]


def rules_json(rules: Sequence[Rule]) -> list[list[Any]]:
    """Rules as JSON: ``[[logical, mesh axis | [mesh axes] | null], ...]``."""
    return [[k, list(v) if isinstance(v, tuple) else v] for k, v in rules]


def logical_spec(text: str, rules: list[Any]) -> PartitionSpec:
    """The mesh PartitionSpec of a spec naming logical axes (``"P('batch', 'embed')"``), under Flax's rules
    (what ``POST /api/layout`` lays out when given ``rules``)."""
    names: list[str | None] = []
    for entry in spec_entries(parse_spec(text)):
        if isinstance(entry, tuple):
            raise ShardingError(
                BAD_RULES,
                f"with logical rules each dimension names one logical axis or None, got the tuple {entry!r}",
                hint="write the logical names as Flax does: ('batch', 'embed'), one per dimension",
            )
        names.append(entry if isinstance(entry, str) else None)
    return PartitionSpec(*logical_to_mesh_axes(names, check_rules(rules)))
