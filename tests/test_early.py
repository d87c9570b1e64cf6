"""A libtpu compile read before its code generation in a child process (``sharding_core.program.early``): what it
reads, and its bounds — a child past its memory or its time is killed and says so, a program JAX cannot export
says so and is compiled the usual way by the fix check. What it reads equals the full compile's schedule:
``tests/test_schedule_only.py`` and ``tests/test_findings_fix.py``."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from sharding_core.program import early
from sharding_core.program.targets import mesh as target_mesh

pytestmark = pytest.mark.tpu


def _mlp() -> tuple[Any, tuple[Any, ...], Any]:
    mesh = target_mesh("tpu:v5e:2x4", (2, 4), ("data", "model"))

    def f(x: Any, w1: Any, w2: Any) -> Any:
        return jnp.sum(jax.nn.relu(x @ w1) @ w2)

    def s(shape: tuple[int, ...], spec: P) -> Any:
        return jax.ShapeDtypeStruct(shape, jnp.float32, sharding=NamedSharding(mesh, spec))

    args = (s((256, 512), P("data", None)), s((512, 1024), P(None, "model")), s((1024, 512), P("model", None)))
    return jax.jit(jax.grad(f, argnums=(1, 2))), args, mesh


def test_the_scheduled_module_the_partitioners_input_and_the_bytes_placed() -> None:
    f, args, mesh = _mlp()
    (got,) = early.compile_early([f], args, {}, mesh, donated=[])
    assert got.error is None and got.hlo is not None, got.error
    assert "is_scheduled=true" in got.hlo.splitlines()[0] and "all-reduce" in got.hlo  # the gradient's reduction
    assert got.entering is not None and "sharding=" in got.entering
    # the buffer assignment places the arguments and the outputs, as XLA's final memory analysis counts them (its
    # peak also holds what libtpu allocates after it: here 4.1 MiB against 2.3 MiB placed)
    m = f.lower(*args).compile().memory_analysis()
    assert got.placed is not None
    assert got.placed >= m.argument_size_in_bytes + m.output_size_in_bytes - m.alias_size_in_bytes > 0
    assert np.isfinite(got.seconds) and got.seconds > 0


def test_a_child_past_its_memory_or_its_time_is_stopped_and_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    f, args, mesh = _mlp()
    monkeypatch.setattr(early, "MAX_EARLY_MEMORY", 1 << 20)
    (got,) = early.compile_early([f], args, {}, mesh, donated=[])
    assert got.hlo is None and got.error is not None and "past 1.0 MiB" in got.error, got
    monkeypatch.setattr(early, "MAX_EARLY_MEMORY", 4 << 30)
    monkeypatch.setattr(early, "MAX_EARLY_SECONDS", 0.2)
    (got,) = early.compile_early([f], args, {}, mesh, donated=[])
    assert got.hlo is None and got.error is not None and "ran past 0 s" in got.error, got


def test_a_program_jax_cannot_export_says_so() -> None:
    _, args, mesh = _mlp()

    def with_callback(x: Any, w1: Any, w2: Any) -> Any:
        y = jax.pure_callback(lambda a: np.asarray(a) * 2, jax.ShapeDtypeStruct(x.shape, x.dtype), x)
        return jnp.sum(y @ w1 @ w2)

    (got,) = early.compile_early([jax.jit(with_callback)], args, {}, mesh, donated=[])
    assert got.hlo is None and got.error is not None and got.error.startswith(early.NOT_EXPORTED), got


def test_only_a_compile_only_tpu_set() -> None:
    f, args, _ = _mlp()
    cpu = jax.sharding.Mesh(np.array(jax.devices("cpu")[:1]).reshape(1, 1), ("data", "model"))
    with pytest.raises(ValueError, match="compile-only TPU set"):
        early.compile_early([f], args, {}, cpu, donated=[])
