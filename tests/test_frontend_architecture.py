"""The front end's architecture as tests (issue 30), beside the Python domain's (``tests/test_domain_architecture.py``).

* No JavaScript function over :data:`MAX_FUNCTION_LINES` lines in ``frontend/`` (a panel's ``mount`` was 595 lines
  with 26 inner functions: the page singletons had become closure singletons; a panel is now built from cards,
  each with its own ``mount``).

There is no JavaScript parser among the project's dependencies, so :func:`functions` reads the source with a small
scanner that knows what can hide a brace — strings, template literals (and the ``${...}`` inside them), comments
and regular expression literals — and takes a ``{`` for a function's body when it follows ``=>``, or a parameter
list that follows ``function``, ``function name`` or a method's name (not ``if``, ``for``, ``while``, ``switch``,
``catch``). The tests below hold it to sources made to mislead it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FRONTEND = ROOT / "frontend"

MAX_FUNCTION_LINES = 200

_NOT_METHODS = frozenset({"if", "for", "while", "switch", "catch", "with", "return", "typeof", "await", "yield"})
_REGEX_AFTER_WORDS = frozenset({"return", "typeof", "case", "do", "else", "in", "of", "new", "delete", "void", "yield"})
_IDENT = re.compile(r"[A-Za-z_$][\w$]*")
_NUMBER = re.compile(r"\d[\w.]*")
_PUNCT = ("=>", "...", "?.", "??")


@dataclass(frozen=True)
class Function:
    name: str
    first: int  # the line of its head (the `function` keyword, the method's name or the arrow's parameters)
    last: int  # the line of its closing brace

    @property
    def lines(self) -> int:
        return self.last - self.first + 1


@dataclass
class _Tok:
    kind: str  # "word", "num", "punct", "str", "regex", "template"
    text: str
    line: int


def _skip_string(src: str, i: int, quote: str) -> int:
    i += 1
    while src[i] != quote:
        i += 2 if src[i] == "\\" else 1
    return i + 1


def _regex_allowed(prev: _Tok | None) -> bool:
    if prev is None:
        return True
    if prev.kind in ("num", "str", "regex", "template"):
        return False
    if prev.kind == "word":
        return prev.text in _REGEX_AFTER_WORDS
    return prev.text not in (")", "]", "}")


def _skip_regex(src: str, i: int) -> int:
    i += 1
    in_class = False
    while True:
        c = src[i]
        if c == "\\":
            i += 2
            continue
        if c == "[":
            in_class = True
        elif c == "]":
            in_class = False
        elif c == "/" and not in_class:
            i += 1
            break
        i += 1
    while i < len(src) and (src[i].isalnum() or src[i] == "_"):
        i += 1
    return i


def tokens(src: str) -> list[_Tok]:
    """The source's tokens; strings, comments, regular expressions and templates' text hold no brace for the scan
    (a template's ``${...}`` is scanned as code)."""
    out: list[_Tok] = []
    i, line = 0, 1
    templates: list[int] = []  # for each open `${`: the brace depth inside it, to find its `}`
    n = len(src)

    def template_text(i: int) -> int:
        """From inside a template literal's text to its end (past the backtick) or past a `${` (then code follows,
        as after an opening brace: a `/` there starts a regular expression)."""
        while True:
            c = src[i]
            if c == "\\":
                i += 2
            elif c == "`":
                out.append(_Tok("template", "", line))
                return i + 1
            elif src.startswith("${", i):
                templates.append(0)
                out.append(_Tok("punct", "${", line))
                return i + 2
            else:
                i += 1

    while i < n:
        c = src[i]
        start = i
        if c in " \t\r\n":
            i += 1
        elif src.startswith("//", i):
            i = src.find("\n", i)
            i = n if i < 0 else i
        elif src.startswith("/*", i):
            i = src.index("*/", i + 2) + 2
        elif c in "'\"":
            i = _skip_string(src, i, c)
            out.append(_Tok("str", "", line))
        elif c == "`":
            i = template_text(i + 1)
        elif c == "/" and _regex_allowed(out[-1] if out else None):
            i = _skip_regex(src, i)
            out.append(_Tok("regex", "", line))
        elif (m := _IDENT.match(src, i)) is not None:
            i = m.end()
            out.append(_Tok("word", m.group(), line))
        elif (m := _NUMBER.match(src, i)) is not None:
            i = m.end()
            out.append(_Tok("num", m.group(), line))
        elif templates and c == "{":
            templates[-1] += 1
            i += 1
            out.append(_Tok("punct", c, line))
        elif templates and c == "}":
            if templates[-1] == 0:  # the end of a `${...}`: back in the template's text
                templates.pop()
                i = template_text(i + 1)
            else:
                templates[-1] -= 1
                i += 1
                out.append(_Tok("punct", c, line))
        else:
            p = next((p for p in _PUNCT if src.startswith(p, i)), c)
            i += len(p)
            out.append(_Tok("punct", p, line))
        line += src.count("\n", start, i)
    return out


def _function_head(toks: list[_Tok], k: int) -> tuple[str, int] | None:
    """If the ``{`` at ``toks[k]`` opens a function's body: its name and the line of its head."""
    prev = toks[k - 1] if k else None
    if prev is None:
        return None
    if prev.text == "=>":
        j = k - 2
        if j >= 0 and toks[j].text == ")":  # (a, b) => {
            depth = 0
            while j >= 0:
                depth += {")": 1, "(": -1}.get(toks[j].text, 0) if toks[j].kind == "punct" else 0
                if depth == 0:
                    break
                j -= 1
        name = toks[j - 2].text if j >= 2 and toks[j - 1].text == "=" and toks[j - 2].kind == "word" else "(arrow)"
        return name, toks[max(j, 0)].line
    if prev.text != ")":
        return None
    j, depth = k - 1, 0
    while j >= 0:
        if toks[j].kind == "punct":
            depth += {")": 1, "(": -1}.get(toks[j].text, 0)
        if depth == 0:
            break
        j -= 1
    before = toks[j - 1] if j >= 1 else None
    if before is None:
        return None
    if before.text == "function" or (before.text == "*" and j >= 2 and toks[j - 2].text == "function"):
        return "(anonymous)", before.line
    if before.kind == "word" and before.text not in _NOT_METHODS:
        head = toks[j - 2] if j >= 2 else None
        if head is not None and head.text in ("function", "*"):
            return before.text, head.line
        if head is not None and head.text == ".":  # a call: x.f(...) { cannot open a body
            return None
        return before.text, before.line  # a method: name(...) {
    return None


def functions(src: str) -> list[Function]:
    """Every function of a JavaScript source, with the lines from its head to its closing brace."""
    toks = tokens(src)
    found: list[Function] = []
    stack: list[tuple[str, int] | None] = []
    for k, t in enumerate(toks):
        if t.kind != "punct":
            continue
        if t.text == "{":
            stack.append(_function_head(toks, k))
        elif t.text == "}":
            head = stack.pop()
            if head is not None:
                found.append(Function(head[0], head[1], t.line))
    assert not stack, "unbalanced braces"
    return found


def _long(src: str) -> list[Function]:
    return [f for f in functions(src) if f.lines > MAX_FUNCTION_LINES]


def test_no_javascript_function_is_longer_than_200_lines() -> None:
    long = [
        f"{path.relative_to(ROOT)}:{f.first} {f.name}: {f.lines} lines"
        for path in sorted(FRONTEND.rglob("*.js"))
        for f in _long(path.read_text())
    ]
    assert long == [], "split these (a panel: into cards, each with its own mount)"


_MISLEADING = """
const a = "}{", b = '{', c = `${x ? `}` : "{"} }`, d = `${/}/.test(a)}`; // } {
/* } */ const re = /[}{]\\/}/g, half = n / 2 / 1;
"""


def _body(lines: int) -> str:
    return "\n".join(f"  x += {i};" for i in range(lines - 2))


def test_the_scanner_finds_a_function_that_is_too_long() -> None:
    for head, tail in (
        ("export function mount(root, host) {", "}"),
        ("const draw = (a, b) => {", "};"),
        ("class C { method(x) {", "} }"),
        ("const f = async function () {", "};"),
    ):
        too_long = f"{_MISLEADING}{head}\n{_MISLEADING}{_body(MAX_FUNCTION_LINES - 2)}\n{tail}\n"
        just_so = f"{_MISLEADING}{head}\n{_body(MAX_FUNCTION_LINES - 2)}\n{_MISLEADING.strip()}\n{tail}\n"
        assert [f.lines for f in _long(too_long)] == [MAX_FUNCTION_LINES + 1], head
        assert _long(just_so) == [], head


def test_the_scanner_counts_inner_functions_and_not_blocks() -> None:
    src = """function outer() {
  if (a) { b(); }
  for (const x of y) { z(x); }
  const o = { k: 1, m() { return 2; } };
  const g = (x) => { return `${x}{`; };
  items.forEach(function (i) {
    return i;
  });
  return o;
}
"""
    assert sorted((f.name, f.first, f.last) for f in functions(src)) == [
        ("(anonymous)", 6, 8),
        ("g", 5, 5),
        ("m", 4, 4),
        ("outer", 1, 10),
    ]
