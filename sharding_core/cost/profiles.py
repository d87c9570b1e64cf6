"""Each fabric's fitted expected-time profile: one efficiency and one latency per step (:class:`FabricProfile`),
the constants :mod:`sharding_core.cost.collectives` estimates with. Fitted to the published measurements by
:mod:`sharding_core.cost.efficiency` (which refits and checks them: ``tests/test_cost_measured.py``)."""

from __future__ import annotations

import dataclasses
from typing import Any

# The fabrics with a profile of their own, and where one without measurements borrows its fit.
KEYS = ("ici_torus", "ici_line", "dcn", "nvlink", "network")
BORROW = {"ici_torus": "ici_line", "dcn": "network"}


@dataclasses.dataclass(frozen=True)
class FabricProfile:
    """A fabric's fitted efficiency (measured bandwidth / spec-sheet bandwidth) and latency per step."""

    efficiency: float
    step_latency: float  # seconds
    rows: int = 0  # measurements it was fitted to
    borrowed: str | None = None  # the fabric whose fit it uses, when it has no measurements of its own

    def json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def profile_key(fabric: str, wraparound: bool = False) -> str:
    if fabric == "ici":
        return "ici_torus" if wraparound else "ici_line"
    return fabric


# Fitted to sharding_core.cost.measurements.MEASUREMENTS by fit_profiles() (tests/test_cost_measured.py
# checks they are what the table gives).
_ICI_LINE = FabricProfile(efficiency=0.805, step_latency=2.9e-6, rows=12)
_NETWORK = FabricProfile(efficiency=0.92, step_latency=10.0e-6, rows=4)
PROFILES: dict[str, FabricProfile] = {
    "ici_line": _ICI_LINE,
    "ici_torus": dataclasses.replace(_ICI_LINE, rows=0, borrowed="ici_line"),
    "nvlink": FabricProfile(efficiency=0.775, step_latency=3.9e-6, rows=12),
    "network": _NETWORK,
    "dcn": dataclasses.replace(_NETWORK, rows=0, borrowed="network"),
}
