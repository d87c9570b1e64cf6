"""The README stays true: every limit is documented, the set-up commands are the ones CI runs."""

from __future__ import annotations

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
