"""PNG of a side-by-side comparison: goodput over time per mode, and the reorder-distance histograms."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from controller.plotting import pyplot as _pyplot


def comparison(doc: dict[str, Any], path: str | Path) -> Path:
    """Delivered packets/s per mode over time (fault and repair marked) beside each mode's reorder histogram."""
    plt = _pyplot()
    fig, (ax, hist) = plt.subplots(1, 2, figsize=(13, 4.4), gridspec_kw={"width_ratios": [2.2, 1]})
    modes = doc.get("modes", [])
    for m in modes:
        g = m["goodput"]
        bin_ms = g["bin_ms"] or 1
        xs = [i * bin_ms / 1000 for i in range(len(g["packets"]))]
        s = m["summary"]
        label = (f"{m['mode']} ({m['policy']}): lost 1st {s['lost_first_try']}, resent {s['retransmitted']}, "
                 f"window {s['loss_window_ms']['median']} ms, goodput x{s['goodput_pps']['ratio']}")
        ax.step(xs, [n * 1000 / bin_ms for n in g["packets"]], where="post", label=label, linewidth=1)
    if modes:
        g = modes[0]["goodput"]
        for t, what in ((g["fault_s"], "fault"), (g["repair_s"], "repair")):
            ax.axvline(t, color="grey", linestyle="--", linewidth=0.8)
            ax.annotate(what, (t, 0), rotation=90, va="bottom", ha="right", fontsize=8)
    ax.set_xlabel("seconds after the senders started")
    ax.set_ylabel("distinct packets delivered per second (all receivers)")
    ax.set_title(f"{doc.get('fault')}", fontsize=10)
    ax.legend(fontsize=7, loc="lower left")
    buckets = sorted({k for m in modes for k in m["summary"]["reorder"]}, key=lambda k: int(k.split("-")[0]))
    width = 0.8 / max(1, len(modes))
    for i, m in enumerate(modes):
        r = m["summary"]["reorder"]
        total = sum(r.values()) or 1
        hist.bar([j + i * width for j in range(len(buckets))], [r.get(b, 0) / total for b in buckets], width,
                 label=m["mode"])
    hist.set_xticks([j + 0.4 - width / 2 for j in range(len(buckets))], buckets)
    hist.set_yscale("log")
    hist.set_xlabel("reorder distance (higher PSNs that came first)")
    hist.set_ylabel("share of packets")
    hist.legend(fontsize=7)
    fig.tight_layout()
    out = Path(path)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
