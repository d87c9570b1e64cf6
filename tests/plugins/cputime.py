"""Where the suite's CPU goes: with ``SHARDSCOPE_TEST_CPU=FILE`` each test process appends one JSON line per test
to ``FILE.<worker>`` — ``[node id, CPU seconds of the test process, CPU seconds of the child processes it reaped
during the test, wall seconds]`` — and ``python -m tests.plugins.cputime FILE`` sums them by module.

A child's CPU counts when it is reaped: a module's server or notebook is counted at the module's last test, so
read the figures by module. Processes nobody in the test process reaps (a background run) are not counted."""

from __future__ import annotations

import collections
import glob
import json
import os
import resource
import sys
import time
from collections.abc import Iterator

import pytest

OUT = os.environ.get("SHARDSCOPE_TEST_CPU", "")


def _cpu() -> tuple[float, float]:
    own, reaped = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, reaped.ru_utime + reaped.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    if not OUT:
        yield
        return
    (own, reaped), wall = _cpu(), time.monotonic()
    yield
    (own_after, reaped_after), wall_after = _cpu(), time.monotonic()
    row = [item.nodeid, round(own_after - own, 3), round(reaped_after - reaped, 3), round(wall_after - wall, 3)]
    with open(f"{OUT}.{os.environ.get('PYTEST_XDIST_WORKER', 'main')}", "a") as f:
        f.write(json.dumps(row) + "\n")


def main(prefix: str) -> None:
    by_module: dict[str, list[float]] = collections.defaultdict(lambda: [0.0, 0.0, 0.0, 0])
    for path in glob.glob(f"{glob.escape(prefix)}.*"):
        with open(path) as f:
            for node, own, reaped, wall in map(json.loads, f):
                total = by_module[node.split("::")[0]]
                total[0], total[1], total[2], total[3] = (
                    total[0] + own,
                    total[1] + reaped,
                    total[2] + wall,
                    total[3] + 1,
                )
    rows = sorted(by_module.items(), key=lambda kv: -(kv[1][0] + kv[1][1]))
    print(f"{'CPU s':>8} {'own':>8} {'reaped':>8} {'wall s':>8} {'tests':>6}  module")
    for module, (own, reaped, wall, n) in rows:
        print(f"{own + reaped:8.1f} {own:8.1f} {reaped:8.1f} {wall:8.1f} {int(n):6d}  {module}")


if __name__ == "__main__":
    main(sys.argv[1])
