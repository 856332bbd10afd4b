"""Real faults nobody announces, against `fabricctl run` (root, Mininet, bmv2; prints JSON): per kind,
fault -> detection (the service's event) -> tables (its deltas written) -> restored after repair,
median and spread over --runs, in one default lab with the service in this process.

    P4_TOOLCHAIN_BIN=/opt/p4-toolchain/bin .venv/bin/python bench/real_faults.py --runs 3

Kinds: `hung` (a spine's simple_switch_grpc stopped with SIGSTOP, then SIGCONT; also the rate at which
the prober probed the links that do not touch it, before and during, as a ratio: 1.0 = not slowed);
`carrier` (a leaf uplink's veth set down, then up: real carrier loss). With --carrier-events the
service also takes the lab's kernel link events (mininet_labs/carrier.py), the fast signal.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _stats import spread  # noqa: E402

from controller.state.statefile import save_state  # noqa: E402
from controller.model.failures import LinkDown, SwitchDown
from controller.service.runner import Config, FabricService  # noqa: E402
from mininet_labs.lab import Lab  # noqa: E402
from mininet_labs.labstate import default_topology, prerequisites
from mininet_labs.topo import link_ends  # noqa: E402

LEAF, SPINE = "p0-t0-0", "p0-t1-1"
QUIET_SECONDS = 60.0  # a quiet run: this long of full-rate traffic between every pair, no fault


def events(path: Path, after: int) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines()[after:]]


def wait_for(cond: Any, what: str, bound: float = 60.0) -> None:
    end = time.monotonic() + bound
    while not cond():
        if time.monotonic() > end:
            raise RuntimeError(f"not {what} within {bound:.0f} s")
        time.sleep(0.005)


def first(evs: list[dict[str, Any]], pred: Any, t0: int) -> int | None:
    e = next((e for e in evs if e.get("t_mono_ns", 0) >= t0 and pred(e)), None)
    return None if e is None else e["t_mono_ns"]


def ms(t: int | None, t0: int) -> float | None:
    return None if t is None else round((t - t0) / 1e6, 1)


def settle(svc: FabricService, lab: Lab) -> None:
    wait_for(lambda: svc.healer.applied == frozenset() and all(s.detector.up for s in svc.prober.states)
             and all(h.up for h in svc.prober.health.values()), "healthy again", 120)
    time.sleep(1.0)


def probe_rate(svc: FabricService, seconds: float) -> float:
    """Probes per second sent on link directions that do not touch the spine."""
    def sent() -> int:
        return sum(s.sent for s in svc.prober.states if SPINE not in (s.d.src, s.d.dst))
    a = sent()
    time.sleep(seconds)
    return (sent() - a) / seconds


def hung(svc: FabricService, lab: Lab, ev: Path) -> dict[str, Any]:
    pid = lab.state.switches[SPINE]["pid"]
    before = probe_rate(svc, 1.0)
    n = len(ev.read_text().splitlines())
    t0 = time.monotonic_ns()
    os.kill(pid, signal.SIGSTOP)
    try:
        wait_for(lambda: SwitchDown(SPINE) in (svc.healer.applied or ()), "the spine pulled", 30)
        during = probe_rate(svc, 1.0)
    finally:
        t1 = time.monotonic_ns()
        os.kill(pid, signal.SIGCONT)
    wait_for(lambda: SwitchDown(SPINE) not in (svc.healer.applied or ()), "the spine restored", 60)
    evs = events(ev, n)
    return {"stop_to_detection_ms": ms(first(evs, lambda e: e["kind"] == "switch_down" and e["switch"] == SPINE, t0), t0),
            "stop_to_tables_ms": ms(first(evs, lambda e: e["kind"] == "deltas_written", t0), t0),
            "cont_to_restored_ms": ms(first(evs, lambda e: e["kind"] == "switch_up" and e["switch"] == SPINE, t1), t1),
            "other_links_probe_rate_ratio": round(during / before, 3) if before else None,
            "false_downs": [e.get("direction") or e.get("switch") for e in evs
                            if e["kind"] in ("link_down", "port_down", "switch_down") and e.get("switch") != SPINE]}


def carrier(svc: FabricService, lab: Lab, ev: Path) -> dict[str, Any]:
    leaf_end, _ = link_ends(lab.model, LEAF, SPINE, lab.tag)
    link = LinkDown(LEAF, SPINE)
    n = len(ev.read_text().splitlines())
    t0 = time.monotonic_ns()
    subprocess.run(["ip", "link", "set", leaf_end.intf, "down"], check=True)
    try:
        wait_for(lambda: link in (svc.healer.applied or ()), "the link pulled", 30)
    finally:
        t1 = time.monotonic_ns()
        subprocess.run(["ip", "link", "set", leaf_end.intf, "up"], check=True)
    wait_for(lambda: link not in (svc.healer.applied or ()), "the link restored", 60)
    evs = events(ev, n)
    down = next((e for e in evs if e["kind"] == "link_down" and e["link"] == [LEAF, SPINE]), {})
    return {"down_to_detection_ms": ms(first(evs, lambda e: e["kind"] == "link_down" and e["link"] == [LEAF, SPINE], t0), t0),
            "down_to_tables_ms": ms(first(evs, lambda e: e["kind"] == "deltas_written", t0), t0),
            "up_to_restored_ms": ms(first(evs, lambda e: e["kind"] == "deltas_written", t1), t1),
            "evidence": down.get("evidence"),
            "false_downs": [e.get("direction") for e in evs if e["kind"] in ("link_down", "port_down", "switch_down")
                            and e.get("link") != [LEAF, SPINE]]}


def quiet(svc: FabricService, lab: Lab, ev: Path) -> dict[str, Any]:
    """No fault: every host to every other at the tests' full rate; any failure recorded is false."""
    n = len(ev.read_text().splitlines())
    t0 = time.monotonic()
    sent = 0
    while time.monotonic() - t0 < QUIET_SECONDS:
        sent += lab.traffic(qps=4, messages=64, rate=2000, plane_mode="packet", timeout=180).totals()["sent"]
    evs = events(ev, n)
    return {"seconds": round(time.monotonic() - t0, 1), "packets_sent": sent,
            "false_downs": [e.get("direction") or e.get("switch") for e in evs
                            if e["kind"] in ("link_down", "port_down", "switch_down")],
            "late_calls": {name: svc.calls.late(name) for name in svc.sessions if svc.calls.late(name)}}


KINDS = {"hung": hung, "carrier": carrier, "quiet": quiet}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--kinds", default="hung,carrier")
    ap.add_argument("--carrier-events", action="store_true", help="feed the service the lab's kernel link events")
    ap.add_argument("--period-ms", type=float, default=50.0, help="the service's probe period (its default)")
    ap.add_argument("--probe-timeout-ms", type=float, default=80.0, help="the probe timeout floor (its default)")
    ap.add_argument("--grpc-base-port", type=int, default=51301)
    args = ap.parse_args()
    why = prerequisites()
    if why:
        print(json.dumps({"error": why}))
        return 2
    out: dict[str, Any] = {"bench": "real_faults", "runs": args.runs, "carrier_events": args.carrier_events,
                           "probing_ms": {"period": args.period_ms, "timeout_floor": args.probe_timeout_ms},
                           "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                                       "load_avg_start": os.getloadavg()}}
    with tempfile.TemporaryDirectory(prefix="real-faults-") as d, \
            Lab(default_topology(grpc_base_port=args.grpc_base_port), d, tag="rf") as lab:
        save_state(lab.failure_state_path, [])
        ev = Path(d) / "events.jsonl"
        svc = FabricService(lab.model, lab.program, lab.failure_state_path,  # type: ignore[arg-type]
                            Config(election_id=10, counters_every=0, events=ev, nice=-10, period=args.period_ms / 1000,
                                   probe_timeout=args.probe_timeout_ms / 1000,
                                   carrier_events=(lab.dir / "carrier.sock") if args.carrier_events else None))
        watcher = None
        if args.carrier_events:
            from mininet_labs.carrier import CarrierWatcher
            watcher = CarrierWatcher(lab.carrier(), lab.dir / "carrier.sock")
            watcher.start()
        svc.start()
        try:
            wait_for(lambda: all(s.ready for s in svc.sessions.values()) and svc.healer.applied is not None,
                     "primary everywhere", 60)
            settle(svc, lab)
            for kind in args.kinds.split(","):
                rows = []
                for _ in range(args.runs):
                    rows.append(KINDS[kind](svc, lab, ev))
                    settle(svc, lab)
                keys = [k for k in rows[0] if k.endswith("_ms") or k.endswith("_ratio")]
                out[kind] = {**{k: spread([r[k] for r in rows]) for k in keys}, "per_run": rows}
        finally:
            svc.stop()
            if watcher is not None:
                watcher.stop()
    out["machine"]["load_avg_end"] = os.getloadavg()
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
