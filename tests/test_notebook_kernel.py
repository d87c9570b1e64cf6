"""``shardscope.show`` in a real kernel: the notebook of ``tests/notebooks/show_cells.py`` executed by
nbclient in ipykernel (what Jupyter, VS Code and Colab run). Every ``show`` is a widget view, nothing
errs, and the widget state the kernel sent holds JAX's own layouts.
"""

from __future__ import annotations

import base64
import json
import os
from typing import Any

import jax
import nbformat
import pytest
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P
from nbclient import NotebookClient

from sharding_core.devices import parse_devices
from sharding_core.layout import Layout
from sharding_core.mesh import MeshSpec
from tests.notebooks.show_cells import SHOW_CELLS, notebook

pytestmark = pytest.mark.workers  # worker processes or subprocesses

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
MAX_KERNEL_RSS = 1024**3
"""The kernel's peak resident memory running the notebook (JAX, Flax, a 4096-device layout): 311 MiB measured."""

PEAK_RSS = "import re; print('peak-rss-kib', re.search(r'VmHWM:\\s+(\\d+) kB', open('/proc/self/status').read())[1])"
"""The kernel's own peak (Linux's VmHWM). Not ``getrusage``'s ``ru_maxrss``: that keeps the peak of the process
image before ``exec``, a fork of this test's process (CI's full run read 3.5 GiB: pytest's own size by then)."""


@pytest.fixture(scope="module")
def executed(tmp_path_factory: pytest.TempPathFactory) -> Any:
    nb = notebook()
    nb.cells.append(nbformat.v4.new_code_cell(PEAK_RSS))
    env = {k: v for k, v in os.environ.items() if k != "SHARDSCOPE_URL"}
    env["JAX_PLATFORMS"] = "cpu"
    client = NotebookClient(
        nb,
        timeout=240,  # per cell
        kernel_name="python3",
        resources={"metadata": {"path": str(tmp_path_factory.mktemp("kernel"))}},
    )
    client.execute(env=env)
    return nb


def widget_payloads(nb: Any) -> dict[str, dict[str, Any]]:
    """model id → the payload the kernel synced to the page (a binary buffer, base64 in the saved state)."""
    state = nb.metadata["widgets"][WIDGET_STATE]["state"]
    out = {}
    for model_id, model in state.items():
        if model["model_name"] != "AnyModel":
            continue
        buffers = {tuple(b["path"]): b for b in model.get("buffers", [])}
        out[model_id] = json.loads(base64.b64decode(buffers[("payload",)]["data"]))
    return out


def shown(nb: Any, name: str) -> dict[str, Any]:
    outputs = nb.cells[SHOW_CELLS[name]].outputs
    views = [o for o in outputs if WIDGET_VIEW in o.get("data", {})]
    assert len(views) == 1, outputs
    payload: dict[str, Any] = widget_payloads(nb)[views[0]["data"][WIDGET_VIEW]["model_id"]]
    return payload


def test_every_show_is_a_widget_view_and_nothing_errs(executed: Any) -> None:
    for cell in executed.cells:
        assert not [o for o in cell.outputs if o.output_type == "error"], cell.outputs
    for name in SHOW_CELLS:
        shown(executed, name)  # one widget view each, with its payload
    rss = next(o.text for o in executed.cells[-1].outputs if o.output_type == "stream")
    peak = int(rss.split()[-1]) * 1024
    print(f"kernel peak RSS {peak / 2**20:.0f} MiB")
    assert peak < MAX_KERNEL_RSS


def test_the_array_widget_holds_jaxs_layout(executed: Any) -> None:
    mesh = jax.make_mesh((2, 4), ("x", "y"), axis_types=(AxisType.Auto, AxisType.Auto))
    sharding = NamedSharding(mesh, P("x", "y"))
    data = shown(executed, "array")
    assert data["kind"] == "layout" and data["editable"]
    assert data["layout"] == Layout.from_sharding(sharding, (8, 16), "float32").to_json()


def test_the_hypothetical_widget_is_laid_out_on_simulated_devices(executed: Any) -> None:
    data = shown(executed, "hypothetical")
    expected = Layout.from_named(
        parse_devices("tpu:v5e:16x16"), MeshSpec((16, 16), ("x", "y")), "P('x', None)", (1024, 1024)
    )
    assert data["layout"] == expected.to_json() and data["spec_text"] == "P('x', None)"
    big = shown(executed, "large")["layout"]
    assert len(big["shards"]) == 4096 and big["devices_key"] == "tpu:v4:16x16x16"


def test_the_model_and_its_training_step(executed: Any) -> None:
    snap = shown(executed, "model")["snapshot"]
    leaves = {leaf["path"]: leaf for leaf in snap["leaves"]}
    # the rules: hidden -> y, embed -> None (what flax.linen.logical_to_mesh_axes gives)
    assert leaves["params/Dense_0/kernel"]["spec"] == "P(None, 'y')"
    assert leaves["params/Dense_1/kernel"]["spec"] == "P('y', None)"
    assert leaves["params/Dense_0/kernel"]["logical_axes"] == ["embed", "hidden"]
    assert snap["memory"]["devices_with_data"] == 8
    step = shown(executed, "step")["snapshot"]
    assert step["jit"]["function"] == "train_step"
    assert {c["op"] for c in step["collectives"]} == {"all-reduce"}
    assert all(c["groups"] for c in step["collectives"])


def test_no_widget_has_a_publish_button_without_a_dashboard(executed: Any) -> None:
    state = executed.metadata["widgets"][WIDGET_STATE]["state"]
    models = [m["state"] for m in state.values() if m["model_name"] == "AnyModel"]
    assert len(models) == len(SHOW_CELLS) and all(m["dashboard"] == "" for m in models)


def test_the_widget_code_is_sent_once_per_widget_and_names_no_url(executed: Any) -> None:
    state = executed.metadata["widgets"][WIDGET_STATE]["state"]
    esm = {m["state"]["_esm"] for m in state.values() if m["model_name"] == "AnyModel"}
    assert len(esm) == 1
    (code,) = esm
    assert "https://" not in code and "cdn." not in code.lower()  # the full check: tests/test_notebook.py
