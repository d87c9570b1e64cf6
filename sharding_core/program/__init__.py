"""The one compile pipeline and the one program report, between the HLO reader (:mod:`sharding_core.hlo`) and
everything that compiles a program: the kernel lab (CPU runs, compile-only runs, reshards), ``inspect_jit``, plans
and why's fixes.

* :mod:`.targets` — what a program is compiled for: compile-only devices (libtpu's topology for ``tpu:`` sets, XLA's
  GPU compiler with a shipped target config for ``gpu:`` sets) and ``shardscope.mesh`` over them;
* :mod:`.compile` — the one place a program is lowered and compiled (timings, XLA's log, the Shardy and
  buffer-assignment dumps on request, a memory refusal as data): ``lower(...).compile(options)``;
* :mod:`.report` — the compiled program read once into a frozen :class:`~.report.Report`: facts in XLA's own
  names (memory, work with loops counted, collectives with repeat counts, DCN steps, origins, device assignment,
  target, partitioner, timings, compiler log, temporaries or refusal), one JSON shape;
* :mod:`.recompile` — one way to compile a changed candidate and read it like the original;
* :mod:`.memory` (XLA's memory figures, the arguments by leaf, the buffer assignment, refusals) and
  :mod:`.shardy` (Shardy's module after propagation) — what the compile writes, read;
* :mod:`.upgrade` — results stored before the report existed, read into today's shape.

Figures (estimates, roofline, step time) are :mod:`sharding_core.cost`'s, put on a report where it is read.
"""
