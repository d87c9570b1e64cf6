"""Compiles for GPU sets with no GPU: run in the gpu extra's environment (``make gpu-env``: ``build/gpu``).

``tests/test_planning.py`` runs this file there. It builds ``shardscope.mesh("gpu:h100:2x8", ...)`` (XLA's GPU
compiler, NVIDIA H100 target config, 16 devices on 2 hosts), plans a sharded matmul, a scanned MLP step and a
program past an H100's HBM on abstract arguments (``sharding_core.plan``: with the temporaries), compiles the same
programs again with JAX alone, runs ``shardscope plan`` on the last, and prints one JSON object: what the plan
says next to XLA's own figures and the GPU program's HLO text, for the test to read with its own reader.
Standard library, JAX and the checkout only: no pytest in that environment.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

os.environ["JAX_PLATFORMS"] = "cpu"  # no GPU here: JAX must not start its CUDA backend
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import shardscope
from sharding_core import plan


def matmul(m: jax.sharding.Mesh) -> tuple[object, tuple[jax.ShapeDtypeStruct, ...]]:
    a = jax.ShapeDtypeStruct((4096, 4096), jnp.bfloat16, sharding=NamedSharding(m, P("data", "model")))
    b = jax.ShapeDtypeStruct((4096, 4096), jnp.bfloat16, sharding=NamedSharding(m, P("model", None)))
    return jax.jit(lambda x, y: x @ y), (a, b)


def scanned(m: jax.sharding.Mesh) -> tuple[object, tuple[jax.ShapeDtypeStruct, ...]]:
    """Four layers of x @ w over a scan: the loop's body runs 4 times; its all-reduces with it."""
    w = jax.ShapeDtypeStruct((4, 2048, 2048), jnp.bfloat16, sharding=NamedSharding(m, P(None, "model", None)))
    x = jax.ShapeDtypeStruct((512, 2048), jnp.bfloat16, sharding=NamedSharding(m, P("data", "model")))

    def f(w: jax.Array, x: jax.Array) -> jax.Array:
        def layer(h: jax.Array, wi: jax.Array) -> tuple[jax.Array, None]:
            return jax.lax.with_sharding_constraint(jnp.tanh(h @ wi), NamedSharding(m, P("data", "model"))), None

        return jax.lax.scan(layer, x, w)[0]

    return jax.jit(f), (w, x)


def over(m: jax.sharding.Mesh) -> tuple[object, tuple[jax.ShapeDtypeStruct, ...]]:
    """Past an H100's 80 GB: a replicated f32[131072, 131072] (64 GiB) and two products of its size (128 GiB of
    temporaries). XLA's GPU compiler compiles it without a word (issue 28)."""
    x = jax.ShapeDtypeStruct((131072, 131072), jnp.float32, sharding=NamedSharding(m, P()))

    def f(x: jax.Array) -> jax.Array:
        y = x @ x
        return jnp.sum(y @ y)

    return jax.jit(f), (x,)


def cli(fn: str, devices: str) -> dict[str, object]:
    """``shardscope plan tests/gpu_plan.py:FN --devices D`` in this environment: its exit status and output."""
    import subprocess

    root = Path(__file__).resolve().parent.parent
    done = subprocess.run(
        [sys.executable, "-m", "shardscope", "plan", f"{__file__}:{fn}", "--devices", devices],
        capture_output=True, text=True, timeout=600, cwd=root, env={**os.environ, "PYTHONPATH": str(root)},
    )  # fmt: skip
    return {"returncode": done.returncode, "stdout": done.stdout, "stderr": done.stderr[-4000:]}


def main() -> int:
    m = shardscope.mesh("gpu:h100:2x8", (2, 8), ("data", "model"))
    out: dict[str, object] = {
        "device_kind": str(m.devices.flat[0].device_kind),
        "hosts": sorted({int(d.process_index) for d in m.devices.flat}),
        "programs": {},
    }
    for name, make in (("matmul", matmul), ("scanned", scanned), ("over", over)):
        f, args = make(m)
        snap = plan(f, *args)  # inspect_jit's snapshot with XLA's buffer assignment read (temporaries)
        compiled = f.lower(*args).compile()  # type: ignore[attr-defined]
        stats = compiled.memory_analysis()
        out["programs"][name] = {  # type: ignore[index]
            "platform": snap["platform"],
            "target": snap["target"],
            "memory": snap["jit"]["memory_per_device"],
            "xla_memory": {
                "argument_size_in_bytes": stats.argument_size_in_bytes,
                "temp_size_in_bytes": stats.temp_size_in_bytes,
                "peak_memory_in_bytes": stats.peak_memory_in_bytes,
            },
            "collectives": [
                {k: c[k] for k in ("name", "op", "axes", "repeat", "bytes", "estimate")} for c in snap["collectives"]
            ],
            "work": snap["plan"]["work"],
            "verdict": snap["plan"]["verdict"],
            "plan": {k: snap["plan"].get(k) for k in ("fits", "over_capacity", "step_time", "capacity_bytes")},
            "temporaries": snap["plan"]["temporaries"],
            "hlo": compiled.as_text(),
        }
    out["cli_over"] = cli("over", "gpu:h100:1x8")
    print("RESULT " + json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
