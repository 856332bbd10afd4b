"""Draw a topology with matplotlib: planes side by side (T1s, T0s, then the hosts shared by all
planes), the failures of a failure set in red."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from controller import failover
from controller.model.failures import Failure
from controller.model.topology import Topology

MAX_SWITCHES, MAX_HOSTS = 400, 512
FAILED = "#d62728"


class DrawError(Exception):
    """A topology too large to draw legibly, a format we do not write, or matplotlib missing (one line)."""


def positions(topo: Topology, hosts: bool) -> dict[str, tuple[float, float]]:
    """Layered layout: plane p's T1s on y = 2 and T0s on y = 1 inside its own band of x; the hosts
    on y = 0 spread under all planes (each host is one node, with a NIC in every plane)."""
    pos: dict[str, tuple[float, float]] = {}
    x0 = 0.0
    for p in range(topo.planes):
        t1s, t0s = topo.t1s(p), topo.t0s(p)
        width = max(len(t1s), len(t0s), 1)
        for role, row, y in (("t1", t1s, 2.0), ("t0", t0s, 1.0)):
            for n, s in enumerate(row):
                pos[s.name] = (x0 + (n + 0.5) * width / len(row), y)
        x0 += width + 1
    if hosts:
        total = x0 - 1
        names = list(topo.hosts)
        for n, h in enumerate(names):
            pos[h] = ((n + 0.5) * total / len(names), 0.0)
    return pos


def draw(topo: Topology, failures: Iterable[Failure], path: Path, *, hosts: bool = True) -> Path:
    """Write the drawing to `path` (.png or .svg), atomically; returns the path."""
    fmt = path.suffix.lower().lstrip(".")
    if fmt not in ("png", "svg"):
        raise DrawError(f"cannot draw to {path}: the file must end in .png or .svg")
    if len(topo.switches) > MAX_SWITCHES:
        raise DrawError(f"{topo.name} has {len(topo.switches)} switches: too many to draw legibly (at most {MAX_SWITCHES})")
    if hosts and len(topo.hosts) > MAX_HOSTS:
        raise DrawError(f"{topo.name} has {len(topo.hosts)} hosts: too many to draw (at most {MAX_HOSTS}); add --no-hosts")
    try:
        from controller.analysis.plot import PlotError, require, save

        plt = require()
    except PlotError as e:
        raise DrawError(str(e)) from None
    h = failover.health(topo, failures)
    pos = positions(topo, hosts)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    width = max(x for x, _ in pos.values()) + 1
    fig, ax = plt.subplots(figsize=(min(4 + width * 0.45, 40), 5))

    def line(a: str, b: str, color: str, failed: bool) -> None:
        (xa, ya), (xb, yb) = pos[a], pos[b]
        ax.plot([xa, xb], [ya, yb], color=FAILED if failed else color, linestyle="--" if failed else "-",
                linewidth=1.6 if failed else 0.8, alpha=1.0 if failed else 0.6, zorder=1)

    for p in range(topo.planes):
        color = colors[p % len(colors)]
        for leaf in topo.t0s(p):
            for j in range(len(leaf.uplinks)):
                line(leaf.name, topo.t1(p, j).name, color, not h.link_up(p, leaf.index, j))
            if hosts:
                for k, host in enumerate(leaf.host_names):
                    line(leaf.name, host, color, not h.slot_up(p, leaf.index, k))
        xs = [pos[s.name][0] for s in (*topo.t1s(p), *topo.t0s(p))]
        ax.text(sum(xs) / len(xs), 2.2, f"plane {p}", color=color, fontsize=9, ha="center")
    for s in topo.switches:
        x, y = pos[s.name]
        down = (s.plane, s.index) in (h.leaves if s.role == "t0" else h.spines)
        ax.scatter([x], [y], s=220, marker="s", color="white", edgecolors=FAILED if down else "black", zorder=2,
                   linewidths=2 if down else 1)
        if down:
            ax.scatter([x], [y], s=160, marker="x", color=FAILED, zorder=3)
        ax.text(x, y - 0.16, s.name, ha="center", va="top", fontsize=6)
    if hosts:
        for host in topo.hosts:
            x, y = pos[host]
            ax.scatter([x], [y], s=60, marker="o", color="lightgrey", edgecolors="black", zorder=2)
            ax.text(x, y - 0.12, host, ha="center", va="top", fontsize=6)
    n = len(h.links) + len(h.leaves) + len(h.spines) + len(h.slots)
    ax.set_title(f"{topo.name}: {topo.planes} planes" + (f", {n} failures (red)" if n else ", no failures"), fontsize=10)
    ax.set_axis_off()
    fig.tight_layout()
    try:
        return save(fig, plt, path)
    except PlotError as e:
        raise DrawError(str(e)) from None
