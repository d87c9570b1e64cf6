"""Fixes at any line: a ``with_sharding_constraint`` inserted after the ops of one source line, by rewriting the
program's jaxpr, and the changed program compiled and read like the original.

:func:`constrained` retraces the user's jitted function to its jaxpr (``jax.make_jaxpr``) and evaluates it again,
equation by equation, under a new ``jax.jit``: every equation made at ``file:line`` whose result has the shape of
the value to constrain gets ``jax.lax.with_sharding_constraint(result, spec)`` after it — inside ``scan`` / ``while``
/ ``cond`` bodies, ``jax.checkpoint`` and nested ``jit`` too (their jaxprs are rewritten the same way), forward and
backward alike (the cotangent of a value is made at its line and has its shape). Each equation is bound again
under its own source information, so the new program's ops keep their lines. ``custom_jvp`` / ``custom_vjp``
calls are kept as they are.

:func:`check_constraint` compiles the constrained program (:mod:`sharding_core.planning.program`) and returns what
the fix changes: the step's collective bytes, XLA's peak and the step time the cost model expects. JAX is imported
where a function needs it; :mod:`sharding_core.findings.waste` proposes where to constrain.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from sharding_core.why.frames import is_library, short_path

MAX_EQUATIONS = 200_000
"""Equations one rewrite evaluates (a larger program is refused: the fix is then not checked)."""


@dataclasses.dataclass(frozen=True)
class Target:
    """Where to constrain: the source line (``file:line`` as findings write it, the file absolute or relative to
    the working directory), the value's shape, and the sharding to constrain it to."""

    line: str
    shape: tuple[int, ...]
    sharding: Any  # a NamedSharding


def _eqn_lines(eqn: Any) -> set[str]:
    """The user's lines an equation was made at (its innermost non-library frame), as full and short paths."""
    from jax._src import source_info_util

    tb = getattr(eqn.source_info, "traceback", None)
    if tb is None:
        return set()
    for frame in source_info_util.user_frames(tb):
        name = frame.file_name
        if is_library(name):
            continue
        return {f"{name}:{frame.start_line}", f"{short_path(name)}:{frame.start_line}"}
    return set()


@contextlib.contextmanager
def _as_made(eqn: Any) -> Iterator[None]:
    """Binds under the equation's own source information (its line and name stack stay in the new program)."""
    from jax._src import source_info_util

    info = eqn.source_info
    try:
        ctx = source_info_util.user_context(info.traceback, name_stack=info.name_stack)
    except (AttributeError, TypeError):
        ctx = contextlib.nullcontext()
    with ctx:
        yield


class Rewriter:
    """Evaluates jaxprs with the constraint inserted (see the module docstring); ``hits`` counts the insertions."""

    def __init__(self, target: Target) -> None:
        self.target = target
        self.hits = 0
        self.seen = 0

    def eval(self, closed: Any, args: Sequence[Any]) -> list[Any]:
        from jax._src import core

        jaxpr = closed.jaxpr
        env: dict[Any, Any] = {}

        def read(v: Any) -> Any:
            return v.val if isinstance(v, core.Literal) else env[v]

        env.update(zip(jaxpr.constvars, closed.consts, strict=True))
        env.update(zip(jaxpr.invars, args, strict=True))
        for eqn in jaxpr.eqns:
            self.seen += 1
            if self.seen > MAX_EQUATIONS:
                raise ValueError(f"the program has more than {MAX_EQUATIONS} equations")
            params = {k: self._param(v) for k, v in eqn.params.items()} if _rewritable(eqn) else eqn.params
            with _as_made(eqn):
                out = eqn.primitive.bind(*map(read, eqn.invars), **params)
                outs = list(out) if eqn.primitive.multiple_results else [out]
                if self.target.line in _eqn_lines(eqn):
                    outs = [self._constrain(o) for o in outs]
            env.update(zip(eqn.outvars, outs, strict=True))
        return [read(v) for v in jaxpr.outvars]

    def _constrain(self, x: Any) -> Any:
        import jax

        if tuple(getattr(x, "shape", ())) != self.target.shape:
            return x
        self.hits += 1
        return jax.lax.with_sharding_constraint(x, self.target.sharding)

    def _param(self, value: Any) -> Any:
        from jax._src import core

        if isinstance(value, core.ClosedJaxpr):
            return self.closed(value)
        if isinstance(value, core.Jaxpr):
            rewritten = self.closed(core.ClosedJaxpr(value, ()))
            return rewritten.jaxpr if not rewritten.consts else value
        if isinstance(value, tuple) and value and all(isinstance(v, core.ClosedJaxpr) for v in value):
            return tuple(self.closed(v) for v in value)
        return value

    def closed(self, closed: Any) -> Any:
        """``closed`` traced again through :meth:`eval` (the same inputs and outputs, constraints inside)."""
        import jax

        avals = [v.aval for v in closed.jaxpr.invars]
        specs = [jax.ShapeDtypeStruct(a.shape, a.dtype, weak_type=bool(getattr(a, "weak_type", False))) for a in avals]
        out = jax.make_jaxpr(lambda *a: self.eval(closed, a))(*specs)
        if [_type(v.aval) for v in out.jaxpr.outvars] != [_type(v.aval) for v in closed.jaxpr.outvars]:
            return closed  # the rewrite changed a type (a weak type, a sharding in the type): keep the original
        return out


def _type(aval: Any) -> tuple[Any, ...]:
    return (tuple(getattr(aval, "shape", ())), str(getattr(aval, "dtype", "")), bool(getattr(aval, "weak_type", False)))


def _rewritable(eqn: Any) -> bool:
    """Equations whose inner jaxprs are rewritten (custom derivative rules are kept as written)."""
    return not eqn.primitive.name.startswith("custom_")


def constrained(fn: Any, args: Sequence[Any], kwargs: dict[str, Any], target: Target,
                donated: tuple[Sequence[int], Sequence[str]] = ((), ())) -> tuple[Callable[..., Any], int]:  # fmt: skip
    """``fn`` (a ``jax.jit`` object or a function) with the constraint inserted, jitted (donating the positional
    and keyword arguments ``donated`` names, as ``fn`` does), and how many values it constrains (0: no value of
    that shape at that line: no fix)."""
    import jax

    closed = jax.make_jaxpr(lambda *a, **k: fn(*a, **k))(*args, **kwargs)
    rewriter = Rewriter(target)
    tree = jax.tree.structure(jax.eval_shape(lambda *a, **k: fn(*a, **k), *args, **kwargs))

    def run(*a: Any, **k: Any) -> Any:
        flat = jax.tree.leaves((a, k))
        return jax.tree.unflatten(tree, rewriter.eval(closed, flat))

    traced = jax.jit(run, donate_argnums=tuple(donated[0]), donate_argnames=tuple(donated[1]))
    traced.trace(*args, **kwargs)  # traces now: counts the hits
    return traced, rewriter.hits
