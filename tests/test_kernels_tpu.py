"""The kernel lab's TPU (compile-only) section, checked against JAX compiling the same kernels here.

With the optional ``tpu`` extra a ``tpu:`` set's kernel is also compiled, never run, for libtpu's
real topology (``jax.experimental.topologies.get_topology_desc``). This test compiles the same
kernel function for the same topology, with the same device ids at the same mesh positions, and the
collective kinds in JAX's own TPU HLO must be those the API reports.
"""

from __future__ import annotations

import os
import re
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import orjson
import pytest
from fastapi.testclient import TestClient
from jax.experimental import topologies
from jax.sharding import AxisType, Mesh, NamedSharding

import sharding_core
from server.settings import Settings
from sharding_core.devices import parse_devices
from sharding_core.kernels import catalog, runner
from sharding_core.kernels.catalog import KernelContext
from sharding_core.kernels.plan import plan_run
from sharding_core.mesh import MeshSpec, build_mesh
from sharding_core.program import targets
from sharding_core.spec import parse_spec
from tests.conftest import ClientFactory
from tests.helpers import JSON, submit_all, wait_job

pytestmark = [pytest.mark.tpu, pytest.mark.workers]

DEVICES = ("tpu:v5e:2x4", "tpu:v4:2x2x2")  # 8 chips; v4 is megacore (one device per chip)
KERNELS = ("sum_axis0", "matmul_xxt", "ppermute")  # jit (all-reduce; all-gather + all-reduce), shard_map
CASES = [(d, k) for d in DEVICES for k in KERNELS]


OPS = "all-reduce|all-gather|reduce-scatter|all-to-all|collective-permute"


def kinds(hlo_text: str) -> list[str]:
    """Collective kinds in HLO text, one per instruction (TPU shapes nest parentheses: ``T(4,128)``)."""
    found = (re.match(rf"\s*(?:ROOT )?%?[\w.-]+ = .* ({OPS})(?:-start)?\(", line) for line in hlo_text.splitlines())
    return sorted(m.group(1) for m in found if m)


def case_body(devices: str, name: str) -> dict[str, Any]:
    kernel = catalog.get_kernel(name)
    assert kernel is not None
    return {
        "kernel": name,
        "devices": devices,
        "mesh": {"shape": list(kernel.mesh_shape), "axis_names": list(kernel.axis_names),
                 "axis_types": ["auto"] * len(kernel.mesh_shape)},
    }  # fmt: skip


@pytest.fixture(scope="module")
def client(make_client: ClientFactory) -> TestClient:
    return make_client(settings=Settings().with_values([("max_kernel_queue", len(CASES) + 8)]))


@pytest.fixture(scope="module")
def jobs(client: TestClient) -> dict[tuple[str, str], str]:
    return submit_all(client, {(devices, name): case_body(devices, name) for devices, name in CASES})


def direct_tpu_hlo(body: dict[str, Any]) -> str:
    """The kernel compiled by this test for libtpu's topology, on the simulated mesh's device ids."""
    os.environ["TPU_SKIP_MDS_QUERY"] = "1"
    os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")  # the workers load libtpu too
    kernel = catalog.get_kernel(body["kernel"])
    assert kernel is not None
    devset = parse_devices(body["devices"])
    gen = devset.generation
    assert gen is not None and devset.topology is not None and devset.chips_per_host is not None
    devs = topologies.get_topology_desc(
        platform="tpu",
        topology_name=f"{gen.libtpu_name}:{'x'.join(map(str, devset.topology))}",
        chips_per_host_bounds=devset.chips_per_host,
        **({"chip_config_name": gen.chip_config} if gen.chip_config else {}),
    ).devices
    m = body["mesh"]
    sim = build_mesh(devset, MeshSpec(tuple(m["shape"]), tuple(m["axis_names"]), axis_types=tuple(m["axis_types"])))
    by_id = {d.id: d for d in devs}
    grid = np.vectorize(by_id.__getitem__, otypes=[object])(sim.device_ids)
    mesh = Mesh(grid, tuple(m["axis_names"]), axis_types=(AxisType.Auto,) * len(m["shape"]))
    specs = tuple(parse_spec(i.spec) for i in kernel.inputs)
    params = {p.name: parse_spec(p.default) if p.kind == "spec" else p.default for p in kernel.params}
    ctx = KernelContext(mesh, specs, tuple(i.shape for i in kernel.inputs), None, params)
    with jax.set_mesh(mesh):
        built = kernel.build(ctx)
        structs = [
            jax.ShapeDtypeStruct(i.shape, jnp.dtype(i.dtype), sharding=NamedSharding(mesh, s))
            for i, s in zip(kernel.inputs, specs, strict=True)
        ]
        return str(jax.jit(built.fn).lower(*structs).compile().as_text())


@pytest.mark.parametrize(("devices", "name"), CASES)
def test_tpu_sets_compile_for_libtpu_as_jax_does(
    client: TestClient, jobs: dict[tuple[str, str], str], devices: str, name: str
) -> None:
    body = case_body(devices, name)
    want = direct_tpu_hlo(body)
    job = wait_job(client, jobs[(devices, name)])
    assert job["state"] == "done", job["failure"]
    result = job["result"]
    tpu = result["tpu"]
    assert tpu.get("error") is None and tpu.get("skipped") is None, tpu
    # TPU HLO: layouts carry TPU tiling, e.g. f32[4,2]{1,0:T(4,128)}; CPU HLO has none.
    assert ":T(" in tpu["hlo"] and ":T(" in want and ":T(" not in result["hlo"]
    assert tpu["topology"] == devices.split(":", 1)[1]
    assert sorted(c["op"] for c in tpu["collectives"]) == kinds(want)
    assert kinds(want), "every case here has collectives"
    mesh_ids = set(np.asarray(result["mesh"]["device_ids"]).reshape(-1).tolist())
    assert sorted(tpu["program"]["device_assignment"]) == sorted(mesh_ids)
    for c in tpu["collectives"]:
        assert c["groups"] and {d for g in c["groups"] for d in g} <= mesh_ids
    assert tpu["program"]["timings"]["compile_seconds"] > 0 and tpu["program"]["memory"]["argument_size_in_bytes"] > 0


def test_non_tpu_sets_and_missing_libtpu_skip_the_tpu_compile(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    body = {"kernel": "sum_axis0", "devices": "cpu:8",
            "mesh": {"shape": [2, 4], "axis_names": ["x", "y"], "axis_types": ["auto", "auto"]}}  # fmt: skip
    r = client.post("/api/kernels/run", content=orjson.dumps(body), headers=JSON)
    assert r.status_code == 200, r.text
    assert set(r.json()["tpu"]) == {"skipped"} and "not a simulated tpu" in r.json()["tpu"]["skipped"]
    # Without libtpu a tpu: set runs on CPU as before and says why there is no TPU compile.
    monkeypatch.setattr(targets, "libtpu_available", lambda: False)
    plan = plan_run("sum_axis0", "tpu:v5e:2x4", MeshSpec((2, 4), ("x", "y"), axis_types=("auto", "auto")), None)
    result = runner.run_job(plan.job)
    assert result["tpu"] == {"skipped": "libtpu is not installed (the optional tpu extra: uv sync --extra tpu)"}
    assert [c["op"] for c in result["collectives"]] == ["all-reduce"]


MULTISLICE = MeshSpec((2, 4), ("x", "y"), axis_types=("auto", "auto"), order="hybrid", dcn_shape=(2, 1))


def jax_global_groups(kernel: str, job: Any) -> list[list[list[int]]]:
    """JAX's own groups for the kernel on this process's CPU devices at the job's mesh positions, in
    the job's simulated ids (``inspect_jit``, independent of the worker's run)."""
    real = jax.devices()
    grid = np.empty(job.size, dtype=object)
    grid[:] = [real[r] for r in job.positions]
    mesh = Mesh(grid.reshape(job.mesh_shape), job.axis_names, axis_types=(AxisType.Auto,) * len(job.mesh_shape))
    k = catalog.get_kernel(kernel)
    assert k is not None
    specs = tuple(parse_spec(i.spec) for i in job.inputs)
    ctx = KernelContext(mesh, specs, tuple(i.shape for i in job.inputs), None, {})
    structs = [jax.ShapeDtypeStruct(i.shape, jnp.float32, sharding=NamedSharding(mesh, s)) for i, s in
               zip(job.inputs, specs, strict=True)]  # fmt: skip
    with jax.set_mesh(mesh):
        snap = sharding_core.inspect_jit(k.build(ctx).fn, *structs)
    sim = {real[r].id: i for r, i in zip(job.positions, job.device_ids, strict=True)}
    return [[[sim[d] for d in g] for g in c["groups"]] for c in snap["collectives"]]


@pytest.mark.parametrize("kernel", ["psum_sum", "all_gather", "sum_axis0"])
def test_multislice_runs_name_every_slice_and_the_dcn_step(kernel: str) -> None:
    """2 x v5e 2x2: libtpu compiles one slice's program, so ICI collectives are listed in both slices;
    what crosses slices (the slice axis x) is the DCN step libtpu wrote (its megascale target names the
    devices at the same place in each slice: the mesh's columns), the same collective as JAX's global one."""
    plan = plan_run(kernel, "tpu:v5e:2x2", MULTISLICE, None, slices=2)
    result = runner.run_job(plan.job)
    tpu = result["tpu"]
    assert tpu.get("error") is None, tpu
    devset = parse_devices("tpu:v5e:2x2", slices=2)
    slices = [[d.id for d in devset.devices if d.slice_index == s] for s in (0, 1)]
    assert tpu["slices"] == 2 and sorted(tpu["program"]["device_assignment"]) == sorted(slices[0] + slices[1])
    for c in tpu["collectives"]:  # ICI: each group inside one slice, every slice's groups listed
        assert all(set(g) <= set(slices[0]) or set(g) <= set(slices[1]) for g in c["groups"]), c
        assert {d for g in c["groups"] for d in g} == set(slices[0] + slices[1]), c
    global_groups = [c["groups"] for c in result["collectives"]]
    assert global_groups == jax_global_groups(kernel, plan.job)
    (dcn,) = tpu["dcn"]
    assert dcn["fabric"] == "dcn" and dcn["target"] and dcn["op"] == result["collectives"][0]["op"]
    mesh = np.asarray(plan.job.id_grid)
    assert sorted(dcn["groups"]) == sorted(mesh.T.tolist())  # the mesh's columns: one device per slice
    assert "DCN" in tpu["dcn_note"] and "estimate" not in dcn  # facts from the worker; estimates when read
    if kernel == "psum_sum":  # the ICI part of the psum: the mesh's rows, one group per slice
        (ici,) = tpu["collectives"]
        assert ici["groups"] == mesh.tolist() and ici["axes"] == ["y"]
