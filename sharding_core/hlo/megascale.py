"""The cross-slice (DCN) steps of a libtpu multi-slice program, as libtpu wrote them.

libtpu compiles one slice's program; what crosses slices it writes as host-transfer ``send``/``recv`` pairs
handled by the megascale runtime, with frontend attributes that say what each is (checked against libtpu's
own compiles of multi-slice reshards in ``tests/test_hlo_megascale.py``):

* ``_xla_megascale_transfer_type``: ``ONE_TO_ONE`` (a permute), ``ALL_GATHER``, ``ALL_REDUCE``,
  ``REDUCE_SCATTER``, ``ALL_TO_ALL``; ``_xla_megascale_reduce_operation`` for reductions;
* ``_xla_megascale_target``: the global devices of the transfer, in one of three spellings —
  directed pairs ``{{100002->200000},{200000->100002}}``, explicit groups ``{{100000,...,200007}}``, or the
  compact product ``"{1,2}x{0:3}"``: slices 1 and 2 (device ids ``100000 · slice + k``) times in-slice ids
  0 to 3, one group per in-slice id (the devices at the same place in each slice exchange);
* ``_xla_host_transfer_rendezvous``: the name the send and its recv share.

Each step is ``{"op", "name", "transfer_type", "target", "bytes", "groups", "pairs", "computation"}``:
``bytes`` is the step's result per device in the collective's own terms (the recv's shape: an all-gather's
gathered bytes), ``groups`` global device ids (``pairs`` source → target for a permute). These are facts; the
cost model estimates them when a result is read (``sharding_core.cost``).
"""

from __future__ import annotations

import re
from typing import Any

from sharding_core.hlo.text import HloParseError, _int_lists, _shapes, instructions, permute_chains

MULTISLICE_ID_STRIDE = 100000  # libtpu numbers slice s's devices from (s + 1) · 100000
MAX_TARGET_DEVICES = 1 << 20
"""A compact target naming more devices than this is refused (never expanded)."""

_ATTR = re.compile(r'(_xla_[a-z_]+)=("(?:[^"\\]|\\.)*"|\{(?:[^{}]|\{[^{}]*\})*\})')
_OPS = {
    "ONE_TO_ONE": "collective-permute",
    "ALL_GATHER": "all-gather",
    "ALL_REDUCE": "all-reduce",
    "REDUCE_SCATTER": "reduce-scatter",
    "ALL_TO_ALL": "all-to-all",
}


def _attributes(line: str) -> dict[str, str]:
    return {k: v[1:-1] if v.startswith('"') else v for k, v in _ATTR.findall(line)}


def _ids(text: str, what: str) -> list[int]:
    """``1,2`` or ``0:3`` (an inclusive range) or a mix: ``0:3,8``."""
    out: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        m = re.fullmatch(r"(\d{1,9})(?::(\d{1,9}))?", part)
        if not m:
            raise HloParseError(f"cannot read {what} {part!r} in a megascale target")
        a = int(m.group(1))
        b = int(m.group(2)) if m.group(2) else a
        if b < a or len(out) + b - a + 1 > MAX_TARGET_DEVICES:
            raise HloParseError(f"megascale target range {part!r} is empty or too large")
        out.extend(range(a, b + 1))
    return out


def parse_target(text: str) -> tuple[list[list[int]], list[list[int]] | None]:
    """A megascale target as (groups, pairs): pairs for the ``{{a->b},...}`` spelling, else None."""
    t = text.strip()
    m = re.fullmatch(r"\{([^{}]*)\}x\{([^{}]*)\}", t)
    if m:
        slices = _ids(m.group(1), "slices")
        inside = _ids(m.group(2), "in-slice ids")
        if len(slices) * len(inside) > MAX_TARGET_DEVICES:
            raise HloParseError(f"megascale target {t[:80]!r} names too many devices")
        return [[MULTISLICE_ID_STRIDE * s + k for s in slices] for k in inside], None
    if "->" in t:
        pairs = [[int(a), int(b)] for a, b in re.findall(r"(\d{1,9})\s*->\s*(\d{1,9})", t)]
        if not pairs or not t.startswith("{"):
            raise HloParseError(f"cannot read megascale target {t[:80]!r}")
        return [list(c) for c in permute_chains([(a, b) for a, b in pairs])], pairs
    return _int_lists(t), None


def megascale_steps(hlo: str) -> list[dict[str, Any]]:
    """Every cross-slice step of a libtpu multi-slice module: one per megascale ``send``, with its ``recv``'s
    shape as the step's result (the facts above)."""
    sends: list[tuple[Any, dict[str, str]]] = []
    recv_shape: dict[str, str] = {}
    for ins in instructions(hlo):
        if "_xla_megascale_transfer_type" not in ins.attrs or ins.opcode not in ("send", "recv"):
            continue
        attrs = _attributes(ins.attrs)
        if ins.opcode == "recv":
            recv_shape[attrs.get("_xla_host_transfer_rendezvous", ins.name)] = ins.shape
        else:
            sends.append((ins, attrs))
    steps = []
    for ins, attrs in sends:
        kind = attrs.get("_xla_megascale_transfer_type", "")
        rendezvous = attrs.get("_xla_host_transfer_rendezvous")
        target = attrs.get("_xla_megascale_target")
        groups, pairs = parse_target(target) if target else ([], None)
        # the send's shape is a tuple (data, context, token): the data is its first array
        sent = _shapes(ins.shape)
        got = _shapes(recv_shape.get(rendezvous or "", ""))
        data = got[0] if got else (sent[0] if sent else None)
        steps.append(
            {
                "op": _OPS.get(kind, kind.lower().replace("_", "-") or "transfer"),
                "name": rendezvous or ins.name,
                "transfer_type": kind,
                "reduce_operation": attrs.get("_xla_megascale_reduce_operation"),
                "target": (target or "")[:2000],
                "bytes": data.bytes if data is not None else None,
                "sent_bytes": sent[0].bytes if sent else None,
                "shape": str(data) if data is not None else None,
                "groups": groups,
                "pairs": pairs,
                "computation": ins.computation,
                "fabric": "dcn",
            }
        )
    return steps
