"""The kernel lab's catalog: small jitted and ``shard_map`` kernels from JAX's sharding tutorials.

Each kernel is a ``build(ctx)`` function returning the function to run; the page shows that source
(``inspect.getsource``), so what people read is exactly what runs. ``ctx`` carries the mesh, the
input specs the user chose and the kernel's parameters, so a kernel follows the user's axis names
(a ``psum`` runs over the axes that actually shard its input).

Importing this module does not import JAX (a training script imports ``sharding_core`` cheaply);
the kernels import it when they are built, in a worker process (:mod:`sharding_core.kernels.runner`).

References: "Introduction to parallel programming" and "Distributed arrays and automatic
parallelization" (jit on sharded inputs, ``with_sharding_constraint``, ``shard_map`` with
``psum``), "Manual parallelism with shard_map" (collectives), "Explicit sharding" (``reshard``,
``out_sharding``), and Flax's "Scale up on multiple devices" guide (``DotReluDot``).
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.util
import inspect
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from sharding_core.compat import all_gather_invariant, shard_map

KERNEL_DTYPES = ("float32", "bfloat16", "float16", "int32")
PARAM_KINDS = ("spec", "axis", "int")
"""What a kernel parameter is: a PartitionSpec, a mesh axis name or an integer."""
MODES = ("jit", "shard_map")
"""How a kernel is written: a ``jax.jit`` function, or per-device code in ``jax.shard_map``."""
"""Input dtypes a kernel run accepts (each kernel decides what it computes from them)."""

_TUTORIAL = "https://docs.jax.dev/en/latest"
PARALLEL = f"{_TUTORIAL}/sharded-computation.html"
DISTRIBUTED = f"{_TUTORIAL}/notebooks/Distributed_arrays_and_automatic_parallelization.html"
SHARD_MAP = f"{_TUTORIAL}/notebooks/shard_map.html"
EXPLICIT = f"{_TUTORIAL}/notebooks/explicit-sharding.html"
FLAX_GUIDE = "https://flax.readthedocs.io/en/latest/guides/flax_gspmd.html"


class KernelInputError(ValueError):
    """The chosen inputs do not fit what the kernel does (raised while building it)."""

    def __init__(self, message: str, hint: str | None = None, code: str = "kernel_error") -> None:
        super().__init__(message)
        self.hint = hint
        self.code = code


@dataclasses.dataclass(frozen=True)
class KernelInput:
    name: str
    shape: tuple[int, ...]
    spec: str
    dtype: str = "float32"


@dataclasses.dataclass(frozen=True)
class KernelParam:
    """A knob of a kernel: a PartitionSpec (``spec``), a mesh axis name (``axis``) or an integer (``int``)."""

    name: str
    kind: str  # one of PARAM_KINDS
    default: str
    doc: str
    minimum: int = 1
    maximum: int = 8192


@dataclasses.dataclass
class Built:
    """What ``build(ctx)`` returns: the function to jit and what else it needs.

    ``extra_args`` are passed after the user's inputs (e.g. a Flax model's parameters, created
    sharded in the worker); their names label them among the inputs as placed.
    """

    fn: Callable[..., Any]
    extra_args: tuple[Any, ...] = ()
    extra_names: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class KernelContext:
    """What a kernel knows when it is built: the mesh, the inputs' specs and shapes, its parameters."""

    mesh: Any  # jax.sharding.Mesh
    in_specs: tuple[Any, ...]  # PartitionSpec per input
    shapes: tuple[tuple[int, ...], ...]
    out_specs: tuple[Any, ...] | None  # PartitionSpec per output, when the user gave them
    params: Mapping[str, Any]  # PartitionSpec, axis name (str) or int, by parameter name
    max_elements: int = 2**24  # what a kernel may allocate per array before it runs (max_kernel_elements)

    def axes(self, i: int, dim: int) -> tuple[str, ...]:
        """The mesh axes that shard dimension ``dim`` of input ``i`` (major first)."""
        entries = list(self.in_specs[i])
        entry = entries[dim] if dim < len(entries) else None
        if entry is None:
            return ()
        return tuple(entry) if isinstance(entry, tuple) else (entry,)

    def sharded_axes(self, i: int, dim: int, what: str) -> tuple[str, ...]:
        """Like :meth:`axes`, but refuses an unsharded dimension (the kernel communicates along it)."""
        axes = self.axes(i, dim)
        if not axes:
            raise KernelInputError(
                f"this kernel {what} along the mesh axes that shard dimension {dim} of its input, "
                f"but {self.in_specs[i]!r} does not shard dimension {dim}",
                hint=f"shard dimension {dim} over a mesh axis, e.g. P({self.mesh.axis_names[0]!r}, ...)",
            )
        return axes

    def check_elements(self, shape: Sequence[int], what: str) -> None:
        """Refuses an array the kernel would create beyond the element limit, before creating it."""
        n = math.prod(shape)
        if n > self.max_elements:
            raise KernelInputError(
                f"{what} would have shape {list(shape)} ({n} elements); a kernel run allows at most "
                f"{self.max_elements} (setting max_kernel_elements)",
                hint="use smaller shapes",
                code="too_large",
            )

    def axis_size(self, axes: Sequence[str]) -> int:
        return math.prod(int(self.mesh.shape[a]) for a in axes)

    def out_spec(self, default: Any) -> Any:
        """The user's out spec for a single-output kernel, else the kernel's own choice."""
        return self.out_specs[0] if self.out_specs else default


@dataclasses.dataclass(frozen=True)
class Footing:
    """What a kernel's memory footprint is computed from, before anything is built."""

    mesh: Mapping[str, int]  # axis name -> size
    shapes: tuple[tuple[int, ...], ...]
    itemsizes: tuple[int, ...]
    params: Mapping[str, str]  # parameter values as text
    explicit: bool = False  # some mesh axis is Explicit

    @property
    def devices(self) -> int:
        return math.prod(self.mesh.values())

    @property
    def inputs_logical(self) -> int:
        return sum(math.prod(s) * i for s, i in zip(self.shapes, self.itemsizes, strict=True))


@dataclasses.dataclass(frozen=True)
class Footprint:
    """Bytes a run needs beyond its inputs and XLA's program: ``created`` (arrays the kernel makes while
    it is built, as placed on every device) and ``reference`` (the unsharded computation it is checked
    against)."""

    created: int
    reference: int


def default_footprint(kernel: Kernel, f: Footing) -> Footprint:
    """A kernel that creates nothing: its reference holds the inputs and outputs unsharded (NumPy in
    float64 for a NumPy reference; the kernel on one device otherwise)."""
    widen = 8 if kernel.reference is not None else 4
    logical_elements = sum(math.prod(s) for s in f.shapes)
    return Footprint(0, 3 * logical_elements * widen)


@dataclasses.dataclass(frozen=True)
class Kernel:
    name: str
    title: str
    doc: str
    build: Callable[[KernelContext], Built]
    inputs: tuple[KernelInput, ...]
    outputs: tuple[str, ...] | None = ("out",)  # None: a pytree the kernel names (out_specs not accepted)
    mode: str = "jit"  # one of MODES
    devices: str = "cpu:8"
    mesh_shape: tuple[int, ...] = (2, 4)
    axis_names: tuple[str, ...] = ("x", "y")
    axis_types: str = "Auto"
    params: tuple[KernelParam, ...] = ()
    reference: Callable[..., Any] | None = None  # numpy: (ctx, *host inputs) -> outputs
    reference_doc: str = "NumPy in float64 on the whole (unsharded) inputs"
    footprint: Callable[[Footing], Footprint] | None = None  # None: default_footprint
    requires: str | None = None  # an optional package (extra) the kernel needs
    tutorial: str | None = None
    explicit: str | None = None  # what happens with Explicit axes, in a sentence

    @property
    def available(self) -> bool:
        return self.requires is None or importlib.util.find_spec(self.requires) is not None

    @functools.cached_property
    def source(self) -> str:
        return inspect.cleandoc(inspect.getsource(self.build))

    def catalog_entry(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "title": self.title,
            "doc": self.doc,
            "mode": self.mode,
            "source": self.source,
            "inputs": [{"name": i.name, "shape": list(i.shape), "spec": i.spec, "dtype": i.dtype} for i in self.inputs],
            "outputs": list(self.outputs) if self.outputs is not None else None,
            "params": [
                {"name": p.name, "kind": p.kind, "default": p.default, "doc": p.doc}
                | ({"minimum": p.minimum, "maximum": p.maximum} if p.kind == "int" else {})
                for p in self.params
            ],
            "devices": self.devices,
            "mesh": {
                "shape": list(self.mesh_shape),
                "axis_names": list(self.axis_names),
                "axis_types": [self.axis_types] * len(self.mesh_shape),
            },
            "reference": self.reference_doc,
            "requires": self.requires,
            "available": self.available,
            "tutorial": self.tutorial,
            "explicit": self.explicit,
        }


_REGISTRY: dict[str, Kernel] = {}


def register(kernel: Kernel) -> Kernel:
    """Adds a kernel to the catalog (tests register hooks that sleep or crash this way)."""
    if kernel.name in _REGISTRY:
        raise ValueError(f"kernel {kernel.name!r} is already registered")
    _REGISTRY[kernel.name] = kernel
    return kernel


def unregister(name: str) -> None:
    _REGISTRY.pop(name, None)


def kernels() -> list[Kernel]:
    return list(_REGISTRY.values())


def get_kernel(name: str) -> Kernel | None:
    return _REGISTRY.get(name)


# ------------------------------------------------------------------------------- jit kernels


def _reshard(ctx: KernelContext) -> Built:
    import jax

    # The run's out_specs are the target: jax.jit(move, out_shardings=NamedSharding(mesh, to)) on x placed
    # with its input spec. Moving x there is all the compiled program does (POST /api/reshard).
    def move(x: jax.Array) -> jax.Array:
        return x

    return Built(move)


def _elementwise(ctx: KernelContext) -> Built:
    import jax
    import jax.numpy as jnp

    def f(x: jax.Array) -> jax.Array:
        return 2 * jnp.sin(x) + 1

    return Built(f)


def _sum_axis0(ctx: KernelContext) -> Built:
    import jax

    def f(x: jax.Array) -> jax.Array:
        return x.sum(axis=0)

    return Built(f)


def _sum_axis0_constraint(ctx: KernelContext) -> Built:
    import jax

    constraint = ctx.params["constraint"]  # P('x') by default

    def f(x: jax.Array) -> jax.Array:
        out = x.sum(axis=0)
        return jax.lax.with_sharding_constraint(out, constraint)

    return Built(f)


def _sum_axis0_reshard(ctx: KernelContext) -> Built:
    import jax

    target = ctx.params["target"]  # P('x') by default

    def f(x: jax.Array) -> jax.Array:
        return jax.sharding.reshard(x.sum(axis=0), target)

    return Built(f)


def _matmul_xxt(ctx: KernelContext) -> Built:
    import jax

    def f(x: jax.Array) -> jax.Array:
        return x @ x.T

    return Built(f)


def _matmul_xxt_out_sharding(ctx: KernelContext) -> Built:
    import jax
    import jax.numpy as jnp

    out_sharding = ctx.params["out_sharding"]  # P('x', None) by default

    def f(x: jax.Array) -> jax.Array:
        return jnp.matmul(x, x.T, out_sharding=out_sharding)

    return Built(f)


def _matmul_xw(ctx: KernelContext) -> Built:
    import jax

    def f(x: jax.Array, w: jax.Array) -> jax.Array:
        return x @ w

    return Built(f)


def _layer(ctx: KernelContext) -> Built:
    import jax

    def layer(x: jax.Array, weights: jax.Array, bias: jax.Array) -> jax.Array:
        return jax.nn.sigmoid(x @ weights + bias)

    return Built(layer)


def _layer_constraint(ctx: KernelContext) -> Built:
    import jax

    x_spec, w_spec = ctx.params["x_spec"], ctx.params["weights_spec"]  # P('x'), P('x', None)

    def layer(x: jax.Array, weights: jax.Array, bias: jax.Array) -> jax.Array:
        x = jax.lax.with_sharding_constraint(x, x_spec)
        weights = jax.lax.with_sharding_constraint(weights, w_spec)
        return jax.nn.sigmoid(x @ weights + bias)

    return Built(layer)


# ------------------------------------------------------------------------- shard_map kernels


def _layer_shard_map(ctx: KernelContext) -> Built:
    import jax
    from jax.sharding import PartitionSpec as P

    axes = ctx.axes(0, 0)  # the mesh axes that split x, hence the contraction x @ weights

    def layer(x: jax.Array, weights: jax.Array, bias: jax.Array) -> jax.Array:
        return jax.nn.sigmoid(jax.lax.psum(x @ weights, axes) + bias)

    return Built(shard_map(layer, mesh=ctx.mesh, in_specs=ctx.in_specs, out_specs=ctx.out_spec(P())))


def _psum_sum(ctx: KernelContext) -> Built:
    import jax
    from jax.sharding import PartitionSpec as P

    axes = tuple(a for dim in range(len(ctx.shapes[0])) for a in ctx.axes(0, dim))  # every axis sharding x

    def total(x: jax.Array) -> jax.Array:
        return jax.lax.psum(x.sum(), axes)

    return Built(shard_map(total, mesh=ctx.mesh, in_specs=ctx.in_specs, out_specs=ctx.out_spec(P())))


def _all_gather(ctx: KernelContext) -> Built:
    import jax
    from jax.sharding import PartitionSpec as P

    axes = ctx.sharded_axes(0, 0, "gathers")
    rest = list(ctx.in_specs[0])[1:]  # the other dimensions stay as they are

    # Invariant: the gathered block is the same on every device along `axes`, so out_specs may
    # leave them out (plain all_gather is "varying" and shard_map would refuse P(None, ...)).
    def gather(x: jax.Array) -> jax.Array:
        return all_gather_invariant(x, axes, axis=0, tiled=True)

    return Built(shard_map(gather, mesh=ctx.mesh, in_specs=ctx.in_specs, out_specs=ctx.out_spec(P(None, *rest))))


def _psum_scatter(ctx: KernelContext) -> Built:
    import jax

    axes = ctx.sharded_axes(0, 0, "reduces and scatters")

    def reduce_scatter(x: jax.Array) -> jax.Array:
        return jax.lax.psum_scatter(x, axes, scatter_dimension=0, tiled=True)

    return Built(
        shard_map(reduce_scatter, mesh=ctx.mesh, in_specs=ctx.in_specs, out_specs=ctx.out_spec(ctx.in_specs[0]))
    )


def _ppermute(ctx: KernelContext) -> Built:
    import jax

    axes = ctx.sharded_axes(0, 0, "shifts blocks")
    n = ctx.axis_size(axes)
    perm = [(i, (i + 1) % n) for i in range(n)]  # each block moves one step along the ring

    def shift(x: jax.Array) -> jax.Array:
        return jax.lax.ppermute(x, axes, perm)

    return Built(shard_map(shift, mesh=ctx.mesh, in_specs=ctx.in_specs, out_specs=ctx.out_spec(ctx.in_specs[0])))


def _all_to_all(ctx: KernelContext) -> Built:
    import jax
    from jax.sharding import PartitionSpec as P

    axes = ctx.sharded_axes(0, 0, "exchanges blocks")
    moved = axes if len(axes) > 1 else axes[0]

    # Rows split over `axes` become columns split over them: the same global array, resharded.
    def transpose_blocks(x: jax.Array) -> jax.Array:
        return jax.lax.all_to_all(x, axes, split_axis=1, concat_axis=0, tiled=True)

    return Built(
        shard_map(transpose_blocks, mesh=ctx.mesh, in_specs=ctx.in_specs, out_specs=ctx.out_spec(P(None, moved)))
    )


# ------------------------------------------------------------------------------------ Flax


def _dot_relu_dot(data: str, model: str) -> Any:
    """Flax's DotReluDot from the "Scale up on multiple devices" guide, on the chosen axis names."""
    import jax
    import jax.numpy as jnp
    from flax import nnx
    from jax.sharding import PartitionSpec as P

    class DotReluDot(nnx.Module):
        def __init__(self, depth: int, rngs: nnx.Rngs) -> None:
            init_fn = nnx.initializers.lecun_normal()
            self.dot1 = nnx.Linear(
                depth, depth, kernel_init=nnx.with_partitioning(init_fn, (None, model)), use_bias=False, rngs=rngs
            )
            self.w2 = nnx.Param(init_fn(rngs.params(), (depth, depth)), out_sharding=(model, None))

        def __call__(self, x: Any) -> Any:
            y = self.dot1(x)
            y = jax.nn.relu(y)
            y = jax.lax.with_sharding_constraint(y, P(data, model))
            return jnp.dot(y, self.w2[...])

    return DotReluDot


def _flax_init(ctx: KernelContext) -> Built:
    import jax
    from flax import nnx

    DotReluDot = _dot_relu_dot(ctx.params["data_axis"], ctx.params["model_axis"])
    depth = ctx.params["depth"]
    ctx.check_elements((depth, depth), "each weight matrix")

    def create_sharded_model() -> Any:
        model = DotReluDot(depth, rngs=nnx.Rngs(0))
        state = nnx.state(model)
        pspecs = nnx.get_partition_spec(state)
        return jax.lax.with_sharding_constraint(state, pspecs)

    return Built(create_sharded_model)


def _flax_train_step(ctx: KernelContext) -> Built:
    import jax
    import jax.numpy as jnp
    import optax  # type: ignore[import-untyped]
    from flax import nnx

    DotReluDot = _dot_relu_dot(ctx.params["data_axis"], ctx.params["model_axis"])
    depth = ctx.shapes[0][1]
    ctx.check_elements((depth, depth), "each weight matrix")

    def create_sharded_model() -> Any:
        model = DotReluDot(depth, rngs=nnx.Rngs(0))
        state = nnx.state(model)
        return jax.lax.with_sharding_constraint(state, nnx.get_partition_spec(state))

    graphdef, abstract = nnx.split(nnx.eval_shape(lambda: DotReluDot(depth, rngs=nnx.Rngs(0))))
    # Created in the shardings the model's annotations say (with Explicit axes the constraint inside
    # only asserts, so without out_shardings every device would hold the whole model).
    placed = jax.tree.map(lambda spec: jax.sharding.NamedSharding(ctx.mesh, spec), nnx.get_partition_spec(abstract))
    params = jax.jit(create_sharded_model, out_shardings=placed)()
    tx = optax.adam(1e-3)

    def train_step(x: jax.Array, y: jax.Array, params: Any, opt_state: Any) -> dict[str, Any]:
        def loss_fn(params: Any) -> jax.Array:
            model = nnx.merge(graphdef, params)
            return jnp.mean((model(x) - y) ** 2)

        loss, grads = jax.value_and_grad(loss_fn)(params)
        updates, opt_state = tx.update(grads, opt_state, params)
        return {"loss": loss, "params": optax.apply_updates(params, updates)}

    # The optimizer state is made in the parameters' shardings (its scalars replicated): eagerly, or
    # under jit without out_shardings, Adam's moments came out whole on every device (64 devices x 2
    # moments x the model: gigabytes).
    replicated = jax.sharding.NamedSharding(ctx.mesh, jax.sharding.PartitionSpec())
    params_def = jax.tree.structure(params)
    like_params = jax.tree.unflatten(params_def, [p.sharding for p in jax.tree.leaves(params)])

    def is_params_like(node: Any) -> bool:
        return bool(jax.tree.structure(node) == params_def)

    shardings = jax.tree.map(
        lambda node: like_params if is_params_like(node) else replicated,
        jax.eval_shape(tx.init, params),  # abstract: nothing allocated to learn the state's structure
        is_leaf=is_params_like,
    )
    opt_state = jax.jit(tx.init, out_shardings=shardings)(params)
    return Built(train_step, extra_args=(params, opt_state), extra_names=("params", "opt_state"))


def _mlp_params(f: Footing, depth: int) -> tuple[int, int]:
    """DotReluDot's two depth x depth float32 weights: (logical bytes, bytes as placed on every device).

    Each is sharded over the model axis only, so it is held (devices / model axis size) times.
    """
    logical = 2 * depth * depth * 4
    model = f.mesh.get(f.params.get("model_axis", "model"), 1)
    return logical, logical * f.devices // max(1, model)


def _flax_init_footprint(f: Footing) -> Footprint:
    logical, _ = _mlp_params(f, int(f.params.get("depth", "1024")))
    # the parameters are the program's outputs (XLA's figures); the reference inits them on one device
    return Footprint(0, 2 * logical)


def _flax_train_footprint(f: Footing) -> Footprint:
    logical, placed = _mlp_params(f, f.shapes[0][1])
    # built: the parameters and Adam's two moments, as placed (with Explicit axes the parameters are
    # first created whole on every device, then resharded: up to 4 copies per device were measured);
    # the reference runs the step on one device: parameters, moments, gradients and the updated
    # parameters, and its inputs
    creating = 4 * logical * f.devices if f.explicit else 0
    return Footprint(creating + 3 * placed, 5 * logical + 2 * f.inputs_logical)


# ------------------------------------------------------------------------------ references


def _sigmoid(v: np.ndarray) -> np.ndarray:
    out: np.ndarray = 1.0 / (1.0 + np.exp(-v))
    return out


def _ref_psum_scatter(ctx: KernelContext, x: np.ndarray) -> np.ndarray:
    n = ctx.axis_size(ctx.axes(0, 0))
    out: np.ndarray = x.reshape(n, x.shape[0] // n, *x.shape[1:]).sum(axis=0)
    return out


def _ref_ppermute(ctx: KernelContext, x: np.ndarray) -> np.ndarray:
    n = ctx.axis_size(ctx.axes(0, 0))
    return np.roll(x, x.shape[0] // n, axis=0)


SINGLE_DEVICE = "the same function on a one-device mesh with the same axis names (every axis of size 1)"

BUILTIN: tuple[Kernel, ...] = (
    Kernel(
        "elementwise",
        "Elementwise: 2·sin(x) + 1",
        "An elementwise function keeps its input's sharding: every device computes its own block and "
        "nothing moves between devices (no collectives).",
        _elementwise,
        (KernelInput("x", (8, 8), "P('x', 'y')"),),
        reference=lambda ctx, x: 2 * np.sin(x) + 1,
        tutorial=DISTRIBUTED,
    ),
    Kernel(
        "sum_axis0",
        "Contraction: x.sum(axis=0)",
        "Summing over a sharded dimension: each device sums its block, then an all-reduce adds the partial "
        "sums along the axis that sharded it. The result is sharded like the remaining dimension and "
        "replicated over the reduced axis (a partially replicated output).",
        _sum_axis0,
        (KernelInput("x", (8, 8), "P('x', 'y')"),),
        reference=lambda ctx, x: x.sum(axis=0),
        tutorial=DISTRIBUTED,
    ),
    Kernel(
        "sum_axis0_constraint",
        "Contraction with with_sharding_constraint",
        "The same sum, constrained to another sharding: the compiler reshards the result to the constraint "
        "(compare the collectives with sum_axis0). With Explicit axes the constraint is only an assertion, "
        "and this kernel fails: that is what sum_axis0_reshard is for.",
        _sum_axis0_constraint,
        (KernelInput("x", (8, 8), "P('x', 'y')"),),
        params=(KernelParam("constraint", "spec", "P('x')", "The sharding the sum is constrained to"),),
        reference=lambda ctx, x: x.sum(axis=0),
        tutorial=DISTRIBUTED,
        explicit="fails: with_sharding_constraint acts as an assert with Explicit axes",
    ),
    Kernel(
        "sum_axis0_reshard",
        "Contraction with jax.sharding.reshard (Explicit axes)",
        "The Explicit-sharding way to move a result to another sharding: reshard says where it goes. It needs "
        "Explicit mesh axes (with Auto axes JAX refuses: use with_sharding_constraint there).",
        _sum_axis0_reshard,
        (KernelInput("x", (8, 8), "P('x', 'y')"),),
        params=(KernelParam("target", "spec", "P('x')", "The sharding to reshard the sum to"),),
        reference=lambda ctx, x: x.sum(axis=0),
        tutorial=EXPLICIT,
        axis_types="Explicit",
    ),
    Kernel(
        "matmul_xxt",
        "x @ x.T",
        "A matmul whose contracting dimension is sharded on both operands. With Auto axes the compiler "
        "picks the output sharding and inserts the all-gathers and all-reduces it needs; with Explicit axes "
        "JAX refuses to guess and asks for out_sharding.",
        _matmul_xxt,
        (KernelInput("x", (8, 16), "P('x', 'y')"),),
        reference=lambda ctx, x: x @ x.T,
        tutorial=DISTRIBUTED,
        explicit="fails: contracting dimensions are sharded and the output sharding is ambiguous",
    ),
    Kernel(
        "matmul_xxt_out_sharding",
        "x @ x.T with out_sharding (Explicit axes)",
        "The Explicit-sharding fix for x @ x.T: say the output sharding and JAX inserts the communication "
        "to produce it. Needs Explicit axes.",
        _matmul_xxt_out_sharding,
        (KernelInput("x", (8, 16), "P('x', 'y')"),),
        params=(KernelParam("out_sharding", "spec", "P('x', None)", "The matmul's output sharding"),),
        reference=lambda ctx, x: x @ x.T,
        tutorial=EXPLICIT,
        axis_types="Explicit",
    ),
    Kernel(
        "matmul_xw",
        "x @ w",
        "A matmul of activations by weights sharded on the contracting dimension: each device multiplies its "
        "blocks, then the partial products are summed across the axis that split the contraction.",
        _matmul_xw,
        (KernelInput("x", (8, 16), "P('x', 'y')"), KernelInput("w", (16, 8), "P('y', None)")),
        reference=lambda ctx, x, w: x @ w,
        tutorial=DISTRIBUTED,
    ),
    Kernel(
        "layer_jit",
        "Layer sigmoid(x @ w + b): jit on sharded inputs",
        "The tutorial's layer, automatic parallelism: x is sharded, the weights replicated, and jit works out "
        "the rest from the inputs' shardings.",
        _layer,
        (
            KernelInput("x", (32,), "P('x')"),
            KernelInput("weights", (32, 4), "P()"),
            KernelInput("bias", (4,), "P()"),
        ),
        reference=lambda ctx, x, w, b: _sigmoid(x @ w + b),
        tutorial=PARALLEL,
        mesh_shape=(8,),
        axis_names=("x",),
    ),
    Kernel(
        "layer_constraint",
        "Layer sigmoid(x @ w + b): with_sharding_constraint inside",
        "The same layer on replicated inputs, with the shardings asked for inside the function: the compiler "
        "makes x and the weights sharded as constrained and sums the partial products.",
        _layer_constraint,
        (
            KernelInput("x", (32,), "P()"),
            KernelInput("weights", (32, 4), "P()"),
            KernelInput("bias", (4,), "P()"),
        ),
        params=(
            KernelParam("x_spec", "spec", "P('x')", "Constraint on x"),
            KernelParam("weights_spec", "spec", "P('x', None)", "Constraint on the weights"),
        ),
        reference=lambda ctx, x, w, b: _sigmoid(x @ w + b),
        tutorial=PARALLEL,
        explicit="fails: with_sharding_constraint acts as an assert with Explicit axes",
        mesh_shape=(8,),
        axis_names=("x",),
    ),
    Kernel(
        "layer_shard_map",
        "Layer sigmoid(x @ w + b): shard_map with psum",
        "The same layer written per device: shard_map hands each device its blocks (in_specs are the input "
        "specs chosen here), each computes a partial x @ weights and psum adds them over the axes that split x.",
        _layer_shard_map,
        (
            KernelInput("x", (32,), "P('x')"),
            KernelInput("weights", (32, 4), "P('x', None)"),
            KernelInput("bias", (4,), "P()"),
        ),
        mode="shard_map",
        reference=lambda ctx, x, w, b: _sigmoid(x @ w + b),
        tutorial=PARALLEL,
        mesh_shape=(8,),
        axis_names=("x",),
    ),
    Kernel(
        "psum_sum",
        "shard_map sum with psum",
        "Each device sums its block; psum over every axis that shards x adds the partial sums, so every "
        "device ends with the total (out_specs P(): replicated).",
        _psum_sum,
        (KernelInput("x", (8, 16), "P('x', 'y')"),),
        mode="shard_map",
        reference=lambda ctx, x: x.sum(),
        tutorial=SHARD_MAP,
    ),
    Kernel(
        "all_gather",
        "all_gather",
        "Each device receives every block along the axes that shard dimension 0 and concatenates them "
        "(tiled), so dimension 0 ends up whole on every device.",
        _all_gather,
        (KernelInput("x", (8, 16), "P('x', 'y')"),),
        mode="shard_map",
        reference=lambda ctx, x: x,
        tutorial=SHARD_MAP,
    ),
    Kernel(
        "psum_scatter",
        "psum_scatter (reduce-scatter)",
        "Sums the blocks along the axes that shard dimension 0 and leaves each device one slice of the sum: "
        "half an all-reduce's traffic. Dimension 0 must divide by the axis size squared.",
        _psum_scatter,
        (KernelInput("x", (16, 8), "P('x', 'y')"),),
        mode="shard_map",
        reference=_ref_psum_scatter,
        reference_doc="NumPy: the blocks of x along dimension 0 summed",
        tutorial=SHARD_MAP,
    ),
    Kernel(
        "ppermute",
        "ppermute (ring shift)",
        "Every device sends its block to the next device along the axes that shard dimension 0 (a ring): the "
        "building block of collective matmuls and pipelining.",
        _ppermute,
        (KernelInput("x", (8, 16), "P('x', 'y')"),),
        mode="shard_map",
        reference=_ref_ppermute,
        reference_doc="NumPy: x rolled by one block along dimension 0",
        tutorial=SHARD_MAP,
    ),
    Kernel(
        "reshard",
        "reshard (move to another sharding)",
        "The identity, jitted with out_shardings: x is placed with its input spec and comes out with the output "
        "spec, so the compiled program is exactly the collectives that move an array from one sharding to the "
        "other (give the target as the output spec; without one nothing moves). POST /api/reshard runs it.",
        _reshard,
        (KernelInput("x", (16, 16), "P('x', None)"),),
        reference=lambda ctx, x: x,
        reference_doc="NumPy: x itself (resharding moves values, never changes them)",
        tutorial=EXPLICIT,
    ),
    Kernel(
        "all_to_all",
        "all_to_all",
        "Rows split over an axis become columns split over it: each device cuts its block into pieces and "
        "sends piece j to device j. The global array is unchanged; only its sharding moves.",
        _all_to_all,
        (KernelInput("x", (8, 16), "P('x', None)"),),
        mode="shard_map",
        reference=lambda ctx, x: x,
        tutorial=SHARD_MAP,
        mesh_shape=(8,),
        axis_names=("x",),
    ),
    Kernel(
        "flax_init",
        "Flax DotReluDot: sharded init",
        "Flax's DotReluDot MLP from the scaling guide: the parameters carry sharding annotations "
        "(nnx.with_partitioning / out_sharding=...), and initializing under jit with with_sharding_constraint "
        "creates each one directly in its sharding. The outputs are the parameters.",
        _flax_init,
        (),
        outputs=None,
        params=(
            KernelParam("depth", "int", "1024", "Width of the MLP (the guide's 1024)", 1, 4096),
            KernelParam("data_axis", "axis", "data", "Mesh axis for the batch"),
            KernelParam("model_axis", "axis", "model", "Mesh axis for the model dimension"),
        ),
        reference=None,
        reference_doc=SINGLE_DEVICE,
        footprint=_flax_init_footprint,
        requires="flax",
        tutorial=FLAX_GUIDE,
        axis_names=("data", "model"),
    ),
    Kernel(
        "flax_train_step",
        "Flax DotReluDot: train step",
        "One Adam step of the guide's MLP on a batch sharded over the data axis, with the sharded parameters "
        "(written with jax.jit over nnx.split state rather than nnx.jit, so its compiled HLO can be shown). "
        "Outputs: the loss and the updated parameters, which keep their shardings.",
        _flax_train_step,
        (KernelInput("x", (8, 1024), "P('data', None)"), KernelInput("y", (8, 1024), "P('data', None)")),
        outputs=None,
        params=(
            KernelParam("data_axis", "axis", "data", "Mesh axis for the batch"),
            KernelParam("model_axis", "axis", "model", "Mesh axis for the model dimension"),
        ),
        reference=None,
        reference_doc=SINGLE_DEVICE,
        footprint=_flax_train_footprint,
        requires="flax",
        tutorial=FLAX_GUIDE,
        explicit="fails: a matmul with sharded contracting dimensions needs out_sharding",
        axis_names=("data", "model"),
    ),
)

for _k in BUILTIN:
    register(_k)
