"""A real Jupyter front end for the browser tests: JupyterLab or Notebook 7 (the PyPI packages), started on a free
loopback port with a token and its network features off, serving a fresh directory with one notebook whose
kernels publish to a dashboard; and that notebook opened in Chromium with its cells run."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import nbformat
import pytest
from playwright.sync_api import Browser, Locator, Page

from tests.notebooks.hosting import HostPage, descendants, stop, wait_until_answering
from tests.plugins.browser import SHOTS
from tests.plugins.live import free_port

BIN = Path(sys.executable).parent
JUPYTER_START_SECONDS = 90

# Jupyter's own noise on an offline machine, never the widget's.
JUPYTER_NOISE = ("debugger", "WebSocket", "terminals", "History was unable", "favicon")


class Front(NamedTuple):
    """A notebook front end: its command, the address of a notebook in it, its own offline switches."""

    name: str
    command: str
    notebook_path: str
    shots: str
    args: tuple[str, ...]
    noise: tuple[str, ...] = ()
    """The front end's own errors, never the widget's."""


FRONTS = {
    "JupyterLab": Front(
        "JupyterLab", "jupyter-lab", "/lab/tree/", "notebook",
        (   # no announcements, no update check, no PyPI extension manager
            "--LabApp.news_url=None", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
            "--LabApp.extension_manager=readonly",
            "--LabApp.expose_app_in_browser=True",  # window.jupyterapp: the test switches the theme with it
        ),
    ),
    # Notebook 7 has no news or update check of its own
    "Notebook 7": Front(
        "Notebook 7", "jupyter-notebook", "/notebooks/", "notebook7",
        ("--JupyterNotebookApp.expose_app_in_browser=True",),
        # Notebook 7.6's settings loader throws this on opening any notebook, before a cell has run
        # (checked with the notebook opened and not run)
        noise=("Cannot read properties of undefined (reading 'schema')",),
    ),
}  # fmt: skip


@dataclass
class Jupyter:
    """A running Jupyter server of one front end, and the dashboard its kernels publish to."""

    front: Front
    port: int
    token: str
    proc: subprocess.Popen[bytes]
    log: Path
    dashboard: str

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def rss(self) -> int:
        return sum(descendants(self.proc.pid).values())


@contextmanager
def running_jupyter(
    front: Front, tmp_path_factory: pytest.TempPathFactory, notebook: nbformat.NotebookNode, dashboard: str
) -> Iterator[Jupyter]:
    """``front`` serving a fresh directory holding ``notebook`` (as ``show.ipynb``); its kernels publish to
    ``dashboard``."""
    root = tmp_path_factory.mktemp(front.shots)
    nbformat.write(notebook, str(root / "show.ipynb"))
    home = tmp_path_factory.mktemp(f"{front.shots}-home")
    settings = home / "settings"
    lab_settings = {
        # no news or update checks (both fetch from outside), no kernel-picker dialog
        "@jupyterlab/apputils-extension/notification": {"fetchNews": "false", "checkForUpdates": False},
        "@jupyterlab/notebook-extension/tracker": {"autoStartDefaultKernel": True},
    }
    for name, value in lab_settings.items():
        path = f"{name}.jupyterlab-settings"
        (settings / path).parent.mkdir(parents=True, exist_ok=True)
        (settings / path).write_text(json.dumps(value))
    port, token = free_port(), secrets.token_hex(24)
    env = {
        **os.environ,
        "JAX_PLATFORMS": "cpu",
        "SHARDSCOPE_URL": dashboard,
        "JUPYTER_CONFIG_DIR": str(home / "config"),
        "JUPYTER_RUNTIME_DIR": str(home / "runtime"),
        "JUPYTERLAB_SETTINGS_DIR": str(settings),
        "JUPYTERLAB_WORKSPACES_DIR": str(home / "workspaces"),
    }
    log = root.parent / f"{root.name}-jupyter.log"
    args = [
        str(BIN / front.command), "--no-browser", "--allow-root", f"--port={port}", "--ServerApp.port_retries=0",
        "--ServerApp.ip=127.0.0.1", f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}",
        "--ServerApp.terminals_enabled=False", *front.args,
    ]  # fmt: skip
    with log.open("wb") as out:
        proc = subprocess.Popen(args, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    jupyter = Jupyter(front, port, token, proc, log, dashboard)
    try:
        wait_until_answering(proc, f"{jupyter.origin}/api/status?token={token}", log, front.name, JUPYTER_START_SECONDS)
        yield jupyter
    finally:
        stop(proc, str(home))


KERNEL_IDLE = """(() => {
    const kernel = window.jupyterapp.shell.currentWidget?.sessionContext?.session?.kernel;
    return kernel?.status === 'idle' && kernel.connectionStatus === 'connected';
})()"""
"""The open notebook's kernel has started and is connected (both front ends: JupyterLab's shell and Notebook 7's)."""


class Notebook(HostPage):
    """The notebook open in a front end with its cells run; ``cells`` maps a widget's name to its cell."""

    def __init__(self, page: Page, jupyter: Jupyter, cells: dict[str, int]) -> None:
        super().__init__(page, jupyter.front.shots)
        self.jupyter = jupyter
        self.cells = cells

    def widget(self, name: str) -> Locator:
        return self.page.locator(".jp-Cell").nth(self.cells[name]).locator(".shardscope-nb")

    def widget_errors(self) -> list[str]:
        return [e for e in self.errors if not any(n in e for n in JUPYTER_NOISE + self.jupyter.front.noise)]


@contextmanager
def opened(browser: Browser, jupyter: Jupyter, cells: dict[str, int], viewport: dict[str, int]) -> Iterator[Notebook]:
    """The notebook opened in ``jupyter`` in Chromium, every cell run and every widget of ``cells`` drawn."""
    context = browser.new_context(viewport=viewport)
    page = context.new_page()
    notebook = Notebook(page, jupyter, cells)
    page.goto(f"{jupyter.origin}{jupyter.front.notebook_path}show.ipynb?token={jupyter.token}")
    page.wait_for_function("window.jupyterapp && document.querySelector('.jp-Notebook')", timeout=90_000)
    page.wait_for_function(KERNEL_IDLE, timeout=90_000)
    page.wait_for_timeout(1000)  # the kernel's first websocket is refused by jupyter_server while it connects
    page.click("text=Run", timeout=10_000)
    page.click("text=Run All Cells", timeout=10_000)
    try:
        page.wait_for_function(
            f"document.querySelectorAll('.shardscope-nb[data-rendered]').length >= {len(cells)}", timeout=180_000
        )
    except Exception:
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS / f"{jupyter.front.shots}-failed.png"), full_page=True)
        drawn = page.evaluate("document.querySelectorAll('.shardscope-nb[data-rendered]').length")
        outputs = page.locator(".jp-OutputArea-output").all_inner_texts()
        pytest.fail(f"{drawn} widgets drawn; errors {notebook.errors}; outputs {[o[:300] for o in outputs]}")
    try:
        yield notebook
    finally:
        context.close()
