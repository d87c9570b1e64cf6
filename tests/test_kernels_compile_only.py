"""The kernel lab's compile-only mode (issue 25): on a ``tpu:`` set a kernel (and "Reshard to…") is compiled for
libtpu's topology at its real size — no CPU execution, bounded by a compile-time budget (``max_compile_seconds``)
rather than ``max_kernel_elements`` — and the result says it was compiled, not run.

The oracles: JAX compiling the same program for the same libtpu topology in this process (its HLO read by the
planning tests' own reader, its ``memory_analysis``), and the layouts ``/api/layout`` gives.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import orjson
import pytest
from fastapi.testclient import TestClient
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from server.settings import Settings
from sharding_core.errors import ShardingError
from sharding_core.hlo.collectives import device_assignment
from sharding_core.kernels import runner
from sharding_core.kernels.plan import MAX_KERNEL_ELEMENTS, RunInput, plan_run
from sharding_core.kernels.reshard import plan_reshard
from sharding_core.mesh import MeshSpec
from sharding_core.program import targets
from sharding_core.program.targets import mesh
from tests.conftest import ClientFactory
from tests.helpers import JSON
from tests.test_planning import hlo_collectives, hlo_groups

pytestmark = pytest.mark.tpu

FFN = (4096, 14336)  # one Llama 3 8B FFN weight, bf16: 58.7 M elements, 3.5 times max_kernel_elements
V5P = "tpu:v5p:4x4x4"


@pytest.fixture(scope="module")
def client(make_client: ClientFactory) -> TestClient:
    return make_client()


def reshard_body(**extra: Any) -> dict[str, Any]:
    return {"devices": V5P, "mesh": {"shape": [16, 4], "axis_names": ["fsdp", "tp"]}, "shape": list(FFN),
            "dtype": "bfloat16", "from": "P('fsdp', 'tp')", "to": "P('fsdp', None)", **extra}  # fmt: skip


# ---- when a run is compile-only ----------------------------------------------------------------------------

MESH = MeshSpec((2, 4), ("x", "y"), axis_types=("auto", "auto"))
AT = [RunInput((MAX_KERNEL_ELEMENTS // 16, 16), "P('x', 'y')")]
PAST = [RunInput((MAX_KERNEL_ELEMENTS // 16 + 2, 16), "P('x', 'y')")]  # 32 elements past the limit


def test_a_tpu_run_past_the_element_limit_compiles_only_at_the_limit_and_one_past_it() -> None:
    at = plan_run("elementwise", "tpu:v5e:2x4", MESH, AT, max_compile_seconds=30)
    assert not at.job.compile_only and at.timeout is None  # at the limit: it runs on CPU, bounded as ever
    past = plan_run("elementwise", "tpu:v5e:2x4", MESH, PAST, max_compile_seconds=30)
    assert past.job.compile_only and past.timeout == (30, "max_compile_seconds")
    parts = dict(past.job.estimate)
    assert parts["inputs_on_host"] == parts["inputs_on_devices"] == parts["reference"] == 0  # nothing allocated
    # the same sizes, asked to run on CPU, or on a set with no compiler to compile for: too_large, as before
    with pytest.raises(ShardingError, match="max_kernel_elements") as e:
        plan_run("elementwise", "tpu:v5e:2x4", MESH, PAST, compile_only=False)
    assert "compile_only" in (e.value.hint or "")
    with pytest.raises(ShardingError, match="max_kernel_elements") as e:
        plan_run("elementwise", "cpu:8", MESH, PAST)
    assert "compile_only" not in (e.value.hint or "")


def test_a_compile_only_run_tells_the_pool_no_needs() -> None:
    """A compile-only run allocates nothing (its inputs stay abstract, nothing runs): it reports compiling only,
    with no bytes for the server's budget to reserve (main's worker protocol: needs come with "running")."""
    plan = plan_run("elementwise", "tpu:v5e:2x4", MESH, PAST, max_compile_seconds=60, max_bytes=8 * 1024**3)
    assert plan.job.compile_only
    states: list[tuple[str, int | None]] = []
    result = runner.run_job(plan.job, lambda state, needs: states.append((state, needs)))
    assert states == [("compiling", None)] and result["compile_only"] is True


def test_a_compile_only_run_carries_values_findings_and_its_memory_timeline() -> None:
    """The contract: plans, captures and kernel runs carry ``values``, ``findings`` and ``memory_timeline``. A
    compile-only run's are its TPU program's: each value's spec as the compiled output has it, the timeline's peak
    XLA's own peak_memory_in_bytes for the program libtpu compiled."""
    plan = plan_run("elementwise", "tpu:v5e:2x4", MESH, PAST, max_compile_seconds=60)
    result = runner.run_job(plan.job)
    assert result["compile_only"] is True
    (out,) = result["outputs"]
    muls = [v for v in result["values"] if v["op"] == "mul" and v["shape"] == out["shape"]]
    assert muls and all(v["spec"] == out["spec"] == "P('x', 'y')" for v in muls)
    assert result["memory_timeline"]["peak_bytes"] == result["program"]["memory"]["peak_memory_in_bytes"]
    assert result["findings"] == []  # an elementwise program wastes nothing


def test_a_tpu_run_past_the_budget_by_xlas_figures_compiles_only_instead_of_refusing() -> None:
    """Regression: the estimate counts no program, so a reshard whose gathered result fits the estimate could be
    refused after the CPU compile (XLA's figures past max_worker_memory) where a compile-only run would answer.
    Here the estimate (780 MiB) fits 1 GiB; XLA's program (128 MiB on each of 8 devices: the replicated result
    and its gather), the inputs and the reference come to 1.44 GiB before the worker's own memory."""
    move = ("tpu:v5e:2x4", MESH, (4096, 4096), "bfloat16", "P('x', 'y')", "P()")
    budget = 1024**3
    plan = plan_reshard(*move, max_bytes=budget)
    assert not plan.job.compile_only and plan.job.compile_only_fallback and plan.job.max_bytes == budget
    assert sum(dict(plan.job.estimate).values()) <= budget
    states: list[tuple[str, int | None]] = []
    result = runner.run_job(plan.job, lambda state, needs: states.append((state, needs)))
    assert states == [("compiling", None)]  # nothing ran or was allocated: no needs to reserve
    assert result["compile_only"] is True and "setting max_worker_memory" in result["executed_on"]
    assert result["program"] == result["tpu"]["program"] and result["outputs"][0]["spec"] == "P()"
    # asked to run on CPU, it is refused with XLA's figures, as before
    cpu = plan_reshard(*move, max_bytes=budget, compile_only=False)
    assert not cpu.job.compile_only_fallback
    with pytest.raises(runner.KernelRunError, match="setting max_worker_memory") as e:
        runner.run_job(cpu.job)
    assert e.value.code == "too_large"


def test_compile_only_needs_a_compiler_for_the_set(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ShardingError) as e:
        plan_run("elementwise", "cpu:8", MESH, None, compile_only=True)
    assert e.value.code == "unsupported" and "tpu: and gpu: sets" in e.value.message
    monkeypatch.setattr(targets, "libtpu_available", lambda: False)
    with pytest.raises(ShardingError) as e:
        plan_run("elementwise", "tpu:v5e:2x4", MESH, None, compile_only=True)
    assert e.value.code == "unavailable" and "libtpu is not installed" in e.value.message
    with pytest.raises(ShardingError, match="max_kernel_elements"):  # without libtpu the limit stands
        plan_run("elementwise", "tpu:v5e:2x4", MESH, PAST)


def test_the_compile_budget_setting_at_its_maximum_and_one_past() -> None:
    assert Settings().with_values([("max_compile_seconds", "3600")]).max_compile_seconds == 3600
    with pytest.raises(ShardingError, match="1 to 3600"):
        Settings().with_values([("max_compile_seconds", "3601")])


# ---- the Llama FFN weight on v5p 4x4x4 -----------------------------------------------------------------------


def test_a_llama_ffn_weight_reshards_on_v5p_compiled_not_run(client: TestClient) -> None:
    """Regression (issue 25): one Llama FFN weight (4096 x 14336 bf16) on a TPU set was 422 too_large against
    max_kernel_elements, and the CPU run executed for real before the TPU compile."""
    r = client.post("/api/reshard", content=orjson.dumps(reshard_body()), headers=JSON)
    assert r.status_code == 200, r.text
    got = r.json()
    assert got["compile_only"] is True and got["max_abs_error"] is None
    assert "not run" in got["executed_on"] and got["timing"]["run_ms"] is None
    assert got["figures_from"]["program"] == "tpu" and got["communication"]["program"] == "TPU compile-only (v5p:4x4x4)"
    assert got["to_bytes_per_device"] == FFN[0] // 16 * FFN[1] * 2  # each chip holds its 256 rows, all columns
    # the oracle: JAX compiles the same move for libtpu's v5p 4x4x4 here
    m = mesh(V5P, (16, 4), ("fsdp", "tp"))
    x = jax.ShapeDtypeStruct(FFN, jnp.bfloat16, sharding=NamedSharding(m, P("fsdp", "tp")))
    compiled = jax.jit(lambda a: a, out_shardings=NamedSharding(m, P("fsdp", None))).lower(x).compile()
    hlo = compiled.as_text()
    assert (
        {c["name"]: c["op"] for c in got["collectives"]}
        == hlo_collectives(hlo)
        == {c["name"]: c["op"] for c in got["tpu"]["collectives"]}
    )
    assignment = [int(d.id) for d in device_assignment(compiled)]
    by_name = {c["name"]: c for c in got["collectives"]}
    for name, groups in hlo_groups(hlo).items():
        assert sorted(sorted(g) for g in by_name[name]["groups"]) == sorted(sorted(assignment[p] for p in g)
                                                                              for g in groups)  # fmt: skip
    gathers = [c for c in got["collectives"] if c["op"] == "all-gather"]
    assert gathers and all(c["axes"] == ["tp"] and c["estimate"]["fabric"] == "ici" for c in gathers)
    stats = compiled.memory_analysis()
    assert got["program"]["memory"]["peak_memory_in_bytes"] == stats.peak_memory_in_bytes
    assert got["program"]["memory"]["output_size_in_bytes"] == stats.output_size_in_bytes


def test_a_compile_only_kernel_run_has_layouts_and_no_values(client: TestClient) -> None:
    body = {"kernel": "sum_axis0", "devices": "tpu:v5e:2x4", "compile_only": True,
            "mesh": {"shape": [2, 4], "axis_names": ["x", "y"], "axis_types": ["auto", "auto"]},
            "inputs": [{"shape": [64, 128], "spec": "P('x', 'y')", "dtype": "float32"}]}  # fmt: skip
    r = client.post("/api/kernels/run", content=orjson.dumps(body), headers=JSON)
    assert r.status_code == 200, r.text
    got = r.json()
    assert got["compile_only"] is True and got["max_abs_error"] is None
    (out,) = got["outputs"]
    assert "max_abs_error" not in out  # nothing ran: no error to report
    layout = client.post("/api/layout", json={"devices": "tpu:v5e:2x4", "mesh": body["mesh"], "spec": out["spec"],
                                              "shape": [128], "dtype": "float32"}).json()  # fmt: skip
    assert out["shards"] == layout["shards"] and out["spec"] == layout["spec"] == "P('y',)"
    assert [c["op"] for c in got["collectives"]] == [c["op"] for c in got["tpu"]["collectives"]]
    assert got["roofline"]["source"].startswith("the TPU compile")
