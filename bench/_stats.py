"""Figures the benches share: a median with its spread."""

from __future__ import annotations

import statistics
from typing import Any


def spread(values: list[float | None], digits: int = 1) -> dict[str, Any]:
    """Median, min, max and count of the values that are not None ({"median": None, "n": 0} for none)."""
    vs = [v for v in values if v is not None]
    if not vs:
        return {"median": None, "n": 0}
    return {"median": round(statistics.median(vs), digits), "min": round(min(vs), digits),
            "max": round(max(vs), digits), "n": len(vs)}


def paired_ratio(num: list[float | None], den: list[float | None], digits: int = 3) -> dict[str, Any]:
    """Run i's ratio num[i] / den[i] over the runs (runs taken in turns, so each pair shared the machine's
    load of its moment), as spread() gives them; a pair with a value missing or zero is left out."""
    return spread([n / d if n and d else None for n, d in zip(num, den)], digits)
