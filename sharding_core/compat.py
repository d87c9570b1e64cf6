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
sharding in types (Explicit     :func:`typeof_text` / :func:`sharded_type_text`: ``str(jax.typeof(x))``,
axes, ``jax.typeof``)           JAX's own printer (``float32[8@x,16@y]``, ``{U:y}`` / ``{R:y}`` for
                                unreduced / reduced axes), never re-implemented: its spelling is the
                                running JAX's; :func:`has_explicit_axes` says where it carries a sharding
the mesh of ``jax.set_mesh``    :func:`context_mesh` (what jit checks arguments against; the legacy
(what jit compares)             ``with mesh:`` context is not checked by jit and is left out)
a sharding's device order       :func:`device_order` (``NamedSharding``: the mesh's devices in mesh
                                order; one device; else the private ``_device_assignment``)
an array's committed-ness       :func:`committed` (``committed`` / the private ``_committed``);
                                :func:`refuses_devices` reads jit's refusal of the others
``kept_var_idx`` (private)      :func:`kept_inputs`: the arguments jit kept (Shardy's ``input: N``)
persistent compilation cache    :func:`compilation_cache_disabled` (a cache hit writes no dumps)
jaxpr equations' user frame     :func:`equation_frame` (``source_info_util.user_frame``, private)
a jit's options (``_jit_info``)  :func:`jit_like`: the same jit with other in/out shardings
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
    mesh = context_mesh()
    if mesh is not None:
        return mesh
    try:  # the legacy `with mesh:` context has no public getter
        from jax._src.mesh import thread_resources

        return _nonempty(thread_resources.env.physical_mesh)
    except (ImportError, AttributeError):
        return None


def context_mesh() -> Any:
    """The concrete mesh of ``jax.set_mesh`` in effect (``jax.sharding.get_mesh``, public from JAX 0.9; the
    private ``get_concrete_mesh`` in 0.8), or None. This is the mesh jit compares committed arguments with
    ("incompatible devices"); the legacy ``with mesh:`` context is not (jit does not check it). Inside a trace
    (``capture`` called in a jitted function) there is none to read: None.

    Regression: ``capture`` of a traced value raised JAX's "`get_mesh` can only be used outside of `jax.jit`"."""
    import jax

    getter: Callable[[], Any] | None = getattr(jax.sharding, "get_mesh", None)
    if getter is None:
        with contextlib.suppress(ImportError):
            from jax._src import mesh as mesh_lib

            getter = getattr(mesh_lib, "get_concrete_mesh", None)
    if getter is None:
        return None
    try:
        return _nonempty(getter())
    except ValueError:  # inside jit: JAX gives the concrete mesh outside a trace only
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


# ---- sharding in types ----------------------------------------------------------------------------------


def typeof_text(x: Any) -> str:
    """JAX's type of ``x`` (a ``jax.Array``, a ``ShapeDtypeStruct``, a tracer) as JAX prints it:
    ``str(jax.typeof(x))``. Where the mesh's axes are Explicit (``jax.make_mesh``'s default from JAX 0.9)
    the sharding lives in the type: ``float32[8@x,16@y]``, ``float32[8@x,16]{U:y}`` with an unreduced axis,
    ``{R:y}`` a reduced one, ``~`` before a weak type. Auto and Manual axes are not in the type. The
    spelling is the running JAX's own (``jax.typeof``, public in every JAX this project declares)."""
    import jax

    return str(jax.typeof(x))


def sharded_type_text(shape: Sequence[int], dtype: Any, sharding: Any) -> str | None:
    """The type of an array of ``shape`` and ``dtype`` placed by ``sharding``, as :func:`typeof_text` prints
    it (JAX types a ``ShapeDtypeStruct`` with a sharding as it types the array put there, weak types aside);
    None where JAX cannot type it (a sharding without a mesh, a spec JAX refuses)."""
    import jax

    try:
        return typeof_text(jax.ShapeDtypeStruct(tuple(shape), dtype, sharding=sharding))
    except (TypeError, ValueError, AttributeError, NotImplementedError, AssertionError):
        return None


def has_explicit_axes(mesh: Any) -> bool:
    """Whether any axis of ``mesh`` is Explicit: then its arrays' shardings are part of their types."""
    return "Explicit" in mesh_axis_types(mesh)


# ---- devices an argument is committed to -------------------------------------------------------------------


def device_order(sharding: Any) -> tuple[int, ...] | None:
    """The device ids of ``sharding`` in the order jit compares them with a mesh's: a ``NamedSharding``'s
    mesh devices in mesh order, a single device's id, else JAX's device assignment (the private
    ``_device_assignment`` every declared JAX has); None where none can be read."""
    import jax

    mesh = getattr(sharding, "mesh", None)
    if isinstance(mesh, jax.sharding.Mesh):
        return tuple(int(i) for i in mesh.device_ids.flat)
    devices = getattr(sharding, "device_set", None)
    if devices is not None and len(devices) == 1:
        return (int(next(iter(devices)).id),)
    assignment = getattr(sharding, "_device_assignment", None)
    return tuple(int(d.id) for d in assignment) if assignment is not None else None


def refuses_devices(error: Exception) -> bool:
    """Whether ``error`` is jit's refusal of arguments on other devices than the context mesh's, "Received
    incompatible devices for jitted computation" (the words of every JAX this project declares)."""
    return isinstance(error, ValueError) and "incompatible devices" in str(error)


def committed(x: Any) -> bool:
    """Whether ``x`` is committed to its devices (``jax.device_put`` with a device or sharding, a jit's
    output): jit then keeps it where it is, and refuses it beside a context mesh over other devices.
    Uncommitted arrays (``jnp.zeros(...)`` without a device) move freely. ``committed`` where JAX makes it
    public, else the private ``_committed``; a ``ShapeDtypeStruct`` with a sharding is committed to it."""
    import jax

    if isinstance(x, jax.ShapeDtypeStruct):
        return getattr(x, "sharding", None) is not None
    flag = getattr(x, "committed", None)
    if flag is None:
        flag = getattr(x, "_committed", True)
    return bool(flag)


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


def kept_inputs(lowered: Any, flat_count: int, kept_count: int) -> list[int]:
    """The positions, among the ``flat_count`` flattened arguments, of the ``kept_count`` that the compiled
    program takes as parameters (jit drops unused arguments unless ``keep_unused=True``): Shardy's and the
    HLO's ``input: N`` is the N-th kept one.

    JAX records them as ``kept_var_idx`` in the lowering's compile arguments (private, 0.4 to 0.10); without
    it, all of them when the counts agree, else the first ``kept_count`` (said to be a guess by the caller).
    """
    lowering = getattr(lowered, "_lowering", None)
    compile_args = getattr(lowering, "compile_args", None)
    kept = compile_args.get("kept_var_idx") if isinstance(compile_args, dict) else None
    if kept is not None and len(kept) == kept_count:
        return sorted(int(i) for i in kept)
    return list(range(min(flat_count, kept_count)))


@contextlib.contextmanager
def compilation_cache_disabled() -> Iterator[None]:
    """The persistent compilation cache off while inside: a cache hit compiles nothing, so XLA writes none of
    the dumps a compile was asked for. ``jax_enable_compilation_cache`` is a public option in every JAX this
    project declares; its context-manager form is used when present."""
    import jax

    state = getattr(getattr(jax, "_src", None), "config", None)
    manager = getattr(state, "enable_compilation_cache", None) if state is not None else None
    if manager is not None and callable(manager):
        with manager(False):
            yield
        return
    before = bool(getattr(jax.config, "jax_enable_compilation_cache", True))
    jax.config.update("jax_enable_compilation_cache", False)
    try:
        yield
    finally:
        jax.config.update("jax_enable_compilation_cache", before)


def equation_frame(eqn: Any) -> tuple[str, int] | None:
    """(file, line) of the user's frame of a jaxpr equation: ``source_info_util.user_frame`` (private in
    every JAX this project declares), None when it is missing or gives nothing."""
    try:
        from jax._src import source_info_util
    except ImportError:  # pragma: no cover - every declared JAX has it
        return None
    user_frame = getattr(source_info_util, "user_frame", None)
    info = getattr(eqn, "source_info", None)
    if user_frame is None or info is None:
        return None
    try:
        frame = user_frame(info.traceback)
    except (AttributeError, TypeError):
        return None
    if frame is None:
        return None
    return str(frame.file_name), int(frame.start_line)


def jit_like(jitted: Any, *, in_shardings: Any = None, out_shardings: Any = None) -> Any:
    """``jax.jit`` of the function ``jitted`` wraps, with its options (static and donated arguments,
    ``keep_unused``, its in/out shardings) except those given here: how a fix's program is compiled when the
    user's jit pins shardings the fix changes. The options are read from ``_jit_info`` (private, JAX 0.4.30
    to 0.10); without it only the given shardings are set."""
    import jax

    fun = getattr(jitted, "__wrapped__", None)
    if fun is None:
        raise ValueError("not a jax.jit function: its options cannot be copied")
    info = getattr(jitted, "_jit_info", None)
    options: dict[str, Any] = {}
    if info is not None:
        options.update(
            static_argnums=tuple(info.static_argnums),
            static_argnames=tuple(info.static_argnames),
            donate_argnums=tuple(info.donate_argnums),
            keep_unused=bool(info.keep_unused),
        )
        if info.user_specified_in_shardings:
            options["in_shardings"] = jax.tree_util.tree_unflatten(info.in_shardings_treedef, info.in_shardings_leaves)
        leaves = list(info.out_shardings_leaves)
        if any(type(x).__name__ != "UnspecifiedValue" for x in leaves):
            options["out_shardings"] = jax.tree_util.tree_unflatten(info.out_shardings_treedef, leaves)
    if in_shardings is not None:
        options["in_shardings"] = in_shardings
    if out_shardings is not None:
        options["out_shardings"] = out_shardings
    return jax.jit(fun, **options)


def pins_inputs(jitted: Any) -> bool:
    """Whether a jit was given ``in_shardings`` (an argument sharded otherwise is then refused)."""
    info = getattr(jitted, "_jit_info", None)
    return bool(getattr(info, "user_specified_in_shardings", False))


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
