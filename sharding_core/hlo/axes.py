"""Which mesh axes a collective's device groups run along (pure: device ids and the mesh's id grid in)."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np


@dataclasses.dataclass(frozen=True)
class AxesReport:
    axes: tuple[str, ...]  # mesh axes the groups span, major first; sub-axes as Shardy writes them, "y:(1)2"
    exact: bool  # every group is exactly the devices along those (sub-)axes

    @property
    def text(self) -> str:
        if not self.axes:
            return "none (no communication)"
        names = ", ".join(self.axes)
        return names if self.exact else f"part of {names}"


def mesh_coords(id_grid: Any) -> dict[int, tuple[int, ...]]:
    """Device id -> its index in the mesh's device array (a nested list of ids)."""
    arr = np.asarray(id_grid, dtype=np.int64)
    return {int(arr[idx]): tuple(int(i) for i in idx) for idx in np.ndindex(arr.shape)}


def sub_axis(name: str, values: Sequence[int], size: int) -> str | None:
    """The (sub-)axis a group's coordinates along one mesh axis make, in Shardy's notation.

    All ``size`` coordinates: the axis itself. An evenly spaced run ``b, b+s, ..., b+(c-1)s`` that stays
    inside one block of ``s*c``: the sub-axis ``name:(pre)c`` with ``pre = size / (s*c)`` (the product of
    the sub-axes before it, major first). Anything else: None.
    """
    vals = sorted(values)
    c = len(vals)
    if c == size:
        return name
    if c < 2:
        return None
    s = vals[1] - vals[0]
    if s <= 0 or any(b - a != s for a, b in itertools.pairwise(vals)):
        return None
    if size % (s * c) or vals[0] % (s * c) >= s:
        return None
    return f"{name}:({size // (s * c)}){c}"


def group_axes(
    groups: Iterable[Sequence[int]], coords: Mapping[int, tuple[int, ...]], axis_names: Sequence[str]
) -> AxesReport:
    """Which mesh axes the groups run along: the axes whose coordinate varies within a group.

    Axes are ordered major first as the group lists its devices (the axis that changes slowest
    along a group comes first), which for an all-gather is the order of the gathered blocks. A
    group covering part of an axis names the sub-axis (``y:(1)2``: every other device along y)
    when its devices are evenly spaced, and is reported as not exact otherwise.
    """
    rank = len(axis_names)
    sizes = [1 + max((c[i] for c in coords.values()), default=0) for i in range(rank)]
    labels: dict[int, str] = {}
    strides: dict[int, int] = {}
    varying_sets: set[frozenset[int]] = set()
    exact = True
    for group in groups:
        cs = [coords[d] for d in group if d in coords]
        if len(cs) != len(group):
            return AxesReport((), False)
        varying = [i for i in range(rank) if len({c[i] for c in cs}) > 1]
        varying_sets.add(frozenset(varying))
        product = 1
        for i in varying:
            values = {c[i] for c in cs}
            product *= len(values)
            label = sub_axis(axis_names[i], list(values), sizes[i])
            if label is None:
                exact = False
                label = axis_names[i]
            if labels.setdefault(i, label) != label:
                exact = False
                labels[i] = axis_names[i]
            first_change = next(k for k, c in enumerate(cs) if c[i] != cs[0][i])
            strides[i] = max(strides.get(i, 0), first_change)
        if product != len(group) or len(set(group)) != len(group):
            exact = False  # not a full product of its axes (e.g. a diagonal), or a repeated device
    if len(varying_sets) > 1:
        exact = False
    ordered = sorted(labels, key=lambda i: (-strides.get(i, 0), i))
    return AxesReport(tuple(labels[i] for i in ordered), exact)


def pair_axes(
    pairs: Iterable[Sequence[int]], coords: Mapping[int, tuple[int, ...]], axis_names: Sequence[str]
) -> AxesReport:
    """The mesh axes along which a collective-permute moves data (where source and target differ)."""
    varying: set[int] = set()
    for src, tgt in pairs:
        a, b = coords.get(src), coords.get(tgt)
        if a is None or b is None:
            return AxesReport((), False)
        varying.update(i for i in range(len(axis_names)) if a[i] != b[i])
    return AxesReport(tuple(axis_names[i] for i in sorted(varying)), True)
