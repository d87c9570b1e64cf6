"""The dashboard in headless Chromium: a link → its first useful paint, a collective's why after a click, and
typing in the layout explorer.

**First paint** (issue 37): for each page, from opening its link to the frame after the element a reader
came for is on screen with its words — a plan's verdict (``[data-part=plan-verdict]``), the compare page's
verdict, the layout explorer's grid, the topology picture, the kernel lab's kernel, and (issue 33) the 70B
plan's memory over program order (its chart) — in a fresh browser
context each run (nothing cached), median of ``--runs``. The page records it itself: a MutationObserver
(installed before any of the page's scripts) sees the element visible with its text, then the time after
the next animation frame (the paint) is taken, relative to the navigation's start (the ``/s/`` redirect
included). With it: the bytes the page had received by then (resource timing: the document, modules, JSON)
and whether anything of Plotly's was requested before it (and at all, once the page is idle). The plans are
a small one (``bench/frontend_plans.py``: a 4-layer MLP step on ``tpu:v5e:2x2``, and the same step on
``4x1`` for the compare page) and Llama 3 70B FSDP on ``tpu:v5p:4x8x8`` (mesh 256, axes fsdp), each planned
with ``shardscope plan --why`` once and its JSON cached under ``build/bench_frontend/`` (the 70B takes
~25 s and ~2 GiB to compile; ``--fresh`` plans again), then published to the server as ``--publish`` does.

**A collective's why**: on a plan's page, once idle, from the click on a collective's row (the click
event's time) to the frame after its why's sentence is on screen.

**Typing** (``--keys``): a keystroke in the PartitionSpec box → grid painted at 8, 4096 and 6144 devices
(the page's ``keystroke-to-paint`` measure, from the last ``input`` event to the frame after the new grid
is in the DOM). Each case types 12 specs cycling six (the first six cold on the server).

``--profile CASE`` prints the top self-time functions of the page's main thread from opening CASE's link
to idle (Chromium's sampling profiler through CDP).

Starts its own ``shardscope serve`` on a free loopback port.
Run: ``.venv/bin/python bench/bench_frontend.py [--runs N] [--keys] [--profile CASE]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from importlib.metadata import version
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from playwright.sync_api import Browser, Page, sync_playwright

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.plugins.live import free_port  # noqa: E402 - after ROOT is on the path

CACHE = ROOT / "build" / "bench_frontend"
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync"]  # fmt: skip
VIEWPORT = {"width": 1440, "height": 900}

# name -> (FN in bench/frontend_plans.py, devices, mesh, axes)
PLANS = {
    "mlp": ("mlp_4layer", "tpu:v5e:2x2", "2x2", "data,model"),
    "mlp-dp": ("mlp_4layer", "tpu:v5e:2x2", "4x1", "data,model"),
    "llama70b": ("llama_70b_fsdp", "tpu:v5p:4x8x8", "256", "fsdp"),
}

# The page records when `window.__watch` (a CSS selector) is visible with its words (or a picture: a canvas
# or an svg), after the frame that paints it: window.__painted, ms since the navigation started.
WATCH = """
window.afterFrame = (f) => {
  if (window.scheduler?.postTask) return scheduler.postTask(f, { priority: "user-blocking" });
  const ch = new MessageChannel();
  ch.port1.onmessage = f;
  ch.port2.postMessage(0);
};
(() => {
  const sel = window.__watch;
  window.__painted = null;
  if (!sel) return;
  const seen = () => {
    const e = document.querySelector(sel);
    if (!e) return false;
    const words = e.textContent.trim() !== "" || e.matches("canvas, svg") || e.querySelector("canvas, svg") !== null;
    return words && e.checkVisibility();
  };
  // the first task after the frame that paints it (a user-blocking task runs before the page's own timers)
  const after = () => requestAnimationFrame(() => afterFrame(() => {
    window.__painted = performance.now();
    document.documentElement.dataset.painted = "";
  }));
  const obs = new MutationObserver(() => {
    if (seen()) { obs.disconnect(); after(); }
  });
  obs.observe(document, { subtree: true, childList: true, attributes: true, characterData: true });
  // a click's time (the why bench): the event's own timestamp
  document.addEventListener("click", (e) => (window.__clickAt = e.timeStamp), true);
})();
"""

# What the page had loaded by window.__painted, and Plotly's requests (before it, at all).
LOADED = """
() => {
  const t = window.__painted;
  const all = [...performance.getEntriesByType("navigation"), ...performance.getEntriesByType("resource")];
  const plotly = all.filter((e) => e.name.includes("/vendor/plotly"));
  return {
    painted: t,
    bytes: all.filter((e) => e.responseEnd <= t).reduce((n, e) => n + e.transferSize, 0),
    requests: all.filter((e) => e.responseEnd <= t).length,
    plotlyBefore: plotly.filter((e) => e.startTime < t).map((e) => e.name),
    plotly: plotly.map((e) => [e.name, e.transferSize]),
  };
}
"""


def serve(tmp: str, checkout: Path | None = None) -> tuple[subprocess.Popen[bytes], int]:
    """``shardscope serve`` on a free port: this checkout's, or (``checkout``) another's code and front end, run
    with this environment (its directory first on the module path)."""
    port = free_port()
    cli = Path(sys.executable).parent / "shardscope"
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    if checkout is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(checkout), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    proc = subprocess.Popen(
        [str(cli), "serve", "--port", str(port), "--db", f"{tmp}/links.db"],
        env=env, cwd=checkout, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    for _ in range(600):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/api/health", timeout=1)
            break
        except OSError:
            time.sleep(0.1)
    return proc, port


def plan_json(name: str, fresh: bool) -> Path:
    """The plan's JSON (``shardscope plan --why --json``), cached under build/bench_frontend/."""
    fn, devices, mesh, axes = PLANS[name]
    out = CACHE / f"{name}-jax{version('jax')}.json"
    if out.exists() and not fresh:
        return out
    CACHE.mkdir(parents=True, exist_ok=True)
    print(f"planning {name} ({fn} on {devices}, mesh {mesh})…", file=sys.stderr)
    subprocess.run(
        [str(Path(sys.executable).parent / "shardscope"), "plan", f"bench/frontend_plans.py:{fn}", "--devices", devices,
         "--mesh", mesh, "--axes", axes, "--why", "--json", str(out)],
        cwd=ROOT, env={**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": str(ROOT)}, check=True,
        stdout=subprocess.DEVNULL,
    )  # fmt: skip
    return out


def post(base: str, path: str, body: Any) -> Any:
    req = urllib.request.Request(
        f"{base}{path}", data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=120) as r:
        return json.loads(r.read())


LAYOUT_8 = {"devices": "cpu:8", "mesh": "2x4", "axes": "x,y", "shape": "64,64", "spec": "P('x', 'y')"}
LAYOUT_6144 = {"devices": "tpu:v5p:16x16x24", "mesh": "24x256", "axes": "x,y", "shape": "6144,6144",
               "spec": "P('x', 'y')"}  # fmt: skip
# label -> (the plans it opens, the selector of its first useful paint)
CASES = {
    "plan link, small (MLP, v5e 2x2)": (("mlp",), "[data-part=plan-verdict]"),
    "plan link, Llama 70B (v5p 4x8x8)": (("llama70b",), "[data-part=plan-verdict]"),
    # issue 33: the 70B plan's memory over program order (855 points, its buffers at the peak), drawn
    "memory chart, Llama 70B (v5p 4x8x8)": (("llama70b",), "[data-part=memory-timeline] svg.memory-timeline-chart"),
    "compare link, two small plans": (("mlp", "mlp-dp"), "[data-part=verdict]"),
    "layout explorer, 8 devices": ((), "[data-part=grid] .layout-grid"),
    "layout explorer, 6144 devices": ((), "[data-part=grid] .layout-grid"),
    "topology, v5p 4x8x8": ((), "[data-part=topo-view]"),
    "kernel lab": ((), "[data-part=kernel-doc]"),
}


def cases(base: str, only: str, fresh: bool) -> dict[str, tuple[str, str]]:
    """Each page's link (its plans planned and published) and the selector of its first useful paint."""
    from sharding_core.publishing import publish

    chosen = {k: v for k, v in CASES.items() if only.lower() in k.lower()}
    links = {}
    for name in dict.fromkeys(n for plans, _ in chosen.values() for n in plans):
        links[name] = publish(json.loads(plan_json(name, fresh).read_text()), name, base)

    def address(name: str) -> str:
        """The snapshots page's address of a published plan (what its share link opens)."""
        with urllib.request.urlopen(f"{base}/api/links/{links[name].rsplit('/', 1)[1]}", timeout=30) as r:
            return f"/snapshots.html?{urlencode(json.loads(r.read())['state'])}"

    def url(label: str) -> str:
        if label.startswith(("plan link", "memory chart")):
            return links[CASES[label][0][0]]
        if label.startswith("compare"):
            state = {"a": address("mlp"), "b": address("mlp-dp")}
            return base + post(base, "/api/links", {"view": "compare", "state": state})["url"]
        if label.startswith("layout"):
            return f"{base}/?{urlencode(LAYOUT_8 if '8 devices' in label else LAYOUT_6144)}"
        if label.startswith("topology"):
            return f"{base}/topology.html?devices=tpu:v5p:4x8x8"
        return f"{base}/kernels.html"

    return {label: (url(label), selector) for label, (_, selector) in chosen.items()}


def open_once(browser: Browser, url: str, selector: str) -> tuple[dict[str, Any], Page]:
    """Opens `url` in a fresh context; what LOADED says once the page is idle, and the page (still open)."""
    context = browser.new_context(viewport=VIEWPORT)
    context.add_init_script(f"window.__watch = {json.dumps(selector)};" + WATCH)
    page = context.new_page()
    page.goto(url, wait_until="commit")
    page.wait_for_selector("html[data-painted]", state="attached", timeout=120_000)
    page.wait_for_load_state("networkidle", timeout=120_000)
    return page.evaluate(LOADED), page


def summary(label: str, got: list[dict[str, Any]]) -> dict[str, Any]:
    times = [g["painted"] for g in got]
    return {"case": label, "median": statistics.median(times), "min": min(times), "max": max(times),
            "bytes": statistics.median(g["bytes"] for g in got),
            "requests": statistics.median(g["requests"] for g in got),
            "plotly_before": any(g["plotlyBefore"] for g in got),
            "plotly": sum(s for _, s in got[-1]["plotly"])}  # fmt: skip


def first_paints(browser: Browser, sides: list[dict[str, tuple[str, str]]], runs: int) -> list[list[dict[str, Any]]]:
    """Each case's figures on each side (a server: this checkout's, and ``--against``'s), their runs taken in
    turn so that both see the same load."""
    rows: list[list[dict[str, Any]]] = [[] for _ in sides]
    for label in sides[0]:
        for side in sides:
            open_once(browser, *side[label])[1].context.close()  # the server's caches warm (layouts, plan figures)
        got: list[list[dict[str, Any]]] = [[] for _ in sides]
        for _ in range(runs):
            for k, side in enumerate(sides):
                loaded, page = open_once(browser, *side[label])
                got[k].append(loaded)
                page.context.close()
        for k in range(len(sides)):
            rows[k].append(summary(label, got[k]))
    return rows


def second_page(browser: Browser, first: str, second: str) -> list[tuple[str, int]]:
    """Plotly's requests on a second plan page in the same context (its HTTP cache): name and bytes sent."""
    context = browser.new_context(viewport=VIEWPORT)
    context.add_init_script("window.__watch = '[data-part=plan-verdict]';" + WATCH)
    page = context.new_page()
    out = []
    for url in (first, second):
        page.goto(url, wait_until="commit")
        page.wait_for_selector("[data-part=memory-chart][data-plotted]", state="attached", timeout=120_000)
        page.wait_for_load_state("networkidle", timeout=120_000)
        out = page.evaluate(LOADED)["plotly"]
    context.close()
    return out


def why_clicks(browser: Browser, url: str, clicks: int) -> list[float]:
    """Click → the why's sentence painted, cycling through the first collectives' rows (ms)."""
    _, page = open_once(browser, url, "[data-part=plan-verdict]")
    page.wait_for_selector("[data-part=memory-chart][data-plotted]", state="attached", timeout=120_000)
    rows = page.locator("tr.collective").count()
    times = []
    for k in range(clicks):
        i = 1 + k % max(1, min(rows - 1, 4))
        page.evaluate(
            """(i) => {
              window.__whyAt = null;
              delete document.documentElement.dataset.why;
              const slot = document.querySelector("[data-part=collective-detail]");
              const obs = new MutationObserver(() => {
                const e = slot.querySelector("[data-part=why-explanation], [data-part=why-none]");
                if (!e || !e.checkVisibility()) return;
                obs.disconnect();
                requestAnimationFrame(() => afterFrame(() => {
                  window.__whyAt = performance.now();
                  document.documentElement.dataset.why = String(i);
                }));
              });
              obs.observe(slot, { subtree: true, childList: true });
            }""",
            i,
        )
        page.locator(f"tr.collective[data-index='{i}']").click()
        page.wait_for_selector(f"html[data-why='{i}']", state="attached", timeout=60_000)
        times.append(page.evaluate("() => window.__whyAt - window.__clickAt"))
        page.wait_for_timeout(150)
    page.context.close()
    return times


def self_times(prof: dict[str, Any]) -> Counter[str]:
    """A CDP CPU profile's self time (ms) by function: "name file:line"."""
    nodes = {n["id"]: n for n in prof["nodes"]}
    out: Counter[str] = Counter()
    for sample, dt in zip(prof["samples"], prof["timeDeltas"], strict=True):
        f = nodes[sample]["callFrame"]
        where = "/".join(f["url"].rsplit("/", 2)[-2:]) if f["url"] else ""
        out[f"{f['functionName'] or '(anonymous)'} {where}:{f['lineNumber'] + 1}"] += dt / 1000
    return out


def profile(browser: Browser, url: str, selector: str, top: int = 20) -> None:
    """Chromium's sampling profiler over opening `url`: the top self-time functions up to the first useful paint,
    and from then to idle."""
    context = browser.new_context(viewport=VIEWPORT)
    context.add_init_script(f"window.__watch = {json.dumps(selector)};" + WATCH)
    page = context.new_page()
    cdp = context.new_cdp_session(page)
    cdp.send("Profiler.enable")
    cdp.send("Profiler.setSamplingInterval", {"interval": 200})
    cdp.send("Profiler.start")
    page.goto(url, wait_until="commit")
    page.wait_for_selector("html[data-painted]", state="attached", timeout=120_000)
    before = self_times(cdp.send("Profiler.stop")["profile"])
    painted = page.evaluate("() => window.__painted")
    cdp.send("Profiler.start")
    page.wait_for_load_state("networkidle", timeout=120_000)
    after = self_times(cdp.send("Profiler.stop")["profile"])
    context.close()
    for title, times in ((f"to the first useful paint ({painted:.0f} ms)", before), ("from then to idle", after)):
        busy = sum(v for k, v in times.items() if not k.startswith("(idle)"))
        print(f"\n{title}: {busy:.0f} ms busy (samples, idle excluded)\n")
        print("| self ms | function |\n|---:|---|")
        for name, ms in times.most_common(top):
            print(f"| {ms:.0f} | `{name}` |")


def load_average() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def report_paints(rows: list[list[dict[str, Any]]], runs: int, against: Path | None) -> None:
    print(f"Link → first useful paint, a fresh browser context each run, median of {runs}; load {load_average()}")
    if against is not None:
        print(f"(each page's runs taken in turn with a server of {against}: its figures after the arrow)")
    print()
    print("| page | first paint median | min–max | bytes before it | requests before it | Plotly before it "
          "| Plotly at all |")  # fmt: skip
    print("|---|---:|---:|---:|---:|---|---:|")
    for i, r in enumerate(rows[0]):
        o = rows[1][i] if len(rows) > 1 else None

        def pair(key: str, fmt: str, scale: float = 1, r: dict[str, Any] = r, o: dict[str, Any] | None = o) -> str:
            this = format(r[key] / scale, fmt)
            return this if o is None else f"{this} → {format(o[key] / scale, fmt)}"

        def plotly(x: dict[str, Any]) -> str:
            return f"{x['plotly'] / 1e6:.1f} MB" if x["plotly"] else "none"

        spread = f"{r['min']:.0f}–{r['max']:.0f}" + (f" → {o['min']:.0f}–{o['max']:.0f}" if o else "")
        before = ("yes" if r["plotly_before"] else "no") + (f" → {'yes' if o['plotly_before'] else 'no'}" if o else "")
        print(f"| {r['case']} | {pair('median', '.0f')} ms | {spread} ms | {pair('bytes', '.0f', 1024)} KiB | "
              f"{pair('requests', '.0f')} | {before} | {plotly(r)}{f' → {plotly(o)}' if o else ''} |")  # fmt: skip


def report_why(browser: Browser, all_cases: dict[str, tuple[str, str]], clicks: int, name: str = "") -> None:
    plans = [k for k in all_cases if k.startswith("plan link")]
    if not plans:
        return
    print()
    print(f"A collective's why{f' ({name})' if name else ''}: click → its sentence painted, {clicks} clicks per plan; "
          f"load {load_average()}")  # fmt: skip
    print()
    print("| plan | median | min–max |\n|---|---:|---:|")
    for label in plans:
        t = why_clicks(browser, all_cases[label][0], clicks)
        print(f"| {label} | {statistics.median(t):.0f} ms | {min(t):.0f}–{max(t):.0f} ms |")
    if len(plans) > 1:
        again = second_page(browser, all_cases[plans[0]][0], all_cases[plans[1]][0])
        sent = ", ".join(f"{n.rsplit('/', 1)[1]} {s} bytes" for n, s in again) or "none"
        print()
        print(f"Plotly on a second plan page in the same browser context, over the network: {sent}")


# ---- typing in the layout explorer -------------------------------------------------------------------------

SPECS = ["P('x', 'y')", "P(('x', 'y'), None)", "P('y', 'x')", "P(None, ('x', 'y'))", "P('x')", "P(None, 'y')"]
# (label, page state, target median ms, target worst ms)
KEY_CASES = [
    ("8", {"devices": "cpu:8", "mesh": "2x4", "axes": "x,y", "shape": "64,64"}, 40, 80),
    ("4096", {"devices": "cpu:4096", "mesh": "64x64", "axes": "x,y", "shape": "4096,4096"}, 60, 120),
    ("6144", {"devices": "tpu:v5p:16x16x24", "mesh": "24x256", "axes": "x,y", "shape": "6144,6144"}, 80, 160),
]


def keystrokes(browser: Browser, port: int, rounds: int) -> None:
    page = browser.new_page(viewport=VIEWPORT)
    print(f"{rounds} keystrokes per case, cycling {len(SPECS)} specs (the first {len(SPECS)} cold on the server); "
          f"load {load_average()}")  # fmt: skip
    print()
    print("| devices | renderers | keystroke → painted median | worst | cold median | cached median | fetch median "
          "| build median | target median / worst | met |")  # fmt: skip
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---|")
    for label, params, med_target, worst_target in KEY_CASES:
        # start from a spec outside the cycle, so every typed spec is new to this page and server
        page.goto(f"http://127.0.0.1:{port}/?{urlencode({**params, 'spec': 'P()'})}")
        page.wait_for_selector("body[data-rendered='1']", state="attached", timeout=120_000)
        box = page.get_by_label("PartitionSpec", exact=True)
        times, fetches, builds = [], [], []
        renderers: set[str] = set()
        for i in range(rounds):
            count = int(page.get_attribute("body", "data-rendered") or "0")
            spec = SPECS[i % len(SPECS)]
            box.fill(spec[:-1])
            box.press(spec[-1])
            page.wait_for_selector(f"body[data-rendered='{count + 1}']", state="attached", timeout=120_000)
            page.wait_for_timeout(60)
            last = page.evaluate(
                "() => ['keystroke-to-paint', 'fetch-layout', 'build-dom']"
                ".map(n => performance.getEntriesByName(n).at(-1).duration)"
            )
            times.append(last[0])
            fetches.append(last[1])
            builds.append(last[2])
            renderers.add(page.get_attribute("[data-part=grid] .layout-grid", "data-renderer") or "?")
        med, worst = statistics.median(times), max(times)
        cold = statistics.median(times[: len(SPECS)])
        cached = statistics.median(times[len(SPECS) :]) if len(times) > len(SPECS) else float("nan")
        met = "yes" if med <= med_target and worst <= worst_target else "no"
        print(f"| {label} | {' + '.join(sorted(renderers, reverse=True))} | {med:.0f} ms | {worst:.0f} ms | "
              f"{cold:.0f} ms | {cached:.0f} ms | {statistics.median(fetches):.0f} ms | "
              f"{statistics.median(builds):.0f} ms | {med_target} / {worst_target} ms | {met} |")  # fmt: skip
    page.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="fresh contexts per page (first paint)")
    parser.add_argument("--clicks", type=int, default=12, help="collective clicks per plan (the why)")
    parser.add_argument("--keys", action="store_true", help="also the keystroke bench (layout explorer)")
    parser.add_argument("--rounds", type=int, default=12, help="keystrokes per case (cycling the six specs)")
    parser.add_argument("--only", default="", help="first-paint cases whose name contains this")
    parser.add_argument("--profile", default="", metavar="CASE", help="profile the first case whose name has CASE")
    parser.add_argument("--fresh", action="store_true", help="plan again instead of using build/bench_frontend/")
    parser.add_argument(
        "--against", type=Path, default=None, metavar="CHECKOUT",
        help="also a server of another checkout (e.g. `git worktree add /tmp/main main`), runs taken in turn",
    )  # fmt: skip
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, tempfile.TemporaryDirectory() as tmp_other:
        proc, port = serve(tmp)
        other = serve(tmp_other, args.against.resolve()) if args.against else None
        try:
            all_cases = cases(f"http://127.0.0.1:{port}", args.profile or args.only, args.fresh)
            sides = [all_cases]
            if other is not None:
                sides.append(cases(f"http://127.0.0.1:{other[1]}", args.profile or args.only, args.fresh))
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
                if args.profile:
                    label = next(iter(all_cases))
                    print(f"profile: {label}; load {load_average()}")
                    open_once(browser, *all_cases[label])[1].context.close()  # the server's caches warm
                    profile(browser, *all_cases[label])
                else:
                    report_paints(first_paints(browser, sides, args.runs), args.runs, args.against)
                    for side, name in zip(sides, ("this checkout", str(args.against)), strict=False):
                        report_why(browser, side, args.clicks, name if other else "")
                    if args.keys:
                        print()
                        keystrokes(browser, port, args.rounds)
                browser.close()
        finally:
            for server in (proc, other[0] if other else None):
                if server is not None:
                    server.terminate()
                    server.wait(10)


if __name__ == "__main__":
    main()
