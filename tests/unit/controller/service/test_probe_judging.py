"""How the prober judges probes, without switches: the adaptive timeout (probetimer), the port-counter
witness (detect.port_evidence) and the prober's decisions over synthetic arrivals and counter reads."""

from __future__ import annotations


import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller.plan.probes import Probe, probe_frame
from controller.service.detect import Change, Evidence, Thresholds, counter_deltas, port_evidence
from controller.service.prober import LATE, Direction, DirectionState, Prober
from controller.service.probetimer import ProbeTimer
from controller.model.topology import load
from tests.paths import UNIT_DATA

DATA = UNIT_DATA
MS = 1_000_000


# --- the timeout ---------------------------------------------------------------------------------

def test_timeout_stays_at_its_floor_while_probes_are_quick():
    t = ProbeTimer(80 * MS, 2000 * MS)
    for _ in range(600):
        t.arrived(20 * MS)
    assert t.timeout_ns(0) == 80 * MS


def test_timeout_rises_to_twice_the_recent_99th_percentile_and_falls_back():
    t = ProbeTimer(80 * MS, 2000 * MS, window=100, every=1)
    for i in range(100):
        t.arrived((300 if i % 50 == 0 else 20) * MS)  # 2 of 100 at 300 ms: above the 99th percentile
    assert t.timeout_ns(0) == 600 * MS
    for _ in range(100):
        t.arrived(30 * MS)  # the busy spell is out of the window
    assert t.timeout_ns(0) == 80 * MS


def test_a_late_probe_holds_the_timeout_up_for_late_keep_then_lets_go():
    t = ProbeTimer(80 * MS, 2000 * MS, late_keep_ns=10_000 * MS)
    t.late(400 * MS, now_ns=1_000 * MS)
    assert t.timeout_ns(1_000 * MS) == 600 * MS
    assert t.timeout_ns(11_000 * MS) == 600 * MS
    assert t.timeout_ns(11_001 * MS) == 80 * MS


def test_timeout_never_passes_its_cap():
    t = ProbeTimer(80 * MS, 2000 * MS)
    t.late(5000 * MS, now_ns=0)
    assert t.timeout_ns(0) == 2000 * MS


@pytest.mark.parametrize("kw", [dict(floor_ns=0, cap_ns=1), dict(floor_ns=10, cap_ns=5),
                                dict(floor_ns=1, cap_ns=2, quantile=0.0), dict(floor_ns=1, cap_ns=2, window=0)])
def test_timer_refuses_nonsense(kw):
    with pytest.raises(ValueError):
        ProbeTimer(**kw)


@given(st.lists(st.integers(1, 10_000 * MS), min_size=1, max_size=300))
def test_timeout_is_within_floor_and_cap_and_covers_most_recent_delays(delays):
    t = ProbeTimer(80 * MS, 2000 * MS, every=1)
    for d in delays:
        t.arrived(d)
    timeout = t.timeout_ns(0)
    assert 80 * MS <= timeout <= 2000 * MS
    recent = delays[-512:]
    covered = sum(1 for d in recent if d <= timeout)
    assert timeout == 2000 * MS or covered >= 0.99 * len(recent) - 1


# --- the port counters' verdict ------------------------------------------------------------------

def test_port_evidence():
    settle, patience = 100 * MS, 2000 * MS
    assert port_evidence((10, 10), (15, 10), 150 * MS, settle, patience) is Evidence.DEAD  # left, none arrived
    assert port_evidence((10, 10), (15, 10), 50 * MS, settle, patience) is Evidence.UNKNOWN  # may be on its way
    assert port_evidence((10, 10), (15, 11), 150 * MS, settle, patience) is Evidence.ALIVE
    assert port_evidence((10, 10), (10, 10), 150 * MS, settle, patience) is Evidence.UNKNOWN  # egress stalled
    assert port_evidence((10, 10), (10, 10), 2000 * MS, settle, patience) is Evidence.DEAD  # a wedged port
    assert port_evidence((10, 10), (73, 10), 40 * MS, settle, patience) is Evidence.UNKNOWN  # 63 gone: wait
    assert port_evidence((10, 10), (74, 10), 40 * MS, settle, patience) is Evidence.DEAD  # 64 gone, none came
    assert port_evidence((500, 500), (3, 0), 150 * MS, settle, patience) is Evidence.DEAD  # restarted: from zero
    assert counter_deltas((500, 500), (3, 7)) == (3, 7)


# --- the prober's decisions ----------------------------------------------------------------------

class Counters:
    """Port counts the test moves by hand, as the switches' counters would move."""

    def __init__(self) -> None:
        self.tx, self.rx = 100, 100
        self.reads = 0

    def __call__(self, d: Direction) -> tuple[int, int]:
        self.reads += 1
        return self.tx, self.rx


def make_prober(counters: Counters, **kw) -> tuple[Prober, DirectionState, list[tuple[str, Change]]]:
    topo = load(DATA / "two_plane_lab.yaml")
    changes: list[tuple[str, Change]] = []
    p = Prober(topo, {}, Thresholds(fail_after=3, restore_after=5), period=0.02, timeout=0.08,
               on_change=lambda s, c: changes.append((s.d.label, c)), port_counts=counters, **kw)
    return p, p.states[0], changes


def probe_round(p: Prober, t_ms: int, arrive: bool, s: DirectionState) -> None:
    """One period: every direction sends a probe at t_ms; all arrive 10 ms later except `s`'s unless
    `arrive`; then the prober judges at t_ms + 10."""
    sent = t_ms * MS
    for x in p.states:
        x.seq += 1
        x.outstanding.append((x.seq, sent))
        if x is not s or arrive:
            frame = na_frame(x.d.target, x.seq) if x.d.host else probe_frame(Probe(x.d.link_id, x.d.direction, x.seq, sent))
            p._arrived(x.d.dst, frame, x.d.dst_port, sent + 10 * MS)
    p._judge(sent + 10 * MS)


def na_frame(target: int, seq: int) -> bytes:
    """A host's Neighbor Advertisement of `target` to the probe address of solicitation `seq`."""
    from scapy.layers.inet6 import ICMPv6ND_NA, IPv6
    from scapy.layers.l2 import Ether
    from scapy.utils6 import in6_ptop

    host = in6_ptop(":".join(f"{target >> (112 - 16 * i) & 0xFFFF:x}" for i in range(8)))
    return bytes(Ether(dst="02:5f:00:00:ff:fe") / IPv6(src=host, dst=f"fe80::88b5:0:{seq % 64:x}", hlim=255)
                 / ICMPv6ND_NA(tgt=host, S=1))


def run_rounds(p: Prober, s: DirectionState, counters: Counters, lost_from: int, rounds: int,
               rx_moves: bool, tx_moves: bool = True, start: int = 0) -> None:
    """Rounds `start`..`start + rounds - 1`, 20 ms apart; `s`'s probes lost from round `lost_from`;
    after each round the source port counts 3 more packets (if `tx_moves`) and the far port too
    while the probes arrive, or always if `rx_moves`."""
    for i in range(start, start + rounds):
        lost = i >= lost_from
        probe_round(p, i * 20, not lost, s)
        if tx_moves:
            counters.tx += 3
        if rx_moves or not lost:
            counters.rx += 3


def test_a_cut_direction_goes_down_when_its_counters_agree():
    c = Counters()
    p, s, changes = make_prober(c)
    run_rounds(p, s, c, lost_from=5, rounds=20, rx_moves=False)
    assert changes == [(s.d.label, Change.DOWN)]
    assert s.evidence.startswith("dead:") and "0 arrived" in s.evidence
    # the timeout at its floor: the third loss, two periods after the first, is confirmed at once
    assert s.vetoed == 0 and "in 40 ms" in s.evidence


def test_with_the_timeout_raised_the_counters_get_that_long_to_settle():
    c = Counters()
    p, s, changes = make_prober(c)
    p.timer.late(300 * MS, now_ns=0)  # a late probe: the timeout is 450 ms, 370 above its floor
    run_rounds(p, s, c, lost_from=5, rounds=60, rx_moves=False)
    assert changes == [(s.d.label, Change.DOWN)]
    assert s.vetoed > 0 and "in 380 ms" in s.evidence  # the first loss read + 370 ms, on the 20 ms grid


def test_late_probes_on_a_link_that_carries_packets_fail_nothing():
    c = Counters()
    p, s, changes = make_prober(c)
    run_rounds(p, s, c, lost_from=5, rounds=40, rx_moves=True)
    assert changes == []
    # probes sent in rounds 5..35 were judged (4 rounds after they left): 2 losses went to the
    # detector (K - 1), every later one was held back by the counters
    assert s.lost == 31 and s.vetoed == s.lost - 2 and s.evidence.startswith("alive:")
    assert s.detector.up


def test_a_stalled_source_port_waits_then_counts_as_wedged():
    c = Counters()
    p, s, changes = make_prober(c)
    run_rounds(p, s, c, lost_from=5, rounds=30, rx_moves=False, tx_moves=False)
    assert changes == []  # 400 ms of nothing leaving the port: not known yet
    run_rounds(p, s, c, lost_from=0, rounds=100, rx_moves=False, tx_moves=False, start=30)
    assert changes == [(s.d.label, Change.DOWN)]  # past the 1 s hard timeout: wedged


def test_without_port_evidence_three_lost_probes_fail_the_link():
    c = Counters()
    p, s, changes = make_prober(c, evidence=False)
    run_rounds(p, s, c, lost_from=5, rounds=20, rx_moves=True)
    assert changes == [(s.d.label, Change.DOWN)] and c.reads == 0


def test_unreadable_counters_leave_the_probes_to_decide():
    p, s, changes = make_prober(lambda d: None)  # type: ignore[arg-type]
    run_rounds(p, s, Counters(), lost_from=5, rounds=20, rx_moves=True)
    assert changes == [(s.d.label, Change.DOWN)]


def test_a_probe_judged_lost_that_arrives_later_raises_the_timeout():
    c = Counters()
    p, s, changes = make_prober(c)
    for i in range(10):
        probe_round(p, i * 20, True, s)
    assert p.timeout_ms == 80
    s.seq += 1
    s.outstanding.append((s.seq, 200 * MS))
    seq = s.seq
    probe_round(p, 220, True, s)  # probes sent after it go through both its switches
    p._judge(300 * MS)  # 100 ms old: judged lost
    assert s.lost == 1
    late = probe_frame(Probe(s.d.link_id, s.d.direction, seq, 200 * MS))
    p._arrived(s.d.dst, late, s.d.dst_port, 600 * MS)  # 400 ms after it left
    assert p.late == 1
    p._judge(601 * MS)
    assert p.timeout_ms == 600  # 1.5 x the late probe's delay


def every_fifth_lost(p: Prober, s: DirectionState, rounds: int, rx_per_round: int, counters: Counters) -> None:
    """20 % of `s`'s probes lost, never two in a row (so only the gray ratio can fire); the source
    port sends 5 packets a round, the far port receives `rx_per_round` of them."""
    for i in range(rounds):
        probe_round(p, i * 20, i % 5 != 4, s)
        counters.tx += 5
        counters.rx += rx_per_round


def test_a_gray_link_goes_down_when_its_counters_see_the_wire_lose():
    c = Counters()
    p, s, changes = make_prober(c)
    every_fifth_lost(p, s, 250, 4, c)  # 20 % lost between the ports too
    assert changes == [(s.d.label, Change.DOWN)]
    assert s.detector.reason.endswith("of the last 100 probes lost")
    assert s.evidence.startswith("gray: ") and "(20% lost on the wire)" in s.evidence


def test_probes_lost_in_a_queue_do_not_make_a_gray_link():
    c = Counters()
    p, s, changes = make_prober(c)
    every_fifth_lost(p, s, 250, 5, c)  # every packet that left the port arrived: congestion, not the wire
    assert changes == [] and s.vetoed > 0
    assert "(0% lost on the wire)" in s.evidence


def test_a_host_nic_that_sends_is_not_gray():
    c = Counters()
    p, _, changes = make_prober(c, hosts=True)
    host = next(x for x in p.states if x.d.host)
    every_fifth_lost(p, host, 250, 3, c)
    assert changes == [] and host.vetoed > 0 and host.evidence.startswith("gray: ") and f"from {host.d.host}" in host.evidence


def test_a_host_nic_that_goes_silent_goes_down():
    c = Counters()
    p, _, changes = make_prober(c, hosts=True)
    host = next(x for x in p.states if x.d.host)
    run_rounds(p, host, c, lost_from=5, rounds=20, rx_moves=False)
    assert changes == [(host.d.label, Change.DOWN)] and host.evidence.startswith("dead:")


# --- a link shaped below what its probes need (`fabricctl lab fault slow LEAF SPINE 8 --latency-ms 50`) ---------

class Shaper:
    """The slow-link fault's tbf on a direction's source port: 8 kbit/s (a token byte a millisecond, one
    256-byte probe every 256 ms), a bucket of 2000 bytes, a queue of 2050 bytes (8 probes); what does not fit
    is dropped. Times in ms."""

    def __init__(self) -> None:
        self.tokens, self.t = 2000.0, 0.0
        self.queue: list[tuple[int, int]] = []  # (seq, sent ms), oldest first

    def leave(self, until: float) -> list[tuple[int, int, float]]:
        """(seq, sent ms, left ms) of each probe that left the queue by `until`."""
        out = []
        while self.queue and self.t + max(0.0, 256 - self.tokens) <= until:
            self.t += max(0.0, 256 - self.tokens)
            self.tokens = max(self.tokens, 256) - 256
            out.append((*self.queue.pop(0), self.t))
        self.tokens = min(2000.0, self.tokens + until - self.t) if not self.queue else self.tokens
        self.t = until if not self.queue else self.t
        return out

    def enqueue(self, seq: int, t: int) -> None:
        """A probe sent at `t` (after `leave(t)`)."""
        if len(self.queue) < 8:
            self.queue.append((seq, t))


def shaped_rounds(p: Prober, s: DirectionState, c: Counters, shaper: Shaper, rounds: int, every_ms: int) -> None:
    """`rounds` rounds `every_ms` apart (20: on time; more: a starved controller whose rounds run late); each
    judged 10 ms after its probes left. Every other direction's probe arrives in 10 ms; `s`'s goes through the
    shaper (counted by its source port as it leaves the switch) and arrives 1 ms after it leaves the queue."""
    for i in range(rounds):
        t = i * every_ms
        leave(s, c, p, shaper, t)
        for x in p.states:
            x.seq += 1
            x.outstanding.append((x.seq, t * MS))
            if x is s:
                c.tx += 1
                shaper.enqueue(x.seq, t)
            else:
                p._arrived(x.d.dst, probe_frame(Probe(x.d.link_id, x.d.direction, x.seq, t * MS)), x.d.dst_port,
                           (t + 10) * MS)
        leave(s, c, p, shaper, t + 9)
        p._judge((t + 10) * MS)


def leave(s: DirectionState, c: Counters, p: Prober, shaper: Shaper, until: int) -> None:
    """What left the shaper by `until` arrives at the far port 1 ms later."""
    for seq, sent, left in shaper.leave(until):
        c.rx += 1
        p._arrived(s.d.dst, probe_frame(Probe(s.d.link_id, s.d.direction, seq, sent * MS)), s.d.dst_port,
                   int((left + 1) * MS))


class LateCounters(Counters):
    """Counters read on a starved switch worker: a read is not back within the prober's grace (LATE), and the
    next loss takes the counts as they were when it was asked, `lag` asks later."""

    def __init__(self, lag: int) -> None:
        super().__init__()
        self.lag = lag
        self.asked: dict[Direction, tuple[tuple[int, int], int]] = {}

    def __call__(self, d: Direction) -> tuple[int, int] | str:
        self.reads += 1
        counts, left = self.asked.pop(d, ((self.tx, self.rx), self.lag))
        if left:
            self.asked[d] = (counts, left - 1)
            return LATE
        return counts


@pytest.mark.parametrize("every_ms", [20, 100])
@pytest.mark.parametrize("lag", [0, 1, 3])
def test_a_link_that_delivers_a_trickle_of_its_probes_goes_down_however_late_the_controller(lag, every_ms):
    # On a quiet machine the K-th loss is judged, its counters read at once, before the first probe the queue
    # held comes out (~145 ms after it left): dead. A controller whose counter reads come back late, or whose
    # rounds run late, judges it after: the far port receives (alive); the held probes arrive late and raise the
    # timeout to its cap, so every later run of losses sees packets arrive too. The wire loses most of what
    # enters it: the link goes down all the same.
    c = LateCounters(lag)
    p, s, changes = make_prober(c)
    shaped_rounds(p, s, c, Shaper(), rounds=20_000 // every_ms, every_ms=every_ms)
    assert changes == [(s.d.label, Change.DOWN)], (s.evidence, s.vetoed, p.timeout_ms)
    assert s.evidence.startswith(("dead: ", "trickle: ")), s.evidence
    assert s.evidence.startswith("dead: " if lag == 0 and every_ms == 20 else "trickle: "), s.evidence


def test_a_link_whose_queue_holds_a_third_of_what_it_is_sent_is_not_a_trickle():
    # every probe is lost to the timeout's 1 s cap, K in a row, while the far port receives two of every three
    # packets the source port sends (the third waits in a queue that keeps growing): late, not lost; held back
    c = Counters()
    p, s, changes = make_prober(c)
    for i in range(500):
        t = i * 20
        probe_round(p, t, False, s)
        c.tx += 3
        c.rx += 2
        if i >= 60:
            late = probe_frame(Probe(s.d.link_id, s.d.direction, s.seq - 60, (t - 1200) * MS))
            p._arrived(s.d.dst, late, s.d.dst_port, t * MS)
    assert changes == [] and s.vetoed > 400 and p.timeout_ms == 1000 and s.evidence.startswith("alive: ")


def test_a_burst_that_ended_is_no_part_of_a_later_run_of_late_probes():
    # 0.9 s of a burst the far port takes one packet in ten of (every probe lost), one probe in time, then 2 s of
    # late probes on a link delivering all it is sent: judged from the run of losses it ends in, not a trickle
    c = Counters()
    p, s, changes = make_prober(c)
    for i in range(45):
        probe_round(p, i * 20, False, s)
        c.tx += 40
        c.rx += 4
    probe_round(p, 45 * 20, True, s)
    for i in range(46, 146):
        probe_round(p, i * 20, False, s)
        c.tx += 1
        c.rx += 1
    assert changes == [] and s.vetoed > 100, (s.evidence, s.vetoed)


# --- a T1 that stops forwarding: every probe to and from it lost, carrier up ---------------------

SPINE = "p0-t1-0"


class PortCounters:
    """Each direction's (source port tx, far port rx), moved by hand per direction."""

    def __init__(self) -> None:
        self.counts: dict[str, list[int]] = {}
        self.unreadable = False

    def __call__(self, d: Direction) -> tuple[int, int] | None:
        return None if self.unreadable else tuple(self.counts.setdefault(d.label, [100, 100]))  # type: ignore[return-value]

    def move(self, d: Direction, tx: int, rx: int) -> None:
        c = self.counts.setdefault(d.label, [100, 100])
        c[0] += tx
        c[1] += rx


def spine_rounds(p: Prober, counters: PortCounters, rounds: int, start: int = 0, *, stopped_from: int = 5,
                 spine_tx: int = 3, far_rx: int = 0) -> None:
    """Rounds 20 ms apart: from `stopped_from` every probe to or from SPINE is lost (every other arrives 10 ms
    after it left); each round every source port counts 3 packets more (SPINE's `spine_tx` once stopped: its
    egress counts its probes, or nothing when it is behind), each far port what arrived (once stopped, `far_rx`
    into a port that SPINE sends to)."""
    for i in range(start, start + rounds):
        sent = i * 20 * MS
        for x in p.states:
            x.seq += 1
            x.outstanding.append((x.seq, sent))
            lost = i >= stopped_from and SPINE in (x.d.src, x.d.dst)
            if not lost:
                frame = na_frame(x.d.target, x.seq) if x.d.host else probe_frame(Probe(x.d.link_id, x.d.direction, x.seq, sent))
                p._arrived(x.d.dst, frame, x.d.dst_port, sent + 10 * MS)
            tx = spine_tx if lost and x.d.src == SPINE else 3
            counters.move(x.d, tx, (far_rx if x.d.src == SPINE else 0) if lost else tx)
        p._judge(sent + 10 * MS)


def spine_prober(counters: PortCounters) -> tuple[Prober, list[tuple[str, Change]]]:
    changes: list[tuple[str, Change]] = []
    p = Prober(load(DATA / "two_plane_lab.yaml"), {}, Thresholds(fail_after=3, restore_after=5), period=0.02,
               timeout=0.08, on_change=lambda s, c: changes.append((s.d.label, c)), port_counts=counters)
    return p, changes


def from_spine(p: Prober) -> set[str]:
    return {s.d.label for s in p.states if s.d.src == SPINE}


def test_a_t1_that_stops_forwarding_is_failed_on_its_counters_well_before_the_hard_timeout():
    # SPINE carries no probe at all, so none of its links' probes is judged by the rule that both switches
    # carried a later one; its egress counts its probes while the leaves receive none: its directions to the
    # leaves go down a timeout, K - 1 periods and the counters' settling after it stopped (the hard timeout: 1 s)
    c = PortCounters()
    p, changes = spine_prober(c)
    spine_rounds(p, c, rounds=5 + 15)  # 300 ms of it stopped
    assert sorted(changes) == sorted((label, Change.DOWN) for label in from_spine(p))
    down = [s for s in p.states if s.d.src == SPINE]
    assert all(s.evidence.startswith("dead: ") and " 0 arrived at " in s.evidence for s in down), [s.evidence for s in down]
    # the leaves' directions into it: the far switch received nothing since, judged at the hard timeout as before
    assert all(s.detector.up and s.lost == 0 for s in p.states if s.d.dst == SPINE)


def test_a_t1_behind_whose_egress_counts_nothing_is_held_back_until_the_hard_timeout():
    # its probes queued behind its own backlog: nothing leaves its ports, so the counters cannot call the links dead
    c = PortCounters()
    p, changes = spine_prober(c)
    spine_rounds(p, c, rounds=5 + 40, spine_tx=0)  # 800 ms
    assert changes == [] and all(s.vetoed > 0 for s in p.states if s.d.src == SPINE)
    spine_rounds(p, c, rounds=40, start=45, spine_tx=0)  # past the hard timeout: a port that sends nothing, wedged
    assert {label for label, _ in changes} >= from_spine(p)


def test_a_t1_whose_probes_are_late_while_the_leaves_receive_from_it_fails_nothing():
    c = PortCounters()
    p, changes = spine_prober(c)
    spine_rounds(p, c, rounds=5 + 40, far_rx=3)  # 800 ms: what it sends arrives, only its probes are late
    assert changes == [] and all(s.evidence.startswith("alive: ") for s in p.states if s.d.src == SPINE)


def test_a_t1_carrying_no_probe_with_counters_unreadable_waits_for_the_hard_timeout():
    c = PortCounters()
    c.unreadable = True
    p, changes = spine_prober(c)
    spine_rounds(p, c, rounds=5 + 40)  # 800 ms: the probes alone do not judge a switch that carries none
    assert changes == []
    spine_rounds(p, c, rounds=20, start=45)  # then the hard timeout's rule judges them, the probes deciding
    assert {label for label, _ in changes} == from_spine(p) | {s.d.label for s in p.states if s.d.dst == SPINE}
