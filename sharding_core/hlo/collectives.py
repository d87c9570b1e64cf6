"""A compiled program's collectives as data: the one serialiser the kernel lab and ``inspect_jit`` share.

:func:`read_collectives` takes optimized HLO text, the executable's device assignment (device ids by
partition id, :func:`device_assignment`) and the mesh, and gives one JSON-ready dict per collective
instruction — facts, never estimates::

    {"op", "name", "is_async", "shape", "bytes", "groups", "pairs", "axes", "exact_axes", "axes_text",
     "replica_groups", "dimensions", "source", "repeat", "loops", "widened"}

``groups`` are device ids (a collective-permute's rings or chains in send order, its ``pairs`` the
source -> target pairs); ``axes`` the mesh axes the groups run along (:mod:`sharding_core.hlo.axes`).
Every spelling of replica groups XLA prints is read by :mod:`sharding_core.hlo.text`. ``repeat`` is how many
times the collective runs per program run (the ``known_trip_count`` of the ``while`` loops around it,
multiplied; :mod:`sharding_core.hlo.program`), ``loops`` those loops outermost first. ``widened`` is set
where XLA promoted a 16-bit reduction to 32 bits (its ``AllReducePromotion`` pass renames the reducer
``*_promoted``; the CPU compiler promotes bf16 all-reduces and reduce-scatters to f32, and its float
normalization wraps other bf16 collectives in ``convert``s to f32 and back): ``{"dtype": "bf16", "bytes": N}``
with the bytes at the program's own width, what a TPU or GPU moves.

The cost model (:mod:`sharding_core.cost`) adds each collective's ``estimate`` when a result is read, from
the one hardware table: nothing here depends on it, so stored results never freeze old figures.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sharding_core.hlo.axes import AxesReport, group_axes, mesh_coords, pair_axes
from sharding_core.hlo.megascale import megascale_steps
from sharding_core.hlo.program import ProgramFacts, program_facts
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


# XLA's AllReducePromotion pairs (xla/service/cpu/cpu_compiler.cc: {BF16, F32}; the GPU compiler: {U16, U32},
# {S16, S32}): the promoted type -> the type the program asked for.
_PROMOTED_FROM = {"f32": "bf16", "u32": "u16", "s32": "s16"}


def widened(c: Collective, facts: ProgramFacts) -> dict[str, Any] | None:
    """``{"dtype", "bytes"}`` when XLA widened this collective from a 16-bit type, else None: a reduction whose
    reducer ``AllReducePromotion`` renamed ``*_promoted``, or any collective whose operand is only a
    ``convert`` from bf16/f16 (:meth:`ProgramFacts.widened_from`, the CPU compiler's float normalization)."""
    if len(c.shapes) != 1:
        return None
    narrow = facts.widened_from.get(c.name)
    reducer = facts.reducers.get(c.name)
    if narrow is None and reducer is not None and reducer.endswith("_promoted"):
        narrow = _PROMOTED_FROM.get(c.shapes[0].dtype)
    if narrow is None:
        return None
    return {"dtype": narrow, "bytes": c.bytes // 2}


def collective_json(
    c: Collective,
    groups: list[list[int]],
    pairs: list[list[int]] | None,
    axes: AxesReport | None,
    facts: ProgramFacts | None = None,
) -> dict[str, Any]:
    """One collective with its device groups and loop facts: the shape every view and the snapshot
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
        "repeat": facts.runs_of(c.computation) if facts is not None else 1,
        "loops": facts.enclosing_loops(c.computation) if facts is not None else [],
        "widened": widened(c, facts) if facts is not None else None,
    }
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
    facts: ProgramFacts | None = None,
) -> list[dict[str, Any]]:
    """Every collective of a compiled HLO module, its partitions mapped to device ids.

    ``assignments``: the device ids by partition id of each copy of the program that runs — one
    for an ordinary program; one per slice for libtpu's multi-slice compile, which compiles one
    slice's program that every slice runs on its own devices (each collective then lists its
    groups in every slice). ``id_grid`` (the mesh's device ids, nested in mesh order, as
    ``Mesh.device_ids`` gives them) and ``axis_names`` name the axes each collective runs along;
    without a mesh ``axes`` is None. ``facts``: the module's :func:`~sharding_core.hlo.program.program_facts`
    when the caller has them already (read here otherwise).
    """
    facts = facts if facts is not None else program_facts(hlo_text)
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
        out.append(collective_json(c, groups, pairs, axes, facts))
    return out


DCN_NOTE = (
    "libtpu compiles one slice's program: its collectives run over ICI inside each slice (listed for every "
    "slice), and what crosses slices goes over DCN as megascale host transfers; each names its devices "
    "(_xla_megascale_target) and its collective (_xla_megascale_transfer_type), read here as the DCN steps."
)


def dcn_steps(
    hlo_text: str, id_grid: Any | None, axis_names: Sequence[str], facts: ProgramFacts | None = None
) -> list[dict[str, Any]]:
    """The cross-slice steps of a libtpu multi-slice module (:func:`sharding_core.hlo.megascale.megascale_steps`)
    with their mesh axes and loop facts."""
    facts = facts if facts is not None else program_facts(hlo_text)
    coords = mesh_coords(id_grid) if id_grid is not None else None
    out = []
    for step in megascale_steps(hlo_text):
        axes = axes_of(step["groups"], step["pairs"], coords, axis_names) if coords is not None else None
        comp = step.pop("computation")
        step.update(
            axes=list(axes.axes) if axes is not None else None,
            axes_text=axes.text if axes is not None else NO_MESH,
            repeat=facts.runs_of(comp),
            loops=facts.enclosing_loops(comp),
        )
        out.append(step)
    return out
