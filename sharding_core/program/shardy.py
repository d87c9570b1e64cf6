"""Shardy's module after propagation: the compile option that writes it and its reader.

``lowered.compile(compiler_options={"xla_dump_to": DIR, "xla_dump_hlo_pass_re": "shardy-verbose"})`` makes
XLA's Shardy pass write ``DIR/shardy/<module>/02.after_propagation.mlir`` with ``sdy.sharding_origins`` and
``sdy.propagation_edges`` on every value (``xla/service/spmd/shardy/shardy_xla_pass.cc``, ``isShardyVerbose``).
The same options work for libtpu's compile-only TPU compiles. When GSPMD propagates instead (``jax_use_shardy_
partitioner`` off, or XLA's silent fallback for modules with GSPMD attributes: ``xla/pjrt/mlir_to_hlo.cc``) no
Shardy module is written: that is how the partitioner is told, not by the config flag alone.

The compile itself is :mod:`sharding_core.program.compile`'s (``Options(shardy=True)``): it writes into a temporary
directory with the persistent compilation cache off (a cache hit compiles nothing and writes no files), reads the
module with :func:`read` and removes the directory.
"""

from __future__ import annotations

import dataclasses
import glob
import os
import time
from collections.abc import Mapping
from typing import Any

PASSES = "shardy-verbose"
MAX_MLIR_BYTES = 64 * 1024 * 1024
"""A Shardy module larger than this is not read (the why then says so): a model's is a few megabytes."""


@dataclasses.dataclass(frozen=True)
class Dump:
    mlir: str | None  # Shardy's after-propagation module, None when GSPMD ran or it was too large
    partitioner: str  # "shardy" | "gspmd"
    note: str | None = None
    dump_seconds: float = 0.0  # reading the files


def options(directory: str, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = dict(extra or {})
    out["xla_dump_to"] = directory
    # A caller that also wants XLA's own dumps (a plan's buffer assignment) gets them: the pass filter only
    # adds the Shardy files to what xla_dump_to writes anyway.
    out["xla_dump_hlo_pass_re"] = PASSES
    return out


def read(directory: str) -> Dump:
    """The Shardy module written under ``directory`` by a compile with :func:`options`."""
    t0 = time.perf_counter()
    found = sorted(glob.glob(os.path.join(directory, "shardy", "*", "*after_propagation.mlir")))
    if not found:
        return Dump(None, "gspmd", "no Shardy module was written: GSPMD propagated this program's shardings")
    path = found[-1]
    if os.path.getsize(path) > MAX_MLIR_BYTES:
        return Dump(None, "shardy", f"Shardy's module is over {MAX_MLIR_BYTES >> 20} MiB: not read")
    with open(path, encoding="utf-8", errors="replace") as f:
        text = f.read()
    return Dump(text, "shardy", None, time.perf_counter() - t0)
