"""Packages by audience: ``sharding_core`` is the domain a training script imports, ``server`` the
dashboard, ``shardscope`` what a person calls (the command line, ``show`` and its notebook host beside
the front end). Imports run from the user-facing packages to the domain, never back."""

from __future__ import annotations

import ast
from importlib.metadata import version
from pathlib import Path

from fastapi.testclient import TestClient

import shardscope
from shardscope import assets

ROOT = Path(__file__).resolve().parent.parent


def imported_modules(package: str) -> dict[str, set[str]]:
    """Every module each file of ``package`` imports (at any depth: lazy imports count too)."""
    out: dict[str, set[str]] = {}
    for path in sorted((ROOT / package).rglob("*.py")):
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names.add(node.module)
        out[str(path.relative_to(ROOT))] = names
    return out


def test_the_domain_imports_neither_the_dashboard_nor_the_user_package() -> None:
    # Regression guard (issue 21, "arrows that run the wrong way"): the notebook host and its bundler
    # lived in sharding_core/notebook and read frontend/ by path; publishing and notebook imported
    # each other for a third name of show.
    wrong = {
        f: sorted(m for m in mods if m.split(".")[0] in ("server", "shardscope"))
        for f, mods in imported_modules("sharding_core").items()
    }
    assert not {f: m for f, m in wrong.items() if m}
    assert not (ROOT / "sharding_core" / "notebook").exists()


FRONT_END = {"shardscope.assets", "shardscope.pages", "shardscope.notebook.bundle"}
"""What the server takes from the user package: the front end — where its files are, its pages, and the bundler
that makes each page's modules one script (the widget's, server/bundles.py)."""


def test_the_server_takes_only_the_front_end_from_the_user_package() -> None:
    # server/app.py imported the CLI package for its version; it now reads the package metadata. The front end's
    # modules it uses import nothing of the user package but each other (no CLI, no notebook host, no anywidget).
    used = {m for mods in imported_modules("server").values() for m in mods if m.split(".")[0] == "shardscope"}
    assert used == FRONT_END
    for module in FRONT_END:
        path = ROOT / (module.replace(".", "/") + ".py")
        mods = imported_modules("shardscope")[str(path.relative_to(ROOT))]
        assert {m for m in mods if m.split(".")[0] == "shardscope"} <= FRONT_END, (module, mods)
        light = {"shardscope", "sharding_core", "__future__", "functools", "hashlib", "re", "dataclasses", "pathlib"}
        assert {m.split(".")[0] for m in mods} <= light | {"collections"}, mods


def test_one_version_from_the_package_metadata(client: TestClient) -> None:
    expected = version("shardscope")
    assert shardscope.__version__ == expected
    assert client.app.version == expected  # type: ignore[attr-defined]
    assert client.get("/openapi.json").json()["info"]["version"] == expected


def test_the_front_end_is_found_beside_the_notebook_host() -> None:
    # In a checkout the repository's frontend/; in a wheel shardscope/frontend (tests/test_wheel.py).
    assert assets.frontend_dir() == ROOT / "frontend" == assets.CHECKOUT_FRONTEND
    assert (assets.frontend_dir() / "widget" / "notebook.js").is_file()
