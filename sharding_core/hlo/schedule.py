"""The compiled program's schedule as facts: what runs in what order, and which collectives are in flight while it does.

An optimized HLO module is scheduled (``is_scheduled=true``): each computation's instructions are printed in the
order they run. This module reads that order for every computation the program runs as a sequence — the entry,
``while`` bodies, called computations and conditional branches — and gives each one as a list of events:

* ``["work", w]`` — consecutive instructions that compute, merged: ``w["mm"]`` the matmuls (``dot`` and
  ``convolution``, inside fusions too) as ``[dtype, m, n, k, hbm_bytes, count]`` rows (``m`` the rows, batch
  dimensions folded in; ``n`` the columns; ``k`` the contracted size; ``hbm_bytes`` what the instruction holding
  it reads and writes in HBM), ``w["hbm"]`` the HBM bytes the other instructions read and write, ``w["ops"]``
  how many instructions, ``w["kernels"]`` custom kernels (Pallas / Mosaic / Triton) as ``[name, flops or null,
  hbm_bytes, [operand dims...]]`` (``flops``: the kernel's own ``cost_estimate`` where it has one);
* ``["start", chain]`` / ``["done", chain]`` — an asynchronous collective begins / must have finished (XLA's
  ``*-start`` / ``*-done`` pairs, ``async-start`` / ``async-done`` around a collective, and libtpu's async
  collective fusions: a fusion whose root is ``AsyncCollectiveStart``, continuation fusions that compute while
  it moves, one whose root is ``AsyncCollectiveDone``); everything scheduled between them runs while it moves;
* ``["sync", chain]`` — a collective the program waits for where it stands;
* ``["loop", body, trips]``, ``["call", computation]``, ``["branches", [computations]]`` — nested sequences.

``chains`` maps each chain to the collective instructions it is made of (a libtpu async collective fusion
spreads one collective over several fusions, each holding an instruction with the same ``channel_id`` and
``chain_id``): the names :func:`sharding_core.hlo.text.parse_collectives` reports, so a reader finds the
chain's collective among the program's. HBM bytes leave out buffers XLA placed in another memory space (a
layout's ``S(n)``, ``n > 0``: TPU VMEM, host memory); those are counted apart in ``w["other_bytes"]``.

Pure text parsing, no JAX import. The cost model turns these facts into an expected step time
(:mod:`sharding_core.cost.step`).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from typing import Any

from sharding_core.hlo import work as hlo_work
from sharding_core.hlo.module import Computation, Module, Op
from sharding_core.hlo.program import ProgramFacts, program_facts
from sharding_core.hlo.text import COLLECTIVE_OPS, ELEMENT_BITS, fused_chain

__all__ = ["SCHEDULE_VERSION", "schedule_facts", "schedule_of"]

SCHEDULE_VERSION = 1

MAX_EVENTS = 20000
"""Events kept per program (a scanned 80-layer step has a few hundred): past it the schedule says it was cut."""

MAX_OPERANDS = 16
"""A kernel's operands kept (their dims: a Pallas attention kernel's block-mask arrays give its block grid)."""

_ARRAY = re.compile(r"([a-z][a-z0-9]*)\[([0-9,]*)\](\{[^}]*\})?")
_SPACE = re.compile(r"S\((\d+)\)")
_TARGET = re.compile(r'custom_call_target="([^"]+)"')
_COST = re.compile(r'"cost_estimate"\s*:\s*\{[^}]*"flops"\s*:\s*([0-9.eE+]+)')
_NOTHING = frozenset(["parameter", "constant", "get-tuple-element", "tuple", "bitcast", "after-all", "partition-id",
                      "replica-id", "opt-barrier", "add-dependency", "domain", "iota"])  # fmt: skip
_ASYNC_MARKERS = {"AsyncCollectiveStart": "start", "AsyncCollectiveDone": "done"}


def _arrays(shape: str) -> Iterator[tuple[str, list[int], int, int]]:
    """Each array of a shape: dtype, dims, bytes and memory space (0 unless the layout says ``S(n)``)."""
    for m in _ARRAY.finditer(shape):
        dims = [int(d) for d in m.group(2).split(",") if d]
        nbytes = (math.prod(dims) * ELEMENT_BITS.get(m.group(1), 0) + 7) // 8
        space = _SPACE.search(m.group(3) or "")
        yield m.group(1), dims, nbytes, int(space.group(1)) if space else 0


def _hbm_and_other(shape: str) -> tuple[int, int]:
    hbm = other = 0
    for _, _, nbytes, space in _arrays(shape):
        if space == 0:
            hbm += nbytes
        else:
            other += nbytes
    return hbm, other


def _traffic(module: Module, comp: Computation, op: Op) -> tuple[int, int]:
    """HBM bytes an instruction reads and writes (operands and result as the work reader counts them: slices
    read what they take, in-place updates write the update), and the bytes in other memory spaces."""
    total = hlo_work.bytes_accessed(module, comp, op)
    if total <= 0:
        return 0, 0
    shapes = [comp.shape_of(o) for o in op.operands] + [op.shape]
    hbm = other = 0
    for s in shapes:
        h, o = _hbm_and_other(s)
        hbm += h
        other += o
    whole = hbm + other
    if whole <= 0:
        return int(total), 0
    # the work reader's count (slices, in-place updates) split in the proportion of the memory spaces
    return int(total * hbm / whole), int(total * other / whole)


def _dims_of(comp: Computation, name: str) -> list[int]:
    found = next(_arrays(comp.shape_of(name)), None)
    return found[1] if found is not None else []


def _int_set(text: str) -> list[int]:
    return [int(d) for d in text.strip("{}").split(",") if d.strip()]


def _dot_mnk(comp: Computation, op: Op) -> tuple[int, int, int] | None:
    """(rows with batch dims folded in, columns, contracted size) of a ``dot``."""
    if len(op.operands) < 2:
        return None
    lhs, rhs = _dims_of(comp, op.operands[0]), _dims_of(comp, op.operands[1])
    lc, lb = _int_set(op.attrs.get("lhs_contracting_dims", "{}")), _int_set(op.attrs.get("lhs_batch_dims", "{}"))
    rc, rb = _int_set(op.attrs.get("rhs_contracting_dims", "{}")), _int_set(op.attrs.get("rhs_batch_dims", "{}"))
    k = math.prod(lhs[d] for d in lc if d < len(lhs))
    batch = math.prod(lhs[d] for d in lb if d < len(lhs))
    m = math.prod(s for d, s in enumerate(lhs) if d not in lc and d not in lb)
    n = math.prod(s for d, s in enumerate(rhs) if d not in rc and d not in rb)
    return batch * m, n, k


def _conv_mnk(comp: Computation, op: Op, flops: float) -> tuple[int, int, int] | None:
    """A ``convolution`` (what TPU HLO makes of an einsum) as a matmul: ``k`` the input features per group
    times the kernel's window, ``n`` the output features, ``m`` the rest of its flops."""
    m = re.fullmatch(r"([0-9a-z]+)_([0-9a-z]+)->([0-9a-z]+)", op.attrs.get("dim_labels", ""))
    if not m or len(op.operands) < 2 or flops <= 0:
        return None
    rhs_l, out_l = m.group(2), m.group(3)
    rhs = _dims_of(comp, op.operands[1])
    out = next(_arrays(op.shape), ("", [], 0, 0))[1]
    if len(rhs) != len(rhs_l) or len(out) != len(out_l):
        return None
    window = math.prod(rhs[i] for i, c in enumerate(rhs_l) if c.isdigit())
    groups = max(int(op.attrs.get("feature_group_count", "1")), 1)
    k = (rhs[rhs_l.index("i")] if "i" in rhs_l else 1) * window
    n = (out[out_l.index("f")] if "f" in out_l else 1) // groups
    rows = max(1, round(flops / (2.0 * max(n, 1) * max(k, 1))))
    return rows, max(n, 1), max(k, 1)


def _matmuls(module: Module, comp: Computation, op: Op, depth: int = 0) -> list[tuple[str, int, int, int]]:
    """(dtype, m, n, k) of every dot and convolution an instruction runs (inside its fusions)."""
    if op.opcode in hlo_work.MATMUL:
        flops, _ = hlo_work.flops(comp, op)
        mnk = _dot_mnk(comp, op) if op.opcode == "dot" else _conv_mnk(comp, op, flops)
        if mnk is None or flops <= 0:
            return []
        dtype = hlo_work.element_type(comp.shape_of(op.operands[0]))
        return [(dtype, *mnk)]
    if op.opcode != "fusion" or depth > 8:
        return []
    fused = module.computations.get(next(iter(op.called("calls")), ""))
    if fused is None:
        return []
    return [mm for inner in fused.ops for mm in _matmuls(module, fused, inner, depth + 1)]


class _Work:
    """Consecutive compute instructions, merged (see the module docstring)."""

    def __init__(self) -> None:
        self.mm: dict[tuple[str, int, int, int, int], int] = {}
        self.hbm = 0
        self.other = 0
        self.ops = 0
        self.kernels: list[list[Any]] = []

    def add(self, module: Module, comp: Computation, op: Op) -> None:
        self.ops += 1
        hbm, other = _traffic(module, comp, op)
        self.other += other
        if op.opcode == "custom-call":
            self.kernels.append(_kernel(comp, op, hbm))
            return
        mms = _matmuls(module, comp, op)
        if not mms:
            self.hbm += hbm
            return
        share = hbm // len(mms)  # a fusion of several matmuls: its traffic split among them
        for dtype, m, n, k in mms:
            key = (dtype, m, n, k, share)
            self.mm[key] = self.mm.get(key, 0) + 1

    def event(self) -> list[Any]:
        mm = [[*key, count] for key, count in self.mm.items()]
        return ["work", {"mm": mm, "hbm": self.hbm, "other_bytes": self.other, "ops": self.ops,
                         "kernels": self.kernels}]  # fmt: skip


def _kernel(comp: Computation, op: Op, hbm: int) -> list[Any]:
    """A custom call: its name (the instruction's, numbering dropped: Pallas names it after the kernel), the
    flops its ``cost_estimate`` gives (or None), its HBM bytes and its operands' dims."""
    cost = _COST.search(op.attrs_text)
    name = re.sub(r"\.\d+$", "", op.name)
    target = _TARGET.search(op.attrs_text)
    if target is not None and target.group(1) not in ("tpu_custom_call", "__gpu$xla.gpu.triton"):
        name = f"{target.group(1)}:{name}"
    return [name, float(cost.group(1)) if cost else None, hbm, [_dims_of(comp, o) for o in op.operands[:MAX_OPERANDS]]]


def _fused_collectives(module: Module, op: Op) -> tuple[list[Op], str | None]:
    """The collective instructions inside a fusion and, when the fusion's root is libtpu's async collective
    marker, whether it starts or finishes the collective."""
    fused = module.computations.get(next(iter(op.called("calls")), ""))
    if fused is None:
        return [], None
    inner = [o for o in fused.ops if o.opcode.removesuffix("-start") in COLLECTIVE_OPS]
    root = fused.root
    marker = None
    if root is not None and root.opcode == "custom-call":
        target = _TARGET.search(root.attrs_text)
        marker = _ASYNC_MARKERS.get(target.group(1)) if target else None
    return inner, marker


def chain_key(op: Op) -> str:
    """The chain a collective instruction belongs to: ``channel_id`` and ``chain_id`` when libtpu spread it over
    several fusions (:func:`sharding_core.hlo.text.fused_chain`), else its own name."""
    return fused_chain(op.attrs_text) or op.name


class _Reader:
    """Reads the sequences of one module (see :func:`schedule_facts`)."""

    def __init__(self, module: Module, facts: ProgramFacts) -> None:
        self.module = module
        self.facts = facts
        self.trips = {loop.name: loop.trip_count for loop in facts.loops}
        self.chains: dict[str, list[str]] = {}
        self.started: set[str] = set()
        self.async_of: dict[str, str] = {}  # an async-start / -start instruction -> its chain
        self.sequences: dict[str, list[list[Any]]] = {}
        self.events = 0

    def chain(self, ops: list[Op]) -> str:
        key = chain_key(ops[0])
        names = self.chains.setdefault(key, [])
        names.extend(o.name for o in ops if o.name not in names)
        return key

    def read(self, name: str) -> None:
        if name in self.sequences or name not in self.module.computations:
            return
        comp = self.module.computations[name]
        events: list[list[Any]] = []
        self.sequences[name] = events
        work = _Work()

        def flush() -> None:
            nonlocal work
            if work.ops:
                events.append(work.event())
                work = _Work()

        for op in comp.ops:
            ev = self.classify(comp, op, work)
            if ev is not None:
                flush()
                events.append(ev)
            if self.events > MAX_EVENTS:
                break
        flush()
        self.events += len(events)
        for ev in events:
            for callee in _callees(ev):
                self.read(callee)

    def classify(self, comp: Computation, op: Op, work: _Work) -> list[Any] | None:
        """The event an instruction is, or None after adding its work to ``work`` (or for no work at all)."""
        code = op.opcode
        base = code.removesuffix("-start").removesuffix("-done")
        if code in _NOTHING or code in ("copy-start", "copy-done", "async-update", "send", "recv", "send-done",
                                        "recv-done"):  # fmt: skip
            return None  # DMA copies and host transfers: not modelled as work (see the module docstring)
        if code == "while":
            body = next(iter(op.called("body")), "")
            return ["loop", body, self.trips.get(op.name)]
        if code == "call":
            return ["call", next(iter(op.called("to_apply")), "")]
        if code == "conditional":
            branches = op.called("branch_computations") or [*op.called("true_computation"),
                                                            *op.called("false_computation")]  # fmt: skip
            return ["branches", branches]
        if base in COLLECTIVE_OPS:
            return self.collective(comp, op)
        if code in ("async-start", "async-done"):
            return self.async_op(comp, op, work)
        if code.endswith("-done"):
            # the end of an asynchronous op that is no collective (libtpu's `slice-start` / `slice-done`, what its
            # code generation makes of an `async-start` / `async-done` around a slice): its start counted the
            # transfer, as an `async-done` adds nothing — the module before code generation reads the same
            return None
        if code == "fusion":
            inner, marker = _fused_collectives(self.module, op)
            if inner:
                return self.collective_fusion(comp, op, inner, marker, work)
        work.add(self.module, comp, op)
        return None

    def collective(self, comp: Computation, op: Op) -> list[Any]:
        if op.opcode.endswith("-done"):
            key = self.async_of.get(op.operands[0], op.operands[0]) if op.operands else op.name
            return ["done", key]
        key = self.chain([op])
        if op.opcode.endswith("-start"):
            self.async_of[op.name] = key
            return ["start", key]
        return ["sync", key]

    def async_op(self, comp: Computation, op: Op, work: _Work) -> list[Any] | None:
        """``async-start`` / ``async-done``: a collective when the wrapped computation holds one."""
        if op.opcode == "async-done":
            source = op.operands[0] if op.operands else ""
            while source in comp.by_name and comp.by_name[source].opcode == "async-update":
                source = comp.by_name[source].operands[0]
            key = self.async_of.get(source)
            return ["done", key] if key is not None else None
        wrapped = self.module.computations.get(next(iter(op.called("calls")), ""))
        inner = [o for o in wrapped.ops if o.opcode in COLLECTIVE_OPS] if wrapped is not None else []
        if not inner:
            work.add(self.module, comp, op)
            return None
        key = self.chain(inner)
        self.async_of[op.name] = key
        return ["start", key]

    def collective_fusion(
        self, comp: Computation, op: Op, inner: list[Op], marker: str | None, work: _Work
    ) -> list[Any] | None:
        """libtpu's async collective fusions: the start, the continuations (work while it moves), the done; a
        fusion holding a collective and no marker is one the program waits for."""
        key = self.chain(inner)
        if marker == "start":
            self.started.add(key)
            return ["start", key]
        if marker == "done":
            return ["done", key]
        if key in self.started:
            work.add(self.module, comp, op)
            return None
        mms = _matmuls(self.module, comp, op)
        if mms:
            work.add(self.module, comp, op)
        return ["sync", key]


def _callees(event: list[Any]) -> list[str]:
    if event[0] in ("loop", "call"):
        return [str(event[1])]
    if event[0] == "branches":
        return [str(c) for c in event[1]]
    return []


def schedule_facts(hlo: str, facts: ProgramFacts | None = None) -> dict[str, Any]:
    """The schedule of an optimized HLO module (``compiled.as_text()``): ``{"version", "entry", "sequences":
    {computation: [events]}, "runs": {computation: runs per step}, "chains": {chain: [collective instruction
    names]}, "truncated"}`` (see the module docstring)."""
    return schedule_of(facts if facts is not None else program_facts(hlo))


def schedule_of(facts: ProgramFacts) -> dict[str, Any]:
    """:func:`schedule_facts` of a module the loop reader has read."""
    reader = _Reader(facts.module, facts)
    reader.read(facts.entry)
    return {
        "version": SCHEDULE_VERSION,
        "entry": facts.entry,
        "sequences": reader.sequences,
        "runs": {name: facts.runs.get(name, 1) for name in reader.sequences},
        "chains": reader.chains,
        "truncated": reader.events > MAX_EVENTS,
    }


def schedule_bytes(schedule: dict[str, Any]) -> int:
    """The schedule's size as JSON (what a stored plan carries)."""
    return len(json.dumps(schedule, separators=(",", ":")))
