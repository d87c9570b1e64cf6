"""What every value of the program is sharded as: the partitioner's choice for each instruction, read back to the
jaxpr equation and source line that made it.

A compile asked for it (:class:`sharding_core.program.compile.Options` ``values``) dumps XLA's module as it enters
the SPMD partitioner (``xla_dump_hlo_pass_re=spmd-partitioning``: the file ``*before_spmd-partitioning.txt``).
By then propagation (Shardy's, exported to HLO, or GSPMD's) has put a ``sharding={...}`` on every instruction,
in global shapes, with the JAX op (``metadata={op_name=...}``) and the frame (``stack_frame_id``) that made it:
exactly the sharding ``jax.debug.inspect_array_sharding`` reports at that point, since that primitive is a custom
call the partitioner gives the sharding of its operand.

:func:`read_values` turns that text into the contract's ``values`` rows::

    {"source": "file:line", "function": str | None, "op": "dot_general" (the last part of XLA's op_name),
     "shape": [...], "dtype": "float32",
     "spec": "P('data', 'model')" | null, "sharding": XLA's text, "typed": "float32[16@data,64@model]",
     "bytes": per device, "repeat": runs per step (loops counted), "computation": str, "name": str}

``spec`` is the mesh's PartitionSpec for the HLO sharding (:func:`spec_of`), null when the sharding names no mesh
axes exactly (a sub-axis, a device order the mesh does not have). Pure text and NumPy; no JAX import.
"""

from __future__ import annotations

import glob
import math
import os
import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from sharding_core.hlo.program import program_facts
from sharding_core.hlo.text import ELEMENT_BITS, HloParseError, balanced_end, instructions
from sharding_core.program.memory import stack_frames

PARTITIONER_PASS = "spmd-partitioning"  # noqa: S105 - an XLA pass name, no password
"""The pass whose input module is dumped (``xla_dump_hlo_pass_re``)."""
MAX_MODULE_BYTES = 64 * 1024 * 1024
"""A dumped module larger than this is not read."""
MAX_VALUES = 4000
"""Values listed per program (program order; a larger program says ``values_truncated``)."""

_SKIP = frozenset(("tuple", "get-tuple-element", "constant", "bitcast", "copy", "parameter", "after-all", "iota"))
_LOOPS = frozenset(("while", "conditional", "call"))
_DTYPES = {
    "f32": "float32", "bf16": "bfloat16", "f16": "float16", "f64": "float64", "s32": "int32", "s64": "int64",
    "s8": "int8", "s16": "int16", "u8": "uint8", "u16": "uint16", "u32": "uint32", "u64": "uint64", "pred": "bool",
    "f8e4m3fn": "float8_e4m3fn", "f8e5m2": "float8_e5m2", "c64": "complex64", "c128": "complex128", "s4": "int4",
    "u4": "uint4",
}  # fmt: skip
_ARRAY = re.compile(r"^(?P<dtype>[a-z][a-z0-9]*)\[(?P<dims>[0-9,]*)\]")
_TILE = re.compile(r"devices=\[(?P<dims>[0-9,]+)\](?P<ids>(?:<=\[[0-9,]+\](?:T\([0-9,]+\))?)|[0-9,]+)")
_SUBGROUPS = re.compile(r"last_tile_dims=\{(?P<kinds>[^}]*)\}")


def dump_text(directory: str) -> str | None:
    """The module as it entered the SPMD partitioner, from a compile's dump directory (None when not written)."""
    found = sorted(glob.glob(os.path.join(directory, f"*before_*{PARTITIONER_PASS}.txt")))
    if not found or os.path.getsize(found[0]) > MAX_MODULE_BYTES:
        return None
    with open(found[0], encoding="utf-8", errors="replace") as f:
        return f.read()


def partition_grid(id_grid: Any, device_assignment: Sequence[int]) -> np.ndarray | None:
    """The mesh's devices as partition ids (the numbers HLO shardings use), or None when they are not the
    program's devices."""
    if id_grid is None:
        return None
    grid = np.asarray(id_grid, dtype=np.int64)
    index = {int(d): p for p, d in enumerate(device_assignment)}
    if grid.size != len(index) or any(int(d) not in index for d in grid.flat):
        return None
    out = np.empty(grid.shape, dtype=np.int64)
    for idx in np.ndindex(grid.shape):
        out[idx] = index[int(grid[idx])]
    return out


def _tile_array(text: str) -> tuple[np.ndarray, list[str]] | None:
    """An HLO sharding's tile assignment (partition ids, one axis per tile dimension) and the kinds of its trailing
    subgroup dimensions (``replicated``, ``manual``, ``unreduced``)."""
    m = _TILE.search(text)
    if not m:
        return None
    dims = [int(v) for v in m.group("dims").split(",")]
    ids = m.group("ids")
    n = math.prod(dims)
    if ids.startswith("<="):
        iota = re.fullmatch(r"<=\[([0-9,]+)\](?:T\(([0-9,]+)\))?", ids)
        assert iota is not None
        reshape = [int(v) for v in iota.group(1).split(",")]
        arr = np.arange(math.prod(reshape), dtype=np.int64).reshape(reshape)
        if iota.group(2):
            arr = arr.transpose([int(v) for v in iota.group(2).split(",")])
        flat = arr.reshape(-1)
    else:
        flat = np.asarray([int(v) for v in ids.split(",") if v], dtype=np.int64)
    if flat.size != n:
        return None
    kinds: list[str] = []
    if "last_tile_dim_replicate" in text:
        kinds = ["replicated"]
    sub = _SUBGROUPS.search(text)
    if sub:
        kinds = [k.strip() for k in sub.group("kinds").split(",") if k.strip()]
    return flat.reshape(dims), kinds


def _axes_along(seq: Sequence[int], coords: dict[int, tuple[int, ...]], names: Sequence[str]) -> list[str] | None:
    """The mesh axes a run of partitions walks through, major first (the one changing slowest first)."""
    first_change: dict[int, int] = {}
    for j in range(1, len(seq)):
        a, b = coords[seq[j - 1]], coords[seq[j]]
        for k in range(len(names)):
            if a[k] != b[k] and k not in first_change:
                first_change[k] = j
    order = sorted(first_change, key=lambda k: -first_change[k])
    return [names[k] for k in order]


def spec_of(sharding: str, rank: int, grid: np.ndarray | None, names: Sequence[str]) -> str | None:
    """The PartitionSpec (``P('data', None)``, trailing Nones dropped) an HLO sharding of an array of ``rank``
    dimensions is on the mesh whose partition ids are ``grid``; None where it is not one (see the module)."""
    text = sharding.strip()
    if text.startswith("{{"):
        return None  # a tuple's shardings
    if "replicated" in text and "devices=" not in text:
        return "P()"
    if grid is None or "devices=" not in text:
        return None
    tiled = _tile_array(text)
    if tiled is None:
        return None
    arr, kinds = tiled
    if arr.ndim != rank + len(kinds) or "manual" in kinds:
        return None
    sizes = grid.shape
    coords = {int(grid[idx]): idx for idx in np.ndindex(sizes)}
    if set(coords) != {int(v) for v in arr.flat}:
        return None
    entries: list[list[str]] = []
    for d in range(arr.ndim):
        line = [int(v) for v in np.moveaxis(arr, d, 0).reshape(arr.shape[d], -1)[:, 0]]
        axes = _axes_along(line, coords, names) if len(line) > 1 else []
        if axes is None or math.prod(sizes[list(names).index(a)] for a in axes) != len(line):
            return None
        entries.append(axes)
    used = [a for e in entries for a in e]
    if len(used) != len(set(used)) or not _consistent(arr, entries, coords, names, sizes):
        return None
    return _spec_text(entries[:rank], [a for d, k in enumerate(kinds) if k == "unreduced" for a in entries[rank + d]])


def _consistent(
    arr: np.ndarray, entries: list[list[str]], coords: dict[int, tuple[int, ...]], names: Sequence[str], sizes: Any
) -> bool:
    """Every partition sits at the tile the mesh coordinates of those axes give it."""
    index = {a: k for k, a in enumerate(names)}
    for idx in np.ndindex(arr.shape):
        c = coords[int(arr[idx])]
        for d, axes in enumerate(entries):
            pos = 0
            for a in axes:
                pos = pos * int(sizes[index[a]]) + int(c[index[a]])
            if pos != idx[d]:
                return False
    return True


def _spec_text(entries: list[list[str]], unreduced: list[str]) -> str:
    parts = ["None" if not e else repr(e[0]) if len(e) == 1 else "(" + ", ".join(map(repr, e)) + ")" for e in entries]
    while parts and parts[-1] == "None":
        parts.pop()
    if unreduced:
        parts.append("unreduced={" + ", ".join(map(repr, sorted(unreduced))) + "}")
    return "P(" + ", ".join(parts) + ")"


def _sharding_attr(attrs: str) -> str | None:
    i = attrs.find("sharding={")
    if i < 0:
        return None
    start = i + len("sharding=")
    try:
        return attrs[start : balanced_end(attrs, start, "{", "}")]
    except HloParseError:
        return None


def shard_dims(shape: Sequence[int], spec: str | None, sizes: dict[str, int]) -> list[int]:
    """Each dimension's size on one device (padded up, as XLA pads an uneven split)."""
    out = list(shape)
    if not spec:
        return out
    for d, entry in enumerate(_spec_entries(spec)):
        if d < len(out) and entry:
            k = math.prod(sizes.get(a, 1) for a in entry)
            out[d] = -(-out[d] // k)
    return out


def _spec_entries(spec: str) -> list[list[str]]:
    body = spec[2:-1] if spec.startswith("P(") else spec
    body = re.sub(r",?\s*unreduced=\{[^}]*\}", "", body)
    out: list[list[str]] = []
    for part in re.findall(r"\([^)]*\)|'[^']*'|None", body):
        out.append(re.findall(r"'([^']*)'", part))
    return out


def spec_axes_by_dim(spec: str | None) -> list[list[str]]:
    """``P('a', ('b', 'c'))`` -> ``[['a'], ['b', 'c']]`` (the spec text this module writes)."""
    return _spec_entries(spec) if spec else []


def _metadata(attrs: str) -> tuple[str | None, int | None]:
    """``metadata={op_name="jit(f)/dot_general" stack_frame_id=2}`` -> (op_name, frame id)."""
    i = attrs.find("metadata={")
    if i < 0:
        return None, None
    meta = attrs[i : attrs.find("}", i) + 1]
    op = re.search(r'op_name="([^"]*)"', meta)
    frame = re.search(r"stack_frame_id=(\d+)", meta)
    return (op.group(1) if op else None), (int(frame.group(1)) if frame else None)


def _runs(hlo: str) -> Any:
    try:
        facts = program_facts(hlo)
        facts.runs  # noqa: B018 - read now: a spelling the loop reader does not know costs the repeat counts only
    except (HloParseError, ValueError, KeyError, IndexError):
        return None
    return facts


def read_values(hlo: str, grid: np.ndarray | None, axis_names: Sequence[str]) -> dict[str, Any]:
    """The values of the module as it entered the partitioner (:func:`dump_text`), in program order:
    ``{"values": [...], "truncated": bool}`` (the rows as the module docstring says)."""
    frames = stack_frames(hlo)
    facts = _runs(hlo)
    sizes = dict(zip(axis_names, (int(s) for s in grid.shape), strict=True)) if grid is not None else {}
    out: list[dict[str, Any]] = []
    last: tuple[Any, ...] | None = None
    truncated = False
    opcodes: dict[str, str] = {}
    for ins in instructions(hlo):
        opcodes[ins.name] = ins.opcode
        if ins.opcode == "get-tuple-element" and opcodes.get(ins.operands.strip().lstrip("%")) in _LOOPS:
            pass  # a loop's (a scan's, a cond's) result: the value the program goes on with
        elif ins.opcode in _SKIP or ins.opcode.endswith(("-start", "-done")) or "InspectSharding" in ins.attrs:
            continue  # not values (and the user's own jax.debug.inspect_array_sharding calls)
        op_name, frame = _metadata(ins.attrs)
        arr = _ARRAY.match(ins.shape)
        sharding = _sharding_attr(ins.attrs)
        if (
            frame is None
            or op_name is None
            or arr is None
            or sharding is None
            or arr.group("dtype") not in ELEMENT_BITS
        ):
            continue
        shape = [int(v) for v in arr.group("dims").split(",") if v]
        spec = spec_of(sharding, len(shape), grid, axis_names)
        where = frames.get(frame, "")
        source, _, function = where.partition(" (")
        key = (source, op_name, tuple(shape), spec)
        if key == last:
            continue  # the copies and converts one equation lowers to
        last = key
        if len(out) >= MAX_VALUES:
            truncated = True
            break
        out.append(_row(ins, op_name, source, function.rstrip(")") or None, shape, arr.group("dtype"), spec, sharding,
                        sizes, facts))  # fmt: skip
    return {"values": out, "truncated": truncated}


def _row(
    ins: Any, op_name: str, source: str, function: str | None, shape: list[int], hlo_dtype: str, spec: str | None,
    sharding: str, sizes: dict[str, int], facts: Any,
) -> dict[str, Any]:  # fmt: skip
    dtype = _DTYPES.get(hlo_dtype, hlo_dtype)
    local = shard_dims(shape, spec, sizes)
    axes = spec_axes_by_dim(spec)
    dims = [f"{n}@{'.'.join(axes[d])}" if d < len(axes) and axes[d] else str(n) for d, n in enumerate(shape)]
    return {
        "source": source or None,
        "function": function,
        "op": op_name.rsplit("/", 1)[-1],
        "shape": shape,
        "dtype": dtype,
        "spec": spec,
        "sharding": sharding,
        "typed": f"{dtype}[{','.join(dims)}]" if spec is not None else None,
        "bytes": (math.prod(local) * ELEMENT_BITS[hlo_dtype] + 7) // 8,
        "logical_bytes": (math.prod(shape) * ELEMENT_BITS[hlo_dtype] + 7) // 8,
        "repeat": int(facts.runs_of(ins.computation)) if facts is not None else 1,
        "computation": ins.computation,
        "name": ins.name,
    }


def largest(values: Sequence[dict[str, Any]], count: int) -> list[dict[str, Any]]:
    """The ``count`` values with the most bytes per device (ties in program order)."""
    return sorted(values, key=lambda v: -int(v["bytes"]))[:count]
