"""How long a collective takes on the hardware: the formulas of "How to Scale Your Model" on the device
set's topology.

The formulas (pure functions below, unit-tested against the book's worked examples):

* **A ring over torus axes (ICI).** A group spans, along each torus axis it varies on, ``k`` chips
  spaced ``s`` links apart (``s > 1`` for a sub-axis: interleaved groups share those links). With
  wraparound on that axis (the group covers the whole axis and the slice wraps it) the ring runs in
  both directions and takes ``steps = ⌊k/2⌋`` steps; without, it is a line: ``k − 1`` steps. Each
  step moves one shard (``V / k``) over a link, so the axis gives ``L = k / (steps · s)`` links' worth
  of bandwidth, and the axes a group spans add up (the book: "AllGather over multiple axes ...
  increases the available bandwidth by a factor of n_axes")::

      all-gather      T = max(V / (W_link · ΣL / share), hops · t_hop)      V = the gathered bytes
      reduce-scatter  the same, V = result bytes × N
      all-reduce      2 × all-gather of V = bytes (a reduce-scatter then an all-gather)
      all-to-all      max(V / (4 · W_link · ΣL / share), hops · t_hop), V = bytes × N
      permute         max(bytes · load / W_link, h · t_hop): each pair routed on its shortest path,
                      load = transfers on the busiest directed link, h = longest path in hops

  ``W_link`` is the one-way bandwidth of one link, ``hops = Σ steps · s`` and ``t_hop`` ≈ 1 µs per
  hop (the latency-bound regime). ``share`` is how many devices use a chip's links at once
  (cores of one chip in different groups). Check: a v4 4x4x4 axis of 4 (wraparound) gives
  ``T = V / (2 · W_link) = V / W_bidi``, the book's ``23 us``; a v5e 4x4 axis of 4 (no wraparound)
  ``T = 3 · (V / 4) / W_link``, the book's ``3 · 8.4e6 / 4.5e10``.
* **A switched fabric** (NVLink in a GPU host, DCN between TPU slices, the network between GPU
  hosts), ``m`` members each with ``W`` one way: all-gather ``V · (m − 1) / (m · W)``,
  reduce-scatter ``b · (m − 1) / W``, all-reduce ``2 · V · (m − 1) / (m · W)``, all-to-all
  ``b · (m − 1) / (m · W)``, permute ``b / W`` (the book's GPU chapter).
* **A group across slices or hosts** is two steps: inside each island (ICI or NVLink) and between the
  ``S`` islands (DCN or the network) on ``1 / n`` of the data, ``n`` members per island — for an
  all-reduce ``2 · inner(V) + outer all-reduce(V / n)``; the DCN steps of a multi-slice program
  (:func:`estimate_dcn_step`) are that outer part.

A collective's estimate is its slowest group's. Every estimate is ``{"seconds", "formula", "inputs",
"fabric"}``, or ``{"seconds": None, "why"}`` where the model has no figures.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from sharding_core.cost.context import CostContext
from sharding_core.hardware import GpuFigures, TpuFigures

FABRICS = ("ici", "dcn", "nvlink", "network")
AXIS_NAMES = ("x", "y", "z")
ON_CHIP = "on one chip: no ICI link is used (the model counts copies between a chip's cores as free)"


# ------------------------------------------------------------------------------------------- formulas


@dataclasses.dataclass(frozen=True)
class RingAxis:
    """The chips a group spans along one torus axis: ``members`` of them, ``stride`` links apart."""

    members: int
    wraparound: bool
    stride: int = 1

    @property
    def steps(self) -> int:
        """Shard transfers in a row: ⌊k/2⌋ around a ring using both directions, k − 1 along a line."""
        return self.members // 2 if self.wraparound else self.members - 1

    @property
    def links(self) -> float:
        """Links' worth of one-way bandwidth the axis gives: k / (steps · stride)."""
        return self.members / (self.steps * self.stride) if self.steps else 0.0

    def json(self, axis: int) -> dict[str, Any]:
        name = AXIS_NAMES[axis] if axis < len(AXIS_NAMES) else str(axis)
        return {"axis": name, "members": self.members, "wraparound": self.wraparound, "stride": self.stride,
                "steps": self.steps}  # fmt: skip


@dataclasses.dataclass(frozen=True)
class Timing:
    seconds: float
    bandwidth_seconds: float
    latency_seconds: float
    links: float
    hops: int

    @property
    def bound(self) -> str:
        return "latency" if self.latency_seconds > self.bandwidth_seconds else "bandwidth"

    def scaled(self, factor: float) -> Timing:
        return Timing(self.seconds * factor, self.bandwidth_seconds * factor, self.latency_seconds * factor,
                      self.links, self.hops)  # fmt: skip


def ring_time(
    volume: float, axes: Sequence[RingAxis], link_bandwidth: float, hop_latency: float, share: float = 1.0
) -> Timing:
    """All-gather of ``volume`` bytes over rings along ``axes``: max(V / (W · ΣL / share), hops · t_hop)."""
    used = [a for a in axes if a.members > 1]
    links = sum(a.links for a in used)
    hops = sum(a.steps * a.stride for a in used)
    bandwidth = volume * share / (link_bandwidth * links) if links else 0.0
    latency = hops * hop_latency
    return Timing(max(bandwidth, latency), bandwidth, latency, links, hops)


def ici_all_gather(result_bytes: float, axes: Sequence[RingAxis], w: float, t_hop: float, share: float = 1) -> Timing:
    return ring_time(result_bytes, axes, w, t_hop, share)


def ici_reduce_scatter(
    result_bytes: float, group_size: int, axes: Sequence[RingAxis], w: float, t_hop: float, share: float = 1
) -> Timing:
    return ring_time(result_bytes * group_size, axes, w, t_hop, share)


def ici_all_reduce(nbytes: float, axes: Sequence[RingAxis], w: float, t_hop: float, share: float = 1) -> Timing:
    return ring_time(nbytes, axes, w, t_hop, share).scaled(2)


def ici_all_to_all(
    nbytes: float, group_size: int, axes: Sequence[RingAxis], w: float, t_hop: float, share: float = 1
) -> Timing:
    t = ring_time(nbytes * group_size, axes, w, t_hop, share)
    bandwidth = t.bandwidth_seconds / 4
    return Timing(max(bandwidth, t.latency_seconds), bandwidth, t.latency_seconds, t.links, t.hops)


def ici_permute(nbytes: float, load: int, hops: int, w: float, t_hop: float) -> Timing:
    """Every pair sends ``nbytes`` along its shortest path; the busiest directed link carries ``load`` of
    them: max(bytes · load / W_link, hops · t_hop)."""
    bandwidth = nbytes * load / w
    latency = hops * t_hop
    return Timing(max(bandwidth, latency), bandwidth, latency, 1.0, hops)


def link_load(src: np.ndarray, tgt: np.ndarray, sizes: np.ndarray, wraps: np.ndarray) -> tuple[int, int]:
    """Routes each source → target pair (chip coordinates, ``(pairs, dims)``) along its shortest path,
    axis by axis (x, then y, then z; the short way round an axis that wraps), and counts the pairs on
    each directed link. Returns (longest path in hops, transfers on the busiest directed link)."""
    pos = src.copy()
    keys: list[np.ndarray] = []
    longest = np.zeros(len(src), dtype=np.int64)
    dims = src.shape[1]
    for a in range(dims):
        size = int(sizes[a])
        fwd = (tgt[:, a] - pos[:, a]) % size if wraps[a] else tgt[:, a] - pos[:, a]
        if wraps[a]:
            back = size - fwd
            direction = np.where(fwd <= back, 1, -1)
            length = np.where(fwd <= back, fwd, back)
        else:
            direction = np.sign(fwd)
            length = np.abs(fwd)
        longest += length
        most = int(length.max()) if len(length) else 0
        for k in range(most):
            moving = length > k
            at = pos[moving].copy()
            at[:, a] = (pos[moving, a] + direction[moving] * k) % size
            # a directed link: the chip it leaves, the axis and the direction
            code = np.zeros(int(moving.sum()), dtype=np.int64)
            for b in range(dims):
                code = code * int(sizes[b]) + at[:, b]
            keys.append((code * dims + a) * 2 + (direction[moving] > 0))
        pos[:, a] = tgt[:, a]
    if not keys:
        return 0, 0
    _, counts = np.unique(np.concatenate(keys), return_counts=True)
    return int(longest.max()), int(counts.max())


def switched_all_gather(result_bytes: float, members: float, w: float) -> float:
    return result_bytes * (members - 1) / (members * w) if members > 1 else 0.0


def switched_reduce_scatter(result_bytes: float, members: float, w: float) -> float:
    return result_bytes * (members - 1) / w if members > 1 else 0.0


def switched_all_reduce(nbytes: float, members: float, w: float) -> float:
    return 2 * switched_all_gather(nbytes, members, w)


def switched_all_to_all(nbytes: float, members: float, w: float) -> float:
    return nbytes * (members - 1) / (members * w) if members > 1 else 0.0


def switched_permute(nbytes: float, w: float) -> float:
    return nbytes / w


# How each op reads (ragged all-to-all: its output buffer is the upper bound; a broadcast moves V like
# an all-gather).
_KIND = {
    "all-gather": "all-gather",
    "reduce-scatter": "reduce-scatter",
    "all-reduce": "all-reduce",
    "all-to-all": "all-to-all",
    "ragged-all-to-all": "all-to-all",
    "collective-broadcast": "all-gather",
    "collective-permute": "permute",
}

ICI_FORMULAS = {
    "all-gather": "max(V / (W_link · ΣL / share), hops · t_hop), V = result bytes",
    "reduce-scatter": "max(V / (W_link · ΣL / share), hops · t_hop), V = result bytes × N",
    "all-reduce": "2 · max(V / (W_link · ΣL / share), hops · t_hop), V = bytes (reduce-scatter + all-gather)",
    "all-to-all": "max(V / (4 · W_link · ΣL / share), hops · t_hop), V = bytes × N",
    "permute": (
        "max(bytes · load / W_link, h · t_hop), pairs routed on shortest paths (x, then y, then z): "
        "load = pairs on the busiest directed link, h = the longest path in hops"
    ),
}
RING_NOTE = (
    "per torus axis: k members s links apart, steps = ⌊k/2⌋ with wraparound, k − 1 without, "
    "L = k / (steps · s), hops = Σ steps · s"
)
SWITCHED_FORMULAS = {
    "all-gather": "V · (m − 1) / (m · W), V = result bytes",
    "reduce-scatter": "b · (m − 1) / W",
    "all-reduce": "2 · V · (m − 1) / (m · W), V = bytes",
    "all-to-all": "b · (m − 1) / (m · W)",
    "permute": "b / W",
}
OUTER_FORMULAS = {
    "all-gather": "V / n · (S − 1) / (S · W)",
    "reduce-scatter": "b · (S − 1) / W",
    "all-reduce": "2 · V / n · (S − 1) / (S · W)",
    "all-to-all": "b · (N − n) / (N · W)",
    "permute": "b / W",
}


def _outer_seconds(kind: str, nbytes: float, n: float, islands: float, group_size: float, w: float) -> float:
    """The step between islands: ``islands`` members of ``1 / n`` of the data each (see OUTER_FORMULAS)."""
    if kind == "all-gather":
        return switched_all_gather(nbytes / n, islands, w)
    if kind == "reduce-scatter":
        return switched_reduce_scatter(nbytes, islands, w)
    if kind == "all-reduce":
        return switched_all_reduce(nbytes / n, islands, w)
    if kind == "all-to-all":
        return nbytes * (group_size - n) / (group_size * w) if group_size > n else 0.0
    return switched_permute(nbytes, w)


def _switched_seconds(kind: str, nbytes: float, members: float, w: float) -> float:
    if kind == "all-gather":
        return switched_all_gather(nbytes, members, w)
    if kind == "reduce-scatter":
        return switched_reduce_scatter(nbytes, members, w)
    if kind == "all-reduce":
        return switched_all_reduce(nbytes, members, w)
    if kind == "all-to-all":
        return switched_all_to_all(nbytes, members, w)
    return switched_permute(nbytes, w)


def _ici_timing(
    kind: str, nbytes: float, group_size: int, axes: Sequence[RingAxis], w: float, t_hop: float, share: float
) -> Timing:
    if kind == "all-gather":
        return ici_all_gather(nbytes, axes, w, t_hop, share)
    if kind == "reduce-scatter":
        return ici_reduce_scatter(nbytes, group_size, axes, w, t_hop, share)
    if kind == "all-reduce":
        return ici_all_reduce(nbytes, axes, w, t_hop, share)
    return ici_all_to_all(nbytes, group_size, axes, w, t_hop, share)


def _volume(kind: str, nbytes: float, group_size: int) -> float:
    return nbytes * group_size if kind in ("reduce-scatter", "all-to-all") else nbytes


# ----------------------------------------------------------------------------------------- estimates


def none(why: str) -> dict[str, Any]:
    """An estimate that is not there, and why."""
    return {"seconds": None, "why": why}


def estimate_collective(c: Mapping[str, Any], ctx: CostContext | None) -> dict[str, Any]:
    """The estimate of one collective (the serialiser's dict: ``op``, ``bytes``, ``groups``, ``pairs``)."""
    if ctx is None:
        return none("no device set to estimate on")
    if ctx.why is not None or ctx.hardware is None:
        return none(ctx.why or "no hardware figures")
    nbytes = c.get("bytes")
    kind = _KIND.get(str(c.get("op")))
    if nbytes is None or kind is None:
        return none(f"no model for {c.get('op')!r} of unknown size" if kind else f"no model for {c.get('op')!r}")
    if kind == "permute":
        pairs = c.get("pairs") or []
        return _permute(float(nbytes), pairs, ctx) if pairs else _zero("no source → target pairs", ctx)
    groups = c.get("groups") or []
    if not groups or all(len(g) <= 1 for g in groups):
        return _zero("every group is a single device: nothing moves", ctx)
    best: dict[str, Any] | None = None
    by_size: dict[int, list[Sequence[int]]] = {}
    for g in groups:
        by_size.setdefault(len(g), []).append(g)
    for size, same in by_size.items():
        if size <= 1:
            continue
        rows = ctx.rows_of(same)
        if rows is None:
            return none(f"the groups name devices that are not in {ctx.label}")
        est = _groups(kind, str(c.get("op")), float(nbytes), rows, ctx)
        if est["seconds"] is None:
            return est
        if best is None or est["seconds"] > best["seconds"]:
            best = est
    assert best is not None
    best["inputs"]["groups"] = len(groups)
    return best


def _zero(why: str, ctx: CostContext) -> dict[str, Any]:
    fabric = "ici" if ctx.platform == "tpu" else "nvlink"
    return {"seconds": 0.0, "formula": why, "inputs": {"hardware": _title(ctx)}, "fabric": fabric}


def _title(ctx: CostContext) -> str:
    return ctx.hardware.title if ctx.hardware is not None else ctx.label


def _group_stats(rows: np.ndarray, ctx: CostContext) -> np.ndarray:
    """Per group (row of ``rows``): islands, distinct chips, then per torus axis the members, stride and
    wraparound — one int row per group, so equal groups collapse with ``np.unique``."""

    def distinct(values: np.ndarray) -> np.ndarray:
        v = np.sort(values, axis=1)
        out: np.ndarray = 1 + (np.diff(v, axis=1) != 0).sum(axis=1)
        return out

    cols = [distinct(ctx.island[rows])[:, None], distinct(ctx.chip[rows])[:, None]]
    if ctx.coords.shape[1]:
        c = np.sort(ctx.coords[rows], axis=1)  # (groups, members, dims)
        d = np.diff(c, axis=1)
        members = 1 + (d > 0).sum(axis=1)  # (groups, dims)
        stride = np.where(d > 0, d, np.iinfo(np.int64).max).min(axis=1)
        stride = np.where(members > 1, stride, 1)
        wrap = ctx.wraps & (members * stride == ctx.sizes) & (ctx.sizes > 2)
        cols += [members, stride, wrap.astype(np.int64)]
    stats: np.ndarray = np.concatenate(cols, axis=1)
    return stats


def _groups(kind: str, op: str, nbytes: float, rows: np.ndarray, ctx: CostContext) -> dict[str, Any]:
    size = rows.shape[1]
    dims = ctx.coords.shape[1]
    best: dict[str, Any] | None = None
    for row in np.unique(_group_stats(rows, ctx), axis=0):
        islands, chips = int(row[0]), int(row[1])
        axes = [
            (a, RingAxis(int(row[2 + a]), bool(row[2 + 2 * dims + a]), int(row[2 + dims + a])))
            for a in range(dims)
            if row[2 + a] > 1
        ]
        est = _one_group(kind, op, nbytes, size, islands, chips, axes, ctx)
        if est["seconds"] is None:
            return est
        if best is None or est["seconds"] > best["seconds"]:
            best = est
    assert best is not None
    return best


def _inner_bytes(kind: str, nbytes: float, islands: int) -> float:
    """What the step inside an island works on, in its own collective's terms: a reduce-scatter inside an
    island leaves ``b × S`` per device (the step across islands scatters that over the S islands)."""
    return nbytes * islands if kind == "reduce-scatter" else nbytes


def _one_group(
    kind: str,
    op: str,
    nbytes: float,
    size: int,
    islands: int,
    chips: int,
    axes: list[tuple[int, RingAxis]],
    ctx: CostContext,
) -> dict[str, Any]:
    """One group: ``size`` devices on ``chips`` chips in ``islands`` islands, spanning ``axes`` of the torus."""
    hw = ctx.hardware
    inputs: dict[str, Any] = {"op": op, "bytes": nbytes, "group_size": size, "hardware": _title(ctx)}
    n = size / islands  # members per island
    members = max(1, round(n))
    inner_bytes = _inner_bytes(kind, nbytes, islands)
    if isinstance(hw, TpuFigures):
        w, t_hop = hw.ici_link_bandwidth.value, hw.hop_latency.value
        if w is None or t_hop is None:
            return none(f"no ICI link bandwidth for {hw.title}: {hw.ici_link_bandwidth.note}")
        if axes:
            share = max(1.0, hw.devices_per_chip * chips / size)
            rings = [ring for _, ring in axes]
            t = _ici_timing(kind, inner_bytes, members, rings, w, t_hop, share)
            inputs.update(
                volume_bytes=_volume(kind, inner_bytes, members),
                axes=[ring.json(a) for a, ring in axes],
                links=t.links,
                link_bandwidth=w,
                share=share,
                hops=t.hops,
                hop_latency=t_hop,
                bound=t.bound,
            )
            inner, inner_formula = t.seconds, f"{ICI_FORMULAS[kind]}; {RING_NOTE}"
        else:
            inner, inner_formula = 0.0, ON_CHIP if members > 1 else "one device per slice: nothing moves inside it"
        if islands == 1:
            return {"seconds": inner, "formula": inner_formula, "inputs": inputs, "fabric": "ici"}
        w_out = hw.dcn_bandwidth.value
        if w_out is None:
            return none(f"no DCN bandwidth for {hw.title}: {hw.dcn_bandwidth.note}")
        w_dev = w_out / hw.devices_per_chip
        return _two_level(kind, nbytes, size, islands, inner, inner_formula, w_dev, ("ici", "dcn"), inputs, ctx)
    assert isinstance(hw, GpuFigures)
    inner, inner_formula = 0.0, "one GPU per host: nothing moves inside it"
    if members > 1:
        w_in = hw.nvlink_bandwidth.value
        if w_in is None:
            return none(f"no NVLink bandwidth for {hw.title}: {hw.nvlink_bandwidth.note}")
        inner = _switched_seconds(kind, inner_bytes, members, w_in)
        inner_formula = SWITCHED_FORMULAS[kind].replace("W", "W_nvlink")
        inputs.update(volume_bytes=_volume(kind, inner_bytes, members), members=members, nvlink_bandwidth=w_in)
    if islands == 1:
        return {"seconds": inner, "formula": inner_formula, "inputs": inputs, "fabric": "nvlink"}
    w_out = hw.network_bandwidth.value
    if w_out is None:
        return none(f"no network bandwidth for {hw.title}: {hw.network_bandwidth.note}")
    return _two_level(kind, nbytes, size, islands, inner, inner_formula, w_out, ("nvlink", "network"), inputs, ctx)


def _two_level(
    kind: str,
    nbytes: float,
    size: int,
    islands: int,
    inner: float,
    inner_formula: str,
    w_out: float,
    fabrics: tuple[str, str],
    inputs: dict[str, Any],
    ctx: CostContext,
) -> dict[str, Any]:
    """Inside each island, then across the ``islands``: the two parts add up."""
    n = size / islands
    outer = _outer_seconds(kind, nbytes, n, islands, size, w_out)
    where = ctx.islands_name
    inner_fabric, outer_fabric = fabrics
    inputs.update(
        islands=islands, per_island=n, network_bandwidth=w_out, parts={inner_fabric: inner, outer_fabric: outer}
    )
    formula = (
        f"inside each of the {where} ({inner_fabric}): {inner_formula}; plus across S = {islands} {where} "
        f"({outer_fabric}, n = {n:g} per island, W = {outer_fabric} bandwidth per device): {OUTER_FORMULAS[kind]}"
    )
    return {"seconds": inner + outer, "formula": formula, "inputs": inputs, "fabric": outer_fabric}


def _permute(nbytes: float, pairs: Sequence[Sequence[int]], ctx: CostContext) -> dict[str, Any]:
    rows = ctx.rows_of([list(p) for p in pairs])
    if rows is None:
        return none(f"the source → target pairs name devices that are not in {ctx.label}")
    src, tgt = rows[:, 0], rows[:, 1]
    moving = src != tgt
    if not moving.any():
        return _zero("every device sends to itself: nothing moves", ctx)
    src, tgt = src[moving], tgt[moving]
    hw = ctx.hardware
    crossing = ctx.island[src] != ctx.island[tgt]
    inputs: dict[str, Any] = {"op": "collective-permute", "bytes": nbytes, "pairs": int(moving.sum()),
                              "hardware": _title(ctx)}  # fmt: skip
    if isinstance(hw, TpuFigures):
        w, t_hop = hw.ici_link_bandwidth.value, hw.hop_latency.value
        if w is None or t_hop is None:
            return none(f"no ICI link bandwidth for {hw.title}: {hw.ici_link_bandwidth.note}")
        inside = ~crossing
        hops, load, ici = 0, 0, 0.0
        if inside.any():
            hops, load = link_load(ctx.coords[src[inside]], ctx.coords[tgt[inside]], ctx.sizes, ctx.wraps)
            ici = ici_permute(nbytes, load, hops, w, t_hop).seconds if hops else 0.0
        inputs.update(hops=hops, busiest_link=load, link_bandwidth=w, hop_latency=t_hop)
        if not crossing.any():
            formula = ICI_FORMULAS["permute"] if hops else ON_CHIP
            return {"seconds": ici, "formula": formula, "inputs": inputs, "fabric": "ici"}
        w_out = hw.dcn_bandwidth.value
        if w_out is None:
            return none(f"no DCN bandwidth for {hw.title}: {hw.dcn_bandwidth.note}")
        dcn = switched_permute(nbytes, w_out / hw.devices_per_chip)
        inputs.update(network_bandwidth=w_out / hw.devices_per_chip, parts={"ici": ici, "dcn": dcn})
        return {"seconds": max(ici, dcn), "formula": f"the slower of the pairs: ICI {ICI_FORMULAS['permute']}; "
                f"across slices (DCN) {OUTER_FORMULAS['permute']}", "inputs": inputs, "fabric": "dcn"}  # fmt: skip
    assert isinstance(hw, GpuFigures)
    w_fig = hw.network_bandwidth if crossing.any() else hw.nvlink_bandwidth
    if w_fig.value is None:
        return none(f"no {'network' if crossing.any() else 'NVLink'} bandwidth for {hw.title}: {w_fig.note}")
    inputs.update(bandwidth=w_fig.value)
    fabric = "network" if crossing.any() else "nvlink"
    return {"seconds": switched_permute(nbytes, w_fig.value), "formula": f"b / W_{fabric}", "inputs": inputs,
            "fabric": fabric}  # fmt: skip


def estimate_dcn_step(step: Mapping[str, Any], ctx: CostContext | None) -> dict[str, Any]:
    """The estimate of a multi-slice program's cross-slice step (:func:`sharding_core.hlo.collectives.
    cross_slice_steps`): the outer part of the two-level estimate, over DCN."""
    if ctx is None or ctx.why is not None or not isinstance(ctx.hardware, TpuFigures):
        return none(ctx.why if ctx is not None and ctx.why else "DCN steps belong to multi-slice TPU sets")
    hw = ctx.hardware
    nbytes = step.get("bytes")
    kind = _KIND.get(str(step.get("op")))
    groups = step.get("groups") or []
    if nbytes is None or kind is None or not groups:
        return none(f"no model for a {step.get('op')!r} step of unknown size")
    w = hw.dcn_bandwidth.value
    if w is None:
        return none(f"no DCN bandwidth for {hw.title}: {hw.dcn_bandwidth.note}")
    w_dev = w / hw.devices_per_chip
    islands = max(len(g) for g in groups)
    global_groups = step.get("global_groups") or groups
    size = max(len(g) for g in global_groups)
    n = max(1.0, size / islands) if kind != "permute" else 1.0
    seconds = _outer_seconds(kind, float(nbytes), n, islands, size, w_dev)
    inputs = {"op": step.get("op"), "bytes": nbytes, "islands": islands, "per_island": n, "group_size": size,
              "network_bandwidth": w_dev, "hardware": hw.title}  # fmt: skip
    formula = f"across S = {islands} slices (DCN, n = {n:g} per slice): {OUTER_FORMULAS[kind]}"
    return {"seconds": seconds, "formula": formula, "inputs": inputs, "fabric": "dcn"}


def total_seconds(collectives: Sequence[Mapping[str, Any]]) -> tuple[float, int]:
    """The sum of the collectives' estimates, and how many had none."""
    total = 0.0
    missing = 0
    for c in collectives:
        est = c.get("estimate") or {}
        s = est.get("seconds")
        if s is None:
            missing += 1
        else:
            total += float(s)
    return total, missing


def communication(collectives: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Totals of a program's collectives: how many, the bytes of their results per device, their estimates
    summed (``seconds``; None when none has one) and how many have none."""
    seconds, missing = total_seconds(collectives)
    return {
        "count": len(collectives),
        "bytes": sum(int(c.get("bytes") or 0) for c in collectives),
        "seconds": seconds if len(collectives) > missing or not collectives else None,
        "without_estimate": missing,
    }


def fmt_seconds(s: float | None) -> str:
    if s is None or math.isnan(s):
        return "—"
    if s == 0:
        return "0 s"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6), ("ns", 1e-9)):
        if s >= scale:
            return f"{s / scale:.3g} {unit}"
    return f"{s:.3g} s"
