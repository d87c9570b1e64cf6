"""``sharding_core.estimate_collective`` (the cost model for one collective, by device set) and ``shardscope
calibrate`` (a profile measured on this process's devices, used by estimates and plans): the bound against the
book's worked figures, bad input refused with what to change, and a profile measured here on 8 CPU devices,
parsed, used for a CPU set's estimate and a plan, and refused for hardware it was not measured on.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import sharding_core
from sharding_core.cost import calibrate as cal
from sharding_core.cost.efficiency import PROFILES
from sharding_core.errors import ShardingError


def test_estimate_collective_is_the_cost_models_figure_by_device_set() -> None:
    # The book's Pop Quiz 2: AllGather_Y over an axis of 4 (no wraparound) on v5e: 3 · 8.4e6 / 4.5e10 ≈ 560 us.
    groups = [[x + 4 * y for x in range(4)] for y in range(8)]
    est = sharding_core.estimate_collective("tpu:v5e:4x8", "all-gather", 2048 * 8192 * 2, groups=groups, dtype="bf16")
    assert est["bound_seconds"] == pytest.approx(3 * 2048 * 8192 * 2 / 4 / 4.5e10)
    assert est["fabric"] == "ici" and est["expected_seconds"] > est["bound_seconds"]
    assert est["fit"]["held_out_median_error"] is not None and est["fit"]["fabric"] == "ici"
    assert est["profile"].startswith("fitted: published measurements")
    # The GPU quiz: AllGather(bf16[B_X, F]) on an 8xH100 node, B = 1024, F = 16384: 2BF · 7 / (8 · 450e9).
    gpu = sharding_core.estimate_collective("gpu:h100:1x8", "all-gather", 2 * 1024 * 16384)
    assert gpu["bound_seconds"] == pytest.approx(2 * 1024 * 16384 * 7 / (8 * 450e9))
    assert gpu["inputs"]["efficiency"] == {"nvlink": PROFILES["nvlink"].efficiency_of("all-gather")}
    # a permute defaults to a ring shift; pairs name the transfers
    ring = sharding_core.estimate_collective("tpu:v5e:2x4", "collective-permute", 1 << 20)
    one = sharding_core.estimate_collective("tpu:v5e:2x4", "collective-permute", 1 << 20, pairs=[[0, 1]])
    assert ring["inputs"]["pairs"] == 8 and one["inputs"]["pairs"] == 1
    assert one["bound_seconds"] == pytest.approx((1 << 20) / 4.5e10)


@pytest.mark.parametrize(
    ("kwargs", "says"),
    [
        ({"op": "all-gathr"}, "unknown collective"),
        ({"bytes": 0}, "positive integer"),
        ({"bytes": 3, "dtype": "bf16"}, "whole number"),
        ({"dtype": "f33"}, "unknown dtype"),
        ({"groups": [[0, 99]]}, "not in"),
        ({"groups": [[0, 1], [1, 2]]}, "more than one group"),
        ({"groups": [[0, "a"]]}, "integers"),
        ({"pairs": [[0, 1]]}, "takes groups"),
    ],
)
def test_estimate_collective_refuses_bad_input(kwargs: dict[str, Any], says: str) -> None:
    args: dict[str, Any] = {"devices": "tpu:v5e:2x4", "op": "all-reduce", "bytes": 1024, **kwargs}
    with pytest.raises(ShardingError, match=says):
        sharding_core.estimate_collective(**args)
    with pytest.raises(ShardingError, match=r"CPU sets have no hardware figures|no estimate"):
        sharding_core.estimate_collective("cpu:8", "all-reduce", 1024)


@pytest.fixture(scope="module")
def profile_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``shardscope calibrate`` on this process's 8 CPU devices, tiny sizes."""
    from shardscope.cli import main

    out = tmp_path_factory.mktemp("calibrate") / "profile.json"
    args = ["calibrate", "--json", str(out), "--sizes", "4096,65536", "--shapes", "64x64x64", "--repeats", "3",
            "--warmup", "1"]  # fmt: skip
    assert main(args) == 0
    return out


def test_calibrate_writes_a_profile_in_its_format(profile_path: Path) -> None:
    profile = json.loads(profile_path.read_text())
    assert profile["format"] == "shardscope.profile/1" and profile["jax_version"]
    assert profile["devices"] == {"platform": "cpu", "device_kind": "cpu", "count": 8, "process_count": 1}
    assert set(profile["collectives"]) == set(cal.OPS)
    for op, fit in profile["collectives"].items():
        assert fit["fabric"] == "cpu" and fit["efficiency"] is None  # a CPU has no spec-sheet bandwidth
        assert [p["bytes"] for p in fit["points"]] == [4096, 65536], op
        assert all(p["group_size"] == 8 and p["seconds"] > 0 for p in fit["points"])
        latency, _ = cal.fit_line([(cal.bus_bytes(op, p["bytes"], 8), p["seconds"]) for p in fit["points"]])
        assert fit["latency_seconds"] == pytest.approx(latency)
    mm = profile["matmul"]
    assert mm["efficiency"] is None and mm["flops_per_second"] > 0  # no CPU peak in the hardware table
    assert {(p["m"], p["k"], p["n"], p["dtype"]) for p in mm["points"]} == {(64, 64, 64, "bfloat16"),
                                                                             (64, 64, 64, "float32")}  # fmt: skip
    best = max(2 * 64**3 / p["seconds"] for p in mm["points"] if p["dtype"] == "bfloat16")
    assert mm["flops_per_second"] == pytest.approx(best)


def test_a_cpu_sets_estimate_uses_the_profiles_measured_line(profile_path: Path) -> None:
    profile = cal.load_profile(profile_path)
    est = sharding_core.estimate_collective("cpu:8", "all-reduce", 1 << 16, profile=profile_path)
    fit = profile["collectives"]["all-reduce"]
    bus = cal.bus_bytes("all-reduce", 1 << 16, 8)
    want = fit["latency_seconds"] + (bus / fit["bus_bandwidth"] if fit["bus_bandwidth"] else 0.0)
    assert est["expected_seconds"] == pytest.approx(want) and est["bound_seconds"] is None
    assert est["profile"] == f"calibrated: profile.json (cpu x 8, {profile['created'][:10]})"
    assert est["fit"]["name"] == est["profile"] and est["fabric"] == "cpu"


def test_a_profile_for_other_hardware_is_refused(profile_path: Path) -> None:
    with pytest.raises(ShardingError, match="measured on 8 cpu device") as caught:
        sharding_core.estimate_collective("tpu:v5e:2x4", "all-reduce", 1 << 16, profile=profile_path)
    assert caught.value.code == cal.PROFILE_MISMATCH and caught.value.hint
    with pytest.raises(ShardingError, match="format") as bad:
        sharding_core.estimate_collective("cpu:8", "all-reduce", 1 << 16, profile={"format": "x"})
    assert bad.value.code == cal.BAD_PROFILE


def test_an_accelerator_profile_replaces_the_fit_for_the_operations_it_measured(profile_path: Path) -> None:
    """A profile of a TPU v5e slice (the CPU profile's points presented as a v5e's, with the efficiency and latency
    a v5e run would give): the all-reduce over ICI takes the measured line, the other fabrics keep the fit."""
    profile = json.loads(profile_path.read_text())
    profile["devices"] = {"platform": "tpu", "device_kind": "TPU v5 lite", "count": 8, "process_count": 1}
    profile["collectives"]["all-reduce"].update(fabric="ici_line", efficiency=0.5, latency_seconds=20e-6)
    fitted = sharding_core.estimate_collective("tpu:v5e:2x4", "all-reduce", 1 << 24)
    measured = sharding_core.estimate_collective("tpu:v5e:2x4", "all-reduce", 1 << 24, profile=profile)
    term = measured["inputs"]["terms"][0]
    assert measured["bound_seconds"] == fitted["bound_seconds"]
    assert measured["expected_seconds"] == pytest.approx(20e-6 + term["expected_bandwidth_seconds"] / 0.5)
    assert measured["profile"].startswith("calibrated: profile.json (TPU v5 lite x 8")
    assert measured["inputs"]["profiles"] == {"ici_line": measured["profile"]}
    gather = sharding_core.estimate_collective("tpu:v5e:2x4", "all-gather", 1 << 24, profile=profile)
    assert (
        gather["expected_seconds"]
        == sharding_core.estimate_collective("tpu:v5e:2x4", "all-gather", 1 << 24)["expected_seconds"]
    )  # the profile's all-gather has no efficiency (a CPU's): the fit stays


PROGRAM = """
import jax, jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P

def fn(mesh):
    x = jax.ShapeDtypeStruct((64, 256), jnp.float32, sharding=NamedSharding(mesh, P("data")))
    return jax.jit(lambda a: a.sum(axis=0)), (x,)
"""


def test_a_plan_with_the_profile_takes_its_figures_from_it(
    profile_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from shardscope.cli import main

    script = tmp_path / "prog.py"
    script.write_text(PROGRAM)
    out = tmp_path / "plan.json"
    assert main(["plan", f"{script}:fn", "--devices", "cpu:8", "--profile", str(profile_path), "--json", str(out),
                 "--no-temporaries"]) == 0  # fmt: skip
    assert "collectives' expected times: calibrated: profile.json (cpu x 8" in capsys.readouterr().out
    plan = json.loads(out.read_text())
    assert plan["cost_profile"]["format"] == "shardscope.profile/1"
    assert plan["collectives"], "the sum over the sharded axis is an all-reduce"
    for c in plan["collectives"]:
        assert c["estimate"]["profile"].startswith("calibrated: profile.json")
        assert c["estimate"]["expected_seconds"] > 0
    # read again (a stored plan reopened), the same profile gives the same figures; in Python, apply_profile
    from sharding_core.cost.annotate import facts_only, snapshot_with_estimates

    again = snapshot_with_estimates(facts_only(plan))
    assert [c["estimate"] for c in again["collectives"]] == [c["estimate"] for c in plan["collectives"]]
    bare = {k: v for k, v in facts_only(plan).items() if k != "cost_profile"}
    assert snapshot_with_estimates(bare)["collectives"][0]["estimate"]["seconds"] is None  # CPU: no figures
    applied = cal.apply_profile(bare, profile_path)
    assert [c["estimate"] for c in applied["collectives"]] == [c["estimate"] for c in plan["collectives"]]
    # a TPU plan with a CPU profile: refused, exit 2, with what to do
    assert (
        main(["plan", f"{script}:fn", "--devices", "tpu:v5e:2x4", "--profile", str(profile_path), "--no-temporaries"])
        == 2
    )  # fmt: skip (refused before anything compiles)
    assert "profile_mismatch" in capsys.readouterr().err
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    assert main(["plan", f"{script}:fn", "--devices", "cpu:8", "--profile", str(bad)]) == 2
    assert "bad_profile" in capsys.readouterr().err


def test_calibrate_refuses_bad_input(capsys: pytest.CaptureFixture[str]) -> None:
    from shardscope.cli import main

    assert main(["calibrate", "--sizes", "0"]) == 2
    assert "bad_calibration" in capsys.readouterr().err
    assert main(["calibrate", "--shapes", "64x64"]) == 2
    assert "MxKxN" in capsys.readouterr().err
    assert main(["calibrate", "--devices", "tpu:v5e:2x2"]) == 2
    with pytest.raises(ShardingError, match="repeats"):
        cal.calibrate(repeats=0)


def test_the_server_keeps_a_plans_profile_and_reopens_it_with_its_figures(
    profile_path: Path, tmp_path: Path, client: Any
) -> None:
    """A plan made with --profile, published (POST /api/snapshots) and read back, carries the same figures: the
    server re-estimates it from the profile it was stored with."""
    from shardscope.cli import main
    from tests.helpers import post

    script = tmp_path / "prog.py"
    script.write_text(PROGRAM)
    out = tmp_path / "plan.json"
    assert main(["plan", f"{script}:fn", "--devices", "cpu:8", "--profile", str(profile_path), "--json", str(out),
                 "--no-temporaries"]) == 0  # fmt: skip
    plan = json.loads(out.read_text())
    created = post(client, "/api/snapshots", plan)
    assert created.status_code == 201, created.text
    got = client.get(f"/api/snapshots/{created.json()['id']}").json()
    assert got["cost_profile"]["source"] == "profile.json"
    assert [c["estimate"] for c in got["collectives"]] == [c["estimate"] for c in plan["collectives"]]
