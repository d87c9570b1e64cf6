"""What a compiled program is, read once into one frozen :class:`Report` — facts in XLA's own names, no figures.

Every client reads a program the same way (the kernel lab's CPU runs and its TPU and GPU compiles, reshards,
``inspect_jit``, plans, why's candidate fixes), so the same program gives the same report whichever way it was
compiled, and :mod:`sharding_core.cost` turns a report into figures (estimates, roofline, step time) where a
result is read. The JSON (:meth:`Report.json`, the ``program`` of kernel results, reshards and snapshots)::

    {"format": 1,
     "target": {"devices", "platform", "device_kind", "compile_only", "num_devices", "hosts", "slices",
                "topology", "chips_per_host", "source"},
     "partitioner": "shardy" | "gspmd",
     "memory": {every Compiled.memory_analysis() field by its XLA name: "argument_size_in_bytes", ...,
                "peak_memory_in_bytes", "host_..."} | null,
     "work": {"flops", "transcendentals", "bytes_accessed" (loops counted), "flops_loops_once",
              "bytes_accessed_loops_once", "flops_xla", "bytes_accessed_xla" (XLA's cost_analysis: each loop body
              once), "matmul_flops_by_dtype", "matmul_traffic_bytes", "loops", "unknown_trip_counts", "note"} | null,
     "collectives": [the HLO reader's facts, each with "repeat" and "loops": sharding_core.hlo.collectives],
     "dcn": [multi-slice: the cross-slice (megascale) steps, each with "repeat"],
     "device_assignment": [device ids by partition id],
     "origins": Shardy's sharding origins (sharding_core.hlo.origins) | null,
     "timings": {"lower_seconds", "compile_seconds"},
     "compiler_log": [XLA's warnings while compiling],
     "temporaries": XLA's buffer assignment's largest temporaries | null,
     "refusal": XLA's out-of-memory refusal as fields | null}

``memory`` and ``work`` are null when XLA refused the program (``refusal``); ``origins`` and ``temporaries`` when
the compile was not asked to write them (:class:`sharding_core.program.compile.Options`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

from sharding_core.compat import cost_analysis
from sharding_core.hlo import origins
from sharding_core.hlo.collectives import dcn_steps, device_assignment, read_collectives
from sharding_core.hlo.program import ProgramFacts, program_facts
from sharding_core.hlo.schedule import schedule_of
from sharding_core.hlo.text import HloParseError
from sharding_core.program import memory as mem
from sharding_core.program import values as values_mod
from sharding_core.program.compile import Program, Signature
from sharding_core.program.targets import target_of
from sharding_core.program.timeline import Timeline

FORMAT = 1
"""The report's JSON shape; :func:`sharding_core.program.upgrade` reads stored results made before it existed."""

WORK_NOTE = (
    "flops and bytes per device and step with every loop body counted as often as it runs: XLA's cost_analysis "
    "(which counts each body once: flops_xla, bytes_accessed_xla) plus each computation's further runs as the loop "
    "reader counts them (flops_loops_once: the reader's own count with each body once); without XLA's figures, the "
    "reader's count"
)
LOCAL = "this process's devices"


def own_id(device: Any) -> int:
    return int(device.id)


@dataclasses.dataclass(frozen=True)
class Reading:
    """How a program's devices are named in its report: the mesh (its device ids nested in mesh order, as
    ``Mesh.device_ids`` gives them, and its axis names) and each device's id (the kernel lab's CPU devices stand in
    for simulated ones: their ids are mapped back). ``input_names`` word the origins (``input 0 (x)``)."""

    id_grid: Any | None
    axis_names: tuple[str, ...]
    device_id: Callable[[Any], int] = own_id
    input_names: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class Report:
    """A compiled program's facts (see the module docstring for each field)."""

    target: dict[str, Any]
    partitioner: str
    memory: dict[str, int] | None
    work: dict[str, Any] | None
    collectives: tuple[dict[str, Any], ...]
    dcn: tuple[dict[str, Any], ...]
    device_assignment: tuple[int, ...]
    origins: dict[str, Any] | None
    timings: dict[str, float]
    compiler_log: tuple[str, ...]
    temporaries: dict[str, Any] | None
    refusal: dict[str, Any] | None
    signature: Signature | None = dataclasses.field(default=None, compare=False)  # not in the JSON
    # the compiled schedule (sharding_core.hlo.schedule: async spans, loops, work between them): a plan keeps it in
    # its facts for the step model; not in the report's JSON
    schedule: dict[str, Any] | None = dataclasses.field(default=None, compare=False)
    # every value's sharding (sharding_core.program.values), when the compile dumped the partitioner's input; the
    # contract's top-level ``values`` of a plan, capture or kernel run (not in the report's JSON)
    values: tuple[dict[str, Any], ...] | None = dataclasses.field(default=None, compare=False)
    timeline: Timeline | None = dataclasses.field(default=None, compare=False)  # named where it is read

    @property
    def peak(self) -> int | None:
        """XLA's ``peak_memory_in_bytes`` (None without a memory analysis)."""
        return (self.memory or {}).get("peak_memory_in_bytes")

    def collectives_json(self) -> list[dict[str, Any]]:
        """The collectives as new dicts (a container adds its ``line``, ``why`` and ``estimate`` to these)."""
        return [dict(c) for c in self.collectives]

    def json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "target": dict(self.target),
            "partitioner": self.partitioner,
            "memory": dict(self.memory) if self.memory is not None else None,
            "work": dict(self.work) if self.work is not None else None,
            "collectives": self.collectives_json(),
            "dcn": [dict(s) for s in self.dcn],
            "device_assignment": list(self.device_assignment),
            "origins": self.origins,
            "timings": dict(self.timings),
            "compiler_log": list(self.compiler_log),
            "temporaries": self.temporaries,
            "refusal": self.refusal,
        }


def partitioner() -> str:
    """Which SPMD partitioner JAX runs: Shardy (``jax_use_shardy_partitioner``) or GSPMD."""
    import jax

    return "shardy" if bool(getattr(jax.config, "jax_use_shardy_partitioner", False)) else "gspmd"


def read_report(program: Program, reading: Reading) -> Report:
    """Reads ``program`` into its :class:`Report` (device ids and mesh axes as ``reading`` names them)."""
    devices = device_assignment(program.executable) if program.executable is not None else program_devices(program)
    ids = tuple(reading.device_id(d) for d in devices)
    facts, unread = _facts(program.hlo)
    hlo = program.hlo or ""
    slices = _slice_assignments(devices, reading.device_id)
    compiled = (program.executable is not None or program.early) and bool(hlo)
    collectives = read_collectives(hlo, slices, reading.id_grid, reading.axis_names, facts) if compiled else []
    dcn = dcn_steps(hlo, reading.id_grid, reading.axis_names, facts) if compiled and len(slices) > 1 else []
    work = work_facts(program.executable, facts) if compiled else None  # early: the reader's counts, no XLA's
    if work is not None and unread is not None:
        work["note"] = unread
    dump = program.shardy
    origin_report = None
    if dump is not None and dump.mlir:
        origin_report = origins.report_json(origins.parse_origins(dump.mlir, reading.input_names))
    return Report(
        target=describe_target(devices),
        partitioner=dump.partitioner if dump is not None else partitioner(),
        memory=mem.memory_stats(program.executable) if program.executable is not None else None,
        work=work,
        collectives=tuple(collectives),
        dcn=tuple(dcn),
        device_assignment=ids,
        origins=origin_report,
        timings=program.timings,
        compiler_log=program.log,
        temporaries=program.temporaries,
        refusal=program.refusal,
        signature=program.signature(),
        schedule=schedule_of(facts) if facts is not None and compiled else None,
        values=_values(program.partitioner_input, reading, devices),
        timeline=program.timeline,
    )


def _values(text: str | None, reading: Reading, devices: Sequence[Any]) -> tuple[dict[str, Any], ...] | None:
    """Every value's sharding, read from the module entering the partitioner, its specs on the reading's mesh."""
    if not text:
        return None
    grid = values_mod.partition_grid(reading.id_grid, [reading.device_id(d) for d in devices])
    try:
        return tuple(values_mod.read_values(text, grid, reading.axis_names if grid is not None else ())["values"])
    except (HloParseError, ValueError, KeyError, IndexError):
        return None


def describe_target(devices: Sequence[Any]) -> dict[str, Any]:
    """What the program was compiled for: the device set a compile-only device belongs to
    (:meth:`sharding_core.program.targets.Target.describe`), else the devices themselves."""
    target = target_of(devices[0]) if devices else None
    if target is not None:
        out = target.describe()
        if target.dropped_fields:
            out["dropped_fields"] = list(target.dropped_fields)
        return out
    first = devices[0] if devices else None
    return {
        "devices": "local",
        "platform": str(getattr(first, "platform", "")),
        "device_kind": str(getattr(first, "device_kind", "")),
        "compile_only": False,
        "num_devices": len(devices),
        "hosts": len({int(getattr(d, "process_index", 0) or 0) for d in devices}) or 1,
        "slices": len({_slice(d) for d in devices}) or 1,
        "topology": None,
        "chips_per_host": None,
        "source": LOCAL,
    }


def program_devices(program: Program) -> list[Any]:
    """The devices the program's arguments are sharded over, in first-seen order (a program XLA refused has no
    executable to ask)."""
    import jax

    seen: dict[int, Any] = {}
    for leaf in jax.tree.leaves((program.args, dict(program.kwargs))):
        sharding = getattr(leaf, "sharding", None)
        mesh = getattr(sharding, "mesh", None)
        devs = getattr(mesh, "devices", None)
        flat = list(devs.flat) if devs is not None else list(getattr(sharding, "_device_assignment", None) or [])
        for d in flat:
            seen.setdefault(id(d), d)
        if seen:
            break
    return list(seen.values())


def _slice(device: Any) -> int:
    return int(getattr(device, "slice_index", 0) or 0)


def _slice_assignments(devices: Sequence[Any], device_id: Callable[[Any], int]) -> list[list[int]]:
    """The device ids by partition id of each copy of the program that runs: one, or one per slice (libtpu compiles
    one slice's program; partition p of slice s is the p-th device of slice s in the assignment)."""
    slices = sorted({_slice(d) for d in devices})
    if len(slices) <= 1:
        return [[device_id(d) for d in devices]]
    return [[device_id(d) for d in devices if _slice(d) == s] for s in slices]


def _facts(hlo: str | None) -> tuple[ProgramFacts | None, str | None]:
    """The loop reader's facts, read now (an HLO spelling the reader does not know is said here, not later)."""
    if not hlo:
        return None, None
    try:
        facts = program_facts(hlo)
        facts.work  # noqa: B018 - read now: an HLO spelling the reader does not know is said here
    except (HloParseError, ValueError, KeyError, IndexError) as e:
        return None, f"the loop reader could not read this HLO ({str(e)[:200]}): no loop-corrected figures"
    return facts, None


def _xla_cost(compiled: Any) -> dict[str, Any]:
    try:
        return dict(cost_analysis(compiled))
    except Exception:  # noqa: BLE001 - some backends answer with an error instead of nothing
        return {}


def work_facts(compiled: Any, facts: ProgramFacts | None) -> dict[str, Any]:
    """The program's work per device and step: XLA's ``cost_analysis`` (each loop body once) corrected by the loop
    reader (:meth:`sharding_core.hlo.program.ProgramFacts.corrected`), with the reader's own counts, the matmul
    traffic and the loops. XLA's GPU compile-only executables have no cost analysis: the reader's counts stand."""
    xla = _xla_cost(compiled)
    flops_xla, bytes_xla = xla.get("flops"), xla.get("bytes accessed")
    out: dict[str, Any] = {
        "flops": None,
        "transcendentals": None,
        "bytes_accessed": None,
        "flops_loops_once": None,
        "bytes_accessed_loops_once": None,
        "flops_xla": float(flops_xla) if flops_xla is not None else None,
        "bytes_accessed_xla": float(bytes_xla) if bytes_xla is not None else None,
        "matmul_flops_by_dtype": {},
        "matmul_traffic_bytes": None,
        "loops": [],
        "unknown_trip_counts": [],
        "note": WORK_NOTE,
    }
    if facts is None:
        return out
    w = facts.work
    loops = facts.json()
    out.update(
        flops=facts.corrected(out["flops_xla"]),
        transcendentals=facts.corrected(xla.get("transcendentals"), "transcendentals"),
        bytes_accessed=facts.corrected(out["bytes_accessed_xla"], "bytes_accessed"),
        flops_loops_once=w.flops_once,
        bytes_accessed_loops_once=w.bytes_once,
        matmul_flops_by_dtype=dict(w.matmul_flops),
        matmul_traffic_bytes=w.matmul_traffic,
        loops=loops["loops"],
        unknown_trip_counts=loops["unknown_trip_counts"],
    )
    return out
