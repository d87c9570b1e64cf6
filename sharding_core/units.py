"""Bytes and seconds as people read them: the one formatter every layer uses (terminal text, kernel-lab
messages, cost estimates, HBM fit). The dashboard's twin is ``frontend/js/lib/format.js`` (``fmtBytes``,
``fmtSeconds``), which follows the same rules.

Bytes in binary units (KiB = 1024 B, as ``memory_analysis`` counts them); seconds to three significant
digits in the largest unit that keeps the value at least 1 (``279.6e-6`` reads ``280 µs``, never ``28 µs``:
the value is rounded to three digits *before* the unit is chosen, so ``999.96 µs`` reads ``1 ms``).
"""

from __future__ import annotations

import math

_BYTE_UNITS = (("TiB", 1024**4), ("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024))
_SECOND_UNITS = (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6), ("ns", 1e-9))


def fmt_bytes(n: int | float) -> str:
    """``1536`` -> ``"1.5 KiB"``; under 1 KiB in whole bytes."""
    for unit, size in _BYTE_UNITS:
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{int(n)} B"


def three_digits(x: float) -> str:
    """A positive number to three significant digits, without an exponent or trailing zeros after a
    point: 279.6 -> "280", 1.4 -> "1.4", 93.24 -> "93.2", 100 -> "100"."""
    text = f"{float(f'{x:.3g}'):f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def fmt_seconds(s: float | None) -> str:
    """Seconds with the unit that reads: ``"280 µs"``, ``"1.4 ms"``, ``"2.1 s"``; ``"—"`` for none."""
    if s is None or math.isnan(s):
        return "—"
    if s == 0:
        return "0 s"
    rounded = float(f"{s:.3g}")
    for unit, scale in _SECOND_UNITS:
        if rounded >= scale:
            return f"{three_digits(rounded / scale)} {unit}"
    return f"{s:.3g} s"
