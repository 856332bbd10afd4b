"""The main job in one run (`fabricctl lab demo`): a lab up on whichever data plane exists, RoCEv2 between every
host pair, a T0-T1 link cut mid-traffic and announced to the controller, the loss window and recovery, teardown.

It runs on the bmv2 lab (mininet_labs.lab) and the kernel lab (mininet_labs.kernel.lab) alike: both cut a link
with `cut_link`, tell the controller with `fail`/`restore` and reconcile through their southbound.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Any

from controller.failover import LinkDown
from mininet_labs.lab import Lab, LabError, default_topology
from mininet_labs.trafficrun import TrafficReport

LINK = ("p0-t0-0", "p0-t1-1")  # plane 0: the QPs of plane 1 must not notice


BMV2_TAG, BMV2_GRPC = "dm", 51201  # the bmv2 demo's port names and gRPC ports: clear of a default lab's


def _start(kind: str, lab_dir: Path) -> Lab:
    model = default_topology(grpc_base_port=BMV2_GRPC)
    if kind == "kernel":
        from mininet_labs.kernel.lab import KernelLab

        return KernelLab(model, lab_dir, name="demo").up()
    from mininet_labs.headless import start_headless

    return start_headless(model, lab_dir, tag=BMV2_TAG)


def _down(lab: Lab) -> Any:
    from mininet_labs.lab import cleanup

    return lab.down() if getattr(lab, "dataplane", "bmv2") == "kernel" else cleanup(lab.dir)


def run(kind: str, why: str, lab_dir: Path, *, rate: float = 400.0, seconds: float = 4.0) -> dict[str, Any]:
    """Every step as a check {check, ok, result}; `ok` only when all held. The lab is always taken down."""
    t0 = time.monotonic()
    checks: list[dict[str, Any]] = []
    doc: dict[str, Any] = {"dataplane": kind, "why": why, "fabric": "2 planes x 2 T1 x 2 T0 x 2 hosts",
                           "link": f"{LINK[0]} -- {LINK[1]}", "checks": checks}

    timeline: dict[str, Any] = {}  # the traffic run's delivered packets per plane over time, once it ran

    def check(name: str, ok: bool, result: str, **extra: Any) -> None:
        checks.append({"check": name, "ok": bool(ok), "result": result, **extra})

    lab: Lab | None = None
    try:
        lab = _start(kind, lab_dir)
        check("lab up", True, f"{time.monotonic() - t0:.1f}s, {len(lab.model.switches)} switches, {len(lab.hosts)} hosts")
        _scenario(lab, check, rate, seconds, timeline)
    except LabError as e:
        check("lab", False, str(e))
    finally:
        if lab is not None:
            try:
                report = _down(lab)
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


def never_recovered(report: TrafficReport, reconciled_ns: int) -> list[tuple[str, str, int]]:
    """(sender, receiver, QP) of each QP that received nothing after a loss begun before the controller reconciled,
    although its sender still sent on it after that. A QP whose last packet went into the cut before the reconcile
    lost its tail in the cut: a loss, not a failure to recover; a loss begun after the reconcile is not the cut's."""
    last_sent = {(s.host, q.dst, q.qp): q.last_ns for s in report.sent.values() for q in s.qps}
    return [(q.sender, host, q.qp) for host, r in report.received.items() for q in r.qps
            if last_sent.get((q.sender, host, q.qp), 0) > reconciled_ns
            and any(g.before is None and (g.last_before_ns or 0) < reconciled_ns for g in q.gaps)]


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


def _scenario(lab: Lab, check: Any, rate: float, seconds: float, timeline: dict[str, Any]) -> None:
    _all_pairs(lab, check, "before")
    fail_at, restore_at = 0.4 * seconds, 0.75 * seconds
    dests = len(lab.hosts) - 1
    run = lab.start_traffic(qps=4, messages=max(8, int(rate * seconds / dests)), rate=rate, plane_mode="qp",
                            timeline_ms=10.0, start_delay=0.5, timeout=seconds + 60)
    start = run.started_ns / 1e9
    failure = LinkDown(*LINK)
    events: list[tuple[int, str]] = []  # (CLOCK_MONOTONIC ns, what) for the timeline
    try:
        time.sleep(max(0.0, start + fail_at - time.monotonic()))
        cut_at = time.monotonic()
        events.append((time.monotonic_ns(), "link cut"))
        lab.cut_link(*LINK)  # type: ignore[attr-defined]
        result = lab.fail(failure)
        reconciled_ns = time.monotonic_ns()
        events.append((reconciled_ns, "failure reconciled"))
        announced_ms = (time.monotonic() - cut_at) * 1e3
        check("cut + fail link", True, f"{LINK[0]} -- {LINK[1]} cut; controller reconciled {len(result.touched)} "
              f"switches {announced_ms:.0f} ms after the cut", touched=result.touched, announced_ms=round(announced_ms, 1))
        time.sleep(max(0.0, start + restore_at - time.monotonic()))
        events.append((time.monotonic_ns(), "link mended"))
        lab.mend_link(*LINK)  # type: ignore[attr-defined]
        back = lab.restore(failure)
        events.append((time.monotonic_ns(), "restored"))
        check("mend + restore", True, f"reconciled {len(back.touched)} switches in {back.seconds * 1e3:.0f} ms")
    except BaseException:
        run.kill()
        raise
    report = run.wait()
    timeline.update(delivered_timeline(report, run.started_ns, events))
    plane0, plane1 = [], []
    for r in report.received.values():
        for q in r.qps:
            (plane1 if set(q.per_plane) == {1} else plane0).append(q)
    lost1 = sum(q.lost for q in plane1)
    check("plane 1 QPs", lost1 == 0 and bool(plane1), f"{len(plane1)} QPs, {lost1} packets lost", lost=lost1)
    hit = [q for q in plane0 if q.lost]
    windows = [q.loss_window_ms for q in hit if q.loss_window_ms is not None]
    open_gaps = never_recovered(report, reconciled_ns)
    lost0 = sum(q.lost for q in plane0)
    window = f"loss window max {max(windows):.1f} ms" if windows else "no loss window"
    check("plane 0 QPs recover", not open_gaps and bool(plane0),
          f"{len(plane0)} QPs, {len(hit)} crossed the cut and lost {lost0} packets; {window}; "
          f"{len(open_gaps)} never recovered" + (" (first: {} -> {} QP {})".format(*open_gaps[0]) if open_gaps else ""),
          loss_window_ms=max(windows) if windows else 0.0,
          loss_window_median_ms=round(statistics.median(windows), 1) if windows else 0.0, lost=lost0)
    outcomes = lab.install(dry_run=True, push="never")
    in_sync = [n for n, o in outcomes.items() if o.ok and not o.delta]
    check("plan after restore", len(in_sync) == len(outcomes),
          f"{len(in_sync)}/{len(outcomes)} switches hold their plan (read back)")
    _all_pairs(lab, check, "after")
