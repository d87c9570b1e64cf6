"""The physical interconnect of a device set: ICI links between TPU chips, NVLink within GPU hosts.

Wraparound rules (which torus axes close into rings) are the hardware table's
(:func:`sharding_core.hardware.wraparound`, each rule with its source): v4, v5p and 7x wrap an axis only
when the slice is made of full 4x4x4 cubes; v5e and v6e only along an axis of 16 chips; v2 and v3 only
along a full pod side.

Cores of one chip are joined by an ``on_chip`` link. Multi-slice sets join slices over DCN (not
drawn as device links; ``slices`` lists them). GPU sets: every pair of GPUs within a host shares
NVLink (NVSwitch), hosts are joined by the data-centre network.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from sharding_core.cache import bounded_cache
from sharding_core.devices import DeviceSet, device_info
from sharding_core.errors import BAD_DEVICES, ShardingError
from sharding_core.hardware import wraparound as _wraps
from sharding_core.mesh import MeshSpec, build_mesh


def topology(devset: DeviceSet) -> dict[str, Any]:
    """``{"devices", "links", "hosts", "slices", "wraparound", "fabrics"}`` for a device set: fresh data
    each call (the server caches the encoded bytes; caching tens of thousands of small dicts here
    would only lengthen every GC pass)."""
    # platform and device_kind once at the top, not per device (6144 chips: ~300 KB less)
    devices = [
        {k: v for k, v in device_info(d).items() if k not in ("platform", "device_kind")} for d in devset.devices
    ]
    links: list[dict[str, Any]] = []
    wraps: tuple[bool, ...] = ()
    if devset.platform == "tpu" and devset.generation is not None and devset.topology is not None:
        topo = devset.topology
        wraps = _wraps(devset.generation.name, topo)
        # one representative device (core 0) per chip per slice
        chip: dict[tuple[int, tuple[int, ...]], list[Any]] = {}
        for d in devset.devices:
            key = (d.slice_index or 0, tuple(d.coords[: len(topo)]))
            chip.setdefault(key, []).append(d)
        for (s, c), devs in chip.items():
            devs.sort(key=lambda d: d.core_on_chip)
            for a, b in itertools.pairwise(devs):
                links.append({"a": a.id, "b": b.id, "wraparound": False, "kind": "on_chip"})
            for axis, size in enumerate(topo):
                if size == 1:
                    continue
                nxt = list(c)
                nxt[axis] += 1
                wrap = False
                if nxt[axis] == size:
                    if not wraps[axis] or size <= 2:
                        continue
                    nxt[axis] = 0
                    wrap = True
                other = chip[(s, tuple(nxt))]
                links.append({"a": devs[0].id, "b": other[0].id, "wraparound": wrap, "kind": "ici", "axis": axis})
    elif devset.platform == "gpu":
        by_host: dict[int, list[int]] = {}
        for d in devset.devices:
            by_host.setdefault(d.process_index, []).append(d.id)
        for ids in by_host.values():
            for i, a in enumerate(ids):
                for b in ids[i + 1 :]:
                    links.append({"a": a, "b": b, "wraparound": False, "kind": "nvlink"})
    hosts: dict[int, list[int]] = {}
    for d in devset.devices:
        hosts.setdefault(int(d.process_index), []).append(int(d.id))
    return {
        "devices_key": devset.key,
        "platform": devset.platform,
        "device_kind": devset.devices[0].device_kind,
        "topology": list(devset.topology) if devset.topology else None,
        "chips_per_host": list(devset.chips_per_host) if devset.chips_per_host else None,
        "wraparound": list(wraps),
        "devices": devices,
        "links": links,
        "hosts": [{"process_index": p, "device_ids": ids} for p, ids in sorted(hosts.items())],
        "slices": devset.slices,
        # What joins the ICI / NVLink islands: slices over the data-centre network (DCN), GPU hosts
        # over the cluster network. Every island reaches every other one; no per-device links.
        "fabrics": _fabrics(devset, hosts),
    }


def _fabrics(devset: DeviceSet, hosts: dict[int, list[int]]) -> list[dict[str, Any]]:
    if devset.slices > 1:
        by_slice: dict[int, list[int]] = {}
        for d in devset.devices:
            by_slice.setdefault(int(d.slice_index), []).append(int(d.id))
        return [{"kind": "dcn", "joins": "slices", "members": [by_slice[s] for s in sorted(by_slice)]}]
    if devset.platform == "gpu" and len(hosts) > 1:
        return [{"kind": "network", "joins": "hosts", "members": [hosts[p] for p in sorted(hosts)]}]
    return []


# ---------------------------------------------------------------- the mesh laid on the topology


@bounded_cache("topologies", lambda cols: 4096 + 120 * len(cols[0]))
def _columns(devset: DeviceSet) -> tuple[dict[int, int], np.ndarray, np.ndarray]:
    """Per device set, once: each id's position in the device list, and hosts and slices by position."""
    pos = {d.id: i for i, d in enumerate(devset.devices)}
    hosts = np.asarray([d.process_index for d in devset.devices], dtype=np.int64)
    slices = np.asarray([d.slice_index or 0 for d in devset.devices], dtype=np.int64)
    return pos, hosts, slices


@bounded_cache("topologies", lambda torus: 4096 + (torus[2].nbytes if torus is not None else 0))
def _torus(devset: DeviceSet) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(sizes, wraps, coords by position in devset.devices) for a TPU set; None otherwise."""
    if devset.platform != "tpu" or devset.topology is None or devset.generation is None:
        return None
    topo = devset.topology
    sizes = np.asarray(topo, dtype=np.int64)
    wraps = np.asarray(_wraps(devset.generation.name, topo), dtype=bool)
    coords = np.asarray([d.coords[: len(topo)] for d in devset.devices], dtype=np.int64)
    return sizes, wraps, coords


def hop_distance(devset: DeviceSet, a: Any, b: Any) -> int:
    """Shortest ICI path between two devices' chips, in links: per torus axis ``|Δ|``, or
    ``min(|Δ|, size - |Δ|)`` on an axis that wraps. Cores of one chip are 0 hops apart. GPUs: 0 for
    the same device, 1 within a host (NVLink through NVSwitch), and across hosts the network
    (reported as 1 hop with ``crosses_hosts``). Devices of different slices are joined by DCN
    (reported by ``crosses_slices``; the ICI hop count there is taken within each slice's torus)."""
    if devset.platform == "tpu" and devset.topology is not None and devset.generation is not None:
        wraps = _wraps(devset.generation.name, devset.topology)
        total = 0
        for axis, size in enumerate(devset.topology):
            d = abs(a.coords[axis] - b.coords[axis])
            total += min(d, size - d) if wraps[axis] else d
        return total
    return 0 if a.id == b.id else 1


def _axis_groups(ids: np.ndarray, axis: int) -> np.ndarray:
    """The groups a collective over mesh ``axis`` involves: (num_groups, axis size), ring order."""
    moved = np.moveaxis(ids, axis, -1)
    return moved.reshape(-1, ids.shape[axis])


def mesh_on_topology(devset: DeviceSet, mesh: Any) -> dict[str, Any]:
    """For each mesh axis: its device groups in ring order, the hops between consecutive members
    (the closing hop from last back to first included: a ring all-reduce uses it), max/mean hop,
    whether every group is a ring of nearest neighbours, and whether groups cross hosts or slices.

    Vectorised over all groups with numpy, so 6144-chip slices take milliseconds.
    """
    ids = np.asarray(mesh.device_ids, dtype=np.int64)
    pos, hosts, slices = _columns(devset)
    index = np.vectorize(pos.__getitem__, otypes=[np.int64])(ids)
    host, slc = hosts[index], slices[index]
    axes_out = []
    for axis, name in enumerate(mesh.axis_names):
        metrics = ring_metrics(
            devset,
            _axis_groups(ids, axis),
            _axis_groups(index, axis),
            _axis_groups(host, axis),
            _axis_groups(slc, axis),
        )
        axes_out.append({"name": name, **metrics})
    return {"mesh": {"shape": list(ids.shape), "axis_names": list(mesh.axis_names), "device_ids": ids.tolist()},
            "axes": axes_out}  # fmt: skip


def ring_metrics(
    devset: DeviceSet, groups: np.ndarray, g_index: np.ndarray, g_host: np.ndarray, g_slice: np.ndarray
) -> dict[str, Any]:
    """Hops and ring verdicts for equal-sized device groups, each in ring order: ``groups`` holds
    device ids (groups, n), the others each member's position in ``devset.devices``, host and slice."""
    torus = _torus(devset)
    n = groups.shape[1]
    if n == 1:
        hops = np.zeros((groups.shape[0], 0), dtype=np.int64)
    elif torus is not None:
        sizes, wraps, coords = torus
        c = coords[g_index]  # (groups, n, dims)
        delta = np.abs(c - np.roll(c, -1, axis=1))  # member i -> i+1, and the closing last -> first
        delta = np.where(wraps, np.minimum(delta, sizes - delta), delta)
        hops = delta.sum(axis=-1)
    else:
        hops = (groups != np.roll(groups, -1, axis=1)).astype(np.int64)
    if n == 2:
        hops = hops[:, :1]  # a pair is one link, not a ring of two
    crosses_hosts = (g_host != g_host[:, :1]).any(axis=1)
    crosses_slices = (g_slice != g_slice[:, :1]).any(axis=1)
    max_hop = int(hops.max()) if hops.size else 0
    return {
        "size": n,
        "groups": groups.tolist(),
        "hops": hops.tolist(),
        "max_hop": max_hop,
        "mean_hop": float(hops.mean()) if hops.size else 0.0,
        # a ring of nearest neighbours: every consecutive pair (closing one included) is at most
        # one link apart; cores of one chip count as 0 hops
        "is_ring": bool(hops.size == 0 or max_hop <= 1),
        "groups_not_rings": int((hops > 1).any(axis=1).sum()) if hops.size else 0,
        "crosses_hosts": bool(crosses_hosts.any()),
        "groups_crossing_hosts": int(crosses_hosts.sum()),
        "crosses_slices": bool(crosses_slices.any()),
        "interconnect": _interconnect(devset, bool(crosses_hosts.any()), bool(crosses_slices.any())),
    }


def groups_on_topology(devset: DeviceSet, groups: list[list[int]], name: str = "groups") -> dict[str, Any]:
    """:func:`ring_metrics` for arbitrary device groups, e.g. a collective's replica groups from the
    compiled HLO, each in the order the collective visits them."""
    if not groups or len({len(g) for g in groups}) != 1 or not groups[0]:
        raise ShardingError(BAD_DEVICES, "groups must be a non-empty list of equally long, non-empty id lists")
    pos, hosts, slices = _columns(devset)
    missing = sorted({i for g in groups for i in g if i not in pos})
    if missing:
        raise ShardingError(BAD_DEVICES, f"device ids {missing[:8]} are not in {devset.key}", ids=missing[:8])
    ids = np.asarray(groups, dtype=np.int64)
    index = np.vectorize(pos.__getitem__, otypes=[np.int64])(ids)
    return {"name": name, **ring_metrics(devset, ids, index, hosts[index], slices[index])}


def _interconnect(devset: DeviceSet, hosts: bool, slices: bool) -> str:
    if slices:
        return "dcn"
    if devset.platform == "tpu":
        return "ici"
    if devset.platform == "gpu":
        return "network" if hosts else "nvlink"
    return "host"


def compare_orderings(devset: DeviceSet, shape: tuple[int, ...], names: tuple[str, ...]) -> list[dict[str, Any]]:
    """``make_mesh``, ``iota`` and split-physical-axes orderings side by side (each a summary per
    axis, or the error JAX gives), so a user sees why ``jax.make_mesh`` orders devices as it does."""
    out: list[dict[str, Any]] = []
    for label, spec in (
        ("make_mesh", MeshSpec(shape, names)),
        ("iota", MeshSpec(shape, names, order="iota")),
        ("split", MeshSpec(shape, names, allow_split_physical_axes=True)),
    ):
        try:
            result = mesh_on_topology(devset, build_mesh(devset, spec))
        except ShardingError as e:
            out.append({"order": label, "error": e.to_dict()})
            continue
        out.append(
            {
                "order": label,
                "device_ids": result["mesh"]["device_ids"],
                "axes": [
                    {k: a[k] for k in ("name", "max_hop", "mean_hop", "is_ring", "groups_not_rings", "crosses_hosts")}
                    for a in result["axes"]
                ],
            }
        )
    return out
