"""Active probes over any switch's probe transport (controller.southbound.base.SwitchHandle: packet-out and
packet-in on P4Runtime, UDP between link-local addresses on the kernel): out of one end of each fabric link, read at
the other, per direction; and per host NIC (where the switch can), a Neighbor Solicitation out of its T0 port whose
Neighbor Advertisement comes back."""

from __future__ import annotations

import threading
import time
from collections import deque
from concurrent.futures import Future, wait
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from controller.model.failures import Failure
from controller.plan.probes import PROBE_SLOTS, advertised_target, parse_probe
from controller.southbound.base import HostAnswer, ProbeError, ProbeIn
from controller.service.detect import (TRICKLE_TIMEOUTS, Change, Detector, Evidence, Thresholds, counter_deltas,
                                      force_down, port_evidence, step, trickles)
from controller.service.directions import Direction, directions
from controller.service.liveness import Signals, SwitchHealth, judge as judge_switch
from controller.service.probetimer import ProbeTimer
from controller.model.topology import Topology
from controller.service.switchcalls import NO_ANSWER, CallLate, SwitchCalls, SwitchSilent


@dataclass
class DirectionState:
    """The detector of one direction with its outstanding probes and last results."""

    d: Direction
    detector: Detector = field(default_factory=Detector)
    seq: int = 0
    outstanding: deque = field(default_factory=deque)  # (seq, sent_ns), oldest first
    received: dict[int, int] = field(default_factory=dict)  # seq -> delay ns
    sent: int = 0
    lost: int = 0
    last_delay_ms: float | None = None
    last_probe_t: float | None = None  # wall time of the last outcome
    counts: tuple[int, int] | None = None  # (source port tx, far port rx) read at the current run of losses' first
    counts_ns: int = 0  # when they were read
    vetoed: int = 0  # losses not fed to the detector: the port counters showed the link carrying packets
    evidence: str = ""  # what the port counters said at the last decision
    gray_counts: tuple[int, int] | None = None  # (tx, rx) read when a gray ratio last wanted the link down
    gray_counts_ns: int = 0
    trickle_counts: tuple[int, int] | None = None  # (tx, rx) read when this run of losses was first held back alive
    trickle_counts_ns: int = 0
    armed: bool = False  # a probe arrived (or the transport's grace passed): losses count from then
    first_sent_ns: int | None = None
    unarmed: int = 0  # lost before the direction was armed: not judged
    arm_grace_ns: int = 0  # the transport's (kernel: link-local addresses tentative for a while in a new lab)
    unreadable: bool = False  # its port counters could not be read last time: no loss judged by them alone (_due)


GRAY_SPAN_NS = 1_000_000_000  # the port counters judge a gray ratio over at least this long
LATE_BOUND_PERIODS = 4  # the send loop this many periods (or a probe timeout) late: the controller itself stalled

LATE = "late"  # the port counters were asked for and have not come back yet: ask again at the next loss
COUNTS_GRACE = 0.02  # seconds the prober waits for a counter read it just asked for (a quiet switch: ~3 ms)

# (source switch, source port, far switch, far port) -> (tx, rx) packet counts, None if unreadable, or LATE
PortCounts = Callable[[Direction], "tuple[int, int] | None | str"]

# (switch, change, why) for each switch the liveness rule records failed or back; on the prober's thread.
OnSwitch = Callable[[str, Change, str], None]

# (what: "probe_send" | "probe_read", switch, error) when a switch's probe I/O fails, once per change of its error.
OnIoError = Callable[[str, str, str], None]


def is_stall(lossy: int, total: int, *, fraction: float, loop_late_ns: int, late_bound_ns: int,
             answered_later: bool) -> bool:
    """Whether a round in which `lossy` of `total` directions lost a probe is the controller's own stall, judged by
    evidence a stall would also stop: its send loop (its own clock) ran late past `late_bound_ns` while the lost
    probes were out, or no probe sent after them came back anywhere (`answered_later`: the other plane's, the
    other switches'). Only a round where at least `fraction` of at least 8 directions lose is a candidate: a whole
    plane going dark (its spines blackholed, carrier up) is that shape, and it is the fabric's failure while the
    loop keeps time and the other plane's probes still arrive."""
    if total < 8 or lossy < fraction * total:
        return False
    return loop_late_ns > late_bound_ns or not answered_later


# (direction state, change) for each detector change; called on the prober's thread.
OnChange = Callable[[DirectionState, Change], None]


class Prober:
    """Sends a probe per direction every `period` on sessions that are ready, then drains the
    packet-ins, declares a probe lost when it has not arrived within the current timeout (at least
    `timeout`; raised by the delays probes take now, see probetimer.py) while probes sent after it
    went through both its switches (or `hard_timeout` after it left while probes sent after it
    arrived somewhere: a switch that went silent), and feeds the detectors. One thread does it
    all, so the detectors see outcomes in order; arrival times come from the streams' readers."""

    def __init__(self, topo: Topology, sessions: Mapping[str, object], thresholds: Thresholds, *,
                 period: float = 0.01, timeout: float = 0.1, on_change: OnChange,
                 on_outcome: Callable[[DirectionState, bool, float | None], None] | None = None,
                 on_stall: Callable[[int, int], None] | None = None, stall_fraction: float = 0.5,
                 port_counts: PortCounts | None = None, evidence: bool = True, hosts: bool = False,
                 host_every: int = 1, calls: SwitchCalls | None = None, on_switch: OnSwitch | None = None,
                 on_io_error: OnIoError | None = None) -> None:
        self.sessions = sessions
        self.thresholds = thresholds
        self.period = period
        self.timeout_ns = int(timeout * 1e9)  # the floor
        self.hard_timeout_ns = max(int(1e9), 10 * self.timeout_ns)
        self.timer = ProbeTimer(self.timeout_ns, self.hard_timeout_ns)
        self._progress = 0  # latest send time of any probe that arrived
        self._timeout_now = self.timeout_ns
        self._sent_progress: dict[str, int] = {}  # switch -> latest send time of its probes that arrived
        self._recv_progress: dict[str, int] = {}  # switch -> latest send time of probes that arrived there
        self.on_change = on_change
        self.on_outcome = on_outcome
        self.on_stall = on_stall
        self.stall_fraction = stall_fraction
        self.evidence = evidence
        self.host_every = max(1, host_every)  # host NICs are probed every this many periods
        self._round = 0
        self.calls = calls  # every call to a switch goes through it (deadline, off this thread) when set
        self.on_switch = on_switch
        self.health = {name: SwitchHealth() for name in sessions}
        self._pending: dict[Direction, tuple[Future, Future]] = {}  # counter reads asked for, per direction
        self.port_counts: PortCounts = port_counts or self._read_port_counts
        self.stalls = 0
        self.late = 0  # probes that arrived after they were judged lost
        self.on_io_error = on_io_error
        self.io_errors = {"probe_send": 0, "probe_read": 0}  # probes not sent, reads of arrivals that failed
        self._io_said: dict[tuple[str, str], str] = {}  # (what, switch) -> the error said last
        self._loop_late: deque[tuple[int, int]] = deque(maxlen=512)  # (round start ns, how late it started)
        # host NICs only behind switches whose transport can probe them; each direction armed by its transport
        self.states = [DirectionState(d, arm_grace_ns=max(self._grace(d.src), self._grace(d.dst)))
                       for d in directions(topo, hosts) if not d.host or getattr(sessions.get(d.src), "host_probes", True)]
        self._by_key = {(s.d.link_id, s.d.direction): s for s in self.states if not s.d.host}
        self._by_port = {(s.d.dst, s.d.dst_port): s for s in self.states if s.d.host}
        self._lock = threading.Lock()
        self._judging = threading.Lock()  # detectors change under it: the prober's rounds, carrier events
        self.carrier_downs = 0  # links (or host ports) failed by a carrier loss, not by probes
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.packets_out = 0
        self.packets_in = 0

    def _grace(self, name: str) -> int:
        return int(getattr(self.sessions.get(name), "arm_grace_ns", 0))

    def _io_error(self, what: str, name: str, error: str | None) -> None:
        """Count a failed probe send or read (error None: it works again); say each change of a switch's error once."""
        key = (what, name)
        if error is None:
            if self._io_said.pop(key, None) is not None and self.on_io_error is not None:
                self.on_io_error(what, name, "")
            return
        self.io_errors[what] += 1
        if self._io_said.get(key) != error:
            self._io_said[key] = error
            if self.on_io_error is not None:
                self.on_io_error(what, name, error)

    def start(self) -> None:
        self._threads = [threading.Thread(target=self._send_loop, name="prober", daemon=True)]
        for t in self._threads:
            t.start()

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(timeout=5)

    def seed_down(self, links: set[Failure]) -> None:
        """Start these links' (or host ports') detectors down: the failures the detector recorded
        before (the runner passes only those, not an operator's); they are restored, and their record
        removed, once their probes come back M times in a row."""
        for s in self.states:
            if s.d.link in links:
                s.detector = Detector(up=False, reason="recorded failed when the controller started")

    def seed_switches_down(self, names: set[str]) -> None:
        """Start these switches recorded failed by the liveness rule (the detector's SwitchDown records):
        restored once they answer and their probes arrive."""
        for name in names:
            if name in self.health:
                self.health[name] = SwitchHealth(up=False, since_ns=time.monotonic_ns(),
                                                 reason="recorded failed when the controller started")

    def switches_down(self) -> set[str]:
        return {n for n, h in self.health.items() if not h.up}

    def link_down(self, link: Failure) -> bool:
        """True while either direction's detector holds the link (or host port) down."""
        return any(not s.detector.up for s in self.states if s.d.link == link)

    # --- sending and judging ---------------------------------------------------------------
    def _send_loop(self) -> None:
        next_t = time.monotonic()
        while not self._stop.is_set():
            now_ns = time.monotonic_ns()
            self._loop_late.append((now_ns, max(0, now_ns - int(next_t * 1e9))))
            self._round += 1
            failed: set[str] = set()
            for s in self.states:
                if s.d.host and self._round % self.host_every:
                    continue
                session = self.sessions[s.d.src]
                if not session.ready or not self.sessions[s.d.dst].ready:  # type: ignore[attr-defined]
                    continue  # a probe needs both ends: the plan's punt entry at the far end, its packet-in
                s.seq += 1
                try:
                    session.send_probe(s.d.src_port, s.d.link_id, s.d.direction, s.seq, now_ns,  # type: ignore[attr-defined]
                                       s.d.target)
                except ProbeError as e:  # not sent, not judged (carrier speaks for a port that cannot send)
                    self._io_error("probe_send", s.d.src, str(e))
                    failed.add(s.d.src)
                    continue
                with self._lock:
                    s.outstanding.append((s.seq, now_ns))
                    if s.first_sent_ns is None:
                        s.first_sent_ns = now_ns
                s.sent += 1
                self.packets_out += 1
            for name in {st.d.src for st in self.states} - failed:
                if self._io_said:
                    self._io_error("probe_send", name, None)
            self._drain()
            self._judge(time.monotonic_ns())
            self._judge_switches(time.monotonic_ns())
            next_t += self.period
            delay = next_t - time.monotonic()
            if delay < -self.period:  # fell behind (CPU starved): skip, do not burst
                next_t = time.monotonic()
            elif delay > 0:
                self._stop.wait(delay)

    def _due(self, s: DirectionState, seq: int, sent_ns: int, now_ns: int) -> bool:
        """Whether a probe can be judged: it arrived, or it is `timeout` old and both its switches
        have since carried a probe sent after it (so it is not merely queued behind a busy switch
        or a late controller), or it is `hard_timeout` old (a switch that went silent). A source
        switch none of whose later probes arrived anywhere while the far switch received later
        ones has stopped forwarding (a T1 blackholed on every link, carrier up) or is behind:
        where the port counters can tell these apart, judged at `timeout` too, its loss counted
        only on the counters' word (`_by_counters_only`)."""
        if seq in s.received:
            return True
        if sent_ns + self._timeout_now > now_ns:
            return False
        if sent_ns + self.hard_timeout_ns <= now_ns:
            return self._progress > sent_ns  # nothing sent since arrived anywhere: we stalled, not the link
        if self._recv_progress.get(s.d.dst, 0) <= sent_ns:
            return False
        return self._sent_progress.get(s.d.src, 0) > sent_ns or self._counters_tell(s)

    def _counters_tell(self, s: DirectionState) -> bool:
        """Whether the port counters may judge `s`'s losses alone: port evidence on, a link (a host NIC's port
        counts two flows), counters both ends' transports keep and that were readable last time."""
        ends = (self.sessions.get(s.d.src), self.sessions.get(s.d.dst))
        return self.evidence and not s.d.host and not s.unreadable and all(getattr(e, "port_counters", True)
                                                                              for e in ends)

    def _by_counters_only(self, s: DirectionState, sent_ns: int, now_ns: int) -> bool:
        """A lost probe judged before the hard timeout though its source carried no later probe (`_due`): it counts
        only if the port counters say the link lost it, since the source may merely be behind (its egress then
        counts nothing, or the far port receives: the loss is held back)."""
        return sent_ns + self.hard_timeout_ns > now_ns and self._sent_progress.get(s.d.src, 0) <= sent_ns

    @property
    def timeout_ms(self) -> float:
        """The probe timeout in use now."""
        return self._timeout_now / 1e6

    def carrier(self, switch: str, port: int, up: bool, why: str = "") -> list[DirectionState]:
        """A port's carrier changed (port status from the switch side): lost, every direction through
        that port goes down at once, without waiting for K lost probes; back, nothing here (the probes
        restore it, M in a row). The directions it failed (their detectors' changes went to on_change)."""
        if up:
            return []
        failed = []
        with self._judging:
            for s in self.states:
                if (s.d.src, s.d.src_port) != (switch, port) and (s.d.dst, s.d.dst_port) != (switch, port):
                    continue
                if not s.detector.up:
                    continue
                s.detector = force_down(s.detector, self.thresholds, why or f"carrier lost on {switch}:{port}")
                s.counts = None
                self.carrier_downs += 1
                failed.append(s)
                self.on_change(s, Change.DOWN)
        return failed

    def _judge(self, now_ns: int) -> None:
        with self._judging:
            self._judge_locked(now_ns)

    def _judge_locked(self, now_ns: int) -> None:
        due: list[tuple[DirectionState, list[tuple[bool, float | None]]]] = []
        oldest_lost = now_ns
        down = self.switches_down() | self._silent()
        with self._lock:
            self._timeout_now = self.timer.timeout_ns(now_ns)
            for s in self.states:
                if s.d.src in down or s.d.dst in down:
                    # a switch that does not answer (or is recorded failed by the liveness rule) is the
                    # failure: its links' probes are not judged meanwhile
                    if any(seq not in s.received and sent + self._timeout_now <= now_ns for seq, sent in s.outstanding):
                        s.outstanding.clear()
                        s.received.clear()
                        s.counts = None
                    continue
                outcomes: list[tuple[bool, float | None, bool]] = []
                while s.outstanding and self._due(s, s.outstanding[0][0], s.outstanding[0][1], now_ns):
                    seq, sent_ns = s.outstanding.popleft()
                    delay = s.received.pop(seq, None)
                    if not s.armed:  # a far address still tentative (DAD) loses the first probes of a new lab
                        if delay is None and sent_ns - (s.first_sent_ns or sent_ns) < s.arm_grace_ns:
                            s.unarmed += 1
                            continue
                        s.armed = True
                    oldest_lost = min(oldest_lost, sent_ns) if delay is None else oldest_lost
                    outcomes.append((delay is not None, None if delay is None else delay / 1e6,
                                     delay is None and self._by_counters_only(s, sent_ns, now_ns)))
                if not s.outstanding:
                    s.received.clear()
                if outcomes:
                    due.append((s, outcomes))
        lossy = sum(1 for _, outcomes in due if not all(ok for ok, _, _ in outcomes))
        late = max((late for t, late in self._loop_late if t >= oldest_lost - self._timeout_now), default=0)
        if is_stall(lossy, len(self.states), fraction=self.stall_fraction, loop_late_ns=late,
                    late_bound_ns=max(LATE_BOUND_PERIODS * int(self.period * 1e9), self.timeout_ns),
                    answered_later=self._progress > oldest_lost):
            # the controller (or the machine) stalled, not the links: judge nothing this round
            self.stalls += 1
            if self.on_stall is not None:
                self.on_stall(lossy, len(self.states))
            return
        for s, outcomes in due:
            for ok, delay_ms, strict in outcomes:
                s.last_probe_t = time.time()
                if ok:
                    s.last_delay_ms = delay_ms
                    s.counts = s.trickle_counts = None  # a run of losses, if any, is over
                    self._pending.pop(s.d, None)  # and a counter read it asked for is no baseline for the next
                else:
                    s.lost += 1
                if self.on_outcome is not None:
                    self.on_outcome(s, ok, delay_ms)
                if not ok and s.detector.up and self.evidence and not self._counts_as_loss(s, now_ns, strict):
                    s.vetoed += 1
                    continue
                s.detector, change = step(s.detector, ok, self.thresholds)
                if change is not None:
                    s.counts = None
                    self.on_change(s, change)

    def _counts_as_loss(self, s: DirectionState, now_ns: int, strict: bool = False) -> bool:
        """Whether a lost probe goes to the detector. A loss that would fail the link needs the
        link's port counters to agree. K in a row: since the run of losses began, long enough ago
        for packets to cross (two periods, or what the timeout holds above its floor), packets left
        the source port and none reached the far port. If some arrived, the link carries packets
        (the probes are only late); if it is too soon, or none left (the source's egress is
        stalled), it is not known yet: either way the loss is held back and the next one asks again
        (a port that sends nothing for the hard timeout counts as dead). The gray ratio: see
        `_gray_on_the_wire`. No counters to read (a switch that does not answer): the probes decide,
        unless `strict` (the counters' word is all the loss has: `_by_counters_only`), then held back."""
        if s.counts is None:  # the first loss of a run: what the counters say now
            first = self.port_counts(s.d)
            if first == LATE:  # asked; held back until they answer (the next loss asks again)
                return False
            s.counts, s.counts_ns = first, now_ns  # type: ignore[assignment]
            s.unreadable = first is None
        if s.counts is None and strict:
            return False
        if s.detector.losses + 1 < self.thresholds.fail_after:
            _, change = step(s.detector, False, self.thresholds)
            return change is None or self._gray_on_the_wire(s, now_ns, strict)
        now = None if s.counts is None else self.port_counts(s.d)
        if now == LATE:
            return False
        if s.counts is None or now is None:
            s.unreadable = now is None
            return not strict
        # The counters were first read a timeout after the first lost probe left: what the timeout
        # holds above its floor (the fabric's current extra delay), or two periods, lets what left
        # the source port since then arrive.
        settle = max(2 * int(self.period * 1e9), self._timeout_now - self.timeout_ns)
        verdict = port_evidence(s.counts, now, now_ns - s.counts_ns, settle, self.hard_timeout_ns)
        dtx, drx = counter_deltas(s.counts, now)
        s.evidence = (f"{verdict.value}: {dtx} packets left {s.d.src}:{s.d.src_port}, {drx} arrived at "
                      f"{s.d.dst}:{s.d.dst_port} in {(now_ns - s.counts_ns) / 1e6:.0f} ms")
        if verdict is Evidence.ALIVE:
            s.counts, s.counts_ns = now, now_ns
            return self._trickle(s, now, now_ns)  # type: ignore[arg-type]
        return verdict is Evidence.DEAD

    def _trickle(self, s: DirectionState, now: tuple[int, int], now_ns: int) -> bool:
        """K in a row lost while the far port receives: late probes, unless the wire loses most of what enters
        it (`detect.trickles`: a link shaped below what its probes need delivers a trickle, each probe past its
        timeout; the late ones raise the timeout to its cap, so no later run of losses sees the far port silent),
        over this run of losses alone (a probe in time ends it). The switches count it, so a starved controller's
        late rounds and reads do not change it."""
        if s.d.host:  # its port's tx and rx are different flows
            return False
        if s.trickle_counts is None or now_ns - s.trickle_counts_ns > 10 * self.hard_timeout_ns:
            s.trickle_counts, s.trickle_counts_ns = now, now_ns
            return False
        elapsed = now_ns - s.trickle_counts_ns
        if elapsed < max(GRAY_SPAN_NS, TRICKLE_TIMEOUTS * self._timeout_now):
            return False  # what is still on its way is then at most a small part of what left
        (dtx, drx), before = counter_deltas(s.trickle_counts, now), s.trickle_counts
        s.trickle_counts, s.trickle_counts_ns = now, now_ns
        s.evidence = (f"trickle: {dtx} packets left {s.d.src}:{s.d.src_port}, {drx} arrived at {s.d.dst}:{s.d.dst_port} "
                      f"({(dtx - drx) / max(dtx, 1):.0%} lost on the wire) in {elapsed / 1e6:.0f} ms")
        return trickles(before, now)

    def _gray_on_the_wire(self, s: DirectionState, now_ns: int, strict: bool = False) -> bool:
        """A loss that would fail a link by the gray ratio counts only if the port counters see the
        link itself losing: over at least a second, of what the source port sent (counted in egress,
        after the switch's queue) at least half the gray ratio never reached the far port. Probes
        lost in a congested queue, or late, are not the link's: held back. A host NIC that sends
        anything is alive (its port's tx and rx are different flows): held back. The first such loss
        reads the counters and is held back; later ones compare."""
        now = self.port_counts(s.d)
        if now == LATE:
            return False
        if now is None:
            s.unreadable = True
            return not strict
        if s.gray_counts is None or now_ns - s.gray_counts_ns > 10 * self.hard_timeout_ns:
            s.gray_counts, s.gray_counts_ns = now, now_ns
            return False
        elapsed = now_ns - s.gray_counts_ns
        if elapsed < GRAY_SPAN_NS:
            return False
        dtx, drx = counter_deltas(s.gray_counts, now)
        if s.d.host:
            s.evidence = f"gray: {drx} packets from {s.d.host} in {elapsed / 1e6:.0f} ms"
            return drx == 0
        if dtx <= 0:
            return False
        wire = (dtx - drx) / dtx
        s.evidence = (f"gray: {dtx} packets left {s.d.src}:{s.d.src_port}, {drx} arrived at {s.d.dst}:{s.d.dst_port} "
                      f"({wire:.0%} lost on the wire) in {elapsed / 1e6:.0f} ms")
        s.gray_counts, s.gray_counts_ns = now, now_ns
        return wire >= self.thresholds.gray_loss / 2

    def _read_port_counts(self, d: Direction) -> tuple[int, int] | None | str:
        """Both ends' counters, read on the switches' workers: a read asked for waits here at most
        COUNTS_GRACE, then LATE (the prober goes on; the next loss takes the answer). A switch that
        does not answer: LATE (the liveness rule judges it). Unreadable: None."""
        src, dst = self.sessions[d.src], self.sessions[d.dst]
        if not (getattr(src, "port_counters", True) and getattr(dst, "port_counters", True)):
            return None  # a transport without port counters: the probes decide
        if self.calls is None:
            return self._read_port_counts_here(d)
        pending = self._pending.get(d)
        if pending is None:
            try:
                pending = (self.calls.submit(d.src, lambda t: src.port_count(d.src_port, True, t)),  # type: ignore[attr-defined]
                           self.calls.submit(d.dst, lambda t: dst.port_count(d.dst_port, False, t)))  # type: ignore[attr-defined]
            except SwitchSilent:
                return LATE
            self._pending[d] = pending
            wait(pending, timeout=COUNTS_GRACE)
        if not all(f.done() for f in pending):
            return LATE
        del self._pending[d]
        try:
            return pending[0].result(), pending[1].result()
        except (LookupError, CallLate):
            return None
        except Exception as e:  # the switch's own error: no answer in time is LATE, a refusal is unreadable
            return LATE if any(k in str(e) for k in NO_ANSWER) else None

    def _read_port_counts_here(self, d: Direction) -> tuple[int, int] | None:
        try:
            tx = self.sessions[d.src].port_count(d.src_port, True, 2.0)  # type: ignore[attr-defined]
            rx = self.sessions[d.dst].port_count(d.dst_port, False, 2.0)  # type: ignore[attr-defined]
            return tx, rx
        except Exception:  # unreadable: the probes decide
            return None

    def _silent(self) -> set[str]:
        """Switches that left a call unanswered past its deadline and have not answered since."""
        if self.calls is None:
            return set()
        return {n for n in self.health if self.calls.silent_since(n) is not None}

    def _judge_switches(self, now_ns: int) -> None:
        """The liveness rule (liveness.judge) for every switch in session; changes go to `on_switch`."""
        if self.calls is None:
            return
        answered = {n: self.calls.answered_sent_ns(n) for n in self.health}
        for name, h in list(self.health.items()):
            if not self.sessions[name].ready:  # type: ignore[attr-defined]
                continue  # no session: the stream's end says so (switch_unreachable / stream_broken)
            others = max((t for n, t in answered.items() if n != name), default=0)
            with self._lock:
                probes = max(self._sent_progress.get(name, 0), self._recv_progress.get(name, 0))
                fabric = self._progress
            signals = Signals(self.calls.silent_since(name), self.calls.answered_ns(name), others, probes, fabric)
            self.health[name], change = judge_switch(h, signals, now_ns)
            if change is not None and self.on_switch is not None:
                self.on_switch(name, change, self.health[name].reason)

    # --- receiving -------------------------------------------------------------------------
    def _drain(self) -> None:
        """Take every packet-in the sessions have queued, right before judging: a probe that reached
        the controller counts as arrived even when this thread was late (a stall of ours is no loss)."""
        for name, session in self.sessions.items():
            if not session.ready:  # type: ignore[attr-defined]
                continue
            try:
                arrivals = session.probes_in()  # type: ignore[attr-defined]
            except ProbeError as e:
                self._io_error("probe_read", name, str(e))
                continue
            if self._io_said:
                self._io_error("probe_read", name, None)
            for a in arrivals:
                if isinstance(a, ProbeIn):
                    self._probe_in(name, a)
                else:
                    self._answer(name, a)

    def _arrived(self, name: str, payload: bytes, port: int | None, now_ns: int) -> None:
        """A packet-in's payload (a probe frame or a host's Neighbor Advertisement) read at `name`."""
        probe = parse_probe(payload)
        if probe is not None and port is not None:
            self._probe_in(name, ProbeIn(port, probe.link, probe.direction, probe.seq, probe.sent_ns, now_ns))
            return
        na = advertised_target(payload)
        if na is not None and port is not None:
            self._answer(name, HostAnswer(port, na[0], na[1], now_ns))

    def _probe_in(self, name: str, probe: ProbeIn) -> None:
        s = self._by_key.get((probe.link_id, probe.direction))
        if s is None or s.d.dst != name or s.d.dst_port != probe.port:
            return
        self.packets_in += 1
        with self._lock:
            self._progressed(s, probe.sent_ns)
            delay_ns = probe.received_ns - probe.sent_ns
            if s.outstanding and s.outstanding[0][0] <= probe.seq:
                s.received[probe.seq] = delay_ns
                self.timer.arrived(delay_ns)
            else:
                self.late += 1
                self.timer.late(delay_ns, probe.received_ns)

    def _progressed(self, s: DirectionState, sent_ns: int) -> None:
        """A probe of `s` sent at `sent_ns` arrived: its switches, and the prober, carried probes that late."""
        if self._sent_progress.get(s.d.src, 0) < sent_ns:
            self._sent_progress[s.d.src] = sent_ns
        if self._recv_progress.get(s.d.dst, 0) < sent_ns:
            self._recv_progress[s.d.dst] = sent_ns
        self._progress = max(self._progress, sent_ns)

    def _answer(self, name: str, na: HostAnswer) -> None:
        """A host's Neighbor Advertisement: the probe address it was sent to names the solicitation
        it answers (its sequence number modulo PROBE_SLOTS; outstanding ones span less than that)."""
        now_ns = na.received_ns
        s = self._by_port.get((name, na.port))
        if s is None or na.target != s.d.target:
            return
        self.packets_in += 1
        with self._lock:
            hit = next(((seq, sent) for seq, sent in reversed(s.outstanding) if seq % PROBE_SLOTS == na.slot), None)
            if hit is None:
                self.late += 1
                return
            seq, sent_ns = hit
            self._progressed(s, sent_ns)
            s.received[seq] = now_ns - sent_ns
            self.timer.arrived(now_ns - sent_ns)
