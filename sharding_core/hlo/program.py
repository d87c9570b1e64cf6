"""The loop reader: how often each part of a compiled program runs per step, and its work counted through loops.

XLA's ``cost_analysis()`` counts a ``while`` body once (``HloCostAnalysis`` visits each computation once,
whatever its trip count: a ``lax.scan`` of 32 layers reports one layer's flops), and a collective inside a
scanned layer appears once in the HLO text. This module reads how many times each loop runs and gives every
computation its number of runs per program run (:attr:`ProgramFacts.runs`): the entry once; a ``while``'s
body its trip count times per run of the computation holding the loop, its condition once more; fusions,
calls, async wrappers and conditional branches as often as their caller. A collective's ``repeat``, the
program's flops and bytes per step (:attr:`ProgramFacts.work`) and XLA's figures corrected for loops
(:meth:`ProgramFacts.corrected`) all come from these runs.

A loop's trip count is, in this order:

* ``backend_config={..."known_trip_count":{"n":"32"}}``, which XLA's ``WhileLoopTripCountAnnotator`` writes
  on each ``while`` it can count (``xla/service/while_loop_trip_count_annotator.cc``; the CPU and GPU
  compilers run it) — ``how: "backend_config"``;
* else the loop itself, matched as XLA's own ``MatchTrivialLoopTripCount`` matches it
  (``xla/hlo/analysis/while_loop_analysis.cc``): the condition's root compares the induction variable
  ``get-tuple-element(param, i)`` with a constant ``N`` (``i < N`` or ``i <= N``, either operand order),
  the body's root tuple sets element ``i`` to ``add(get-tuple-element(param, i), constant k)`` with
  ``k > 0`` (each operand through copies), and the while's operand tuple starts it at a constant (through
  copies) —
  ``ceil((N − start) / k)`` runs for ``<``, ``floor((N − start) / k) + 1`` for ``<=``; ``how:
  "condition"``. libtpu's TPU programs carry no ``known_trip_count``: their scans are counted this way;
* else unknown: counted once, and named in :attr:`ProgramFacts.unknown_loops` (``how: "unknown"``).

Pure text parsing, no JAX import; the cost model reads these facts when a result is read.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Mapping
from typing import Any

from sharding_core.hlo import work as hlo_work
from sharding_core.hlo.module import Computation, Module, Op, entry_name, parse_module
from sharding_core.hlo.text import HloParseError, _shapes

__all__ = ["Loop", "ProgramFacts", "Work", "entry_name", "loops_json", "program_facts"]

_TRIP_COUNT = re.compile(r'"known_trip_count"\s*:\s*\{\s*"n"\s*:\s*"(\d+)"')
_OP_NAME = re.compile(r'op_name="([^"]*)"')

# Attributes that name computations run as part of the program (``to_apply`` only for ``call``: for
# reductions, maps, sorts and scatters it is a per-element function, not program work, never holding
# collectives).
_CALL_KEYS = ("calls", "true_computation", "false_computation", "branch_computations")

BACKEND_CONFIG = "backend_config"
CONDITION = "condition"
UNKNOWN = "unknown"


@dataclasses.dataclass(frozen=True)
class Loop:
    """A ``while`` instruction: where it is, what it runs and how many times per run of its computation."""

    name: str
    computation: str
    body: str
    condition: str
    trip_count: int | None  # None when neither XLA's annotation nor the loop itself says
    how: str  # "backend_config" (XLA's known_trip_count), "condition" (read from the loop) or "unknown"
    source: str | None = None  # the JAX op that made it (metadata op_name)

    def json(self, runs: int) -> dict[str, Any]:
        return {"name": self.name, "computation": self.computation, "body": self.body, "condition": self.condition,
                "trip_count": self.trip_count, "how": self.how, "source": self.source, "runs": runs}  # fmt: skip


@dataclasses.dataclass(frozen=True)
class Work:
    """A program's work per device (XLA compiles one SPMD partition): per step, loops counted, and with every
    computation counted once (what XLA's ``cost_analysis`` counts)."""

    flops: float
    transcendentals: float
    bytes_accessed: float
    flops_once: float
    transcendentals_once: float
    bytes_once: float
    matmul_flops: dict[str, float]  # dot and convolution flops per step by their first operand's element type
    matmul_traffic: int  # bytes dots and convolutions read and write per step


@dataclasses.dataclass(frozen=True)
class ProgramFacts:
    """A module's loops, each computation's runs per program run, and what the reader counts from them."""

    module: Module
    loops: tuple[Loop, ...]
    calls: dict[str, tuple[tuple[str, int | None, str], ...]]  # callee -> (caller, multiplier, how)
    reducers: dict[str, str] = dataclasses.field(default_factory=dict)  # reduction collective -> to_apply
    widened_from: dict[str, str] = dataclasses.field(default_factory=dict)  # collective -> the type converted from

    @property
    def entry(self) -> str:
        return self.module.entry

    @functools.cached_property
    def runs(self) -> dict[str, int]:
        """Runs of each computation the entry calls per program run (an unknown trip count counts once; the body
        of a loop that runs no times, 0); computations the program never runs as program work (reducers,
        comparators) are absent."""
        out: dict[str, int] = {}

        def visit(comp: str, stack: frozenset[str]) -> int:
            if comp in out:
                return out[comp]
            if comp == self.entry:
                out[comp] = 1
                return 1
            if comp in stack or comp not in self.calls:  # a cycle cannot happen in HLO; never loop on odd text
                return 0
            total = sum(
                visit(caller, stack | {comp}) * (mult if mult is not None else 1)
                for caller, mult, _ in self.calls[comp]
            )
            out[comp] = total
            return total

        for comp in self.module.order:
            visit(comp, frozenset())
        return out

    def runs_of(self, computation: str) -> int:
        """Runs per program run of the computation holding an instruction (1 for one the entry does not call)."""
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
                    chain.append({"loop": loop.name, "trip_count": loop.trip_count, "how": loop.how})
            comp = caller
        return chain[::-1]

    @functools.cached_property
    def work(self) -> Work:
        """Flops, transcendentals and bytes per step (each computation times its runs) and once each."""
        module = self.module
        fused = {c for comp in module.computations.values() for op in comp.ops if op.opcode == "fusion"
                 for c in op.called("calls")}  # fmt: skip
        f_step = t_step = b_step = f_once = t_once = b_once = 0.0
        matmul: dict[str, float] = {}
        traffic = 0
        for name, runs in self.runs.items():
            comp = module.computations.get(name)
            if comp is None:
                continue
            f = t = b = 0.0
            for op in comp.ops:
                fi, ti = hlo_work.flops(comp, op)
                f += fi
                t += ti
                if op.opcode in hlo_work.MATMUL and op.operands:
                    dtype = hlo_work.element_type(comp.shape_of(op.operands[0]))
                    matmul[dtype] = matmul.get(dtype, 0.0) + runs * fi
                    traffic += runs * hlo_work.matmul_traffic(comp, op)
                if name not in fused:
                    b += hlo_work.bytes_accessed(module, comp, op)
            f_step += runs * f
            t_step += runs * t
            b_step += runs * b
            f_once += f
            t_once += t
            b_once += b
        return Work(f_step, t_step, b_step, f_once, t_once, b_once, matmul, traffic)

    def corrected(self, xla_value: float | None, what: str = "flops") -> float | None:
        """XLA's figure (``cost_analysis``, each loop body counted once) with every computation counted as often
        as it runs: ``xla + Σ_c counted(c) · (runs(c) − 1)``, the reader's count of each computation's ``what``
        (``flops``, ``transcendentals`` or ``bytes_accessed``). Without XLA's figure (GPU compile-only
        executables have no ``cost_analysis``) the reader's own count per step."""
        w = self.work
        step, once = {
            "flops": (w.flops, w.flops_once),
            "transcendentals": (w.transcendentals, w.transcendentals_once),
            "bytes_accessed": (w.bytes_accessed, w.bytes_once),
        }[what]
        if xla_value is None:
            return step
        return float(xla_value) + (step - once)

    def corrected_flops(self, xla_flops: float | None) -> float | None:
        """:meth:`corrected` flops, or None without XLA's figure (the kernel lab's ``loop_corrected_flops``)."""
        return self.corrected(xla_flops) if xla_flops is not None else None

    def matmul_traffic(self) -> int:
        """Bytes the program's dots and convolutions read and write, each as often as it runs: the book's
        arithmetic-intensity denominator (a matmul reads its operands and writes its result)."""
        return self.work.matmul_traffic

    def json(self) -> dict[str, Any]:
        """The loops with their trip counts and runs (the reader's ``loops`` fact)."""
        return {
            "loops": [loop.json(self.runs_of(loop.computation)) for loop in self.loops],
            "unknown_trip_counts": list(self.unknown_loops),
        }

    def cost(self, xla: Mapping[str, Any]) -> dict[str, Any]:
        """XLA's ``cost_analysis`` figures and the loop facts that correct them: the kernel lab's ``cost``."""

        def get(name: str) -> float | None:
            v = xla.get(name)
            return float(v) if v is not None else None

        loops = self.json()
        return {
            "flops": get("flops"),
            "bytes_accessed": get("bytes accessed"),
            "transcendentals": get("transcendentals"),
            "optimal_seconds": get("optimal_seconds"),
            "loop_corrected_flops": self.corrected(get("flops")),
            "loop_corrected_bytes_accessed": self.corrected(get("bytes accessed"), "bytes_accessed"),
            "matmul_traffic_bytes": self.matmul_traffic(),
            "matmul_flops_by_dtype": dict(self.work.matmul_flops),
            "loops": loops["loops"],
            "unknown_trip_counts": loops["unknown_trip_counts"],
        }


# ---- trip counts -------------------------------------------------------------------------------------------


def _through_copies(comp: Computation, name: str) -> Op | None:
    """The instruction ``name`` is a copy of (XLA's ``TraceThroughCopyAndGteTupleChain``: copies, and a
    get-tuple-element of a tuple built in the same computation)."""
    op = comp.by_name.get(name)
    for _ in range(64):
        if op is None:
            return None
        if op.opcode in ("copy", "copy-start", "copy-done") and op.operands:
            op = comp.by_name.get(op.operands[0])
        elif op.opcode == "get-tuple-element" and op.operands:
            src = comp.by_name.get(op.operands[0])
            index = op.attrs.get("index", "")
            if src is None or src.opcode != "tuple" or not index.isdigit() or int(index) >= len(src.operands):
                return op
            op = comp.by_name.get(src.operands[int(index)])
        else:
            return op
    return op


def _tuple_index(comp: Computation, op: Op | None) -> int | None:
    """``i`` when ``op`` is ``get-tuple-element(parameter(0)), index=i`` of ``comp``."""
    if op is None or op.opcode != "get-tuple-element" or not op.operands:
        return None
    src = comp.by_name.get(op.operands[0])
    index = op.attrs.get("index", "")
    if src is None or src.parameter_number != 0 or not index.isdigit():
        return None
    return int(index)


def _condition_trip_count(module: Module, holder: Computation, op: Op) -> int | None:
    """The trip count of a ``while`` from its condition, body and initial tuple, as XLA's
    ``MatchTrivialLoopTripCount`` reads it (see the module docstring), or None."""
    cond = module.computations.get(next(iter(op.called("condition")), ""))
    body = module.computations.get(next(iter(op.called("body")), ""))
    if cond is None or body is None or not op.operands:
        return None
    root = cond.root
    if root is None or root.opcode != "compare" or len(root.operands) != 2:
        return None
    direction = root.attrs.get("direction", "")
    a, b = (cond.by_name.get(o) for o in root.operands)
    if _tuple_index(cond, a) is not None and b is not None and b.integer is not None:
        index, bound = _tuple_index(cond, a), b.integer
    elif _tuple_index(cond, b) is not None and a is not None and a.integer is not None:
        index, bound = _tuple_index(cond, b), a.integer
        direction = {"GT": "LT", "GE": "LE"}.get(direction, "")  # N > i is i < N
    else:
        return None
    if index is None or direction not in ("LT", "LE"):
        return None
    # the body's update of element i: add(gte(param, i), constant k), k > 0, through copies
    body_root = body.root
    if body_root is None or body_root.opcode != "tuple" or index >= len(body_root.operands):
        return None
    update = _through_copies(body, body_root.operands[index])
    if update is None or update.opcode != "add" or len(update.operands) != 2:
        return None
    x, y = (body.by_name.get(o) for o in update.operands)
    step = None
    for var, const in ((x, y), (y, x)):
        # the increment through copies too: libtpu copies the constant 1 of a microbatch loop around a scan
        value = _through_copies(body, const.name) if const is not None else None
        if value is not None and value.integer is not None and var is not None:
            traced = _through_copies(body, var.name)
            if _tuple_index(body, traced) == index:
                step = value.integer
    if step is None or step <= 0:
        return None
    # the start: element i of the while's operand tuple, a constant (through copies)
    init = holder.by_name.get(op.operands[0])
    if init is None or init.opcode != "tuple" or index >= len(init.operands):
        return None
    start_op = _through_copies(holder, init.operands[index])
    start = start_op.integer if start_op is not None else None
    if start is None:
        return None
    span = bound - start
    if direction == "LT":
        return 0 if span <= 0 else (span - 1) // step + 1
    return 0 if span < 0 else span // step + 1


def _trip_count(module: Module, holder: Computation, op: Op) -> tuple[int | None, str]:
    m = _TRIP_COUNT.search(op.attrs_text)
    if m:
        return int(m.group(1)), BACKEND_CONFIG
    trips = _condition_trip_count(module, holder, op)
    return (trips, CONDITION) if trips is not None else (None, UNKNOWN)


# ---- the facts ---------------------------------------------------------------------------------------------


def program_facts(hlo: str) -> ProgramFacts:
    """The facts of an optimized HLO module (``compiled.as_text()``)."""
    module = parse_module(hlo)
    loops: list[Loop] = []
    calls: dict[str, list[tuple[str, int | None, str]]] = {}
    reducers: dict[str, str] = {}
    collectives: list[Op] = []
    for comp in module.computations.values():
        for op in comp.ops:
            base = op.opcode.removesuffix("-start")
            if base in _COLLECTIVES:
                collectives.append(op)
                if base in ("all-reduce", "reduce-scatter"):
                    reducer = op.called("to_apply")
                    if reducer:
                        reducers[op.name] = reducer[0]
            if op.opcode == "while":
                trips, how = _trip_count(module, comp, op)
                body = next(iter(op.called("body")), "")
                cond = next(iter(op.called("condition")), "")
                meta = _OP_NAME.search(op.attrs.get("metadata", ""))
                loops.append(Loop(op.name, comp.name, body, cond, trips, how, meta.group(1) if meta else None))
                calls.setdefault(body, []).append((comp.name, trips, "body"))
                calls.setdefault(cond, []).append((comp.name, trips + 1 if trips is not None else None, "condition"))
                continue
            keys = _CALL_KEYS + (("to_apply",) if op.opcode == "call" else ())
            for key in keys:
                if f"{key}=" not in op.attrs_text:  # most instructions call nothing: skip reading their attributes
                    continue
                for callee in op.called(key):
                    calls.setdefault(callee, []).append((comp.name, 1, key))
    widened = {c.name: t for c in collectives if (t := _converted_from(module, c)) is not None}
    return ProgramFacts(module, tuple(loops), {k: tuple(v) for k, v in calls.items()}, reducers, widened)


_COLLECTIVES = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute")
_NARROW = ("bf16", "f16")


def _array_dtype(shape: str) -> str | None:
    shapes = _shapes(shape)
    return shapes[0].dtype if len(shapes) == 1 else None


def _converted_from(module: Module, c: Op) -> str | None:
    """The 16-bit float type a collective's f32 operand was converted from, when its operand is nothing but that
    conversion: XLA's CPU compiler widens bf16 collectives so (``AllReducePromotion`` for reductions, float
    normalization for the rest: ``convert`` → collective → ``convert`` back), a TPU or GPU program moves bf16."""
    comp = module.computations[c.computation]
    result = _array_dtype(c.shape) if not c.shape.startswith("(") else None
    if not c.operands or (result is not None and result != "f32"):
        return None
    op = comp.by_name.get(c.operands[0])
    if op is None:
        return None
    if op.opcode == "fusion":
        fused = module.computations.get(next(iter(op.called("calls")), ""))
        op = fused.root if fused is not None else None
        while fused is not None and op is not None and op.opcode in ("copy", "bitcast") and op.operands:
            op = fused.by_name.get(op.operands[0])  # a layout change fused after the convert
        if fused is None or op is None or op.opcode != "convert" or not op.operands:
            return None
        # the converted value: a parameter of the fusion, or — where the compiler rounds a widened value back to
        # 16 bits before the next collective (convert to bf16, convert to f32) — that narrowing
        inner = fused.by_name.get(op.operands[0])
        if inner is None or inner.opcode not in ("parameter", "convert"):
            return None
        src = _array_dtype(inner.shape)
    elif op.opcode == "convert" and op.operands:
        inner = comp.by_name.get(op.operands[0])
        src = _array_dtype(inner.shape) if inner is not None else None
    else:
        return None
    if src is None or _array_dtype(op.shape) != "f32" or src not in _NARROW:
        return None
    if "convert_element_type" in op.attrs_text:  # the program's own cast (jnp sums bf16 in f32): not the compiler's
        return None
    return src


def loops_json(hlo: str) -> dict[str, Any]:
    """The loop facts of a module as plain data (``{"loops": [...], "unknown_trip_counts": [...]}``)."""
    try:
        return program_facts(hlo).json()
    except HloParseError:
        return {"loops": [], "unknown_trip_counts": []}
