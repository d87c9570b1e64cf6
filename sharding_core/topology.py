"""The physical interconnect of a device set: ICI links between TPU chips, NVLink within GPU hosts.

Wraparound rules (which torus axes close into rings), per generation:

* v4, v5p, 7x: 3-D torus; an axis wraps only when the slice is made of full 4x4x4 cubes (every
  side a multiple of 4). Source: Cloud TPU docs, "TPU v4" / "TPU v5p" system architecture — slices
  smaller than a cube are meshes without wraparound; 7x is taken to follow the same cube rule.
* v5e, v6e: 2-D; an axis wraps only when it spans 16 chips (the full pod side). Source: Cloud TPU
  docs, "TPU v5e" / "TPU v6e" system architecture (wraparound only on 16-chip axes).
* v2, v3: 2-D torus; an axis wraps only when it spans the full pod side (16 for v2, 32 for v3).

Cores of one chip are joined by an ``on_chip`` link. Multi-slice sets join slices over DCN (not
drawn as device links; ``slices`` lists them). GPU sets: every pair of GPUs within a host shares
NVLink (NVSwitch), hosts are joined by the data-centre network.
"""

from __future__ import annotations

import functools
import itertools
from typing import Any

from sharding_core.devices import DeviceSet, device_info

_POD_SIDE = {"v2": 16, "v3": 32}


def _wraps(gen_name: str, topo: tuple[int, ...]) -> tuple[bool, ...]:
    if gen_name in ("v4", "v5p", "7x"):
        cube = all(d % 4 == 0 for d in topo)
        return tuple(cube and d > 2 for d in topo)
    if gen_name in ("v5e", "v6e"):
        return tuple(d == 16 for d in topo)
    side = _POD_SIDE.get(gen_name, 0)
    return tuple(d == side and d > 2 for d in topo)


@functools.lru_cache(maxsize=32)
def topology(devset: DeviceSet) -> dict[str, Any]:
    """``{"devices", "links", "hosts", "slices", "wraparound"}`` for a device set (cached)."""
    devices = [device_info(d) for d in devset.devices]
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
    }
