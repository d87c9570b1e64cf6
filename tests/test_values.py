"""Every value's sharding along the program (``values``, issue 32) against JAX's own
``jax.debug.inspect_array_sharding``: five programs, each value inspected on the line after the one making it, in
the same compile the snapshot reads, on the 8 CPU devices."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import pytest
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import sharding_core
from sharding_core.program import values as values_mod

Seen = dict[tuple[str, int], tuple[tuple[int, ...], Any]]


def looker(seen: Seen) -> Callable[[Any], None]:
    """``look(x)`` on the line after the one that made ``x``: records JAX's report of its sharding there."""

    def look(x: Any) -> None:
        frame = sys._getframe(1)
        key = (frame.f_code.co_filename, frame.f_lineno - 1)
        shape = tuple(x.shape)
        jax.debug.inspect_array_sharding(x, callback=lambda s: seen.__setitem__(key, (shape, s)))

    return look


def spec_entries(spec: P) -> tuple[Any, ...]:
    """A spec's entries with trailing Nones dropped and one-axis tuples unwrapped (one spelling to compare)."""
    out = [e[0] if isinstance(e, tuple) and len(e) == 1 else e for e in spec]
    while out and out[-1] is None:
        out.pop()
    return tuple(out)


def parsed(text: str) -> tuple[Any, ...]:
    body = {"P": P}
    return spec_entries(eval(text, body))


def sds(mesh: Any, shape: tuple[int, ...], spec: P, dtype: Any = jnp.float32) -> jax.ShapeDtypeStruct:
    return jax.ShapeDtypeStruct(shape, dtype, sharding=NamedSharding(mesh, spec))


def mlp_tp(look: Callable[[Any], None]) -> tuple[Any, tuple[Any, ...]]:
    mesh = jax.make_mesh((2, 4), ("data", "model"), axis_types=(jax.sharding.AxisType.Auto,) * 2)

    def f(x: Any, w1: Any, w2: Any) -> Any:
        h = x @ w1
        look(h)
        a = jax.nn.gelu(h)
        look(a)
        y = a @ w2
        look(y)
        s = jnp.sum(y, axis=-1)
        look(s)
        return s

    return f, (sds(mesh, (16, 64), P("data")), sds(mesh, (64, 256), P(None, "model")), sds(mesh, (256, 64),
                                                                                            P("model")))  # fmt: skip


def attention_heads(look: Callable[[Any], None]) -> tuple[Any, tuple[Any, ...]]:
    mesh = jax.make_mesh((2, 4), ("data", "model"), axis_types=(jax.sharding.AxisType.Auto,) * 2)

    def f(x: Any, wq: Any) -> Any:
        q = x @ wq
        look(q)
        heads = q.reshape(8, 32, 4, 32)
        look(heads)
        scores = jnp.einsum("bqhd,bkhd->bhqk", heads, heads)
        look(scores)
        probs = jax.nn.softmax(scores, axis=-1)
        look(probs)
        out = jnp.einsum("bhqk,bkhd->bqhd", probs, heads)
        look(out)
        return out.reshape(8, 32, 128)

    return f, (sds(mesh, (8, 32, 128), P("data")), sds(mesh, (128, 128), P(None, "model")))


def naive_fsdp_block(look: Callable[[Any], None]) -> tuple[Any, tuple[Any, ...]]:
    """Tokens on fsdp, weights split on fsdp over d_model: the residual stream takes the weights' axis (issue 32)."""
    mesh = jax.make_mesh((8,), ("fsdp",), axis_types=(jax.sharding.AxisType.Auto,))

    def f(tokens: Any, emb: Any, w: Any) -> Any:
        x = emb[tokens]
        look(x)
        h = jnp.einsum("bsd,df->bsf", x, w)
        look(h)
        r = x + jnp.tanh(h)
        look(r)
        n = r * jax.lax.rsqrt(jnp.mean(r * r, axis=-1, keepdims=True))
        look(n)
        return jnp.mean(n)

    return f, (sds(mesh, (16, 32), P("fsdp"), jnp.int32), sds(mesh, (512, 256), P(None, "fsdp")),
               sds(mesh, (256, 256), P("fsdp")))  # fmt: skip


def scanned_layers(look: Callable[[Any], None]) -> tuple[Any, tuple[Any, ...]]:
    mesh = jax.make_mesh((4, 2), ("data", "model"), axis_types=(jax.sharding.AxisType.Auto,) * 2)

    def f(x: Any, ws: Any) -> Any:
        def layer(carry: Any, w: Any) -> tuple[Any, None]:
            h = carry @ w
            look(h)
            out = jax.nn.relu(h) + carry
            look(out)
            return out, None

        y, _ = jax.lax.scan(layer, x, ws)
        look(y)
        t = y.T
        look(t)
        return t

    return f, (sds(mesh, (32, 64), P("data", "model")), sds(mesh, (3, 64, 64), P(None, None, "model")))


def explicit_axes(look: Callable[[Any], None]) -> tuple[Any, tuple[Any, ...]]:
    mesh = jax.make_mesh((2, 4), ("x", "y"), axis_types=(jax.sharding.AxisType.Explicit,) * 2)

    def f(a: Any, b: Any) -> Any:
        c = a * 2.0
        look(c)
        d = jnp.transpose(c)
        look(d)
        e = jnp.matmul(d, b, out_sharding=NamedSharding(mesh, P("y", None)))
        look(e)
        g = jnp.concatenate([e, e], axis=0)
        look(g)
        return g

    return f, (sds(mesh, (16, 32), P("x", "y")), sds(mesh, (16, 8), P("x", None)))


PROGRAMS = [mlp_tp, attention_heads, naive_fsdp_block, scanned_layers, explicit_axes]


@pytest.mark.parametrize("build", PROGRAMS, ids=lambda b: b.__name__)
def test_every_inspected_value_has_the_sharding_jax_reports(build: Callable[..., Any]) -> None:
    seen: Seen = {}
    f, args = build(looker(seen))
    snap = sharding_core.inspect_jit(jax.jit(f), *args)
    assert seen, "JAX reported no sharding"
    rows = snap["values"]
    checked = 0
    for (path, line), (shape, sharding) in seen.items():
        here = [v for v in rows if v["source"] == f"{path}:{line}" and tuple(v["shape"]) == shape]
        assert here, f"no value at line {line} of shape {shape}: {[(v['source'], v['shape']) for v in rows]}"
        want = spec_entries(sharding.spec)
        for v in here:
            assert v["spec"] is not None, v
            assert parsed(v["spec"]) == want, (line, v, sharding)
            assert v["typed"] is not None and v["typed"].startswith(v["dtype"] + "[")
        checked += 1
    assert checked >= 4
    CHECKED[build.__name__] = checked


CHECKED: dict[str, int] = {}


def test_the_five_programs_check_at_least_twenty_values() -> None:
    """Runs after the parametrized cases (file order): >= 20 values over the 5 programs."""
    if len(CHECKED) < len(PROGRAMS):
        pytest.skip("run with the parametrized cases above")
    assert sum(CHECKED.values()) >= 20


def test_values_carry_bytes_per_device_and_loop_repeats() -> None:
    """Each value's bytes are its shard's as JAX's ``shard_shape`` gives it; a scanned layer's run 3 times a step."""
    import math

    seen: Seen = {}
    f, args = scanned_layers(looker(seen))
    snap = sharding_core.inspect_jit(jax.jit(f), *args)
    mesh = args[0].sharding.mesh
    for v in snap["values"]:
        shard = NamedSharding(mesh, P(*parsed(v["spec"]))).shard_shape(tuple(v["shape"]))
        assert v["bytes"] == math.prod(shard) * jnp.dtype(v["dtype"]).itemsize, v
    dots = [v for v in snap["values"] if v["op"] == "dot_general"]
    assert dots and all(v["repeat"] == 3 for v in dots)
    big = values_mod.largest(snap["values"], 2)
    assert big[0]["bytes"] == max(v["bytes"] for v in snap["values"]) >= big[1]["bytes"]


def test_spec_of_reads_xla_shardings_on_a_mesh() -> None:
    """XLA's iota and explicit tile assignments against NamedSharding's own HLO sharding for the same spec."""
    import numpy as np

    mesh = jax.make_mesh((2, 4), ("a", "b"), axis_types=(jax.sharding.AxisType.Auto,) * 2)
    grid = np.arange(8).reshape(2, 4)
    for spec in (P("a"), P("b"), P(None, "a"), P("b", "a"), P(("a", "b")), P(("b", "a")), P(), P(None, ("b", "a"))):
        hlo = NamedSharding(mesh, spec)._to_xla_hlo_sharding(2)
        text = "{" + str(hlo).strip("{}") + "}"
        assert parsed(values_mod.spec_of(text, 2, grid, ("a", "b")) or "None") == spec_entries(spec), (spec, text)


def test_plan_values_prints_the_largest_values(tmp_path: Any) -> None:
    """``shardscope plan --values N``: the N largest values, each with its typed sharding and line."""
    import os
    import subprocess
    from pathlib import Path

    script = tmp_path / "m.py"
    script.write_text(
        "import jax, jax.numpy as jnp\n"
        "from jax.sharding import NamedSharding, PartitionSpec as P\n"
        "def fn(mesh):\n"
        "    def f(x, w):\n"
        "        return jnp.tanh(x @ w).sum()\n"
        "    s = lambda shape, spec: jax.ShapeDtypeStruct(shape, jnp.float32, sharding=NamedSharding(mesh, spec))\n"
        "    return jax.jit(f), (s((64, 128), P('data')), s((128, 512), P(None, 'model')))\n"
    )
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": str(root)}
    r = subprocess.run([sys.executable, "-m", "shardscope", "plan", f"{script}:fn", "--devices", "cpu:8", "--mesh",
                        "2x4", "--axes", "data,model", "--values", "2", "--no-temporaries"],
                       capture_output=True, text=True, env=env, cwd=root, timeout=300)  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]
    assert "the 2 largest of" in r.stdout
    assert "float32[64@data,512@model]" in r.stdout and "m.py:5" in r.stdout
    argv = [sys.executable, "-m", "shardscope", "plan", f"{script}:fn", "--devices", "cpu:8", "--values", "-1"]
    bad = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=root, timeout=300)
    assert bad.returncode == 2 and "--values" in bad.stderr
