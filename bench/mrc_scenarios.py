"""The MRC paper's failure scenarios as one bench (root; a lab; prints JSON with --json): every mode side by side,
--runs fault runs each, the spread, and the ratio to a healthy baseline run of the same mode in the same process.

    flock /tmp/srv6-lab.lock timeout 900 .venv/bin/python bench/mrc_scenarios.py --dataplane kernel \\
        --scenario t1-blackhole --runs 3 --json

The lab: 2 planes x 4 T1 x 2 T0 x 2 hosts; every host sends to the host at its position under the other leaf
(h0 <-> h2, h1 <-> h3: senders under both leaves), 4 QPs each, the endpoint transport (endpoint.sender: per-PSN
ACKs, selective retransmission). Measured in the transport's goodput (distinct packets delivered per second, all
receivers, binned): the collective workload's rank (endpoint/collective) reports per-transfer times but neither
its EV states, replacements nor port changes, and runs no loop agents. The same failures in job terms (AllReduce
time, the job's throughput): bench/collectives.py --only paper_scenarios. Every fault is the fault library's
(mininet_labs.faults), timed by its Schedule. On bmv2 (P4_TOOLCHAIN_BIN set) keep an invocation to one scenario
and two modes (each under ~3 min; the minute-long flap: one mode, ~6 min) and join them with --merge.

Scenarios (the paper's figure in SCENARIOS[...].paper):
  ev-loss       one EV (per sender) with 20 % loss: gray 20 % on p0-t0-0 -> p0-t1-1 and p0-t0-1 -> p0-t1-1
  t1-blackhole  p0-t1-1 stops forwarding, carrier up: blackhole on both ends of each of its links
  t0-flap       p0-t0-0's link to p0-t1-1 flapping (carrier down/up every --flap-ms) for --flap-s (5 s; paper: a minute)
  loss1         1 % random loss on every T0-T1 link, both directions, both planes
  nic-down      h2's plane-0 NIC down: h2's sender remaps locally, h0's from the port-state bitmap
Modes:
  host          host EV spraying (health policy), one backup EV per plane, no loop agents
  host-loops    the same, with every host's loop agent denying the EVs through what it localizes
  leaf          plain RoCEv2, the leaves spray per packet (kernel: Linux multipath hashes per flow); the
                controller told at once where the scenario is a failure it records (t1-blackhole)
  eecmp         one path per QP, the 5-tuple hash's (host-hash: the path E-ECMP gives a QP), no backups
  roce-gbn      the same single path per QP, and go-back-N: RoCEv2 RC without selective repeat (the receiver
                takes PSNs only in order; a loss resends everything from the lost PSN): loss1's RoCE
Not a test: Python senders on two shared cores; figures vary with the machine's load (given per run).
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
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _mrc_tables import MergeError, markdown_rows, merge  # noqa: E402
from _stats import spread  # noqa: E402

from mininet_labs.faults import Schedule  # noqa: E402

PAIRS = [("h0", "h2"), ("h1", "h3"), ("h2", "h0"), ("h3", "h1")]
SPINE = "p0-t1-1"
LEAVES = ("p0-t0-0", "p0-t0-1")
# throughput is back at RECOVERED of the run's own before the fault, averaged over RECOVERY_BINS bins (100 ms): the
# senders are paced at --rate, so a QP stalled on a dead path shows as a few percent, not as a collapse; the baseline
# run's own figure (no fault) is the noise floor
RECOVERED, RECOVERY_BINS = 0.95, 5


@dataclass(frozen=True)
class Mode:
    how: str  # host: the hosts write the carriers; leaf: plain RoCEv2
    policy: str
    backups: int = 0  # backup EVs per plane and destination
    loops: bool = False  # every host's loop agent, denying at its sender
    announce: bool = False  # the controller told of the scenario's failure (where it has one)


MODES: dict[str, Mode] = {
    "host": Mode("host", "health", backups=1),
    "host-loops": Mode("host", "health", backups=1, loops=True),
    "leaf": Mode("leaf", "spray", announce=True),
    "eecmp": Mode("host", "hash"),
    "roce-gbn": Mode("host", "roce-gbn"),
}


@dataclass(frozen=True)
class Scenario:
    name: str
    schedule: Schedule
    paper: str
    scale: str = ""
    before_start: bool = False  # the fault in place before the senders start (many faults take long to inject)


SCENARIOS: dict[str, Scenario] = {s.name: s for s in (
    Scenario("ev-loss", Schedule(seconds=4.0, fault_at=1.0, repair_at=3.0, start_delay=3.0),
             "the EV ASSUMED_BAD at once, a backup from the same plane takes its place, line rate kept"),
    Scenario("t1-blackhole", Schedule(seconds=4.0, fault_at=1.0, repair_at=2.5, start_delay=3.0),
             "throughput largely unaffected; the T1's EVs mapped out on every host"),
    Scenario("t0-flap", Schedule(seconds=8.0, fault_at=1.0, repair_at=6.0, start_delay=3.0),
             "about 25 % of throughput lost during the flapping, full speed right after, no QP failed",
             "5 s of flapping at the --flap-ms period (--flap-s), not a minute"),
    Scenario("loss1", Schedule(seconds=6.0, fault_at=0.5, repair_at=5.5, start_delay=3.0),
             "RoCE (go-back-N) all but unusable; MRC about a third of its loss-free throughput",
             before_start=True),
    Scenario("nic-down", Schedule(seconds=4.0, fault_at=1.0, repair_at=2.5, start_delay=3.0),
             "the local remap in under 1 s; remote senders stop using the plane from the next acknowledgement"),
)}


# --- the pure parts: arguments, goodput, recovery, mapped-out times, the summary -----------------------------

def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="mrc_scenarios.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--dataplane", choices=("kernel", "bmv2"), default="kernel")
    ap.add_argument("--runs", type=int, default=3, help="fault runs per scenario and mode (one baseline besides)")
    ap.add_argument("--scenario", action="append", choices=list(SCENARIOS), help="repeatable; default: all")
    ap.add_argument("--mode", action="append", choices=list(MODES), help="repeatable; default: all")
    ap.add_argument("--rate", type=float, default=400.0, help="packets/s per sender")
    ap.add_argument("--flap-ms", type=int, default=250, help="t0-flap: the carrier's half period")
    ap.add_argument("--flap-s", type=float, default=5.0, help="t0-flap: how long the link flaps (the paper: 60)")
    ap.add_argument("--loop-period-ms", type=float, help="the loop agents' period (default: kernel 10, bmv2 20)")
    ap.add_argument("--json", action="store_true", help="only the JSON on stdout")
    ap.add_argument("--dir", default="/tmp/srv6-bench-mrc")
    ap.add_argument("--merge", nargs="+", metavar="JSON", help="no lab: these invocations' --json output as one "
                    "document (the table, or the JSON with --json)")
    ap.add_argument("--markdown", action="store_true", help="the table as docs/endpoint.md's Markdown rows")
    args = ap.parse_args(argv)
    if args.runs < 1:
        ap.error(f"--runs must be at least 1, not {args.runs}")
    if args.rate <= 0:
        ap.error(f"--rate must be above 0, not {args.rate}")
    if not 0 < args.flap_s <= 600:
        ap.error(f"--flap-s must be above 0 and at most 600, not {args.flap_s}")
    args.scenario = args.scenario or list(SCENARIOS)
    args.mode = args.mode or list(MODES)
    return args


def scenario_for(name: str, rate_pps: float, flap_s: float = 5.0) -> Scenario:
    """The scenario at the invocation's send rate; t0-flap lasting flap_s seconds from its fault_at, with
    the 2 s after it that the other scenarios keep after the repair."""
    scen = SCENARIOS[name]
    sch = replace(scen.schedule, rate=rate_pps)
    if name == "t0-flap" and flap_s != sch.repair_at - sch.fault_at:
        sch = replace(sch, repair_at=sch.fault_at + flap_s, seconds=sch.fault_at + flap_s + 2.0)
        scen = replace(scen, scale=f"{flap_s:g} s of flapping at the --flap-ms period" +
                       ("" if flap_s >= 60 else ", not a minute"))
    return replace(scen, schedule=sch)


def rate(series: list[int], bin_ms: float, a: float, b: float) -> float | None:
    """Packets per second delivered in [a, b) seconds (whole bins from a's), None for an empty window."""
    lo, hi = int(a * 1000 / bin_ms), int(b * 1000 / bin_ms)
    if hi <= lo or lo >= len(series):
        return None
    return round(sum(series[lo:hi]) / ((hi - lo) * bin_ms / 1000), 1)


def recovery_ms(series: list[int], bin_ms: float, fault_s: float, healthy: float | None, frac: float = 0.9,
                span: int = 3, until_s: float | None = None) -> float | None:
    """From the fault until throughput is back: the first bin after the last dip (`span` bins in a row averaging
    below `frac` of the healthy rate) that began from the fault to `until_s`, from which `span` bins in a row
    average at least that again; 0 when it never dipped; None when it never came back (or no healthy rate)."""
    if not healthy:
        return None
    first = int(fault_s * 1000 / bin_ms)
    last = len(series) - span if until_s is None else min(len(series) - span, int(until_s * 1000 / bin_ms))
    need = frac * healthy * bin_ms / 1000 * span

    def low(i: int) -> bool:
        return sum(series[i:i + span]) < need

    dips = [i for i in range(first, last + 1) if low(i)]
    if not dips:
        return 0.0
    back = next((k for k in range(dips[-1] + 1, len(series) - span + 1) if not low(k)), None)
    return None if back is None else round(back * bin_ms - fault_s * 1000, 1)


def mapped_out_ms(transitions: list[list[Any]], fault_s: float) -> float | None:
    """An EV's first step after the fault to a state not used for data (ASSUMED_BAD or DENIED), ms after it."""
    t = next((tr[0] for tr in transitions if tr[2] in ("assumed_bad", "denied") and tr[0] >= fault_s), None)
    return None if t is None else round((t - fault_s) * 1e3, 2)


def ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 3) if a is not None and b else None


def summarize(baseline: dict[str, Any] | None, runs: list[dict[str, Any]]) -> dict[str, Any]:
    """One scenario and mode over its runs: each figure's spread, goodput against the baseline run's over the
    same window (during the fault, right after it), against the run's own before the fault."""
    def col(key: str) -> list[Any]:
        return [r.get(key) for r in runs]

    base_during = baseline["during_pps"] if baseline else None
    base_after = baseline["after_pps"] if baseline else None
    mapped = [m for r in runs for m in r.get("mapped_out_ms", []) if m is not None]
    out: dict[str, Any] = {
        "n": len(runs),
        "during_over_baseline": spread([ratio(d, base_during) for d in col("during_pps")], 3),
        "after_over_baseline": spread([ratio(d, base_after) for d in col("after_pps")], 3),
        "during_over_before": spread([ratio(r.get("during_pps"), r.get("before_pps")) for r in runs], 3),
        "during_pps": spread(col("during_pps")), "after_pps": spread(col("after_pps")),
        "baseline_during_pps": base_during, "baseline_after_pps": base_after,
        "recovery_ms": spread(col("recovery_ms")), "baseline_recovery_ms": baseline.get("recovery_ms") if baseline else None,
        "lost_first_try": spread(col("lost_first_try"), 0), "lost_in_the_end": spread(col("lost"), 0),
        "qps_failed": sum(r.get("qps_failed", 0) for r in runs),
        "mapped_out_ms": spread(mapped, 2),
        "evs_through_fault": sum(r.get("evs_through_fault", 0) for r in runs),
        "evs_mapped_out": len(mapped),
        "hosts_all_mapped_out": [r.get("hosts_all_mapped_out") for r in runs],
        "replacements_same_plane": [r.get("replacements_same_plane") for r in runs],
        "replaced_ms": spread([m for r in runs for m in r.get("replaced_ms", [])], 2),
        "port_change_ms": {k: spread([r.get("port_change_ms", {}).get(k) for r in runs], 2) for k in ("local", "remote")},
        "load1": [r.get("load1") for r in runs],
    }
    return out


# --- the lab parts ---------------------------------------------------------------------------------------------

@dataclass
class LabFault:
    """The scenario's faults from the library (kind, target, parameters), with what endpoint.scenarios' summary
    asks of a fault: crosses(ev), describe()."""

    lab: Any
    items: list[tuple[str, list[str], dict[str, Any]]]
    crosses_ev: Callable[[Any], bool]
    failure: Any = None  # what the controller records when told (leaf mode), None: nobody tells it
    applied: list[tuple[str, list[str]]] = field(default_factory=list)

    def crosses(self, ev: Any) -> bool:
        return self.crosses_ev(ev)

    def describe(self) -> str:
        kinds = sorted({k for k, _, _ in self.items})
        return f"{', '.join(kinds)} x{len(self.items)}: " + "; ".join(" -> ".join(t) for _, t, _ in self.items[:4]) + \
            (" ..." if len(self.items) > 4 else "")

    def apply(self) -> None:
        from mininet_labs import faults

        for kind, target, params in self.items:
            faults.inject(self.lab, kind, target, **params)
            self.applied.append((kind, target))

    def revert(self) -> None:
        from mininet_labs import faults

        while self.applied:
            kind, target = self.applied.pop()
            faults.undo(self.lab, kind, target)


def lab_fault(lab: Any, name: str, flap_ms: int) -> LabFault:
    from controller import planning
    from controller.model import lookup
    from controller.plan.evs import host_evs

    if name == "ev-loss":
        return LabFault(lab, [("gray", [t0, SPINE], {"percent": 20}) for t0 in LEAVES],
                        lambda ev: bool(ev.spine_name == SPINE))
    if name == "t1-blackhole":
        items = [("blackhole", pair, {}) for t0 in LEAVES for pair in ([t0, SPINE], [SPINE, t0])]
        return LabFault(lab, items, lambda ev: bool(ev.spine_name == SPINE), lookup.switch_failure(lab.model, SPINE))
    if name == "t0-flap":
        return LabFault(lab, [("flap", [LEAVES[0], SPINE], {"period_ms": flap_ms})],
                        lambda ev: bool(ev.spine_name == SPINE and LEAVES[0] in (ev.src_leaf, ev.dst_leaf)))
    if name == "loss1":
        items = [("gray", pair, {"percent": 1}) for p in range(lab.model.planes) for t0 in lab.model.t0s(p)
                 for t1 in lab.model.t1s(p) for pair in ([t0.name, t1.name], [t1.name, t0.name])]
        return LabFault(lab, items, lambda ev: True)
    if name == "nic-down":
        fabric = planning.fabric(lab.model, "srv6_spray")
        addr = next(e.src for es in host_evs(fabric, "h2").values() for e in es if e.plane == 0)
        return LabFault(lab, [("host-nic-down", ["h2", "0"], {})],
                        lambda ev: bool(ev.plane == 0 and addr in (ev.src, ev.dst)))
    raise ValueError(f"unknown scenario '{name}'")


def make_lab(dataplane: str, where: str) -> Any:
    from mininet_labs.lab import Lab
    from mininet_labs.labstate import default_topology

    model = default_topology(2, 4, 2, 2, grpc_base_port=52701)
    if dataplane == "kernel":
        from mininet_labs.backends import nodes_for

        # host-written carriers pass a kernel leaf's SR boundary only when the topology says so at lab up
        return Lab(replace(model, host_source_routing=True), where, nodes_for("kernel", name=f"mrc{os.getpid() % 1000}"))
    return Lab(model, where, tag=f"m{os.getpid() % 100}")


def start_agents(lab: Any, run_dir: Path, period_ms: float, timeout_ms: float) -> dict[str, subprocess.Popen[Any]]:
    from mininet_labs.processes import with_repo_path

    env = with_repo_path(os.environ)
    procs = {}
    for h in sorted({a for a, _ in PAIRS}):
        with open(run_dir / f"loops-{h}.err", "w") as err:
            procs[h] = lab.host(h).popen(
                [sys.executable, "-m", "endpoint", "loops", "--topology", str(lab.topology_path), "--host", h,
                 "--evs", str(run_dir / "evs.json"), "--state", str(run_dir / f"loops-{h}.json"),
                 "--control", str(run_dir / f"control-{h}.sock"), "--period-ms", str(period_ms),
                 "--timeout-ms", str(timeout_ms), "--confirm", "2"], env=env, stdout=subprocess.DEVNULL, stderr=err)
    return procs


def stop_agents(procs: dict[str, subprocess.Popen[Any]], run_dir: Path) -> dict[str, Any]:
    for p in procs.values():
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    out = {}
    for h, p in procs.items():
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
        try:
            doc = json.loads((run_dir / f"loops-{h}.json").read_text())
            out[h] = {k: doc.get(k) for k in ("rounds", "achieved_period_ms", "lost", "late", "failed", "denied", "errors")}
        except (OSError, ValueError):
            out[h] = None
    return out


def one_run(lab: Any, scen: Scenario, fault: LabFault, mode_name: str, args: argparse.Namespace,
            with_fault: bool) -> dict[str, Any]:
    """One run of a mode: traffic on the scenario's schedule, the fault in place from fault_at to repair_at
    (or none: the baseline); the run's figures."""
    from endpoint import lab as ep
    from endpoint.scenarios import abandon, summarize as ep_summarize

    mode, sch = MODES[mode_name], scen.schedule
    bin_ms = sch.timeline_ms
    per_message = 4
    messages = max(sch.qps, int(sch.seconds * args.rate / per_message) // sch.qps * sch.qps)

    @dataclass
    class Work(ep.Workload):
        backups: int = 0

        def argv(self) -> list[str]:
            return [*super().argv(), "--backups-per-plane", str(self.backups)]

    work = Work(policy=mode.policy, mode=mode.how, qps=sch.qps, messages=messages, per_message=per_message,
                rate=args.rate, duration=sch.seconds * 3 + 5, bin_ms=bin_ms, backups=mode.backups)
    load1 = round(os.getloadavg()[0], 2)
    early = with_fault and scen.before_start
    if early:  # in place before the senders start: the whole run under it, measured from fault_at
        fault.apply()
    try:
        run = ep.start(lab, PAIRS, work, start_delay=sch.start_delay)
    except BaseException:
        fault.revert()
        raise
    period = args.loop_period_ms or (10.0 if args.dataplane == "kernel" else 20.0)
    agents = start_agents(lab, run.dir, period, period * (2 if args.dataplane == "kernel" else 5)) if mode.loops else {}
    announced = with_fault and mode.announce and fault.failure is not None
    events: list[dict[str, Any]] = []
    try:
        # a sender that came up after the common start starts at once: the schedule counts from when all are up
        # (their control sockets listen), so that every sender has sent fault_at seconds before the fault
        base_ns = max(run.started_ns, senders_up(run.dir, 60.0))
        _at(base_ns, sch.fault_at)
        t_fault = (time.monotonic_ns() - run.started_ns) / 1e9
        if early:
            events.append({"what": f"fault: {fault.describe()}", "t_s": 0.0, "in_place_s": 0.0})
        elif with_fault:
            fault.apply()
            events.append({"what": f"fault: {fault.describe()}", "t_s": round(t_fault, 4),
                           "in_place_s": round((time.monotonic_ns() - run.started_ns) / 1e9, 4)})
            if announced:
                events.append({"what": "controller: fail recorded", "took_s": lab.fail(fault.failure).seconds})
        _at(base_ns, sch.repair_at)
        t_repair = (time.monotonic_ns() - run.started_ns) / 1e9
        if with_fault:
            fault.revert()
            if announced:
                events.append({"what": "controller: restore recorded", "took_s": lab.restore(fault.failure).seconds})
        report = run.wait()
    except BaseException:
        abandon(lab, run, fault)
        raise
    finally:
        loops = stop_agents(agents, run.dir) if agents else {}
    res = ep_summarize(lab, fault, mode_name, report, events, t_fault, t_repair,  # type: ignore[arg-type]
                       _ep_schedule(sch), False, (mode.how, mode.policy, announced))
    in_place = t_fault if early or not events else events[0]["in_place_s"]
    return digest(res, report, t_fault, in_place, t_repair, load1, loops)


def senders_up(run_dir: Path, within: float) -> int:
    """When (monotonic ns) every sender of PAIRS listens on its control socket; at the deadline, whatever is up."""
    socks = [run_dir / f"control-{h}.sock" for h in sorted({a for a, _ in PAIRS})]
    end = time.monotonic() + within
    while time.monotonic() < end and not all(p.exists() for p in socks):
        time.sleep(0.02)
    return time.monotonic_ns()


def _ep_schedule(sch: Schedule) -> Any:
    from endpoint.scenarios import EndpointSchedule

    return EndpointSchedule(**asdict(sch))  # the fault library's schedule, the senders' settings as the bench's


def _at(started_ns: int, seconds: float) -> None:
    left = started_ns / 1e9 + seconds - time.monotonic()
    if left > 0:
        time.sleep(left)


def digest(res: Any, report: Any, t_fault: float, in_place: float, t_repair: float, load1: float,
           loops: dict[str, Any]) -> dict[str, Any]:
    """The figures of one run from endpoint.scenarios' summary and the senders' JSON: times from the fault's
    injection began (t_fault); goodput during it from when all of it was in place."""
    from controller.plan.evs import SPINE_BITS

    series, bin_ms = res.goodput["packets"], res.goodput["bin_ms"]
    before = res.summary["goodput_pps"]["healthy"]
    t0 = report.started_ns / 1e9
    mapped = [mapped_out_ms(e["transitions"], t_fault) for e in res.evs]
    per_host: dict[str, list[bool]] = {}
    for e, m in zip(res.evs, mapped):
        per_host.setdefault(e["sender"], []).append(m is not None)
    repl, ports = [], {}
    for s, doc in report.senders.items():
        # a destination's table (the controller's and the agents' operations) and each QP's share of it (losses)
        tables = [(dst, None, rs) for dst, rs in doc.get("replacements", {}).items()] + \
            [(q["dst"], q["qp"], q.get("replacements", [])) for q in doc["qps"]]
        for dst, qp, rs in tables:
            for t, old, new, why in rs:
                if t - t0 >= t_fault:
                    repl.append({"sender": s, "dst": dst, "qp": qp, "ms": round((t - t0 - t_fault) * 1e3, 2), "ev": old,
                                 "new": new, "same_plane": old >> SPINE_BITS == new >> SPINE_BITS, "why": why})
        for dst, cs in doc.get("port_changes", {}).items():
            for t, where, plane, up in cs:
                ms = round((t - t0 - t_fault) * 1e3, 2)
                if not up and ms >= 0 and (where not in ports or ms < ports[where]):
                    ports[where] = ms
    return {
        "load1": load1, "before_pps": before, "during_pps": rate(series, bin_ms, in_place, t_repair),
        "after_pps": rate(series, bin_ms, t_repair, t_repair + 1.0),
        "recovery_ms": recovery_ms(series, bin_ms, t_fault, before, RECOVERED, RECOVERY_BINS, until_s=t_repair),
        "lost_first_try": res.summary["lost_first_try"], "lost": res.summary["lost"],
        "complete": res.summary["complete"], "qps_failed": sum(1 for q in res.qps if q["acked"] < q["total"]),
        "evs_through_fault": len(res.evs), "mapped_out_ms": mapped,
        "hosts_all_mapped_out": sorted(h for h, ok in per_host.items() if ok and all(ok)),
        "replacements": repl, "replacements_same_plane": f"{sum(1 for r in repl if r['same_plane'])}/{len(repl)}",
        "replaced_ms": sorted(r["ms"] for r in repl),
        "port_change_ms": ports, "events": res.events, "loops": loops,
        "series": series, "bin_ms": bin_ms, "fault_s": round(t_fault, 3), "in_place_s": round(in_place, 3),
        "repair_s": round(t_repair, 3), "announced": res.announced,
    }


def measure(lab: Any, args: argparse.Namespace, scen: Scenario) -> dict[str, Any]:
    fault = lab_fault(lab, scen.name, args.flap_ms)
    out: dict[str, Any] = {"paper": scen.paper, "scale": scen.scale, "fault": fault.describe(),
                           "schedule": asdict(scen.schedule), "modes": {}}
    for m in args.mode:
        log(f"{scen.name} {m}: baseline")
        base = one_run(lab, scen, fault, m, args, with_fault=False)
        runs = []
        for i in range(args.runs):
            runs.append(one_run(lab, scen, fault, m, args, with_fault=True))
            r = runs[-1]
            log(f"{scen.name} {m} run {i + 1}: during {r['during_pps']} (baseline {base['during_pps']}), after "
                f"{r['after_pps']}, lost 1st {r['lost_first_try']}, mapped out {r['mapped_out_ms']}, load {r['load1']}")
        out["modes"][m] = {"summary": summarize(base, runs), "baseline": base, "runs": runs}
    return out


def log(text: str) -> None:
    print(f"# {text}", file=sys.stderr, flush=True)


def table(doc: dict[str, Any]) -> list[str]:
    lines = [f"{'scenario':13} {'mode':10} {'during/base':>18} {'after/base':>18} {'recovery ms':>18} "
             f"{'lost 1st':>14} {'mapped out ms':>20}"]

    def f(s: dict[str, Any]) -> str:
        return "-" if not s.get("n") else f"{s['median']} ({s['min']}-{s['max']})"

    for name, sc in doc["scenarios"].items():
        for m, r in sc["modes"].items():
            s = r["summary"]
            lines.append(f"{name:13} {m:10} {f(s['during_over_baseline']):>18} {f(s['after_over_baseline']):>18} "
                         f"{f(s['recovery_ms']):>18} {f(s['lost_first_try']):>14} {f(s['mapped_out_ms']):>20}")
    return lines


def merged(paths: list[str]) -> dict[str, Any]:
    """The documents in those files merged (MergeError naming a file that cannot be read)."""
    docs = []
    for p in paths:
        try:
            docs.append(json.loads(Path(p).read_text()))
        except (OSError, ValueError) as e:
            raise MergeError(f"{p}: {e}") from None
    return merge(docs)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.merge:
        try:
            one = merged(args.merge)
        except MergeError as e:
            print(f"mrc_scenarios.py: error: {e}", file=sys.stderr)
            return 2
        print(json.dumps(one, indent=1) if args.json else "\n".join(markdown_rows(one) if args.markdown else table(one)))
        return 0
    from endpoint.lab import enable

    head = subprocess.run(["git", "-C", str(Path(__file__).resolve().parent), "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True).stdout.strip()
    doc: dict[str, Any] = {"bench": "mrc_scenarios", "commit": head, "argv": sys.argv[1:], "dataplane": args.dataplane,
                           "lab": "2 planes x 4 T1 x 2 T0 x 2 hosts; h0<->h2, h1<->h3, 4 QPs each",
                           "rate_pps_per_sender": args.rate, "runs": args.runs,
                           "machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                                       "load1_start": round(os.getloadavg()[0], 2)}, "scenarios": {}}
    t0 = time.monotonic()
    lab = make_lab(args.dataplane, args.dir)
    lab.up()
    try:
        enable(lab)
        for name in args.scenario:
            doc["scenarios"][name] = measure(lab, args, scenario_for(name, args.rate, args.flap_s))
    finally:
        lab.down()
    doc["seconds"] = round(time.monotonic() - t0, 1)
    doc["machine"]["load1_end"] = round(os.getloadavg()[0], 2)
    if args.json:
        print(json.dumps(doc, indent=1))
    else:
        print("\n".join(markdown_rows(doc) if args.markdown else table(doc)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
