"""Writes the docs' reference pages (``docs/reference/*.md``) from their single owners.

Each page is made from the code that owns what it describes, never typed by hand: the command line from
its argparse parser (``shardscope/cli.py``), the settings table from ``server.settings.SETTINGS``, the HTTP
routes from the app's own OpenAPI, the snapshot format from ``sharding_core/snapshot/format.py`` and the
server's request model, device sets from ``sharding_core/devices.py``, the hardware table from
``sharding_core/hardware.py``, the Python API from the packages' ``__all__`` and docstrings.

``make docs-gen`` runs this script; ``tests/test_docs.py`` regenerates every page in memory and fails when a
committed page differs (the way datasette checks its docs with cog), so a change to an owner that leaves
its page behind fails the suite with the command that fixes it.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import inspect
import os
import re
import sys
import tempfile
import textwrap
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
sys.path.insert(0, str(ROOT))

HELP_COLUMNS = 100
"""The terminal width the CLI's help is formatted for (argparse reads ``$COLUMNS``): fixed, so the page
does not depend on the terminal that ran the generator."""


def banner(owner: str) -> str:
    return (
        f"<!-- Generated from {owner} by docs/gen_reference.py (`make docs-gen`); do not edit: "
        "tests/test_docs.py fails when this page and its owner disagree. -->\n"
    )


def cell(text: object) -> str:
    """Text for one markdown table cell: one line, pipes escaped."""
    return " ".join(str(text).split()).replace("|", "\\|")


def from_rst(text: str) -> str:
    """A docstring's reST as Markdown: roles and double backquotes as code, ``::`` blocks fenced."""
    text = re.sub(r":(?:func|class|meth|mod|data|attr|obj|exc):`~?([^`]+)`", r"``\1``", text)
    text = re.sub(r"``([^`]+)``", r"`\1`", text)
    out: list[str] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.rstrip().endswith("::"):
            # A literal block: the indented lines after it.
            out.append(line.rstrip()[:-1].rstrip() + (":" if line.strip() != "::" else ""))
            i += 1
            block: list[str] = []
            while i < len(lines) and (not lines[i].strip() or lines[i].startswith((" ", "\t"))):
                block.append(lines[i])
                i += 1
            out += ["", "```text", textwrap.dedent("\n".join(block)).strip("\n"), "```", ""]
            continue
        out.append(line)
        i += 1
    return re.sub(r"\n{3,}", "\n\n", "\n".join(out)).strip()


def docstring(obj: Any, *, summary: bool = True) -> str:
    """``obj``'s docstring as Markdown; without its first paragraph when a page says it already."""
    text = inspect.cleandoc(obj.__doc__ or "")
    if not summary:
        text = text.split("\n\n", 1)[-1]
    return from_rst(text)


# ---------------------------------------------------------------------------------------------- CLI


@contextlib.contextmanager
def columns(n: int) -> Iterator[None]:
    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = str(n)
    try:
        yield
    finally:
        if old is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = old


def _subcommands(parser: argparse.ArgumentParser) -> list[tuple[str, argparse.ArgumentParser]]:
    for action in parser._actions:  # argparse keeps its subcommands here, in the order they were added
        if isinstance(action, argparse._SubParsersAction):
            return list(action.choices.items())
    return []


def cli_page() -> str:
    from shardscope.cli import _parser

    lines = [
        "# Command line",
        "",
        banner("shardscope/cli.py"),
        "`shardscope` (or `python -m shardscope`) is installed with the package. Every subcommand's `--help`,",
        "as it prints it:",
        "",
    ]

    def walk(parser: argparse.ArgumentParser) -> None:
        with columns(HELP_COLUMNS):
            text = parser.format_help()
        lines.extend([f"## `{parser.prog}`", "", "```text", text.rstrip(), "```", ""])
        for _, sub in _subcommands(parser):
            walk(sub)

    walk(_parser())
    return "\n".join(lines).rstrip() + "\n"


# ----------------------------------------------------------------------------------------- settings


def settings_page() -> str:
    from server.settings import SETTINGS

    lines = [
        "# Settings",
        "",
        banner("server/settings.py (SETTINGS)"),
        "Every limit the server enforces is one row of `server.settings.Settings`, whose one constant is the",
        "default. `shardscope settings` lists them; `shardscope serve --setting NAME VALUE` (repeatable) changes",
        "one, checked against the table: an unknown name gets the closest names; a value that is not ASCII",
        "digits (at most 20, `_` between them allowed) or is out of its row's range (every row has a maximum)",
        "gets its bounds, in one line and exit 2, as every start-up refusal. The rows marked *fixed* are the",
        "limits `sharding_core` enforces for the CLI and `capture()` alike, which the request schema also",
        "carries: they cannot be set, and `--setting` says why. Every setting is tested at its limit and one",
        "past it. How they work together on a team server: [Operating a team server](../operating.md).",
        "",
        "| setting | default | range | what |",
        "|---|---|---|---|",
    ]
    reasons = list(dict.fromkeys(s.fixed for s in SETTINGS if s.fixed))  # each reason once, in table order
    for s in SETTINGS:
        bounds = f"fixed ({reasons.index(s.fixed) + 1})" if s.fixed else f"{s.minimum} – {s.maximum}"
        lines.append(f"| `{s.name}` | {s.default} | {cell(bounds)} | {cell(s.help)} |")
    lines += ["", "Why a fixed setting cannot be set:", ""]
    lines += [f"{k}. {cell(reason)}" for k, reason in enumerate(reasons, start=1)]
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------------------ OpenAPI


def openapi() -> dict[str, Any]:
    from server.app import create_app

    with tempfile.TemporaryDirectory() as tmp:
        app = create_app(str(Path(tmp) / "links.db"))
        try:
            spec: dict[str, Any] = app.openapi()
        finally:  # its store's watch would go on looking at the deleted file for as long as this process lives
            app.state.store.close()
    return spec


def schema_type(schema: Mapping[str, Any]) -> str:
    """A JSON schema as a short type: ``string (≤ 64)``, ``integer 0 – 4096``, ``[SnapshotLeaf]``, ``X | null``."""
    if "$ref" in schema:
        return str(schema["$ref"]).rsplit("/", 1)[-1]
    if "anyOf" in schema:
        return " | ".join(schema_type(s) for s in schema["anyOf"])
    if "const" in schema:
        return repr(schema["const"]).replace("'", '"')
    if "enum" in schema:
        return " \\| ".join(f'"{v}"' if isinstance(v, str) else str(v) for v in schema["enum"]).replace("\\|", "|")
    kind = schema.get("type", "any")
    if kind == "array":
        inner = f"[{schema_type(schema.get('items', {}))}]"
        lo, hi = schema.get("minItems"), schema.get("maxItems")
        if lo is not None or hi is not None:
            inner += f" ({lo or 0} – {hi})" if hi is not None else f" (≥ {lo})"
        return inner
    if kind == "object":
        extra = schema.get("additionalProperties")
        return f"{{str: {schema_type(extra)}}}" if isinstance(extra, dict) else "object"
    if kind == "string":
        bits = [f"≤ {schema['maxLength']} chars"] if "maxLength" in schema else []
        if "pattern" in schema:
            bits.append(f"`{schema['pattern']}`")
        return "string" + (f" ({', '.join(bits)})" if bits else "")
    if kind in ("integer", "number"):
        lo = schema.get("minimum", schema.get("exclusiveMinimum"))
        hi = schema.get("maximum")
        below = schema.get("exclusiveMaximum")
        span = ""
        if lo is not None and hi is not None:
            span = f" {lo:g} – {hi:g}"
        elif lo is not None and below is not None:
            span = f" {lo:g} – {below:g} (exclusive)"
        elif lo is not None:
            span = f" ≥ {lo:g}"
        return f"{kind}{span}"
    return str(kind)


def fields_table(schemas: Mapping[str, Any], name: str) -> list[str]:
    schema = schemas[name]
    required = set(schema.get("required", ()))
    lines = [f"### `{name}`", ""]
    if schema.get("description"):
        lines += [cell(schema["description"]), ""]
    lines += ["| field | type | required | what |", "|---|---|---|---|"]
    for field, prop in schema.get("properties", {}).items():
        what = prop.get("description") or next(
            (s.get("description") for s in prop.get("anyOf", ()) if s.get("description")), ""
        )
        default = f" (default `{prop['default']}`)" if "default" in prop and prop["default"] is not None else ""
        need = "yes" if field in required else "no"
        lines.append(f"| `{field}` | {cell(schema_type(prop))} | {need} | {cell(what)}{cell(default)} |")
    return [*lines, ""]


def http_page() -> str:
    spec = openapi()
    ops = [(path, method.upper(), op) for path, item in spec["paths"].items() for method, op in item.items()]
    lines = [
        "# HTTP API routes",
        "",
        banner("the app's OpenAPI (server/api/*.py)"),
        "Every route the app's OpenAPI lists (`/openapi.json`; `/docs` is Swagger UI), with the statuses each",
        'can answer. Every error has the body `{"error": {"code", "message", "hint"?, ...}}`; what the',
        "codes mean, and the pages and share links outside the API (`/`, `/s/{id}`): [HTTP API](../http-api.md).",
        "",
        "| method | path | what |",
        "|---|---|---|",
    ]
    for path, method, op in ops:
        summary = (op.get("description") or op.get("summary") or "").split("\n\n")[0]
        lines.append(f"| {method} | `{path}` | {cell(from_rst(summary))} |")
    lines.append("")
    for path, method, op in ops:
        lines += [f"## {method} `{path}`", ""]
        if op.get("description"):
            lines += [from_rst(op["description"]), ""]
        body = op.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema")
        if body is not None:
            lines += [f"Request body: `{schema_type(body)}`.", ""]
        lines += ["| status | when |", "|---|---|"]
        for status, response in sorted(op.get("responses", {}).items()):
            answer = response.get("content", {}).get("application/json", {}).get("schema")
            when = response.get("description", "")
            if answer is not None and status.startswith("2"):
                when = f"{when}: `{schema_type(answer)}`"
            lines.append(f"| {status} | {cell(when)} |")
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


# --------------------------------------------------------------------------------- module constants


def constants(module: Any, names: Sequence[str] | None = None) -> list[tuple[str, Any, str]]:
    """A module's public UPPER_CASE constants in source order: name, value and the docstring after it."""
    tree = ast.parse(Path(module.__file__).read_text())
    out: list[tuple[str, Any, str]] = []
    body = tree.body
    for i, node in enumerate(body):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AnnAssign):
            targets = [node.target]
        for t in targets:
            if not (isinstance(t, ast.Name) and re.fullmatch(r"[A-Z][A-Z0-9_]*", t.id)):
                continue
            if names is not None and t.id not in names:
                continue
            doc = ""
            after = body[i + 1] if i + 1 < len(body) else None
            if isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant):
                doc = inspect.cleandoc(str(after.value.value))
            out.append((t.id, getattr(module, t.id), doc))
    return out


def shown(value: Any) -> str:
    if isinstance(value, re.Pattern):
        return f"`{value.pattern}`"
    if isinstance(value, tuple):
        return ", ".join(f"`{v}`" for v in value)
    if isinstance(value, int) and not isinstance(value, bool) and value >= 10_000:
        return f"{value:,}".replace(",", " ")
    return f"`{value}`"


def constants_table(rows: Sequence[tuple[str, Any, str]]) -> list[str]:
    lines = ["| name | value | what |", "|---|---|---|"]
    lines += [f"| `{name}` | {cell(shown(value))} | {cell(from_rst(doc))} |" for name, value, doc in rows]
    return [*lines, ""]


# ---------------------------------------------------------------------------------- snapshot format


def snapshot_page() -> str:
    from sharding_core.snapshot import format as fmt

    schemas = openapi()["components"]["schemas"]
    lines = [
        "# Snapshot format",
        "",
        banner("sharding_core/snapshot/format.py and the server's request model"),
        docstring(fmt),
        "",
        "## Constants",
        "",
        *constants_table(constants(fmt)),
        "## Fields",
        "",
        "What `POST /api/snapshots` accepts, field by field (the server's request model; bounds checked before",
        "`check_snapshot` cross-checks the indexes).",
        "",
    ]
    names = ("Snapshot", "SnapshotRun", "SnapshotDevices", "MeshInfo", "SnapshotLeaf", "ArrayLayout", "Shard")
    for name in (*names, "Finding", "FindingFix"):
        if name in schemas:
            lines += fields_table(schemas, name)
    return "\n".join(lines).rstrip() + "\n"


# -------------------------------------------------------------------------------------- device sets


def devices_page() -> str:
    from sharding_core import devices
    from sharding_core.hardware import wraparound_rule

    lines = [
        "# Device sets",
        "",
        banner("sharding_core/devices.py"),
        "A device set is named by one string, everywhere: the dashboard's pickers, `--devices` on the command",
        "line, `devices=` in `shardscope.show` and `shardscope.mesh`, and every request's `devices` field.",
        "",
        "| form | meaning |",
        "|---|---|",
        "| `cpu:N` | N CPU devices, ids 0..N-1 |",
        "| `gpu:KIND:HxG` | H hosts with G GPUs each (e.g. `gpu:h100:2x8`), ids host-major, `process_index` = host |",
        "| `tpu:GEN:TOPO` | a TPU slice, e.g. `tpu:v5e:4x4`, `tpu:v4:2x2x2`; optional `slices` for multi-slice sets |",
        "| `local` | the serving process's own `jax.devices()` |",
        "",
        docstring(devices, summary=False),
        "",
        "## TPU generations",
        "",
        "| gen | `device_kind` | devices per chip | torus | slices | hosts | wraparound |",
        "|---|---|---|---|---|---|---|",
    ]
    for g in devices.TPU_GENERATIONS.values():
        slices = ", ".join(g.topologies)
        if g.custom_multiple is not None:
            slices += f", and AxBxC with sides multiples of {g.custom_multiple} up to {g.max_chips} chips"
        kind = f"`{g.device_kind}`" + "".join(f", `{a}`" for a in g.device_kind_aliases)
        lines.append(
            f"| `{g.name}` | {kind} | {g.cores_per_chip} | {g.torus} | {cell(slices)} | "
            f"{cell(g.chips_per_host_note)} | {cell(wraparound_rule(g))} |"
        )
    lines += [
        "",
        "`tests/test_tpu_reference.py` compares the simulated slices with libtpu's compile-only topologies",
        "(`jax.experimental.topologies.get_topology_desc`) attribute by attribute — ids, coords, `core_on_chip`,",
        "`device_kind`, list order — and the `jax.make_mesh` / `create_device_mesh` orderings on both.",
        "An unknown generation or a slice that does not exist gets a `bad_devices` error listing what exists;",
        "`chips_per_host` (a request field) overrides the host block.",
        "",
        "## GPU kinds",
        "",
        "| kind | `device_kind` | memory per GPU |",
        "|---|---|---|",
    ]
    lines += [f"| `{k}` | `{kind}` | {gib} GB |" for k, (kind, gib) in devices.GPU_KINDS.items()]
    # the limits only: the generations and GPU kinds are the tables above, not a repr in a cell
    limits = [row for row in constants(devices) if row[0].startswith("MAX_")]
    lines += ["", "## Limits", "", *constants_table(limits)]
    return "\n".join(lines).rstrip() + "\n"


# ----------------------------------------------------------------------------------------- hardware


def hardware_page() -> str:
    from sharding_core import hardware

    return (
        "\n".join(
            [
                "# Hardware table",
                "",
                banner("sharding_core/hardware.py"),
                "The figures the cost model uses (`GET /api/hardware` answers the same table as JSON), per chip",
                "(TPU) or GPU; ICI per link and DCN, NVLink and network per chip or GPU, one way; GPU FLOP/s dense",
                "(NVIDIA prints tensor-core figures with sparsity: halved). Each cell names its source (links below",
                "the table); `—` is a figure no public source gave, with why, and estimates that need it say so. A",
                "`gpu:KIND:HxG` set's host is its NVLink domain (for a GB200 NVL72 rack write `gpu:gb200:1x72`); the",
                "network per GPU is the NVIDIA reference system's (one 400 Gb/s NIC per GPU on DGX H100/H200/B200).",
                "How the figures become estimates: [the cost model](../cost-model.md).",
                "",
                hardware.markdown_table(),
            ]
        ).rstrip()
        + "\n"
    )


# ----------------------------------------------------------------------------------------- Python API


def signature(obj: Callable[..., Any], name: str) -> str:
    """``name(a, b=1, *, c: T = None) -> R`` with the annotations as written (no quotes)."""
    sig = inspect.signature(obj)
    parts: list[str] = []
    star = False
    for p in sig.parameters.values():
        if p.name == "self" or p.name == "cls":
            continue
        if p.kind is p.KEYWORD_ONLY and not star:
            parts.append("*")
            star = True
        text = p.name
        if p.kind is p.VAR_POSITIONAL:
            text, star = f"*{p.name}", True
        elif p.kind is p.VAR_KEYWORD:
            text = f"**{p.name}"
        if p.annotation is not p.empty:
            text += f": {p.annotation if isinstance(p.annotation, str) else inspect.formatannotation(p.annotation)}"
        if p.default is not p.empty:
            text += f" = {p.default!r}"
        parts.append(text)
    ret = sig.return_annotation
    arrow = "" if ret is sig.empty else f" -> {ret if isinstance(ret, str) else inspect.formatannotation(ret)}"
    return f"{name}({', '.join(parts)}){arrow}"


PYTHON_API: tuple[tuple[str, str], ...] = (
    ("shardscope", "show"),
    ("shardscope", "link"),
    ("shardscope", "mesh"),
    ("sharding_core", "capture"),
    ("sharding_core", "publish"),
    ("sharding_core", "inspect_jit"),
    ("sharding_core", "plan"),
    ("sharding_core", "search"),
    ("sharding_core", "explain"),
    ("sharding_core", "why_budget"),
    ("sharding_core", "new_run_id"),
    ("sharding_core", "PublishError"),
    ("sharding_core.devices", "parse_devices"),
    ("sharding_core.mesh", "MeshSpec"),
    ("sharding_core.layout", "Layout.from_named"),
    ("sharding_core.layout", "Layout.from_sharding"),
    ("sharding_core.layout", "Layout.to_json"),
    ("sharding_core.render", "render_text"),
)
"""The functions a training script or notebook calls, in the order a reader meets them."""


LAYOUT_EXAMPLE = """```python
from sharding_core.devices import parse_devices
from sharding_core.layout import Layout
from sharding_core.mesh import MeshSpec
from sharding_core.render import render_text

layout = Layout.from_named(parse_devices("tpu:v5e:4x4"), MeshSpec((4, 4), ("x", "y")), "P('x', None)", (16, 16))
print(render_text(layout, summary=True))
layout.to_json()  # spec, mesh, shard_shape, shards [{device_id, index, replica_id, tile}], tiles, dims, bytes

# any jax.sharding.Sharding (named, single-device, GSPMD, pmap) on real or simulated devices:
Layout.from_sharding(x.sharding, x.shape, x.dtype).to_json(context=False)  # what a snapshot stores
```"""


def python_page() -> str:
    import importlib

    lines = [
        "# Python API",
        "",
        banner("the packages' docstrings (shardscope, sharding_core)"),
        "`sharding_core` is importable from a training script without the server's dependencies (no FastAPI,",
        "pydantic or orjson; publishing uses the standard library's `urllib`); `shardscope` adds `show` for",
        "notebooks and `link` for the dashboard's address of an array. How to use them: [Capture your own",
        "program](../snapshots.md), [In a notebook](../notebook.md), [shardscope.link](../link.md),",
        "[Planning](../planning.md). The layout of one array, without a dashboard:",
        "",
        LAYOUT_EXAMPLE,
        "",
    ]
    for module_name, name in PYTHON_API:
        obj: Any = importlib.import_module(module_name)
        for part in name.split("."):
            obj = getattr(obj, part)
        title = f"{module_name}.{name}"
        lines += [f"## `{title}`", ""]
        if inspect.isclass(obj) and issubclass(obj, BaseException):
            lines += ["```python", f"class {name}({obj.__bases__[0].__name__})", "```", ""]
        elif callable(obj):
            lines += ["```python", signature(obj, name.rsplit(".", 1)[-1]), "```", ""]
        lines += [docstring(obj), ""]
    return "\n".join(lines).rstrip() + "\n"


# ------------------------------------------------------------------------------------------------ main

PAGES: dict[str, Callable[[], str]] = {
    "reference/cli.md": cli_page,
    "reference/settings.md": settings_page,
    "reference/http-api.md": http_page,
    "reference/snapshot-format.md": snapshot_page,
    "reference/device-sets.md": devices_page,
    "reference/hardware.md": hardware_page,
    "reference/python-api.md": python_page,
}
"""Every generated page (its path under docs/) and the function that makes it."""


def pages() -> dict[str, str]:
    return {path: make() for path, make in PAGES.items()}


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="write nothing; exit 1 if a page differs from its owner")
    args = ap.parse_args(argv)
    stale = []
    for path, text in pages().items():
        target = DOCS / path
        if target.exists() and target.read_text() == text:
            continue
        stale.append(path)
        if not args.check:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
    for path in stale:
        print(f"{'stale' if args.check else 'wrote'} docs/{path}")
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    raise SystemExit(main())
