"""GPU sets in the kernel lab take the GPU program (issue 25): where the gpu extra is installed, a ``gpu:`` set's
kernel is also compiled by XLA's GPU compiler with the target config XLA ships for that GPU, and its collectives,
bytes and memory are the result's headline figures; where it is not, the result says the figures are the CPU
stand-in's.

The oracles: the same programs compiled by JAX alone for the same GPU topology (``tests/gpu_kernels.py``, run in
``make gpu-env``'s environment as the planning tests do), read with the planning tests' own HLO reader, and XLA's
``memory_analysis`` of that compile.
"""

from __future__ import annotations

from typing import Any

import pytest

from sharding_core.cost.annotate import result_with_figures
from sharding_core.errors import ShardingError
from sharding_core.kernels import runner
from sharding_core.kernels.compiled import NO_GPU_COMPILER
from sharding_core.kernels.plan import plan_run
from sharding_core.mesh import MeshSpec
from sharding_core.program.targets import gpu_compiler_available
from tests.test_planning import hlo_collectives, hlo_groups, run_in_gpu_env


@pytest.fixture(scope="module")
def gpu_runs() -> dict[str, Any]:
    """tests/gpu_kernels.py in the gpu extra's environment (``make gpu-env``: ``build/gpu``)."""
    return run_in_gpu_env("gpu_kernels.py")


def _same_collectives(run: dict[str, Any], hlo: str, assignment: list[int]) -> None:
    gpu = run["gpu"]["collectives"]
    assert {c["name"]: c["op"] for c in gpu} == hlo_collectives(hlo)
    by_name = {c["name"]: c for c in gpu}
    for name, groups in hlo_groups(hlo).items():
        assert sorted(sorted(g) for g in by_name[name]["groups"]) == sorted(sorted(assignment[p] for p in g)
                                                                              for g in groups)  # fmt: skip


@pytest.mark.gpu
@pytest.mark.workers  # worker processes or subprocesses
def test_gpu_sets_take_collectives_bytes_and_memory_from_the_gpu_compile(gpu_runs: dict[str, Any]) -> None:
    for name in ("matmul", "reshard"):
        run, want = gpu_runs[name], gpu_runs[name]["direct"]
        assert "gemm_fusion" in want["hlo"] or "__cublas" in want["hlo"] or name == "reshard"  # a GPU program
        assert run["gpu"]["error"] is None and run["gpu"]["device_kind"] == "NVIDIA H100 80GB HBM3", run["gpu"]
        assert "h100_sxm.txtpb" in run["gpu"]["source"]
        assert run["figures_from"]["program"] == "gpu" and "XLA GPU compiler" in run["figures_from"]["description"]
        _same_collectives(run, want["hlo"], want["assignment"])
        for key, value in want["memory"].items():  # the GPU program's memory, exactly
            assert run["gpu"]["program"]["memory"][key] == value, (name, key)
        # the headline is the GPU program's: its collectives' bytes, NVLink inside a host
        assert run["communication"]["program"] == "GPU compile-only (1x2x8)"
        assert run["communication"]["bytes"] == sum(c["bytes"] for c in run["gpu"]["collectives"])
        assert all(c["estimate"]["fabric"] == "nvlink" for c in run["gpu"]["collectives"]), name
        assert run["roofline"]["source"].startswith("the GPU compile")
    # the bf16 gather: the CPU stand-in widens it to f32 (and says so); the GPU program moves bf16
    reshard = gpu_runs["reshard"]
    (cpu,) = reshard["collectives"]
    (gpu,) = reshard["gpu"]["collectives"]
    assert gpu["op"] == cpu["op"] == "all-gather" and gpu["axes"] == ["model"]
    assert gpu["bytes"] == 512 * 4096 * 2 and cpu["bytes"] == 2 * gpu["bytes"]
    assert cpu["widened"] == {"dtype": "bf16", "bytes": gpu["bytes"]}
    assert reshard["answer"]["figures_from"]["program"] == "gpu" and reshard["answer"]["gpu"]["collectives"]


@pytest.mark.gpu
@pytest.mark.workers  # worker processes or subprocesses
def test_a_compile_only_run_on_a_gpu_set_is_the_gpu_program(gpu_runs: dict[str, Any]) -> None:
    run = gpu_runs["compile_only"]
    assert run["compile_only"] is True and run["max_abs_error"] is None and "not run" in run["executed_on"]
    assert run["figures_from"]["program"] == "gpu"
    assert [c["op"] for c in run["collectives"]] == [c["op"] for c in run["gpu"]["collectives"]] == ["all-reduce"]
    assert run["program"]["memory"] == run["gpu"]["program"]["memory"] == gpu_runs["matmul"]["gpu"]["program"]["memory"]


def test_without_the_gpu_extra_the_figures_are_the_cpu_stand_ins() -> None:
    """This environment has every extra but gpu (make install-dev): a gpu: set runs on CPU and says its figures
    are the CPU stand-in's, and a compile-only run of it is refused with the extra to install."""
    assert not gpu_compiler_available()
    spec = MeshSpec((2, 4), ("x", "y"), axis_types=("auto", "auto"))
    plan = plan_run("sum_axis0", "gpu:h100:1x8", spec, None)
    result = result_with_figures(plan.result(runner.run_job(plan.job)))
    assert result["gpu"] == {"skipped": NO_GPU_COMPILER}
    assert result["figures_from"]["program"] == "cpu" and "the CPU stand-in" in result["figures_from"]["description"]
    assert result["communication"]["program"].startswith("the compiled program")
    cpu = plan_run("sum_axis0", "cpu:8", spec, None)
    assert result_with_figures(cpu.result(runner.run_job(cpu.job)))["gpu"] is None  # not a gpu: set: no section at all
    with pytest.raises(ShardingError, match="XLA's GPU compiler is not installed") as e:
        plan_run("sum_axis0", "gpu:h100:1x8", spec, None, compile_only=True)
    assert e.value.code == "unavailable"
