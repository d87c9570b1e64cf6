"""The work of one HLO instruction: flops and transcendentals as XLA's ``HloCostAnalysis`` counts them, and
the HBM bytes a top-level instruction reads and writes.

* **flops** (``xla/service/hlo_cost_analysis.cc``): ``dot`` 2 × output elements × contracted size;
  ``convolution`` 2 × input features per group × output features × batch × the (output, kernel) position
  pairs that read a real input element per spatial dimension (padding, strides and dilations included);
  one per output element for elementwise arithmetic and comparisons, one per reduced element for
  ``reduce``; transcendentals apart. Fused computations are counted where they are called.
* **bytes accessed**: each top-level instruction's operands and result (what crosses HBM between kernels;
  fusion internals stay on chip), as ``HloCostAnalysis`` counts a fusion; slices (``dynamic-slice``,
  ``slice``, ``gather``, and fusion parameters used only through them — a scanned layer's weights) read
  what they take; an in-place ``dynamic-update-slice`` writes only the update.
* **matmul traffic**: the bytes a dot or convolution reads and writes (its operands and result) — the
  scaling book's arithmetic-intensity denominator ("Rooflines", *arithmetic intensity*).

Totals per computation and per step are :class:`sharding_core.hlo.program.ProgramFacts`'s.
"""

from __future__ import annotations

import math
import re
from typing import Any

from sharding_core.hlo.module import Computation, Module, Op
from sharding_core.hlo.text import ELEMENT_BITS, _shapes

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
SLICING = frozenset(("dynamic-slice", "slice", "gather"))
MATMUL = frozenset(("dot", "convolution"))


def elements(shape: str) -> int:
    return sum(math.prod(s.dims) for s in _shapes(shape))


def nbytes(shape: str) -> int:
    return sum((math.prod(s.dims) * ELEMENT_BITS.get(s.dtype, 0) + 7) // 8 for s in _shapes(shape))


def _dims(shape: str) -> tuple[int, ...]:
    found = _shapes(shape)
    return found[0].dims if found else ()


def element_type(shape: str) -> str:
    found = _shapes(shape)
    return found[0].dtype if found else "?"


def _dot_flops(comp: Computation, op: Op) -> float:
    out = elements(op.shape)
    lhs = _dims(comp.shape_of(op.operands[0])) if op.operands else ()
    text = op.attrs.get("lhs_contracting_dims", "{}")
    contracting = [int(d) for d in text.strip("{}").split(",") if d.strip()]
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


def valid_positions(
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


def _conv_flops(comp: Computation, op: Op) -> float:
    m = re.fullmatch(r"([0-9a-z]+)_([0-9a-z]+)->([0-9a-z]+)", op.attrs.get("dim_labels", ""))
    if not m or len(op.operands) < 2:
        return 0.0
    lhs_l, rhs_l, out_l = m.groups()
    lhs = _dims(comp.shape_of(op.operands[0]))
    rhs = _dims(comp.shape_of(op.operands[1]))
    out = _dims(op.shape)
    if len(lhs) != len(lhs_l) or len(rhs) != len(rhs_l) or len(out) != len(out_l):
        return 0.0
    win = _window(op.attrs.get("window", "{}"))
    spatial = sorted(c for c in lhs_l if c.isdigit())
    product = 1
    for n, s in enumerate(spatial):
        product *= valid_positions(
            lhs[lhs_l.index(s)],
            out[out_l.index(s)],
            rhs[rhs_l.index(s)],
            (win.get("stride") or [1] * len(spatial))[n],
            (win.get("pad") or [(0, 0)] * len(spatial))[n][0],
            (win.get("lhs_dilate") or [1] * len(spatial))[n],
            (win.get("rhs_dilate") or [1] * len(spatial))[n],
        )
    groups = int(op.attrs.get("feature_group_count", "1"))
    batch_groups = int(op.attrs.get("batch_group_count", "1"))
    in_features = lhs[lhs_l.index("f")]
    out_features = out[out_l.index("f")]
    batch = lhs[lhs_l.index("b")]
    return 2.0 * (in_features // groups) * out_features * (batch // batch_groups) * product


def flops(comp: Computation, op: Op) -> tuple[float, float]:
    """(flops, transcendentals) of one instruction, as HloCostAnalysis counts them."""
    code = op.opcode
    if code == "dot":
        return _dot_flops(comp, op), 0.0
    if code == "convolution":
        return _conv_flops(comp, op), 0.0
    if code in ELEMENTWISE:
        return float(elements(op.shape)), 0.0
    if code in TRANSCENDENTAL:
        return 0.0, float(elements(op.shape))
    if code == "reduce" and op.operands:
        inputs = op.operands[: len(op.operands) // 2]
        reduced = sum(elements(comp.shape_of(i)) for i in inputs)
        return float(max(reduced - elements(op.shape), 0)), 0.0
    return 0.0, 0.0


def matmul_traffic(comp: Computation, op: Op) -> int:
    """Bytes a dot or convolution reads (its two operands) and writes (its result)."""
    return sum(nbytes(comp.shape_of(o)) for o in op.operands[:2]) + nbytes(op.shape)


def _fused(module: Module, op: Op) -> Computation | None:
    called = op.called("calls")
    return module.computations.get(called[0]) if called else None


def _operand_reads(module: Module, comp: Computation, op: Op) -> list[float]:
    """Bytes each operand of ``op`` is read for: whole, or only the slices a fusion takes of it."""
    whole = [float(nbytes(comp.shape_of(o))) for o in op.operands]
    if op.opcode in SLICING:
        return [float(nbytes(op.shape))] + [0.0] * (len(whole) - 1) if whole else []
    if op.opcode == "dynamic-update-slice" and len(whole) >= 2:
        return [0.0, whole[1], *[0.0] * (len(whole) - 2)]  # in place: the update is read, the rest stays
    fused = _fused(module, op) if op.opcode == "fusion" else None
    if fused is None:
        return whole
    params = {n: f.name for f in fused.ops if (n := f.parameter_number) is not None}
    users: dict[str, list[Op]] = {}
    for f in fused.ops:
        for o in f.operands:
            users.setdefault(o, []).append(f)
    out = list(whole)
    for i, name in params.items():
        used = users.get(name, [])
        if i >= len(out) or not used:
            continue
        if all(u.opcode in SLICING and u.operands[:1] == (name,) for u in used):
            out[i] = float(sum(nbytes(u.shape) for u in used))  # only the slices are read (a scanned layer's weights)
        elif all(u.opcode == "dynamic-update-slice" and u.operands[:1] == (name,) for u in used):
            out[i] = 0.0  # updated in place
    return out


def _written(module: Module, comp: Computation, op: Op) -> float:
    """Bytes ``op`` writes: its result, or only the update of an in-place dynamic-update-slice."""
    if op.opcode == "dynamic-update-slice" and len(op.operands) >= 2:
        return float(nbytes(comp.shape_of(op.operands[1])))
    fused = _fused(module, op) if op.opcode == "fusion" else None
    root = fused.root if fused is not None else None
    if fused is not None and root is not None and root.opcode == "dynamic-update-slice" and len(root.operands) >= 2:
        return float(nbytes(fused.shape_of(root.operands[1])))
    return float(nbytes(op.shape))


def bytes_accessed(module: Module, comp: Computation, op: Op) -> float:
    """HBM bytes a top-level instruction reads and writes, as HloCostAnalysis counts them."""
    if op.opcode in NO_TRAFFIC:
        return 0.0
    return _written(module, comp, op) + sum(_operand_reads(module, comp, op))
