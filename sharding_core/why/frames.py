"""Where in the user's source an HLO instruction came from: the module's stack-frame tables.

JAX records each equation's Python traceback, and XLA prints it at the top of ``compiled.as_text()`` as four
tables (``xla/hlo/ir/hlo_module.cc``, ``StackFrameIndexProto``)::

    FileNames
    1 "/home/me/train.py"
    FunctionNames
    1 "<module>"
    2 "block"
    FileLocations
    1 {file_name_id=1 function_name_id=1 line=20 end_line=20 column=10 end_column=10}
    StackFrames
    1 {file_location_id=1 parent_frame_id=1}
    4 {file_location_id=4 parent_frame_id=2}

and each instruction's ``metadata={op_name="jit(block)/dot_general" stack_frame_id=4}`` points into them.
``parent_frame_id`` is printed one more than the proto's one-based parent id (0 there means "no parent"): frame
4's caller above is frame 1, and frame 1 has none. (The ``source_file=`` / ``source_line=`` metadata of older
XLA versions, still seen in 2024 reports such as openxla/xla#15048, are read too when present.)

Pure text parsing, no JAX import.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Iterable

from sharding_core.hlo.text import instructions

MAX_CHAIN = 12
"""Frames kept per instruction, innermost first (a deep call stack is cut here)."""

_TABLES = ("FileNames", "FunctionNames", "FileLocations", "StackFrames")
_FIELD = re.compile(r"(\w+)=(\d+)")
_FRAME_ID = re.compile(r"\bstack_frame_id=(\d+)")
_OLD_FILE = re.compile(r'\bsource_file="([^"]*)"')
_OLD_LINE = re.compile(r"\bsource_line=(\d+)")
_OP_NAME = re.compile(r'\bop_name="([^"]*)"')

# Frames inside these packages are library code, never "the user's line" (JAX filters its own frames from
# tracebacks; these are the tools that call jit on the user's behalf).
LIBRARY_MARKERS = (
    "/sharding_core/",
    "/shardscope/",
    "/site-packages/jax/",
    "/site-packages/jaxlib/",
    "/site-packages/flax/",
    "/site-packages/optax/",
    "/dist-packages/jax/",
)


@dataclasses.dataclass(frozen=True)
class Frame:
    file: str
    line: int
    function: str

    def text(self, root: str | None = None) -> str:
        return f"{short_path(self.file, root)}:{self.line}"


@dataclasses.dataclass(frozen=True)
class InstructionSource:
    """Where one instruction came from: its JAX op name and its call stack, innermost frame first."""

    op_name: str | None
    frames: tuple[Frame, ...]

    def user_stack(self) -> tuple[Frame, ...]:
        """The call stack, innermost first, without the library frames outside the user's outermost one (the
        ``shardscope plan`` and ``runpy`` frames that called the user's function); all of it when every frame is
        library code."""
        last = max((k for k, f in enumerate(self.frames) if not is_library(f.file)), default=None)
        return self.frames if last is None else self.frames[: last + 1]

    def user_frame(self) -> Frame | None:
        """The innermost frame outside library code (else the innermost frame)."""
        for f in self.frames:
            if not is_library(f.file):
                return f
        return self.frames[0] if self.frames else None


USER_KERNELS = "/sharding_core/kernels/catalog.py"
"""The kernel lab's kernels: library code, but the program a kernel run explains (its source is shown)."""


def is_library(path: str) -> bool:
    p = path.replace("\\", "/")
    if p.endswith(USER_KERNELS):
        return False
    return p.startswith("<") or any(m in p for m in LIBRARY_MARKERS)  # "<string>", "<frozen ...>": generated


def short_path(path: str, root: str | None = None) -> str:
    """A source path as a result shows it: relative to ``root`` (default: the working directory) when the file
    is under it, else its last two components — never a home directory's full path in a shared link."""
    root = os.getcwd() if root is None else root
    norm = path.replace("\\", "/")
    if "/sharding_core/" in norm:  # this package, wherever it is installed (as kernel results name it)
        return "sharding_core/" + norm.rsplit("/sharding_core/", 1)[1]
    base = root.replace("\\", "/").rstrip("/") + "/"
    if base != "/" and norm.startswith(base):
        return norm[len(base) :]
    for marker in ("/site-packages/", "/dist-packages/"):
        if marker in norm:
            return "site-packages/" + norm.split(marker, 1)[1]
    parts = [p for p in norm.split("/") if p]
    return "/".join(parts[-2:]) if len(parts) > 1 else (parts[0] if parts else path)


def stack_tables(hlo: str) -> dict[int, tuple[Frame, ...]]:
    """Every stack frame id of the module -> its frames, innermost first (cycles and depth bounded)."""
    files: dict[int, str] = {}
    functions: dict[int, str] = {}
    locations: dict[int, tuple[int, int, int]] = {}
    parents: dict[int, tuple[int, int]] = {}
    section: str | None = None
    seen_tables = 0
    for line in hlo.splitlines():
        s = line.strip()
        if s in _TABLES:
            section = s
            seen_tables += 1
            continue
        if not s:
            continue
        if not s[0].isdigit():
            if seen_tables >= len(_TABLES) and s.startswith(("%", "ENTRY", "HloModule")):
                break  # past the tables: the computations follow
            section = None
            continue
        if section is None:
            continue
        num, _, rest = s.partition(" ")
        if not num.isdigit():
            continue
        k = int(num)
        if section == "FileNames":
            files[k] = rest.strip().strip('"')
        elif section == "FunctionNames":
            functions[k] = rest.strip().strip('"')
        else:
            fields = {key: int(v) for key, v in _FIELD.findall(rest)}
            if section == "FileLocations":
                locations[k] = (fields.get("file_name_id", 0), fields.get("function_name_id", 0), fields.get("line", 0))
            else:
                parents[k] = (fields.get("file_location_id", 0), fields.get("parent_frame_id", 0))
    out: dict[int, tuple[Frame, ...]] = {}
    for k in parents:
        chain: list[Frame] = []
        seen: set[int] = set()
        cur = k
        while cur in parents and cur not in seen and len(chain) < MAX_CHAIN:
            seen.add(cur)
            loc, parent = parents[cur]
            file_id, function_id, line_no = locations.get(loc, (0, 0, 0))
            frame = Frame(files.get(file_id, "?"), line_no, functions.get(function_id, "?"))
            if not chain or chain[-1] != frame:
                chain.append(frame)
            cur = parent - 1  # printed one above the proto's one-based id; 0 there is "no parent"
        out[k] = tuple(chain)
    return out


_CALLS = re.compile(r"\bcalls=%?([\w.\-]+)")
MAX_CALLERS = 8
"""Calling instructions followed up from a collective without metadata (a fusion inside a fusion, ...)."""


def _source(attrs: str, tables: dict[int, tuple[Frame, ...]]) -> InstructionSource | None:
    """The op name and frames one instruction's ``metadata={...}`` names, or None without metadata."""
    meta_at = attrs.find("metadata={")
    if meta_at < 0:
        return None
    meta = attrs[meta_at:]
    op = _OP_NAME.search(meta)
    fid = _FRAME_ID.search(meta)
    frames: tuple[Frame, ...] = tables.get(int(fid.group(1)), ()) if fid else ()
    if not frames:
        old_file, old_line = _OLD_FILE.search(meta), _OLD_LINE.search(meta)
        if old_file and old_line:
            frames = (Frame(old_file.group(1), int(old_line.group(1)), "?"),)
    if op is None and not frames:
        return None
    return InstructionSource(op.group(1) if op else None, frames)


def instruction_sources(hlo: str, names: Iterable[str] | None = None) -> dict[str, InstructionSource]:
    """The op name and call stack of each instruction (of ``names`` only, when given) that has metadata. One
    without (XLA's TPU compiler leaves an all-reduce it fused into ``%all-reduce-scatter`` bare) has its calling
    instruction's: the fusion carries the op the user wrote (``.../dot_general`` at the unembedding)."""
    wanted = set(names) if names is not None else None
    tables = stack_tables(hlo)
    out: dict[str, InstructionSource] = {}
    callers: dict[str, tuple[InstructionSource | None, str]] = {}  # computation -> its caller's source and home
    bare: list[tuple[str, str]] = []  # (instruction, its computation) wanted, without metadata
    for ins in instructions(hlo):
        # metadata read only where it is needed: a wanted instruction's, or a caller's (most are neither)
        called = _CALLS.search(ins.attrs) if "calls=" in ins.attrs else None
        is_wanted = wanted is None or ins.name in wanted
        src = _source(ins.attrs, tables) if is_wanted or called is not None else None
        if called is not None:
            callers.setdefault(called.group(1), (src, ins.computation))
        if not is_wanted:
            continue
        if src is not None:
            out[ins.name] = src
        else:
            bare.append((ins.name, ins.computation))
    for name, computation in bare:
        for _ in range(MAX_CALLERS):
            caller, computation = callers.get(computation, (None, ""))
            if caller is not None:
                out[name] = caller
                break
            if not computation:
                break
    return out


def frames_json(frames: Iterable[Frame], root: str | None = None) -> list[dict[str, object]]:
    return [{"file": short_path(f.file, root), "line": f.line, "function": f.function} for f in frames]


def primitive(op_name: str | None) -> str | None:
    """The JAX primitive at the end of an op name: ``jit(f)/bsf,fd->bsd/dot_general`` -> ``dot_general``. XLA
    writes an instruction made of several ops as ``jit(f)/(jvp()/gather:transpose(jvp())/reduce_sum)``: the
    first one's."""
    if not op_name:
        return None
    text = op_name
    if text.endswith(")") and "/(" in text:
        inner = text[text.index("/(") + 2 : -1]
        depth = 0
        for i, ch in enumerate(inner):
            depth += ch == "("
            depth -= ch == ")"
            if ch == ":" and depth == 0:
                inner = inner[:i]
                break
        text = inner
    return text.rsplit("/", 1)[-1].strip("()") or None


def einsum_ranks(op_name: str | None) -> tuple[int, ...] | None:
    """The operand and result ranks an einsum names in an op name (``bsd,df->bsf``: 3, 2, 3), else None."""
    if not op_name:
        return None
    for part in op_name.split("/"):
        if "->" in part and re.fullmatch(r"[a-zA-Z,]+->[a-zA-Z]*", part):
            ins, out = part.split("->")
            return (*(len(x) for x in ins.split(",")), len(out))
    return None
