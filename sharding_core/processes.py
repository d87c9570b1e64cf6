"""Child processes the domain starts (a search's workers, a fix's early compiles) and what it reads of them: their
resident memory from ``/proc``, and on Linux the kernel's promise to stop a child when the thread that started it
ends. No JAX, no layer of its own: the kernels, the search and the program pipeline all use it."""

from __future__ import annotations

import ctypes
import os
import signal
import sys

PARENT_ENV = "SHARDSCOPE_SEARCH_PARENT"
"""The environment variable naming the pid of the process that started a child."""
PR_SET_PDEATHSIG = 1  # linux/prctl.h


def die_with_parent() -> None:
    """On Linux, asks the kernel to kill this child when the thread that started it ends — its search's slot, or
    the whole search killed (``kill -9``, a terminal closed): a compile then never outlives its parent, nor the
    memory bound only its parent enforces (one did: a killed bench left two workers compiling for minutes).
    Elsewhere a search worker ends at its next read of standard input."""
    if not sys.platform.startswith("linux"):
        return
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    parent = os.environ.get(PARENT_ENV, "")
    if parent.isdigit() and os.getppid() != int(parent):  # it was gone before the request above
        os._exit(1)


def _status_field(pid: int | str, field: str) -> int | None:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        return None
    return None


def resident_bytes(pid: int | str = "self") -> int | None:
    """A process's resident memory (VmRSS) in bytes; None where /proc does not tell (not Linux, gone)."""
    return _status_field(pid, "VmRSS")


def peak_resident_bytes(pid: int | str = "self") -> int | None:
    """A process's peak resident memory so far (VmHWM) in bytes; None where /proc does not tell."""
    return _status_field(pid, "VmHWM")
