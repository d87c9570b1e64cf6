"""Layouts: where every shard of an array lives, computed by JAX and frozen as plain data.

This is the pure-data layer between JAX and every picture (the grid, the terminal text, share
links, snapshots, kernel outputs): JAX's ``devices_indices_map`` and ``shard_shape`` give the
numbers, :class:`Layout` holds them, renderers only read it. One type, two constructors and one
serialiser: :meth:`Layout.from_named` (a mesh and a spec on a device set, validated with errors
that say what to change — ``/api/layout``, the CLI, kernel inputs and outputs, the what-if) and
:meth:`Layout.from_sharding` (any ``jax.sharding.Sharding`` on real or simulated devices —
``capture``); :meth:`Layout.to_json` / :attr:`Layout.json_text` is the only layout JSON.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import json
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from sharding_core.cache import bounded_cache
from sharding_core.compat import sharded_type_text, spec_entries
from sharding_core.devices import DeviceSet
from sharding_core.errors import (
    BAD_DTYPE,
    BAD_SHAPE,
    DUPLICATE_AXIS,
    INDIVISIBLE,
    RANK_MISMATCH,
    TOO_LARGE,
    UNKNOWN_AXIS,
    ShardingError,
)
from sharding_core.mesh import MeshSpec, build_mesh
from sharding_core.spec import canonical_spec, parse_spec

MAX_RANK = 16
MAX_ARRAY_ELEMENTS = 2**36
"""Largest array a layout describes (64 Gi elements); nothing is allocated, but byte counts stay exact."""

INVALID_SPEC = "invalid_spec"

DTYPES: dict[str, int] = {
    "bool": 1,
    "int4": 1,
    "uint4": 1,
    "int8": 1,
    "uint8": 1,
    "float8_e4m3fn": 1,
    "float8_e5m2": 1,
    "int16": 2,
    "uint16": 2,
    "float16": 2,
    "bfloat16": 2,
    "int32": 4,
    "uint32": 4,
    "float32": 4,
    "int64": 8,
    "uint64": 8,
    "float64": 8,
    "complex64": 8,
    "complex128": 16,
}
"""Allowed dtypes and their item sizes in bytes (int4/uint4 are stored one per byte by XLA on CPU and GPU)."""

Bounds = tuple[tuple[int, int], ...]


@dataclasses.dataclass(frozen=True)
class Shard:
    device_id: int
    index: Bounds
    replica_id: int


@dataclasses.dataclass(frozen=True)
class Tile:
    """One distinct block of the array and the devices holding it (in mesh order)."""

    index: Bounds
    device_ids: tuple[int, ...]


@dataclasses.dataclass(frozen=True)
class DimSplit:
    """How one array dimension is split: ``dim 0: 16 / x(4) → 4``."""

    dim: int
    size: int
    axes: tuple[str, ...]
    axis_sizes: tuple[int, ...]
    blocks: int

    def describe(self) -> str:
        if self.blocks == 1 and not self.axes:
            return f"dim {self.dim}: {self.size} (not split)"
        if not self.axes:  # a sharding without mesh axes (single-device, GSPMD, pmap): blocks only
            return f"dim {self.dim}: {self.size} / {self.blocks} → {self.size // self.blocks}"
        axes = "·".join(f"{a}({s})" for a, s in zip(self.axes, self.axis_sizes, strict=True))
        return f"dim {self.dim}: {self.size} / {axes} → {self.size // self.blocks}"


@dataclasses.dataclass(frozen=True, eq=False)
class Layout:
    """Every device's block of the array, in device-assignment (for a mesh: mesh) order, as columns
    (numpy arrays, read-only). Build one with :meth:`from_named` or :meth:`from_sharding`."""

    devices_key: str | None  # the device-set string it was laid out on (None: a program's own devices)
    platform: str
    device_kind: str
    spec: str | None  # the PartitionSpec as JAX prints it (None: a sharding without one)
    typed: str | None  # jax.typeof of such an array as JAX prints it, float32[8@x,16@y] (None: no mesh)
    shape: tuple[int, ...]
    dtype: str
    itemsize: int
    mesh_shape: tuple[int, ...]  # empty without a mesh
    axis_names: tuple[str, ...]
    axis_types: tuple[str, ...]
    mesh_device_ids: list[Any] | None  # the mesh's device ids, nested in mesh order (Mesh.device_ids)
    shard_shape: tuple[int, ...]
    device_ids: np.ndarray  # (n,) in mesh order
    starts: np.ndarray  # (n, rank) inclusive index bounds
    stops: np.ndarray  # (n, rank) exclusive
    replica_ids: np.ndarray  # (n,) as JAX numbers replicas
    tile_ids: np.ndarray  # (n,) which distinct block each device holds, numbered by first appearance
    dim_splits: tuple[DimSplit, ...]
    replicated_axes: tuple[str, ...]
    unreduced_axes: tuple[str, ...]
    process_index: np.ndarray  # (n,)
    coords: np.ndarray | None  # (n, 3) or None when the devices have no coords
    core_on_chip: np.ndarray  # (n,)
    slice_index: np.ndarray | None  # (n,) for multi-slice sets

    # ---- constructors

    @staticmethod
    def from_named(
        devset: DeviceSet, mesh_spec: MeshSpec, spec: Any, shape: Sequence[int], dtype: str = "float32"
    ) -> Layout:
        """The layout of an array of ``shape`` and ``dtype`` under ``NamedSharding(mesh, spec)``.

        ``spec`` is a ``PartitionSpec`` or text to parse; every way it cannot shard ``shape`` on the
        mesh is a :class:`~sharding_core.errors.ShardingError` saying what to change. Cached: the
        same request returns the same immutable :class:`Layout`.
        """
        pspec = parse_spec(spec) if isinstance(spec, str) else spec
        return _named_layout(devset, mesh_spec, pspec, check_shape(tuple(shape)), dtype)

    @staticmethod
    def from_sharding(sharding: Any, shape: Sequence[int], dtype: Any, *, devices_key: str | None = None) -> Layout:
        """The layout of an array of ``shape`` and ``dtype`` under any ``jax.sharding.Sharding``
        (named, single-device, GSPMD, pmap), on real or simulated devices, exactly as JAX maps it.

        ``dtype`` is a NumPy/JAX dtype or its name. JAX's own exceptions pass through (the caller
        decides what a sharding JAX cannot lay out means).
        """
        import jax.numpy as jnp  # its dtypes (bfloat16, int4, float8_*) are known to NumPy once JAX is loaded

        dt = jnp.dtype(dtype)
        return _build(sharding, tuple(shape), dt.name, int(dt.itemsize), devices_key)

    # ---- derived figures

    @functools.cached_property
    def shards(self) -> tuple[Shard, ...]:
        bounds = np.stack([self.starts, self.stops], axis=-1).tolist()
        return tuple(
            Shard(int(d), tuple(tuple(b) for b in bs), int(r))
            for d, bs, r in zip(self.device_ids.tolist(), bounds, self.replica_ids.tolist(), strict=True)
        )

    @functools.cached_property
    def tiles(self) -> tuple[Tile, ...]:
        first = np.unique(self.tile_ids, return_index=True)[1]
        order = np.argsort(self.tile_ids, kind="stable")
        groups = np.split(self.device_ids[order], np.cumsum(np.bincount(self.tile_ids))[:-1])
        shards = self.shards
        return tuple(Tile(shards[f].index, tuple(int(i) for i in g)) for f, g in zip(first, groups, strict=True))

    @property
    def num_tiles(self) -> int:
        return int(self.tile_ids.max()) + 1 if len(self.tile_ids) else 0

    @property
    def replication_factor(self) -> int:
        return len(self.device_ids) // max(1, self.num_tiles)

    @property
    def bytes_per_device(self) -> int:
        return math.prod(self.shard_shape) * self.itemsize

    @property
    def logical_bytes(self) -> int:
        return math.prod(self.shape) * self.itemsize

    @property
    def total_bytes(self) -> int:
        return self.bytes_per_device * len(self.device_ids)

    # ---- the one serialiser

    @property
    def json(self) -> dict[str, Any]:
        """The JSON view as Python data (a fresh copy each call)."""
        return self.to_json()

    def to_json(self, *, context: bool = True) -> dict[str, Any]:
        """The layout as JSON data (a fresh copy each call).

        ``context=False`` leaves out what a snapshot keeps once in its own tables (``devices_key``,
        ``platform``, ``device_kind``, ``mesh``, ``devices``): the fields :data:`ARRAY_FIELDS`.
        """
        result: dict[str, Any] = json.loads(self.json_text if context else self.array_json_text)
        return result

    @functools.cached_property
    def json_text(self) -> str:
        """The whole JSON view (``/api/layout``'s answer), serialised once.

        ``shards`` is the contract's list; ``shards[i]["tile"]`` numbers the distinct blocks and
        ``tiles[k]`` lists the devices holding block ``k``; ``devices`` is columnar (one list per
        attribute, in mesh order). The per-device parts are formatted from flat integer lists in
        one ``%`` operation each: no per-device dicts or lists, so a 6144-device layout creates
        almost no garbage-collected objects (full GC passes over JAX's heap were the slow part).
        """
        coords = "null" if self.coords is None else _rows(self.coords, "[%d,%d,%d]")
        mesh = (
            {
                "shape": list(self.mesh_shape),
                "axis_names": list(self.axis_names),
                "axis_types": list(self.axis_types),
                "device_ids": self.mesh_device_ids,
            }
            if self.mesh_device_ids is not None
            else None
        )
        head = {
            "devices_key": self.devices_key,
            "platform": self.platform,
            "device_kind": self.device_kind,
            "mesh": mesh,
        }
        devices = (
            '{"id":' + _ints(self.device_ids) + ',"process_index":' + _ints(self.process_index)
            + ',"core_on_chip":' + _ints(self.core_on_chip) + ',"coords":' + coords
            + (',"slice_index":' + _ints(self.slice_index) if self.slice_index is not None else "")
            + "}"
        )  # fmt: skip
        text = json.dumps(head, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
        # the array's fields, serialised for this text only (not also kept as array_json_text: a cached layout
        # would hold its shards twice), unless they already were
        array = self.__dict__.get("array_json_text") or self._array_text()
        return text[:-1] + "," + array[1:-1] + ',"devices":' + devices + "}"

    @functools.cached_property
    def array_json_text(self) -> str:
        """The fields of one array's layout (:data:`ARRAY_FIELDS`), serialised once."""
        return self._array_text()

    def _array_text(self) -> str:
        n, rank = self.starts.shape
        index_fmt = ",".join(["[%d,%d]"] * rank)
        shard_cols = [self.device_ids[:, None], np.stack([self.starts, self.stops], axis=-1).reshape(n, 2 * rank)]
        shards = _rows(
            np.concatenate([*shard_cols, self.replica_ids[:, None], self.tile_ids[:, None]], axis=1),
            '{"device_id":%d,"index":[' + index_fmt + '],"replica_id":%d,"tile":%d}',
        )
        order = np.argsort(self.tile_ids, kind="stable")
        counts = np.bincount(self.tile_ids, minlength=self.num_tiles)
        if len(set(counts.tolist())) <= 1:  # NamedSharding: every block has the same number of holders
            per_tile = n // max(1, self.num_tiles)
            tiles = _rows(
                self.device_ids[order].reshape(self.num_tiles, per_tile), "[" + ",".join(["%d"] * per_tile) + "]"
            )
        else:
            groups = np.split(self.device_ids[order], np.cumsum(counts)[:-1])
            tiles = "[" + ",".join(_ints(g) for g in groups) + "]"
        head = {
            "spec": self.spec,
            "typed": self.typed,
            "shape": list(self.shape),
            "dtype": self.dtype,
            "itemsize": self.itemsize,
            "shard_shape": list(self.shard_shape),
            "dims": [
                {
                    "dim": d.dim,
                    "size": d.size,
                    "axes": list(d.axes),
                    "axis_sizes": list(d.axis_sizes),
                    "blocks": d.blocks,
                    "text": d.describe(),
                }
                for d in self.dim_splits
            ],
            "replication_factor": self.replication_factor,
            "replicated_axes": list(self.replicated_axes),
            "unreduced_axes": list(self.unreduced_axes),
            "bytes_per_device": self.bytes_per_device,
            "total_bytes": self.total_bytes,
            "logical_bytes": self.logical_bytes,
        }
        text = json.dumps(head, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
        return text[:-1] + ',"shards":' + shards + ',"tiles":' + tiles + "}"


ARRAY_FIELDS = (
    "spec",
    "typed",
    "shape",
    "dtype",
    "itemsize",
    "shard_shape",
    "dims",
    "replication_factor",
    "replicated_axes",
    "unreduced_axes",
    "bytes_per_device",
    "total_bytes",
    "logical_bytes",
    "shards",
    "tiles",
)
"""The fields of ``Layout.to_json(context=False)``: one array's layout without its device set's context."""


def _rows(table: np.ndarray, row_fmt: str) -> str:
    """``[row_fmt % row, ...]`` for an integer table, as one JSON array, in one format operation."""
    if len(table) == 0:
        return "[]"
    return "[" + ",".join([row_fmt] * len(table)) % tuple(table.ravel().tolist()) + "]"


def _ints(values: np.ndarray) -> str:
    return str(values.tolist()).replace(" ", "")  # list repr is C-fast and, for ints, valid JSON


def check_shape(shape: Sequence[int]) -> tuple[int, ...]:
    if len(shape) > MAX_RANK:
        raise ShardingError(TOO_LARGE, f"arrays have rank at most {MAX_RANK}, got rank {len(shape)}", limit=MAX_RANK)
    for d in shape:
        if isinstance(d, bool) or not isinstance(d, int) or d < 1:
            raise ShardingError(BAD_SHAPE, f"array dimensions must be positive integers, got {list(shape)}")
        if d > MAX_ARRAY_ELEMENTS:
            break
    n = 1
    for d in shape:
        n *= d
        if n > MAX_ARRAY_ELEMENTS:
            raise ShardingError(
                TOO_LARGE,
                f"the array {list(shape)} has more than {MAX_ARRAY_ELEMENTS} (2^36) elements",
                hint="describe a smaller array; the layout of a larger one is the same at any multiple",
                limit=MAX_ARRAY_ELEMENTS,
            )
    return tuple(shape)


def check_dtype(dtype: str) -> int:
    if dtype not in DTYPES:
        raise ShardingError(
            BAD_DTYPE, f"unknown dtype {str(dtype)[:32]!r}; allowed: {', '.join(DTYPES)}", hint="e.g. float32, bfloat16"
        )
    return DTYPES[dtype]


def _entry_axes(entry: Any) -> tuple[str, ...]:
    """The mesh axes of one spec entry (``None`` and ``P.UNCONSTRAINED`` name none)."""
    if entry is None:
        return ()
    if isinstance(entry, tuple):
        return tuple(a for a in entry if isinstance(a, str))
    return (entry,) if isinstance(entry, str) else ()


def _nearest_multiples(size: int, factor: int) -> list[int]:
    lower = (size // factor) * factor
    out = [m for m in (lower, lower + factor) if m > 0]
    return out


def check_spec(spec: Any, mesh_shape: dict[str, int], shape: tuple[int, ...]) -> None:
    """Explains, as data, every way ``spec`` cannot shard ``shape`` over the mesh."""
    names = list(mesh_shape)
    seen: dict[str, int] = {}
    entries = list(spec_entries(spec))
    for pos, entry in enumerate(entries):
        for axis in _entry_axes(entry):
            if axis is not None and not isinstance(axis, str):
                raise ShardingError(INVALID_SPEC, f"spec entry {pos} has a non-string axis {axis!r}")
            if axis not in mesh_shape:
                close = difflib.get_close_matches(str(axis), names, n=1)
                raise ShardingError(
                    UNKNOWN_AXIS,
                    f"axis {axis!r} in spec entry {pos} is not a mesh axis; the mesh axes are {tuple(names)}",
                    hint=f"did you mean {close[0]!r}?" if close else f"use one of {', '.join(map(repr, names))}",
                    axis=axis,
                )
            if axis in seen:
                raise ShardingError(
                    DUPLICATE_AXIS,
                    f"mesh axis {axis!r} is used by spec entries {seen[axis]} and {pos}; "
                    "a mesh axis can shard at most one array dimension",
                    hint="use each mesh axis once; a tuple ('x', 'y') shards one dimension over both",
                    axis=axis,
                )
            seen[axis] = pos
    for axis in getattr(spec, "unreduced", ()) or ():
        if axis not in mesh_shape:
            raise ShardingError(
                UNKNOWN_AXIS, f"unreduced axis {axis!r} is not a mesh axis; the mesh axes are {tuple(names)}", axis=axis
            )
    if len(entries) > len(shape):
        raise ShardingError(
            RANK_MISMATCH,
            f"{canonical_spec(spec)} has {len(entries)} entries but the array has rank {len(shape)} "
            f"(shape {list(shape)}); a spec has at most one entry per array dimension",
            hint="drop trailing entries or give a shape with more dimensions",
            spec_len=len(entries),
            rank=len(shape),
        )
    for dim, entry in enumerate(entries):
        axes = _entry_axes(entry)
        factor = math.prod(mesh_shape[a] for a in axes)
        if factor and shape[dim] % factor:
            parts = " x ".join(f"{a}({mesh_shape[a]})" for a in axes)
            near = _nearest_multiples(shape[dim], factor)
            fewer = [a for a in axes if shape[dim] % mesh_shape[a] == 0 and mesh_shape[a] > 1]
            hint = f"use a size divisible by {factor} ({' or '.join(map(str, near))})"
            if fewer and len(axes) > 1:
                hint += f", or shard dim {dim} over fewer axes ({fewer[0]!r} alone divides it)"
            raise ShardingError(
                INDIVISIBLE,
                f"dimension {dim} of size {shape[dim]} is split over mesh axes {parts} = {factor} ways, "
                f"but {shape[dim]} is not divisible by {factor}",
                hint=hint,
                dim=dim,
                size=shape[dim],
                axes=list(axes),
                factor=factor,
                suggestions=near,
            )


def _layout_bytes(layout: Layout) -> int:
    """What a cached layout holds: its columns, and its JSON text once serialised (estimated up front)."""
    arrays = (layout.device_ids, layout.starts, layout.stops, layout.replica_ids, layout.tile_ids,
              layout.process_index, layout.core_on_chip, layout.coords, layout.slice_index)  # fmt: skip
    n, rank = (int(d) for d in layout.starts.shape)
    return int(sum(a.nbytes for a in arrays if a is not None)) + n * (64 + 24 * rank) + 2048


@bounded_cache("layouts", _layout_bytes)
def _named_layout(devset: DeviceSet, mesh_spec: MeshSpec, pspec: Any, shape: tuple[int, ...], dtype: str) -> Layout:
    itemsize = check_dtype(dtype)
    return named_on_mesh(build_mesh(devset, mesh_spec), pspec, shape, dtype, itemsize, devset.key)


def named_on_mesh(
    mesh: Any, pspec: Any, shape: tuple[int, ...], dtype: str, itemsize: int, devices_key: str | None = None
) -> Layout:
    """The layout of ``NamedSharding(mesh, pspec)`` on a built mesh (simulated or real devices), with the
    checks and errors of ``/api/layout``: the spec against the mesh and shape, then JAX's own refusals."""
    from jax.sharding import NamedSharding

    check_spec(pspec, dict(mesh.shape), shape)
    try:
        sharding = NamedSharding(mesh, pspec)  # JAX's own validation (e.g. unreduced needs Explicit axes)
    except (ValueError, TypeError) as e:
        raise ShardingError(
            INVALID_SPEC, f"JAX rejects {canonical_spec(pspec)} on this mesh: {e}", hint=_refusal_hint(str(e))
        ) from None
    try:
        return _build(sharding, shape, dtype, itemsize, devices_key)
    except (AssertionError, ValueError, TypeError, NotImplementedError) as e:
        raise _jax_refuses(pspec, mesh, e) from None


def _devices_indices_map(sharding: Any, shape: tuple[int, ...]) -> Any:
    """``sharding.devices_indices_map(shape)``, without growing JAX's own cache of it.

    JAX memoises ``common_devices_indices_map`` for 4096 (sharding, shape) pairs; at 16384 devices
    each entry is megabytes of slices, so distinct large layouts would hold gigabytes for the life of
    the server. The layout cache above keeps what is worth keeping, bounded by bytes; this calls
    JAX's own function underneath its cache (for the shardings that use it).
    """
    from jax._src import sharding as jax_sharding

    common = jax_sharding.common_devices_indices_map
    uncached = getattr(common, "__wrapped__", None)
    if uncached is not None and type(sharding).devices_indices_map is jax_sharding.Sharding.devices_indices_map:
        return uncached(sharding, shape)
    return sharding.devices_indices_map(shape)


def _refusal_hint(message: str) -> str | None:
    if "UNCONSTRAINED" in message:
        return "P.UNCONSTRAINED leaves a dimension to the compiler, which only Auto axes allow: choose Auto axis types"
    return None


def _build(sharding: Any, shape: tuple[int, ...], dtype: str, itemsize: int, devices_key: str | None) -> Layout:
    """The one path from a JAX sharding to a :class:`Layout`: ``devices_indices_map`` and ``shard_shape``."""
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    named = isinstance(sharding, NamedSharding) and isinstance(sharding.mesh, Mesh)
    spec: Any = sharding.spec if named else None
    unreduced = tuple(sorted(str(a) for a in (getattr(spec, "unreduced", ()) or ()))) if named else ()
    index_sharding = sharding
    if named and (unreduced or getattr(spec, "reduced", None)):
        # devices_indices_map does not support unreduced axes; the index bounds are those of the spec
        # without them (devices along an unreduced axis hold partial sums of the same block).
        index_sharding = NamedSharding(sharding.mesh, PartitionSpec(*spec_entries(spec)))
    indices = _devices_indices_map(index_sharding, shape)
    try:
        even: tuple[int, ...] | None = tuple(int(d) for d in index_sharding.shard_shape(shape))
    except (ValueError, NotImplementedError, AttributeError):
        even = None  # uneven blocks: compared row by row, the shard shape is the first block's
    devs, starts, stops, tile_ids, replica_ids = index_columns(indices, shape, even if named else None)
    shard_shape = even if even is not None else tuple(int(v) for v in (stops - starts)[0]) if len(devs) else shape

    splits = []
    if named:
        mesh = sharding.mesh
        mesh_shape = dict(mesh.shape)
        entries = list(spec_entries(spec))
        used: set[str] = set()
        for dim, size in enumerate(shape):
            axes = _entry_axes(entries[dim]) if dim < len(entries) else ()
            used.update(axes)
            sizes = tuple(int(mesh_shape[a]) for a in axes)
            splits.append(DimSplit(dim, size, axes, sizes, math.prod(sizes)))
        replicated = tuple(
            str(a) for a in mesh.axis_names if a not in used and mesh_shape[a] > 1 and a not in unreduced
        )
        mesh_info: tuple[Any, ...] = (
            tuple(int(s) for s in mesh.devices.shape),
            tuple(str(a) for a in mesh.axis_names),
            tuple(str(t.name) for t in mesh.axis_types),
            mesh.device_ids.tolist(),
        )
    else:
        for dim, size in enumerate(shape):
            splits.append(DimSplit(dim, size, (), (), size // shard_shape[dim] if shard_shape[dim] else 1))
        replicated = ()
        mesh_info = ((), (), (), None)
    coords = [getattr(d, "coords", None) for d in devs]
    slices = [getattr(d, "slice_index", None) for d in devs]
    return Layout(
        devices_key=devices_key,
        platform=str(devs[0].platform),
        device_kind=str(devs[0].device_kind),
        spec=canonical_spec(spec) if named else None,
        # the sharding in the type, from JAX's own printer (unreduced and reduced axes included)
        typed=sharded_type_text(shape, dtype, sharding) if named else None,
        shape=shape,
        dtype=dtype,
        itemsize=itemsize,
        mesh_shape=mesh_info[0],
        axis_names=mesh_info[1],
        axis_types=mesh_info[2],
        mesh_device_ids=mesh_info[3],
        shard_shape=shard_shape,
        device_ids=_frozen(np.array([d.id for d in devs], dtype=np.int64)),
        starts=_frozen(starts),
        stops=_frozen(stops),
        replica_ids=_frozen(replica_ids),
        tile_ids=_frozen(tile_ids),
        dim_splits=tuple(splits),
        replicated_axes=replicated,
        unreduced_axes=unreduced,
        process_index=_frozen(np.array([d.process_index for d in devs], dtype=np.int64)),
        coords=_frozen(np.array(coords, dtype=np.int64)) if coords and coords[0] is not None else None,
        core_on_chip=_frozen(np.array([getattr(d, "core_on_chip", 0) or 0 for d in devs], dtype=np.int64)),
        slice_index=_frozen(np.array(slices, dtype=np.int64)) if slices and slices[0] is not None else None,
    )


def index_columns(
    indices: Any, shape: tuple[int, ...], shard_shape: Sequence[int] | None = None
) -> tuple[list[Any], np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """JAX's ``devices_indices_map`` as columns: (devices in map order, starts, stops, tile ids,
    replica ids), vectorised.

    Slices become bounds (None, a whole dimension, becomes 0 / its size). Tiles are the distinct
    blocks numbered by first appearance; replica ids are JAX's (``device_replica_id_map``: the k-th
    device in map order holding a block gets replica id k). ``shard_shape`` says the blocks are evenly
    sized (a NamedSharding of divisible dims), which names each block by one integer key; without it
    any sharding's blocks are compared row by row.
    """
    devs = list(indices)
    n, rank = len(devs), len(shape)
    dims = np.asarray(shape, dtype=np.int64)
    flat = [s for idx in indices.values() for s in idx]
    starts = np.array([s.start for s in flat], dtype=np.float64).reshape(n, rank)
    stops = np.array([s.stop for s in flat], dtype=np.float64).reshape(n, rank)
    starts = np.where(np.isnan(starts), 0, starts).astype(np.int64)
    stops = np.where(np.isnan(stops), dims, stops).astype(np.int64)
    if rank and n:
        if shard_shape is not None:
            block = starts // np.maximum(np.asarray(shard_shape, dtype=np.int64), 1)
            key = np.ravel_multi_index(block.T, tuple(int(b) for b in block.max(axis=0) + 1))
            _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
        else:
            bounds = np.concatenate([starts, stops], axis=1)
            _, first, inverse = np.unique(bounds, axis=0, return_index=True, return_inverse=True)
        rank_of_first = np.empty(len(first), dtype=np.int64)
        rank_of_first[np.argsort(first, kind="stable")] = np.arange(len(first))
        tile_ids = rank_of_first[inverse.reshape(-1)]
    else:
        tile_ids = np.zeros(n, dtype=np.int64)
    order = np.argsort(tile_ids, kind="stable")
    counts = np.bincount(tile_ids, minlength=1)
    group_start = np.concatenate([[0], np.cumsum(counts)[:-1]])
    replica_ids = np.empty(n, dtype=np.int64)
    replica_ids[order] = np.arange(n) - np.repeat(group_start, counts)
    return devs, starts, stops, tile_ids, replica_ids


def _jax_refuses(pspec: Any, mesh: Any, e: Exception) -> ShardingError:
    """JAX could not compute the layout: say why in the user's terms."""
    used = {a for entry in spec_entries(pspec) for a in _entry_axes(entry)}
    manual = [a for a, t in zip(mesh.axis_names, mesh.axis_types, strict=True) if t.name == "Manual" and a not in used]
    if manual:
        # Regression: an unused Manual axis made devices_indices_map assert, which became a 500.
        return ShardingError(
            INVALID_SPEC,
            f"JAX cannot give device indices for {canonical_spec(pspec)}: Manual mesh axes "
            f"{', '.join(map(repr, manual))} are not in the spec, and along a Manual axis (inside shard_map) "
            "an array varies per device rather than being replicated",
            hint="use the axis in the spec, or make it Auto or Explicit to see the layout",
            axes=manual,
        )
    return ShardingError(INVALID_SPEC, f"JAX cannot compute the layout of {canonical_spec(pspec)}: {e}")


def _frozen(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False
    return a
