"""Views hand each other complete state, in headless Chromium against a real server.

Regression tests for issue 11's hand-over bugs:
- "see it on the topology" for a collective of ``flax_train_step`` (mesh axes ``data``, ``model``)
  landed on ``unknown_axis 'x'``: the link carried the groups but not the kernel's spec and mesh;
- a collective-permute's source → target pairs were dropped on the way to the topology view;
- ``/s/<id>`` was read three times across two page loads, and an unknown or truncated link showed
  raw JSON. The server now answers 303 to the view's page with the state in the query, and pages
  read their state only from their own query.

Screenshots land in ``artifacts/screenshots/handoff-*.png``.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, urlsplit

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P
from playwright.sync_api import Page, Request, expect

from sharding_core import publish
from tests.plugins.browser import Watched, rendered, runs, shot
from tests.plugins.live import Server

pytestmark = pytest.mark.browser  # a real server or notebook and a browser


def kernel_result(server: Server, kernel: str, devices: str, inputs: list[dict[str, Any]]) -> dict[str, Any]:
    """The run the page made, answered from the server's cache (the page ran the catalog defaults)."""
    names = ["data", "model"] if kernel.startswith("flax") else ["x", "y"]
    status, result = server.post_json("/api/kernels/run", {
        "kernel": kernel, "devices": devices,
        "mesh": {"shape": [2, 4], "axis_names": names, "order": "make_mesh", "axis_types": ["auto", "auto"]},
        "inputs": inputs})  # fmt: skip
    assert status == 200, result
    return dict(result)


def open_topology_link(page: Page, row: int) -> dict[str, list[str]]:
    """Selects collective ``row`` and follows its "see it on the topology" link; returns the link's query."""
    page.locator(f"[data-part=collectives] tr.collective[data-index='{row}']").click()  # program order's index
    link = page.get_by_role("link", name="see it on the topology")
    query = parse_qs(urlsplit(link.get_attribute("href") or "").query)
    link.click()
    page.wait_for_url("**/topology.html?**")
    rendered(page)
    return query


def test_flax_collective_opens_on_the_topology_with_the_kernels_mesh(server: Server, watched: Watched) -> None:
    # Regression: the link carried the groups but not the spec, so the topology view laid the
    # default P('x', None) on the (data, model) mesh and showed `unknown_axis 'x'`.
    page = watched.page
    page.goto(f"http://127.0.0.1:{server.port}/kernels.html?kernel=flax_train_step")
    runs(page, 1)
    result = kernel_result(server, "flax_train_step", "cpu:8", [
        {"shape": [8, 1024], "spec": "P('data', None)", "dtype": "float32"},
        {"shape": [8, 1024], "spec": "P('data', None)", "dtype": "float32"}])  # fmt: skip
    collective = result["collectives"][0]
    coloured_by = next(o for o in result["outputs"] if any(d["axes"] for d in o["dims"]))
    query = open_topology_link(page, 0)
    mesh = (query["mesh"], query["axes"], query["types"], query["order"])
    assert mesh == (["2x4"], ["data,model"], ["auto"], ["make_mesh"])
    assert (query["spec"], query["shape"]) == ([coloured_by["spec"]], [",".join(map(str, coloured_by["shape"]))])
    assert query["groups"] == [";".join(",".join(map(str, g)) for g in collective["groups"])]
    # the topology view lays the kernel's own output on the kernel's own mesh: no error, real colours
    expect(page.locator("[data-part=spec-error]")).to_be_hidden()
    expect(page.get_by_label("PartitionSpec")).to_have_value(coloured_by["spec"])
    expect(page.locator("[data-part=topo-summary]")).to_contain_text("data(2) × model(4)")
    expect(page.locator("[data-part=topo-summary]")).to_contain_text(f"tiles of {coloured_by['spec']}")
    fills = page.locator("[data-part=topo-view] .device rect").evaluate_all("rs => rs.map(r => r.getAttribute('fill'))")
    assert len(set(fills)) == len(coloured_by["tiles"])  # one colour per block, none grey
    axis = f"⟨{collective['op']} over {collective['axes_text']}⟩"
    expect(page.locator("[data-part=topo-view]")).to_have_attribute("data-axis", axis)
    assert page.locator("[data-part=hop-table] tbody tr").count() == len(collective["groups"])
    shot(page, "handoff-01-flax-collective-on-topology")


def test_collective_permute_pairs_reach_the_topology_as_source_target_groups(server: Server, watched: Watched) -> None:
    # Regression: the pairs were dropped on the way ("4 groups of 1"); they go as groups of two.
    page = watched.page
    page.goto(f"http://127.0.0.1:{server.port}/kernels.html?kernel=ppermute&devices=tpu:v5e:2x4&types=auto")
    runs(page, 1)
    x = {"shape": [8, 16], "spec": "P('x', 'y')", "dtype": "float32"}
    result = kernel_result(server, "ppermute", "tpu:v5e:2x4", [x])
    i, permute = next((i, c) for i, c in enumerate(result["collectives"]) if c["op"] == "collective-permute")
    pairs = permute["pairs"]
    page.locator(f"[data-part=collectives] tr.collective[data-index='{i}']").click()
    expect(page.locator("[data-part=collective-mesh]")).to_contain_text(f"{len(pairs)} source → target pairs")
    query = open_topology_link(page, i)
    assert query["groups"] == [";".join(f"{a},{b}" for a, b in pairs)]
    assert query["devices"] == ["tpu:v5e:2x4"]
    view = page.locator("[data-part=topo-view]")
    expect(view).to_have_attribute("data-axis", f"⟨collective-permute over {permute['axes_text']}, source → target⟩")
    expect(page.locator("[data-part=hop-summary]")).to_contain_text(f"2 devices per group, {len(pairs)} groups")
    rows = page.locator("[data-part=hop-table] tbody tr")
    assert rows.count() == len(pairs)
    members = [rows.nth(k).locator("td").nth(1).text_content() for k in range(len(pairs))]
    assert members == [f"{a} {b}" for a, b in pairs]
    # one drawn hop per pair, source to target (no ring to close)
    assert page.locator("[data-part=topo-view] .ring-hop").count() == len(pairs)
    expect(page.locator("[data-part=spec-error]")).to_be_hidden()
    shot(page, "handoff-02-permute-pairs-on-topology")


def link_to(server: Server, view: str, state: dict[str, Any]) -> str:
    status, link = server.post_json("/api/links", {"view": view, "state": state})
    assert status == 201, link
    return f"http://127.0.0.1:{server.port}{link['url']}"


def snapshot_link(server: Server) -> str:
    mesh = Mesh(np.array(jax.devices()).reshape(2, 4), ("data", "model"))
    return publish(
        {"w": jax.device_put(jnp.ones((8, 8)), NamedSharding(mesh, P("data")))},
        "one leaf",
        f"http://127.0.0.1:{server.port}",
    )


LAYOUT_STATE = {"devices": "cpu:8", "mesh": "2x4", "axes": "x,y", "spec": "P('y')", "shape": "8,16"}


@pytest.mark.parametrize("view", ["layout", "topology", "kernels", "snapshots"])
def test_a_share_link_redirects_to_its_page_with_its_state(server: Server, watched: Watched, view: str) -> None:
    # Regression: /s/<id> served the layout page, which read /api/links/<id> and sent other views to
    # their page with ?link=<id>, which read it again. Now: one 303, and the page reads its own query.
    page = watched.page
    reads: list[str] = []
    page.on("request", lambda r: reads.append(r.url) if "/api/links" in r.url else None)
    if view == "snapshots":
        url = snapshot_link(server)
    elif view == "kernels":
        url = link_to(server, "kernels", {"query": "kernel=matmul_xw&types=auto"})
    else:
        url = link_to(server, view, LAYOUT_STATE)
    response = page.goto(url)
    assert response is not None
    first: Request | None = response.request.redirected_from
    assert first is not None and first.url == url
    first_response = first.response()
    assert first_response is not None and first_response.status == 303
    address = urlsplit(page.url)
    query = parse_qs(address.query)
    if view == "layout":
        rendered(page)
        assert address.path == "/" and query["spec"] == ["P('y')"] and query["mesh"] == ["2x4"]
        expect(page.get_by_label("PartitionSpec")).to_have_value("P('y')")
    elif view == "topology":
        rendered(page)
        assert address.path == "/topology.html" and query["spec"] == ["P('y')"]
        expect(page.get_by_label("PartitionSpec")).to_have_value("P('y')")
    elif view == "kernels":
        runs(page, 1)
        assert address.path == "/kernels.html" and query["kernel"] == ["matmul_xw"]
        expect(page.get_by_label("Kernel", exact=True)).to_have_value("matmul_xw")
    else:
        page.wait_for_selector("body[data-loaded='1']", state="attached", timeout=30_000)
        assert address.path == "/snapshots.html" and len(query["snapshot"][0]) >= 22
        expect(page.locator("[data-part=snap-title]")).to_have_text("one leaf")
    assert reads == []  # the state came with the redirect: nothing reads the link again
    shot(page, f"handoff-03-redirect-{view}")


@pytest.mark.parametrize("which", ["unknown", "truncated"])
def test_an_unknown_or_truncated_share_link_says_so_in_words(server: Server, watched: Watched, which: str) -> None:
    page = watched.page
    if which == "unknown":
        url = f"http://127.0.0.1:{server.port}/s/{'A' * 22}"
    else:
        url = link_to(server, "layout", LAYOUT_STATE)[:-1]
    try:
        response = page.goto(url)
        assert response is not None and response.status == 404
        assert response.headers["content-type"].startswith("text/html")
        text = page.locator("body").inner_text().strip()
        assert not text.startswith("{") and '"error"' not in text  # words, not the API's JSON
        assert "link" in text.lower()
        shot(page, f"handoff-04-{which}-link")
    finally:
        # the 404 itself is logged by the browser as a failed resource; nothing else may be
        watched.errors[:] = [e for e in watched.errors if "404" not in e]
