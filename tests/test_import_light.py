"""A training script imports sharding_core without the server's dependencies, and without the notebook
widget's (``show`` imports IPython and anywidget only when it is called in a notebook)."""

from __future__ import annotations

import subprocess
import sys

SERVER_STACK = ("fastapi", "uvicorn", "pydantic", "starlette", "server", "orjson")
NOTEBOOK_STACK = ("anywidget", "ipywidgets", "IPython", "traitlets", "comm", "ipykernel", "marimo")


def run(code: str) -> str:
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    return r.stdout.strip()


def test_sharding_core_does_not_import_the_server_stack() -> None:
    code = (
        "import sys, sharding_core, sharding_core.devices, sharding_core.mesh, sharding_core.spec, "
        "sharding_core.layout, sharding_core.render, sharding_core.topology\n"
        f"bad = [m for m in {SERVER_STACK + NOTEBOOK_STACK!r} if m in sys.modules]\n"
        "print(bad)"
    )
    assert run(code) == "[]"


def test_show_outside_a_notebook_imports_no_widget_stack() -> None:
    # `show` in a script prints the text layout: the widget's packages (installed here) stay unloaded.
    code = (
        "import os, sys\nos.environ['JAX_PLATFORMS'] = 'cpu'\n"
        "import shardscope, sharding_core\n"
        "from shardscope import show\n"
        "import shardscope.notebook, shardscope.notebook.bundle\n"
        f"assert not [m for m in {NOTEBOOK_STACK!r} if m in sys.modules]\n"
        "shardscope.show(devices='cpu:8', mesh='2x4', axes='x,y', spec=\"P('x', 'y')\", shape=(8, 16))\n"
        f"print([m for m in {SERVER_STACK + NOTEBOOK_STACK!r} if m in sys.modules])"
    )
    out = run(code)
    assert "CPU 0" in out and out.splitlines()[-1] == "[]"
