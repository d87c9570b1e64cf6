"""A kernel compiled, never run, for the real hardware of its device set.

* ``tpu:`` sets (the optional ``tpu`` extra): libtpu's compile-only topology,
  ``jax.experimental.topologies.get_topology_desc(platform="tpu", ...)``, with libtpu's devices at the simulated
  mesh's positions (same ids).
* ``gpu:`` sets (the optional ``gpu`` extra: XLA's CUDA compiler plugin, no NVIDIA libraries): XLA's GPU compiler
  with the target config XLA ships for that GPU (:func:`sharding_core.program.targets.compile_target`).

One compile through the one pipeline (:mod:`sharding_core.program`), read into its report, two uses
(:mod:`sharding_core.kernels.runner` calls them):

* :func:`section` — the ``tpu`` (or ``gpu``) section of every run on such a set, beside the CPU run: the program
  the hardware would run, whose collectives, bytes and memory are the result's headline figures
  (:func:`sharding_core.cost.annotate.estimate_run`). Where the compiler is not installed it says so, and the
  figures are the CPU stand-in's.
* :func:`compile_only` — a compile-only run (``KernelJob.compile_only``): the inputs stay abstract, nothing is
  allocated for them and nothing runs; the result is the target program's, with no values and no error against a
  reference. Its size is bounded by the compile-time budget (``max_compile_seconds``), not by the element limit of
  the CPU run.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from sharding_core.compat import set_mesh, typeof_text
from sharding_core.devices import devices_of_key
from sharding_core.hlo.collectives import DCN_NOTE
from sharding_core.kernels.build import (
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
from sharding_core.kernels.catalog import Built, Kernel
from sharding_core.kernels.plan import KernelJob
from sharding_core.planning.program import program_reading
from sharding_core.program import targets
from sharding_core.program.compile import PLAIN, Options, Program, lower
from sharding_core.program.report import Reading, Report, read_report
from sharding_core.program.shardy import Dump
from sharding_core.spec import parse_spec
from sharding_core.why import Budget
from sharding_core.why.kernel import explain_run

NO_LIBTPU = "libtpu is not installed (the optional tpu extra: uv sync --extra tpu)"
NO_GPU_COMPILER = (
    "XLA's GPU compiler is not installed (the optional gpu extra: jax-cuda12-plugin and jax-cuda12-pjrt, no NVIDIA "
    "libraries needed): the figures are the CPU stand-in's"
)


@dataclasses.dataclass(frozen=True)
class Target:
    """The compile-only devices of a job's set and what the result says about them."""

    kind: str  # "tpu" or "gpu"
    devices: dict[int, Any]  # id -> compile-only device
    topology: str  # libtpu's topology name, or XLA's GPU topology (hosts x GPUs)
    source: str  # what compiles, in words


def _target(job: KernelJob) -> Target:
    """The set's compile-only devices (:func:`sharding_core.program.targets.compile_target`: libtpu's topology, or
    XLA's GPU topology from the shipped target config)."""
    found = targets.set_target(devices_of_key(job.devices_key))
    if job.tpu is not None:
        return Target("tpu", found.by_id, job.tpu.topology_name, found.source)
    topology = found.source.split("topology ", 1)[-1].split(",", 1)[0]
    return Target("gpu", found.by_id, topology, found.source)


@dataclasses.dataclass(frozen=True)
class _Compiled:
    """The kernel compiled for a target: the program and what built it (for the why's recompiles)."""

    program: Program
    report: Report
    mesh: Any
    structs: list[Any]
    extra: list[Any]
    abstract: Any


def _compile(job: KernelJob, kernel: Kernel, built: Built, target: Target, options: Options) -> _Compiled:
    """Lowers and compiles the built kernel for ``target`` on abstract inputs (nothing allocated) and reads it."""
    import jax
    from jax.sharding import NamedSharding

    missing = [i for i in job.device_ids if i not in target.devices]
    if missing:
        raise KernelRunError(
            "worker_error", f"the {target.kind.upper()} compiler's topology has no device {missing[0]} of the mesh"
        )
    mesh = job_mesh(job, [target.devices[i] for i in job.device_ids])
    in_specs = tuple(parse_spec(i.spec) for i in job.inputs)

    def abstract(leaf: Any) -> Any:
        sharding = getattr(leaf, "sharding", None)
        spec = sharding.spec if isinstance(sharding, NamedSharding) else None
        placed = NamedSharding(mesh, spec) if spec is not None else None
        return jax.ShapeDtypeStruct(leaf.shape, leaf.dtype, sharding=placed)

    with set_mesh(mesh):
        if kernel.mode == "shard_map":
            # shard_map holds the mesh it was built with: build the kernel again over the target's mesh.
            built = kernel.build(kernel_context(job, kernel, mesh, in_specs))
        jitted, structs = jit_kernel(job, kernel, built, mesh, in_specs)
        extra = [jax.tree.map(abstract, arg) for arg in built.extra_args]
        program = lower(jitted, [*structs, *extra]).compile(options)
    names = tuple(i.name for i in job.inputs) + tuple(name for name, _ in extra_leaves(built))
    report = read_report(program, Reading(job.id_grid, job.axis_names, input_names=names))
    return _Compiled(program, report, mesh, structs, extra, abstract)


def _explain(job: KernelJob, kernel: Kernel, done: _Compiled, section: dict[str, Any]) -> None:
    """Gives the target program's collectives their why and, within the job's budget, fixes compiled for the same
    target (:mod:`sharding_core.why`); ``section["why_search"]`` says what the search did. Shardy's origins come
    from the compile that wrote them or, where the figures' compile was a plain one, from a second compile: the
    option that writes them changes what XLA:TPU compiles (its memory figures)."""
    program, mesh = done.program, done.mesh
    dump = program.shardy
    if dump is None:
        with set_mesh(mesh):
            dump = program.again(Options(shardy=True, echo=False)).shardy
    section["why_search"] = explain_run(
        section["collectives"],
        hlo=program.hlo or "",
        dump=dump or Dump(None, "gspmd"),
        lowered=program.lowered,
        arg_leaves=[*done.structs, *done.extra],
        mesh_axes=job.mesh_axes,
        input_specs=tuple(i.spec for i in job.inputs),
        out_specs=job.out_specs,
        outputs_fixable=kernel.mode == "jit",
        compile_job=recompiler(job, kernel, mesh, Reading(job.id_grid, job.axis_names), done.abstract),
        budget=Budget(job.why_recompiles, job.why_seconds),
        peak=done.report.peak,
    )


def _section(job: KernelJob, target: Target, done: _Compiled, max_text_chars: int) -> dict[str, Any]:
    """The section: the compiled program's report, its collectives and DCN steps (facts; estimates come when read)
    and its HLO."""
    texts = program_texts(done.program, max_text_chars)
    report = done.report
    slices = job.tpu.slices if job.tpu is not None else 1
    return {
        "topology": target.topology,
        "device_kind": done.mesh.devices.flat[0].device_kind,
        "source": target.source,
        "slices": slices,
        "hlo": texts["hlo"],
        "hlo_truncated": texts["hlo_truncated"],
        "collectives": report.collectives_json(),
        "dcn": [dict(s) for s in report.dcn] if slices > 1 else None,
        "dcn_note": DCN_NOTE if slices > 1 else None,
        "program": report.json(),
    }


def section(job: KernelJob, kernel: Kernel, built: Built, max_text_chars: int) -> dict[str, Any] | None:
    """The ``tpu`` or ``gpu`` section of a run: the kernel compiled for the set's hardware, or why not (a refusal
    is returned as ``{"error": ...}``: the CPU run stands regardless). None for sets that have no such compiler
    (``cpu:`` sets)."""
    if job.tpu is None and job.platform != "gpu":
        return None
    if job.tpu is not None and not targets.libtpu_available():
        return {"skipped": NO_LIBTPU}
    if job.tpu is None and not targets.gpu_compiler_available():
        return {"skipped": NO_GPU_COMPILER}
    what = "compiling for TPU" if job.tpu is not None else "compiling for GPU"
    try:
        target = _target(job)
        done = _compile(job, kernel, built, target, PLAIN)
        found = _section(job, target, done, max_text_chars)
        if target.kind == "tpu":  # a TPU set's fixes are compiled for its TPU program (the CPU run's note says so)
            _explain(job, kernel, done, found)
        return found
    except KernelRunError as e:
        return {"error": e.to_dict()}
    except Exception as e:  # noqa: BLE001 - the compilers' and JAX's refusals are many types; each becomes data
        return {"error": refusal(e, what).to_dict()}


def describe_target(target: Target, job: KernelJob, device_kind: str) -> str:
    """``executed_on`` of a compile-only run: where it was compiled for, and that it did not run."""
    plural = "s" if job.size != 1 else ""
    return f"not run: compiled only, for {target.source} ({job.size} {device_kind} device{plural})"


def compile_only(
    job: KernelJob, kernel: Kernel, built: Built, extra: list[tuple[str, Any]], max_text_chars: int
) -> dict[str, Any]:
    """A compile-only run: the kernel (already built: the arrays it creates are real, bounded as in any run) lowered
    and compiled for the set's hardware on abstract inputs. The result has the run's shape: the inputs as placed,
    the outputs with the shardings the compiler gave them (no values, no ``max_abs_error``), the target program's
    report and collectives (also in its ``tpu`` / ``gpu`` section), its HLO and Shardy's origins, and
    ``compile_only: true``. Raises :class:`KernelRunError` for a refusal (it is the whole result)."""
    import jax

    target = _target(job)
    done = _compile(job, kernel, built, target, Options(shardy=True, buffers=True, values=True))
    found = _section(job, target, done, max_text_chars)
    _explain(job, kernel, done, found)
    program = done.program
    assert program.executable is not None
    shardings = jax.tree.leaves(program.executable.output_shardings)
    outputs = [
        (name, jax.ShapeDtypeStruct(info.shape, info.dtype, sharding=sharding))
        for (name, info), sharding in zip(leaves(program.lowered.out_info), shardings, strict=True)
    ]
    if kernel.outputs is not None and len(kernel.outputs) == len(outputs):
        outputs = [(name, leaf) for name, (_, leaf) in zip(kernel.outputs, outputs, strict=True)]
    inputs = [_described(i.name, s) for i, s in zip(job.inputs, done.structs, strict=True)]
    return {
        **program_texts(program, max_text_chars),
        "inputs": inputs + [_described(name, leaf) for name, leaf in extra],
        "outputs": [_described(name, leaf) for name, leaf in outputs],
        "collectives": found["collectives"],
        "program": found["program"],
        "timing": {**timing_ms(program), "run_ms": None, "reference_ms": None},
        "why_search": found["why_search"],
        "reference": "none: a compile-only run computes nothing to compare",
        "executed_on": describe_target(target, job, str(found["device_kind"])),
        "compile_only": True,
        target.kind: found,
        **program_reading(
            program,
            done.report,
            found["collectives"],
            job.mesh_axes,
            [i.name for i in job.inputs] + [name for name, _ in extra],
        ),
    }


def _described(name: str, leaf: Any) -> dict[str, Any]:

    return {
        "name": name,
        "shape": list(leaf.shape),
        "dtype": str(leaf.dtype),
        "spec": spec_text(leaf.sharding),
        "typeof": typeof_text(leaf),
    }
