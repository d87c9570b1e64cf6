"""An optimized HLO module as data: its computations, each with its instructions in text order.

The one parse of a module's instructions for everything beyond collectives (loops, flops, bytes, buffer
names): :func:`parse_module` reads what :func:`sharding_core.hlo.text.instructions` scans, keeping each
instruction's operand names and its attribute text, read into a dict only when asked for (most instructions
are never asked: a 30-layer TPU program has tens of thousands, each with a long ``backend_config``).

Pure text parsing, no JAX import.
"""

from __future__ import annotations

import dataclasses
import functools
import re

from sharding_core.hlo.text import _attributes, instructions

_OPERAND = re.compile(r"%([\w.\-]+)")


@dataclasses.dataclass(frozen=True)
class Op:
    """One instruction: where it is, its name, result shape, opcode, operand names and attributes."""

    computation: str
    name: str
    opcode: str
    shape: str  # the result shape as HLO prints it
    operands: tuple[str, ...]
    args_text: str  # the text between the operand parentheses (a constant's value, a parameter's number)
    attrs_text: str  # the text after the operands
    root: bool

    @functools.cached_property
    def attrs(self) -> dict[str, str]:
        """Top-level ``key=value`` attributes (``calls``, ``body``, ``lhs_contracting_dims``, ``metadata``...)."""
        return _attributes(self.attrs_text)

    def called(self, key: str) -> list[str]:
        """The computations an attribute names (``calls=%f``, ``branch_computations={%a, %b}``)."""
        value = self.attrs.get(key)
        if not value:
            return []
        return [c.lstrip("%") for c in re.findall(r"%?[\w.\-]+", value.strip("{}")) if c]

    @property
    def integer(self) -> int | None:
        """A scalar integer constant's value (``s32[] constant(10)``), else None."""
        if self.opcode != "constant" or not re.match(r"^[su](?:8|16|32|64)\[\]", self.shape):
            return None
        text = self.args_text.strip()
        return int(text) if re.fullmatch(r"-?\d+", text) else None

    @property
    def parameter_number(self) -> int | None:
        text = self.args_text.strip()
        return int(text) if self.opcode == "parameter" and text.isdigit() else None


@dataclasses.dataclass
class Computation:
    name: str
    ops: list[Op]
    by_name: dict[str, Op]

    @property
    def root(self) -> Op | None:
        return next((op for op in reversed(self.ops) if op.root), self.ops[-1] if self.ops else None)

    def shape_of(self, name: str) -> str:
        op = self.by_name.get(name)
        return op.shape if op is not None else ""

    def parameter(self, number: int) -> Op | None:
        return next((op for op in self.ops if op.parameter_number == number), None)


@dataclasses.dataclass
class Module:
    computations: dict[str, Computation]
    order: list[str]  # text order: XLA prints callees before their callers
    entry: str

    def op_names(self) -> dict[str, str]:
        """Every instruction's opcode by name (names are unique in a module)."""
        return {op.name: op.opcode for comp in self.computations.values() for op in comp.ops}


def entry_name(hlo: str) -> str | None:
    for line in hlo.splitlines():
        stripped = line.strip()
        if stripped.startswith("ENTRY "):
            return stripped.split()[1].lstrip("%")
    return None


def parse_module(hlo: str) -> Module:
    """The module's computations and instructions (``compiled.as_text()``, or any HLO module text)."""
    comps: dict[str, Computation] = {}
    order: list[str] = []
    for ins in instructions(hlo):
        comp = comps.get(ins.computation)
        if comp is None:
            comp = comps[ins.computation] = Computation(ins.computation, [], {})
            order.append(ins.computation)
        op = Op(
            ins.computation,
            ins.name,
            ins.opcode,
            ins.shape,
            tuple(_OPERAND.findall(ins.operands)),
            ins.operands,
            ins.attrs,
            ins.line.lstrip().startswith("ROOT "),
        )
        comp.ops.append(op)
        comp.by_name[op.name] = op
    entry = entry_name(hlo) or (order[-1] if order else "")
    return Module(comps, order, entry)
