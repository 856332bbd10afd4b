"""Probe load of `fabricctl run` (root, Mininet, bmv2; prints JSON): for each probe period, the
probes through P4Runtime per second, the controller's CPU, the probe delay (packet-out to
packet-in) percentiles, probes lost and false link-downs on a healthy default lab; each period with
link probes only and with the host NICs' Neighbor Discovery probes too (CPU ratio against the first,
measured in the same process).

    P4_TOOLCHAIN_BIN=/opt/p4-toolchain/bin .venv/bin/python bench/service_probe_load.py --seconds 10

Not a test: it says what period the 2-core lab sustains without false failures.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from controller.state.statefile import save_state  # noqa: E402
from controller.service.detect import Thresholds  # noqa: E402
from controller.service.runner import Config, FabricService, rss_kb  # noqa: E402
from mininet_labs.lab import Lab  # noqa: E402
from mininet_labs.labstate import default_topology, prerequisites


def cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def measure(lab: Lab, period_ms: float, seconds: float, timeout_ms: float, election_id: int, hosts: bool,
            nice: int | None, ping_ms: float = 100.0) -> dict:
    save_state(lab.failure_state_path, [])
    events = lab.dir / f"events-{period_ms:g}-{int(hosts)}-{ping_ms:g}.jsonl"
    svc = FabricService(lab.model, lab.program, lab.failure_state_path,  # type: ignore[arg-type]
                        Config(period=period_ms / 1000, probe_timeout=timeout_ms / 1000, thresholds=Thresholds(),
                               election_id=election_id, counters_every=0, events=events, host_probes=hosts,
                               nice=nice, ping_every=ping_ms / 1000))
    delays: list[float] = []
    svc.prober.on_outcome = lambda st, ok, d: delays.append(d) if d is not None else None
    svc.start()
    end = time.monotonic() + 30
    while not all(s.ready for s in svc.sessions.values()) and time.monotonic() < end:
        time.sleep(0.05)
    time.sleep(1.0)  # settle
    out0, in0, c0, t0 = svc.prober.packets_out, svc.prober.packets_in, cpu_s(), time.monotonic()
    lost0 = sum(s.lost for s in svc.prober.states)
    delays.clear()
    rss = []
    while time.monotonic() - t0 < seconds:
        time.sleep(min(5.0, seconds))
        rss.append(rss_kb())
    dt = time.monotonic() - t0
    out1, in1, c1 = svc.prober.packets_out, svc.prober.packets_in, cpu_s()
    lost = sum(s.lost for s in svc.prober.states) - lost0
    downs = svc.link_changes["down"]
    stalls = svc.prober.stalls
    held_back = sum(s.vetoed for s in svc.prober.states)
    timeout_now = svc.prober.timeout_ms
    svc.stop()
    q = statistics.quantiles(delays, n=100) if len(delays) > 100 else []
    return {"period_ms": period_ms, "host_probes": hosts, "ping_every_ms": ping_ms,
            "liveness_calls_late": sum(svc.calls.late(n) for n in svc.sessions), "directions": len(svc.prober.states), "seconds": round(dt, 2),
            "packet_out_pps": round((out1 - out0) / dt), "packet_in_pps": round((in1 - in0) / dt),
            "controller_cpu_pct": round(100 * (c1 - c0) / dt, 1),
            "delay_ms": {"p50": round(q[49], 2), "p99": round(q[98], 2), "max": round(max(delays), 2)} if q else None,
            "lost": lost, "lost_ratio": round(lost / max(1, out1 - out0), 4), "stall_rounds": stalls,
            "false_link_downs": downs, "losses_held_back_by_port_counters": held_back,
            "probe_timeout_ms_at_end": round(timeout_now, 1),
            "rss_kb": {"first": rss[0], "last": rss[-1], "max": max(rss), "growth_pct": round(100 * (rss[-1] - rss[0]) / rss[0], 1),
                       "samples_every_s": 5.0}}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--periods", default="50,20,10", help="probe periods to try, ms")
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--probe-timeout", type=float, default=80.0, help="ms (the timeout's floor)")
    ap.add_argument("--nice", type=int, default=-10, help="the service threads' nice value")
    ap.add_argument("--grpc-base-port", type=int, default=51301)
    ap.add_argument("--pings", default="100", help="liveness call periods to try per row, ms (0: none); with 0 "
                    "first, the others' CPU is given as a ratio against it")
    args = ap.parse_args()
    why = prerequisites()
    if why:
        print(json.dumps({"error": why}))
        return 2
    with tempfile.TemporaryDirectory(prefix="probe-load-") as d, \
            Lab(default_topology(grpc_base_port=args.grpc_base_port), d, tag=f"pl{os.getpid() % 100}") as lab:
        pings = [float(x) for x in args.pings.split(",")]
        rows = [measure(lab, float(p), args.seconds, args.probe_timeout, 10 + k, hosts, args.nice, ping)
                for k, (p, hosts, ping) in enumerate((p, h, g) for p in args.periods.split(",") for h in (False, True)
                                                     for g in pings)]
    for row in rows:
        base = next(r for r in rows if r["period_ms"] == row["period_ms"] and not r["host_probes"]
                    and r["ping_every_ms"] == row["ping_every_ms"])
        if row["host_probes"]:
            row["cpu_ratio_vs_links_only"] = round(row["controller_cpu_pct"] / max(0.1, base["controller_cpu_pct"]), 2)
        unpinged = next((r for r in rows if r["period_ms"] == row["period_ms"] and r["host_probes"] == row["host_probes"]
                         and r["ping_every_ms"] == 0), None)
        if unpinged is not None and row is not unpinged:
            row["cpu_ratio_vs_no_pings"] = round(row["controller_cpu_pct"] / max(0.1, unpinged["controller_cpu_pct"]), 2)
    print(json.dumps({"bench": "service_probe_load", "lab": "default (8 switches, 8 links, 16 directions)",
                      "probe_timeout_ms": args.probe_timeout, "runs": rows,
                      "machine": {"cpus": os.cpu_count(), "load_avg": os.getloadavg()}}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
