"""``shardscope.link(x)``: the dashboard's exact address for an array, from a script or a cell.

JAX's repr of a sharding names neither its devices nor the array's shape, so a pasted
``print(x.sharding)`` can only be laid out on a device set that fits. :func:`link` loses nothing: it
reads the array itself — the device set its devices belong to (``cpu:N``, ``tpu:GEN:TOPO`` with its
slices, ``gpu:KIND:HxG``, as ``parse_devices`` builds them with the same ids, coordinates and hosts),
the mesh's shape, axis names and axis types, its devices in mesh order (an explicit device order, so the
page's mesh is the program's whatever the constructor was), the spec, the shape and the dtype — and
writes the layout explorer's address at that state. Nothing is sent anywhere; the server need not be
running when the address is made.

Standard library and JAX only (no server packages), like :mod:`sharding_core.publishing`.
"""

from __future__ import annotations

import os
import urllib.parse
from typing import Any

from sharding_core.devices import GPU_KINDS, TPU_GENERATIONS
from sharding_core.errors import BAD_SHAPE, ShardingError
from sharding_core.spec import canonical_spec

DEFAULT_URL = "http://127.0.0.1:8000"
URL_ENV = "SHARDSCOPE_URL"
UNLINKABLE = "unlinkable"

LAYOUT_STATE: dict[str, str | int] = {
    "devices": "tpu:v5e:4x4",
    "slices": 1,
    "mesh": "4x4",
    "axes": "x,y",
    "order": "make_mesh",
    "types": "",
    "spec": "P('x', None)",
    "shape": "16,16",
    "dtype": "float32",
    "dims": "",
    "axis": "",
    "groups": "",
    "glabel": "",
    "split": "",
    "dcn": "",
    "ids": "",
    "rules": "",
    "reshard": "",
}
"""The layout explorer's URL state — its query's fields and their defaults — written here once: :func:`link` writes
it and the page reads it (``frontend/js/model/state.js``, through the generated ``frontend/js/lib/vocabulary.js``);
``tests/test_linking.py`` checks that the page reads what this writes."""


def link(obj: Any, url: str | None = None, *, shape: Any = None, dtype: Any = None) -> Any:
    """The layout explorer's address showing ``obj`` exactly as it is laid out.

    ``obj``: a ``jax.Array``, a ``jax.ShapeDtypeStruct`` with a sharding, or a ``NamedSharding`` /
    ``SingleDeviceSharding`` with ``shape=`` (and ``dtype=``, default float32); or any pytree of those,
    which gives ``{leaf path: address}``. ``url``: the dashboard (default ``$SHARDSCOPE_URL``, else
    http://127.0.0.1:8000).
    """
    import jax

    base = (url if url is not None else os.environ.get(URL_ENV, DEFAULT_URL)).rstrip("/")
    if isinstance(obj, jax.sharding.Sharding):
        if shape is None:
            raise ShardingError(BAD_SHAPE, "a Sharding alone has no layout: give the array's shape=")
        return _address(base, obj, tuple(int(d) for d in shape), _dtype_name(dtype or "float32"))
    if _is_array(obj):
        return _address(base, obj.sharding, tuple(obj.shape), _dtype_name(obj.dtype))
    flat, _ = jax.tree_util.tree_flatten_with_path(obj, is_leaf=_is_array)
    out = {}
    for path, leaf in flat:
        if _is_array(leaf):
            out[jax.tree_util.keystr(path, simple=True, separator="/") or "."] = _address(
                base, leaf.sharding, tuple(leaf.shape), _dtype_name(leaf.dtype)
            )
    return out


def _is_array(x: Any) -> bool:
    import jax

    return isinstance(x, (jax.Array, jax.ShapeDtypeStruct)) and getattr(x, "sharding", None) is not None


def _dtype_name(dtype: Any) -> str:
    import jax.numpy as jnp

    return str(jnp.dtype(dtype).name)


def layout_state(sharding: Any, shape: tuple[int, ...], dtype: str) -> dict[str, str]:
    """The layout explorer's state (its query's fields) for ``sharding`` of an array ``shape``, ``dtype``."""
    import jax

    if isinstance(sharding, jax.sharding.SingleDeviceSharding):
        (device,) = sharding.device_set
        devices, slices = device_set(device, [device])
        state = {"devices": devices, "mesh": "1", "axes": "x", "order": "single", "ids": str(device.id), "spec": "P()"}
    elif isinstance(sharding, jax.sharding.NamedSharding):
        mesh = sharding.mesh
        ids = [int(d.id) for d in mesh.devices.flat]
        devices, slices = device_set(mesh.devices.flat[0], list(mesh.devices.flat))
        types = {str(t).rsplit(".", 1)[-1].lower() for t in getattr(mesh, "axis_types", ())}
        state = {
            "devices": devices,
            "mesh": "x".join(str(s) for s in mesh.devices.shape),
            "axes": ",".join(str(a) for a in mesh.axis_names),
            "order": "devices",
            "ids": ",".join(map(str, ids)),
            "spec": _spec_text(sharding.spec),
        }
        if len(types) == 1 and types <= {"auto", "explicit"}:
            state["types"] = types.pop()
    else:
        raise ShardingError(
            UNLINKABLE,
            f"a {type(sharding).__name__} has no mesh and spec the layout explorer can show",
            hint="the dashboard shows NamedSharding and SingleDeviceSharding layouts",
        )
    state.update(shape=",".join(map(str, shape)), dtype=dtype)
    if slices > 1:
        state["slices"] = str(slices)
    assert set(state) <= set(LAYOUT_STATE), sorted(set(state) - set(LAYOUT_STATE))
    return state


def _address(base: str, sharding: Any, shape: tuple[int, ...], dtype: str) -> str:
    return f"{base}/?{urllib.parse.urlencode(layout_state(sharding, shape, dtype))}"


def _spec_text(spec: Any) -> str:
    return str(canonical_spec(spec))


def device_set(device: Any, known: list[Any]) -> tuple[str, int]:
    """The device-set string (and slice count) of the program's devices of ``device``'s platform (its
    client's; else ``known``, the devices the mesh was made of): the set ``parse_devices`` builds with the
    same ids (and coordinates, hosts and slices)."""
    platform = str(device.platform)
    everything = [d for d in _client_devices(device) or known if d.platform == platform] or [device]
    if platform == "cpu":
        return f"cpu:{max(d.id for d in everything) + 1}", 1
    if platform == "gpu":
        kind = next((name for name, (text, _) in GPU_KINDS.items() if text == device.device_kind), None)
        hosts = {d.process_index for d in everything}
        if kind is not None:
            return f"gpu:{kind}:{len(hosts)}x{len(everything) // max(1, len(hosts))}", 1
    if platform == "tpu":
        gen = next((g for g in TPU_GENERATIONS.values() if g.device_kind == device.device_kind), None)
        coords = [tuple(d.coords) for d in everything if getattr(d, "coords", None) is not None]
        if gen is not None and coords:
            slices = len({getattr(d, "slice_index", 0) or 0 for d in everything})
            bounds = [max(c[k] for c in coords) + 1 for k in range(3)]
            topo = bounds[: gen.dims] if gen.dims == 2 else bounds
            return f"tpu:{gen.name}:{'x'.join(map(str, topo))}", slices
    raise ShardingError(
        UNLINKABLE,
        f"no device set names these {platform} devices ({device.device_kind})",
        hint="the dashboard's device sets are cpu:N, gpu:KIND:HxG and tpu:GEN:TOPO",
    )


def _client_devices(device: Any) -> list[Any]:
    """Every device of ``device``'s client (a real or compile-only one); none for a simulated device."""
    client = getattr(device, "client", None)
    try:
        return list(client.devices()) if client is not None else []
    except (AttributeError, RuntimeError):
        return []
