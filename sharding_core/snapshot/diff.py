"""The diff of two snapshots: leaves whose sharding changed, and the bytes each device must receive."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from sharding_core.snapshot.format import blocks, layout_of, leaf_signature


def diff(a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, Any]:
    """Leaves whose sharding differs between two snapshots (matched by path), and the bytes that move.

    A leaf is ``changed`` when its spec, shape, dtype, mesh (axes and device order) or any device's
    block differs. ``bytes_to_move`` counts, for every device in the new layout, the bytes of its new
    block that it did not hold before (the overlap of old and new blocks on the same device stays):
    the data each device must receive to go from ``a`` to ``b``, whichever device sends it. An added
    leaf moves all its bytes, a removed one none.
    """
    a_leaves = {leaf["path"]: leaf for leaf in a["leaves"]}
    b_leaves = {leaf["path"]: leaf for leaf in b["leaves"]}
    rows: list[dict[str, Any]] = []
    counts = {"same": 0, "changed": 0, "added": 0, "removed": 0}
    moved_total = 0
    for path in [*a_leaves, *(p for p in b_leaves if p not in a_leaves)]:
        la, lb = a_leaves.get(path), b_leaves.get(path)
        if la is None:
            assert lb is not None
            yb = layout_of(b, lb)
            status, moved = "added", int(yb["total_bytes"]) if yb else 0
        elif lb is None:
            status, moved = "removed", 0
        else:
            status, moved = _compare(a, la, b, lb)
        counts[status] += 1
        moved_total += moved
        if status == "same":
            continue
        shown = lb if lb is not None else la
        assert shown is not None
        rows.append(
            {
                "path": path,
                "status": status,
                "shape": shown.get("shape"),
                "dtype": shown.get("dtype"),
                "a_spec": la.get("spec") if la else None,
                "b_spec": lb.get("spec") if lb else None,
                "a_mesh": _mesh_text(a, la) if la else None,
                "b_mesh": _mesh_text(b, lb) if lb else None,
                "bytes_to_move": moved,
            }
        )
    return {"summary": {**counts, "bytes_to_move": moved_total}, "leaves": rows}


def _mesh_of(snap: Mapping[str, Any], leaf: Mapping[str, Any]) -> Mapping[str, Any] | None:
    m = leaf.get("mesh")
    return snap["meshes"][m] if m is not None else None


def _mesh_text(snap: Mapping[str, Any], leaf: Mapping[str, Any]) -> str | None:
    mesh = _mesh_of(snap, leaf)
    if mesh is None:
        return None
    return " × ".join(f"{n}({s})" for n, s in zip(mesh["axis_names"], mesh["shape"], strict=True))


def _compare(
    a: Mapping[str, Any], la: Mapping[str, Any], b: Mapping[str, Any], lb: Mapping[str, Any]
) -> tuple[str, int]:
    ya, yb = layout_of(a, la), layout_of(b, lb)
    ma, mb = _mesh_of(a, la), _mesh_of(b, lb)
    same_mesh = (ma is None and mb is None) or (
        ma is not None
        and mb is not None
        and (ma["shape"], ma["axis_names"], ma["device_ids"]) == (mb["shape"], mb["axis_names"], mb["device_ids"])
    )
    same_meta = leaf_signature(la) == leaf_signature(lb) and same_mesh
    if yb is None:
        return ("same" if same_meta and ya is None else "changed"), 0
    if ya is None:
        return "changed", int(yb["total_bytes"])
    old, new = blocks(ya), blocks(yb)
    if same_meta and old == new:
        return "same", 0
    if list(la.get("shape") or []) != list(lb.get("shape") or []) or la.get("dtype") != lb.get("dtype"):
        return "changed", int(yb["total_bytes"])
    if old == new:
        return "changed", 0  # e.g. the same blocks under another mesh's axis names
    moved = 0
    for dev, block in new.items():
        need = math.prod(hi - lo for lo, hi in block)
        have = old.get(dev)
        overlap = (
            math.prod(max(0, min(h1, h2) - max(l1, l2)) for (l1, h1), (l2, h2) in zip(block, have, strict=True))
            if have is not None
            else 0
        )
        moved += (need - overlap) * int(yb["itemsize"])
    return "changed", moved
