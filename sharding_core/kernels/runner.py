"""Runs a :class:`~sharding_core.kernels.plan.KernelJob` in this process, on real CPU devices.

Called in a worker process whose CPU device count is set to the mesh size (:func:`use_cpu_devices`);
the result is plain data with device numbers already mapped back to the simulated ids. The steps:
build the mesh over the real devices at the simulated devices' positions, build the kernel, lower
it on abstract inputs (nothing allocated yet) and refuse outputs over the element limit, compile
(with Shardy's debug dump for sharding origins, and XLA's log captured), then allocate the inputs,
run, and compare with the unsharded computation.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import re
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from sharding_core.compat import cost_analysis, make_mesh, set_mesh
from sharding_core.errors import ShardingError
from sharding_core.hlo import origins
from sharding_core.hlo.collectives import device_assignment, read_collectives
from sharding_core.hlo.program import ProgramFacts, program_facts
from sharding_core.kernels.catalog import Built, Kernel, KernelContext, KernelInputError, get_kernel
from sharding_core.kernels.memory import Estimate, resident_bytes
from sharding_core.kernels.plan import MAX_VALUES_SHOWN, KernelJob
from sharding_core.spec import canonical_spec, parse_spec
from sharding_core.units import fmt_bytes
from sharding_core.why import Budget
from sharding_core.why.dump import Dump
from sharding_core.why.kernel import explain_run

KERNEL_ERROR = "kernel_error"
MAX_TEXT_CHARS = 256 * 1024
"""StableHLO and HLO text longer than this is cut (the response says so)."""

MAX_LOG_LINES = 40
_LOG_LINE = re.compile(r"^[IWEF]\d{4} [\d:.]+\s+\d+ [^\]]+\] ?(.*)$")

Progress = Callable[[str, int | None], None]
"""Told each state (``compiling``, ``running``) and, from ``running`` on, the bytes the run needs by XLA's figures."""


class KernelRunError(ShardingError):
    """A run that did not produce results: ``code``, ``message``, ``hint`` and details, as data
    (a :class:`~sharding_core.errors.ShardingError`, raised in a worker and sent back as its dict)."""


# What to change when JAX refuses a kernel, by the refusal's wording (first match wins).
HINTS: tuple[tuple[str, str], ...] = (
    (
        r"acts as an assert when all axes of mesh are of type `Explicit`",
        "With Explicit mesh axes, with_sharding_constraint only checks the sharding the value's type "
        "already has. Use jax.sharding.reshard(x, spec) to move the data (see sum_axis0_reshard), or choose "
        "Auto axis types so the compiler inserts the resharding.",
    ),
    (
        r"Contracting dimensions are sharded and it is ambiguous",
        "With Explicit axes JAX does not guess the output sharding of a matmul whose contracting dimensions "
        "are sharded: pass out_sharding=P(...) to the matmul (see matmul_xxt_out_sharding), reshard an operand "
        "first, or choose Auto axis types so Shardy decides.",
    ),
    (
        r"cannot contain axis names that are of type Auto",
        "reshard and out_sharding belong to Explicit sharding: choose Explicit axis types (jax.make_mesh's "
        "default), or with Auto axes use with_sharding_constraint instead.",
    ),
    (
        r"out_specs which require replication which can't be statically inferred",
        "out_specs leave out an axis, which says the output is the same on every device along it, and JAX "
        "cannot prove that: reduce or gather over that axis first (psum, all_gather(..., to='invarying')), "
        "name the axis in out_specs, or pass check_vma=False if you know better.",
    ),
    (
        r"ShardingTypeError|sharding.*(mismatch|do not match|must match)",
        "With Explicit axes shardings are part of the types and JAX refuses ambiguous ones: reshard the "
        "operands to agree, pass out_sharding, or choose Auto axis types.",
    ),
    (
        r"divisible|divide",
        "A sharded dimension must divide evenly by the mesh axes that shard it (for psum_scatter, by their "
        "size squared): change the shape or the spec.",
    ),
)


def refusal(e: Exception, where: str, **details: Any) -> KernelRunError:
    """Any exception that stopped a kernel, as data: a kernel's own input check keeps its code and
    hint; JAX's refusals become ``kernel_error`` with its message (without the traceback footer) and
    what to change."""
    if isinstance(e, KernelInputError):
        return KernelRunError(e.code, str(e), e.hint)
    message = str(e).strip() or f"{type(e).__name__} raised {where}"
    message = message.split("\n--------------------")[0]  # JAX's traceback-filtering footer
    return KernelRunError(
        KERNEL_ERROR, message[:4000], hint_for(f"{type(e).__name__}: {message}"), exception=type(e).__name__, **details
    )


def hint_for(message: str) -> str | None:
    for pattern, hint in HINTS:
        if re.search(pattern, message):
            return hint
    return None


# -------------------------------------------------------------------------------- devices


def use_cpu_devices(n: int) -> list[Any]:
    """Makes this process's CPU backend have exactly ``n`` devices and returns them.

    JAX fixes the CPU device count when its backend starts; a worker that served a different
    count clears its backends (and with them every compiled executable) and starts again with
    ``n`` — milliseconds, against seconds for a fresh process.
    """
    import jax
    from jax._src import xla_bridge

    if xla_bridge.backends_are_initialized():
        if len(jax.devices()) == n:
            return list(jax.devices())
        from jax.extend import backend

        backend.clear_backends()
    jax.config.update("jax_num_cpu_devices", n)
    devices = list(jax.devices())
    if len(devices) != n:
        raise KernelRunError("worker_error", f"the worker has {len(devices)} CPU devices, {n} were needed")
    return devices


# -------------------------------------------------------------------------------- helpers


@contextlib.contextmanager
def captured_stderr(echo: bool = True) -> Iterator[list[str]]:
    """XLA's C++ log lines (warnings such as involuntary rematerialization) written while inside.

    The log goes to file descriptor 2, below Python; it is redirected to a temporary file and
    copied back to the real stderr afterwards (unless ``echo`` is False: the compiles of candidate
    fixes, whose warnings belong to programs nobody asked for), so the server log keeps it too.
    """
    lines: list[str] = []
    with tempfile.TemporaryFile() as tmp:
        sys.stderr.flush()
        saved = os.dup(2)
        os.dup2(tmp.fileno(), 2)
        try:
            yield lines
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            tmp.seek(0)
            data = tmp.read()
            if data and echo:
                with contextlib.suppress(OSError):
                    os.write(2, data)
            for raw in data.decode("utf-8", errors="replace").splitlines():
                m = _LOG_LINE.match(raw)
                if m and raw[0] in "WEF" and len(lines) < MAX_LOG_LINES:
                    lines.append(m.group(1)[:2000])


# source_file="..." in op metadata, and the module's stack-frame table (FileNames: `2 "/abs/path.py"`)
_SOURCE_FILE = re.compile(r'(?P<key>source_file=|file_name=|^\s*\d+ )"(?P<path>/[^"\n]+)"', re.M)


def scrub_paths(text: str) -> str:
    """HLO metadata and stack-frame tables name source files by absolute path; a result shows them relative
    to the package they are in (``sharding_core/kernels/catalog.py``, ``site-packages/optax/...``), never
    the server's paths."""

    def relative(m: re.Match[str]) -> str:
        path = m.group("path")
        for marker in ("/site-packages/", "/dist-packages/"):
            if marker in path:
                return f'{m.group("key")}"site-packages/{path.split(marker, 1)[1]}"'
        for package in ("/sharding_core/", "/server/", "/shardscope/", "/tests/"):
            if package in path:
                return f'{m.group("key")}"{package.strip("/")}/{path.rsplit(package, 1)[1]}"'
        return f'{m.group("key")}"{os.path.basename(path)}"'

    return _SOURCE_FILE.sub(relative, text)


def _clip(text: str, limit: int) -> tuple[str, bool]:
    return (text, False) if len(text) <= limit else (text[:limit], True)


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


def _path_name(path: Sequence[Any]) -> str:
    parts: list[str] = []
    for p in path:
        for attr in ("key", "name", "idx"):
            if hasattr(p, attr):
                v = getattr(p, attr)
                if not (attr == "name" and v == "value"):  # flax Variables hold their array in .value
                    parts.append(str(v))
                break
    return ".".join(parts)


def _leaves(tree: Any, prefix: str = "") -> list[tuple[str, Any]]:
    import jax

    flat, _ = jax.tree_util.tree_flatten_with_path(tree)
    out = []
    for path, leaf in flat:
        name = _path_name(path)
        out.append((f"{prefix}.{name}" if prefix and name else (prefix or name or "out"), leaf))
    return out


def _spec_text(sharding: Any) -> str:
    from jax.sharding import NamedSharding, PartitionSpec

    if isinstance(sharding, NamedSharding):
        return canonical_spec(sharding.spec)
    if getattr(sharding, "is_fully_replicated", False):
        return repr(PartitionSpec())
    raise KernelRunError(
        KERNEL_ERROR, f"an output has a {type(sharding).__name__}, not a NamedSharding; its layout cannot be shown"
    )


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


def _memory(compiled: Any) -> dict[str, int | None]:
    stats = compiled.memory_analysis()
    if stats is None:
        return {}

    def get(name: str) -> int | None:
        v = getattr(stats, name, None)
        return int(v) if v is not None else None

    return {
        "argument_bytes": get("argument_size_in_bytes"),
        "output_bytes": get("output_size_in_bytes"),
        "temp_bytes": get("temp_size_in_bytes"),
        "alias_bytes": get("alias_size_in_bytes"),
        "generated_code_bytes": get("generated_code_size_in_bytes"),
        "peak_bytes": get("peak_memory_in_bytes"),
    }


def _cost(compiled: Any, facts: ProgramFacts) -> dict[str, Any]:
    """XLA's ``cost_analysis`` figures and the loop reader's facts that correct them (XLA counts a loop body once):
    :meth:`sharding_core.hlo.program.ProgramFacts.cost`. XLA's GPU compile-only executables have no cost analysis:
    the reader's counts stand alone."""
    try:
        xla = cost_analysis(compiled)
    except Exception:  # noqa: BLE001 - some backends answer with an error instead of nothing
        xla = {}
    return facts.cost(xla)


# --------------------------------------------------------------------------------- running


def _context(job: KernelJob, kernel: Kernel, mesh: Any, in_specs: tuple[Any, ...]) -> KernelContext:
    params: dict[str, Any] = {}
    for name, value in job.params:
        kind = next(p.kind for p in kernel.params if p.name == name)
        params[name] = parse_spec(value) if kind == "spec" else int(value) if kind == "int" else value
    out_specs = tuple(parse_spec(s) for s in job.out_specs) if job.out_specs is not None else None
    return KernelContext(mesh, in_specs, tuple(i.shape for i in job.inputs), out_specs, params, job.max_elements)


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


def _refuse_past_budget(job: KernelJob, compiled: Any) -> int | None:
    """Before anything is allocated: this process now, plus the inputs, XLA's program on every device and
    the reference, against the run's memory budget (the parent's estimate, checked with XLA's figures).
    Returns that total (what the server's budget then reserves for the run), or None without a budget."""
    if job.max_bytes is None:
        return None
    stats = _memory(compiled)
    per_device = (stats.get("output_bytes") or 0) + (stats.get("temp_bytes") or 0) - (stats.get("alias_bytes") or 0)
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


def _mesh(job: KernelJob, devices: Sequence[Any]) -> Any:
    """The job's mesh over ``devices`` (real CPU or libtpu ones), one per simulated mesh position."""
    grid = np.empty(job.size, dtype=object)
    grid[:] = list(devices)
    return make_mesh(grid.reshape(job.mesh_shape), job.axis_names, job.axis_types)


def _jit(job: KernelJob, kernel: Kernel, built: Built, mesh: Any, in_specs: tuple[Any, ...]) -> tuple[Any, list[Any]]:
    """``jax.jit`` of the built kernel (with the requested output specs for jit kernels) and its
    inputs as abstract values sharded on ``mesh``: nothing is allocated to lower and compile."""
    import jax
    import jax.numpy as jnp
    from jax.sharding import NamedSharding

    out_shardings: Any = None
    if job.out_specs is not None and kernel.mode == "jit":
        shardings = [NamedSharding(mesh, parse_spec(s)) for s in job.out_specs]
        out_shardings = shardings[0] if len(shardings) == 1 else tuple(shardings)
    jitted = jax.jit(built.fn, out_shardings=out_shardings) if out_shardings is not None else jax.jit(built.fn)
    structs = [
        jax.ShapeDtypeStruct(i.shape, jnp.dtype(i.dtype), sharding=NamedSharding(mesh, spec))
        for i, spec in zip(job.inputs, in_specs, strict=True)
    ]
    return jitted, structs


def _run(job: KernelJob, progress: Progress, max_text_chars: int) -> dict[str, Any]:
    import jax
    from jax.sharding import NamedSharding

    kernel = get_kernel(job.kernel)
    if kernel is None:
        raise KernelRunError("not_found", f"this worker has no kernel {job.kernel!r}")
    real = jax.devices()
    if len(real) < job.size:
        raise KernelRunError("worker_error", f"the worker has {len(real)} devices, the mesh needs {job.size}")
    sim_of_real = {real[r].id: sim for r, sim in zip(job.positions, job.device_ids, strict=True)}
    mesh = _mesh(job, [real[r] for r in job.positions])
    in_specs = tuple(parse_spec(i.spec) for i in job.inputs)
    ctx = _context(job, kernel, mesh, in_specs)

    progress("compiling", None)
    with set_mesh(mesh):
        built = kernel.build(ctx)
        extra: list[tuple[str, Any]] = []
        for name, arg in zip(built.extra_names, built.extra_args, strict=True):
            extra.extend(_leaves(arg, name))
        # Compile-only: the inputs stay abstract, compiled for the set's hardware; nothing runs or is allocated
        # here, so it never reaches "running" and reports no needs for the server's budget to reserve.
        if job.compile_only:
            from sharding_core.kernels.compiled import compile_only

            return compile_only(job, kernel, built, extra, max_text_chars)
        jitted, structs = _jit(job, kernel, built, mesh, in_specs)
        with captured_stderr() as log, tempfile.TemporaryDirectory(prefix="shardscope-sdy-") as dump:
            t0 = time.perf_counter()
            lowered = jitted.lower(*structs, *built.extra_args)
            t1 = time.perf_counter()
            for name, info in _leaves(lowered.out_info):
                _refuse_large(f"output {name}", info.shape, job.max_elements)
            stablehlo = lowered.as_text()
            # Shardy writes its module after propagation, with sdy.sharding_origins, for this compile only.
            compiled = lowered.compile(compiler_options={"xla_dump_to": dump, "xla_dump_hlo_pass_re": "shardy-verbose"})
            t2 = time.perf_counter()
            mlir = origins.read_dump(dump)
        try:
            needs = _refuse_past_budget(job, compiled)
        except KernelRunError as e:
            if not job.compile_only_fallback:
                raise
            # The estimate said the CPU run fits and XLA's figures say it does not: on a set with a compiler for
            # its hardware the run is compiled only, as one past the limits before compiling would have been.
            from sharding_core.kernels.compiled import compile_only

            result = compile_only(job, kernel, built, extra, max_text_chars)
            result["executed_on"] += f"; the CPU run was not started: {e.message}"
            return result

        progress("running", needs)
        host = [_host_input(k, i.shape, i.dtype, job.data) for k, i in enumerate(job.inputs)]
        args = [jax.device_put(h, NamedSharding(mesh, spec)) for h, spec in zip(host, in_specs, strict=True)]
        t3 = time.perf_counter()
        result = compiled(*args, *built.extra_args)
        result = jax.block_until_ready(result)
        t4 = time.perf_counter()

    outputs = _leaves(result)
    if kernel.outputs is not None and len(kernel.outputs) == len(outputs):
        outputs = [(name, leaf) for name, (_, leaf) in zip(kernel.outputs, outputs, strict=True)]
    t5 = time.perf_counter()
    checks = _reference_errors(job, kernel, ctx, host, [leaf for _, leaf in outputs])
    t6 = time.perf_counter()

    assignment = [sim_of_real[d.id] for d in device_assignment(compiled)]
    hlo_text = compiled.as_text()
    facts = program_facts(hlo_text)
    collectives = read_collectives(hlo_text, [assignment], job.id_grid, job.axis_names, facts)
    # Every collective's why; a CPU set's fixes are compiled here (a TPU set's on its TPU program, below).
    why_search = explain_run(
        collectives,
        hlo=hlo_text,
        dump=Dump(mlir, "shardy" if mlir else "gspmd"),
        lowered=lowered,
        arg_leaves=[*structs, *built.extra_args],
        mesh_axes=dict(zip(job.axis_names, job.mesh_shape, strict=True)),
        input_specs=tuple(i.spec for i in job.inputs),
        out_specs=job.out_specs,
        outputs_fixable=kernel.mode == "jit",
        compile_job=_compile_job(job, kernel, mesh, lambda d: sim_of_real[d.id]) if job.tpu is None else None,
        budget=Budget(job.why_recompiles, job.why_seconds),
        peak=_memory(compiled).get("peak_bytes"),
        note="fixes are compiled for the TPU program (tpu.collectives)" if job.tpu is not None else None,
    )
    stablehlo_text, stablehlo_cut = _clip(scrub_paths(stablehlo), max_text_chars)
    hlo_clip, hlo_cut = _clip(scrub_paths(hlo_text), max_text_chars)
    input_names = [i.name for i in job.inputs] + [name for name, _ in extra]
    origin_report = origins.report_json(origins.parse_origins(mlir, input_names)) if mlir else None

    def described(name: str, arr: Any, check: OutputCheck | None = None) -> dict[str, Any]:
        entry: dict[str, Any] = {
            "name": name,
            "shape": list(arr.shape),
            "dtype": str(arr.dtype),
            "spec": _spec_text(arr.sharding),
            "typeof": str(jax.typeof(arr)),
        }
        if check is not None:
            entry.update(check)
        return entry

    return {
        "inputs": [described(i.name, a) for i, a in zip(job.inputs, args, strict=True)]
        + [described(name, leaf) for name, leaf in extra],
        "outputs": [described(name, leaf, check) for (name, leaf), check in zip(outputs, checks, strict=True)],
        "collectives": collectives,
        "memory": _memory(compiled),
        "cost": _cost(compiled, facts),
        "timing": {
            "lower_ms": (t1 - t0) * 1e3,
            "compile_ms": (t2 - t1) * 1e3,
            "run_ms": (t4 - t3) * 1e3,
            "reference_ms": (t6 - t5) * 1e3,
        },
        "device_assignment": assignment,
        "stablehlo": stablehlo_text,
        "stablehlo_truncated": stablehlo_cut,
        "hlo": hlo_clip,
        "hlo_truncated": hlo_cut,
        "origins": origin_report,
        "compiler_log": log,
        "why_search": why_search,
        "reference": kernel.reference_doc,
        "executed_on": f"{job.size} CPU device{'s' if job.size != 1 else ''} in a worker process",
        "tpu": _tpu_section(job, kernel, built, max_text_chars),
        "gpu": _gpu_section(job, kernel, built, max_text_chars),
    }


# ------------------------------------------------------------------- TPU (compile-only)


def libtpu_available() -> bool:
    """Whether the optional ``tpu`` extra (libtpu) is importable."""
    import importlib.util

    return importlib.util.find_spec("libtpu") is not None


def _tpu_section(job: KernelJob, kernel: Kernel, built: Built, max_text_chars: int) -> dict[str, Any] | None:
    """The kernel compiled (never run) for libtpu's real topology of a ``tpu:`` set, or why not
    (:func:`sharding_core.kernels.compiled.section`)."""
    if job.tpu is None:
        return {"skipped": f"the device set is {job.platform}, not a simulated tpu: set"}
    from sharding_core.kernels import compiled

    return compiled.section(job, kernel, built, max_text_chars)


def _gpu_section(job: KernelJob, kernel: Kernel, built: Built, max_text_chars: int) -> dict[str, Any] | None:
    """The kernel compiled (never run) by XLA's GPU compiler for a ``gpu:`` set where the gpu extra is installed,
    or why not; None for other sets (:func:`sharding_core.kernels.compiled.section`)."""
    if job.platform != "gpu":
        return None
    from sharding_core.kernels import compiled

    return compiled.section(job, kernel, built, max_text_chars)


def _compile_job(
    job: KernelJob,
    kernel: Kernel,
    mesh: Any,
    device_id: Callable[[Any], int],
    per_slice: int = 0,
    abstract_extra: Callable[[Any], Any] | None = None,
) -> Callable[[tuple[str, ...], tuple[str, ...] | None], tuple[list[dict[str, Any]], str, int | None]]:
    """Compiles the kernel again as a run with other input specs (and out_specs) would: built anew on ``mesh``
    (this worker's CPU devices, or libtpu's for a TPU set: ``per_slice`` slices, extra arguments made
    abstract), its collectives read as the run's are. A candidate fix's compile, quiet (its XLA warnings
    belong to a program nobody asked for)."""
    import jax

    def compile_job(
        specs: tuple[str, ...], outs: tuple[str, ...] | None
    ) -> tuple[list[dict[str, Any]], str, int | None]:
        inputs = tuple(dataclasses.replace(i, spec=s) for i, s in zip(job.inputs, specs, strict=True))
        changed = dataclasses.replace(job, inputs=inputs, out_specs=outs)
        in_specs = tuple(parse_spec(s) for s in specs)
        with set_mesh(mesh), captured_stderr(echo=False):
            built = kernel.build(_context(changed, kernel, mesh, in_specs))
            jitted, structs = _jit(changed, kernel, built, mesh, in_specs)
            extra = [jax.tree.map(abstract_extra, a) for a in built.extra_args] if abstract_extra else built.extra_args
            compiled = jitted.lower(*structs, *extra).compile()
        text = compiled.as_text()
        ids = [device_id(d) for d in device_assignment(compiled)]
        if per_slice > 1:
            placed = device_assignment(compiled)
            slices = [
                [int(d.id) for d in placed if int(getattr(d, "slice_index", 0) or 0) == s] for s in range(per_slice)
            ]
        else:
            slices = [ids]
        colls = read_collectives(text, slices, job.id_grid, job.axis_names, program_facts(text))
        return colls, text, _memory(compiled).get("peak_bytes")

    return compile_job


def _reference_errors(
    job: KernelJob, kernel: Kernel, ctx: KernelContext, host: list[np.ndarray], outputs: list[Any]
) -> list[OutputCheck]:
    """Per output: max |sharded - unsharded|, the unsharded values' scale, and its first values."""
    import jax

    if kernel.reference is not None:
        wide = [h.astype(np.float64) if h.dtype.kind == "f" or h.dtype.name == "bfloat16" else h for h in host]
        want = [leaf for _, leaf in _leaves(kernel.reference(ctx, *wide))]
    else:
        want = [leaf for _, leaf in _leaves(_single_device(job, kernel, host))]
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
    ctx = _context(job, kernel, mesh, in_specs)
    with set_mesh(mesh):
        built: Built = kernel.build(ctx)
        args = [jax.device_put(h, NamedSharding(mesh, s)) for h, s in zip(host, in_specs, strict=True)]
        return jax.device_get(jax.jit(built.fn)(*args, *built.extra_args))
