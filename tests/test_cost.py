"""Cost estimates: each formula against the worked examples of "How to Scale Your Model" and hand-computed
cases, the estimates of collectives on real device sets' topologies, rooflines, comparisons, and the
hardware table (every figure sourced, the docs' copy current).

Book examples (https://jax-ml.github.io/scaling-book/sharding/ and /gpus/):

* Pop quiz 2 (sharding): AllGather_Y([E_Y, F]) on a TPU v5e, mesh {'X': 8, 'Y': 4}, E = 2048, F = 8192 bf16:
  no wraparound on an axis of 4, so ``T = 3 · 8.4e6 / 4.5e10 ≈ 560 us``.
* Question 2 (sharding): TPU v4p 4x4x4 (wraparound everywhere), B = 1024, D = 4096 bf16:
  AllGather_X([B_X, D_Y]) = ``2BD / (9e10 · 4) = 23 us``; AllGather_XY = ``2BD / (2 · 9e10) = 46 us``.
* Question 3 (sharding): AllGather_X([B_X]) with B = 128 bf16 on the same slice is latency-bound: 2 hops,
  ``≈ 2 us``.
* The summary table (sharding): ReduceScatter costs what an AllGather does, AllReduce twice, AllToAll a
  quarter on a bidirectional ring.
* Pop quiz 1 (GPUs): AllGather(bf16[B_X, F]) on an 8xH100 node, B = 1024, F = 16384:
  ``2BF · 7 / (8 · 450e9) ≈ 65 us``; AllToAll within a node: ``B · (N − 1) / (W · N²)``.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from sharding_core.cost import collectives as cc
from sharding_core.cost.collectives import RingAxis, communication, estimate_dcn_step, estimate_one
from sharding_core.cost.compare import compare, kernel_summary, snapshot_summary
from sharding_core.cost.context import NO_CPU_FIGURES, context_for
from sharding_core.cost.roofline import roofline
from sharding_core.devices import TPU_GENERATIONS, parse_devices
from sharding_core.hardware import (
    DCN_STEP_LATENCY,
    GIB,
    GPU_FIGURES,
    NETWORK_STEP_LATENCY,
    SOURCES,
    TPU_FIGURES,
    Figure,
    figures_for_kind,
    markdown_table,
    peak_flops,
)
from sharding_core.units import fmt_seconds

V5E_LINK = 4.5e10
V4_LINK = 4.5e10
HOP = 1e-6


def close(a: float, b: float, rel: float = 1e-9) -> bool:
    return math.isclose(a, b, rel_tol=rel)


# ---------------------------------------------------------------- the book's worked examples


def test_book_pop_quiz_2_v5e_axis_of_4_without_wraparound() -> None:
    v = 2048 * 8192 * 2  # bf16[E, F] gathered: 33.5e6 bytes, 8.4e6 per shard
    t = cc.ici_all_gather(v, [RingAxis(4, wraparound=False)], V5E_LINK, HOP)
    assert close(t.seconds, 3 * (v / 4) / 4.5e10)
    assert 555e-6 < t.seconds < 565e-6  # the book: 3 * 8.4e6 / 4.5e10 = 560 us
    assert t.bound == "bandwidth" and t.hops == 3


def test_book_question_2_v4_cube_with_wraparound() -> None:
    b, d = 1024, 4096
    x = cc.ici_all_gather(2 * b * d / 4, [RingAxis(4, True)], V4_LINK, HOP)
    assert close(x.seconds, 2 * b * d / (9e10 * 4))  # V / W_bidi
    assert round(x.seconds * 1e6) == 23
    xy = cc.ici_all_gather(2 * b * d, [RingAxis(4, True), RingAxis(4, True)], V4_LINK, HOP)
    assert close(xy.seconds, 2 * b * d / (2 * 9e10))  # twice the axes, twice the bandwidth
    assert round(xy.seconds * 1e6) == 47  # the book rounds 46.6 us to 46
    # AllReduce_Z([B_X, D_Y]{U_Z}), hand-computed: each device holds bf16[B/4, D/4]; twice an all-gather of it
    z = cc.ici_all_reduce(2 * (b // 4) * (d // 4), [RingAxis(4, True)], V4_LINK, HOP)
    assert close(z.seconds, 2 * 2 * (b // 4) * (d // 4) / 9e10)


def test_book_question_3_latency_bound() -> None:
    t = cc.ici_all_gather(128 * 2, [RingAxis(4, True)], V4_LINK, HOP)
    assert t.bound == "latency" and close(t.seconds, 2e-6)  # 2 hops of ~1 us


def test_book_summary_reduce_scatter_all_reduce_all_to_all() -> None:
    axes = [RingAxis(16, True)]
    b, n = 1 << 20, 16
    gather = cc.ici_all_gather(b * n, axes, V5E_LINK, HOP).seconds
    assert close(cc.ici_reduce_scatter(b, n, axes, V5E_LINK, HOP).seconds, gather)  # same as AllGather
    assert close(cc.ici_all_reduce(b * n, axes, V5E_LINK, HOP).seconds, 2 * gather)  # 2 x AllGather
    assert close(cc.ici_all_to_all(b, n, axes, V5E_LINK, HOP).seconds, gather / 4)  # AllGather / 4


def test_book_gpu_pop_quiz_1_and_all_to_all() -> None:
    h100 = GPU_FIGURES["h100"].nvlink_bandwidth.value
    assert h100 == 450e9
    v = 2 * 1024 * 16384
    t = cc.switched_all_gather(v, 8, h100)
    assert close(t, v * 7 / (8 * 450e9)) and round(t * 1e6) == 65
    total = 8 * (1 << 20)  # B bytes in all, B / N per GPU
    assert close(cc.switched_all_to_all(total / 8, 8, h100), total * 7 / (h100 * 64))


def test_v5p_axes_with_and_without_wraparound() -> None:
    """The book's formulas on v5p (9e10 bytes/s a link one way): a full cube wraps, a 2x4x4 slice does not."""
    nbytes = 1 << 24
    cube = context_for(parse_devices("tpu:v5p:4x4x4"))
    small = context_for(parse_devices("tpu:v5p:2x4x4"))
    z_cube = [[x + 4 * y + 16 * z for z in range(4)] for x in range(4) for y in range(4)]  # along z, 4 chips
    z_small = [[x + 2 * y + 8 * z for z in range(4)] for x in range(2) for y in range(4)]
    w = TPU_FIGURES["v5p"].ici_link_bandwidth.value
    assert w == 9e10
    want = {  # op: (with wraparound: ⌊4/2⌋ steps, without: 3 steps), V as each op defines it
        "all-gather": (nbytes / (2 * w), 3 * (nbytes / 4) / w),
        "reduce-scatter": (4 * nbytes / (2 * w), 3 * nbytes / w),
        "all-reduce": (2 * nbytes / (2 * w), 2 * 3 * (nbytes / 4) / w),
        # the book's bisection rule, V = 4 · bytes: V · k / (4 · N · W_ici), W_ici = 2 W with wraparound, W without
        "all-to-all": (4 * nbytes / (4 * 2 * w), 4 * nbytes / (4 * w)),
    }
    for op, (wrapped, line) in want.items():
        e_cube = estimate_one({"op": op, "bytes": nbytes, "groups": z_cube}, cube)
        e_small = estimate_one({"op": op, "bytes": nbytes, "groups": z_small}, small)
        assert e_cube["inputs"]["torus"] == [
            {"torus_axis": "z", "members": 4, "wraparound": True, "stride": 1, "steps": 2}
        ]
        assert e_small["inputs"]["torus"][0]["wraparound"] is False
        assert close(e_cube["seconds"], wrapped), op
        assert close(e_small["seconds"], line), op
        assert e_cube["seconds"] < e_small["seconds"]


# ---------------------------------------------------------------- hand-computed rings


@pytest.mark.parametrize(
    ("k", "wrap", "steps"), [(4, True, 2), (4, False, 3), (5, True, 2), (16, True, 8), (8, False, 7)]
)
def test_ring_steps(k: int, wrap: bool, steps: int) -> None:
    a = RingAxis(k, wrap)
    assert a.steps == steps and close(a.links, k / steps)


def test_a_sub_axis_shares_its_links() -> None:
    # every other chip along an axis of 8: 4 members 2 links apart; the interleaved group shares the links
    dense = cc.ici_all_gather(1e8, [RingAxis(4, False)], V5E_LINK, HOP).seconds
    strided = cc.ici_all_gather(1e8, [RingAxis(4, False, stride=2)], V5E_LINK, HOP).seconds
    assert close(strided, 2 * dense)


def test_doubling_the_bytes_doubles_the_estimate() -> None:
    ctx = context_for(parse_devices("tpu:v5e:16x16"))
    gpu = context_for(parse_devices("gpu:h100:4x8"))
    row = [list(range(16))]
    for op in ("all-gather", "reduce-scatter", "all-reduce", "all-to-all"):
        one = estimate_one({"op": op, "bytes": 1 << 24, "groups": row}, ctx)["seconds"]
        two = estimate_one({"op": op, "bytes": 2 << 24, "groups": row}, ctx)["seconds"]
        assert close(two, 2 * one), op
        g_one = estimate_one({"op": op, "bytes": 1 << 24, "groups": [list(range(32))]}, gpu)["seconds"]
        g_two = estimate_one({"op": op, "bytes": 2 << 24, "groups": [list(range(32))]}, gpu)["seconds"]
        assert close(g_two, 2 * g_one), op
    pairs = [[i, (i + 1) % 16] for i in range(16)]
    p1 = estimate_one({"op": "collective-permute", "bytes": 1 << 24, "pairs": pairs}, ctx)["seconds"]
    p2 = estimate_one({"op": "collective-permute", "bytes": 2 << 24, "pairs": pairs}, ctx)["seconds"]
    assert close(p2, 2 * p1)


def test_a_16_chip_v5e_axis_with_wraparound_beats_an_8_chip_one_per_byte() -> None:
    nbytes = 1 << 26
    wide = context_for(parse_devices("tpu:v5e:16x16"))  # an axis of 16 wraps
    narrow = context_for(parse_devices("tpu:v5e:8x8"))  # an axis of 8 does not
    e16 = estimate_one({"op": "all-gather", "bytes": nbytes, "groups": [list(range(16))]}, wide)
    e8 = estimate_one({"op": "all-gather", "bytes": nbytes, "groups": [list(range(8))]}, narrow)
    assert e16["inputs"]["torus"] == [{"torus_axis": "x", "members": 16, "wraparound": True, "stride": 1, "steps": 8}]
    assert e8["inputs"]["torus"][0]["wraparound"] is False
    assert close(e16["seconds"], nbytes / (2 * V5E_LINK))  # ⌊16/2⌋ · (V/16) / W
    assert close(e8["seconds"], 7 * (nbytes / 8) / V5E_LINK)  # 7 · (V/8) / W
    assert e16["seconds"] < e8["seconds"]


def test_a_dcn_step_is_slower_than_the_same_bytes_over_ici() -> None:
    two_slices = parse_devices("tpu:v5p:2x2x1", slices=2)
    ctx = context_for(two_slices)
    ids = [d.id for d in two_slices.devices]
    nbytes = 1 << 24
    over_ici = estimate_one({"op": "all-reduce", "bytes": nbytes, "groups": [ids[:2]]}, ctx)
    over_dcn = estimate_one({"op": "all-reduce", "bytes": nbytes, "groups": [[ids[0], ids[4]]]}, ctx)
    assert over_ici["fabric"] == "ici" and over_dcn["fabric"] == "dcn"
    assert over_dcn["seconds"] > 10 * over_ici["seconds"]
    # the DCN step libtpu writes: 2 (S - 1) / S · V / W_dcn, W_dcn = 50 Gbps a chip, or 2 steps of latency
    step = estimate_dcn_step({"op": "all-reduce", "bytes": nbytes, "groups": [[ids[0], ids[4]]]}, ctx)
    assert step["fabric"] == "dcn"
    assert close(step["seconds"], max(2 * nbytes * 0.5 / (50e9 / 8), 2 * DCN_STEP_LATENCY.value))
    assert close(step["seconds"], over_dcn["seconds"])  # one device per slice: the whole group is the DCN step


def test_two_level_all_reduce_inside_then_across_slices() -> None:
    devset = parse_devices("tpu:v5e:2x2", slices=2)
    ctx = context_for(devset)
    ids = [d.id for d in devset.devices]
    nbytes = 1 << 24
    est = estimate_one({"op": "all-reduce", "bytes": nbytes, "groups": [ids]}, ctx)
    inner = cc.ici_all_reduce(nbytes, [RingAxis(2, False), RingAxis(2, False)], V5E_LINK, HOP).seconds
    # V / n over S = 2, 25 Gbps a chip, and a reduction's two DCN steps of latency
    outer = max(cc.switched_all_reduce(nbytes / 4, 2, 200e9 / 8 / 8), 2 * DCN_STEP_LATENCY.value)
    assert close(est["seconds"], inner + outer) and est["fabric"] == "dcn"
    assert est["inputs"]["islands"] == 2 and est["inputs"]["per_island"] == 4
    assert est["inputs"]["combine"] == "sum"  # the slice's step, then the DCN step


def test_gpu_hosts_take_the_slower_level() -> None:
    """The book (gpus, "Cross-node collectives"): T = max(T_node, T_scale-out) for AllGather/ReduceScatter,
    an AllReduce twice that; not the sum of the levels."""
    ctx = context_for(parse_devices("gpu:h100:4x8"))
    nbytes = 1 << 24
    inside = estimate_one({"op": "all-gather", "bytes": nbytes, "groups": [list(range(8))]}, ctx)
    assert inside["fabric"] == "nvlink" and close(inside["seconds"], nbytes * 7 / (8 * 450e9))
    across = estimate_one({"op": "all-gather", "bytes": nbytes, "groups": [list(range(32))]}, ctx)
    assert across["fabric"] == "network" and across["inputs"]["combine"] == "max"
    nvlink = nbytes * 7 / (8 * 450e9)
    network = max((nbytes / 8) * 3 / (4 * 50e9), 2 * NETWORK_STEP_LATENCY.value)  # ⌈log2 4⌉ = 2 steps
    assert close(across["seconds"], max(nvlink, network))
    # the L4 has no NVLink figure: no estimate, and why
    l4 = estimate_one(
        {"op": "all-gather", "bytes": nbytes, "groups": [[0, 1]]}, context_for(parse_devices("gpu:l4:1x2"))
    )
    assert l4["seconds"] is None and "NVLink" in l4["why"]


def test_permute_routes_pairs_on_the_torus() -> None:
    ctx = context_for(parse_devices("tpu:v5e:4x4"))
    nbytes = 1 << 20
    # a ring shift along a line of 4: the closing pair crosses 3 links, but alone in its direction
    ring = [[i, (i + 1) % 4] for i in range(4)]
    est = estimate_one({"op": "collective-permute", "bytes": nbytes, "pairs": ring}, ctx)
    assert est["inputs"]["busiest_link"] == 1 and est["inputs"]["hops"] == 3
    assert close(est["seconds"], nbytes / V5E_LINK)
    # everyone sends 2 chips to the right along x: the middle links carry 2 transfers
    shift = [[i, i + 2] for i in range(2)] + [[4 + i, 4 + i + 2] for i in range(2)]
    two = estimate_one({"op": "collective-permute", "bytes": nbytes, "pairs": shift}, ctx)
    assert two["inputs"]["busiest_link"] == 2 and close(two["seconds"], 2 * nbytes / V5E_LINK)
    same = estimate_one({"op": "collective-permute", "bytes": nbytes, "pairs": [[3, 3]]}, ctx)
    assert same["seconds"] == 0.0


def test_cores_of_one_chip_share_its_links() -> None:
    ctx = context_for(parse_devices("tpu:7x:2x2x1"))  # two devices a chip
    nbytes = 1 << 24
    # devices 0 and 2 are core 0 of chips (0,0) and (1,0); the cores 1 run the same collective at once
    est = estimate_one({"op": "all-gather", "bytes": nbytes, "groups": [[0, 2], [1, 3]]}, ctx)
    assert est["inputs"]["share"] == 2
    on_chip = estimate_one({"op": "all-gather", "bytes": nbytes, "groups": [[0, 1], [2, 3]]}, ctx)
    assert on_chip["seconds"] == 0.0 and "one chip" in on_chip["formula"]


def test_no_figures_say_why() -> None:
    c = {"op": "all-reduce", "bytes": 64, "groups": [[0, 1]]}
    assert estimate_one(c, context_for(parse_devices("cpu:8"))) == {"seconds": None, "why": NO_CPU_FIGURES}
    v2 = estimate_one(c, context_for(parse_devices("tpu:v2:2x2")))
    assert v2["seconds"] is None and "v2" in v2["why"]
    unknown = estimate_one(
        {"op": "all-reduce", "bytes": 64, "groups": [[0, 99]]}, context_for(parse_devices("tpu:v5e:2x2"))
    )
    assert unknown["seconds"] is None and "not in" in unknown["why"]
    assert estimate_one(c, None)["seconds"] is None


def test_estimate_has_the_contract_shape() -> None:
    est = estimate_one({"op": "all-gather", "bytes": 4096, "groups": [[0, 1, 2, 3]]},
                              context_for(parse_devices("tpu:v5p:2x2x1")))  # fmt: skip
    assert set(est) == {"seconds", "bound_seconds", "expected_seconds", "formula", "inputs", "fabric"}
    assert est["fabric"] in cc.FABRICS and isinstance(est["seconds"], float) and est["formula"]
    assert est["seconds"] == est["bound_seconds"] < est["expected_seconds"]


def test_a_6144_chip_collective_is_estimated_quickly() -> None:
    import time

    ctx = context_for(parse_devices("tpu:v5p:16x16x24"))
    ids = np.asarray([d.id for d in parse_devices("tpu:v5p:16x16x24").devices]).reshape(24, 256)
    c = {"op": "all-reduce", "bytes": 1 << 20, "groups": ids.T.tolist()}  # 256 groups of 24 along z
    t0 = time.process_time()  # this process's CPU time: a busy machine does not move it
    est = estimate_one(c, ctx)
    assert time.process_time() - t0 < 0.5
    assert est["inputs"]["groups"] == 256 and est["seconds"] > 0


# ---------------------------------------------------------------- roofline


def test_roofline_bound_and_hbm_fit() -> None:
    ctx = context_for(parse_devices("tpu:v5e:2x2"))
    bandwidth = 800 * GIB  # v5e HBM bandwidth per chip: 800 GiBps (the Cloud TPU v5e page)
    work = {"flops": 197e12 * 1e-3, "bytes_accessed": 1e15}  # XLA's bytes accessed is not the HBM traffic
    memory = {"argument_size_in_bytes": int(bandwidth * 1.5e-3), "output_size_in_bytes": int(bandwidth * 0.5e-3),
              "peak_memory_in_bytes": 1 << 30}  # fmt: skip
    coll = [{"estimate": {"seconds": 5e-4, "expected_seconds": 6e-4}, "repeat": 2}]
    r = roofline(work, memory, coll, ctx, "bfloat16", "test")
    assert close(r["compute_seconds"], 1e-3) and close(r["memory_seconds"], 2e-3, 1e-6)
    assert r["communication_seconds"] == 1e-3 and r["communication_expected_seconds"] == 1.2e-3  # × repeat 2
    assert r["bound"] == "memory" and r["inputs"]["hbm_traffic_from"] == "arguments + outputs"
    assert close(r["lower_bound_seconds"], 2e-3, 1e-6) and close(r["serial_seconds"], 4e-3, 1e-6)
    assert r["hbm"]["fits"] is True and r["hbm"]["text"].startswith("fits:")
    over = roofline(work, {"peak_memory_in_bytes": 16 * GIB + 3 * 2**30}, coll, ctx, "bfloat16", "test")  # 16 GiB
    assert over["hbm"]["fits"] is False and over["hbm"]["text"].startswith("over by 3.0 GiB")
    cpu = roofline(work, {"peak_memory_in_bytes": 1}, coll, context_for(parse_devices("cpu:4")), "float32", "test")
    assert cpu["why"] == NO_CPU_FIGURES and cpu["lower_bound_seconds"] is None and cpu["hbm"]["fits"] is None


def test_peak_per_dtype_is_labelled() -> None:
    v5e = TPU_FIGURES["v5e"]
    fig, note = peak_flops(v5e, "float32")
    assert fig is not None and fig.value == 197e12 and "bf16" in note
    assert peak_flops(v5e, "int32")[0] is None
    fig7, _ = peak_flops(TPU_FIGURES["7x"], "bfloat16")
    assert fig7 is not None and fig7.value == 2307e12 / 2  # per device: two devices a chip
    v100, note = peak_flops(GPU_FIGURES["v100"], "float32")
    assert v100 is not None and v100.value == 15.7e12 and "TF32" in note


# ---------------------------------------------------------------- compare


def _run(seconds: float | None, nbytes: int, fits: bool = True) -> dict[str, Any]:
    est = {"seconds": seconds, "formula": "f", "inputs": {}, "fabric": "ici"} if seconds is not None else {
        "seconds": None, "why": NO_CPU_FIGURES}  # fmt: skip
    roof = {"lower_bound_seconds": seconds, "bound": "communication", "hbm": {"fits": fits, "text": "x"}}
    return {
        "kernel": "k", "devices_key": "d", "mesh": {"shape": [2], "axis_names": ["x"]}, "inputs": [], "outputs": [],
        "collectives": [{"op": "all-gather", "bytes": nbytes, "groups": [[0, 1]], "axes_text": "x", "estimate": est}],
        "roofline": roof if seconds is not None else {"lower_bound_seconds": None, "hbm": {"fits": None}}, "tpu": None,
    }  # fmt: skip


def test_compare_verdicts() -> None:
    faster = compare(kernel_summary(_run(1e-3, 100), "A"), kernel_summary(_run(4e-3, 400), "B"))
    assert faster["verdict"]["cheaper"] == "a" and faster["verdict"]["by"] == "lower bound on run time"
    assert close(faster["verdict"]["ratio"], 4) and faster["collectives"][0]["delta_bytes"] == 300
    same = compare(kernel_summary(_run(1e-3, 100), "A"), kernel_summary(_run(1.001e-3, 100), "B"))
    assert same["verdict"]["cheaper"] is None
    cpu = compare(kernel_summary(_run(None, 800), "A"), kernel_summary(_run(None, 100), "B"))
    assert cpu["verdict"]["cheaper"] == "b" and cpu["verdict"]["by"] == "bytes the collectives move"
    fits = compare(kernel_summary(_run(1e-3, 100, fits=False), "A"), kernel_summary(_run(4e-3, 400), "B"))
    assert fits["verdict"]["cheaper"] == "b" and "fits in HBM" in fits["verdict"]["text"]


def test_compare_snapshot_sides() -> None:
    snap = {"name": "s", "platform": "cpu", "device_kind": "cpu", "collectives": [], "leaves": [], "layouts": [],
            "jit": {"memory_per_device": {"argument_size_in_bytes": 10, "output_size_in_bytes": 5,
                                          "temp_size_in_bytes": 1, "alias_size_in_bytes": 0}}}  # fmt: skip
    s = snapshot_summary(snap, "A")
    assert s["hbm"]["bytes_per_device"] == 16 and s["roofline"] is None
    assert compare(s, s)["verdict"]["cheaper"] is None


# ---------------------------------------------------------------- the hardware table


def test_every_figure_names_a_source() -> None:
    figures: list[Figure] = []
    for hw in [*TPU_FIGURES.values(), *GPU_FIGURES.values()]:
        figures += list(hw.peak.values())
        figures += [getattr(hw, f) for f in vars(hw) if isinstance(getattr(hw, f), Figure)]
    for fig in figures:
        assert fig.source in SOURCES, fig
        assert fig.value is not None or fig.note, "a missing figure says why"
        assert fig.value is None or fig.value > 0


def test_the_hardware_reference_page_has_the_table() -> None:
    # The page is generated (docs/gen_reference.py; tests/test_docs.py checks every generated page): here,
    # that what it holds is this table with every source's address.
    page = (Path(__file__).resolve().parents[1] / "docs" / "reference" / "hardware.md").read_text()
    assert markdown_table() in page, "docs/reference/hardware.md is stale: run `make docs-gen`"
    for src in SOURCES.values():
        assert src.url in page


def test_topology_reads_wraparound_from_the_table() -> None:
    from sharding_core.topology import topology

    assert topology(parse_devices("tpu:v5e:8x16"))["wraparound"] == [False, True]
    assert topology(parse_devices("tpu:v4:4x4x8"))["wraparound"] == [True, True, True]
    assert re.search("16 chips", TPU_FIGURES["v5e"].wraparound_rule)


# ---------------------------------------------------------------- issue 19's reproduced items (regressions)

MiB = 1 << 20


def est(devices: str, op: str, nbytes: float, groups: list[list[int]], **kw: int) -> dict[str, Any]:
    return estimate_one({"op": op, "bytes": nbytes, "groups": groups}, context_for(parse_devices(devices, **kw)))


@pytest.mark.parametrize(
    ("devices", "chips", "longest", "wraps"),
    [("tpu:v5e:16x16", 256, 16, True), ("tpu:v5p:4x4x4", 64, 4, True), ("tpu:v5e:4x4", 16, 4, False)],
)
def test_all_to_all_over_several_axes_is_the_bisection_rule(
    devices: str, chips: int, longest: int, wraps: bool
) -> None:
    """The book (sharding, "Our final communication primitive: the AllToAll"): T = V · max(A, B, …) / (4 · N ·
    W_ici), W_ici = 2 · W_link with wraparound, W_link without. Was +700 % (v5e 16x16), +433 % (v5p 4x4x4),
    +50 % (v5e 4x4): the old model scaled with the number of axes."""
    hw = TPU_FIGURES[devices.split(":")[1]]
    w = hw.ici_link_bandwidth.value
    assert w is not None
    w_ici = (2 if wraps else 1) * w
    e = est(devices, "all-to-all", MiB, [list(range(chips))])
    v = MiB * chips
    assert close(e["inputs"]["volume_bytes"], v) and e["inputs"]["torus"][0]["wraparound"] is wraps
    assert close(e["seconds"], max(v * longest / (4 * chips * w_ici), e["inputs"]["hops"] * HOP))
    big = est(devices, "all-to-all", 64 * MiB, [list(range(chips))])  # bandwidth-bound: exactly the rule
    assert close(big["seconds"], 64 * v * longest / (4 * chips * w_ici))


@pytest.mark.parametrize("k", [2, 4])
def test_all_to_all_on_one_axis_without_wraparound_is_v_over_4_w_link(k: int) -> None:
    """The book: no wraparound doubles V / (4 · W_ici), i.e. V / (4 · W_link). Was −25 % (k = 4) to −50 % (k = 2)."""
    e = est("tpu:v5e:4x4", "all-to-all", 64 * MiB, [list(range(k))])
    assert close(e["seconds"], 64 * MiB * k / (4 * V5E_LINK))


def test_gathers_without_wraparound_respect_the_corner_chip() -> None:
    """A 16-chip all-gather of 16 MiB on v5e 4x4 showed 139.8 µs, but a corner chip has two links and must
    receive 15/16 of the data: ≥ 174.8 µs (the book's TPU Q5 sends over both ports of a corner chip)."""
    corner = (15 / 16) * 16 * MiB / (2 * V5E_LINK)
    assert round(corner * 1e6, 1) == 174.8
    gather = est("tpu:v5e:4x4", "all-gather", 16 * MiB, [list(range(16))])
    assert close(gather["seconds"], corner)
    scatter = est("tpu:v5e:4x4", "reduce-scatter", MiB, [list(range(16))])  # result 1 MiB: 16 MiB scattered
    assert close(scatter["seconds"], corner)
    reduce = est("tpu:v5e:4x4", "all-reduce", 16 * MiB, [list(range(16))])
    assert close(reduce["seconds"], 2 * corner)
    # with wraparound on both axes (v5e 16x16) the ring is faster than the floor: the book's 2-axis formula
    ring = est("tpu:v5e:16x16", "all-gather", 16 * MiB, [[x + 16 * y for x in range(16)] for y in range(1)])
    assert close(ring["seconds"], 16 * MiB / (2 * V5E_LINK))


def test_gpu_all_to_all_across_hosts_is_the_network_term() -> None:
    """The book (gpus): an N-way AllToAll spanning M = N / 8 hosts costs B (M − 1) / (M² · W_node). The old model
    added the NVLink time: +19 % on 2 × 8 H100 (and +64 % for an all-gather)."""
    b = 64 * MiB  # per GPU
    e = est("gpu:h100:2x8", "all-to-all", b, [list(range(16))])
    big_b, m, w_node = b * 16, 2, 8 * 50e9
    assert close(e["seconds"], big_b * (m - 1) / (m**2 * w_node))
    gather = est("gpu:h100:2x8", "all-gather", b, [list(range(16))])
    assert close(gather["seconds"], max(b * 7 / (8 * 450e9), b * (m - 1) / (m * w_node)))


def test_dcn_steps_have_a_latency() -> None:
    """A DCN-only reshard estimated at 10 ns, and compare called it "37× cheaper" than a 1 µs in-slice one."""
    devset = parse_devices("tpu:v5e:2x2", slices=2)
    ctx = context_for(devset)
    tiny = estimate_dcn_step({"op": "collective-permute", "bytes": 32, "pairs": [[100002, 200000], [200000, 100002]]},
                             ctx)  # fmt: skip
    assert tiny["seconds"] == pytest.approx(DCN_STEP_LATENCY.value) and tiny["seconds"] > 1e-6
    in_slice = estimate_one({"op": "all-gather", "bytes": 64, "groups": [[100000, 100001]]}, ctx)
    assert in_slice["seconds"] == pytest.approx(HOP) and tiny["seconds"] > in_slice["seconds"]
    assert DCN_STEP_LATENCY.source in SOURCES and NETWORK_STEP_LATENCY.source in SOURCES


def test_inputs_name_mesh_axes_and_torus_dimensions_apart() -> None:
    """``inputs.axes`` listed torus dimensions x/y/z beside the mesh's axis names (a collective over mesh ``x``
    listed torus ``y``)."""
    ctx = context_for(parse_devices("tpu:v5e:4x4"))
    c = {"op": "all-gather", "bytes": MiB, "groups": [[0, 4, 8, 12]], "axes": ["x"]}  # mesh x runs along torus y
    e = estimate_one(c, ctx)
    assert e["inputs"]["axes"] == ["x"]
    assert [t["torus_axis"] for t in e["inputs"]["torus"]] == ["y"]


def test_hbm_capacities_and_bandwidth_as_the_sources_print_them() -> None:
    """v5e and v6e HBM are 16 GiB and 32 GiB (the book; the TPU7x page's table), not 16 and 32 GB (−6.9 %, which
    flips "fits" near the limit); the v5e page now gives 800 GiBps."""
    assert TPU_FIGURES["v5e"].hbm_bytes.value == 16 * GIB and TPU_FIGURES["v6e"].hbm_bytes.value == 32 * GIB
    assert TPU_FIGURES["v5e"].hbm_bandwidth.value == 800 * GIB
    ctx = context_for(parse_devices("tpu:v5e:2x2"))
    near = roofline({}, {"peak_memory_in_bytes": 16 * 10**9 + 10**9}, [], ctx, "bfloat16", "test")  # 17 GB < 16 GiB
    assert near["hbm"]["fits"] is True


def test_one_tpu_generation_record() -> None:
    for name, hw in TPU_FIGURES.items():
        gen = TPU_GENERATIONS[name]
        assert hw.devices_per_chip == gen.cores_per_chip and hw.torus == f"{gen.dims}D torus"
        assert figures_for_kind("tpu", gen.device_kind) is hw
        assert all(figures_for_kind("tpu", alias) is hw for alias in gen.device_kind_aliases)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(279.6e-6, "280 µs"), (139.8e-6, "140 µs"), (100e-6, "100 µs"), (1.4e-3, "1.4 ms"), (999.96e-6, "1 ms"),
     (2.1, "2.1 s"), (93.24e-6, "93.2 µs"), (0.0, "0 s"), (None, "—")],
)  # fmt: skip
def test_seconds_read_as_they_are(seconds: float | None, text: str) -> None:
    """fmtSeconds stripped integer zeros (279.6 µs read "28 µs"); the Python formatter is its twin."""
    assert fmt_seconds(seconds) == text


def test_communication_totals_count_loops() -> None:
    c = {"op": "all-reduce", "bytes": 100, "repeat": 10, "estimate": {"seconds": 2e-6, "expected_seconds": 3e-6}}
    once = {"op": "all-gather", "bytes": 50, "estimate": {"seconds": 1e-6, "expected_seconds": 1e-6}}
    t = communication([c, once], "p")
    assert t == {"count": 2, "runs": 11, "bytes": 1050, "seconds": pytest.approx(21e-6),
                 "bound_seconds": pytest.approx(21e-6), "expected_seconds": pytest.approx(31e-6),
                 "without_estimate": 0, "program": "p"}  # fmt: skip
