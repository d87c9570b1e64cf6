"""The one place a program is lowered and compiled: :func:`lower` then :meth:`Lowered.compile` (or
:func:`compile_program`, both), as ``jax.stages`` goes ``Traced → Lowered → Compiled``.

A compile can also write what only a compile writes, into a temporary directory removed before it returns
(:class:`Options`): Shardy's module after propagation (``shardy``: the sharding origins and the why read it;
:mod:`sharding_core.program.shardy`) and XLA's buffer assignment (``buffers``: the largest temporaries;
:func:`sharding_core.program.memory.buffer_report`). With either, the persistent compilation cache is off for
that compile (a cache hit writes nothing). XLA's C++ log written while lowering and compiling is kept
(:func:`captured_stderr`: its warnings, such as involuntary rematerialization), and with ``refuse_memory`` an
out-of-memory refusal is data (:func:`sharding_core.program.memory.refusal`) rather than an exception.

What is read from the result — memory, work, collectives, origins — is :mod:`sharding_core.program.report`'s.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from sharding_core.compat import compilation_cache_disabled, input_shardings
from sharding_core.program import memory as mem
from sharding_core.program import shardy, values
from sharding_core.program import timeline as tl

MAX_LOG_LINES = 40
_LOG_LINE = re.compile(r"^[IWEF]\d{4} [\d:.]+\s+\d+ [^\]]+\] ?(.*)$")


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


@dataclasses.dataclass(frozen=True)
class Options:
    """What a compile writes besides the program, and how it treats the log and a memory refusal."""

    shardy: bool = False  # Shardy's module after propagation (sdy.sharding_origins, propagation edges)
    buffers: bool = False  # XLA's buffer assignment: the largest temporaries, with their ops and source lines
    echo: bool = True  # copy XLA's log to stderr too (False: a candidate's compile, nobody asked for its warnings)
    refuse_memory: bool = False  # XLA's RESOURCE_EXHAUSTED as Program.refusal, not an exception
    values: bool = False  # the module as it enters the SPMD partitioner: every value's sharding (program.values)

    @property
    def dumps(self) -> bool:
        return self.shardy or self.buffers or self.values


PLAIN = Options()
QUIET = Options(echo=False)


@dataclasses.dataclass(frozen=True)
class Signature:
    """A program's inputs and outputs as compiled — abstract values and the shardings XLA gave them, what a snapshot
    captures — without the executable (a candidate fix's signature outlives its compile)."""

    in_avals: Any  # (args, kwargs) of avals, as lowered
    in_shardings: Any  # (args, kwargs) of shardings: the executable's, or the arguments' own when XLA refused
    out_info: Any | None  # the outputs as ShapeDtypeStructs with their shardings; None when XLA refused
    donated: int  # arguments donated to the program

    def inputs(self) -> Any:
        """``(args, kwargs)`` as ``jax.ShapeDtypeStruct`` s with the compiled program's input shardings."""
        import jax

        return jax.tree.map(
            lambda a, s: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=s), self.in_avals, self.in_shardings
        )


@dataclasses.dataclass(frozen=True)
class Program:
    """A lowered and compiled program and what its compile wrote: ``executable`` is JAX's ``Compiled`` (None when
    XLA refused the program for memory: ``refusal`` says why), ``hlo`` its optimized HLO text."""

    fn: Any  # the jax.jit object that was lowered
    lowered: Any  # jax.stages.Lowered
    executable: Any | None  # jax.stages.Compiled
    args: tuple[Any, ...]
    kwargs: Mapping[str, Any]
    hlo: str | None
    shardy: shardy.Dump | None
    temporaries: dict[str, Any] | None
    refusal: dict[str, Any] | None
    log: tuple[str, ...]
    lower_seconds: float
    compile_seconds: float
    partitioner_input: str | None = None  # the module entering the SPMD partitioner (Options.values)
    timeline: tl.Timeline | None = None  # memory over program order, from the same dumps as ``temporaries``
    placed: int | None = None  # the bytes XLA's buffer assignment placed in HBM (its memory-usage report), if dumped
    early: bool = False  # ``hlo``: libtpu's module before code generation, no executable (program.early)

    @property
    def timings(self) -> dict[str, float]:
        return {"lower_seconds": self.lower_seconds, "compile_seconds": self.compile_seconds}

    def again(self, options: Options) -> Program:
        """The same lowering compiled again with other options (a second compile that writes Shardy's module: the
        option changes what XLA:TPU compiles, so a program's figures come from a plain compile)."""
        return Lowered(self.fn, self.lowered, self.args, self.kwargs, (), 0.0).compile(options)

    def signature(self) -> Signature:
        import jax

        if self.executable is not None:
            shardings = input_shardings(self.executable)
            out = self.executable.out_info
        else:
            shardings = jax.tree.map(lambda a: getattr(a, "sharding", None), (tuple(self.args), dict(self.kwargs)))
            out = None
        donated = sum(bool(getattr(a, "donated", False)) for a in jax.tree.leaves(self.lowered.args_info))
        return Signature(self.lowered.in_avals, shardings, out, int(donated))


@dataclasses.dataclass(frozen=True)
class Lowered:
    """A lowered program (JAX's ``Lowered``), the arguments it was lowered for, and XLA's log while lowering."""

    fn: Any  # the jax.jit object
    lowered: Any
    args: tuple[Any, ...]
    kwargs: Mapping[str, Any]
    log: tuple[str, ...]
    seconds: float

    @property
    def out_info(self) -> Any:
        return self.lowered.out_info

    def as_text(self) -> str:
        return str(self.lowered.as_text())

    def compile(self, options: Options = PLAIN) -> Program:
        """Compiles for the devices the arguments are sharded over (see the module docstring)."""
        with contextlib.ExitStack() as stack:
            log = stack.enter_context(captured_stderr(options.echo))
            directory = stack.enter_context(_dump_dir(options.dumps))
            compiler_options = _compiler_options(directory, options)
            refusal = None
            executable = None
            t0 = time.perf_counter()
            try:
                executable = (
                    self.lowered.compile(compiler_options=compiler_options)
                    if compiler_options
                    else (self.lowered.compile())
                )
            except Exception as e:
                if not (options.refuse_memory and mem.is_memory_refusal(e)):
                    raise
                refusal = mem.refusal(e)
            seconds = time.perf_counter() - t0
            hlo = (executable.as_text() or "") if executable is not None else None
            dump = shardy.read(str(directory)) if directory is not None and options.shardy else None
            stats = mem.memory_stats(executable) if executable is not None else None
            buffers = mem.buffer_report(directory, hlo, stats) if directory is not None and options.buffers else None
            entering = values.dump_text(str(directory)) if directory is not None and options.values else None
            timeline = _timeline(directory, hlo) if directory is not None and options.buffers else None
            placed = mem.placed_bytes(directory) if directory is not None else None
        return Program(self.fn, self.lowered, executable, self.args, self.kwargs, hlo, dump, buffers, refusal,
                       (*self.log, *log), self.seconds, seconds, entering, timeline, placed)  # fmt: skip

    def read_early(self, hlo: str, entering: str | None, placed: int | None, seconds: float) -> Program:
        """This lowering as libtpu's module before code generation read it (:mod:`sharding_core.program.early`):
        the scheduled HLO and the partitioner's input, no executable."""
        return Program(self.fn, self.lowered, None, self.args, self.kwargs, hlo, None, None, None, self.log,
                       self.seconds, seconds, entering, None, placed, early=True)  # fmt: skip


def lower(fn: Any, args: Sequence[Any], kwargs: Mapping[str, Any] | None = None, *, echo: bool = True) -> Lowered:
    """``fn`` (a ``jax.jit`` object, or a function: jitted here) lowered for ``args`` (arrays or abstract values)."""
    import jax

    jitted = fn if hasattr(fn, "lower") else jax.jit(fn)
    kw = dict(kwargs or {})
    with captured_stderr(echo) as log:
        t0 = time.perf_counter()
        lowered = jitted.lower(*args, **kw)
        seconds = time.perf_counter() - t0
    return Lowered(jitted, lowered, tuple(args), kw, tuple(log), seconds)


def compile_program(
    fn: Any, args: Sequence[Any], kwargs: Mapping[str, Any] | None = None, options: Options = PLAIN
) -> Program:
    """:func:`lower` then :meth:`Lowered.compile`."""
    return lower(fn, args, kwargs, echo=options.echo).compile(options)


def _timeline(directory: Path, hlo: str | None) -> tl.Timeline | None:
    """The dumped program's memory over program order (TPU layouts carry their tiling: ``{1,0:T(8,128)}``)."""
    if hlo is None:
        optimized = sorted(directory.glob("*after_optimizations.txt"))
        hlo = optimized[-1].read_text(errors="replace") if optimized else ""
    return tl.read_timeline(directory, "tpu" if ":T(" in hlo else "")


@contextlib.contextmanager
def _dump_dir(enabled: bool) -> Iterator[Path | None]:
    if not enabled:
        yield None
        return
    with tempfile.TemporaryDirectory(prefix="shardscope-compile-") as d, compilation_cache_disabled():
        yield Path(d)


def _compiler_options(directory: Path | None, options: Options) -> dict[str, Any] | None:
    if directory is None:
        return None
    if options.shardy:
        out = shardy.options(str(directory))
        if options.values:
            out["xla_dump_hlo_pass_re"] += "|" + values.PARTITIONER_PASS
        return out
    if options.values:
        return {"xla_dump_to": str(directory), "xla_dump_hlo_pass_re": values.PARTITIONER_PASS}
    return {"xla_dump_to": str(directory)}
