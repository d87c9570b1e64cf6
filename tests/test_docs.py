"""The README stays true: every limit is documented, the set-up commands are the ones CI runs."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from server.settings import SETTINGS

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def test_every_setting_is_documented_with_its_value() -> None:
    for s in SETTINGS:
        assert f"| `{s.name}` | {s.default} |" in README, f"README misses the setting {s.name}"


def test_setup_commands_are_the_makefile_targets_ci_runs() -> None:
    assert "make serve" in README and "make test" in README
    assert "make test" in (ROOT / ".ci" / "run").read_text()
    makefile = (ROOT / "Makefile").read_text()
    assert "\nserve:" in makefile and "\ntest:" in makefile


def test_the_declared_and_tested_jax_versions_are_the_ones_the_project_uses() -> None:
    # The declared floor (pyproject) and the locked version (uv.lock) as the README and docs/compat.md
    # say them: a bump of either that leaves the docs behind fails here.
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    (oldest,) = [m.group(1) for d in deps if (m := re.fullmatch(r"jax>=([0-9.]+)", d))]
    lock = tomllib.loads((ROOT / "uv.lock").read_text())
    (locked,) = [p["version"] for p in lock["package"] if p["name"] == "jax"]
    compat = (ROOT / "docs" / "compat.md").read_text()
    for text in (README, compat):
        assert f"`>={oldest}`" in text, f"the declared range jax>={oldest} is not documented"
        assert f"JAX {locked}" in text or f"**{locked}**" in text, f"the locked JAX {locked} is not documented"
        assert f"JAX {oldest}" in text or f"**{oldest}**" in text, f"the tested JAX {oldest} is not documented"
