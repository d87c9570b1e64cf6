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

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

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


def argument_breakdown(in_avals: Any, in_shardings: Any) -> dict[str, Any]:
    """The arguments' bytes per device (the most any device holds), by group and by leaf, largest first."""
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
    for prefix, avals, shardings in (("args", list(args), list(shard_args)), ("kwargs", kwargs, shard_kwargs)):
        flat, _ = jax.tree_util.tree_flatten_with_path(avals)
        sflat = jax.tree_util.tree_leaves(shardings)
        for (path, aval), sharding in zip(flat, sflat, strict=False):
            nbytes = leaf_bytes(aval, sharding)
            text = f"{prefix}/" + jax.tree_util.keystr(path, simple=True, separator="/")
            group = f"{prefix}/{_group_of(path)}"
            leaves.append({"path": text, "group": group, "bytes_per_device": nbytes, "shape": list(aval.shape),
                           "dtype": str(aval.dtype)})  # fmt: skip
            g = groups.setdefault(group, {"group": group, "bytes_per_device": 0, "leaves": 0})
            g["bytes_per_device"] += nbytes
            g["leaves"] += 1
    leaves.sort(key=lambda r: -r["bytes_per_device"])
    return {
        "groups": sorted(groups.values(), key=lambda g: -g["bytes_per_device"]),
        "leaves": leaves[:MAX_LEAVES_LISTED],
        "leaves_total": len(leaves),
        "bytes_per_device": sum(r["bytes_per_device"] for r in leaves),
    }


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


def _temp_allocation(flags: str) -> bool:
    """An HBM allocation of temporaries: XLA's preallocated temp buffer (default memory space: no color)."""
    if "color" in flags:
        return False
    return not any(k in flags for k in ("parameter", "constant", "thread-local", "maybe-live-out", "output shape"))


ALIASING = frozenset(
    ("parameter", "while", "tuple", "get-tuple-element", "bitcast", "copy-start", "copy-done", "call", "conditional")
)


def read_buffer_assignment(text: str, limit: int = 4 * MAX_TEMPORARIES) -> dict[str, Any]:
    """The temporary allocations' total and their largest values (one per instruction), from XLA's
    ``BufferAssignment`` text."""
    in_temp = False
    total = 0
    best: dict[str, dict[str, Any]] = {}
    for line in text.splitlines():
        a = _ALLOCATION.match(line)
        if a:
            in_temp = _temp_allocation(a.group(3))
            if in_temp:
                total += int(a.group(2))
            continue
        if not in_temp:
            continue
        v = _VALUE.match(line)
        if not v:
            continue
        size = int(v.group("size"))
        name = v.group("name")
        if size > best.get(name, {}).get("bytes", -1):
            shape = re.sub(r"\{[^}]*\}", "", v.group("shape")).strip()
            best[name] = {"instruction": name, "bytes": size, "shape": shape}
    largest = sorted(best.values(), key=lambda r: -r["bytes"])[:limit]
    return {"temp_allocation_bytes": total, "largest": largest}


def buffer_report(dump_dir: Path, hlo: str | None = None) -> dict[str, Any] | None:
    """The largest temporaries of the program XLA dumped in ``dump_dir``, with ops and source lines."""
    found = sorted(p for p in dump_dir.glob("*buffer-assignment.txt") if "values" not in p.name)
    if not found:
        return None
    report = read_buffer_assignment(found[-1].read_text(errors="replace"))
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


def advice(report: Mapping[str, Any], breakdown: Mapping[str, Any] | None, mesh_axes: Mapping[str, int]) -> list[str]:
    """What to change, from what dominates: temporaries (activations) or arguments (parameters, state)."""
    tips: list[str] = []
    what = str(report.get("what") or "")
    args = int((breakdown or {}).get("bytes_per_device") or 0)
    required = int(report.get("required_bytes") or 0)
    if "temporar" in what or (required and args < required / 2):
        tips.append(
            "temporaries dominate (activations): a smaller batch or sequence per device, rematerialisation "
            "(jax.checkpoint with a policy that saves less), or sharding the batch / sequence over more devices"
        )
        largest = (report.get("largest") or [None])[0]
        if largest:
            where = largest.get("source") or largest.get("op") or largest.get("instruction")
            tips.append(
                f"the largest temporary ({fmt_bytes(int(largest['bytes']))}, {largest.get('shape')}) is made at {where}"
            )
    if args and (not required or args >= required / 2):
        tips.append(
            "arguments dominate (parameters and optimizer state): shard them over more devices (FSDP over a "
            "larger axis), keep the optimizer state in a lower precision, or donate the state (donate_argnums)"
        )
    if mesh_axes:
        tips.append(f"the mesh is {dict(mesh_axes)}: a larger slice, or the same program on more chips, also helps")
    return tips
