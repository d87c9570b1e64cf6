"""``shardscope mcp`` with the official SDK's own client: in memory (the fast tier), over stdio (a real
``shardscope mcp`` subprocess) and over streamable HTTP (a real ``shardscope serve --mcp --token`` on loopback).

Figures are checked against JAX: a layout's shards against ``NamedSharding(...).devices_indices_map`` on the
process's own CPU devices, a topology's mesh-axis groups against ``jax.make_mesh``'s device grid. Bad input of
every kind answers a tool error that names what to change; the long-running call reports progress and stops its
worker when the client cancels.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import jax
import numpy as np
import pytest
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P
from mcp import Client
from mcp.server import MCPServer
from mcp.server.mcpserver import Context

from shardscope.mcp import answers
from shardscope.mcp.http import BearerOnly
from shardscope.mcp.jobs import Limits
from shardscope.mcp.server import MAX_CODE_CHARS, Options, Plans, Shardscope, build, refusing
from tests.mcp_helpers import http_client, stdio_params
from tests.plugins.live import start, stop

TOOLS = {"device_sets", "topology", "layout", "collective_cost", "plan", "why", "reshard", "compare", "publish",
         "findings", "search"}  # fmt: skip
MESH = {"shape": [2, 4], "axis_names": ["x", "y"]}
TOKEN = "mcp-test-3f9Kq2Lx8ZpR7vW1nB5cT0yH4jD6sA"  # a test's own token (>= 128 bits)


def run(fn: Callable[[Client], Awaitable[None]], server: Any = None) -> None:
    async def main() -> None:
        async with Client(server if server is not None else build(Options())) as client:
            await fn(client)

    anyio.run(main)


def shards_by_device(layout: dict[str, Any]) -> dict[int, list[list[int]]]:
    return {s["device_id"]: s["index"] for s in layout["shards"]}


def jax_shards(sharding: NamedSharding, shape: tuple[int, ...]) -> dict[int, list[list[int]]]:
    out = {}
    for device, index in sharding.devices_indices_map(shape).items():
        out[device.id] = [[*s.indices(n)[:2]] for s, n in zip(index, shape, strict=True)]
    return out


# ---- the fast tier: the SDK's in-memory client --------------------------------------------------------------


def test_tools_are_listed_with_their_schemas() -> None:
    async def check(client: Client) -> None:
        listed = {t.name: t for t in (await client.list_tools()).tools}
        assert set(listed) == TOOLS
        layout = listed["layout"].input_schema
        assert set(layout["required"]) == {"devices", "mesh", "spec", "shape"}
        mesh = layout["$defs"]["MeshRequest"]
        assert set(mesh["required"]) == {"shape", "axis_names"} and mesh["additionalProperties"] is False
        assert layout["properties"]["shape"]["maxItems"] == 16
        plan = listed["plan"].input_schema["properties"]
        assert plan["code"]["anyOf"][0]["maxLength"] == MAX_CODE_CHARS
        assert "ctx" not in plan  # the Context is injected, never an argument
        assert listed["layout"].annotations is not None and listed["layout"].annotations.read_only_hint
        uris = {str(r.uri) for r in (await client.list_resources()).resources}
        assert {"shardscope://hardware", "shardscope://measurements", "shardscope://scoreboard"} <= uris
        assert "shardscope://docs/agents.md" in uris
        read = await client.read_resource("shardscope://scoreboard")
        board = json.loads(read.contents[0].text)  # type: ignore[union-attr]
        from sharding_core.cost.runs import RUNS, SOURCES

        assert [r["id"] for r in board["rows"]] == [r.id for r in RUNS] and len(RUNS) >= 30
        assert all(r["source"]["url"] == SOURCES[r["source"]["key"]].url for r in board["rows"])

    run(check)


def test_layout_is_the_api_layout_and_jax_places_it_so(make_client: Any) -> None:
    spec, shape = "P('x', 'y')", [8, 16]
    api = make_client().post(
        "/api/layout", json={"devices": "cpu:8", "mesh": MESH, "spec": spec, "shape": shape}
    ).json()  # fmt: skip

    async def check(client: Client) -> None:
        r = await client.call_tool("layout", {"devices": "cpu:8", "mesh": MESH, "spec": spec, "shape": shape})
        assert not r.is_error
        data = r.structured_content
        assert data is not None and data["layout"] == api  # exactly POST /api/layout's JSON
        mesh = jax.make_mesh((2, 4), ("x", "y"), devices=jax.devices()[:8])
        assert shards_by_device(data["layout"]) == jax_shards(NamedSharding(mesh, P("x", "y")), (8, 16))
        assert "shard shape [4, 4]" in data["text"] and data["link"].startswith("http://127.0.0.1:8000/?devices=cpu")
        assert {e["source"] for e in data["evidence"]} == {"jax"}

    run(check)


def test_topology_groups_are_the_mesh_axes() -> None:
    async def check(client: Client) -> None:
        mesh = {"shape": [2, 4], "axis_names": ["data", "model"]}
        r = await client.call_tool("topology", {"devices": "cpu:8", "mesh": mesh})
        data = r.structured_content
        assert data is not None
        grid = jax.make_mesh((2, 4), ("data", "model"), devices=jax.devices()[:8]).device_ids
        axes = {a["name"]: {frozenset(g) for g in a["groups"]} for a in data["mesh"]["axes"]}
        assert axes["model"] == {frozenset(int(i) for i in row) for row in grid}
        assert axes["data"] == {frozenset(int(i) for i in col) for col in np.asarray(grid).T}

    run(check)


@pytest.mark.parametrize(
    ("tool", "arguments", "says"),
    [
        ("layout", {"devices": "cpu:8", "mesh": MESH, "spec": "P('z')", "shape": [8]}, "[unknown_axis]"),
        ("layout", {"devices": "cpu:8", "mesh": MESH, "spec": "P('x')", "shape": [7]}, "[indivisible]"),
        ("layout", {"devices": "cpu:8", "mesh": MESH, "spec": "P('x'", "shape": [8]}, "[parse_error]"),
        (
            "layout",
            {"devices": "cpu:8", "mesh": {"shape": [16], "axis_names": ["x"]}, "spec": "P()", "shape": [8]},
            "mesh",
        ),
        ("layout", {"devices": "cpu:8", "mesh": {**MESH, "extra": 1}, "spec": "P()", "shape": [8]}, "mesh.extra"),
        ("layout", {"devices": "cpu:8", "mesh": MESH, "spec": "P()", "shape": [8] * 17}, "shape"),
        ("layout", {"devices": "tpu:v9:2x2", "mesh": MESH, "spec": "P()", "shape": [8]}, "[bad_devices]"),
        ("layout", {"devices": "x" * 100, "mesh": MESH, "spec": "P()", "shape": [8]}, "devices"),
        ("layout", {"devices": "cpu:8", "mesh": MESH, "spec": "P()" + " " * 5000, "shape": [8]}, "spec"),
        ("topology", {"devices": "cpu:99999"}, "[too_large]"),
        ("collective_cost", {"devices": "tpu:v5p:2x2x1", "op": "all-gather", "bytes": 0}, "bytes"),
        (
            "collective_cost",
            {"devices": "tpu:v5p:2x2x1", "op": "all-gather", "bytes": 8, "groups": [[0, 99]]},
            "[bad_collective]",
        ),
        ("plan", {"devices": "cpu:8"}, "[bad_target]"),
        ("plan", {"devices": "cpu:8", "target": "no/such/file.py:fn"}, "[bad_target]"),
        ("plan", {"devices": "cpu:8", "code": "x" * (MAX_CODE_CHARS + 1)}, "code"),
        ("plan", {"devices": "cpu:8", "code": "def build(mesh): ...", "function": "not an identifier"}, "function"),
        ("why", {"plan_id": "nope"}, "[not_found]"),
        ("compare", {"a": "nope", "b": "nope"}, "[not_found]"),
        ("publish", {"plan_id": "nope"}, "[not_found]"),
        ("findings", {"plan_id": "nope"}, "[not_found]"),
    ],
)
def test_bad_input_is_a_tool_error_that_says_what_to_change(tool: str, arguments: dict[str, Any], says: str) -> None:
    async def check(client: Client) -> None:
        r = await client.call_tool(tool, arguments)
        text = r.content[0].text if r.content else ""  # type: ignore[union-attr]
        assert r.is_error and says in text, text
        assert len(text) < 4000

    run(check)


def test_search_on_a_set_without_figures_is_a_tool_error_that_says_what_to_search() -> None:
    """search (issue 34) ranks by step time and HBM: on a cpu: set (no hardware figures) the tool answers a clear
    error naming a set to search instead, before anything compiles — never a stub, never a crash."""

    async def check(client: Client) -> None:
        r = await client.call_tool("search", {"devices": "cpu:8", "target": "examples/llama.py:tiny_fsdp"})
        text = r.content[0].text  # type: ignore[union-attr]
        assert r.is_error and "cpu:8 has no hardware figures" in text and "tpu:v5p:2x2x2" in text, text

    run(check)


def test_held_plans_are_bounded_by_bytes() -> None:
    plans = Plans(max_bytes=1000, max_plans=64)
    first = plans.put({}, {"x": "a" * 400})
    plans.put({}, {"x": "b" * 400})
    assert plans.bytes <= 1000 and first in plans.held
    plans.put({}, {"x": "c" * 400})  # one more than fits: the least recently used goes
    assert plans.bytes <= 1000 and first not in plans.held and len(plans.held) == 2
    with pytest.raises(Exception, match="at most 1000"):
        plans.put({}, {"x": "d" * 2000})


def test_code_is_refused_where_the_operator_did_not_allow_it() -> None:
    async def check(client: Client) -> None:
        r = await client.call_tool("plan", {"devices": "cpu:8", "code": "def build(mesh): ..."})
        assert r.is_error and "[code_not_allowed]" in r.content[0].text  # type: ignore[union-attr]

    run(check, build(Options(allow_code=False)))


def test_bearer_only_guards_every_method() -> None:
    calls: list[str] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        calls.append(scope["method"])

    sent: list[Any] = []

    async def send(message: Any) -> None:
        sent.append(message)

    async def check() -> None:
        guard = BearerOnly(app, TOKEN)
        for method, auth, status in (("GET", None, 401), ("POST", "Bearer wrong-token", 403),
                                     ("DELETE", f"Bearer {TOKEN}", None)):  # fmt: skip
            sent.clear()
            headers = [(b"authorization", auth.encode())] if auth else []
            await guard({"type": "http", "method": method, "headers": headers}, None, send)
            assert (sent[0]["status"] if sent else None) == status
        assert calls == ["DELETE"]

    anyio.run(check)


def slow_tool(mcp: MCPServer, state: Shardscope) -> None:
    """A test-only long tool on the same job machinery as plan: a worker that sleeps, reporting progress."""

    @mcp.tool()
    async def sleepy(ctx: Context, seconds: float) -> dict[str, Any]:
        """Sleeps in a worker process."""
        from tests.mcp_sleeper import main

        with refusing():  # the domain's errors as tool errors, as every tool of the server
            return await state.jobs.run(main, {"seconds": seconds}, ctx.report_progress)


@pytest.mark.workers
def test_a_long_call_reports_progress_and_cancelling_stops_its_worker() -> None:
    server = build(Options(limits=Limits(seconds=600)), tools=slow_tool)
    progress: list[tuple[float, float | None, str | None]] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append((done, total, message))

    async def check(client: Client) -> None:
        with anyio.move_on_after(12):
            await client.call_tool("sleepy", {"seconds": 300}, progress_callback=on_progress)
        assert progress and all(b[0] > a[0] for a, b in itertools.pairwise(progress))
        assert any("sleeping" in (m or "") for _, _, m in progress)
        pid = int(Path(sleeper_pid_file()).read_text())
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and alive(pid):
            await anyio.sleep(0.2)
        assert not alive(pid), "the cancelled call's worker is still running"

    run(check, server)


def sleeper_pid_file() -> str:
    from tests.mcp_sleeper import PID_FILE

    return PID_FILE


def alive(pid: int) -> bool:
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().split()[2] != "Z"


@pytest.mark.workers
def test_a_call_past_its_time_limit_is_stopped() -> None:
    server = build(Options(limits=Limits(seconds=3)), tools=slow_tool)

    async def check(client: Client) -> None:
        r = await client.call_tool("sleepy", {"seconds": 60})
        assert r.is_error and "[timeout]" in r.content[0].text  # type: ignore[union-attr]

    run(check, server)


def test_answers_name_the_cost_models_held_out_error() -> None:
    data = answers.collective_estimate("tpu:v5p:4x4x4", "all-gather", 1 << 30)
    expected = next(e for e in data["evidence"] if e["figure"] == "expected_seconds")
    assert expected["source"] == "cost_model" and 0 < expected["held_out_median_error"] < 1


# ---- stdio and HTTP: real processes ------------------------------------------------------------------------------


@pytest.mark.workers
def test_stdio_server_lists_and_answers() -> None:
    async def main() -> None:
        async with Client(stdio_params()) as client:
            assert {t.name for t in (await client.list_tools()).tools} == TOOLS
            r = await client.call_tool(
                "layout", {"devices": "cpu:8", "mesh": MESH, "spec": "P(None, 'y')", "shape": [4, 8]}
            )
            assert not r.is_error and r.structured_content is not None
            mesh = jax.make_mesh((2, 4), ("x", "y"), devices=jax.devices()[:8])
            expected = jax_shards(NamedSharding(mesh, P(None, "y")), (4, 8))
            assert shards_by_device(r.structured_content["layout"]) == expected
            bad = await client.call_tool("layout", {"devices": "cpu:8", "mesh": MESH, "spec": "P('q')", "shape": [4]})
            assert bad.is_error and "[unknown_axis]" in bad.content[0].text  # type: ignore[union-attr]
            prog: list[float] = []
            # A compile, cancelled on purpose at its first progress report: the server reports at once, while its
            # worker still imports JAX, so the cancellation always lands mid-call however busy the machine is.
            with anyio.move_on_after(300) as scope:

                async def on_progress(done: float, total: float | None, message: str | None) -> None:
                    prog.append(done)
                    scope.cancel()

                code = Path(__file__).parent.joinpath("mcp_tasks", "mlp.py").read_text()
                await client.call_tool("plan", {"devices": "cpu:8", "code": code, "mesh": {
                    "shape": [2, 4], "axis_names": ["data", "model"]}}, progress_callback=on_progress)  # fmt: skip
            assert scope.cancelled_caught and prog
            # the server goes on answering after a cancelled call
            r = await client.call_tool("device_sets", {"devices": "tpu:v5p:4x4x4"})
            assert r.structured_content is not None and r.structured_content["set"]["num_devices"] == 64

    anyio.run(main)


@pytest.mark.live
def test_http_transport_behind_the_token(tmp_path: Path) -> None:
    srv = start(tmp_path / "links.db", tmp_path / "server.log", args=("--mcp", "--token", TOKEN))
    url = f"http://127.0.0.1:{srv.port}/mcp"
    try:
        status, headers, body = srv.request("POST", "/mcp", b"{}", {"Content-Type": "application/json"})
        assert status == 401 and b"unauthorized" in body and "bearer" in headers["www-authenticate"].lower()
        status, _, _ = srv.request("GET", "/mcp", None, {"Authorization": "Bearer not-the-token"})
        assert status == 403
        status, _, _ = srv.request("POST", "/mcp", b"{}", {"Content-Type": "application/json", "Host": "evil.example",
                                                            "Authorization": f"Bearer {TOKEN}"})  # fmt: skip
        assert status == 400  # the Host check runs first (DNS rebinding)

        async def main() -> None:
            async with http_client(url, TOKEN) as client:
                assert {t.name for t in (await client.list_tools()).tools} == TOOLS
                r = await client.call_tool(
                    "layout", {"devices": "cpu:8", "mesh": MESH, "spec": "P('x', 'y')", "shape": [8, 16]}
                )
                assert not r.is_error and r.structured_content is not None
                api = srv.post_json("/api/layout", {"devices": "cpu:8", "mesh": MESH, "spec": "P('x', 'y')",
                                                    "shape": [8, 16]})[1]  # fmt: skip
                assert r.structured_content["layout"] == api
                assert r.structured_content["link"].startswith(f"http://localhost:{srv.port}/?")
                r = await client.call_tool("plan", {"devices": "cpu:8", "code": "def build(mesh): ..."})
                assert r.is_error and "[code_not_allowed]" in r.content[0].text  # type: ignore[union-attr]
                r = await client.call_tool("reshard", {"devices": "cpu:8", "mesh": MESH, "shape": [8, 16],
                                                       "from_spec": "P('x', 'y')", "to_spec": "P('q')"})  # fmt: skip
                assert r.is_error and "[unknown_axis]" in r.content[0].text  # type: ignore[union-attr]

        anyio.run(main)
    finally:
        stop(srv)
