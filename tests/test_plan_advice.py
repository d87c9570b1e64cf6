"""What a plan tells a user whose program does not fit, and ``shardscope plan``'s surface (issue 28).

* Refusal advice that contradicted itself on a state-bound model (32 layers, d 8192 on ``tpu:v5e:2x2``): the
  first bullet said "temporaries dominate (activations)", the third "arguments dominate"; the "activations" were
  f32 weight gradients; it suggested ``donate_argnums`` the step already uses; it never said how many chips the
  state needs.
* ``shardscope plan`` exited 0 for a program that does not fit (the contract: 3); it named argument groups
  ``args/0``, ``args/1/mu`` where the dashboard says ``params``, ``opt_state.mu``; a missing ``--axes`` gave the
  user's traceback ("Resource axis: tp ... not found in mesh: ('data',)").

The oracles: the program described (its parameters' shard shapes from ``NamedSharding.shard_shape``, the state's
bytes from its shapes and dtypes, what the step donates from ``Lowered.args_info``), the v5e slice sizes Google
sells (1x1, 2x2, 2x4, 4x4, 4x8, ...), XLA's refusal message, and the function's own signature.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import jax
import pytest

from examples import llama
from sharding_core.capturing import plan
from sharding_core.program import memory
from sharding_core.program.targets import mesh

ROOT = Path(__file__).resolve().parent.parent

# 32 layers of d 8192 with Adam in f32: about 104 GB of state per copy of the parameters
STATE_BOUND = llama.Config(vocab=32000, d_model=8192, n_layers=32, n_heads=64, n_kv_heads=8, head_dim=128,
                           d_ff=28672)  # fmt: skip


def shardscope_plan(*argv: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "shardscope", "plan", *argv], capture_output=True, text=True, cwd=cwd, timeout=600,
        env={**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": str(ROOT)},
    )  # fmt: skip


@pytest.mark.tpu
def test_refusal_advice_on_a_state_bound_model_is_consistent() -> None:
    m = mesh("tpu:v5e:2x2", (4,), ("fsdp",))
    step, args = llama.plan_fn(STATE_BOUND, "fsdp", 4, 128)(m)
    snap = plan(step, *args)
    r = snap["plan"]["refusal"]
    assert r is not None and snap["plan"]["fits"] is False
    advice = r["advice"]
    # one statement of what dominates, never both
    assert sum("dominate" in a for a in advice) == 1, advice
    # the step donates its parameters and optimizer state (donate_argnums=(0, 1)): donation is not advised
    assert sum(bool(getattr(a, "donated", False)) for a in jax.tree.leaves(step.lower(*args).args_info)) > 0
    assert not any("donate" in a for a in advice), advice
    # the largest temporaries are weight gradients: made in the backward pass, each a parameter's shard in size
    shards = {math.prod(leaf.sharding.shard_shape(leaf.shape)) for leaf in jax.tree.leaves(args[0])}
    largest = r["largest"][0]
    dims = [int(d) for d in largest["shape"].split("[", 1)[1].rstrip("]").split(",")]
    assert "transpose(" in largest["op"] and math.prod(dims) in shards
    assert "is a weight gradient" in advice[1] and "activation" not in advice[1], advice
    # the chips the arguments alone need: their bytes over XLA's available HBM per device, rounded up to a slice
    state = sum(math.prod(x.shape) * x.dtype.itemsize for x in jax.tree.leaves(args))
    chips = math.ceil(state / r["available_bytes"])
    assert chips == 20  # 311.9 GiB over 15.75 GiB
    assert f"need at least {chips} chips" in advice[-1] and "tpu:v5e:4x8" in advice[-1], advice  # 32 chips


def test_chips_needed_rounds_up_to_a_slice_of_the_sets_kind() -> None:
    gib = 2**30
    assert memory.chips_needed(100 * gib, 16 * gib, "tpu:v5e:2x2") == (7, "tpu:v5e:2x4")
    assert memory.chips_needed(16 * gib, 16 * gib, "tpu:v5e:2x2") == (1, "tpu:v5e:1x1")
    assert memory.chips_needed(1000 * gib, 95 * gib, "tpu:v5p:2x2x4") == (11, "tpu:v5p:2x2x4")  # 16 chips
    assert memory.chips_needed(500 * gib, 80 * gib, "gpu:h100:1x8") == (7, "gpu:h100:1x8")
    assert memory.chips_needed(1000 * gib, 80 * gib, "gpu:h100:1x8") == (13, "gpu:h100:2x8")
    assert memory.chips_needed(10, 0, "tpu:v5e:2x2") is None and memory.chips_needed(10, 1, None) is None


@pytest.mark.tpu
def test_plan_exits_3_when_the_program_does_not_fit(tmp_path: Path) -> None:
    """The contract: 3 when the program does not fit (a CI "will it fit" check needs no JSON parsing)."""
    script = tmp_path / "big.py"
    script.write_text(
        "import jax, jax.numpy as jnp\nfrom jax.sharding import NamedSharding, PartitionSpec as P\n\n"
        "def fn(mesh):\n"
        "    x = jax.ShapeDtypeStruct((65536, 65536), jnp.bfloat16, sharding=NamedSharding(mesh, P()))\n"
        "    return jax.jit(lambda x: jnp.tanh(x @ x) @ x), (x,)\n"
    )  # 8 GiB replicated and two products of its size: past a v5e's 16 GiB
    out = tmp_path / "plan.json"
    r = shardscope_plan(f"{script}:fn", "--devices", "tpu:v5e:2x2", "--json", str(out))
    assert r.returncode == 3, r.stderr[-3000:]
    snap = json.loads(out.read_text())
    assert snap["plan"]["fits"] is False and snap["plan"]["refusal"] is not None
    assert "does not fit" in r.stdout and "Traceback" not in r.stderr


def test_a_missing_axes_says_what_to_pass(tmp_path: Path) -> None:
    script = tmp_path / "tp.py"
    script.write_text(
        "import jax, jax.numpy as jnp\nfrom jax.sharding import NamedSharding, PartitionSpec as P\n\n"
        "def fn(mesh):\n"
        "    x = jax.ShapeDtypeStruct((64, 64), jnp.float32, sharding=NamedSharding(mesh, P('tp')))\n"
        "    return jax.jit(lambda x: x * 2), (x,)\n"
    )
    r = shardscope_plan(f"{script}:fn", "--devices", "cpu:8")
    assert r.returncode == 2, r.stdout[-2000:] + r.stderr[-2000:]
    assert "Traceback" not in r.stderr
    assert "error [bad_axes]" in r.stderr and "one axis, 'data'" in r.stderr
    assert "hint: pass the mesh axes your function uses: --axes tp" in r.stderr
    assert "--mesh 2x4 --axes data,tp" in r.stderr
    ok = shardscope_plan(f"{script}:fn", "--devices", "cpu:8", "--axes", "tp")  # what the hint says works
    assert ok.returncode == 0, ok.stderr[-2000:]


def test_argument_groups_go_by_the_functions_parameter_names(tmp_path: Path) -> None:
    """One naming: the CLI, the JSON and the dashboard say ``params``, ``opt_state.mu`` (the step's own parameter
    names, and the NamedTuple's field), not ``args/0``, ``args/1/mu``."""
    script = tmp_path / "adam.py"
    script.write_text(
        "from typing import NamedTuple\nimport jax, jax.numpy as jnp\n"
        "from jax.sharding import NamedSharding, PartitionSpec as P\n\n"
        "class Adam(NamedTuple):\n    mu: jax.Array\n    nu: jax.Array\n\n"
        "def step(params, opt_state, batch):\n"
        "    return params - opt_state.mu * batch.sum(), opt_state\n\n"
        "def fn(mesh):\n"
        "    s = lambda *shape: jax.ShapeDtypeStruct(shape, jnp.float32, sharding=NamedSharding(mesh, P('data')))\n"
        "    return jax.jit(step), (s(64, 64), Adam(s(64, 64), s(64, 64)), s(8, 4))\n"
    )
    out = tmp_path / "plan.json"
    r = shardscope_plan(f"{script}:fn", "--devices", "cpu:8", "--json", str(out), "--no-temporaries")
    assert r.returncode == 0, r.stderr[-2000:]
    groups = {g["group"]: g["name"] for g in json.loads(out.read_text())["plan"]["arguments"]["groups"]}
    assert groups == {"args/0": "params", "args/1/mu": "opt_state.mu", "args/1/nu": "opt_state.nu",
                      "args/2": "batch"}  # fmt: skip
    printed = r.stdout.split("arguments by group", 1)[1].splitlines()[1:5]
    assert sorted(line.split()[0] for line in printed) == ["batch", "opt_state.mu", "opt_state.nu", "params"]
    assert "args/" not in r.stdout


def test_display_names() -> None:
    names: list[str | None] = ["params", None]
    assert memory.display_name("args/0", names) == "params"
    assert memory.display_name("args/0/layers/w", names) == "params.layers.w"
    assert memory.display_name("args/1/mu", names) == "argument 1.mu"
    assert memory.display_name("args/3", names) == "argument 3"
    assert memory.display_name("kwargs/w", names) == "w"
