"""What is known to be harmless stays off stderr (issue 28): every TPU plan and the first notebook cell printed
libtpu's red "Failed to find host bounds ... INVALID_ARGUMENT" block (libtpu starting on a machine with no TPU:
its compile-only topologies need no accelerator type and no worker hostnames), and every GPU plan an
``E... Error parsing text-format GpuTargetConfigProto ... mem_clock_ghz`` line (XLA's parse of a target config
naming a field this jaxlib does not know; the planner retries without it). Only those lines go: anything else
libtpu or XLA prints comes back.

The oracle: libtpu and XLA themselves, in a fresh process — what they print without the filter, and what is
left with it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from sharding_core.program.targets import harmless_dropped, quiet_harmless_stderr

ROOT = Path(__file__).resolve().parent.parent
LIBTPU_BLOCK = "Failed to find host bounds"


def run(python: str, code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [python, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=600,
        env={**os.environ, "JAX_PLATFORMS": "cpu", "TPU_SKIP_MDS_QUERY": "1", "PYTHONPATH": str(ROOT)},
    )  # fmt: skip


@pytest.mark.tpu
@pytest.mark.workers  # fresh processes: libtpu prints its block once per process
def test_libtpus_start_up_block_is_dropped_and_only_it() -> None:
    bare = run(sys.executable, "from jax.experimental import topologies\n"
                               "topologies.get_topology_desc(topology_name='v5e:2x2', platform='tpu')")  # fmt: skip
    assert bare.returncode == 0, bare.stderr[-2000:]
    assert LIBTPU_BLOCK in bare.stderr and "INVALID_ARGUMENT" in bare.stderr  # what libtpu says unasked
    planned = run(sys.executable, "import sys\nfrom sharding_core.program.targets import mesh\n"
                                  "mesh('tpu:v5e:2x2', (4,), ('x',))\nprint('after', file=sys.stderr)")  # fmt: skip
    assert planned.returncode == 0, planned.stderr[-2000:]
    for text in (LIBTPU_BLOCK, "INVALID_ARGUMENT", "Source Location Trace", "libtpu_init_utils", "InitGoogle"):
        assert text not in planned.stderr, planned.stderr
    assert planned.stderr.strip().splitlines()[-1] == "after"
    # everything else libtpu printed comes back, as it was
    assert harmless_dropped(bare.stderr).strip() == planned.stderr.replace("after\n", "").strip()


@pytest.mark.gpu
@pytest.mark.workers  # the gpu extra's environment
def test_the_gpu_target_configs_parse_error_is_dropped() -> None:
    python = ROOT / "build" / "gpu" / "bin" / "python"
    made = subprocess.run(["make", "-s", "gpu-env"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert made.returncode == 0, made.stderr[-2000:]
    done = run(str(python), "from sharding_core.program.targets import mesh\n"
                            "m = mesh('gpu:h100:1x8', (8,), ('x',))\nprint(m.devices.size)")  # fmt: skip
    assert done.returncode == 0 and done.stdout.strip() == "8", done.stderr[-2000:]
    assert "GpuTargetConfigProto" not in done.stderr and "mem_clock_ghz" not in done.stderr, done.stderr


def test_only_the_harmless_lines_go() -> None:
    text = (
        "Failed to find host bounds for accelerator type: WARNING: could not determine TPU accelerator type, please "
        "set env var `TPU_ACCELERATOR_TYPE` manually, otherwise libtpu.so may not properly initialize.\n"
        "WARNING: Logging before InitGoogle() is written to STDERR\n"
        "E0000 00:00:1795842599.461663   17759 common_lib.cc:554] INVALID_ARGUMENT: Error: unexpected worker "
        "hostname 'WARNING: could not determine TPU worker hostnames or IP addresses' from env var "
        "TPU_WORKER_HOSTNAMES.\n"
        "=== Source Location Trace: === \n"
        "learning/45eac/tfrc/runtime/libtpu_init_utils.cc:327\n"
        "\n"
        "E0000 00:00:1.0   1 common_lib.cc:554] INVALID_ARGUMENT: something else went wrong\n"
        "=== Source Location Trace: === \n"
        "learning/45eac/tfrc/runtime/other.cc:12\n"
        "E1128 05:19:21.405394   20925 text_format.cc:378] Error parsing text-format stream_executor.GpuTargetConfig"
        'Proto: 234:16: Message type "stream_executor.GpuDeviceInfoProto" has no field named "mem_clock_ghz".\n'
        "E1128 05:19:21.405394   20925 text_format.cc:378] Error parsing text-format stream_executor.GpuTargetConfig"
        'Proto: 1:1: Message type "stream_executor.GpuDeviceInfoProto" has no field named "core_count".\n'
    )
    kept = harmless_dropped(text).splitlines()
    # another libtpu error keeps its trace; a field this planner does not drop is no known-harmless message
    assert kept == [
        "E0000 00:00:1.0   1 common_lib.cc:554] INVALID_ARGUMENT: something else went wrong",
        "=== Source Location Trace: === ",
        "learning/45eac/tfrc/runtime/other.cc:12",
        "E1128 05:19:21.405394   20925 text_format.cc:378] Error parsing text-format stream_executor.GpuTargetConfig"
        'Proto: 1:1: Message type "stream_executor.GpuDeviceInfoProto" has no field named "core_count".',
    ]


def test_what_else_is_written_comes_back(capfd: pytest.CaptureFixture[str]) -> None:
    with quiet_harmless_stderr():  # fd 2, where libtpu's and XLA's C++ write
        os.write(2, b"WARNING: Logging before InitGoogle() is written to STDERR\nkept line\n")
        os.write(2, b"another line\n")
    assert capfd.readouterr().err == "kept line\nanother line\n"
