"""Shardy's module after propagation, as data: every op with its operands, types, shardings, sharding rule,
sharding origins and propagation edges.

Compiling with ``xla_dump_hlo_pass_re`` containing ``shardy-verbose`` makes XLA's Shardy pass
(``xla/service/spmd/shardy/shardy_xla_pass.cc``: ``isShardyVerbose`` turns on ``debugShardingOrigins`` and
``debugPropagationEdgeSharding``) write ``shardy/<module>/02.after_propagation.mlir`` with, on every value
propagation decided:

* ``sdy.sharding`` — its sharding, one ``{axes}`` per dimension (``#sdy.sharding_per_value<[...]>`` on ops);
* ``sdy.sharding_origins`` — per mesh axis, where it came from: ``self``, ``input: N`` / ``output: N`` (the
  function's N-th kept argument / result), ``constraint_K`` (the op named ``sdy.sharding_origin_name =
  "constraint_K"``: a ``with_sharding_constraint`` / ``reshard``), ``mc_K_input: N`` / ``mc_K_output: N`` (the
  K-th ``shard_map``'s in/out specs);
* ``sdy.propagation_edges`` — per propagation step, which operand or result each axis flowed from and to;
* ``sdy.sharding_rule`` — the op's factors per operand and result dimension, with the factors it reduces
  (``reduction``) and those that must not be sharded (``need_replication``, ``permutation``).

The printer writes no source locations (Shardy saves the module without debug info): ops are matched to HLO
instructions elsewhere (:mod:`sharding_core.why.explain`). Pure text parsing, no JAX import; a line this reader
does not understand is skipped, never guessed at.
"""

from __future__ import annotations

import dataclasses
import re

from sharding_core.hlo.origins import attribute, balanced, pairs, split_values

Dims = tuple[tuple[str, ...], ...]
"""Mesh axes per dimension, major first: ``P('x', ('y', 'z'), None)`` is ``(('x',), ('y', 'z'), ())``."""

MAX_OPS = 200_000
"""Ops read from one module (a larger dump is read up to here)."""

_OP = re.compile(r"^(?P<res>%[\w.#]+(?::\d+)?(?:\s*,\s*%[\w.#]+)*)\s*=\s*(?P<kind>\"[\w.]+\"|[\w.]+)(?P<rest>.*)$")
_TENSOR = re.compile(r"tensor<([^<>]*)>")
_AXIS = re.compile(r"\"([^\"]+)\"(?::\((\d+)\)(\d+))?")
_EDGE_STEP = re.compile(r"step-(\d+)\s*=\s*\[")
_EDGE = re.compile(r"\"([^\"]+)\"\s*=\s*([\w\-]+)\s*->\s*\[([^\]]*)\]")
_MESH = re.compile(r"sdy\.mesh\s+@([\w.]+)\s*=\s*<\[([^\]]*)\]")
_MESH_AXIS = re.compile(r"\"([^\"]+)\"\s*=\s*(\d+)")
_FACTOR_SIZE = re.compile(r"(\w+)=(\d+)")


@dataclasses.dataclass(frozen=True)
class TensorType:
    shape: tuple[int, ...]
    dtype: str

    @property
    def rank(self) -> int:
        return len(self.shape)

    def text(self) -> str:
        return f"{self.dtype}[{','.join(map(str, self.shape))}]"


@dataclasses.dataclass(frozen=True)
class Edge:
    """One propagation step of one axis: ``{"model" = operand-1 -> [result-0]}`` at ``step-2``."""

    step: int
    axis: str
    source: str  # "operand-1", "result-0"
    targets: tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class Rule:
    """An ``#sdy.op_sharding_rule``: the factor of each operand and result dimension."""

    operands: tuple[tuple[str, ...], ...]
    results: tuple[tuple[str, ...], ...]
    sizes: dict[str, int]
    reduction: frozenset[str]
    need_replication: frozenset[str]
    permutation: frozenset[str]
    blocked: frozenset[str]


@dataclasses.dataclass
class Op:
    """One op of the module (results, kind, operands, types and the sdy attributes that came with it)."""

    index: int
    results: tuple[str, ...]
    kind: str  # "stablehlo.dot_general", "sdy.manual_computation", "sdy.reshard", ...
    operands: tuple[str, ...]
    depth: int  # 0: the function body; > 0: inside another op's region (a shard_map body, a reducer)
    function: str
    operand_types: tuple[TensorType, ...] = ()
    result_types: tuple[TensorType, ...] = ()
    shardings: tuple[Dims | None, ...] = ()
    origins: tuple[dict[str, str], ...] = ()
    edges: tuple[Edge, ...] = ()
    rule: Rule | None = None
    origin_name: str | None = None
    # sdy.manual_computation (shard_map): its specs, and the origins of its block arguments and results
    in_shardings: tuple[Dims | None, ...] = ()
    out_shardings: tuple[Dims | None, ...] = ()
    manual_axes: tuple[str, ...] = ()
    block_origins: tuple[dict[str, str], ...] = ()

    @property
    def short(self) -> str:
        return self.kind.split(".", 1)[-1].strip('"')


@dataclasses.dataclass(frozen=True)
class Value:
    """A function argument or result."""

    type: TensorType | None
    sharding: Dims | None
    origins: dict[str, str]
    edges: tuple[Edge, ...]


@dataclasses.dataclass
class Module:
    mesh: dict[str, int]  # axis -> size, in mesh order
    args: list[Value]
    results: list[Value]
    returned: list[str]  # the values main returns
    ops: list[Op]
    truncated: bool = False
    _producers: dict[str, tuple[Op, int]] = dataclasses.field(default_factory=dict)

    def producer(self, value: str) -> tuple[Op, int] | None:
        """The op that defines ``value`` and which of its results it is."""
        if not self._producers:
            for op in self.ops:
                for k, r in enumerate(op.results):
                    self._producers.setdefault(r, (op, k))
        return self._producers.get(value)

    def arg_index(self, value: str) -> int | None:
        m = re.fullmatch(r"%arg(\d+)", value)
        return int(m.group(1)) if m and int(m.group(1)) < len(self.args) else None

    def sharding_of(self, value: str) -> Dims | None:
        a = self.arg_index(value)
        if a is not None:
            return self.args[a].sharding
        p = self.producer(value)
        if p is None:
            return None
        op, k = p
        if op.kind == "sdy.manual_computation" and k < len(op.out_shardings):
            return op.out_shardings[k]
        return op.shardings[k] if k < len(op.shardings) else None

    def origins_of(self, value: str) -> dict[str, str]:
        """Where each axis of ``value``'s sharding came from. A shard_map result's "self" is its out_specs
        (``mc_K_output: k``), which is what Shardy means by it there."""
        a = self.arg_index(value)
        if a is not None:
            return self.args[a].origins
        p = self.producer(value)
        if p is None:
            return {}
        op, k = p
        found = op.origins[k] if k < len(op.origins) else {}
        if op.kind == "sdy.manual_computation" and op.origin_name:
            return {ax: f"{op.origin_name}_output: {k}" if o == "self" else o for ax, o in found.items()}
        return found

    def type_of(self, value: str) -> TensorType | None:
        a = self.arg_index(value)
        if a is not None:
            return self.args[a].type
        p = self.producer(value)
        if p is None:
            return None
        op, k = p
        return op.result_types[k] if k < len(op.result_types) else None

    def users(self, value: str) -> list[Op]:
        return [op for op in self.ops if value in op.operands]


# ----------------------------------------------------------------------------------------------- pieces


def tensor_type(text: str) -> TensorType | None:
    """``64x1024xf32`` -> shape (64, 1024), dtype f32; ``f32`` -> a scalar."""
    parts = text.split(",")[0].strip().split("x")
    try:
        return TensorType(tuple(int(p) for p in parts[:-1]), parts[-1])
    except ValueError:  # dynamic dimensions ("?"): not in a compiled SPMD program
        return None


def _types(text: str) -> list[TensorType | None]:
    return [tensor_type(t) for t in _TENSOR.findall(text)]


def dims_of(sharding: str | None) -> Dims | None:
    """``<@mesh, [{"x"}, {"y", "z"}, {}]>`` (or ``#sdy.sharding<...>``) -> (('x',), ('y', 'z'), ());
    sub-axes as ``'y:(1)2'``; open dimensions (``{?}``) read as their axes so far."""
    if not sharding:
        return None
    lb = sharding.find("[")
    if lb < 0:
        return None
    body = sharding[lb : balanced(sharding, lb, "[", "]")]
    dims: list[tuple[str, ...]] = []
    for dim in re.findall(r"\{([^{}]*)\}", body):
        dims.append(tuple(a + (f":({pre}){size}" if pre else "") for a, pre, size in _AXIS.findall(dim)))
    return tuple(dims)


def _per_value(text: str | None) -> tuple[Dims | None, ...]:
    """Shardings of each result: ``#sdy.sharding_per_value<[<@m, [...]>, <@m, [...]>]>`` or one sharding."""
    if not text:
        return ()
    if text.startswith("#sdy.sharding_per_value"):
        lb = text.index("[")
        return shardings_list(text[lb : balanced(text, lb, "[", "]")])
    return (dims_of(text),)


def shardings_list(text: str | None) -> tuple[Dims | None, ...]:
    """``[<@mesh, [...]>, <@mesh, [...]>]`` (a shard_map's in/out shardings) -> one Dims each."""
    if not text:
        return ()
    out: list[Dims | None] = []
    i = 0
    while True:
        j = text.find("<", i)
        if j < 0:
            break
        k = balanced(text, j, "<", ">")
        out.append(dims_of(text[j:k]))
        i = k
    return tuple(out)


def origin_dicts(text: str | None) -> tuple[dict[str, str], ...]:
    """``{x = "self"}`` or ``[{x = "a"}, {}]`` -> one {axis: origin} per value."""
    if not text:
        return ()
    t = text.strip()
    if not t.startswith("["):
        return (dict(pairs(t)),)
    out: list[dict[str, str]] = []
    i = 1
    while True:
        j = t.find("{", i)
        if j < 0:
            break
        k = balanced(t, j, "{", "}")
        out.append(dict(pairs(t[j:k])))
        i = k
    return tuple(out)


def edges_of(text: str | None) -> tuple[Edge, ...]:
    """``#sdy.propagation_edges<[{step-0 = [{"data" = operand-0 -> [result-0]}]}, ...]>`` -> edges."""
    if not text:
        return ()
    out: list[Edge] = []
    for m in _EDGE_STEP.finditer(text):
        start = m.end() - 1
        body = text[start : balanced(text, start, "[", "]")]
        for e in _EDGE.finditer(body):
            targets = tuple(t.strip() for t in e.group(3).split(",") if t.strip())
            out.append(Edge(int(m.group(1)), e.group(1), e.group(2), targets))
    return tuple(out)


def rule_of(text: str | None) -> Rule | None:
    """``#sdy.op_sharding_rule<([i, j, l], [l, k])->([i, j, k]) {i=8, ...} reduction={l} need_replication={i}>``."""
    if not text:
        return None
    m = re.search(r"\((.*?)\)->\((.*?)\)", text)
    if not m:
        return None

    def groups(t: str) -> tuple[tuple[str, ...], ...]:
        return tuple(tuple(f.strip() for f in g.split(",") if f.strip()) for g in re.findall(r"\[([^\]]*)\]", t))

    def factor_set(key: str) -> frozenset[str]:
        mm = re.search(rf"\b{key}=\{{([^}}]*)\}}", text)
        return frozenset(f.strip() for f in mm.group(1).split(",") if f.strip()) if mm else frozenset()

    sizes_m = re.search(r"\)\s*\{([^}]*)\}", text[m.end() - 1 :])
    sizes = {k: int(v) for k, v in _FACTOR_SIZE.findall(sizes_m.group(1))} if sizes_m else {}
    return Rule(
        groups(m.group(1)),
        groups(m.group(2)),
        sizes,
        factor_set("reduction"),
        factor_set("need_replication"),
        factor_set("permutation"),
        factor_set("blocked_propagation"),
    )


# ----------------------------------------------------------------------------------------------- module


def _value(item: str) -> Value:
    types = _types(item)
    return Value(
        types[0] if types else None,
        dims_of(attribute(item, "sdy.sharding")),
        (origin_dicts(attribute(item, "sdy.sharding_origins")) or ({},))[0],
        edges_of(attribute(item, "sdy.propagation_edges")),
    )


def _signature(line: str) -> tuple[list[Value], list[Value]]:
    """The arguments and results of a ``func.func`` line."""
    open_paren = line.index("(")
    close = balanced(line, open_paren, "(", ")")
    args = [_value(item) for item in split_values(line[open_paren + 1 : close - 1]) if item.startswith("%arg")]
    rest = line[close:].strip()
    results: list[Value] = []
    if rest.startswith("->"):
        rest = rest[2:].strip()
        if rest.startswith("("):
            inner = rest[1 : balanced(rest, 0, "(", ")") - 1]
            results = [_value(item) for item in split_values(inner)]
        else:
            results = [_value(rest.rsplit("{", 1)[0] if rest.endswith("{") else rest)]
    return args, results


def _signature_types(text: str, operands: int) -> tuple[tuple[TensorType, ...], tuple[TensorType, ...]]:
    """The operand and result types after an op's last `` : ``: ``(A, B) -> C``, or ``T`` alone when every
    operand and the result have type T."""
    at = text.rfind(" : ")
    if at < 0:
        return (), ()
    sig = text[at + 3 :]
    if "->" in sig:
        left, right = sig.split("->", 1)
        return tuple(t for t in _types(left) if t), tuple(t for t in _types(right) if t)
    one = [t for t in _types(sig) if t]
    return tuple(one[:1]) * operands, tuple(one[:1])


def _fill(op: Op, text: str) -> None:
    """The sdy attributes and types written on ``text`` (the op's line, or the line closing its region)."""
    shardings = _per_value(attribute(text, "sdy.sharding"))
    if not shardings and op.kind in ("sdy.reshard", "sdy.sharding_constraint") and "<@" in text:
        start = text.index("<@")  # these take their sharding as an operand: `sdy.reshard %1 <@mesh, [...]>`
        shardings = (dims_of(text[start : balanced(text, start, "<", ">")]),)
    if shardings:
        op.shardings = shardings
    origins = origin_dicts(attribute(text, "sdy.sharding_origins"))
    if op.kind == "sdy.manual_computation":
        origins = origin_dicts(attribute(text, "sdy.result_sharding_origins")) or origins
        op.block_origins = origin_dicts(attribute(text, "sdy.block_arg_sharding_origins")) or op.block_origins
        edges = edges_of(attribute(text, "sdy.result_propagation_edges"))
    else:
        edges = edges_of(attribute(text, "sdy.propagation_edges"))
    if origins:
        op.origins = origins
    if edges:
        op.edges = edges
    op.rule = rule_of(attribute(text, "sdy.sharding_rule")) or op.rule
    name = attribute(text, "sdy.sharding_origin_name")
    if name:
        op.origin_name = name.strip('"')
    operand_types, result_types = _signature_types(text, len(op.operands))
    if result_types:
        op.result_types = result_types
        op.operand_types = operand_types


def _header(op: Op, rest: str) -> None:
    """What a region op says before its region: a shard_map's specs and manual axes."""
    if op.kind != "sdy.manual_computation":
        return
    ins = re.search(r"in_shardings=(\[)", rest)
    if ins:
        op.in_shardings = shardings_list(rest[ins.start(1) : balanced(rest, ins.start(1), "[", "]")])
    outs = re.search(r"out_shardings=(\[)", rest)
    if outs:
        op.out_shardings = shardings_list(rest[outs.start(1) : balanced(rest, outs.start(1), "[", "]")])
    manual = re.search(r"manual_axes=\{([^}]*)\}", rest)
    if manual:
        op.manual_axes = tuple(a for a in re.findall(r"\"([^\"]+)\"", manual.group(1)))


def _operands(kind: str, rest: str) -> tuple[str, ...]:
    r = rest.lstrip()
    if r.startswith("("):
        head = r[: balanced(r, 0, "(", ")")]
    else:
        cut = len(r)
        for stop in (" {", " : ", " <{", " ({"):
            at = r.find(stop)
            if at >= 0:
                cut = min(cut, at)
        head = r[:cut]
    if kind == "sdy.manual_computation":
        head = r[: balanced(r, r.index("("), "(", ")")] if "(" in r else head
    return tuple(re.findall(r"%[\w.#]+", head))


def _results(text: str) -> tuple[str, ...]:
    text = text.strip()
    m = re.fullmatch(r"(%[\w.]+):(\d+)", text)
    if m:
        return tuple(f"{m.group(1)}#{i}" for i in range(int(m.group(2))))
    return tuple(r.strip() for r in text.split(","))


def parse_module(mlir: str) -> Module:
    """Every op of a Shardy after-propagation module (see the module docstring), in text order."""
    mesh: dict[str, int] = {}
    first = _MESH.search(mlir)  # programs over several meshes name the main one first
    if first is not None:
        mesh = {a: int(n) for a, n in _MESH_AXIS.findall(first.group(2))}
    module = Module(mesh, [], [], [], [])
    stack: list[Op | None] = []
    function = ""
    for raw in mlir.splitlines():
        line = raw.strip()
        if not line:
            continue
        if line.startswith("func.func"):
            name = re.search(r"@([\w.\-$]+)\(", line)
            function = name.group(1) if name else "?"
            if function == "main":
                module.args, module.results = _signature(line)
            stack = []
            continue
        if line.startswith("}"):
            top = stack.pop() if stack else None
            if line.endswith("{"):  # "} do {", "}, {": the same op's next region
                stack.append(top)
                continue
            if top is not None:
                _fill(top, line)
            continue
        m = _OP.match(line)
        if m:
            if len(module.ops) >= MAX_OPS:
                module.truncated = True
                break
            kind = m.group("kind").strip('"')
            rest = m.group("rest")
            op = Op(len(module.ops), _results(m.group("res")), kind, _operands(kind, rest), len(stack), function)
            module.ops.append(op)
            if line.endswith("{"):
                _header(op, rest)
                stack.append(op)
            else:
                _fill(op, rest)
            continue
        if line.startswith("return ") and function == "main" and not stack:
            module.returned = [v.strip() for v in line[len("return ") :].split(" : ")[0].split(",")]
            continue
        if line.endswith("{"):  # a region header of an op already read ("reducer(...) {")
            stack.append(None)
    return module


def spec_text(dims: Dims | None) -> str | None:
    """Dims as JAX prints a PartitionSpec: (('x',), (), ('y', 'z')) -> ``P('x', None, ('y', 'z'))``."""
    if dims is None:
        return None
    items = []
    for d in dims:
        items.append("None" if not d else repr(d[0]) if len(d) == 1 else "(" + ", ".join(map(repr, d)) + ")")
    while items and items[-1] == "None":
        items.pop()
    return "P(" + ", ".join(items) + ")"
