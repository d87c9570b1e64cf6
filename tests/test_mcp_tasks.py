"""Scripted tasks an agent would do, solved by MCP tool calls alone (a real ``shardscope mcp`` over stdio, driven
by the SDK's client), each transcript checked against JAX and written to ``artifacts/mcp/<task>.json``.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import jax
import jax.numpy as jnp
import pytest
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P
from mcp import Client

import shardscope
from tests.mcp_helpers import ROOT, Transcript, stdio_params
from tests.plugins.live import start, stop

pytestmark = pytest.mark.workers
MLP = (Path(__file__).parent / "mcp_tasks" / "mlp.py").read_text()
COLLECTIVE = re.compile(r"\s(all-gather|all-reduce|reduce-scatter|all-to-all|collective-permute)(?:-start)?\(")
"""A collective instruction of HLO text (tuple-shaped results included; an async pair counted once, by its start)."""


def solve(task: str, steps: Callable[[Transcript], Awaitable[None]], *args: str) -> None:
    async def main() -> None:
        async with Client(stdio_params(*args)) as client:
            await steps(Transcript(client, task))

    anyio.run(main)


def hlo_ops(text: str) -> list[str]:
    """The collectives of an optimized HLO module, by op, with this test's own reader."""
    return sorted(COLLECTIVE.findall(text))


def bounds(index: tuple[slice, ...], shape: tuple[int, ...]) -> list[list[int]]:
    return [[*s.indices(n)[:2]] for s, n in zip(index, shape, strict=True)]


@pytest.mark.tpu
def test_layout_of_a_pasted_sharding_on_a_tpu_slice() -> None:
    """'Where does each block of my (4096, 14336) bf16 weight go on a v5p-64 with P('fsdp', 'tp')?'"""
    shape = (4096, 14336)

    async def steps(t: Transcript) -> None:
        mesh = {"shape": [16, 4], "axis_names": ["fsdp", "tp"]}
        data = await t.call("layout", {"devices": "tpu:v5p:4x4x4", "mesh": mesh, "spec": "P('fsdp', 'tp')",
                                       "shape": list(shape), "dtype": "bfloat16"})  # fmt: skip
        real = shardscope.mesh("tpu:v5p:4x4x4", (16, 4), ("fsdp", "tp"))  # libtpu's compile-only devices
        placed = NamedSharding(real, P("fsdp", "tp")).devices_indices_map(shape)
        expected = {d.id: bounds(i, shape) for d, i in placed.items()}
        assert {s["device_id"]: s["index"] for s in data["layout"]["shards"]} == expected
        assert data["layout"]["shard_shape"] == [256, 3584] and data["layout"]["bytes_per_device"] == 256 * 3584 * 2
        bad = {"devices": "tpu:v5p:4x4x4", "mesh": mesh, "spec": "P('tp', 'fsdp')", "shape": [4096, 14337]}
        assert "[indivisible]" in await t.call("layout", bad, ok=False)  # the tool says what to change

    solve("layout-tpu-slice", steps)


@pytest.mark.tpu
def test_topology_of_a_mesh_axis_over_the_torus() -> None:
    """'Does my tp axis run along the torus, and does fsdp cross hosts?'"""

    async def steps(t: Transcript) -> None:
        mesh = {"shape": [16, 4], "axis_names": ["fsdp", "tp"]}
        data = await t.call("topology", {"devices": "tpu:v5p:4x4x4", "mesh": mesh})
        real = shardscope.mesh("tpu:v5p:4x4x4", (16, 4), ("fsdp", "tp"))
        ids = real.device_ids
        coords = {d.id: tuple(d.coords) for d in real.devices.flat}
        axes = {a["name"]: a for a in data["mesh"]["axes"]}
        assert {frozenset(g) for g in axes["tp"]["groups"]} == {frozenset(int(i) for i in row) for row in ids}
        assert {frozenset(g) for g in axes["fsdp"]["groups"]} == {frozenset(int(i) for i in col) for col in ids.T}
        wrap = data["topology"]["wraparound"]
        dims = data["topology"]["topology"]

        def hop(a: int, b: int) -> int:
            return sum(min(abs(x - y), n - abs(x - y)) if w else abs(x - y)
                       for x, y, n, w in zip(coords[a], coords[b], dims, wrap, strict=True))  # fmt: skip

        for a in data["mesh"]["axes"]:
            for group, hops in zip(a["groups"], a["hops"], strict=True):
                ring = [*group, group[0]]
                assert hops == [hop(x, y) for x, y in itertools.pairwise(ring)][: len(hops)]

    solve("topology-mesh-axis", steps)


@pytest.mark.tpu
def test_a_reshards_collectives() -> None:
    """'What does moving my activations from P('x', 'y') to P(None, 'y') cost on a v5e-8?'"""
    shape = (1024, 1024)

    async def steps(t: Transcript) -> None:
        mesh = {"shape": [2, 4], "axis_names": ["x", "y"]}
        data = await t.call("reshard", {"devices": "tpu:v5e:2x4", "mesh": mesh, "shape": list(shape),
                                        "from_spec": "P('x', 'y')", "to_spec": "P(None, 'y')"})  # fmt: skip
        real = shardscope.mesh("tpu:v5e:2x4", (2, 4), ("x", "y"))
        x = jax.ShapeDtypeStruct(shape, jnp.float32, sharding=NamedSharding(real, P("x", "y")))
        compiled = jax.jit(lambda a: a, out_shardings=NamedSharding(real, P(None, "y"))).lower(x).compile()
        assert sorted(c["op"] for c in data["collectives"]) == hlo_ops(compiled.as_text()) == ["all-gather"]
        assert data["collectives"][0]["axes"] == ["x"]
        assert any(e["source"] == "cost_model" and e.get("held_out_median_error") for e in data["evidence"])

    solve("reshard-collectives", steps)


@pytest.mark.tpu
def test_plan_llama_3_8b_on_a_v5p_64() -> None:
    """'Will Llama-3-8B with FSDP × TP fit on a v5p-64, and what will a step cost?' (~30-60 s of compile, twice:
    the tool's and the test's own, for the oracle)."""

    async def steps(t: Transcript) -> None:
        data = await t.call("plan", {"devices": "tpu:v5p:4x4x4", "target": "examples/llama.py:llama_8b_fsdp_tp",
                                     "mesh": {"shape": [16, 4], "axis_names": ["fsdp", "tp"]}})  # fmt: skip
        assert data["fits"] is True and data["verdict"].startswith("fits")
        assert data["target"]["source"].startswith("libtpu compile-only topology v5p:4x4x4")
        assert t.calls[-1]["progress"], "a plan this long reports progress"
        import sys

        sys.path.insert(0, str(ROOT / "examples"))
        from examples.llama import llama_8b_fsdp_tp

        jitted, args = llama_8b_fsdp_tp(shardscope.mesh("tpu:v5p:4x4x4", (16, 4), ("fsdp", "tp")))
        compiled = jitted.lower(*args).compile()
        ma = compiled.memory_analysis()
        mem = data["memory_per_device"]
        for field in ("peak_memory_in_bytes", "argument_size_in_bytes", "output_size_in_bytes", "temp_size_in_bytes"):
            assert mem[field] == getattr(ma, field), field
        assert data["collectives_total"] == len(hlo_ops(compiled.as_text()))

    solve("plan-llama-3-8b-v5p-64", steps)


def _apply(code: str, leaf: str, spec: str) -> str:
    """An agent's edit: the line declaring ``leaf``'s last key gets the fix's spec."""
    key = leaf.rsplit("/", 1)[-1]
    args = spec[spec.index("(") + 1 : spec.rindex(")")]
    lines = code.splitlines()
    for k, line in enumerate(lines):
        if f'"{key}":' in line:
            lines[k] = re.sub(r"sharding=s\([^)]*\)", f"sharding=s({args})", line)
            return "\n".join(lines) + "\n"
    raise AssertionError(f"no line declares {key}")


def _mlp(code: str) -> Any:
    scope: dict[str, Any] = {}
    exec(compile(code, "mlp.py", "exec"), scope)  # the test's own copy of the program the tools compiled
    mesh = jax.make_mesh((2, 4), ("data", "model"), devices=jax.devices()[:8],
                         axis_types=(jax.sharding.AxisType.Auto,) * 2)  # fmt: skip
    jitted, args = scope["build"](mesh)
    return jitted.lower(*args).compile()


def test_explain_an_unexpected_all_gather_and_apply_the_top_fix() -> None:
    mesh = {"shape": [2, 4], "axis_names": ["data", "model"]}

    async def steps(t: Transcript) -> None:
        plan = await t.call("plan", {"devices": "cpu:8", "code": MLP, "mesh": mesh})
        gather = next(c for c in plan["collectives"] if c["op"] == "all-gather")
        assert "all-gather" in hlo_ops(_mlp(MLP).as_text())  # the collective is in JAX's own compile
        why = await t.call("why", {"plan_id": plan["plan_id"], "op": "all-gather"})
        assert why["collective"]["line"] == gather["line"] and "all-gathers" in why["explanation"]
        top = why["fixes"][0]
        assert top["verified"] is True and top["removes"] is True
        fixed = _apply(MLP, top["leaf"], top["spec"])
        after = await t.call("plan", {"devices": "cpu:8", "code": fixed, "mesh": mesh})
        assert not any(c["op"] == "all-gather" and c["line"] == gather["line"] for c in after["collectives"])
        ops = hlo_ops(_mlp(fixed).as_text())
        assert sorted(c["op"] for c in after["collectives"]) == ops
        assert after["collective_bytes_per_step"] == top["bytes_after"]

    solve("why-all-gather-top-fix", steps)


def test_compare_fsdp_with_fsdp_tp() -> None:
    async def steps(t: Transcript) -> None:
        a = await t.call("plan", {"devices": "cpu:8", "target": "examples/llama.py:tiny_fsdp",
                                  "mesh": {"shape": [8], "axis_names": ["fsdp"]}})  # fmt: skip
        b = await t.call("plan", {"devices": "cpu:8", "target": "examples/llama.py:tiny_fsdp_tp",
                                  "mesh": {"shape": [4, 2], "axis_names": ["fsdp", "tp"]}})  # fmt: skip
        data = await t.call("compare", {"a": a["plan_id"], "b": b["plan_id"]})
        import sys

        sys.path.insert(0, str(ROOT / "examples"))
        from examples.llama import tiny_fsdp, tiny_fsdp_tp

        for side, fn, shape, names in ((a, tiny_fsdp, (8,), ("fsdp",)), (b, tiny_fsdp_tp, (4, 2), ("fsdp", "tp"))):
            mesh = jax.make_mesh(shape, names, devices=jax.devices()[:8],
                                 axis_types=(jax.sharding.AxisType.Auto,) * len(shape))  # fmt: skip
            jitted, args = fn(mesh)
            compiled = jitted.lower(*args).compile()
            peak = compiled.memory_analysis().peak_memory_in_bytes
            assert data["sides"][side["plan_id"]]["peak_bytes"] == peak
            assert data["sides"][side["plan_id"]]["collectives"] == len(hlo_ops(compiled.as_text()))
        assert data["compare"]["verdict"]["text"]

    solve("compare-fsdp-fsdp-tp", steps)


@pytest.mark.live
def test_publish_a_link_a_person_can_open(tmp_path: Path) -> None:
    srv = start(tmp_path / "links.db", tmp_path / "server.log")
    url = f"http://127.0.0.1:{srv.port}"
    try:

        async def steps(t: Transcript) -> None:
            plan = await t.call("plan", {"devices": "cpu:8", "code": MLP,
                                         "mesh": {"shape": [2, 4], "axis_names": ["data", "model"]}})  # fmt: skip
            assert plan["link"] and plan["link"].startswith(f"{url}/s/")  # a dashboard is configured: published
            again = await t.call("publish", {"plan_id": plan["plan_id"]})
            assert again["link"] == plan["link"]
            link_id = plan["link"].rsplit("/", 1)[1]
            status, stored = srv.request("GET", f"/api/links/{link_id}")[0], srv.post_json  # noqa: F841
            status, _, body = srv.request("GET", f"/api/links/{link_id}")
            import orjson

            state = orjson.loads(body)["state"]
            status, _, snap = srv.request("GET", f"/api/snapshots/{state['snapshot']}")
            assert status == 200
            served = orjson.loads(snap)
            ma = _mlp(MLP).memory_analysis()
            assert served["jit"]["memory_per_device"]["peak_memory_in_bytes"] == ma.peak_memory_in_bytes

        solve("publish-link", steps, "--url", url)
    finally:
        stop(srv)


@pytest.mark.tpu
def test_a_plan_xla_refuses_says_what_it_needed() -> None:
    """'Will 3 replicated 16 GiB weights fit on a v5e-8?' — no: XLA's refusal, as fields, with what to change."""
    code = """
import jax, jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P

def build(mesh):
    w = jax.ShapeDtypeStruct((65536, 65536), jnp.float32, sharding=NamedSharding(mesh, P()))
    return jax.jit(lambda a, b, c: (a + b) * c), (w, w, w)
"""

    async def steps(t: Transcript) -> None:
        data = await t.call("plan", {"devices": "tpu:v5e:2x4", "code": code,
                                     "mesh": {"shape": [2, 4], "axis_names": ["x", "y"]}})  # fmt: skip
        assert data["fits"] is False and data["refusal"] is not None and data["refusal"]["advice"]
        real = shardscope.mesh("tpu:v5e:2x4", (2, 4), ("x", "y"))
        w = jax.ShapeDtypeStruct((65536, 65536), jnp.float32, sharding=NamedSharding(real, P()))
        with pytest.raises(Exception, match=r"(?i)memory|RESOURCE_EXHAUSTED"):
            jax.jit(lambda a, b, c: (a + b) * c).lower(w, w, w).compile()

    solve("refused-plan", steps)


ACCUMULATION = """
import jax, jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P

def loss(w, x):
    return jnp.mean((x @ w) ** 2)

def step(w, batches):
    def body(acc, x):  # MaxText #5056: each microbatch's gradient is reduced over data inside the loop
        g = jax.grad(loss)(w, x)
        g = jax.lax.with_sharding_constraint(g, NamedSharding(MESH[0], P()))
        return acc + g, None
    grads, _ = jax.lax.scan(body, jnp.zeros_like(w), batches)
    return w - 0.1 * grads

MESH = []

def build(mesh):
    MESH[:] = [mesh]
    w = jax.ShapeDtypeStruct((1024, 1024), jnp.float32, sharding=NamedSharding(mesh, P()))
    xs = jax.ShapeDtypeStruct((4, 64, 1024), jnp.float32, sharding=NamedSharding(mesh, P(None, "data")))
    return jax.jit(step), (w, xs)
"""


def test_find_the_waste_in_an_accumulation_loop() -> None:
    async def steps(t: Transcript) -> None:
        plan = await t.call("plan", {"devices": "cpu:8", "code": ACCUMULATION,
                                     "mesh": {"shape": [8], "axis_names": ["data"]}})  # fmt: skip
        found = await t.call("findings", {"plan_id": plan["plan_id"]})
        loop = [f for f in found["findings"] if f["bytes_per_step"] >= 4 * 1024 * 1024 * 4]
        assert loop and loop[0]["source"].endswith(":10"), loop  # g = jax.grad(loss)(w, x) (line 1 is blank)
        reduced = [c for c in plan["collectives"] if c["op"] == "all-reduce"]
        assert reduced and reduced[0]["repeat"] == 4  # once per microbatch, as the compiled loop says

    solve("findings-accumulation-loop", steps)


def test_make_a_refused_plan_fit() -> None:
    """Issue 33: three replicated 16 GiB arrays on v5e (16 GiB a chip) are refused; ``fit`` answers fixes, each
    compiled: the first that fits is XLA's own peak for those arguments sharded over both mesh axes."""
    code = """
import jax, jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P

def build(mesh):
    w = jax.ShapeDtypeStruct((65536, 65536), jnp.float32, sharding=NamedSharding(mesh, P()))
    return jax.jit(lambda a, b, c: (a + b) * c), (w, w, w)
"""

    async def steps(t: Transcript) -> None:
        data = await t.call("plan", {"devices": "tpu:v5e:2x4", "code": code, "fit": True,
                                     "mesh": {"shape": [2, 4], "axis_names": ["x", "y"]}})  # fmt: skip
        assert data["fits"] is False
        fixes = [f for f in data["fit"]["fixes"] if f["fits"]]
        assert fixes and fixes[0]["verified"] is True and fixes[0]["kind"] == "shard"
        m = shardscope.mesh("tpu:v5e:2x4", (2, 4), ("x", "y"))
        w = jax.ShapeDtypeStruct((65536, 65536), jnp.float32, sharding=NamedSharding(m, P(("x", "y"))))
        xla = jax.jit(lambda a, b, c: (a + b) * c).lower(w, w, w).compile().memory_analysis()
        assert fixes[0]["peak_after"] == xla.peak_memory_in_bytes

    solve("fit-refused-plan", steps)
