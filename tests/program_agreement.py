"""The same program compiled three ways — by the kernel lab (its CPU run, or its TPU / GPU compile beside it), by
``inspect_jit`` and by a plan — and each one's program report, for ``tests/test_program_agreement.py``.

Run as a script (in the gpu extra's environment, ``make gpu-env``: ``build/gpu``) it prints the reports of a GPU
set compiled without a GPU as one ``RESULT`` JSON line: standard library, JAX and the checkout only.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

if __name__ == "__main__":
    os.environ["JAX_PLATFORMS"] = "cpu"  # no GPU here: JAX must not start its CUDA backend
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import jax

from sharding_core.capturing import inspect_jit, plan
from sharding_core.compat import set_mesh
from sharding_core.devices import devices_of_key
from sharding_core.kernels import runner
from sharding_core.kernels.build import jit_kernel, job_mesh, kernel_context
from sharding_core.kernels.catalog import get_kernel
from sharding_core.kernels.plan import plan_run
from sharding_core.mesh import MeshSpec
from sharding_core.program.targets import set_target
from sharding_core.spec import parse_spec

KERNELS = ("matmul_xxt", "layer_shard_map")
"""A jit kernel whose contraction is sharded (all-gathers and an all-reduce) and a shard_map one (a psum)."""

MESH = MeshSpec((2, 4), ("x", "y"), ("auto", "auto"))


def reports(kernel_name: str, devices: str) -> dict[str, dict[str, Any]]:
    """The program reports of ``kernel_name`` on ``devices`` (8 devices, mesh 2x4): the kernel lab's (its CPU run's
    on a cpu: set, else its compile for the set's hardware), ``inspect_jit``'s and a plan's of the same program —
    the kernel built and jitted on the devices the lab compiled it for."""
    job = plan_run(kernel_name, devices, MESH, None).job
    result = runner.run_job(job)
    platform = devices.split(":", 1)[0]
    lab = result["program"] if platform == "cpu" else result[platform]["program"]
    if platform == "cpu":
        real = jax.devices()
        placed = [real[r] for r in job.positions]
    else:
        by_id = set_target(devices_of_key(job.devices_key)).by_id
        placed = [by_id[i] for i in job.device_ids]
    kernel = get_kernel(kernel_name)
    assert kernel is not None
    mesh = job_mesh(job, placed)
    in_specs = tuple(parse_spec(i.spec) for i in job.inputs)
    with set_mesh(mesh):
        built = kernel.build(kernel_context(job, kernel, mesh, in_specs))
        jitted, structs = jit_kernel(job, kernel, built, mesh, in_specs)
        captured = inspect_jit(jitted, *structs, *built.extra_args)
        planned = plan(jitted, *structs, *built.extra_args)
    return {"kernel_lab": lab, "inspect_jit": captured["program"], "plan": planned["program"]}


def main() -> int:
    runner.use_cpu_devices(8)  # the kernel lab's run, as its worker makes it
    out = {name: reports(name, "gpu:h100:1x8") for name in KERNELS}
    print("RESULT " + json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
