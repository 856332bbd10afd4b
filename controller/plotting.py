"""matplotlib on demand, for every PNG the project draws (analyses, labs, endpoint runs): it is optional
(`pip install 'srv6-fabric[lab]'`), imported only when a plot is drawn, and PlotUnavailable says how to get it."""

from __future__ import annotations

from typing import Any


class PlotUnavailable(RuntimeError):
    """matplotlib is not installed."""


def pyplot() -> Any:
    """matplotlib.pyplot on the Agg backend (no display needed), or PlotUnavailable saying how to install it."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        raise PlotUnavailable(f"plots need matplotlib, which is not installed ({e}); "
                              "install it with: python3 -m pip install 'srv6-fabric[lab]' (or 'matplotlib>=3.7')") from None
    return plt
