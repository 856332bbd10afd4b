"""SHIFT on a lab (root): a ring AllReduce whose rank h0 loses its plane-0 NIC mid-run (the fault library's
host-nic-down), its QPs moved to the host's other NIC, against the same run without the failure, with
SHIFT on and off: JSON with each figure per run and its spread.

    flock /tmp/srv6-lab.lock .venv/bin/python bench/nic_failover.py --dataplane kernel --runs 3

The lab: 2 planes x 2 spines x 2 leaves x 4 hosts (bench/collectives.py's), links shaped to --mbit;
E-ECMP (the kernel's: each QP's own UDP source port), ranks h0,h4,h1,h5 (every ring hop crosses the
leaves), 2 QPs split, so QP 0x100 of every connection rides plane 0. The three cases run interleaved.
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

CASES = {"none, healthy": ("none", False), "shift, healthy": ("shift", False), "shift, NIC down": ("shift", True),
         "none, NIC down": ("none", True)}


def one(lab: Any, args: argparse.Namespace, failover: str, fault: bool) -> dict[str, Any]:
    from mininet_labs.lab import LabError

    sched = schedule(Workload("allreduce", args.size, args.iterations, 1, 2, "split"), place(lab.model, "h0,h4,h1,h5"))
    t0 = time.monotonic()
    try:
        rep: JobReport = job(lab, sched, scheme(args.scheme), Transport(window=4, mtu=1024, nic_failover=failover),
                             fault=Fault("host-nic-down", ("h0", "0")) if fault else None,
                             fault_at=args.fault_at if fault else None, timeout=args.timeout)
    except LabError as e:  # without SHIFT the failure ends the run: its one line, and how long the run lasted
        return {"load1": round(os.getloadavg()[0], 2), "error": str(e), "wall_s": round(time.monotonic() - t0, 1)}
    m = rep.metrics
    its = [i for i in m.iterations if not i.warmup] if m else []
    moves = rep.nic_moves()
    return {"load1": round(os.getloadavg()[0], 2), "problems": rep.problems[:3],
            "median_ms": round(m.time_median * 1e3, 1) if m else None,
            "max_ms": round(m.time_max * 1e3, 1) if m else None,
            "run_ms": round((its[-1].end - its[0].start) * 1e3, 1) if its else None,
            "iterations_ms": [round(i.time * 1e3, 1) for i in its], "busbw_MBps": round(m.busbw / 1e6, 4) if m else None,
            "resent": sum(t["retransmitted"] for t in rep.run.timeline()),
            "moves": [{k: mv[k] for k in ("rank", "t_s", "dst", "qp", "from_plane", "to_plane", "why")}
                      | {"packets": len(mv["resent"]), "wrs": len(mv["wrs"])} for mv in moves],
            "events": [{"t_s": round(t, 3), "what": w} for t, w in rep.events_s()]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--mbit", type=float, default=1.0)
    ap.add_argument("--size", type=int, default=128 * 1024)
    ap.add_argument("--iterations", type=int, default=3)
    ap.add_argument("--fault-at", type=float, default=3.0, help="s after the start (the warm-up takes about 2)")
    ap.add_argument("--scheme", default="eecmp")
    ap.add_argument("--timeout", type=float, default=120.0)
    ap.add_argument("--dataplane", choices=("bmv2", "kernel"), default="kernel")
    ap.add_argument("--dir", default="/tmp/srv6-bench-nic-failover")
    args = ap.parse_args()
    from mininet_labs.lab import Lab
    from mininet_labs.labstate import default_topology

    model = default_topology(2, 2, 2, 4, grpc_base_port=53001)
    if args.dataplane == "kernel":
        from mininet_labs.backends import nodes_for

        lab: Any = Lab(model, args.dir, nodes_for("kernel", name="benchshift"))
    else:
        lab = Lab(model, args.dir, tag="bs")
    doc: dict[str, Any] = {"bench": "nic_failover", "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
                           "dataplane": args.dataplane, "scheme": args.scheme, "link_mbit": args.mbit,
                           "size": args.size, "iterations": args.iterations, "fault_at": args.fault_at, "runs": {}}
    t0 = time.monotonic()
    lab.up()
    try:
        shape(lab, LinkRate(args.mbit))
        for r in range(args.runs):
            for name, (failover, fault) in CASES.items():
                print(f"run {r + 1}: {name}", file=sys.stderr, flush=True)
                doc["runs"].setdefault(name, []).append(one(lab, args, failover, fault))
    finally:
        lab.down()
    doc["summary"] = {name: {k: spread([x.get(k) for x in runs]) for k in ("median_ms", "max_ms", "run_ms", "busbw_MBps",
                                                                        "resent", "load1")}
                      for name, runs in doc["runs"].items()}
    doc["seconds"] = round(time.monotonic() - t0, 1)
    print(json.dumps(doc, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
