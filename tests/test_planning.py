"""Planning the user's own program on hardware they don't have (issue 25): compile-only meshes, plans of a
Llama-style training step on libtpu's topologies, refusals for memory, loop-corrected flops, publishing
compile-only and ring-permute programs, ``shardscope plan`` with ``--baseline``.

The oracles: XLA's own ``memory_analysis()`` and optimized HLO (read here by a reader independent of the
product's), XLA's ``cost_analysis`` for a loop body counted once, the step's matmul flops counted by hand
from the model's shapes (the scaling book's 2·m·n·k per matmul, "Transformer Math"), and the numbers in
XLA's own refusal message.
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import jax
import numpy as np
import orjson
import pytest
from fastapi.testclient import TestClient
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from examples import llama
from sharding_core.capturing import plan
from sharding_core.planning import baseline
from sharding_core.program import memory
from sharding_core.program.targets import mesh, strip_fields, target_of
from sharding_core.snapshot.format import check_snapshot
from tests.plugins.live import Server

ROOT = Path(__file__).resolve().parent.parent

TINY = llama.CONFIGS["tiny"]
BATCH, SEQ = 16, 128


# ---- an HLO reader independent of the product's -------------------------------------------------------

_COLLECTIVE = re.compile(
    r"^\s*(?:ROOT\s+)?%(?P<name>[\w.\-]+) = .*? (?P<op>(?:all-gather|all-reduce|reduce-scatter|all-to-all|"
    r"collective-permute)(?:-start)?)\(",
    re.M,
)


def hlo_collectives(hlo: str) -> dict[str, str]:
    """instruction name -> collective op (``-start`` folded), straight from the text."""
    return {m["name"]: m["op"].removesuffix("-start") for m in _COLLECTIVE.finditer(hlo)}


def iota_groups(text: str) -> list[list[int]] | None:
    """``[G,S]<=[dims]T(perm)`` or ``{{0,1},{2,3}}`` as partition-id groups (None for other spellings)."""
    m = re.fullmatch(r"\[(\d+),(\d+)\]<=\[([\d,]+)\](?:T\(([\d,]+)\))?", text)
    if m:
        dims = [int(d) for d in m[3].split(",")]
        ids = np.arange(math.prod(dims)).reshape(dims)
        if m[4]:
            ids = ids.transpose([int(p) for p in m[4].split(",")])
        return ids.reshape(int(m[1]), int(m[2])).tolist()
    if text.startswith("{{"):
        return [[int(x) for x in g.split(",") if x] for g in re.findall(r"\{([\d,]*)\}", text)]
    return None


def hlo_groups(hlo: str) -> dict[str, list[list[int]]]:
    out = {}
    for line in hlo.splitlines():
        m = _COLLECTIVE.match(line)
        g = re.search(r"replica_groups=(\[[\d,]+\]<=\[[\d,]+\](?:T\([\d,]+\))?|\{\{[\d,{}]*\}\})", line)
        if m and g:
            groups = iota_groups(g[1])
            if groups is not None:
                out[m["name"]] = groups
    return out


# ---- fixtures: one compile per program, shared ------------------------------------------------------------


def _llama_plan(devices: str, shape: tuple[int, ...], axes: tuple[str, ...], cfg: Any, strategy: str, b: int, s: int):
    m = mesh(devices, shape, axes)
    step, args = llama.plan_fn(cfg, strategy, b, s)(m)
    return m, step, args, plan(step, *args)


@pytest.fixture(scope="module")
def v5p_plan() -> Any:
    return _llama_plan("tpu:v5p:2x2x4", (4, 4), ("fsdp", "tp"), TINY, "fsdp_tp", BATCH, SEQ)


# ---- meshes over compile-only devices ------------------------------------------------------------------


@pytest.mark.tpu
def test_inspect_jit_on_compile_only_tpu_devices() -> None:
    """Regression (issue 25): inspect_jit on abstract arguments over libtpu's devices compiled, then died with
    ``RuntimeError: Unknown backend tpu`` (it asked this process for its TPU devices)."""
    from sharding_core import inspect_jit

    m = mesh("tpu:v5p:2x2x4", (4, 4), ("x", "y"))
    a = jax.ShapeDtypeStruct((1024, 2048), jax.numpy.bfloat16, sharding=NamedSharding(m, P("x", "y")))
    b = jax.ShapeDtypeStruct((2048, 512), jax.numpy.bfloat16, sharding=NamedSharding(m, P("y", None)))
    jitted = jax.jit(lambda a, b: a @ b)
    snap = inspect_jit(jitted, a, b)
    assert snap["platform"] == "tpu" and snap["target"]["devices"] == "tpu:v5p:2x2x4"
    reduce = [c for c in snap["collectives"] if c["op"] in ("all-reduce", "reduce-scatter")]
    assert reduce and all(c["axes"] == ["y"] for c in reduce)
    assert all(c["estimate"]["seconds"] is not None and c["estimate"]["fabric"] == "ici" for c in reduce)
    stats = jitted.lower(a, b).compile().memory_analysis()
    assert snap["jit"]["memory_per_device"]["peak_memory_in_bytes"] == stats.peak_memory_in_bytes


@pytest.mark.tpu
def test_mesh_is_libtpus_compile_only_devices() -> None:
    import shardscope
    from sharding_core.devices import parse_devices

    assert shardscope.mesh is mesh
    m = shardscope.mesh("tpu:v5p:4x4x4", (16, 4), ("fsdp", "tp"))
    assert m.devices.shape == (16, 4)
    assert [str(t.name) for t in m.axis_types] == ["Auto", "Auto"]
    d = m.devices.flat[0]
    assert d.platform == "tpu" and d.device_kind == "TPU v5"
    assert type(d).__name__ != "SimDevice"
    # the same ids at the same positions as the layout explorer's jax.make_mesh over the simulated slice
    sim = jax.make_mesh((16, 4), ("fsdp", "tp"), devices=parse_devices("tpu:v5p:4x4x4").devices)
    assert m.device_ids.tolist() == sim.device_ids.tolist()
    t = target_of(d)
    assert t is not None
    assert t.describe()["hosts"] == 16 and t.describe()["compile_only"] is True
    multi = mesh("tpu:v5e:4x4", (2, 16), ("dcn", "fsdp"), slices=2, order="hybrid", dcn_shape=(2, 1))
    assert {int(x.slice_index) for x in multi.devices[0]} == {0} and {int(x.slice_index) for x in multi.devices[1]} == {
        1
    }


def test_strip_fields_drops_lines_and_blocks() -> None:
    text = "a {\n  x: 1\n  mem_clock_ghz: 2.6\n  device_interconnect_info {\n    active_links: 18\n  }\n  y: 2\n}\n"
    out = strip_fields(text, ("mem_clock_ghz", "device_interconnect_info"))
    assert out == "a {\n  x: 1\n  y: 2\n}\n"


def run_in_gpu_env(script: str) -> dict[str, Any]:
    """``tests/<script>`` run in the gpu extra's environment (``make gpu-env``: XLA's CUDA compiler plugin lives
    apart from .venv, where it would log "no CUDA driver" from every JAX process); its last ``RESULT`` line."""
    r = subprocess.run(["make", "-s", "gpu-env"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, f"make gpu-env failed:\n{r.stdout}\n{r.stderr}"
    done = subprocess.run(
        [str(ROOT / "build" / "gpu" / "bin" / "python"), str(ROOT / "tests" / script)],
        capture_output=True, text=True, timeout=600, env={**os.environ, "JAX_PLATFORMS": "cpu"},
    )  # fmt: skip
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert done.returncode == 0 and lines, done.stderr[-4000:]
    result: dict[str, Any] = json.loads(lines[-1][len("RESULT ") :])
    return result


@pytest.fixture(scope="module")
def gpu_plans() -> dict[str, Any]:
    """tests/gpu_plan.py run in the gpu extra's environment."""
    return run_in_gpu_env("gpu_plan.py")


@pytest.mark.gpu
@pytest.mark.workers  # a subprocess in the gpu environment
def test_gpu_set_compiles_for_real_gpus_without_one(gpu_plans: dict[str, Any]) -> None:
    """gpu:h100:2x8 gives 16 H100s on 2 hosts from XLA's target config; the plan is the GPU program's."""
    assert gpu_plans["device_kind"] == "NVIDIA H100 80GB HBM3" and gpu_plans["hosts"] == [0, 1]
    for name, p in gpu_plans["programs"].items():
        assert p["platform"] == "gpu" and p["target"]["hosts"] == 2 and p["target"]["compile_only"], name
        for key, value in p["xla_memory"].items():
            assert p["memory"][key] == value, (name, key)
        assert "gemm_fusion" in p["hlo"] or "__cublas" in p["hlo"], name  # a GPU program, not the CPU stand-in
        assert {c["name"]: c["op"] for c in p["collectives"]} == hlo_collectives(p["hlo"]), name
        assert all(c["estimate"]["fabric"] == "nvlink" for c in p["collectives"]), name
        # issue 28: the temporaries' total is XLA's figure, and on GPU the buffer assignment's own sum equals it
        temps = p["temporaries"]
        assert temps["temp_size_in_bytes"] == temps["temp_allocation_bytes"] == p["xla_memory"]["temp_size_in_bytes"]
        assert bool(temps["largest"]) == (temps["temp_size_in_bytes"] > 0), name  # the matmul has none
        assert all(not t["shape"].startswith("(") for t in temps["largest"]), name
    matmul = gpu_plans["programs"]["matmul"]
    # each device multiplies its [2048, 512] block of a by its [512, 4096] block of b, then sums over `model`
    assert matmul["work"]["flops"] == 2 * 2048 * 512 * 4096
    assert [(c["op"], c["axes"]) for c in matmul["collectives"]] == [("all-reduce", ["model"])]
    # issue 28: a GPU plan past the chip's HBM read as "fits" nowhere but had no "does not fit", no advice, no
    # largest allocations, and a step time for a program that cannot run
    over = gpu_plans["programs"]["over"]
    xla, plan_ = over["xla_memory"], over["plan"]
    assert xla["peak_memory_in_bytes"] > 80e9 == plan_["capacity_bytes"]  # H100 SXM: 80 GB (the hardware table)
    assert plan_["fits"] is False and plan_["step_time"] is None and over["verdict"].startswith("does not fit")
    r = plan_["over_capacity"]
    assert r["required_bytes"] == xla["peak_memory_in_bytes"] and r["available_bytes"] == 80e9
    assert r["over_bytes"] == xla["peak_memory_in_bytes"] - 80e9
    # the two products of x's size, 64 GiB each, at the lines that make them
    assert [t["bytes"] for t in r["largest"][:2]] == [131072 * 131072 * 4] * 2
    source = (ROOT / "tests" / "gpu_plan.py").read_text().splitlines()
    lines = [str(source.index(text) + 1) for text in ("        y = x @ x", "        return jnp.sum(y @ y)")]
    assert [t["source"].split(" ")[0].rsplit(":", 1)[1] for t in r["largest"][:2]] == lines
    assert r["advice"] and r["advice"][0].startswith("the temporaries dominate")
    assert "is an activation" in r["advice"][1]
    cli = gpu_plans["cli_over"]
    assert cli["returncode"] == 3, cli  # the contract: exit 3 when the program does not fit
    printed = str(cli["stdout"]).splitlines()
    assert any(line.startswith("verdict: does not fit") for line in printed)
    assert not any(line.startswith("step time:") for line in printed)  # no step time for what cannot run
    assert any("the temporaries dominate" in line for line in printed)  # the advice, printed
    scanned = gpu_plans["programs"]["scanned"]
    assert [(loop["trip_count"], loop["how"]) for loop in scanned["work"]["loops"]] == [(4, "backend_config")]
    assert scanned["collectives"] and all(c["repeat"] == 4 for c in scanned["collectives"])
    assert scanned["work"]["flops"] > 3.5 * scanned["work"]["flops_loops_once"]


# ---- the Llama-style step on v5p 2x2x4 -------------------------------------------------------------------


@pytest.mark.tpu
def test_plan_memory_equals_memory_analysis(v5p_plan: Any) -> None:
    _, step, args, snap = v5p_plan
    stats = step.lower(*args).compile().memory_analysis()  # XLA compiles it again, independently
    got = snap["jit"]["memory_per_device"]
    assert got["peak_memory_in_bytes"] == stats.peak_memory_in_bytes
    for key in ("argument_size_in_bytes", "output_size_in_bytes", "alias_size_in_bytes", "temp_size_in_bytes"):
        assert got[key] == getattr(stats, key), key
    # the arguments by leaf add up to XLA's argument size (every leaf's shard, from Sharding.shard_shape)
    groups = {g["group"]: g for g in snap["plan"]["arguments"]["groups"]}
    assert set(groups) == {"args/0", "args/1/mu", "args/1/nu", "args/1/count", "args/2"}
    assert groups["args/0"]["bytes_per_device"] == groups["args/1/mu"]["bytes_per_device"]
    assert snap["plan"]["arguments"]["bytes_per_device"] <= stats.argument_size_in_bytes
    # XLA's figure pads each buffer to TPU tiles (T(8,128)): at these toy sizes that is up to a fifth
    assert snap["plan"]["arguments"]["bytes_per_device"] >= 0.75 * stats.argument_size_in_bytes
    temps = snap["plan"]["temporaries"]["largest"]
    assert temps and all(t["bytes"] > 0 for t in temps)
    assert any("llama.py" in (t["source"] or "") for t in temps)


@pytest.mark.tpu
def test_plan_collectives_equal_the_tpu_hlos(v5p_plan: Any) -> None:
    m, step, args, snap = v5p_plan
    compiled = step.lower(*args).compile()
    hlo = compiled.as_text()
    want = hlo_collectives(hlo)
    assert want, "the FSDP x TP step has collectives"
    assert {c["name"]: c["op"] for c in snap["collectives"]} == want
    # groups: partition ids of the HLO mapped through the executable's device assignment
    assignment = [int(d.id) for d in compiled.input_shardings[0][0]["embed"]._device_assignment]
    by_name = {c["name"]: c for c in snap["collectives"]}
    checked = 0
    for name, groups in hlo_groups(hlo).items():
        ids = sorted(sorted(assignment[p] for p in g) for g in groups)
        assert sorted(sorted(g) for g in by_name[name]["groups"]) == ids, name
        checked += 1
    assert checked >= 10
    # FSDP gathers run along fsdp, TP reductions along tp: the axes match the groups' mesh coordinates
    coords = {int(d): idx for idx, d in np.ndenumerate(m.device_ids)}
    for c in snap["collectives"]:
        if c["op"] == "collective-permute" or not c["axes"] or len(c["axes"]) != 1:
            continue
        varying = {i for g in c["groups"] for i in range(2) if len({coords[d][i] for d in g}) > 1}
        assert {("fsdp", "tp")[i] for i in varying} == set(c["axes"]), c["name"]
    # repeat counts: collectives inside the scanned layers run n_layers times per step
    in_loop = [c for c in snap["collectives"] if c["repeat"] == TINY.n_layers]
    assert in_loop and all(c["repeat"] in (1, TINY.n_layers) for c in snap["collectives"])
    assert snap["plan"]["communication"]["per_step"] == sum(c["repeat"] for c in snap["collectives"])


@pytest.mark.tpu
def test_plan_says_tpu_with_coords_hosts_and_slice(v5p_plan: Any) -> None:
    _, _, _, snap = v5p_plan
    assert snap["platform"] == "tpu" and snap["device_kind"] == "TPU v5"
    assert len(snap["devices"]["id"]) == 16
    assert sorted(set(snap["devices"]["process_index"])) == [0, 1, 2, 3]
    assert snap["devices"]["coords"] is not None and max(c[2] for c in snap["devices"]["coords"]) == 3
    assert snap["target"]["topology"] == "2x2x4" and snap["target"]["slices"] == 1
    assert snap["plan"]["partitioner"] in ("shardy", "gspmd")
    assert snap["plan"]["verdict"].startswith("fits: ")
    assert snap["plan"]["step_time"]["bound"] in ("compute", "memory", "communication")
    step = snap["plan"]["step_time"]
    low, high = step["lower_bound_seconds"], step["upper_bound_seconds"]
    # the band is ordered: the plan view showed "expected 721 µs" beside an upper bound of 271 µs when the upper
    # bound took the collectives at their bound and the expected time at their fitted efficiency
    assert 0 < low <= step["expected_seconds"] <= high
    terms = [step["compute_seconds"], step["memory_seconds"], step["communication_expected_seconds"]]
    # nothing overlapped: the roofline's terms in a row, or the schedule's work at its expected efficiencies and
    # every collective at its expected time in a row, whichever is longer
    ex = step["expected"]
    serial = max(sum(t for t in terms if t is not None), ex["compute_seconds"] + ex["communication_seconds"])
    assert high == pytest.approx(serial)
    # the expectation is not the roofline (issue 31: "expected" was the 100 %-MFU bound for compute-bound steps)
    assert step["expected_seconds"] > low and step["lower_bound_is"] == "at 100 % MFU"
    assert "fitted" in ex["efficiency_from"]


def _matmul_flops_per_layer(cfg: llama.Config, tokens: int, seq: int) -> float:
    """One layer's forward matmul flops (2·m·n·k each), attention scores and values included."""
    d, h, kv, hd, f = cfg.d_model, cfg.n_heads, cfg.n_kv_heads, cfg.head_dim, cfg.d_ff
    weights = d * h * hd + 2 * d * kv * hd + h * hd * d + 3 * d * f
    return 2.0 * tokens * weights + 2 * 2.0 * tokens * seq * h * hd


@pytest.mark.tpu
def test_flops_grow_with_scanned_layers() -> None:
    """XLA's cost_analysis counts the scanned layer once; the plan counts it n_layers times."""
    flops = {}
    for layers in (2, 4):
        cfg = llama.Config(**{**TINY.__dict__, "n_layers": layers})
        _, _, _, snap = _llama_plan("tpu:v5p:2x2x4", (16,), ("fsdp",), cfg, "fsdp", BATCH, SEQ)
        work = snap["plan"]["work"]
        flops[layers] = work["flops"]
        # with every loop body counted once, the count is XLA's own for the same program
        assert work["flops_loops_once"] == pytest.approx(work["flops_xla"], rel=0.02)
        assert {loop["trip_count"] for loop in work["loops"]} == {layers}
    per_layer = (flops[4] - flops[2]) / 2
    # forward, rematerialised forward and backward (2x): 4 forward passes, over the 16 devices of the batch
    want = 4 * _matmul_flops_per_layer(TINY, BATCH * SEQ, SEQ) / 16
    assert per_layer == pytest.approx(want, rel=0.05)
    assert flops[4] > flops[2] * 1.3


@pytest.mark.tpu
def test_refusal_for_memory_reports_xlas_figures() -> None:
    """On v5e 4x4 a step that needs more HBM than the chip has: XLA's figures as fields, not a traceback."""
    cfg = llama.Config(vocab=32000, d_model=2048, n_layers=2, n_heads=16, n_kv_heads=4, head_dim=128, d_ff=8192)
    _, _, _, snap = _llama_plan("tpu:v5e:4x4", (16,), ("fsdp",), cfg, "fsdp", 64, 8192)
    r = snap["plan"]["refusal"]
    assert r is not None and snap["plan"]["fits"] is False
    m = re.search(r"\(([\d.]+)G\) exceeds available HBM \(([\d.]+)G\)", r["message"])
    assert m, r["message"]
    need, have = float(m[1]) * 2**30, float(m[2]) * 2**30
    assert r["required_bytes"] == int(need) and r["available_bytes"] == int(have)
    assert r["over_bytes"] == int(need) - int(have)
    assert "over by" in snap["plan"]["verdict"]
    assert r["largest"] and r["largest"][0]["bytes"] >= r["largest"][-1]["bytes"]
    # the attention scores (examples/llama.py: dot_attention materialises them)
    assert any("attention" in (t["source"] or "") for t in r["largest"]), [t["source"] for t in r["largest"]]
    assert r["advice"] and "temporaries" in r["advice"][0]
    assert not [leaf for leaf in snap["leaves"] if leaf["path"].startswith("outputs")]


def test_refusal_messages_parse() -> None:
    short = RuntimeError(
        "RESOURCE_EXHAUSTED: Ran out of memory on HBM, the total memory required for HLO temporaries (147.60G) "
        "exceeds available HBM (95.74G)."
    )
    r = memory.refusal(short)
    assert r["what"] == "temporaries"
    assert r["required_bytes"] == int(147.60 * 2**30) and r["available_bytes"] == int(95.74 * 2**30)
    assert r["over_bytes"] / 2**30 == pytest.approx(51.86, abs=0.01)  # the "over by 51.9 GiB"
    long = RuntimeError(
        "RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. Ran out of memory in memory space hbm. Used 17.01G "
        "of 15.75G hbm. Exceeded hbm capacity by 1.26G.\n\nTotal hbm usage >= 17.26G:\n\nLargest program "
        'allocations in hbm:\n\n  1. Size: 4.00G\n     Operator: op_name="jit(step)/dot_general" '
        'source_file="model.py" source_line=42\n     Shape: bf16[16,2048,65536]\n\n  2. Size: 1.00G\n     '
        "Shape: f32[1024,262144]\n"
    )
    r = memory.refusal(long)
    assert r["required_bytes"] == int(17.01 * 2**30) and r["over_bytes"] == int(1.26 * 2**30)
    assert [a["bytes"] for a in r["largest"]] == [4 * 2**30, 2**30]
    assert r["largest"][0]["source"] == "model.py:42" and r["largest"][0]["shape"] == "bf16[16,2048,65536]"


GPU_FRAMES = """HloModule jit_f

FileNames
1 "/home/me/model.py"

FunctionNames
1 "<module>"
2 "mlp"

FileLocations
1 {file_name_id=1 function_name_id=1 line=12 end_line=12 column=2 end_column=2}
2 {file_name_id=1 function_name_id=2 line=40 end_line=40 column=21 end_column=21}

StackFrames
1 {file_location_id=1 parent_frame_id=1}
2 {file_location_id=2 parent_frame_id=1}


ENTRY %main (p: f32[4]) -> f32[4] {
  %p = f32[4]{0} parameter(0)
  ROOT %m.1 = f32[4]{0} multiply(%p, %p), metadata={op_name="jit(f)/mul" stack_frame_id=2}
}
"""


def test_instruction_sources_read_stack_frames() -> None:
    assert memory.instruction_sources(GPU_FRAMES, {"m.1"}) == {
        "m.1": {"op": "jit(f)/mul", "source": "/home/me/model.py:40 (mlp)"}
    }


# ---- publishing -----------------------------------------------------------------------------------------


@pytest.mark.tpu
def test_publish_multihost_slice(v5p_plan: Any, client: TestClient) -> None:
    """Regression: publishing abstract params on a multi-host slice was 422 "devices.process_index must be in
    range(process_count=1)"."""
    _, _, _, snap = v5p_plan
    check_snapshot(snap)
    r = client.post("/api/snapshots", json=snap)
    assert r.status_code == 201, r.text
    got = client.get(f"/api/snapshots/{r.json()['id']}").json()
    assert got["platform"] == "tpu" and got["target"]["hosts"] == 4
    assert got["plan"]["verdict"] == snap["plan"]["verdict"]
    # without the compile-only target the same devices are refused, with a hint that says why
    bare = {k: v for k, v in snap.items() if k != "target"}
    r = client.post("/api/snapshots", json=bare)
    assert r.status_code == 422 and "compile_only" in r.json()["error"].get("hint", "")


@pytest.mark.tpu
def test_publish_abstract_params_of_a_multihost_slice(client: TestClient) -> None:
    """Regression (issue 25): capture/publish of abstract params on a multi-host slice was 422."""
    from sharding_core import capture

    m = mesh("tpu:v5p:4x4x4", (16, 4), ("fsdp", "tp"))
    params = {"w": jax.ShapeDtypeStruct((4096, 14336), jax.numpy.bfloat16, sharding=NamedSharding(m, P("fsdp", "tp")))}
    snap = capture(params, "abstract params")
    assert snap["target"]["hosts"] == 16 and snap["target"]["compile_only"] is True
    assert snap["process_count"] == 1 and max(snap["devices"]["process_index"]) == 15
    r = client.post("/api/snapshots", json=snap)
    assert r.status_code == 201, r.text
    got = client.get(f"/api/snapshots/{r.json()['id']}").json()
    assert got["memory"]["max_bytes"] == 4096 * 14336 * 2 // 64  # each chip's shard, from the layout


@pytest.mark.tpu
def test_capture_on_one_host_slice_says_tpu() -> None:
    """Regression: abstract params on a one-host slice published as "4 cpu (cpu)", no coords."""
    from sharding_core import capture

    m = mesh("tpu:v5e:2x2", (4,), ("data",))
    params = {"w": jax.ShapeDtypeStruct((1024, 1024), jax.numpy.float32, sharding=NamedSharding(m, P("data")))}
    snap = capture(params)
    assert snap["platform"] == "tpu" and snap["device_kind"] == "TPU v5 lite"
    assert snap["devices"]["id"] == [0, 1, 2, 3]
    assert snap["devices"]["coords"] == [[0, 0, 0], [1, 0, 0], [0, 1, 0], [1, 1, 0]]


def test_full_ring_permute_publishes(client: TestClient) -> None:
    """Regression: a full-ring collective-permute was refused ("collectives[0] names devices that are not in the
    devices table"): its groups list n devices and its pairs 2n, 3n members against a cap of 2n."""
    from sharding_core import inspect_jit

    devs = jax.devices()[:8]
    m = jax.sharding.Mesh(np.array(devs), ("ring",))
    ring = [(i, (i + 1) % 8) for i in range(8)]
    f = jax.jit(
        jax.shard_map(lambda x: jax.lax.ppermute(x, "ring", ring), mesh=m, in_specs=P("ring"), out_specs=P("ring"))
    )
    snap = inspect_jit(f, jax.ShapeDtypeStruct((64,), np.float32, sharding=NamedSharding(m, P("ring"))))
    permutes = [c for c in snap["collectives"] if c["op"] == "collective-permute"]
    assert permutes and len(permutes[0]["pairs"]) == 8 and sum(len(g) for g in permutes[0]["groups"]) == 8
    r = client.post("/api/snapshots", json=snap)
    assert r.status_code == 201, r.text


def test_snapshot_check_bounds_collective_members() -> None:
    from sharding_core.errors import ShardingError

    snap: dict[str, Any] = {
        "version": 1,
        "process_index": 0,
        "process_count": 1,
        "devices": {"id": [0, 1, 2, 3], "process_index": [0] * 4, "core_on_chip": [0] * 4, "coords": None},
        "meshes": [],
        "layouts": [],
        "leaves": [],
        "collectives": [{"groups": [[0, 1, 2, 3]], "pairs": [[0, 1], [1, 2], [2, 3], [3, 0]]}],
    }
    check_snapshot(snap)  # a full ring: 4 + 8 members
    snap["collectives"][0]["pairs"].append([0, 2])
    with pytest.raises(ShardingError, match="more group members"):
        check_snapshot(snap)


# ---- baseline comparison ----------------------------------------------------------------------------------


def _plan(peak: int, colls: list[tuple[str, list[str], int, int]]) -> dict[str, Any]:
    return {
        "format": "shardscope.snapshot",
        "plan": {"refusal": None},
        "jit": {"memory_per_device": {"peak_memory_in_bytes": peak}},
        "collectives": [
            {"op": o, "axes": a, "bytes": b, "repeat": r, "name": f"c{i}"} for i, (o, a, b, r) in enumerate(colls)
        ],
    }


def test_baseline_thresholds_at_and_past_the_limit() -> None:
    base = _plan(1000, [("all-gather", ["fsdp"], 100, 4)])
    assert not baseline.compare(base, _plan(1020, [("all-gather", ["fsdp"], 100, 4)]), max_peak_growth=0.02)[
        "regressed"
    ]
    grown = baseline.compare(base, _plan(1021, [("all-gather", ["fsdp"], 100, 4)]), max_peak_growth=0.02)
    assert grown["regressed"] and "peak HBM" in grown["reasons"][0]
    extra = [("all-gather", ["fsdp"], 100, 4), ("all-reduce", ["tp"], 256, 4)]
    at = baseline.compare(base, _plan(1000, extra), max_new_collective_bytes=1024)
    assert not at["regressed"] and at["new_collective_bytes_per_step"] == 1024
    past = baseline.compare(base, _plan(1000, extra), max_new_collective_bytes=1023)
    assert past["regressed"] and past["new_collectives"][0]["op"] == "all-reduce"


# ---- the command -----------------------------------------------------------------------------------------


def _run_plan(*argv: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "shardscope", "plan", *argv],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=300,
    )


@pytest.mark.tpu
@pytest.mark.live  # a real server on a socket
def test_plan_command_end_to_end_with_baseline(tmp_path: Path, server: Server) -> None:
    script = tmp_path / "model.py"
    script.write_text(
        "from examples import llama\n"
        f"small = llama.plan_fn('tiny', 'fsdp', {BATCH}, {SEQ})\n"
        f"bigger_batch = llama.plan_fn('tiny', 'fsdp', {4 * BATCH}, {SEQ})\n"
    )
    first = tmp_path / "plan.json"
    dashboard = f"http://127.0.0.1:{server.port}"
    r = _run_plan(f"{script}:small", "--devices", "tpu:v5p:2x2x4", "--mesh", "16", "--axes", "fsdp",
                  "--json", str(first), "--publish", dashboard)  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    assert "verdict: fits:" in r.stdout and "collectives:" in r.stdout and "HBM per device" in r.stdout
    saved = json.loads(first.read_text())
    assert saved["plan"]["verdict"] in r.stdout and saved["target"]["devices"] == "tpu:v5p:2x2x4"
    link = re.search(r"published: (\S+/s/[\w-]+)", r.stdout)
    assert link and link[1].startswith(dashboard), r.stdout[-500:]
    with urllib.request.urlopen(f"{dashboard}/api/links/{link[1].rsplit('/', 1)[1]}", timeout=30) as answer:
        state = json.loads(answer.read())
    with urllib.request.urlopen(f"{dashboard}/api/snapshots/{state['state']['snapshot']}", timeout=30) as answer:
        stored = json.loads(answer.read())
    assert (
        stored["name"] == "plan model.py:small on tpu:v5p:2x2x4"
        and stored["plan"]["verdict"] == saved["plan"]["verdict"]
    )
    same = _run_plan(f"{script}:small", "--devices", "tpu:v5p:2x2x4", "--mesh", "16", "--axes", "fsdp",
                     "--baseline", str(first), "--no-temporaries")  # fmt: skip
    assert same.returncode == 0, same.stdout[-2000:] + same.stderr[-2000:]
    assert "no regression" in same.stdout and "thresholds" in same.stdout
    worse = _run_plan(f"{script}:bigger_batch", "--devices", "tpu:v5p:2x2x4", "--mesh", "16", "--axes", "fsdp",
                      "--baseline", str(first), "--no-temporaries")  # fmt: skip
    assert worse.returncode == 1, worse.stdout[-2000:] + worse.stderr[-2000:]
    assert "REGRESSED: peak HBM per device grew" in worse.stdout


def test_plan_command_bad_input_exits_2(tmp_path: Path) -> None:
    r = _run_plan("no_such_file.py:fn", "--devices", "cpu:8")
    assert r.returncode == 2 and "no such file" in r.stderr
    bad = tmp_path / "b.json"
    bad.write_text("{}")
    script = tmp_path / "m.py"
    script.write_text("def fn(mesh):\n    return 1\n")
    r = _run_plan(f"{script}:fn", "--devices", "cpu:8", "--baseline", str(bad))
    assert r.returncode == 2 and "not a plan" in r.stderr
    r = _run_plan(f"{script}:fn", "--devices", "cpu:8")
    assert r.returncode == 2 and "must return (jitted_fn, args)" in r.stderr


@pytest.mark.tpu
def test_moe_expert_parallelism_plans_all_to_alls() -> None:
    """The MoE example's expert parallelism moves tokens to their experts with all-to-alls over `expert`,
    inside the scanned layers (so each runs n_layers times per step)."""
    from examples import moe

    m = mesh("tpu:v5p:2x2x4", (4, 4), ("data", "expert"))
    step, args = moe.tiny_ep(m)
    snap = plan(step, *args)
    hlo = step.lower(*args).compile().as_text()
    all_to_all = [c for c in snap["collectives"] if c["op"] == "all-to-all"]
    assert len(all_to_all) == sum(1 for op in hlo_collectives(hlo).values() if op == "all-to-all")
    in_layers = [c for c in all_to_all if c["axes"] == ["expert"]]
    assert len(in_layers) >= 2 and all(c["repeat"] == moe.MOE_CONFIGS["tiny"].n_layers for c in in_layers)
    assert snap["plan"]["verdict"].startswith("fits: ")


@pytest.mark.tpu
def test_bytes_and_flops_counted_like_xla() -> None:
    """With every loop body counted once, the reader's counts are XLA's cost_analysis for the same TPU
    program: flops to 1%, bytes accessed to 25% (XLA's TPU figure counts tile-padded buffers and its own
    fusion operand use; shapes here are multiples of 128, so padding is small)."""
    # (libtpu's compile time grows with the shapes: d_model 1024 at 16 x 512 tokens took 64 s of CPU, this 12 s)
    cfg = llama.Config(vocab=2048, d_model=512, n_layers=2, n_heads=4, n_kv_heads=4, head_dim=128, d_ff=2048)
    _, _, _, snap = _llama_plan("tpu:v5p:2x2x4", (4, 4), ("fsdp", "tp"), cfg, "fsdp_tp", 8, 128)
    work = snap["plan"]["work"]
    assert work["flops_loops_once"] == pytest.approx(work["flops_xla"], rel=0.01)
    assert work["bytes_accessed_loops_once"] == pytest.approx(work["bytes_accessed_xla"], rel=0.25)
    assert work["bytes_accessed"] > work["bytes_accessed_loops_once"]  # the layers' traffic, twice


@pytest.mark.tpu
def test_inspect_jit_on_flax_nnx_abstract_state() -> None:
    """Flax NNX abstract state (nnx.eval_shape under the compile-only mesh) plans without allocating."""
    from flax import nnx

    from sharding_core import inspect_jit

    m = mesh("tpu:v5e:2x4", (2, 4), ("data", "model"))

    class MLP(nnx.Module):
        def __init__(self, rngs: nnx.Rngs) -> None:
            init = nnx.initializers.lecun_normal()
            self.w1 = nnx.Param(init(rngs.params(), (512, 2048)), out_sharding=(None, "model"))
            self.w2 = nnx.Param(init(rngs.params(), (2048, 512)), out_sharding=("model", None))

        def __call__(self, x: jax.Array) -> jax.Array:
            return jax.nn.relu(x @ self.w1) @ self.w2

    with jax.set_mesh(m):
        abstract = nnx.eval_shape(lambda: MLP(nnx.Rngs(0)))
    graphdef, state = nnx.split(abstract)
    x = jax.ShapeDtypeStruct((64, 512), np.float32, sharding=NamedSharding(m, P("data", None)))

    def loss(state: Any, x: jax.Array) -> jax.Array:
        return jax.numpy.mean(nnx.merge(graphdef, state)(x) ** 2)

    grad = jax.jit(jax.grad(loss))
    snap = inspect_jit(grad, state, x)
    compiled = grad.lower(state, x).compile()
    assert snap["platform"] == "tpu" and snap["device_kind"] == "TPU v5 lite"
    specs = {leaf["path"]: leaf["spec"] for leaf in snap["leaves"]}
    assert specs["inputs/args/0/w1"] == "P(None, 'model')" and specs["inputs/args/0/w2"] == "P('model', None)"
    assert snap["jit"]["memory_per_device"]["peak_memory_in_bytes"] == compiled.memory_analysis().peak_memory_in_bytes
    groups = {g["group"]: g["bytes_per_device"] for g in snap["plan"]["arguments"]["groups"]}
    assert groups == {"args/0": 2 * 512 * 2048 * 4 // 4, "args/1": 64 * 512 * 4 // 2}
    assert {c["name"]: c["op"] for c in snap["collectives"]} == hlo_collectives(compiled.as_text())


@pytest.mark.tpu
def test_multislice_plan_lists_dcn_transfers(client: TestClient) -> None:
    """Two v5e 2x2 slices, data parallel across them: each slice's collectives run over ICI (listed for both
    slices), the gradients' cross-slice reduction is a megascale DCN transfer."""
    m = mesh("tpu:v5e:2x2", (2, 4), ("dcn", "fsdp"), slices=2, order="hybrid", dcn_shape=(2, 1))
    rules = (("batch", ("dcn", "fsdp")), ("embed", "fsdp"))
    step, args = llama.plan_fn(TINY, rules, BATCH, SEQ)(m)
    snap = plan(step, *args)
    assert snap["target"]["slices"] == 2 and snap["target"]["hosts"] == 2
    slices = {d // 100000 for c in snap["collectives"] for g in c["groups"] for d in g}
    assert slices == {1, 2}
    assert all(len({d // 100000 for d in g}) == 1 for c in snap["collectives"] for g in c["groups"])
    assert any(t["op"] == "all-reduce" for t in snap["plan"]["dcn_transfers"])
    assert client.post("/api/snapshots", json=snap).status_code == 201


@pytest.mark.tpu
def test_two_plans_compare_on_the_compare_page(v5p_plan: Any, client: TestClient) -> None:
    """FSDP x TP against pure FSDP of the same step on the same slice: the compare route reads each plan's
    loop-counted roofline and XLA's peak, and names the cheaper by the lower bound on step time."""
    _, _, _, fsdp_tp = v5p_plan
    _, _, _, fsdp = _llama_plan("tpu:v5p:2x2x4", (16,), ("fsdp",), TINY, "fsdp", BATCH, SEQ)
    ids = [client.post("/api/snapshots", json=s).json()["id"] for s in (fsdp_tp, fsdp)]
    r = client.post(
        "/api/compare", json={"a": {"snapshot": {"snapshot": ids[0]}}, "b": {"snapshot": {"snapshot": ids[1]}}}
    )
    assert r.status_code == 200, r.text
    got = r.json()
    for side, snap in zip("ab", (fsdp_tp, fsdp), strict=True):
        assert got[side]["lower_bound_seconds"] == snap["plan"]["step_time"]["lower_bound_seconds"]
        assert got[side]["hbm"]["bytes_per_device"] == snap["jit"]["memory_per_device"]["peak_memory_in_bytes"]
    assert got["verdict"]["by"] == "lower bound on run time"
    low = {s: got[s]["lower_bound_seconds"] for s in "ab"}
    assert got["verdict"]["cheaper"] == min(low, key=lambda s: low[s])


def test_missing_compilers_say_which_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the tpu or gpu extra, a compile-only set says which extra to install (a 4xx-style error)."""
    from jax.experimental import topologies

    from sharding_core.errors import ShardingError
    from sharding_core.program import targets

    targets._target.cache_clear()
    monkeypatch.setattr(targets, "libtpu_available", lambda: False)
    with pytest.raises(ShardingError, match="libtpu is not installed") as e:
        mesh("tpu:v4:2x2x2", (8,), ("x",))
    assert e.value.code == "unavailable" and "tpu extra" in (e.value.hint or "")

    def no_cuda(**kwargs: Any) -> Any:
        raise NotImplementedError("topology not implemented for cuda")

    monkeypatch.setattr(topologies, "get_topology_desc", no_cuda)
    with pytest.raises(ShardingError, match="no CUDA plugin") as e:
        mesh("gpu:a100:1x4", (4,), ("x",))
    assert "gpu extra" in (e.value.hint or "") and "JAX_PLATFORMS=cpu" in (e.value.hint or "")
    with pytest.raises(ShardingError, match="no GPU target config for 'l4'"):
        mesh("gpu:l4:1x4", (4,), ("x",))
    targets._target.cache_clear()


def test_the_verdict_says_a_missing_figure_once() -> None:
    # Regression (issue 25's views): on a CPU device set the HBM fit and the roofline both say there are no
    # hardware figures, and the verdict line said it twice ("…CPU device sets; …CPU device sets").
    from sharding_core.cost.annotate import verdict
    from sharding_core.cost.context import NO_CPU_FIGURES

    cpu = {"step_time": {}, "roofline": {"why": NO_CPU_FIGURES}}
    assert verdict(cpu, {"text": NO_CPU_FIGURES}, None) == NO_CPU_FIGURES
    # different words are both kept
    line = verdict(cpu, {}, 1 << 20)
    assert line.startswith("peak 1.0 MiB per device; ") and line.count(NO_CPU_FIGURES) == 1, line


# ---- facts, then figures: a plan is stored with its facts and read with today's figures ---------------------


@pytest.mark.tpu
def test_a_plan_is_stored_with_facts_and_read_with_todays_figures(v5p_plan: Any, client: TestClient) -> None:
    from sharding_core.cost.annotate import PLAN_FIGURES, facts_only, snapshot_with_estimates

    _, _, _, snap = v5p_plan
    stored = facts_only(snap)
    assert not set(PLAN_FIGURES) & set(stored["plan"]) and stored["plan"]["work"] == snap["plan"]["work"]
    assert all("estimate" not in c for c in stored["collectives"])
    assert snapshot_with_estimates(stored)["plan"] == snap["plan"]  # inspect_jit's caller reads as the server does
    created = client.post("/api/snapshots", json=snap)
    assert created.status_code == 201, created.text
    raw = client.app.state.store.get("snapshots", created.json()["id"])  # type: ignore[attr-defined]
    assert b'"verdict"' not in raw and b'"step_time"' not in raw and b'"roofline"' not in raw  # facts only
    got = client.get(f"/api/snapshots/{created.json()['id']}").json()
    assert got["plan"]["verdict"] == snap["plan"]["verdict"] and got["plan"]["step_time"] == snap["plan"]["step_time"]


@pytest.mark.tpu
def test_a_plan_stored_with_old_figures_opens_with_todays(v5p_plan: Any, client: TestClient) -> None:
    """A plan stored by an older server: its figures frozen (a verdict, a roofline with XLA's bytes as the memory
    term), its work without the facts this one adds (matmul traffic, unknown trip counts), its loops without
    ``how``. It opens, with the figures the cost model gives today."""
    import copy

    _, _, _, snap = v5p_plan
    old = copy.deepcopy(snap)
    del old["program"]  # plans were stored without the program report then
    old["plan"].update(verdict="fits: an old verdict", roofline={"bound": "memory", "memory_seconds": 9.0},
                       step_time={"bound": "memory", "lower_bound_seconds": 9.0}, capacity_bytes=1)  # fmt: skip
    for key in ("matmul_traffic_bytes", "unknown_trip_counts"):
        del old["plan"]["work"][key]
    for c in old["collectives"]:
        c["estimate"] = {"seconds": 42.0, "formula": "old", "inputs": {}, "fabric": "ici"}
        for loop in c["loops"]:
            del loop["how"]
    stored = client.app.state.store.put("snapshots", orjson.dumps(old))  # type: ignore[attr-defined]
    got = client.get(f"/api/snapshots/{stored}").json()["plan"]
    assert got["capacity_bytes"] == snap["plan"]["capacity_bytes"] > 2**30  # v5p's 95 GiB, from the table
    assert got["verdict"].startswith("fits: ") and "old" not in got["verdict"]
    assert got["roofline"]["memory_seconds"] != 9.0 and got["step_time"]["lower_bound_seconds"] != 9.0
    # without the matmul traffic fact the HBM traffic rule has XLA's arguments and outputs to go on
    assert got["roofline"]["inputs"]["hbm_traffic_from"] == "arguments + outputs"
    assert got["communication"]["seconds_per_step"] == snap["plan"]["communication"]["seconds_per_step"]
    # a plan with no collectives (one device's program, or a refusal) is figured too
    lone = client.app.state.store.put("snapshots", orjson.dumps({**old, "collectives": []}))  # type: ignore[attr-defined]
    assert client.get(f"/api/snapshots/{lone}").json()["plan"]["capacity_bytes"] == got["capacity_bytes"]


@pytest.mark.tpu
def test_the_plans_memory_term_is_the_cost_models_hbm_traffic_rule(v5p_plan: Any) -> None:
    """One rule, not two: HBM traffic = max(XLA's arguments + outputs, every matmul's operands and result per
    run) over the chip's HBM bandwidth (the book's arithmetic-intensity denominator), not the reader's bytes
    accessed; the kernel lab's roofline reads the same facts the same way."""
    from sharding_core.cost.annotate import PLAN_ROOFLINE
    from sharding_core.cost.context import context_for
    from sharding_core.cost.roofline import roofline
    from sharding_core.devices import parse_devices
    from sharding_core.hardware import TPU_FIGURES, hbm_bandwidth_per_device

    _, step, args, snap = v5p_plan
    stats = step.lower(*args).compile().memory_analysis()  # XLA's own figures, compiled again here
    work, line = snap["plan"]["work"], snap["plan"]["roofline"]
    traffic = max(stats.argument_size_in_bytes + stats.output_size_in_bytes, work["matmul_traffic_bytes"])
    bandwidth = hbm_bandwidth_per_device(TPU_FIGURES["v5p"]).value
    assert line["inputs"]["hbm_traffic_bytes"] == traffic
    assert line["memory_seconds"] == pytest.approx(traffic / bandwidth)
    assert line["memory_seconds"] != pytest.approx(work["bytes_accessed"] / bandwidth)
    kernel_lab = roofline(
        {"flops": work["flops_xla"], "loop_corrected_flops": work["flops"],
         "matmul_traffic_bytes": work["matmul_traffic_bytes"], "bytes_accessed": work["bytes_accessed"]},
        {"argument_bytes": stats.argument_size_in_bytes, "output_bytes": stats.output_size_in_bytes,
         "peak_bytes": stats.peak_memory_in_bytes},
        snap["collectives"], context_for(parse_devices("tpu:v5p:2x2x4")), "bfloat16", PLAN_ROOFLINE,
    )  # fmt: skip
    assert kernel_lab["memory_seconds"] == line["memory_seconds"]


def test_the_plans_why_says_each_line_once_and_prints_every_fix() -> None:
    """Regression (issue 28): the CLI printed the same why three times for one line (the forward pass, its remat and
    the backward pass each make a collective there) and only the top fix of each."""
    from sharding_core.planning.report import render

    why = {"source": "model.py:42", "explanation": "x is sharded on fsdp along d_model", "fixes": []}
    fixes = [
        {"text": "shard x as P('fsdp', None)", "collectives_after": 0, "bytes_after": 0, "bytes_before": 1 << 20,
         "peak_after": 1 << 30},
        {"text": "replicate w", "collectives_after": 1, "bytes_after": 1 << 10, "bytes_before": 1 << 20,
         "peak_after": 3 << 30},
    ]  # fmt: skip
    colls = [
        {"op": "all-reduce", "bytes": 1 << 20, "repeat": 4, "why": {**why, "fixes": fixes}},
        {"op": "all-reduce", "bytes": 1 << 20, "repeat": 4, "why": why},
        {"op": "all-reduce", "bytes": 1 << 20, "repeat": 4, "why": why},
        {"op": "all-gather", "bytes": 1 << 10, "repeat": 1, "why": {**why, "source": "model.py:7"}},
    ]
    snap = {"name": "t", "devices": {"id": list(range(8))}, "device_kind": "cpu", "collectives": colls}
    text = render(snap)
    lines = [line for line in text.splitlines() if line.startswith("  all-") and "model.py" in line]
    assert len(lines) == 2 and lines[0].startswith("  all-reduce at model.py:42 (3 collectives, 12.0 MiB per step)")
    assert "shard x as P('fsdp', None)" in text and "replicate w" in text
