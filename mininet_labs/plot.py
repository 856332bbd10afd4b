"""PNG plots of lab results (matplotlib through controller.plotting: PlotUnavailable says when it is missing)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from controller.plotting import pyplot as _pyplot


def timeline(doc: dict[str, Any], path: str | Path) -> Path:
    """Delivered packets per plane over time (a scenario's to_json()), with its events marked."""
    plt = _pyplot()
    tl = doc.get("timeline") or {}
    bin_ms = tl.get("bin_ms") or 1
    fig, ax = plt.subplots(figsize=(9, 4.2))
    for plane, counts in sorted(tl.get("planes", {}).items(), key=lambda kv: int(kv[0])):
        xs = [i * bin_ms / 1000 for i in range(len(counts))]
        ax.step(xs, [n * 1000 / bin_ms for n in counts], where="post", label=f"plane {plane}")
    for e in doc.get("events", []):
        ax.axvline(e["t_ms"] / 1000, color="grey", linestyle="--", linewidth=0.8)
        ax.annotate(e["what"], (e["t_ms"] / 1000, ax.get_ylim()[1]), rotation=90, va="top", ha="right", fontsize=7)
    s = doc.get("summary", {})
    lw = s.get("loss_window_ms", {})
    ax.set_title(f"{doc.get('kind')} failure: {doc.get('failure')} - loss window median {lw.get('median')} ms, "
                 f"other QPs lost {s.get('lost_elsewhere')}", fontsize=9)
    ax.set_xlabel("seconds since the senders started")
    ax.set_ylabel(f"packets/s delivered ({bin_ms:g} ms bins)")
    ax.legend(loc="lower left")
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def balance(doc: dict[str, Any], path: str | Path) -> Path:
    """Bars of max/mean uplink load per program and mode (a BalanceResult's to_json())."""
    plt = _pyplot()
    modes = doc.get("modes", [])
    labels = [f"{m['program'].split('_')[0]}\n{m['mode']}" for m in modes]
    values = [m["max_over_mean"] or 0 for m in modes]
    colors = ["tab:blue" if m["program"] == "srv6_spray" else "tab:orange" for m in modes]
    fig, ax = plt.subplots(figsize=(8, 4))
    bars = ax.bar(labels, values, color=colors)
    for b, v in zip(bars, values):
        ax.annotate(f"{v:.2f}", (b.get_x() + b.get_width() / 2, v), ha="center", va="bottom", fontsize=8)
    ax.axhline(1.0, color="grey", linestyle="--", linewidth=0.8)
    ax.set_ylabel("max / mean uplink packets (1.0 = even)")
    ax.set_title(f"uplink balance: {len(doc.get('pairs', []))} host pairs x {doc.get('qps_per_pair')} QPs, "
                 f"one UDP source port", fontsize=9)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
