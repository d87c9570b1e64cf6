"""The analytic estimate that orders a search's compiles: bytes per device from the rules and the shapes,
communication per step from the scaling book's formulas, each collective timed by the cost model.

"How to Scale Your Model" (Austin et al., 2025), Part 5, *How to Parallelize a Transformer for Training*:

* data parallelism: the gradients all-reduced once a step over the replicas (a weight not sharded over a
  data-like axis that splits the batch);
* FSDP (ZeRO-3): each weight all-gathered before its use, forward and backward, and its gradient
  reduce-scattered: ``2 AllGather + 1 ReduceScatter`` of the weight over the axes that shard it;
* tensor (Megatron) parallelism: per layer, the activations ``[tokens, d_model]`` all-reduced twice forward and
  twice backward over ``tensor``;
* expert parallelism: per layer, tokens all-to-all to their experts and back, forward and backward;
* sequence parallelism: per layer, keys and values all-gathered over ``sequence`` forward, reduce-scattered
  backward.

Each collective is timed by :func:`sharding_core.estimate_collective` on the candidate's own device groups (its
fabric: ICI, DCN across slices, NVLink within a GPU host, the network across hosts). Nothing here is ranked: it
only decides which candidates to compile first; every ranked figure is the compiled program's.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from sharding_core.cost.estimate import estimate_collective
from sharding_core.devices import DeviceSet
from sharding_core.mesh import MeshSpec, build_mesh
from sharding_core.searching.space import BATCH, EMBED, LENGTH, Grid, Model, shard_bytes
from sharding_core.snapshot.rules import Rule, logical_to_mesh_axes

ACTIVATION_BYTES = 2
"""Activations are taken as bfloat16 (the compute dtype of mixed-precision training)."""
GATHERED = ("data", "fsdp", "sequence")
"""Axes a weight is gathered over before it is used (ZeRO-3); ``tensor`` and ``expert`` split the work instead."""


@dataclasses.dataclass(frozen=True)
class Term:
    op: str
    axes: tuple[str, ...]
    bytes: int
    count: int
    seconds: float  # the cost model's expected time of all ``count`` runs


@dataclasses.dataclass(frozen=True)
class Estimate:
    argument_bytes: int
    terms: tuple[Term, ...]

    @property
    def seconds(self) -> float:
        return sum(t.seconds for t in self.terms)

    def json(self) -> dict[str, Any]:
        return {
            "argument_bytes": self.argument_bytes,
            "communication_seconds": self.seconds,
            "terms": [
                {"op": t.op, "axes": list(t.axes), "bytes": t.bytes, "count": t.count, "seconds": t.seconds}
                for t in self.terms
            ],
        }


def groups(devset: DeviceSet, layout: Grid, axes: Sequence[str]) -> list[list[int]]:
    """The device ids of each group that varies along ``axes`` of the layout's mesh (as a collective over them)."""
    order = "hybrid" if any(d > 1 for d in layout.dcn) else "make_mesh"
    spec = MeshSpec(layout.shape, layout.names, ("auto",) * len(layout.shape), order, None, None,
                    layout.dcn if order == "hybrid" else None)  # fmt: skip
    ids = np.vectorize(lambda d: int(d.id))(build_mesh(devset, spec).devices)
    inner = [layout.names.index(a) for a in axes]
    outer = [i for i in range(ids.ndim) if i not in inner]
    moved = np.transpose(ids, outer + inner).reshape(-1, math.prod(layout.size(a) for a in axes))
    return [[int(i) for i in row] for row in moved]


def estimate(devices: str, devset: DeviceSet, model: Model, rules: Sequence[Rule], layout: Grid) -> Estimate:
    """The candidate's argument bytes per device and its communication per step (see the module docstring)."""
    wanted: dict[tuple[str, tuple[str, ...]], list[int]] = {}
    for op, axes, nbytes, count in _weights(model, rules, layout) + _activations(model, rules, layout):
        if nbytes > 0 and axes:
            key = (op, axes)
            got = wanted.setdefault(key, [0, count])
            got[0] += nbytes
            got[1] = max(got[1], count)
    terms = []
    for (op, axes), (nbytes, count) in sorted(wanted.items()):
        per = max(1, nbytes // count)
        est = estimate_collective(devices, op, per, groups=groups(devset, layout, axes), slices=devset.slices)
        seconds = float(est.get("expected_seconds") or est.get("seconds") or 0.0)
        terms.append(Term(op, axes, nbytes, count, seconds * count))
    return Estimate(shard_bytes(model, rules, layout), tuple(terms))


def _axes(entry: Any) -> tuple[str, ...]:
    return tuple(entry) if isinstance(entry, tuple) else (entry,) if entry is not None else ()


def _weights(model: Model, rules: Sequence[Rule], layout: Grid) -> list[tuple[str, tuple[str, ...], int, int]]:
    """FSDP's gathers and reduce-scatters, and data parallelism's all-reduce, of every weight."""
    batch = _batch_axes(model, rules, layout)
    layers = model.size_of(("layers",), 1)
    out = []
    for leaf in model.leaves:
        if not leaf.param or all(n is None for n in leaf.names):
            continue
        spec = logical_to_mesh_axes(leaf.names, rules)
        on = [a for e in spec for a in _axes(e)]
        split = math.prod(layout.size(a) for a in on if a not in GATHERED)
        gathered = tuple(a for a in on if a in GATHERED)
        full = leaf.itemsize * math.prod(leaf.shape) // split  # the weight as a matmul uses it, per device
        count = layers if "layers" in leaf.names else 1
        shard = full // math.prod(layout.size(a) for a in gathered)
        if gathered:  # an all-gather's bytes are its result's, a reduce-scatter's its result's (the shard)
            out.append(("all-gather", gathered, 2 * full, 2 * count))
            out.append(("reduce-scatter", gathered, shard, count))
        replicas = tuple(a for a in batch if a not in on)
        if replicas:
            out.append(("all-reduce", replicas, shard, 1))
    return out


def _batch_axes(model: Model, rules: Sequence[Rule], layout: Grid) -> tuple[str, ...]:
    for leaf in model.leaves:
        if not leaf.weight:
            spec = logical_to_mesh_axes(leaf.names, rules)
            return tuple(a for i, n in enumerate(leaf.names) if n in BATCH or n in LENGTH for a in _axes(spec[i]))
    return ()


def _activations(model: Model, rules: Sequence[Rule], layout: Grid) -> list[tuple[str, tuple[str, ...], int, int]]:
    """Tensor, expert and sequence parallelism's per-layer collectives of the activations."""
    data = [leaf for leaf in model.leaves if not leaf.weight]
    if not data:
        return []
    tokens = math.prod(data[0].shape[:2]) if len(data[0].shape) >= 2 else data[0].shape[0]
    split = math.prod(layout.size(a) for a in _batch_axes(model, rules, layout))
    act = tokens // max(1, split) * model.size_of(EMBED, 1) * ACTIVATION_BYTES
    layers = model.size_of(("layers",), 1)
    used = {a for r in rules for a in _axes(r[1])}
    out: list[tuple[str, tuple[str, ...], int, int]] = []
    if layout.size("tensor") > 1 and "tensor" in used:
        out.append(("all-reduce", ("tensor",), 4 * layers * act, 4 * layers))
    if layout.size("expert") > 1 and "expert" in used:
        out.append(("all-to-all", ("expert",), 4 * layers * act, 4 * layers))
    if layout.size("sequence") > 1 and "sequence" in used:
        out.append(("all-gather", ("sequence",), 2 * layers * act, 2 * layers))
    return out
