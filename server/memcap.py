"""Technique: **hard memory caps for the worker processes, per worker and for all of them together** — a
parent memory cgroup for the server's workers with the whole budget (``max_kernel_memory``) and a child per
worker with its own (``max_worker_memory``), where the server may create them, and always resident-memory
watchdogs (server/pool.py) — so a run that outgrows its estimate ends in a clean 422 ``too_large`` and a
fresh worker, never in the host's OOM killer picking some other process.

* cgroup v2 (``memory.max``) or v1 (``memory.limit_in_bytes``, hierarchical): the kernel refuses the workers
  pages past either limit and kills inside that cgroup; :meth:`CgroupCap.killed_for_memory` reads the
  cgroup's OOM-kill count to tell that death from a crash. Needs a cgroup directory this process may write
  (root in a container, or a delegated systemd scope); otherwise it is skipped and logged.
* The watchdogs (the pool polls :func:`sharding_core.kernels.memory.resident_bytes` every 0.1 s) kill a
  worker past its own limit, or the largest worker when the workers' sum passes the total. Alone they are
  not instantaneous (a fast allocator can overshoot by what it allocates in 0.1 s), which is why the cgroup
  limits sit a little above them as the backstop.
* The parent is named after the server's process id, so a server that starts after another was killed
  (``kill -9`` leaves its cgroups behind) removes the ones whose server is gone (:func:`remove_stale`).
* :func:`available_ram` is the RAM this process may use: the machine's, or the lowest memory limit of its
  cgroup and the cgroups above it (a container's ``mem_limit``), what the budgets' defaults are halves of.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import secrets
from pathlib import Path

log = logging.getLogger("shardscope.memcap")

BACKSTOP_SLACK = 1.10
"""The cgroup limits are this much above the watchdogs', so the watchdogs' clean answer usually comes first."""
PREFIX = "shardscope-"
_OURS = re.compile(rf"{PREFIX}(\d+)-[A-Za-z0-9_.-]+")
PROC_CGROUP = Path("/proc/self/cgroup")
CGROUP_ROOT = Path("/sys/fs/cgroup")


def _cgroup_dirs(proc_cgroup: Path = PROC_CGROUP, root: Path = CGROUP_ROOT) -> list[tuple[str, Path]]:
    """This process's memory cgroup directories as ``(version, path)``, innermost first, up to each root."""
    try:
        lines = proc_cgroup.read_text().splitlines()
    except OSError:
        return []
    found: list[tuple[str, Path]] = []
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            version, top = "v1", root / "memory"
        elif line.startswith("0::"):
            version, top = "v2", root
        else:
            continue
        here = top / path.lstrip("/")
        while True:
            found.append((version, here))
            if here == top or top not in here.parents:
                break
            here = here.parent
    return found


def available_ram(proc_cgroup: Path = PROC_CGROUP, root: Path = CGROUP_ROOT) -> int:
    """Bytes of RAM this process may use: the machine's, or the lowest memory limit of its cgroup and the
    cgroups above it when lower (a container's memory limit, a systemd unit's MemoryMax, a test's cap). A
    container's own cgroup is the root of the tree it sees, so its limit is found there."""
    total = int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    for version, directory in _cgroup_dirs(proc_cgroup, root):
        try:
            text = (directory / ("memory.max" if version == "v2" else "memory.limit_in_bytes")).read_text().strip()
        except OSError:
            continue
        if text.isascii() and text.isdigit() and 0 < int(text) < total:
            total = int(text)
    return total


def _own_cgroup() -> tuple[str, Path] | None:
    """(version, directory) of this process's memory cgroup, if it may make child cgroups there."""
    for version, base in _cgroup_dirs()[:2]:
        if version == "v1" and (base / "memory.limit_in_bytes").exists() and os.access(base, os.W_OK):
            return "v1", base
        if version == "v2":
            with contextlib.suppress(OSError):
                subtree = (base / "cgroup.subtree_control").read_text().split()
                if "memory" in subtree and os.access(base, os.W_OK):
                    return "v2", base
    return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale(base: Path) -> list[Path]:
    """Removes the cgroups under ``base`` that a server now gone made (``shardscope-<pid>-...`` with no live
    ``pid``), their workers' children first; returns what went. A cgroup that still has a process stays."""
    gone: list[Path] = []
    with contextlib.suppress(OSError):
        for path in base.iterdir():
            match = _OURS.fullmatch(path.name)
            if not path.is_dir() or match is None or _alive(int(match.group(1))):
                continue
            try:
                for child in path.iterdir():
                    if child.is_dir():
                        child.rmdir()
                path.rmdir()
            except OSError as e:
                log.info("left the stale cgroup %s (%s)", path, e)
                continue
            gone.append(path)
    if gone:
        log.warning("removed %d memory cgroup(s) left by a server that was killed: %s", len(gone), gone)
    return gone


class CgroupCap:
    """One memory cgroup: the workers' parent (:meth:`parent`), or one worker slot's child of it
    (:meth:`child`; its successive processes move in as they start)."""

    def __init__(self, version: str, path: Path, limit: int) -> None:
        self.version, self.path, self.limit = version, path, limit
        self._oom_kills = self._read_oom_kills()

    @classmethod
    def parent(cls, name: str, limit: int) -> CgroupCap | None:
        """The cgroup all of this server's workers go under, capped at ``limit`` bytes (after removing what
        killed servers left behind), or None where this process cannot make one."""
        found = _own_cgroup()
        if found is None:
            log.info("no memory cgroups for workers here; the resident-memory watchdogs alone cap them")
            return None
        version, base = found
        remove_stale(base)
        made = cls._make(version, base / f"{PREFIX}{os.getpid()}-{name}-{secrets.token_hex(4)}", limit)
        if made is not None and version == "v2":
            try:  # children get their own memory limits only if the parent hands the controller down
                (made.path / "cgroup.subtree_control").write_text("+memory")
            except OSError as e:
                log.info("no per-worker memory cgroups (%s); the parent cgroup and the watchdogs cap them", e)
        return made

    def child(self, name: str, limit: int) -> CgroupCap | None:
        return self._make(self.version, self.path / name, limit)

    @classmethod
    def _make(cls, version: str, path: Path, limit: int) -> CgroupCap | None:
        try:
            path.mkdir()
            if version == "v1":
                with contextlib.suppress(OSError):  # the default, and the only value on recent kernels
                    (path / "memory.use_hierarchy").write_text("1")
                (path / "memory.limit_in_bytes").write_text(str(limit))
                with contextlib.suppress(OSError):  # swap accounting may be off
                    (path / "memory.memsw.limit_in_bytes").write_text(str(limit))
            else:
                (path / "memory.max").write_text(str(limit))
                with contextlib.suppress(OSError):
                    (path / "memory.swap.max").write_text("0")
        except OSError as e:
            log.info("no memory cgroup %s (%s); the resident-memory watchdogs cap the workers", path.name, e)
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
        """Whether the kernel killed a worker here for memory since a process last moved in, or since this
        last said so (each kill is reported once)."""
        kills = self._read_oom_kills()
        killed, self._oom_kills = kills > self._oom_kills, kills
        return killed

    def remove(self) -> None:
        with contextlib.suppress(OSError):
            for child in self.path.iterdir():
                if child.is_dir():
                    child.rmdir()
        with contextlib.suppress(OSError):
            self.path.rmdir()
