"""Collectives from compiled HLO text: what XLA inserted, between which devices, along which mesh axes.

Pure text parsing (no JAX import): the input is ``jitted.lower(...).compile().as_text()``. Device ids
and mesh axes come from :mod:`sharding_core.hlo.collectives` and :mod:`sharding_core.hlo.axes`.

Device numbers in an SPMD module's collectives are *partition ids* (with one replica, the global
device ids that ``use_global_device_ids`` refers to are partition ids too): positions in the
executable's device assignment, not device ids. :func:`map_to_devices` turns them into device ids
and :func:`group_axes` says which mesh axes a group spans.

``replica_groups`` comes in three spellings, all handled exactly as XLA defines them
(``xla/hlo/ir/replica_group.cc``, ``tile_assignment.cc``, ``mesh_and_axis.cc``):

* explicit lists: ``{{0,1},{2,3}}``; ``{}`` means one group of every partition;
* iota lists: ``[G,S]<=[d0,d1,...]T(p0,p1,...)`` — ``iota(prod(d)).reshape(d).transpose(p)``
  reshaped to ``G`` groups of ``S`` (no ``T(...)``: no transpose);
* mesh axes: ``mesh['a'=2,'b'=4] {'a'}`` (optionally ``, device_ids=(...)`` between them, and
  sub-axes ``'a':(pre)size``) — the mesh's device array reshaped so every sub-axis is a dimension,
  the grouped dimensions transposed to the end in the order listed, then cut into groups.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Iterator, Sequence

import numpy as np

COLLECTIVE_OPS = (
    "all-reduce",
    "all-gather",
    "reduce-scatter",
    "all-to-all",
    "collective-permute",
    "ragged-all-to-all",
    "collective-broadcast",
)
"""Base names of the collective instructions reported (their ``-start`` async forms map to these)."""

# Bits per element of XLA's primitive types (``xla_data.proto``), for byte counts.
ELEMENT_BITS: dict[str, int] = {
    "pred": 8,
    "s2": 2,
    "u2": 2,
    "s4": 4,
    "u4": 4,
    "s8": 8,
    "u8": 8,
    "s16": 16,
    "u16": 16,
    "s32": 32,
    "u32": 32,
    "s64": 64,
    "u64": 64,
    "f16": 16,
    "bf16": 16,
    "f32": 32,
    "f64": 64,
    "c64": 64,
    "c128": 128,
    "f4e2m1fn": 4,
    "f8e3m4": 8,
    "f8e4m3": 8,
    "f8e4m3fn": 8,
    "f8e4m3fnuz": 8,
    "f8e4m3b11fnuz": 8,
    "f8e5m2": 8,
    "f8e5m2fnuz": 8,
    "f8e8m0fnu": 8,
    "token": 0,
}

_HEADER = re.compile(r"^HloModule\s+(\S+?),(.*)$", re.M)
_NUM_PARTITIONS = re.compile(r"\bnum_partitions=(\d+)")
_INSTRUCTION = re.compile(r"^\s*(?:ROOT\s+)?%(?P<name>[^\s=]+)\s*=\s*")
_ARRAY_SHAPE = re.compile(r"([a-z][a-z0-9]*)\[([0-9,]*)\]")
_INTS = re.compile(r"-?\d+")
_INT_LISTS = re.compile(r"\{\s*(?:\{[-\d,\s]*\}\s*(?:,\s*\{[-\d,\s]*\}\s*)*)?\}")


class HloParseError(ValueError):
    """The HLO text has a collective this parser cannot read (reported, never guessed around)."""


@dataclasses.dataclass(frozen=True)
class ArrayShape:
    dtype: str
    dims: tuple[int, ...]

    @property
    def bytes(self) -> int:
        bits = ELEMENT_BITS.get(self.dtype)
        if bits is None:
            raise HloParseError(f"unknown HLO element type {self.dtype!r}")
        return (math.prod(self.dims) * bits + 7) // 8

    def __str__(self) -> str:
        return f"{self.dtype}[{','.join(map(str, self.dims))}]"


@dataclasses.dataclass(frozen=True)
class Collective:
    """One collective instruction, with device numbers as partition ids (see :func:`map_to_devices`)."""

    op: str  # base name, e.g. "all-gather" (also for "all-gather-start")
    name: str  # the instruction's name in the module
    is_async: bool  # a "-start" form
    shapes: tuple[ArrayShape, ...]  # the array shapes the collective produces
    groups: tuple[tuple[int, ...], ...]  # replica groups (collective-permute: ring/chain order)
    pairs: tuple[tuple[int, int], ...] | None  # collective-permute source -> target
    replica_groups: str  # the attribute's text as XLA printed it
    dimensions: tuple[int, ...] | None
    source: str | None  # metadata op_name: the JAX primitive that asked for it
    computation: str  # the HLO computation holding it

    @property
    def shape_text(self) -> str:
        if len(self.shapes) == 1:
            return str(self.shapes[0])
        return "(" + ", ".join(map(str, self.shapes)) + ")"

    @property
    def bytes(self) -> int:
        """Bytes of the result on each device (every array of a tuple result counted)."""
        return sum(s.bytes for s in self.shapes)


# ---------------------------------------------------------------------------------------- scanning


def balanced_end(text: str, start: int, open_ch: str, close_ch: str) -> int:
    """Index just past the bracket that closes ``text[start]`` (which is ``open_ch``)."""
    depth = 0
    quote = False
    for i in range(start, len(text)):
        c = text[i]
        if c == '"' and (i == 0 or text[i - 1] != "\\"):
            quote = not quote
        if quote:
            continue
        if c == open_ch:
            depth += 1
        elif c == close_ch:
            depth -= 1
            if depth == 0:
                return i + 1
    raise HloParseError(f"unbalanced {open_ch}{close_ch} in HLO text: {text[start : start + 80]!r}")


def _split_top(text: str, sep: str = ",") -> list[str]:
    """Splits at ``sep`` outside brackets, braces, parentheses and strings."""
    parts: list[str] = []
    depth = 0
    quote = False
    cur = 0
    for i, c in enumerate(text):
        if c == '"' and (i == 0 or text[i - 1] != "\\"):
            quote = not quote
        if quote:
            continue
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == sep and depth == 0:
            parts.append(text[cur:i])
            cur = i + 1
    parts.append(text[cur:])
    return [p.strip() for p in parts if p.strip()]


def _attributes(text: str) -> dict[str, str]:
    """``a=1, b={{0,1}}, metadata={...}`` -> {"a": "1", "b": "{{0,1}}", ...} (top-level keys only)."""
    out: dict[str, str] = {}
    for part in _split_top(text):
        key, eq, value = part.partition("=")
        if eq:
            out[key.strip()] = value.strip()
    return out


def _shapes(text: str) -> tuple[ArrayShape, ...]:
    """Array shapes in a (possibly tuple) HLO shape: ``f32[4,8]{1,0}`` or ``(f32[2]{0}, s32[])``."""
    return tuple(
        ArrayShape(m.group(1), tuple(int(d) for d in m.group(2).split(",") if d)) for m in _ARRAY_SHAPE.finditer(text)
    )


def _int_lists(text: str) -> list[list[int]]:
    """``{{0,1},{2,3}}`` -> [[0, 1], [2, 3]]; ``{}`` -> []."""
    inner = text.strip()
    if not _INT_LISTS.fullmatch(inner):
        raise HloParseError(f"expected {{{{...}},...}} lists of integers, got {text[:80]!r}")
    inner = inner[1:-1].strip()
    return [[int(v) for v in _INTS.findall(g)] for g in re.findall(r"\{([^{}]*)\}", inner)]


def _dims(text: str) -> list[int]:
    return [int(v) for v in text.split(",") if v.strip()]


# ------------------------------------------------------------------------------- replica groups


def iota_groups(num_groups: int, group_size: int, reshape: Sequence[int], perm: Sequence[int] | None) -> np.ndarray:
    """XLA's ``IotaReplicaGroupList``: ``iota(prod(reshape)).reshape(reshape).transpose(perm)`` as groups."""
    total = math.prod(reshape)
    if num_groups * group_size != total:
        raise HloParseError(f"iota replica groups [{num_groups},{group_size}] do not cover {total} devices")
    ids = np.arange(total, dtype=np.int64).reshape(tuple(reshape))
    if perm is not None:
        if sorted(perm) != list(range(len(reshape))):
            raise HloParseError(f"T{tuple(perm)} is not a permutation of {len(reshape)} dimensions")
        ids = ids.transpose(tuple(perm))
    return ids.reshape(num_groups, group_size)


_IOTA = re.compile(r"^\[([0-9,]+)\]<=\[([0-9,]+)\](?:T\(([0-9,]+)\))?$")


def _mesh_device_array(shape: Sequence[int], ids_text: str | None) -> np.ndarray:
    """A mesh's device array (partition ids) from ``device_ids=(...)`` (absent: iota)."""
    n = math.prod(shape)
    if ids_text is None:
        return np.arange(n, dtype=np.int64).reshape(tuple(shape))
    text = ids_text.strip()
    # TileAssignment::ArrayToString: an iota tile assignment prints as [reshape]T(perm)
    # (or with an explicit [dims]<=[reshape] prefix); anything else is the flat list of ids.
    m = re.fullmatch(r"(?:\[([0-9,]+)\]<=)?\[([0-9,]+)\](?:T\(([0-9,]+)\))?", text)
    if m:
        reshape = _dims(m.group(2))
        perm = _dims(m.group(3)) if m.group(3) else None
        if math.prod(reshape) != n:
            raise HloParseError(f"mesh device_ids {text!r} do not have {n} devices")
        return iota_groups(1, n, reshape, perm).reshape(tuple(shape))
    ids = [int(v) for v in _INTS.findall(re.sub(r"^\[[0-9,]*\]", "", text))]
    if len(ids) != n:
        raise HloParseError(f"mesh device_ids {text!r} do not have {n} devices")
    return np.asarray(ids, dtype=np.int64).reshape(tuple(shape))


_AXIS_REF = re.compile(r"^'?(?P<name>[^':]+?)'?(?::\((?P<pre>\d+)\)(?P<size>\d+))?$")
_MESH_AXIS = re.compile(r"^'?(?P<name>[^'=]+?)'?=(?P<size>\d+)$")


def mesh_axes_groups(
    axes: Sequence[tuple[str, int]], device_array: np.ndarray, grouped: Sequence[tuple[str, int | None, int | None]]
) -> np.ndarray:
    """XLA's ``MeshAxesReplicaGroupList::flattened_replica_groups``.

    ``axes``: the mesh's (name, size); ``device_array``: its devices; ``grouped``: the axes the groups
    span, in order, as (name, sub-axis pre-size, sub-axis size) with None for a whole axis.
    """
    names = [a for a, _ in axes]
    sizes = [s for _, s in axes]
    refs: dict[int, list[tuple[int, int | None, int | None]]] = {}
    order: list[tuple[int, int]] = []  # (mesh axis, k-th ref of that axis) in the listed order
    for name, pre, size in grouped:
        if name not in names:
            raise HloParseError(f"replica groups name axis {name!r}, not one of the mesh axes {names}")
        i = names.index(name)
        refs.setdefault(i, []).append((len(order), pre, size))
        order.append((i, len(refs[i]) - 1))
    # Each mesh axis becomes one or more dimensions; note where each listed ref's dimension lands.
    reshape: list[int] = []
    ref_dim: dict[int, int] = {}  # position in ``grouped`` -> dimension of ``reshape``
    for i, full in enumerate(sizes):
        mine = refs.get(i)
        if not mine:
            reshape.append(full)
            continue
        if len(mine) == 1 and mine[0][1] is None:
            ref_dim[mine[0][0]] = len(reshape)
            reshape.append(full)
            continue
        # Sub-axes, sorted by pre-size (major first), with padding dimensions between them.
        prefix = 1
        for pos, pre, size in sorted(mine, key=lambda r: r[1] or 0):
            if pre is None or size is None:
                raise HloParseError(f"axis {names[i]!r} is grouped both whole and as a sub-axis")
            if pre % prefix:
                raise HloParseError(f"sub-axis {names[i]}:({pre}){size} overlaps another sub-axis")
            if pre != prefix:
                reshape.append(pre // prefix)
                prefix = pre
            ref_dim[pos] = len(reshape)
            reshape.append(size)
            prefix *= size
        if full % prefix:
            raise HloParseError(f"sub-axes of {names[i]!r} do not divide its size {full}")
        if prefix != full:
            reshape.append(full // prefix)
    group_dims = [ref_dim[p] for p in range(len(grouped))]
    rest = [d for d in range(len(reshape)) if d not in group_dims]
    arr = device_array.reshape(tuple(reshape)).transpose((*rest, *group_dims))
    group_size = math.prod(reshape[d] for d in group_dims)
    return arr.reshape(-1, group_size)


def _rows(arr: np.ndarray) -> list[list[int]]:
    rows: list[list[int]] = arr.tolist()
    return rows


def parse_replica_groups(text: str, num_partitions: int) -> list[list[int]]:
    """Groups of partition ids, in XLA's order, from any of the three spellings."""
    t = text.strip()
    if t.startswith("{"):
        lists = _int_lists(t)
        if not lists:  # {} : a single group of every participant
            return [list(range(num_partitions))]
        return lists
    m = _IOTA.match(t)
    if m:
        g, size = _dims(m.group(1))
        return _rows(iota_groups(g, size, _dims(m.group(2)), _dims(m.group(3)) if m.group(3) else None))
    if t.startswith("maximal_mesh["):
        dev = re.search(r"device_id=(\d+)", t)
        return [[int(dev.group(1)) if dev else 0]]
    if t.startswith("mesh["):
        close = balanced_end(t, 4, "[", "]")
        axes = []
        for part in _split_top(t[5 : close - 1]):
            am = _MESH_AXIS.match(part)
            if not am:
                raise HloParseError(f"cannot read mesh axis {part!r} in {t[:120]!r}")
            axes.append((am.group("name"), int(am.group("size"))))
        rest = t[close:].strip()
        ids_text = None
        if rest.startswith(","):
            rest = rest[1:].strip()
            if not rest.startswith("device_ids=("):
                raise HloParseError(f"unexpected mesh attribute in {t[:120]!r}")
            start = rest.index("(")
            end = balanced_end(rest, start, "(", ")")
            ids_text = rest[start + 1 : end - 1]
            rest = rest[end:].strip()
        if not (rest.startswith("{") and rest.endswith("}")):
            raise HloParseError(f"expected {{axes}} after the mesh in {t[:120]!r}")
        grouped: list[tuple[str, int | None, int | None]] = []
        for part in _split_top(rest[1:-1]):
            rm = _AXIS_REF.match(part)
            if not rm:
                raise HloParseError(f"cannot read axis {part!r} in {t[:120]!r}")
            pre_text, size_text = rm.group("pre"), rm.group("size")
            grouped.append(
                (rm.group("name"), int(pre_text) if pre_text else None, int(size_text) if size_text else None)
            )
        shape = [s for _, s in axes]
        return _rows(mesh_axes_groups(axes, _mesh_device_array(shape, ids_text), grouped))
    raise HloParseError(f"cannot read replica_groups={t[:120]!r}")


def permute_chains(pairs: Sequence[tuple[int, int]]) -> list[list[int]]:
    """Source->target pairs as rings or chains, each listed in send order.

    A collective-permute's pairs form disjoint paths and cycles (each device sends to at most one
    device and receives from at most one). Chains start where nothing is received; rings start at
    their smallest device.
    """
    nxt = dict(pairs)
    targets = set(nxt.values())
    seen: set[int] = set()
    chains: list[list[int]] = []
    for s in sorted(s for s in nxt if s not in targets) + sorted(nxt):
        if s in seen:
            continue
        chain = [s]
        seen.add(s)
        cur = s
        while cur in nxt and nxt[cur] not in seen:
            cur = nxt[cur]
            chain.append(cur)
            seen.add(cur)
        chains.append(chain)
    return sorted(chains, key=min)


# ------------------------------------------------------------------------------------- modules


def _replica_groups_text(attrs: str) -> str:
    """The ``replica_groups=`` value, whose mesh-axes spelling has top-level commas of its own."""
    m = re.search(r"(?:^|,\s*)replica_groups=", attrs)
    if not m:
        return "{}"  # absent: one group of every participant
    i = m.end()
    if attrs.startswith("{", i):
        return attrs[i : balanced_end(attrs, i, "{", "}")]
    if attrs.startswith("mesh[", i) or attrs.startswith("maximal_mesh[", i):
        end = balanced_end(attrs, attrs.index("[", i), "[", "]")
        d = re.compile(r",\s*device_ids=\(").match(attrs, end)
        if d:
            end = balanced_end(attrs, d.end() - 1, "(", ")")
        g = re.compile(r"\s*\{").match(attrs, end)
        if g:
            end = balanced_end(attrs, g.end() - 1, "{", "}")
        return attrs[i:end]
    end = attrs.find(", ", i)
    return attrs[i:] if end < 0 else attrs[i:end]


def num_partitions(hlo: str) -> int:
    m = _NUM_PARTITIONS.search(hlo[:4000])
    return int(m.group(1)) if m else 1


def _op_and_rest(line: str, start: int) -> tuple[str, str, str] | None:
    """(shape text, opcode, text after the operand list) of the instruction body at ``start``."""
    i = start
    if i < len(line) and line[i] == "(":
        end = balanced_end(line, i, "(", ")")
    else:
        end = line.find(" ", i)
        if end < 0:
            return None
    shape = line[i:end]
    m = re.compile(r"\s*([a-z][a-z0-9\-]*)\(").match(line, end)
    if not m:
        return None
    op = m.group(1)
    args_end = balanced_end(line, m.end() - 1, "(", ")")
    return shape, op, line[args_end:].lstrip(", ").strip()


@dataclasses.dataclass(frozen=True)
class Instr:
    """One instruction of an HLO module as text: the computation holding it, its name, result shape, opcode,
    operand list, the text after the operands (its attributes) and the whole line."""

    computation: str
    name: str
    shape: str
    opcode: str
    operands: str
    attrs: str
    line: str


def computation_header(stripped: str) -> str | None:
    """The computation a line opens (``%name (...) -> ... {`` or ``ENTRY %name ...{``), or None."""
    if stripped.startswith(("ENTRY ", "%")) and stripped.endswith("{") and "=" not in stripped.split("(")[0]:
        return stripped.split()[1 if stripped.startswith("ENTRY") else 0].lstrip("%")
    return None


def instructions(hlo: str) -> Iterator[Instr]:
    """Every instruction of an HLO module with the computation holding it, in text order: the one scanner of
    module text (collectives here, loops and dots in :mod:`sharding_core.hlo.program`)."""
    computation = ""
    for line in hlo.splitlines():
        header = computation_header(line.strip())
        if header is not None:
            computation = header
            continue
        m = _INSTRUCTION.match(line)
        if not m:
            continue
        parsed = _op_and_rest(line, m.end())
        if parsed is None:
            continue
        shape, opcode, rest = parsed
        start = line.index(opcode + "(", m.end()) + len(opcode)
        end = balanced_end(line, start, "(", ")")
        yield Instr(computation, m.group("name"), shape, opcode, line[start + 1 : end - 1], rest, line)


_CHAIN = re.compile(r'chain_id="(\d+)"')
_CHANNEL = re.compile(r"channel_id=(\d+)")


def fused_chain(attrs: str) -> str | None:
    """libtpu's async collective fusion spreads one collective over several fusions (its start, continuations
    that compute while it moves, its done), each holding a copy of the collective instruction with the same
    ``channel_id`` and ``frontend_attributes={chain_id=...}``: the chain's key, or None for any other."""
    chain = _CHAIN.search(attrs)
    channel = _CHANNEL.search(attrs) if chain else None
    return f"channel {channel.group(1)} chain {chain.group(1)}" if chain and channel else None


def parse_collectives(hlo: str) -> list[Collective]:
    """Every collective of a compiled HLO module, in text order (``-done`` halves skipped; a collective libtpu
    spread over the fusions of one chain once, as the first of its instructions: :func:`fused_chain`)."""
    n = num_partitions(hlo)
    out: list[Collective] = []
    chains: set[str] = set()
    for ins in instructions(hlo):
        shape_text, opcode, rest, computation = ins.shape, ins.opcode, ins.attrs, ins.computation
        base = opcode[: -len("-start")] if opcode.endswith("-start") else opcode
        if base not in COLLECTIVE_OPS:
            continue
        chain = fused_chain(rest)
        if chain is not None:
            if chain in chains:
                continue  # a later step of a collective already read
            chains.add(chain)
        attrs = _attributes(rest)
        shapes = _shapes(shape_text)
        if opcode.endswith("-start") and shape_text.startswith("(") and base in ("all-gather", "collective-permute"):
            # Async starts return (operands, results[, contexts]): report the results.
            parts = _split_top(shape_text[1:-1])
            shapes = _shapes(parts[1]) if len(parts) > 1 else shapes
        pairs: tuple[tuple[int, int], ...] | None = None
        if base == "collective-permute":
            raw = attrs.get("source_target_pairs", "{}")
            pairs = tuple((int(p[0]), int(p[1])) for p in _int_lists(raw) if len(p) == 2)
            groups = tuple(tuple(c) for c in permute_chains(pairs))
            rg_text = raw
        else:
            rg_text = _replica_groups_text(rest)
            groups = tuple(tuple(int(v) for v in row) for row in parse_replica_groups(rg_text, n))
        dims = attrs.get("dimensions")
        meta = attrs.get("metadata", "")
        src = re.search(r'op_name="([^"]*)"', meta)
        out.append(
            Collective(
                op=base,
                name=ins.name,
                is_async=opcode.endswith("-start"),
                shapes=shapes,
                groups=groups,
                pairs=pairs,
                replica_groups=rg_text,
                dimensions=tuple(_dims(dims.strip("{}"))) if dims else None,
                source=src.group(1) if src else None,
                computation=computation,
            )
        )
    return out
