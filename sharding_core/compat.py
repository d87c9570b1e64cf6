"""What differs between the JAX versions shardscope declares, handled in one place by feature checks.

Shardscope installs beside the JAX a training job already has (pyproject: ``jax>=0.8.0``, no cap), so
it asks the running JAX what it offers instead of comparing version numbers: a check reads the
attribute or the shape of the answer, and every other module calls these functions rather than
spelling the API itself. Each function is unit-tested on every form (``tests/test_compat.py``, with
stand-ins for the spellings the locked JAX does not have); the installed wheel is run against the
oldest declared JAX by ``tests/test_wheel.py``.

==============================  =================================================================
difference                      handled by
==============================  =================================================================
``jax.shard_map`` (0.7+) /      :func:`shard_map` (``check_vma=`` on the new one, ``check_rep=`` on
``jax.experimental.shard_map``  the old; importing the old module warns from 0.8, so it is only
                                imported when the new one is missing)
``jax.set_mesh`` (0.7+) /       :func:`set_mesh`
``jax.sharding.use_mesh`` /
``with mesh:``
the concrete mesh in effect     :func:`ambient_mesh` (``jax.sharding.get_mesh`` from 0.9;
                                ``jax._src.mesh.get_concrete_mesh`` in 0.8; the legacy
                                ``with mesh:`` context's ``thread_resources``)
``jax.make_mesh``'s default     :func:`make_mesh_axis_type`: ``Explicit`` from 0.9, ``Auto`` in 0.8
axis type                       (read off a one-device mesh, not a version number)
``jax.sharding.AxisType``       :func:`axis_types` / :func:`mesh_axis_types` (absent: meshes take
                                no ``axis_types=`` and every axis is Auto)
``Compiled.input_shardings``    :func:`input_shardings`: ``(args, kwargs)`` or a flat sequence of
                                the positional arguments'
``Compiled.cost_analysis()``    :func:`cost_analysis`: a dict, or a list with one dict per
                                computation (older JAX), or None
``PartitionSpec.partitions``    :func:`spec_entries` (JAX 0.10+; 0.8's and 0.9's spec is iterated)
(0.10+) and its repr            :func:`spec_repr`: ``P(...)`` as 0.9+ prints it (0.8 prints
                                ``PartitionSpec(...)``), without ``unreduced_kind=sum`` (0.12+
                                prints the default kind); :func:`unreduced_kinds` for parsing it
``lax.all_gather(to=)``         :func:`all_gather_invariant` (``to="invarying"`` from 0.9;
                                ``lax.all_gather_invariant`` in 0.8)
``Sharding.is_equivalent_to``   :func:`equivalent`: JAX's own comparison, else the two shardings'
                                ``devices_indices_map`` (the same answer by definition)
replica groups in HLO text      :func:`sharding_core.hlo.text.parse_replica_groups` (by the text,
                                which names its own form): ``{{0,4},{1,5}}`` lists (XLA of JAX
                                0.8–0.10's ``shard_map``), ``[4,2]<=[2,4]T(1,0)`` iota lists (JAX
                                0.8–0.9's SPMD partitioner), ``mesh['axis_0'=2,'axis_1'=4]
                                {'axis_0'}`` (0.10's partitioner) and the replica-group v3 form
                                ``mesh['x'=2,'y'=4] {'x'}`` (0.11+ ``shard_map`` too, jax-ml/jax
                                #36354), with ``device_ids=(...)`` and sub-axes ``'x':(1)2``
==============================  =================================================================
"""

from __future__ import annotations

import contextlib
import inspect
import re
from collections.abc import Callable, Iterator, Sequence
from typing import Any

# ---- shard_map ---------------------------------------------------------------------------------------


def shard_map(
    f: Callable[..., Any], *, mesh: Any, in_specs: Any, out_specs: Any, check: bool | None = None
) -> Callable[..., Any]:
    """``jax.shard_map(f, mesh=, in_specs=, out_specs=)`` on any JAX: the public one when it exists,
    else ``jax.experimental.shard_map.shard_map``. ``check`` (None: JAX's default) is ``check_vma`` on
    the public one and ``check_rep`` on the experimental one (the same replication check, renamed)."""
    import jax

    public = getattr(jax, "shard_map", None)
    if public is not None:
        extra = {} if check is None else {"check_vma": check}
        return public(f, mesh=mesh, in_specs=in_specs, out_specs=out_specs, **extra)  # type: ignore[no-any-return]
    from jax.experimental.shard_map import shard_map as experimental

    extra = {} if check is None else {"check_rep": check}
    return experimental(f, mesh=mesh, in_specs=in_specs, out_specs=out_specs, **extra)  # type: ignore[no-any-return]


# ---- the mesh in effect --------------------------------------------------------------------------------


@contextlib.contextmanager
def set_mesh(mesh: Any) -> Iterator[Any]:
    """``with jax.set_mesh(mesh):`` where JAX has it, else ``jax.sharding.use_mesh``, else the mesh's
    own ``with mesh:`` context (what every JAX with ``Mesh`` has)."""
    import jax

    setter = getattr(jax, "set_mesh", None) or getattr(jax.sharding, "use_mesh", None)
    context = setter(mesh) if setter is not None else mesh
    with context:
        yield mesh


def ambient_mesh() -> Any:
    """The concrete mesh of ``jax.set_mesh`` / ``with mesh:`` in effect, or None."""
    import jax

    getter: Callable[[], Any] | None = getattr(jax.sharding, "get_mesh", None)  # public from JAX 0.9
    if getter is None:
        with contextlib.suppress(ImportError):
            from jax._src import mesh as mesh_lib  # JAX 0.8: the same getter, not yet public

            getter = getattr(mesh_lib, "get_concrete_mesh", None)
    mesh = _nonempty(getter() if getter is not None else None)
    if mesh is not None:
        return mesh
    try:  # the legacy `with mesh:` context has no public getter
        from jax._src.mesh import thread_resources

        return _nonempty(thread_resources.env.physical_mesh)
    except (ImportError, AttributeError):
        return None


def _nonempty(mesh: Any) -> Any:
    return None if mesh is None or getattr(mesh, "empty", False) else mesh


# ---- axis types --------------------------------------------------------------------------------------


def has_axis_types() -> bool:
    """Whether this JAX has ``jax.sharding.AxisType`` (meshes whose axes are Auto, Explicit or Manual)."""
    import jax

    return hasattr(jax.sharding, "AxisType")


def axis_types(names: Sequence[str]) -> tuple[Any, ...] | None:
    """``AxisType`` members for names like ``"Auto"`` / ``"explicit"``; None where JAX has no axis
    types (every axis behaves as Auto there, so asking for another type is refused in words)."""
    import jax

    enum = getattr(jax.sharding, "AxisType", None)
    if enum is None:
        other = sorted({n for n in names if n.capitalize() != "Auto"})
        if other:
            raise ValueError(f"this JAX ({jax.__version__}) has no AxisType: axes are Auto only, got {other}")
        return None
    return tuple(enum[n.capitalize()] for n in names)


def mesh_axis_types(mesh: Any) -> tuple[str, ...]:
    """The mesh's axis types by name (``("Auto", "Explicit")``); all Auto on a JAX without them."""
    types = getattr(mesh, "axis_types", None)
    if types is None:
        return ("Auto",) * len(mesh.axis_names)
    return tuple(getattr(t, "name", str(t)) for t in types)


_MAKE_MESH_DEFAULT: list[str] = []


def make_mesh_axis_type(device: Any) -> str:
    """The axis type ``jax.make_mesh`` gives when none is asked for (``"Explicit"`` from JAX 0.9,
    ``"Auto"`` in 0.8), read off a one-device mesh over ``device`` once per process."""
    if not _MAKE_MESH_DEFAULT:
        import jax

        mesh = jax.make_mesh((1,), ("a",), devices=[device])
        _MAKE_MESH_DEFAULT.append(mesh_axis_types(mesh)[0])
    return _MAKE_MESH_DEFAULT[0]


def make_mesh(devices: Any, axis_names: Sequence[str], types: Sequence[str] | None = None) -> Any:
    """``jax.sharding.Mesh(devices, axis_names, axis_types=...)``, with ``axis_types`` only where JAX has them."""
    from jax.sharding import Mesh

    kinds = axis_types(types) if types is not None else None
    if kinds is None:
        return Mesh(devices, tuple(axis_names))
    return Mesh(devices, tuple(axis_names), axis_types=kinds)


# ---- PartitionSpec --------------------------------------------------------------------------------

_DEFAULT_UNREDUCED_KIND = re.compile(r", unreduced_kind=sum(?=\)$)")


def spec_entries(spec: Any) -> tuple[Any, ...]:
    """A PartitionSpec's per-dimension entries (``spec.partitions`` from JAX 0.10; a spec iterates
    over them in every version)."""
    entries = getattr(spec, "partitions", None)
    return tuple(entries) if entries is not None else tuple(spec)


def spec_repr(spec: Any) -> str:
    """JAX's repr of a PartitionSpec in one spelling across versions: ``P('x', None)``.

    JAX 0.8 prints the class name (``PartitionSpec('x', None)``); 0.12 adds the kind of an unreduced
    reduction, ``unreduced_kind=sum``, which is the default (``P('x', unreduced={'y'})`` means the same)."""
    text = repr(spec)
    if text.startswith("PartitionSpec("):
        text = "P" + text[len("PartitionSpec") :]
    return _DEFAULT_UNREDUCED_KIND.sub("", text)


def unreduced_kinds() -> dict[str, Any]:
    """How an unreduced axis may be reduced, by name: ``jax.sharding.UnreducedKind``'s members (JAX 0.12:
    ``sum``, ``max``, ``min``), or only ``sum`` (as None: nothing to pass) where unreduced meant a sum."""
    import jax

    enum = getattr(jax.sharding, "UnreducedKind", None)
    if enum is None:
        return {"sum": None}
    return {member.name: member for member in enum}


# ---- collectives inside shard_map ---------------------------------------------------------------------


def all_gather_invariant(x: Any, axes: Any, *, axis: int = 0, tiled: bool = False) -> Any:
    """``lax.all_gather`` whose result is the same on every device along ``axes`` (so ``shard_map``'s
    out_specs may leave them out): ``to="invarying"`` where ``all_gather`` takes it (JAX 0.9+),
    ``lax.all_gather_invariant`` in 0.8, a plain ``all_gather`` where neither exists (no
    varying-ness to track)."""
    import jax

    if "to" in inspect.signature(jax.lax.all_gather).parameters:
        return jax.lax.all_gather(x, axes, axis=axis, tiled=tiled, to="invarying")
    invariant = getattr(jax.lax, "all_gather_invariant", None)
    if invariant is not None:
        return invariant(x, axes, axis=axis, tiled=tiled)
    return jax.lax.all_gather(x, axes, axis=axis, tiled=tiled)


# ---- compiled programs ------------------------------------------------------------------------------


def input_shardings(compiled: Any) -> tuple[Any, dict[str, Any]]:
    """``compiled.input_shardings`` as ``(positional, keyword)``.

    JAX 0.8+ answers the pytree ``(args, kwargs)``; older ones a flat sequence with one sharding per
    positional argument (and no keyword arguments)."""
    shardings = compiled.input_shardings
    if isinstance(shardings, tuple) and len(shardings) == 2 and isinstance(shardings[1], dict):
        return shardings[0], dict(shardings[1])
    return tuple(shardings), {}


def cost_analysis(compiled: Any) -> dict[str, Any]:
    """``compiled.cost_analysis()`` as one dict (empty when XLA gives none).

    It is a dict in JAX 0.8+ and was a list with one dict per computation before (the entry
    computation first); either way the program's own figures are the first."""
    cost = compiled.cost_analysis()
    if isinstance(cost, (list, tuple)):
        cost = cost[0] if cost else None
    return dict(cost or {})


# ---- shardings -------------------------------------------------------------------------------------


def equivalent(a: Any, b: Any, ndim: int) -> bool:
    """Whether two shardings place an array of rank ``ndim`` the same way (JAX's ``is_equivalent_to``:
    ``P('x')`` and ``P('x', None)``, ``P(('x',))`` and ``P('x')`` are equivalent).

    Without that method the answer is what it is defined as: the same devices, each holding the same
    block of an array of that rank."""
    same = getattr(a, "is_equivalent_to", None)
    if same is not None:
        return bool(same(b, ndim))
    # Every dimension as long as the device count: each way of splitting it gives a different block.
    probe = (len(a.device_set),) * ndim
    return bool(a.device_set == b.device_set and a.devices_indices_map(probe) == b.devices_indices_map(probe))
