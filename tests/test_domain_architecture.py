"""The domain's architecture as tests (issue 30), the way ``tests/test_services.py`` holds the server's.

* One direction of imports inside ``sharding_core``: the HLO reader below the compile pipeline and its report
  (``program``), below its clients (``kernels``, ``planning``, ``why``, ``searching``), below ``capturing``.
* No import cycle anywhere in ``sharding_core``; an import inside a function counts (it only hid one: an 8-module
  cycle capturing ↔ planning ↔ kernels ↔ why stayed closed that way, and kernels/compiled.py imported 8 private
  names of kernels/runner.py, which imported it back in 4 functions).
* Imports inside functions only for the optional or heavy third-party packages named here (each with why), never
  for a ``sharding_core`` module — but the one exception named, with its reason.
* No Python function over :data:`MAX_FUNCTION_LINES` lines in ``sharding_core``, ``server`` and ``shardscope``.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOMAIN = ROOT / "sharding_core"

LAYERS: tuple[tuple[str, ...], ...] = (
    ("hlo",),
    ("program",),
    ("kernels", "planning", "why", "searching"),
    ("capturing",),
)
"""Lowest first: a module of a layer imports nothing of a later layer."""

LOCAL_IMPORTS = {
    "jax": "JAX and its submodules load when a function needs them: `import sharding_core` stays light",
    "jaxlib": "JAX's runtime, as jax",
    "flax": "optional (the flax extra): the catalog's Flax kernels",
    "optax": "optional (the flax extra): the catalog's Flax training step",
    "libtpu": "optional (the tpu extra): compile-only TPU topologies",
    "rich": "optional: the terminal's colours",
    "IPython": "optional: notebooks",
}
"""Third-party packages a function may import itself, and why."""

LOCAL_EXCEPTIONS = {
    ("sharding_core/kernels/worker.py", "main", "sharding_core.kernels"): (
        "the worker process's entry point sets JAX's environment (JAX_PLATFORMS, XLA_FLAGS, the metadata server off) "
        "before anything imports JAX: the runner comes after"
    ),
}
"""(file, function, module) -> why that function imports a sharding_core module itself."""

MAX_FUNCTION_LINES = 80


def modules() -> dict[str, Path]:
    out: dict[str, Path] = {}
    for f in DOMAIN.rglob("*.py"):
        parts = list(f.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = f
    return out


def imported(path: Path) -> Iterator[tuple[ast.AST, list[str]]]:
    """Every import statement of a file (inside functions and ``if TYPE_CHECKING:`` too) and the names it imports."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node, [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
        elif isinstance(node, ast.Import):
            yield node, [a.name for a in node.names]


def graph() -> dict[str, set[str]]:
    """Module -> the sharding_core modules it imports (a name resolves to the longest module it names)."""
    mods = modules()
    edges: dict[str, set[str]] = {m: set() for m in mods}
    for m, path in mods.items():
        for _, names in imported(path):
            for name in names:
                while name and name not in mods:
                    name = name.rsplit(".", 1)[0] if "." in name else ""
                if name and name != m:
                    edges[m].add(name)
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in edges:
        if v not in index:
            visit(v)
    return found


def layer_of(module: str) -> int | None:
    parts = module.split(".")
    top = parts[1] if len(parts) > 1 else ""
    return next((k for k, names in enumerate(LAYERS) if top in names), None)


def test_no_import_cycle_in_sharding_core() -> None:
    edges = graph()
    assert {"sharding_core.program.compile", "sharding_core.capturing", "sharding_core.cost.efficiency"} <= set(edges)
    assert cycles(edges) == []


def test_the_domain_imports_in_one_direction() -> None:
    """hlo < program < {kernels, planning, why, searching} < capturing: nothing imports a later layer."""
    upward = []
    for module, targets in graph().items():
        mine = layer_of(module)
        if mine is None:
            continue
        for target in targets:
            theirs = layer_of(target)
            if theirs is not None and theirs > mine:
                upward.append(f"{module} imports {target}")
    assert upward == []
    # the pipeline's clients all reach it (the rule is not vacuous)
    edges = graph()
    for client in ("sharding_core.kernels.runner", "sharding_core.kernels.compiled", "sharding_core.planning.program"):
        assert "sharding_core.program.compile" in edges[client], client


def test_functions_import_only_the_optional_or_heavy_packages_named_here() -> None:
    found: list[str] = []
    for path in DOMAIN.rglob("*.py"):
        rel = str(path.relative_to(ROOT))
        for fn in ast.walk(ast.parse(path.read_text())):
            if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node in ast.walk(fn):
                if isinstance(node, ast.ImportFrom) and node.module:
                    names = [node.module]
                elif isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                else:
                    continue
                for name in names:
                    top = name.split(".")[0]
                    if top in LOCAL_IMPORTS or (rel, fn.name, name) in LOCAL_EXCEPTIONS:
                        continue
                    found.append(f"{rel}:{node.lineno} {fn.name} imports {name}")
    assert found == [], "import these at the top of the module (or name the package in LOCAL_IMPORTS, with why)"


def test_no_python_function_is_longer_than_80_lines() -> None:
    long = []
    for package in ("sharding_core", "server", "shardscope"):
        for path in (ROOT / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    lines = (node.end_lineno or node.lineno) - node.lineno + 1
                    if lines > MAX_FUNCTION_LINES:
                        long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}: {lines} lines")
    assert long == []
