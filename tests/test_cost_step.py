"""The expected step time (``sharding_core.cost.step``), the published runs it is fitted to and scored on
(``sharding_core.cost.runs``) and the fit (``sharding_core.cost.step_fit``).

* The replay: a synchronous collective adds its time, an asynchronous one hides under the work scheduled inside
  its span, the network runs one collective at a time, a loop's iterations add (a collective started in one
  iteration and finished in the next overlaps both) — on schedules small enough to work out by hand.
* The scoreboard: every run sourced (a pinned address, what was read, how the step time follows), the step
  seconds re-derived from what was read, MaxText's parameter count of its 2023 model against the example's.
* The fit: the shipped constants are a refit on the training split of the stored compile facts
  (``bench/run_facts.json.gz``), and the held-out runs play no part in it.

Regression for issue 31: "the whole-step 'expected' time is the 100 %-MFU bound" (compute at the spec-sheet peak,
so for a compute-bound step expected == lower bound).
"""

from __future__ import annotations

import dataclasses
import math
import re
from pathlib import Path

import pytest

from sharding_core.cost import runs as R
from sharding_core.cost.step import Efficiency, _hw, _Replay, attention_flops, efficiency_for, expected_step
from sharding_core.hardware import TPU_FIGURES

V5E = TPU_FIGURES["v5e"]
EFF = Efficiency(matmul=0.5, memory=0.5, kernel=0.5, launch=0.0)
PEAK = 197e12
BW = 800 * 2**30


def _mm(m: int, n: int, k: int, count: int = 1) -> dict[str, object]:
    return {"mm": [["bf16", m, n, k, 0, count]], "hbm": 0, "ops": 0, "kernels": []}


def _seconds(
    events: list[list[object]], durations: dict[str, float], extra: dict[str, list[object]] | None = None
) -> float:
    schedule = {"entry": "main", "sequences": {"main": events, **(extra or {})}}
    return _Replay(schedule, durations, _hw(V5E), EFF).run("main", 0.0, 1.0)


MM = 2.0 * 1024 * 1024 * 1024 / (PEAK * 0.5)  # one 1024³ matmul on v5e at half the peak


def test_sync_collective_adds_and_async_hides() -> None:
    work = ["work", _mm(1024, 1024, 1024)]
    assert _seconds([work, ["sync", "c"], work], {"c": 1e-3}) == pytest.approx(2 * MM + 1e-3)
    # the collective moves while the matmul computes: the done waits only for what is left
    assert _seconds([["start", "c"], work, ["done", "c"]], {"c": MM / 2}) == pytest.approx(MM)
    assert _seconds([["start", "c"], work, ["done", "c"]], {"c": 3 * MM}) == pytest.approx(3 * MM)


def test_network_runs_one_collective_at_a_time() -> None:
    work = ["work", _mm(1024, 1024, 1024, count=4)]
    events = [["start", "a"], ["start", "b"], work, ["done", "a"], ["done", "b"]]
    # two collectives of 3 matmuls each, in flight together over 4 matmuls of work: the second ends at 6
    assert _seconds(events, {"a": 3 * MM, "b": 3 * MM}) == pytest.approx(6 * MM)


def test_loop_pipelines_a_collective_across_iterations() -> None:
    # the body waits for the gather the previous iteration started, starts the next one, and computes while it
    # moves (what XLA's collective pipelining schedules): it hides under the matmul
    body = [["done", "g"], ["start", "g"], ["work", _mm(1024, 1024, 1024)]]
    seconds = _seconds([["loop", "body", 10]], {"g": MM / 2}, {"body": body})
    assert seconds == pytest.approx(10 * MM)
    slow = _seconds([["loop", "body", 10]], {"g": 2 * MM}, {"body": body})
    assert slow == pytest.approx(MM + 9 * 2 * MM)  # from the second iteration on, each waits for the gather
    # started at the end of an iteration and waited for at the start of the next: nothing hides it
    exposed = [["done", "g"], ["work", _mm(1024, 1024, 1024)], ["start", "g"]]
    assert _seconds([["loop", "body", 10]], {"g": MM / 2}, {"body": exposed}) == pytest.approx(MM + 9 * 1.5 * MM)


def test_matmul_padded_to_the_tile_and_memory_bound_work() -> None:
    odd = _seconds([["work", _mm(1024, 1024, 1000)]], {})
    assert odd == pytest.approx(MM, rel=1e-9)  # k = 1000 pads to 1024 on a 128-wide MXU: the time of 1024
    mem = {"mm": [], "hbm": 10**9, "ops": 0, "kernels": []}
    assert _seconds([["work", mem]], {}) == pytest.approx(1e9 / (BW * 0.5))


def test_attention_kernel_flops() -> None:
    b, h, s, d = 2, 8, 4096, 128
    full = 4.0 * b * h * s * s * d  # QKᵀ and PV over the whole square
    causal = 0.5 * (1 + 512 / s)
    assert attention_flops("flash_attention", [[b, h, s, d], [b, h, s, d]]) == pytest.approx(full * causal)
    dkv = attention_flops("flash_mha_bwd_dkv_block_q_major_512_block_q_512", [[b, h, s, d], [b, h, s, d]])
    assert dkv == pytest.approx(2 * full * causal)
    assert attention_flops("fusion", [[b, h, s, d]]) is None


def test_profile_matmul_efficiency_replaces_the_fit() -> None:
    eff, source = efficiency_for(V5E, profile={"matmul": {"efficiency": 0.61}, "name": "v5e-8 calibrate"})
    assert eff.matmul == 0.61 and "measured" in source and "v5e-8 calibrate" in source
    eff2, source2 = efficiency_for(V5E, profile={"matmul": {"efficiency": None}})
    assert "measured" not in source2 and eff2.matmul != 0.61
    schedule = {"entry": "main", "sequences": {"main": [["work", _mm(4096, 4096, 4096)]]}, "chains": {}}
    slow = expected_step(schedule, [], V5E, profile={"matmul": {"efficiency": 0.25}})
    fast = expected_step(schedule, [], V5E, profile={"matmul": {"efficiency": 0.5}})
    assert slow["expected_seconds"] == pytest.approx(2 * fast["expected_seconds"])


# ---- the scoreboard ------------------------------------------------------------------------------------

_PINNED = re.compile(
    r"^https://github\.com/AI-Hypercomputer/(maxtext|tpu-recipes)/blob/([0-9a-f]{7,40}|tpu-recipes-v[\d.]+)/"
    r"|^https://catalog\.ngc\.nvidia\.com/orgs/nvidia/teams/dgxc-benchmarking/resources"  # versioned pages
)


def test_every_run_is_sourced() -> None:
    assert len(R.RUNS) >= 30 and len({r.id for r in R.RUNS}) == len(R.RUNS)
    compiled = [r for r in R.RUNS if r.not_compiled is None]
    assert len(compiled) >= 30
    assert sum(1 for r in compiled if r.split == R.HELD_OUT) >= 10
    for r in R.RUNS:
        source = R.SOURCES[r.source]
        assert _PINNED.match(source.url), source.url
        assert r.read and r.derivation and r.measured_seconds > 0, r.id
        assert r.not_compiled or (_PINNED.match(r.config_source) and r.example and r.knobs.get("seq")), r.id
    # a source is on one side of the split, whatever its runs
    assert {s.split for s in R.SOURCES.values()} == {R.TRAIN, R.HELD_OUT}


def test_step_seconds_follow_from_what_was_read() -> None:
    for r in R.RUNS:
        if "seconds: " in r.read:  # MaxText's log line: the step time as printed
            assert r.measured_seconds == float(r.read.split("seconds: ")[1].split(",")[0])
            tokens = int(r.read.split("total_weights: ")[1].split(",")[0])
            assert tokens == pytest.approx(r.knobs["batch_per_device"] * r.chips * r.knobs["seq"])
        elif "MFU" in r.read and r.source.startswith("maxtext-v5"):
            mfu = float(re.search(r"MFU ([\d.]+) %", r.read).group(1))  # type: ignore[union-attr]
            scale = int(r.model.split(":")[1])
            tflops = R.maxtext_2023_tflops(scale, r.knobs["batch_per_device"])
            peak = R.V5E_PEAK if "v5e" in r.devices else R.V5P_PEAK
            assert r.measured_seconds == pytest.approx(tflops * 1e12 / (mfu / 100 * peak))
    # MaxText's v5p-512 Llama 2 70B: ~692 tokens/s/chip at 4 × 4096 tokens a chip: a 23.7 s step
    assert R.BY_ID["maxtext-llama2-70b-v5p-512"].measured_seconds == pytest.approx(23.7, abs=0.05)


def test_maxtext_2023_model_as_the_example_builds_it() -> None:
    """The 2023 model's parameters as MaxText counts them (the tables' TFLOPs use them) equal the example's."""
    from examples import llama

    for scale in (16, 32, 64, 128, 256, 512, 1024):
        assert R.maxtext_2023_params(scale) == llama.maxtext_2023(scale).params
    # the sizes the tables name: 16B ... 1024B within 5 %
    for scale in (16, 32, 64, 128, 1024):
        assert math.isclose(R.maxtext_2023_params(scale), scale * 1e9, rel_tol=0.05)


# ---- the fit ------------------------------------------------------------------------------------------

FACTS = Path(__file__).resolve().parents[1] / "bench" / "run_facts.json.gz"


def test_shipped_constants_are_a_refit_on_the_training_split_alone() -> None:
    """The stored compile facts of every reproduced run (``bench/bench_steps.py``) refitted: the constants equal
    the shipped ones, and the held-out runs play no part — their measurements scrambled (× 10, ÷ 10), the fit
    gives the same constants."""
    from bench.step_facts import load, prepared
    from sharding_core.cost import step_fit
    from sharding_core.cost.step import FITTED

    rows = {f["name"]: f for f in load(FACTS)}
    _, preps = prepared(rows)
    assert sum(p.split == R.TRAIN for p in preps) >= 15 and sum(p.split == R.HELD_OUT for p in preps) >= 10
    scrambled = [
        p if p.split == R.TRAIN else dataclasses.replace(p, measured=p.measured * (10.0 if k % 2 else 0.1))
        for k, p in enumerate(preps)
    ]
    assert step_fit.fit_training(scrambled) == FITTED["tpu"]


def test_the_schedule_only_compiles_read_what_compiles_to_the_end_read() -> None:
    """The scoreboard's runs are compiled until libtpu has written its scheduled, buffer-assigned module, not through
    its code generation (``bench/bench_steps.py``). Reduced copies of runs on three TPU generations were compiled
    both ways (stored beside the runs): the same schedule and collectives, so the same expected step; and the
    bytes the buffer assignment placed — what "fits" is read from — are not below XLA's final peak."""
    from bench.step_facts import load, planned, schedule_only_check

    rows = {f["name"]: f for f in load(FACTS)}
    pairs = [(rows[n.removesuffix("-full")], f) for n, f in rows.items() if n.endswith("-full")]
    generations = {R.BY_ID[early["id"]].devices.split(":")[1] for early, _ in pairs}
    assert len(pairs) >= 3 and generations >= {"v5e", "v5p", "v6e"}, sorted(rows)
    for early, full in pairs:
        assert early["mode"] == "schedule" and full["mode"] == "full" and early["layers"] == full["layers"]
        assert "as compiled to the end" in schedule_only_check(early, full), schedule_only_check(early, full)
        steps = [planned(f)["plan"]["step_time"]["expected_seconds"] for f in (early, full)]
        assert steps[0] == steps[1] > 0
        assert early["buffer_assignment_bytes"] >= full["memory"]["peak_memory_in_bytes"] > 0
