"""Runs a :class:`~sharding_core.kernels.plan.KernelJob` in this process, on real CPU devices.

Called in a worker process whose CPU device count is set to the mesh size (:func:`use_cpu_devices`);
the result is plain data with device numbers already mapped back to the simulated ids. The steps:
build the mesh over the real devices at the simulated devices' positions, build the kernel, lower
it on abstract inputs (nothing allocated yet) and refuse outputs over the element limit, compile
(with Shardy's debug dump for sharding origins, and XLA's log captured), then allocate the inputs,
run, and compare with the unsharded computation. Lowering, compiling and reading the program are the one
pipeline's (:mod:`sharding_core.program`); the result carries its report as ``program``.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from sharding_core.compat import make_mesh, set_mesh, typeof_text
from sharding_core.kernels import compiled
from sharding_core.kernels.build import (
    MAX_TEXT_CHARS,
    KernelRunError,
    extra_leaves,
    jit_kernel,
    job_mesh,
    kernel_context,
    leaves,
    program_texts,
    recompiler,
    refusal,
    spec_text,
    timing_ms,
)
from sharding_core.kernels.catalog import Built, Kernel, KernelContext, get_kernel
from sharding_core.kernels.memory import Estimate, resident_bytes
from sharding_core.kernels.plan import MAX_VALUES_SHOWN, KernelJob
from sharding_core.planning.program import program_reading
from sharding_core.program.compile import Options, Program, lower
from sharding_core.program.report import Reading, Report, read_report
from sharding_core.program.shardy import Dump
from sharding_core.spec import parse_spec
from sharding_core.units import fmt_bytes
from sharding_core.why import Budget
from sharding_core.why.kernel import explain_run

__all__ = ["MAX_TEXT_CHARS", "KernelRunError", "Progress", "run_job", "use_cpu_devices"]

Progress = Callable[[str, int | None], None]
"""Told each state (``compiling``, ``running``) and, from ``running`` on, the bytes the run needs by XLA's figures."""


# -------------------------------------------------------------------------------- devices


def use_cpu_devices(n: int) -> list[Any]:
    """Makes this process's CPU backend have exactly ``n`` devices and returns them.

    JAX fixes the CPU device count when its backend starts; a worker that served a different
    count clears its backends (and with them every compiled executable) and starts again with
    ``n`` — milliseconds, against seconds for a fresh process.
    """
    import jax
    from jax._src import xla_bridge
    from jax.extend import backend as jax_backend

    if xla_bridge.backends_are_initialized():
        if len(jax.devices()) == n:
            return list(jax.devices())
        jax_backend.clear_backends()
    jax.config.update("jax_num_cpu_devices", n)
    devices = list(jax.devices())
    if len(devices) != n:
        raise KernelRunError("worker_error", f"the worker has {len(devices)} CPU devices, {n} were needed")
    return devices


# -------------------------------------------------------------------------------- helpers


def _host_input(i: int, shape: tuple[int, ...], dtype: str, data: str = "random") -> np.ndarray:
    """Deterministic input data: standard normal floats and small integers, or (``data="arange"``) 0, 1,
    2, … in row-major order, as JAX's tutorials build their arrays (``jnp.arange(32.0).reshape(4, 8)``)."""
    import jax.numpy as jnp

    if data == "arange":
        counted: np.ndarray = np.arange(math.prod(shape)).reshape(shape).astype(np.dtype(jnp.dtype(dtype)))
        return counted
    rng = np.random.default_rng(1000 + i)
    if dtype.startswith("int"):
        ints: np.ndarray = rng.integers(-4, 5, size=shape, dtype=np.int32).astype(dtype)
        return ints
    floats: np.ndarray = rng.standard_normal(shape, dtype=np.float32).astype(np.dtype(jnp.dtype(dtype)))
    return floats


OutputCheck = dict[str, Any]
"""An output's ``max_abs_error`` (max |sharded - unsharded|, None when not comparable), ``max_abs_reference``
(max |unsharded|: the scale the error is of) and ``values`` (``{"flat": first values, "size": n}``)."""


def _values(a: np.ndarray) -> dict[str, Any] | None:
    """An array's first values, row-major, as JSON numbers (complex arrays: none)."""
    if a.dtype.kind == "c":
        return None
    flat = a.reshape(-1)[:MAX_VALUES_SHOWN]
    items = flat.tolist() if a.dtype.kind in "iub" else flat.astype(np.float64).tolist()
    return {"flat": items, "size": int(a.size)}


def _check(got: Any, want: Any) -> OutputCheck:
    a = np.asarray(got)
    check: OutputCheck = {"max_abs_error": None, "max_abs_reference": None, "values": _values(a)}
    if want is None:
        return check
    b = np.asarray(want)
    if a.shape != b.shape:
        return check
    if a.size == 0:
        return {**check, "max_abs_error": 0.0, "max_abs_reference": 0.0}
    wide = np.complex128 if "c" in (a.dtype.kind, b.dtype.kind) else np.float64
    diff = np.abs(a.astype(wide) - b.astype(wide))
    return {**check, "max_abs_error": float(np.max(diff)), "max_abs_reference": float(np.max(np.abs(b.astype(wide))))}


# --------------------------------------------------------------------------------- running


def _refuse_large(what: str, shape: Sequence[int], limit: int) -> None:
    n = math.prod(shape)
    if n > limit:
        raise KernelRunError(
            "too_large",
            f"{what} would have shape {list(shape)} ({n} elements); a kernel run allows at most {limit} "
            "(setting max_kernel_elements)",
            hint="use smaller shapes: the shardings and collectives are the same at any multiple",
            limit=limit,
        )


def _refuse_past_budget(job: KernelJob, memory: Mapping[str, int]) -> int | None:
    """Before anything is allocated: this process now, plus the inputs, XLA's program on every device and
    the reference, against the run's memory budget (the parent's estimate, checked with XLA's figures).
    Returns that total (what the server's budget then reserves for the run), or None without a budget."""
    if job.max_bytes is None:
        return None
    out, temp, alias = (memory.get(f"{k}_size_in_bytes", 0) for k in ("output", "temp", "alias"))
    per_device = out + temp - alias
    parts = dict(job.estimate)
    now = resident_bytes() or parts.get("runtime", 0) + parts.get("created_arrays", 0)
    worker = {
        "worker_now": now,
        "inputs_on_host": parts.get("inputs_on_host", 0),
        "inputs_on_devices": parts.get("inputs_on_devices", 0),
        "program": max(0, per_device) * job.size,
        "reference": parts.get("reference", 0),
    }
    total = Estimate(worker)
    if total.total > job.max_bytes:
        raise KernelRunError(
            "too_large",
            f"compiled, this run needs about {total.describe()} of memory; a kernel worker may use at most "
            f"{fmt_bytes(job.max_bytes)} (setting max_worker_memory)",
            hint="use smaller shapes or fewer devices: the shardings and collectives are the same at any multiple",
            estimate_bytes=total.total,
            limit=job.max_bytes,
            parts=worker,
        )
    return total.total


def run_job(
    job: KernelJob, progress: Progress | None = None, *, max_text_chars: int = MAX_TEXT_CHARS
) -> dict[str, Any]:
    """Runs ``job`` on this process's CPU devices (which must number at least the mesh size).

    Raises :class:`KernelRunError` for everything that stops a run, JAX's refusals included.
    """
    try:
        return _run(job, progress or (lambda state, needs: None), max_text_chars)
    except KernelRunError:
        raise
    except Exception as e:  # noqa: BLE001 - JAX's refusals are many types; each becomes data
        raise refusal(e, "inside JAX", axis_types=list(job.axis_types)) from None


def _run(job: KernelJob, progress: Progress, max_text_chars: int) -> dict[str, Any]:
    import jax

    kernel = get_kernel(job.kernel)
    if kernel is None:
        raise KernelRunError("not_found", f"this worker has no kernel {job.kernel!r}")
    real = jax.devices()
    if len(real) < job.size:
        raise KernelRunError("worker_error", f"the worker has {len(real)} devices, the mesh needs {job.size}")
    sim_of_real = {real[r].id: sim for r, sim in zip(job.positions, job.device_ids, strict=True)}
    mesh = job_mesh(job, [real[r] for r in job.positions])
    in_specs = tuple(parse_spec(i.spec) for i in job.inputs)
    ctx = kernel_context(job, kernel, mesh, in_specs)

    progress("compiling", None)
    with set_mesh(mesh):
        built = kernel.build(ctx)
        extra = extra_leaves(built)
        # Compile-only: the inputs stay abstract, compiled for the set's hardware; nothing runs or is allocated
        # here, so it never reaches "running" and reports no needs for the server's budget to reserve.
        if job.compile_only:
            return compiled.compile_only(job, kernel, built, extra, max_text_chars)
        jitted, structs = jit_kernel(job, kernel, built, mesh, in_specs)
        lowered = lower(jitted, [*structs, *built.extra_args])
        for name, info in leaves(lowered.out_info):
            _refuse_large(f"output {name}", info.shape, job.max_elements)
        # Shardy writes its module after propagation, with sdy.sharding_origins, for this compile only.
        program = lowered.compile(Options(shardy=True, buffers=True, values=True))  # + every value, the timeline
        reading = Reading(job.id_grid, job.axis_names, lambda d: sim_of_real[d.id],
                          tuple([i.name for i in job.inputs] + [name for name, _ in extra]))  # fmt: skip
        report = read_report(program, reading)
        try:
            needs = _refuse_past_budget(job, report.memory or {})
        except KernelRunError as e:
            if not job.compile_only_fallback:
                raise
            # The estimate said the CPU run fits and XLA's figures say it does not: on a set with a compiler for
            # its hardware the run is compiled only, as one past the limits before compiling would have been.
            result = compiled.compile_only(job, kernel, built, extra, max_text_chars)
            result["executed_on"] += f"; the CPU run was not started: {e.message}"
            return result
        progress("running", needs)
        ran = _execute(job, mesh, in_specs, program, built)
    t0 = time.perf_counter()
    checks = _reference_errors(job, kernel, ctx, ran.host, [leaf for _, leaf in ran.outputs])
    reference_ms = (time.perf_counter() - t0) * 1e3
    outputs = ran.outputs
    if kernel.outputs is not None and len(kernel.outputs) == len(outputs):
        outputs = [(name, leaf) for name, (_, leaf) in zip(kernel.outputs, outputs, strict=True)]
    collectives = report.collectives_json()
    why_search = _why(job, kernel, program, report, collectives, [*structs, *built.extra_args], mesh, reading)
    inputs = [_described(i.name, a) for i, a in zip(job.inputs, ran.args, strict=True)]
    inputs += [_described(name, leaf) for name, leaf in extra]
    return {
        **program_texts(program, max_text_chars),
        "inputs": inputs,
        "outputs": [_described(name, leaf, check) for (name, leaf), check in zip(outputs, checks, strict=True)],
        "collectives": collectives,
        "program": report.json(),
        "timing": {**timing_ms(program), "run_ms": ran.run_ms, "reference_ms": reference_ms},
        "why_search": why_search,
        "reference": kernel.reference_doc,
        "executed_on": f"{job.size} CPU device{'s' if job.size != 1 else ''} in a worker process",
        "tpu": _tpu_section(job, kernel, built, max_text_chars),
        "gpu": _gpu_section(job, kernel, built, max_text_chars),
        # values, findings and memory_timeline, as every plan and capture carries them
        **program_reading(program, report, collectives, job.mesh_axes, list(reading.input_names)),
    }


def _why(
    job: KernelJob,
    kernel: Kernel,
    program: Program,
    report: Report,
    collectives: list[dict[str, Any]],
    arg_leaves: list[Any],
    mesh: Any,
    reading: Reading,
) -> dict[str, Any]:
    """Every collective's why; a CPU set's fixes are compiled here (a TPU set's on its TPU program)."""
    return explain_run(
        collectives,
        hlo=program.hlo or "",
        dump=program.shardy or Dump(None, "gspmd"),
        lowered=program.lowered,
        arg_leaves=arg_leaves,
        mesh_axes=job.mesh_axes,
        input_specs=tuple(i.spec for i in job.inputs),
        out_specs=job.out_specs,
        outputs_fixable=kernel.mode == "jit",
        compile_job=recompiler(job, kernel, mesh, reading) if job.tpu is None else None,
        budget=Budget(job.why_recompiles, job.why_seconds),
        peak=report.peak,
        note="fixes are compiled for the TPU program (tpu.collectives)" if job.tpu is not None else None,
    )


@dataclasses.dataclass(frozen=True)
class _Ran:
    host: list[np.ndarray]
    args: list[Any]
    outputs: list[tuple[str, Any]]
    run_ms: float


def _execute(job: KernelJob, mesh: Any, in_specs: tuple[Any, ...], program: Program, built: Built) -> _Ran:
    """The inputs allocated and placed, and the compiled program run on them."""
    import jax
    from jax.sharding import NamedSharding

    host = [_host_input(k, i.shape, i.dtype, job.data) for k, i in enumerate(job.inputs)]
    args = [jax.device_put(h, NamedSharding(mesh, spec)) for h, spec in zip(host, in_specs, strict=True)]
    assert program.executable is not None
    t0 = time.perf_counter()
    result = jax.block_until_ready(program.executable(*args, *built.extra_args))
    return _Ran(host, args, leaves(result), (time.perf_counter() - t0) * 1e3)


def _described(name: str, arr: Any, check: OutputCheck | None = None) -> dict[str, Any]:
    """An input as placed or an output (a ``jax.Array`` or an abstract one) as the worker reports it."""

    entry: dict[str, Any] = {
        "name": name,
        "shape": list(arr.shape),
        "dtype": str(arr.dtype),
        "spec": spec_text(arr.sharding),
        "typeof": typeof_text(arr),
    }
    if check is not None:
        entry.update(check)
    return entry


# ------------------------------------------------------------------- TPU and GPU (compile-only)


def _tpu_section(job: KernelJob, kernel: Kernel, built: Built, max_text_chars: int) -> dict[str, Any] | None:
    """The kernel compiled (never run) for libtpu's real topology of a ``tpu:`` set, or why not
    (:func:`sharding_core.kernels.compiled.section`)."""
    if job.tpu is None:
        return {"skipped": f"the device set is {job.platform}, not a simulated tpu: set"}
    return compiled.section(job, kernel, built, max_text_chars)


def _gpu_section(job: KernelJob, kernel: Kernel, built: Built, max_text_chars: int) -> dict[str, Any] | None:
    """The kernel compiled (never run) by XLA's GPU compiler for a ``gpu:`` set where the gpu extra is installed,
    or why not; None for other sets (:func:`sharding_core.kernels.compiled.section`)."""
    if job.platform != "gpu":
        return None
    return compiled.section(job, kernel, built, max_text_chars)


def _reference_errors(
    job: KernelJob, kernel: Kernel, ctx: KernelContext, host: list[np.ndarray], outputs: list[Any]
) -> list[OutputCheck]:
    """Per output: max |sharded - unsharded|, the unsharded values' scale, and its first values."""
    import jax

    if kernel.reference is not None:
        wide = [h.astype(np.float64) if h.dtype.kind == "f" or h.dtype.name == "bfloat16" else h for h in host]
        want = [leaf for _, leaf in leaves(kernel.reference(ctx, *wide))]
    else:
        want = [leaf for _, leaf in leaves(_single_device(job, kernel, host))]
    if len(want) != len(outputs):
        return [_check(jax.device_get(got), None) for got in outputs]
    return [_check(jax.device_get(got), w) for got, w in zip(outputs, want, strict=True)]


def _single_device(job: KernelJob, kernel: Kernel, host: list[np.ndarray]) -> Any:
    """The kernel on a one-device mesh with the same axis names: the unsharded computation."""
    import jax
    from jax.sharding import NamedSharding

    one = np.empty((1,) * len(job.mesh_shape), dtype=object)
    one.flat[0] = jax.devices()[0]
    mesh = make_mesh(one, job.axis_names, job.axis_types)
    in_specs = tuple(parse_spec(i.spec) for i in job.inputs)
    ctx = kernel_context(job, kernel, mesh, in_specs)
    with set_mesh(mesh):
        built: Built = kernel.build(ctx)
        args = [jax.device_put(h, NamedSharding(mesh, s)) for h, s in zip(host, in_specs, strict=True)]
        return jax.device_get(jax.jit(built.fn)(*args, *built.extra_args))
