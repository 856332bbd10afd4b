"""PNG plots of analyses: P(job cut) vs failures and the job's survival with no repair, per design
(matplotlib, imported only when a plot is asked for)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any


class PlotError(Exception):
    """matplotlib is missing, or the file cannot be written (one line)."""


def require() -> Any:
    """matplotlib.pyplot on the Agg backend (the labs' loader), or PlotError saying how to install it."""
    from controller.plotting import PlotUnavailable, pyplot as _pyplot

    try:
        return _pyplot()
    except PlotUnavailable as e:
        raise PlotError(str(e)) from None


def check_path(path: Path) -> None:
    """PlotError unless the plot can be written there as a PNG (checked before any work)."""
    if path.suffix.lower() != ".png":
        raise PlotError(f"plot file {path} must end in .png")
    if not path.parent.is_dir():
        raise PlotError(f"cannot write {path}: no directory {path.parent}")


def plot_results(results: Sequence[dict[str, Any]], path: Path) -> Path:
    """Two panels: P(job cut) after k failures with its 95% band, and the fraction of no-repair
    runs whose job still ran at time t; one line per design. Writes atomically."""
    check_path(path)
    plt = require()
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    for r in results:
        c = r["curve"]
        ks = c["failures"]
        vals = [e["value"] for e in c["p_job_cut"]]
        line, = left.plot(ks, vals, marker="o", label=f"{r['design']['name']} ({r['job']['gpus']} GPUs)")
        left.fill_between(ks, [e["lo"] for e in c["p_job_cut"]], [e["hi"] for e in c["p_job_cut"]],
                          color=line.get_color(), alpha=0.2)
        if c.get("p_pair_cut_closed"):
            left.plot(ks, c["p_pair_cut_closed"], linestyle="--", color=line.get_color(), alpha=0.7)
        ts = r["survival_hours"]
        n = len(ts)
        right.step([0.0, *ts], [1.0, *(1 - (i + 1) / n for i in range(n))], where="post",
                   color=line.get_color(), label=r["design"]["name"])
    left.set_xlabel(f"failures ({results[0]['curve']['kind']})")
    left.set_ylabel("P(some job pair cut)")
    left.set_title("P(job disconnected) vs failures (MC, 95% band; dashed: given pair, closed form)", fontsize=8)
    left.set_ylim(-0.02, 1.02)
    left.legend(fontsize=8)
    right.set_xscale("log")
    right.set_xlabel("hours, no repair")
    right.set_ylabel("fraction of runs still connected")
    right.set_title("job survival without repair (MC)", fontsize=8)
    right.legend(fontsize=8)
    fig.tight_layout()
    return save(fig, plt, path)


def save(fig: Any, plt: Any, path: Path) -> Path:
    """Write the figure to a temporary file beside `path`, then rename (no half-written file)."""
    tmp = path.with_name(f".{path.name}.tmp{path.suffix}")
    try:
        fig.savefig(tmp, dpi=110)
        tmp.replace(path)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise PlotError(f"cannot write {path}: {e.strerror or e}") from None
    finally:
        plt.close(fig)
    return path
