"""``sharding_core.search`` and ``shardscope search`` (issue 34) on 8 compile-only TPU v5p devices with small models
(``tests/search_models.py``): the search's pick is the best of an exhaustive compile the test does itself through
``sharding_core.plan`` (every figure the oracle's: XLA's ``peak_memory_in_bytes``, the plan's expected step time);
the pick's pasted rules give exactly its plan; the error cases say what to change."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

import sharding_core
import shardscope
from sharding_core.errors import ShardingError
from sharding_core.searching import rank
from sharding_core.searching.run import budget_seconds, options
from sharding_core.searching.space import Grid, Leaf, Model, knob_values, meshes, rules_for
from shardscope.cli import main
from tests import search_models

DEVICES = "tpu:v5p:2x2x2"
pytestmark = pytest.mark.tpu


def plan_of(mesh: dict[str, Any], rules: list[Any], knobs: dict[str, Any], fn: Any = search_models.mlp_fixed) -> Any:
    """The candidate compiled by the test itself, through the public API (the oracle)."""
    m = shardscope.mesh(DEVICES, tuple(mesh["shape"]), tuple(mesh["axis_names"]))
    jitted, args = fn(m, tuple((n, tuple(a) if isinstance(a, list) else a) for n, a in rules), **knobs)
    return sharding_core.plan(jitted, *args)


@pytest.fixture(scope="module")
def searched() -> dict[str, Any]:
    current = {"mesh": {"shape": [8], "axis_names": ["fsdp"]}, "rules": [["batch", "fsdp"], ["embed", "fsdp"]]}
    return sharding_core.search(search_models.mlp_fixed, DEVICES, axes=("fsdp", "tensor"), workers=0, current=current)


def test_the_pick_is_the_best_of_an_exhaustive_compile(searched: dict[str, Any]) -> None:
    cands = searched["candidates"]
    assert [c["strategy"] for c in cands if c["compiled"]] and all(c["compiled"] for c in cands)
    assert sorted(c["strategy"] for c in cands) == ["fsdp 2 × tensor 4", "fsdp 4 × tensor 2", "fsdp 8", "tensor 8"]
    mine = []
    for c in cands:
        snap = plan_of(c["mesh"], c["rules"], c["knobs"])
        expected = snap["plan"]["step_time"]["expected_seconds"]
        peak = snap["program"]["memory"]["peak_memory_in_bytes"]
        assert c["peak_bytes"] == peak and math.isclose(c["expected_seconds"], expected, rel_tol=1e-9)
        mine.append((expected, c["strategy"]))
    best = min(mine)[1]
    assert searched["pick"]["strategy"] == best == cands[0]["strategy"]
    assert cands[0]["lost_on"].startswith("picked")
    assert all(c["lost_on"] for c in cands)
    times = [c["expected_seconds"] for c in cands]
    assert times == sorted(times)
    assert 0 in searched["front"] and all(cands[i]["fits"] for i in searched["front"])
    mine = cands[searched["current"]]  # the user's own sharding, compiled and compared like the rest
    assert mine["strategy"] == "fsdp 8" and mine["lost_on"].startswith("your current sharding: ")


def test_the_pasted_rules_give_exactly_the_picks_plan(searched: dict[str, Any]) -> None:
    pick = searched["pick"]
    scope: dict[str, Any] = {"shardscope": shardscope}
    exec(pick["paste"]["python"], scope)
    jitted, args = search_models.mlp_fixed(scope["mesh"], scope["rules"], **scope.get("knobs", {}))
    again = sharding_core.plan(jitted, *args)
    plan = pick["plan"]
    assert again["plan"]["step_time"] == plan["plan"]["step_time"]
    assert again["program"]["memory"] == plan["program"]["memory"]
    facts = [(c["op"], c["bytes"], c["repeat"], c["axes_text"]) for c in again["collectives"]]
    assert facts == [(c["op"], c["bytes"], c["repeat"], c["axes_text"]) for c in plan["collectives"]]
    assert math.isclose(plan["plan"]["step_time"]["expected_seconds"], searched["candidates"][0]["expected_seconds"])
    assert [list(r) if not isinstance(r[1], tuple) else [r[0], list(r[1])] for r in scope["rules"]] == pick["rules"]
    maxtext = pick["paste"]["maxtext"]
    sizes = dict(zip(pick["mesh"]["axis_names"], pick["mesh"]["shape"], strict=True))
    assert f"ici_tensor_parallelism: {sizes.get('tensor', 1)}" in maxtext
    assert f"ici_fsdp_parallelism: {sizes.get('fsdp', 1)}" in maxtext


def test_the_picks_plan_carries_the_search_and_every_compiled_candidate_its_rules(searched: dict[str, Any]) -> None:
    """What the dashboard and the widget draw the front from (issue 34): the pick's plan carries the search without
    the plan itself, so ``--publish`` and ``shardscope.show`` have every candidate; each compiled candidate's rules
    to paste are the pick's kind (pasted back, the first gives exactly its plan: the test above)."""
    carried = searched["pick"]["plan"]["search"]
    assert carried["candidates"] == searched["candidates"] and carried["front"] == searched["front"]
    assert carried["current"] == searched["current"] and carried["devices"] == DEVICES
    assert (
        carried["pick"] == {k: v for k, v in searched["pick"].items() if k != "plan"} and "plan" not in carried["pick"]
    )
    for c in searched["candidates"]:
        assert c["paste"] == rank.paste(DEVICES, 1, c["mesh"], c["rules"], c["knobs"])
    assert searched["pick"]["paste"] == searched["candidates"][0]["paste"]
    scope: dict[str, Any] = {"shardscope": shardscope}
    mine = searched["candidates"][searched["current"]]
    exec(mine["paste"]["python"], scope)
    assert dict(scope["mesh"].shape) == dict(zip(mine["mesh"]["axis_names"], mine["mesh"]["shape"], strict=True))


def test_show_draws_a_searchs_pick_and_says_when_there_is_none(searched: dict[str, Any]) -> None:
    from shardscope.notebook import view_of

    view = view_of(searched)
    assert view.kind == "snapshot" and view.snapshot is not None
    assert view.snapshot["search"]["candidates"] == searched["candidates"]
    with pytest.raises(ShardingError, match="no pick to show"):
        view_of({**searched, "pick": None})


def test_a_model_without_rules_is_told_what_to_add() -> None:
    with pytest.raises(ShardingError) as e:
        sharding_core.search(search_models.no_rules, DEVICES)
    assert e.value.code == "no_rules_parameter"
    assert "rules" in e.value.message and "def no_rules(mesh, rules=None, **knobs)" in str(e.value.hint)


def test_a_set_without_hardware_figures_is_refused() -> None:
    with pytest.raises(ShardingError) as e:
        sharding_core.search(search_models.mlp_fixed, "cpu:8")
    assert e.value.code == "search_needs_figures" and "tpu:" in str(e.value.hint)


def test_nothing_fits_names_the_closest_and_what_to_change(capsys: pytest.CaptureFixture[str]) -> None:
    # 1 MiB usable a device: the arguments (0.5 MiB a device over 8) pass the analytic prune, every compiled peak
    # (XLA's, 1.9 MiB and up) is over it
    headroom = 1 - 2**20 / 102005473280
    argv = ["search", "tests/search_models.py:mlp_fixed", "--devices", DEVICES, "--axes", "tensor,fsdp",
            "--workers", "0", "--max-compiles", "1", "--hbm-headroom", str(headroom)]  # fmt: skip
    assert main(argv) == 3
    out = capsys.readouterr().out
    assert "nothing fits." in out and "closest: " in out and "over what is usable" in out
    assert "  - " in out  # what to change


def test_bad_options_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["search", "tests/search_models.py:mlp_fixed", "--devices", DEVICES, "--budget", "soon"]) == 2
    assert "is not a duration" in capsys.readouterr().err
    assert main(["search", "tests/search_models.py:no_rules", "--devices", DEVICES]) == 2
    assert "add a rules parameter" in capsys.readouterr().err


@pytest.mark.workers
@pytest.mark.slow
def test_a_worker_process_compiles_what_this_process_does(searched: dict[str, Any]) -> None:
    result = sharding_core.search(search_models.mlp_fixed, DEVICES, axes=("tensor",), workers=1)
    [c] = result["candidates"]
    [mine] = [s for s in searched["candidates"] if s["strategy"] == c["strategy"]]
    assert c["compiled"] and c["peak_bytes"] == mine["peak_bytes"] and c["expected_seconds"] == mine["expected_seconds"]


# ---- the space, without compiling


def test_meshes_are_every_factorisation_of_the_slice() -> None:
    model = Model((Leaf((64, 8), 4, ("batch", None), False, False), Leaf((8, 16), 4, ("embed", "mlp"), True)),
                  frozenset({"batch", "embed", "mlp"}), {})  # fmt: skip
    grids = list(meshes(8, 1, model))
    assert len(grids) == 10  # 8 = a·b·c over data, fsdp, tensor: C(3 + 2, 2)
    assert all(math.prod(g.shape) == 8 for g in grids)
    multi = list(meshes(8, 2, model))
    assert all(g.names[0] == "data" and g.dcn[0] == 2 and math.prod(g.shape) == 16 for g in multi)


def test_rules_are_maxtexts_with_uneven_splits_dropped() -> None:
    model = Model((Leaf((64, 8), 4, ("batch", None), False, False), Leaf((8, 6), 4, ("embed", "mlp"), True)),
                  frozenset({"batch", "embed", "mlp"}), {})  # fmt: skip
    grid = Grid((("fsdp", 4), ("tensor", 2)), (1, 1))
    assert rules_for(grid, model) == (("mlp", "tensor"), ("batch", "fsdp"), ("embed", "fsdp"))
    odd = Grid((("fsdp", 2), ("tensor", 4)), (1, 1))  # mlp 6 does not split 4 ways: replicated
    assert rules_for(odd, model) == (("batch", "fsdp"), ("embed", "fsdp"))
    assert rules_for(Grid((("fsdp", 128),), (1,)), model) is None  # a batch of 64 over 128: refused


def test_knobs_are_the_keyword_booleans_and_literals() -> None:
    assert knob_values(search_models.mlp, None) == {"remat": (False, True)}
    assert knob_values(search_models.mlp, {"batch": [32, 64]}) == {"remat": (False, True), "batch": (32, 64)}
    with pytest.raises(ShardingError, match="takes no knob"):
        knob_values(search_models.mlp_fixed, {"remat": [True]})

    def through_kwargs(mesh: Any, rules: Any = None, **knobs: Any) -> Any:
        return search_models.mlp(mesh, rules, **knobs)

    # knobs FN takes through **knobs are searched as given (they were dropped: the search ran with none)
    assert knob_values(through_kwargs, {"remat": [False, True], "batch": [32]}) == {"remat": (False, True),
                                                                                    "batch": (32,)}  # fmt: skip
    assert knob_values(through_kwargs, None) == {}
    # one value given is that value for every candidate, not FN's default; none is an error
    assert knob_values(search_models.mlp, {"remat": [True]}) == {"remat": (True,)}
    for bad in ([], "ab", 3):
        with pytest.raises(ShardingError, match="needs a list of one or more values"):
            knob_values(search_models.mlp, {"remat": bad})


def test_budgets_and_options_are_checked() -> None:
    assert budget_seconds("10m") == 600 and budget_seconds(90) == 90 and budget_seconds("1h") == 3600
    for bad in ("0", "-1", "ten", "7h"):
        with pytest.raises(ShardingError):
            budget_seconds(bad)
    with pytest.raises(ShardingError, match="unknown search option"):
        options(budgets=3)
    with pytest.raises(ShardingError, match="unknown mesh axes"):
        options(axes=("model",))


def test_the_front_and_what_each_lost_on() -> None:
    c = [{"fits": True, "compiled": True, "expected_seconds": 1.0, "peak_bytes": 8 * 2**30, "usable_bytes": 2**36,
          "bound": "compute", "collective_seconds": {}},
         {"fits": True, "compiled": True, "expected_seconds": 2.0, "peak_bytes": 4 * 2**30, "usable_bytes": 2**36,
          "bound": "communication", "collective_seconds": {"all-gathers over fsdp": 1.22}},
         {"fits": True, "compiled": True, "expected_seconds": 3.0, "peak_bytes": 9 * 2**30, "usable_bytes": 2**36,
          "bound": "communication", "collective_seconds": {}},
         {"fits": False, "compiled": True, "expected_seconds": None, "peak_bytes": 2**36 + 3 * 2**30,
          "usable_bytes": 2**36}]  # fmt: skip
    assert rank.front(c) == [0, 1]
    assert rank.lost_on(c[1], c[0], True, 0.1).endswith("communication-bound: all-gathers over fsdp 61 % of the step")
    assert "on the front: less HBM" in rank.lost_on(c[1], c[0], True, 0.1)
    assert rank.lost_on(c[3], c[0], False, 0.1).startswith("over HBM by 3.0 GiB")


@pytest.mark.workers
@pytest.mark.slow
def test_the_mcp_search_tool_answers_the_search() -> None:
    """The MCP server's ``search`` tool (issue 36 waited for this one): the same JSON, from its worker process."""
    import anyio
    from mcp import Client

    from shardscope.mcp.server import Options, build

    async def main() -> None:
        async with Client(build(Options())) as client:
            r = await client.call_tool("search", {"devices": DEVICES, "target": "tests/search_models.py:mlp_fixed",
                                                  "budget_seconds": 240})  # fmt: skip
            assert not r.is_error, r.content
            data = r.structured_content
            assert data is not None
            cands = data["candidates"]
            assert data["pick"]["strategy"] == cands[0]["strategy"] and cands[0]["lost_on"].startswith("picked")
            assert all(c["lost_on"] for c in cands) and data["front"]

    anyio.run(main)


def test_the_search_page_names_every_option() -> None:
    import argparse
    from pathlib import Path

    from shardscope import search_command

    parser = argparse.ArgumentParser()
    search_command.add_parser(parser.add_subparsers())
    sub = parser._subparsers._group_actions[0].choices["search"]  # type: ignore[union-attr]
    page = (Path(__file__).resolve().parent.parent / "docs" / "search.md").read_text()
    missing = sorted(o for a in sub._actions for o in a.option_strings if o.startswith("--") and o != "--help"
                     and f"`{o}" not in page)  # fmt: skip
    assert missing == []


def test_the_bench_cases_build_and_take_their_knobs() -> None:
    """``bench/bench_search.py``'s models (not compiled in CI: minutes each) still build a step for the search's
    rules and knobs, so the bench does not rot unseen (its MoE case once called an older ``make_step``)."""
    import jax

    from bench import bench_search

    mesh = shardscope.mesh(DEVICES, (2, 4), ("data", "expert"))
    rules = (("batch", "data"), ("expert", "expert"))
    for name, (fn, _, opts) in bench_search.CASES.items():
        for knobs in [{}, *({k: v} for k, values in opts.get("knobs", {}).items() for v in values)]:
            jitted, args = fn(mesh, rules, **knobs)
            leaves = jax.tree.leaves(args)
            assert leaves and all(isinstance(x, jax.ShapeDtypeStruct) for x in leaves), (name, knobs)
            assert hasattr(jitted, "lower"), (name, knobs)


def test_the_bench_compiles_pure_fsdp_where_the_search_did_not() -> None:
    """``bench_search.fsdp_only`` (the pick against MaxText's default, pure FSDP): compiled by the bench itself when
    the search left it out, its figures the plan's (it once called a module instead of ``shardscope.mesh``, and
    the 70B's search result was lost after ten minutes)."""
    from bench import bench_search

    cand = {"mesh": {"shape": [8], "axis_names": ["fsdp"]}, "rules": [["batch", "fsdp"], ["embed", "fsdp"]],
            "knobs": {}, "compiled": False}  # fmt: skip
    got = bench_search.fsdp_only({"candidates": [cand]}, search_models.mlp_fixed, DEVICES)
    want = plan_of(cand["mesh"], cand["rules"], {})
    assert got["compiled_here"] and got["strategy"] == "fsdp 8"
    assert got["peak_bytes"] == want["program"]["memory"]["peak_memory_in_bytes"]
    assert math.isclose(got["expected_seconds"], want["plan"]["step_time"]["expected_seconds"], rel_tol=1e-9)


def test_two_rule_sets_on_one_mesh_are_named_apart() -> None:
    """A mesh with an expert axis gets MaxText's rules and the fsdp-only variant: two candidates that printed the
    same strategy ("fsdp 16 × expert 4" twice in the MoE bench); the second now says how it differs."""
    from bench.search_models import mixtral
    from sharding_core.devices import parse_devices
    from sharding_core.searching.run import space
    from sharding_core.searching.space import probe

    devices = "tpu:v5p:4x4x4"
    found = space(devices, parse_devices(devices), probe(mixtral, {}), options(axes=("fsdp", "expert")))
    named = [(c.json()["strategy"], c.knobs) for c in found]
    assert len(named) == len(set(named)), named
    by_mesh: dict[tuple[int, ...], list[Any]] = {}
    for c in found:
        by_mesh.setdefault(c.layout.shape, []).append(c)
    pairs = [cs for cs in by_mesh.values() if len(cs) == 2]
    assert pairs, sorted(by_mesh)
    for first, second in pairs:
        assert first.rules != second.rules
        assert second.json()["strategy"] == first.json()["strategy"] + " (weights' embed over fsdp alone)"


def test_a_worker_does_not_outlive_its_search(tmp_path: Path) -> None:
    """A search killed while a worker compiles (``kill -9``: no ``finally`` runs) takes the worker with it; the
    worker here is stuck for 300 s importing the model, and once killed it must be gone long before."""
    import os
    import signal
    import subprocess
    import sys
    import time

    marker = tmp_path / "started"
    (tmp_path / "stuck.py").write_text(
        f"import pathlib, time\npathlib.Path({str(marker)!r}).touch()\ntime.sleep(300)\n"
        "def fn(mesh, rules=None):\n    pass\n"
    )
    parent = subprocess.Popen(
        [sys.executable, "-c", (
            "import sys, time\n"
            "from sharding_core.searching.pool import _Worker\n"
            f"w = _Worker(({str(tmp_path / 'stuck.py')!r}, 'fn'))\n"
            "w.proc.stdin.write('{\"index\": 0, \"devices\": \"tpu:v5p:2x2x2\"}\\n'); w.proc.stdin.flush()\n"
            "print(w.proc.pid, flush=True)\n"
            "time.sleep(600)\n")],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip

    def alive(pid: int) -> bool:
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            return False
        return "\nState:\tZ" not in status  # a zombie is dead (its new parent may never reap it)

    try:
        assert parent.stdout is not None
        worker = int(parent.stdout.readline())
        deadline = time.monotonic() + 120  # the worker has imported the module and is stuck in it
        while not marker.exists():
            assert time.monotonic() < deadline and parent.poll() is None, "the worker never started"
            time.sleep(0.1)
        assert alive(worker)
        parent.send_signal(signal.SIGKILL)
        parent.wait(30)
        deadline = time.monotonic() + 60  # far below the 300 s it would otherwise sleep
        while alive(worker) and time.monotonic() < deadline:
            time.sleep(0.1)
        still = alive(worker)
        if still:
            os.kill(worker, signal.SIGKILL)
        assert not still, "the worker outlived its search"
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait(30)
        if parent.stdout is not None:
            parent.stdout.close()
