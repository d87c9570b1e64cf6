"""Why a collective is there, and its fixes, in the views (issue 22): the collectives section's slot
(``frontend/js/components/why.js``) on the dashboard's snapshot page and in the notebook widget, and in the
kernel lab. One small explained capture serves the module: issue 22's walkthrough (an MLP on a (2, 4)
``('data', 'model')`` mesh of 8 CPU devices with ``w2`` split the wrong way) through
``sharding_core.explain``, published for the dashboard and shown with ``shardscope.show`` in JupyterLab;
the same program through ``inspect_jit`` (the located why, no fixes) beside it.

The oracles: Python's own ``inspect`` for the line of this file the gather comes from; XLA's optimized HLO
of the program compiled again here with JAX (before, and with a fix's spec: its collectives and their
bytes, read by the corpus test's own small HLO reader) for what a fix does; the server's ``/api/compare``
for the comparison; and the why JSON for what only the why knows (its sentence, its origins).

Screenshots: ``artifacts/screenshots/why-dashboard-*.png`` and ``why-jupyterlab-*.png`` at 1440×900 and 390×844, light
and dark: the why of a collective, and a tried fix.
"""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import jax
import jax.numpy as jnp
import pytest
from jax.sharding import AxisType, Mesh, NamedSharding
from jax.sharding import PartitionSpec as P
from playwright.sync_api import Browser, Locator, expect

import sharding_core
import shardscope
from sharding_core import publish, why_budget
from tests.notebooks.hosting import Mounted
from tests.notebooks.jupyter import SIZES, Notebook, in_every_size_and_theme, lab_notebook, mounting
from tests.plugins.browser import SHOTS, Watched, runs, sized_context
from tests.plugins.live import Server
from tests.test_plan_browser import seconds_text
from tests.test_why_corpus import measure

pytestmark = pytest.mark.browser  # a real server or notebook and a browser (and kernel-lab workers)


def block(x: jax.Array, w1: jax.Array, w2: jax.Array) -> jax.Array:
    h = jnp.maximum(x @ w1, 0)
    return h @ w2  # the all-gather's line: h is split over model on f, w2 is not


LINE = inspect.getsourcelines(block)[1] + 2
WRONG_W2 = P(None, "model")
W1 = P(None, "model")
ARGUMENT = {"inputs/args/1": "w1", "inputs/args/2": "w2"}  # the why's leaf paths: block's arguments


def block_args(w2: P = WRONG_W2, w1: P = W1, mesh: Mesh | None = None) -> tuple[jax.ShapeDtypeStruct, ...]:
    """Issue 22's walkthrough, small: abstract arguments on a (2, 4) mesh of this process's 8 CPU devices (or
    on ``mesh``)."""
    mesh = mesh or jax.make_mesh((2, 4), ("data", "model"), axis_types=(AxisType.Auto,) * 2)

    def sds(shape: tuple[int, ...], spec: P) -> jax.ShapeDtypeStruct:
        return jax.ShapeDtypeStruct(shape, jnp.float32, sharding=NamedSharding(mesh, spec))

    return sds((8, 32, 64), P("data")), sds((64, 256), w1), sds((256, 64), w2)


def named(text: str) -> str:
    """``text`` with each leaf path of ``block``'s arguments said as the panel says it beside the HBM table: the
    parameter's own name (issue 28: the why said ``inputs/args/1`` where the table says ``w1``)."""
    for i, name in sorted(enumerate(inspect.signature(block).parameters), reverse=True):
        text = text.replace(f"inputs/args/{i}", name)
    return text


def spec_of(text: str) -> P:
    """``P('model')`` / ``P(None, 'data')`` (the fix's spec string) as a PartitionSpec, read without eval."""
    inner = re.fullmatch(r"P\((.*)\)", text)
    assert inner, text
    parts = [p.strip() for p in inner[1].split(",") if p.strip()]
    return P(*(None if p == "None" else p.strip("'") for p in parts))


def compiled_collectives(w1: P = W1, w2: P = WRONG_W2) -> list[tuple[str, int, str | None]]:
    """(op, bytes per device, file:line) of every collective XLA puts in ``block`` with these specs."""
    return measure(jax.jit(block).lower(*block_args(w2, w1)).compile())


def with_fix(fix: dict[str, Any]) -> dict[str, P]:
    """The specs a spec fix gives ``block``'s arguments (its leaf's spec replaced), for the two helpers above."""
    return {ARGUMENT[fix["leaf"]]: spec_of(fix["spec"])}


def out_spec(w1: P = W1, w2: P = WRONG_W2) -> str:
    """The output's sharding XLA chose for ``block`` with these specs, written as the page writes specs."""
    sharding = jax.jit(block).lower(*block_args(w2, w1)).compile().output_shardings
    return str(sharding.spec).replace("PartitionSpec", "P").replace(",)", ")")


@dataclass
class Captures:
    explained: dict[str, Any]  # sharding_core.explain: the why and its fixes
    located: dict[str, Any]  # sharding_core.inspect_jit: the located why, fixes: []
    links: dict[str, str]  # name -> its published share link
    files: Path  # their JSON, for the notebook


@pytest.fixture(scope="module")
def captures(server: Server, tmp_path_factory: pytest.TempPathFactory) -> Captures:
    dashboard = f"http://127.0.0.1:{server.port}"
    with why_budget(recompiles=6, seconds=60):
        explained = sharding_core.explain(jax.jit(block), *block_args())
    located = sharding_core.inspect_jit(jax.jit(block), *block_args())
    files = tmp_path_factory.mktemp("why")
    for name, snap in (("explained", explained), ("located", located)):
        (files / f"{name}.json").write_text(json.dumps(snap))
    links = {
        name: publish(snap, f"why {name}", dashboard) for name, snap in (("explained", explained), ("located", located))
    }
    return Captures(explained, located, links, files)


SETUP = """\
import json, os
os.environ.setdefault("JAX_PLATFORMS", "cpu")
import shardscope"""
SHOWN = {"explained": 1, "located": 2}


@pytest.fixture(scope="module")
def nb(
    browser: Browser, tmp_path_factory: pytest.TempPathFactory, server: Server, captures: Captures
) -> Iterator[Notebook]:
    cells = [SETUP, *(f"shardscope.show(json.load(open({str(captures.files / f'{n}.json')!r})))" for n in SHOWN)]
    with lab_notebook(browser, tmp_path_factory, cells, SHOWN, f"http://127.0.0.1:{server.port}") as shown:
        yield shown


@pytest.fixture
def mount(host: str, request: pytest.FixtureRequest, browser: Browser, captures: Captures) -> Iterator[Any]:
    """``mount(name)``: the snapshot panel showing capture ``name`` (explained, located) on the test's host."""
    with mounting(
        host, lambda: request.getfixturevalue("nb"), browser, captures.links.__getitem__, lambda _: "rendered"
    ) as m:
        yield m


def gather(snap: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    (found,) = [(k, c) for k, c in enumerate(snap["collectives"]) if c["op"] == "all-gather"]
    return found


def select(p: Mounted, k: int) -> Locator:
    """Clicks collective ``k``'s row; the why view drawn for it."""
    before = p.count("collective")
    p.part("collectives").locator("tr.collective").nth(k).click()
    p.counted(before, "collective")
    why = p.part("why")
    expect(why).to_be_visible()
    return why


def fmt_bytes(n: int) -> str:
    """Bytes as the page words them (binary units), written here again."""
    value, unit = float(n), 0
    units = ["B", "KiB", "MiB", "GiB"]
    while value >= 1024 and unit < len(units) - 1:
        value /= 1024
        unit += 1
    return f"{int(value)} B" if unit == 0 else f"{value:.{2 if value < 10 else 1}f} {units[unit]}"


# ---- the why -------------------------------------------------------------------------------------------


def test_the_why_of_a_collective_names_the_line_op_operands_and_origin(mount: Any, captures: Captures) -> None:
    p: Mounted = mount("explained")
    k, c = gather(captures.explained)
    select(p, k)
    w = c["why"]
    # the line: this file's, where Python says the second matmul is, as the HLO's own stack frames say
    ((_, _, line),) = [m for m in compiled_collectives() if m[0] == "all-gather"]
    assert line == f"{Path(__file__).name}:{LINE}" and w["source"].endswith(line), (line, w["source"])
    facts = p.part("why-facts")
    expect(facts.locator("dt:text-is('line') + dd")).to_have_text(w["source"])
    expect(facts.locator("dt:text-is('JAX op') + dd")).to_have_text(w["op"])
    assert w["op"].endswith("dot_general")
    expect(facts.locator("dt:text-is('jaxpr') + dd")).to_have_text(w["jaxpr"])
    expect(facts.locator("dt:text-is('partitioner') + dd")).to_have_text("Shardy")
    expect(facts.locator("dt:text-is('input leaves') + dd")).to_have_text(", ".join(named(x) for x in w["leaves"]))
    assert "inputs/args/" in ", ".join(w["leaves"])  # the API's paths; the page names them
    expect(p.part("why-explanation")).to_have_text(named(w["explanation"]))
    assert f":{LINE}" in w["explanation"] and "model" in w["explanation"]
    # the operand it moves: its sharding now and what dot_general needs of it, as the why JSON says
    rows = p.part("why-operands").locator("tbody tr")
    expect(rows).to_have_count(len(w["operands"]))
    o = w["operands"][0]
    expect(rows.first.locator("td")).to_have_text(
        [
            o["name"],
            f"{o['dtype']}[{','.join(map(str, o['shape']))}]",
            o["before"],
            o["after"],
            named(o["leaf"]) if o["leaf"] else "—",
        ]
    )
    # Shardy's origins, each with its propagation edges
    origins = p.part("why-origin").locator("tbody tr")
    expect(origins).to_have_count(len(w["origin"]))
    first = w["origin"][0]
    expect(origins.first.locator("td").nth(2)).to_have_text(first["meaning"])
    if first["edges"]:
        e = first["edges"][0]
        expect(origins.first.locator("td.edges")).to_contain_text(
            f"step {e['step']}: {e['axis']} {e['source']} → {', '.join(e['to'])}"
        )
    # the call stack, innermost first: this file's line
    p.part("why-stack").locator("summary").click()
    expect(p.part("why-stack").locator("li").first).to_contain_text(f"{w['stack'][0]['file']}:{LINE} in block")


def test_the_fixes_are_listed_with_what_recompiling_them_did(mount: Any, captures: Captures) -> None:
    p: Mounted = mount("explained")
    k, c = gather(captures.explained)
    select(p, k)
    fixes = c["why"]["fixes"]
    assert fixes, c["why"]
    rows = p.part("why-fixes").locator("tbody tr")
    expect(rows).to_have_count(len(fixes))
    expect(p.part("why-fixes").locator("th")).to_have_text(
        ["#", "change", "collectives", "bytes moved", "peak memory", ""]
    )
    before = compiled_collectives()
    for i, fix in enumerate(fixes):
        cells = rows.nth(i).locator("td")
        expect(cells.nth(1)).to_have_text(named(fix["text"]))
        # what XLA does with the fix's spec, compiled again here with JAX alone
        after = compiled_collectives(**with_fix(fix))
        assert len(after) == fix["collectives_after"] and sum(b for _, b, _ in after) == fix["bytes_after"], (
            fix,
            after,
        )
        expect(cells.nth(2)).to_have_text(f"{len(before)} → {len(after)}")
        expect(cells.nth(3)).to_have_text(
            f"{fmt_bytes(sum(b for _, b, _ in before))} → {fmt_bytes(fix['bytes_after'])}"
        )
        # CPU: no hardware figures (ranked by bytes), so no estimate column
        assert fix["seconds_after"] is None
        expect(cells.nth(4)).to_have_text(f"{fmt_bytes(fix['peak_before'])} → {fmt_bytes(fix['peak_after'])}")
    # the top fix removes the gather: XLA's program with it has no all-gather at all
    top = fixes[0]
    assert not [m for m in compiled_collectives(**with_fix(top)) if m[0] == "all-gather"]


def test_a_located_capture_shows_the_note_that_points_to_explain(mount: Any, captures: Captures) -> None:
    p: Mounted = mount("located")
    k, c = gather(captures.located)
    select(p, k)
    w = c["why"]
    assert w["fixes"] == [] and "sharding_core.explain" in w["fixes_note"]
    expect(p.part("why-fixes-note")).to_have_text(w["fixes_note"])
    expect(p.part("why-fixes")).to_have_count(0)
    expect(p.part("why-explanation")).to_have_text(named(w["explanation"]))
    expect(p.part("why-facts").locator("dt:text-is('line') + dd")).to_have_text(w["source"])


def test_the_why_is_text_never_markup(server: Server, watched: Watched, captures: Captures) -> None:
    """A snapshot is anyone's JSON: markup in its why (sentence, line, op, a fix's change) shows as the text it is."""
    snap = json.loads(json.dumps(captures.explained))
    k, c = gather(snap)
    markup = '<img src=x onerror="document.body.dataset.owned=1"><b>bold</b>'
    c["why"]["explanation"] = c["why"]["source"] = c["why"]["op"] = c["why"]["fixes"][0]["text"] = markup
    page = watched.page
    page.goto(publish(snap, "why markup", f"http://127.0.0.1:{server.port}"))
    page.wait_for_selector("body[data-rendered]", state="attached", timeout=60_000)
    page.locator("[data-part=collectives] tr.collective").nth(k).click()
    why = page.locator("[data-part=why]")
    expect(why.locator("[data-part=why-explanation]")).to_have_text(markup)
    expect(why.locator("[data-part=why-facts] dt:text-is('line') + dd")).to_have_text(markup)
    expect(why.locator("[data-part=why-fixes] td.change").first).to_have_text(markup)
    assert why.locator("img, b").count() == 0 and page.evaluate("document.body.dataset.owned") is None


# ---- trying a fix --------------------------------------------------------------------------------------


def test_trying_a_fix_shows_its_program_and_where_the_host_can_diff_and_compare(
    mount: Any, captures: Captures, host: str
) -> None:
    p: Mounted = mount("explained")
    k, c = gather(captures.explained)
    select(p, k)
    fix = c["why"]["fixes"][0]
    program = captures.explained["fixes"][fix["result"]]
    before = p.count("tried")
    p.part("try-fix").first.click()
    p.counted(before, "tried")
    tried = p.part("why-tried")
    expect(tried).to_be_visible()
    expect(tried.locator("h4")).to_have_text(f"Tried: {named(fix['text'])}")
    # the program as the fix compiled it, carried in the snapshot: its collectives, the HLO's own
    after = compiled_collectives(**with_fix(fix))
    rows = p.part("tried-collectives").locator("tbody tr")
    expect(rows).to_have_count(len(after))
    assert sorted(r.locator("td.op").inner_text() for r in rows.all()) == sorted(op for op, _, _ in after)
    assert [c["op"] for c in program["collectives"]] == [op for op, _, _ in after]
    if host == "jupyterlab":  # no server behind the widget: it says what it cannot do, and offers nothing it cannot
        expect(p.part("tried-cannot")).to_contain_text("Diff and Compare run on the dashboard")
        expect(p.part("tried-compare")).to_have_count(0)
        expect(p.part("tried-diff")).to_have_count(0)
        return
    # the dashboard diffs the fix against the program on screen, in place: the leaf the fix changes, and the
    # output whose sharding XLA chose differently with it (JAX's own output_shardings, compiled again here)
    changed = {fix["leaf"]: fix["spec"]}
    outs = [out_spec(**with_fix(fix)), out_spec()]
    if outs[0] != outs[1]:
        changed["outputs"] = outs[0]
    status = p.part("tried-diff-status")
    expect(status).to_contain_text(f"Diff: {len(changed)} {'leaf' if len(changed) == 1 else 'leaves'} changed")
    diff_rows = p.part("tried-diff").locator("tbody tr")
    expect(diff_rows).to_have_count(len(changed))
    shown = {
        r.locator("td").nth(0).inner_text(): r.locator("td").nth(2).inner_text().replace(",)", ")")
        for r in diff_rows.all()
    }
    assert shown == changed, (shown, changed)
    # ... and compares them side by side: the compare view with both, answered by the server
    link = p.part("tried-compare")
    query = parse_qs(urlsplit(link.get_attribute("href") or "").query)
    assert urlsplit(query["b"][0]).query.endswith(f"fix={fix['result']}"), query
    link.click()
    p.page.wait_for_selector("body[data-compares]", state="attached", timeout=90_000)
    collectives = p.page.locator("[data-part=sides] table tr").filter(
        has=p.page.locator("th", has_text=re.compile("^collectives$"))
    )
    total = sum(b for _, b, _ in compiled_collectives())
    expect(collectives.locator("td")).to_have_text(
        [f"{len(compiled_collectives())}, {fmt_bytes(total)} of results per device",
         f"{len(after)}, {fmt_bytes(sum(b for _, b, _ in after))} of results per device"]
    )  # fmt: skip


def test_the_fixed_program_opens_as_a_snapshot_of_its_own(watched: Watched, captures: Captures) -> None:
    page = watched.page
    page.goto(captures.links["explained"])
    page.wait_for_selector("body[data-rendered]", state="attached", timeout=60_000)
    k, c = gather(captures.explained)
    page.locator("[data-part=collectives] tr.collective").nth(k).click()
    fix = c["why"]["fixes"][0]
    page.locator("[data-part=try-fix]").first.click()
    page.locator("[data-part=tried-open]").click()
    page.wait_for_url(re.compile(rf"fix={fix['result']}"))
    page.wait_for_selector("body[data-loaded]", state="attached", timeout=60_000)
    assert page.locator("[data-part=snap-error]").is_hidden(), page.locator("[data-part=snap-error]").inner_text()
    # its memory per device (the store keeps each fix's, as it keeps the snapshot's) is drawn
    page.wait_for_selector("[data-part=memory-chart][data-plotted]", state="attached", timeout=30_000)
    expect(page.locator("[data-part=snap-title]")).to_contain_text(
        f"compiled again with a fix (fixes[{fix['result']}])"
    )
    after = compiled_collectives(**with_fix(fix))
    expect(page.locator("[data-part=collectives] tr.collective")).to_have_count(len(after))
    # a fix's program carries no fixes of its own: nothing to try there
    if after:
        page.locator("[data-part=collectives] tr.collective").first.click()
        expect(page.locator("[data-part=try-fix]")).to_have_count(0)
    # a fix that is not there: the 404 and its hint, said on the page
    page.goto(re.sub(r"fix=\d+", "fix=9", page.url))
    page.wait_for_selector("body[data-loaded]", state="attached", timeout=60_000)
    expect(page.locator("[data-part=snap-error]")).to_contain_text("not a fix 9")


def seconds_or_zero(s: float) -> str:
    """Seconds as the page words them, "0 s" for a program left with no collective."""
    return "0 s" if s == 0 else seconds_text(s)


@pytest.mark.tpu
def test_on_a_tpu_set_the_fixes_show_their_estimated_time(server: Server, watched: Watched) -> None:
    """The walkthrough compiled for libtpu's v5e 2x4 (compile-only): the fixes are ranked by estimated seconds,
    and the column shows them as the server serves them (estimates recomputed at read time)."""
    mesh = shardscope.mesh("tpu:v5e:2x4", (2, 4), ("data", "model"), axis_types=("auto", "auto"))
    with why_budget(recompiles=6, seconds=60):
        snap = sharding_core.explain(jax.jit(block), *block_args(mesh=mesh))
    link = publish(snap, "why on tpu", f"http://127.0.0.1:{server.port}")
    page = watched.page
    page.goto(link)
    page.wait_for_selector("body[data-rendered]", state="attached", timeout=60_000)
    sid = parse_qs(urlsplit(page.url).query)["snapshot"][0]
    served = json.loads(server.request("GET", f"/api/snapshots/{sid}")[2])
    k, c = gather(served)
    fixes = c["why"]["fixes"]
    assert fixes and all(f["ranked_by"] == "seconds" for f in fixes), fixes
    page.locator(f"[data-part=collectives] tr.collective[data-index='{k}']").click()  # costliest first: by index
    table = page.locator("[data-part=why-fixes]")
    expect(table.locator("th")).to_have_text(
        ["#", "change", "collectives", "bytes moved", "estimate", "peak memory", ""]
    )
    for i, fix in enumerate(fixes):
        expect(table.locator("tbody tr").nth(i).locator("td.seconds-after")).to_have_text(
            f"{seconds_text(fix['seconds_before'])} → {seconds_or_zero(fix['seconds_after'])}"
        )
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.locator("[data-part=why]").screenshot(path=str(SHOTS / "why-dashboard-tpu-1400-light.png"))


# ---- the kernel lab ------------------------------------------------------------------------------------

# sum_axis0 with both axes on x (Auto): the sum over rows all-reduces over x; the why's top fix moves both
# axes to the kept dimension, where no device needs another's rows.
KERNEL = (
    "kernel=sum_axis0&devices=cpu%3A8&mesh=2x4&axes=x%2Cy&types=auto&in=8%2C8%7CP%28%27x%27%2C+%27y%27%29%7Cfloat32"
)


def test_a_kernel_lab_fix_runs_in_the_lab(server: Server, watched: Watched) -> None:
    page = watched.page
    page.goto(f"http://127.0.0.1:{server.port}/kernels.html?{KERNEL}")
    runs(page, 1)
    # the run's why, as the API answers the same request (the lab's result is cached: the same JSON)
    status, result = server.post_json("/api/kernels/run", {
        "kernel": "sum_axis0", "devices": "cpu:8",
        "inputs": [{"shape": [8, 8], "spec": "P('x', 'y')", "dtype": "float32"}],
        "mesh": {"shape": [2, 4], "axis_names": ["x", "y"], "order": "make_mesh", "axis_types": ["auto", "auto"]},
    })  # fmt: skip
    assert status == 200, result
    ((k, c),) = [(k, c) for k, c in enumerate(result["collectives"]) if c["op"] == "all-reduce"]
    page.locator("[data-part=collectives] tr.collective").nth(k).click()
    why = page.locator("[data-part=why]")
    expect(why.locator("[data-part=why-explanation]")).to_have_text(c["why"]["explanation"])
    expect(why.locator("[data-part=why-facts] dt:text-is('JAX op') + dd")).to_have_text(c["why"]["op"])
    fix = c["why"]["fixes"][0]
    expect(why.locator("[data-part=why-fixes] tbody tr").first.locator("td").nth(1)).to_have_text(fix["text"])
    # a CPU set has no hardware figures: no estimate before, so no estimate column (0 s after is no estimate)
    assert fix["seconds_before"] is None
    expect(why.locator("[data-part=why-fixes] th")).to_have_text(
        ["#", "change", "collectives", "bytes moved", "peak memory", ""]
    )
    button = why.locator("[data-part=try-fix]").first
    expect(button).to_have_text("Run it in the lab")
    SHOTS.mkdir(parents=True, exist_ok=True)
    why.screenshot(path=str(SHOTS / "why-kernel-lab-1400-light.png"))
    button.click()
    runs(page, 2)
    # the lab ran the fix's specs: its address says so, and JAX's own program for that spec has no collective
    assert parse_qs(urlsplit(page.url).query)["in"] == [f"8,8|{fix['run']['inputs'][0]}|float32"]
    mesh = jax.make_mesh((2, 4), ("x", "y"), axis_types=(AxisType.Auto,) * 2)
    spec = P(None, ("x", "y")) if fix["run"]["inputs"][0] == "P(None, ('x', 'y'))" else spec_of(fix["run"]["inputs"][0])
    x = jax.ShapeDtypeStruct((8, 8), jnp.float32, sharding=NamedSharding(mesh, spec))
    assert measure(jax.jit(lambda a: a.sum(axis=0)).lower(x).compile()) == []
    expect(page.locator("[data-part=collectives] tr.collective")).to_have_count(0)


# ---- every size and theme ------------------------------------------------------------------------------


def _why_and_tried(root: Any, k: int) -> None:
    root.locator("[data-part=collectives] tr.collective").nth(k).click()
    root.locator("[data-part=try-fix]").first.click()
    root.locator("[data-part=why-tried]").wait_for(state="visible")


def test_the_why_on_the_dashboard_fits_every_size_and_theme(browser: Browser, captures: Captures) -> None:
    k, _ = gather(captures.explained)
    SHOTS.mkdir(parents=True, exist_ok=True)
    for width, height in SIZES:
        for scheme in ("light", "dark"):
            context = sized_context(browser, width, height, scheme)
            w = Watched(context)
            try:
                w.page.goto(captures.links["explained"])
                w.page.wait_for_selector("body[data-rendered]", state="attached", timeout=60_000)
                _why_and_tried(w.page, k)
                w.page.locator("[data-part=tried-diff-status]").filter(has_text="Diff:").wait_for()
                assert w.page.evaluate("() => document.documentElement.scrollWidth") <= width, "wider than the window"
                why = w.page.locator("[data-part=why]")
                why.scroll_into_view_if_needed()
                w.page.screenshot(path=str(SHOTS / f"why-dashboard-why-{width}-{scheme}.png"))
                why.screenshot(path=str(SHOTS / f"why-dashboard-section-{width}-{scheme}.png"))
                w.page.locator("[data-part=why-tried]").screenshot(
                    path=str(SHOTS / f"why-dashboard-tried-{width}-{scheme}.png")
                )
                assert w.errors == []
            finally:
                context.close()


def test_the_why_in_jupyterlab_fits_every_size_and_theme(nb: Notebook, captures: Captures) -> None:
    k, _ = gather(captures.explained)
    _why_and_tried(nb.widget("explained"), k)
    in_every_size_and_theme(nb, ["explained"], "why-jupyterlab", parts=["why", "why-fixes"])
    assert nb.widget_errors() == []
