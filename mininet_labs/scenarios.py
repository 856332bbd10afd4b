"""Failure scenarios on a running lab, measured from the receivers' clocks.

    result = link_failure(lab, "p0-t0-0", "p0-t1-1")     # a T0-T1 link, mid-traffic
    result = switch_failure(lab, "p0-t1-1")               # every link of a T1
    result = cross_plane(lab, "h0", plane=0)              # a host's NIC in one plane
    print(json.dumps(result.to_json(), indent=1))

Each runs steady paced RoCEv2 traffic (every QP on one plane, `plane_mode="qp"`), and while it
flows takes the interfaces down, then tells the controller the way `fabricctl fail` does
(`Lab.fail`: record the failure, reconcile the switches it touches), later brings them back up
and restores. QPs are pinned evenly over the spines (`routes.Pin`), so which QPs crossed the
failed link is known, not guessed: the result lists, per QP, whether its path used the failure,
what it lost and its loss window (receiver time from the last packet before a gap to the first
after it; `traffic.Gap`). It also reads back over P4Runtime that the failed segments left the
tables and came back, and that the failed uplink's counters grow again after the restore.

The cross-plane scenario takes a host's NIC into one plane down (the leaf port facing it): its
sender sees the carrier go and re-homes the QPs of that plane onto the others; senders towards it
are told (TrafficRun.tell_dead_planes) when the lab records the failure. Timings are for the
report; no test asserts them.
"""

from __future__ import annotations

import contextlib
import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from controller import planning
from controller.model import lookup
from controller.runtime import encoding
from controller.plan.entries import entity_key
from controller.runtime.fabric_client import FabricClient
from controller.model.failures import Failure, HostPortDown, LinkDown, SwitchDown
from controller.plan.fabricplan import plan as make_plan
from controller.routes import Options
from controller.plan.p4names import EECMP, QP
from controller.plan.options import Pin
from mininet_labs.faults import Schedule
from mininet_labs.lab import Lab, LabError
from mininet_labs.trafficrun import TrafficReport, TrafficRun

PATH_PACKETS = "IngressPipe.headend.path_packets"
MEMBER_PACKETS = "IngressPipe.ecmp.member_packets"
PORT_TX = "FabricEgress.port_tx"
PORT_RX = "IngressPipe.port_rx"


# --- results ----------------------------------------------------------------------------------

@dataclass
class Event:
    """Something the scenario did, at t_ms after the senders started; `seconds` it took."""

    what: str
    t_ms: float
    seconds: float = 0.0
    detail: dict[str, Any] = field(default_factory=dict)


@dataclass
class QpOutcome:
    """One QP of one sender to one destination: its plane, whether its path used the failure, and what it lost."""

    sender: str
    dst: str
    qp: int
    plane: int  # the plane it was sent on first
    on_failure: bool  # its path used the failed link/switch/NIC
    expected: int
    received: int
    lost: int
    duplicated: int
    loss_window_ms: float | None
    per_plane: dict[int, int]
    # each run of lost packets: (the receiver's time of the packet before it, of the one after it, ms from the
    # traffic's start (None: at the start or end), packets lost), to set a loss against the events
    gaps: list[tuple[float | None, float | None, int]] = field(default_factory=list)

    def lost_during(self, spans: Sequence[tuple[float, float]]) -> int:
        """Packets lost in runs that reach into any of `spans` (ms from the traffic's start): a run between two
        deliveries overlaps a span when it begins before the span ends and ends after it begins."""
        return sum(n for a, b, n in self.gaps
                   if any((a is None or a < end) and (b is None or b > start) for start, end in spans))


@dataclass
class ScenarioResult:
    """What a failure scenario did and measured (to_json for the whole of it)."""

    kind: str  # link | switch | cross-plane
    failure: str
    program: str
    mode: str
    rate_pps: float  # per sender
    qps_per_pair: int
    pairs: list[tuple[str, str]]
    events: list[Event]
    qps: list[QpOutcome]
    tables: dict[str, Any]  # the failed segments per switch: how many, and how many present after fail / restore
    uplink: dict[str, Any]  # counters of the failed link (or switch) before, during and after the failure
    timeline: dict[str, Any]  # {"bin_ms", "t0_ns", "planes": {plane: [packets per bin]}}
    report: dict[str, Any]  # traffic totals and problems
    notes: list[str] = field(default_factory=list)

    @property
    def affected(self) -> list[QpOutcome]:
        return [q for q in self.qps if q.on_failure]

    @property
    def unaffected(self) -> list[QpOutcome]:
        return [q for q in self.qps if not q.on_failure]

    def loss_windows(self) -> list[float]:
        return [q.loss_window_ms for q in self.affected if q.loss_window_ms is not None]

    def summary(self) -> dict[str, Any]:
        windows = self.loss_windows()
        interval = 1000.0 * len(self.pairs_of_sender()) * self.qps_per_pair / self.rate_pps if self.rate_pps else None
        return {
            "qps_on_failure": len(self.affected), "qps_elsewhere": len(self.unaffected),
            "lost_on_failure": sum(q.lost for q in self.affected),
            "lost_elsewhere": sum(q.lost for q in self.unaffected),
            "duplicated": sum(q.duplicated for q in self.qps),
            "loss_window_ms": {"median": round(statistics.median(windows), 2) if windows else None,
                               "max": round(max(windows), 2) if windows else None, "qps_with_gap": len(windows)},
            "qp_packet_interval_ms": round(interval, 2) if interval else None,
            "took_s": {e.what: e.seconds for e in self.events if e.seconds},
            "tables_ok": self.tables.get("ok"), "uplink_recovered": self.uplink.get("recovered"),
        }

    def pairs_of_sender(self) -> list[str]:
        """The destinations of the busiest sender (for the per-QP packet interval)."""
        per: dict[str, list[str]] = {}
        for a, b in self.pairs:
            per.setdefault(a, []).append(b)
        return max(per.values(), key=len) if per else []

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "failure": self.failure, "program": self.program, "mode": self.mode,
                "rate_pps_per_sender": self.rate_pps, "qps_per_pair": self.qps_per_pair,
                "pairs": [list(p) for p in self.pairs], "summary": self.summary(),
                "events": [asdict(e) for e in self.events], "tables": self.tables, "uplink": self.uplink,
                "qps": [asdict(q) for q in self.qps], "report": self.report, "timeline": self.timeline,
                "notes": self.notes}


# --- pieces -------------------------------------------------------------------------------------

def opposite_pairs(lab: Lab) -> list[tuple[str, str]]:
    """Every host to the host half the list away and back (default lab: h0<->h2, h1<->h3): all cross-leaf."""
    hosts = lab.hosts
    half = len(hosts) // 2
    if half == 0:
        raise LabError("a failure scenario needs at least two hosts")
    return [(hosts[i], hosts[(i + half) % len(hosts)]) for i in range(len(hosts))]


def even_pins(lab: Lab, pairs: Sequence[tuple[str, str]], qps: int, qp_base: int = 0x100) -> tuple[Pin, ...]:
    """Pins spreading each pair's QPs evenly over the spines of each plane: with plane_mode 'qp', QP k
    is on plane k % P and takes spine (k // P) % S, so every plane's QPs cover all its spines."""
    model, out = lab.model, set()
    for a, b in pairs:
        for src_nic, dst_nic in zip(lab.host(a).nics, lab.host(b).nics):
            p = src_nic.plane
            src, dst = model.switch(src_nic.leaf), model.switch(dst_nic.leaf)
            if src.index == dst.index:
                continue
            n_spines = len(model.t1s(p))
            for k in range(qps):
                if k % model.planes == p:
                    out.add(Pin(p, src.index, dst.index, dst_nic.slot, qp_base + k, (k // model.planes) % n_spines))
    return tuple(sorted(out))


def qp_path(lab: Lab, sender: str, dst: str, k: int, plane: int, pins: dict[tuple[int, int, int, int, int], int]
            ) -> tuple[int, int, int | None]:
    """(source leaf index, destination leaf index, pinned spine or None) of QP k of a pair in a plane."""
    s, d = lab.host(sender).nic(plane), lab.host(dst).nic(plane)
    si, di = lab.model.switch(s.leaf).index, lab.model.switch(d.leaf).index
    return si, di, pins.get((plane, si, di, d.slot, k))


def failed_segments(lab: Lab, failures: Sequence[Failure]) -> dict[str, list[Any]]:
    """Per switch the failure touches, the canonical entities of the healthy plan that the failure plan
    deletes or changes: what the controller must pull out (and put back on restore)."""
    p4info = lab.p4info()
    change = planning.failure_change(lab.model, lab.program, (), failures, lab.options)  # type: ignore[arg-type]
    healthy = planning.fabric(lab.model, lab.program, (), lab.options)  # type: ignore[arg-type]
    names = change.touched
    want = encoding.encode(make_plan(healthy), names, p4info, "")
    failed = encoding.encode(make_plan(change.fabric), names, p4info, "")
    out: dict[str, list[Any]] = {}
    for n in names:
        after = {entity_key(e): e for e in failed.desired[n]}
        out[n] = [e for e in want.desired[n] if after.get(entity_key(e)) != e]
    return out


def segments_present(lab: Lab, segments: dict[str, list[Any]], reader: FabricClient | None = None) -> dict[str, int]:
    """How many of each switch's segments it holds now, exactly as the healthy plan has them (read over
    P4Runtime, through `reader` (Lab.reader) if given, else a session opened for this read)."""
    if not segments:
        return {}
    with _reading(lab, reader) as client:
        result = client.run(lambda c: set(c.read_all()), list(segments))
    if not result.ok:
        raise LabError(f"reading the switches failed: {result.summary()}")
    return {n: sum(1 for e in segs if e in result.results[n]) for n, segs in segments.items()}


def uplink_cells(lab: Lab, failure: Failure) -> list[tuple[str, str, int]]:
    """(switch, counter, index) cells that count traffic onto the failed link(s): the leaf's path (srv6)
    or member (eecmp) counter of that spine and its uplink port_tx."""
    model = lab.model
    counter = MEMBER_PACKETS if lab.program == EECMP else PATH_PACKETS
    if isinstance(failure, LinkDown):
        links = [(model.switch(failure.t0), model.switch(failure.t1))]
    elif isinstance(failure, SwitchDown) and model.switch(failure.name).role == "t1":
        spine = model.switch(failure.name)
        links = [(leaf, spine) for leaf in model.t0s(spine.plane)]
    elif isinstance(failure, HostPortDown):
        return [(failure.t0, PORT_RX, failure.port), (failure.t0, PORT_TX, failure.port)]
    else:
        return []
    cells = []
    for leaf, spine in links:
        cells += [(leaf.name, counter, spine.index), (leaf.name, PORT_TX, leaf.uplinks[spine.index])]
    return cells


def read_cells(lab: Lab, cells: Sequence[tuple[str, str, int]], reader: FabricClient | None = None) -> dict[str, int]:
    """Packets of each (switch, counter, index) cell, keyed 'switch counter[index]' (through `reader` if given)."""
    names = sorted({c[0] for c in cells})
    if not names:
        return {}

    def one(conn: Any) -> dict[str, int]:
        return {f"{conn.name} {c}[{i}]": conn.read_counter(c, i)[0].packets for s, c, i in cells if s == conn.name}

    with _reading(lab, reader) as client:
        result = client.run(one, names)
    if not result.ok:
        raise LabError(f"reading counters failed: {result.summary()}")
    return {k: v for r in result.results.values() for k, v in r.items()}


@contextlib.contextmanager
def _reading(lab: Lab, reader: FabricClient | None) -> Iterator[FabricClient]:
    """The reader given (left open), else a session of the lab's closed after the read."""
    if reader is not None:
        yield reader
        return
    with lab.client() as client:
        yield client


def merge_timelines(report: TrafficReport, t0_ns: int) -> dict[str, Any]:
    """The receivers' per-plane bins as lists of packets per bin from t0_ns (the senders' start)."""
    bin_ms = next((r.timeline["bin_ms"] for r in report.received.values() if r.timeline), 0)
    if not bin_ms:
        return {}
    bin_ns = int(bin_ms * 1e6)
    first = t0_ns // bin_ns
    planes: dict[int, dict[int, int]] = {}
    for r in report.received.values():
        for p, bins in (r.timeline or {}).get("planes", {}).items():
            acc = planes.setdefault(int(p), {})
            for b, n in bins.items():
                acc[int(b) - first] = acc.get(int(b) - first, 0) + n
    last = max((b for acc in planes.values() for b in acc), default=-1)
    return {"bin_ms": bin_ms, "t0_ns": t0_ns,
            "planes": {p: [acc.get(b, 0) for b in range(max(0, last + 1))] for p, acc in sorted(planes.items())}}


def _at(run: TrafficRun, seconds: float) -> None:
    """Sleep until `seconds` after the senders started."""
    left = run.started_ns / 1e9 + seconds - time.monotonic_ns() / 1e9
    if left > 0:
        time.sleep(left)


def _ms(run: TrafficRun, t_ns: int | None = None) -> float:
    return round(((t_ns or time.monotonic_ns()) - run.started_ns) / 1e6, 2)


# --- the scenarios ------------------------------------------------------------------------------

def _prepare(lab: Lab, pinned: bool, pairs: Sequence[tuple[str, str]], qps: int) -> tuple[Options | None, tuple[Pin, ...]]:
    if lab.failures():
        raise LabError("the lab has recorded failures ('fabricctl restore all' first): a scenario starts healthy")
    before = lab.options
    if not pinned:
        return before, ()
    pins = even_pins(lab, pairs, qps)
    lab.options = Options(mode=QP, pins=pins)
    try:
        bad = [o for o in lab.install().values() if not o.ok]
        if bad:
            raise LabError(f"installing the pins failed: {bad[0].error}")
    except BaseException:
        _finish(lab, before, pinned)  # the lab's own options and plan back, as after a run
        raise
    return before, pins


def _finish(lab: Lab, before: Options | None, pinned: bool) -> None:
    lab.options = before
    if pinned:
        lab.install()


def run_failure(lab: Lab, kind: str, failure: Failure, down: Callable[[], list[str]], up: Callable[[], list[str]], *,
                pairs: Sequence[tuple[str, str]] | None = None, schedule: Schedule | None = None, pinned: bool = True,
                on_failure: Callable[[str, str, int, int, int, int, int | None], bool] | None = None,
                rehome: bool = False, tell: Sequence[str] = (), tell_plane: int | None = None,
                controller: Any = None) -> ScenarioResult:
    """The common course of a scenario: traffic, interfaces down then Lab.fail, interfaces up then
    Lab.restore, while reading the tables and counters. `on_failure(sender, dst, k, plane, src leaf,
    dst leaf, pinned spine)` says whether a QP's path used the failure. `tell` names senders told to
    leave `tell_plane` when the failure is recorded (and told to come back on restore).
    `controller`: who records and applies the failure, with `fail(f)` and `restore(f)` returning a
    FailoverResult; default the lab itself (the failure announced). Another (e.g. a watcher of a
    running `fabricctl run` that nobody tells) leaves installing the pins to the caller."""
    sch = schedule or Schedule()
    return _course(lab, kind, failure, down, up, pairs, sch, pinned, on_failure, rehome, tell, tell_plane,
                   controller or lab, install=controller is None)


def _course(lab: Lab, kind: str, failure: Failure, down: Callable[[], list[str]], up: Callable[[], list[str]],
            pairs: Sequence[tuple[str, str]] | None, sch: Schedule, pinned: bool,
            on_failure: Callable[[str, str, int, int, int, int, int | None], bool] | None, rehome: bool,
            tell: Sequence[str], tell_plane: int | None, controller: Any, install: bool = True) -> ScenarioResult:
    """run_failure's course; `controller.fail/restore` record and apply the failure (the lab itself,
    or a watcher of a running controller's record); `install`: set up and take down the pins here."""
    pairs = list(pairs) if pairs is not None else opposite_pairs(lab)
    dests: dict[str, int] = {}
    for a, _ in pairs:
        dests[a] = dests.get(a, 0) + 1
    messages = max(sch.qps, int(sch.seconds * sch.rate / max(dests.values())) // sch.qps * sch.qps)
    before, pins = _prepare(lab, pinned, pairs, sch.qps) if install else (lab.options, even_pins(lab, pairs, sch.qps))
    # One read-only session for every read of the run: a new session and pipeline check per read take
    # 0.5-2 s on a 2-core lab under traffic, which pushed the repair towards the end of the traffic.
    reader = None
    try:
        reader = lab.reader()
        segments = failed_segments(lab, [failure])
        cells = uplink_cells(lab, failure)
        counts = {"before": read_cells(lab, cells, reader)}
        run = lab.start_traffic(pairs, qps=sch.qps, messages=messages, plane_mode="qp", rate=sch.rate,
                                rehome=rehome, timeline_ms=sch.timeline_ms, start_delay=sch.start_delay,
                                timeout=sch.seconds * 3 + 30)
        events: list[Event] = []
        tables: dict[str, Any] = {"segments": {n: len(s) for n, s in segments.items()}}
        try:
            _at(run, sch.fault_at)
            counts["at_fail"] = read_cells(lab, cells, reader)
            t = time.monotonic_ns()
            intfs = down()
            events.append(Event(f"{kind} down ({len(intfs)} interfaces)", _ms(run, t),
                                round((time.monotonic_ns() - t) / 1e9, 4), {"intfs": intfs}))
            t = time.monotonic_ns()
            result = controller.fail(failure)
            for s in tell:
                run.tell_dead_planes(s, [tell_plane] if tell_plane is not None else [])
            events.append(Event("controller: fail recorded and reconciled", _ms(run, t), result.seconds,
                                result.to_json()))
            tables["present_after_fail"] = segments_present(lab, segments, reader)
            counts["after_fail"] = read_cells(lab, cells, reader)
            _at(run, sch.repair_at)
            counts["at_restore"] = read_cells(lab, cells, reader)
            t = time.monotonic_ns()
            up()
            events.append(Event(f"{kind} up", _ms(run, t)))
            t = time.monotonic_ns()
            result = controller.restore(failure)
            for s in tell:
                run.tell_dead_planes(s, [])
            events.append(Event("controller: restore recorded and reconciled", _ms(run, t), result.seconds,
                                result.to_json()))
            tables["present_after_restore"] = segments_present(lab, segments, reader)
            report = run.wait()
            counts["end"] = read_cells(lab, cells, reader)
        except BaseException:
            run.kill()
            up()
            if install and lab.failures():
                lab.restore()
            raise
    finally:
        if reader is not None:
            reader.close_all()
        if install:
            _finish(lab, before, pinned)
    tables["ok"] = (all(v == 0 for v in tables["present_after_fail"].values())
                    and tables["present_after_restore"] == tables["segments"])
    pin_map = {(p.plane, p.src, p.dst, p.slot, p.qp - 0x100): p.spine for p in pins}
    qps = []
    for dst, r in report.received.items():
        for q in r.qps:
            k = q.qp - 0x100
            plane = k % lab.model.planes
            si, di, spine = qp_path(lab, q.sender, dst, k, plane, pin_map)
            hit = on_failure(q.sender, dst, k, plane, si, di, spine) if on_failure else q.lost > 0
            gaps = [(_ms(run, g.last_before_ns) if g.last_before_ns else None,
                     _ms(run, g.first_after_ns) if g.first_after_ns else None, g.missing) for g in q.gaps]
            qps.append(QpOutcome(q.sender, dst, q.qp, plane, hit, q.expected, q.received, q.lost, q.duplicated,
                                 q.loss_window_ms, dict(q.per_plane), gaps))
    qps.sort(key=lambda q: (q.sender, q.dst, q.qp))
    during = {k: counts["at_restore"][k] - counts["after_fail"][k] for k in counts["before"]}
    after = {k: counts["end"][k] - counts["at_restore"][k] for k in counts["before"]}
    healthy = {k: counts["at_fail"][k] - counts["before"][k] for k in counts["before"]}
    uplink = {"cells": list(counts["before"]), "healthy_phase": healthy, "failed_phase": during,
              "after_restore": after, "recovered": bool(after) and all(v > 0 for v in after.values())}
    notes = []
    if on_failure is None:
        notes.append("QPs are hashed, not pinned: a QP counts as on the failure when it lost packets")
    return ScenarioResult(kind, lookup.describe_failure(lab.model, failure), lab.program,
                          "pinned (QP hash behind the pins)" if pinned else "hash", sch.rate, sch.qps, list(pairs),
                          events, qps, tables, uplink, merge_timelines(report, run.started_ns),
                          {"seconds": report.seconds, "totals": report.totals(), "problems": report.problems()}, notes)


def link_failure(lab: Lab, t0: str, t1: str, **kwargs: Any) -> ScenarioResult:
    """A T0-T1 link down mid-traffic, then restored (see run_failure for the keywords)."""
    f = lookup.link(lab.model, t0, t1)
    leaf, spine = lab.model.switch(f.t0), lab.model.switch(f.t1)

    def on(sender: str, dst: str, k: int, plane: int, si: int, di: int, pinned: int | None) -> bool:
        return plane == leaf.plane and si != di and leaf.index in (si, di) and pinned == spine.index

    return run_failure(lab, "link", f, lambda: lab.cut_link(f.t0, f.t1), lambda: lab.mend_link(f.t0, f.t1),
                       on_failure=on, **kwargs)


def switch_failure(lab: Lab, name: str, **kwargs: Any) -> ScenarioResult:
    """Every link of a T1 down mid-traffic (fabricctl fail switch), then restored."""
    f = lookup.switch_failure(lab.model, name)
    spine = lab.model.switch(f.name)
    if spine.role != "t1":
        raise LabError(f"{name} is a t0: the switch scenario fails a t1 (a t0 takes its hosts with it)")

    def on(sender: str, dst: str, k: int, plane: int, si: int, di: int, pinned: int | None) -> bool:
        return plane == spine.plane and si != di and pinned == spine.index

    return run_failure(lab, "switch", f, lambda: lab.cut_switch(f.name), lambda: lab.mend_switch(f.name), on_failure=on,
                       **kwargs)


def cross_plane(lab: Lab, host: str, plane: int = 0, **kwargs: Any) -> ScenarioResult:
    """A host's NIC into one plane goes down mid-traffic: its sender re-homes that plane's QPs onto the
    other planes when it sees the carrier go; senders towards it are told when the lab records the
    failure (fabricctl fail port). Then the NIC comes back and the QPs return."""
    nic = lab.host(host).nic(plane)
    if lab.model.planes < 2:
        raise LabError("cross-plane failover needs at least two planes")
    f = HostPortDown(nic.leaf, lab.model.switch(nic.leaf).host_ports[nic.slot])
    pairs = kwargs.pop("pairs", None) or opposite_pairs(lab)
    tell = sorted({a for a, b in pairs if b == host})

    def on(sender: str, dst: str, k: int, p: int, si: int, di: int, pinned: int | None) -> bool:
        return p == plane and host in (sender, dst)

    kwargs.setdefault("pinned", False)
    return run_failure(lab, "cross-plane", f, lambda: [lab.nic_down(host, plane)],
                       lambda: [lab.nic_up(host, plane)], pairs=pairs, on_failure=on,
                       rehome=True, tell=tell, tell_plane=plane, **kwargs)


def describe(result: ScenarioResult) -> list[str]:
    """Lines for a terminal."""
    s = result.summary()
    lw = s["loss_window_ms"]
    out = [f"{result.kind} scenario: {result.failure} ({result.program}, {result.mode}, "
           f"{result.rate_pps:.0f} packets/s per sender, {result.qps_per_pair} QPs per pair, "
           f"a QP's packets every {s['qp_packet_interval_ms']} ms)"]
    for e in result.events:
        took = f" in {e.seconds * 1000:.0f} ms" if e.seconds else ""
        out.append(f"  {e.t_ms:8.1f} ms  {e.what}{took}")
    out.append(f"  QPs whose path used the failure: {s['qps_on_failure']}, lost {s['lost_on_failure']} packets; "
               f"loss window median {lw['median']} ms, max {lw['max']} ms ({lw['qps_with_gap']} QPs with a gap)")
    out.append(f"  other QPs: {s['qps_elsewhere']}, lost {s['lost_elsewhere']}")
    t = result.tables
    out.append(f"  tables: failed segments {t['segments']}; present after fail {t['present_after_fail']}, "
               f"after restore {t['present_after_restore']} -> {'ok' if t['ok'] else 'NOT OK'}")
    if result.uplink.get("cells"):
        out.append(f"  failed uplink counters: healthy {_short(result.uplink['healthy_phase'])}, failed "
                   f"{_short(result.uplink['failed_phase'])}, after restore {_short(result.uplink['after_restore'])}"
                   f" -> {'carrying traffic again' if result.uplink['recovered'] else 'NOT carrying traffic'}")
    for q in result.qps:
        if q.lost or q.on_failure:
            out.append(f"    {q.sender} -> {q.dst} qp {q.qp:#x} plane {q.plane}{' (on failure)' if q.on_failure else ''}: "
                       f"{q.received}/{q.expected}, lost {q.lost}, window {q.loss_window_ms} ms, per plane {q.per_plane}"
                       + (f", lost between (ms) {_spans(q.gaps)}" if q.gaps else ""))
    out += [f"  note: {n}" for n in result.notes]
    return out


def _spans(gaps: list[tuple[float | None, float | None, int]]) -> str:
    return ", ".join(f"{'start' if a is None else f'{a:.1f}'}-{'end' if b is None else f'{b:.1f}'} ({n})"
                     for a, b, n in gaps)


def _short(d: dict[str, int]) -> str:
    return ", ".join(f"{k.split(' ', 1)[0]} {k.rsplit('.', 1)[-1]} {v}" for k, v in d.items())


__all__ = ["Event", "QpOutcome", "ScenarioResult", "link_failure", "switch_failure", "cross_plane",
           "run_failure", "even_pins", "opposite_pairs", "failed_segments", "segments_present", "describe"]
