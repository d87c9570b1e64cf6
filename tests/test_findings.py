"""Findings of silent waste (issue 32): every reproducer of ``tests/findings_corpus.py`` flagged with its kind, its
bytes per step (trip count × the collective's bytes in XLA's own HLO) and the line it comes from; no finding on the
clean programs; the fixes cut the step's collective bytes by half or more, recompiled with JAX; ``shardscope plan
--findings`` and ``--baseline`` failing on a new finding."""

from __future__ import annotations

import inspect
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import sharding_core
from sharding_core.hlo.text import ArrayShape
from tests import findings_corpus as corpus

ROOT = Path(__file__).resolve().parents[1]
_SHAPE = re.compile(r"^([a-z][a-z0-9]*)\[([0-9,]*)\]")


def _case_marks(case: corpus.Case) -> Any:
    return pytest.param(case, id=case.name, marks=[pytest.mark.tpu] if case.tpu else [])


def hlo_bytes(hlo: str, name: str) -> int:
    """The result bytes of instruction ``name`` in XLA's compiled HLO text (a tuple's arrays summed)."""
    line = next(ln for ln in hlo.splitlines() if re.match(rf"^\s*(ROOT\s+)?%{re.escape(name)}\s*=", ln))
    shape = line.split("=", 1)[1].strip()
    arrays = re.findall(r"([a-z][a-z0-9]*)\[([0-9,]*)\]", shape.split(" ")[0] if not shape.startswith("(")
                        else shape[: shape.index(")") + 1])  # fmt: skip
    return sum(ArrayShape(d, tuple(int(v) for v in dims.split(",") if v)).bytes for d, dims in arrays)


def source_text(source: str) -> str:
    """The text of the line ``file:line`` names (a path relative to the working directory, or absolute)."""
    file, _, line = source.rpartition(":")
    path = Path(file) if Path(file).is_absolute() else ROOT / file
    return path.read_text().splitlines()[int(line) - 1]


@pytest.mark.parametrize("case", [_case_marks(c) for c in corpus.REPRODUCERS])
def test_each_reproducer_is_flagged_with_bytes_per_step_and_its_line(case: corpus.Case) -> None:
    f, args = case.build()
    snap = sharding_core.inspect_jit(f, *args)
    found = [x for x in snap["findings"] if x["kind"] == case.kind]
    assert found, f"{case.name}: no {case.kind} in {[x['kind'] for x in snap['findings']]}"
    top = found[0]
    assert top["bytes_per_step"] == top["bytes"] * top["repeat"] or case.kind == "batch_not_split", top
    assert top["source"] and re.search(r":\d+$", top["source"]), top
    text = source_text(top["source"])
    if case.line_marker:
        assert case.line_marker in text, (top["source"], text)
    else:
        lines, _ = inspect.getsourcelines(inspect.unwrap(case.build))
        assert text + "\n" in lines, (top["source"], text)
    if case.repeat is not None:  # the collective XLA wrote (a loop kind: run once per iteration), its bytes
        assert top["repeat"] == case.repeat
        hlo = f.lower(*args).compile().as_text()
        name = re.search(r"\(([\w.\-]+)\)$", top["involved"][0])
        assert name is not None
        assert top["bytes"] == hlo_bytes(hlo, name.group(1))


def step_collective_bytes(build: Any) -> int:
    """The step's collective bytes (each collective's bytes × its runs per step) of the program JAX compiles."""
    f, args = build()
    snap = sharding_core.inspect_jit(f, *args)
    return sum(int(c["bytes"]) * int(c["repeat"]) for c in snap["collectives"])


FIXED = [c for c in corpus.REPRODUCERS if c.fixed is not None]


def test_at_least_seven_reproducers_have_a_fix() -> None:
    assert len(FIXED) >= 7 and len(corpus.REPRODUCERS) >= 10 and len(corpus.CLEAN) >= 20


@pytest.mark.parametrize("case", [_case_marks(c) for c in FIXED])
def test_the_fix_halves_the_steps_collective_bytes(case: corpus.Case) -> None:
    assert case.fixed is not None
    before, after = step_collective_bytes(case.build), step_collective_bytes(case.fixed)
    assert after * 2 <= before, (case.name, before, after)


@pytest.mark.parametrize("case", [_case_marks(c) for c in corpus.CLEAN])
def test_clean_programs_have_no_finding(case: corpus.Case) -> None:
    f, args = case.build()
    snap = sharding_core.inspect_jit(f, *args)
    assert snap["findings"] == [], [(x["kind"], x["source"], x["text"][:300]) for x in snap["findings"]]


SCRIPT = """
import sys
sys.path.insert(0, {root!r})
from tests import findings_corpus as corpus


def bad(mesh):
    return corpus.optax_multisteps_dp()


def good(mesh):
    return corpus.optax_multisteps_dp_fixed()
"""


def _plan(*argv: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "shardscope", "plan", *argv], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=300)  # fmt: skip


def test_plan_findings_prints_them_and_the_baseline_fails_on_a_new_one(tmp_path: Path) -> None:
    script = tmp_path / "accumulate.py"
    script.write_text(SCRIPT.format(root=str(ROOT)))
    base = tmp_path / "good.json"
    good = _plan(f"{script}:good", "--devices", "cpu:8", "--findings", "--json", str(base), "--no-temporaries")
    assert good.returncode == 0, good.stderr[-2000:]
    assert "findings: none" in good.stdout
    assert json.loads(base.read_text())["findings"] == []
    bad = _plan(f"{script}:bad", "--devices", "cpu:8", "--findings", "--baseline", str(base), "--no-temporaries",
                "--max-new-collective-bytes", str(1 << 40))  # fmt: skip
    assert bad.returncode == 1, bad.stdout[-2000:] + bad.stderr[-2000:]
    assert "[reduced_every_iteration]" in bad.stdout and "8 × 1.0 MiB" in bad.stdout
    assert "new finding [reduced_every_iteration]" in bad.stdout and "REGRESSED" in bad.stdout
    same = _plan(f"{script}:bad", "--devices", "cpu:8", "--baseline", str(base), "--no-temporaries", "--json",
                 str(tmp_path / "bad.json"))  # fmt: skip
    again = _plan(f"{script}:bad", "--devices", "cpu:8", "--baseline", str(tmp_path / "bad.json"), "--no-temporaries")
    assert same.returncode == 1 and again.returncode == 0, again.stdout[-2000:]
