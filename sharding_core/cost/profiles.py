"""Each fabric's expected-time profile (:class:`FabricProfile`): the constants
:mod:`sharding_core.cost.collectives` estimates with, fitted to the published measurements' training split by
:mod:`sharding_core.cost.efficiency` (which documents the model and refits them: ``tests/test_cost_measured.py``)."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

# The fabrics with a profile of their own, and where one without measurements borrows its fit.
KEYS = ("ici_torus", "ici_line", "dcn", "nvlink", "network")
BORROW = {"ici_torus": "ici_line", "dcn": "network"}


def phases_of(kind: str) -> int:
    """Sequential phases of a collective: an all-reduce is a reduce-scatter then an all-gather."""
    return 2 if kind == "all-reduce" else 1


@dataclasses.dataclass(frozen=True)
class FabricProfile:
    """A fabric's fitted figures: its efficiency for operations without their own (``efficiency``) and per
    operation (``op_efficiency``), its latency per phase (``step_latency``), and its saturating size curve
    (``half_size``: the per-rank buffer in bytes at which half the efficiency is reached; ``exponent``)."""

    efficiency: float
    step_latency: float  # seconds per phase
    half_size: float = 0.0  # bytes
    exponent: float = 1.0
    op_efficiency: tuple[tuple[str, float], ...] = ()
    op_latency: tuple[tuple[str, float], ...] = ()  # a calibrated profile's latency per operation (seconds)
    rows: int = 0  # training measurements it was fitted to
    borrowed: str | None = None  # the fabric whose fit it uses, when it has no measurements of its own
    source: str = "fitted"  # "fitted", or where a calibrated profile came from

    def efficiency_of(self, kind: str) -> float:
        return dict(self.op_efficiency).get(kind, self.efficiency)

    def fitted_for(self, kind: str) -> bool:
        """Whether ``kind`` has an efficiency of its own (else the fabric's is used)."""
        return kind in dict(self.op_efficiency)

    def term(self, kind: str, bandwidth_seconds: float, size: float, steps: int, floor: float = 0.0) -> float:
        """The expected time of one term: ``steps`` latency steps (at least ``floor``, the bound's latency) plus
        the bandwidth time at the operation's efficiency on the saturating curve (``size``: the per-rank buffer)."""
        measured = dict(self.op_latency).get(kind)
        if measured is not None:  # a calibrated profile: the operation's own latency, the α–β line it measured
            return max(measured, floor) + bandwidth_seconds / self.efficiency_of(kind)
        return float(term_seconds(bandwidth_seconds, size, steps, floor, self.efficiency_of(kind), self.step_latency,
                           self.half_size, self.exponent))  # fmt: skip

    def json(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["op_efficiency"] = dict(self.op_efficiency)
        out["op_latency"] = dict(self.op_latency)
        return out

    def summary_json(self) -> dict[str, Any]:
        """The four figures ``POST /api/cost/nccl-fit`` answers with (its schema's ``NcclProfile``)."""
        return {"efficiency": self.efficiency_of("all-reduce"), "step_latency": self.step_latency,
                "rows": self.rows, "borrowed": self.borrowed}  # fmt: skip


def term_seconds(b: Any, size: Any, steps: Any, floor: Any, e: Any, alpha: Any, half: Any, k: Any) -> Any:
    """``max(α · steps, floor) + b / e · (1 + (S½ / S)^k)``, broadcasting over numpy arrays (the fit's grids)."""
    size = max(float(size), 1.0)
    ramp = np.where(np.asarray(half) > 0, (np.asarray(half, dtype=float) / size) ** np.asarray(k, dtype=float), 0.0)
    return np.maximum(np.asarray(alpha) * steps, floor) + b / e * (1.0 + ramp)


def profile_key(fabric: str, wraparound: bool = False) -> str:
    if fabric == "ici":
        return "ici_torus" if wraparound else "ici_line"
    return fabric


# Fitted to the training split of sharding_core.cost.measurements.MEASUREMENTS by fit_profiles()
# (tests/test_cost_measured.py refits on the training rows alone and checks they are what it gives;
# `python -m sharding_core.cost.accuracy` prints the refit in this form).
SHIPPED: dict[str, dict[str, Any]] = {
    "ici_line": {
        "efficiency": 0.88,
        "step_latency": 1.28e-05,
        "half_size": 21100.0,
        "exponent": 1.0,
        "op_efficiency": (("all-gather", 0.88), ("all-reduce", 0.63)),
        "rows": 9,
    },
    "nvlink": {
        "efficiency": 0.805,
        "step_latency": 3.89e-06,
        "half_size": 750000.0,
        "exponent": 0.4,
        "op_efficiency": (
            ("all-gather", 0.775),
            ("all-reduce", 0.945),
            ("all-to-all", 0.77),
            ("reduce-scatter", 0.785),
        ),
        "rows": 32,
    },
    "network": {
        "efficiency": 1.07,
        "step_latency": 1.84e-05,
        "half_size": 18800000.0,
        "exponent": 0.55,
        "op_efficiency": (("all-reduce", 1.07),),
        "rows": 9,
    },
}


def _shipped() -> dict[str, FabricProfile]:
    ici = FabricProfile(**SHIPPED["ici_line"])
    network = FabricProfile(**SHIPPED["network"])
    return {
        "ici_line": ici,
        "ici_torus": dataclasses.replace(ici, rows=0, borrowed="ici_line"),
        "nvlink": FabricProfile(**SHIPPED["nvlink"]),
        "network": network,
        "dcn": dataclasses.replace(network, rows=0, borrowed="network"),
    }


PROFILES: dict[str, FabricProfile] = _shipped()
