"""What-if: a snapshot's logically named leaves re-laid out by JAX under other logical → mesh rules."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sharding_core.cache import bounded_cache
from sharding_core.devices import DeviceSet, SimDevice
from sharding_core.errors import ShardingError
from sharding_core.layout import Layout
from sharding_core.mesh import MeshSpec
from sharding_core.snapshot.format import blocks, flatten_ids, layout_of
from sharding_core.snapshot.memory import memory
from sharding_core.snapshot.rules import check_rules, logical_to_mesh_axes, rules_json
from sharding_core.spec import canonical_spec


def whatif(snap: Mapping[str, Any], rules: Any) -> dict[str, Any]:
    """Every logically named leaf re-laid out under other logical → mesh ``rules``, and the new memory.

    The new spec follows :func:`logical_to_mesh_axes` (Flax's semantics); the new layout is JAX's
    ``NamedSharding(mesh, spec).devices_indices_map(shape)`` on the snapshot's own mesh, rebuilt from
    simulated devices with the same ids, order and hosts (the server never has the user's devices).
    A leaf the new rules cannot shard (an unknown mesh axis, an indivisible dimension) gets its error
    and keeps its captured layout in the memory sums. Layouts are listed once and referred to by index.
    """
    from jax.sharding import PartitionSpec

    checked = check_rules(rules)
    devset = _devset(snap)
    rows: list[dict[str, Any]] = []
    layouts: list[dict[str, Any]] = []
    seen: dict[int, int] = {}
    overrides: dict[int, Mapping[str, Any]] = {}
    for i in logical_leaves(snap):
        leaf = snap["leaves"][i]
        row: dict[str, Any] = {"index": i, "path": leaf["path"], "spec": None, "layout": None, "error": None}
        try:
            pspec = PartitionSpec(*logical_to_mesh_axes(leaf["logical_axes"], checked))
            row["spec"] = canonical_spec(pspec)
            mesh = snap["meshes"][leaf["mesh"]]
            mesh_spec = MeshSpec(
                tuple(mesh["shape"]),
                tuple(mesh["axis_names"]),
                axis_types=tuple(t.lower() for t in mesh["axis_types"]),
                order="devices",
                device_ids=tuple(flatten_ids(mesh["device_ids"], mesh["shape"], "mesh")),
            )
            layout = Layout.from_named(devset, mesh_spec, pspec, leaf["shape"], leaf["dtype"] or "")
            if id(layout) not in seen:  # from_named returns the same cached object for the same input
                seen[id(layout)] = len(layouts)
                layouts.append(layout.to_json(context=False))
            row["layout"] = seen[id(layout)]
            overrides[i] = layouts[row["layout"]]
        except ShardingError as e:
            row["error"] = e.to_dict()
        old = layout_of(snap, leaf)
        new = overrides.get(i)
        row["changed"] = new is not None and (
            row["spec"] != leaf.get("spec") or old is None or blocks(old) != blocks(new)
        )
        rows.append(row)
    return {
        "rules": rules_json(checked),
        "layouts": layouts,
        "leaves": rows,
        "changed": sum(1 for r in rows if r["changed"]),
        "errors": sum(1 for r in rows if r["error"] is not None),
        "memory": memory(snap, overrides),
    }


def _devset(snap: Mapping[str, Any]) -> Any:
    d = snap["devices"]
    coords = d.get("coords")
    key = (
        str(snap.get("platform") or "cpu"),
        str(snap.get("device_kind") or "cpu"),
        tuple(d["id"]),
        tuple(d["process_index"]),
        tuple(d["core_on_chip"]),
        tuple(tuple(c) for c in coords) if coords else None,
    )
    return _devset_cached(key)


@bounded_cache("device_sets", lambda devset: 1024 + 360 * len(devset))  # devices (as devices.py) and the key
def _devset_cached(key: tuple[Any, ...]) -> Any:
    """Simulated devices with a snapshot's ids, hosts and coords (cached, so JAX's caches hit)."""
    platform, kind, ids, procs, cores, coords = key
    devices = tuple(
        SimDevice(i, platform, kind, p, tuple(coords[k]) if coords else None, c)
        for k, (i, p, c) in enumerate(zip(ids, procs, cores, strict=True))
    )
    return DeviceSet(f"snapshot:{platform}:{len(ids)}", platform, devices)


def logical_leaves(snap: Mapping[str, Any]) -> list[int]:
    """Indices of leaves whose dimensions carry Flax logical names and that a what-if can re-lay out."""
    return [
        i
        for i, leaf in enumerate(snap["leaves"])
        if leaf.get("logical_axes") is not None and leaf.get("shape") is not None and leaf.get("mesh") is not None
    ]
