"""``shardscope mcp``: Shardscope's questions as Model Context Protocol tools, for coding agents.

Built on the official Python SDK's :class:`mcp.server.MCPServer`: each tool's typed arguments are its input
schema (bounded with the HTTP API's own field types, :mod:`server.api.schema`), bad input is a tool error that
says what to change (the domain's :class:`~sharding_core.errors.ShardingError` code, message and hint), and a
result is ``content`` for the model (a few lines to read first, then the JSON) and ``structured_content`` for
the client (the JSON: the same shapes as the CLI's ``--json``, :mod:`shardscope.mcp.answers`).

The quick tools answer in the server's process (device sets, topology, layout, one collective's cost). The
compiling ones (``plan``, ``why``, ``reshard``, ``findings``, ``search``) run in a worker process each, bounded
in time and memory, reporting progress and stopped when the client cancels (:mod:`shardscope.mcp.jobs`).
Plans stay on the server under a ``plan_id`` (bounded by bytes) for ``why``, ``compare``, ``findings`` and
``publish``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import os
import secrets
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import orjson
from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field

from server.api.schema import ArrayDim, CollectiveOp, DeviceId, DevicesText, DType, MeshRequest, Slices, SpecText
from sharding_core.errors import ShardingError
from sharding_core.layout import MAX_RANK
from shardscope.mcp import answers
from shardscope.mcp.jobs import Jobs, Limits

if TYPE_CHECKING:
    from collections.abc import Callable

NAME = "shardscope"
MAX_CODE_CHARS = 64 * 1024
"""The largest code snippet ``plan`` takes."""
MAX_HELD_BYTES = 256 * 2**20
"""What the server keeps of its plans (their snapshots' JSON) for why, compare, findings and publish."""
MAX_HELD_PLANS = 64
NOT_AVAILABLE = "not_available"
DOCS_DIR = Path(__file__).resolve().parents[2] / "docs"
"""The docs pages, in a checkout (an installed wheel has none: the docs resources are then absent)."""

INSTRUCTIONS = """\
Shardscope answers questions about how JAX arrays and programs are sharded across devices (TPU slices, GPU
hosts, CPU devices) without the hardware. Stop at the shallowest tool that answers:
1. device_sets / topology: what devices a set has, how a mesh axis lies on the torus (no compile).
2. layout: which device holds which block of an array for a mesh and PartitionSpec (no compile).
3. collective_cost: one collective's estimated time on a device set (no compile).
4. reshard: the collectives moving an array from one spec to another compiles to (one small compile).
5. plan: compile a program (FILE.py:FN or a code snippet defining FN(mesh) -> (jitted_fn, args)) for a device
   set: fits or not, memory, collectives, step time. Tens of seconds for a large model; reports progress.
6. why: why one collective of a plan is there, and fixes verified by recompiling (plan first).
7. compare: two plans side by side; publish: a plan as a dashboard link for a person.
Every answer lists `evidence` (computed by JAX, compiled by XLA for a target, estimated by the cost model with
its held-out error, measured) and a `link` to the same thing in the dashboard.
"""

Pair = Annotated[list[DeviceId], Field(min_length=2, max_length=2, description="[source, target] device ids")]
Devices = Annotated[DevicesText, Field(description="A device set: cpu:N, gpu:KIND:HxG or tpu:GEN:TOPO")]
PlanId = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_-]+$", description="A plan's id")]
Target = Annotated[
    str | None,
    Field(
        None,
        max_length=4096,
        description="FILE.py:FN, a file (relative to the server's directory) and its function FN(mesh) -> "
        "(jitted_fn, args); or give code",
    ),
]
Code = Annotated[
    str | None,
    Field(
        None,
        max_length=MAX_CODE_CHARS,
        description="Python source defining `function`(mesh) -> (jitted_fn, args): args abstract "
        "(jax.ShapeDtypeStruct sharded on mesh), a tuple or a dict of keywords",
    ),
]
Function = Annotated[
    str, Field(max_length=128, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$", description="The function in code")
]


@dataclasses.dataclass(frozen=True)
class Options:
    """How one MCP server is set up (``shardscope mcp``'s options, or ``shardscope serve --mcp``'s)."""

    url: str = "http://127.0.0.1:8000"
    """The dashboard's address: the links answers carry."""
    publish: bool = False
    """Whether a dashboard is configured to publish to (``--url``/``$SHARDSCOPE_URL`` given, or the serving app)."""
    token: str | None = None
    """The dashboard's write token (publish)."""
    allow_code: bool = True
    """Whether plan, why, findings and search run the caller's code (stdio: the user's own; HTTP: opt-in)."""
    limits: Limits = dataclasses.field(default_factory=Limits)
    max_devices: int | None = None


@dataclasses.dataclass
class Held:
    request: dict[str, Any]
    snapshot: bytes
    link: str | None = None


class Plans:
    """The plans a server holds, by id: least recently used first out past ``max_bytes`` or ``max_plans``."""

    def __init__(self, max_bytes: int = MAX_HELD_BYTES, max_plans: int = MAX_HELD_PLANS) -> None:
        self.max_bytes, self.max_plans = max_bytes, max_plans
        self.held: OrderedDict[str, Held] = OrderedDict()
        self.bytes = 0

    def put(self, request: dict[str, Any], snapshot: Mapping[str, Any]) -> str:
        payload = orjson.dumps(snapshot, option=orjson.OPT_SERIALIZE_NUMPY)
        if len(payload) > self.max_bytes:
            raise ShardingError("too_large", f"the plan's snapshot is {len(payload)} bytes; at most {self.max_bytes}")
        plan_id = secrets.token_urlsafe(9)
        self.held[plan_id] = Held(request, payload)
        self.bytes += len(payload)
        while self.bytes > self.max_bytes or len(self.held) > self.max_plans:
            _, old = self.held.popitem(last=False)
            self.bytes -= len(old.snapshot)
        return plan_id

    def get(self, plan_id: str) -> Held:
        held = self.held.get(plan_id)
        if held is None:
            raise ShardingError(
                "not_found",
                f"no plan {plan_id!r} on this server (plans are kept while the server runs, the oldest dropped first)",
                hint="call plan again and use the plan_id it answers",
            )
        self.held.move_to_end(plan_id)
        return held


@contextlib.contextmanager
def refusing() -> Iterator[None]:
    """A domain error as a tool error the model can act on: ``[code] message (hint: ...)``."""
    try:
        yield
    except ShardingError as e:
        text = f"[{e.code}] {e.message}" + (f" (hint: {e.hint})" if e.hint else "")
        trace = e.details.get("traceback")
        raise ToolError(text + (f"\n{trace}" if isinstance(trace, str) else "")) from None


def result(data: Mapping[str, Any], summary: str) -> CallToolResult:
    """A tool's answer: the lines to read first and the JSON as content, the JSON as structured content."""
    text = orjson.dumps(data, option=orjson.OPT_SERIALIZE_NUMPY).decode()
    return CallToolResult(
        content=[TextContent(type="text", text=summary), TextContent(type="text", text=text)],
        structured_content=dict(data),
    )


def available(name: str) -> bool:
    """Whether this version's ``sharding_core`` has ``name`` (findings and search arrive with issues 32 and 34)."""
    import sharding_core

    try:
        return getattr(sharding_core, name, None) is not None
    except ImportError:
        return False


def plan_takes(option: str) -> bool:
    """Whether ``sharding_core.plan`` takes ``option`` (``fit``: issue 33)."""
    import sharding_core

    return option in inspect.signature(sharding_core.plan).parameters


def not_available(what: str, issue: int) -> ShardingError:
    return ShardingError(
        NOT_AVAILABLE,
        f"{what} is not available in this version of Shardscope",
        hint=f"it arrives with issue {issue}; the other tools work",
    )


class Shardscope:
    """One MCP server's state: its options, its jobs and the plans it holds."""

    def __init__(self, options: Options) -> None:
        self.options = options
        self.jobs = Jobs(options.limits)
        self.plans = Plans()

    def publish(self, snapshot: Mapping[str, Any], name: str) -> tuple[str | None, str | None]:
        """A snapshot published to the configured dashboard: ``(link, None)``, or ``(None, why not)``."""
        if not self.options.publish:
            return None, (
                "no dashboard is configured: start one (`shardscope serve`) and run `shardscope mcp --url "
                "http://127.0.0.1:8000` (or set $SHARDSCOPE_URL), then call publish with this plan_id"
            )
        from sharding_core.publishing import PublishError
        from sharding_core.publishing import publish as send

        try:
            return send(dict(snapshot), name, self.options.url, token=self.options.token, timeout=30.0), None
        except PublishError as e:
            return None, f"publishing to {self.options.url} failed: [{e.code}] {e.message}"

    def source(self, target: str | None, code: str | None, function: str) -> dict[str, Any]:
        if not self.options.allow_code:
            raise ShardingError(
                "code_not_allowed",
                "this shared server runs no code sent to it: plan, why, findings and search run your program",
                hint="run `shardscope mcp` on your own machine (stdio) for these; the operator may allow code with "
                "`shardscope serve --mcp --mcp-allow-code` on a trusted team's server",
            )
        if (target is None) == (code is None):
            raise ShardingError(
                "bad_target",
                "give either target (FILE.py:FN) or code (Python source defining function(mesh))",
                hint="e.g. target='examples/llama.py:llama_8b_fsdp_tp'",
            )
        return {"target": target} if target is not None else {"code": code, "function": function}

    async def compile(self, request: dict[str, Any], ctx: Context) -> dict[str, Any]:
        from shardscope.mcp.worker import main

        answers.checked_devices(request["devices"], int(request.get("slices", 1)), self.options.max_devices)

        async def progress(done: float, total: float | None, message: str) -> None:
            await ctx.report_progress(done, total, message)

        return await self.jobs.run(main, request, progress)

    def hold(self, request: dict[str, Any], snap: dict[str, Any]) -> tuple[str, str | None, str | None]:
        plan_id = self.plans.put(request, snap)
        link, note = self.publish(snap, str(snap.get("name") or "plan")) if self.options.publish else (None, None)
        if link is not None:
            self.plans.get(plan_id).link = link
        if note is None and link is None:
            note = f"not published: call publish with plan_id={plan_id!r} for a dashboard link"
        return plan_id, link, note


def build(options: Options | None = None, *, tools: Callable[[MCPServer, Shardscope], None] | None = None) -> MCPServer:
    """The MCP server with every tool and resource (``tools``: more tools, e.g. a test's)."""
    from shardscope import version

    state = Shardscope(options if options is not None else Options())
    mcp: MCPServer = MCPServer(
        NAME, title="Shardscope", version=version(), instructions=INSTRUCTIONS, log_level="WARNING"
    )
    _quick_tools(mcp, state)
    _plan_tools(mcp, state)
    _reshard_tool(mcp, state)
    _more_tools(mcp, state)
    _resources(mcp)
    if tools is not None:
        tools(mcp, state)
    return mcp


QUICK = ToolAnnotations(read_only_hint=True, open_world_hint=False)
COMPILES = ToolAnnotations(read_only_hint=True, open_world_hint=False, idempotent_hint=True)


def _quick_tools(mcp: MCPServer, state: Shardscope) -> None:
    o = state.options

    @mcp.tool(annotations=QUICK)
    def device_sets(devices: Devices | None = None, slices: Slices = 1) -> CallToolResult:
        """The device sets the tools take (cpu:N, gpu:KIND:HxG, tpu:GEN:TOPO with every TPU generation's
        topologies and GPU kind); with `devices`, that set: device count, hosts, kind, the hardware's
        published figures (HBM, FLOP/s, link bandwidths, each with its source)."""
        with refusing():
            data = answers.device_sets(devices, slices, max_devices=o.max_devices)
        s = data.get("set")
        text = (
            f"{s['devices']}: {s['num_devices']} {s['device_kind']} devices on {s['hosts']} host(s)"
            if s
            else "device sets: cpu:N, gpu:KIND:HxG, tpu:GEN:TOPO (catalog in the JSON)"
        )
        return result(data, text)

    @mcp.tool(annotations=QUICK)
    def topology(devices: Devices, mesh: MeshRequest | None = None, slices: Slices = 1) -> CallToolResult:
        """The physical interconnect of a device set (devices with coordinates and hosts, ICI/NVLink links,
        wraparound) and, with `mesh`, each mesh axis laid on it: its device groups in ring order, hops, whether
        each group is a ring of nearest neighbours, whether it crosses hosts or slices, and the make_mesh / iota
        / split orderings compared. Same JSON as GET /api/topology and POST /api/topology/mesh."""
        with refusing():
            data = answers.topology(devices, slices, mesh, url=o.url, max_devices=o.max_devices)
        return result(data, f"{data['text']}\n{data['link']}")

    @mcp.tool(annotations=QUICK)
    def layout(
        devices: Devices,
        mesh: MeshRequest,
        spec: SpecText,
        shape: Annotated[list[ArrayDim], Field(min_length=0, max_length=MAX_RANK, description="The array's shape")],
        dtype: DType = "float32",
        slices: Slices = 1,
    ) -> CallToolResult:
        """Which device holds which block of an array: NamedSharding(mesh, spec).devices_indices_map(shape) on
        the device set (no hardware needed). `layout` is exactly POST /api/layout's JSON (shards with index
        bounds, shard_shape, bytes per device, replication); `text` is what `shardscope preview` prints; `link`
        opens it in the layout explorer. A spec that does not fit says what to change."""
        with refusing():
            data = answers.layout(devices, mesh, spec, shape, dtype, slices, url=o.url, max_devices=o.max_devices)
        return result(data, f"{data['text']}{data['link']}")

    @mcp.tool(annotations=QUICK)
    def collective_cost(
        devices: Devices,
        op: CollectiveOp,
        bytes: Annotated[int, Field(ge=1, le=2**50, description="Bytes per device as the HLO writes them")],
        groups: Annotated[list[list[DeviceId]] | None, Field(max_length=4096)] = None,
        pairs: Annotated[list[Pair] | None, Field(max_length=65536)] = None,
        slices: Slices = 1,
    ) -> CallToolResult:
        """The cost model's estimate of one collective on a device set: a lower bound (the scaling book's
        formula at the links' bandwidth) and an expected time (fitted to published measurements, with the
        fit's held-out median error). `bytes`: an all-gather's result bytes per device, an all-reduce's, a
        reduce-scatter's result, an all-to-all's, what each device sends in a collective-permute. Default
        groups: every device in one group."""
        with refusing():
            data = answers.collective_estimate(devices, op, bytes, groups, pairs, slices, max_devices=o.max_devices)
        from sharding_core.units import fmt_seconds

        est = data["estimate"]
        text = (
            f"{op} of {bytes} bytes on {devices}: bound {fmt_seconds(est['bound_seconds'])}, expected "
            f"{fmt_seconds(est['expected_seconds'])} over {est.get('fabric')}"
        )
        return result(data, text)


def _plan_tools(mcp: MCPServer, state: Shardscope) -> None:
    @mcp.tool(annotations=COMPILES)
    async def plan(
        ctx: Context,
        devices: Devices,
        target: Target = None,
        code: Code = None,
        function: Function = "build",
        mesh: MeshRequest | None = None,
        slices: Slices = 1,
        fit: bool = False,
    ) -> CallToolResult:
        """Compile a program for a device set you don't have and read its plan: fits or not (XLA's
        memory_analysis against the chip's HBM), the step time (roofline lower bound, expected), the
        collectives (op, mesh axes, bytes, repeat per step, source line, estimated seconds), the largest
        temporaries, or XLA's refusal with what to change. The program: `target` FILE.py:FN or `code` defining
        `function`; FN(mesh) returns (jitted_fn, args) with abstract args sharded on `mesh` (default: every
        device on one axis 'data'). TPU sets compile with libtpu's compile-only topology. Takes seconds to
        minutes; reports progress; cancellable. Answers a plan_id for why, compare, findings and publish."""
        with refusing():
            request = {"op": "plan", **state.source(target, code, function), "devices": devices, "slices": slices}
            request["mesh"] = mesh.model_dump() if mesh is not None else None
            if fit and not plan_takes("fit"):
                raise not_available("plan's fit (fixes that make a refused plan fit)", 33)
            if fit:
                request["fit"] = True
            answer = await state.compile(request, ctx)
            snap = answer["snapshot"]
            plan_id, link, note = state.hold(request, snap)
            data = answers.plan_summary(snap, plan_id, link, note)
        return result(data, answers.plan_text(data))

    @mcp.tool(annotations=COMPILES)
    async def why(
        ctx: Context,
        plan_id: PlanId,
        collective: Annotated[int | None, Field(ge=0, description="Index into the plan's collectives")] = None,
        op: CollectiveOp | None = None,
        line: Annotated[str | None, Field(max_length=4096, description="Source line, e.g. model.py:42")] = None,
        fixes: Annotated[int, Field(ge=0, le=16, description="Candidate fixes to compile")] = 4,
    ) -> CallToolResult:
        """Why one collective of a plan is there, and which changes remove it: the operand it moves with its
        shardings before and after, the input leaves and Shardy origins that decided them, one sentence, and
        fixes (a leaf's PartitionSpec, an out_sharding, a JAX option), each compiled again and kept only when
        the whole program's collectives get cheaper. Pick the collective by index (from plan) or by op and/or
        line (the costliest per step that matches). Compiles the program again (twice or more)."""
        with refusing():
            held = state.plans.get(plan_id)
            index, _ = answers.pick_collective(orjson.loads(held.snapshot), collective, op, line)
            request = {**held.request, "op": "why", "fixes": fixes}
            answer = await state.compile(request, ctx)
            snap = answer["snapshot"]
            first = orjson.loads(held.snapshot)["collectives"][index]
            index = _same_collective(snap, first, index)
            why_id, link, note = state.hold(request, snap)
            data = answers.why_answer(snap, index, why_id, link, note)
        text = f"{data['explanation']}\n" + "\n".join(
            f"fix {k}: {f.get('text')} (bytes after {f.get('bytes_after')}, peak after {f.get('peak_after')})"
            for k, f in enumerate(data["fixes"][:3])
        )
        return result(data, text or "no explanation")


def _reshard_tool(mcp: MCPServer, state: Shardscope) -> None:
    @mcp.tool(annotations=COMPILES)
    async def reshard(
        ctx: Context,
        devices: Devices,
        mesh: MeshRequest,
        shape: Annotated[list[ArrayDim], Field(min_length=0, max_length=MAX_RANK)],
        from_spec: SpecText,
        to_spec: SpecText,
        dtype: DType = "float32",
        slices: Slices = 1,
    ) -> CallToolResult:
        """The collectives that moving an array from one PartitionSpec to another compiles to (the identity
        jitted with out_shardings=to on an input sharded from), compiled for the device set (compile-only on
        TPU sets), each with its bytes, groups, mesh axes and estimated time."""
        with refusing():
            for spec in (from_spec, to_spec):  # quick checks first: a spec that does not fit needs no compile
                o = state.options
                answers.layout(devices, mesh, spec, shape, dtype, slices, url=o.url, max_devices=o.max_devices)
            request = {"op": "reshard", "devices": devices, "slices": slices, "mesh": mesh.model_dump(),
                       "shape": shape, "dtype": dtype, "from_spec": from_spec, "to_spec": to_spec}  # fmt: skip
            snap = (await state.compile(request, ctx))["snapshot"]
            plan_id, link, note = state.hold(request, snap)
            data = answers.plan_summary(snap, plan_id, link, note)
        return result(data, answers.plan_text(data))


def _same_collective(snap: Mapping[str, Any], first: Mapping[str, Any], index: int) -> int:
    """The explained program's collective that is the plan's ``index``-th (the same compile gives the same
    order; matched by op, bytes and line when it does not)."""
    cs = list(snap.get("collectives") or ())

    def key(c: Mapping[str, Any]) -> tuple[Any, ...]:
        return c.get("op"), c.get("bytes"), Path(str(c.get("line") or "")).name

    if index < len(cs) and key(cs[index]) == key(first):
        return index
    for i, c in enumerate(cs):
        if key(c) == key(first):
            return i
    raise ShardingError("bad_collective", "the program compiled again has no such collective", hint="plan it again")


def _more_tools(mcp: MCPServer, state: Shardscope) -> None:
    @mcp.tool(annotations=QUICK)
    def compare(a: PlanId, b: PlanId) -> CallToolResult:
        """Two plans side by side (e.g. FSDP against FSDP × TP of one model): each side's verdict, peak HBM,
        step time and collective bytes per step; the compare page's verdict (which is cheaper, by the best
        measure both have); and what `shardscope plan --baseline` says of b against a (peak growth, new
        collectives)."""
        with refusing():
            sa, sb = (orjson.loads(state.plans.get(x).snapshot) for x in (a, b))
            data = answers.compare_answer(sa, sb, (a, b))
            links = [state.plans.get(x).link for x in (a, b)]
            data["evidence"] = answers.plan_evidence(sa)
            if all(links):
                import urllib.parse

                query = urllib.parse.urlencode({"a": links[0], "b": links[1]})
                data["link"], data["link_note"] = f"{state.options.url}/compare.html?{query}", None
            else:
                data["link"], data["link_note"] = None, "publish both plans for the compare page's link"
        verdict = (data["compare"].get("verdict") or {}).get("text") or ""
        return result(data, f"{verdict}\n{data['link'] or data['link_note']}")

    @mcp.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False))
    def publish(plan_id: PlanId, name: Annotated[str | None, Field(max_length=200)] = None) -> CallToolResult:
        """Publish a plan (or an explained plan, or a reshard) to the dashboard and answer its share link: a
        page a person can open with the verdict, memory, step time, collectives and their whys."""
        with refusing():
            held = state.plans.get(plan_id)
            if held.link is None:
                snap = orjson.loads(held.snapshot)
                link, note = state.publish(snap, name or str(snap.get("name") or "plan"))
                if link is None:
                    raise ShardingError("not_published", str(note))
                held.link = link
            data = {"plan_id": plan_id, "link": held.link}
        return result(data, str(held.link))

    @mcp.tool(annotations=COMPILES)
    async def findings(ctx: Context, plan_id: PlanId) -> CallToolResult:
        """What a plan wastes (issue 32): each finding's kind, source line, bytes per step and a fix verified
        by recompiling — e.g. a collective inside an accumulation loop that could run once after it."""
        with refusing():
            held = state.plans.get(plan_id)
            snap = orjson.loads(held.snapshot)
            if "findings" not in snap:
                if not available("findings"):
                    raise not_available("findings", 32)
                snap = (await state.compile({**held.request, "op": "findings"}, ctx))["snapshot"]
            data = {"plan_id": plan_id, "findings": snap.get("findings") or [], "evidence": answers.plan_evidence(snap)}
        return result(data, f"{len(data['findings'])} finding(s)")

    @mcp.tool(annotations=COMPILES)
    async def search(
        ctx: Context,
        devices: Devices,
        target: Target = None,
        code: Code = None,
        function: Function = "build",
        slices: Slices = 1,
        budget_seconds: Annotated[float | None, Field(gt=0, le=3600)] = None,
    ) -> CallToolResult:
        """Which mesh and logical-axis rules to use (issue 34): compiles candidate shardings of FN(mesh, rules,
        **knobs) for the device set and answers the pick, the candidates and the Pareto front. Long-running:
        reports progress; cancellable."""
        with refusing():
            request = {"op": "search", **state.source(target, code, function), "devices": devices, "slices": slices}
            if not available("search"):
                raise not_available("search", 34)
            request["budget_seconds"] = budget_seconds
            data = (await state.compile(request, ctx))["search"]
        return result(data, "search done")


def _resources(mcp: MCPServer) -> None:
    @mcp.resource("shardscope://hardware", mime_type="application/json")
    def hardware() -> str:
        """The hardware table: every TPU generation's and GPU's HBM, peak FLOP/s, link bandwidths and
        latencies, each figure with its public source (sharding_core/hardware.py)."""
        from sharding_core.hardware import table_json

        return orjson.dumps(table_json()).decode()

    @mcp.resource("shardscope://measurements", mime_type="application/json")
    def measurements() -> str:
        """Published measurements of collectives the cost model is fitted to (train) and checked against
        (held out), each with its source (sharding_core/cost/measurements.py)."""
        return orjson.dumps(measurement_rows()).decode()

    @mcp.resource("shardscope://scoreboard", mime_type="application/json")
    def scoreboard() -> str:
        """The scoreboard of published training runs: each step time measured, its source, split and configuration
        (sharding_core/cost/runs.py; the predictions and errors: docs/cost-model.md)."""
        return orjson.dumps(scoreboard_rows()).decode()

    for page in sorted(DOCS_DIR.glob("*.md")) if DOCS_DIR.is_dir() else ():
        _doc_resource(mcp, page)


def _doc_resource(mcp: MCPServer, page: Path) -> None:
    def read() -> str:
        return page.read_text(encoding="utf-8")

    read.__name__ = f"docs_{page.stem.replace('-', '_')}"
    title = page.read_text(encoding="utf-8").partition("\n")[0].lstrip("# ").strip()
    uri = f"shardscope://docs/{page.name}"
    mcp.resource(uri, name=f"docs/{page.name}", description=title, mime_type="text/markdown")(read)


def measurement_rows() -> dict[str, Any]:
    from sharding_core.cost.measurements import MEASUREMENTS, SOURCES

    rows = [
        {
            "name": m.name,
            "devices": m.devices,
            "op": m.op,
            "bytes": m.bytes,
            "seconds": m.seconds,
            "source": m.source,
            "split": m.split,
            "url": m.url,
            "read": m.read,
        }
        for m in MEASUREMENTS
    ]
    return {"rows": rows, "sources": {k: {"url": s.url, "split": s.split} for k, s in SOURCES.items()}}


def scoreboard_rows() -> dict[str, Any]:
    """The published runs the expected step time is fitted to (train) and scored on (held out)."""
    from sharding_core.cost.runs import scoreboard_rows as rows

    return {"available": True, "rows": rows(), "scored": "docs/cost-model.md#whole-steps-the-expected-step-time"}


def run_stdio(options: Options) -> None:
    """``shardscope mcp``: serve over standard input and output until the client closes them."""
    os.environ.setdefault("JAX_PLATFORMS", "cpu")  # layouts use simulated devices; compiles run in workers
    build(options).run("stdio")
