"""Plan-scale benchmark (prints JSON): full MRC fabric plan time, peak RSS, counts, one-link failure delta."""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import platform
import resource
import statistics
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from controller.failover import LinkDown, SwitchDown, delta, with_failures  # noqa: E402
from controller.plan import count_entities, count_switch, plan, totals  # noqa: E402
from controller.routes import Fabric, Options, Program, switch_entities  # noqa: E402
from controller.topology import Topology, build  # noqa: E402

MRC = {"planes": 8, "t1_per_plane": 256, "t0_per_plane": 512, "hosts_per_t0": 256}
BASELINE = {"planes": 8, "t1_per_plane": 32, "t0_per_plane": 64, "hosts_per_t0": 32}
# 512 data ports per switch do not fit bmv2's bit<9> port space (1..510 without CPU port 255):
# the scale plan numbers ports as a 10-bit switch would.
MAX_PORT = 1023

_FABRIC: Fabric | None = None  # inherited by forked workers


def _rss_mb(who: int = resource.RUSAGE_SELF) -> float:
    return round(resource.getrusage(who).ru_maxrss / 1024, 1)  # Linux: KiB


def _generate(names: list[str]) -> tuple[dict[str, int], list[str], float]:
    """Generate (and drop) every entity of these switches: entities per role, and the switches
    whose entities disagree with the path-math counts (all checked by total, 1 in 64 per table)."""
    assert _FABRIC is not None
    per_role: Counter[str] = Counter()
    wrong: list[str] = []
    topo = _FABRIC.topo
    for n, name in enumerate(names):
        sw = topo.switch(name)
        entities = switch_entities(_FABRIC, sw).all()
        per_role[sw.role] += len(entities)
        expect = count_switch(_FABRIC, sw)
        if len(entities) != sum(expect.values()) or (n % 64 == 0 and count_entities(entities) != expect):
            wrong.append(name)
    return dict(per_role), wrong, _rss_mb()


def _generate_all(fabric: Fabric, workers: int) -> dict[str, Any]:
    global _FABRIC
    _FABRIC = fabric
    names = [s.name for s in fabric.topo.switches]
    chunks = [names[i::workers] for i in range(workers)]
    start = time.perf_counter()
    if workers == 1:
        results = [_generate(names)]
    else:
        with mp.get_context("fork").Pool(workers) as pool:
            results = pool.map(_generate, chunks)
    wall = time.perf_counter() - start
    per_role: Counter[str] = Counter()
    for role_counts, _, _ in results:
        per_role.update(role_counts)
    return {"seconds": round(wall, 2), "workers": workers, "entities": dict(per_role),
            "counts_match_generated": not any(r[1] for r in results),
            "worker_peak_rss_mb": max(r[2] for r in results)}


def _one_link_delta(fabric: Fabric, topo: Topology, runs: int = 7) -> dict[str, Any]:
    """Fail one T0-T1 link and repair it, `runs` times: the first fail is with cold caches."""
    plane, leaf, spine = topo.planes // 2, len(topo.t0s(0)) // 3, len(topo.t1s(0)) // 2
    failure = LinkDown(topo.t0(plane, leaf).name, topo.t1(plane, spine).name)
    broken = with_failures(fabric, [failure])
    fail_ms, repair_ms = [], []
    for _ in range(runs):
        start = time.perf_counter()
        d = delta(fabric, broken)
        mid = time.perf_counter()
        repair = delta(broken, fabric)
        fail_ms.append((mid - start) * 1000)
        repair_ms.append((time.perf_counter() - mid) * 1000)
    return {"failure": f"{failure.t0} -- {failure.t1}", "runs": runs, "ms_cold": round(fail_ms[0], 1),
            "ms_median": round(statistics.median(fail_ms), 1), "ms_max": round(max(fail_ms), 1),
            "repair_ms_median": round(statistics.median(repair_ms), 1), "repair_ms_max": round(max(repair_ms), 1),
            "switches_changed": len(d), "updates": sum(len(x) for x in d.values()),
            "updates_by_kind": {"inserts": sum(len(x.inserts) for x in d.values()),
                                "modifies": sum(len(x.modifies) for x in d.values()),
                                "deletes": sum(len(x.deletes) for x in d.values())},
            "repair_updates": sum(len(x) for x in repair.values())}


def _one_spine_delta(fabric: Fabric, topo: Topology) -> dict[str, Any]:
    """Fail one whole T1 once: every leaf of its plane loses a member of its shared group."""
    spine = topo.t1(topo.planes // 2, len(topo.t1s(0)) // 2)
    broken = with_failures(fabric, [SwitchDown(spine.name)])
    start = time.perf_counter()
    d = delta(fabric, broken)
    seconds = time.perf_counter() - start
    return {"failure": spine.name, "ms": round(seconds * 1000, 1), "switches_changed": len(d),
            "updates": sum(len(x) for x in d.values())}


def run(size: dict[str, int], program: Program, workers: int, generate: bool) -> dict[str, Any]:
    """Plan one fabric size: build, count, (generate everything), one-link delta."""
    t0 = time.perf_counter()
    topo = build(**size, max_port=MAX_PORT)
    fabric = Fabric(topo, options=Options(program=program))
    t_build = time.perf_counter() - t0
    t1 = time.perf_counter()
    counts = plan(fabric).counts()
    role_totals = totals(counts, fabric)
    t_count = time.perf_counter() - t1
    leaves = sum(len(topo.t0s(p)) for p in range(topo.planes))
    out: dict[str, Any] = {
        "size": size, "program": program, "gpus": size["t0_per_plane"] * size["hosts_per_t0"],
        "switches": {"t0": leaves, "t1": len(topo.switches) - leaves},
        "build_s": round(t_build, 3), "count_s": round(t_count, 3),
        "entities_per_role": role_totals,
        "entities_per_switch": {"t0": counts[topo.t0(0, 0).name], "t1": counts[topo.t1(0, 0).name]},
    }
    out["delta_one_link"] = _one_link_delta(fabric, topo)
    out["delta_one_spine"] = _one_spine_delta(fabric, topo)
    if generate:
        gen = _generate_all(fabric, workers)
        out["generate_all"] = gen
        out["plan_s"] = round(t_build + gen["seconds"], 2)
    out["peak_rss_mb"] = _rss_mb()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1))
    ap.add_argument("--quick", action="store_true", help="baseline only, no MRC fabric")
    ap.add_argument("--program", default="srv6_spray", choices=["srv6_spray", "eecmp_qp_hash"])
    ap.add_argument("--no-generate", action="store_true", help="skip generating every entity")
    args = ap.parse_args()
    result: dict[str, Any] = {"host": {"python": platform.python_version(), "cpus": os.cpu_count()},
                              "targets": {"plan_s": 30, "peak_rss_mb": 4096, "delta_ms": 50}}
    base = run(BASELINE, args.program, args.workers, not args.no_generate)
    result["baseline"] = base
    if not args.quick:
        full = run(MRC, args.program, args.workers, not args.no_generate)
        result["mrc"] = full
        if "generate_all" in full:
            result["ratio_mrc_over_baseline"] = {
                "generate_s": round(full["generate_all"]["seconds"] / max(base["generate_all"]["seconds"], 1e-9), 1),
                "entities": round(full["entities_per_role"]["t0"]["all"] / base["entities_per_role"]["t0"]["all"], 1),
                "delta_ms_median": round(full["delta_one_link"]["ms_median"]
                                         / max(base["delta_one_link"]["ms_median"], 1e-9), 1),
            }
    result["peak_rss_mb_self"] = _rss_mb()
    result["peak_rss_mb_children"] = _rss_mb(resource.RUSAGE_CHILDREN)
    result["load_average"] = [round(x, 2) for x in os.getloadavg()]
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
