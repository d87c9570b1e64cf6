"""``make newest-jax`` beside the suite: started when collection ends, waited for by its test at the end.

The newest-JAX checks (``tests/newest_jax.sh``: a Debian 13 root, Python 3.13, the newest JAX) spend most of
their time waiting on a chroot's processes and the registry, so they run beside the rest of ``pytest`` rather
than after it: when a selected test asks for :func:`newest_jax_run`, ``make -s newest-jax`` starts in its
own process group as collection ends, those tests are moved to the end, and the fixture waits for it there.

Under pytest-xdist (``make test`` runs two workers) every worker collects the same tests, so the first worker
to get here starts the run for the whole invocation (a lock file, and the run's state file naming the
invocation: xdist's ``PYTEST_XDIST_TESTRUNUID``) and whichever worker runs the tests waits for its exit status
file; the controller (or a plain ``pytest``) stops a run still going when the session ends, with SIGTERM, which
the script traps to unmount what it mounted. The terminal summary says what ran and how long it took.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import json
import os
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent
LOG = ROOT / "build" / "newest-jax.log"
STATE = ROOT / "build" / "newest-jax.state.json"  # {"run": invocation id, "pgid", "started": wall seconds}
RC = ROOT / "build" / "newest-jax.rc"  # the run's exit status, written when it ends
LOCK = ROOT / "build" / "newest-jax.lock"
FIXTURE = "newest_jax_run"
WAIT_SECONDS = 1500
"""The most a run may take: a first one bootstraps the root (about 3 minutes) and downloads JAX."""
INVOCATION = os.environ.get("PYTEST_XDIST_TESTRUNUID") or uuid.uuid4().hex
"""One pytest invocation: its xdist workers share the id, a plain run has its own."""


@dataclasses.dataclass(repr=False)
class Run:
    """The background ``make -s newest-jax``: its process group, when it started (wall clock), and once done its
    exit status, output and the summary line the script prints last."""

    pgid: int
    started: float
    rc: int | None = None
    seconds: float | None = None
    output: str = ""

    def __repr__(self) -> str:  # what a failed assertion prints: not the whole output
        return f"Run(make newest-jax, rc={self.rc}, seconds={self.seconds})"

    def wait(self) -> Run:
        """Waits for the exit status file (whichever process started the run), at most until WAIT_SECONDS after
        the start; past it the run is stopped and reads as failed (-1)."""
        while self.rc is None:
            if RC.exists():
                with contextlib.suppress(ValueError):
                    self.rc = int(RC.read_text().strip() or "-1")
                    break
            if time.time() > self.started + WAIT_SECONDS:
                stop(self)
                self.rc = -1
                break
            time.sleep(1.0)
        if self.seconds is None:  # the run's own time: from its start to its exit status file
            ended = RC.stat().st_mtime if RC.exists() else time.time()
            self.seconds = ended - self.started
            self.output = LOG.read_text(errors="replace") if LOG.exists() else ""
        return self

    @property
    def summary(self) -> dict[str, Any] | None:
        for line in reversed(self.output.splitlines()):
            if line.startswith('{"surface"'):
                result: dict[str, Any] = json.loads(line)
                return result
        return None


@contextlib.contextmanager
def _locked() -> Iterator[None]:
    LOCK.parent.mkdir(parents=True, exist_ok=True)
    with LOCK.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _ours() -> Run | None:
    """This invocation's run, from the state file (None: no run of this invocation has started)."""
    try:
        state = json.loads(STATE.read_text())
    except (OSError, ValueError):
        return None
    if state.get("run") != INVOCATION:
        return None
    return Run(int(state["pgid"]), float(state["started"]))


def start() -> Run:
    """This invocation's run: started here, or by another worker before."""
    with _locked():
        found = _ours()
        if found is not None:
            return found
        RC.unlink(missing_ok=True)
        # In the background of a shell that returns at once (its process group lives on in the run): no process of
        # this worker's is left running when the worker ends, whichever worker waits for the run.
        script = f'(make -s newest-jax; echo $? > "{RC}.tmp" && mv "{RC}.tmp" "{RC}") </dev/null &'
        with LOG.open("wb") as log:
            process = subprocess.Popen(
                ["sh", "-c", script], cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, process_group=0
            )
        process.wait(timeout=60)
        run = Run(process.pid, time.time())
        STATE.write_text(json.dumps({"run": INVOCATION, "pgid": run.pgid, "started": run.started}))
        return run


def stop(run: Run) -> None:
    """SIGTERM to the run's process group (the script unmounts on it), SIGKILL if it outstays a minute."""
    for sig, grace in ((signal.SIGTERM, 60), (signal.SIGKILL, 10)):
        if RC.exists():
            return
        try:
            os.killpg(run.pgid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            try:
                os.killpg(run.pgid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.5)


def _controller(config: pytest.Config) -> bool:
    """The process that ends the invocation: xdist's controller, or a plain pytest (not an xdist worker)."""
    return not hasattr(config, "workerinput")


def pytest_configure(config: pytest.Config) -> None:
    """On xdist's controller: the workers get this invocation's id (xdist would make one of its own)."""
    if _controller(config) and getattr(config.option, "testrunuid", "") is None:
        config.option.testrunuid = INVOCATION


@pytest.hookimpl(trylast=True)  # after -m / -k deselection
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    ours = [item for item in items if FIXTURE in getattr(item, "fixturenames", ())]
    if not ours:
        return
    items[:] = [item for item in items if item not in ours] + ours  # run last, after the run had its time
    if not config.option.collectonly:
        start()


def pytest_sessionfinish(session: pytest.Session) -> None:
    if _controller(session.config):
        run = _ours()
        if run is not None:
            stop(run)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    run = _ours() if _controller(terminalreporter.config) else None
    if run is None or not RC.exists():
        return
    run.wait()
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
