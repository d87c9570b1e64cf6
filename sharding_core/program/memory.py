"""A compiled program's memory per device: XLA's figures exactly, what they are made of, and refusals as data.

* :func:`memory_stats` — every field of ``Compiled.memory_analysis()`` as XLA reports it (peak included).
* :func:`argument_breakdown` — the arguments' bytes per device by pytree leaf (each leaf's shard, from
  ``Sharding.shard_shape``) and by group: an argument, and inside it each attribute of a NamedTuple or
  dataclass on the way to the leaf (``args/1/mu``: Adam's first moments; ``args/0/params``).
* :func:`buffer_report` — the largest temporary buffers of XLA's buffer assignment (the
  ``*buffer-assignment.txt`` XLA writes with ``xla_dump_to``), each with the instruction that makes it,
  its JAX op and the source line (the HLO's ``stack_frame_id`` tables).
* :func:`refusal` — XLA's ``RESOURCE_EXHAUSTED`` compile error read into fields: needed, available,
  over by, what (temporaries, arguments...), the largest allocations when XLA lists them, and what to change.

XLA prints sizes with ``tsl::strings::HumanReadableNumBytes``: ``G`` is GiB (1024-based).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from sharding_core.devices import TPU_GENERATIONS
from sharding_core.hlo.module import parse_module
from sharding_core.units import fmt_bytes

MEMORY_FIELDS = (
    "argument_size_in_bytes",
    "output_size_in_bytes",
    "alias_size_in_bytes",
    "temp_size_in_bytes",
    "peak_memory_in_bytes",
    "generated_code_size_in_bytes",
    "host_argument_size_in_bytes",
    "host_output_size_in_bytes",
    "host_alias_size_in_bytes",
    "host_temp_size_in_bytes",
    "host_generated_code_size_in_bytes",
)

MAX_TEMPORARIES = 10
MAX_LEAVES_LISTED = 50


def memory_stats(compiled: Any) -> dict[str, int] | None:
    """``Compiled.memory_analysis()``'s fields, as XLA reports them (None when it reports none)."""
    stats = compiled.memory_analysis()
    if stats is None:
        return None
    return {k: int(getattr(stats, k)) for k in MEMORY_FIELDS if getattr(stats, k, None) is not None}


# ---- arguments by leaf --------------------------------------------------------------------------------


def _group_of(path: Sequence[Any]) -> str:
    """``args/<i>`` plus every attribute name (NamedTuple / dataclass field) on the way to the leaf."""
    import jax

    parts: list[str] = []
    if path and isinstance(path[-1], jax.tree_util.GetAttrKey) and path[-1].name in ("value", "raw_value"):
        path = path[:-1]  # a Flax NNX Variable's value: the variable is the leaf
    for k in path:
        if isinstance(k, jax.tree_util.GetAttrKey):
            parts.append(str(k.name))
        elif isinstance(k, jax.tree_util.DictKey) and not parts:
            parts.append(str(k.key))
        elif isinstance(k, jax.tree_util.SequenceKey) and not parts:
            parts.append(str(k.idx))
    return "/".join(parts)


def display_name(path: str, names: Sequence[str | None] | None) -> str:
    """A group's or leaf's name as the dashboard says it: ``args/1/mu`` -> ``opt_state.mu`` (the function's own
    parameter name for ``args/1``, ``argument 1`` where it has none), ``kwargs/w`` -> ``w``."""
    where, _, rest = path.partition("/")
    first, _, tail = rest.partition("/")
    if where == "args" and first.isdigit():
        i = int(first)
        first = (names[i] if names is not None and i < len(names) else None) or f"argument {i}"
    return ".".join(p for p in (first, *tail.split("/")) if p)


HOST_KINDS = ("pinned_host", "unpinned_host")
"""JAX's memory kinds in host memory: arguments there are not in HBM."""


def argument_breakdown(in_avals: Any, in_shardings: Any, names: Sequence[str | None] | None = None) -> dict[str, Any]:
    """The arguments' bytes per device (the most any device holds), by group and by leaf, largest first; each
    group and leaf with its ``name`` (:func:`display_name`: the function's parameter names, ``names``), and
    ``bytes_total``: every leaf's whole logical size, counted once. Leaves in host memory (a ``pinned_host`` or
    ``unpinned_host`` memory kind: an offloaded optimizer state) say so (``memory_kind``), and their group's
    ``host_bytes_per_device`` counts them: they are not in HBM."""
    import jax

    def leaf_bytes(aval: Any, sharding: Any) -> int:
        shape = tuple(aval.shape)
        try:
            shard = sharding.shard_shape(shape)
        except (ValueError, TypeError, AttributeError, NotImplementedError):
            shard = shape
        n = 1
        for d in shard:
            n *= int(d)
        return n * int(aval.dtype.itemsize)

    args, kwargs = in_avals
    shard_args, shard_kwargs = in_shardings
    leaves: list[dict[str, Any]] = []
    groups: dict[str, dict[str, Any]] = {}
    total = 0
    for prefix, avals, shardings in (("args", list(args), list(shard_args)), ("kwargs", kwargs, shard_kwargs)):
        flat, _ = jax.tree_util.tree_flatten_with_path(avals)
        sflat = jax.tree_util.tree_leaves(shardings)
        for (path, aval), sharding in zip(flat, sflat, strict=False):
            nbytes = leaf_bytes(aval, sharding)
            text = f"{prefix}/" + jax.tree_util.keystr(path, simple=True, separator="/")
            group = f"{prefix}/{_group_of(path)}"
            leaf = {"path": text, "name": display_name(text, names), "group": group, "bytes_per_device": nbytes,
                    "shape": list(aval.shape), "dtype": str(aval.dtype)}  # fmt: skip
            kind = getattr(sharding, "memory_kind", None)
            if kind in HOST_KINDS:
                leaf["memory_kind"] = kind
            leaves.append(leaf)
            total += int(np.prod(aval.shape, dtype=np.int64)) * int(aval.dtype.itemsize)
            g = groups.setdefault(group, {"group": group, "name": display_name(group, names), "bytes_per_device": 0,
                                          "leaves": 0})  # fmt: skip
            g["bytes_per_device"] += nbytes
            g["leaves"] += 1
            if kind in HOST_KINDS:
                g["host_bytes_per_device"] = g.get("host_bytes_per_device", 0) + nbytes
    leaves.sort(key=lambda r: -r["bytes_per_device"])
    return {
        "groups": sorted(groups.values(), key=lambda g: -g["bytes_per_device"]),
        "leaves": leaves[:MAX_LEAVES_LISTED],
        "leaves_total": len(leaves),
        "bytes_per_device": sum(r["bytes_per_device"] for r in leaves),
        "bytes_total": total,
    }


def flat_leaves(in_avals: Any, in_shardings: Any, names: Sequence[str | None] | None = None) -> list[dict[str, Any]]:
    """The arguments' leaves in the order XLA numbers the program's parameters (args, then kwargs, flattened): each
    with its path, display name, group, dtype, PartitionSpec text and the elements of one device's shard."""
    import jax

    out: list[dict[str, Any]] = []
    for prefix, avals, shardings in (("args", list(in_avals[0]), list(in_shardings[0])),
                                     ("kwargs", in_avals[1], in_shardings[1])):  # fmt: skip
        flat, _ = jax.tree_util.tree_flatten_with_path(avals)
        sflat = jax.tree_util.tree_leaves(shardings)
        for (path, aval), sharding in zip(flat, sflat, strict=False):
            text = f"{prefix}/" + jax.tree_util.keystr(path, simple=True, separator="/")
            try:
                shard = tuple(sharding.shard_shape(tuple(aval.shape)))
            except (ValueError, TypeError, AttributeError, NotImplementedError):
                shard = tuple(aval.shape)
            spec = getattr(sharding, "spec", None)
            out.append({"path": text, "name": display_name(text, names), "group": f"{prefix}/{_group_of(path)}",
                        "dtype": str(aval.dtype), "spec": f"P{tuple(spec)!r}".replace(",)", ")") if spec is not None
                        else None, "elements": int(np.prod(shard, dtype=np.int64))})  # fmt: skip
    return out


# ---- source lines ------------------------------------------------------------------------------------

_TABLE = re.compile(r"^(FileNames|FunctionNames|FileLocations|StackFrames)$")
_ROW = re.compile(r"^(\d+)\s+(.*)$")


def stack_frames(hlo: str) -> dict[int, str]:
    """``stack_frame_id`` -> ``file:line (function)`` from the HLO module's frame tables (innermost frame)."""
    tables: dict[str, dict[int, str]] = {}
    current: str | None = None
    for line in hlo.splitlines():
        if line.startswith(("%", "ENTRY", "HloModule")) and current is not None and not line.strip():
            break
        m = _TABLE.match(line.strip())
        if m:
            current = m.group(1)
            tables[current] = {}
            continue
        if current is None:
            continue
        if line.startswith(("%", "ENTRY")):
            break
        row = _ROW.match(line.strip())
        if row:
            tables[current][int(row.group(1))] = row.group(2)
    files = {k: v.strip('"') for k, v in tables.get("FileNames", {}).items()}
    funcs = {k: v.strip('"') for k, v in tables.get("FunctionNames", {}).items()}
    locs: dict[int, str] = {}
    for k, v in tables.get("FileLocations", {}).items():
        f = re.search(r"file_name_id=(\d+)", v)
        fn = re.search(r"function_name_id=(\d+)", v)
        ln = re.search(r"\bline=(\d+)", v)
        name = files.get(int(f.group(1)), "?") if f else "?"
        where = f"{name}:{ln.group(1)}" if ln else name
        if fn and int(fn.group(1)) in funcs:
            where += f" ({funcs[int(fn.group(1))]})"
        locs[k] = where
    out: dict[int, str] = {}
    for k, v in tables.get("StackFrames", {}).items():
        loc = re.search(r"file_location_id=(\d+)", v)
        if loc and int(loc.group(1)) in locs:
            out[k] = locs[int(loc.group(1))]
    return out


_INSTR_META = re.compile(r"^\s*(?:ROOT\s+)?%(?P<name>[\w.\-]+)\s*=.*?metadata=\{(?P<meta>[^}]*)\}", re.M)


def instruction_sources(hlo: str, names: set[str]) -> dict[str, dict[str, str | None]]:
    """For the named instructions: the JAX op (metadata ``op_name``) and source line that made each."""
    frames = stack_frames(hlo)
    out: dict[str, dict[str, str | None]] = {}
    for m in _INSTR_META.finditer(hlo):
        name = m.group("name")
        if name not in names:
            continue
        meta = m.group("meta")
        op = re.search(r'op_name="([^"]*)"', meta)
        frame = re.search(r"stack_frame_id=(\d+)", meta)
        file = re.search(r'source_file="([^"]*)"', meta)
        line = re.search(r"source_line=(\d+)", meta)
        source = frames.get(int(frame.group(1))) if frame else None
        if source is None and file:
            source = f"{file.group(1)}:{line.group(1) if line else '?'}"
        out[name] = {"op": op.group(1) if op else None, "source": source}
    return out


# ---- buffer assignment ---------------------------------------------------------------------------------

_ALLOCATION = re.compile(r"^allocation (\d+): size (\d+)(.*):$")
_VALUE = re.compile(
    r"^ value: <\d+ (?P<name>[\w.\-]+)(?P<index>\{[\d,]*\})?[^>]*> \(size=(?P<size>\d+),offset=\d+\): (?P<shape>.*)$"
)
_SPACE = re.compile(r"^Memory Space: (?P<name>\S+) \(color=(?P<color>\d+)\)", re.M)
_COLOR = re.compile(r"\bcolor (\d+)")

#: XLA's ``CompiledMemoryStats`` for GPU and CPU (``PopulateBufferStatsFromAllocations``) sums the preallocated
#: temporary allocations of the default memory space; libtpu computes its own figure after the dumped
#: assignment (scoped scratch it adds, buffers it moves between memory spaces), so on TPU the two differ.
TPU_TEMP_NOTE = (
    "XLA:TPU's temporaries figure (memory_analysis) is libtpu's own, counted after the buffer assignment it "
    "dumps: it adds kernels' scoped scratch and buffers it moves between memory spaces, and reports 0 B when "
    "the assignment's HBM temporaries are only loop counters and tuple tables. The values listed are the "
    "dumped assignment's, HBM and on-chip memory (VMEM, v4's CMEM) apart; XLA's figure counts HBM only"
)


def _temp_allocation(flags: str) -> bool:
    """A temporary allocation (XLA's ``IsPreallocatedTempBuffer``): no parameter, constant, thread-local or
    live-out buffer."""
    return not any(k in flags for k in ("parameter", "constant", "thread-local", "maybe-live-out", "output shape"))


ALIASING = frozenset(
    ("parameter", "while", "tuple", "get-tuple-element", "bitcast", "copy-start", "copy-done", "call", "conditional")
)


def memory_space_names(report: str) -> dict[int, str]:
    """Colour -> memory space name from XLA's ``*memory-usage-report.txt`` (``vmem``, ``smem``; libtpu's)."""
    return {int(m.group("color")): m.group("name") for m in _SPACE.finditer(report)}


def read_buffer_assignment(
    text: str, limit: int = 4 * MAX_TEMPORARIES, spaces: Mapping[int, str] | None = None
) -> dict[str, Any]:
    """The temporary allocations of XLA's ``BufferAssignment`` text by memory space and their largest values
    (one per instruction, each with its memory space). ``temp_allocation_bytes``: the default memory space's
    (HBM; a CPU's RAM), which is XLA's ``temp_size_in_bytes`` on GPU and CPU; ``memory_spaces``: every other
    space's (TPU: VMEM, SMEM, v4's CMEM), which XLA's figure does not count. A tuple's value is a table of
    pointers to buffers listed on their own: never listed."""
    names = dict(spaces or {})
    color: int | None = None
    totals: dict[int, int] = {}
    best: dict[str, dict[str, Any]] = {}
    for line in text.splitlines():
        a = _ALLOCATION.match(line)
        if a:
            flags = a.group(3)
            c = _COLOR.search(flags)
            color = (int(c.group(1)) if c else 0) if _temp_allocation(flags) else None
            if color is not None:
                totals[color] = totals.get(color, 0) + int(a.group(2))
            continue
        v = _VALUE.match(line) if color is not None else None
        if v is None or v.group("shape").startswith("("):
            continue
        size = int(v.group("size"))
        name = v.group("name")
        if size > best.get(name, {}).get("bytes", -1):
            shape = re.sub(r"\{[^}]*\}", "", v.group("shape")).strip()
            space = "default" if color == 0 else names.get(int(color or 0), f"color {color}")
            best[name] = {"instruction": name, "bytes": size, "shape": shape, "memory_space": space}
    largest = sorted(best.values(), key=lambda r: -r["bytes"])[:limit]
    others = [
        {"memory_space": names.get(c, f"color {c}"), "color": c, "bytes": b} for c, b in sorted(totals.items()) if c
    ]
    return {"temp_allocation_bytes": totals.get(0, 0), "memory_spaces": others, "largest": largest}


def buffer_report(
    dump_dir: Path, hlo: str | None = None, stats: Mapping[str, int] | None = None
) -> dict[str, Any] | None:
    """The temporaries of the program XLA dumped in ``dump_dir``: ``temp_size_in_bytes`` (XLA's own figure,
    from ``stats``: ``memory_analysis()``), the dumped assignment's allocations by memory space and its
    largest values with ops and source lines; ``note`` says why XLA's figure and the assignment's differ."""
    found = sorted(p for p in dump_dir.glob("*buffer-assignment.txt") if "values" not in p.name)
    if not found:
        return None
    usage = sorted(dump_dir.glob("*memory-usage-report.txt"))
    spaces = memory_space_names(usage[-1].read_text(errors="replace")) if usage else {}
    report = read_buffer_assignment(found[-1].read_text(errors="replace"), spaces=spaces)
    if hlo is None:
        optimized = sorted(dump_dir.glob("*after_optimizations.txt"))
        hlo = optimized[-1].read_text(errors="replace") if optimized else ""
    ops = parse_module(hlo).op_names()
    # Loop-carried values and async copies re-list a buffer another instruction made: name its maker once.
    report["largest"] = [r for r in report["largest"] if ops.get(r["instruction"]) not in ALIASING][:MAX_TEMPORARIES]
    sources = instruction_sources(hlo, {r["instruction"] for r in report["largest"]})
    for r in report["largest"]:
        r["opcode"] = ops.get(r["instruction"])
        r.update(sources.get(r["instruction"], {"op": None, "source": None}))
    xla = (stats or {}).get("temp_size_in_bytes")
    report["temp_size_in_bytes"] = int(xla) if xla is not None else None
    report["note"] = None
    if xla is not None and int(xla) != report["temp_allocation_bytes"]:
        # TPU layouts carry their tiling (``{1,0:T(8,128)}``); GPU and CPU ones never do
        tpu = ":T(" in hlo
        report["note"] = TPU_TEMP_NOTE if tpu else "XLA's temporaries figure differs from its buffer assignment's"
    report["source"] = "XLA's buffer assignment (xla_dump_to): the temporaries' largest values"
    return report


# ---- refusals --------------------------------------------------------------------------------------------

_SIZE = r"(\d+(?:\.\d+)?)\s*([KMGTP]?i?B?)"
_UNITS = {"": 1, "B": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40, "P": 2**50}


def parse_size(number: str, unit: str) -> int:
    """``17.01``, ``G`` -> bytes (XLA's HumanReadableNumBytes: 1024-based)."""
    return int(float(number) * _UNITS.get(unit[:1].upper() if unit else "", 1))


_REQUIRED = [
    re.compile(rf"memory required for (?P<what>[\w ]+?) \({_SIZE}\) exceeds available \w+ \({_SIZE}\)"),
    re.compile(rf"Used {_SIZE} of {_SIZE} (?P<space>\w+)"),
]
_EXCEEDED = re.compile(rf"Exceeded \w+ capacity by {_SIZE}")
_LARGEST = re.compile(
    rf"Size: {_SIZE}\s*(?P<body>.*?)(?=\n\s*\d+\.\s+Size:|\Z)",
    re.S,
)


def is_memory_refusal(error: BaseException) -> bool:
    text = str(error)
    return "RESOURCE_EXHAUSTED" in text or "Ran out of memory" in text


def refusal(error: BaseException, capacity: int | None = None) -> dict[str, Any]:
    """XLA's out-of-memory compile error as fields, never a traceback."""
    text = str(error)
    out: dict[str, Any] = {
        "kind": "memory",
        "message": text.strip()[:2000],
        "what": None,
        "required_bytes": None,
        "available_bytes": None,
        "over_bytes": None,
        "largest": [],
    }
    for pattern in _REQUIRED:
        m = pattern.search(text)
        if not m:
            continue
        groups = m.groups()
        if pattern is _REQUIRED[0]:
            out["what"] = m.group("what").replace("HLO ", "")
            out["required_bytes"] = parse_size(groups[1], groups[2])
            out["available_bytes"] = parse_size(groups[3], groups[4])
        else:
            out["what"] = "program"
            out["required_bytes"] = parse_size(groups[0], groups[1])
            out["available_bytes"] = parse_size(groups[2], groups[3])
        break
    exceeded = _EXCEEDED.search(text)
    if exceeded:
        out["over_bytes"] = parse_size(exceeded.group(1), exceeded.group(2))
    elif out["required_bytes"] is not None and out["available_bytes"] is not None:
        out["over_bytes"] = max(0, out["required_bytes"] - out["available_bytes"])
    if out["available_bytes"] is None and capacity is not None:
        out["available_bytes"] = capacity
    listed = text.split("Largest program allocations", 1)
    if len(listed) == 2:
        for m in _LARGEST.finditer(listed[1]):
            body = m.group("body")
            op = re.search(r'op_name="([^"]*)"', body)
            shape = re.search(r"Shape:\s*(\S+)", body)
            file = re.search(r'source_file="?([^"\s]+)"?\s+source_line=(\d+)', body)
            out["largest"].append(
                {
                    "bytes": parse_size(m.group(1), m.group(2)),
                    "shape": shape.group(1) if shape else None,
                    "op": op.group(1) if op else None,
                    "source": f"{file.group(1)}:{file.group(2)}" if file else None,
                    "instruction": None,
                }
            )
            if len(out["largest"]) >= MAX_TEMPORARIES:
                break
    return out


GRADIENT_OP = "transpose("
"""JAX names the backward pass's ops ``.../transpose(jvp(...))/...``: a temporary made there with a parameter's
shard shape is that parameter's gradient."""


def _kind_of(t: Mapping[str, Any], shard_elements: set[int]) -> str:
    """``gradient`` (a temporary of an argument leaf's shard size made in the backward pass), ``parameter-sized``
    (of that size elsewhere: a gradient accumulator, a cast copy of the weights) or ``activation``."""
    shape = str(t.get("shape") or "")
    dims = re.findall(r"\d+", shape.split("[", 1)[1]) if "[" in shape else []
    n = 1
    for d in dims:
        n *= int(d)
    op = str(t.get("op") or "")
    if n not in shard_elements:
        return "activation"
    if GRADIENT_OP in op:
        return "gradient"
    # a zero-filled accumulator (broadcast) or a cast copy (convert) of a parameter's shard; anything else of
    # that size (x @ x of a square x) is an activation
    made = {str(t.get("opcode") or ""), op.rsplit("/", 1)[-1]}
    return (
        "parameter-sized"
        if made & {"broadcast", "broadcast_in_dim", "convert", "convert_element_type"}
        else ("activation")
    )


_KIND_WORDS = {
    "gradient": "a weight gradient, made in the backward pass at",
    "parameter-sized": "the size of a parameter's shard (a gradient accumulator or a cast copy of the weights), at",
    "activation": "an activation, made at",
}


def chips_needed(nbytes: int, per_device: int, devices: str | None) -> tuple[int, str | None] | None:
    """How many chips hold ``nbytes`` at ``per_device`` bytes each, and the smallest standard slice of the set's
    kind with as many (``tpu:v5e:4x8``; ``gpu:h100:4x8``: hosts of 8), or None without the figures."""

    if not nbytes or not per_device or not devices:
        return None
    kind, _, rest = devices.partition(":")
    need = math.ceil(nbytes / per_device)
    if kind == "tpu":
        gen = TPU_GENERATIONS.get(rest.partition(":")[0].lower())
        if gen is None:
            return need, None
        chips = math.ceil(need / gen.cores_per_chip)
        sizes = sorted(gen.topologies, key=lambda t: math.prod(int(d) for d in t.split("x")))
        fit = next((t for t in sizes if math.prod(int(d) for d in t.split("x")) >= chips), None)
        return chips, f"tpu:{gen.name}:{fit}" if fit else None
    if kind == "gpu":
        gpu = rest.partition(":")[0]
        hosts, per_host = (1, need) if need <= 8 else (math.ceil(need / 8), 8)
        per_host = next(k for k in (1, 2, 4, 8) if k >= per_host)
        return need, f"gpu:{gpu}:{hosts}x{per_host}"
    return None


def advice(
    report: Mapping[str, Any],
    breakdown: Mapping[str, Any] | None,
    mesh_axes: Mapping[str, int],
    *,
    donated: int = 0,
    devices: str | None = None,
    temp_bytes: int | None = None,
) -> list[str]:
    """What to change, said once: which part dominates (the arguments — parameters, optimizer state, batch — or
    the temporaries, named as weight gradients or activations), the largest temporary and what it is, how many
    chips the arguments alone need (rounded up to a slice of the set's kind), and donation only where the step
    donates nothing."""
    b = breakdown or {}
    args = int(b.get("bytes_per_device") or 0)
    required = int(report.get("required_bytes") or 0)
    available = int(report.get("available_bytes") or 0)
    what = str(report.get("what") or "")
    temps = temp_bytes if temp_bytes is not None else required if "temporar" in what else max(0, required - args)
    largest = list(report.get("largest") or [])
    shard_elements = {
        int(leaf["bytes_per_device"]) // max(1, _itemsize(str(leaf.get("dtype")))) for leaf in b.get("leaves") or ()
    }
    kinds = [_kind_of(t, shard_elements) for t in largest]
    tips: list[str] = []
    if args >= temps:
        groups = ", ".join(f"{g.get('name') or g['group']} {fmt_bytes(int(g['bytes_per_device']))}"
                           for g in (b.get("groups") or [])[:3])  # fmt: skip
        past = f", more than the {fmt_bytes(available)} a device has before any temporary" if args > available else ""
        tip = (f"the arguments dominate: {fmt_bytes(args)} per device ({groups}){past}: shard them over more "
               "devices (FSDP over a larger axis) or keep the optimizer state in a lower precision")  # fmt: skip
        tips.append(tip + ("" if donated else ", and donate the state (donate_argnums) so its update reuses them"))
    else:
        grads = len(kinds) - kinds.count("activation") > kinds.count("activation")
        tips.append(
            f"the temporaries dominate ({fmt_bytes(temps)} per device beside {fmt_bytes(args)} of arguments): "
            + ("mostly the size of a parameter's shard (weight gradients, their accumulators, cast copies of the "
               "weights): shard the parameters over more devices (FSDP) so these shrink with them, or keep them in "
               "a lower precision"
               if grads else
               "activations: a smaller batch or sequence per device, rematerialisation (jax.checkpoint with a "
               "policy that saves less), or sharding the batch / sequence over more devices")
        )  # fmt: skip
    if largest:
        t, kind = largest[0], kinds[0]
        where = t.get("source") or t.get("op") or t.get("instruction")
        tips.append(
            f"the largest temporary ({fmt_bytes(int(t['bytes']))}, {t.get('shape')}) is {_KIND_WORDS[kind]} {where}"
        )
    total = int(b.get("bytes_total") or 0)
    need = chips_needed(total, available, devices) if args >= temps or args > available / 2 else None
    on_mesh = 1
    for n in mesh_axes.values():
        on_mesh *= int(n)
    if need is not None and need[0] > on_mesh:
        chips, slice_ = need
        tips.append(
            f"the arguments alone ({fmt_bytes(total)} in all) need at least {chips} chips of {fmt_bytes(available)}"
            + (f": the smallest such slice is {slice_}" if slice_ else "")
            + ", before any temporary"
        )
    elif mesh_axes:
        tips.append(f"the mesh is {dict(mesh_axes)}: a larger slice, or the same program on more chips, also helps")
    return tips


def _itemsize(dtype: str) -> int:

    try:
        return int(np.dtype(dtype).itemsize)
    except TypeError:
        return 2 if "bfloat16" in dtype else 1


def over_capacity(
    stats: Mapping[str, int],
    capacity: int,
    plan: Mapping[str, Any],
    mesh_axes: Mapping[str, int],
    *,
    donated: int = 0,
    devices: str | None = None,
) -> dict[str, Any]:
    """A compiled program whose XLA peak is past the chip's HBM, as a refusal reads: XLA's GPU compiler compiles it
    without a word (XLA:TPU refuses such a program itself), but it cannot run. The largest allocations are the
    buffer assignment's temporaries; the advice :func:`advice`'s."""
    peak = int(stats["peak_memory_in_bytes"])
    out: dict[str, Any] = {
        "kind": "capacity",
        "message": (
            f"XLA compiled the program, but its peak ({fmt_bytes(peak)} per device) is past the "
            f"{fmt_bytes(capacity)} of HBM a device has: it cannot run. XLA's GPU compiler does not refuse "
            "a program for memory; XLA:TPU does."
        ),
        "what": "peak",
        "required_bytes": peak,
        "available_bytes": capacity,
        "over_bytes": peak - capacity,
        "largest": list(((plan.get("temporaries") or {}).get("largest") or [])[:MAX_TEMPORARIES]),
    }
    out["advice"] = advice(out, plan.get("arguments"), mesh_axes, donated=donated, devices=devices,
                           temp_bytes=int(stats.get("temp_size_in_bytes") or 0))  # fmt: skip
    return out


_PLACED = re.compile(r"Memory Space: default \(color=0\)\s*\nTotal bytes: (\d+)")


def placed_bytes(directory: str | Path) -> int | None:
    """The bytes XLA's buffer assignment places in HBM (``Total bytes`` of the default memory space in its
    memory-usage report): arguments, outputs and temporaries as placed, what must fit in the chip's HBM."""
    for path in sorted(Path(directory).glob("*memory-usage-report.txt")):
        m = _PLACED.search(path.read_text(errors="replace"))
        if m:
            return int(m.group(1))
    return None
