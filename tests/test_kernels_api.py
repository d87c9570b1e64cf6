"""The kernel lab through the in-process client, checked against JAX running the same kernels here.

Every catalog kernel runs on several meshes (make_mesh and iota orders, a v3 tray whose ring order
puts device ids out of mesh order, 4 and 8 devices, Auto and Explicit axes) in the server's worker
processes; this test process runs the same kernel function directly on its own 8 CPU devices,
placed at the same mesh positions, and the two must agree: output specs and ``jax.typeof``, the
collective kinds in JAX's compiled HLO, and a refusal when JAX refuses. Output layouts must be
exactly what ``POST /api/layout`` says for that spec.
"""

from __future__ import annotations

import math
import re
import sys
from pathlib import Path
from typing import Any

import jax
import numpy as np
import orjson
import pytest
from fastapi.testclient import TestClient
from jax.sharding import AxisType, Mesh, NamedSharding

from server.app import kernel_worker_pool
from server.pool import Job, WorkerPool
from server.settings import Settings
from sharding_core.devices import parse_devices
from sharding_core.kernels import catalog, runner
from sharding_core.kernels.catalog import KernelContext
from sharding_core.kernels.memory import resident_bytes
from sharding_core.kernels.plan import MAX_KERNEL_DEVICES, MAX_KERNEL_ELEMENTS, RunInput, plan_run
from sharding_core.mesh import MeshSpec, build_mesh
from sharding_core.spec import parse_spec
from tests.conftest import ClientFactory
from tests.helpers import JSON, submit_all, wait_job

pytestmark = pytest.mark.workers  # worker processes or subprocesses

# Mesh variants per default mesh: (devices, shape, order, axis type).
VARIANTS: dict[tuple[int, ...], list[tuple[str, tuple[int, ...], str, str]]] = {
    (2, 4): [
        ("cpu:8", (2, 4), "make_mesh", "auto"),
        ("cpu:8", (4, 2), "iota", "auto"),
        ("tpu:v3:2x2", (2, 4), "make_mesh", "auto"),
        ("cpu:8", (2, 4), "make_mesh", "explicit"),
    ],
    (8,): [
        ("cpu:8", (8,), "make_mesh", "auto"),
        ("tpu:v3:2x2", (8,), "make_mesh", "auto"),
        ("cpu:4", (4,), "make_mesh", "auto"),
        ("cpu:8", (8,), "make_mesh", "explicit"),
    ],
}
SMALL_FLAX = 64  # the guide's 1024-wide MLP, narrowed so the test stays fast


def inputs_for(kernel: catalog.Kernel) -> list[dict[str, Any]]:
    out = []
    for i in kernel.inputs:
        shape = list(i.shape)
        if kernel.requires == "flax":
            shape[-1] = SMALL_FLAX
        out.append({"shape": shape, "spec": i.spec, "dtype": i.dtype})
    return out


def params_for(kernel: catalog.Kernel) -> dict[str, str] | None:
    return {"depth": str(SMALL_FLAX)} if any(p.name == "depth" for p in kernel.params) else None


CASES: list[tuple[str, int]] = [
    (k.name, v) for k in catalog.BUILTIN for v in range(len(VARIANTS[(8,) if len(k.mesh_shape) == 1 else (2, 4)]))
]
CASES = [(name, v) for name, v in CASES if not (catalog.get_kernel(name).requires and v == 2)]  # type: ignore[union-attr]


def case_body(name: str, variant: int) -> dict[str, Any]:
    kernel = catalog.get_kernel(name)
    assert kernel is not None
    devices, shape, order, types = VARIANTS[(8,) if len(kernel.mesh_shape) == 1 else (2, 4)][variant]
    body: dict[str, Any] = {
        "kernel": name,
        "devices": devices,
        "mesh": {"shape": list(shape), "axis_names": list(kernel.axis_names), "order": order,
                 "axis_types": [types] * len(shape)},
        "inputs": inputs_for(kernel),
    }  # fmt: skip
    params = params_for(kernel)
    if params:
        body["params"] = params
    return body


@pytest.fixture(scope="module")
def client(make_client: ClientFactory) -> TestClient:
    return make_client(settings=Settings().with_values([("max_kernel_queue", len(CASES) + 8)]))


@pytest.fixture(scope="module")
def jobs(client: TestClient) -> dict[tuple[str, int], str]:
    return submit_all(client, {(name, variant): case_body(name, variant) for name, variant in CASES})


def kinds(hlo_text: str) -> list[str]:
    ops = "all-reduce|all-gather|reduce-scatter|all-to-all|collective-permute"
    return sorted(m.group(1) for m in re.finditer(rf"= (?:\([^)]*\)|\S+) ({ops})(?:-start)?\(", hlo_text))


def direct(body: dict[str, Any]) -> tuple[list[tuple[str, str]], list[str]] | Exception:
    """The kernel run by this test process on its own devices: (spec, typeof) per output, collective kinds."""
    kernel = catalog.get_kernel(body["kernel"])
    assert kernel is not None
    m = body["mesh"]
    devset = parse_devices(body["devices"])
    # These sets list their devices in id order, so real CPU device i stands for simulated device i.
    assert [d.id for d in devset.devices] == list(range(len(devset)))
    sim = build_mesh(devset, MeshSpec(tuple(m["shape"]), tuple(m["axis_names"]), order=m["order"]))
    ids = np.vectorize(lambda d: d.id)(sim.devices)
    types = tuple(AxisType[t.capitalize()] for t in m["axis_types"])
    mesh = Mesh(np.array(jax.devices())[ids], tuple(m["axis_names"]), axis_types=types)
    specs = tuple(parse_spec(i["spec"]) for i in body["inputs"])
    params: dict[str, Any] = {}
    for p in kernel.params:
        value = (body.get("params") or {}).get(p.name, p.default)
        params[p.name] = parse_spec(value) if p.kind == "spec" else int(value) if p.kind == "int" else value
    ctx = KernelContext(mesh, specs, tuple(tuple(i["shape"]) for i in body["inputs"]), None, params)
    rng = np.random.default_rng(0)
    try:
        with jax.set_mesh(mesh):
            built = kernel.build(ctx)
            args = [
                jax.device_put(rng.standard_normal(i["shape"]).astype(i["dtype"]), NamedSharding(mesh, s))
                for i, s in zip(body["inputs"], specs, strict=True)
            ]
            jitted = jax.jit(built.fn)
            out = jitted(*args, *built.extra_args)
            text = jitted.lower(*args, *built.extra_args).compile().as_text()
    except Exception as e:
        return e
    return [(repr(leaf.sharding.spec), str(jax.typeof(leaf))) for leaf in jax.tree.leaves(out)], kinds(text)


@pytest.mark.parametrize(("name", "variant"), CASES)
def test_kernel_runs_as_jax_runs_it(
    client: TestClient, jobs: dict[tuple[str, int], str], name: str, variant: int
) -> None:
    body = case_body(name, variant)
    want = direct(body)
    job = wait_job(client, jobs[(name, variant)])
    if isinstance(want, Exception):
        # JAX refuses it here too: the API says so with JAX's words and a hint.
        assert job["state"] == "error", job
        failure = job["failure"]
        assert failure["code"] == "kernel_error"
        assert str(want).split("\n")[0][:60] in failure["message"]
        assert failure.get("hint"), failure
        return
    assert job["state"] == "done", job["failure"]
    result = job["result"]
    specs, collective_kinds = want
    assert [(o["spec"], o["typeof"]) for o in result["outputs"]] == specs
    assert sorted(c["op"] for c in result["collectives"]) == collective_kinds
    mesh_ids = set(np.asarray(result["mesh"]["device_ids"]).reshape(-1).tolist())
    for c in result["collectives"]:
        assert {d for g in c["groups"] for d in g} <= mesh_ids
    # no absolute path of the server's files in what a client sees (HLO metadata names source files)
    root = str(Path(__file__).resolve().parents[1])
    assert root not in result["hlo"] and root not in result["stablehlo"] and sys.prefix not in result["hlo"]
    tolerance = 1e-3 if catalog.get_kernel(name).requires else 1e-4  # type: ignore[union-attr]
    for out in result["outputs"]:
        assert out["max_abs_error"] is not None and out["max_abs_error"] <= tolerance, out["name"]
        layout = client.post(
            "/api/layout",
            content=orjson.dumps({"devices": body["devices"], "mesh": body["mesh"], "spec": out["spec"],
                                  "shape": out["shape"], "dtype": out["dtype"]}),
            headers=JSON,
        ).json()  # fmt: skip
        assert out["shards"] == layout["shards"] and out["tiles"] == layout["tiles"]
    assert result["program"]["origins"] is not None and result["stablehlo"].startswith("module @")
    assert "sdy.sharding" in result["stablehlo"] or body["mesh"]["shape"] == [1]


# ------------------------------------------------------------------------------- the catalog


def test_catalog_lists_every_kernel_with_its_source_and_defaults(client: TestClient) -> None:
    r = client.get("/api/kernels")
    assert r.status_code == 200
    data = r.json()
    names = [k["name"] for k in data["kernels"]]
    assert names == [k.name for k in catalog.BUILTIN]
    for k in data["kernels"]:
        assert k["doc"] and "def " in k["source"] and k["inputs"] is not None
        assert k["available"] is True  # the flax extra is installed for the tests
    assert data["limits"]["max_kernel_devices"] == MAX_KERNEL_DEVICES == 2048


def run(client: TestClient, body: dict[str, Any]) -> Any:
    return client.post("/api/kernels/run", content=orjson.dumps(body), headers=JSON)


def error(response: Any, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    err: dict[str, Any] = response.json()["error"]
    assert err["code"] == code, err
    return err


def body(**overrides: Any) -> dict[str, Any]:
    mesh = {"shape": [2, 4], "axis_names": ["x", "y"], "axis_types": ["auto", "auto"]}
    b: dict[str, Any] = {"kernel": "sum_axis0", "devices": "cpu:8", "mesh": mesh}
    b.update(overrides)
    return b


def test_a_repeated_run_comes_from_the_cache(client: TestClient) -> None:
    b = body(inputs=[{"shape": [16, 8], "spec": "P('x', 'y')", "dtype": "float32"}])
    first = run(client, b)
    second = run(client, b)
    assert first.status_code == second.status_code == 200
    one, two = first.json(), second.json()
    assert one.pop("cached") is False and two.pop("cached") is True
    assert one == two


def test_the_intros_psum_of_arange_32_shows_its_value(client: TestClient) -> None:
    # Regression (issue 21): the kernel lab never showed an output's values. JAX's parallelism intro:
    # shard_map(f, mesh=Mesh(jax.devices(), 'x'), in_specs=P('x'), out_specs=P()) with
    # f = psum(x.sum(), 'x') on x = jnp.arange(32); JAX here runs the same cell.
    mesh = jax.sharding.Mesh(np.array(jax.devices()), ("x",))
    spec = jax.sharding.PartitionSpec

    def f(x: jax.Array) -> jax.Array:
        return jax.lax.psum(x.sum(), "x")

    want = jax.shard_map(f, mesh=mesh, in_specs=spec("x"), out_specs=spec())(jax.numpy.arange(32))
    r = run(client, body(kernel="psum_sum", mesh={"shape": [8], "axis_names": ["x"], "axis_types": ["auto"]},
                         inputs=[{"shape": [32], "spec": "P('x')", "dtype": "int32"}], data="arange"))  # fmt: skip
    assert r.status_code == 200, r.text
    out = r.json()["outputs"][0]
    assert out["values"] == {"flat": [int(want)], "size": 1} and int(want) == 496
    assert out["max_abs_error"] == 0.0 and out["max_abs_reference"] == 496.0


def test_outputs_carry_their_first_values_and_the_scale_of_their_error(client: TestClient) -> None:
    # The intro's f_contract: arange(32.0).reshape(4, 8) with P('x', 'y') on a TPU v2-8, summed along axis 0.
    x = np.arange(32.0, dtype=np.float32).reshape(4, 8)
    inputs = [{"shape": [4, 8], "spec": "P('x', 'y')", "dtype": "float32"}]
    r = run(client, body(devices="tpu:v2:2x2", inputs=inputs, data="arange"))
    assert r.status_code == 200, r.text
    out = r.json()["outputs"][0]
    assert out["values"] == {"flat": x.sum(axis=0).tolist(), "size": 8}
    assert out["max_abs_reference"] == float(np.abs(x.sum(axis=0)).max())
    # seeded random values by default: no two runs of another data differ, and the values are not arange's
    random = run(client, body(devices="tpu:v2:2x2", inputs=inputs)).json()["outputs"][0]
    assert random["values"]["size"] == 8 and random["values"]["flat"] != out["values"]["flat"]
    big = run(client, body(inputs=[{"shape": [8, 128], "spec": "P('x', 'y')", "dtype": "float32"}], data="arange"))
    values = big.json()["outputs"][0]["values"]
    want = np.arange(8 * 128, dtype=np.float32).reshape(8, 128).sum(axis=0)
    assert values["size"] == 128 and values["flat"] == want[:64].tolist()  # the first 64, row-major
    error(run(client, body(data="zeros")), 422, "validation_error")


def test_local_devices_run_on_this_process_devices(client: TestClient) -> None:
    r = run(client, body(devices="local"))
    assert r.status_code == 200, r.text
    assert r.json()["devices_key"] == "local" and r.json()["mesh"]["device_ids"] == [[0, 1, 2, 3], [4, 5, 6, 7]]


@pytest.mark.parametrize(
    ("overrides", "code"),
    [
        ({"kernel": "no_such_kernel"}, "unknown_kernel"),
        ({"inputs": []}, "bad_inputs"),
        ({"inputs": [{"shape": [7, 8], "spec": "P('x', 'y')"}]}, "indivisible"),
        ({"inputs": [{"shape": [8, 8], "spec": "P('q')"}]}, "unknown_axis"),
        ({"inputs": [{"shape": [8, 8], "spec": "P('x', 'y')", "dtype": "float64"}]}, "validation_error"),
        ({"out_specs": ["P('z')"]}, "unknown_axis"),
        ({"out_specs": ["P()", "P()"]}, "bad_inputs"),
        ({"params": {"nope": "1"}}, "bad_inputs"),
        ({"kernel": "flax_init", "params": {"depth": "0"}}, "bad_inputs"),
        ({"kernel": "flax_init", "params": {"data_axis": "batch"}}, "unknown_axis"),
        ({"kernel": "flax_init", "out_specs": ["P()"]}, "bad_inputs"),
        ({"mesh": {"shape": [2, 4], "axis_names": ["x", "y"], "axis_types": ["manual", "manual"]}}, "bad_mesh"),
        ({"devices": "cpu:2049", "mesh": {"shape": [2049], "axis_names": ["x"]}}, "too_large"),
        ({"inputs": [{"shape": [2**12, 2**12 + 8], "spec": "P('x', 'y')"}]}, "too_large"),
    ],
)
def test_bad_runs_are_explained_before_any_worker_runs(
    client: TestClient, overrides: dict[str, Any], code: str
) -> None:
    err = error(run(client, body(**overrides)), 422, code)
    assert err["message"]


def test_the_device_and_element_limits_at_the_limit_and_one_past() -> None:
    spec = MeshSpec((MAX_KERNEL_DEVICES,), ("x",))
    assert plan_run("elementwise", f"cpu:{MAX_KERNEL_DEVICES}", spec, [RunInput((2048,), "P('x')")]).job.size == 2048
    with pytest.raises(Exception, match="at most 2048"):
        plan_run("elementwise", "cpu:2049", MeshSpec((2049,), ("x",)), [RunInput((2049,), "P('x')")])
    mesh = MeshSpec((2, 4), ("x", "y"))
    at = [RunInput((MAX_KERNEL_ELEMENTS // 16, 16), "P('x', 'y')")]
    assert math.prod(plan_run("elementwise", "cpu:8", mesh, at).job.inputs[0].shape) == MAX_KERNEL_ELEMENTS
    past = [RunInput((8, 8), "P('x', 'y')"), RunInput((MAX_KERNEL_ELEMENTS - 63,), "P()")]
    with pytest.raises(Exception, match="max_kernel_elements"):
        plan_run("matmul_xw", "cpu:8", mesh, past)


def test_outputs_over_the_element_limit_are_refused_before_compiling() -> None:
    mesh = MeshSpec((2, 4), ("x", "y"), axis_types=("auto", "auto"))
    at = plan_run("matmul_xxt", "cpu:8", mesh, [RunInput((8, 1), "P()")], max_elements=64)
    assert runner.run_job(at.job)["outputs"][0]["shape"] == [8, 8]  # 64 elements: at the limit
    past = plan_run("matmul_xxt", "cpu:8", mesh, [RunInput((9, 1), "P()")], max_elements=64)
    with pytest.raises(runner.KernelRunError) as e:
        runner.run_job(past.job)
    assert e.value.code == "too_large" and "81 elements" in e.value.message


def test_a_compiled_run_reports_what_xlas_figures_say_it_needs(monkeypatch: pytest.MonkeyPatch) -> None:
    """With the running state the worker tells the pool the run's total by XLA's figures (its outputs and
    temporaries on every device besides the estimate's parts), which the server's budget then reserves."""
    mesh = MeshSpec((2, 4), ("x", "y"))
    plan = plan_run("elementwise", "cpu:8", mesh, [RunInput((512, 512), "P('x', 'y')")], max_bytes=8 * 1024**3)
    states: list[tuple[str, int | None]] = []
    read: list[int | None] = []  # what the process's resident memory read when the run was checked (this test's
    # process runs it: late in a full suite that is gigabytes, so the figure is checked against the reading)
    monkeypatch.setattr(runner, "resident_bytes", lambda: read.append(resident_bytes()) or read[-1])
    result = runner.run_job(plan.job, lambda state, needs: states.append((state, needs)))
    assert [state for state, _ in states] == ["compiling", "running"] and states[0][1] is None
    stats = result["program"]["memory"]
    program = (stats["output_size_in_bytes"] + stats["temp_size_in_bytes"] - stats["alias_size_in_bytes"]) * 8
    parts = dict(plan.job.estimate)
    without_worker = parts["inputs_on_host"] + parts["inputs_on_devices"] + program + parts["reference"]
    needs = states[1][1]
    assert needs is not None and program >= 512 * 512 * 4  # the output, on 8 devices, at least
    assert len(read) == 1 and read[0] is not None and read[0] > 50 * 1024**2  # JAX and XLA, loaded
    assert needs - without_worker == read[0]  # plus the worker's own resident memory then


def test_a_run_carries_values_findings_and_its_memory_timeline(client: TestClient) -> None:
    """The contract: plans, captures and kernel runs carry ``values``, ``findings`` and ``memory_timeline``. A CPU
    run's values are each intermediate's sharding, checked here against what JAX's own
    ``jax.debug.inspect_array_sharding`` reports inside the same function; the timeline's peak is XLA's."""
    mesh = jax.make_mesh((2, 4), ("x", "y"), axis_types=(AxisType.Auto, AxisType.Auto))
    seen: list[Any] = []

    def layer(x: jax.Array) -> jax.Array:
        y = x * 2.0
        jax.debug.inspect_array_sharding(y, callback=seen.append)
        return y

    x = jax.device_put(np.ones((512, 512), np.float32), NamedSharding(mesh, parse_spec("P('x', 'y')")))
    jax.jit(layer)(x)
    (jax_spec,) = {str(s.spec).replace("PartitionSpec", "P") for s in seen}
    plan = plan_run("elementwise", "cpu:8", MeshSpec((2, 4), ("x", "y")), [RunInput((512, 512), "P('x', 'y')")])
    result = runner.run_job(plan.job)
    muls = [v for v in result["values"] if v["op"] == "mul"]
    assert muls and {v["spec"] for v in muls} == {jax_spec} == {"P('x', 'y')"}
    assert result["memory_timeline"]["peak_bytes"] == result["program"]["memory"]["peak_memory_in_bytes"]
    assert result["findings"] == []
    r = client.post("/api/kernels/run", json={"kernel": "elementwise", "devices": "cpu:8",
                                              "mesh": {"shape": [2, 4], "axis_names": ["x", "y"]}})  # fmt: skip
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["values"] and body["findings"] == [] and body["memory_timeline"]["peak_bytes"] > 0


def test_long_hlo_text_is_cut_and_flagged() -> None:
    plan = plan_run("elementwise", "cpu:8", MeshSpec((2, 4), ("x", "y")), None)
    result = runner.run_job(plan.job, max_text_chars=100)
    assert result["stablehlo_truncated"] and len(result["stablehlo"]) == 100
    assert result["hlo_truncated"] and len(result["hlo"]) == 100


def test_explicit_axes_give_typeof_with_shardings_and_refusals_with_hints(client: TestClient) -> None:
    explicit = {"shape": [2, 4], "axis_names": ["x", "y"], "axis_types": ["explicit", "explicit"]}
    ok = run(client, body(mesh=explicit))
    assert ok.status_code == 200 and ok.json()["outputs"][0]["typeof"] == "float32[8@y]"
    err = error(run(client, body(kernel="sum_axis0_constraint", mesh=explicit)), 422, "kernel_error")
    assert "acts as an assert" in err["message"] and "reshard" in err["hint"]
    err = error(run(client, body(kernel="sum_axis0_reshard")), 422, "kernel_error")  # Auto axes
    assert "Explicit" in err["hint"]


# ---------------------------------------------------------------------------------------- jobs


def test_unknown_jobs_are_404(client: TestClient) -> None:
    error(client.get("/api/kernels/jobs/nope"), 404, "not_found")


def _finished(pool: WorkerPool, kernel: str, n: int, result: bytes = b'{"seeded":true}') -> Job:
    plan = plan_run(kernel, "cpu:8", MeshSpec((2, 4), ("x", "y")), [RunInput((8, 8 * n), "P('x', 'y')")])
    job = Job(f"seed-{kernel}-{n}", plan)
    pool.finish(job, result=result, cache=True)
    return job


def test_cache_entries_and_remembered_jobs_at_the_limit_and_one_past() -> None:
    # never started: every answer below is a cache hit
    pool = kernel_worker_pool(Settings().with_values([("max_kernel_cache_entries", 2), ("max_kernel_jobs", 2)]))
    seeded = [_finished(pool, "elementwise", n) for n in (1, 2)]
    assert pool.cache_info()["entries"] == 2 and pool.cache_info()["limit"] == 2
    assert all(pool.submit(j.task).cached for j in seeded)  # both still cached at the limit
    hits = [pool.submit(seeded[0].task) for _ in range(2)]
    assert all(pool.get(h.id) is h for h in hits)  # two remembered jobs: at the limit
    third = pool.submit(seeded[1].task)
    assert pool.get(hits[0].id) is None and pool.get(third.id) is third  # one past: the oldest goes
    _finished(pool, "elementwise", 3)
    assert pool.cache_info()["entries"] == 2 and pool.cache_info()["limit"] == 2
    assert not pool.cached(seeded[0].key) and pool.cached(seeded[1].key)
    pool.close()


def _body(size: int) -> bytes:
    body = b'{"r":"' + b"x" * (size - 8) + b'"}'
    assert len(body) == size
    return body


def test_results_held_at_the_byte_budget_and_one_past() -> None:
    budget = 65536  # the setting's minimum
    limits = [("max_kernel_result_bytes", budget), ("max_kernel_cache_entries", 100), ("max_kernel_jobs", 100)]
    pool = kernel_worker_pool(Settings().with_values(limits))
    half = budget // 2
    a, b = (_finished(pool, "elementwise", n, _body(half)) for n in (1, 2))
    assert pool.cache_info()["bytes"] == budget and pool.cached(a.key) and pool.cached(b.key)  # at the budget
    c = _finished(pool, "elementwise", 3, _body(half))  # one result past it: the least recently used goes
    assert pool.cache_info()["bytes"] == budget and not pool.cached(a.key) and pool.cached(c.key)
    # finished jobs (here cache hits) are held to the same budget, oldest first
    hb, hc = pool.submit(b.task), pool.submit(c.task)
    assert pool.cache_info()["job_bytes"] == budget and pool.get(hb.id) is hb and pool.get(hc.id) is hc
    hb2 = pool.submit(b.task)
    assert pool.get(hb.id) is None and pool.get(hc.id) is hc and pool.get(hb2.id) is hb2
    assert pool.cache_info()["job_bytes"] == budget
    # a result of the whole budget is held alone; one larger is answered but never cached
    whole = _finished(pool, "elementwise", 4, _body(budget))
    assert pool.cached(whole.key) and pool.cache_info()["bytes"] == budget and not pool.cached(b.key)
    hw = pool.submit(whole.task)
    assert pool.get(hw.id) is hw and pool.get(hc.id) is None and pool.get(hb2.id) is None
    assert pool.cache_info()["job_bytes"] == budget
    over = _finished(pool, "elementwise", 5, _body(budget + 1))
    assert not pool.cached(over.key) and pool.cached(whole.key)
    pool.close()
