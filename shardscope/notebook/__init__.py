"""``shardscope.show(obj)``: the dashboard's grid and tables inline in a notebook, with no server.

In a notebook kernel (Jupyter, JupyterLab, Notebook 7, Colab, VS Code; marimo) :func:`show` returns
an anywidget (:mod:`shardscope.notebook.widget`) whose front end is the dashboard's own modules
bundled into one ES module (:mod:`shardscope.notebook.bundle`). Anywhere else (a terminal, a
script, IPython in a terminal) it prints the text layout, as ``shardscope preview`` does.

What it shows (:func:`view_of` turns ``obj`` and the options into a :class:`View`):

* a ``jax.Array`` (or a ``jax.ShapeDtypeStruct`` with a sharding), a ``Sharding`` with ``shape=``, or
  a :class:`~sharding_core.layout.Layout`: its grid (tiles, labels, rulers, hover card, zoom), the
  mesh table and the summary; on a named mesh, a PartitionSpec box previews other specs;
* a hypothetical layout: ``devices=`` (``"tpu:v5e:16x16"``, ``"cpu:8"``, ``"local"``: simulated
  devices, none needed) or a concrete ``jax.sharding.Mesh``, with ``mesh=``, ``spec=`` and
  ``shape=``; the PartitionSpec box recomputes the layout as you type, in the kernel, with
  :meth:`Layout.from_named <sharding_core.layout.Layout.from_named>` (what ``/api/layout`` answers
  from), errors as that API gives them;
* a snapshot (:func:`sharding_core.capture`, :func:`sharding_core.inspect_jit`) or any other pytree
  (captured): the leaf table with its filter, per-device memory, a leaf's grid, and an
  ``inspect_jit`` capture's collectives with their groups on the mesh.

The payload is the layout JSON (:meth:`Layout.to_json`: devices as columns) or the snapshot (layouts,
meshes and devices listed once, referred to by index), sent as UTF-8 bytes. ``import sharding_core``
stays light: nothing here is imported before :func:`show` is called, and IPython or anywidget only
when the caller is in a notebook.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from sharding_core.errors import BAD_MESH, BAD_SHAPE, ShardingError

TEXT_MAX_LEAVES = 200
"""Leaves printed by the text form of a snapshot (the rest are counted)."""


@dataclass
class View:
    """What the widget draws, as data, and what it can do in the kernel.

    ``kind`` is ``"layout"`` (``layout``: a :class:`Layout`) or ``"snapshot"`` (``snapshot``: a
    snapshot dict). ``relayout(spec_text, shape, dtype)`` recomputes the layout for another spec, array
    shape or dtype on the same mesh (the widget's spec bar: the widget then replaces ``layout`` and
    ``spec_text``); ``publish(view, url, token, timeout)`` sends the view as it is now to a dashboard
    and returns the link.
    """

    kind: str
    name: str
    layout: Any = None
    snapshot: dict[str, Any] | None = None
    spec_text: str | None = None
    relayout: Callable[[str, tuple[int, ...], str], Any] | None = None
    publish: Callable[[View, str, str | None, float], str] | None = None
    dims: Sequence[int] | None = None

    def payload(self) -> bytes:
        """The JSON the widget's front end reads, as UTF-8 bytes (a binary buffer: no string escaping)."""
        head: dict[str, Any] = {"kind": self.kind, "name": self.name, "dims": list(self.dims) if self.dims else None}
        if self.kind == "layout":
            head["editable"] = self.relayout is not None
            head["spec_text"] = self.spec_text
            body = self.layout.json_text
            key = "layout"
        else:
            from sharding_core.snapshot.memory import memory

            snap = self.snapshot or {}
            body = json.dumps({**snap, "memory": memory(snap)}, separators=(",", ":"), allow_nan=False)
            key = "snapshot"
        text = json.dumps(head, separators=(",", ":"), allow_nan=False)
        return bytes((text[:-1] + f',"{key}":' + body + "}").encode())

    def text(self) -> str:
        """The view as terminal text: the layout as ``shardscope preview`` prints it, or a snapshot's leaves."""
        if self.kind == "layout":
            import dataclasses

            from sharding_core.render import render_text

            layout = self.layout
            if layout.devices_key is None:  # a program's own devices: say which
                layout = dataclasses.replace(
                    layout, devices_key=f"{len(layout.device_ids)} {layout.device_kind} devices"
                )
            return render_text(layout, dims=self.dims, summary=True)
        return snapshot_text(self.snapshot or {})


# ---- show ---------------------------------------------------------------------------------------------


def show(
    obj: Any = None,
    name: str | None = None,
    url: str | None = None,
    *,
    spec: Any = None,
    shape: Sequence[int] | None = None,
    dtype: Any = None,
    mesh: Any = None,
    axes: str | Sequence[str] | None = None,
    devices: str | None = None,
    order: str = "make_mesh",
    slices: int = 1,
    dims: Sequence[int] | None = None,
    rules: Any = None,
    token: str | None = None,
    timeout: float = 60.0,
) -> Any:
    """Shows ``obj`` inline in a notebook (returns the widget), or prints its text layout elsewhere.

    ``obj``: a ``jax.Array``, a ``Sharding`` (with ``shape=``), a ``Layout``, a snapshot from
    ``capture`` / ``inspect_jit`` (or ``search``'s answer: its pick's plan and the front), or any pytree;
    or nothing (or a ``PartitionSpec``) with ``devices=`` / ``mesh=`` / ``spec=`` / ``shape=`` for a
    hypothetical layout. ``mesh``: a
    ``jax.sharding.Mesh``, a ``MeshSpec``, ``{"x": 2, "y": 4}``, or ``"2x4"`` / ``(2, 4)`` with
    ``axes="x,y"``; ``devices`` defaults to ``"local"`` (this process's devices). ``dims``: the two
    array dimensions the grid shows (rank > 2). ``url`` (default ``$SHARDSCOPE_URL``): a dashboard
    the widget's "Publish" button sends the view to (none: no button); ``token`` as for ``publish``.
    """
    view = view_of(
        obj, name=name, spec=spec, shape=shape, dtype=dtype, mesh=mesh, axes=axes, devices=devices,
        order=order, slices=slices, dims=dims, rules=rules,
    )  # fmt: skip
    if not in_notebook():
        sys.stdout.write(view.text())
        return None
    try:
        from shardscope.notebook.widget import ShardscopeWidget
    except ImportError:
        sys.stdout.write(view.text())
        print("(shardscope.show: `pip install 'shardscope[notebook]'` for the interactive widget)", file=sys.stderr)
        return None
    dashboard = url if url is not None else os.environ.get("SHARDSCOPE_URL", "")
    return ShardscopeWidget(view, dashboard=dashboard, token=token, timeout=timeout)


def in_notebook() -> bool:
    """Whether the caller runs in a notebook kernel that can show widgets (IPython's kernel — Jupyter,
    Colab, VS Code — or marimo). Never imports IPython or marimo: a kernel has loaded them already."""
    ipython = sys.modules.get("IPython")
    if ipython is not None:
        shell = ipython.get_ipython()
        if shell is not None and "IPKernelApp" in getattr(shell, "config", {}):
            return True
        zmq = sys.modules.get("ipykernel.zmqshell")
        if shell is not None and zmq is not None and isinstance(shell, zmq.ZMQInteractiveShell):
            return True
    marimo = sys.modules.get("marimo")
    if marimo is not None:
        try:
            return bool(marimo.running_in_notebook())
        except (AttributeError, RuntimeError):
            return False
    return False


# ---- what to show -------------------------------------------------------------------------------------


def view_of(
    obj: Any,
    *,
    name: str | None = None,
    spec: Any = None,
    shape: Sequence[int] | None = None,
    dtype: Any = None,
    mesh: Any = None,
    axes: str | Sequence[str] | None = None,
    devices: str | None = None,
    order: str = "make_mesh",
    slices: int = 1,
    dims: Sequence[int] | None = None,
    rules: Any = None,
) -> View:
    """The :class:`View` of ``obj`` and the options (see :func:`show`)."""
    from sharding_core.layout import Layout
    from sharding_core.program.upgrade import upgrade_snapshot
    from sharding_core.publishing import is_snapshot

    if isinstance(obj, dict) and {"candidates", "front", "pick"} <= obj.keys():  # sharding_core.search's answer
        plan = (obj["pick"] or {}).get("plan")
        if not is_snapshot(plan):
            raise ShardingError(
                BAD_SHAPE,
                "this search has no pick to show: no candidate that was compiled fits",
                hint="its 'closest' says what to change; or give a larger budget",
            )
        obj = plan  # the pick's plan, which draws the search's front beside it
    if is_snapshot(obj):
        snap = upgrade_snapshot(obj)  # a snapshot saved before the program report reads as today's
        return View("snapshot", name or str(snap.get("name") or "snapshot"), snapshot=snap, publish=_publisher(snap))
    if isinstance(obj, Layout):
        return View("layout", name or (obj.spec or "layout"), layout=obj, spec_text=obj.spec, dims=dims)

    import jax

    if isinstance(obj, str) and devices is None and (mesh is not None or spec is not None):
        devices, obj = obj, None  # show("tpu:v5e:4x4", mesh=..., spec=..., shape=...)
    if isinstance(obj, jax.sharding.PartitionSpec) and spec is None:
        spec, obj = obj, None
    if isinstance(obj, jax.sharding.Mesh) and mesh is None:
        mesh, obj = obj, None
    if obj is None:
        if spec is None or shape is None or mesh is None:
            raise ShardingError(
                BAD_SHAPE,
                "a hypothetical layout needs mesh=, spec= and shape= (and devices=, default 'local')",
                hint="e.g. show(devices='tpu:v5e:4x4', mesh='4x4', axes='x,y', spec=\"P('x', None)\", shape=(16, 16))",
            )
        return _hypothetical(
            name, spec, shape, dtype or "float32", mesh, axes, devices, order, slices, dims
        )  # fmt: skip
    if isinstance(obj, (jax.Array, jax.ShapeDtypeStruct)) and not isinstance(obj, jax.core.Tracer):
        sharding = obj.sharding
        if sharding is None:
            raise ShardingError(BAD_SHAPE, "this ShapeDtypeStruct has no sharding to show", hint="give it sharding=")
        if isinstance(obj, jax.Array) and obj.is_deleted():
            raise ShardingError(BAD_SHAPE, "this array was deleted (donated or freed): its buffers are gone")
        return _of_sharding(name or _describe(obj), sharding, tuple(obj.shape), obj.dtype, dims, obj)
    if isinstance(obj, jax.sharding.Sharding):
        if shape is None:
            raise ShardingError(
                BAD_SHAPE,
                "a Sharding alone has no layout: give the array's shape=",
                hint="e.g. show(sharding, shape=(8, 16))",
            )
        return _of_sharding(name or type(obj).__name__, obj, tuple(shape), dtype or "float32", dims, None)
    from sharding_core.capturing import capture

    # unnamed: what it is (TrainState, dict, ...), never the name of the function that showed it
    snap = capture(obj, name or type(obj).__name__, rules=rules, mesh=mesh)
    return View("snapshot", snap["name"], snapshot=snap, publish=_publisher(snap))


def _describe(x: Any) -> str:
    return f"{type(x).__name__ if not hasattr(x, 'is_deleted') else 'Array'}{list(x.shape)} {x.dtype}"


def _of_sharding(name: str, sharding: Any, shape: tuple[int, ...], dtype: Any, dims: Any, value: Any) -> View:
    import jax

    from sharding_core.layout import Layout

    layout = Layout.from_sharding(sharding, shape, dtype)
    relayout = None
    if isinstance(sharding, jax.sharding.NamedSharding) and isinstance(sharding.mesh, jax.sharding.Mesh):
        concrete = sharding.mesh

        def relayout(text: str, new_shape: tuple[int, ...], new_dtype: str) -> Any:
            return layout_on_mesh(concrete, text, new_shape, new_dtype)

    original = value if value is not None else jax.ShapeDtypeStruct(shape, layout.dtype, sharding=sharding)

    def publish(view: View, url: str, token: str | None, timeout: float) -> str:
        if view.layout is layout:
            return _send(original, name, url, token, timeout)
        # the spec bar changed it: what is published is the array planned as it is on show
        now = view.layout
        planned = jax.ShapeDtypeStruct(
            tuple(now.shape), now.dtype, sharding=jax.sharding.NamedSharding(sharding.mesh, layout_spec(now))
        )
        return _send(planned, name, url, token, timeout)

    return View("layout", name, layout=layout, spec_text=layout.spec, relayout=relayout, dims=dims, publish=publish)


def _hypothetical(
    name: str | None,
    spec: Any,
    shape: Sequence[int],
    dtype: Any,
    mesh: Any,
    axes: str | Sequence[str] | None,
    devices: str | None,
    order: str,
    slices: int,
    dims: Any,
) -> View:
    import jax
    import numpy as np

    from sharding_core.devices import parse_devices
    from sharding_core.layout import Layout
    from sharding_core.spec import canonical_spec

    dtype_name = np.dtype(dtype).name if not isinstance(dtype, str) else dtype
    spec_text = spec if isinstance(spec, str) else canonical_spec(spec)
    shape_t = tuple(int(d) for d in shape)
    if isinstance(mesh, jax.sharding.Mesh):
        concrete = mesh

        def relayout(text: str, new_shape: tuple[int, ...], new_dtype: str) -> Any:
            return layout_on_mesh(concrete, text, new_shape, new_dtype)

        layout = relayout(spec_text, shape_t, dtype_name)
        title = name or f"{layout.spec} on {' × '.join(f'{a}({s})' for a, s in concrete.shape.items())}"

        def publish_planned(view: View, url: str, token: str | None, timeout: float) -> str:
            now = view.layout
            sharding = jax.sharding.NamedSharding(concrete, layout_spec(now))
            return _send(
                jax.ShapeDtypeStruct(tuple(now.shape), now.dtype, sharding=sharding), title, url, token, timeout
            )

        return View("layout", title, layout=layout, spec_text=spec_text, relayout=relayout, dims=dims,
                    publish=publish_planned)  # fmt: skip
    mesh_spec = mesh_spec_of(mesh, axes, order)
    devset = parse_devices(devices or "local", slices=slices)

    def relayout_named(text: str, new_shape: tuple[int, ...], new_dtype: str) -> Any:
        return Layout.from_named(devset, mesh_spec, text, new_shape, new_dtype)

    layout = relayout_named(spec_text, shape_t, dtype_name)
    title = name or f"{layout.spec} over {devset.key}"
    state = {
        "devices": devices or "local",
        "slices": slices,
        "mesh": "x".join(str(s) for s in mesh_spec.shape),
        "axes": ",".join(mesh_spec.axis_names),
        "order": mesh_spec.order,
        "shape": ",".join(str(d) for d in shape_t),
        "dtype": dtype_name,
    }

    def publish(view: View, url: str, token: str | None, timeout: float) -> str:
        # Simulated devices have no snapshot (their ids would clash with this process's devices): the
        # dashboard's layout explorer at this state is the same picture, computed by the same code.
        from sharding_core.dashboard import _base_url, post_json

        base = _base_url(url)
        now = view.layout
        shown = {"spec": view.spec_text or spec_text, "shape": ",".join(map(str, now.shape)), "dtype": now.dtype}
        body = {"view": "layout", "state": {**state, **shown}}
        return base + str(post_json(base, "/api/links", body, token=token, timeout=timeout)["url"])

    return View(
        "layout", title, layout=layout, spec_text=spec_text, relayout=relayout_named, dims=dims, publish=publish
    )


def layout_spec(layout: Any) -> Any:
    from sharding_core.spec import parse_spec

    return parse_spec(layout.spec)


def layout_on_mesh(mesh: Any, text: str, shape: tuple[int, ...], dtype: str) -> Any:
    """The layout of ``shape`` under ``NamedSharding(mesh, spec)`` on a concrete mesh, with the checks
    ``Layout.from_named`` makes (the same errors as ``/api/layout``)."""
    import jax.numpy as jnp  # any array's dtype (int4, float8_*), as Layout.from_sharding takes it

    from sharding_core.layout import check_shape, named_on_mesh
    from sharding_core.spec import parse_spec

    dt = jnp.dtype(dtype)
    return named_on_mesh(mesh, parse_spec(text), check_shape(shape), dt.name, int(dt.itemsize))


def mesh_spec_of(mesh: Any, axes: str | Sequence[str] | None, order: str) -> Any:
    """A :class:`~sharding_core.mesh.MeshSpec` from what people write: a MeshSpec, ``{"x": 2, "y": 4}``,
    ``"2x4"`` or ``(2, 4)`` with ``axes="x,y"`` (or ``("x", "y")``)."""
    from sharding_core.mesh import MeshSpec

    if isinstance(mesh, MeshSpec):
        return mesh
    if isinstance(mesh, dict):
        return MeshSpec(tuple(int(s) for s in mesh.values()), tuple(str(a) for a in mesh), order=order)
    if isinstance(mesh, str):
        try:
            sizes: tuple[int, ...] = tuple(int(p) for p in mesh.lower().replace(",", "x").split("x") if p.strip())
        except ValueError:
            raise ShardingError(BAD_MESH, f"a mesh shape looks like '2x4', got {mesh[:40]!r}") from None
    elif isinstance(mesh, (tuple, list)):
        sizes = tuple(int(s) for s in mesh)
    else:
        raise ShardingError(
            BAD_MESH, f"mesh= takes a jax Mesh, a MeshSpec, a dict of axis sizes or '2x4', got {type(mesh).__name__}"
        )
    if axes is None:
        raise ShardingError(BAD_MESH, "give the mesh's axis names: axes='x,y'", hint="or mesh={'x': 2, 'y': 4}")
    names = tuple(a.strip() for a in axes.split(",")) if isinstance(axes, str) else tuple(axes)
    return MeshSpec(sizes, names, order=order)


# ---- publishing from the widget -----------------------------------------------------------------------


def _publisher(snap: dict[str, Any]) -> Callable[[View, str, str | None, float], str]:
    def publish(view: View, url: str, token: str | None, timeout: float) -> str:
        from sharding_core.publishing import publish as send

        return send(snap, str(snap.get("name") or "show"), url, token=token, timeout=timeout)

    return publish


def _send(value: Any, name: str, url: str, token: str | None, timeout: float) -> str:
    """Captures ``value`` (an array or a planned ShapeDtypeStruct) and publishes it: the share link."""
    from sharding_core.capturing import capture
    from sharding_core.publishing import publish as send

    return send(capture(value, name), name, url, token=token, timeout=timeout)


# ---- text ---------------------------------------------------------------------------------------------


def snapshot_text(snap: dict[str, Any]) -> str:
    """A snapshot's leaves (path, shape, dtype, spec, the type with its sharding where a mesh axis is Explicit,
    shard shape, bytes per device) and collectives, as text."""
    from sharding_core.render import compact_ids
    from sharding_core.units import fmt_bytes

    leaves = snap.get("leaves") or []
    layouts = snap.get("layouts") or []
    n_dev = len((snap.get("devices") or {}).get("id") or [])
    lines = [f"{snap.get('name')}: {len(leaves)} leaves on {n_dev} {snap.get('platform', '')} devices"]
    # where a mesh axis is Explicit the sharding is in the type: its column, as jax.typeof prints it
    explicit = {i for i, m in enumerate(snap.get("meshes") or []) if "Explicit" in (m.get("axis_types") or [])}
    typed = any(leaf.get("mesh") in explicit and leaf.get("typed") for leaf in leaves[:TEXT_MAX_LEAVES])
    rows = [("path", "shape", "dtype", "spec", *(("typed",) if typed else ()), "shard shape", "per device")]
    for leaf in leaves[:TEXT_MAX_LEAVES]:
        lay = layouts[leaf["layout"]] if leaf.get("layout") is not None else None
        shown = (leaf.get("typed") or "-") if leaf.get("mesh") in explicit else "-"
        rows.append(
            (
                leaf["path"],
                str(tuple(leaf["shape"])) if leaf.get("shape") is not None else "-",
                leaf.get("dtype") or "-",
                leaf.get("spec") or "-",
                *((shown,) if typed else ()),
                str(tuple(lay["shard_shape"])) if lay else "-",
                fmt_bytes(lay["bytes_per_device"]) if lay else "-",
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    if len(leaves) > TEXT_MAX_LEAVES:
        lines.append(f"... and {len(leaves) - TEXT_MAX_LEAVES} more leaves")
    for k, c in enumerate(snap.get("collectives") or []):
        groups = c.get("groups") or c.get("pairs") or []
        text = " ".join("{" + compact_ids(g) + "}" for g in groups[:8]) + (" ..." if len(groups) > 8 else "")
        size = fmt_bytes(c["bytes"]) if c.get("bytes") is not None else "-"
        lines.append(f"collective {k + 1}: {c['op']} {c.get('shape', '')} {size} groups {text}".rstrip())
    return "\n".join(lines) + "\n"


__all__ = ["View", "in_notebook", "show", "view_of"]
