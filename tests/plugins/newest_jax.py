"""``make newest-jax`` beside the suite: started when collection ends, waited for by its test at the end.

The newest-JAX checks (``tests/newest_jax.sh``: a Debian 13 root, Python 3.13, the newest JAX) spend most of
their time waiting on a chroot's processes and the registry, so they run beside the rest of ``pytest`` rather
than after it: when a selected test asks for :func:`newest_jax_run`, ``make -s newest-jax`` starts in its
own process group as collection ends, those tests are moved to the end, and the fixture waits for it there.
Whatever ends the session (its end, Ctrl-C, a failure) stops a run still going with SIGTERM, which the script
traps to unmount what it mounted. The terminal summary says what ran and how long it took.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent
LOG = ROOT / "build" / "newest-jax.log"
FIXTURE = "newest_jax_run"
WAIT_SECONDS = 1500
"""The most a run may take: a first one bootstraps the root (about 3 minutes) and downloads JAX."""


@dataclasses.dataclass(repr=False)
class Run:
    """The background ``make -s newest-jax``: its process, when it started, and once done its exit status,
    output and the summary line the script prints last."""

    process: subprocess.Popen[bytes]
    started: float
    rc: int | None = None
    seconds: float | None = None
    output: str = ""

    def __repr__(self) -> str:  # what a failed assertion prints: not the whole output
        return f"Run(make newest-jax, rc={self.rc}, seconds={self.seconds})"

    def wait(self) -> Run:
        if self.rc is None:
            try:
                self.rc = self.process.wait(timeout=max(1.0, self.started + WAIT_SECONDS - time.monotonic()))
            except subprocess.TimeoutExpired:
                stop(self)
                self.rc = -1
            self.seconds = time.monotonic() - self.started
            self.output = LOG.read_text(errors="replace")
        return self

    @property
    def summary(self) -> dict[str, Any] | None:
        for line in reversed(self.output.splitlines()):
            if line.startswith('{"surface"'):
                result: dict[str, Any] = json.loads(line)
                return result
        return None


_RUN: list[Run] = []


def start() -> Run:
    if not _RUN:
        LOG.parent.mkdir(parents=True, exist_ok=True)
        with LOG.open("wb") as log:
            process = subprocess.Popen(
                ["make", "-s", "newest-jax"], cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, process_group=0
            )
        _RUN.append(Run(process, time.monotonic()))
    return _RUN[0]


def stop(run: Run) -> None:
    """SIGTERM to the run's process group (the script unmounts on it), SIGKILL if it outstays a minute."""
    if run.process.poll() is not None:
        return
    for sig, grace in ((signal.SIGTERM, 60), (signal.SIGKILL, 10)):
        try:
            os.killpg(run.process.pid, sig)
        except ProcessLookupError:
            return
        try:
            run.process.wait(timeout=grace)
            return
        except subprocess.TimeoutExpired:
            continue


@pytest.hookimpl(trylast=True)  # after -m / -k deselection
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    ours = [item for item in items if FIXTURE in getattr(item, "fixturenames", ())]
    if not ours:
        return
    items[:] = [item for item in items if item not in ours] + ours  # run last, after the run had its time
    if not config.option.collectonly:
        start()


def pytest_sessionfinish(session: pytest.Session) -> None:
    for run in _RUN:
        stop(run)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not _RUN or _RUN[0].rc is None:
        return
    run = _RUN[0]
    summary = run.summary
    if run.rc != 0 or summary is None:
        terminalreporter.write_line(f"newest JAX: make newest-jax failed (exit {run.rc}); its output: {LOG}")
        return
    checks, seconds = summary["checks"], summary["seconds"]
    names = [*summary["surface"]["checks"], *checks["checks"]]
    terminalreporter.write_line(
        f"newest JAX: jax {checks['jax']}, jaxlib {checks['jaxlib']}, libtpu {checks['libtpu']} on Python "
        f"{checks['python']} (the locked JAX: {checks['locked_jax']}): {len(names)} checks passed; the run took "
        f"{run.seconds:.0f} s beside the suite (root {seconds['root']} s, install {seconds['install']} s, checks "
        f"{seconds['checks']} s)"
    )


@pytest.fixture(scope="session")
def newest_jax_run() -> Run:
    """The finished ``make newest-jax`` run (started as collection ended)."""
    return start().wait()
