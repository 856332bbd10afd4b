"""The main job in one run (`fabricctl lab demo`): a lab up on whichever data plane exists, RoCEv2 between every
host pair, a T0-T1 link cut mid-traffic and announced to the controller, the loss window and recovery, teardown.

It runs on any data plane the lab orchestrator has nodes for (mininet_labs.nodes): the lab cuts a link with
`cut_link`, tells the controller with `fail`/`restore` and reconciles through the backend's southbound.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Any

from controller import planning
from controller.model.failures import LinkDown
from mininet_labs.headless import start
from mininet_labs.lab import Lab, LabError
from mininet_labs.labstate import default_topology
from mininet_labs.backends import nodes_for
from mininet_labs.nodes import Nodes
from mininet_labs.receiver import QpStats
from mininet_labs.trafficrun import TrafficReport

LINK = ("p0-t0-0", "p0-t1-1")  # plane 0: the QPs of plane 1 must not notice
# The longest a QP through the cut may go without delivery. Told at once, the reconcile takes 60-240 ms, and a QP
# sends every 30 ms at the default rate (400 packets/s from each host, round the 3 others' 4 QPs each): a loss
# window is the cut, the reconcile and up to two of those. Untold, a QP is silent until the mend.
LOSS_WINDOW_BOUND_MS = 1000.0
# After the reconcile returns, how late a QP's first delivery may still come: its packets in flight, its next send,
# a sender or receiver held off the CPU for a while. Untold, the loss goes on until the mend.
SETTLE_MS = 500.0
# After that, how long at least the demo watches for loss before it mends the link: the mend waits for it when the
# cut or the reconcile came late (on a loaded 2-core machine the cut's command took up to 19 s), so a late failover
# is still judged; and the two together outlast the bound, so an untold cut always shows a window above it.
WATCH_MS = 700.0
LEAD_S = 0.3  # the cut at the earliest this long after the last sender began: its QPs are flowing
# The senders send to every destination in turn until the demo stops them, once the mend has been watched and the
# run has lasted its --seconds; however late the failover came, its QPs still send after it and show it. Their bound:
# the messages of this many seconds past --seconds (then they stop by themselves).
OVERRUN_BOUND_S = 30.0


def loss_window_bound(announced_ms: float | None) -> float:
    """The longest loss window a QP through the cut may show: LOSS_WINDOW_BOUND_MS, or SETTLE_MS past a reconcile
    that itself returned later than that, `announced_ms` after the cut began (a loaded machine: the failover
    works, late). None: the controller was not told, nothing returns and the loss lasts until the mend."""
    return LOSS_WINDOW_BOUND_MS if announced_ms is None else max(LOSS_WINDOW_BOUND_MS, announced_ms + SETTLE_MS)


TAG, BMV2_GRPC = "dm", 51201  # the demo lab's port or namespace names and gRPC ports: clear of a default lab's


def _start(nodes: Nodes, lab_dir: Path) -> Lab:
    return start(default_topology(grpc_base_port=BMV2_GRPC), lab_dir, nodes, tag=TAG)


def run(kind: str, why: str, lab_dir: Path, *, rate: float = 400.0, seconds: float = 4.0,
        failover: bool = True) -> dict[str, Any]:
    """Every step as a check {check, ok, result}; `ok` only when all held. The lab is always taken down.
    `failover=False` cuts the link without telling the controller: a run that must fail (the checks' own test)."""
    t0 = time.monotonic()
    checks: list[dict[str, Any]] = []
    nodes = nodes_for(kind)
    doc: dict[str, Any] = {"dataplane": kind, "why": why, "fabric": "2 planes x 2 T1 x 2 T0 x 2 hosts",
                           "link": f"{LINK[0]} -- {LINK[1]}", "lacks": list(nodes.lacks), "checks": checks}

    timeline: dict[str, Any] = {}  # the traffic run's delivered packets per plane over time, once it ran

    def check(name: str, ok: bool, result: str, **extra: Any) -> None:
        checks.append({"check": name, "ok": bool(ok), "result": result, **extra})

    lab: Lab | None = None
    try:
        lab = _start(nodes, lab_dir)
        status = lab.status()
        gone = [n for n, s in {**status["switches"], **status["hosts"]}.items() if not s["alive"]]
        check("lab up", not gone, f"{time.monotonic() - t0:.1f}s, {len(status['switches'])} switches, {len(status['hosts'])} "
              "hosts" + (f"; gone: {', '.join(gone)}" if gone else ""))
        _scenario(lab, check, rate, seconds, timeline, failover)
    except LabError as e:
        check("lab", False, str(e))
    finally:
        if lab is not None:
            try:
                report = lab.down()
                check("lab down", report.clean, "nothing left" if report.clean else f"left: {report}")
            except LabError as e:
                check("lab down", False, str(e))
    doc.update(timeline)
    doc["elapsed_s"] = round(time.monotonic() - t0, 2)
    doc["ok"] = all(c["ok"] for c in checks)
    return doc


def _all_pairs(lab: Lab, check: Any, when: str) -> None:
    report = lab.traffic(qps=4, messages=8)
    t = report.totals()
    pairs = len({(p.src, p.dst) for p in report.pairs()})
    check(f"traffic {when}", report.ok, f"{pairs} host pairs x 2 planes: {t['received']}/{t['sent']} delivered, "
          f"{t['icrc_bad']} bad ICRC" + ("" if report.ok else f"; {report.problems()[0]}"))


def loss_window_ms(q: QpStats, cut_ns: int) -> float | None:
    """The QP's longest loss window: a gap between two delivered packets, or, for a QP whose first packets went into
    the cut (its sender came up late on a loaded machine, so nothing was delivered before the loss), the time from
    the cut to its first delivery. None when no loss of it closed."""
    spans = [g.rx_ms for g in q.gaps if g.rx_ms is not None]
    spans += [(g.first_after_ns - cut_ns) / 1e6 for g in q.gaps
              if g.after == -1 and g.first_after_ns is not None and g.first_after_ns > cut_ns]
    return max(spans) if spans else None


def never_recovered(report: TrafficReport, reconciled_ns: int) -> list[tuple[str, str, int]]:
    """(sender, receiver, QP) of each QP that received nothing after a loss begun before the controller reconciled,
    although its sender still sent on it after that. A QP whose last packet went into the cut before the reconcile
    lost its tail in the cut: a loss, not a failure to recover; a loss begun after the reconcile is not the cut's."""
    last_sent = {(s.host, q.dst, q.qp): q.last_ns for s in report.sent.values() for q in s.qps}
    return [(q.sender, host, q.qp) for host, r in report.received.items() for q in r.qps
            if last_sent.get((q.sender, host, q.qp), 0) > reconciled_ns
            and any(g.before is None and (g.last_before_ns or 0) < reconciled_ns for g in q.gaps)]


def lost_between(report: TrafficReport, since_ns: int, until_ns: int) -> list[tuple[tuple[str, str, int], int]]:
    """((sender, receiver, QP), packets) of each QP whose loss reaches into [since_ns, until_ns]: a gap begun before
    `until_ns` whose next delivery (for a gap to the end, its sender's last send) is after `since_ns`."""
    last_sent = {(s.host, q.dst, q.qp): q.last_ns for s in report.sent.values() for q in s.qps}
    out = []
    for host, r in report.received.items():
        for q in r.qps:
            key = (q.sender, host, q.qp)
            n = 0
            for g in q.gaps:
                ends = g.first_after_ns if g.before is not None else last_sent.get(key)
                if (g.last_before_ns or 0) < until_ns and (ends or 0) > since_ns:
                    n += g.missing
            if n:
                out.append((key, n))
    return out


def delivered_timeline(report: TrafficReport, started_ns: int, events: list[tuple[int, str]]) -> dict[str, Any]:
    """Packets delivered per plane in each bin since the senders started (every receiver's timeline summed), and
    the events at their times: what mininet_labs.plot.timeline draws."""
    planes: dict[int, dict[int, int]] = {}
    bin_ms = 0.0
    for r in report.received.values():
        if not r.timeline:
            continue
        bin_ms = r.timeline["bin_ms"]
        for plane, bins in r.timeline["planes"].items():
            into = planes.setdefault(int(plane), {})
            for b, n in bins.items():
                into[int(b)] = into.get(int(b), 0) + n
    if not bin_ms:
        return {"timeline": {"bin_ms": 0, "planes": {}}, "events": []}
    first = int(started_ns // (bin_ms * 1e6))
    last = max((b for bins in planes.values() for b in bins), default=first)
    counts = {p: [bins.get(b, 0) for b in range(first, last + 1)] for p, bins in sorted(planes.items())}
    return {"timeline": {"bin_ms": bin_ms, "planes": counts},
            "events": [{"t_ms": round((t - started_ns) / 1e6, 1), "what": what} for t, what in events]}


def _scenario(lab: Lab, check: Any, rate: float, seconds: float, timeline: dict[str, Any], failover: bool) -> None:
    _all_pairs(lab, check, "before")
    fault_at, repair_at = 0.4 * seconds, 0.75 * seconds
    dests = len(lab.hosts) - 1
    cap = max(8, int(rate * (seconds + OVERRUN_BOUND_S) / dests))  # messages per destination: stopped before
    run = lab.start_traffic(qps=4, messages=cap, rate=rate, plane_mode="qp", timeline_ms=10.0, start_delay=0.5,
                            interleave=True, timeout=seconds + OVERRUN_BOUND_S + 60)
    failure = LinkDown(*LINK)
    want = planning.failure_change(lab.model, lab.program, frozenset(), frozenset({failure}),  # type: ignore[arg-type]
                              lab.options).touched  # (lab.program: a str the lab checked names a program)
    events: list[tuple[int, str]] = []  # (CLOCK_MONOTONIC ns, what) for the timeline
    try:
        # the cut comes once every sender is sending (on a loaded machine a sender's process comes up seconds past
        # its start time: a cut before its first packet shows nothing of it)
        cut_due = max(run.started_ns / 1e9 + fault_at, run.wait_sending() / 1e9 + LEAD_S)
        time.sleep(max(0.0, cut_due - time.monotonic()))
        cut_ns = time.monotonic_ns()
        cut_at = cut_ns / 1e9
        events.append((cut_ns, "link cut"))
        lab.cut_link(*LINK)
        cut_ms = (time.monotonic_ns() - cut_ns) / 1e6
        touched = lab.fail(failure).touched if failover else []
        reconciled_ns = time.monotonic_ns()
        events.append((reconciled_ns, "failure reconciled" if failover else "controller not told"))
        announced_ms = (time.monotonic() - cut_at) * 1e3
        check("cut + fail link", sorted(touched) == sorted(want),
              f"{LINK[0]} -- {LINK[1]} cut in {cut_ms:.0f} ms; "
              + (f"controller reconciled {', '.join(touched)} {announced_ms:.0f} ms after the cut began"
                 if failover else "failover disabled: not told")
              + ("" if sorted(touched) == sorted(want) else f" (the plan changes {', '.join(want)})"),
              touched=touched, announced_ms=round(announced_ms, 1), cut_ms=round(cut_ms, 1),
              reconcile_ms=round(announced_ms - cut_ms, 1) if failover else None)
        watched = reconciled_ns / 1e9 + (SETTLE_MS + WATCH_MS) / 1e3
        time.sleep(max(0.0, max(cut_due + repair_at - fault_at, watched) - time.monotonic()))
        mended_ns = time.monotonic_ns()
        events.append((mended_ns, "link mended"))
        lab.mend_link(*LINK)
        back = lab.restore(failure).touched if failover else []
        events.append((time.monotonic_ns(), "restored"))
        check("mend + restore", sorted(back) == sorted(want),
              f"reconciled {', '.join(back) or 'no switch'} back in {(time.monotonic_ns() - mended_ns) / 1e6:.0f} ms")
        # as long after the mend as the schedule says, and no sooner than --seconds after the start
        stop_due = max(run.started_ns / 1e9 + seconds, mended_ns / 1e9 + seconds - repair_at)
        time.sleep(max(0.0, stop_due - time.monotonic()))
        run.stop()
    except BaseException:
        run.kill()
        raise
    report = run.wait()
    capped = sorted(s.host for s in report.sent.values() if not s.stopped)
    timeline.update(delivered_timeline(report, run.started_ns, events))
    plane0: list[QpStats] = []
    plane1: list[QpStats] = []
    for r in report.received.values():
        for q in r.qps:
            (plane1 if set(q.per_plane) == {1} else plane0).append(q)
    lost1 = sum(q.lost for q in plane1)
    check("plane 1 QPs", lost1 == 0 and bool(plane1), f"{len(plane1)} QPs, {lost1} packets lost", lost=lost1)
    hit = [q for q in plane0 if q.lost]
    check("QPs through the cut", bool(hit), f"{len(hit)} of {len(plane0)} plane 0 QPs lost packets in the cut"
          + ("" if hit else ": the cut hit no traffic, so nothing shows a failover"))
    windows = [w for q in hit if (w := loss_window_ms(q, cut_ns)) is not None]
    open_gaps = never_recovered(report, reconciled_ns)
    lost0 = sum(q.lost for q in plane0)
    worst = max(windows) if windows else None
    bound = loss_window_bound(announced_ms if failover else None)
    check("plane 0 loss window", bool(windows) and not open_gaps and worst is not None and worst <= bound and not capped,
          f"{lost0} packets lost; " + (f"loss window max {worst:.1f} ms, median {statistics.median(windows):.1f} ms"
                                       if windows else "no closed loss window")
          + f" (bound {LOSS_WINDOW_BOUND_MS:.0f} ms"
          + (f"; {bound:.0f} ms: {SETTLE_MS:.0f} ms past a {announced_ms:.0f} ms reconcile" if bound > LOSS_WINDOW_BOUND_MS
             else "") + f"); {len(open_gaps)} QPs never recovered"
          + (" (first: {} -> {} QP {})".format(*open_gaps[0]) if open_gaps else "")
          + (f"; {', '.join(capped)} sent all {cap} messages per destination before the demo stopped them"
             if capped else ""),
          loss_window_ms=worst or 0.0, bound_ms=bound,
          loss_window_median_ms=round(statistics.median(windows), 1) if windows else 0.0, lost=lost0)
    late = lost_between(report, reconciled_ns + int(SETTLE_MS * 1e6), mended_ns)
    check("no loss after the reconcile", not late,
          f"{sum(n for _, n in late)} packets lost on {len(late)} QPs between {SETTLE_MS:.0f} ms after the reconcile "
          "and the mend" + (" (first: {} -> {} QP {})".format(*late[0][0]) if late else ""))
    outcomes = lab.install(dry_run=True, push="never")
    in_sync = [n for n, o in outcomes.items() if o.ok and not o.delta]
    check("plan after restore", len(in_sync) == len(outcomes),
          f"{len(in_sync)}/{len(outcomes)} switches hold their plan (read back)")
    _all_pairs(lab, check, "after")
