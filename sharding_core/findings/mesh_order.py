"""Arguments that jit refuses beside the mesh of ``jax.set_mesh``: the MaxText #2863 shape.

Under ``jax.set_mesh(mesh)`` jit (and every eager op, which is a jit) compares each *committed* argument's
devices, in order, with the context mesh's: an array on a mesh over the same devices in another order, or on
other devices (committed to one device by ``jax.device_put(x, device)``), is refused with "Received
incompatible devices for jitted computation ... and jit's context mesh with device ids [...]". MaxText #2863
met it when ``jax.set_mesh`` replaced ``with mesh:`` (which jit does not check) and its context mesh's device
order ``[0, 1, 2, 3, 7, 6, 5, 4]`` (a TPU ring) was not the arguments'.

:func:`mesh_order_findings` reads what jit compares — the mesh of ``jax.set_mesh``
(:func:`sharding_core.compat.context_mesh`), each leaf's device order (:func:`~sharding_core.compat.device_order`)
and whether it is committed (:func:`~sharding_core.compat.committed`) — and returns one finding per distinct
device order that differs, in the contract's shape, with what to change.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import Any

from sharding_core.compat import committed, context_mesh, device_order
from sharding_core.spec import canonical_spec

MESH_DEVICE_ORDER = "mesh_device_order"
"""The same devices as the context mesh, in another order."""
MESH_DEVICES = "mesh_devices"
"""Other devices than the context mesh's (e.g. an array committed to one device)."""

MAX_PATHS_NAMED = 3
"""Leaves named in a finding's text (the rest are counted)."""

_LIBRARY_MARKERS = (
    "/sharding_core/",
    "/shardscope/",
    "-packages/jax/",  # site-packages, dist-packages
    "-packages/jaxlib/",
    "-packages/flax/",
    "/contextlib.py",
)


def user_line() -> str | None:
    """``file:line`` of the innermost frame outside shardscope, JAX and the standard library's contextlib:
    the user's call (``capture(...)``, ``inspect_jit(...)``)."""
    frame = sys._getframe(1)
    while frame is not None:
        name = frame.f_code.co_filename
        if not any(m in name.replace("\\", "/") for m in _LIBRARY_MARKERS):
            return f"{name}:{frame.f_lineno}"
        frame = frame.f_back  # type: ignore[assignment]
    return None


def mesh_order_findings(leaves: Iterable[tuple[str, Any]], *, source: str | None = None) -> list[dict[str, Any]]:
    """Findings for the committed leaves (``(path, value)``: arrays, ``ShapeDtypeStruct``s with a sharding)
    whose devices, in order, are not those of the ``jax.set_mesh`` mesh in effect; [] without one."""
    mesh = context_mesh()
    if mesh is None:
        return []
    want = tuple(int(i) for i in mesh.device_ids.flat)
    groups: dict[tuple[int, ...], list[tuple[str, Any]]] = {}
    for path, value in leaves:
        sharding = getattr(value, "sharding", None)
        if sharding is None or not _is_placed(value) or not committed(value):
            continue
        order = device_order(sharding)
        if order is not None and order != want:
            groups.setdefault(order, []).append((path, sharding))
    where = source if source is not None else user_line()
    return [_finding(order, found, want, where) for order, found in groups.items()]


def _is_placed(value: Any) -> bool:
    import jax

    if isinstance(value, jax.core.Tracer):
        return False
    if isinstance(value, jax.Array):
        return not value.is_deleted()
    return isinstance(value, jax.ShapeDtypeStruct)


def _finding(
    order: tuple[int, ...], found: list[tuple[str, Any]], want: tuple[int, ...], source: str | None
) -> dict[str, Any]:
    paths = [p for p, _ in found]
    named = ", ".join(paths[:MAX_PATHS_NAMED]) + (
        f" and {len(paths) - MAX_PATHS_NAMED} more" if len(paths) > MAX_PATHS_NAMED else ""
    )
    first = found[0][1]
    spec = canonical_spec(first.spec) if hasattr(first, "spec") and hasattr(first, "mesh") else "P()"
    same_devices = sorted(order) == sorted(want)
    refused = (
        "jit refuses such arguments, and so does every op run under that context "
        '("Received incompatible devices for jitted computation", as in MaxText #2863)'
    )
    if same_devices:
        kind = MESH_DEVICE_ORDER
        text = (
            f"{named} sit{'s' if len(paths) == 1 else ''} on a mesh over the same {len(want)} devices as the mesh of "
            f"jax.set_mesh but in another order ({_ids(order)}, the context mesh {_ids(want)}): {refused}."
        )
        fix = (
            "Use one mesh for both: pass the arguments' own mesh to jax.set_mesh, or put the arguments on the "
            f"context mesh, jax.device_put(x, NamedSharding(jax.sharding.get_mesh(), {spec}))"
        )
    else:
        kind = MESH_DEVICES
        where = f"device {order[0]} alone" if len(order) == 1 else f"devices {_ids(order)}"
        text = (
            f"{named} {'is' if len(paths) == 1 else 'are'} committed to {where}, but the mesh of jax.set_mesh "
            f"spans devices {_ids(want)}: {refused}."
        )
        fix = (
            "Put the arguments on the context mesh, jax.device_put(x, NamedSharding(jax.sharding.get_mesh(), "
            f"{spec})), or leave them uncommitted (made without a device: jnp.asarray(x), not jax.device_put(x, d))"
        )
    return {
        "kind": kind,
        "source": source,
        "bytes_per_step": 0,  # nothing moves per step: the program does not run at all
        "text": text,
        "fix": {
            "text": fix,
            "line": source,
            "leaf": paths[0],
            "spec": spec,
            "bytes_after": 0,
            "expected_seconds_after": None,
            "peak_after": None,
        },
    }


def _ids(order: tuple[int, ...]) -> str:
    shown = ", ".join(str(i) for i in order[:16])
    return f"[{shown}{', ...' if len(order) > 16 else ''}]"
