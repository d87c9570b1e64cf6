"""Cost estimates on the page, in headless Chromium against a real server: the estimate column and total
under the kernel lab's collectives, the rooflines, the layout explorer's "Reshard to…", and the comparison
page with its verdict and share link.

Screenshots land in ``artifacts/screenshots/cost-*.png`` for people to look at, each view at 1440×900 and
390×844, light and dark.
"""

from __future__ import annotations

import re
from urllib.parse import urlencode

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.plugins.browser import Watched, rendered, runs, shot
from tests.plugins.live import Server

pytestmark = pytest.mark.browser  # a real server or notebook and a browser


def wait_counter(page: Page, name: str, count: int = 1) -> None:
    page.wait_for_selector(f"body[data-{name}='{count}']", state="attached", timeout=120_000)


# an estimate cell: "bound 280 µs · expected 356 µs · ici", "× 10" after each time for a collective in a loop
TIME = r"[\d.]+(?:e-\d+)? (?:s|ms|µs|ns)(?: × \d+)?"
ESTIMATE = re.compile(rf"bound {TIME} · expected {TIME} · (?:ici|dcn|nvlink|network)")


def shots(page: Page, name: str) -> None:
    """The view as it is, at a desktop and a phone size, in light and dark."""
    for width, height in ((1440, 900), (390, 844)):
        page.set_viewport_size({"width": width, "height": height})
        for scheme in ("light", "dark"):
            page.emulate_media(color_scheme=scheme)
            shot(page, f"{name}-{width}-{scheme}")
    page.emulate_media(color_scheme="light")


def test_kernel_lab_shows_estimates_totals_and_rooflines(server: Server, watched: Watched) -> None:
    page = watched.page
    page.goto(f"http://127.0.0.1:{server.port}/kernels.html?kernel=matmul_xxt&devices=tpu:v5e:4x4&mesh=4x4"
              "&axes=x,y&types=auto&in=16,256|P('x', 'y')|bfloat16")  # fmt: skip
    runs(page, 1)
    table = page.locator("[data-part=collectives] table")
    expect(table.locator("th", has_text="estimate")).to_have_count(1)
    cells = table.locator("td.estimate")
    assert cells.count() >= 1
    for text in cells.all_text_contents():
        assert ESTIMATE.fullmatch(text), text
    assert "bound:" in (cells.first.get_attribute("title") or "")  # the formula on hover
    expect(page.locator("[data-part=collective-total]")).to_contain_text("Estimated communication: bound")
    roofline = page.locator("[data-part=roofline] .roofline")
    expect(roofline).to_contain_text("Roofline (estimate)")
    expect(roofline).to_contain_text("TPU v5e")
    expect(roofline.locator("dd.bound")).to_have_text(re.compile(r"(compute|memory|communication)-bound"))
    expect(roofline).to_contain_text("fits:")
    assert roofline.locator("svg.roofline-bars .bar").count() == 3
    if page.locator("[data-part=tpu-box]").is_visible():  # one roofline per result: the TPU compile's is the headline
        expect(roofline).to_contain_text("the TPU compile")
        expect(page.locator("[data-part=tpu-roofline] .roofline")).to_have_count(0)
        expect(page.locator("[data-part=tpu-total]")).to_contain_text("Estimated communication: bound")
    shots(page, "cost-01-kernel-estimates")
    compare = page.get_by_role("link", name="Compare with…")
    assert "/compare.html?a=" in (compare.get_attribute("href") or "")


def test_cpu_sets_say_there_are_no_figures(server: Server, watched: Watched) -> None:
    page = watched.page
    page.goto(f"http://127.0.0.1:{server.port}/kernels.html?kernel=sum_axis0&devices=cpu:8&types=auto")
    runs(page, 1)
    cell = page.locator("[data-part=collectives] td.estimate").first
    expect(cell).to_have_text("no estimate")
    assert "no hardware figures for CPU device sets" in (cell.get_attribute("title") or "")
    expect(page.locator("[data-part=roofline]")).to_contain_text("no hardware figures for CPU device sets")


def test_layout_explorer_reshards_to_a_target(server: Server, watched: Watched) -> None:
    page = watched.page
    page.goto(f"http://127.0.0.1:{server.port}/?devices=tpu:v5e:4x4&mesh=4x4&axes=x,y&spec=P('x', 'y')"
              "&shape=256,256&dtype=bfloat16")  # fmt: skip
    rendered(page)
    page.locator(".reshard-box summary").click()
    target = page.get_by_label("Reshard target spec")
    target.fill("P(None, 'y')")
    page.get_by_role("button", name="Reshard").click()
    wait_counter(page, "reshards")
    results = page.locator(".reshard-results")
    expect(results).to_contain_text("P('x', 'y') → P(None, 'y')")
    expect(results.locator("td.estimate").first).to_have_text(ESTIMATE)
    expect(results.locator(".estimate-total").first).to_contain_text("Estimated communication: bound")
    assert "reshard=P" in page.url  # the target is in the address
    # the address reopens with the reshard done
    page.goto(page.url)
    wait_counter(page, "reshards")
    expect(page.locator(".reshard-results")).to_contain_text("P(None, 'y')")


def test_compare_two_reshards_side_by_side_and_share_it(server: Server, browser: Browser) -> None:
    base = "/?devices=tpu:v5e:16x16&mesh=16x16&axes=x,y&spec=P('x', 'y')&shape=4096,4096&dtype=bfloat16&reshard="
    query = urlencode({"a": base + "P(None, 'y')", "b": base + "P(('x', 'y'), None)"})
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    w = Watched(context)
    page = w.page
    page.goto(f"http://127.0.0.1:{server.port}/compare.html?{query}")
    wait_counter(page, "compares")
    verdict = page.locator("[data-part=verdict]")
    expect(verdict).to_contain_text("estimates")
    expect(verdict).to_contain_text(re.compile(r"cheaper|about the same", re.I))
    expect(page.locator("[data-part=sides]")).to_contain_text("lower bound on run time")
    assert page.locator("[data-part=rooflines] .roofline").count() == 2
    assert page.locator("[data-part=matched] .estimate").count() >= 1
    matched = page.locator("[data-part=matched] .estimate").first
    expect(matched).to_have_text(ESTIMATE)
    # issue 28: at 1440 px the 14-column table hid B and the Δs behind a horizontal scroll; on a phone, cards
    page.set_viewport_size({"width": 1440, "height": 900})
    table = page.locator("[data-part=matched] table")
    wrap = page.locator("[data-part=matched]")
    assert table.evaluate("t => t.scrollWidth") <= wrap.evaluate("w => w.clientWidth")
    for header in ("A", "B", "Δ (B − A)"):
        th = table.locator("th", has_text=header).first
        box, view = th.bounding_box(), wrap.bounding_box()
        assert box and view and box["x"] + box["width"] <= view["x"] + view["width"] + 1, header
    page.set_viewport_size({"width": 390, "height": 844})
    assert table.locator("thead").evaluate("t => getComputedStyle(t).display") == "none"
    row = table.locator("tbody tr").first
    assert row.evaluate("r => getComputedStyle(r).display") == "grid"
    assert table.evaluate("t => t.scrollWidth") <= wrap.evaluate("w => w.clientWidth")
    page.set_viewport_size({"width": 1400, "height": 1000})
    expect(page.locator("[data-part=sides]")).to_contain_text(re.compile(r"bound [\d.]+ (s|ms|µs|ns) · expected"))
    shots(page, "cost-03-compare")
    page.get_by_role("button", name="Copy link").click()
    share = page.get_by_label("Share link")
    expect(share).to_have_value(re.compile(r"/s/[A-Za-z0-9_-]{22,}$"))
    fresh = browser.new_context(viewport={"width": 1400, "height": 1000})
    w2 = Watched(fresh)
    w2.page.goto(share.input_value())
    wait_counter(w2.page, "compares")
    assert "/compare.html" in w2.page.url
    expect(w2.page.locator("[data-part=verdict]")).to_have_text(verdict.text_content() or "")
    fresh.close()
    context.close()
    assert w.errors == [] and w2.errors == []


def test_a_280_us_estimate_reads_280_us(server: Server, watched: Watched) -> None:
    """Regression (issue 19): fmtSeconds stripped integer zeros, so 279.6 µs read "28 µs". Gathering
    bf16[4096, 2048] sharded 4 ways along x (an axis of 4 chips on v5e 4x4: no wraparound) takes
    3 · (16 MiB / 4) / 4.5e10 = 279.6 µs by the book."""
    page = watched.page
    page.goto(f"http://127.0.0.1:{server.port}/?devices=tpu:v5e:4x4&mesh=4x4&axes=x,y&spec=P('x', None)"
              "&shape=4096,2048&dtype=bfloat16&reshard=P()")  # fmt: skip
    wait_counter(page, "reshards")
    line = page.locator(".reshard-line")
    expect(line).to_contain_text("1 collective, 16.0 MiB of results per device, bound 280 µs · expected")
    expect(page.locator(".reshard-results td.estimate").first).to_have_text(re.compile(r"^bound 280 µs · expected"))
    got = page.evaluate("async () => (await import('/js/lib/format.js')).fmtSeconds(279.6e-6)")
    assert got == "280 µs"
    shots(page, "cost-02-reshard")
