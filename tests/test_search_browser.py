"""A search in the dashboard and in the notebook widget (issue 34: "the dashboard and the widget show the front as a
chart (hover a point for its mesh and rules, click it for its plan), the table, and compare the pick with the current
sharding"): ``shardscope search`` of the small MLP (``tests/search_models.py``) on libtpu's compile-only v5p 2x2x2,
every candidate compiled, the user's current sharding given, published with ``--publish`` (the dashboard) and
written with ``--json`` (``shardscope.show`` of the search's JSON in JupyterLab): one panel, two hosts.

The oracles: each candidate's figures are the search JSON's, which ``tests/test_search.py`` holds to an exhaustive
compile of its own through ``sharding_core.plan`` (XLA's peak, the plan's expected step); the pick's point is held to
the plan drawn under it (the same page), and each candidate's rules to paste to ``rank.paste``.

Screenshots: ``artifacts/screenshots/search-<host>-*.png`` at 1440×900 and 390×844, light and dark.
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, expect

from sharding_core.searching import rank
from tests.notebooks.hosting import Mounted
from tests.notebooks.jupyter import Notebook, in_every_size_and_theme, lab_notebook, mounting
from tests.plugins.browser import SHOTS, Watched, sized_context
from tests.plugins.live import ROOT, Server

pytestmark = [pytest.mark.browser, pytest.mark.tpu]

DEVICES = "tpu:v5p:2x2x2"
CURRENT = {"mesh": {"shape": [8], "axis_names": ["fsdp"]}, "rules": [["batch", "fsdp"], ["embed", "fsdp"]]}


@dataclass
class Searched:
    result: dict[str, Any]  # shardscope search --json
    link: str  # shardscope search --publish
    files: Path


@pytest.fixture(scope="module")
def searched(server: Server, tmp_path_factory: pytest.TempPathFactory) -> Searched:
    files = tmp_path_factory.mktemp("search")
    (files / "current.json").write_text(json.dumps(CURRENT))
    out = files / "search.json"
    # the command a user runs: every candidate of the MLP with its remat knob over fsdp, tensor and data
    r = subprocess.run(
        [sys.executable, "-m", "shardscope", "search", "tests/search_models.py:mlp", "--devices", DEVICES,
         "--axes", "fsdp,tensor,data", "--workers", "0", "--current", str(files / "current.json"),
         "--json", str(out), "--publish", f"http://127.0.0.1:{server.port}"],
        capture_output=True, text=True, cwd=ROOT, timeout=600,
        env={**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    link = re.search(r"published the pick's plan and the search's front: (\S+/s/[\w-]+)", r.stdout)
    assert link, r.stdout[-2000:]
    result = json.loads(out.read_text())
    assert result["compiled"] == len(result["candidates"]) >= 12 and result["current"] is not None
    return Searched(result, link[1], files)


@pytest.fixture(scope="module")
def nb(
    browser: Browser, tmp_path_factory: pytest.TempPathFactory, server: Server, searched: Searched
) -> Iterator[Notebook]:
    cells = ["import json, os\nos.environ.setdefault('JAX_PLATFORMS', 'cpu')\nimport shardscope",
             f"shardscope.show(json.load(open({str(searched.files / 'search.json')!r})))"]  # fmt: skip
    with lab_notebook(browser, tmp_path_factory, cells, {"search": 1}, f"http://127.0.0.1:{server.port}") as shown:
        yield shown


@pytest.fixture
def mount(host: str, request: pytest.FixtureRequest, browser: Browser, searched: Searched) -> Iterator[Any]:
    with mounting(
        host, lambda: request.getfixturevalue("nb"), browser, lambda _: searched.link, lambda _: "rendered"
    ) as m:
        yield m


def test_the_front_draws_every_compiled_candidate_at_its_figures(mount: Any, searched: Searched) -> None:
    p: Mounted = mount("search")
    result = searched.result
    cands = result["candidates"]
    box = p.part("search-section")
    expect(box).to_be_visible()
    summary = p.part("search-summary")
    assert summary.get_attribute("data-candidates") == str(len(cands))
    assert summary.get_attribute("data-compiled") == str(result["compiled"])
    expect(summary).to_contain_text(f"Pick: {result['pick']['strategy']}")
    # the search leads: before the plan it picked
    top = box.bounding_box()
    plan = p.part("plan").bounding_box()
    assert top is not None and plan is not None and top["y"] < plan["y"]
    # a point per compiled candidate, at XLA's peak and the plan's expected step, as the JSON has them
    points = p.part("search-front").locator(".search-point")
    drawn = {int(points.nth(k).get_attribute("data-index") or -1): points.nth(k) for k in range(points.count())}
    assert sorted(drawn) == [i for i, c in enumerate(cands) if c["compiled"] and c["expected_seconds"] is not None]
    for i, dot in drawn.items():
        assert int(dot.get_attribute("data-bytes") or -1) == cands[i]["peak_bytes"], i
        assert math.isclose(float(dot.get_attribute("data-seconds") or -1), cands[i]["expected_seconds"], rel_tol=1e-12)
    # the front, exactly the search's; the pick on it and drawn where its own plan (the page's) puts it
    on_front = sorted(i for i, dot in drawn.items() if "front" in (dot.get_attribute("class") or ""))
    assert on_front == sorted(result["front"]) and 0 in on_front
    plan_snap = result["pick"]["plan"]
    assert int(drawn[0].get_attribute("data-bytes") or -1) == plan_snap["program"]["memory"]["peak_memory_in_bytes"]
    assert math.isclose(float(drawn[0].get_attribute("data-seconds") or -1),
                        plan_snap["plan"]["step_time"]["expected_seconds"], rel_tol=1e-12)  # fmt: skip
    # the table: every candidate, best first, what each lost on
    rows = p.part("search-table").locator("tbody tr")
    expect(rows).to_have_count(len(cands))
    for i in (0, result["current"], len(cands) - 1):
        expect(rows.nth(i)).to_contain_text(cands[i]["lost_on"])
    # the pick against the current sharding: the speed-up from the two compiled step times
    mine, pick = cands[result["current"]], cands[0]
    compare = p.part("search-compare")
    expect(compare).to_contain_text(f"({mine['expected_seconds'] / pick['expected_seconds']:.2f}× faster)")
    expect(compare).to_contain_text(f"Yours ({mine['strategy']}): {mine['lost_on']}")
    p.shot("search-front")


def test_a_point_says_its_mesh_and_rules_and_opens_its_plan(mount: Any, searched: Searched) -> None:
    p: Mounted = mount("search")
    cands = searched.result["candidates"]
    detail = p.part("search-detail")
    # at first, the pick's: its rules to paste are the search's own
    expect(detail.locator("h3")).to_have_text(f"#0 {cands[0]['strategy']} — the pick")
    first = rank.paste(DEVICES, 1, cands[0]["mesh"], cands[0]["rules"], cands[0]["knobs"])
    expect(detail.locator("[data-part=search-paste]")).to_have_text(first["python"])
    # a point that is neither: hovered (or focused) it says its mesh, knobs and rules; clicked, its plan
    i = next(k for k, c in enumerate(cands) if k and not c.get("current") and len(c["mesh"]["shape"]) == 2)
    c = cands[i]
    dot = p.part("search-front").locator(f".search-point[data-index='{i}']")
    dot.focus()
    readout = p.part("search-readout")
    mesh = " × ".join(f"{a} {s}" for a, s in zip(c["mesh"]["axis_names"], c["mesh"]["shape"], strict=True))
    expect(readout).to_contain_text(f"#{i} {mesh}")
    for name, axes in c["rules"]:
        said = "replicated" if axes is None else " × ".join(axes) if isinstance(axes, list) else axes
        expect(readout).to_contain_text(f"{name} → {said}")
    dot.press("Enter")
    expect(detail).to_have_attribute("data-index", str(i))
    expect(detail.locator("h3")).to_have_text(f"#{i} {c['strategy']}")
    expect(detail).to_contain_text(c["lost_on"])
    expect(detail.locator("[data-part=search-paste]")).to_have_text(c["paste"]["python"])
    expect(detail.locator("[data-part=search-maxtext]")).to_have_text(c["paste"]["maxtext"])
    assert c["paste"] == rank.paste(DEVICES, 1, c["mesh"], c["rules"], c["knobs"])
    expect(p.part("search-table").locator(f"tbody tr[data-index='{i}']")).to_have_attribute("aria-selected", "true")
    # a row chooses as its point does
    row = p.part("search-table").locator(f"tbody tr[data-index='{searched.result['current']}']")
    row.click()
    expect(detail.locator("h3")).to_contain_text("your current sharding")
    p.shot("search-chosen")


def test_a_search_on_the_dashboard_fits_every_size_and_theme(browser: Browser, searched: Searched) -> None:
    for width, height in ((1440, 900), (390, 844)):
        for scheme in ("light", "dark"):
            context = sized_context(browser, width, height, scheme)
            w = Watched(context)
            try:
                w.page.goto(searched.link)
                w.page.wait_for_selector("body[data-rendered]", state="attached", timeout=90_000)
                assert w.page.evaluate("() => document.documentElement.scrollWidth") <= width, "wider than the window"
                SHOTS.mkdir(parents=True, exist_ok=True)
                w.page.screenshot(path=str(SHOTS / f"search-dashboard-{width}-{scheme}.png"))
                w.page.locator("[data-part=search-section]").screenshot(
                    path=str(SHOTS / f"search-dashboard-{width}-{scheme}-section.png")
                )
                assert w.errors == []
            finally:
                context.close()


def test_a_search_in_jupyterlab_fits_every_size_and_theme(nb: Notebook) -> None:
    in_every_size_and_theme(nb, ["search"], "search-jupyterlab", parts=["search-section"])


def test_the_chart_is_drawn_again_for_a_phone_when_its_card_narrows(nb: Notebook) -> None:
    """The widget was drawn at 1400 px; narrowed to a phone's width, its chart is drawn again with the phone's
    drawing (larger type), and back; the chosen point stays chosen."""
    chart = nb.widget("search").locator("[data-part=search-front]")
    try:
        for width, drawing in ((390, "0 0 420 300"), (1400, "0 0 760 280")):
            nb.page.set_viewport_size({"width": width, "height": 900})
            expect(chart).to_have_attribute("viewBox", drawing)
            expect(chart.locator("circle.search-selected")).to_have_attribute("visibility", "visible")
    finally:
        nb.page.set_viewport_size({"width": 1400, "height": 1000})
