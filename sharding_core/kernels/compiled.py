"""A kernel compiled, never run, for the real hardware of its device set.

* ``tpu:`` sets (the optional ``tpu`` extra): libtpu's compile-only topology,
  ``jax.experimental.topologies.get_topology_desc(platform="tpu", ...)``, with libtpu's devices at the simulated
  mesh's positions (same ids).
* ``gpu:`` sets (the optional ``gpu`` extra: XLA's CUDA compiler plugin, no NVIDIA libraries): XLA's GPU compiler
  with the target config XLA ships for that GPU (:func:`sharding_core.planning.targets.compile_target`).

One compile, three uses (:mod:`sharding_core.kernels.runner` calls them):

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
import importlib.util
import os
import tempfile
import time
from typing import Any

from sharding_core.compat import set_mesh, typeof_text
from sharding_core.hlo import origins
from sharding_core.hlo.collectives import DCN_NOTE, dcn_steps, device_assignment, read_collectives
from sharding_core.hlo.program import program_facts
from sharding_core.kernels import runner
from sharding_core.kernels.catalog import Built, Kernel
from sharding_core.kernels.plan import KernelJob
from sharding_core.kernels.runner import (
    KernelRunError,
    _clip,
    _context,
    _cost,
    _jit,
    _leaves,
    _memory,
    _mesh,
    _spec_text,
    captured_stderr,
    refusal,
    scrub_paths,
)
from sharding_core.spec import parse_spec

NO_LIBTPU = "libtpu is not installed (the optional tpu extra: uv sync --extra tpu)"
NO_GPU_COMPILER = (
    "XLA's GPU compiler is not installed (the optional gpu extra: jax-cuda12-plugin and jax-cuda12-pjrt, no NVIDIA "
    "libraries needed): the figures are the CPU stand-in's"
)


def gpu_compiler_available() -> bool:
    """Whether XLA's CUDA compiler plugin (the optional ``gpu`` extra) is importable."""
    return importlib.util.find_spec("jax_cuda12_plugin") is not None


@dataclasses.dataclass(frozen=True)
class Target:
    """The compile-only devices of a job's set and what the result says about them."""

    kind: str  # "tpu" or "gpu"
    devices: dict[int, Any]  # id -> compile-only device
    topology: str  # libtpu's topology name, or XLA's GPU topology (hosts x GPUs)
    source: str  # what compiles, in words


def _target(job: KernelJob) -> Target:
    if job.tpu is not None:
        os.environ["TPU_SKIP_MDS_QUERY"] = "1"  # libtpu must never query a cloud metadata server
        # Several workers (and a test process) load libtpu at once, compile-only: no device to guard.
        os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")
        from jax.experimental import topologies

        devices = {int(d.id): d for d in topologies.get_topology_desc(**job.tpu.describe()).devices}
        source = f"libtpu compile-only topology {job.tpu.topology_name}"
        if job.tpu.slices > 1:
            source += f" x {job.tpu.slices} slices"
        return Target("tpu", devices, job.tpu.topology_name, source)
    from sharding_core.planning.targets import compile_target

    target = compile_target(job.devices_key)  # XLA's GPU topology from the shipped target config
    topology = target.source.split("topology ", 1)[-1].split(",", 1)[0]
    return Target("gpu", target.by_id, topology, target.source)


def _compile(job: KernelJob, kernel: Kernel, built: Built, target: Target, dump: str | None) -> dict[str, Any]:
    """Lowers and compiles the built kernel for ``target`` on abstract inputs (nothing allocated)."""
    import jax
    from jax.sharding import NamedSharding

    missing = [i for i in job.device_ids if i not in target.devices]
    if missing:
        raise KernelRunError(
            "worker_error", f"the {target.kind.upper()} compiler's topology has no device {missing[0]} of the mesh"
        )
    mesh = _mesh(job, [target.devices[i] for i in job.device_ids])
    in_specs = tuple(parse_spec(i.spec) for i in job.inputs)

    def abstract(leaf: Any) -> Any:
        sharding = getattr(leaf, "sharding", None)
        spec = sharding.spec if isinstance(sharding, NamedSharding) else None
        placed = NamedSharding(mesh, spec) if spec is not None else None
        return jax.ShapeDtypeStruct(leaf.shape, leaf.dtype, sharding=placed)

    with set_mesh(mesh):
        if kernel.mode == "shard_map":
            # shard_map holds the mesh it was built with: build the kernel again over the target's mesh.
            built = kernel.build(_context(job, kernel, mesh, in_specs))
        jitted, structs = _jit(job, kernel, built, mesh, in_specs)
        extra = [jax.tree.map(abstract, arg) for arg in built.extra_args]
        t0 = time.perf_counter()
        lowered = jitted.lower(*structs, *extra)
        t1 = time.perf_counter()
        options = {"xla_dump_to": dump, "xla_dump_hlo_pass_re": "shardy-verbose"} if dump else None
        compiled = lowered.compile(compiler_options=options) if options else lowered.compile()
        t2 = time.perf_counter()
    return {"mesh": mesh, "structs": structs, "extra": extra, "abstract": abstract, "lowered": lowered,
            "compiled": compiled, "lower_ms": (t1 - t0) * 1e3, "compile_ms": (t2 - t1) * 1e3}  # fmt: skip


def _explain(
    job: KernelJob, kernel: Kernel, program: dict[str, Any], section: dict[str, Any], mlir: str | None
) -> None:
    """Gives the target program's collectives their why and, within the job's budget, fixes compiled for the same
    target (:mod:`sharding_core.why`); ``section["why_search"]`` says what the search did. Shardy's origins come
    from the compile with the dump (``mlir``) or, where the figures' compile was a plain one, from a second
    compile: the option that writes them changes what XLA:TPU compiles (its memory figures)."""
    from sharding_core.why import Budget
    from sharding_core.why.dump import Dump, compile_with_dump
    from sharding_core.why.kernel import explain_run

    lowered, compiled, mesh = program["lowered"], program["compiled"], program["mesh"]
    if mlir is None:
        with set_mesh(mesh):
            _, dump = compile_with_dump(lowered)
    else:
        dump = Dump(mlir, "shardy")
    section["why_search"] = explain_run(
        section["collectives"],
        hlo=compiled.as_text(),
        dump=dump,
        lowered=lowered,
        arg_leaves=[*program["structs"], *program["extra"]],
        mesh_axes=dict(zip(job.axis_names, job.mesh_shape, strict=True)),
        input_specs=tuple(i.spec for i in job.inputs),
        out_specs=job.out_specs,
        outputs_fixable=kernel.mode == "jit",
        compile_job=runner._compile_job(
            job, kernel, mesh, lambda d: int(d.id), per_slice=int(section["slices"]), abstract_extra=program["abstract"]
        ),
        budget=Budget(job.why_recompiles, job.why_seconds),
        peak=_memory(compiled).get("peak_bytes"),
    )


def _facts(job: KernelJob, target: Target, program: dict[str, Any], max_text_chars: int) -> dict[str, Any]:
    """The section: the compiled program's collectives, memory, cost and HLO (facts; estimates come when read)."""
    compiled, mesh = program["compiled"], program["mesh"]
    placed = device_assignment(compiled)
    hlo_text = compiled.as_text()
    facts = program_facts(hlo_text)
    hlo_clip, hlo_cut = _clip(scrub_paths(hlo_text), max_text_chars)
    slices = job.tpu.slices if job.tpu is not None else 1
    # libtpu compiles one slice's program (num_partitions = devices per slice) and every slice runs
    # it on its own devices: partition p of slice s is the p-th device of slice s in the assignment.
    per_slice = [[int(d.id) for d in placed if int(getattr(d, "slice_index", 0) or 0) == s] for s in range(slices)]
    section: dict[str, Any] = {
        "topology": target.topology,
        "device_kind": mesh.devices.flat[0].device_kind,
        "source": target.source,
        "slices": slices,
        "hlo": hlo_clip,
        "hlo_truncated": hlo_cut,
        "collectives": read_collectives(hlo_text, per_slice, job.id_grid, job.axis_names, facts),
        "device_assignment": [int(d.id) for d in placed],
        "memory": _memory(compiled),
        "cost": _cost(compiled, facts),
        "dcn": None,
        "dcn_note": None,
        "compile_ms": program["compile_ms"],
    }
    if slices > 1:
        section["dcn"] = dcn_steps(hlo_text, job.id_grid, job.axis_names, facts)
        section["dcn_note"] = DCN_NOTE
    return section


def section(job: KernelJob, kernel: Kernel, built: Built, max_text_chars: int) -> dict[str, Any] | None:
    """The ``tpu`` or ``gpu`` section of a run: the kernel compiled for the set's hardware, or why not (a refusal
    is returned as ``{"error": ...}``: the CPU run stands regardless). None for sets that have no such compiler
    (``cpu:`` sets)."""
    if job.tpu is None and job.platform != "gpu":
        return None
    if job.tpu is not None and not runner.libtpu_available():
        return {"skipped": NO_LIBTPU}
    if job.tpu is None and not gpu_compiler_available():
        return {"skipped": NO_GPU_COMPILER}
    what = "compiling for TPU" if job.tpu is not None else "compiling for GPU"
    try:
        target = _target(job)
        program = _compile(job, kernel, built, target, None)
        found = _facts(job, target, program, max_text_chars)
        if target.kind == "tpu":  # a TPU set's fixes are compiled for its TPU program (the CPU run's note says so)
            _explain(job, kernel, program, found, None)
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
    collectives, memory and cost (also in its ``tpu`` / ``gpu`` section), its HLO and Shardy's origins, and
    ``compile_only: true``. Raises :class:`KernelRunError` for a refusal (it is the whole result)."""
    import jax

    target = _target(job)
    with captured_stderr() as log, tempfile.TemporaryDirectory(prefix="shardscope-sdy-") as dump:
        program = _compile(job, kernel, built, target, dump)
        mlir = origins.read_dump(dump)
    section = _facts(job, target, program, max_text_chars)
    _explain(job, kernel, program, section, mlir)
    lowered, compiled = program["lowered"], program["compiled"]
    input_names = [i.name for i in job.inputs] + [name for name, _ in extra]
    origin_report = origins.report_json(origins.parse_origins(mlir, input_names)) if mlir else None

    def described(name: str, leaf: Any) -> dict[str, Any]:
        return {
            "name": name,
            "shape": list(leaf.shape),
            "dtype": str(leaf.dtype),
            "spec": _spec_text(leaf.sharding),
            "typeof": typeof_text(leaf),
        }

    shardings = jax.tree.leaves(compiled.output_shardings)
    outputs = [
        (name, jax.ShapeDtypeStruct(info.shape, info.dtype, sharding=sharding))
        for (name, info), sharding in zip(_leaves(lowered.out_info), shardings, strict=True)
    ]
    if kernel.outputs is not None and len(kernel.outputs) == len(outputs):
        outputs = [(name, leaf) for name, (_, leaf) in zip(kernel.outputs, outputs, strict=True)]
    stablehlo_text, stablehlo_cut = _clip(scrub_paths(lowered.as_text()), max_text_chars)
    return {
        "inputs": [described(i.name, s) for i, s in zip(job.inputs, program["structs"], strict=True)]
        + [described(name, leaf) for name, leaf in extra],
        "outputs": [described(name, leaf) for name, leaf in outputs],
        "collectives": section["collectives"],
        "memory": section["memory"],
        "cost": section["cost"],
        "timing": {
            "lower_ms": program["lower_ms"],
            "compile_ms": program["compile_ms"],
            "run_ms": None,
            "reference_ms": None,
        },
        "device_assignment": section["device_assignment"],
        "stablehlo": stablehlo_text,
        "stablehlo_truncated": stablehlo_cut,
        "hlo": section["hlo"],
        "hlo_truncated": section["hlo_truncated"],
        "origins": origin_report,
        "compiler_log": log,
        "why_search": section["why_search"],
        "reference": "none: a compile-only run computes nothing to compare",
        "executed_on": describe_target(target, job, str(section["device_kind"])),
        "compile_only": True,
        target.kind: section,
    }
