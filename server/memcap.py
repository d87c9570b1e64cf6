"""Technique: **a hard memory cap per worker process** — a memory cgroup of its own where the server may
create one, and always a resident-memory watchdog — so a run that outgrows its estimate ends in a clean
422 ``too_large`` and a fresh worker, never in the host's OOM killer picking some other process.

* cgroup v2 (``memory.max``) or v1 (``memory.limit_in_bytes``): the kernel refuses the worker pages past
  the limit and kills it inside its own cgroup; :meth:`CgroupCap.killed_for_memory` reads the cgroup's
  OOM-kill count to tell that death from a crash. Needs a cgroup directory this process may write
  (root in a container, or a delegated systemd scope); otherwise it is skipped and logged.
* The watchdog (:func:`server.pool` polls :func:`sharding_core.kernels.memory.resident_bytes` every
  0.1 s while a job runs) kills a worker whose resident memory passes the limit. Alone it is not
  instantaneous (a fast allocator can overshoot by what it allocates in 0.1 s), which is why the cgroup
  limit sits a little above it as the backstop.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
from pathlib import Path

log = logging.getLogger("shardscope.memcap")

BACKSTOP_SLACK = 1.10
"""The cgroup limit is this much above the watchdog's, so the watchdog's clean answer usually comes first."""


def _cgroup_dirs() -> list[Path]:
    """This process's memory cgroup directories (v1 memory controller, or v2), innermost first, up to the root."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return []
    found: list[Path] = []
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            root = Path("/sys/fs/cgroup/memory")
        elif line.startswith("0::"):
            root = Path("/sys/fs/cgroup")
        else:
            continue
        here = root / path.lstrip("/")
        while True:
            found.append(here)
            if here == root or root not in here.parents:
                break
            here = here.parent
    return found


def available_ram() -> int:
    """Bytes of RAM this process may use: the machine's, or the lowest memory limit of its cgroup and the
    cgroups above it when lower (a container's memory limit, a systemd unit's MemoryMax, a test's cap)."""
    total = int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    for directory in _cgroup_dirs():
        for name in ("memory.max", "memory.limit_in_bytes"):
            try:
                text = (directory / name).read_text().strip()
            except OSError:
                continue
            if text.isascii() and text.isdigit() and 0 < int(text) < total:
                total = int(text)
    return total


def _own_cgroup() -> tuple[str, Path] | None:
    """(version, directory) of this process's memory cgroup, if it is writable."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            base = Path("/sys/fs/cgroup/memory") / path.lstrip("/")
            if (base / "memory.limit_in_bytes").exists() and os.access(base, os.W_OK):
                return "v1", base
    for line in lines:
        if line.startswith("0::"):
            base = Path("/sys/fs/cgroup") / line[3:].lstrip("/")
            subtree = base / "cgroup.subtree_control"
            with contextlib.suppress(OSError):
                if "memory" in subtree.read_text().split() and os.access(base, os.W_OK):
                    return "v2", base
    return None


class CgroupCap:
    """One memory cgroup for one worker slot (its successive processes move in as they start)."""

    def __init__(self, version: str, path: Path, limit: int) -> None:
        self.version, self.path, self.limit = version, path, limit
        self._oom_kills = self._read_oom_kills()

    @classmethod
    def create(cls, name: str, limit: int) -> CgroupCap | None:
        """A fresh cgroup capped at ``limit`` bytes, or None where this process cannot make one."""
        found = _own_cgroup()
        if found is None:
            return None
        version, base = found
        path = base / f"{name}-{secrets.token_hex(4)}"
        try:
            path.mkdir()
            if version == "v1":
                (path / "memory.limit_in_bytes").write_text(str(limit))
                with contextlib.suppress(OSError):  # swap accounting may be off
                    (path / "memory.memsw.limit_in_bytes").write_text(str(limit))
            else:
                (path / "memory.max").write_text(str(limit))
                with contextlib.suppress(OSError):
                    (path / "memory.swap.max").write_text("0")
        except OSError as e:
            log.info("no memory cgroup for workers (%s); the resident-memory watchdog alone caps them", e)
            with contextlib.suppress(OSError):
                path.rmdir()
            return None
        return cls(version, path, limit)

    def add(self, pid: int) -> bool:
        try:
            (self.path / "cgroup.procs").write_text(str(pid))
        except OSError as e:
            log.warning("could not move worker %d into %s: %s", pid, self.path, e)
            return False
        self._oom_kills = self._read_oom_kills()
        return True

    def _read_oom_kills(self) -> int:
        """How many processes the kernel killed in this cgroup for memory (v1 falls back to failcnt)."""
        try:
            if self.version == "v2":
                for line in (self.path / "memory.events").read_text().splitlines():
                    if line.startswith("oom_kill "):
                        return int(line.split()[1])
                return 0
            for line in (self.path / "memory.oom_control").read_text().splitlines():
                if line.startswith("oom_kill "):
                    return int(line.split()[1])
            return int((self.path / "memory.failcnt").read_text())
        except (OSError, ValueError):
            return 0

    def killed_for_memory(self) -> bool:
        """Whether the kernel killed a worker here for memory since the last process moved in."""
        return self._read_oom_kills() > self._oom_kills

    def remove(self) -> None:
        with contextlib.suppress(OSError):
            self.path.rmdir()
