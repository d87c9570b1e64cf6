"""The service layer under the routers (issue 21): routers import services, never each other; the services
live on ``app.state``; a kernel run's refusal of one input names the input and the field, so the kernel
lab needs no extra requests to find which input failed (it re-POSTed /api/layout once per input before);
a compare's two runs are queued together or not at all (issue 20: a side kept running after the other got
429)."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from server.app import kernel_worker_pool
from server.pool import Busy, WorkerPool
from server.services.kernels import KernelRuns
from server.services.snapshots import SnapshotRepository
from server.settings import Settings
from sharding_core.kernels.plan import plan_run
from sharding_core.mesh import MeshSpec
from tests.conftest import ClientFactory
from tests.helpers import assert_error, post

ROOT = Path(__file__).resolve().parent.parent
ROUTERS = sorted((ROOT / "server" / "api").glob("*.py"))
NOT_ROUTERS = {"__init__", "deps", "schema"}
MESH = {"shape": [2, 4], "axis_names": ["x", "y"]}


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def test_no_router_imports_a_router() -> None:
    routers = {f"server.api.{p.stem}" for p in ROUTERS if p.stem not in NOT_ROUTERS}
    assert {"server.api.compare", "server.api.kernels", "server.api.snapshots"} <= routers
    for path in ROUTERS:
        others = imported_modules(path) & (routers - {f"server.api.{path.stem}"})
        assert not others, f"{path.name} imports the router(s) {sorted(others)}: import a service instead"


def test_services_import_no_router() -> None:
    routers = {f"server.api.{p.stem}" for p in ROUTERS if p.stem not in NOT_ROUTERS}
    for path in (ROOT / "server" / "services").glob("*.py"):
        assert not imported_modules(path) & routers, path.name


def test_the_services_live_on_app_state(client: TestClient) -> None:
    state = client.app.state  # type: ignore[attr-defined]
    assert isinstance(state.snapshots, SnapshotRepository) and state.snapshots.store is state.store
    assert isinstance(state.runs, KernelRuns) and state.runs.pool is state.kernels


def test_two_apps_keep_separate_snapshot_caches(make_client: ClientFactory) -> None:
    a = make_client().app.state.snapshots  # type: ignore[attr-defined]
    b = make_client().app.state.snapshots  # type: ignore[attr-defined]
    assert a.parsed is not b.parsed and a.merged is not b.merged
    assert a.gc is b.gc  # the cyclic collector is the process's: one pause counter for every app


# ---- a refused input is named, with its field -----------------------------------------------------------


def run_body(*inputs: dict[str, Any]) -> dict[str, Any]:
    return {"kernel": "matmul_xw", "devices": "cpu:8", "mesh": MESH, "inputs": list(inputs)}


A = {"shape": [8, 16], "spec": "P('x', 'y')", "dtype": "float32"}
B = {"shape": [16, 8], "spec": "P('y', None)", "dtype": "float32"}


@pytest.mark.parametrize(
    ("inputs", "index", "name", "field", "code"),
    [
        ((A, {**B, "spec": "P('y', 'z')"}), 1, "w", "spec", "unknown_axis"),
        (({**A, "spec": "P('x',"}, B), 0, "x", "spec", "parse_error"),
        (({**A, "spec": "P('x', 'x')"}, B), 0, "x", "spec", "duplicate_axis"),
        ((A, {**B, "spec": "P('y', None, None)"}), 1, "w", "spec", "rank_mismatch"),
        (({**A, "shape": [5, 16]}, B), 0, "x", "shape", "indivisible"),  # the shape, not the spec (issue 21)
        ((A, {**B, "dtype": "complex64"}), 1, "w", "dtype", "validation_error"),
    ],
)
def test_a_refused_input_is_named_with_its_field(
    client: TestClient, inputs: tuple[dict[str, Any], ...], index: int, name: str, field: str, code: str
) -> None:
    error = assert_error(post(client, "/api/kernels/run", run_body(*inputs)), 422, code)
    if code == "validation_error":  # the schema refuses an unknown dtype first, naming the field path
        assert error["errors"][0]["loc"] == ["body", "inputs", index, "dtype"]
        return
    assert (error["input"], error["input_name"], error["field"]) == (index, name, field)
    given = inputs[index]
    assert error["message"].startswith(
        f"input {name} ({given['spec']} on shape [{', '.join(map(str, given['shape']))}]): "
    )


def test_the_kernels_own_dtype_check_names_the_input() -> None:
    from sharding_core.errors import ShardingError
    from sharding_core.kernels.plan import RunInput

    with pytest.raises(ShardingError) as err:
        plan_run(
            "matmul_xw",
            "cpu:8",
            MeshSpec((2, 4), ("x", "y")),
            [RunInput((8, 16), "P()", "int4"), RunInput((16, 8), "P()")],
        )
    assert err.value.code == "bad_dtype"
    assert (err.value.details["input"], err.value.details["input_name"], err.value.details["field"]) == (
        0,
        "x",
        "dtype",
    )


def test_errors_about_the_mesh_name_no_input(client: TestClient) -> None:
    body = {**run_body(A, B), "mesh": {"shape": [3, 3], "axis_names": ["x", "y"]}}
    error = assert_error(post(client, "/api/kernels/run", body), 422, "bad_mesh")
    assert "input" not in error and "field" not in error


# ---- a compare's runs: both or neither -------------------------------------------------------------------


def plan(kernel: str, devices: int = 8) -> Any:
    return plan_run(kernel, f"cpu:{devices}", MeshSpec((2, devices // 2), ("x", "y")), None)


def test_submit_all_queues_every_run_or_none() -> None:
    # Never started: the jobs stay queued, so the queue is exactly what submit_all left in it.
    pool = WorkerPool(lambda *a: None, workers=1, queue=2)
    pool.warm = lambda: None  # type: ignore[method-assign]
    first = pool.submit(plan("elementwise"))
    with pytest.raises(Busy):
        pool.submit_all([plan("sum_axis0"), plan("psum_sum"), plan("reshard")])  # 3 new, room for 2
    assert [j.id for j in pool._queue] == [first.id]  # nothing of the refused compare was queued
    a, b = pool.submit_all([plan("sum_axis0"), plan("elementwise")])  # one new, one joined
    assert b is first and first.owners == 2 and [j.id for j in pool._queue] == [first.id, a.id]
    # a compare whose other side failed withdraws: its own queued run goes, a shared one stays
    assert pool.withdraw(a) and a.failure is not None and a.failure.code == "cancelled"
    assert not pool.withdraw(first) and list(pool._queue) == [first]
    pool.close()


def test_a_compare_refused_with_429_starts_neither_side(make_client: ClientFactory) -> None:
    pool = kernel_worker_pool(Settings().with_values([("max_kernel_workers", 1), ("max_kernel_queue", 0)]))
    pool.warm = lambda: None  # type: ignore[method-assign]  # never started: what is queued stays queued
    c = make_client(kernel_pool=pool)
    pool.submit(plan("elementwise", 4))  # the one slot is taken
    side = {"kernel": {"kernel": "sum_axis0", "devices": "cpu:8", "mesh": MESH}}
    other = {"reshard": {"devices": "cpu:8", "mesh": MESH, "shape": [8, 8], "from": "P('x')", "to": "P('y')"}}
    assert_error(post(c, "/api/compare", {"a": side, "b": other}), 429, "busy")
    assert len(pool._queue) == 1  # neither side was queued
