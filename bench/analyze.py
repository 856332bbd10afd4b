"""Analyze benchmark (prints JSON): failure sets checked per second by the analysis' fast path
(Down.job_cut: is any host pair cut?) against the controller's own path (failover.with_failures +
failover.unreachable, and at small scale the host-pair answer derived from it), at several scales,
plus first-cut Monte Carlo samples per second for a job; ratios against the controller in the same run."""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from controller import failover, planning  # noqa: E402
from controller.analysis import montecarlo as mc  # noqa: E402
from controller.analysis.design import Design, Rates  # noqa: E402
from controller.analysis.reach import ControllerReach, Down, failures  # noqa: E402

SCALES = {"small": Design(2, 4, 16, 8), "medium": Design(8, 32, 64, 32), "mrc": Design(8, 256, 512, 256)}


def _rate(fn: Callable[[Down], Any], sets: list[Down], repeats: int) -> dict[str, float]:
    """Failure sets per second over `repeats` passes: median, min, max."""
    rates = []
    for _ in range(repeats):
        t = time.perf_counter()
        for down in sets:
            fn(down)
        rates.append(len(sets) / (time.perf_counter() - t))
    return {"median": round(statistics.median(rates), 1), "min": round(min(rates), 1), "max": round(max(rates), 1)}


def scale(name: str, d: Design, k: int, n: int, repeats: int, gpus: int) -> dict[str, Any]:
    rng = random.Random(1)
    u = mc.everything(d)
    sets = [mc.random_down(u, rng, k, Rates()) for _ in range(n)]
    t = time.perf_counter()
    base = planning.fabric(d.topology(), "srv6_spray")
    build_s = time.perf_counter() - t
    named = {id(s): failures(s) for s in sets}
    hosts = range(d.hosts)
    fast = _rate(lambda s: s.job_cut(hosts), sets, repeats)
    ctrl = _rate(lambda s: failover.unreachable(failover.with_failures(base, named[id(s)])), sets, repeats)
    out: dict[str, Any] = {
        "design": d.spec, "hosts": d.hosts, "switches": d.switches, "failures_per_set": k, "sets": n,
        "controller_fabric_build_s": round(build_s, 2),
        "fast_job_cut_per_s": fast, "controller_unreachable_per_s": ctrl,
        "ratio_fast_vs_controller_unreachable": round(fast["median"] / ctrl["median"], 1),
        "agree_any_pair_cut": None,
    }
    if d.hosts <= 128:
        reach = ControllerReach(d)
        pairs = _rate(lambda s: reach.cut_pairs(s, hosts), sets[: max(1, n // 10)], 1)
        out["controller_host_pairs_per_s"] = pairs
        out["ratio_fast_vs_controller_host_pairs"] = round(fast["median"] / pairs["median"], 1)
        out["agree_any_pair_cut"] = all(s.job_cut(hosts) == bool(reach.cut_pairs(s, hosts)) for s in sets[: n // 10])
    t = time.perf_counter()
    samples = 20
    mc.first_cut(d, range(min(gpus, d.hosts)), samples, seed=2, rates=Rates())
    out["first_cut_job"] = {"gpus": min(gpus, d.hosts), "samples_per_s": round(samples / (time.perf_counter() - t), 1)}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--scales", default="small,medium,mrc")
    ap.add_argument("--failures", type=int, default=16, help="failed components per set (kinds mixed by rate)")
    ap.add_argument("--sets", type=int, default=300)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--gpus", type=int, default=1024)
    args = ap.parse_args()
    results = {name: scale(name, SCALES[name], args.failures, args.sets, args.repeats, args.gpus)
               for name in args.scales.split(",")}
    print(json.dumps({"bench": "analyze", "python": platform.python_version(), "cpus": os.cpu_count(),
                      "scales": results}, indent=2))


if __name__ == "__main__":
    main()
