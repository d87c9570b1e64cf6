"""A plan in the dashboard and in the notebook widget (issue 25's views): the snapshot panel of a Llama-style
training step planned on libtpu's v5p 2x2x4 (compile-only: no TPU here) leads with the plan's verdict, HBM
per device by kind against the chip's capacity, the step time and the roofline, then the collectives with
their runs per step; a click draws a collective's device groups on the mesh and links to the topology view.
A program XLA refuses for memory leads with XLA's figures. Every test runs on the dashboard's page (the
plan as ``shardscope plan --publish`` published it) and in JupyterLab (``shardscope.show`` of the same plan,
its JSON from ``shardscope plan --json``): one panel, two hosts.

The oracles: XLA's own ``memory_analysis()`` and optimized HLO of the same step compiled again in this
process (its collectives and replica groups read by the planning tests' independent reader, mapped through
the executable's device assignment), each argument group's bytes from ``NamedSharding.shard_shape``, and
the plan JSON for what only the plan knows (its verdict, repeat counts, the step-time band).

Screenshots: ``artifacts/screenshots/plan-<host>-*.png`` at 1440×900 and 390×844, light and dark.
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
from urllib.parse import parse_qs, urlencode, urlsplit

import jax
import pytest
from playwright.sync_api import Browser, expect

from examples import llama
from sharding_core import publish
from sharding_core.capturing import plan
from sharding_core.program.targets import mesh
from tests.notebooks.hosting import Mounted
from tests.notebooks.jupyter import Notebook, in_every_size_and_theme, lab_notebook, mounting
from tests.plugins.browser import SHOTS, Watched, rendered, sized_context
from tests.plugins.live import ROOT, Server
from tests.test_planning import hlo_collectives, hlo_groups

pytestmark = [pytest.mark.browser, pytest.mark.tpu]

DEVICES, MESH, AXES = "tpu:v5p:2x2x4", (4, 4), ("fsdp", "tp")
# XLA refuses this one on v5e 4x4 for its temporaries (the attention scores of S=8192): tests/test_planning.py
REFUSED = llama.Config(vocab=32000, d_model=2048, n_layers=2, n_heads=16, n_kv_heads=4, head_dim=128, d_ff=8192)
MEMORY_FIELDS = ("argument_size_in_bytes", "output_size_in_bytes", "alias_size_in_bytes", "temp_size_in_bytes",
                 "peak_memory_in_bytes")  # fmt: skip


def gib_text(n: int) -> str:
    """Bytes as the page words them (binary units, three significant figures or so), written here again."""
    value, unit = float(n), 0
    units = ["B", "KiB", "MiB", "GiB", "TiB"]
    while value >= 1024 and unit < len(units) - 1:
        value /= 1024
        unit += 1
    return f"{int(value)} B" if unit == 0 else f"{value:.{2 if value < 10 else 1}f} {units[unit]}"


def seconds_text(s: float) -> str:
    """Seconds as the page words them: three significant digits in the unit that reads."""
    rounded = float(f"{s:.3g}")
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6), ("ns", 1e-9)):
        if rounded >= scale:
            return f"{float(f'{rounded / scale:.3g}'):g} {unit}"
    raise AssertionError(s)


@dataclass
class Plans:
    """The plans the tests show, and XLA's own figures for the first, compiled again here."""

    snap: dict[str, Any]  # shardscope plan --json
    link: str  # shardscope plan --publish
    refusal: dict[str, Any]
    refusal_link: str
    stats: dict[str, int]  # memory_analysis() of the same step
    names: set[str]  # the collectives of its optimized HLO
    groups: dict[str, list[list[int]]]  # instruction -> replica groups as device ids
    group_bytes: dict[str, int]  # argument group -> bytes per device (shard_shape)
    files: Path  # the plans' JSON, for the notebook
    offload: dict[str, Any]  # a step that keeps Adam's moments in host memory (its timeline has a host series)
    offload_link: str


def _group_bytes(args: tuple[Any, ...]) -> dict[str, int]:
    """Each argument group's bytes on a device: the shard of every leaf (``Sharding.shard_shape``), by the
    argument and the NamedTuple fields on the way (optax's ``ScaleByAdamState`` mu, nu, count)."""
    out: dict[str, int] = {}
    for i, arg in enumerate(args):
        for path, leaf in jax.tree_util.tree_flatten_with_path(arg)[0]:
            fields = [k.name for k in path if isinstance(k, jax.tree_util.GetAttrKey)]
            key = "/".join(["args", str(i), *fields])
            shard = leaf.sharding.shard_shape(leaf.shape)
            out[key] = out.get(key, 0) + math.prod(shard) * leaf.dtype.itemsize
    return out


@pytest.fixture(scope="module")
def plans(server: Server, tmp_path_factory: pytest.TempPathFactory) -> Plans:
    dashboard = f"http://127.0.0.1:{server.port}"
    files = tmp_path_factory.mktemp("plans")
    out = files / "plan.json"
    # the command a user runs: its JSON for the notebook, its published link for the dashboard
    r = subprocess.run(
        [sys.executable, "-m", "shardscope", "plan", "examples/llama.py:tiny_fsdp_tp", "--devices", DEVICES,
         "--mesh", "4x4", "--axes", ",".join(AXES), "--json", str(out), "--publish", dashboard],
        capture_output=True, text=True, cwd=ROOT, timeout=600,
        env={**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    link = re.search(r"published: (\S+/s/[\w-]+)", r.stdout)
    assert link, r.stdout[-2000:]
    snap = json.loads(out.read_text())
    # XLA's own figures: the same step compiled again in this process
    m = mesh(DEVICES, MESH, AXES)
    step, args = llama.tiny_fsdp_tp(m)
    compiled = step.lower(*args).compile()
    stats = compiled.memory_analysis()
    hlo = compiled.as_text()
    assignment = [int(d.id) for d in compiled.input_shardings[0][0]["embed"]._device_assignment]
    groups = {name: [[assignment[p] for p in g] for g in gs] for name, gs in hlo_groups(hlo).items()}
    # a step XLA refuses for memory, published as a user's script would
    rm = mesh("tpu:v5e:4x4", (16,), ("fsdp",))
    rstep, rargs = llama.plan_fn(REFUSED, "fsdp", 64, 8192)(rm)
    refusal = plan(rstep, *rargs)
    (files / "refusal.json").write_text(json.dumps(refusal))
    ostep, oargs = llama.tiny_fsdp(mesh("tpu:v5e:2x2", (4,), ("fsdp",)), optimizer_offload=True)
    offload = plan(ostep, *oargs)
    (files / "offload.json").write_text(json.dumps(offload))
    return Plans(
        snap=snap,
        link=link[1],
        refusal=refusal,
        refusal_link=publish(refusal, "refused step", dashboard),
        stats={k: int(getattr(stats, k)) for k in MEMORY_FIELDS},
        names=set(hlo_collectives(hlo)),
        groups=groups,
        group_bytes=_group_bytes(args),
        files=files,
        offload=offload,
        offload_link=publish(offload, "offloaded step", dashboard),
    )


SETUP = """\
import json, os
os.environ.setdefault("JAX_PLATFORMS", "cpu")
import shardscope"""
SHOWN = {"plan": 1, "refusal": 2, "offload": 3}


@pytest.fixture(scope="module")
def nb(browser: Browser, tmp_path_factory: pytest.TempPathFactory, server: Server, plans: Plans) -> Iterator[Notebook]:
    cells = [SETUP, *(f"shardscope.show(json.load(open({str(plans.files / f'{n}.json')!r})))" for n in SHOWN)]
    with lab_notebook(browser, tmp_path_factory, cells, SHOWN, f"http://127.0.0.1:{server.port}") as shown:
        yield shown


@pytest.fixture
def mount(host: str, request: pytest.FixtureRequest, browser: Browser, plans: Plans) -> Iterator[Any]:
    """``mount(name)``: the snapshot panel showing plan ``name`` (plan, refusal) on the test's host."""
    address = {"plan": plans.link, "refusal": plans.refusal_link, "offload": plans.offload_link}
    with mounting(host, lambda: request.getfixturevalue("nb"), browser, address.__getitem__, lambda _: "rendered") as m:
        yield m


# ---- the plan leads -------------------------------------------------------------------------------------


def test_a_plan_leads_with_its_verdict_hbm_and_roofline(mount: Any, plans: Plans) -> None:
    p: Mounted = mount("plan")
    want = plans.snap["plan"]
    expect(p.part("plan-verdict")).to_have_text(want["verdict"])
    assert want["verdict"].startswith("fits: ")
    # the plan, then the collectives, then the leaves: what matters first
    tops = [p.root.locator(sel).first.bounding_box() for sel in ("[data-part=plan]", "[data-part=collectives-section]",
                                                                 "[data-part=leaf-table]")]  # fmt: skip
    assert all(t is not None for t in tops) and tops[0]["y"] < tops[1]["y"] < tops[2]["y"], tops  # type: ignore[index]
    # XLA's memory_analysis, exactly, as the page shows it (bytes on hover, the figure as text)
    hbm = p.part("plan-hbm")
    for field, value in plans.stats.items():
        figure = hbm.locator(f"dd[data-field={field}]")
        assert int(figure.get_attribute("data-bytes") or -1) == value, field
        expect(figure).to_contain_text(gib_text(value))
    expect(hbm.locator("dd[data-field=capacity]")).to_have_text(gib_text(want["capacity_bytes"]))
    # the bar by kind: each argument group's shards (shard_shape), what pads them to XLA's argument figure,
    # the outputs not written into donated buffers, XLA's temporaries
    segments = hbm.locator("[data-part=hbm-bar] .hbm-seg")
    drawn = {s.get_attribute("data-label"): int(s.get_attribute("data-bytes") or -1) for s in segments.all()}
    names = {"args/0": "params", "args/1/mu": "opt_state.mu", "args/1/nu": "opt_state.nu",
             "args/1/count": "opt_state.count", "args/2": "batch"}  # fmt: skip
    for group, nbytes in plans.group_bytes.items():
        assert drawn[names[group]] == nbytes, group
    args = sum(plans.group_bytes.values())
    stats = plans.stats
    assert drawn["argument padding"] == stats["argument_size_in_bytes"] - args
    assert drawn["outputs (not donated)"] == stats["output_size_in_bytes"] - stats["alias_size_in_bytes"]
    assert drawn["temporaries"] == stats["temp_size_in_bytes"]
    # the used part is a sliver of 95 GiB: drawn again on its own scale, the peak marked on both
    expect(hbm.locator("[data-part=hbm-zoom] .hbm-peak")).to_contain_text(
        f"peak {gib_text(stats['peak_memory_in_bytes'])}"
    )
    expect(hbm.locator("[data-part=hbm-bar] .hbm-limit")).to_contain_text(
        f"capacity {gib_text(want['capacity_bytes'])}"
    )
    # the step-time band and the roofline: bound and expected
    st = want["step_time"]
    step = p.part("plan-step")
    # the lower bound is named for what it is on every surface: the step at 100 % MFU (issue 31)
    expect(step).to_contain_text(f"{seconds_text(st['lower_bound_seconds'])} at 100 % MFU ({st['bound']}-bound)")
    expect(step).to_contain_text(f"expected {seconds_text(st['expected_seconds'])}")
    roofline = p.part("plan-roofline")
    assert roofline.locator("svg.roofline-bars .bar").count() == 3
    expect(roofline.locator("svg .bar.communication .bar-value")).to_have_text(
        f"{seconds_text(st['communication_seconds'])} · expected {seconds_text(st['communication_expected_seconds'])}"
    )
    expect(roofline.locator("dd.bound")).to_have_text(f"{st['bound']}-bound")
    # issue 28: the roofline card said "86.4 ms with no overlap" (the bounds' sum) beside the step time's "103 ms
    # with nothing overlapped" (at expected times): one definition, one wording
    nothing = f"{seconds_text(st['upper_bound_seconds'])} with nothing overlapped"
    expect(step).to_contain_text(nothing)
    expect(roofline.locator("dt:text-is('at 100 % MFU') + dd")).to_contain_text(nothing)
    assert "no overlap" not in p.part("plan").inner_text()
    # ... and three memory numbers without a key: the bar's sum, XLA's temporaries and XLA's peak, each named
    parts_sum = sum(drawn.values())
    key = p.part("hbm-key")
    expect(key).to_contain_text(f"the bar adds its parts, {gib_text(parts_sum)}")
    expect(key).to_contain_text(f"{gib_text(stats['temp_size_in_bytes'])}: the size of its temporary allocation")
    expect(key).to_contain_text(f"XLA's peak, {gib_text(stats['peak_memory_in_bytes'])}, is the most live at once")
    # the per-device chart of a compiled program's snapshot holds its arguments and outputs, and says so
    expect(p.part("memory-title")).to_have_text("Arguments and outputs per device")
    expect(p.part("memory-flag")).to_contain_text("Arguments and outputs (not temporaries")
    expect(p.part("plan-facts")).to_contain_text(f"{DEVICES} — 16 TPU v5 on 4 hosts, 1 slice")
    p.shot("plan-lead")


def test_the_memory_timeline_draws_host_memory_where_the_step_offloads(mount: Any, plans: Plans) -> None:
    """Issue 33: "HBM, and host memory kinds where the program offloads" — a step keeping Adam's moments in pinned
    host memory (``optimizer_offload=True``) gets a second, dashed series on the same axis and its peak in words
    (its resident bytes are XLA's host arguments: tests/test_fit_knobs.py); the plan above, which offloads
    nothing, has one series."""
    p: Mounted = mount("offload")
    host = plans.offload["memory_timeline"]["host"]
    box = p.part("memory-timeline")
    said = box.locator("[data-part=timeline-host]")
    assert int(said.get_attribute("data-bytes") or -1) == host["peak_bytes"]
    expect(said).to_contain_text(f"peak {gib_text(host['peak_bytes'])} per device at point {host['peak_index']}")
    expect(said).to_contain_text(f"{gib_text(host['resident_bytes'])} of it host arguments and outputs")
    assert box.locator("svg.memory-timeline-chart polyline.memory-timeline-host").count() == 1
    legend = f"host memory (dashed), peak {gib_text(host['peak_bytes'])}"
    expect(box.locator("svg.memory-timeline-chart")).to_contain_text(legend)
    # the HBM bar leaves the moments out (they are in host memory) and lists them apart, with their bytes
    away = [g for g in plans.offload["plan"]["arguments"]["groups"] if g.get("host_bytes_per_device")]
    hbm = p.part("plan-hbm")
    drawn = {s.get_attribute("data-label") for s in hbm.locator("[data-part=hbm-bar] .hbm-seg").all()}
    assert away and not drawn & {g["name"] for g in away}, drawn
    rows = hbm.locator("tr[data-kind=host]")
    expect(rows).to_have_count(len(away))
    for k, g in enumerate(away):
        expect(rows.nth(k)).to_contain_text(f"{g['name']} (host memory)")
        figure = rows.nth(k).locator("td[data-bytes]").get_attribute("data-bytes")
        assert int(figure or -1) == g["host_bytes_per_device"]
    p.shot("plan-timeline-host")


def test_the_memory_timeline_marks_xlas_peak_and_names_the_buffers_at_it(mount: Any, plans: Plans) -> None:
    """Issue 33: memory over program order, XLA's peak (memory_analysis of the same step) to the byte, the buffers
    live at the peak in a table (their groups and padding as the plan's JSON has them), a row's source on a click."""
    p: Mounted = mount("plan")
    timeline = plans.snap["memory_timeline"]
    box = p.part("memory-timeline")
    peak = box.locator("[data-part=timeline-peak]")
    assert int(peak.get_attribute("data-bytes") or -1) == plans.stats["peak_memory_in_bytes"]
    expect(peak).to_contain_text(f"Peak {gib_text(plans.stats['peak_memory_in_bytes'])} per device")
    assert box.locator("svg.memory-timeline-chart polyline").count() == 1  # HBM alone: it offloads nothing
    rows = box.locator("table.memory-peak-table tbody tr")
    assert rows.count() == len(timeline["at_peak"]) > 0
    padded = [b for b in timeline["at_peak"] if b["padded"]]
    assert box.locator("td.warn").count() == len(padded)
    for k, b in enumerate(timeline["at_peak"][:5]):
        expect(rows.nth(k).locator("td").nth(0)).to_have_text(b["name"])
        expect(rows.nth(k).locator("td").nth(2)).to_have_text(gib_text(b["bytes"]))
    made = next(k for k, b in enumerate(timeline["at_peak"]) if b["source"])
    rows.nth(made).click()
    expect(box.locator("[data-part=timeline-detail]")).to_contain_text(timeline["at_peak"][made]["source"])
    box.scroll_into_view_if_needed()
    p.shot("plan-timeline")


# Before the test that picks a collective: in JupyterLab the widget shown again in the same notebook kept the
# previous test's pick (#1), so "the costliest is drawn until another is chosen" holds for a widget nobody chose in.
def test_the_collectives_are_costliest_first_and_sort_by_any_column(mount: Any, plans: Plans) -> None:
    """Regression (issue 28): the table was in program order with no sort (the costliest was row 7 of 30) while
    the CLI sorts by per-step cost. The order here: each collective's estimate times its runs per step, from the
    plan's JSON (ties in program order); "#" is program order again."""
    p: Mounted = mount("plan")
    colls = plans.snap["collectives"]
    table = p.part("collectives").locator("table")
    rows = table.locator("tbody tr")
    expect(rows).to_have_count(len(colls))

    def order() -> list[int]:
        return [int(i) for i in rows.evaluate_all("rs => rs.map(r => r.dataset.index)")]

    per_step = [c["estimate"]["seconds"] * c["repeat"] for c in colls]
    assert order() == sorted(range(len(colls)), key=lambda i: (-per_step[i], i))
    assert per_step[order()[0]] == max(per_step)
    expect(table.locator("th[aria-sort=descending]")).to_have_text(re.compile("^estimate"))
    # the costliest is the one drawn on the mesh until another is chosen
    expect(p.part("collective-mesh").locator(".mesh-caption")).to_have_text(re.compile(f"^#{order()[0] + 1} "))
    table.locator("th button", has_text="bytes").click()
    nbytes = [c["bytes"] for c in colls]
    assert order() == sorted(range(len(colls)), key=lambda i: (-nbytes[i], i))
    table.locator("th button", has_text="bytes").click()  # again: the other way
    assert order() == sorted(range(len(colls)), key=lambda i: (nbytes[i], i))
    expect(table.locator("th[aria-sort=ascending]")).to_have_text(re.compile("^bytes"))
    table.locator("th button", has_text="#").click()
    assert order() == list(range(len(colls)))
    # every column in view, in the widget too (issue 28: its collectives table was clipped at 1,090 px)
    clipped = p.part("collectives").evaluate("w => w.scrollWidth - w.clientWidth")
    assert clipped <= 1, clipped
    p.part("collectives").scroll_into_view_if_needed()
    p.shot("plan-collectives")


def test_the_collectives_run_per_step_and_draw_their_groups(mount: Any, plans: Plans) -> None:
    p: Mounted = mount("plan")
    rows = p.part("collectives").locator("tr.collective")
    colls = plans.snap["collectives"]
    expect(rows).to_have_count(len(colls))
    assert {r.get_attribute("data-name") for r in rows.all()} == plans.names  # the HLO's own collectives
    runs = dict(zip([r.get_attribute("data-name") for r in rows.all()], rows.locator("td.runs").all_text_contents(),
                    strict=True))  # fmt: skip
    assert runs == {c["name"]: f"× {c['repeat']}" for c in colls}
    looped = {c["repeat"] for c in colls}
    assert looped == {1, llama.CONFIGS["tiny"].n_layers}, looped  # the scanned layers' run once per layer
    expect(p.part("collectives-title")).to_have_text(
        f"Collectives (compiled HLO): {len(colls)}, {sum(c['repeat'] for c in colls)} runs per step"
    )
    # one in the scanned layers: its groups on the mesh, as XLA's replica groups name them
    k, c = next((k, c) for k, c in enumerate(colls) if c["repeat"] > 1 and c["name"] in plans.groups)
    over = ",".join(c["axes"])
    before = p.count("collective")
    rows.and_(p.root.locator(f"[data-index='{k}']")).click()  # k in program order (the table is costliest first)
    p.counted(before, "collective")
    mesh = p.part("collective-mesh")
    groups = plans.groups[c["name"]]
    caption = rf"^#{k + 1} {c['op']} over {over}: {len(groups)} groups of {len(groups[0])}"
    expect(mesh.locator(".mesh-caption")).to_have_text(re.compile(caption))
    colours = []
    for group in groups:
        cells = {mesh.locator(f"td[data-device='{d}']").evaluate("e => e.style.background") for d in group}
        assert len(cells) == 1, (group, cells)  # a group's devices alike
        colours.append(cells.pop())
    assert len(set(colours)) == len(colours)  # groups apart
    # ... and on the topology view: the dashboard's, with the plan's devices, mesh and groups
    link = p.part("topology-link")
    query = parse_qs(urlsplit(link.get_attribute("href") or "").query)
    assert query["devices"] == [DEVICES] and query["mesh"] == ["4x4"] and query["axes"] == [",".join(AXES)]
    handed = sorted(sorted(int(x) for x in g.split(",")) for g in query["groups"][0].split(";"))
    assert handed == sorted(sorted(g) for g in groups)
    mesh_ids = [d for row in plans.snap["meshes"][0]["device_ids"] for d in row]
    assert [int(x) for x in query["ids"][0].split(",")] == mesh_ids and query["order"] == ["devices"]
    if p.host == "jupyterlab":  # the widget's dashboard, in a new tab
        assert (link.get_attribute("href") or "").startswith(plans.link.split("/s/")[0] + "/topology.html?")
        assert link.get_attribute("target") == "_blank"
        return
    link.click()
    p.page.wait_for_url("**/topology.html?**")
    rendered(p.page)
    expect(p.page.locator("[data-part=spec-error]")).to_be_hidden()
    expect(p.page.locator("[data-part=topo-view]")).to_have_attribute("data-axis", f"⟨{c['op']} over {over}⟩")
    assert p.page.locator("[data-part=hop-table] tbody tr").count() == len(groups)


def test_a_refusal_leads_with_xlas_figures(mount: Any, plans: Plans) -> None:
    p: Mounted = mount("refusal")
    want = plans.refusal["plan"]
    r = want["refusal"]
    expect(p.part("plan-verdict")).to_have_text(want["verdict"])
    expect(p.part("plan-verdict")).to_have_attribute("data-fits", "over")
    msg = re.search(r"\(([\d.]+)G\) exceeds available HBM \(([\d.]+)G\)", r["message"])  # XLA's own words
    assert msg, r["message"]
    over = int(float(msg[1]) * 2**30) - int(float(msg[2]) * 2**30)
    refusal = p.part("plan-refusal")
    over_by = refusal.locator("dt:text-is('over by') + dd")
    expect(over_by).to_have_text(gib_text(over))
    expect(over_by).to_have_attribute("title", f"{over:,} bytes")
    expect(refusal.locator("dt:text-is('available') + dd")).to_have_text(
        f"{gib_text(int(float(msg[2]) * 2**30))} per device"
    )
    expect(p.part("plan-advice").locator("li")).to_have_text(r["advice"])
    largest = p.part("plan-largest").locator("tbody tr")
    expect(largest).to_have_count(min(10, len(r["largest"])))
    expect(largest.first.locator("td.source")).to_have_text(r["largest"][0]["source"])
    # the attention scores: examples/llama.py's dot_attention materialises them
    # (text_content: JupyterLab's windowed notebook renders no text for a cell scrolled out of view)
    assert "dot_attention" in (largest.first.locator("td.source").text_content() or "")
    # the bar: XLA's figure against what it had; the part past it marked
    bar = p.part("hbm-bar")
    assert int(bar.locator(".hbm-seg[data-kind=refused]").get_attribute("data-bytes") or -1) == r["required_bytes"]
    expect(bar.locator(".hbm-limit")).to_contain_text(f"available {gib_text(r['available_bytes'])}")
    expect(bar.locator(".hbm-over")).to_have_count(1)
    expect(p.part("collectives-section")).to_be_hidden()  # nothing compiled: no collectives, no traceback
    assert "Traceback" not in p.root.inner_text()
    p.shot("plan-refusal")


# ---- the compare page -----------------------------------------------------------------------------------


def test_the_compare_page_puts_fsdp_and_fsdp_tp_side_by_side(server: Server, watched: Watched, plans: Plans) -> None:
    dashboard = f"http://127.0.0.1:{server.port}"
    fsdp_mesh = mesh(DEVICES, (16,), ("fsdp",))
    step, args = llama.tiny_fsdp(fsdp_mesh)
    fsdp = plan(step, *args)
    fsdp_peak = int(step.lower(*args).compile().memory_analysis().peak_memory_in_bytes)
    fsdp_link = publish(fsdp, "tiny FSDP", dashboard)
    page = watched.page
    page.goto(f"{dashboard}/compare.html?{urlencode({'a': fsdp_link, 'b': plans.link})}")
    page.wait_for_selector("body[data-compares]", state="attached", timeout=90_000)
    for side, snap in (("a", fsdp), ("b", plans.snap)):
        box = page.locator(f"[data-part=plan-{side}]")
        expect(box.locator("[data-part=plan-verdict]")).to_have_text(snap["plan"]["verdict"])
        expect(box.locator("[data-part=plan-step]")).to_contain_text(
            f"expected {seconds_text(snap['plan']['step_time']['expected_seconds'])}"
        )
    rows = page.locator("[data-part=sides] table tr")
    peak = rows.filter(has=page.locator("th", has_text="peak HBM (XLA)")).locator("td")
    expect(peak).to_have_text([gib_text(fsdp_peak), gib_text(plans.stats["peak_memory_in_bytes"])])
    expected = rows.filter(has=page.locator("th", has_text="expected step time (plan)")).locator("td")
    expect(expected).to_have_text(
        [seconds_text(s["plan"]["step_time"]["expected_seconds"]) for s in (fsdp, plans.snap)]
    )
    for width, height in ((1440, 900), (390, 844)):
        page.set_viewport_size({"width": width, "height": height})
        for scheme in ("light", "dark"):
            page.emulate_media(color_scheme=scheme)
            assert page.evaluate("() => document.documentElement.scrollWidth") <= width
            SHOTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(SHOTS / f"plan-compare-{width}-{scheme}.png"), full_page=True)


# ---- every size and theme -------------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(SHOWN))
def test_a_plan_on_the_dashboard_fits_every_size_and_theme(browser: Browser, plans: Plans, name: str) -> None:
    for width, height in ((1440, 900), (390, 844)):
        for scheme in ("light", "dark"):
            context = sized_context(browser, width, height, scheme)
            w = Watched(context)
            try:
                w.page.goto({"plan": plans.link, "refusal": plans.refusal_link, "offload": plans.offload_link}[name])
                w.page.wait_for_selector("[data-part=memory-chart][data-plotted]", state="attached", timeout=90_000)
                assert w.page.evaluate("() => document.documentElement.scrollWidth") <= width, "wider than the window"
                SHOTS.mkdir(parents=True, exist_ok=True)
                w.page.screenshot(path=str(SHOTS / f"plan-dashboard-{name}-{width}-{scheme}.png"))
                w.page.locator("[data-part=plan]").screenshot(
                    path=str(SHOTS / f"plan-dashboard-{name}-{width}-{scheme}-lead.png")
                )
                timeline = w.page.locator("[data-part=memory-timeline]")
                if timeline.is_visible():
                    timeline.screenshot(path=str(SHOTS / f"plan-dashboard-{name}-{width}-{scheme}-timeline.png"))
                assert w.errors == []
            finally:
                context.close()


def test_a_plan_in_jupyterlab_fits_every_size_and_theme(nb: Notebook) -> None:
    in_every_size_and_theme(nb, list(SHOWN), "plan-jupyterlab")
