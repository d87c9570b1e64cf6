"""How long a collective takes on the hardware: the formulas of "How to Scale Your Model" on the device
set's topology, as a **bound** (the spec sheet's bandwidths and latencies) and an **expected** time (the
same terms over each fabric's efficiency fitted to published measurements, :mod:`.efficiency`).

The formulas (pure functions below, unit-tested against the book's worked examples). Sections cited are
of the book's chapters: *sharding* = https://jax-ml.github.io/scaling-book/sharding/, *gpus* =
https://jax-ml.github.io/scaling-book/gpus/, *tpus* = https://jax-ml.github.io/scaling-book/tpus/.

* **A ring over torus axes (ICI)** (sharding, "A deeper dive into AllGather" and the summary table). A
  group spans, along each torus axis it varies on, ``k`` chips spaced ``s`` links apart (``s > 1`` for a
  sub-axis: interleaved groups share those links). With wraparound on that axis the ring runs in both
  directions and takes ``steps = ⌊k/2⌋`` steps; without, it is a line: ``k − 1`` steps. Each step moves one
  shard (``V / k``) over a link, so the axis gives ``L = k / (steps · s)`` links' worth of bandwidth, and the
  axes a group spans add up ("AllGather over multiple axes ... increases the available bandwidth by a factor
  of n_axes")::

      all-gather      T = max(V · share / (W_link · ΣL), V · share · (N − 1) / (N · W_link · C), hops · t_hop)
      reduce-scatter  the same, V = result bytes × N
      all-reduce      2 × all-gather of V = bytes (a reduce-scatter then an all-gather)
      all-to-all      max(V · share · max_a(k_a · s_a / w_a) / (4 · N · W_link), hops · t_hop), V = bytes × N
      permute         max(bytes · load / W_link, h · t_hop): each pair routed on its shortest path

  The middle term of the all-gather is a physical floor: the group's worst-placed chip (a corner, without
  wraparound) has ``C = Σ_axes (2 with wraparound, else 1)`` links into the group and must receive
  ``(N − 1) / N`` of the gathered bytes through them (tpus, Question 5: the corner chip of a v5e 4x4 "can
  receive data" from two ports; sharding's summary: a bidirectional ring halves the time). The all-to-all
  is the book's bisection rule (sharding, "Our final communication primitive: the AllToAll":
  ``T = V · max(A, B, C, ...) / (4 · N · W_ici)``, ``W_ici`` the bidirectional bandwidth of an axis), with
  ``w_a = 2`` links' worth on an axis with wraparound and 1 without: without wraparound the cut crosses
  one plane of links, not two, which doubles ``V / (4 · W_ici)`` to ``V / (4 · W_link)``.
  ``W_link`` is the one-way bandwidth of one link, ``hops = Σ steps · s`` and ``t_hop`` ≈ 1 µs per hop
  (sharding, "A note on ICI latency"). ``share`` is how many devices use a chip's links at once (cores of
  one chip in different groups). Check: a v4 4x4x4 axis of 4 (wraparound) gives ``V / (2 · W_link)``, the
  book's ``23 us``; a v5e axis of 4 (no wraparound) ``3 · (V / 4) / W_link``, the book's ``560 us``.
* **A switched fabric** (NVLink in a GPU host, DCN between TPU slices, the network between GPU hosts),
  ``m`` members each with ``W`` one way (gpus, "Intra-node collectives"): all-gather
  ``V · (m − 1) / (m · W)``, reduce-scatter ``b · (m − 1) / W``, all-reduce ``2 · V · (m − 1) / (m · W)``,
  all-to-all ``b · (m − 1) / (m · W)`` (= ``B · (N − 1) / (W · N²)`` for ``B = m · b``), permute ``b / W``.
* **A group across TPU slices** is two steps: inside each slice (ICI) and between the ``S`` slices (DCN) on
  ``1 / n`` of the data, ``n`` members per slice; the steps run one after the other, so their times add.
  Each DCN step has a latency (``t_dcn`` per ring step: ``S − 1`` for a gather or a scatter, twice that for
  a reduction, one for an all-to-all or a permute).
* **A group across GPU hosts** (gpus, "Cross-node collectives"): the levels run as one pipelined ring, so
  an all-gather or reduce-scatter takes the *larger* of the NVLink time and the network time
  ``max(B (D − 1) / (D · W_gpu), B (M − 1) / (M · W_node))``, an all-reduce twice that, and an all-to-all
  spanning ``M`` hosts ``B · (M − 1) / (M² · W_node)`` (the network term: the NVLink part is smaller);
  ``W_node`` is the host's egress, the NICs of its ``n`` members. Network steps have a latency ``t_net``.

A collective's estimate is its slowest group's. Every estimate is ``{"seconds", "bound_seconds",
"expected_seconds", "formula", "inputs", "fabric"}`` (``seconds`` = ``bound_seconds``, the contract's
field), or ``{"seconds": None, "why"}`` where the model has no figures. ``inputs.axes`` names the mesh axes
the collective runs along (as the collective says); the torus dimensions its groups span are
``inputs.torus``. A collective that runs in a loop carries ``repeat`` (the HLO reader's fact); its estimate
is per run and totals multiply (:func:`communication`).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from sharding_core.cost.context import CostContext
from sharding_core.cost.efficiency import PROFILES, FabricProfile, phases_of, profile_key
from sharding_core.hardware import GpuFigures, TpuFigures

FABRICS = ("ici", "dcn", "nvlink", "network", "cpu")  # "cpu": a calibrated profile's measurement on CPU devices
TORUS_AXES = ("x", "y", "z")
ON_CHIP = "on one chip: no ICI link is used (the model counts copies between a chip's cores as free)"
Profiles = Mapping[str, FabricProfile]


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
        """Links' worth of one-way bandwidth the axis gives a ring: k / (steps · stride)."""
        return self.members / (self.steps * self.stride) if self.steps else 0.0

    @property
    def ports(self) -> int:
        """Links a chip at the end of the axis has into the group: 2 around a ring, 1 at a line's end."""
        return 2 if self.wraparound else 1

    def json(self, axis: int) -> dict[str, Any]:
        name = TORUS_AXES[axis] if axis < len(TORUS_AXES) else str(axis)
        return {"torus_axis": name, "members": self.members, "wraparound": self.wraparound,
                "stride": self.stride, "steps": self.steps}  # fmt: skip


@dataclasses.dataclass(frozen=True)
class Part:
    """One fabric's share of a collective: its bandwidth term, its latency term (``steps`` of ``step_latency``)
    and what it is, for the expected time (:mod:`.efficiency` fits one profile per ``key``: an efficiency per
    operation ``kind``, a latency per phase and a size curve). ``ring_factor``: the bytes NCCL's ring moves
    over this fabric relative to the bound's (across GPU hosts the bound takes the book's hierarchical
    algorithm; NCCL's ring sends ``(N − 1) / N`` of the data through each host's NICs, not ``(M − 1) / M``)."""

    fabric: str  # "ici", "dcn", "nvlink", "network"
    bandwidth_seconds: float
    steps: int
    step_latency: float
    wraparound: bool = False  # ICI: every axis the group spans wraps
    kind: str = "all-gather"  # the operation, as KIND names it
    ring_factor: float = 1.0
    size: float = 0.0  # the per-rank buffer (bytes): what the expected time's size curve reads
    latency_steps: int = 1  # latency steps of the expected time (expected_steps)

    @property
    def latency_seconds(self) -> float:
        return self.steps * self.step_latency

    @property
    def seconds(self) -> float:
        """The bound: bandwidth- or latency-bound, whichever is larger (the book's max)."""
        return max(self.bandwidth_seconds, self.latency_seconds)

    @property
    def key(self) -> str:
        return profile_key(self.fabric, self.wraparound)

    @property
    def expected_bandwidth_seconds(self) -> float:
        return self.bandwidth_seconds * self.ring_factor

    def expected(self, profiles: Profiles) -> float:
        """The fitted latency (at least the bound's) plus the bandwidth term at the operation's fitted efficiency
        on the fabric's size curve (:class:`sharding_core.cost.efficiency.FabricProfile`)."""
        p = profiles[self.key]
        return p.term(self.kind, self.expected_bandwidth_seconds, self.size, self.latency_steps, self.latency_seconds)


@dataclasses.dataclass(frozen=True)
class Timing:
    """An ICI timing: the bound and its terms (kept for the formulas' unit tests and the estimate's inputs)."""

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


def _used(axes: Sequence[RingAxis]) -> list[RingAxis]:
    return [a for a in axes if a.members > 1]


def ring_time(
    volume: float, axes: Sequence[RingAxis], link_bandwidth: float, hop_latency: float, share: float = 1.0
) -> Timing:
    """All-gather of ``volume`` bytes over rings along ``axes``: the ring term, the corner chip's floor and the
    latency, the largest of them (see the module docstring)."""
    used = _used(axes)
    links = sum(a.links for a in used)
    hops = sum(a.steps * a.stride for a in used)
    ring = volume * share / (link_bandwidth * links) if links else 0.0
    chips = int(np.prod([a.members for a in used])) if used else 1
    ports = sum(a.ports for a in used)
    corner = volume * share * (chips - 1) / (chips * link_bandwidth * ports) if ports else 0.0
    bandwidth = max(ring, corner)
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
    """The bisection rule: ``V · max_a(k_a · s_a / w_a) / (4 · N · W_link)``, ``V = bytes × N`` (sharding, "Our
    final communication primitive: the AllToAll"); ``w_a`` = 2 links' worth with wraparound, 1 without."""
    used = _used(axes)
    hops = sum(a.steps * a.stride for a in used)
    latency = hops * t_hop
    if not used:
        return Timing(latency, 0.0, latency, 0.0, hops)
    volume = nbytes * group_size
    chips = int(np.prod([a.members for a in used]))
    worst = max(a.members * a.stride / a.ports for a in used)
    bandwidth = volume * share * worst / (4 * chips * w)
    return Timing(max(bandwidth, latency), bandwidth, latency, chips / worst, hops)


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


def switched_steps(kind: str, members: int) -> int:
    """Latency steps of a switched collective over ``members``: ``⌈log₂ m⌉`` per gather or scatter phase — a
    tree's depth, the fewest any algorithm needs (a ring takes ``m − 1``, but NCCL switches to trees where
    that matters) — twice for a reduction; one direct exchange for an all-to-all or a permute."""
    if members <= 1:
        return 0
    depth = max(1, math.ceil(math.log2(members)))
    if kind == "all-reduce":
        return 2 * depth
    if kind in ("all-gather", "reduce-scatter"):
        return depth
    return 1


def expected_steps(kind: str, ranks: int) -> int:
    """Latency steps of the expected time over a switched fabric of ``ranks``: per phase the fewer of a ring's
    ``ranks − 1`` and a tree's ``2⌈log₂ ranks⌉`` (NCCL picks the faster algorithm; its tuning model,
    ``src/graph/tuning.cc``, charges a ring ``nranks − 1`` latency steps per phase); one for a permute."""
    if ranks <= 1:
        return 0
    if kind == "permute":
        return 1
    return phases_of(kind) * min(ranks - 1, 2 * max(1, math.ceil(math.log2(ranks))))


def buffer_bytes(kind: str, nbytes: float, group_size: int) -> float:
    """The per-rank buffer a collective moves, as nccl-tests sizes it (what the size curve reads): a
    reduce-scatter's input (``group_size`` results), any other operation's bytes per device."""
    return nbytes * group_size if kind == "reduce-scatter" else nbytes


# How each op reads (ragged all-to-all: its output buffer is the upper bound; a broadcast moves V like
# an all-gather).
KIND = {
    "all-gather": "all-gather",
    "reduce-scatter": "reduce-scatter",
    "all-reduce": "all-reduce",
    "all-to-all": "all-to-all",
    "ragged-all-to-all": "all-to-all",
    "collective-broadcast": "all-gather",
    "collective-permute": "permute",
}

ICI_FORMULAS = {
    "all-gather": (
        "max(V · share / (W_link · ΣL), V · share · (N − 1) / (N · W_link · C), hops · t_hop), V = result bytes"
    ),
    "reduce-scatter": (
        "max(V · share / (W_link · ΣL), V · share · (N − 1) / (N · W_link · C), hops · t_hop), V = result bytes × N"
    ),
    "all-reduce": (
        "2 · max(V · share / (W_link · ΣL), V · share · (N − 1) / (N · W_link · C), hops · t_hop), V = bytes "
        "(a reduce-scatter then an all-gather)"
    ),
    "all-to-all": (
        "max(V · share · max_a(k_a · s_a / w_a) / (4 · N · W_link), hops · t_hop), V = bytes × N "
        "(the book's bisection rule; w_a = 2 with wraparound, 1 without)"
    ),
    "permute": (
        "max(bytes · load / W_link, h · t_hop), pairs routed on shortest paths (x, then y, then z): "
        "load = pairs on the busiest directed link, h = the longest path in hops"
    ),
}
RING_NOTE = (
    "per torus axis: k chips s links apart, steps = ⌊k/2⌋ with wraparound, k − 1 without, L = k / (steps · s), "
    "hops = Σ steps · s; C = Σ (2 with wraparound, 1 without): the links of the worst-placed chip"
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


def outer_seconds(kind: str, nbytes: float, n: float, islands: float, group_size: float, w: float) -> float:
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


def switched_seconds(kind: str, nbytes: float, members: float, w: float) -> float:
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


def finish(
    parts: Sequence[Part], combine: str, formula: str, inputs: dict[str, Any], fabric: str, profiles: Profiles
) -> dict[str, Any]:
    """The estimate of ``parts`` run one after the other (``combine == "sum"``) or pipelined (``"max"``): the
    bound from the spec sheet and the expected time at the fitted efficiencies."""
    join = sum if combine == "sum" else max
    bound = float(join(p.seconds for p in parts)) if parts else 0.0
    expected = float(join(p.expected(profiles) for p in parts)) if parts else 0.0
    inputs = dict(inputs)
    inputs["terms"] = [
        {"key": p.key, "kind": p.kind, "bandwidth_seconds": p.bandwidth_seconds,
         "expected_bandwidth_seconds": p.expected_bandwidth_seconds, "size": p.size, "steps": p.steps,
         "expected_steps": p.latency_steps, "step_latency": p.step_latency,
         "latency_seconds": p.latency_seconds, "seconds": p.seconds, "expected_seconds": p.expected(profiles)}
        for p in parts
    ]  # fmt: skip
    inputs["combine"] = combine
    if parts:
        inputs["efficiency"] = {p.key: profiles[p.key].efficiency_of(p.kind) for p in parts}
        inputs["expected_latency"] = {p.key: max(profiles[p.key].step_latency * p.latency_steps, p.latency_seconds)
                                      for p in parts}  # fmt: skip
        inputs["profiles"] = {p.key: profiles[p.key].source for p in parts}
        if len(parts) > 1:
            inputs["parts"] = {p.fabric: p.seconds for p in parts}
    return {
        "seconds": bound,
        "bound_seconds": bound,
        "expected_seconds": expected,
        "formula": formula,
        "inputs": inputs,
        "fabric": fabric,
    }


def _effective_bytes(c: Mapping[str, Any]) -> tuple[float | None, str | None]:
    """The bytes an estimate uses: the program's, or — where XLA's CPU compiler widened a bf16 reduction to
    f32 (``widened``, the HLO reader's fact) — the bytes at the width the program asked for."""
    widened = c.get("widened")
    if widened and widened.get("bytes") is not None:
        return float(widened["bytes"]), str(widened.get("dtype") or "bf16")
    nbytes = c.get("bytes")
    return (float(nbytes), None) if nbytes is not None else (None, None)


def estimate_one(c: Mapping[str, Any], ctx: CostContext | None, profiles: Profiles | None = None) -> dict[str, Any]:
    """The estimate of one collective as the HLO reader gives it (``op``, ``bytes``, ``groups``, ``pairs``,
    ``axes``) on ``ctx`` (the public one, by device set and size: :func:`sharding_core.estimate_collective`)."""
    if ctx is None:
        return none("no device set to estimate on")
    if ctx.why is not None or ctx.hardware is None:
        return none(ctx.why or "no hardware figures")
    profiles = profiles if profiles is not None else PROFILES
    nbytes, narrowed = _effective_bytes(c)
    op = str(c.get("op"))
    kind = KIND.get(op)
    if nbytes is None or kind is None:
        return none(f"no model for {op!r} of unknown size" if kind else f"no model for {op!r}")
    if kind == "permute":
        pairs = c.get("pairs") or []
        est = _permute(nbytes, pairs, ctx, profiles) if pairs else _zero("no source → target pairs", ctx)
    else:
        est = _by_groups(kind, op, nbytes, c.get("groups") or [], ctx, profiles)
    if est.get("seconds") is not None:
        est["inputs"]["axes"] = list(c.get("axes") or [])
        if narrowed:
            est["inputs"]["bytes_as_compiled"] = c.get("bytes")
            est["inputs"]["bytes_note"] = (
                f"XLA's CPU compiler widened this {narrowed} reduction to f32; estimated at {narrowed} width"
            )
    return est


def _by_groups(
    kind: str, op: str, nbytes: float, groups: Sequence[Sequence[int]], ctx: CostContext, profiles: Profiles
) -> dict[str, Any]:
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
        est = _groups(kind, op, nbytes, rows, ctx, profiles)
        if est["seconds"] is None:
            return est
        if best is None or est["seconds"] > best["seconds"]:
            best = est
    assert best is not None
    best["inputs"]["groups"] = len(groups)
    return best


def _zero(why: str, ctx: CostContext) -> dict[str, Any]:
    fabric = "ici" if ctx.platform == "tpu" else "nvlink"
    return {"seconds": 0.0, "bound_seconds": 0.0, "expected_seconds": 0.0, "formula": why,
            "inputs": {"hardware": _title(ctx)}, "fabric": fabric}  # fmt: skip


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


def _groups(
    kind: str, op: str, nbytes: float, rows: np.ndarray, ctx: CostContext, profiles: Profiles
) -> dict[str, Any]:
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
        if isinstance(ctx.hardware, TpuFigures):
            est = _tpu_group(kind, op, nbytes, size, islands, chips, axes, ctx, profiles)
        else:
            est = _gpu_group(kind, op, nbytes, size, islands, ctx, profiles)
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


def _tpu_group(
    kind: str,
    op: str,
    nbytes: float,
    size: int,
    islands: int,
    chips: int,
    axes: list[tuple[int, RingAxis]],
    ctx: CostContext,
    profiles: Profiles,
) -> dict[str, Any]:
    """One group of ``size`` devices on ``chips`` chips in ``islands`` slices, spanning ``axes`` of the torus:
    ICI inside each slice, then DCN across the slices; the steps add up."""
    hw = ctx.hardware
    assert isinstance(hw, TpuFigures)
    inputs: dict[str, Any] = {"op": op, "bytes": nbytes, "group_size": size, "hardware": hw.title}
    w, t_hop = hw.ici_link_bandwidth.value, hw.hop_latency.value
    if w is None or t_hop is None:
        return none(f"no ICI link bandwidth for {hw.title}: {hw.ici_link_bandwidth.note}")
    members = max(1, round(size / islands))
    inner_bytes = _inner_bytes(kind, nbytes, islands)
    parts: list[Part] = []
    if axes:
        share = max(1.0, hw.devices_per_chip * chips / size)
        rings = [ring for _, ring in axes]
        t = _ici_timing(kind, inner_bytes, members, rings, w, t_hop, share)
        inputs.update(
            volume_bytes=_volume(kind, inner_bytes, members),
            torus=[ring.json(a) for a, ring in axes],
            links=t.links,
            link_bandwidth=w,
            share=share,
            hops=t.hops,
            hop_latency=t_hop,
            bound=t.bound,
        )
        steps = t.hops * (2 if kind == "all-reduce" else 1)
        parts.append(
            Part(
                "ici",
                t.bandwidth_seconds,
                steps,
                t_hop,
                all(r.wraparound for r in rings),
                kind,
                size=buffer_bytes(kind, nbytes, size),
                latency_steps=phases_of(kind),
            )
        )
        inner_formula = f"{ICI_FORMULAS[kind]}; {RING_NOTE}"
    else:
        inner_formula = ON_CHIP if members > 1 else "one device per slice: nothing moves inside it"
    if islands == 1:
        return finish(parts, "sum", inner_formula, inputs, "ici", profiles)
    w_out = hw.dcn_bandwidth.value
    t_dcn = hw.dcn_latency.value
    if w_out is None or t_dcn is None:
        return none(f"no DCN bandwidth for {hw.title}: {hw.dcn_bandwidth.note}")
    w_dev = w_out / hw.devices_per_chip
    n = size / islands
    outer = outer_seconds(kind, nbytes, n, islands, size, w_dev)
    parts.append(
        Part(
            "dcn",
            outer,
            switched_steps(kind, islands),
            t_dcn,
            kind=kind,
            size=buffer_bytes(kind, nbytes, size),
            latency_steps=expected_steps(kind, islands),
        )
    )
    inputs.update(islands=islands, per_island=n, network_bandwidth=w_dev, dcn_step_latency=t_dcn)
    formula = (
        f"inside each of the slices (ici): {inner_formula}; plus across S = {islands} slices (dcn, n = {n:g} per "
        f"slice, W = DCN bandwidth per device): {OUTER_FORMULAS[kind]} + steps · t_dcn"
    )
    return finish(parts, "sum", formula, inputs, "dcn", profiles)


def _gpu_group(
    kind: str, op: str, nbytes: float, size: int, islands: int, ctx: CostContext, profiles: Profiles
) -> dict[str, Any]:
    """One group of ``size`` GPUs in ``islands`` hosts: NVLink inside a host, the network between hosts; the
    levels are pipelined, so the slower one sets the time (the book's max of the levels)."""
    hw = ctx.hardware
    assert isinstance(hw, GpuFigures)
    inputs: dict[str, Any] = {"op": op, "bytes": nbytes, "group_size": size, "hardware": hw.title}
    members = max(1, round(size / islands))
    parts: list[Part] = []
    inner_formula = "one GPU per host: nothing moves inside it"
    if members > 1:
        w_in = hw.nvlink_bandwidth.value
        if w_in is None:
            return none(f"no NVLink bandwidth for {hw.title}: {hw.nvlink_bandwidth.note}")
        if islands > 1 and kind == "all-to-all":
            # each GPU sends (members − 1) / size of its bytes to the GPUs of its own host over NVLink
            inner = nbytes * (members - 1) / (size * w_in)
        else:
            inner = switched_seconds(kind, _inner_bytes(kind, nbytes, islands), members, w_in)
        # no spec sheet gives an NVLink latency: the bound has none; the expected time fits one per step
        parts.append(
            Part(
                "nvlink",
                inner,
                switched_steps(kind, members),
                0.0,
                kind=kind,
                size=buffer_bytes(kind, nbytes, size),
                latency_steps=expected_steps(kind, members),
            )
        )
        inner_formula = SWITCHED_FORMULAS[kind].replace("W", "W_nvlink")
        inputs.update(members=members, nvlink_bandwidth=w_in)
    if islands == 1:
        inputs["volume_bytes"] = _volume(kind, nbytes, members)
        return finish(parts, "max", inner_formula, inputs, "nvlink", profiles)
    w_out, t_net = hw.network_bandwidth.value, hw.network_latency.value
    if w_out is None or t_net is None:
        return none(f"no network bandwidth for {hw.title}: {hw.network_bandwidth.note}")
    n = size / islands
    outer = outer_seconds(kind, nbytes, n, islands, size, w_out)
    ring = (size - 1) / size / ((islands - 1) / islands) if kind != "all-to-all" else 1.0
    parts.append(
        Part(
            "network",
            outer,
            switched_steps(kind, islands),
            t_net,
            kind=kind,
            ring_factor=ring,
            size=buffer_bytes(kind, nbytes, size),
            latency_steps=expected_steps(kind, size),
        )
    )
    inputs.update(islands=islands, per_island=n, network_bandwidth=w_out, network_step_latency=t_net)
    if kind == "all-to-all":
        formula = (
            f"spanning M = {islands} hosts: max(NVLink b · (n − 1) / (N · W_nvlink), network "
            f"B · (M − 1) / (M² · W_node)), B = b · N, W_node = n · W_nic, n = {n:g} per host (the book's "
            "cross-node AllToAll)"
        )
    else:
        scale = "2 · " if kind == "all-reduce" else ""
        formula = (
            f"{scale}max(inside each host (nvlink): {inner_formula}, across M = {islands} hosts (network, n = "
            f"{n:g} per host, W = NIC bandwidth per GPU): {OUTER_FORMULAS[kind]} + steps · t_net): the levels "
            "pipeline, the slower sets the time (the book's cross-node collectives)"
        )
    return finish(parts, "max", formula, inputs, "network", profiles)


def _permute(nbytes: float, pairs: Sequence[Sequence[int]], ctx: CostContext, profiles: Profiles) -> dict[str, Any]:
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
        parts: list[Part] = []
        hops, load = 0, 0
        if inside.any():
            hops, load = link_load(ctx.coords[src[inside]], ctx.coords[tgt[inside]], ctx.sizes, ctx.wraps)
            if hops:
                t = ici_permute(nbytes, load, hops, w, t_hop)
                parts.append(
                    Part("ici", t.bandwidth_seconds, hops, t_hop, bool(ctx.wraps.all()), "permute", size=nbytes)
                )
        inputs.update(hops=hops, busiest_link=load, link_bandwidth=w, hop_latency=t_hop)
        if not crossing.any():
            formula = ICI_FORMULAS["permute"] if hops else ON_CHIP
            return finish(parts, "max", formula, inputs, "ici", profiles)
        w_out, t_dcn = hw.dcn_bandwidth.value, hw.dcn_latency.value
        if w_out is None or t_dcn is None:
            return none(f"no DCN bandwidth for {hw.title}: {hw.dcn_bandwidth.note}")
        w_dev = w_out / hw.devices_per_chip
        sends = int(np.bincount(ctx.chip[src[crossing]]).max())  # a chip's NIC carries its cores' sends
        parts.append(Part("dcn", nbytes * sends / (w_dev * hw.devices_per_chip), 1, t_dcn, kind="permute", size=nbytes))
        inputs.update(network_bandwidth=w_dev, dcn_step_latency=t_dcn, sends_per_chip=sends)
        formula = (
            f"the slower of the pairs: ICI {ICI_FORMULAS['permute']}; across slices (DCN) "
            "b · sends per chip / W_dcn per chip + t_dcn"
        )
        return finish(parts, "max", formula, inputs, "dcn", profiles)
    assert isinstance(hw, GpuFigures)
    across = bool(crossing.any())
    w_fig = hw.network_bandwidth if across else hw.nvlink_bandwidth
    if w_fig.value is None:
        return none(f"no {'network' if across else 'NVLink'} bandwidth for {hw.title}: {w_fig.note}")
    fabric = "network" if across else "nvlink"
    latency = (hw.network_latency.value or 0.0) if across else 0.0
    inputs.update(bandwidth=w_fig.value)
    part = Part(fabric, switched_permute(nbytes, w_fig.value), 1, latency, kind="permute", size=nbytes)
    return finish([part], "max", f"b / W_{fabric}" + (" + t_net" if across else ""), inputs, fabric, profiles)


def estimate_dcn_step(
    step: Mapping[str, Any], ctx: CostContext | None, profiles: Profiles | None = None
) -> dict[str, Any]:
    """The estimate of a multi-slice program's cross-slice (DCN) step, as libtpu wrote it
    (:mod:`sharding_core.hlo.megascale`: ``op``, ``bytes`` per device, global ``groups`` or ``pairs``)."""
    if ctx is None or ctx.why is not None or not isinstance(ctx.hardware, TpuFigures):
        return none(ctx.why if ctx is not None and ctx.why else "DCN steps belong to multi-slice TPU sets")
    profiles = profiles if profiles is not None else PROFILES
    hw = ctx.hardware
    nbytes = step.get("bytes")
    op = str(step.get("op"))
    kind = KIND.get(op)
    w, t_dcn = hw.dcn_bandwidth.value, hw.dcn_latency.value
    if w is None or t_dcn is None:
        return none(f"no DCN bandwidth for {hw.title}: {hw.dcn_bandwidth.note}")
    if nbytes is None or kind is None:
        return none(f"no model for a {op!r} step of unknown size")
    w_dev = w / hw.devices_per_chip
    inputs: dict[str, Any] = {"op": op, "bytes": nbytes, "network_bandwidth": w_dev, "dcn_step_latency": t_dcn,
                              "hardware": hw.title}  # fmt: skip
    if kind == "permute":
        pairs = step.get("pairs") or []
        rows = ctx.rows_of([list(p) for p in pairs]) if pairs else None
        if rows is None or not len(rows):
            return none("the step names no source → target pairs in the device set")
        sends = int(np.bincount(ctx.chip[rows[:, 0]]).max())
        inputs.update(pairs=len(pairs), sends_per_chip=sends)
        part = Part(
            "dcn", float(nbytes) * sends / (w_dev * hw.devices_per_chip), 1, t_dcn, kind="permute", size=float(nbytes)
        )
        formula = "b · sends per chip / W_dcn per chip + t_dcn (each pair one DCN transfer)"
        return finish([part], "sum", formula, inputs, "dcn", profiles)
    groups = step.get("groups") or []
    rows = ctx.rows_of(groups) if groups and len({len(g) for g in groups}) == 1 else None
    if rows is None:
        return none("the step's groups are not devices of the set (or of unequal sizes)")
    size = rows.shape[1]
    islands = int((np.diff(np.sort(ctx.island[rows], axis=1), axis=1) != 0).sum(axis=1).max()) + 1
    n = size / islands
    seconds = outer_seconds(kind, float(nbytes), n, islands, size, w_dev)
    inputs.update(islands=islands, per_island=n, group_size=size, groups=len(groups))
    part = Part(
        "dcn",
        seconds,
        switched_steps(kind, islands),
        t_dcn,
        kind=kind,
        size=buffer_bytes(kind, float(nbytes), size),
        latency_steps=expected_steps(kind, islands),
    )
    formula = f"across S = {islands} slices (DCN, n = {n:g} per slice): {OUTER_FORMULAS[kind]} + steps · t_dcn"
    return finish([part], "sum", formula, inputs, "dcn", profiles)


def repeat_of(c: Mapping[str, Any]) -> int:
    """How many times a collective runs per program run (its loops' trip counts multiplied; 1 outside loops)."""
    r = c.get("repeat")
    return int(r) if isinstance(r, int) and r > 0 else 1


def total_seconds(collectives: Sequence[Mapping[str, Any]], key: str = "seconds") -> tuple[float, int]:
    """The sum of the collectives' estimates (``key``: ``seconds`` — the bound — or ``expected_seconds``),
    each times its repeat count, and how many had none."""
    total = 0.0
    missing = 0
    for c in collectives:
        est = c.get("estimate") or {}
        s = est.get(key, est.get("seconds"))
        if s is None:
            missing += 1
        else:
            total += float(s) * repeat_of(c)
    return total, missing


def communication(collectives: Sequence[Mapping[str, Any]], program: str | None = None) -> dict[str, Any]:
    """Totals of a program's collectives: how many (and how many runs, loops counted), the bytes of their
    results per device per program run, their estimates summed with their repeat counts (``seconds`` =
    ``bound_seconds``, and ``expected_seconds``; None when none has one), how many have none, and which
    program they are of."""
    seconds, missing = total_seconds(collectives)
    expected, _ = total_seconds(collectives, "expected_seconds")
    some = len(collectives) > missing or not collectives
    return {
        "count": len(collectives),
        "runs": sum(repeat_of(c) for c in collectives),
        "bytes": sum(int(c.get("bytes") or 0) * repeat_of(c) for c in collectives),
        "seconds": seconds if some else None,
        "bound_seconds": seconds if some else None,
        "expected_seconds": expected if some else None,
        "without_estimate": missing,
        "program": program,
    }
