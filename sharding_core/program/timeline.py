"""Memory over program order, compile-only: what is live at each point of the compiled schedule, from the two files
XLA writes with ``xla_dump_to`` beside the buffer assignment the plan already reads.

* ``*-live-range.txt`` (XLA's ``HloLiveRange``): the schedule flattened into one sequence of instructions and each
  value's live range ``start-end`` over it, both ends included;
* ``*-buffer-assignment.txt``: each value's allocation, size (padded: the layout's tiling included) and offset.

The live bytes at point ``t``: every allocation that lives through the whole call (parameters, outputs, constants:
XLA's indefinite allocations) plus, in each temporary allocation, the bytes the values live at ``t`` occupy (the
union of their ``[offset, offset + size)``: a value updated in place shares its operand's bytes and counts once).
Tuples' pointer tables are not counted, as XLA's heap simulator does not count them.

How this meets ``Compiled.memory_analysis().peak_memory_in_bytes`` (measured; tests/test_memory_timeline.py):

* XLA's GPU compiler: equal to the byte (its peak is the heap simulator's over the same sequential schedule).
* CPU: XLA's CPU client computes its peak from a buffer-assignment proto that carries no heap-simulator trace,
  so its figure is the indefinite allocations alone (arguments and outputs; temporaries are not counted). The
  timeline's ``resident_bytes`` equals XLA's figure; its own peak adds the temporaries live there.
* TPU: libtpu's figure is its own, counted after passes that follow the assignment it dumps (the same reason its
  ``temp_size_in_bytes`` differs from the dump's). It counts values memory-space assignment put on chip (colour 1)
  as well, so the timeline counts them too; the two are equal for many programs and a few MiB apart for others.

Where the timeline's own peak differs from XLA's, ``note`` says so and why; ``peak_bytes`` is always XLA's figure.
"""

from __future__ import annotations

import dataclasses
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from sharding_core.hlo.text import ELEMENT_BITS
from sharding_core.program.memory import instruction_sources

MAX_POINTS = 1200  # points kept for the chart: each kept point is the highest of the ones it stands for
MAX_AT_PEAK = 60  # buffers listed at the peak, largest first

_ALLOCATION = re.compile(r"^allocation (\d+): size (\d+)(.*):$")
_VALUE = re.compile(
    r"^ value: <\d+ (?P<name>[\w.\-]+)(?P<index>\{[\d,]*\})?[^>]*> \(size=(?P<size>\d+),offset=(?P<offset>\d+)\): "
    r"(?P<shape>.*)$"
)
_COLOR = re.compile(r"\bcolor (\d+)")
_PARAMETER = re.compile(r"parameter (\d+)(?:, shape \|[^|]*\| at ShapeIndex \{([\d,]*)\})?")
_RANGE = re.compile(r"^\s+(?P<key>[\w.\-]+\{[\d,]*\}):(?P<start>\d+)-(?P<end>\d+)$")
_MAX = re.compile(r"^HloLiveRange \(max (\d+)\)")
_SEQUENCE = re.compile(r"^\s+(\d+):(\S+)$")
_ARRAY = re.compile(r"^(?P<dtype>[a-z]\w*)\[(?P<dims>[\d,]*)\]")

DTYPES = {
    "pred": "bool",
    "s8": "int8",
    "u8": "uint8",
    "s16": "int16",
    "u16": "uint16",
    "s32": "int32",
    "u32": "uint32",
    "s64": "int64",
    "u64": "uint64",
    "f16": "float16",
    "bf16": "bfloat16",
    "f32": "float32",
    "f64": "float64",
    "c64": "complex64",
    "c128": "complex128",
}
ON_CHIP = {"tpu": (0, 1)}  # colours counted per platform (the default memory space elsewhere)
HOST_COLOR = 5  # XLA's host memory space (Layout::kHostMemorySpace): values a program offloads (pinned_host)


@dataclasses.dataclass(frozen=True)
class Allocation:
    index: int
    size: int
    color: int
    kind: str  # "parameter", "output", "constant", "thread-local", "temporary"
    parameter: int | None  # the entry parameter's number
    shape_index: tuple[int, ...]  # the parameter's tuple index (XLA tuples many parameters into one)
    shape: str | None


@dataclasses.dataclass(frozen=True)
class Value:
    name: str  # the instruction
    key: str  # name{index}, as the live ranges name it
    allocation: int
    size: int
    offset: int
    shape: str


def array_shape(text: str) -> tuple[str, list[int]] | None:
    """``f32[2,1024]{1,0:T(8,128)}`` -> ``("f32", [2, 1024])``; None for a tuple or a token."""
    m = _ARRAY.match(text.strip())
    if m is None:
        return None
    return m.group("dtype"), [int(d) for d in m.group("dims").split(",") if d]


def logical_bytes(text: str) -> int:
    """The bytes a value's elements take without the layout's padding (its shape's elements times their width)."""
    parsed = array_shape(text)
    if parsed is None:
        return 0
    dtype, dims = parsed
    n = 1
    for d in dims:
        n *= d
    bits = ELEMENT_BITS.get(dtype) or (8 if dtype.startswith("f8") else 32)
    return (n * bits + 7) // 8


def _kind(flags: str) -> str:
    if "thread-local" in flags:
        return "thread-local"
    if "parameter" in flags:
        return "parameter"
    if "maybe-live-out" in flags or "output shape" in flags:
        return "output"
    return "constant" if "constant" in flags else "temporary"


def read_assignment(text: str) -> tuple[dict[int, Allocation], list[Value]]:
    """XLA's ``BufferAssignment`` text: its allocations and their values (a value listed twice is kept twice)."""
    allocations: dict[int, Allocation] = {}
    values: list[Value] = []
    current: int | None = None
    for line in text.splitlines():
        a = _ALLOCATION.match(line)
        if a:
            flags = a.group(3)
            color = _COLOR.search(flags)
            param = _PARAMETER.search(flags)
            index = tuple(int(i) for i in (param.group(2) or "").split(",") if i) if param else ()
            shape = re.search(r"shape (?:is )?\|([^|]*)\|", flags)
            current = int(a.group(1))
            allocations[current] = Allocation(
                current,
                int(a.group(2)),
                int(color.group(1)) if color else 0,
                _kind(flags),
                int(param.group(1)) if param else None,
                index,
                shape.group(1) if shape else None,
            )
            continue
        v = _VALUE.match(line)
        if v is not None and current is not None:
            name = v.group("name")
            values.append(
                Value(
                    name,
                    name + (v.group("index") or "{}"),
                    current,
                    int(v.group("size")),
                    int(v.group("offset")),
                    v.group("shape"),
                )
            )
    return allocations, values


def read_live_ranges(text: str) -> tuple[list[str], dict[str, tuple[int, int]]]:
    """XLA's ``HloLiveRange`` text: the instruction sequence and each value's ``(start, end)`` (ends included)."""
    sequence: list[str] = []
    ranges: dict[str, tuple[int, int]] = {}
    for line in text.splitlines():
        if line.lstrip().startswith("Live ranges at"):
            break  # XLA's own diagnostic of one moment follows
        r = _RANGE.match(line)
        if r:
            ranges[r.group("key")] = (int(r.group("start")), int(r.group("end")))
            continue
        s = _SEQUENCE.match(line)
        if s:
            sequence.append(s.group(2))
    return sequence, ranges


def _resident(allocations: Mapping[int, Allocation], colors: Iterable[int]) -> list[Allocation]:
    wanted = set(colors)
    return [a for a in allocations.values() if a.kind in ("parameter", "output", "constant") and a.color in wanted]


def live_bytes(
    allocations: Mapping[int, Allocation],
    values: Iterable[Value],
    ranges: Mapping[str, tuple[int, int]],
    length: int,
    colors: Iterable[int] = (0,),
) -> tuple[int, list[int], dict[int, list[Value]]]:
    """The resident bytes (allocations live through the call) and the live bytes at each of ``length`` points, by an
    event sweep: a temporary allocation's live bytes are the bytes its live values' spans cover together. Also
    each point's starting values, for what is live at the peak."""
    wanted = set(colors)
    resident = sum(a.size for a in _resident(allocations, wanted))
    starts: dict[int, list[Value]] = {}
    ends: dict[int, list[Value]] = {}
    for v in values:
        a = allocations[v.allocation]
        span = ranges.get(v.key)
        if span is None or a.kind != "temporary" or a.color not in wanted or v.shape.startswith("("):
            continue
        start, end = span
        starts.setdefault(start, []).append(v)
        ends.setdefault(min(end, length - 1) + 1, []).append(v)
    spans: dict[int, Counter[tuple[int, int]]] = {}
    held: dict[int, int] = {}
    total = resident
    points: list[int] = []
    for t in range(length):
        changed: set[int] = set()
        for v, sign in [*((v, -1) for v in ends.get(t, ())), *((v, 1) for v in starts.get(t, ()))]:
            live = spans.setdefault(v.allocation, Counter())
            live[(v.offset, v.size)] += sign
            if live[(v.offset, v.size)] == 0:
                del live[(v.offset, v.size)]
            changed.add(v.allocation)
        for index in changed:
            now = union_bytes(spans[index])
            total += now - held.get(index, 0)
            held[index] = now
        points.append(total)
    return resident, points, starts


def union_bytes(spans: Iterable[tuple[int, int]]) -> int:
    """The bytes ``(offset, size)`` spans cover together (an in-place update, or a value that is a slice of another,
    shares bytes with it: counted once)."""
    total = 0
    end = -1
    for offset, size in sorted(spans):
        if offset + size <= end:
            continue
        total += offset + size - max(offset, end)
        end = offset + size
    return total


def live_at(values: Iterable[Value], ranges: Mapping[str, tuple[int, int]], t: int) -> list[Value]:
    """The values live at point ``t`` (each distinct span of an allocation once: the first value to hold it)."""
    out: dict[tuple[int, int, int], Value] = {}
    for v in values:
        span = ranges.get(v.key)
        if span is not None and span[0] <= t <= span[1] and not v.shape.startswith("("):
            out.setdefault((v.allocation, v.offset, v.size), v)
    return list(out.values())


def downsample(points: list[int], peak_index: int, limit: int = MAX_POINTS) -> list[list[int]]:
    """At most ``limit`` ``[index, bytes]`` points: each bucket's highest, and the peak itself always."""
    if len(points) <= limit:
        return [[i, b] for i, b in enumerate(points)]
    step = -(-len(points) // limit)
    out: list[list[int]] = []
    for lo in range(0, len(points), step):
        hi = min(len(points), lo + step)
        i = peak_index if lo <= peak_index < hi else max(range(lo, hi), key=points.__getitem__)
        out.append([i, points[i]])
    return out


@dataclasses.dataclass(frozen=True)
class Timeline:
    """What the dumps say: the schedule's length, live bytes at each point, the peak and what is live there."""

    sequence: tuple[str, ...]
    points: tuple[int, ...]
    resident_bytes: int
    peak_index: int
    allocations: dict[int, Allocation]
    at_peak: tuple[Value, ...]
    colors: tuple[int, ...]
    host_points: tuple[int, ...] = ()  # live bytes in host memory at each point, where the program offloads
    host_resident_bytes: int = 0

    @property
    def peak_bytes(self) -> int:
        return self.points[self.peak_index] if self.points else self.resident_bytes


def read_timeline(dump_dir: Path, platform: str = "") -> Timeline | None:
    """The timeline of the program XLA dumped in ``dump_dir`` (None when XLA wrote no live ranges)."""
    ranges_files = sorted(p for p in dump_dir.glob("*after_optimizations-live-range.txt"))
    assignment = sorted(p for p in dump_dir.glob("*after_optimizations-buffer-assignment.txt"))
    if not ranges_files or not assignment:
        return None
    allocations, values = read_assignment(assignment[-1].read_text(errors="replace"))
    sequence, ranges = read_live_ranges(ranges_files[-1].read_text(errors="replace"))
    length = max([len(sequence), *(e + 1 for _, e in ranges.values())]) if ranges else len(sequence)
    colors = ON_CHIP.get(platform, (0,))
    resident, points, _ = live_bytes(allocations, values, ranges, max(1, length), colors)
    peak_index = max(range(len(points)), key=points.__getitem__) if points else 0
    at_peak = [
        v
        for v in live_at(values, ranges, peak_index)
        if allocations[v.allocation].kind == "temporary" and allocations[v.allocation].color in colors
    ]
    host_resident, host_points = 0, list[int]()
    if any(a.color == HOST_COLOR for a in allocations.values()):
        host_resident, host_points, _ = live_bytes(allocations, values, ranges, max(1, length), (HOST_COLOR,))
    return Timeline(tuple(sequence), tuple(points), resident, peak_index, allocations, tuple(at_peak), colors,
                    tuple(host_points), host_resident)  # fmt: skip


def facts(timeline: Timeline) -> dict[str, Any]:
    """The timeline as plain data (the report's ``memory_timeline`` before its buffers are named)."""
    return {
        "points": downsample(list(timeline.points), timeline.peak_index),
        "length": len(timeline.points),
        "timeline_peak_bytes": timeline.peak_bytes,
        "peak_index": timeline.peak_index,
        "resident_bytes": timeline.resident_bytes,
        "peak_instruction": timeline.sequence[timeline.peak_index]
        if timeline.peak_index < len(timeline.sequence)
        else None,
        "colors": list(timeline.colors),
        **({"host": _host(timeline)} if timeline.host_points else {}),
    }


def _host(timeline: Timeline) -> dict[str, Any]:
    """Host memory over the same points, where the program offloads (memory kind ``pinned_host``): XLA's host
    memory space, its resident bytes (host arguments and outputs) and its highest point."""
    points = list(timeline.host_points)
    peak = max(range(len(points)), key=points.__getitem__)
    return {"points": downsample(points, peak), "peak_bytes": points[peak], "peak_index": peak,
            "resident_bytes": timeline.host_resident_bytes, "memory_space": HOST_COLOR}  # fmt: skip


# ---- naming what is live at the peak ---------------------------------------------------------------------

CPU_NOTE = (
    "XLA's CPU client computes its peak from a buffer-assignment proto that carries no heap-simulator trace: its "
    "figure (peak_bytes) is the allocations live through the whole call (arguments, outputs, constants: "
    "resident_bytes here) and leaves the temporaries out. The timeline adds the temporaries live at each point"
)
TPU_NOTE = (
    "libtpu's peak (peak_bytes) is its own, counted after passes that follow the buffer assignment it dumps; the "
    "timeline reads the dumped assignment (HBM and the on-chip values libtpu's figure counts), so its highest point "
    "can differ from libtpu's by what those passes change"
)
REFUSED_NOTE = "XLA refused the program for memory: the timeline is the buffer assignment it dumped before refusing"
SOURCE = "XLA's live ranges (HloLiveRange) and buffer assignment, written with xla_dump_to; no hardware"
GROUPS = (
    "parameters",
    "optimizer state",
    "inputs",
    "outputs",
    "gradients",
    "activations kept for backward",
    "temporaries",
    "constants",
)
_OPTIMIZER = re.compile(r"(^|[/.])(opt|opt_state|optimizer|mu|nu|count|momentum|adam\w*)([/.]|$)", re.I)
_INPUTS = re.compile(r"(^|[/.])(batch|data|tokens|targets|inputs?|x|labels)([/.]|$)", re.I)


def argument_what(leaf: Mapping[str, Any]) -> str:
    """A parameter allocation's group, from the pytree leaf it holds: optimizer state (Adam's moments and count,
    any ``opt_state``), inputs (a batch: integers, or named so) or parameters."""
    path = f"{leaf.get('group', '')}/{leaf.get('path', '')}/{leaf.get('name', '')}"
    if _OPTIMIZER.search(path):
        return "optimizer state"
    if _INPUTS.search(path) or str(leaf.get("dtype", "")).startswith(("int", "uint", "bool")):
        return "inputs"
    return "parameters"


def _temporary_what(op: str, elements: int, shard_elements: set[int], backward_peak: bool, kept: bool) -> str:
    if "transpose(" in op:
        return "gradients" if elements in shard_elements else "temporaries"
    return "activations kept for backward" if backward_peak and kept else "temporaries"


def _entry(size: int, shape: str | None, what: str, name: str, **more: Any) -> dict[str, Any]:
    parsed = array_shape(shape or "")
    dtype, dims = parsed if parsed is not None else ("", [])
    logical = logical_bytes(shape or "")
    return {
        "bytes": size,
        "logical_bytes": logical,
        "shape": dims,
        "dtype": DTYPES.get(dtype, dtype),
        "what": what,
        "name": name,
        "source": more.get("source"),
        "sharding": more.get("sharding"),
        "op": more.get("op"),
        "padded": bool(logical and size > 2 * logical),
        "memory_space": more.get("memory_space", "default"),
    }


def _short_source(source: str | None) -> str | None:
    return source.split(" (", 1)[0] if source else None


def resident_entries(timeline: Timeline, leaves: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The allocations live through the call, each named by the argument leaf it holds (an entry parameter) or as an
    output or constant."""
    out = []
    for a in _resident(timeline.allocations, timeline.colors):
        if a.kind == "parameter" and a.parameter is not None:
            i = a.shape_index[0] if a.shape_index and a.parameter == 0 and len(leaves) > 1 else a.parameter
            leaf = leaves[i] if i < len(leaves) else {}
            out.append(
                _entry(
                    a.size,
                    a.shape,
                    argument_what(leaf) if leaf else "parameters",
                    str(leaf.get("name") or f"parameter {a.parameter}"),
                    sharding=leaf.get("spec"),
                )
            )
        else:
            out.append(_entry(a.size, a.shape, "outputs" if a.kind == "output" else "constants", f"{a.kind} {a.index}"))
    return out


def temporary_entries(timeline: Timeline, hlo: str, leaves: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The temporaries live at the peak, each with the op and source line that made it and its group."""
    names = {v.name for v in timeline.at_peak}
    peak_name = timeline.sequence[timeline.peak_index] if timeline.peak_index < len(timeline.sequence) else ""
    sources = instruction_sources(hlo, names | {peak_name})
    backward = "transpose(" in str((sources.get(peak_name) or {}).get("op") or "")
    shard_elements = {int(leaf.get("elements") or 0) for leaf in leaves}
    out = []
    for v in timeline.at_peak:
        src = sources.get(v.name) or {}
        op = str(src.get("op") or "")
        parsed = array_shape(v.shape)
        elements = 1
        for d in parsed[1] if parsed else []:
            elements *= d
        color = timeline.allocations[v.allocation].color
        what = _temporary_what(op, elements, shard_elements, backward, True)
        out.append(
            _entry(
                v.size,
                v.shape,
                what,
                v.name if v.key.endswith("{}") else v.key,  # a tuple element: while.115{3}
                source=_short_source(src.get("source")),
                op=op or None,
                memory_space="default" if color == 0 else f"color {color}",
            )
        )
    return out


def _note(platform: str, xla: int, timeline: Timeline) -> str:
    if platform == "cpu" and xla == timeline.resident_bytes:
        return CPU_NOTE
    return TPU_NOTE if platform == "tpu" else "XLA's peak differs from the timeline read from its dumps"


def memory_timeline(
    timeline: Timeline,
    stats: Mapping[str, int] | None,
    leaves: list[dict[str, Any]],
    hlo: str,
    platform: str = "",
) -> dict[str, Any]:
    """The contract's ``memory_timeline``: points over program order, XLA's peak, and the buffers live at the
    timeline's peak named and grouped (largest first), every buffer padded past twice its logical size flagged."""
    entries = resident_entries(timeline, leaves) + temporary_entries(timeline, hlo, leaves)
    entries.sort(key=lambda e: -int(e["bytes"]))
    groups: dict[str, int] = {}
    for e in entries:
        groups[e["what"]] = groups.get(e["what"], 0) + int(e["bytes"])
    xla = (stats or {}).get("peak_memory_in_bytes")
    out = facts(timeline)
    note = None
    if xla is None:
        note = REFUSED_NOTE
    elif int(xla) != timeline.peak_bytes:
        note = _note(platform, int(xla), timeline)
    out.update(
        peak_bytes=int(xla) if xla is not None else timeline.peak_bytes,
        at_peak=entries[:MAX_AT_PEAK],
        at_peak_total=len(entries),
        groups=[{"what": w, "bytes": groups[w]} for w in GROUPS if w in groups],
        padded=[
            {"name": e["name"], "bytes": e["bytes"], "logical_bytes": e["logical_bytes"]}
            for e in entries
            if e["padded"]
        ][:MAX_AT_PEAK],
        note=note,
        source=SOURCE,
    )
    return out
