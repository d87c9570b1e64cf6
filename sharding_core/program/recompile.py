"""One way to compile a changed candidate of a program and read it like the original: :func:`recompile`.

A candidate is the program with something changed — an input's sharding, an output's out_sharding, a JAX option
(why's fixes today; search points and memory-fit candidates next). Each client says how to build its candidate
(:class:`Respecified` does it for a user's own ``jax.jit`` program and its arguments; the kernel lab builds its
kernel again with other specs); the candidate is then lowered and compiled through the one pipeline, quietly
(its XLA warnings are kept with it, not printed: nobody asked for that program), with the option set while it
is traced and compiled, and read into a :class:`~sharding_core.program.report.Report` as the original was.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from sharding_core.compat import jit_like, pins_inputs
from sharding_core.program.compile import QUIET, Options, Program, compile_program
from sharding_core.program.report import Reading, Report, read_report
from sharding_core.spec import parse_spec


@dataclasses.dataclass(frozen=True)
class Change:
    """What a candidate changes: one flat input's spec, one flat output's, and/or a JAX option."""

    input: tuple[int, str] | None = None  # (flat input index, PartitionSpec text)
    output: tuple[int, str] | None = None  # (flat output index, PartitionSpec text)
    option: tuple[str, bool] | None = None  # ("jax_threefry_partitionable", True)


@contextlib.contextmanager
def option(name: str, value: bool) -> Iterator[None]:
    """A JAX option set while inside (restored after)."""
    import jax

    before = getattr(jax.config, name)
    jax.config.update(name, value)
    try:
        yield
    finally:
        jax.config.update(name, before)


def recompile(
    fn: Any,
    args: Sequence[Any],
    kwargs: Mapping[str, Any] | None,
    reading: Reading,
    *,
    jax_option: tuple[str, bool] | None = None,
    options: Options = QUIET,
) -> tuple[Program, Report]:
    """The candidate ``fn(*args, **kwargs)`` compiled (with ``jax_option`` set) and read as ``reading`` names it."""
    with option(*jax_option) if jax_option is not None else contextlib.nullcontext():
        program = compile_program(fn, args, kwargs, options)
    return program, read_report(program, reading)


def abstract(x: Any) -> Any:
    """An array as the abstract value it is to jit (no data needed to lower and compile)."""
    import jax

    if isinstance(x, jax.Array) and not isinstance(x, jax.core.Tracer):
        return jax.ShapeDtypeStruct(
            x.shape, x.dtype, sharding=x.sharding, weak_type=bool(getattr(x, "weak_type", False))
        )
    return x


class Respecified:
    """A user's ``jax.jit`` program and its arguments with one input's or output's sharding changed: the input
    lowered on abstract arguments with that leaf's sharding replaced (nothing is allocated; compile-only devices
    stay compile-only), re-jitted pinning it where the jit pins its inputs; an output's, the function jitted again
    with that ``out_shardings``."""

    def __init__(self, jitted: Any, args: Sequence[Any], kwargs: Mapping[str, Any], program: Program) -> None:
        import jax

        self.jitted = jitted
        self.base = getattr(jitted, "__wrapped__", None)
        self.flat_args, self.arg_tree = jax.tree_util.tree_flatten((tuple(args), dict(kwargs)))
        signature = program.signature()
        self.flat_avals = jax.tree.leaves(signature.in_avals)
        self.flat_in = jax.tree.leaves(
            signature.in_shardings, is_leaf=lambda x: x is None or isinstance(x, jax.sharding.Sharding)
        )
        self.out_info = signature.out_info
        self.out_shardings = jax.tree.leaves(program.executable.output_shardings) if program.executable else []

    @property
    def outputs_fixable(self) -> bool:
        return self.base is not None

    def __call__(self, change: Change) -> tuple[Any, tuple[Any, ...], dict[str, Any]]:
        import jax

        f = self.jitted
        a, k = jax.tree_util.tree_unflatten(self.arg_tree, list(self.flat_args))
        if change.input is not None:
            f, a, k = self._input(*change.input)
        elif change.output is not None:
            f = self._output(*change.output)
        return f, tuple(a), dict(k)

    def _input(self, i: int, spec: str) -> tuple[Any, Any, Any]:
        import jax

        if len(self.flat_args) != len(self.flat_avals):
            raise ValueError("the program has static arguments: its inputs cannot be matched to its leaves")
        aval = self.flat_avals[i]
        new = jax.ShapeDtypeStruct(
            aval.shape, aval.dtype, sharding=jax.sharding.NamedSharding(self.flat_in[i].mesh, parse_spec(spec))
        )
        leaves = [abstract(x) for x in self.flat_args]
        leaves[i] = new
        a, k = jax.tree_util.tree_unflatten(self.arg_tree, leaves)
        f = self.jitted
        if self.base is not None and pins_inputs(self.jitted):
            # The jit pins its inputs' shardings: the same jit, pinning the new one.
            f = jit_like(self.jitted, in_shardings=tuple(jax.tree.map(lambda x: x.sharding, x) for x in a))
        return f, a, k

    def _output(self, j: int, spec: str) -> Any:
        import jax

        if self.base is None:
            raise ValueError("the function is not a jax.jit object: its out_shardings cannot be changed")
        shardings = list(self.out_shardings)
        shardings[j] = jax.sharding.NamedSharding(shardings[j].mesh, parse_spec(spec))
        return jit_like(
            self.jitted, out_shardings=jax.tree_util.tree_unflatten(jax.tree.structure(self.out_info), shardings)
        )
