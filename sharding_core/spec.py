r"""Parse a pasted PartitionSpec into a real :class:`jax.sharding.PartitionSpec`, without eval.

Users paste specs from notebooks, logs and JAX's own reprs, so we accept the spellings they
actually have (``P(...)``, ``PartitionSpec(...)``, ``jax.sharding.PartitionSpec(...)``, a bare
``('x', None)`` or ``'x', None``) and turn everything else into a :class:`ShardingError` with a
1-based ``column`` (a character offset into the whole text, so multi-line pastes work) and a hint.
The text is untrusted, so nothing is ever evaluated (no ``eval``/``exec``/``compile``/
``ast.literal_eval``): a small lexer feeds a recursive-descent parser whose depth is fixed by the
grammar (a tuple cannot hold a tuple), so any input is handled in linear time without recursion
trouble.

Grammar (whitespace -- space, tab, CR, LF -- and ``# comments`` may appear between tokens)::

    spec     := NAME_P '(' args ')' | '(' args ')' | args          -- then end of input
    args     := [arg (',' arg)* [',']]                             -- keywords after positionals
    arg      := entry | ('unreduced' | 'reduced') '=' axisset | 'unreduced_kind' '=' KIND
    KIND     := ['jax.sharding.' | 'sharding.'] ['UnreducedKind.'] NAME | STRING  -- sum (JAX 0.12: max, min)
    entry    := 'None' | UNCONSTRAINED | STRING | '(' [STRING (',' STRING)* [',']] ')'
    axisset  := '{' strings '}' | ('set' | 'frozenset') '(' ['{' strings '}'] ')'
    strings  := [STRING (',' STRING)* [',']]
    NAME_P   := ['jax.'] ['sharding.'] ('P' | 'PartitionSpec') | 'PS'   -- e.g. jax.sharding.PartitionSpec
    UNCONSTRAINED := 'UNCONSTRAINED' | NAME_P '.UNCONSTRAINED'
    STRING   := '...' | "..." with escapes \\ \' \" \n \t

Decisions: a bare ``( ... )`` is read as P's argument list (``('x', 'y')`` is ``P('x', 'y')``)
unless a comma follows it, in which case it was the first entry (``('x', 'y'), None``). ``{}`` is
accepted as an empty set although Python would make it a dict. ``()`` as an entry means ``None``,
as JAX itself canonicalises it. An axis may appear only once in the whole spec (JAX accepts
``P('x', 'x')`` but no mesh can use it), reported as ``duplicate_axis`` with both columns.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from typing import NamedTuple

from jax.sharding import PartitionSpec

from sharding_core.compat import spec_entries, spec_repr, unreduced_kinds
from sharding_core.errors import DUPLICATE_AXIS, PARSE_ERROR, TOO_LARGE, ShardingError

MAX_SPEC_CHARS = 512
MAX_AXIS_NAME_CHARS = 64

# P and PartitionSpec under each import path people paste from (jax.P, jax.sharding.PartitionSpec, ...), and PS.
_SPEC_NAMES = frozenset(
    {"PS"} | {p + n for p in ("", "jax.", "sharding.", "jax.sharding.") for n in ("P", "PartitionSpec")}
)
_UNCONSTRAINED_NAMES = frozenset({"UNCONSTRAINED"} | {f"{n}.UNCONSTRAINED" for n in _SPEC_NAMES})
_KEYWORDS = ("unreduced", "reduced")
_PUNCT = "(){},="
_ESCAPES = {"\\": "\\", "'": "'", '"': '"', "n": "\n", "t": "\t"}
# Curly single/double quotes, primes, guillemets, backtick and acute accent: pasted from docs and chat.
_CURLY_QUOTES = frozenset("\u2018\u2019\u201a\u201b\u201c\u201d\u201e\u201f\u2032\u2033\u00ab\u00bb`\u00b4")
# Typographic quotes (what docs, chat and word processors make of ' and ") delimit strings as the
# straight quote of their kind does; primes, guillemets, backticks and accents are still refused.
_TYPOGRAPHIC = {"\u2018": "'", "\u2019": "'", "\u201a": "'", "\u201b": "'"} | {
    "\u201c": '"',
    "\u201d": '"',
    "\u201e": '"',
    "\u201f": '"',
}
_STRING_PREFIXES = frozenset({"r", "u", "b", "f", "br", "rb", "fr", "rf"})
# Both patterns are unambiguous (no nested repetition that could backtrack), so they run in
# linear time. Dotted names are one token: nobody writes ``jax . P``.
_SKIP = re.compile(r"(?:[ \t\r\n]|#[^\n]*)*")
_NAME = re.compile(r"[^\W\d]\w*(?:\.[^\W\d]\w*)*")
_QUOTE_HINT = "use straight quotes ' or \""
_SPEC_HINT = "paste only the PartitionSpec, e.g. P('x', None)"
_INVISIBLE_HINT = "delete it; it was probably pasted by accident"
_ESCAPE_LIST = "one of \\\\ \\' \\\" \\n \\t"
_ESCAPE_HINT = "axis names are plain text: drop the backslash, or write \\\\ for one"
_KEYWORD_HINT = "only unreduced=, reduced= and unreduced_kind= are accepted; paste the spec itself, without 'name ='"
_KIND = "unreduced_kind"
_KIND_PREFIXES = ("", "UnreducedKind.", "sharding.UnreducedKind.", "jax.sharding.UnreducedKind.")
# JAX leaves PartitionSpec.__new__ unannotated; calling through a typed alias keeps mypy
# --strict clean without a blanket ignore.
_make_spec: Callable[..., PartitionSpec] = PartitionSpec


def _unconstrained_sentinel() -> object | None:
    """JAX's UNCONSTRAINED marker, but only if ``P(UNCONSTRAINED)`` reprs the way we parse it."""
    sentinel: object | None = getattr(PartitionSpec, "UNCONSTRAINED", None)
    try:
        ok = sentinel is not None and spec_repr(_make_spec(sentinel)) == "P(UNCONSTRAINED,)"
    except (TypeError, ValueError):  # an incompatible JAX: treat the sentinel as unsupported
        ok = False
    return sentinel if ok else None


_UNCONSTRAINED = _unconstrained_sentinel()


class _Tok(NamedTuple):
    kind: str  # "name", "str", "end", or the punctuation character itself
    value: str
    col: int  # 1-based character offset of the token's first character

    def describe(self) -> str:
        """How the token reads in 'found X' messages."""
        if self.kind in ("str", "name"):
            return f"string {_clip(self.value)!r}" if self.kind == "str" else f"name {self.text}"
        return "end of input" if self.kind == "end" else f"'{self.value}'"

    @property
    def text(self) -> str:
        """The value shortened for messages, so a 100 KB name does not make a 100 KB error."""
        return _clip(self.value)


def _clip(value: str) -> str:
    return value if len(value) <= 40 else value[:37] + "..."


def _fail(col: int, message: str, hint: str) -> ShardingError:
    return ShardingError(PARSE_ERROR, f"{message} (column {col})", hint, column=col)


class _Lexer:
    """Turns text into tokens on demand, so the leftmost problem is the one reported."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self._buf: list[_Tok] = []  # at most two tokens of lookahead

    def peek(self, k: int = 0) -> _Tok:
        while len(self._buf) <= k:
            self._buf.append(self._scan())
        return self._buf[k]

    def next(self) -> _Tok:
        tok = self.peek()
        del self._buf[0]
        return tok

    def _scan(self) -> _Tok:
        text = self.text
        skipped = _SKIP.match(text, self.pos)  # always matches, possibly the empty string
        i = skipped.end() if skipped else self.pos
        if i >= len(text):
            self.pos = len(text)
            return _Tok("end", "", i + 1)
        ch = text[i]
        if ch in _PUNCT:
            self.pos = i + 1
            return _Tok(ch, ch, i + 1)
        if ch in "'\"" or ch in _TYPOGRAPHIC:
            return self._string(i)
        name = _NAME.match(text, i)
        if name is None:
            raise self._bad_char(i)
        end = name.end()
        if text.startswith(".", end):
            raise _fail(end + 1, "found '.' not followed by a name", _SPEC_HINT)
        if text[end : end + 1] in ("'", '"') and name.group().lower() in _STRING_PREFIXES:
            raise _fail(
                i + 1, f"found string prefix {name.group()}, expected a plain string", "write plain quotes: 'x'"
            )
        self.pos = end
        return _Tok("name", name.group(), i + 1)

    def _string(self, start: int, lenient: bool = False) -> _Tok:
        """A quoted string; escapes are decoded by hand since nothing may be evaluated.

        A string opened with a typographic quote (``‘x’``, ``“x”``) closes with any quote of its kind,
        straight or typographic; one opened with a straight quote closes with that quote, or, when it
        would otherwise be unterminated (``'x’``), with the first typographic quote of its kind.
        """
        text, n, opener = self.text, len(self.text), self.text[start]
        quote = _TYPOGRAPHIC.get(opener, opener)
        closers = {quote}
        if lenient or opener != quote:
            closers |= {c for c, q in _TYPOGRAPHIC.items() if q == quote}
        out: list[str] = []
        i = start + 1
        while i < n and text[i] not in "\r\n":  # strings cannot span lines, as in Python
            ch = text[i]
            if ch in closers:
                self.pos = i + 1
                return _Tok("str", "".join(out), start + 1)
            if not ch.isprintable():
                raise _fail(i + 1, f"found non-printable U+{ord(ch):04X} in a string, expected text", _INVISIBLE_HINT)
            if ch == "\\":
                esc = text[i + 1 : i + 2]
                if not esc:
                    i = n  # a backslash at the very end escapes nothing: unterminated
                    break
                if esc not in _ESCAPES:
                    raise _fail(i + 1, f"found unsupported escape \\{esc}, expected {_ESCAPE_LIST}", _ESCAPE_HINT)
                out.append(_ESCAPES[esc])
                i += 2
                continue
            out.append(ch)
            i += 1
        if not lenient and any(_TYPOGRAPHIC.get(text[j]) == quote for j in range(start + 1, i)):
            return self._string(start, lenient=True)  # ``'x<U+2019>``: closed with a typographic quote
        curly = next((j for j in range(start + 1, i) if text[j] in _CURLY_QUOTES), None)
        if curly is not None:  # ``'x<U+00B4>``: the string was "closed" with a look-alike of a quote
            found = f"curly quote {text[curly]}"
            raise _fail(
                curly + 1, f"found {found} in the string opened at column {start + 1}, expected {quote}", _QUOTE_HINT
            )
        found = "a line break" if i < n else "end of input"
        raise _fail(
            i + 1,
            f"found {found} in the string opened at column {start + 1}, expected {quote}",
            f"close it with {quote}",
        )

    def _bad_char(self, i: int) -> ShardingError:
        """Explain a character that starts no token, naming look-alikes of what was meant."""
        ch, code = self.text[i], f"U+{ord(self.text[i]):04X}"
        twin = unicodedata.normalize("NFKC", ch)
        if ch in _CURLY_QUOTES:
            return _fail(i + 1, f"found curly quote {ch}, expected a straight quote", _QUOTE_HINT)
        if twin != ch and len(twin) == 1 and twin in _PUNCT + " '\"":  # fullwidth parens, NBSP...
            return _fail(i + 1, f"found {ch!r} ({code}), a look-alike of {twin!r}", f"use the plain ASCII {twin!r}")
        if not ch.isprintable():
            return _fail(i + 1, f"found invisible or control character {code}, expected a token", _INVISIBLE_HINT)
        if ch.isdigit():
            return _fail(i + 1, "found a number, expected an axis name", "axis names are strings: write 'x'")
        if ch in "[]":
            return _fail(i + 1, f"found '{ch}', expected '(' or ')'", "several axes on one dimension: ('x', 'y')")
        return _fail(i + 1, f"found unexpected character {ch!r} ({code})", _SPEC_HINT)


class _Parser:
    """Recursive descent over :class:`_Lexer`; remembers axis columns to report duplicates."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.lex = _Lexer(text)
        self.seen: dict[str, int] = {}

    def parse(self) -> PartitionSpec:
        first = self.lex.peek()
        if first.kind == "end":
            raise _fail(1, "found no spec, expected a PartitionSpec", "write P() for a fully replicated array")
        if first.kind == "name" and first.value in _SPEC_NAMES and self.lex.peek(1).kind == "(":
            self.lex.next()
            spec = self._args(")", self.lex.next().col)
        elif first.kind == "(":
            spec = self._args(")", self.lex.next().col)
            if self.lex.peek().kind == ",":  # it was the first entry of a bare list: start over
                return _Parser(self.text)._args("end", 0)
        else:
            return self._args("end", 0)
        after = self.lex.peek()
        if after.kind != "end":
            raise _fail(
                after.col,
                f"found {after.describe()} after the closing ')', expected end of input",
                "remove it; the spec ends at its closing )",
            )
        return spec

    def _args(self, close: str, open_col: int) -> PartitionSpec:
        """Positional entries then keywords, up to ``close`` (')' or end of input)."""
        entries: list[object] = []
        sets: dict[str, frozenset[str]] = {}
        kind: dict[str, object] = {}
        closing = "')'" if close == ")" else "end of input"
        while (tok := self.lex.peek()).kind != close:
            if tok.kind == "name" and self.lex.peek(1).kind == "=" and tok.value == _KIND:
                if kind:
                    raise _fail(tok.col, f"found {_KIND}= twice, expected it once", "keep one of them")
                self.lex.next()
                self.lex.next()
                kind.update(self._kind())
            elif tok.kind == "name" and self.lex.peek(1).kind == "=":
                if tok.value not in _KEYWORDS:
                    found = f"found keyword {tok.text}=, expected unreduced=, reduced= or {_KIND}="
                    raise _fail(tok.col, found, _KEYWORD_HINT)
                if tok.value in sets:
                    raise _fail(tok.col, f"found {tok.value}= twice, expected it once", "merge the two sets into one")
                self.lex.next()
                self.lex.next()
                sets[tok.value] = self._axis_set()
            elif sets or kind:
                found = f"positional {tok.describe()} after a keyword argument"
                raise _fail(tok.col, f"found {found}, expected a keyword or {closing}", "put entries before keywords")
            else:
                entries.append(self._entry())
            sep = self.lex.peek()
            if sep.kind == ",":
                self.lex.next()
            elif sep.kind != close:
                hint = {"end": f"close the '(' opened at column {open_col}", ")": "remove the unmatched ')'"}
                raise _fail(
                    sep.col, f"found {sep.describe()}, expected ',' or {closing}", hint.get(sep.kind, "add a ','")
                )
        self.lex.next()
        try:
            unreduced, reduced = (sets.get(key, frozenset()) for key in _KEYWORDS)
            extra = {_KIND: kind[_KIND]} if kind.get(_KIND) is not None else {}
            return _make_spec(*entries, unreduced=unreduced, reduced=reduced, **extra)
        except (ValueError, TypeError) as exc:  # our checks should pre-empt these; stay total
            raise _fail(1, f"JAX rejected the spec: {exc}", _SPEC_HINT) from None

    def _entry(self) -> object:
        """One dimension: None, UNCONSTRAINED, an axis name, or a flat tuple of axis names."""
        tok = self.lex.next()
        if tok.kind == "str":
            return self._axis(tok)
        if tok.kind == "(":
            names = self._strings(")", "tuple")
            return tuple(names) if names else None  # JAX canonicalises () to None
        if tok.kind == "name" and tok.value == "None":
            return None
        if tok.kind == "name" and tok.value in _UNCONSTRAINED_NAMES:
            if _UNCONSTRAINED is None:
                raise _fail(tok.col, "found UNCONSTRAINED, unsupported by this JAX version", "use None instead")
            return _UNCONSTRAINED
        raise self._unexpected(tok, "an axis name, None or a tuple of axis names")

    def _kind(self) -> dict[str, object]:
        """``unreduced_kind=sum`` (JAX 0.12 prints it; ``max`` and ``min`` where that JAX has them)."""
        tok = self.lex.next()
        kinds = unreduced_kinds()
        name = tok.value if tok.kind == "str" else None
        if tok.kind == "name":
            name = next((tok.value[len(p) :] for p in reversed(_KIND_PREFIXES) if tok.value.startswith(p)), None)
        if name not in kinds:
            allowed = ", ".join(kinds)
            raise _fail(tok.col, f"found {_KIND}={tok.text}, expected one of {allowed}", f"e.g. {_KIND}=sum")
        return {_KIND: kinds[name]}

    def _axis_set(self) -> frozenset[str]:
        """``{'x', 'y'}``, ``{}``, ``set()``, ``frozenset({...})`` as unreduced/reduced values."""
        tok = self.lex.next()
        if tok.kind == "{":
            return frozenset(self._strings("}", "set"))
        if tok.kind == "name" and tok.value in ("set", "frozenset") and self.lex.peek().kind == "(":
            self.lex.next()
            names: list[str] = []
            if self.lex.peek().kind == "{":
                self.lex.next()
                names = self._strings("}", "set")
            if (close := self.lex.next()).kind != ")":
                raise _fail(close.col, f"found {close.describe()}, expected ')'", f"write {tok.value}({{'x'}})")
            return frozenset(names)
        raise self._unexpected(tok, "a set of axis names like {'x', 'y'}")

    def _strings(self, close: str, what: str) -> list[str]:
        """Comma-separated axis names up to ``close``; anything nested is rejected here."""
        example = "('x', 'y')" if close == ")" else "{'x', 'y'}"
        names: list[str] = []
        while (tok := self.lex.next()).kind != close:
            if tok.kind == "str":
                names.append(self._axis(tok))
            elif tok.kind in ("(", "{"):
                raise _fail(
                    tok.col, f"found '{tok.kind}' in a {what}, expected an axis name", f"a flat {what}: {example}"
                )
            elif tok.value == "None" or tok.value in _UNCONSTRAINED_NAMES:
                raise _fail(tok.col, f"found {tok.value} in a {what}, expected an axis name", "use it as a whole entry")
            else:
                raise self._unexpected(tok, f"an axis name or '{close}'")
            sep = self.lex.peek()
            if sep.kind == ",":
                self.lex.next()
            elif sep.kind != close:
                raise _fail(
                    sep.col, f"found {sep.describe()} in a {what}, expected ',' or '{close}'", f"write {example}"
                )
        return names

    def _axis(self, tok: _Tok) -> str:
        """Validate one axis name and remember where it was, to catch repeats anywhere."""
        name = tok.value
        if not name:
            raise _fail(tok.col, "found an empty axis name '', expected a name", "write a name like 'x', or None")
        if len(name) > MAX_AXIS_NAME_CHARS:
            found = f"an axis name of {len(name)} characters"
            raise _fail(tok.col, f"found {found}, expected at most {MAX_AXIS_NAME_CHARS}", "use a shorter name")
        if not name.isprintable():
            raise _fail(tok.col, f"found non-printable axis name {name!r}, expected text", "remove \\n and \\t")
        if name in self.seen:
            first = self.seen[name]
            raise ShardingError(
                DUPLICATE_AXIS,
                f"axis {name!r} is used twice in the spec (columns {first} and {tok.col})",
                "a mesh axis may shard at most one dimension and cannot also be unreduced/reduced",
                column=tok.col,
                first_column=first,
                axis=name,
            )
        self.seen[name] = tok.col
        return name

    def _unexpected(self, tok: _Tok, expected: str) -> ShardingError:
        """The error for a token that cannot start what we need, with the most useful hint."""
        if tok.kind == "name" and tok.value in _SPEC_NAMES:
            return _fail(tok.col, f"found {tok.text}, expected {expected}", "write the spec once: P('x', None)")
        try:
            is_call = tok.kind == "name" and self.lex.peek().kind == "("
        except ShardingError:  # a lexing problem further right must not hide this one
            is_call = False
        if is_call:
            sharding = tok.value.rsplit(".", 1)[-1] == "NamedSharding"
            hint = "paste only the spec, the second argument of NamedSharding(mesh, spec)" if sharding else _SPEC_HINT
            return _fail(tok.col, f"found call to {tok.text}(...), expected {expected}", hint)
        if tok.kind == "name":
            found, fix = f"unquoted name {tok.text}", f"axis names are strings: write {tok.text!r}"
            return _fail(tok.col, f"found {found}, expected {expected}", fix)
        other = {"end": "close the parenthesis", ",": "remove the extra ','"}.get(tok.kind, _SPEC_HINT)
        return _fail(tok.col, f"found {tok.describe()}, expected {expected}", other)


def parse_spec(text: str, *, max_chars: int = MAX_SPEC_CHARS) -> PartitionSpec:
    """Parse pasted spec text (grammar in the module docstring); raises only ShardingError."""
    if not isinstance(text, str):
        raise _fail(1, f"found {type(text).__name__}, expected spec text", _SPEC_HINT)
    if len(text) > max_chars:  # checked before any tokenizing, so huge inputs cost nothing
        raise ShardingError(
            TOO_LARGE,
            f"spec text is {len(text)} characters, the limit is {max_chars}",
            "paste a single PartitionSpec",
            column=max(1, max_chars + 1),
        )
    return _Parser(text).parse()


def canonical_spec(spec: PartitionSpec) -> str:
    """JAX's own repr, e.g. ``P('x', None)``: one spelling to display, store and compare (the same
    in every JAX version: :func:`sharding_core.compat.spec_repr`).

    repr writes unreduced/reduced sets in Python set order, which for two or more names depends
    on the process's string hash seed; compare specs, not strings, across processes.
    """
    return spec_repr(spec)


def spec_axes(spec: PartitionSpec) -> list[str]:
    """Mesh axis names used by ``spec`` in reading order, duplicates kept (for validation).

    Entries and tuple members come first, in order, then unreduced and then reduced names, each
    set sorted since sets have no order. None, UNCONSTRAINED and non-string names are skipped.
    """
    out: list[str] = []
    for entry in spec_entries(spec):
        members = entry if isinstance(entry, tuple) else (entry,)
        out.extend(n for n in members if isinstance(n, str))
    for group in (spec.unreduced, spec.reduced):
        out.extend(sorted(n for n in group if isinstance(n, str)))
    return out
