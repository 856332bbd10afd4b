"""Side by side under one fault: leaf spraying + the controller told (planning.failure_change) against host EV spraying.

    result = compare(lab, "cut", "p0-t0-0", "p0-t1-1", modes=("leaf", "host"))
    print(json.dumps(result.to_json(), indent=1))

Every mode runs the same endpoint transport (endpoint.sender/receiver: per-PSN ACKs, retransmission,
the same QPs, window and pace) for the same time with the same fault at the same moment; what
differs is who picks the path. `leaf`: the host sends plain RoCEv2 (one EV per plane, no carrier),
the leaves spray per packet, and the fault is announced to the controller at once (Lab.fail: record
and reconcile, the `fabricctl fail link` path), the repair restored the same way. `host` (and the
other host-* modes): the hosts write the carriers and choose the EVs by a policy; nobody tells the
controller anything. Per mode: per-QP first-try losses, retransmissions and loss window (from the
fault to the QP's last first-try loss), goodput (distinct packets delivered per second) during the
fault against before it, the reorder-distance histogram, CE and trim counts, and in host modes
when each sender's EVs through the fault failed and came back.
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from controller import planning
from controller.plan.evs import host_evs
from endpoint.ev import EvConfig
from endpoint.faults import Fault
from endpoint.incast import MODES as INCAST_MODES, Bottleneck, default_senders, same_leaf, set_thresholds
from endpoint.lab import EndpointReport, Workload, enable, start
from endpoint.unattended import Probing, service, timeline
from mininet_labs.faults import Schedule
from mininet_labs.lab import Lab, LabError
from mininet_labs.shaping import current

# mode -> (how packets find their path, EV policy, is the controller told)
MODES: dict[str, tuple[str, str, bool]] = {
    "leaf": ("leaf", "spray", True),
    "leaf-unattended": ("leaf", "spray", False),  # the controller service finds the fault itself (endpoint.unattended)
    "host": ("host", "health", False),
    "host-spray": ("host", "spray", False),
    "host-ethereal": ("host", "ethereal", False),
    "host-hash": ("host", "hash", False),
    "roce-gbn": ("host", "roce-gbn", False),  # single-path RoCEv2 RC: one EV per QP, go-back-N
}


@dataclass
class EndpointSchedule(Schedule):
    """The fault library's Schedule (traffic for `seconds` at `rate` packets/s per sender, the fault at `fault_at`,
    its repair at `repair_at`, goodput binned every `timeline_ms`) with how the endpoint's senders run."""

    window: int = 16
    per_message: int = 4
    min_rto_ms: float = 25.0
    probe_ms: float = 20.0
    evs_per_qp: int = 0
    leaf_evs_per_qp: int = 0  # leaf modes: 1 pins each QP to one plane (its own leaf-spray EV), so some avoid the fault
    cc: bool = False  # the senders' DCTCP congestion window (endpoint.cc); the incast turns it on
    recover_probes: int = EvConfig.recover_probes  # answered probes in a row that bring an ASSUMED_BAD EV back


@dataclass
class ModeResult:
    mode: str
    policy: str
    announced: bool
    events: list[dict[str, Any]]
    summary: dict[str, Any]
    qps: list[dict[str, Any]]
    evs: list[dict[str, Any]]  # host modes: the EVs through the fault, per sender
    goodput: dict[str, Any]  # bins of delivered packets (all receivers), relative to the senders' start
    started_ns: int = 0  # the senders' common start (monotonic ns)


@dataclass
class Comparison:
    fault: str
    pairs: list[tuple[str, str]]
    schedule: EndpointSchedule
    modes: list[ModeResult] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"fault": self.fault, "pairs": [list(p) for p in self.pairs], "schedule": asdict(self.schedule),
                "modes": [asdict(m) for m in self.modes], "notes": self.notes}


def default_pairs(lab: Lab, t0: str) -> list[tuple[str, str]]:
    """Each host under `t0` sends to the host at the same position under the next leaf of the plane."""
    leaf = lab.model.switch(t0)
    leaves = lab.model.t0s(leaf.plane)
    other = leaves[(leaf.index + 1) % len(leaves)]
    if other is leaf:
        raise LabError("the scenario needs two leaves per plane")
    return list(zip(leaf.host_names, other.host_names))


def queued_frames(pairs: list[tuple[str, str]], qps: int, window: int) -> int:
    """Data frames a round trip can queue behind: every window a sender keeps out (its QPs to each of its
    destinations) and every window sent into one receiver (its senders' QPs), at the busiest of each."""
    out = max(sum(1 for a, _ in pairs if a == s) for s, _ in pairs)
    into = max(sum(1 for _, b in pairs if b == d) for _, d in pairs)
    return (out + into) * qps * window


def _at(started_ns: int, seconds: float) -> None:
    left = started_ns / 1e9 + seconds - time.monotonic()
    if left > 0:
        time.sleep(left)


def _rel(started_ns: int, t_ns: int | None = None) -> float:
    return round(((t_ns or time.monotonic_ns()) - started_ns) / 1e9, 4)


def run_mode(lab: Lab, fault: Fault | Bottleneck, mode: str, pairs: list[tuple[str, str]], sch: EndpointSchedule,
             spec: tuple[str, str, bool] | None = None) -> ModeResult:
    """One mode under the fault (see the module docstring); `spec` (how, policy, announced) instead of MODES[mode]."""
    how, policy, announce = spec or MODES[mode]
    if lab.failures():
        raise LabError("the lab has recorded failures ('fabricctl restore all' first): a scenario starts healthy")
    per_sender = max(sum(1 for a, _ in pairs if a == s) for s, _ in pairs)
    messages = max(sch.qps, int(sch.seconds * sch.rate / per_sender / sch.per_message) // sch.qps * sch.qps)
    rate = current(lab.dir)
    work = Workload(policy=policy, mode=how, qps=sch.qps, messages=messages, per_message=sch.per_message,
                    window=sch.window, evs_per_qp=sch.evs_per_qp if how == "host" else sch.leaf_evs_per_qp, rate=sch.rate,
                    min_rto_ms=sch.min_rto_ms, probe_ms=sch.probe_ms, duration=sch.seconds * 3 + 5, bin_ms=sch.timeline_ms,
                    cc=sch.cc, recover_probes=sch.recover_probes, link_mbit=rate.mbit if rate else 0.0,
                    queued_frames=queued_frames(pairs, sch.qps, sch.window))
    run = start(lab, pairs, work, start_delay=sch.start_delay)
    events: list[dict[str, Any]] = []
    try:
        _at(run.started_ns, sch.fault_at)
        t = time.monotonic_ns()
        fault.apply()
        events.append({"what": f"fault: {fault.describe()}", "t_s": _rel(run.started_ns, t),
                       "in_place_s": _rel(run.started_ns)})
        if announce:
            t = time.monotonic_ns()
            r = lab.fail(fault.failure)
            events.append({"what": "controller: fail recorded and reconciled", "t_s": _rel(run.started_ns, t),
                           "took_s": r.seconds})
        _at(run.started_ns, sch.repair_at)
        t = time.monotonic_ns()
        fault.revert()
        events.append({"what": "repair", "t_s": _rel(run.started_ns, t)})
        if announce:
            t = time.monotonic_ns()
            r = lab.restore(fault.failure)
            events.append({"what": "controller: restore recorded and reconciled", "t_s": _rel(run.started_ns, t),
                           "took_s": r.seconds})
        controller_untouched = not announce and not lab.failures()
        report = run.wait()
    except BaseException:
        abandon(lab, run, fault)
        raise
    # a bottleneck takes the runtime CLI a while to set: it counts from when it is in place
    fault_s = events[0]["in_place_s"] if isinstance(fault, Bottleneck) else events[0]["t_s"]
    repair_s = next(e["t_s"] for e in events if e["what"] == "repair")
    return summarize(lab, fault, mode, report, events, fault_s, repair_s, sch, controller_untouched,
                     (how, policy, announce))


def summarize(lab: Lab, fault: Fault | Bottleneck, mode: str, report: EndpointReport, events: list[dict[str, Any]],
              fault_s: float, repair_s: float, sch: EndpointSchedule, controller_untouched: bool,
              spec: tuple[str, str, bool] | None = None) -> ModeResult:
    """Per-QP losses and windows, goodput, reordering and marks of one mode's run."""
    how, policy, announce = spec or MODES[mode]
    t0 = report.started_ns / 1e9
    fabric = planning.fabric(lab.model, "srv6_spray")
    qps, windows = [], []
    for s, doc in report.senders.items():
        for q in doc["qps"]:
            faulty = {e.id for e in host_evs(fabric, s, [q["dst"]])[q["dst"]] if fault.crosses(e)}
            on_fault = how == "leaf" or bool(faulty & set(q["evs"]))
            lost_in_fault = [t - t0 for t in q["lost_at_s"] if fault_s <= t - t0 < repair_s + 0.5]
            window = round((max(lost_in_fault) - fault_s) * 1e3, 2) if lost_in_fault else None
            if window is not None:
                windows.append(window)
            first = q["first_loss_s"]
            qps.append({"sender": s, "dst": q["dst"], "qp": q["qp"], "on_fault": on_fault, "evs": q["evs"],
                        "total": q["total"], "acked": q["acked"], "lost_first_try": q["lost_first_try"],
                        "retransmitted": q["retransmitted"], "loss_window_ms": window,
                        "lost_outside_fault": q["lost_first_try"] - len(lost_in_fault),
                        "first_loss_s": None if first is None else round(first - t0, 4),
                        "lost_at_s": [round(t - t0, 4) for t in q["lost_at_s"]],
                        "max_recovery_ms": q["max_recovery_ms"], "trims": q["trims"], "ecn": q["ecn"],
                        "resend_delay_ms": q.get("resend_delay_ms", {}), "resend_srtts": q.get("resend_srtts", {}),
                        "cwnd_cuts": q.get("cwnd_cuts")})
    evs = []
    if how == "host":
        for s, doc in report.senders.items():
            for dst, table in doc["evs"].items():
                faulty = {e.id for e in host_evs(fabric, s, [dst])[dst] if fault.crosses(e)}
                for e in table:
                    if e["ev"] in faulty:
                        trans = [[round(t - t0, 4), a, b, why] for t, a, b, why in e["transitions"]]
                        # detected: its first step to ASSUMED_BAD after the fault
                        failed = next((t for t, _, b, _ in trans if b == "assumed_bad" and t >= fault_s), None)
                        back = next((t for t, _, b, why in trans if b == "good" and t >= repair_s), None)
                        evs.append({"sender": s, "dst": dst, "ev": e["ev"], "spine": e["spine"], "plane": e["plane"],
                                    "detected_ms": None if failed is None else round((failed - fault_s) * 1e3, 2),
                                    "restored_ms": None if back is None else round((back - repair_s) * 1e3, 2),
                                    "sent_while_failed": e["sent_while_failed"], "timeouts": e["timeouts"],
                                    "sack_losses": e["sack_losses"], "probes": e["probes"], "transitions": trans})
    bins: dict[int, int] = {}
    bin_ms = sch.timeline_ms
    for r in report.receivers.values():
        for b, n in r["bins"].items():
            rel = int(int(b) - report.started_ns // int(bin_ms * 1e6))
            bins[rel] = bins.get(rel, 0) + n
    series = [bins.get(i, 0) for i in range(max(bins) + 1)] if bins else []

    def rate(a: float, b: float) -> float | None:
        lo, hi = int(a * 1000 / bin_ms), int(b * 1000 / bin_ms)
        window_bins = series[lo:hi]
        return round(sum(window_bins) / ((hi - lo) * bin_ms / 1000), 1) if hi > lo and window_bins else None

    began = max((d["start_ns"] - report.started_ns) / 1e9 for d in report.senders.values())
    healthy, during = rate(max(0.2, began + 0.2), fault_s), rate(fault_s, repair_s)
    reorder: dict[str, int] = {}
    for r in report.receivers.values():
        for q in r["qps"]:
            for k, v in q["reorder"].items():
                reorder[k] = reorder.get(k, 0) + v
    totals = report.totals()
    on = [q for q in qps if q["on_fault"]]
    off = [q for q in qps if not q["on_fault"]]
    summary = {
        **totals, "complete": all(d["complete"] for d in report.senders.values()),
        "qps_on_fault": len(on), "qps_elsewhere": len(off),
        "lost_first_try_on_fault": sum(q["lost_first_try"] for q in on),
        "lost_first_try_elsewhere": sum(q["lost_first_try"] for q in off),
        "lost_outside_fault": sum(q["lost_outside_fault"] for q in qps),
        "spurious": sum(q["spurious"] for s_ in report.senders.values() for q in s_["qps"]),  # spurious timeouts (RTT spikes) and the like
        "loss_window_ms": {"median": statistics.median(windows) if windows else None,
                           "max": max(windows) if windows else None, "qps_with_loss": len(windows)},
        "min_rto_ms": sch.min_rto_ms,
        "goodput_pps": {"healthy": healthy, "fault": during,
                        "ratio": round(during / healthy, 4) if healthy and during is not None else None},
        "reorder": dict(sorted(reorder.items(), key=lambda kv: int(kv[0].split("-")[0]))),
        "controller_untouched": controller_untouched if not announce else None,
        "evs_detected_ms": sorted(e["detected_ms"] for e in evs if e["detected_ms"] is not None),
        "evs_sent_while_failed": sum(e["sent_while_failed"] for e in evs),
        "evs_restored": sum(1 for e in evs if e["restored_ms"] is not None), "evs_on_fault": len(evs),
        "resend_delay_ms": resend_delays(qps), "resend_srtts": resend_delays(qps, "resend_srtts"),
        "rtt_ms": _rtts(report),
        "trimmed_unmatched": sum(r.get("trimmed_unmatched", 0) for r in report.receivers.values()),
    }
    return ModeResult(mode, policy, announce, events, summary, qps, evs,
                      {"bin_ms": bin_ms, "packets": series, "fault_s": fault_s, "repair_s": repair_s},
                      report.started_ns)


def resend_delays(qps: list[dict[str, Any]], key: str = "resend_delay_ms") -> dict[str, Any]:
    """Lost transmission to its resend, per way the loss was seen (nack: trimmed; sack: ACKs of later
    packets; timeout), over every QP: count, median, p90 and max, in ms (key "resend_srtts": in the
    EV's smoothed RTT when the loss was seen)."""
    out: dict[str, Any] = {}
    for how in sorted({h for q in qps for h in q.get(key, {})}):
        xs = sorted(d for q in qps for d in q[key].get(how, []))
        out[how] = {"count": len(xs), "median": xs[len(xs) // 2], "p90": xs[min(len(xs) - 1, int(0.9 * len(xs)))],
                    "max": xs[-1]}
    return out


def _rtts(report: EndpointReport) -> dict[str, Any]:
    """The EVs' smallest RTT and their smoothed RTT at the end (median over EVs that carried data), ms."""
    evs = [e for s in report.senders.values() for table in s["evs"].values() for e in table if e["acked"]]
    mins = sorted(e["min_rtt_ms"] for e in evs if e["min_rtt_ms"] is not None)
    srtts = sorted(e["srtt_ms"] for e in evs if e["srtt_ms"] is not None)
    return {"min_median": mins[len(mins) // 2] if mins else None, "srtt_median": srtts[len(srtts) // 2] if srtts else None}


def compare(lab: Lab, kind: str, t0: str, t1: str, *, modes: tuple[str, ...] = ("leaf", "host"),
            pairs: list[tuple[str, str]] | None = None, schedule: EndpointSchedule | None = None, percent: int = 10,
            rate: str = "2mbit") -> Comparison:
    """Each mode in turn under the same fault and traffic (endpoint mode switched on first)."""
    unknown = [m for m in modes if m not in MODES]
    if unknown:
        raise LabError(f"unknown mode '{unknown[0]}' (known: {', '.join(MODES)})")
    sch = schedule or EndpointSchedule()
    pairs = pairs or default_pairs(lab, t0)
    fault = Fault(lab, kind, t0, t1, percent=percent, rate=rate)
    enable(lab)
    out = Comparison(fault.describe(), pairs, sch)
    for m in modes:
        if m == "leaf-unattended":
            out.modes.append(unattended(lab, fault, pairs, sch))
        else:
            out.modes.append(run_mode(lab, fault, m, pairs, sch))
    return out


def unattended(lab: Lab, fault: Fault, pairs: list[tuple[str, str]], sch: EndpointSchedule,
               probing: Probing = Probing()) -> ModeResult:
    """leaf-unattended: the run with a FabricService in this process; its detection and reconciles on
    the timeline, and whatever failure it left recorded restored afterwards. `fault` is anything with
    apply/revert/describe/crosses/failure/t0/t1 (bench/loss_window.py passes the lab's fault library)."""
    events = lab.dir / "endpoint" / f"service-events-{time.monotonic_ns()}.jsonl"
    events.parent.mkdir(parents=True, exist_ok=True)
    try:
        with service(lab, events, probing):
            since = time.monotonic_ns()
            result = run_mode(lab, fault, "leaf-unattended", pairs, sch)
    finally:
        left = lab.failures()
        if left:
            lab.restore()
    result.events = sorted(result.events + timeline(events, since, result.started_ns), key=lambda e: e["t_s"])
    down = f"controller (unattended): link_down {fault.t0}--{fault.t1}"
    detected = [e["t_s"] for e in result.events if e["what"] == down and e["t_s"] >= result.goodput["fault_s"]]
    result.summary["controller_detected_ms"] = (round((detected[0] - result.goodput["fault_s"]) * 1e3, 1)
                                                if detected else None)
    result.summary["controller_left_recorded"] = len(left)
    result.summary["controller_link_downs_elsewhere"] = sum(
        1 for e in result.events if e["what"].startswith("controller (unattended): link_down") and e["what"] != down)
    return result


def compare_incast(lab: Lab, host: str, *, senders: list[str] | None = None, modes: tuple[str, ...] = ("host", "host-trim"),
                   schedule: EndpointSchedule | None = None, pps: int = 200, depth: int = 32, ecn_qdepth: int = 0,
                   trim_qdepth: int = 8) -> Comparison:
    """Every sender (default: every host under another leaf) to `host` while its leaf ports are a bottleneck
    (endpoint.incast): each mode with trimming on or off, the senders' congestion window on. Per
    mode besides compare's: the time from a lost or trimmed send to its resend, by how it was seen,
    and the bottleneck ports' CE-marked and trimmed packets as the switches counted them. The
    thresholds are set back to off afterwards."""
    unknown = [m for m in modes if m not in INCAST_MODES]
    if unknown or not modes:
        raise LabError(f"unknown incast mode '{unknown[0] if unknown else ''}' (known: {', '.join(INCAST_MODES)})")
    if trim_qdepth < 1 or (ecn_qdepth and ecn_qdepth >= trim_qdepth):
        raise LabError(f"need 1 <= trim depth ({trim_qdepth}), and an ECN depth ({ecn_qdepth}) below it or 0")
    sch = dataclasses.replace(schedule or EndpointSchedule(), cc=True)
    bottleneck = Bottleneck(lab, host, pps, depth)
    senders = senders or default_senders(lab, host)
    bad = [s for s in senders if s not in lab.model.hosts or same_leaf(lab, s, host)]
    if bad or not senders:
        raise LabError(f"'{bad[0]}' cannot send to {host} in the incast: " + (
            "no such host" if bad[0] not in lab.model.hosts else "it shares its leaf (no EV between them)")
            if bad else f"no host under another leaf than {host}'s")
    pairs = [(s, host) for s in senders]
    enable(lab)
    out = Comparison(bottleneck.describe(), pairs, sch)
    try:
        bottleneck.open()
        for m in modes:
            how, policy, trim = INCAST_MODES[m]
            set_thresholds(lab, ecn_qdepth, trim_qdepth if trim else 0)
            before = bottleneck.counters()
            result = run_mode(lab, bottleneck, m, pairs, sch, (how, policy, False))
            after = bottleneck.counters()
            per_port = {p: {k: after[p][k] - before[p][k] for k in after[p]} for p in after}
            fabric_wide = per_port.pop("fabric")
            result.summary["switch"] = {"ce_marked": sum(c["ce_marked"] for c in per_port.values()),
                                        "trimmed": sum(c["trimmed"] for c in per_port.values()), "ports": per_port,
                                        "fabric": fabric_wide}
            result.summary["thresholds"] = {"ecn_qdepth": ecn_qdepth, "trim_qdepth": trim_qdepth if trim else 0}
            out.modes.append(result)
    finally:
        bottleneck.close()
        set_thresholds(lab, 0, 0)
    return out


def describe(c: Comparison) -> list[str]:
    """Lines for a terminal: one per mode."""
    s = c.schedule
    lines = [f"{c.fault}: {len(c.pairs)} pairs, {s.rate:.0f} packets/s per sender, {s.qps} QPs, window {s.window}, "
             f"min RTO {s.min_rto_ms:.0f} ms; fault at {s.fault_at}s, repair at {s.repair_at}s"]
    lines.append(f"  {'mode':14} {'lost 1st':>8} {'resent':>6} {'lost':>5} {'window ms (med/max)':>20} "
                 f"{'goodput fault/healthy':>22} {'CE':>4} {'trim':>4}  reorder")
    for m in c.modes:
        x = m.summary
        lw, gp = x["loss_window_ms"], x["goodput_pps"]
        lines.append(f"  {m.mode:14} {x['lost_first_try']:>8} {x['retransmitted']:>6} {x['lost']:>5} "
                     f"{str(lw['median']) + ' / ' + str(lw['max']):>20} "
                     f"{str(gp['fault']) + ' / ' + str(gp['healthy']) + ' = ' + str(gp['ratio']):>22} "
                     f"{x['ecn']:>4} {x['trimmed']:>4}  {x['reorder']}")
        if x["evs_on_fault"]:
            lines.append(f"  {'':14} EVs through the fault: {x['evs_on_fault']}, failed after {x['evs_detected_ms']} ms, "
                         f"data sent while failed {x['evs_sent_while_failed']}, restored {x['evs_restored']}"
                         f"{', controller untouched' if x['controller_untouched'] else ''}")
        if "controller_detected_ms" in x:
            lines.append(f"  {'':14} unattended controller: the cut link seen down after {x['controller_detected_ms']} ms, "
                         f"{x['controller_link_downs_elsewhere']} link-downs elsewhere, "
                         f"{x['controller_left_recorded']} failures left recorded (restored)")
        if x["resend_delay_ms"]:
            seen = ", ".join(f"{how} {d['count']}x median {d['median']} ms (p90 {d['p90']}, max {d['max']})"
                             for how, d in x["resend_delay_ms"].items())
            in_rtts = ", ".join(f"{how} {d['median']}" for how, d in x["resend_srtts"].items())
            lines.append(f"  {'':14} loss to resend: {seen}; in SRTTs (median): {in_rtts}; RTT min "
                         f"{x['rtt_ms']['min_median']} ms, min RTO {x['min_rto_ms']} ms")
            cuts = sum(q.get("cwnd_cuts") or 0 for q in m.qps)
            lines.append(f"  {'':14} senders: CE echoes {sum(q['ecn'] for q in m.qps)}, congestion window cut "
                         f"{cuts} times")
        if "switch" in x:
            lines.append(f"  {'':14} switch counters at the bottleneck: CE-marked {x['switch']['ce_marked']}, trimmed "
                         f"{x['switch']['trimmed']} (every port: {x['switch']['fabric']['trimmed']}); receivers: "
                         f"trimmed {x['trimmed']} + {x['trimmed_unmatched']} before their QP's first packet")
    lines += [f"  note: {n}" for n in c.notes]
    return lines


def abandon(lab: Any, run: Any, fault: Any) -> None:
    """A run cut short (an error, Ctrl-C): its senders stopped, its fault undone and any failure it recorded
    restored, so the lab is left as it was found."""
    run.kill()
    fault.revert()
    if lab.failures():
        lab.restore()
