"""The cost model against published measurements (``sharding_core/cost/measurements.py``): every row sourced,
the shipped efficiencies exactly what the table fits, the expected times within the goals (median |error|
≤ 25 %, worst ≤ 60 %), and the refit of a GPU profile from a user's own ``all_reduce_perf`` output, parsed
strictly. ``bench/bench_cost.py`` prints the whole table, the leave-one-out errors and the refit's time.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from sharding_core.cost import efficiency as ef
from sharding_core.cost.measurements import MEASUREMENTS


def test_the_table_has_at_least_20_published_rows_each_with_its_source() -> None:
    assert len(MEASUREMENTS) >= 20
    for m in MEASUREMENTS:
        assert m.url.startswith("https://") and m.read and m.seconds > 0 and m.bytes > 0
    devices = {m.devices.split(":")[1] for m in MEASUREMENTS}
    assert {"h100", "h200", "b200"} <= devices  # NVLink generations
    assert any(m.devices.startswith("tpu:") for m in MEASUREMENTS)
    assert any(int(m.devices.split(":")[2].split("x")[0]) > 1 for m in MEASUREMENTS if m.devices.startswith("gpu"))
    book = [m for m in MEASUREMENTS if "scaling-book" in m.url]
    assert any(m.seconds == 680e-6 for m in book)  # the book's measured 680 us against its predicted 560 us


def test_the_shipped_profiles_are_the_fit_of_the_table() -> None:
    fitted = ef.fit_profiles([row for _, row in ef.measured_rows()])
    for key in ef.KEYS:
        got, want = ef.PROFILES[key], fitted[key]
        assert got.efficiency == pytest.approx(want.efficiency, abs=1e-9), key
        assert got.step_latency == pytest.approx(want.step_latency, abs=1e-12), key
        assert (got.rows, got.borrowed) == (want.rows, want.borrowed), key


def test_expected_times_meet_the_goals_and_bounds_stay_the_book() -> None:
    result = ef.evaluate()
    assert result["expected"]["median_abs"] <= 0.25
    assert result["expected"]["worst_abs"] <= 0.60
    # the book's 680 us measurement against its own 560 us prediction: the bound is the book's number
    row = next(r for r in result["rows"] if r["measured_seconds"] == 680e-6)
    assert row["bound_seconds"] == pytest.approx(3 * 2048 * 8192 * 2 / 4 / 4.5e10)
    assert abs(row["expected_error"]) < abs(row["bound_error"])


def nccl_output(
    rows: list[tuple[int, float]], hosts: int = 1, gpus: int = 8, kind: str = "NVIDIA H100 80GB HBM3"
) -> str:
    """all_reduce_perf's output format (nccl-tests 2.x), with the given (size, out-of-place time in us) rows."""
    lines = [
        "# nThread 1 nGpus 1 minBytes 8 maxBytes 8589934592 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 "
        "validation: 1 graph: 0",
        "#",
        "# Using devices",
    ]
    for r in range(hosts * gpus):
        lines.append(
            f"#  Rank {r:2d} Group  0 Pid {1000 + r:6d} on node{r // gpus:02d} device  {r % gpus} [0x{r:02x}] {kind}"
        )
    lines += [
        "#",
        "#                                                              out-of-place                       in-place",
        "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw "
        "#wrong",
        "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)",
    ]
    n = hosts * gpus
    for size, us in rows:
        algbw = size / (us * 1e-6) / 1e9
        busbw = algbw * 2 * (n - 1) / n
        lines.append(
            f"{size:12d}  {size // 4:12d}     float     sum      -1  {us:8.2f}  {algbw:6.2f}  {busbw:6.2f}      0  "
            f"{us:8.2f}  {algbw:6.2f}  {busbw:6.2f}      0"
        )
    lines += ["# Out of bounds values : 0 OK", "# Avg bus bandwidth    : 123.4", "#"]
    return "\n".join(lines) + "\n"


def model_rows(efficiency: float, step_latency: float, hosts: int = 1) -> list[tuple[int, float]]:
    """Times an all-reduce would take if the fabric ran at ``efficiency`` with ``step_latency`` per step."""
    profiles = dict(ef.PROFILES)
    key = "network" if hosts > 1 else "nvlink"
    profiles[key] = ef.FabricProfile(efficiency, step_latency)
    out = []
    for size in (8, 1024, 1 << 16, 1 << 20, 1 << 24, 1 << 28, 1 << 32):
        result = ef.fit_nccl_tests(nccl_output([(size, 1.0)], hosts=hosts))
        row = ef.Row(*_terms(size, hosts), measured=1.0, bound=0.0)
        out.append((size, ef.expected_of(row, profiles) * 1e6))
        assert result["ranks"] == 8 * hosts
    return out


def _terms(size: int, hosts: int) -> tuple[tuple[ef.Term, ...], str]:
    from sharding_core.cost.collectives import estimate_collective
    from sharding_core.cost.context import context_for
    from sharding_core.devices import parse_devices

    devset = parse_devices(f"gpu:h100:{hosts}x8")
    est = estimate_collective({"op": "all-reduce", "bytes": size, "groups": [[d.id for d in devset.devices]]},
                              context_for(devset))  # fmt: skip
    return ef.terms_of(est)


# Across hosts the levels pipeline and the slower sets the time: a network at 0.35 of its NICs' line rate is
# slower than NVLink, so the run shows it (at 0.62 NVLink would hide it and nothing could be fitted).
@pytest.mark.parametrize(("hosts", "efficiency"), [(1, 0.62), (2, 0.35)])
def test_a_refit_recovers_the_fabric_a_run_shows(hosts: int, efficiency: float) -> None:
    rows = model_rows(efficiency, 7.5e-6, hosts)
    result = ef.fit_nccl_tests(nccl_output(rows, hosts=hosts))
    assert result["gpu"] == "h100" and result["hosts"] == hosts
    assert result["fabric"] == ("network" if hosts > 1 else "nvlink")
    assert result["devices"] == f"gpu:h100:{hosts}x8"
    assert result["profile"]["efficiency"] == pytest.approx(efficiency, abs=0.006)
    assert result["profile"]["step_latency"] == pytest.approx(7.5e-6, abs=0.11e-6)
    assert result["errors"]["refit"]["worst_abs"] < 0.02 < result["errors"]["shipped"]["worst_abs"]


def test_the_paste_is_parsed_strictly() -> None:
    good = nccl_output([(1 << 20, 30.0), (1 << 24, 120.0)])
    run = ef.parse_all_reduce_perf(good)
    assert (run.ranks, run.hosts, run.device_kind) == (8, 1, "NVIDIA H100 80GB HBM3")
    assert run.rows == ((1 << 20, 30e-6), (1 << 24, 120e-6))
    refusals = {
        "no rank lines": "\n".join(line for line in good.splitlines() if "Rank" not in line),
        "a broken row": good.replace("float     sum", "float     sum  x", 1),
        "not a sum": good.replace("sum", "max"),
        "no rows": "\n".join(line for line in good.splitlines() if not line.strip()[:1].isdigit()),
        "mixed GPUs": good.replace("NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB", 1),
        "too long": good + "#" * ef.MAX_NCCL_TEXT_CHARS,
        "too many rows": nccl_output([(8 * (k + 1), 10.0) for k in range(ef.MAX_NCCL_ROWS + 1)]),
    }
    for what, text in refusals.items():
        with pytest.raises(ef.NcclParseError):
            ef.parse_all_reduce_perf(text)
            pytest.fail(what)
    with pytest.raises(ef.NcclParseError, match="no figures"):
        ef.fit_nccl_tests(nccl_output([(1 << 20, 30.0)], kind="NVIDIA GeForce RTX 4090"))
    assert (
        ef.fit_nccl_tests(nccl_output([(1 << 20, 30.0)], kind="NVIDIA GeForce RTX 4090"), gpu="h100")["gpu"] == "h100"
    )


def test_profiles_serialise() -> None:
    p = ef.PROFILES["nvlink"]
    assert p.json() == dataclasses.asdict(p) and ef.PROFILES["dcn"].borrowed == "network"


def test_the_cost_model_document_prints_the_current_table_and_profiles() -> None:
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[1] / "docs" / "cost-model.md").read_text()
    assert ef.markdown_table() in doc, (
        "docs/cost-model.md is stale: paste sharding_core.cost.efficiency.markdown_table()"
    )
    for key, p in ef.PROFILES.items():
        assert f"| `{key}` | {p.efficiency:g} | {p.step_latency * 1e6:.3g} µs |" in doc, key
    assert ef.summary_line(ef.evaluate()) in doc, "docs/cost-model.md states stale errors"


def test_the_cli_refits_a_pasted_output(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    from shardscope.cli import main

    path = tmp_path / "all_reduce.txt"
    path.write_text(nccl_output(model_rows(0.6, 4e-6)))
    assert main(["nccl-fit", str(path)]) == 0
    out = capsys.readouterr().out
    assert "refitted: efficiency 0.6, latency 4 µs per step" in out and "gpu:h100:1x8" in out
    path.write_text("not nccl-tests output")
    assert main(["nccl-fit", str(path)]) == 2
    assert "bad_nccl_output" in capsys.readouterr().err
