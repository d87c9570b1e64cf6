"""Facts about a compiled HLO module beyond its collectives: its computations, how often each runs (``while``
loops' ``known_trip_count``, nested loops multiplied), and the matmul work and traffic inside each.

XLA's ``cost_analysis()`` counts a loop body once (``HloCostAnalysis`` visits each computation once, whatever
its trip count: a ``lax.scan`` of 32 layers reports one layer's flops), and the optimized HLO says how many
times a loop runs: XLA's ``WhileLoopTripCountAnnotator`` writes ``backend_config={..."known_trip_count":
{"n":"32"}}`` on the ``while`` (``xla/service/while_loop_trip_count_annotator.cc``). From those this module
gives each computation its number of runs per program run (:attr:`ProgramFacts.runs`) — a loop body runs
``n`` times per run of the computation holding the loop, its condition ``n + 1``, anything it calls as often
as it does — and corrects the flops of dots and convolutions for them (:meth:`ProgramFacts.corrected_flops`).
A loop without a known trip count is counted once and named in :attr:`ProgramFacts.unknown_loops`.

Pure text parsing, no JAX import; the cost model reads these facts when a result is read.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re
from typing import Any

from sharding_core.hlo.text import ArrayShape, HloParseError, Instr, _shapes, computation_header, instructions

_TRIP_COUNT = re.compile(r'"known_trip_count"\s*:\s*\{\s*"n"\s*:\s*"(\d+)"')
_CALLED = re.compile(r"\b(body|condition|calls|to_apply|true_computation|false_computation)=%?([\w.\-]+)")
_BRANCHES = re.compile(r"\bbranch_computations=\{([^}]*)\}")
_OPERAND = re.compile(r"%([\w.\-]+)")
_CONTRACTING = re.compile(r"\blhs_contracting_dims=\{([0-9,]*)\}")
_DIM_LABELS = re.compile(r"\bdim_labels=(\w+)_(\w+)->(\w+)")

# ``to_apply`` names a called computation for ``call``; for reductions, maps, sorts and scatters it is a
# per-element function (a reducer, a comparator): not program work, never holding collectives.
_CALL_OPCODES = ("call",)


def entry_name(hlo: str) -> str | None:
    for line in hlo.splitlines():
        stripped = line.strip()
        if stripped.startswith("ENTRY "):
            return computation_header(stripped)
    return None


@dataclasses.dataclass(frozen=True)
class Loop:
    """A ``while`` instruction: where it is, what it runs and how many times per run of its computation."""

    name: str
    computation: str
    body: str
    condition: str
    trip_count: int | None

    def json(self, runs: int) -> dict[str, Any]:
        return {"name": self.name, "computation": self.computation, "body": self.body,
                "trip_count": self.trip_count, "runs": runs}  # fmt: skip


@dataclasses.dataclass(frozen=True)
class ProgramFacts:
    """A module's loops, each computation's runs per program run, and its dots' flops and bytes."""

    entry: str | None
    loops: tuple[Loop, ...]
    calls: dict[str, tuple[tuple[str, int | None, str], ...]]  # callee -> (caller, multiplier, how)
    dot_flops: dict[str, float]  # per computation: 2 · MACs of its dots and convolutions, one run
    dot_bytes: dict[str, int]  # per computation: bytes its dots and convolutions read and write, one run
    reducers: dict[str, str] = dataclasses.field(default_factory=dict)  # reduction collective -> to_apply
    widened_from: dict[str, str] = dataclasses.field(default_factory=dict)  # collective -> the type converted from

    @functools.cached_property
    def runs(self) -> dict[str, int]:
        """Runs of each computation per program run (an unknown trip count counts once)."""
        out: dict[str, int] = {}

        def visit(comp: str, stack: tuple[str, ...]) -> int:
            if comp in out:
                return out[comp]
            if comp == self.entry or comp not in self.calls:
                out[comp] = 1
                return 1
            if comp in stack:  # a cycle cannot happen in HLO; never loop forever on odd text
                return 1
            total = 0
            for caller, mult, _ in self.calls[comp]:
                total += visit(caller, (*stack, comp)) * (mult if mult is not None else 1)
            out[comp] = max(total, 1)
            return out[comp]

        for comp in {*self.calls, *(c for calls in self.calls.values() for c, _, _ in calls)}:
            visit(comp, ())
        return out

    def runs_of(self, computation: str) -> int:
        return self.runs.get(computation, 1)

    @functools.cached_property
    def unknown_loops(self) -> tuple[str, ...]:
        return tuple(loop.name for loop in self.loops if loop.trip_count is None)

    def enclosing_loops(self, computation: str) -> list[dict[str, Any]]:
        """The loops a computation runs inside, outermost first (through calls and fusions)."""
        chain: list[dict[str, Any]] = []
        seen: set[str] = set()
        comp = computation
        while comp in self.calls and comp not in seen:
            seen.add(comp)
            caller, _, how = self.calls[comp][0]
            if how == "body":
                loop = next((lp for lp in self.loops if lp.computation == caller and lp.body == comp), None)
                if loop is not None:
                    chain.append({"loop": loop.name, "trip_count": loop.trip_count})
            comp = caller
        return chain[::-1]

    def corrected_flops(self, xla_flops: float | None) -> float | None:
        """XLA's flops with every dot and convolution counted as often as its computation runs (XLA counts
        each once): ``flops + Σ dot_flops(c) · (runs(c) − 1)``."""
        if xla_flops is None:
            return None
        extra = sum(f * (self.runs_of(c) - 1) for c, f in self.dot_flops.items())
        return float(xla_flops) + extra

    def matmul_traffic(self) -> int:
        """Bytes the program's dots and convolutions read and write, each as often as it runs: the book's
        arithmetic-intensity denominator (a matmul reads its operands and writes its result)."""
        return int(sum(b * self.runs_of(c) for c, b in self.dot_bytes.items()))

    def json(self) -> dict[str, Any]:
        """The loops with their trip counts and runs (the reader's ``loops`` fact)."""
        return {
            "loops": [loop.json(self.runs_of(loop.computation)) for loop in self.loops],
            "unknown_trip_counts": list(self.unknown_loops),
        }


def _array(shape_text: str) -> ArrayShape | None:
    shapes = _shapes(shape_text)
    return shapes[0] if len(shapes) == 1 else None


def _dot_work(ins: Instr, shapes: dict[tuple[str, str], str]) -> tuple[float, int] | None:
    """(flops, bytes) of a dot or convolution: 2 · result elements · contracted elements; operands + result."""
    result = _array(ins.shape)
    names = _OPERAND.findall(ins.operands)
    if result is None or len(names) < 2:
        return None
    lhs = _array(shapes.get((ins.computation, names[0]), ""))
    rhs = _array(shapes.get((ins.computation, names[1]), ""))
    if lhs is None or rhs is None:
        return None
    out = math.prod(result.dims)
    if ins.opcode == "dot":
        m = _CONTRACTING.search(ins.attrs)
        dims = [int(d) for d in m.group(1).split(",") if d] if m else []
        contracted = math.prod(lhs.dims[d] for d in dims if d < len(lhs.dims))
        flops = 2.0 * out * contracted
    else:
        labels = _DIM_LABELS.search(ins.attrs)
        kernel = labels.group(2) if labels else ""
        o = kernel.find("o")
        if o < 0 or o >= len(rhs.dims) or not rhs.dims[o]:
            return None
        flops = 2.0 * out * math.prod(rhs.dims) / rhs.dims[o]
    return flops, lhs.bytes + rhs.bytes + result.bytes


def program_facts(hlo: str) -> ProgramFacts:
    """The facts of an optimized HLO module (``compiled.as_text()``)."""
    entry = entry_name(hlo)
    loops: list[Loop] = []
    calls: dict[str, list[tuple[str, int | None, str]]] = {}
    shapes: dict[tuple[str, str], str] = {}
    dots: list[Instr] = []
    reducers: dict[str, str] = {}
    defs: dict[tuple[str, str], Instr] = {}
    roots: dict[str, Instr] = {}
    collectives: list[Instr] = []
    for ins in instructions(hlo):
        shapes[(ins.computation, ins.name)] = ins.shape
        defs[(ins.computation, ins.name)] = ins
        if ins.line.lstrip().startswith("ROOT "):
            roots[ins.computation] = ins
        if ins.opcode in ("dot", "convolution"):
            dots.append(ins)
        if ins.opcode.removesuffix("-start") in _COLLECTIVES:
            collectives.append(ins)
        if ins.opcode.removesuffix("-start") in ("all-reduce", "reduce-scatter"):
            reducer = re.search(r"\bto_apply=%?([\w.\-]+)", ins.attrs)
            if reducer:
                reducers[ins.name] = reducer.group(1)
        called = _CALLED.findall(ins.attrs)
        branches = _BRANCHES.search(ins.attrs)
        if not called and not branches:
            continue
        trip: int | None = None
        if ins.opcode == "while":
            m = _TRIP_COUNT.search(ins.attrs)
            trip = int(m.group(1)) if m else None
            body = next((c for how, c in called if how == "body"), "")
            cond = next((c for how, c in called if how == "condition"), "")
            loops.append(Loop(ins.name, ins.computation, body, cond, trip))
        for how, callee in called:
            if how == "to_apply" and ins.opcode not in _CALL_OPCODES:
                continue
            mult: int | None = 1
            if how == "body":
                mult = trip
            elif how == "condition":
                mult = trip + 1 if trip is not None else None
            calls.setdefault(callee, []).append((ins.computation, mult, how))
        if branches:
            for callee in _OPERAND.findall(branches.group(1)) or re.findall(r"[\w.\-]+", branches.group(1)):
                calls.setdefault(callee, []).append((ins.computation, 1, "branch"))
    dot_flops: dict[str, float] = {}
    dot_bytes: dict[str, int] = {}
    for ins in dots:
        work = _dot_work(ins, shapes)
        if work is None:
            continue
        flops, nbytes = work
        dot_flops[ins.computation] = dot_flops.get(ins.computation, 0.0) + flops
        dot_bytes[ins.computation] = dot_bytes.get(ins.computation, 0) + nbytes
    widened = {c.name: t for c in collectives if (t := _converted_from(c, defs, roots)) is not None}
    return ProgramFacts(
        entry, tuple(loops), {k: tuple(v) for k, v in calls.items()}, dot_flops, dot_bytes, reducers, widened
    )


_COLLECTIVES = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute")
_NARROW = ("bf16", "f16")


def _converted_from(c: Instr, defs: dict[tuple[str, str], Instr], roots: dict[str, Instr]) -> str | None:
    """The 16-bit float type a collective's f32 operand was converted from, when its operand is nothing but that
    conversion: XLA's CPU compiler widens bf16 collectives so (``AllReducePromotion`` for reductions, float
    normalization for the rest: ``convert`` → collective → ``convert`` back), a TPU or GPU program moves bf16."""
    result = _array(c.shape) if not c.shape.startswith("(") else None
    names = _OPERAND.findall(c.operands)
    if not names or (result is not None and result.dtype != "f32"):
        return None
    op = defs.get((c.computation, names[0]))
    if op is None:
        return None
    if op.opcode == "fusion":
        callee = re.search(r"\bcalls=%?([\w.\-]+)", op.attrs)
        op = roots.get(callee.group(1)) if callee else None
        if op is None or op.opcode != "convert":
            return None
        source = _OPERAND.findall(op.operands)
        inner = defs.get((op.computation, source[0])) if source else None
        if inner is None or inner.opcode != "parameter":
            return None
        src = _array(inner.shape)
    elif op.opcode == "convert":
        source = _OPERAND.findall(op.operands)
        inner = defs.get((op.computation, source[0])) if source else None
        src = _array(inner.shape) if inner is not None else None
    else:
        return None
    out = _array(op.shape)
    if src is None or out is None or out.dtype != "f32" or src.dtype not in _NARROW:
        return None
    if "convert_element_type" in op.attrs:  # the program's own cast (jnp sums bf16 in f32): not the compiler's
        return None
    return src.dtype


def loops_json(hlo: str) -> dict[str, Any]:
    """The loop facts of a module as plain data (``{"loops": [...], "unknown_trip_counts": [...]}``)."""
    try:
        return program_facts(hlo).json()
    except HloParseError:
        return {"loops": [], "unknown_trip_counts": []}
