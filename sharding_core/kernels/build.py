"""What the kernel lab's runner and its compiles for the set's hardware share: a job's mesh, the kernel built and
jitted on it, its leaves named, a refusal as data, the HLO text as a result shows it, and a candidate fix's
compile (:func:`recompiler`).

:mod:`sharding_core.kernels.runner` runs a job on CPU devices and :mod:`sharding_core.kernels.compiled` compiles it
for libtpu's topology or XLA's GPU compiler; both build and compile through these, and through the one compile
pipeline (:mod:`sharding_core.program`).
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from sharding_core.compat import make_mesh, set_mesh
from sharding_core.errors import ShardingError
from sharding_core.kernels.catalog import Built, Kernel, KernelContext, KernelInputError
from sharding_core.kernels.plan import KernelJob
from sharding_core.program.compile import Program
from sharding_core.program.recompile import recompile
from sharding_core.program.report import Reading
from sharding_core.spec import canonical_spec, parse_spec
from sharding_core.why.kernel import CompileJob

KERNEL_ERROR = "kernel_error"
MAX_TEXT_CHARS = 256 * 1024
"""StableHLO and HLO text longer than this is cut (the response says so)."""


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


def clip(text: str, limit: int) -> tuple[str, bool]:
    return (text, False) if len(text) <= limit else (text[:limit], True)


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


def leaves(tree: Any, prefix: str = "") -> list[tuple[str, Any]]:
    import jax

    flat, _ = jax.tree_util.tree_flatten_with_path(tree)
    out = []
    for path, leaf in flat:
        name = _path_name(path)
        out.append((f"{prefix}.{name}" if prefix and name else (prefix or name or "out"), leaf))
    return out


def spec_text(sharding: Any) -> str:
    from jax.sharding import NamedSharding, PartitionSpec

    if isinstance(sharding, NamedSharding):
        return canonical_spec(sharding.spec)
    if getattr(sharding, "is_fully_replicated", False):
        return repr(PartitionSpec())
    raise KernelRunError(
        KERNEL_ERROR, f"an output has a {type(sharding).__name__}, not a NamedSharding; its layout cannot be shown"
    )


def kernel_context(job: KernelJob, kernel: Kernel, mesh: Any, in_specs: tuple[Any, ...]) -> KernelContext:
    params: dict[str, Any] = {}
    for name, value in job.params:
        kind = next(p.kind for p in kernel.params if p.name == name)
        params[name] = parse_spec(value) if kind == "spec" else int(value) if kind == "int" else value
    out_specs = tuple(parse_spec(s) for s in job.out_specs) if job.out_specs is not None else None
    return KernelContext(mesh, in_specs, tuple(i.shape for i in job.inputs), out_specs, params, job.max_elements)


def job_mesh(job: KernelJob, devices: Sequence[Any]) -> Any:
    """The job's mesh over ``devices`` (real CPU or libtpu ones), one per simulated mesh position."""
    grid = np.empty(job.size, dtype=object)
    grid[:] = list(devices)
    return make_mesh(grid.reshape(job.mesh_shape), job.axis_names, job.axis_types)


def jit_kernel(
    job: KernelJob, kernel: Kernel, built: Built, mesh: Any, in_specs: tuple[Any, ...]
) -> tuple[Any, list[Any]]:
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


def recompiler(
    job: KernelJob, kernel: Kernel, mesh: Any, reading: Reading, abstract_extra: Callable[[Any], Any] | None = None
) -> CompileJob:
    """Compiles the kernel again as a run with other input specs (and out_specs) would: built anew on ``mesh`` (this
    worker's CPU devices, or the target's compile-only devices, the kernel's extra arguments made abstract), through
    the one door for candidates (:func:`sharding_core.program.recompile.recompile`: quiet, its XLA warnings kept with
    it), read as the run's program is (``reading``)."""
    import jax

    def compile_job(specs: tuple[str, ...], outs: tuple[str, ...] | None) -> Any:
        inputs = tuple(dataclasses.replace(i, spec=s) for i, s in zip(job.inputs, specs, strict=True))
        changed = dataclasses.replace(job, inputs=inputs, out_specs=outs)
        in_specs = tuple(parse_spec(s) for s in specs)
        with set_mesh(mesh):
            built = kernel.build(kernel_context(changed, kernel, mesh, in_specs))
            jitted, structs = jit_kernel(changed, kernel, built, mesh, in_specs)
            extra = [jax.tree.map(abstract_extra, a) for a in built.extra_args] if abstract_extra else built.extra_args
            return recompile(jitted, [*structs, *extra], None, reading)

    return compile_job


def program_texts(program: Program, max_text_chars: int) -> dict[str, Any]:
    """The lowered StableHLO and the compiled HLO as a result shows them: paths made relative, cut past the limit."""
    stablehlo, stablehlo_cut = clip(scrub_paths(program.lowered.as_text()), max_text_chars)
    hlo, hlo_cut = clip(scrub_paths(program.hlo or ""), max_text_chars)
    return {"stablehlo": stablehlo, "stablehlo_truncated": stablehlo_cut, "hlo": hlo, "hlo_truncated": hlo_cut}


def timing_ms(program: Program) -> dict[str, float]:
    return {"lower_ms": program.lower_seconds * 1e3, "compile_ms": program.compile_seconds * 1e3}


def extra_leaves(built: Built) -> list[tuple[str, Any]]:
    """The arrays the kernel created while it was built (a model's parameters), each named after its argument."""
    out: list[tuple[str, Any]] = []
    for name, arg in zip(built.extra_names, built.extra_args, strict=True):
        out.extend(leaves(arg, name))
    return out
