"""The docs stay true: the reference pages are what their owners generate, every limit is documented, the
README is a short front door whose links and example output hold, the set-up commands are the ones CI
runs, and the docs build is strict enough to catch a broken link or a page left out."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import re
import shutil
import tomllib
import warnings
from pathlib import Path
from types import ModuleType

import pytest

from server.settings import SETTINGS

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
README = (ROOT / "README.md").read_text()
README_MAX_LINES = 200


def generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_reference", DOCS / "gen_reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def generated() -> dict[str, str]:
    pages: dict[str, str] = generator().pages()
    return pages


def test_every_reference_page_is_what_its_owner_generates(generated: dict[str, str]) -> None:
    for path, text in generated.items():
        page = DOCS / path
        assert page.exists(), f"docs/{path} is missing: run `make docs-gen`"
        assert page.read_text() == text, f"docs/{path} differs from its owner: run `make docs-gen`"


def test_generating_the_api_page_leaves_no_store_watching_a_deleted_file() -> None:
    """The OpenAPI page is made from an app over a store in a temporary directory; the store was never closed, so
    its watch went on looking at the deleted file in every test worker that imported the generator, and CI's log
    ended in dozens of "the store's watch could not look at it" lines."""
    import threading

    def watches() -> set[threading.Thread]:
        return {t for t in threading.enumerate() if t.name == "shardscope-store-watch"}

    before = watches()
    generator().openapi()
    assert watches() <= before


def test_the_generated_pages_are_the_reference_pages_the_site_lists(generated: dict[str, str]) -> None:
    # A page written by hand under reference/ would be taken for a generated one and silently kept stale.
    on_disk = {str(p.relative_to(DOCS)) for p in (DOCS / "reference").glob("*.md")}
    assert on_disk == set(generated)
    index = (DOCS / "index.md").read_text()
    for path in generated:
        assert f"\n{path.removesuffix('.md')}\n" in index, f"docs/index.md lists no {path}"


def test_the_cli_page_changes_when_a_subcommand_changes(monkeypatch: pytest.MonkeyPatch) -> None:
    # The page is made from the parser itself, so an option added to a subcommand shows up in it.
    gen = generator()
    from shardscope import cli

    made = cli._parser

    def parser_with_an_option() -> object:
        p = made()
        serve = dict(gen._subcommands(p))["serve"]
        serve.add_argument("--an-option-for-the-test", help="not a real option")
        return p

    monkeypatch.setattr(cli, "_parser", parser_with_an_option)
    page = gen.cli_page()
    assert "--an-option-for-the-test" in page and "not a real option" in page
    assert page != (DOCS / "reference" / "cli.md").read_text()


def test_every_setting_is_documented_with_its_value() -> None:
    page = (DOCS / "reference" / "settings.md").read_text()
    for s in SETTINGS:
        assert f"| `{s.name}` | {s.default} |" in page, f"docs/reference/settings.md misses the setting {s.name}"


def test_every_route_is_in_the_http_reference() -> None:
    from server.app import ROUTERS

    page = (DOCS / "reference" / "http-api.md").read_text()
    for router in ROUTERS:
        for route in router.routes:
            for method in sorted(getattr(route, "methods", None) or ()):
                if getattr(route, "include_in_schema", True):
                    assert f"## {method} `{route.path}`" in page, f"{method} {route.path} is not documented"


def test_the_readme_is_a_short_front_door() -> None:
    lines = README.splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines; the front door is at most 200"
    # The three quick starts, install and the way into the docs.
    for needle in ("pip install shardscope", "shardscope.show(", "shardscope preview", "shardscope serve", "publish("):
        assert needle in README, needle
    # Regression (issue 21): tests pinned generated tables into the README; they live in docs/reference/.
    assert "| `max_body_bytes` |" not in README and "ICI hop latency" not in README


def test_setup_commands_are_the_makefile_targets_ci_runs() -> None:
    assert "make serve" in README and "make test" in README
    assert "make test" in (ROOT / ".ci" / "run").read_text()
    makefile = (ROOT / "Makefile").read_text()
    assert "\nserve:" in makefile and "\ntest:" in makefile
    # make test builds the docs, strictly.
    (test_line,) = [line for line in makefile.splitlines() if line.startswith("test:")]
    assert " docs" in test_line
    assert re.search(r"\ndocs:.*\n\t.*sphinx-build .*-W .*-n", makefile)


def _make_test_paragraph(text: str) -> str:
    """The prerequisites line and what ``make test`` installs, as a page says them (from "On a" to the paragraph
    after the commands)."""
    start = text.index("On a Debian")
    after = text.index("`make test` installs", start)
    return text[start : text.index("\n\n", after)]


def test_readme_and_install_say_the_same_about_make_test() -> None:
    """Regression (issue 28): docs/install.md said make test installs "dev tools, the tpu extra, Debian's
    Chromium", the README added PostgreSQL and Caddy; one said the prerequisites were python3, git and make, the
    other python3 and make. Both now say one thing, and what they name is what the Makefile's test recipe does."""
    install = (DOCS / "install.md").read_text()
    assert _make_test_paragraph(README) == _make_test_paragraph(install)
    makefile = (ROOT / "Makefile").read_text()
    (test_line,) = [line for line in makefile.splitlines() if line.startswith("test:")]
    said = _make_test_paragraph(README)
    for target in ("install-dev", "chromium", "services"):  # what `make test` installs first
        assert f" {target}" in test_line and f"`make {target}`" in said, target
    assert "--no-extra gpu" in makefile and "every extra but `gpu`" in said
    assert "postgresql caddy" in makefile and "PostgreSQL and Caddy" in said and "apt-get" in said
    assert "UV_PYTHON_DOWNLOADS := never" in makefile and "--python 3.11" in makefile and "Python 3.11" in said
    for built in ("gpu-env", "oldest-jax"):  # what the suite builds while it runs
        assert f"\n{built}:" in makefile and f"`make {built}`" in said, built


def test_the_readme_names_the_why_and_the_plan_page_every_plan_option() -> None:
    """Regression (issue 28): the README never mentioned the why; docs/planning.md's CLI section left out --why,
    --fixes and --fix-seconds. The options are the parser's own."""
    import argparse

    from shardscope import plan_command

    assert "(docs/why.md)" in README
    parser = argparse.ArgumentParser()
    plan_command.add_parser(parser.add_subparsers(), lambda text, sep: [int(x) for x in text.split(sep)])
    options = {o for a in parser._subparsers._group_actions[0].choices["plan"]._actions for o in a.option_strings}  # type: ignore[union-attr]
    section = (DOCS / "planning.md").read_text().split("## `shardscope plan FILE.py:FN --devices D`", 1)[1]
    section = section.split("\n## ", 1)[0]
    missing = sorted(o for o in options if o.startswith("--") and o not in ("--help",) and f"`{o}" not in section)
    assert not missing, missing


def test_the_readme_preview_is_what_the_cli_prints() -> None:
    from shardscope.cli import main

    (command,) = re.findall(r"^\$ shardscope (preview .*)$", README, flags=re.M)
    args = re.findall(r"\"[^\"]*\"|\S+", command)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main([a.strip('"') for a in args]) == 0
    assert f"$ shardscope {command}\n{out.getvalue()}```" in README


def slug(heading: str) -> str:
    """A heading's anchor as code hosts (and MyST's heading anchors) make it."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(markdown: str) -> set[str]:
    without_code = re.sub(r"```.*?```", "", markdown, flags=re.S)
    return {slug(h) for h in re.findall(r"^#{1,6} (.+)$", without_code, flags=re.M)}


@pytest.mark.parametrize("name", ["README.md", "CONTRIBUTING.md", "CHANGELOG.md"])
def test_the_front_pages_link_only_to_what_exists(name: str) -> None:
    # These live outside the docs site, so the strict Sphinx build does not check their links.
    text = (ROOT / name).read_text()
    links = re.findall(r"\]\(([^)\s]+)\)", re.sub(r"```.*?```", "", text, flags=re.S))
    local = [link for link in links if not re.match(r"[a-z]+:", link)]
    assert local, f"{name} links to no page"
    for link in local:
        path, _, anchor = link.partition("#")
        target = (ROOT / name).parent / path if path else ROOT / name
        assert target.exists(), f"{name} links to {link}, which does not exist"
        if anchor:
            assert anchor in anchors(target.read_text()), f"{name} links to {link}: no such heading"


def test_the_docs_build_fails_on_a_broken_link_and_on_a_page_left_out(tmp_path: Path) -> None:
    # The site's own configuration and the Makefile's flags, on a copy of the site with one defect at a time:
    # each must fail the build, and the copy without them must pass (so the failures are the defects').
    from sphinx.cmd.build import build_main

    (flags,) = re.findall(r"sphinx-build (.*) docs build/docs", (ROOT / "Makefile").read_text())
    site = tmp_path / "site"
    site.mkdir()
    shutil.copy(DOCS / "conf.py", site / "conf.py")
    (site / "index.md").write_text("# Home\n\n```{toctree}\npage\n```\n")
    (site / "page.md").write_text("# Page\n\n## A heading\n\nSee [home](index.md) and [here](#a-heading).\n")

    def build(name: str) -> int:
        with (
            warnings.catch_warnings(),
            contextlib.redirect_stderr(io.StringIO()),
            contextlib.redirect_stdout(io.StringIO()),
        ):
            # myst-parser still reads an attribute Sphinx has deprecated: not this test's subject (and no
            # warning of the build's own, which -W turns into a failure, is affected).
            warnings.simplefilter("ignore", DeprecationWarning)
            warnings.simplefilter("ignore", PendingDeprecationWarning)
            return int(build_main([*flags.split(), str(site), str(tmp_path / name)]))

    assert build("clean") == 0
    defects = {
        "missing page": ("page.md", "# Page\n\nSee [gone](gone.md).\n"),
        "missing heading": ("page.md", "# Page\n\nSee [home](index.md#no-such-heading).\n"),
        "missing file": ("page.md", "# Page\n\nSee [the code](../no_such_module.py).\n"),
        "page in no table of contents": ("orphan.md", "# Orphan\n"),
    }
    for what, (name, text) in defects.items():
        before = (site / name).read_text() if (site / name).exists() else None
        (site / name).write_text(text)
        assert build(what.replace(" ", "-")) != 0, f"the docs build passes with a {what}"
        if before is None:
            (site / name).unlink()
        else:
            (site / name).write_text(before)


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
