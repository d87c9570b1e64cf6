"""Capture the shardings of the user's own program: :func:`capture` and :func:`inspect_jit`.

Runs in the user's process (their training script or notebook), on their real devices, and reads
every number from JAX itself: ``sharding.devices_indices_map(shape)`` for each device's block (the
same call ``/api/layout`` answers from), ``shard_shape``, ``is_fully_addressable``,
``sharding.device_set``, ``memory_kind`` and each device's ``process_index``; for ``inspect_jit`` the
compiled executable's ``input_shardings`` / ``out_info`` and its optimized HLO. The result is the
plain-data snapshot described in :mod:`sharding_core.snapshot` (JSON-serialisable, versioned).

Flax is optional: its boxes and nnx variables are recognised only when the program already imported
Flax (we look in ``sys.modules``), so capturing plain JAX never imports it.

Module named ``capturing`` (not ``capture``) so that ``sharding_core.capture`` stays the function.
"""

from __future__ import annotations

import math
import re
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from sharding_core.errors import TOO_LARGE, ShardingError
from sharding_core.layout import index_columns
from sharding_core.snapshot import FORMAT, MAX_SNAPSHOT_LEAVES, VERSION, Rule, check_rules, logical_to_mesh_axes

ROOT_PATH = "(root)"
"""The path of a tree that is itself one leaf."""


def capture(tree: Any, name: str | None = None, *, rules: Any = None, mesh: Any = None) -> dict[str, Any]:
    """A JSON-serialisable snapshot of every array-like leaf of ``tree``.

    Leaves: ``jax.Array`` (also ``jax.live_arrays()``), ``jax.ShapeDtypeStruct`` (with or without a
    sharding, e.g. an Orbax restore target or ``jax.eval_shape`` output), bare ``Sharding`` and
    ``PartitionSpec`` objects, NumPy arrays (host data), Flax linen ``Partitioned`` /
    ``LogicallyPartitioned`` boxes and Flax nnx variables (an nnx ``Module`` is captured through its
    variables). Optax states and other pytrees are walked like any pytree.

    ``rules``: the logical → mesh axis rules for logically named leaves whose box carries none
    (default: Flax's ``nn.get_logical_axis_rules()`` context, when Flax is loaded). ``mesh``: the mesh
    for boxes that name axes but hold no sharded value (default: the mesh of ``jax.set_mesh``).
    """
    import jax

    builder = _Builder(rules, mesh)
    flat, _ = jax.tree_util.tree_flatten_with_path(tree, is_leaf=_is_capture_leaf)
    if len(flat) > MAX_SNAPSHOT_LEAVES:
        raise ShardingError(
            TOO_LARGE,
            f"the tree has {len(flat)} leaves; a snapshot holds at most {MAX_SNAPSHOT_LEAVES}",
            hint="capture a subtree (e.g. the parameters without the optimizer state)",
            limit=MAX_SNAPSHOT_LEAVES,
        )
    for path, leaf in flat:
        text = jax.tree_util.keystr(path, simple=True, separator="/") or ROOT_PATH
        builder.add(text, leaf)
    return builder.snapshot(name if name is not None else "snapshot")


def inspect_jit(f: Callable[..., Any], *args: Any, **kwargs: Any) -> dict[str, Any]:
    """Lowers and compiles ``f`` for these arguments in this process and captures what XLA chose.

    ``f`` is a function or a ``jax.jit``-wrapped one (keep static arguments in its ``jax.jit``). The
    snapshot's leaves are ``inputs/args/...``, ``inputs/kwargs/...`` and ``outputs/...`` with the
    compiled executable's shardings; ``collectives`` lists every collective in the optimized HLO with
    its device groups (device ids), and ``jit`` the memory XLA plans per device. Nothing runs.
    """
    import jax

    jitted = f if hasattr(f, "lower") else jax.jit(f)
    lowered = jitted.lower(*args, **kwargs)
    compiled = lowered.compile()
    in_avals = lowered.in_avals
    in_shardings = compiled.input_shardings

    def planned(aval: Any, sharding: Any) -> Any:
        return jax.ShapeDtypeStruct(aval.shape, aval.dtype, sharding=sharding)

    inputs = jax.tree.map(planned, in_avals, in_shardings)
    tree = {"inputs": {"args": list(inputs[0]), "kwargs": inputs[1]}, "outputs": compiled.out_info}
    name = getattr(f, "__name__", None) or getattr(getattr(f, "__wrapped__", None), "__name__", None) or "jit"
    snap = capture(tree, f"jit({name})")
    assignment = _device_assignment([*jax.tree.leaves(in_shardings), *jax.tree.leaves(compiled.output_shardings)])
    snap["collectives"] = parse_collectives(compiled.as_text() or "", assignment)
    stats = compiled.memory_analysis()
    memory = None
    if stats is not None:
        fields = ("argument_size_in_bytes", "output_size_in_bytes", "alias_size_in_bytes", "temp_size_in_bytes")
        memory = {k: int(getattr(stats, k)) for k in fields if hasattr(stats, k)}
    donated = [bool(getattr(a, "donated", False)) for a in jax.tree.leaves(lowered.args_info)]
    snap["jit"] = {"function": name, "memory_per_device": memory, "donated_inputs": sum(donated)}
    return snap


def array_kind(x: Any) -> str:
    """What kind of array ``x`` is, in the terms of JAX's jax.Array migration guide.

    ``single_device`` (one device), ``sharded`` (several devices, all addressable by this process:
    fully addressable) or ``global`` (spans processes: ``is_fully_addressable`` is False).
    """
    if len(x.sharding.device_set) == 1:
        return "single_device"
    return "sharded" if x.is_fully_addressable else "global"


# ---- walking the tree ------------------------------------------------------------------------------


def _flax_box_types() -> tuple[type, ...]:
    meta = sys.modules.get("flax.core.meta")
    return (meta.AxisMetadata,) if meta is not None else ()


def _nnx_variable_types() -> tuple[type, ...]:
    nnx = sys.modules.get("flax.nnx")
    if nnx is None:
        return ()
    # Only Variable: in Flax 0.12 VariableState is a deprecated alias of it (and warns when looked up).
    variable = vars(nnx).get("Variable")
    return (variable,) if variable is not None else ()


def _is_capture_leaf(x: Any) -> bool:
    import jax

    if isinstance(x, (jax.sharding.Sharding, jax.ShapeDtypeStruct, jax.sharding.PartitionSpec)):
        return True
    boxes = _flax_box_types() + _nnx_variable_types()
    return bool(boxes) and isinstance(x, boxes)


class _Builder:
    """Collects leaves, deduplicating meshes and devices and caching layouts per (sharding, shape)."""

    def __init__(self, rules: Any, mesh: Any) -> None:
        import jax

        self.jax = jax
        if rules is None:
            spmd = sys.modules.get("flax.core.spmd")
            rules = spmd.get_logical_axis_rules() if spmd is not None else None
        self.rules: tuple[Rule, ...] | None = check_rules(rules) if rules else None
        self.mesh = mesh if mesh is not None else _ambient_mesh()
        self.leaves: list[dict[str, Any]] = []
        self.skipped = 0
        self.meshes: list[dict[str, Any]] = []
        self.mesh_index: dict[Any, int] = {}
        self.devices: dict[int, Any] = {}
        self.layouts: list[dict[str, Any]] = []
        self.layout_index: dict[tuple[Any, ...], int] = {}
        for d in jax.devices():
            self.devices[d.id] = d

    # -- leaves

    def add(self, path: str, x: Any) -> None:
        record = self.leaf(path, x)
        if record is None:
            self.skipped += 1
        else:
            self.leaves.append(record)

    def leaf(self, path: str, x: Any) -> dict[str, Any] | None:
        jax = self.jax
        boxes = _flax_box_types()
        if boxes and isinstance(x, boxes):
            return self.box(path, x)
        variables = _nnx_variable_types()
        if variables and isinstance(x, variables):
            return self.nnx_variable(path, x)
        if isinstance(x, jax.core.Tracer):
            rec = _record(path, "shape_dtype_struct", _type_name(x), tuple(x.shape), x.dtype)
            rec["note"] = "a traced value (captured inside jit): call capture outside the traced function"
            return rec
        if isinstance(x, jax.Array):
            return self.array(path, x)
        if isinstance(x, jax.ShapeDtypeStruct):
            rec = _record(path, "shape_dtype_struct", "jax.ShapeDtypeStruct", tuple(x.shape), x.dtype)
            if x.sharding is not None:
                self.fill(rec, x.sharding, tuple(x.shape), x.dtype)
            else:
                rec["note"] = "no sharding given"
            return rec
        if isinstance(x, jax.sharding.Sharding):
            rec = _record(path, "sharding", _type_name(x), None, None)
            self.fill(rec, x, None, None)
            return rec
        if isinstance(x, jax.sharding.PartitionSpec):
            rec = _record(path, "partition_spec", "jax.sharding.PartitionSpec", None, None)
            rec["spec"] = repr(x)
            return rec
        if isinstance(x, (np.ndarray, np.generic)):
            rec = _record(path, "host", _type_name(x), tuple(np.shape(x)), x.dtype)
            rec["note"] = "host (NumPy) data: on no device"
            return rec
        return None

    def array(self, path: str, x: Any) -> dict[str, Any]:
        rec = _record(path, "array", "jax.Array", tuple(x.shape), x.dtype)
        if x.is_deleted():
            rec["note"] = "deleted (donated or freed): its buffers are gone"
            return rec
        sharding = x.sharding
        self.fill(rec, sharding, tuple(x.shape), x.dtype)
        rec["fully_addressable"] = bool(x.is_fully_addressable)
        rec["array_kind"] = array_kind(x)
        if not rec["fully_addressable"]:
            rec["addressable_devices"] = sorted(int(d.id) for d in sharding.addressable_devices)
        return rec

    def fill(self, rec: dict[str, Any], sharding: Any, shape: tuple[int, ...] | None, dtype: Any) -> None:
        """Spec, mesh, memory kind, devices and (with a shape) the layout of ``sharding``."""
        jax = self.jax
        rec["sharding"] = type(sharding).__name__
        rec["memory_kind"] = getattr(sharding, "memory_kind", None)
        if isinstance(sharding, jax.sharding.NamedSharding):
            rec["spec"] = repr(sharding.spec)
            if not isinstance(sharding.mesh, jax.sharding.Mesh):
                rec["mesh_axes"] = dict(sharding.mesh.shape)
                rec["note"] = "an abstract mesh (no devices): the layout needs a concrete mesh"
                return
            rec["mesh"] = self.mesh_id(sharding.mesh)
        device_set = sharding.device_set
        rec["num_devices"] = len(device_set)
        for d in device_set:
            self.devices.setdefault(d.id, d)
        if shape is not None:
            try:
                rec["layout"] = self.layout(sharding, shape, dtype)
            except (ValueError, TypeError, NotImplementedError, AssertionError) as e:
                rec["note"] = f"JAX cannot give this sharding's device indices: {e}"

    def box(self, path: str, box: Any) -> dict[str, Any]:
        """A Flax linen ``Partitioned`` / ``LogicallyPartitioned`` box (or other ``AxisMetadata``)."""
        jax = self.jax
        names = getattr(box, "names", None)
        value = box.unbox(apply_constraint=False) if names is None else box.value
        rec = self.leaf(path, value) or _record(path, "host", _type_name(value), None, None)
        rec["box"] = type(box).__name__
        if names is None:
            return rec
        names = tuple(names)
        spmd = sys.modules.get("flax.linen.spmd")
        logical = spmd is not None and isinstance(box, spmd.LogicallyPartitioned)
        own_mesh = getattr(box, "mesh", None)
        if logical:
            box_rules = getattr(box, "rules", None)
            rec["logical_axes"] = list(names)
            rec["rules"] = _rules_json(check_rules(box_rules)) if box_rules else None
            # What Flax itself applies: the box's rules, else the logical_axis_rules context.
            effective = check_rules(box_rules) if box_rules else (self.rules or ())
            declared = jax.sharding.PartitionSpec(*logical_to_mesh_axes(names, effective))
        else:
            declared = jax.sharding.PartitionSpec(*names)
        rec["declared_spec"] = repr(declared)
        if rec.get("layout") is not None or rec["kind"] == "array":
            if rec.get("spec") is not None and rec["spec"] != rec["declared_spec"]:
                rec["note"] = f"the value is sharded {rec['spec']}, not as the box declares ({rec['declared_spec']})"
            if logical and rec.get("mesh") is None and own_mesh is not None:
                rec["mesh"] = self.mesh_id(own_mesh)
            return rec
        mesh = own_mesh if own_mesh is not None else self.mesh
        rec["spec"] = rec["declared_spec"]
        rec["note"] = None  # the value has no sharding of its own: the box's declaration is its layout
        if mesh is None:
            rec["note"] = "no mesh: give the box a mesh, call jax.set_mesh, or pass capture(..., mesh=mesh)"
            return rec
        rec["mesh"] = self.mesh_id(mesh)
        if rec["shape"] is None:
            return rec
        try:
            sharding = jax.sharding.NamedSharding(mesh, declared)
        except (ValueError, TypeError) as e:
            rec["note"] = f"JAX refuses {rec['declared_spec']} on this mesh: {e}"
            return rec
        self.fill(rec, sharding, tuple(rec["shape"]), np.dtype(rec["dtype"]) if rec["dtype"] else None)
        return rec

    def nnx_variable(self, path: str, var: Any) -> dict[str, Any]:
        """A Flax nnx variable: its value, and the sharding names and rules in its metadata."""
        meta = dict(var.get_metadata()) if hasattr(var, "get_metadata") else dict(getattr(var, "metadata", {}))
        value = var.get_value() if hasattr(var, "get_value") else var.value
        rec = self.leaf(path, value) or _record(path, "host", _type_name(value), None, None)
        rec["box"] = f"nnx.{type(var).__name__}"
        names = meta.get("out_sharding", meta.get("sharding_names", meta.get("sharding")))
        if not isinstance(names, (tuple, list)):
            return rec
        var_rules = meta.get("sharding_rules")
        mesh = meta.get("mesh") or (self.mesh_of(rec) if rec.get("mesh") is not None else self.mesh)
        axes = set(mesh.axis_names) if mesh is not None else set()
        if var_rules or any(isinstance(n, str) and n not in axes for n in names):
            rec["logical_axes"] = list(names)
            rec["rules"] = _rules_json(check_rules(var_rules)) if var_rules else None
        rec["declared_spec"] = repr(self.jax.sharding.PartitionSpec(*names))
        if rec.get("mesh") is None and mesh is not None:
            rec["mesh"] = self.mesh_id(mesh)
        return rec

    # -- meshes, devices, layouts

    def mesh_of(self, rec: dict[str, Any]) -> Any:
        return self.mesh_objects[rec["mesh"]]

    @property
    def mesh_objects(self) -> list[Any]:
        out: list[Any] = [None] * len(self.meshes)
        for mesh, i in self.mesh_index.items():
            out[i] = mesh
        return out

    def mesh_id(self, mesh: Any) -> int:
        found = self.mesh_index.get(mesh)
        if found is not None:
            return found
        ids = np.vectorize(lambda d: d.id, otypes=[np.int64])(mesh.devices)
        for d in mesh.devices.flat:
            self.devices.setdefault(d.id, d)
        self.mesh_index[mesh] = len(self.meshes)
        self.meshes.append(
            {
                "shape": [int(s) for s in mesh.devices.shape],
                "axis_names": [str(a) for a in mesh.axis_names],
                "axis_types": [str(t.name) for t in mesh.axis_types],
                "device_ids": ids.tolist(),
            }
        )
        return self.mesh_index[mesh]

    def layout(self, sharding: Any, shape: tuple[int, ...], dtype: Any) -> int:
        """The index of this layout in the snapshot's table (a model's leaves share a few dozen)."""
        key = (sharding, shape, str(dtype))
        found = self.layout_index.get(key)
        if found is None:
            found = self.layout_index[key] = len(self.layouts)
            self.layouts.append(sharding_layout(sharding, shape, dtype))
        return found

    def snapshot(self, name: str) -> dict[str, Any]:
        jax = self.jax
        devs = [self.devices[i] for i in sorted(self.devices)]
        first = devs[0]
        coords = [getattr(d, "coords", None) for d in devs]
        # Real TPU devices have 3-D coords; CPU and GPU devices none: one column for all or none.
        table = [[int(c) for c in xyz] for xyz in coords if xyz is not None]
        return {
            "format": FORMAT,
            "version": VERSION,
            "name": name,
            "created": time.time(),
            "jax_version": jax.__version__,
            "process_index": int(jax.process_index()),
            "process_count": int(jax.process_count()),
            "run": None,
            "platform": str(first.platform),
            "device_kind": str(first.device_kind),
            "devices": {
                "id": [int(d.id) for d in devs],
                "process_index": [int(d.process_index) for d in devs],
                "core_on_chip": [int(getattr(d, "core_on_chip", 0) or 0) for d in devs],
                "coords": table if len(table) == len(devs) else None,
            },
            "meshes": self.meshes,
            "rules": _rules_json(self.rules) if self.rules else None,
            "layouts": self.layouts,
            "leaves": self.leaves,
            "skipped": self.skipped,
            "collectives": None,
            "jit": None,
        }


def _record(path: str, kind: str, type_name: str, shape: tuple[int, ...] | None, dtype: Any) -> dict[str, Any]:
    return {
        "path": path,
        "kind": kind,
        "type": type_name,
        "box": None,
        "shape": [int(s) for s in shape] if shape is not None else None,
        "dtype": str(dtype) if dtype is not None else None,
        "sharding": None,
        "spec": None,
        "declared_spec": None,
        "logical_axes": None,
        "rules": None,
        "mesh": None,
        "mesh_axes": None,
        "memory_kind": None,
        "array_kind": None,
        "fully_addressable": None,
        "num_devices": None,
        "addressable_devices": None,
        "layout": None,
        "note": None,
    }


def _type_name(x: Any) -> str:
    import jax

    if isinstance(x, jax.Array) and not isinstance(x, jax.core.Tracer):
        return "jax.Array"  # not the implementation class (jaxlib's ArrayImpl)
    t = type(x)
    module = t.__module__.split(".")[0]
    return f"{module}.{t.__qualname__}" if module not in ("builtins",) else t.__qualname__


def _rules_json(rules: Sequence[Rule]) -> list[list[Any]]:
    return [[k, list(v) if isinstance(v, tuple) else v] for k, v in rules]


def _ambient_mesh() -> Any:
    """The concrete mesh of ``jax.set_mesh`` / ``with mesh:``, or None."""
    import jax

    mesh = jax.sharding.get_mesh()
    if mesh is not None and not mesh.empty:
        return mesh
    try:  # the legacy `with mesh:` context has no public getter
        from jax._src.mesh import thread_resources

        legacy = thread_resources.env.physical_mesh
        return None if legacy.empty else legacy
    except (ImportError, AttributeError):
        return None


def _itemsize(dtype: Any) -> int:
    size = getattr(dtype, "itemsize", None)
    return int(size) if size is not None else int(np.dtype(dtype).itemsize)


# ---- one array's layout, from JAX ------------------------------------------------------------------


def sharding_layout(sharding: Any, shape: tuple[int, ...], dtype: Any) -> dict[str, Any]:
    """The layout fields of ``/api/layout`` for ``sharding`` over an array of ``shape`` and ``dtype``.

    Any ``Sharding`` (named, single-device, GSPMD, pmap): each device's block is JAX's own
    ``devices_indices_map``; replica ids follow JAX's rule (``device_replica_id_map``: the k-th device
    in that map's order holding a block is replica k); tiles are the distinct blocks, numbered by
    first appearance, as in :class:`sharding_core.layout.Layout`.
    """
    import jax

    named = isinstance(sharding, jax.sharding.NamedSharding)
    unreduced = sorted(getattr(sharding.spec, "unreduced", ()) or ()) if named else []
    index_sharding = sharding
    if named and (unreduced or getattr(sharding.spec, "reduced", None)):
        # devices_indices_map has no unreduced axes; along them devices hold partial sums of one block.
        index_sharding = jax.sharding.NamedSharding(sharding.mesh, jax.sharding.PartitionSpec(*sharding.spec))
    indices = index_sharding.devices_indices_map(shape)
    devs, starts, stops, tile_ids, replica_ids = index_columns(indices, tuple(shape))
    n, rank = len(devs), len(shape)
    order = np.argsort(tile_ids, kind="stable")
    counts = np.bincount(tile_ids)
    ids = [int(d.id) for d in devs]
    sizes = (stops - starts).tolist()
    shard_shape = [int(s) for s in sizes[0]] if n else list(shape)
    itemsize = _itemsize(dtype)
    starts_l, stops_l, tiles_l, reps_l = starts.tolist(), stops.tolist(), tile_ids.tolist(), replica_ids.tolist()
    shards = [
        {
            "device_id": ids[k],
            "index": [[starts_l[k][d], stops_l[k][d]] for d in range(rank)],
            "replica_id": reps_l[k],
            "tile": tiles_l[k],
        }
        for k in range(n)
    ]
    tiles: list[list[int]] = [[] for _ in range(len(counts))]
    for k in order.tolist():
        tiles[tiles_l[k]].append(ids[k])
    split, replicated = _dim_splits(sharding, shape, shard_shape, named, unreduced)
    per_device = math.prod(shard_shape) * itemsize
    return {
        "spec": repr(sharding.spec) if named else None,
        "shape": list(shape),
        "dtype": str(dtype),
        "itemsize": itemsize,
        "shard_shape": shard_shape,
        "shards": shards,
        "tiles": tiles,
        "dims": split,
        "replication_factor": n // max(1, len(tiles)),
        "replicated_axes": replicated,
        "unreduced_axes": unreduced,
        "bytes_per_device": per_device,
        "total_bytes": per_device * n,
        "logical_bytes": math.prod(shape) * itemsize,
    }


def _dim_splits(
    sharding: Any, shape: tuple[int, ...], shard_shape: Sequence[int], named: bool, unreduced: Sequence[str]
) -> tuple[list[dict[str, Any]], list[str]]:
    """Per dimension, which mesh axes split it (as ``Layout.dims``); and the replicated mesh axes."""
    out: list[dict[str, Any]] = []
    used: set[str] = set()
    mesh_shape: Mapping[str, int] = dict(sharding.mesh.shape) if named else {}
    entries = list(sharding.spec) if named else []
    for dim, size in enumerate(shape):
        entry = entries[dim] if dim < len(entries) else None
        axes = tuple(a for a in (entry if isinstance(entry, tuple) else (entry,)) if isinstance(a, str))
        used.update(axes)
        axis_sizes = [int(mesh_shape[a]) for a in axes]
        blocks = math.prod(axis_sizes) if named else (size // shard_shape[dim] if shard_shape[dim] else 1)
        if named and not axes:
            text = f"dim {dim}: {size} (not split)"
        elif named:
            parts = "·".join(f"{a}({s})" for a, s in zip(axes, axis_sizes, strict=True))
            text = f"dim {dim}: {size} / {parts} → {size // blocks}"
        else:
            text = (
                f"dim {dim}: {size} (not split)" if blocks == 1 else f"dim {dim}: {size} / {blocks} → {size // blocks}"
            )
        out.append(
            {
                "dim": dim,
                "size": int(size),
                "axes": list(axes),
                "axis_sizes": axis_sizes,
                "blocks": int(blocks),
                "text": text,
            }
        )
    replicated = (
        [str(a) for a in sharding.mesh.axis_names if a not in used and mesh_shape[a] > 1 and a not in unreduced]
        if named
        else []
    )
    return out, replicated


# ---- collectives in the optimized HLO ------------------------------------------------------------

COLLECTIVE_OPS = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute")
_OP_RE = re.compile(
    r"^\s*(?:ROOT\s+)?%?(?P<name>[\w.\-]+)\s*=\s*(?P<shape>.*?)\s+"
    r"(?P<op>all-reduce|all-gather|reduce-scatter|all-to-all|collective-permute)(?:-start)?\("
)
_GROUPS_RE = re.compile(
    r"replica_groups=(\{[\d,{}\s]*\}|\[[\d,]+\]<=\[[\d,]+\](?:T\([\d,]+\))?|mesh\[[^\]]*\]\s*\{[^}]*\})"
)
_PAIRS_RE = re.compile(r"source_target_pairs=(\{[\d,{}\s]*\})")
_ARRAY_RE = re.compile(r"\b([a-z]+[0-9]*(?:e[0-9]m[0-9]\w*)?)\[([\d,]*)\]")
_BITS = {"pred": 8, "s4": 4, "u4": 4, "s8": 8, "u8": 8, "s16": 16, "u16": 16, "f16": 16, "bf16": 16, "s32": 32}
_BITS.update({"u32": 32, "f32": 32, "s64": 64, "u64": 64, "f64": 64, "c64": 64, "c128": 128})


def parse_collectives(hlo: str, device_assignment: Sequence[int] | None) -> list[dict[str, Any]]:
    """Every collective in optimized HLO text, with its groups as device ids.

    In an SPMD program the ids in ``replica_groups`` / ``source_target_pairs`` are partition ids
    (one replica); partition ``p`` runs on ``device_assignment[p]``. The three group notations are
    read: explicit ``{{0,1},{2,3}}``, iota ``[2,4]<=[4,2]T(1,0)`` and ``mesh['a'=2,'b'=4] {'a'}``
    (the devices of a group vary along the listed axes). Groups in a form not recognised are left
    ``null`` with the text in ``raw``.
    """
    out: list[dict[str, Any]] = []
    for line in hlo.splitlines():
        m = _OP_RE.match(line)
        if m is None:
            continue
        groups_text = _GROUPS_RE.search(line)
        pairs_text = _PAIRS_RE.search(line)
        raw = groups_text.group(1) if groups_text else (pairs_text.group(1) if pairs_text else None)
        groups = _groups(groups_text.group(1)) if groups_text else None
        if groups == [] and device_assignment is not None:
            groups = [list(range(len(device_assignment)))]
        pairs = _explicit(pairs_text.group(1)) if pairs_text else None

        def to_devices(table: list[list[int]] | None) -> list[list[int]] | None:
            if table is None or device_assignment is None:
                return table
            if any(p >= len(device_assignment) for row in table for p in row):
                return None
            return [[int(device_assignment[p]) for p in row] for row in table]

        out.append(
            {
                "op": m.group("op"),
                "name": m.group("name"),
                "shape": m.group("shape").strip(),
                "bytes": _shape_bytes(m.group("shape")),
                "groups": to_devices(groups) if m.group("op") != "collective-permute" else None,
                "pairs": to_devices(pairs) if m.group("op") == "collective-permute" else None,
                "raw": raw[:400] if raw else None,
            }
        )
    return out


def _explicit(text: str) -> list[list[int]]:
    return [[int(v) for v in g.split(",") if v.strip()] for g in re.findall(r"\{([\d,\s]*)\}", text[1:-1])]


def _groups(text: str) -> list[list[int]] | None:
    if text.startswith("{"):
        return _explicit(text)  # [] for {}: one group of every device, filled in by the caller
    if text.startswith("["):
        m = re.fullmatch(r"\[([\d,]+)\]<=\[([\d,]+)\](?:T\(([\d,]+)\))?", text)
        if m is None:
            return None
        out_shape = [int(v) for v in m.group(1).split(",")]
        iota_dims = [int(v) for v in m.group(2).split(",")]
        arr = np.arange(math.prod(iota_dims)).reshape(iota_dims)
        if m.group(3):
            arr = arr.transpose([int(v) for v in m.group(3).split(",")])
        table: list[list[int]] = arr.reshape(out_shape[0], -1).tolist()
        return table
    m = re.fullmatch(r"mesh\[([^\]]*)\]\s*\{([^}]*)\}", text)
    if m is None:
        return None
    axes = re.findall(r"'([^']+)'\s*=\s*(\d+)", m.group(1))
    wanted = re.findall(r"'([^']+)'", m.group(2))
    names = [a for a, _ in axes]
    if any(w not in names for w in wanted) or "(" in m.group(2):
        return None  # sub-axes such as 'x':(2)2 are not read
    sizes = [int(s) for _, s in axes]
    arr = np.arange(math.prod(sizes)).reshape(sizes)
    moved = [names.index(w) for w in wanted]
    rest = [i for i in range(len(names)) if i not in moved]
    groups: list[list[int]] = arr.transpose(rest + moved).reshape(-1, math.prod(sizes[i] for i in moved)).tolist()
    return groups


def _shape_bytes(shape: str) -> int | None:
    total = 0
    found = False
    for dtype, dims in _ARRAY_RE.findall(shape):
        bits = _BITS.get(dtype)
        if bits is None:
            continue
        found = True
        total += math.prod(int(d) for d in dims.split(",") if d) * bits // 8
    return total if found else None


def _device_assignment(shardings: Sequence[Any]) -> list[int] | None:
    """Device ids in partition order: what JAX handed XLA as the computation's device assignment."""
    for s in shardings:
        assignment = getattr(s, "_device_assignment", None)
        if assignment is not None and len(assignment) > 1:
            return [int(d.id) for d in assignment]
    return None
