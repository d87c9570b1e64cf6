"""How often each part of a compiled program runs per step, and its flops and bytes counted through loops.

XLA's ``cost_analysis`` counts a ``while`` body once (a scan over 32 layers is counted as one layer), so
any roofline built on it is optimistic by about the trip count. This module reads the optimized HLO text:

* each computation's **multiplicity** — how many times it runs per step: the entry once; a ``while``'s
  body ``trip count`` times its caller's multiplicity (its condition once more); fusions, calls and
  async wrappers as often as their caller. The trip count is the ``known_trip_count`` XLA records in the
  while's backend config (GPU), else read from the loop condition (``compare(counter, constant(N)),
  direction=LT`` with the counter's initial value from the while's operand tuple), as XLA's own
  ``while_loop_analysis`` matches it.
* **flops**, counted as XLA's ``HloCostAnalysis`` counts them (``xla/service/hlo_cost_analysis.cc``):
  ``dot`` 2 × output elements × contracted size; ``convolution`` 2 × the multiply-adds of valid
  (output, kernel) positions per spatial dimension × input features per group × output features × batch;
  one per output element for elementwise arithmetic and comparisons, one per reduced element for
  ``reduce``; transcendentals apart. Fused computations are counted where they are called.
* **bytes accessed**: each top-level instruction's operands and result (what crosses HBM between
  kernels; fusion internals stay on chip), as ``HloCostAnalysis`` counts a fusion.

Totals are per device (XLA compiles one SPMD partition). With every multiplicity 1 the flop count is
XLA's own for the same program (``tests/test_planning.py`` checks it); with the real multiplicities it
is the step's.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Iterable
from typing import Any

from sharding_core.hlo.text import _BITS, _attributes, _op_and_rest, _shapes

_HEADER = re.compile(r"^(ENTRY\s+)?%?(?P<name>[\w.\-]+)\s*\(")
_LINE = re.compile(r"^\s*(?:ROOT\s+)?%?(?P<name>[\w.\-]+)\s*=\s*")
_OPERAND = re.compile(r"%([\w.\-]+)")
_TRIP = re.compile(r'"known_trip_count"\s*:\s*\{\s*"n"\s*:\s*"(\d+)"')

# Opcodes HloCostAnalysis counts one flop per output element for (elementwise arithmetic, compare, select...).
ELEMENTWISE = frozenset(
    [
        "abs",
        "add",
        "and",
        "atan2",
        "cbrt",
        "ceil",
        "clamp",
        "compare",
        "complex",
        "convert",
        "divide",
        "floor",
        "imag",
        "is-finite",
        "maximum",
        "minimum",
        "multiply",
        "negate",
        "not",
        "or",
        "popcnt",
        "power",
        "real",
        "remainder",
        "round-nearest-afz",
        "round-nearest-even",
        "select",
        "shift-left",
        "shift-right-arithmetic",
        "shift-right-logical",
        "sign",
        "subtract",
        "xor",
        "clz",
        "stochastic-convert",
    ]
)
TRANSCENDENTAL = frozenset(
    [
        "cosine",
        "erf",
        "exponential",
        "exponential-minus-one",
        "log",
        "log-plus-one",
        "logistic",
        "rsqrt",
        "sine",
        "sqrt",
        "tan",
        "tanh",
    ]
)
# Instructions that move no data of their own (views, tuples, control): no bytes accessed.
NO_TRAFFIC = frozenset(
    [
        "parameter",
        "constant",
        "tuple",
        "get-tuple-element",
        "bitcast",
        "while",
        "call",
        "conditional",
        "after-all",
        "add-dependency",
        "partition-id",
        "replica-id",
        "opt-barrier",
        "domain",
        "copy-done",
        "all-gather-done",
        "all-reduce-done",
        "collective-permute-done",
        "async-done",
        "async-update",
        "send-done",
        "recv-done",
    ]
)


@dataclasses.dataclass(frozen=True)
class Instruction:
    name: str
    op: str
    shape: str  # the result shape as HLO prints it
    operands: tuple[str, ...]
    attrs: dict[str, str]


@dataclasses.dataclass
class Computation:
    name: str
    entry: bool
    instructions: list[Instruction]
    shapes: dict[str, str]  # instruction / parameter name -> shape text

    def shape_of(self, name: str) -> str:
        return self.shapes.get(name, "")


@dataclasses.dataclass(frozen=True)
class Loop:
    """A ``while`` loop: where it is, how many times its body runs each time it is reached."""

    name: str
    computation: str  # where the while instruction is
    body: str
    trip_count: int | None  # None when neither XLA's config nor the condition says
    how: str  # "backend_config" (XLA's known_trip_count), "condition" or "unknown"
    source: str | None  # the JAX op that made it (metadata op_name)


@dataclasses.dataclass
class Program:
    computations: dict[str, Computation]
    order: list[str]  # text order: callees before callers
    entry: str

    def fused(self) -> set[str]:
        """Computations called as fusions (their traffic is on chip)."""
        out: set[str] = set()
        for comp in self.computations.values():
            for ins in comp.instructions:
                if ins.op == "fusion" and "calls" in ins.attrs:
                    out.update(_callees(ins.attrs["calls"]))
        return out


def parse_program(hlo: str) -> Program:
    """The module's computations and instructions (the parts this module reads)."""
    comps: dict[str, Computation] = {}
    order: list[str] = []
    entry = ""
    current: Computation | None = None
    for line in hlo.splitlines():
        if not line or line[0] in " \t":
            if current is None:
                continue
            m = _LINE.match(line)
            if not m:
                continue
            parsed = _op_and_rest(line, m.end())
            if parsed is None:
                continue
            shape, op, rest = parsed
            args_start = line.index(op + "(", m.end()) + len(op)
            args_text = line[args_start + 1 : len(line) - len(rest)].rstrip(", ").rstrip()
            args_text = args_text[:-1] if args_text.endswith(")") else args_text
            operands = tuple(_OPERAND.findall(args_text))
            attrs = _attributes(rest)
            if op == "parameter":
                attrs["parameter_number"] = args_text.strip()
            ins = Instruction(m.group("name"), op, shape, operands, attrs)
            current.instructions.append(ins)
            current.shapes[ins.name] = shape
            continue
        if line.startswith("}"):
            current = None
            continue
        h = _HEADER.match(line)
        if h and line.rstrip().endswith("{"):
            name = h.group("name")
            current = Computation(name, line.startswith("ENTRY"), [], {})
            comps[name] = current
            order.append(name)
            if current.entry:
                entry = name
    if not entry and order:
        entry = order[-1]
    return Program(comps, order, entry)


def _callees(text: str) -> list[str]:
    return [c.lstrip("%") for c in re.findall(r"%?[\w.\-]+", text.strip("{}")) if c]


_CONST_VALUE = re.compile(r"%(?P<name>[\w.\-]+)\s*=\s*[su](?:8|16|32|64)\[\]\S*\s+constant\((?P<value>-?\d+)\)")


def _constants(hlo: str) -> dict[str, int]:
    return {m.group("name"): int(m.group("value")) for m in _CONST_VALUE.finditer(hlo)}


def _trip_count(
    program: Program, comp: Computation, ins: Instruction, constants: dict[str, int]
) -> tuple[int | None, str]:
    m = _TRIP.search(ins.attrs.get("backend_config", ""))
    if m:
        return int(m.group(1)), "backend_config"
    cond = program.computations.get(ins.attrs.get("condition", "").lstrip("%"))
    if cond is None:
        return None, "unknown"
    root = cond.instructions[-1] if cond.instructions else None
    compare = root if root is not None and root.op == "compare" else None
    if compare is None or len(compare.operands) != 2:
        return None, "unknown"
    direction = compare.attrs.get("direction", "")
    a, b = compare.operands
    index = {i.name: i for i in cond.instructions}
    bound = constants.get(b)
    counter = index.get(a)
    if bound is None or counter is None or counter.op != "get-tuple-element" or direction not in ("LT", "LE"):
        return None, "unknown"
    element = int(counter.attrs.get("index", "-1"))
    start = 0
    first = ins.operands[0] if ins.operands else ""
    init = next((i for i in comp.instructions if i.name == first), None)
    if init is not None and init.op == "tuple" and 0 <= element < len(init.operands):
        start = constants.get(init.operands[element], 0)
    trips = bound - start + (1 if direction == "LE" else 0)
    return max(trips, 0), "condition"


def multiplicities(program: Program, hlo: str) -> tuple[dict[str, int], list[Loop]]:
    """How many times each computation runs per execution of the entry, and the program's loops.

    A loop whose trip count cannot be read counts its body once (XLA's own convention) and says so.
    """
    constants = _constants(hlo)
    mult: dict[str, int] = dict.fromkeys(program.computations, 0)
    mult[program.entry] = 1
    loops: list[Loop] = []
    for name in reversed(program.order):  # callers come after callees in the text
        comp = program.computations[name]
        m = mult.get(name, 0)
        if m == 0:
            continue
        for ins in comp.instructions:
            if ins.op == "while":
                trips, how = _trip_count(program, comp, ins, constants)
                body = ins.attrs.get("body", "").lstrip("%")
                cond = ins.attrs.get("condition", "").lstrip("%")
                meta = re.search(r'op_name="([^"]*)"', ins.attrs.get("metadata", ""))
                loops.append(Loop(ins.name, name, body, trips, how, meta.group(1) if meta else None))
                n = trips if trips is not None else 1
                if body in mult:
                    mult[body] += m * n
                if cond in mult:
                    mult[cond] += m * (n + 1)
                continue
            for key in ("calls", "branch_computations", "true_computation", "false_computation"):
                if key in ins.attrs:
                    for callee in _callees(ins.attrs[key]):
                        if callee in mult:
                            mult[callee] += m
    return mult, loops


# ---- flops and bytes ------------------------------------------------------------------------------


def _elements(shape: str) -> int:
    return sum(math.prod(s.dims) for s in _shapes(shape))


def _bytes(shape: str) -> int:
    total = 0
    for s in _shapes(shape):
        bits = _BITS.get(s.dtype, 0)
        total += (math.prod(s.dims) * bits + 7) // 8
    return total


def _dims(shape: str) -> tuple[int, ...]:
    found = _shapes(shape)
    return found[0].dims if found else ()


def _dot_flops(comp: Computation, ins: Instruction) -> float:
    out = _elements(ins.shape)
    lhs = _dims(comp.shape_of(ins.operands[0])) if ins.operands else ()
    contracting = [int(d) for d in ins.attrs.get("lhs_contracting_dims", "{}").strip("{}").split(",") if d.strip()]
    k = math.prod(lhs[d] for d in contracting if d < len(lhs)) if lhs else 1
    return 2.0 * out * k


def _window(text: str) -> dict[str, list[Any]]:
    """``{size=1x2 pad=0_0x1_1 stride=3x1 lhs_dilate=4x1}`` -> per-spatial-dimension lists."""
    out: dict[str, list[Any]] = {}
    for part in text.strip("{}").split():
        key, _, value = part.partition("=")
        if key == "pad":
            out[key] = [tuple(int(x) for x in p.split("_")) for p in value.split("x")]
        else:
            out[key] = [int(x) for x in value.split("x")]
    return out


def _valid_positions(
    input_size: int, output_size: int, kernel: int, stride: int, pad_low: int, lhs_dilate: int, rhs_dilate: int
) -> int:
    """(output, kernel) position pairs that read a real input element (HloCostAnalysis's count)."""
    count = 0
    for k in range(kernel):
        for o in range(output_size):
            idx = o * stride - pad_low + k * rhs_dilate
            if idx % lhs_dilate:
                continue
            idx //= lhs_dilate
            if 0 <= idx < input_size:
                count += 1
    return count


def _conv_flops(comp: Computation, ins: Instruction) -> float:
    labels = ins.attrs.get("dim_labels", "")
    m = re.fullmatch(r"([0-9a-z]+)_([0-9a-z]+)->([0-9a-z]+)", labels)
    if not m or len(ins.operands) < 2:
        return 0.0
    lhs_l, rhs_l, out_l = m.groups()
    lhs = _dims(comp.shape_of(ins.operands[0]))
    rhs = _dims(comp.shape_of(ins.operands[1]))
    out = _dims(ins.shape)
    if len(lhs) != len(lhs_l) or len(rhs) != len(rhs_l) or len(out) != len(out_l):
        return 0.0
    win = _window(ins.attrs.get("window", "{}"))
    spatial = sorted(c for c in lhs_l if c.isdigit())
    product = 1
    for n, s in enumerate(spatial):
        size = rhs[rhs_l.index(s)]
        product *= _valid_positions(
            lhs[lhs_l.index(s)],
            out[out_l.index(s)],
            size,
            (win.get("stride") or [1] * len(spatial))[n],
            (win.get("pad") or [(0, 0)] * len(spatial))[n][0],
            (win.get("lhs_dilate") or [1] * len(spatial))[n],
            (win.get("rhs_dilate") or [1] * len(spatial))[n],
        )
    groups = int(ins.attrs.get("feature_group_count", "1"))
    batch_groups = int(ins.attrs.get("batch_group_count", "1"))
    in_features = lhs[lhs_l.index("f")]
    out_features = out[out_l.index("f")]
    batch = lhs[lhs_l.index("b")]
    return 2.0 * (in_features // groups) * out_features * (batch // batch_groups) * product


def instruction_flops(comp: Computation, ins: Instruction) -> tuple[float, float]:
    """(flops, transcendentals) of one instruction, as HloCostAnalysis counts them."""
    op = ins.op
    if op == "dot":
        return _dot_flops(comp, ins), 0.0
    if op == "convolution":
        return _conv_flops(comp, ins), 0.0
    if op in ELEMENTWISE:
        return float(_elements(ins.shape)), 0.0
    if op in TRANSCENDENTAL:
        return 0.0, float(_elements(ins.shape))
    if op == "reduce" and ins.operands:
        inputs = ins.operands[: len(ins.operands) // 2]
        reduced = sum(_elements(comp.shape_of(i)) for i in inputs)
        return float(max(reduced - _elements(ins.shape), 0)), 0.0
    return 0.0, 0.0


SLICING = frozenset(("dynamic-slice", "slice", "gather"))


def _operand_reads(program: Program, comp: Computation, ins: Instruction) -> list[float]:
    """Bytes each operand of ``ins`` is read for: whole, or only the slices a fusion takes of it."""
    whole = [float(_bytes(comp.shape_of(o))) for o in ins.operands]
    if ins.op in SLICING:
        return [float(_bytes(ins.shape))] + [0.0] * (len(whole) - 1) if whole else []
    if ins.op == "dynamic-update-slice" and len(whole) >= 2:
        return [0.0, whole[1], *[0.0] * (len(whole) - 2)]  # in place: the update is read, the rest stays
    if ins.op != "fusion":
        return whole
    fused = program.computations.get(ins.attrs.get("calls", "").lstrip("%"))
    if fused is None:
        return whole
    params: dict[int, str] = {}
    for f in fused.instructions:
        if f.op == "parameter" and f.attrs.get("parameter_number", "").isdigit():
            params[int(f.attrs["parameter_number"])] = f.name
    users: dict[str, list[Instruction]] = {}
    for f in fused.instructions:
        for o in f.operands:
            users.setdefault(o, []).append(f)
    out = list(whole)
    for i, name in params.items():
        used = users.get(name, [])
        if i < len(out) and used and all(u.op in SLICING and u.operands[:1] == (name,) for u in used):
            out[i] = float(sum(_bytes(u.shape) for u in used))  # only the slices are read (a scanned layer's weights)
        elif i < len(out) and used and all(u.op == "dynamic-update-slice" and u.operands[:1] == (name,) for u in used):
            out[i] = 0.0  # updated in place
    return out


def _written(program: Program, comp: Computation, ins: Instruction) -> float:
    """Bytes ``ins`` writes: its result, or only the update of an in-place dynamic-update-slice."""
    if ins.op == "dynamic-update-slice" and len(ins.operands) >= 2:
        return float(_bytes(comp.shape_of(ins.operands[1])))
    if ins.op == "fusion":
        fused = program.computations.get(ins.attrs.get("calls", "").lstrip("%"))
        root = fused.instructions[-1] if fused is not None and fused.instructions else None
        if root is not None and root.op == "dynamic-update-slice" and len(root.operands) >= 2:
            return float(_bytes(fused.shape_of(root.operands[1]))) if fused is not None else 0.0
    return float(_bytes(ins.shape))


def instruction_bytes(program: Program, comp: Computation, ins: Instruction) -> float:
    """HBM bytes a top-level instruction reads and writes, as HloCostAnalysis counts them: slices read only
    what they take (``dynamic-slice`` of a scanned layer's weights reads that layer), in-place updates write
    only the update."""
    if ins.op in NO_TRAFFIC:
        return 0.0
    return _written(program, comp, ins) + sum(_operand_reads(program, comp, ins))


@dataclasses.dataclass(frozen=True)
class ProgramCounts:
    """A compiled program's work per device and step, loops included."""

    flops: float
    transcendentals: float
    bytes_accessed: float
    flops_once: float  # every loop body counted once (what XLA's cost_analysis counts)
    bytes_once: float
    matmul_flops: dict[str, float]  # dot and convolution flops per step by their operands' element type
    multiplicity: dict[str, int]
    loops: list[Loop]

    def loops_json(self) -> list[dict[str, Any]]:
        return [dataclasses.asdict(loop) for loop in self.loops]


def count(hlo: str) -> ProgramCounts:
    """Flops, transcendentals and bytes of an optimized HLO module per step (and with loops counted once)."""
    program = parse_program(hlo)
    mult, loops = multiplicities(program, hlo)
    fused = program.fused()
    flops = trans = nbytes = flops_once = bytes_once = 0.0
    matmul: dict[str, float] = {}
    for name, comp in program.computations.items():
        m = mult.get(name, 0)
        if m == 0:
            continue
        f = t = b = 0.0
        for ins in comp.instructions:
            fi, ti = instruction_flops(comp, ins)
            f += fi
            if ins.op in ("dot", "convolution") and ins.operands:
                found = _shapes(comp.shape_of(ins.operands[0]))
                dtype = found[0].dtype if found else "?"
                matmul[dtype] = matmul.get(dtype, 0.0) + m * fi
            t += ti
            if name not in fused:
                b += instruction_bytes(program, comp, ins)
        flops += m * f
        trans += m * t
        nbytes += m * b
        flops_once += f
        bytes_once += b
    return ProgramCounts(flops, trans, nbytes, flops_once, bytes_once, matmul, mult, loops)


def computation_of(hlo: str, names: Iterable[str]) -> dict[str, str]:
    """The computation each named instruction is in."""
    wanted = set(names)
    out: dict[str, str] = {}
    for comp in parse_program(hlo).computations.values():
        for ins in comp.instructions:
            if ins.name in wanted:
                out[ins.name] = comp.name
    return out
