"""The suite's own CPU accounting (``tests/plugins/cputime.py``): a test that burns CPU, and one whose child does,
are each counted, and the summary sums them by module."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

BURNS = """
import subprocess, sys, time

SPIN = "import time\\nend = time.process_time() + 0.5\\nwhile time.process_time() < end: pass"

def test_own():
    end = time.process_time() + 0.5
    while time.process_time() < end:
        pass

def test_child():
    subprocess.run([sys.executable, "-c", SPIN], check=True)

def test_idle():
    time.sleep(0.3)
"""


def test_each_test_s_cpu_and_its_reaped_childrens_are_counted(tmp_path: Path) -> None:
    (tmp_path / "test_burns.py").write_text(BURNS)
    out = tmp_path / "cpu"
    env = {**os.environ, "SHARDSCOPE_TEST_CPU": str(out)}
    env.pop("PYTEST_XDIST_WORKER", None)
    args = ["-m", "pytest", "-q", "-p", "no:xdist", "-p", "tests.plugins.cputime", "--rootdir", str(tmp_path),
            "-c", "/dev/null", str(tmp_path / "test_burns.py")]  # fmt: skip
    r = subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    rows = {
        row[0].rsplit("::", 1)[1]: row[1:] for row in map(json.loads, (tmp_path / "cpu.main").read_text().splitlines())
    }
    assert rows["test_own"][0] >= 0.45 and rows["test_own"][1] < 0.2
    assert rows["test_child"][1] >= 0.45
    assert rows["test_idle"][0] + rows["test_idle"][1] < 0.2 and rows["test_idle"][2] >= 0.3
    summary = subprocess.run([sys.executable, "-m", "tests.plugins.cputime", str(out)], cwd=ROOT, capture_output=True,
                             text=True, timeout=60, check=True).stdout  # fmt: skip
    line = next(line for line in summary.splitlines() if line.endswith("test_burns.py"))
    cpu, own, reaped, _, tests = line.split()[:5]
    assert int(tests) == 3 and abs(float(cpu) - float(own) - float(reaped)) <= 0.11 and float(cpu) >= 0.9
