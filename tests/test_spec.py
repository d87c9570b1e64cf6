"""Tests for sharding_core.spec: pasted PartitionSpec text -> jax.sharding.PartitionSpec."""

# JAX leaves PartitionSpec.__new__ unannotated, so every P(...) is an "untyped call".
# mypy: disable-error-code="no-untyped-call"

from __future__ import annotations

import ast
import builtins
import time
from collections.abc import Callable
from typing import Any, NoReturn

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jax.sharding import PartitionSpec as P

from sharding_core.errors import DUPLICATE_AXIS, PARSE_ERROR, TOO_LARGE, ShardingError
from sharding_core.spec import (
    MAX_AXIS_NAME_CHARS,
    MAX_SPEC_CHARS,
    canonical_spec,
    parse_spec,
    spec_axes,
)
from tests.helpers import fuzz_examples

U = P.UNCONSTRAINED

# --------------------------------------------------------------------------- accepted inputs

ACCEPTED: list[tuple[str, P]] = [
    ("P('x', None)", P("x", None)),
    ("P()", P()),
    ("P(None)", P(None)),
    ("P(None,)", P(None)),
    ("P('x',)", P("x")),
    ('P("x", "y")', P("x", "y")),
    ("PartitionSpec('x')", P("x")),
    ("PS('x')", P("x")),
    ("jax.sharding.PartitionSpec('x', None)", P("x", None)),
    ("jax.sharding.P('x')", P("x")),
    ("jax.P('x')", P("x")),
    ("sharding.PartitionSpec('x')", P("x")),
    ("P (  'x' , None , )", P("x", None)),
    ("P(\n    'data',\n\tNone,\r\n)", P("data", None)),
    ("P(('x', 'y'), None)", P(("x", "y"), None)),
    ("P(('x', 'y'),)", P(("x", "y"))),
    ("P(('x',),)", P(("x",))),
    ("P(('x'))", P("x")),
    ("P(())", P(None)),
    ("P(('x', 'y', 'z',), 'w')", P(("x", "y", "z"), "w")),
    ("('x', None)", P("x", None)),
    ("()", P()),
    ("(('x', 'y'))", P(("x", "y"))),
    ("(('x', 'y'),)", P(("x", "y"))),
    ("('x', 'y'), None", P(("x", "y"), None)),
    ("'x', None", P("x", None)),
    ("'x'", P("x")),
    ("None", P(None)),
    ("'x', None,", P("x", None)),
    ("P('x', unreduced={'y'})", P("x", unreduced={"y"})),
    ("P('x', reduced={'y', 'z',})", P("x", reduced={"y", "z"})),
    ("P(unreduced={'a'}, reduced={'b'})", P(unreduced={"a"}, reduced={"b"})),
    ("P(reduced={'b'}, unreduced={'a'})", P(unreduced={"a"}, reduced={"b"})),
    ("P('x', unreduced=set())", P("x")),
    ("P('x', unreduced=frozenset())", P("x")),
    ("P('x', unreduced=frozenset({'y'}))", P("x", unreduced={"y"})),
    ("P('x', unreduced=set({'y', 'z'}))", P("x", unreduced={"y", "z"})),
    ("P('x', unreduced={})", P("x")),
    ("unreduced={'y'}", P(unreduced={"y"})),
    ("P(UNCONSTRAINED,)", P(U)),
    ("P(P.UNCONSTRAINED, 'x')", P(U, "x")),
    ("P(PartitionSpec.UNCONSTRAINED)", P(U)),
    ("jax.sharding.PartitionSpec(jax.sharding.PartitionSpec.UNCONSTRAINED)", P(U)),
    ("P.UNCONSTRAINED", P(U)),
    ("P('x')  # batch dim", P("x")),
    ("# spec\nP('x')", P("x")),
    (r"P('it\'s', 'a\\b')", P("it's", "a\\b")),
    (r'P("say \"hi\"")', P('say "hi"')),
    ("P('ü', 'データ', '\u2018q\u2019')", P("ü", "データ", "\u2018q\u2019")),
    # typographic quotes pasted from docs and chat delimit strings like straight ones (issue 13)
    ("P(\u2018x\u2019)", P("x")),
    ("P(\u201cx\u201d, None)", P("x", None)),
    ("P('x\u2019)", P("x")),
    ("P(\u2018x')", P("x")),
    ("P((\u2018data\u2019, \u2018model\u2019), None)", P(("data", "model"), None)),
    ("P(\u201edata\u201c)", P("data")),
    ("P(' ')", P(" ")),
    ("P('" + "a" * MAX_AXIS_NAME_CHARS + "')", P("a" * MAX_AXIS_NAME_CHARS)),
]


@pytest.mark.parametrize(("text", "expected"), ACCEPTED)
def test_accepted(text: str, expected: P) -> None:
    got = parse_spec(text)
    assert isinstance(got, P)
    assert got == expected
    assert canonical_spec(got) == repr(expected)


# --------------------------------------------------------------------------- rejected inputs

LONG = "a" * (MAX_AXIS_NAME_CHARS + 1)

REJECTED: list[tuple[str, str, int]] = [
    ("", PARSE_ERROR, 1),
    ("   \n\t", PARSE_ERROR, 1),
    ("# only a comment", PARSE_ERROR, 1),
    ("Q('x')", PARSE_ERROR, 1),
    ("NamedSharding(mesh, P('x'))", PARSE_ERROR, 1),
    ("jax.sharding.NamedSharding(mesh, P('x'))", PARSE_ERROR, 1),
    ("P(Q('x'))", PARSE_ERROR, 3),
    ("P(P('x'))", PARSE_ERROR, 3),
    ("P", PARSE_ERROR, 1),
    ("P(\u2018x)", PARSE_ERROR, 6),
    ("P('x\u00b4)", PARSE_ERROR, 5),
    ("P(\u00abx\u00bb)", PARSE_ERROR, 3),
    ("P(`x`)", PARSE_ERROR, 3),
    ("P\uff08'x'\uff09", PARSE_ERROR, 2),
    ("P('x'\uff0cNone)", PARSE_ERROR, 6),
    ("P('x',\u00a0None)", PARSE_ERROR, 7),
    ("P(\u200b'x')", PARSE_ERROR, 3),
    ("P(\x00)", PARSE_ERROR, 3),
    ("P('a\x00')", PARSE_ERROR, 5),
    ("P('a\x1b')", PARSE_ERROR, 5),
    ("\x07P()", PARSE_ERROR, 1),
    ("P('x'", PARSE_ERROR, 6),
    ("P(('x', 'y')", PARSE_ERROR, 13),
    ("P('x'))", PARSE_ERROR, 7),
    ("P('x')('y')", PARSE_ERROR, 7),
    ("P('x') P()", PARSE_ERROR, 8),
    ("'x')", PARSE_ERROR, 4),
    ("P('x' 'y')", PARSE_ERROR, 7),
    ("P(,)", PARSE_ERROR, 3),
    ("P('x',,)", PARSE_ERROR, 7),
    ("P((('x',),))", PARSE_ERROR, 4),
    ("(((", PARSE_ERROR, 3),
    ("P(('x', None))", PARSE_ERROR, 9),
    ("P(('x', UNCONSTRAINED))", PARSE_ERROR, 9),
    ("P(('x', y))", PARSE_ERROR, 9),
    ("P({'x'})", PARSE_ERROR, 3),
    ("P('')", PARSE_ERROR, 3),
    ('P("x", "")', PARSE_ERROR, 8),
    (f"P('{LONG}')", PARSE_ERROR, 3),
    (r"P('a\nb')", PARSE_ERROR, 3),
    (r"P('a\tb')", PARSE_ERROR, 3),
    (r"P('a\q')", PARSE_ERROR, 5),
    (r"P('a\x41')", PARSE_ERROR, 5),
    ("P('a\\", PARSE_ERROR, 6),
    ("P('abc", PARSE_ERROR, 7),
    ("P('ab\ncd')", PARSE_ERROR, 6),
    ("P(x)", PARSE_ERROR, 3),
    ("x, None", PARSE_ERROR, 1),
    ("P('x', data)", PARSE_ERROR, 8),
    ("P(0)", PARSE_ERROR, 3),
    ("P(['x', 'y'])", PARSE_ERROR, 3),
    ("P(*axes)", PARSE_ERROR, 3),
    ("P(u'x')", PARSE_ERROR, 3),
    ("P(r'x')", PARSE_ERROR, 3),
    ("P(x.)", PARSE_ERROR, 4),
    ("P(foo={'x'})", PARSE_ERROR, 3),
    ("spec = P('x')", PARSE_ERROR, 1),
    ("P(unreduced={'a'}, unreduced={'b'})", PARSE_ERROR, 20),
    ("P(unreduced={'a'}, 'x')", PARSE_ERROR, 20),
    ("P(unreduced={'a'}, None)", PARSE_ERROR, 20),
    ("P(unreduced='a')", PARSE_ERROR, 13),
    ("P(unreduced={None})", PARSE_ERROR, 14),
    ("P(unreduced={('a',)})", PARSE_ERROR, 14),
    ("P(unreduced=set('a'))", PARSE_ERROR, 17),
    ("P(unreduced=list())", PARSE_ERROR, 13),
    ("P(unreduced={'a'}", PARSE_ERROR, 18),
    ("P('x', 'x')", DUPLICATE_AXIS, 8),
    ("P(('x', 'x'))", DUPLICATE_AXIS, 9),
    ("P('x', ('y', 'x'))", DUPLICATE_AXIS, 14),
    ("P('x', unreduced={'x'})", DUPLICATE_AXIS, 19),
    ("P(unreduced={'a', 'a'})", DUPLICATE_AXIS, 19),
    ("P(unreduced={'a'}, reduced={'a'})", DUPLICATE_AXIS, 29),
    ("('x', 'y'), 'y'", DUPLICATE_AXIS, 13),
    ("a" * (MAX_SPEC_CHARS + 1), TOO_LARGE, MAX_SPEC_CHARS + 1),
]


@pytest.mark.parametrize(("text", "code", "column"), REJECTED)
def test_rejected(text: str, code: str, column: int) -> None:
    with pytest.raises(ShardingError) as info:
        parse_spec(text)
    err = info.value
    assert (err.code, err.details.get("column")) == (code, column), err.message
    assert err.message and err.hint
    assert isinstance(err.to_dict()["column"], int)


def test_messages_say_found_and_expected_and_hint() -> None:
    with pytest.raises(ShardingError) as info:
        parse_spec("P(x)")
    assert "found unquoted name x" in info.value.message
    assert info.value.hint == "axis names are strings: write 'x'"
    with pytest.raises(ShardingError) as info:
        parse_spec("P(`x`)")
    assert info.value.hint == "use straight quotes ' or \""
    with pytest.raises(ShardingError) as info:
        parse_spec("  ")
    assert "P()" in (info.value.hint or "")
    with pytest.raises(ShardingError) as info:
        parse_spec("NamedSharding(mesh, P('x'))")
    assert "paste only the spec" in (info.value.hint or "")


def test_duplicate_axis_reports_both_columns() -> None:
    with pytest.raises(ShardingError) as info:
        parse_spec("P('data', ('model', 'data'))")
    err = info.value
    assert err.code == DUPLICATE_AXIS
    assert err.details == {"column": 21, "first_column": 3, "axis": "data"}
    assert "'data'" in err.message and "3" in err.message and "21" in err.message


def test_too_large_checked_before_tokenizing_and_names_limit() -> None:
    with pytest.raises(ShardingError) as info:
        parse_spec("\x00" * 600)  # would be a parse error at column 1 if it were tokenized
    assert info.value.code == TOO_LARGE
    assert str(MAX_SPEC_CHARS) in info.value.message
    with pytest.raises(ShardingError) as info:
        parse_spec("P('x', None)", max_chars=5)
    assert (info.value.code, info.value.details["column"]) == (TOO_LARGE, 6)
    assert "5" in info.value.message
    assert parse_spec(" " * 1000 + "P('x')", max_chars=2000) == P("x")


def test_non_str_input_is_a_sharding_error() -> None:
    with pytest.raises(ShardingError):
        parse_spec(b"P('x')")  # type: ignore[arg-type]


# --------------------------------------------------------------------------- helpers


def test_canonical_spec_is_jax_repr() -> None:
    for spec in [P(), P(None), P("x", None), P(("x", "y")), P("x", unreduced={"y"}), P(U)]:
        assert canonical_spec(spec) == repr(spec)
        assert parse_spec(canonical_spec(spec)) == spec


def test_spec_axes_order_and_duplicates() -> None:
    assert spec_axes(P()) == []
    assert spec_axes(P(None, U)) == []
    assert spec_axes(P("x", None, ("y", "z"))) == ["x", "y", "z"]
    assert spec_axes(P("x", unreduced={"c", "a"}, reduced={"b"})) == ["x", "a", "c", "b"]
    assert spec_axes(P("x", ("y", "x"))) == ["x", "y", "x"]  # JAX allows it; kept for checks


# --------------------------------------------------------------------------- round trips

AXIS_NAMES = st.text(
    alphabet=st.one_of(
        st.sampled_from("xyzdatmodel_'\"\\ \u2018\u2019\u201c\u201d()[]{},=#"),
        st.characters(codec="utf-8"),
    ),
    min_size=1,
    max_size=MAX_AXIS_NAME_CHARS,
).filter(str.isprintable)


@st.composite
def specs(draw: st.DrawFn) -> P:
    """Random valid specs: every axis name is used once across entries and sets."""
    names = draw(st.lists(AXIS_NAMES, unique=True, max_size=10))
    entries: list[Any] = []
    while draw(st.booleans()) and names:
        kind = draw(st.sampled_from(["none", "name", "tuple", "unconstrained"]))
        if kind == "none":
            entries.append(None)
        elif kind == "unconstrained":
            entries.append(U)
        elif kind == "name":
            entries.append(names.pop())
        else:
            size = draw(st.integers(1, min(3, len(names))))
            entries.append(tuple(names.pop() for _ in range(size)))
    entries += draw(st.lists(st.sampled_from([None, U]), max_size=2))
    unreduced = {names.pop() for _ in range(draw(st.integers(0, len(names))))}
    reduced = set(names) if draw(st.booleans()) else set()
    return P(*entries, unreduced=unreduced, reduced=reduced)


def quote(name: str, q: str) -> str:
    return q + name.replace("\\", "\\\\").replace(q, "\\" + q) + q


@st.composite
def pasted(draw: st.DrawFn, spec: P) -> str:
    """Re-spell ``spec`` the ways people paste it: other quotes, names, spacing, commas."""
    ws = st.sampled_from(["", " ", "  ", "\n", "\t", "\n    ", " \r\n "])
    q = draw(st.sampled_from(["'", '"']))

    def entry(e: Any) -> str:
        if e is None:
            return "None"
        if e is U:
            return draw(st.sampled_from(["UNCONSTRAINED", "P.UNCONSTRAINED"]))
        if isinstance(e, tuple):
            inner = ("," + draw(ws)).join(quote(n, q) for n in e)
            return "(" + inner + ("," if len(e) == 1 or draw(st.booleans()) else "") + ")"
        return quote(e, q)

    args = [entry(e) for e in spec.partitions]
    for key in ("unreduced", "reduced"):
        names = sorted(getattr(spec, key))
        if draw(st.booleans()) or names:
            body = "{" + ", ".join(quote(n, q) for n in names) + "}"
            if not names:
                body = draw(st.sampled_from(["set()", "frozenset()", "{}"]))
            elif draw(st.booleans()):
                body = f"frozenset({body})"
            args.append(f"{key}{draw(ws)}={draw(ws)}{body}")
    sep = "," + draw(ws)
    trailing = "," + draw(ws) if draw(st.booleans()) and args else ""
    body = draw(ws) + sep.join(args) + trailing + draw(ws)
    head = draw(st.sampled_from(["P", "PartitionSpec", "jax.sharding.PartitionSpec", "jax.P", ""]))
    if head == "" and not spec.partitions and not args:
        return "()"
    return f"{draw(ws)}{head}{draw(ws)}({body}){draw(ws)}"


@settings(max_examples=fuzz_examples(500), deadline=None)
@given(specs())
def test_round_trip_repr(spec: P) -> None:
    text = repr(spec)
    got = parse_spec(text, max_chars=100_000)
    assert got == spec
    assert canonical_spec(got) == text
    assert spec_axes(got) == spec_axes(spec)


@settings(max_examples=fuzz_examples(500), deadline=None)
@given(st.data())
def test_round_trip_pasted_variants(data: st.DataObject) -> None:
    spec = data.draw(specs())
    text = data.draw(pasted(spec))
    got = parse_spec(text, max_chars=100_000)
    assert got == spec, text
    assert canonical_spec(got) == repr(spec)


# --------------------------------------------------------------------------- totality


def check_total(text: str, max_chars: int = MAX_SPEC_CHARS) -> None:
    """The parser's contract: a PartitionSpec, or a ShardingError with a column in range."""
    try:
        result = parse_spec(text, max_chars=max_chars)
    except ShardingError as err:
        column = err.details.get("column")
        assert type(column) is int and 1 <= column <= len(text) + 1, (text, err.to_dict())
        assert err.code in (PARSE_ERROR, DUPLICATE_AXIS, TOO_LARGE)
        assert err.message and err.hint
    else:
        assert isinstance(result, P)
        assert parse_spec(canonical_spec(result), max_chars=100_000) == result


@settings(max_examples=fuzz_examples(2000), deadline=None)
@given(st.text())
def test_any_text_is_spec_or_sharding_error(text: str) -> None:
    check_total(text)


BIASED_CHARS = st.text(alphabet="P('(),{}=\"\\ x", max_size=60)
BIASED_TOKENS = st.lists(
    st.sampled_from([*"P('(),{}=\"\\ xy\n\u2018", "None", "unreduced=", "'x'", "'y'", "set()"]),
    max_size=30,
).map("".join)


@settings(max_examples=fuzz_examples(2000), deadline=None)
@given(st.one_of(BIASED_CHARS, BIASED_TOKENS))
def test_spec_like_text_is_spec_or_sharding_error(text: str) -> None:
    check_total(text)


@pytest.mark.parametrize(
    "text",
    [
        "(" * 100_000,
        "P" + "(" * 100_000,
        ")" * 100_000,
        "{" * 100_000,
        "[" * 100_000,
        "P(" + "'x', " * 20_000 + ")",
        "P(" + "None, " * 20_000,
        "P('" + "a" * 100_000,
        "P('" + "\\\\" * 50_000,
        "#" * 100_000,
        " " * 100_000,
        "P(unreduced={" + "'a', " * 20_000,
        "(" * 50_000 + ")" * 50_000,
        "a" * 100_000,
        "P(" + "x." * 50_000,
    ],
    ids=lambda t: f"{t[:6]!r}x{len(t)}",
)
def test_huge_and_deep_inputs_fail_fast_with_a_column(text: str) -> None:
    start = time.process_time()
    with pytest.raises(ShardingError) as info:
        parse_spec(text, max_chars=200_000)
    assert time.process_time() - start < 2.0
    column = info.value.details["column"]
    assert type(column) is int and 1 <= column <= len(text) + 1
    assert len(info.value.message) < 300  # long input is clipped, not echoed back
    with pytest.raises(ShardingError) as info:
        parse_spec(text)  # default limit: rejected as too large without tokenizing
    assert info.value.code == TOO_LARGE


def test_long_valid_spec_is_linear() -> None:
    text = "P(" + ", ".join(f"'a{i}'" for i in range(20_000)) + ")"
    start = time.process_time()
    spec = parse_spec(text, max_chars=len(text))
    assert time.process_time() - start < 2.0
    assert len(spec) == 20_000


# --------------------------------------------------------------------------- no eval


def test_never_evaluates(monkeypatch: pytest.MonkeyPatch) -> None:
    def forbidden(name: str) -> Callable[..., NoReturn]:
        def boom(*args: object, **kwargs: object) -> NoReturn:
            raise AssertionError(f"{name} was called while parsing")

        return boom

    corpus = [text for text, _ in ACCEPTED] + [text for text, _, _ in REJECTED]
    corpus += ["__import__('os').system('true')", "P(eval('1'))", "exec('x')", "lambda: 0"]
    monkeypatch.setattr(builtins, "eval", forbidden("eval"))
    monkeypatch.setattr(builtins, "exec", forbidden("exec"))
    monkeypatch.setattr(builtins, "compile", forbidden("compile"))
    monkeypatch.setattr(ast, "literal_eval", forbidden("ast.literal_eval"))
    outcomes: list[object] = []
    for text in corpus:
        try:
            outcomes.append(parse_spec(text))
        except ShardingError as err:
            outcomes.append(err.code)
    assert len(outcomes) == len(corpus)
    assert outcomes.count(P("x", None)) >= 1
