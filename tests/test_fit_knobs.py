"""``--fit``'s model knobs (issue 33): a fused attention and vocabulary tiling beside the remat policies and
microbatches, tried only where they can keep less than the model's own values; and ``--slices`` planned on a
hybrid mesh (the first axis across the slices) as a multi-slice run like MaxText #4117 is laid out."""

from __future__ import annotations

import argparse
from typing import Any

import jax
import numpy as np
import pytest

from examples import llama
from sharding_core.capturing import plan
from sharding_core.errors import ShardingError
from sharding_core.planning import fit as fitting
from sharding_core.planning.report import render_fit
from sharding_core.program.targets import mesh
from shardscope import plan_command


def _values(fn: Any, m: Any, params_key: jax.Array) -> tuple[Any, Any]:
    """Real parameters and a batch for the abstract ones ``fn(m)`` builds, on their shardings."""
    _, (params, _, batch) = fn(m)
    leaves, tree = jax.tree.flatten(params)
    keys = jax.random.split(params_key, len(leaves))
    real = [jax.device_put(0.05 * jax.random.normal(k, x.shape, x.dtype), x.sharding)
            for k, x in zip(keys, leaves, strict=True)]  # fmt: skip
    tokens = {n: jax.device_put(jax.random.randint(jax.random.key(7), b.shape, 0, 1024, b.dtype), b.sharding)
              for n, b in batch.items()}  # fmt: skip
    return jax.tree.unflatten(tree, real), tokens


def test_vocab_tiles_give_the_same_loss_and_gradients() -> None:
    """MaxText's vocabulary tiling changes when the logits are made, not what the step computes: the tiny Llama's
    loss and gradients with ``vocab_tiles=4`` equal the untiled step's, run on 8 CPU devices (in float32: the
    sums are taken in another order, which bfloat16 would round apart)."""
    m = mesh("cpu:8", (8,), ("fsdp",))
    fn = llama.tiny_fsdp
    params, batch = _values(fn, m, jax.random.key(0))
    out = {}
    for tiles in (1, 4):
        cfg, knobs = llama.resolve_knobs(
            llama.CONFIGS["tiny"],
            8,
            {**fn.knobs, "vocab_tiles": tiles},  # type: ignore[attr-defined]
            {"compute_dtype": "float32"},
        )
        model = llama.Model(cfg, m, llama.RULES["fsdp"], knobs)
        out[tiles] = jax.jit(jax.value_and_grad(lambda p, b, model=model: llama.loss_fn(model, p, b)))(params, batch)
    (l1, g1), (l4, g4) = out[1], out[4]
    assert float(l1) > 1.0 and np.isclose(float(l4), float(l1), rtol=1e-5)
    for a, b in zip(jax.tree.leaves(g1), jax.tree.leaves(g4), strict=True):
        np.testing.assert_allclose(np.asarray(b), np.asarray(a), rtol=1e-4, atol=1e-7)
    with pytest.raises(ValueError, match="must divide the sequence length"):
        fn(m, vocab_tiles=3)[0].lower(*fn(m, vocab_tiles=3)[1])


def test_optimizer_offload_keeps_the_moments_on_the_host_and_the_step_the_same() -> None:
    """``optimizer_offload=True`` (MaxText's optimizer_memory_host_offload): Adam's moments arrive and leave in
    pinned host memory, the step run on 8 CPU devices gives the same parameters, loss and moments as the step
    that keeps them on the devices (bit for bit)."""
    m = mesh("cpu:8", (8,), ("fsdp",))
    fn = llama.tiny_fsdp
    params, batch = _values(fn, m, jax.random.key(1))
    state = llama.optimizer().init(params)
    out = {}
    for offload in (False, True):
        step, (_, abstract_state, _) = fn(m, optimizer_offload=offload)
        placed = jax.tree.map(lambda x, a: jax.device_put(x.copy(), a.sharding), state, abstract_state)
        kinds = {a.sharding.memory_kind for a in jax.tree.leaves(abstract_state) if a.ndim}
        assert kinds == ({"pinned_host"} if offload else {"device"})
        copy = jax.tree.map(lambda x: x.copy(), params)  # the step donates its parameters and state
        out[offload] = step(copy, placed, batch)
    (p0, s0, l0), (p1, s1, l1) = out[False], out[True]
    assert float(l1) == float(l0)
    for a, b in zip(jax.tree.leaves((p0, s0)), jax.tree.leaves((p1, s1)), strict=True):
        np.testing.assert_array_equal(np.asarray(b), np.asarray(a))
    assert {x.sharding.memory_kind for x in jax.tree.leaves(s1) if x.ndim} == {"pinned_host"}


@pytest.mark.tpu
def test_optimizer_offload_moves_the_moments_to_host_arguments_in_xlas_figures() -> None:
    """On libtpu's compile-only v5e, XLA counts the offloaded moments as host arguments: the device's arguments
    fall by exactly what the host's hold, at least Adam's two moments per device. The plan's memory over program
    order draws host memory beside HBM (issue 33: "HBM, and host memory kinds where the program offloads"): its
    resident host bytes are XLA's host arguments, and a plan that offloads nothing has no host series."""
    m = mesh("tpu:v5e:2x2", (4,), ("fsdp",))
    fn = llama.tiny_fsdp
    ma, snaps, timelines = {}, {}, {}
    for offload in (False, True):
        step, args = fn(m, optimizer_offload=offload)
        ma[offload] = step.lower(*args).compile().memory_analysis()
        snaps[offload] = plan(step, *args)
        timelines[offload] = snaps[offload]["memory_timeline"]
    _, (params, _, _) = fn(m)
    moments = 2 * sum(int(np.prod(x.sharding.shard_shape(x.shape))) * x.dtype.itemsize for x in jax.tree.leaves(params))
    assert ma[False].host_argument_size_in_bytes == 0 and ma[True].host_argument_size_in_bytes >= moments
    drop = ma[False].argument_size_in_bytes - ma[True].argument_size_in_bytes
    assert drop == ma[True].host_argument_size_in_bytes
    assert "host" not in timelines[False]
    host = timelines[True]["host"]
    assert host["resident_bytes"] == ma[True].host_argument_size_in_bytes
    assert host["peak_bytes"] >= host["resident_bytes"] and max(b for _, b in host["points"]) == host["peak_bytes"]
    assert timelines[True]["peak_bytes"] == ma[True].peak_memory_in_bytes  # HBM's series is still XLA's peak
    # the plan's arguments say which groups are in host memory (the HBM bar leaves them out): Adam's moments
    groups = {g["name"]: g for g in snaps[True]["plan"]["arguments"]["groups"]}
    host = {n: g["host_bytes_per_device"] for n, g in groups.items() if g.get("host_bytes_per_device")}
    assert set(host) == {"opt_state.mu", "opt_state.nu"}, groups
    assert all(host[n] == groups[n]["bytes_per_device"] for n in host) and sum(host.values()) == moments
    assert not any(g.get("host_bytes_per_device") for g in snaps[False]["plan"]["arguments"]["groups"])


@pytest.mark.tpu
def test_vocab_tiles_lower_the_peak_xla_reports() -> None:
    """On libtpu's compile-only v5e, a model whose logits dominate (vocabulary 8192, d_model 128, 8 × 512
    tokens): four tiles keep a quarter of the logits live, and XLA's own peak falls (measured: by 36 %)."""
    fn = llama.plan_fn(llama.Config(vocab=8192, d_model=128, n_layers=1, n_heads=2, n_kv_heads=2, head_dim=64,
                                    d_ff=256), "fsdp", 8, 512)  # fmt: skip
    m = mesh("tpu:v5e:2x2", (4,), ("fsdp",))
    peaks = {}
    for tiles in (1, 4):
        step, args = fn(m, vocab_tiles=tiles)
        peaks[tiles] = step.lower(*args).compile().memory_analysis().peak_memory_in_bytes
    assert peaks[4] < 0.75 * peaks[1], peaks


def test_only_knob_values_that_can_keep_less_are_tried() -> None:
    """``--fit``'s variants of a plan function that says its knobs: no remat policy that saves less than its own,
    a fused attention only where it materialises the scores, more tiles and microbatches than its own."""
    m = mesh("cpu:8", (8,), ("fsdp",))
    texts = [v[1] for v in plan_command.knob_variants(llama.tiny_fsdp, m)]  # remat="full", attention="dot"
    assert texts == ["attention='splash'", "attention='flash'", "vocab_tiles=4", "optimizer_offload=True",
                     "microbatches=2", "microbatches=4", "microbatches=8"]  # fmt: skip
    texts = [v[1] for v in plan_command.knob_variants(llama.tiny_fsdp_no_remat, m)]
    assert texts[:3] == ["remat='full'", "remat='minimal'", "remat='dots_with_no_batch_dims'"]
    fused = llama.plan_fn("tiny", "fsdp", 16, 128, remat="minimal", attention="splash", microbatches=4,
                          optimizer_offload=True)  # fmt: skip
    texts = [v[1] for v in plan_command.knob_variants(fused, m)]
    assert texts == ["remat='full'", "vocab_tiles=4", "microbatches=8"]
    assert plan_command.saves_more("remat", "full", None) and not plan_command.saves_more("microbatches", 2, 2)

    def plain(mesh: Any, remat: str = "full") -> Any:  # no FN.knobs: its parameter's default is its own value
        return llama.tiny_fsdp(mesh, remat=remat)

    assert [v[1] for v in plan_command.knob_variants(plain, m)] == []


@pytest.mark.tpu
def test_several_slices_are_planned_on_a_hybrid_mesh() -> None:
    """``--slices 2 --mesh 2x4``: the first axis spans the slices (DCN), the second stays within one (ICI), as
    MaxText's dcn_data_parallelism lays a multi-slice run; ``--dcn`` says it otherwise, and a shape that does not
    multiply to the slices is refused with the one to pass."""
    args = argparse.Namespace(dcn=None, slices=2)
    hybrid = plan_command._hybrid(args, (2, 4))
    assert hybrid == {"order": "hybrid", "dcn_shape": (2, 1)}
    m = mesh("tpu:v4:2x2x1", (2, 4), ("data", "fsdp"), slices=2, **hybrid)
    assert [{d.slice_index for d in row} for row in m.devices] == [{0}, {1}]
    assert plan_command._hybrid(argparse.Namespace(dcn=None, slices=1), (8,)) == {}
    assert plan_command._hybrid(argparse.Namespace(dcn=[1, 2], slices=2), (4, 2)) == {"order": "hybrid",
                                                                                    "dcn_shape": (1, 2)}  # fmt: skip
    with pytest.raises(ShardingError, match="multiply to --slices") as e:
        plan_command._hybrid(argparse.Namespace(dcn=[1, 1], slices=2), (2, 4))
    assert e.value.hint == "e.g. --dcn 2x1"


@pytest.mark.tpu
def test_the_bench_cases_build() -> None:
    """bench/bench_fit.py's cases build (abstract, no compile), so the bench cannot rot unseen: the
    MaxText #4117-shaped 52B on two v4-384 slices, the batch over both slices and each slice's 192 chips."""
    from bench import bench_fit

    assert round(bench_fit.CONFIG_52B.params / 1e9) == 52
    case = bench_fit.CASES["4117"]
    m = mesh("tpu:v4:4x4x12", (2, 192), ("data", "fsdp"), slices=2,
             **plan_command._hybrid(argparse.Namespace(dcn=None, slices=2), (2, 192)))  # fmt: skip
    assert case[case.index("--mesh") + 1] == "2x192" and case[case.index("--slices") + 1] == "2"
    _, (params, _, batch) = bench_fit.maxtext_4117_shaped(m)
    assert batch["tokens"].shape == (7 * 384, 2048)
    assert batch["tokens"].sharding.shard_shape(batch["tokens"].shape) == (7, 2048)
    assert params["layers"]["wq"].sharding.shard_shape(params["layers"]["wq"].shape)[1] == 9216 // 192


def test_the_fit_search_starts_no_compile_it_expects_to_end_past_its_budget() -> None:
    """The 70B's fit search ran 362 s of its 300 s: it started a fifth compile at 295 s. Each compile is now
    expected to take as long as the slowest so far; the candidates left are named (a clock the planner moves)."""
    now = [0.0]

    def clock() -> float:
        return now[0]

    def plan_of(fn: Any, args: Any, kwargs: Any) -> dict[str, Any]:
        now[0] += fn  # this candidate's compile time
        return {"plan": {"fits": True, "step_time": {"expected_seconds": 10.0 - fn / 100}},
                "program": {"memory": {"peak_memory_in_bytes": 1}}}  # fmt: skip

    candidates = [("remat", f"c{k}", t, (), {}) for k, t in enumerate((70.0, 80.0, 75.0, 70.0))]
    out = fitting.verify(candidates, plan_of, seconds=300.0, clock=clock)
    # 0 -> 70, 70 + 70 <= 300 -> 150, 150 + 80 <= 300 -> 225, 225 + 80 > 300: stop
    assert [f["text"] for f in out["fixes"]] == ["c1", "c2", "c0"] and out["not_tried"] == ["c3"]
    assert out["seconds"] == 225.0 and [f["verified_after_seconds"] for f in out["fixes"]] == [150.0, 225.0, 70.0]
    text = render_fit({"needed": True, **out})
    assert "3 fix(es) compiled in 225 s, 3 fit" in text and "not tried (no time left for one more compile): c3" in text
    assert "1. c1: fits, peak 1 B, step 9.2 s expected (verified after 150 s)" in text


@pytest.mark.tpu
def test_a_pinned_replicated_output_is_sharded_by_the_fit() -> None:
    """Issue 33: "fixes on argument shardings, output shardings and donation work on any program". A jit that pins
    its 16 GiB result replicated (``out_shardings=P()``) on v5e (16 GiB a chip) is refused; the fix shards the
    output over the mesh axes it leaves unused, and its peak is XLA's own for that jit."""
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    m = mesh("tpu:v5e:2x4", (2, 4), ("x", "y"))
    a = jax.ShapeDtypeStruct((65536, 65536), np.float32, sharding=NamedSharding(m, P(("x", "y"))))
    fn = jax.jit(lambda v: v * 2, out_shardings=NamedSharding(m, P()))
    snap = plan(fn, a, fit=True)
    assert snap["plan"]["fits"] is False
    fixes = snap["plan"]["fit"]["fixes"]
    best = next(f for f in fixes if f["kind"] == "shard_outputs")  # donation fits too, and ranks by step time
    assert best["fits"] is True and best["verified"] is True, fixes
    assert "output 0 -> P(('x', 'y'), None)" in best["text"]
    want = jax.jit(lambda v: v * 2, out_shardings=NamedSharding(m, P(("x", "y"), None)))
    assert best["peak_after"] == want.lower(a).compile().memory_analysis().peak_memory_in_bytes


def test_the_moe_example_takes_the_same_knobs() -> None:
    """examples/moe.py's plan functions say their knobs too and offload the optimizer state as the Llama's do (a
    knob a model ignored would be "verified" as a fix that changes nothing)."""
    from examples import moe

    m = mesh("cpu:8", (2, 4), ("data", "expert"))
    assert moe.tiny_ep.knobs["optimizer_offload"] is False  # type: ignore[attr-defined]
    _, (_, state, _) = moe.tiny_ep(m, optimizer_offload=True)
    assert {x.sharding.memory_kind for x in jax.tree.leaves(state) if x.ndim} == {"pinned_host"}
    texts = [v[1] for v in plan_command.knob_variants(moe.tiny_ep, m)]
    assert "optimizer_offload=True" in texts and not any(t.startswith("remat=") for t in texts)
