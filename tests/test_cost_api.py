"""Cost estimates through the API: ``POST /api/reshard`` against JAX's own compiled HLO, estimates and
rooflines in kernel-lab results (CPU, TPU compile-only and multi-slice DCN steps), ``POST /api/compare``
over reshards, kernel runs and snapshots, ``GET /api/hardware``, and ``inspect_jit``'s estimates.

The reshard check: this test process compiles ``jax.jit(lambda x: x, out_shardings=NamedSharding(mesh,
to))`` on an input placed with ``from``, on its own 8 CPU devices at the simulated mesh's positions, and the
API's collectives (op, groups as device ids, bytes) must be exactly those of that HLO.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import orjson
import pytest
from fastapi.testclient import TestClient
from jax.sharding import AxisType, Mesh, NamedSharding

from server.settings import Settings
from sharding_core import capture, inspect_jit
from sharding_core.cost.context import NO_CPU_FIGURES
from sharding_core.devices import parse_devices
from sharding_core.hardware import SOURCES, TPU_FIGURES
from sharding_core.hlo.collectives import device_assignment, read_collectives
from sharding_core.mesh import MeshSpec, build_mesh
from sharding_core.program.targets import libtpu_available
from sharding_core.spec import parse_spec
from tests.conftest import ClientFactory
from tests.helpers import JSON, assert_error

pytestmark = pytest.mark.workers  # worker processes or subprocesses

# (devices, mesh shape, axis names, array shape, from, to)
RESHARDS = [
    ("cpu:8", (2, 4), ("x", "y"), (16, 16), "P('x', None)", "P(None, 'y')"),
    ("cpu:8", (2, 4), ("x", "y"), (16, 16), "P('x', 'y')", "P()"),
    ("cpu:8", (2, 4), ("x", "y"), (16, 16), "P('x', 'y')", "P('y', 'x')"),
    ("cpu:8", (8,), ("x",), (16, 16), "P('x', None)", "P(None, 'x')"),
    ("tpu:v5e:2x4", (2, 4), ("x", "y"), (16, 32), "P(('x', 'y'), None)", "P(None, ('x', 'y'))"),
    ("tpu:v5e:2x4", (2, 4), ("x", "y"), (16, 32), "P('x', 'y')", "P('y', None)"),
]


def reshard_body(case: tuple[Any, ...], dtype: str = "float32") -> dict[str, Any]:
    devices, mesh, names, shape, source, target = case
    return {
        "devices": devices,
        "mesh": {"shape": list(mesh), "axis_names": list(names), "axis_types": ["auto"] * len(mesh)},
        "shape": list(shape),
        "dtype": dtype,
        "from": source,
        "to": target,
    }


@pytest.fixture(scope="module")
def client(make_client: ClientFactory) -> TestClient:
    # The kernel workers' budgets default to fractions of the RAM this process may use, which a memory cap on
    # the test run lowers (capmem 5G: 1.2 GiB a worker); the TPU reshard below is estimated at 2.6 GiB.
    budgets = [("max_worker_memory", 4 * 1024**3), ("max_kernel_memory", 8 * 1024**3)]
    return make_client(settings=Settings().with_values([("max_kernel_queue", 32), *budgets]))


def post(client: TestClient, path: str, body: Any) -> Any:
    return client.post(path, content=orjson.dumps(body), headers=JSON)


def direct(case: tuple[Any, ...]) -> list[tuple[str, list[list[int]], int]]:
    """The reshard compiled by this process: (op, groups as simulated device ids, bytes) per collective."""
    devices, mesh_shape, names, shape, source, target = case
    devset = parse_devices(devices)
    assert [d.id for d in devset.devices] == list(range(len(devset)))  # real device i stands for id i
    sim = build_mesh(devset, MeshSpec(tuple(mesh_shape), tuple(names), axis_types=("auto",) * len(names)))
    ids = np.vectorize(lambda d: d.id)(sim.devices)
    mesh = Mesh(np.array(jax.devices())[ids], tuple(names), axis_types=(AxisType.Auto,) * len(names))
    x = jax.device_put(jnp.zeros(shape, jnp.float32), NamedSharding(mesh, parse_spec(source)))
    compiled = jax.jit(lambda a: a, out_shardings=NamedSharding(mesh, parse_spec(target))).lower(x).compile()
    assignment = [int(d.id) for d in device_assignment(compiled)]
    got = read_collectives(compiled.as_text(), [assignment], ids.tolist(), names)
    return [(c["op"], c["groups"] or c["pairs"], c["bytes"]) for c in got]


@pytest.mark.parametrize("case", RESHARDS, ids=[f"{c[0]}-{c[4]}->{c[5]}" for c in RESHARDS])
def test_reshard_is_what_jax_compiles(client: TestClient, case: tuple[Any, ...]) -> None:
    r = post(client, "/api/reshard", reshard_body(case))
    assert r.status_code == 200, r.text
    data = r.json()
    want = direct(case)
    assert [(c["op"], c["groups"] or c["pairs"], c["bytes"]) for c in data["collectives"]] == want
    assert data["from"] == repr(parse_spec(case[4])) and data["to"] == repr(parse_spec(case[5]))
    assert data["max_abs_error"] == 0.0  # moved, never changed
    assert data["communication"]["count"] == len(want)
    assert data["communication"]["bytes"] == sum(b for _, _, b in want)
    for c in data["collectives"]:
        est = c["estimate"]
        if case[0].startswith("cpu"):
            assert est == {"seconds": None, "why": NO_CPU_FIGURES}
        else:
            assert est["seconds"] > 0 and est["fabric"] == "ici" and est["formula"]
            assert est["inputs"]["hardware"] == "TPU v5e"
    if case[0].startswith("cpu"):
        assert data["roofline"]["why"] == NO_CPU_FIGURES and data["communication"]["seconds"] in (None, 0.0)
    else:
        # the headline is the TPU program's when libtpu compiled one, else the compiled program's
        headline = data["tpu"]["collectives"] if libtpu_available() else data["collectives"]
        total = sum(c["estimate"]["seconds"] * c["repeat"] for c in headline)
        assert data["communication"]["seconds"] == pytest.approx(total)
        assert data["roofline"]["communication_seconds"] == pytest.approx(total)
        assert data["roofline"]["hbm"]["fits"] is True


def test_reshard_refusals(client: TestClient) -> None:
    body = reshard_body(RESHARDS[0])
    assert_error(post(client, "/api/reshard", {**body, "to": "P('z')"}), 422, "unknown_axis")
    assert_error(post(client, "/api/reshard", {**body, "shape": [15, 16]}), 422, "indivisible")
    assert_error(post(client, "/api/reshard", {**body, "from": "P("}), 422, "parse_error")
    refused = post(client, "/api/reshard", {k: v for k, v in body.items() if k != "from"})
    assert_error(refused, 422, "validation_error")


@pytest.mark.tpu
@pytest.mark.skipif(not libtpu_available(), reason="needs the tpu extra (libtpu)")
def test_reshard_on_libtpu_carries_estimates_and_a_tpu_roofline(client: TestClient) -> None:
    r = post(client, "/api/reshard", reshard_body(RESHARDS[4], "bfloat16"))
    assert r.status_code == 200, r.text
    data = r.json()
    tpu = data["tpu"]
    assert tpu["topology"] == "v5e:2x4" and tpu["collectives"]
    for c in tpu["collectives"]:
        assert c["estimate"]["seconds"] > 0 and c["estimate"]["fabric"] == "ici"
        assert c["estimate"]["expected_seconds"] > c["estimate"]["seconds"]
    assert data["communication"]["seconds"] == pytest.approx(sum(c["estimate"]["seconds"] for c in tpu["collectives"]))
    assert data["communication"]["program"] == "TPU compile-only (v5e:2x4)"
    assert tpu.get("roofline") is None  # one roofline per result: the TPU compile's, as the headline
    roof = data["roofline"]
    assert roof["source"].startswith("the TPU compile") and roof["hardware"] == "TPU v5e"
    assert roof["dtype"] == "bfloat16" and roof["hbm"]["fits"] is True
    assert roof["lower_bound_seconds"] >= roof["communication_seconds"] > 0


@pytest.mark.tpu
@pytest.mark.skipif(not libtpu_available(), reason="needs the tpu extra (libtpu)")
def test_reshard_headline_is_the_tpu_program(client: TestClient) -> None:
    """Regression (issue 19): tpu:v5e:4x4, bf16[4096, 4096], P('x','y') → P() showed "2 collectives, 80 MiB,
    1.40 ms" (the CPU program on TPU figures); the TPU program is one all-gather, and a corner chip of the
    4x4 (no wraparound: two links) must receive 15/16 of the 32 MiB: (15/16) · 32 MiB / (2 · 4.5e10)."""
    body = reshard_body(("tpu:v5e:4x4", (4, 4), ("x", "y"), (4096, 4096), "P('x', 'y')", "P()"), "bfloat16")
    r = post(client, "/api/reshard", body)
    assert r.status_code == 200, r.text
    data = r.json()
    c = data["communication"]
    assert c["count"] == 1 and c["bytes"] == 4096 * 4096 * 2 and c["program"].startswith("TPU compile-only")
    assert c["seconds"] == pytest.approx((15 / 16) * 4096 * 4096 * 2 / (2 * 4.5e10))
    assert [x["op"] for x in data["tpu"]["collectives"]] == ["all-gather"]
    assert data["roofline"]["communication_seconds"] == pytest.approx(c["seconds"])


def test_kernel_results_carry_estimates_and_rooflines(client: TestClient) -> None:
    body = {"kernel": "matmul_xxt", "devices": "tpu:v5p:2x2x2", "mesh": {"shape": [2, 4], "axis_names": ["x", "y"],
            "axis_types": ["auto", "auto"]}}  # fmt: skip
    r = post(client, "/api/kernels/run", body)
    assert r.status_code == 200, r.text
    result = r.json()
    assert result["collectives"]
    for c in result["collectives"]:
        assert c["estimate"]["seconds"] is not None and c["estimate"]["fabric"] == "ici"
    roof = result["roofline"]
    assert roof["hardware"] == "TPU v5p" and roof["bound"] in ("compute", "memory", "communication")
    assert roof["lower_bound_seconds"] == max(
        v for v in (roof["compute_seconds"], roof["memory_seconds"], roof["communication_seconds"]) if v is not None
    )
    if libtpu_available():
        tpu = result["tpu"]
        assert all(c["estimate"]["seconds"] is not None for c in tpu["collectives"])
        assert roof["source"].startswith("the TPU compile") and tpu["roofline"] is None
    cpu = post(client, "/api/kernels/run", {**body, "devices": "cpu:8"}).json()
    assert all(c["estimate"] == {"seconds": None, "why": NO_CPU_FIGURES} for c in cpu["collectives"])
    assert cpu["roofline"]["why"] == NO_CPU_FIGURES and cpu["roofline"]["bound"] is None


def test_gpu_sets_estimate_nvlink_and_the_network(client: TestClient) -> None:
    body = {"kernel": "psum_sum", "devices": "gpu:h100:2x4", "mesh": {"shape": [2, 4], "axis_names": ["x", "y"]}}
    r = post(client, "/api/kernels/run", body)
    assert r.status_code == 200, r.text
    fabrics = {c["estimate"]["fabric"] for c in r.json()["collectives"]}
    assert fabrics <= {"nvlink", "network"} and fabrics
    assert r.json()["roofline"]["hardware"] == "NVIDIA H100 SXM 80GB"


def test_gpu_estimates_use_the_programs_bf16_bytes(client: TestClient) -> None:
    """Regression (issue 19): GPU estimates took the CPU program's bytes, where XLA's CPU compiler widens bf16
    reductions to f32: 2× too high."""
    # x @ x.T with x's contracting dimension on y: partial products all-reduced (bf16 on a GPU or TPU; JAX's own
    # sums of bf16 accumulate in f32 and are left alone)
    mesh = {"shape": [2, 4], "axis_names": ["x", "y"], "axis_types": ["auto", "auto"]}
    inputs = [{"shape": [16, 256], "spec": "P('x', 'y')", "dtype": "bfloat16"}]
    body = {"kernel": "matmul_xxt", "devices": "gpu:h100:1x8", "mesh": mesh, "inputs": inputs}
    r = post(client, "/api/kernels/run", body)
    assert r.status_code == 200, r.text
    reductions = [c for c in r.json()["collectives"] if c["op"] in ("all-reduce", "reduce-scatter")]
    assert reductions
    for c in reductions:
        assert c["shape"].startswith("f32") and c["widened"] == {"dtype": "bf16", "bytes": c["bytes"] // 2}
        assert c["estimate"]["inputs"]["bytes"] == c["bytes"] // 2


@pytest.mark.tpu
@pytest.mark.skipif(not libtpu_available(), reason="needs the tpu extra (libtpu)")
def test_multislice_dcn_steps_are_libtpus_with_dcn_estimates(client: TestClient) -> None:
    body = {"kernel": "psum_sum", "devices": "tpu:v5e:2x2", "slices": 2,
            "mesh": {"shape": [2, 4], "axis_names": ["x", "y"], "order": "hybrid", "dcn_shape": [2, 1]}}  # fmt: skip
    r = post(client, "/api/kernels/run", body)
    assert r.status_code == 200, r.text
    result = r.json()
    steps = result["tpu"]["dcn"]
    assert steps and all(s["estimate"]["fabric"] == "dcn" and s["estimate"]["seconds"] > 0 for s in steps)
    assert all(s["transfer_type"] and s["target"] and s["groups"] for s in steps)  # libtpu's own, with devices
    assert steps[0]["estimate"]["formula"].startswith("across S = 2 slices (DCN")
    inputs = steps[0]["estimate"]["inputs"]
    assert inputs["network_bandwidth"] == TPU_FIGURES["v5e"].dcn_bandwidth.value
    assert inputs["dcn_step_latency"] > 0 and steps[0]["estimate"]["seconds"] >= inputs["dcn_step_latency"]


def test_compare_two_reshards(client: TestClient) -> None:
    a = reshard_body(RESHARDS[4])
    b = {**a, "to": a["from"]}  # where it already is: nothing moves
    r = post(client, "/api/compare", {"a": {"reshard": a}, "b": {"reshard": b, "label": "stay"}})
    assert r.status_code == 200, r.text
    data = r.json()
    assert data["b"]["label"] == "stay" and data["a"]["label"] == "A"
    assert data["b"]["communication"]["count"] == 0 and data["a"]["communication"]["count"] > 0
    assert data["verdict"]["cheaper"] == "b"
    assert [row["b"] for row in data["collectives"]] == [None] * len(data["collectives"])
    assert "estimate" in data["note"].lower() or "Estimates" in data["note"]


def test_compare_a_kernel_run_with_a_reshard_and_snapshots(client: TestClient) -> None:
    kernel = {"kernel": "sum_axis0", "devices": "tpu:v5e:2x4", "mesh": {"shape": [2, 4], "axis_names": ["x", "y"],
              "axis_types": ["auto", "auto"]}}  # fmt: skip
    r = post(client, "/api/compare", {"a": {"kernel": kernel}, "b": {"reshard": reshard_body(RESHARDS[5])}})
    assert r.status_code == 200, r.text
    assert r.json()["verdict"]["by"] == "lower bound on run time"
    snap = capture({"x": jax.device_put(jnp.ones((8, 8)), NamedSharding(jax.make_mesh((8,), ("d",)),
                                                                          parse_spec("P('d')")))})  # fmt: skip
    created = post(client, "/api/snapshots", snap)
    assert created.status_code == 201, created.text
    ref = {"snapshot": created.json()["id"]}
    s = post(client, "/api/compare", {"a": {"snapshot": ref}, "b": {"snapshot": ref}})
    assert s.status_code == 200, s.text
    assert s.json()["verdict"]["cheaper"] is None and s.json()["a"]["roofline"] is None
    assert_error(post(client, "/api/compare", {"a": {"snapshot": {"snapshot": "A" * 22}}, "b": {"kernel": kernel}}),
                 404, "not_found")  # fmt: skip
    assert_error(post(client, "/api/compare", {"a": {"kernel": kernel, "snapshot": ref}, "b": {"kernel": kernel}}),
                 422, "bad_compare")  # fmt: skip


def test_nccl_fit_route(client: TestClient) -> None:
    from tests.test_cost_measured import model_rows, nccl_output

    r = post(client, "/api/cost/nccl-fit", {"text": nccl_output(model_rows(0.7, 5e-6))})
    assert r.status_code == 200, r.text
    fit = r.json()
    assert fit["fabric"] == "nvlink" and fit["profile"]["efficiency"] == pytest.approx(0.7, abs=0.006)
    assert len(fit["rows"]) == 7 and fit["errors"]["refit"]["worst_abs"] < 0.02


def test_hardware_table_route(client: TestClient) -> None:
    table = client.get("/api/hardware").json()
    v5e = next(t for t in table["tpu"] if t["name"] == "v5e")
    assert v5e["peak"]["bf16"]["value"] == TPU_FIGURES["v5e"].peak["bf16"].value
    assert v5e["ici_link_bandwidth"]["url"] == SOURCES["book-tpus"].url
    assert {g["name"] for g in table["gpu"]} >= {"h100", "a100", "b200"}


def test_inspect_jit_collectives_carry_estimates_and_loop_facts() -> None:
    mesh = jax.make_mesh((8,), ("d",))
    x = jax.device_put(jnp.ones((16, 4)), NamedSharding(mesh, parse_spec("P('d')")))
    snap = inspect_jit(lambda a: a.sum(axis=0), x)
    assert snap["collectives"]
    assert all(c["estimate"] == {"seconds": None, "why": NO_CPU_FIGURES} for c in snap["collectives"])
    assert all(c["repeat"] == 1 for c in snap["collectives"])

    def scan5(a: jax.Array) -> jax.Array:  # the carry enters the sum: XLA cannot hoist it out of the loop
        return jax.lax.scan(lambda c, _: ((a * c).sum(axis=0), None), jnp.ones(4), None, length=5)[0]

    looped = inspect_jit(scan5, x)
    assert [c["repeat"] for c in looped["collectives"]] == [5]
    assert [loop["trip_count"] for loop in looped["jit"]["loops"]] == [5]


def tpu_snapshot(stored_estimate: dict[str, Any] | None) -> dict[str, Any]:
    """An inspect_jit snapshot made on this process's 8 CPU devices, presented as a TPU v5e 2x4's (the devices
    table as JAX reports that slice), its collectives carrying ``stored_estimate`` as an older server froze it."""
    mesh = jax.make_mesh((8,), ("d",))
    x = jax.device_put(jnp.ones((16, 4)), NamedSharding(mesh, parse_spec("P('d')")))
    snap = inspect_jit(lambda a: a.sum(axis=0), x)
    v5e = parse_devices("tpu:v5e:2x4")
    by_id = {d.id: d for d in v5e.devices}
    snap["platform"], snap["device_kind"] = "tpu", "TPU v5 lite"
    snap["devices"]["coords"] = [list(by_id[i].coords) for i in snap["devices"]["id"]]
    for c in snap["collectives"]:
        if stored_estimate is None:
            c.pop("estimate", None)
        else:
            c["estimate"] = stored_estimate
    return snap


OLD_ESTIMATE = {"seconds": 42.0, "formula": "an old formula", "inputs": {}, "fabric": "ici"}


@pytest.mark.parametrize("stored", [None, OLD_ESTIMATE], ids=["before-estimates", "old-figures"])
def test_stored_snapshots_get_todays_estimates_when_read(client: TestClient, stored: dict[str, Any] | None) -> None:
    snap = tpu_snapshot(stored)
    created = post(client, "/api/snapshots", snap)
    assert created.status_code == 201, created.text
    got = client.get(f"/api/snapshots/{created.json()['id']}").json()
    assert got["collectives"]
    for c in got["collectives"]:
        est = c["estimate"]
        assert est["seconds"] != 42.0 and est["expected_seconds"] > est["seconds"] > 0 and est["fabric"] == "ici"
        assert est["inputs"]["hardware"] == "TPU v5e"
    stored_bytes = client.app.state.store.get("snapshots", created.json()["id"])  # type: ignore[attr-defined]
    assert b'"estimate"' not in stored_bytes  # facts only: figures are added as it is read
