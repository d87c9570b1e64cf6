"""Arguments jit refuses beside the mesh of ``jax.set_mesh`` are reported as findings (MaxText #2863).

MaxText replaced ``with mesh:`` by ``jax.set_mesh(mesh)`` and its SFT trainer stopped with "Received
incompatible devices for jitted computation. Got argument args[0] of slice with shape float32[4096] and device
ids [0] on platform TPU and jit's context mesh with device ids [0, 1, 2, 3, 7, 6, 5, 4]": a context mesh in a
TPU ring order beside arrays committed elsewhere. The shapes are rebuilt here on 8 CPU devices; JAX's own
refusal is the oracle (each finding's case must be one JAX refuses, and its fix one JAX accepts).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from fastapi.testclient import TestClient
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

import sharding_core
from sharding_core.findings.mesh_order import MESH_DEVICE_ORDER, MESH_DEVICES
from tests.test_snapshots_api import publish

RING = (0, 1, 2, 3, 7, 6, 5, 4)  # the context mesh's order in MaxText #2863
FINDING_KEYS = {"kind", "source", "bytes_per_step", "text", "fix"}
FIX_KEYS = {"text", "line", "leaf", "spec", "bytes_after", "expected_seconds_after", "peak_after"}


def ring_mesh() -> jax.sharding.Mesh:
    devices = jax.devices()
    return jax.sharding.Mesh(
        np.array([devices[i] for i in RING]).reshape(2, 4), ("x", "y"), axis_types=(AxisType.Explicit,) * 2
    )


def jax_refuses(f: Any, *args: Any) -> str | None:
    """JAX's own answer: its "incompatible devices" message, or None when it runs ``f``."""
    try:
        jax.block_until_ready(f(*args))
    except ValueError as e:
        assert "incompatible devices" in str(e), e
        return str(e)
    return None


def here() -> str:
    import inspect

    frame = inspect.currentframe()
    assert frame is not None and frame.f_back is not None
    return f"{__file__}:{frame.f_back.f_lineno}"


def test_maxtext_2863_arguments_in_another_device_order_than_the_context_mesh() -> None:
    x = jax.device_put(jnp.ones((8, 16)), NamedSharding(jax.make_mesh((2, 4), ("x", "y")), P("x", "y")))
    ctx = ring_mesh()
    with jax.set_mesh(ctx):
        assert jax_refuses(jax.jit(lambda a: a * 2), x) is not None
        snap, line = sharding_core.capture({"params": {"w": x}}), here()
        (finding,) = snap["findings"]
        assert set(finding) == FINDING_KEYS and set(finding["fix"]) == FIX_KEYS
        assert finding["kind"] == MESH_DEVICE_ORDER and finding["source"] == finding["fix"]["line"] == line
        assert finding["fix"]["leaf"] == "params/w" and finding["fix"]["spec"] == "P('x', 'y')"
        assert "[0, 1, 2, 3, 4, 5, 6, 7]" in finding["text"] and str(list(RING)) in finding["text"]
        assert "jax.device_put(x, NamedSharding(jax.sharding.get_mesh(), P('x', 'y')))" in finding["fix"]["text"]
        # the fix as written: the arguments on the context mesh. JAX accepts it, and nothing is found.
        fixed = jax.device_put(x, NamedSharding(jax.sharding.get_mesh(), P("x", "y")))
        assert jax_refuses(jax.jit(lambda a: a * 2), fixed) is None
        assert sharding_core.capture({"params": {"w": fixed}})["findings"] == []
    # the fix's other half: the arguments' own mesh as the context mesh
    with jax.set_mesh(x.sharding.mesh):
        assert jax_refuses(jax.jit(lambda a: a * 2), x) is None
        assert sharding_core.capture({"w": x})["findings"] == []


def test_maxtext_2863_an_array_committed_to_one_device_beside_a_ring_context_mesh() -> None:
    step = jax.device_put(jnp.ones(4096), jax.devices()[0])  # committed to device 0
    fresh = jnp.ones(4096)  # uncommitted: jit moves it where it needs it
    with jax.set_mesh(ring_mesh()):
        # the literal #2863 error: eager slicing of the committed array is a jit beside the context mesh
        refused = jax_refuses(lambda a: a[:10], step)
        assert refused is not None and "device ids [0]" in refused
        assert jax_refuses(lambda a: a[:10], fresh) is None
        findings = sharding_core.capture({"step": step, "fresh": fresh})["findings"]
        assert [(f["kind"], f["fix"]["leaf"], f["fix"]["spec"]) for f in findings] == [(MESH_DEVICES, "step", "P()")]
        assert "committed to device 0 alone" in findings[0]["text"]
        fixed = jax.device_put(step, NamedSharding(jax.sharding.get_mesh(), P()))
        assert jax_refuses(lambda a: a[:10], fixed) is None
        assert sharding_core.capture({"step": fixed})["findings"] == []


def test_inspect_jit_under_the_context_mesh_reports_jaxs_refusal_as_a_finding() -> None:
    x = jax.device_put(jnp.ones((8, 16)), NamedSharding(jax.make_mesh((2, 4), ("x", "y")), P("x", "y")))
    with jax.set_mesh(ring_mesh()):
        refused = jax_refuses(jax.jit(lambda a: a * 2), x)
        snap, line = sharding_core.inspect_jit(jax.jit(lambda a: a * 2), x), here()
    assert refused is not None
    (finding,) = snap["findings"]
    assert finding["kind"] == MESH_DEVICE_ORDER and finding["source"] == line
    assert finding["fix"]["leaf"] == "inputs/args/0"
    assert "Received incompatible devices for jitted computation" in finding["text"]
    assert snap["jit"] is None and snap["collectives"] is None  # nothing compiled: JAX refused it
    assert [leaf["path"] for leaf in snap["leaves"]] == ["inputs/args/0"]
    # outside the context the same call compiles, with no finding
    assert sharding_core.inspect_jit(jax.jit(lambda a: a * 2), x)["findings"] == []


def test_no_finding_without_a_context_mesh_or_under_the_legacy_with_mesh() -> None:
    x = jax.device_put(jnp.ones((8, 16)), NamedSharding(jax.make_mesh((2, 4), ("x", "y")), P("x", "y")))
    assert sharding_core.capture({"x": x})["findings"] == []
    legacy = jax.sharding.Mesh(ring_mesh().devices, ("x", "y"))
    # jit does not check the legacy context (deprecated since JAX 0.7): it runs, and nothing is reported
    with pytest.warns(DeprecationWarning, match="with mesh"), legacy:
        assert jax_refuses(jax.jit(lambda a: a * 2), x) is None
        assert sharding_core.capture({"x": x})["findings"] == []


def test_a_snapshot_with_findings_is_stored(client: TestClient) -> None:
    x = jax.device_put(jnp.ones((8, 16)), NamedSharding(jax.make_mesh((2, 4), ("x", "y")), P("x", "y")))
    with jax.set_mesh(ring_mesh()):
        snap = sharding_core.capture({"x": x}, "ring")
    stored = client.get(f"/api/snapshots/{publish(client, snap)['id']}").json()
    assert stored["findings"] == snap["findings"]


@pytest.mark.parametrize("more", [1, 5])
def test_many_leaves_on_one_mesh_make_one_finding_naming_a_few(more: int) -> None:
    mesh = jax.make_mesh((2, 4), ("x", "y"))
    tree = {f"w{i}": jax.device_put(jnp.ones((8, 16)), NamedSharding(mesh, P("x", "y"))) for i in range(more)}
    with jax.set_mesh(ring_mesh()):
        (finding,) = sharding_core.capture(tree)["findings"]
    assert finding["fix"]["leaf"] == "w0"
    assert ("and 2 more" in finding["text"]) == (more == 5), finding["text"]
