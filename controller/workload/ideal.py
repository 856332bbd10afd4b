"""The ideal completion time: what the links allow when every step's traffic is split perfectly over
every path (a fluid model of a two-tier Clos).

A step ends when its most loaded cut has carried its bytes: a host's NIC ports out (sum over planes of
its port rate) and in, a leaf's uplinks out to the spines and the spines' downlinks in to it (traffic
between ranks of one leaf stays in the leaf). Steps follow one another, so one iteration's ideal is the
sum of its steps' ideals. With a perfect split no spine and no single link limits below these cuts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

from controller.workload.collectives import patterns
from controller.workload.placement import Placement
from controller.workload.schedule import Workload


@dataclass(frozen=True)
class Rates:
    """Link rates in bits per second: a host NIC port (one per plane) and a leaf-spine link."""

    host: float
    uplink: float


def ideal_time(workload: Workload, placement: Placement, spines: int, rates: Rates,
               leaf_uplinks: np.ndarray | None = None) -> float:
    """Seconds one iteration takes at best. `spines`: T1 per plane; `leaf_uplinks`: working uplinks of
    each leaf summed over planes (default: planes x spines for every leaf), for a fabric with failures."""
    import numpy as np

    n = placement.size
    leaves = np.asarray(placement.leaves, dtype=np.int64)
    n_leaves = int(leaves.max()) + 1
    up = (np.full(n_leaves, placement.planes * spines, dtype=np.float64) if leaf_uplinks is None
          else np.asarray(leaf_uplinks, dtype=np.float64)[:n_leaves])
    host_bps = placement.planes * rates.host
    total = 0.0
    chunk = workload.size / n
    for p in patterns(workload.collective, n):
        b = p.chunks * chunk
        out_host = np.bincount(p.src, weights=b, minlength=n)
        in_host = np.bincount(p.dst, weights=b, minlength=n)
        cross = leaves[p.src] != leaves[p.dst]
        out_leaf = np.bincount(leaves[p.src][cross], weights=b[cross], minlength=n_leaves)
        in_leaf = np.bincount(leaves[p.dst][cross], weights=b[cross], minlength=n_leaves)
        with np.errstate(divide="ignore", invalid="ignore"):
            leaf_t = np.where(out_leaf + in_leaf > 0, np.maximum(out_leaf, in_leaf) * 8 / (up * rates.uplink), 0.0)
        step = max(float(out_host.max()), float(in_host.max())) * 8 / host_bps
        step = max(step, float(leaf_t.max()) if leaf_t.size else 0.0)
        total += step * p.repeat
    return total
