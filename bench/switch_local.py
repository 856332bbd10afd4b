"""Switch-local failover bench (root, Mininet, bmv2; prints JSON): a leaf uplink loses carrier in the default
lab while no controller runs, and the leaf leaves that spray member out by itself (watch_port on the group's
members, PI's watch-port enforcement fed by bmv2's port monitor). Per run, with RoCEv2 flowing from the leaf's
hosts: carrier down -> the last packet the leaf sprays on that uplink (its own path counter, read in a tight
loop), the packets sprayed onto the dead uplink meanwhile (lost), and carrier up -> the uplink used again.
Also with a `fabricctl run` primary frozen by SIGSTOP. Baseline in the same lab and process: the controller path (`lab.fail`, the `fabricctl fail link` write,
announced at once, no carrier change), measured the same way. Medians and spread over --runs.

    P4_TOOLCHAIN_BIN=/opt/p4-toolchain/bin flock /tmp/srv6-lab.lock .venv/bin/python bench/switch_local.py --runs 5

Not a test. bmv2 learns a carrier by polling each port's status (PortMonitorActive, src/bm_sim/port_monitor.cpp):
every 200 ms on a stock build, every BM_PORT_MONITOR_MS on one with patches/bmv2-port-monitor-interval.patch (the
lab's default, mininet_labs.bmv2proc.DEFAULT_PORT_POLL_MS, or --port-poll-ms), so the switch-local time is that
poll's phase plus PI's enforcement. Aim: median <= 20 ms, max <= 40 ms, over the switch-local runs with and
without a frozen controller. The resolution is one counter read (reported). The JSON names the bmv2 build and
port poll the lab's switches ran.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _stats import spread  # noqa: E402

from controller.model.failures import LinkDown  # noqa: E402
from mininet_labs.lab import Lab  # noqa: E402
from mininet_labs.labstate import default_topology, prerequisites
from controller.model.topology import Topology, from_dict, to_dict  # noqa: E402
from mininet_labs.bmv2proc import PORT_POLL_VARIABLE, lab_builds  # noqa: E402


def watched(model: Topology) -> Topology:
    """The topology with watch ports on (`watch_ports: true`; off by default, docs/faults.md)."""
    return from_dict({**to_dict(model), "watch_ports": True})


PATH_PACKETS = "IngressPipe.headend.path_packets"
PAIRS = [("h0", "h2"), ("h1", "h3"), ("h0", "h3"), ("h1", "h2")]
AIM_MEDIAN_MS, AIM_MAX_MS = 20.0, 40.0


class PathCounter:
    """One cell of the leaf's path_packets, read through a reader session kept open (no election id)."""

    def __init__(self, lab: Lab, leaf: str, path: int) -> None:
        self.client = lab.reader()
        self.conn, self.path = self.client.switches[leaf], path
        self.read_ms: list[float] = []

    def read(self) -> tuple[int, int]:
        """(packets, monotonic ns when the answer came)."""
        t = time.monotonic_ns()
        (cell,) = self.conn.read_counter(PATH_PACKETS, self.path)
        now = time.monotonic_ns()
        self.read_ms.append((now - t) / 1e6)
        return cell.packets, now

    def close(self) -> None:
        self.client.close_all()


def until_quiet(counter: PathCounter, act: Callable[[], None], quiet_s: float, limit_s: float) -> dict[str, Any]:
    """Start `act` (in a thread, so the reads go on while it runs) and read until the counter has not moved for
    quiet_s: when it last moved after the start (the first read that showed its final value, and the read before
    it: the last packet lies between), and by how much it moved."""
    first, _ = counter.read()
    thread = threading.Thread(target=act)
    since_ns = time.monotonic_ns()
    thread.start()
    value, last_change_ns, before_ns, prev_ns = first, since_ns, since_ns, since_ns
    end = time.monotonic() + limit_s
    while time.monotonic() < end:
        v, t = counter.read()
        if v != value:
            value, before_ns, last_change_ns = v, prev_ns, t
        elif (t - last_change_ns) / 1e9 >= quiet_s:
            break
        prev_ns = t
    thread.join()
    return {"stopped_by_ms": round((last_change_ns - since_ns) / 1e6, 1),
            "stopped_after_ms": round(max(0, before_ns - since_ns) / 1e6, 1), "after_cut": value - first}


def until_moves(counter: PathCounter, act: Callable[[], None], limit_s: float) -> float | None:
    """Start `act` (in a thread) and read until the counter moves: ms from the start (None: not within limit_s)."""
    first, _ = counter.read()
    thread = threading.Thread(target=act)
    since_ns = time.monotonic_ns()
    thread.start()
    end = time.monotonic() + limit_s
    moved = None
    while time.monotonic() < end:
        v, t = counter.read()
        if v != first:
            moved = round((t - since_ns) / 1e6, 1)
            break
    thread.join()
    return moved


def one_run(lab: Lab, args: argparse.Namespace, act: Callable[[], None], undo: Callable[[], None]) -> dict[str, Any]:
    """Traffic from the leaf's hosts; `act` cuts the uplink mid-traffic; once the leaf has stopped using it,
    `undo` repairs it while the traffic still runs."""
    messages = int(args.rate * args.seconds / 2)  # each sender has two destinations: `seconds` of sending
    counter = PathCounter(lab, args.t0, lab.model.switch(args.t1).index)
    try:
        run = lab.start_traffic(PAIRS, qps=args.qps, messages=messages, planes=[0], rate=args.rate, timeout=120)
        if until_moves(counter, lambda: None, 30.0) is None:
            raise RuntimeError("no traffic on the uplink within 30 s")
        time.sleep(args.seconds / 5)
        row = until_quiet(counter, act, quiet_s=args.quiet, limit_s=args.seconds)
        row["used_again_ms"] = until_moves(counter, undo, args.seconds)
        report = run.wait()
        totals = report.totals()
        row.update({"sent": totals["sent"], "lost": totals["sent"] - totals["received"],
                    "counter_read_ms_median": round(statistics.median(counter.read_ms), 2)})
        return row
    finally:
        counter.close()


class FrozenController:
    """`fabricctl run` on the lab, primary on every switch, then stopped with SIGSTOP (a wedged controller)."""

    def __init__(self, lab: Lab, workdir: Path) -> None:
        self.events = workdir / "frozen-events.jsonl"
        self.log = open(workdir / "frozen.log", "w")
        root = Path(__file__).resolve().parent.parent
        argv = [sys.executable, "-m", "fabricctl", "--topology", str(lab.topology_path), "--election-id", "10",
                "run", "--counters-every", "0", "--events", str(self.events)]
        self.proc = subprocess.Popen(argv, cwd=root, stdout=self.log, stderr=subprocess.STDOUT,
                                     env={**os.environ, "PYTHONPATH": str(root)})
        names = {sw.name for sw in lab.model.switches}
        end = time.monotonic() + 60
        while True:
            roles = {}
            if self.events.exists():
                for line in self.events.read_text().splitlines():
                    try:
                        e = json.loads(line)
                    except ValueError:
                        continue
                    if e.get("kind") == "mastership":
                        roles[e["switch"]] = e["role"]
            if names == {n for n, r in roles.items() if r == "primary"}:
                break
            if self.proc.poll() is not None or time.monotonic() > end:
                self.stop()
                raise RuntimeError("fabricctl run did not become primary everywhere within 60 s")
            time.sleep(0.05)
        os.kill(self.proc.pid, signal.SIGSTOP)

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGCONT)
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--rate", type=float, default=1000.0, help="packets/s per sender (2 senders)")
    ap.add_argument("--qps", type=int, default=4)
    ap.add_argument("--seconds", type=float, default=5.0, help="traffic per run")
    ap.add_argument("--quiet", type=float, default=1.0, help="s without a packet on the uplink that ends a run")
    ap.add_argument("--frozen-runs", type=int, default=3,
                    help="switch-local runs with a `fabricctl run` primary frozen by SIGSTOP (after the others)")
    ap.add_argument("--t0", default="p0-t0-0")
    ap.add_argument("--t1", default="p0-t1-0")
    ap.add_argument("--grpc-base-port", type=int, default=51301)
    ap.add_argument("--port-poll-ms", type=int, default=None,
                    help="the switches' BM_PORT_MONITOR_MS (default: $BM_PORT_MONITOR_MS, else the lab's default)")
    args = ap.parse_args()
    if args.port_poll_ms is not None:
        os.environ[PORT_POLL_VARIABLE] = str(args.port_poll_ms)
    load_start = [round(x, 2) for x in os.getloadavg()]
    why = prerequisites()
    if why:
        print(json.dumps({"error": why}))
        return 2
    local, controller, frozen = [], [], []
    with tempfile.TemporaryDirectory(prefix="switch-local-") as d, \
            Lab(watched(default_topology(grpc_base_port=args.grpc_base_port)), d, tag="sl") as lab:
        builds = lab_builds(lab.state.switches)
        leaf_end = lab.nodes.link_ports(lab.model, lab.state, args.t0, args.t1)[:1]  # the leaf's end only
        link = LinkDown(args.t0, args.t1)
        time.sleep(1.0)  # bmv2's port monitor reports nothing before its first poll (docs/faults.md)
        for _ in range(args.runs):  # taking turns, so load drifts hit both alike
            local.append(one_run(lab, args, lambda: lab.nodes.set_link(leaf_end, "down"),
                                 lambda: lab.nodes.set_link(leaf_end, "up")))
            controller.append(one_run(lab, args, lambda: lab.fail(link), lambda: lab.restore(link)))
        if args.frozen_runs:  # last: a frozen primary refuses lab.fail's writes (its election id is higher)
            frozen_ctl = FrozenController(lab, Path(d))
            try:
                for _ in range(args.frozen_runs):
                    frozen.append(one_run(lab, args, lambda: lab.nodes.set_link(leaf_end, "down"),
                                          lambda: lab.nodes.set_link(leaf_end, "up")))
            finally:
                frozen_ctl.stop()
    med_local = spread([r["stopped_by_ms"] for r in local])["median"]
    every_local = spread([r["stopped_by_ms"] for r in local + frozen])
    polls = sorted({b["port_poll_ms"] for b in builds}, key=str)
    med_ctl = spread([r["stopped_by_ms"] for r in controller])["median"]
    doc = {
        "bench": "switch_local", "link": f"{args.t0} -- {args.t1}", "runs": args.runs,
        "lab": "2 planes x 2 T1 x 2 T0 x 2 hosts, srv6_spray, packet spray; traffic h0,h1 -> h2,h3 in plane 0",
        "rate_pps_per_sender": args.rate, "senders": 2,
        "switch_local": {
            "how": "carrier down on the leaf's end (ip link set down); no controller process at all",
            "cut_to_last_packet_on_uplink_ms": spread([r["stopped_by_ms"] for r in local]),
            "cut_to_read_before_it_ms": spread([r["stopped_after_ms"] for r in local]),
            "packets_onto_dead_uplink": spread([r["after_cut"] for r in local]),
            "lost_per_run": [r["lost"] for r in local],
            "carrier_up_to_uplink_used_ms": spread([r["used_again_ms"] for r in local]),
            "lost_per_run_note": "lost counts also what was queued for the port when it went down",
            "per_run": local},
        "switch_local_controller_frozen": {
            "how": "the same, with a `fabricctl run` primary on every switch stopped by SIGSTOP before the cut",
            "cut_to_last_packet_on_uplink_ms": spread([r["stopped_by_ms"] for r in frozen]),
            "packets_onto_dead_uplink": spread([r["after_cut"] for r in frozen]),
            "lost_per_run": [r["lost"] for r in frozen],
            "carrier_up_to_uplink_used_ms": spread([r["used_again_ms"] for r in frozen]),
            "per_run": frozen},
        "controller_baseline": {
            "how": ("lab.fail(LinkDown) at once (the fabricctl fail link write), no carrier change: what it sprays "
                    "on the uplink meanwhile still arrives; the time is the controller's record and table write"),
            "cut_to_last_packet_on_uplink_ms": spread([r["stopped_by_ms"] for r in controller]),
            "packets_onto_dead_uplink": spread([r["after_cut"] for r in controller]),
            "restore_to_uplink_used_ms": spread([r["used_again_ms"] for r in controller]),
            "per_run": controller},
        "ratio_switch_local_to_controller": None if not med_ctl else round(med_local / med_ctl, 2),
        "aim": {"median_ms": AIM_MEDIAN_MS, "max_ms": AIM_MAX_MS, "switch_local_all_runs_ms": every_local,
                "met": every_local["median"] is not None and every_local["median"] <= AIM_MEDIAN_MS
                and every_local["max"] <= AIM_MAX_MS,
                "bound": f"bmv2 polls port status every {polls} ms (None: its own 200 ms)"},
        "bmv2": builds,
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "load_start": load_start, "load_end": [round(x, 2) for x in os.getloadavg()]},
    }
    print(json.dumps(doc, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
