"""One program, one report (issue 30): the kernel lab, ``inspect_jit`` and a plan of the same program give equal
program reports — on CPU devices, on libtpu's compile-only v5e 2x4 slice and on a GPU set compiled without a GPU
(XLA's GPU compiler with the H100 target config, in the gpu extra's environment).

Equal in every fact the program has: its target, partitioner, XLA's memory figures, its work with loops counted,
its collectives with their groups, axes, bytes and repeat counts, its DCN steps, its device assignment and any
refusal. Not in what a compile measures or was asked to write besides: its timings and log, Shardy's origins (the
kernel lab asks for them) and XLA's buffer assignment (a plan asks for it). The oracle for each fact is XLA's own
analysis of the compiled program, read by :mod:`sharding_core.program.report` (``tests/test_planning.py`` and
``tests/test_kernels_*.py`` check it against XLA and libtpu); here the three clients of the one pipeline must agree.
"""

from __future__ import annotations

from typing import Any

import pytest

from sharding_core.program.targets import libtpu_available
from tests.program_agreement import KERNELS, reports
from tests.test_planning import run_in_gpu_env

FACTS = ("target", "partitioner", "memory", "work", "collectives", "dcn", "device_assignment", "refusal")
APART = ("timings", "compiler_log", "origins", "temporaries")


def assert_agree(found: dict[str, dict[str, Any]]) -> None:
    lab = found["kernel_lab"]
    assert set(lab) == {"format", *FACTS, *APART}
    assert lab["memory"]["peak_memory_in_bytes"] > 0 and lab["work"]["flops"] > 0 and lab["collectives"]
    for other in ("inspect_jit", "plan"):
        for key in FACTS:
            assert found[other][key] == lab[key], (other, key)
    assert found["plan"]["temporaries"] is not None  # what a plan adds: XLA's buffer assignment


@pytest.mark.parametrize("kernel", KERNELS)
def test_the_kernel_lab_inspect_jit_and_a_plan_agree_on_cpu_devices(kernel: str) -> None:
    found = reports(kernel, "cpu:8")
    assert_agree(found)
    assert found["kernel_lab"]["target"]["platform"] == "cpu"


@pytest.mark.tpu
@pytest.mark.skipif(not libtpu_available(), reason="needs the tpu extra (libtpu)")
@pytest.mark.parametrize("kernel", KERNELS)
def test_the_kernel_lab_inspect_jit_and_a_plan_agree_on_a_compile_only_tpu_slice(kernel: str) -> None:
    found = reports(kernel, "tpu:v5e:2x4")
    assert_agree(found)
    target = found["kernel_lab"]["target"]
    assert target["devices"] == "tpu:v5e:2x4" and target["compile_only"] and target["device_kind"] == "TPU v5 lite"


@pytest.mark.gpu
@pytest.mark.workers  # a subprocess in the gpu environment
def test_the_kernel_lab_inspect_jit_and_a_plan_agree_on_a_gpu_set_without_a_gpu() -> None:
    found = run_in_gpu_env("program_agreement.py")
    for kernel in KERNELS:
        assert_agree(found[kernel])
        target = found[kernel]["kernel_lab"]["target"]
        assert target["devices"] == "gpu:h100:1x8" and target["device_kind"] == "NVIDIA H100 80GB HBM3"
