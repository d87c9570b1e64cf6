"""The wheel people install: what it carries and declares, and the library surface run from it in a fresh
environment beside the oldest JAX it declares.

``make oldest-jax`` (the Makefile owns how) builds the wheel with uv and installs it, with its
notebook extra, into ``build/oldest-jax`` beside ``jax==<oldest declared>`` from the registries;
uv's cache makes a rebuild take seconds. ``tests/wheel_surface.py`` then runs there, isolated from
this checkout, and compares every answer with JAX's own (see its docstring).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import tomllib
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
WHEEL_DIR = ROOT / "build" / "dist"
OLDEST_ENV = ROOT / "build" / "oldest-jax"
SURFACE = Path(__file__).resolve().parent / "wheel_surface.py"
SURFACE_CHECKS = [
    "installed",
    "Layout.from_sharding",
    "capture",
    "inspect_jit",
    "typed",
    "show outside a notebook",
    "shardscope preview",
    "shardscope serve",
    "publish",
    "widget payload",
]

pytestmark = pytest.mark.workers  # worker processes or subprocesses


def project() -> dict[str, object]:
    data: dict[str, object] = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return data


def oldest_declared_jax() -> str:
    deps = project()["dependencies"]
    assert isinstance(deps, list)
    found = [m.group(1) for d in deps if (m := re.fullmatch(r"jax>=([0-9.]+)", d))]
    assert len(found) == 1, f"pyproject declares no single 'jax>=X' lower bound: {deps}"
    return found[0]


@pytest.fixture(scope="module")
def oldest_env() -> Path:
    """The wheel built now, installed beside the oldest declared JAX (``make oldest-jax``)."""
    r = subprocess.run(["make", "-s", "oldest-jax"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, f"make oldest-jax failed:\n{r.stdout}\n{r.stderr}"
    return OLDEST_ENV


def the_wheel() -> Path:
    wheels = sorted(WHEEL_DIR.glob("shardscope-*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


def test_the_wheel_carries_the_front_end_and_declares_ranges(oldest_env: Path) -> None:
    with zipfile.ZipFile(the_wheel()) as wheel:
        names = set(wheel.namelist())
        meta_name = next(n for n in names if n.endswith(".dist-info/METADATA"))
        meta = Parser().parsestr(wheel.read(meta_name).decode())
    tracked = subprocess.run(
        ["git", "ls-files", "frontend"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    assert tracked, "no front-end files tracked"
    missing = [f for f in tracked if f"shardscope/{f}" not in names]
    assert not missing, f"the wheel lacks front-end files: {missing[:5]}"
    for module in ("shardscope/notebook/bundle.py", "shardscope/notebook/widget.py", "shardscope/assets.py"):
        assert module in names
    assert not [n for n in names if n.startswith("sharding_core/notebook/")], "the notebook host is in the domain"
    assert meta["Requires-Python"] == ">=3.11"  # no upper cap
    requires = meta.get_all("Requires-Dist") or []
    jax_reqs = [r for r in requires if re.match(r"jax(lib)?(>|=|<|$)", r)]
    assert sorted(jax_reqs) == sorted([f"jax>={oldest_declared_jax()}", f"jaxlib>={oldest_declared_jax()}"])
    assert f"jax[tpu]>={oldest_declared_jax()}; extra == 'tpu'" in requires
    assert any(r.startswith("anywidget") and "extra == 'notebook'" in r for r in requires)
    assert not [r for r in requires if "==" in r.split(";")[0]], f"a pinned dependency: {requires}"


def test_the_library_surface_from_the_wheel_on_the_oldest_declared_jax(oldest_env: Path, tmp_path: Path) -> None:
    python = oldest_env / "bin" / "python"
    version = subprocess.run(
        [str(python), "-I", "-c", "import jax, jaxlib; print(jax.__version__, jaxlib.__version__)"],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout.split()
    assert version == [oldest_declared_jax()] * 2, version
    # -I: neither this checkout nor the working directory is on the path; cwd is an empty directory
    r = subprocess.run(
        [str(python), "-I", str(SURFACE)], cwd=tmp_path, capture_output=True, text=True, timeout=600, env=clean_env()
    )
    assert r.returncode == 0, f"{r.stdout}\n{r.stderr}"
    summary = json.loads(r.stdout.strip().splitlines()[-1])
    assert summary["jax"] == oldest_declared_jax() and summary["checks"] == SURFACE_CHECKS, summary


def clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV", "JAX_", "XLA_"))}
