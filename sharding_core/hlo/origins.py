""" "Where did this sharding come from?": Shardy's sharding origins, read from its propagation dump.

Compiling with ``compiler_options={"xla_dump_to": DIR, "xla_dump_hlo_pass_re": "shardy-verbose"}``
makes Shardy write its module before and after propagation (``DIR/shardy/<module>/02.after_propagation.mlir``)
with debug attributes on every value whose sharding propagation decided: ``sdy.sharding_origins``
maps each mesh axis of the value's sharding to where it came from:

* ``self`` — given right here (an input's sharding, a constraint, ``out_shardings``);
* ``input: N`` / ``output: N`` — propagated from the function's N-th input / output;
* ``constraint_K`` — from the K-th ``with_sharding_constraint`` / ``reshard`` (the op that carries
  ``sdy.sharding_origin_name = "constraint_K"``);
* ``mc_K_input: N`` / ``mc_K_output: N`` — from the K-th ``shard_map``'s N-th in/out spec.

Pure text parsing; :func:`read_dump` finds the file.
"""

from __future__ import annotations

import dataclasses
import glob
import os
import re
from collections.abc import Sequence
from typing import Any

from sharding_core.hlo import text as hlo

MAX_ENTRIES = 400

_VALUE = re.compile(r"^\s*(?P<value>%[\w#:]+)\s*=\s*(?P<op>\"?[\w.]+\"?)")
_PAIR = re.compile(r"(?:\"(?P<q>[^\"]+)\"|(?P<n>[\w.\-]+))\s*=\s*\"(?P<origin>[^\"]*)\"")
_ARG = re.compile(r"%arg(\d+):\s*")
_DIM = re.compile(r"\{([^{}]*)\}")
_AXIS = re.compile(r"\"([^\"]+)\"(:\(\d+\)\d+)?")
_MC_ORIGIN = re.compile(r"^mc_(\d+)_(input|output): (\d+)$")


@dataclasses.dataclass(frozen=True)
class Origin:
    axis: str
    origin: str  # Shardy's text: "self", "input: 1", "constraint_0", ...
    meaning: str  # the same in words, with input names when known


@dataclasses.dataclass(frozen=True)
class OriginEntry:
    value: str  # "%3", "%arg0", "result 0", "%0 (shard_map in 1)"
    op: str  # "stablehlo.dot", "argument", "result", ...
    sharding: str | None  # the value's sharding as a PartitionSpec-like text
    origins: tuple[Origin, ...]
    name: str | None = None  # sdy.sharding_origin_name of a constraint or shard_map


def balanced(text: str, start: int, open_ch: str, close_ch: str) -> int:
    """Index just past the bracket closing ``text[start]``; lenient: an unclosed bracket runs to the end of the text
    (a truncated dump still yields what it has), and the ``->`` of a sharding rule is no ``>``."""
    if open_ch == "<":
        depth = 0
        for i in range(start, len(text)):
            c = text[i]
            if c == "<":
                depth += 1
            elif c == ">" and text[i - 1] != "-":  # the "->" of a sharding rule is no bracket
                depth -= 1
                if depth == 0:
                    return i + 1
        return len(text)
    try:
        return hlo.balanced_end(text, start, open_ch, close_ch)
    except hlo.HloParseError:
        return len(text)


def attribute(text: str, name: str) -> str | None:
    """The value of ``name = ...`` in an MLIR attribute dictionary, brackets balanced (``[...]``, ``{...}``,
    ``#dialect<...>``, ``<...>``, a quoted string, or a bare word); None when absent or an unclosed quote. The one
    reader of Shardy's attributes (:mod:`sharding_core.why.sdy` reads the module with it too)."""
    m = re.search(rf"(?<![\w.]){re.escape(name)}\s*=\s*", text)
    if not m:
        return None
    i = m.end()
    if i >= len(text):
        return None
    c = text[i]
    if c in "[{":
        return text[i : balanced(text, i, c, "]" if c == "[" else "}")]
    if c == "#":
        lt = text.find("<", i)
        return text[i : balanced(text, lt, "<", ">")] if lt >= 0 else None
    if c == "<":
        return text[i : balanced(text, i, "<", ">")]
    if c == '"':
        close = text.find('"', i + 1)
        return text[i : close + 1] if close > i else None
    end = re.search(r"[,}\s]", text[i:])
    return text[i : i + end.start()] if end else text[i:]


def _dicts(text: str) -> list[list[tuple[str, str]]]:
    """``{x = "self"}`` or ``[{x = "a"}, {}]`` -> one list of (axis, origin) per value."""
    t = text.strip()
    if t.startswith("["):
        out: list[list[tuple[str, str]]] = []
        i = 1
        while True:
            j = t.find("{", i)
            if j < 0:
                break
            k = balanced(t, j, "{", "}")
            out.append(pairs(t[j:k]))
            i = k
        return out
    return [pairs(t)]


def pairs(text: str) -> list[tuple[str, str]]:
    """``x = "self", "y" = "input: 1"`` -> ``[("x", "self"), ("y", "input: 1")]`` (Shardy's origin attributes)."""
    return [(m.group("q") or m.group("n"), m.group("origin")) for m in _PAIR.finditer(text)]


def sharding_to_spec(text: str | None) -> str | None:
    """``#sdy.sharding<@mesh, [{"x"}, {}]>`` -> ``P('x', None)``; sub-axes stay as ``'x:(1)2'``."""
    if not text:
        return None
    lb = text.find("[")
    if lb < 0:
        return None
    dims_text = text[lb : balanced(text, lb, "[", "]")]
    entries: list[str] = []
    for dim in _DIM.findall(dims_text):
        axes = [a + (sub or "") for a, sub in _AXIS.findall(dim)]
        open_dim = "?" in dim
        if not axes:
            entries.append("UNCONSTRAINED" if open_dim else "None")
        elif len(axes) == 1:
            entries.append(repr(axes[0]))
        else:
            entries.append("(" + ", ".join(map(repr, axes)) + ")")
    while entries and entries[-1] == "None":
        entries.pop()
    return "P(" + ", ".join(entries) + ")"


def _per_value(text: str | None) -> list[str | None]:
    """Shardings of each result: ``#sdy.sharding_per_value<[<@m, ...>, <@m, ...>]>`` or one ``#sdy.sharding``."""
    if not text:
        return []
    if text.startswith("#sdy.sharding_per_value"):
        inner = text[text.index("[") :]
        out: list[str | None] = []
        i = 1
        while True:
            j = inner.find("<", i)
            if j < 0:
                break
            k = balanced(inner, j, "<", ">")
            out.append(sharding_to_spec(inner[j:k]))
            i = k
        return out
    return [sharding_to_spec(text)]


def explain(origin: str, input_names: Sequence[str] = ()) -> str:
    """Shardy's origin text in words."""
    if origin == "self":
        return "given here"
    m = re.fullmatch(r"(input|output): (\d+)", origin)
    if m:
        i = int(m.group(2))
        if m.group(1) == "input":
            name = f" ({input_names[i]})" if i < len(input_names) else ""
            return f"propagated from input {i}{name}"
        return f"propagated back from output {i} (its out_sharding)"
    m = re.fullmatch(r"constraint_(\d+)", origin)
    if m:
        return f"from sharding constraint #{m.group(1)} (with_sharding_constraint / reshard)"
    m = _MC_ORIGIN.fullmatch(origin)
    if m:
        spec = "in_specs" if m.group(2) == "input" else "out_specs"
        return f"from shard_map #{m.group(1)}'s {spec}[{m.group(3)}]"
    return origin


def _origins(pairs: list[tuple[str, str]], input_names: Sequence[str]) -> tuple[Origin, ...]:
    return tuple(Origin(axis, origin, explain(origin, input_names)) for axis, origin in pairs)


@dataclasses.dataclass(frozen=True)
class OriginsReport:
    entries: tuple[OriginEntry, ...]
    outputs: tuple[OriginEntry | None, ...]  # one per function result
    truncated: bool


def parse_origins(mlir: str, input_names: Sequence[str] = ()) -> OriginsReport:
    """Every value with ``sdy.sharding_origins`` in a Shardy after-propagation module, in text order."""
    entries: list[OriginEntry] = []
    results: list[OriginEntry | None] = []
    by_value: dict[str, OriginEntry] = {}
    returned: list[str] = []
    stack: list[tuple[str, str]] = []  # open region ops (value, op)
    in_main = False
    for raw in mlir.splitlines():
        line = raw.strip()
        if line.startswith("func.func"):
            in_main = "@main(" in line
            if in_main:
                entries.extend(_arguments(line, input_names))
                results = list(_results(line, input_names))
            continue
        vm = _VALUE.match(line)
        if vm:
            value, op = vm.group("value").split(":")[0], vm.group("op").strip('"')
            origins_text = attribute(line, "sdy.sharding_origins")
            name_text = attribute(line, "sdy.sharding_origin_name")
            name = name_text.strip('"') if name_text else None
            if origins_text is not None:
                shardings = _per_value(attribute(line, "sdy.sharding"))
                if not shardings and op in ("sdy.reshard", "sdy.sharding_constraint") and "<@" in line:
                    # These carry their sharding as an operand: `sdy.reshard %1 <@mesh, [{"x"}, {}]>`.
                    start = line.index("<@")
                    shardings = [sharding_to_spec(line[start : balanced(line, start, "<", ">")])]
                per = _dicts(origins_text)
                for k, pairs in enumerate(per):
                    label = value if len(per) == 1 else f"{value}#{k}"
                    entry = OriginEntry(
                        label,
                        op,
                        shardings[k] if k < len(shardings) else None,
                        _origins(pairs, input_names),
                        name,
                    )
                    entries.append(entry)
                    by_value[label] = entry
            if line.endswith("{") or (line.endswith("({") and "(" in line):
                stack.append((value, op))
            continue
        if line.startswith("}") and stack and "sdy." in line:
            value, op = stack.pop()
            name_text = attribute(line, "sdy.sharding_origin_name")
            name = name_text.strip('"') if name_text else None
            for key, what in (("sdy.block_arg_sharding_origins", "in"), ("sdy.result_sharding_origins", "out")):
                text = attribute(line, key)
                if text is None:
                    continue
                for k, pairs in enumerate(_dicts(text)):
                    if pairs:
                        entries.append(
                            OriginEntry(
                                f"{value} ({'shard_map' if 'manual' in op else op} {what} {k})",
                                op,
                                None,
                                _origins(pairs, input_names),
                                name,
                            )
                        )
            continue
        if line.startswith("}") and stack:
            stack.pop()
            continue
        if line.startswith("return ") and in_main and not stack:
            returned = [v.strip() for v in line[len("return ") :].split(":")[0].split(",")]
    outputs: list[OriginEntry | None] = []
    for i, value in enumerate(returned):
        given = results[i] if i < len(results) else None
        outputs.append(given if given is not None else by_value.get(value))
    truncated = len(entries) > MAX_ENTRIES
    return OriginsReport(tuple(entries[:MAX_ENTRIES]), tuple(outputs), truncated)


def _func_params(line: str) -> tuple[str, str]:
    """The argument list and the result list of a ``func.func`` line."""
    open_paren = line.index("(")
    close = balanced(line, open_paren, "(", ")")
    args = line[open_paren + 1 : close - 1]
    rest = line[close:].strip()
    results = ""
    if rest.startswith("-> ("):
        start = rest.index("(")
        results = rest[start + 1 : balanced(rest, start, "(", ")") - 1]
    return args, results


def split_values(text: str) -> list[str]:
    """Top-level comma-separated items (brackets of every kind balanced)."""
    out: list[str] = []
    depth = 0
    quote = False
    cur = 0
    for i, c in enumerate(text):
        if c == '"':
            quote = not quote
        if quote:
            continue
        if c in "([{<":
            depth += 1
        elif c in ")]}>" and not (c == ">" and i > 0 and text[i - 1] == "-"):
            depth -= 1
        elif c == "," and depth == 0:
            out.append(text[cur:i])
            cur = i + 1
    out.append(text[cur:])
    return [p.strip() for p in out if p.strip()]


def _arguments(line: str, input_names: Sequence[str]) -> list[OriginEntry]:
    args, _ = _func_params(line)
    out: list[OriginEntry] = []
    for item in split_values(args):
        m = _ARG.match(item)
        if not m:
            continue
        origins_text = attribute(item, "sdy.sharding_origins")
        if origins_text is None:
            continue
        i = int(m.group(1))
        label = f"%arg{i}" + (f" ({input_names[i]})" if i < len(input_names) else "")
        out.append(
            OriginEntry(
                label,
                "argument",
                sharding_to_spec(attribute(item, "sdy.sharding")),
                _origins(_dicts(origins_text)[0], input_names),
            )
        )
    return out


def _results(line: str, input_names: Sequence[str]) -> list[OriginEntry | None]:
    _, results = _func_params(line)
    out: list[OriginEntry | None] = []
    for k, item in enumerate(split_values(results)):
        origins_text = attribute(item, "sdy.sharding_origins")
        if origins_text is None:
            out.append(None)
            continue
        out.append(
            OriginEntry(
                f"result {k}",
                "result",
                sharding_to_spec(attribute(item, "sdy.sharding")),
                _origins(_dicts(origins_text)[0], input_names),
            )
        )
    return out


def read_dump(dump_dir: str) -> str | None:
    """The after-propagation module Shardy wrote under ``dump_dir`` (None if it wrote none)."""
    found = sorted(glob.glob(os.path.join(dump_dir, "shardy", "*", "*after_propagation.mlir")))
    if not found:
        return None
    with open(found[-1], encoding="utf-8", errors="replace") as f:
        return f.read()


def report_json(report: OriginsReport) -> dict[str, Any]:
    def entry(e: OriginEntry) -> dict[str, Any]:
        return {
            "value": e.value,
            "op": e.op,
            "sharding": e.sharding,
            "name": e.name,
            "origins": [{"axis": o.axis, "origin": o.origin, "meaning": o.meaning} for o in e.origins],
        }

    return {
        "entries": [entry(e) for e in report.entries],
        "outputs": [entry(e) if e is not None else None for e in report.outputs],
        "truncated": report.truncated,
    }
