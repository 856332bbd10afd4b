"""The seeds' collective comparisons on one lab in one run (root; bmv2 and Mininet, or --dataplane kernel
for the schemes the kernel carries): JSON with each figure, its spread over --runs, and its ratio to the
comparison's baseline.

    P4_TOOLCHAIN_BIN=/opt/p4-toolchain/bin flock /tmp/srv6-lab.lock .venv/bin/python bench/collectives.py --runs 3

The lab: 2 planes x 2 spines x 2 leaves x 4 hosts, every link shaped to --mbit (tbf). Comparisons:
- calibration: a ring AllReduce on a collision-free placement (h0,h1,h4,h5: one flow leaves each leaf per
  plane at every step) at the rate and at half of it (slowdown
  against the ideal the rate predicts, and the time ratio);
- ecmp_vs_eecmp (Meta): an all-to-all and a ring AllReduce whose ring crosses the leaves at every step,
  QP scaling to 8 QPs, 5-tuple ECMP against E-ECMP on the destination QP;
- rr_vs_split (Meta): E-ECMP with 4 QPs, each message whole on the next QP against split over all;
- pinning (Meta): path pinning on a balanced placement against one host of each leaf's pair busy (and E-ECMP there);
- spine_freeze (MRC): a spine stops forwarding mid-AllReduce (SIGSTOP) with the controller running, under
  leaf spraying, host EV spraying and E-ECMP; against the same run without the fault;
- spray_vs_ethereal (Ethereal): host EV spraying against split-and-assign, healthy and with a dead link.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _stats import spread  # noqa: E402

from controller.workload import Workload, place, schedule  # noqa: E402
from endpoint.collective.rank import Transport  # noqa: E402
from endpoint.collective.report import JobReport, job  # noqa: E402
from endpoint.collective.run import Fault  # noqa: E402
from endpoint.collective.schemes import scheme  # noqa: E402
from mininet_labs.shaping import LinkRate, shape  # noqa: E402

COMPARISONS = ("calibration", "ecmp_vs_eecmp", "rr_vs_split", "pinning", "spine_freeze", "spray_vs_ethereal")


def figures(rep: JobReport) -> dict[str, Any]:
    """One run's figures (times in ms, bandwidth in MB/s)."""
    m = rep.metrics
    if m is None:
        return {"complete": False, "problems": rep.problems[:3]}
    hits = [h.stretch for h in rep.hits if h.stretch]
    return {"complete": True, "problems": rep.problems[:3], "time_ms": m.time_median * 1e3, "p99_ms": m.time_p99 * 1e3,
            "max_ms": m.time_max * 1e3, "busbw_MBps": m.busbw / 1e6, "slowdown": m.slowdown,
            "slowdown_wire": rep.slowdown_wire, "link_max_over_mean": rep.to_json()["link_max_over_mean"],
            "retransmits": m.retransmits, "iteration_ms": [round(i.time * 1e3, 1) for i in m.iterations],
            "worst_hit_stretch": max(hits) if hits else None, "events": rep.to_json()["events"]}


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    keys = ("time_ms", "p99_ms", "max_ms", "busbw_MBps", "slowdown", "slowdown_wire", "link_max_over_mean",
            "retransmits", "worst_hit_stretch")
    out: dict[str, Any] = {k: spread([r.get(k) for r in runs], 3) for k in keys}
    out["complete"] = sum(1 for r in runs if r.get("complete"))
    out["problems"] = sorted({p for r in runs for p in r.get("problems", [])})[:3]
    out["runs"] = runs
    return out


def ratio(a: dict[str, Any], b: dict[str, Any], key: str = "time_ms") -> float | None:
    x, y = a[key]["median"], b[key]["median"]
    return round(x / y, 3) if x and y else None


class Bench:
    def __init__(self, lab: Any, args: argparse.Namespace) -> None:
        self.lab, self.args = lab, args
        self.tr = Transport(window=args.window, mtu=args.mtu)

    def sched(self, collective: str, placement: str, qps: int, strategy: str, size: int | None = None,
              iterations: int | None = None) -> Any:
        return schedule(Workload(collective, size or self.args.size, iterations or self.args.iterations,  # type: ignore[arg-type]
                                 warmup=1, qps=qps, strategy=strategy), place(self.lab.model, placement, 4))  # type: ignore[arg-type]

    def case(self, label: str, sched: Any, name: str, **kw: Any) -> dict[str, Any]:
        runs = []
        for i in range(self.args.runs):
            t0 = time.monotonic()
            rep = job(self.lab, sched, scheme(name), self.tr, timeout=self.args.timeout, **kw)
            runs.append({**figures(rep), "wall_s": round(time.monotonic() - t0, 1),
                         "load1": round(os.getloadavg()[0], 2)})
            print(f"  {label} run {i + 1}: {runs[-1].get('time_ms', 0):.0f} ms (x{runs[-1].get('slowdown_wire') or 0:.2f} "
                  f"wire ideal), {runs[-1].get('retransmits')} resent, problems {runs[-1]['problems']}",
                  file=sys.stderr, flush=True)
        return {"label": label, "scheme": name, **summarize(runs)}


def calibration(b: Bench) -> dict[str, Any]:
    ring = b.sched("allreduce", "h0,h1,h4,h5", 2, "split")  # one flow out of and into each leaf per plane
    full = b.case("calibration at the rate", ring, "ecmp")
    shape(b.lab, LinkRate(b.args.mbit / 2))
    try:
        half = b.case("calibration at half the rate", ring, "ecmp")
    finally:
        shape(b.lab, LinkRate(b.args.mbit))
    return {"placement": list(ring.placement.hosts), "full": full, "half": half,
            "half_over_full": ratio(half, full),
            "claim": "collision-free: within 10 % of the ideal; half the rate: twice the time"}


def ecmp_vs_eecmp(b: Bench) -> dict[str, Any]:
    out: dict[str, Any] = {"claim": "E-ECMP + QP scaling beats 5-tuple ECMP, AllReduce up to 40 % (Meta)"}
    for label, sched in (("alltoall", b.sched("alltoall", "spread", 8, "split")),
                         ("allreduce", b.sched("allreduce", "spread", 8, "split"))):
        base = b.case(f"{label} ecmp", sched, "ecmp")
        e = b.case(f"{label} eecmp", sched, "eecmp")
        out[label] = {"placement": list(sched.placement.hosts), "ecmp": base, "eecmp": e,
                      "eecmp_over_ecmp": ratio(e, base), "busbw_eecmp_over_ecmp": ratio(e, base, "busbw_MBps")}
    return out


def rr_vs_split(b: Bench) -> dict[str, Any]:
    split = b.case("split", b.sched("allreduce", "spread", 4, "split"), "eecmp")
    rr = b.case("round robin", b.sched("allreduce", "spread", 4, "round_robin"), "eecmp")
    return {"claim": "round-robin (each message whole on the next QP) beats splitting every message (Meta)",
            "split": split, "round_robin": rr, "rr_over_split": ratio(rr, split)}


def pinning(b: Bench) -> dict[str, Any]:
    bal = b.case("pin spread", b.sched("allreduce", "spread", 2, "split"), "pin")
    uneven = b.sched("allreduce", "uneven", 2, "split")
    unb = b.case("pin uneven", uneven, "pin")
    e = b.case("eecmp uneven", uneven, "eecmp")
    return {"claim": "path pinning loses more than 30 % when one host of each leaf's pair is busy (Meta)",
            "placements": {"spread": list(b.sched("allreduce", "spread", 2, "split").placement.hosts),
                           "uneven": list(uneven.placement.hosts)},
            "pin_spread": bal, "pin_uneven": unb, "eecmp_uneven": e, "uneven_over_spread": ratio(unb, bal),
            "pin_over_eecmp_uneven": ratio(unb, e)}


def spine_freeze(b: Bench) -> dict[str, Any]:
    sched = b.sched("allreduce", "spread", 2, "split", iterations=b.args.fault_iterations)
    out: dict[str, Any] = {"claim": "a T1 that stopped forwarding left job throughput largely unaffected (MRC)",
                           "fault": "freeze p0-t1-0", "fault_at_s": b.args.fault_at, "repair_at_s": b.args.repair_at}
    for name in b.args.freeze_schemes.split(","):
        clean = b.case(f"{name} no fault", sched, name, controller=True)
        hurt = b.case(f"{name} spine frozen", sched, name, fault=Fault("freeze", ("p0-t1-0",)),
                      fault_at=b.args.fault_at, repair_at=b.args.repair_at, controller=True)
        out[name] = {"clean": clean, "fault": hurt, "busbw_fault_over_clean": ratio(hurt, clean, "busbw_MBps"),
                     "time_fault_over_clean": ratio(hurt, clean), "max_fault_over_clean": ratio(hurt, clean, "max_ms")}
    return out


def spray_vs_ethereal(b: Bench) -> dict[str, Any]:
    sched = b.sched("alltoall", "spread", 2, "split")
    out: dict[str, Any] = {"claim": "Ethereal comes within a few % of ideal spraying; up to 30 % faster than "
                                    "spraying, also under link failures (Ethereal)"}
    dead = Fault("blackhole", ("p0-t0-0", "p0-t1-0"))
    for label, kw in (("healthy", {}), ("dead link", {"fault": dead, "fault_at": 0.0})):
        s = b.case(f"host-spray {label}", sched, "host-spray", **kw)
        e = b.case(f"ethereal {label}", sched, "ethereal", **kw)
        out[label] = {"host_spray": s, "ethereal": e, "ethereal_over_spray": ratio(e, s)}
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--mbit", type=float, default=1.0, help="link rate")
    ap.add_argument("--size", type=int, default=128 * 1024)
    ap.add_argument("--iterations", type=int, default=3)
    ap.add_argument("--fault-iterations", type=int, default=6)
    ap.add_argument("--fault-at", type=float, default=2.0)
    ap.add_argument("--repair-at", type=float, default=4.0)
    ap.add_argument("--freeze-schemes", default="leaf-spray,host-spray,eecmp", help="spine_freeze: these schemes")
    ap.add_argument("--window", type=int, default=4)
    ap.add_argument("--mtu", type=int, default=1024)
    ap.add_argument("--timeout", type=float, default=120.0)
    ap.add_argument("--only", action="append", choices=COMPARISONS)
    ap.add_argument("--dataplane", choices=("bmv2", "kernel"), default="bmv2")
    ap.add_argument("--dir", default="/tmp/srv6-bench-collectives")
    ap.add_argument("--out", help="also write the JSON here")
    args = ap.parse_args()
    from mininet_labs.lab import Lab
    from mininet_labs.labstate import default_topology

    model = default_topology(2, 2, 2, 4, grpc_base_port=52001)
    if args.dataplane == "kernel":
        import dataclasses

        from mininet_labs.backends import nodes_for

        # endpoint mode's carriers pass a kernel leaf's SR boundary only when the topology says so at lab up
        lab: Any = Lab(dataclasses.replace(model, host_source_routing=True), args.dir,
                       nodes_for("kernel", name="benchcoll"))
    else:
        lab = Lab(model, args.dir, tag="bc")
    doc: dict[str, Any] = {"bench": "collectives", "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
                           "load1_start": round(os.getloadavg()[0], 2), "dataplane": args.dataplane,
                           "lab": "2 planes x 2 spines x 2 leaves x 4 hosts", "link_mbit": args.mbit,
                           "size": args.size, "iterations": args.iterations, "runs": args.runs,
                           "transport": Transport(window=args.window, mtu=args.mtu).to_json(), "comparisons": {}}
    t0 = time.monotonic()
    lab.up()
    try:
        shape(lab, LinkRate(args.mbit))
        b = Bench(lab, args)
        kernel_skip = {"pinning": "path pinning", "spine_freeze": "a switch process to freeze"}
        for name in args.only or COMPARISONS:
            if args.dataplane == "kernel" and name in kernel_skip:
                doc["comparisons"][name] = {"skipped": f"the kernel data plane has no {kernel_skip[name]}"}
                continue
            print(f"{name}:", file=sys.stderr, flush=True)
            doc["comparisons"][name] = globals()[name](b)
    finally:
        lab.down()
    doc["seconds"] = round(time.monotonic() - t0, 1)
    doc["load1_end"] = round(os.getloadavg()[0], 2)
    text = json.dumps(doc, indent=1)
    if args.out:
        Path(args.out).write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
