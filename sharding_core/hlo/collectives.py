"""A compiled program's collectives as data: the one serialiser the kernel lab and ``inspect_jit`` share.

:func:`read_collectives` takes optimized HLO text, the executable's device assignment (device ids by
partition id, :func:`device_assignment`) and the mesh, and gives one JSON-ready dict per collective
instruction::

    {"op", "name", "is_async", "shape", "bytes", "groups", "pairs", "axes", "exact_axes", "axes_text",
     "replica_groups", "dimensions", "source", "estimate"}

``groups`` are device ids (a collective-permute's rings or chains in send order, its ``pairs`` the
source -> target pairs); ``axes`` the mesh axes the groups run along (:mod:`sharding_core.hlo.axes`).
Every spelling of replica groups XLA prints is read by :mod:`sharding_core.hlo.text`. ``estimate`` is
the collective's time on the device set's hardware (:func:`sharding_core.cost.collectives.estimate_collective`:
``{"seconds", "formula", "inputs", "fabric"}``, or ``{"seconds": None, "why"}``), for the cost context
passed in.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sharding_core.cost.collectives import estimate_collective, estimate_dcn_step
from sharding_core.cost.context import CostContext
from sharding_core.hlo.axes import AxesReport, group_axes, mesh_coords, pair_axes
from sharding_core.hlo.text import Collective, HloParseError, parse_collectives

MAX_REPLICA_GROUPS_CHARS = 2000
"""The ``replica_groups`` text as XLA printed it is kept up to this many characters."""

NO_MESH = "no mesh (the program's shardings name no mesh axes)"


def device_assignment(compiled: Any) -> list[Any]:
    """The executable's devices by partition id: what the HLO's device numbers index.

    JAX compiles with the device assignment of the program's shardings (every sharding of one
    program has the same one), so it is read from them; it is global in a multi-process program.
    A program with no shardings falls back to the runtime executable's devices.
    """
    import jax

    for sharding in jax.tree.leaves((compiled.input_shardings, compiled.output_shardings)):
        assignment = getattr(sharding, "_device_assignment", None)
        if assignment:
            return list(assignment)
    runtime = compiled.runtime_executable()
    devices = list(runtime.local_devices()) if runtime is not None and hasattr(runtime, "local_devices") else []
    if devices:
        return devices
    raise HloParseError("could not read the compiled executable's device assignment")


def map_to_devices(collective: Collective, assignment: Sequence[int]) -> tuple[list[list[int]], list[list[int]] | None]:
    """Groups (and permute pairs) with partition ids replaced by the device ids at those positions."""

    def dev(p: int) -> int:
        if not 0 <= p < len(assignment):
            raise HloParseError(f"partition {p} is outside the device assignment of {len(assignment)}")
        return int(assignment[p])

    groups = [[dev(p) for p in g] for g in collective.groups]
    pairs = [[dev(a), dev(b)] for a, b in collective.pairs] if collective.pairs is not None else None
    return groups, pairs


def collective_json(
    c: Collective,
    groups: list[list[int]],
    pairs: list[list[int]] | None,
    axes: AxesReport | None,
    hardware: CostContext | None = None,
) -> dict[str, Any]:
    """One collective with its device groups and its estimate: the shape every view and the snapshot
    format read."""
    out = {
        "op": c.op,
        "name": c.name,
        "is_async": c.is_async,
        "shape": c.shape_text,
        "bytes": c.bytes,
        "groups": groups,
        "pairs": pairs,
        "axes": list(axes.axes) if axes is not None else None,
        "exact_axes": axes.exact if axes is not None else None,
        "axes_text": axes.text if axes is not None else NO_MESH,
        "replica_groups": c.replica_groups[:MAX_REPLICA_GROUPS_CHARS],
        "dimensions": list(c.dimensions) if c.dimensions is not None else None,
        "source": c.source,
    }
    out["estimate"] = estimate_collective(out, hardware)
    return out


def axes_of(
    groups: list[list[int]],
    pairs: list[list[int]] | None,
    coords: dict[int, tuple[int, ...]],
    axis_names: Sequence[str],
) -> AxesReport:
    """The mesh axes a collective runs along: where a permute's pairs move data, else its groups' axes."""
    axes = pair_axes(pairs, coords, axis_names) if pairs is not None else None
    if axes is None or not axes.axes:
        axes = group_axes(groups, coords, axis_names)
    return axes


def read_collectives(
    hlo_text: str,
    assignments: Sequence[Sequence[int]],
    id_grid: Any | None,
    axis_names: Sequence[str],
    hardware: CostContext | None = None,
) -> list[dict[str, Any]]:
    """Every collective of a compiled HLO module, its partitions mapped to device ids.

    ``assignments``: the device ids by partition id of each copy of the program that runs — one
    for an ordinary program; one per slice for libtpu's multi-slice compile, which compiles one
    slice's program that every slice runs on its own devices (each collective then lists its
    groups in every slice). ``id_grid`` (the mesh's device ids, nested in mesh order, as
    ``Mesh.device_ids`` gives them) and ``axis_names`` name the axes each collective runs along;
    without a mesh ``axes`` is None. ``hardware``: the device set's cost context, for each collective's
    ``estimate`` (without one, the estimate says so).
    """
    coords = mesh_coords(id_grid) if id_grid is not None else None
    out = []
    for c in parse_collectives(hlo_text):
        groups: list[list[int]] = []
        pairs: list[list[int]] | None = None
        for assignment in assignments:
            g, p = map_to_devices(c, assignment)
            groups.extend(g)
            if p is not None:
                pairs = [*(pairs or []), *p]
        axes = axes_of(groups, pairs, coords, axis_names) if coords is not None else None
        out.append(collective_json(c, groups, pairs, axes, hardware))
    return out


DCN_NOTE = (
    "libtpu compiles one slice's program: its collectives run over ICI inside each slice (listed for every "
    "slice), and what crosses slices goes over DCN as megascale host transfers that name no devices. The "
    "cross-slice steps here are the CPU run's global groups split by slice: the devices at the same place "
    "in each slice exchange data over DCN."
)


def cross_slice_steps(
    collectives: Sequence[dict[str, Any]], slice_of: dict[int, int], hardware: CostContext | None = None
) -> list[dict[str, Any]]:
    """The DCN steps of a multi-slice program, from collectives with global groups (the CPU run's).

    A global group that spans slices is carried out as a step inside each slice (ICI) and a step
    between slices: the k-th member of the group in each slice exchanges with the k-th member in
    the others. Each such collective gives one entry with those cross-slice groups (``groups``),
    the global ones it came from (``global_groups``), ``fabric`` ``"dcn"`` and its DCN ``estimate``.
    """
    out: list[dict[str, Any]] = []
    for c in collectives:
        rows = c["pairs"] if c["op"] == "collective-permute" and c["pairs"] else c["groups"]
        crossing = [g for g in rows if len({slice_of.get(d, 0) for d in g}) > 1]
        if not crossing:
            continue
        steps: list[list[int]] = []
        for group in crossing:
            parts: dict[int, list[int]] = {}
            for d in group:
                parts.setdefault(slice_of.get(d, 0), []).append(d)
            by_slice = [parts[s] for s in sorted(parts)]
            if len({len(p) for p in by_slice}) == 1:
                steps.extend([p[k] for p in by_slice] for k in range(len(by_slice[0])))
            else:
                steps.append(list(group))  # uneven parts: the whole group crosses
        step = {
            "op": c["op"],
            "name": c["name"],
            "fabric": "dcn",
            "bytes": c["bytes"],
            "groups": steps,
            "global_groups": crossing,
            "slices": sorted({slice_of.get(d, 0) for g in crossing for d in g}),
            "axes": c["axes"],
            "axes_text": c["axes_text"],
        }
        step["estimate"] = estimate_dcn_step(step, hardware)
        out.append(step)
    return out
