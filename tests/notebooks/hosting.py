"""Running a notebook host (JupyterLab, Notebook 7, marimo) for the browser tests: waiting for it to answer,
the resident memory of its process tree, stopping it with every kernel it started; the page's errors and
outside requests, the widgets' counters, screenshots; and JAX's own tiles to check the drawn grids against."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

import jax
import pytest
from jax.sharding import AxisType, NamedSharding
from playwright.sync_api import Locator, Page

from tests.plugins.browser import SHOTS


def _processes() -> dict[int, tuple[int, int]]:
    """pid → (parent pid, resident bytes), from /proc."""
    out = {}
    page = os.sysconf("SC_PAGE_SIZE")
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                stat = (proc / "stat").read_text().rsplit(")", 1)[1].split()
                out[int(proc.name)] = (int(stat[1]), int(stat[21]) * page)
            except (OSError, IndexError, ValueError):
                continue
    return out


def descendants(pid: int) -> dict[int, int]:
    """``pid`` and every process under it (kernels may run in sessions of their own) → resident bytes."""
    procs = _processes()
    found = {pid: procs.get(pid, (0, 0))[1]}
    grew = True
    while grew:
        grew = False
        for p, (parent, rss) in procs.items():
            if parent in found and p not in found:
                found[p] = rss
                grew = True
    return found


def wait_until_answering(proc: subprocess.Popen[bytes], url: str, log: Path, name: str, seconds: float) -> None:
    """Waits for ``url`` to answer; fails the test with the host's log if it exits or takes too long."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"{name} did not start:\n{log.read_text()[-4000:]}")
            time.sleep(0.5)


def stop(proc: subprocess.Popen[bytes], marker: str) -> None:
    """Stops a host started in a session of its own; it shuts its kernels down on SIGTERM, and any left (a
    hung shutdown) are killed after it — only ours: their command line or environment names ``marker``
    (a directory of this test's)."""
    kernels = [p for p in descendants(proc.pid) if p != proc.pid]
    for sig, wait in ((signal.SIGTERM, 20), (signal.SIGKILL, 10)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            proc.wait(wait)
            break
        except subprocess.TimeoutExpired:
            continue
    for pid in kernels:
        with contextlib.suppress(OSError):
            mine = any(
                marker in Path(f"/proc/{pid}/{part}").read_bytes().decode(errors="replace")
                for part in ("cmdline", "environ")
            )
            if mine:
                os.kill(pid, signal.SIGKILL)


def jax_tiles(mesh_shape: tuple[int, int], spec: Any, shape: tuple[int, ...]) -> dict[str, list[list[int]]]:
    """JAX's own answer: for each distinct block, its holders' label (as the grid writes it) and its bounds."""
    mesh = jax.make_mesh(mesh_shape, ("x", "y"), axis_types=(AxisType.Auto, AxisType.Auto))
    blocks: dict[tuple[tuple[int, int], ...], list[int]] = {}
    for device, index in NamedSharding(mesh, spec).devices_indices_map(shape).items():
        bounds = tuple((s.start or 0, n if s.stop is None else s.stop) for s, n in zip(index, shape, strict=True))
        blocks.setdefault(bounds, []).append(device.id)
    return {f"CPU {','.join(map(str, sorted(ids)))}": [list(b) for b in bounds] for bounds, ids in blocks.items()}


def columns_fit_the_width(widget: Any) -> tuple[int, float]:
    """The number of columns of a widget's layout (grid | summary and mesh) and its content width: one
    column at 760 px or less (the widget's container query), two above."""
    tracks, width = widget.locator("[data-part=layout-pair]").first.evaluate(
        """e => {
            const root = e.closest('.shardscope-nb'), style = getComputedStyle(root);
            const width = root.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
            return [getComputedStyle(e).gridTemplateColumns.split(' ').length, width];
        }"""
    )
    assert tracks == (1 if width <= 760 else 2), (tracks, width)
    return int(tracks), float(width)


class HostPage:
    """A notebook open in a host's page: its JavaScript errors and the requests it sends outside this machine
    are recorded from the start; screenshots are named ``<prefix>-<name>.png``."""

    def __init__(self, page: Page, prefix: str) -> None:
        self.page, self.prefix = page, prefix
        self.errors: list[str] = []
        self.outside: list[str] = []
        local = ("http://127.0.0.1:", "ws://127.0.0.1:", "blob:http://127.0.0.1:", "data:")
        page.on("pageerror", lambda e: self.errors.append(f"pageerror: {e}"))
        page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        page.on("request", lambda r: None if r.url.startswith(local) else self.outside.append(r.url))

    def shot(self, locator: Locator, name: str) -> None:
        SHOTS.mkdir(parents=True, exist_ok=True)
        locator.scroll_into_view_if_needed()
        locator.screenshot(path=str(SHOTS / f"{self.prefix}-{name}.png"))


def count(widget: Locator, key: str = "rendered") -> int:
    """One of the widget's counters (``data-rendered``, ``data-errors``, ``data-filtered``...)."""
    return int(widget.get_attribute(f"data-{key}") or 0)


def counted(widget: Locator, after: int, key: str = "rendered", timeout: int = 30_000) -> None:
    """Waits for the widget's counter ``key`` to pass ``after``."""
    widget.page.wait_for_function(
        f"([el, n]) => Number(el.dataset.{key} || 0) > n", arg=[widget.element_handle(), after], timeout=timeout
    )
