"""The notebooks the notebook tests run (in a kernel with nbclient, and in JupyterLab in Chromium):
``shardscope.show`` on an array, a hypothetical TPU layout, a Flax model's train state and an
``inspect_jit`` capture of its training step, on 8 CPU devices (the objects of
``tests/notebooks/panel_objects.py``); and a 4096-device layout. The panel tests' notebook shows the same
objects, and half of a two-process run.

Kept as Python (``CELLS``) and written out as ``.ipynb`` by :func:`write`, so it reads and diffs as
code. ``SHOW_CELLS`` are the indices of the cells whose output must be a widget.
"""

from __future__ import annotations

from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[2]

SETUP = f"""\
import os, sys
os.environ.setdefault("JAX_PLATFORMS", "cpu")
sys.path.insert(0, {str(ROOT)!r})  # the panel tests' objects (tests/notebooks/panel_objects.py)
import jax
jax.config.update("jax_num_cpu_devices", 8)

import shardscope
from tests.notebooks import panel_objects as objects"""

ARRAY = """\
x = objects.array()
shardscope.show(x)"""

HYPOTHETICAL = """\
shardscope.show(devices="tpu:v5e:16x16", mesh="16x16", axes="x,y", spec="P('x', None)", shape=(1024, 1024))"""

MODEL = """\
state = objects.train_state()
shardscope.show(state, "train state", rules=objects.RULES)"""

STEP = """\
step = objects.train_step_capture(state)
shardscope.show(step)"""

LARGE = """\
shardscope.show(devices="tpu:v4:16x16x16", mesh="16x256", axes="x,y", spec="P('x', 'y')", shape=(4096, 4096))"""

HALF_RUN = """\
shardscope.show(objects.merged_half_run(os.environ["SHARDSCOPE_URL"]), "half a run")"""

CELLS = [SETUP, ARRAY, HYPOTHETICAL, MODEL, STEP, LARGE]
SHOW_CELLS = {"array": 1, "hypothetical": 2, "model": 3, "step": 4, "large": 5}

PANEL_CELLS = [SETUP, ARRAY, MODEL, STEP, HALF_RUN]
"""The panel tests' notebook (tests/test_panels_browser.py): what the dashboard shows of the same objects."""
PANEL_SHOW_CELLS = {"array": 1, "model": 2, "step": 3, "half": 4}


def notebook(cells: list[str] = CELLS) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(source) for source in cells]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return nb


def write(path: Path) -> Path:
    nbformat.write(notebook(), str(path))
    return path
