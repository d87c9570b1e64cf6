"""Meshes over a :class:`~sharding_core.devices.DeviceSet`, built by JAX's own functions.

Device orders:

* ``make_mesh`` (default): exactly ``jax.make_mesh(shape, names, devices=devices)``; with
  ``allow_split_physical_axes`` set explicitly, ``mesh_utils.create_device_mesh`` with that flag
  (what ``jax.make_mesh``'s docstring points to for it).
* ``iota``: a plain reshape of the device list (``Mesh(np.array(devices).reshape(shape))``).
* ``devices``: an explicit list of device ids, in mesh order.
* ``hybrid``: ``mesh_utils.create_hybrid_device_mesh(shape // dcn_shape, dcn_shape, devices)`` for
  multi-slice TPU sets (granules are slices) and multi-host GPU sets (granules are processes).

Axis types default to what JAX's constructor does: ``jax.make_mesh``'s default for ``make_mesh``
(``Explicit`` from JAX 0.9, ``Auto`` in 0.8: :func:`sharding_core.compat.make_mesh_axis_type`),
``Auto`` for the others (``Mesh``'s default).
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from sharding_core.cache import bounded_cache
from sharding_core.compat import axis_types, make_mesh_axis_type
from sharding_core.devices import DeviceSet
from sharding_core.errors import BAD_AXIS_NAME, BAD_MESH, DUPLICATE_AXIS, MESH_UNPLACEABLE, ShardingError

MAX_MESH_AXES = 8
MAX_AXIS_NAME_CHARS = 64
ORDERS = ("make_mesh", "iota", "devices", "hybrid")
AXIS_TYPES = ("auto", "explicit", "manual")


@dataclasses.dataclass(frozen=True)
class MeshSpec:
    """What a user asks for: a hashable, validated description of a mesh."""

    shape: tuple[int, ...]
    axis_names: tuple[str, ...]
    axis_types: tuple[str, ...] | None = None
    order: str = "make_mesh"
    device_ids: tuple[int, ...] | None = None
    allow_split_physical_axes: bool | None = None
    dcn_shape: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        _check_axes(self.shape, self.axis_names)
        if self.order not in ORDERS:
            raise ShardingError(BAD_MESH, f"mesh order must be one of {', '.join(ORDERS)}, got {self.order!r}")
        if self.axis_types is not None:
            if len(self.axis_types) != len(self.shape):
                raise ShardingError(
                    BAD_MESH,
                    f"axis_types has {len(self.axis_types)} entries but the mesh has {len(self.shape)} axes",
                )
            for t in self.axis_types:
                if t.lower() not in AXIS_TYPES:
                    raise ShardingError(BAD_MESH, f"axis type must be one of Auto, Explicit, Manual; got {t!r}")
        if (self.order == "devices") != (self.device_ids is not None):
            raise ShardingError(BAD_MESH, "device_ids is given exactly when the mesh order is 'devices'")
        if (self.order == "hybrid") != (self.dcn_shape is not None):
            raise ShardingError(BAD_MESH, "dcn_shape is given exactly when the mesh order is 'hybrid'")
        if self.dcn_shape is not None and (
            len(self.dcn_shape) != len(self.shape)
            or any(d < 1 or s % d for s, d in zip(self.shape, self.dcn_shape, strict=False))
        ):
            raise ShardingError(
                BAD_MESH,
                f"dcn_shape {list(self.dcn_shape)} must have one positive entry per mesh axis, each dividing "
                f"the mesh shape {list(self.shape)}",
                hint="the mesh is ICI x DCN: shape[i] = ici[i] * dcn[i]",
            )

    @property
    def size(self) -> int:
        return math.prod(self.shape)


def check_axis_name(name: object) -> str:
    if not isinstance(name, str) or not name:
        raise ShardingError(BAD_AXIS_NAME, f"a mesh axis name must be a non-empty string, got {name!r}")
    if len(name) > MAX_AXIS_NAME_CHARS:
        raise ShardingError(
            BAD_AXIS_NAME,
            f"mesh axis name {name[:20]!r}... has {len(name)} characters; at most {MAX_AXIS_NAME_CHARS} are allowed",
        )
    if not name.isprintable():
        raise ShardingError(BAD_AXIS_NAME, f"mesh axis name {name!r} has non-printable characters")
    return name


def _check_axes(shape: Sequence[int], names: Sequence[str]) -> None:
    if not 1 <= len(shape) <= MAX_MESH_AXES:
        raise ShardingError(BAD_MESH, f"a mesh has 1 to {MAX_MESH_AXES} axes, got {len(shape)}")
    if len(names) != len(shape):
        raise ShardingError(
            BAD_MESH,
            f"the mesh shape {list(shape)} has {len(shape)} axes but {len(names)} axis names were given",
            hint="give one name per mesh axis, e.g. shape 2x4 with axes x,y",
        )
    for s in shape:
        if not isinstance(s, int) or s < 1:
            raise ShardingError(BAD_MESH, f"mesh axis sizes must be positive integers, got {list(shape)}")
    seen: set[str] = set()
    for n in names:
        check_axis_name(n)
        if n in seen:
            raise ShardingError(
                DUPLICATE_AXIS,
                f"mesh axis name {n!r} appears twice in {list(names)}; mesh axis names must be unique",
                axis=n,
            )
        seen.add(n)


def _axis_types(spec: MeshSpec, device: Any) -> tuple[Any, ...] | None:
    if spec.axis_types is not None:
        return axis_types(spec.axis_types)
    default = make_mesh_axis_type(device) if spec.order == "make_mesh" else "Auto"
    return axis_types((default,) * len(spec.shape))


def _shapes_that_fit(n: int, rank: int) -> list[str]:
    """A few mesh shapes of the same rank that ``n`` devices fill, for error hints."""
    out: list[str] = []

    def rec(left: int, prefix: list[int]) -> None:
        if len(out) >= 4:
            return
        if len(prefix) == rank - 1:
            out.append("x".join(map(str, [*prefix, left])))
            return
        for d in range(left, 0, -1):
            if left % d == 0:
                rec(left // d, [*prefix, d])

    rec(n, [])
    return out


def build_mesh(devset: DeviceSet, spec: MeshSpec) -> Any:
    """Builds (and caches per device set) the ``jax.sharding.Mesh`` for ``spec``."""
    return _build_mesh_cached(devset, spec)


@bounded_cache("meshes", lambda mesh: 2048 + 96 * int(mesh.devices.size))
def _build_mesh_cached(devset: DeviceSet, spec: MeshSpec) -> Any:
    from jax.experimental import mesh_utils
    from jax.sharding import Mesh

    n = spec.size
    total = len(devset)
    types = _axis_types(spec, devset.devices[0])
    if n > total:
        raise ShardingError(
            BAD_MESH,
            f"mesh {'x'.join(map(str, spec.shape))} needs {n} devices but {devset.key} has {total}",
            hint=f"shapes that use all {total} devices: {', '.join(_shapes_that_fit(total, len(spec.shape)))}",
        )
    if spec.order == "iota":
        arr = np.empty(n, dtype=object)
        arr[:] = devset.devices[:n]
        return Mesh(arr.reshape(spec.shape), spec.axis_names, axis_types=types)
    if spec.order == "devices":
        assert spec.device_ids is not None
        if len(spec.device_ids) != n:
            raise ShardingError(BAD_MESH, f"device_ids has {len(spec.device_ids)} ids but the mesh needs {n}")
        if len(set(spec.device_ids)) != n:
            raise ShardingError(BAD_MESH, "device_ids lists a device more than once")
        missing = [i for i in spec.device_ids if i not in devset.by_id]
        if missing:
            raise ShardingError(BAD_MESH, f"device ids {missing[:8]} are not in {devset.key}")
        arr = np.empty(n, dtype=object)
        arr[:] = [devset.by_id[i] for i in spec.device_ids]
        return Mesh(arr.reshape(spec.shape), spec.axis_names, axis_types=types)
    if spec.order == "hybrid":
        return _hybrid(devset, spec, types)
    # make_mesh
    try:
        if spec.allow_split_physical_axes is None:
            import jax

            mesh = jax.make_mesh(spec.shape, spec.axis_names, types, devices=devset.devices)
            return mesh
        devices = mesh_utils.create_device_mesh(
            spec.shape, devset.devices[:n], allow_split_physical_axes=spec.allow_split_physical_axes
        )
        return Mesh(devices, spec.axis_names, axis_types=types)
    except (ValueError, NotImplementedError, AssertionError) as e:
        raise _unplaceable(devset, spec, e) from None


# A device's repr inside JAX's messages, e.g. SimDevice(id=3, tpu, coords=(1, 0, 0), ...): one level of
# nested parentheses, no backtracking.
_DEVICE_REPR = re.compile(r"\w*Device\((?:[^()]|\([^()]*\))*\)")
_DEVICE_RUN = re.compile("\x00(?:, \x00)*")
MAX_JAX_ERROR_CHARS = 300


def _jax_text(e: Exception) -> str:
    """JAX's message, first line, with its lists of device reprs counted ("32 devices") and clipped:
    for a multi-slice set it lists every device (3,000+ characters) before saying anything."""
    text = _DEVICE_REPR.sub("\x00", str(e).split("\n")[0])
    text = _DEVICE_RUN.sub(lambda m: f"{m.group().count(chr(0))} devices", text)
    return text if len(text) <= MAX_JAX_ERROR_CHARS else text[: MAX_JAX_ERROR_CHARS - 1] + "…"


def _unplaceable(devset: DeviceSet, spec: MeshSpec, e: Exception) -> ShardingError:
    from jax.experimental import mesh_utils

    text = _jax_text(e)
    if devset.slices > 1:
        # a hybrid mesh: the first axis whose size the slice count divides spans the slices (DCN)
        at = next((i for i, s in enumerate(spec.shape) if s % devset.slices == 0), None)
        if at is None:
            return ShardingError(
                MESH_UNPLACEABLE,
                f"jax.make_mesh cannot place mesh {list(spec.shape)} across the {devset.slices} slices of "
                f"{devset.key}: a multi-slice set needs a hybrid mesh (ICI within a slice x DCN across slices)",
                hint=f"make one mesh axis a multiple of {devset.slices}, then use order 'hybrid' with that axis's "
                "dcn_shape entry set to the slice count (mesh_utils.create_hybrid_device_mesh)",
                jax_error=text,
            )
        dcn = [devset.slices if i == at else 1 for i in range(len(spec.shape))]
        return ShardingError(
            MESH_UNPLACEABLE,
            f"jax.make_mesh cannot place mesh {list(spec.shape)} across the {devset.slices} slices of "
            f"{devset.key}: a multi-slice set needs a hybrid mesh (ICI within a slice x DCN across slices)",
            hint=f"use order 'hybrid' with dcn_shape {dcn} (mesh_utils.create_hybrid_device_mesh): axis "
            f"{spec.axis_names[at]!r} then spans the slices; in the layout view, Device order 'hybrid ICI x DCN'",
            jax_error=text,
            suggest={"order": "hybrid", "dcn_shape": dcn},
        )
    ideas = []
    suggest: dict[str, Any] | None = None
    if not spec.allow_split_physical_axes:
        try:
            mesh_utils.create_device_mesh(spec.shape, devset.devices[: spec.size], allow_split_physical_axes=True)
            ideas.append("set allow_split_physical_axes (JAX then splits a physical axis across mesh axes)")
            suggest = {"allow_split_physical_axes": True}
        except (ValueError, NotImplementedError, AssertionError):
            ideas.append("allow_split_physical_axes does not help here either")
    if devset.topology is not None:
        topo = [t for t in devset.topology if t > 1]
        ideas.append(f"use mesh sizes that are products of the physical axes {'x'.join(map(str, topo))}")
    ideas.append("or use order 'iota' for a plain reshape of the device list")
    return ShardingError(
        MESH_UNPLACEABLE,
        f"JAX cannot place mesh {list(spec.shape)} on {devset.key}: {text}",
        hint="; ".join(ideas),
        jax_error=text,
        **({"suggest": suggest} if suggest else {}),
    )


def _hybrid(devset: DeviceSet, spec: MeshSpec, types: tuple[Any, ...] | None) -> Any:
    from jax.experimental import mesh_utils
    from jax.sharding import Mesh

    assert spec.dcn_shape is not None
    granules = devset.slices if devset.platform == "tpu" else devset.num_hosts
    if math.prod(spec.dcn_shape) != granules or spec.size != len(devset):
        what = "slices" if devset.platform == "tpu" else "hosts"
        raise ShardingError(
            BAD_MESH,
            f"a hybrid mesh over {devset.key} needs dcn_shape to multiply to its {granules} {what} "
            f"(got {list(spec.dcn_shape)}) and the mesh to use all {len(devset)} devices (got {spec.size})",
        )
    ici = tuple(s // d for s, d in zip(spec.shape, spec.dcn_shape, strict=True))
    try:
        devices = mesh_utils.create_hybrid_device_mesh(
            ici,
            spec.dcn_shape,
            devset.devices,
            process_is_granule=devset.platform != "tpu",
            allow_split_physical_axes=bool(spec.allow_split_physical_axes),
        )
    except (ValueError, NotImplementedError, AssertionError) as e:
        raise ShardingError(
            MESH_UNPLACEABLE,
            f"JAX cannot place hybrid mesh ici={list(ici)} x dcn={list(spec.dcn_shape)} on {devset.key}: "
            f"{_jax_text(e)}",
            hint="the ICI part must fit one slice (or host) and the DCN part must multiply to the granule count",
        ) from None
    return Mesh(devices, spec.axis_names, axis_types=types)
