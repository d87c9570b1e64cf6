"""The why corpus (tests/why_corpus/): reproducers of public reports and docs, each with a hand-written truth.

For every case, :func:`sharding_core.explain` must name the responsible line, input leaf and Shardy origin the
truth file names. Its top-ranked fix for that collective is then applied **here, with JAX alone** (the
leaf's sharding replaced, the function jitted again with other out_shardings, or a JAX option set),
compiled, and its collectives read by this file's own small HLO reader — not by the product: the fix passes
when the collective disappears or halves, or the program's collectives move half the bytes, without the
total growing. The issue asks for at least 7 in 10; both the cases the ranking was tuned on and the cases
held out (``"set": "held_out"``, written after it was frozen) are reported (``-s`` prints them).
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import math
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jax
import pytest
from jax.sharding import NamedSharding

from sharding_core import explain
from sharding_core.spec import parse_spec

CORPUS = Path(__file__).parent / "why_corpus"
CASES = sorted(p.name.removesuffix(".truth.json") for p in CORPUS.glob("*.truth.json"))
PASS_RATE = 0.7  # the issue: "in at least 7 of 10 the top-ranked fix removes the collective or halves the bytes"

# ------------------------------------------------------------------------------ an independent reader

_BITS = {"pred": 8, "s8": 8, "u8": 8, "s16": 16, "u16": 16, "f16": 16, "bf16": 16, "s32": 32, "u32": 32,
         "f32": 32, "s64": 64, "u64": 64, "f64": 64}  # fmt: skip
_OPS = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute")
_LINE = re.compile(r"^\s*(?:ROOT )?%\S+ = (?P<shape>.*?) (?P<op>" + "|".join(_OPS) + r")(?:-start)?\(")


def _frames(hlo: str) -> dict[int, str]:
    """stack_frame_id -> "file.py:line" of its innermost frame (the tables atop ``compiled.as_text()``)."""
    files, locs, frames = {}, {}, {}
    section = None
    for raw in hlo.splitlines():
        s = raw.strip()
        if s in ("FileNames", "FunctionNames", "FileLocations", "StackFrames"):
            section = s
            continue
        m = re.match(r"(\d+) (.*)", s)
        if not m:
            section = None if s else section
            continue
        k, rest = int(m.group(1)), m.group(2)
        if section == "FileNames":
            files[k] = Path(rest.strip('"')).name
        elif section == "FileLocations":
            f = re.search(r"file_name_id=(\d+)", rest)
            ln = re.search(r"\bline=(\d+)", rest)
            locs[k] = (int(f.group(1)) if f else 0, int(ln.group(1)) if ln else 0)
        elif section == "StackFrames":
            loc = re.search(r"file_location_id=(\d+)", rest)
            frames[k] = int(loc.group(1)) if loc else 0
    return {k: f"{files.get(locs.get(v, (0, 0))[0], '?')}:{locs.get(v, (0, 0))[1]}" for k, v in frames.items()}


def measure(compiled: Any) -> list[tuple[str, int, str | None]]:
    """(op, bytes per device, "file.py:line" or None) of every collective in the optimized HLO."""
    hlo = compiled.as_text()
    frames = _frames(hlo)
    out = []
    for raw in hlo.splitlines():
        m = _LINE.match(raw)
        if not m:
            continue
        nbytes = sum(
            math.prod(int(d) for d in dims.split(",") if d) * _BITS[t] // 8
            for t, dims in re.findall(r"([a-z]+\d*)\[([\d,]*)\]", m.group("shape"))
        )
        fid = re.search(r"stack_frame_id=(\d+)", raw)
        out.append((m.group("op"), nbytes, frames.get(int(fid.group(1))) if fid else None))
    return out


# ------------------------------------------------------------------------------ cases


def load(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(f"why_corpus_{name}", CORPUS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def truth(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((CORPUS / f"{name}.truth.json").read_text())
    return data


@contextlib.contextmanager
def options(values: dict[str, Any]) -> Iterator[None]:
    before = {k: getattr(jax.config, k) for k in values}
    for k, v in values.items():
        jax.config.update(k, v)
    try:
        yield
    finally:
        for k, v in before.items():
            jax.config.update(k, v)


_EXPLAINED: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {}


def explained(name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the snapshot sharding_core.explain gives, the truth collective in it) — once per case."""
    if name not in _EXPLAINED:
        t = truth(name)
        module = load(name)
        with options(getattr(module, "CONFIG", {})):
            fn, args = module.build()
            snap = explain(fn, *args)
        want = t["collective"]
        line = want["line"]
        hits = [
            c
            for c in snap["collectives"]
            if c["op"] == want["op"]
            and (c.get("line") is None if line is None else str(c.get("line") or "").endswith("/" + line))
        ]
        assert hits, f"{name}: no {want['op']} at {line} in {[(c['op'], c.get('line')) for c in snap['collectives']]}"
        _EXPLAINED[name] = (snap, hits[int(want.get("index", 0))])
    return _EXPLAINED[name]


@pytest.mark.parametrize("name", CASES)
def test_why_names_the_line_leaf_and_origin(name: str) -> None:
    t = truth(name)
    _, c = explained(name)
    why = c["why"]
    line = t["collective"]["line"]
    assert (why["source"] is None) if line is None else why["source"].endswith("/" + line), why["source"]
    assert t["leaf"] in why["leaves"], (why["leaves"], why["explanation"])
    named = [(o["origin"], o["leaf"]) for o in why["origin"]]
    assert (t["origin"], t["leaf"]) in named, named
    assert set(t["collective"]["axes"]) <= {o["axis"] for o in why["origin"]} | set(c["axes"] or [])
    assert why["partitioner"] == "shardy"
    assert why["explanation"] and why["explanation"].endswith("per device).")


def apply_fix(name: str, fix: dict[str, Any]) -> list[tuple[str, int, str | None]]:
    """The fix compiled with JAX alone; its collectives by :func:`measure`."""
    module = load(name)
    config = dict(getattr(module, "CONFIG", {}))
    if fix["kind"] == "config":
        text = fix["text"]
        m = re.search(r"set (\w+)=(True|False)", text)
        assert m, text
        config[m.group(1)] = m.group(2) == "True"
    with options(config):
        fn, args = module.build()
        if fix["kind"] == "input":
            flat, tree = jax.tree_util.tree_flatten_with_path(list(args))
            leaves = []
            for path, x in flat:
                if "inputs/args/" + jax.tree_util.keystr(path, simple=True, separator="/") == fix["leaf"]:
                    x = jax.ShapeDtypeStruct(
                        x.shape, x.dtype, sharding=NamedSharding(x.sharding.mesh, parse_spec(fix["spec"]))
                    )
                leaves.append(x)
            args = jax.tree_util.tree_unflatten(tree, leaves)
        elif fix["kind"] == "output":
            assert fix["leaf"] == "outputs", "the corpus's programs have one output"
            mesh = jax.tree.leaves(args)[0].sharding.mesh
            fn = jax.jit(fn.__wrapped__, out_shardings=NamedSharding(mesh, parse_spec(fix["spec"])))
        return measure(fn.lower(*args).compile())


def baseline(name: str) -> list[tuple[str, int, str | None]]:
    module = load(name)
    with options(getattr(module, "CONFIG", {})):
        fn, args = module.build()
        return measure(fn.lower(*args).compile())


def fix_verdict(name: str) -> tuple[bool, str]:
    t = truth(name)
    _, c = explained(name)
    fixes = c["why"]["fixes"]
    if not fixes:
        return False, "no fix offered: " + str(c["why"].get("fixes_note"))
    top = fixes[0]
    before, after = baseline(name), apply_fix(name, top)
    line = t["collective"]["line"]
    op = t["collective"]["op"]
    target0 = sum(b for o, b, at in before if o == op and (at == line if line else at is None))
    target1 = sum(b for o, b, at in after if o == op and (at == line if line else at is None))
    total0, total1 = sum(b for _, b, _ in before), sum(b for _, b, _ in after)
    ok = target0 > 0 and total1 <= total0 and (2 * target1 <= target0 or 2 * total1 <= total0)
    return (
        ok,
        f"{top['leaf'] or top['text']} {top['spec'] or ''}: target {target0} -> {target1}, total {total0} -> {total1}",
    )


def test_top_fixes_remove_or_halve_by_recompiling(capsys: pytest.CaptureFixture[str]) -> None:
    results = {name: fix_verdict(name) for name in CASES}
    lines = []
    for subset in ("tuning", "held_out"):
        names = [n for n in CASES if truth(n)["set"] == subset]
        good = [n for n in names if results[n][0]]
        lines.append(f"{subset}: top fix removes or halves in {len(good)}/{len(names)}")
        lines += [f"  {'ok  ' if results[n][0] else 'MISS'} {n}: {results[n][1]}" for n in names]
    with capsys.disabled():
        print("\n" + "\n".join(lines))
    passed = sum(ok for ok, _ in results.values())
    assert passed >= PASS_RATE * len(CASES), "\n".join(lines)
    # Scaling book Case 3 is the documented exception: XLA:CPU writes a reduce-scatter as an all-reduce.
    misses = {n for n, (ok, _) in results.items() if not ok}
    assert misses <= {n for n in CASES if truth(n).get("fix_shows_on_cpu") is False} | {
        n for n in CASES if truth(n)["set"] == "held_out"
    }, misses


def test_corpus_cases_cite_a_public_source_and_at_least_ten_exist() -> None:
    assert len(CASES) >= 10
    for name in CASES:
        t = truth(name)
        assert t["source"].startswith("https://"), name
        assert t["source"] in (CORPUS / f"{name}.py").read_text(), name
        assert t["set"] in ("tuning", "held_out")
    assert any(truth(n)["set"] == "held_out" for n in CASES)
