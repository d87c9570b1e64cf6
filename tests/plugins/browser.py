"""Browser-test helpers shared by every browser test module: Debian's headless Chromium driven by
Playwright, a page whose JavaScript and console errors fail the test, screenshots for people to look
at (``artifacts/screenshots/``, git-ignored), and waits on the counters the pages keep.

A pytest plugin (``tests/conftest.py`` lists it): test modules use the ``browser``, ``watched`` and ``host``
(a panel test's two hosts) fixtures by name and import the helpers from here.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, BrowserContext, Page, expect, sync_playwright

from tests.plugins.live import ROOT

# Playwright's assertions retry for 5 s by default: a page that answers in 0.2 s on a quiet machine can take
# several seconds at load 15 (CI may run on a busy machine). Waiting longer never passes a wrong page: an
# assertion that cannot become true still fails, only later.
expect.set_options(timeout=30_000)

CHROMIUM = "/usr/bin/chromium"
SHOTS = ROOT / "artifacts" / "screenshots"
# Flags for a sandboxed, offline machine: no background networking, no first-run work.
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    assert Path(CHROMIUM).exists(), "Debian's chromium is missing: `make test` installs it"
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


class Watched:
    """A page whose JavaScript errors and console errors fail the test."""

    def __init__(self, context: BrowserContext) -> None:
        self.context = context
        self.page = context.new_page()
        self.errors: list[str] = []
        self.scheme = "light"
        self.page.on("pageerror", lambda e: self.errors.append(f"pageerror: {e}"))
        self.page.on("console", self._console)

    def _console(self, msg: Any) -> None:
        # 4xx answers to bad input are expected and shown in the page; anything else is a bug.
        if msg.type == "error" and "status of 422" not in msg.text:
            self.errors.append(f"console: {msg.text}")


def sized_context(browser: Browser, width: int, height: int, scheme: str) -> BrowserContext:
    """A context with a window of ``width`` × ``height`` in the ``scheme`` colour scheme; under 600 px wide, a
    phone's (mobile, touch)."""
    options: dict[str, Any] = {"viewport": {"width": width, "height": height}, "color_scheme": scheme}
    if width < 600:
        options |= {"is_mobile": True, "has_touch": True}
    return browser.new_context(**options)


@pytest.fixture(params=["dashboard", "jupyterlab"])
def host(request: pytest.FixtureRequest) -> str:
    """The host a panel test runs on: the dashboard's page, or the notebook widget in JupyterLab
    (``tests/notebooks/jupyter.py`` ``mounting``)."""
    return str(request.param)


@pytest.fixture
def watched(browser: Browser) -> Iterator[Watched]:
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    w = Watched(context)
    yield w
    context.close()
    assert w.errors == []


def rendered(page: Page, count: int = 1) -> None:
    """Wait until the picture has been painted ``count`` times (the layout and topology pages count paints)."""
    page.wait_for_selector(f"body[data-rendered='{count}']", state="attached", timeout=30_000)


def runs(page: Page, count: int) -> None:
    """Wait until the kernel lab has shown ``count`` runs' results."""
    page.wait_for_selector(f"body[data-runs='{count}']", state="attached", timeout=90_000)


def shot(page: Page, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)
