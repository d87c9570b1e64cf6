"""Compile-only runs on the page (issue 25), in headless Chromium against a real server: "Reshard to…" and the kernel
lab at a real size on a TPU set (one Llama 3 8B FFN weight, 4096 x 14336 bf16, on v5p 4x4x4) say they were
compiled, not run, and show the TPU program's collectives.

Screenshots land in ``artifacts/screenshots/compile-only-*.png``, each view at 1440x900 and 390x844, light and dark.
"""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.plugins.browser import Watched, runs
from tests.plugins.live import Server
from tests.test_cost_browser import shots, wait_counter

pytestmark = [pytest.mark.browser, pytest.mark.tpu]

FFN = "shape=4096,14336&dtype=bfloat16"


def test_reshard_to_says_a_real_size_move_was_compiled_not_run(server: Server, watched: Watched) -> None:
    page = watched.page
    page.goto(f"http://127.0.0.1:{server.port}/?devices=tpu:v5p:4x4x4&mesh=16x4&axes=fsdp,tp"
              f"&spec=P('fsdp', 'tp')&{FFN}&reshard=P('fsdp', None)")  # fmt: skip
    wait_counter(page, "reshards")
    results = page.locator(".reshard-results")
    expect(results.locator(".reshard-compile-only")).to_contain_text("Compiled, not run")
    expect(page.locator(".reshard-line")).to_contain_text("1 collective, 7.00 MiB of results per device")
    expect(results).to_contain_text("TPU compile-only (v5p:4x4x4)")
    expect(results.locator("td.estimate").first).to_contain_text("bound")
    shots(page, "compile-only-01-reshard")
    assert watched.errors == []


def test_the_kernel_lab_says_a_real_size_run_was_compiled_not_run(server: Server, watched: Watched) -> None:
    page = watched.page
    page.goto(f"http://127.0.0.1:{server.port}/kernels.html?kernel=sum_axis0&devices=tpu:v5p:4x4x4&mesh=16x4"
              "&axes=fsdp,tp&types=auto&in=4096,14336|P('fsdp', 'tp')|bfloat16")  # fmt: skip
    runs(page, 1)
    summary = page.get_by_text("compiled, not run", exact=True)
    expect(summary).to_have_count(1)
    main = page.locator("main")
    expect(main).to_contain_text("nothing was allocated and nothing ran")
    expect(main).to_contain_text("none: nothing ran")
    expect(main).to_contain_text("the TPU compile: libtpu compile-only topology v5p:4x4x4")
    expect(main).to_contain_text("compiled, not run: no values")
    shots(page, "compile-only-02-kernel-lab")
    assert watched.errors == []
