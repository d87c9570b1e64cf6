"""Checking a kernel run before anything runs, and the job a worker process receives.

:func:`plan_run` validates everything it can in the parent process, on the simulated devices
(device set, mesh, specs against the mesh, divisibility, sizes), so bad input is a 422 before a
worker is involved. The resulting :class:`KernelJob` is plain, hashable data: it is the result
cache's key and what is pickled to the worker.

Simulated devices cannot run anything, so a worker runs with as many real CPU devices as the mesh
has. Real device ``k`` stands for the ``k``-th device of the mesh in the device set's list order,
and sits at that device's mesh position; ``positions`` says which real device goes where and
``device_ids`` maps results back to the simulated ids.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from sharding_core.devices import DeviceSet, parse_devices
from sharding_core.errors import (
    BAD_DTYPE,
    BAD_MESH,
    BAD_SHAPE,
    DUPLICATE_AXIS,
    INDIVISIBLE,
    PARSE_ERROR,
    RANK_MISMATCH,
    TOO_LARGE,
    UNKNOWN_AXIS,
    ShardingError,
)
from sharding_core.kernels.catalog import KERNEL_DTYPES, Footing, Kernel, default_footprint, get_kernel, kernels
from sharding_core.kernels.memory import Estimate, estimate
from sharding_core.layout import INVALID_SPEC, Layout, check_dtype
from sharding_core.mesh import MeshSpec, build_mesh
from sharding_core.program import targets
from sharding_core.program.targets import GPU_TARGET_FILES, TpuTarget
from sharding_core.spec import canonical_spec, parse_spec, spec_axes
from sharding_core.units import fmt_bytes

MAX_KERNEL_DEVICES = 2048
"""Largest mesh a kernel runs on: XLA's CPU client compiles for at most 2048 devices."""

MAX_KERNEL_ELEMENTS = 2**24
"""Elements across a run's inputs, and in each output (checked before anything is allocated)."""

BAD_INPUTS = "bad_inputs"
UNAVAILABLE = "unavailable"
UNSUPPORTED = "unsupported"


@dataclasses.dataclass(frozen=True)
class JobInput:
    name: str
    shape: tuple[int, ...]
    spec: str  # canonical repr
    dtype: str


@dataclasses.dataclass(frozen=True)
class KernelJob:
    """Everything a worker needs, as plain hashable data (also the result cache's key)."""

    kernel: str
    devices_key: str
    platform: str  # of the device set (the run itself is on CPU devices)
    mesh_shape: tuple[int, ...]
    axis_names: tuple[str, ...]
    axis_types: tuple[str, ...]  # "Auto" / "Explicit", as the mesh has them
    device_ids: tuple[int, ...]  # simulated ids in mesh order (row-major)
    positions: tuple[int, ...]  # real device index at each mesh position
    inputs: tuple[JobInput, ...]
    out_specs: tuple[str, ...] | None
    params: tuple[tuple[str, str], ...]  # name -> value text (spec repr, axis name or integer)
    max_elements: int = MAX_KERNEL_ELEMENTS
    tpu: TpuTarget | None = None  # a simulated tpu: set, also compiled for libtpu's topology when installed
    max_bytes: int | None = None  # the run's memory budget, checked again with XLA's figures after compiling
    estimate: tuple[tuple[str, int], ...] = ()  # the parent's estimate, part by part (what the worker adds to)
    data: str = "random"  # the inputs' values: INPUT_DATA
    why_recompiles: int = 0  # candidate fixes the worker may compile (sharding_core.why; 0: explain only)
    why_seconds: float = 0.0  # and the seconds that search may take
    compile_only: bool = False  # compiled for the set's hardware on abstract inputs; nothing runs
    # Not said either way, on a set whose compiler is installed: when XLA's figures after the CPU compile put the
    # run past max_bytes (the estimate said it fits), it is compiled for the set's hardware instead of refused.
    compile_only_fallback: bool = False

    @property
    def size(self) -> int:
        return math.prod(self.mesh_shape)

    @property
    def mesh_axes(self) -> dict[str, int]:
        """Each mesh axis's size, in mesh order."""
        return dict(zip(self.axis_names, self.mesh_shape, strict=True))

    @property
    def id_grid(self) -> list[Any]:
        grid: list[Any] = np.asarray(self.device_ids, dtype=np.int64).reshape(self.mesh_shape).tolist()
        return grid


@dataclasses.dataclass(frozen=True)
class KernelPlan:
    """A checked run: the worker's job, and what the parent needs to turn its answer into the response.

    A task for the server's worker pool: ``key`` (the job, sent to the worker and the cache key),
    ``affinity`` (the mesh size: a worker that last ran it still has its device count) and ``result``.
    """

    job: KernelJob
    kernel: Kernel
    devset: DeviceSet
    mesh_spec: MeshSpec
    input_layouts: tuple[Layout, ...]
    compile_seconds: float | None = None  # a compile-only run's budget: the pool stops it past this

    @property
    def key(self) -> KernelJob:
        return self.job

    @property
    def affinity(self) -> int:
        return self.job.size

    @property
    def timeout(self) -> tuple[float, str] | None:
        """The run's own time limit and the setting it comes from, when it is not the pool's (a compile-only run is
        bounded by its compile-time budget, ``max_compile_seconds``)."""
        return (self.compile_seconds, "max_compile_seconds") if self.compile_seconds is not None else None

    @property
    def memory(self) -> int:
        """The bytes the run's worker is estimated to need before compiling (what it reserves of the server's
        kernel memory while it runs)."""
        return sum(value for _, value in self.job.estimate)

    def result(self, raw: Mapping[str, Any]) -> dict[str, Any]:
        """The run's result as facts (what the pool caches and the store keeps; figures come when it is read:
        :func:`sharding_core.cost.annotate.result_with_figures`)."""
        return result_json(self, raw)


@dataclasses.dataclass(frozen=True)
class RunInput:
    shape: tuple[int, ...]
    spec: str
    dtype: str = "float32"


UNKNOWN_KERNEL = "unknown_kernel"
BAD_INPUT_DATA = "bad_input_data"
INPUT_DATA = ("random", "arange")
"""What the inputs hold: seeded standard-normal draws (small integers for integer dtypes), or 0, 1, 2, … in
row-major order (``jnp.arange(n).reshape(shape)``, as JAX's tutorials build their arrays)."""
MAX_VALUES_SHOWN = 64
"""An output's first values (row-major) a run's result carries: the intro's psum is one number, 496."""


def unknown_kernel(name: str) -> ShardingError:
    names = [k.name for k in kernels()]
    return ShardingError(
        UNKNOWN_KERNEL,
        f"no kernel named {name[:64]!r}; the catalog has {', '.join(names)}",
        hint="GET /api/kernels lists them",
        kernels=names,
    )


def _check_spec_axes(text: str, what: str, mesh_axes: Sequence[str]) -> Any:
    spec = parse_spec(text)
    used = spec_axes(spec)
    for axis in used:
        if axis not in mesh_axes:
            raise ShardingError(
                UNKNOWN_AXIS,
                f"{what} {canonical_spec(spec)} names axis {axis!r}, which is not a mesh axis; the mesh axes are "
                f"{tuple(mesh_axes)}",
                hint=f"use one of {', '.join(map(repr, mesh_axes))}",
                axis=axis,
            )
    return spec


INPUT_FIELDS: Mapping[str, str] = {
    PARSE_ERROR: "spec",
    UNKNOWN_AXIS: "spec",
    DUPLICATE_AXIS: "spec",
    INVALID_SPEC: "spec",
    RANK_MISMATCH: "spec",
    INDIVISIBLE: "shape",  # the shape is what does not divide (the spec may be what the user meant)
    BAD_SHAPE: "shape",
    TOO_LARGE: "shape",
    BAD_DTYPE: "dtype",
}
"""Which field of an input a layout refusal is about, by its code (the rest are about the mesh or devices)."""


def input_error(e: ShardingError, index: int, name: str, given: RunInput) -> ShardingError:
    """A layout refusal of one input, named after it: the message says which input (as the kernel names it)
    with its spec and shape, and the details carry ``input`` (its index), ``input_name`` and ``field``."""
    field = INPUT_FIELDS.get(e.code)
    if field is None:
        return e
    shape = ", ".join(map(str, given.shape))
    return ShardingError(
        e.code,
        f"input {name} ({given.spec[:64]} on shape [{shape}]): {e.message}",
        e.hint,
        **{**e.details, "input": index, "input_name": name, "field": field},
    )


def _params(kernel: Kernel, given: Mapping[str, str] | None, mesh_axes: Sequence[str]) -> tuple[tuple[str, str], ...]:
    given = dict(given or {})
    known = {p.name for p in kernel.params}
    extra = sorted(set(given) - known)
    if extra:
        raise ShardingError(
            BAD_INPUTS,
            f"kernel {kernel.name!r} has no parameter {extra[0][:64]!r}; its parameters are "
            f"{', '.join(sorted(known)) or 'none'}",
        )
    out: list[tuple[str, str]] = []
    for p in kernel.params:
        value = given.get(p.name, p.default)
        if p.kind == "spec":
            value = canonical_spec(_check_spec_axes(value, f"parameter {p.name}", mesh_axes))
        elif p.kind == "axis":
            if value not in mesh_axes:
                raise ShardingError(
                    UNKNOWN_AXIS,
                    f"parameter {p.name} is {value[:64]!r}, which is not a mesh axis; the mesh axes are "
                    f"{tuple(mesh_axes)}",
                    hint=f"name one of {', '.join(map(repr, mesh_axes))}",
                    axis=value,
                )
        elif p.kind == "int":
            if not value.strip().isdigit() or not p.minimum <= int(value) <= p.maximum:
                raise ShardingError(
                    BAD_INPUTS,
                    f"parameter {p.name} must be an integer from {p.minimum} to {p.maximum}, got {value[:32]!r}",
                )
            value = str(int(value))
        out.append((p.name, value))
    return tuple(out)


def _kernel(name: str) -> Kernel:
    """The catalog's kernel of that name, installed (``unknown_kernel``, ``unavailable``)."""
    kernel = get_kernel(name)
    if kernel is None:
        raise unknown_kernel(name)
    if not kernel.available:
        raise ShardingError(
            UNAVAILABLE,
            f"kernel {kernel.name!r} needs the optional package {kernel.requires!r}, which is not installed",
            hint=f"install the {kernel.requires} extra (uv sync --extra {kernel.requires}) and restart the server",
        )
    return kernel


def _check_mesh_size(mesh_spec: MeshSpec, max_devices: int) -> None:
    if mesh_spec.size > max_devices:
        raise ShardingError(
            TOO_LARGE,
            f"the mesh has {mesh_spec.size} devices; kernels run on at most {max_devices} "
            "(setting max_kernel_devices: XLA's CPU client compiles for at most 2048 devices)",
            hint="use a smaller mesh; the layout explorer shows layouts of any size",
            limit=max_devices,
        )


def _simulated(devices: str, slices: int, chips_per_host: Sequence[int] | None) -> DeviceSet:
    """The device set, which must be simulated (``local`` accelerators belong to the serving process)."""
    devset = parse_devices(devices, slices=slices, chips_per_host=chips_per_host)
    if not devset.simulated and devset.platform != "cpu":
        raise ShardingError(
            UNSUPPORTED,
            f"'local' is this server's {devset.platform.upper()} devices; kernels run in worker processes on CPU "
            "devices, and an accelerator belongs to the serving process",
            hint="pick a simulated device set with the same shape (e.g. tpu:v5e:2x4 or gpu:h100:1x8)",
        )
    return devset


def _auto_or_explicit(mesh: Any) -> tuple[str, ...]:
    """The mesh's axis types, refusing Manual ones (they exist only inside shard_map)."""
    types = tuple(str(t.name) for t in mesh.axis_types)
    if "Manual" in types:
        raise ShardingError(
            BAD_MESH,
            "kernels run on Auto or Explicit mesh axes; Manual axes exist only inside shard_map",
            hint="choose Auto or Explicit axis types (shard_map kernels make their axes Manual themselves)",
        )
    return types


def _inputs(
    kernel: Kernel, inputs: Sequence[RunInput] | None, devset: DeviceSet, mesh_spec: MeshSpec
) -> tuple[list[Layout], list[JobInput]]:
    """Each input's layout on the simulated devices (``inputs`` None: the catalog's defaults), refusals named after
    the input and the field that is wrong."""
    chosen = [RunInput(i.shape, i.spec, i.dtype) for i in kernel.inputs] if inputs is None else list(inputs)
    if len(chosen) != len(kernel.inputs):
        raise ShardingError(
            BAD_INPUTS,
            f"kernel {kernel.name!r} takes {len(kernel.inputs)} inputs "
            f"({', '.join(i.name for i in kernel.inputs) or 'none'}), got {len(chosen)}",
            hint="give one {shape, spec, dtype} per input, in order",
        )
    layouts: list[Layout] = []
    job_inputs: list[JobInput] = []
    for index, (meta, given) in enumerate(zip(kernel.inputs, chosen, strict=True)):
        if given.dtype not in KERNEL_DTYPES:
            raise ShardingError(
                BAD_DTYPE,
                f"input {meta.name} has dtype {given.dtype[:32]!r}; kernels take {', '.join(KERNEL_DTYPES)}",
                input=index,
                input_name=meta.name,
                field="dtype",
            )
        try:
            layout = Layout.from_named(devset, mesh_spec, given.spec, tuple(given.shape), given.dtype)
        except ShardingError as e:
            raise input_error(e, index, meta.name, given) from None
        layouts.append(layout)
        assert layout.spec is not None  # a named layout always has its spec
        job_inputs.append(JobInput(meta.name, tuple(given.shape), layout.spec, given.dtype))
    return layouts, job_inputs


def _out_specs(kernel: Kernel, out_specs: Sequence[str] | None, axis_names: Sequence[str]) -> tuple[str, ...] | None:
    if out_specs is None:
        return None
    if kernel.outputs is None:
        raise ShardingError(
            BAD_INPUTS,
            f"kernel {kernel.name!r} returns a pytree whose shardings it decides; it takes no out_specs",
            hint="leave out_specs empty (null)",
        )
    if len(out_specs) != len(kernel.outputs):
        raise ShardingError(
            BAD_INPUTS,
            f"kernel {kernel.name!r} has {len(kernel.outputs)} output(s), got {len(out_specs)} out_specs",
            hint="one spec per output, or null to let JAX decide",
        )
    return tuple(canonical_spec(_check_spec_axes(s, "out spec", axis_names)) for s in out_specs)


def _tpu_target(devset: DeviceSet) -> TpuTarget | None:
    """A simulated ``tpu:`` set as libtpu's compile-only topology (None for other sets)."""
    if devset.platform != "tpu" or not devset.simulated or devset.generation is None:
        return None
    gen = devset.generation
    assert devset.topology is not None and devset.chips_per_host is not None
    return TpuTarget(
        f"{gen.libtpu_name}:{'x'.join(map(str, devset.topology))}",
        tuple(devset.chips_per_host),
        gen.chip_config,
        devset.slices,
    )


def compiler_for(devset: DeviceSet) -> str | None:
    """Why a compile-only run of this set cannot be made (``None``: it can): libtpu for ``tpu:`` sets, XLA's GPU
    compiler (the gpu extra) with a target config for ``gpu:`` sets; nothing for the rest."""
    if devset.platform == "tpu" and devset.simulated:
        return None if targets.libtpu_available() else "libtpu is not installed (the tpu extra)"
    if devset.platform == "gpu" and devset.simulated:
        kind = devset.key.split(":")[1]
        if kind not in GPU_TARGET_FILES:
            return f"XLA ships no GPU target config for {kind!r}"
        return None if targets.gpu_compiler_available() else "XLA's GPU compiler is not installed (the gpu extra)"
    return f"{devset.key} is compiled by the CPU run itself (compile-only runs are for tpu: and gpu: sets)"


def _compile_only(devset: DeviceSet, requested: bool | None, past_limits: bool) -> bool:
    """Whether the run compiles for the set's hardware only: asked for (``compile_only: true``), or not said and
    the CPU run would be past its limits on a set whose compiler is installed (a real-size array on a TPU slice)."""
    missing = compiler_for(devset)
    if requested is True and missing is not None:
        raise ShardingError(
            UNSUPPORTED if devset.platform not in ("tpu", "gpu") else UNAVAILABLE,
            f"a compile-only run compiles for the device set's hardware, and {missing}",
            hint="compile-only runs need a tpu: set with the tpu extra, or a gpu: set with the gpu extra",
        )
    if requested is not None:
        return requested
    return past_limits and missing is None


def _check_run_size(total: int, memory: Estimate, max_elements: int, max_bytes: int | None, hint: str) -> None:
    """A run that executes on CPU: its inputs' elements and its estimated memory against the limits."""
    if total > max_elements:
        raise ShardingError(
            TOO_LARGE,
            f"the inputs have {total} elements in all; a kernel run takes at most {max_elements} "
            "(setting max_kernel_elements)",
            hint=hint,
            limit=max_elements,
        )
    if max_bytes is not None and memory.total > max_bytes:
        raise ShardingError(
            TOO_LARGE,
            f"this run would need about {memory.describe()} of memory; a kernel worker may use at most "
            f"{fmt_bytes(max_bytes)} (setting max_worker_memory)",
            hint=hint.replace("smaller shapes", "smaller shapes or fewer devices"),
            estimate_bytes=memory.total,
            limit=max_bytes,
            parts=dict(memory.parts),
        )


def _sized(
    kernel: Kernel,
    devset: DeviceSet,
    footing: Footing,
    layouts: Sequence[Layout],
    compile_only: bool | None,
    max_elements: int,
    max_bytes: int | None,
) -> tuple[bool, Estimate]:
    """Whether the run compiles only, and its memory estimate, checked against the limits (a run past them on a
    set whose compiler is installed compiles only when the request did not say)."""
    footprint = (kernel.footprint or functools.partial(default_footprint, kernel))(footing)
    size = footing.devices
    total = sum(math.prod(shape) for shape in footing.shapes)
    run = estimate(size, footing.inputs_logical, sum(layout.total_bytes for layout in layouts), footprint.created,
                   footprint.reference)  # fmt: skip
    past = total > max_elements or (max_bytes is not None and run.total > max_bytes)
    only = _compile_only(devset, compile_only, past)
    # A compile-only run holds no inputs and runs no reference: only what the kernel creates while it is built.
    memory = estimate(size, 0, 0, footprint.created, 0) if only else run
    hint = SMALLER + (COMPILE_ONLY_HINT if compiler_for(devset) is None else "")
    _check_run_size(0 if only else total, memory, max_elements, max_bytes, hint)
    return only, memory


SMALLER = "use smaller shapes: the shardings and collectives are the same at any multiple"
COMPILE_ONLY_HINT = (
    "; or compile only (compile_only: true): on a tpu: set (or a gpu: set with the gpu extra) the kernel is "
    "compiled for the hardware at any size and nothing runs"
)


def plan_run(
    kernel_name: str,
    devices: str,
    mesh_spec: MeshSpec,
    inputs: Sequence[RunInput] | None,
    out_specs: Sequence[str] | None = None,
    params: Mapping[str, str] | None = None,
    *,
    slices: int = 1,
    chips_per_host: Sequence[int] | None = None,
    max_devices: int = MAX_KERNEL_DEVICES,
    max_elements: int = MAX_KERNEL_ELEMENTS,
    max_bytes: int | None = None,
    compile_only: bool | None = None,
    max_compile_seconds: float | None = None,
    data: str = "random",
    why_recompiles: int = 0,
    why_seconds: float = 0.0,
) -> KernelPlan:
    """Validates a run request on the simulated devices and returns the worker's job.

    ``inputs`` None takes the catalog's defaults; ``data`` is what they hold (:data:`INPUT_DATA`).
    ``compile_only``: True compiles the kernel for the set's hardware only (libtpu for ``tpu:`` sets, XLA's GPU
    compiler for ``gpu:`` sets) on abstract inputs — nothing is allocated for them and nothing runs, so
    ``max_kernel_elements`` does not apply and ``max_compile_seconds`` bounds the run; False runs on CPU; None (the
    default) runs on CPU unless the run is past the CPU run's limits on a set whose compiler is installed. Raises
    :class:`ShardingError` for anything a worker would refuse that can be known here. ``why_recompiles`` and
    ``why_seconds`` bound the worker's search for fixes of each collective (:mod:`sharding_core.why`).
    """
    if data not in INPUT_DATA:
        raise ShardingError(BAD_INPUT_DATA, f"input data is one of {', '.join(INPUT_DATA)}, got {data[:40]!r}")
    kernel = _kernel(kernel_name)
    _check_mesh_size(mesh_spec, max_devices)
    devset = _simulated(devices, slices, chips_per_host)
    mesh = build_mesh(devset, mesh_spec)
    types = _auto_or_explicit(mesh)
    axis_names = tuple(str(a) for a in mesh.axis_names)
    layouts, job_inputs = _inputs(kernel, inputs, devset, mesh_spec)
    outs = _out_specs(kernel, out_specs, axis_names)
    grid = mesh.device_ids.reshape(-1)
    order = {d.id: k for k, d in enumerate(devset.devices)}
    # Real device k stands for the k-th mesh device in the device set's list order.
    ranked = sorted((int(i) for i in grid), key=order.__getitem__)
    real_of = {sim: k for k, sim in enumerate(ranked)}
    resolved = _params(kernel, params, axis_names)
    footing = Footing(
        dict(zip(axis_names, (int(s) for s in mesh.devices.shape), strict=True)),
        tuple(i.shape for i in job_inputs),
        tuple(check_dtype(i.dtype) for i in job_inputs),
        dict(resolved),
        explicit="Explicit" in types,
    )
    only, memory = _sized(kernel, devset, footing, layouts, compile_only, max_elements, max_bytes)
    job = KernelJob(
        kernel=kernel.name,
        devices_key=devset.key,
        platform=devset.platform,
        mesh_shape=tuple(int(s) for s in mesh.devices.shape),
        axis_names=axis_names,
        axis_types=types,
        device_ids=tuple(int(i) for i in grid),
        positions=tuple(real_of[int(i)] for i in grid),
        inputs=tuple(job_inputs),
        out_specs=outs,
        params=resolved,
        max_elements=max_elements,
        tpu=_tpu_target(devset),
        max_bytes=max_bytes,
        estimate=tuple(memory.parts.items()),
        data=data,
        why_recompiles=why_recompiles,
        why_seconds=why_seconds,
        compile_only=only,
        compile_only_fallback=compile_only is None and not only and compiler_for(devset) is None,
    )
    budget = max_compile_seconds if only and max_compile_seconds is not None else None
    return KernelPlan(job, kernel, devset, mesh_spec, tuple(layouts), budget)


ORIGINS_NOTE = (
    "Shardy's sdy.sharding_origins, read from its module after propagation (compiled with "
    "xla_dump_to and xla_dump_hlo_pass_re=shardy-verbose): for each mesh axis of a value's sharding, "
    "where propagation took it from"
)


def dominant_dtype(inputs: Sequence[JobInput]) -> str:
    """The dtype most of a run's input bytes have (what its peak FLOP/s is read for); float32 without inputs."""
    weight: dict[str, int] = {}
    for i in inputs:
        weight[i.dtype] = (
            weight.get(i.dtype, 0) + math.prod(i.shape) * np.dtype(_NUMPY_DTYPE.get(i.dtype, i.dtype)).itemsize
        )
    return max(weight, key=lambda d: weight[d]) if weight else "float32"


_NUMPY_DTYPE = {"bfloat16": "float16"}  # same itemsize; NumPy has no bfloat16


def result_json(plan: KernelPlan, raw: Mapping[str, Any]) -> dict[str, Any]:
    """The run's result as facts: a worker's result with every array's layout exactly as ``/api/layout`` gives it,
    and what its figures are for (``estimate_on``: the device set and the dtype whose peak FLOP/s the compute term
    reads). The estimates are added when it is read (:func:`sharding_core.cost.annotate.result_with_figures`), so a
    stored result never freezes old figures.

    The worker reports each array's spec as JAX printed it (``out.sharding.spec``); the layout is
    computed here on the simulated devices with the same mesh, so the shards carry simulated ids.
    """
    import jax

    def array(entry: Mapping[str, Any]) -> dict[str, Any]:
        layout = Layout.from_named(
            plan.devset, plan.mesh_spec, parse_spec(entry["spec"]), tuple(entry["shape"]), str(entry["dtype"])
        )
        out = layout.json
        out["name"] = entry["name"]
        out["typeof"] = entry["typeof"]
        for key in ("max_abs_error", "max_abs_reference", "values"):  # outputs only
            if key in entry:
                out[key] = entry[key]
        return out

    outputs = [array(e) for e in raw["outputs"]]
    errors = [float(o["max_abs_error"]) for o in outputs if o.get("max_abs_error") is not None]
    job = plan.job
    devset = plan.devset
    return {
        "kernel": plan.kernel.name,
        "title": plan.kernel.title,
        "devices_key": plan.devset.key,
        "platform": plan.devset.platform,
        "executed_on": raw["executed_on"],
        "jax_version": jax.__version__,
        "mesh": {
            "shape": list(job.mesh_shape),
            "axis_names": list(job.axis_names),
            "axis_types": list(job.axis_types),
            "device_ids": job.id_grid,
        },
        "params": dict(job.params),
        "out_specs": list(job.out_specs) if job.out_specs is not None else None,
        "inputs": [array(e) for e in raw["inputs"]],
        "outputs": outputs,
        "max_abs_error": max(errors) if errors else None,
        "reference": raw["reference"],
        "collectives": raw["collectives"],
        "program": raw["program"],
        "timing": raw["timing"],
        "stablehlo": raw["stablehlo"],
        "stablehlo_truncated": raw["stablehlo_truncated"],
        "hlo": raw["hlo"],
        "hlo_truncated": raw["hlo_truncated"],
        "origins_note": ORIGINS_NOTE
        if raw["program"].get("origins") is not None
        else "Shardy wrote no propagation dump",
        "why_search": raw.get("why_search"),
        "compile_only": bool(raw.get("compile_only", False)),
        "tpu": raw.get("tpu"),
        "gpu": raw.get("gpu"),
        "estimate_on": {"devices": devset.key, "dtype": dominant_dtype(job.inputs)},
        # as every plan and capture: each value's sharding, the findings, memory over program order
        **{k: raw[k] for k in ("values", "findings", "memory_timeline") if k in raw},
    }
