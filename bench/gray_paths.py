"""Gray paths (root; prints JSON): first-try losses of health-aware host EV spraying against plain spraying with
N% random loss on one T0-T1 link, on one lab (2 planes x 4 T1 x 2 T0 x 2 hosts; h0 -> h2 and h1 -> h3, 4 QPs,
500 packets/s each), both modes in every run, per loss percentage and fault length:

    flock /tmp/srv6-lab.lock timeout 900 .venv/bin/python bench/gray_paths.py --dataplane kernel --percent 5 \\
        --schedules default,long --runs 3

The aim (issue 30): health-aware at most 1/10 of plain spraying's first-try losses in the same run. Per run:
both counts, their ratio, the 1-minute load average when it started, and per gray EV when it failed, how
often it went ASSUMED_BAD and how long after the repair it was GOOD again. Not a test: Python senders on a
shared machine.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from controller.model.topology import from_dict, to_dict  # noqa: E402
import math  # noqa: E402

from endpoint.scenarios import EndpointSchedule, compare  # noqa: E402
from mininet_labs.backends import nodes_for  # noqa: E402
from mininet_labs.lab import Lab  # noqa: E402
from mininet_labs.labstate import default_topology  # noqa: E402

T0, T1 = "p0-t0-0", "p0-t1-1"
RATE = 500.0  # packets/s per sender, `fabricctl endpoint compare`'s default
SENDERS, EVS = 2, 8  # h0 and h1 under the gray link's T0; one of each sender's 8 EVs crosses the link
SCHEDULES = {  # name -> (seconds, fault at, repair at)
    "default": (4.0, 1.0, 2.5),  # `fabricctl endpoint compare`'s: 1.5 s of fault
    "long": (10.0, 1.0, 8.5),  # 7.5 s
    "longer": (20.0, 1.0, 18.0),  # 17 s: where plain spraying loses more than ~20 at 1 %
}


def schedule_of(name: str) -> EndpointSchedule:
    """The endpoint's schedule named `name` (one of SCHEDULES) at RATE, as `fabricctl endpoint compare` runs it."""
    seconds, fault_at, repair_at = SCHEDULES[name]
    return EndpointSchedule(seconds=seconds, fault_at=fault_at, repair_at=repair_at, rate=RATE)


def floor(percent: float, fault_s: float, senders: int = SENDERS, pps_on_gray: float = RATE / EVS) -> dict[str, float]:
    """What the aim can reach at best, in expectation, when each sender puts `pps_on_gray` packets/s on its one
    gray EV for `fault_s` seconds: plain spraying loses percent of them (n p per sender); health-aware spraying
    loses at least the first one lost on each sender's gray EV, if any is (1 - (1 - p)^n), since nothing tells
    it before. `ratio`: health-aware's floor over plain spraying's expectation (the aim needs it <= 0.1);
    `no_loss`: how likely plain spraying loses nothing at all (the ratio is then undefined)."""
    p, n = percent / 100, pps_on_gray * fault_s
    plain, health = senders * n * p, senders * (1 - (1 - p) ** n)
    return {"packets_per_sender": n, "plain": plain, "health_floor": health,
            "ratio": health / plain if plain else math.inf, "no_loss": (1 - p) ** (senders * n)}


def binomial_tail(n: int, p: float, k: int) -> float:
    """P(X >= k) for X ~ Binomial(n, p)."""
    return max(0.0, 1 - sum(math.comb(n, i) * p ** i * (1 - p) ** (n - i) for i in range(min(k, n + 1))))


def chance_met(percent: float, fault_s: float, senders: int = SENDERS, pps_on_gray: float = RATE / EVS) -> float:
    """How likely one run meets the aim (plain spraying lost some, health-aware at most a tenth of that) when
    health-aware spraying is at its floor: each sender's gray EV loses its first packet, if any, and no other
    (H senders of `senders`, each with 1 - (1 - p)^n), plain spraying loses S ~ Binomial(senders n, p) on
    the same kind of path, independently."""
    p, n = percent / 100, round(pps_on_gray * fault_s)
    q = 1 - (1 - p) ** n
    return sum(math.comb(senders, h) * q ** h * (1 - q) ** (senders - h) * binomial_tail(senders * n, p, max(1, 10 * h))
               for h in range(senders + 1))


def one_run(lab: Lab, percent: int, schedule: str) -> dict[str, Any]:
    sch = schedule_of(schedule)
    seconds, fault_at, repair_at = sch.seconds, sch.fault_at, sch.repair_at
    load = os.getloadavg()[0]
    c = compare(lab, "gray", T0, T1, modes=("host", "host-spray"), percent=percent, schedule=sch).to_json()
    modes = {m["mode"]: m for m in c["modes"]}
    health, spray = modes["host"]["summary"], modes["host-spray"]["summary"]
    lost_h, lost_s = health["lost_first_try"], spray["lost_first_try"]
    evs = [{"sender": e["sender"], "ev": e["ev"], "detected_ms": e["detected_ms"], "restored_ms": e["restored_ms"],
            "assumed_bad": sum(1 for t in e["transitions"] if t[2] == "assumed_bad"),
            "sent_while_failed": e["sent_while_failed"], "transitions": e["transitions"]} for e in modes["host"]["evs"]]
    expected = floor(percent, repair_at - fault_at)
    return {"percent": percent, "schedule": schedule, "fault_s": repair_at - fault_at, "load_1min": round(load, 2),
            "floor_ratio": round(expected["ratio"], 3),
            "chance_met_at_floor": round(chance_met(percent, repair_at - fault_at), 3),
            "lost_first_try": {"host": lost_h, "host-spray": lost_s},
            "ratio": round(lost_h / lost_s, 3) if lost_s else None, "aim_met": bool(lost_s) and lost_h * 10 <= lost_s,
            "complete": {"host": health["complete"], "host-spray": spray["complete"]},
            "lost_in_the_end": {"host": health["lost"], "host-spray": spray["lost"]},
            "goodput_ratio": {"host": health["goodput_pps"]["ratio"], "host-spray": spray["goodput_pps"]["ratio"]},
            "lost_outside_fault": {"host": health["lost_outside_fault"], "host-spray": spray["lost_outside_fault"]},
            "gray_evs": evs}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dataplane", choices=("kernel", "bmv2"), default="kernel")
    ap.add_argument("--percent", default="5", help="comma-separated loss percentages")
    ap.add_argument("--schedules", default="default,long", help=f"comma-separated of {', '.join(SCHEDULES)}")
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    percents = [int(p) for p in args.percent.split(",")]
    schedules = args.schedules.split(",")
    bad = [s for s in schedules if s not in SCHEDULES]
    if bad:
        print(f"unknown schedule '{bad[0]}' (known: {', '.join(SCHEDULES)})", file=sys.stderr)
        return 2
    model = from_dict({**to_dict(default_topology(2, 4, 2, 2, grpc_base_port=52600 + os.getpid() % 20 * 20)),
                       "host_source_routing": True})
    runs = []
    with tempfile.TemporaryDirectory(prefix="gray-paths-") as d, \
            Lab(model, d, nodes_for(args.dataplane, name=f"g{os.getpid() % 1000}"), tag=f"g{os.getpid() % 100}") as lab:
        for _ in range(args.runs):
            for p in percents:
                for s in schedules:
                    r = one_run(lab, p, s)
                    runs.append(r)
                    print(f"# {p}% {s}: host {r['lost_first_try']['host']} spray {r['lost_first_try']['host-spray']} "
                          f"ratio {r['ratio']} load {r['load_1min']}", file=sys.stderr, flush=True)
                    print(json.dumps(r), file=sys.stderr, flush=True)  # kept if a timeout cuts the run short
    summary = {}
    for p in percents:
        for s in schedules:
            ratios = [r["ratio"] for r in runs if r["percent"] == p and r["schedule"] == s and r["ratio"] is not None]
            summary[f"{p}% {s}"] = {
                "ratio_median": statistics.median(ratios) if ratios else None,
                "ratio_min": min(ratios, default=None), "ratio_max": max(ratios, default=None), "n": len(ratios),
                "aim_met_runs": sum(1 for r in runs if r["percent"] == p and r["schedule"] == s and r["aim_met"])}
    print(json.dumps({"bench": "gray_paths", "dataplane": args.dataplane, "summary": summary, "runs": runs}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
