"""The kernel lab on GPU sets with XLA's GPU compiler, no GPU: run in the gpu extra's environment (``make gpu-env``:
``build/gpu``); ``tests/test_kernels_gpu.py`` runs this file there.

It runs kernel-lab jobs in this process as a worker would (CPU devices for the run, the GPU compile beside it):
a matmul whose contraction is sharded (an all-reduce), a bf16 reshard (an all-gather: the CPU compiler widens it to
f32, the GPU program moves bf16) and a compile-only run; and compiles the same programs again with JAX alone
(``shardscope.mesh`` on XLA's GPU topology). It prints one JSON object for the test to read with its own reader.
Standard library, JAX and the checkout only: no pytest in that environment.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

os.environ["JAX_PLATFORMS"] = "cpu"  # no GPU here: JAX must not start its CUDA backend
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import shardscope
from sharding_core.cost.annotate import result_with_figures
from sharding_core.kernels import runner
from sharding_core.kernels.plan import RunInput, plan_run
from sharding_core.kernels.reshard import plan_reshard, reshard_json
from sharding_core.mesh import MeshSpec

DEVICES = "gpu:h100:2x8"
MESH = MeshSpec((2, 8), ("data", "model"), axis_types=("auto", "auto"))


def direct(f: Any, args: list[jax.ShapeDtypeStruct], out: P | None) -> dict[str, Any]:
    """The program compiled by JAX alone for XLA's GPU topology (the oracle)."""
    jitted = jax.jit(f, out_shardings=NamedSharding(args[0].sharding.mesh, out)) if out is not None else jax.jit(f)
    compiled = jitted.lower(*args).compile()
    stats = compiled.memory_analysis()
    return {
        "hlo": compiled.as_text(),
        "memory": {
            "argument_size_in_bytes": stats.argument_size_in_bytes,
            "output_size_in_bytes": stats.output_size_in_bytes,
            "temp_size_in_bytes": stats.temp_size_in_bytes,
            "peak_memory_in_bytes": stats.peak_memory_in_bytes,
        },
        "assignment": [int(d.id) for d in compiled.input_shardings[0][0]._device_assignment],
    }


def slim(result: dict[str, Any]) -> dict[str, Any]:
    keys = ("executed_on", "compile_only", "figures_from", "communication", "roofline", "program", "max_abs_error")
    out = {k: result.get(k) for k in keys}
    out["collectives"] = [{k: c.get(k) for k in ("name", "op", "bytes", "groups", "axes", "widened", "estimate")}
                          for c in result["collectives"]]  # fmt: skip
    gpu = result.get("gpu") or {}
    out["gpu"] = {k: gpu.get(k) for k in ("skipped", "error", "topology", "device_kind", "source", "program")}
    out["gpu"]["collectives"] = [{k: c.get(k) for k in ("name", "op", "bytes", "groups", "axes", "estimate")}
                                 for c in gpu.get("collectives") or []]  # fmt: skip
    return out


def main() -> int:
    runner.use_cpu_devices(16)  # the CPU run of a 16-device mesh, as a worker sets it
    m = shardscope.mesh(DEVICES, (2, 8), ("data", "model"))
    out: dict[str, Any] = {}

    inputs = [RunInput((512, 2048), "P('data', 'model')"), RunInput((2048, 1024), "P('model', None)")]
    plan = plan_run("matmul_xw", DEVICES, MESH, inputs)
    out["matmul"] = slim(result_with_figures(plan.result(runner.run_job(plan.job))))
    x = jax.ShapeDtypeStruct((512, 2048), jnp.float32, sharding=NamedSharding(m, P("data", "model")))
    w = jax.ShapeDtypeStruct((2048, 1024), jnp.float32, sharding=NamedSharding(m, P("model", None)))
    out["matmul"]["direct"] = direct(lambda a, b: a @ b, [x, w], None)

    plan = plan_reshard(DEVICES, MESH, (1024, 4096), "bfloat16", "P('data', 'model')", "P('data', None)")
    result = result_with_figures(plan.result(runner.run_job(plan.job)))
    out["reshard"] = slim(result)
    out["reshard"]["answer"] = {k: v for k, v in reshard_json(result).items() if k in ("figures_from", "gpu")}
    y = jax.ShapeDtypeStruct((1024, 4096), jnp.bfloat16, sharding=NamedSharding(m, P("data", "model")))
    out["reshard"]["direct"] = direct(lambda a: a, [y], P("data", None))

    big = [RunInput((512, 2048), "P('data', 'model')"), RunInput((2048, 1024), "P('model', None)")]
    plan = plan_run("matmul_xw", DEVICES, MESH, big, compile_only=True)
    out["compile_only"] = slim(result_with_figures(plan.result(runner.run_job(plan.job))))
    print("RESULT " + json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
