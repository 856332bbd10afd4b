"""Plan-scale benchmark (prints JSON): MRC plan time against a bare enumeration, reachability, deltas, 1,152-switch load and export."""

from __future__ import annotations

import argparse
import dataclasses
import json
import multiprocessing as mp
import os
import platform
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import yaml  # noqa: E402

from controller.failover import delta, unreachable, with_failures  # noqa: E402
from controller.model.failures import LinkDown, SwitchDown
from controller.plan.gcpause import gc_paused  # noqa: E402
from controller.model import yamlload  # noqa: E402
from controller.plan.fabricplan import Plan, count_entities, count_switch, plan, totals  # noqa: E402
from controller.plan.reachability import Reach  # noqa: E402
from controller.routes import Fabric, Health, Options, switch_entities  # noqa: E402
from controller.plan.p4names import Program
from controller.model.topology import Topology, build, from_dict, to_dict  # noqa: E402

MRC = {"planes": 8, "t1_per_plane": 256, "t0_per_plane": 512, "hosts_per_t0": 256}
BASELINE = {"planes": 8, "t1_per_plane": 32, "t0_per_plane": 64, "hosts_per_t0": 32}
# 512 data ports per switch do not fit bmv2's bit<9> port space (1..510 without CPU port 255):
# the scale plan numbers ports as a 10-bit switch would.
MAX_PORT = 1023

_FABRIC: Fabric | None = None  # inherited by forked workers


def _rss_mb(who: int = resource.RUSAGE_SELF) -> float:
    return round(resource.getrusage(who).ru_maxrss / 1024, 1)  # Linux: KiB


def _generate(names: list[str]) -> tuple[dict[str, int], list[str], float, float]:
    """Generate (and drop) every entity of these switches: entities per role, and the switches
    whose entities disagree with the path-math counts (all checked by total, 1 in 64 per table)."""
    assert _FABRIC is not None
    per_role: Counter[str] = Counter()
    wrong: list[str] = []
    topo = _FABRIC.topo
    cpu = time.process_time()
    with gc_paused():
        for n, name in enumerate(names):
            sw = topo.switch(name)
            entities = switch_entities(_FABRIC, sw).all()
            per_role[sw.role] += len(entities)
            expect = count_switch(_FABRIC, sw)
            if len(entities) != sum(expect.values()) or (n % 64 == 0 and count_entities(entities) != expect):
                wrong.append(name)
    return dict(per_role), wrong, _rss_mb(), time.process_time() - cpu


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
    for role_counts, *_ in results:
        per_role.update(role_counts)
    return {"seconds": round(wall, 2), "workers": workers, "entities": dict(per_role),
            "worker_cpu_s": [round(r[3], 2) for r in results],
            "counts_match_generated": not any(r[1] for r in results),
            "worker_peak_rss_mb": max(r[2] for r in results)}


def _bare(names: list[str]) -> tuple[int, float]:
    """The floor: every static entry of these switches (same counts as the plan) as plain tuples
    of the same values, with no entity classes, no caches, no failure logic."""
    assert _FABRIC is not None
    cpu = time.process_time()
    with gc_paused():  # as the plan is generated: tuples and entities alike are never walked
        return _bare_switches(names), time.process_time() - cpu


def _bare_switches(names: list[str]) -> int:
    assert _FABRIC is not None
    topo, sids, n = _FABRIC.topo, _FABRIC.sids, 0
    for name in names:
        sw = topo.switch(name)
        p, i, mac = sw.plane, sw.index, sw.mac
        if sw.role == "t1":
            out = [("my_sid", sids.un_prefix(sids.t1_usid(p, i)), 48)]
            for d, port in enumerate(sw.downlinks):
                out.append(("routes_v6", sids.un_prefix(sids.t0_usid(p, d)), 48, port, mac, topo.t0(p, d).mac))
                out.append(("my_sid", sids.local_sid(sids.t1_usid(p, i), sids.t0_usid(p, d)), 64, port, mac,
                            topo.t0(p, d).mac))
            out.append(("routes_v6", "block"))
            n += len(out)
            continue
        un = sids.t0_usid(p, i)
        out = [("member", j + 1, sids.t1_usid(p, j), j) for j in range(len(sw.uplinks))]
        out.append(("group", 1, tuple(range(1, len(sw.uplinks) + 1))))
        out += [("my_sid", un), ("my_sid", un, "dt6")]
        for k, port in enumerate(sw.host_ports):
            host_mac = topo.host_mac(sw, k)
            sid = sids.local_sid_text(un, sids.dx6_usid(p, k))
            out.append(("host_policy", port, sids.host_v6_text(p, i, k), sid))
            out.append(("my_sid", sid, port, mac, host_mac))
            out.append(("routes_v6", sids.host_v6_text(p, i, k), port, mac, host_mac))
        spines = topo.t1s(p)
        out += [("routes_v6", sids.un_prefix(sids.t1_usid(p, j)), port, mac, spines[j].mac)
                for j, port in enumerate(sw.uplinks)]
        out += [("routes_v6", "block"), ("spray_dest", "aggregate"), ("spray_dest", "local"), ("spray_paths", "aggregate")]
        n += len(out)
    return n


def _bare_all(fabric: Fabric, workers: int) -> dict[str, Any]:
    global _FABRIC
    _FABRIC = fabric
    names = [s.name for s in fabric.topo.switches]
    start = time.perf_counter()
    if workers == 1:
        results = [_bare(names)]
    else:
        with mp.get_context("fork").Pool(workers) as pool:
            results = pool.map(_bare, [names[i::workers] for i in range(workers)])
    return {"seconds": round(time.perf_counter() - start, 2), "workers": workers,
            "entries": sum(r[0] for r in results), "worker_cpu_s": [round(r[1], 2) for r in results]}


def _reachability(topo: Topology, runs: int = 30) -> dict[str, Any]:
    """reachability.Reach over positions for random failure sets of n links, leaves, spines and
    host ports (in the proportions of their counts), and failover.unreachable for the same sets."""
    reach, named = Reach.regular(topo.planes, len(topo.t1s(0)), len(topo.t0s(0))), Reach.of(topo)
    rnd = random.Random(7)
    planes, spines, leaves = topo.planes, len(topo.t1s(0)), len(topo.t0s(0))
    slots = len(topo.t0(0, 0).host_ports)
    out: dict[str, Any] = {}
    for n in (10, 100, 1000):
        fast, names, old = [], [], []
        for _ in range(runs):
            links = [(rnd.randrange(planes), rnd.randrange(leaves), rnd.randrange(spines)) for _ in range(n)]
            down_leaves = [(rnd.randrange(planes), rnd.randrange(leaves)) for _ in range(max(1, n // 100))]
            down_spines = [(rnd.randrange(planes), rnd.randrange(spines)) for _ in range(max(1, n // 200))]
            ports = [(rnd.randrange(planes), rnd.randrange(leaves), rnd.randrange(slots)) for _ in range(n)]
            t = time.perf_counter()
            reach.planes_reach(links, down_leaves, down_spines, ports)
            fast.append((time.perf_counter() - t) * 1000)
            t = time.perf_counter()
            got = named.unreachable(links, down_leaves, down_spines, ports)
            names.append((time.perf_counter() - t) * 1000)
            if len(old) < 3:  # the old path: health, a Fabric, failover.unreachable (slow: 3 runs)
                t = time.perf_counter()
                h = Health(frozenset(links), frozenset(down_leaves), frozenset(down_spines), frozenset(ports))
                assert unreachable(dataclasses.replace(Fabric(topo), health=h)) == got
                old.append((time.perf_counter() - t) * 1000)
        out[f"{n}_failures"] = {"runs": runs, "ms_median": _r(statistics.median(fast)), "ms_max": _r(max(fast)),
                                "named_ms_median": _r(statistics.median(names)),
                                "failover_unreachable_ms_median": _r(statistics.median(old)), "failover_runs": len(old)}
    return out


def _r(x: float) -> float:
    return round(x, 3)


def _one_link_delta(fabric: Fabric, topo: Topology, runs: int = 7) -> dict[str, Any]:
    """Fail one T0-T1 link and repair it, `runs` times: the first fail is with cold caches."""
    plane, leaf, spine = topo.planes // 2, len(topo.t0s(0)) // 3, len(topo.t1s(0)) // 2
    failure = LinkDown(topo.t0(plane, leaf).name, topo.t1(plane, spine).name)
    broken = with_failures(fabric, [failure])
    fail_ms, repair_ms, cpu_ms = [], [], []
    for _ in range(runs):
        start, cpu = time.perf_counter(), time.process_time()
        d = delta(fabric, broken)
        mid = time.perf_counter()
        cpu_ms.append((time.process_time() - cpu) * 1000)
        repair = delta(broken, fabric)
        fail_ms.append((mid - start) * 1000)
        repair_ms.append((time.perf_counter() - mid) * 1000)
    return {"failure": f"{failure.t0} -- {failure.t1}", "runs": runs, "ms_cold": round(fail_ms[0], 1),
            "ms_median": round(statistics.median(fail_ms), 1), "ms_max": round(max(fail_ms), 1),
            "cpu_ms_median": round(statistics.median(cpu_ms), 1), "cpu_ms_min": round(min(cpu_ms), 1),
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


EXPORT = {"planes": 8, "t1_per_plane": 16, "t0_per_plane": 128, "hosts_per_t0": 128}  # 1,152 switches
_WHOLE_DOCUMENT = """
import json, sys
from controller.plan.fabricplan import FORMAT, entity_to_json, plan
from controller.routes import Fabric
from controller.model.topology import load
p = plan(Fabric(load(sys.argv[1])))
doc = {"format": FORMAT, "switches": {n: [entity_to_json(e) for e in p[n]] for n in p}}
open(sys.argv[2], "w").write(json.dumps(doc, indent=1) + "\\n")
"""


# The child's own peak RSS is VmHWM of its image: getrusage's ru_maxrss would count the pages of
# this (large) parent it was forked from, which Linux carries over the exec.
_HWM = """
import atexit, os, runpy, sys
def _hwm():
    with open("/proc/self/status") as f:
        kb = next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))
    with open(os.environ["PLAN_SCALE_HWM"], "w") as out:
        out.write(str(kb))
atexit.register(_hwm)
sys.argv = sys.argv[1:]
if sys.argv[0] == "-m":
    sys.argv = sys.argv[1:]
    runpy.run_module(sys.argv[0], run_name="__main__", alter_sys=True)
else:
    exec(compile(sys.argv[0], "<child>", "exec"), {"__name__": "__main__"})
"""


def _child(argv: list[str], tmp: Path) -> tuple[float, float]:
    """Run `python argv...` to its end: (seconds, its own peak RSS in MB)."""
    hwm = tmp / "hwm"
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", _HWM, *argv], cwd=ROOT, stdout=subprocess.DEVNULL,
                          env={**os.environ, "PLAN_SCALE_HWM": str(hwm)}, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{argv[:3]} exited {proc.returncode}")
    return time.perf_counter() - start, int(hwm.read_text()) / 1024


def _export(size: dict[str, int]) -> dict[str, Any]:
    """A 1,152-switch topology file: load time with libyaml and pure-Python PyYAML, then
    `fabricctl plan --export` (streamed) against building the whole JSON document first (the
    baseline), each in a child process whose peak RSS is measured alone."""
    topo = build(**size)
    with tempfile.TemporaryDirectory(prefix=f"plan-export-{os.getpid()}-") as tmp:
        path = Path(tmp) / "fabric.yaml"
        path.write_text(yaml.safe_dump(to_dict(topo), sort_keys=False))
        loads = {}  # seconds, file to Topology
        for name, read in (("record_by_record", yamlload.load),
                           ("c_safe_loader", lambda f: yaml.load(f, Loader=yaml.CSafeLoader)),  # noqa: S506
                           ("pure_safe_loader", lambda f: yaml.load(f, Loader=yaml.SafeLoader))):  # noqa: S506
            if name != "pure_safe_loader" and not yamlload.available():
                continue
            start = time.perf_counter()
            with open(path, encoding="utf-8") as f:
                from_dict(read(f))
            loads[name] = round(time.perf_counter() - start, 2)
        yaml_mb = round(path.stat().st_size / 1e6, 1)
        out = Path(tmp) / "plan.json"
        stream_s, stream_mb = _child(["-m", "fabricctl", "--topology", str(path), "plan", "--export", str(out)],
                                     Path(tmp))
        exported = out.stat().st_size
        start = time.perf_counter()
        with open(out, encoding="utf-8") as f:
            again = Plan.from_json(f.read())
        read_s = time.perf_counter() - start
        counts = plan(Fabric(topo)).counts()
        round_trip = list(again) == list(counts) and all(sum(counts[n].values()) == len(again[n]) for n in again)
        del again
        whole_s, whole_mb = _child([_WHOLE_DOCUMENT, str(path), str(out)], Path(tmp))
    return {"size": size, "switches": len(topo.switches), "yaml_mb": yaml_mb,
            "yaml_load_s": loads, "export_bytes": exported,
            "export_streamed": {"seconds": round(stream_s, 2), "peak_rss_mb": round(stream_mb, 1)},
            "export_whole_document": {"seconds": round(whole_s, 2), "peak_rss_mb": round(whole_mb, 1)},
            "ratio_rss_streamed_over_whole": round(stream_mb / whole_mb, 3),
            "from_json_s": round(read_s, 2), "round_trip_entity_count_ok": round_trip}


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
    out["reachability"] = _reachability(topo)
    if generate:
        bare = _bare_all(fabric, workers)
        gen = _generate_all(fabric, workers)
        out["bare_enumeration"] = bare
        out["generate_all"] = gen
        out["plan_s"] = round(t_build + gen["seconds"], 2)
        out["ratio_plan_over_bare"] = round(gen["seconds"] / max(bare["seconds"], 1e-9), 2)
        out["ratio_plan_over_bare_cpu"] = round(sum(gen["worker_cpu_s"]) / max(sum(bare["worker_cpu_s"]), 1e-9), 2)
    out["peak_rss_mb"] = _rss_mb()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1))
    ap.add_argument("--quick", action="store_true", help="baseline only, no MRC fabric")
    ap.add_argument("--program", default="srv6_spray", choices=["srv6_spray", "eecmp_qp_hash"])
    ap.add_argument("--no-generate", action="store_true", help="skip generating every entity")
    ap.add_argument("--no-export", action="store_true", help="skip the 1,152-switch load and export")
    args = ap.parse_args()
    result: dict[str, Any] = {"host": {"python": platform.python_version(), "cpus": os.cpu_count()},
                              "targets": {"plan_s": 3, "peak_rss_mb": 1024, "delta_ms": 5, "reachability_ms": 10,
                                          "export_peak_rss_mb": 300}}
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
    if not args.no_export:
        result["export"] = _export(EXPORT)
    result["peak_rss_mb_self"] = _rss_mb()
    result["peak_rss_mb_children"] = _rss_mb(resource.RUSAGE_CHILDREN)
    result["load_average"] = [round(x, 2) for x in os.getloadavg()]
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
