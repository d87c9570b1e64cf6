"""The newest JAX the registry serves, on Python 3.13, answers as the locked JAX does (``make newest-jax``).

``make newest-jax`` (the Makefile and ``tests/newest_jax.sh`` own how) builds a Debian 13 root with Debian's
debootstrap, installs the wheel built now beside the newest jax, jaxlib and libtpu there, and runs
``tests/wheel_surface.py`` and ``tests/newest_jax_checks.py`` in it: layouts from a real ``shardscope serve``
equal to the locked JAX's exactly, ``typed`` equal to ``jax.typeof``, a plan's memory equal to that JAX's
``memory_analysis()``, the widget's payload. ``tests/plugins/newest_jax.py`` starts it as collection ends, so
it runs beside the suite; these tests run last and read its result. The others check that a run that fails,
or is interrupted as Ctrl-C interrupts it, leaves nothing mounted.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import tomllib
from pathlib import Path

import jax
import pytest

from tests.plugins.newest_jax import Run
from tests.test_wheel import SURFACE_CHECKS

pytestmark = pytest.mark.workers  # subprocesses (a chroot's)

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "tests" / "newest_jax.sh"
NEWEST_ROOT = ROOT / "build" / "newest-jax-root"
MOUNTS = ("proc", "sys", "dev", "dev/shm", "var/cache/uv")
CHECKS = ["layout API", "typed", "plan on a compile-only TPU slice"]


def release(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", text))


def mounted_under(root: Path) -> list[str]:
    """Mount points at or below ``root``, from the kernel's table for this process."""
    points = [line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()]
    return [p for p in points if p == str(root) or p.startswith(f"{root}/")]


def test_the_newest_jax_answers_as_the_locked_jax(newest_jax_run: Run) -> None:
    assert newest_jax_run.rc == 0, f"make newest-jax failed ({newest_jax_run.rc}):\n{newest_jax_run.output[-6000:]}"
    summary = newest_jax_run.summary
    assert summary is not None, newest_jax_run.output[-3000:]
    checks = summary["checks"]
    assert summary["surface"]["checks"] == SURFACE_CHECKS and checks["checks"] == CHECKS, summary
    # the versions it got: the newest JAX is newer than the locked one, on Python 3.13, from the wheel built now
    assert checks["locked_jax"] == jax.__version__
    assert release(checks["jax"]) > release(jax.__version__), (checks["jax"], jax.__version__)
    assert checks["jaxlib"] == checks["jax"] == summary["surface"]["jax"], checks
    assert checks["python"].startswith("3.13."), checks["python"]
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert checks["shardscope"] == project["version"]
    line = f"newest on the registry for Python 3.13: jax {checks['jax']}, jaxlib {checks['jaxlib']}, libtpu "
    assert line + checks["libtpu"] in newest_jax_run.output
    assert not mounted_under(NEWEST_ROOT), "make newest-jax left mounts behind"


def script(wheel: Path, locked: Path) -> list[str]:
    return [str(SCRIPT), str(wheel), str(locked)]


def test_a_failed_run_leaves_nothing_mounted(newest_jax_run: Run, tmp_path: Path) -> None:
    """The script mounts the root's proc, sys, dev, dev/shm and the uv cache, then fails on purpose: its trap
    unmounts them all."""
    wheel, locked = tmp_path / "shardscope.whl", tmp_path / "locked.json"
    wheel.write_bytes(b"")
    locked.write_text("{}")
    r = subprocess.run(
        script(wheel, locked),
        env={**os.environ, "NEWEST_JAX_FAIL_AFTER_MOUNT": "1"},
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert r.returncode == 1 and "failing on purpose after mounting" in r.stderr, (r.returncode, r.stderr)
    made = re.search(r"mounted: (.*)", r.stderr)
    assert made and sorted(made.group(1).split()) == sorted(str(NEWEST_ROOT / m) for m in MOUNTS), r.stderr
    assert not mounted_under(NEWEST_ROOT), mounted_under(NEWEST_ROOT)


def test_ctrl_c_leaves_nothing_mounted(newest_jax_run: Run, tmp_path: Path) -> None:
    """Ctrl-C (SIGINT to the foreground process group) while the root is mounted: the trap unmounts it and the
    script exits 130."""
    wheel, locked = tmp_path / "shardscope.whl", tmp_path / "locked.json"
    wheel.write_bytes(b"")
    locked.write_text("{}")
    # SIGINT as a terminal delivers it: not ignored, whatever started this test (a shell's `cmd &` ignores it in
    # everything below, and bash cannot trap a signal ignored on entry: the script then held its 600 s)
    p = subprocess.Popen(
        ["env", "--default-signal=INT", *script(wheel, locked)],
        env={**os.environ, "NEWEST_JAX_HOLD_AFTER_MOUNT": "600"},
        stderr=subprocess.PIPE,
        text=True,
        process_group=0,
    )
    try:
        assert p.stderr is not None
        seen = []
        for line in p.stderr:  # bounded: the script holds (600 s at most) after this line
            seen.append(line)
            if "holding after mounting" in line:
                break
        assert sorted(mounted_under(NEWEST_ROOT)) == sorted(str(NEWEST_ROOT / m) for m in MOUNTS), seen
        os.killpg(p.pid, signal.SIGINT)
        assert p.wait(timeout=120) == 130
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
        if p.stderr is not None:
            p.stderr.close()
        left = mounted_under(NEWEST_ROOT)
        if p.returncode != 130:  # killed, its trap never ran: what it mounted is unmounted here (the host's /dev
            for m in sorted(left, reverse=True):  # is bound in the root: a later rm -rf of build/ must not reach it)
                subprocess.run(["umount", "--lazy", m], check=False)
    assert not left, left
