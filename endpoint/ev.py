"""The EV table: per entropy value (one static SRv6 path) a health state machine with RTT, loss and ECN stats.

States (MRC, seed 002): GOOD (used), SUSPECT (a loss inferred from a selective ACK, an ECN-CE echo
or a trimmed packet: used only when no GOOD EV is left; after a loss probed after a probe interval,
after a congestion mark GOOD again once a probe interval passes without one: the mark showed the path
delivers, a probe would only add to its queue), FAILED (a retransmission timeout, or a
second loss while suspect: not used for data; probed in the background), PROBING (a probe is in
flight: its ACK brings the EV back to GOOD, its timeout back to FAILED with a longer probe
interval). Times are seconds on one monotonic clock, given by the caller (`now`), so the machine
is a pure function of its event timeline.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

from endpoint.rto import smooth, timeout


class EvState(str, enum.Enum):
    GOOD = "good"
    SUSPECT = "suspect"
    FAILED = "failed"
    PROBING = "probing"


@dataclass(frozen=True)
class EvConfig:
    """Timers and thresholds of the EV state machine (seconds)."""

    min_rto: float = 0.025  # retransmission timeout floor: a packet unacknowledged this long is lost
    max_rto: float = 0.25
    probe_interval: float = 0.02  # first probe this long after a failure; doubled per failure in a row
    max_probe_interval: float = 0.4
    recover_acks: int = 16  # clean ACKs in a row that bring a SUSPECT EV back to GOOD
    forgive: float = 0.5  # a GOOD EV without loss this long forgets its past failures (probe backoff)
    ecn_suspect: bool = True  # an ECN-CE echo makes a GOOD EV SUSPECT (congestion)
    reorder_window: float = 0.005  # RACK: a packet sent this much before an acknowledged one (and older than
    # an RTT plus this) is lost, on whatever EV


@dataclass
class EvStats:
    """What happened on one EV: packets sent and acknowledged, losses by how they were seen, marks, RTT."""

    sent: int = 0
    acked: int = 0
    timeouts: int = 0
    sack_losses: int = 0  # inferred: a later packet on the same (FIFO) path was acknowledged first
    nacks: int = 0  # trimmed packets the receiver reported
    ecn: int = 0
    probes: int = 0
    probe_acks: int = 0
    sent_while_failed: int = 0  # data sent while FAILED/PROBING (health-aware: 0; oblivious: many)
    srtt: float | None = None
    rttvar: float = 0.0
    min_rtt: float | None = None

    @property
    def losses(self) -> int:
        return self.timeouts + self.sack_losses


@dataclass
class EvHealth:
    """One EV's state machine. Call the on_* methods as evidence arrives; `transitions` logs every change."""

    ev: int
    config: EvConfig = field(default_factory=EvConfig)
    state: EvState = EvState.GOOD
    stats: EvStats = field(default_factory=EvStats)
    strikes: int = 0  # failures in a row (probe backoff)
    clean: int = 0  # ACKs in a row without loss
    next_probe: float = 0.0
    probe_deadline: float = 0.0
    last_loss: float = float("-inf")
    congested: bool = False  # SUSPECT from congestion marks only (CE, trimmed): the path answers, it is busy
    transitions: list[tuple[float, str, str, str]] = field(default_factory=list)  # (t, from, to, why)

    # --- derived -------------------------------------------------------------------------------
    @property
    def usable(self) -> bool:
        return self.state in (EvState.GOOD, EvState.SUSPECT)

    def rto(self) -> float:
        """RFC 6298's SRTT + 4 RTTVAR, within [min_rto, max_rto]."""
        return timeout(self.stats.srtt, self.stats.rttvar, self.config.min_rto, self.config.max_rto)

    def _sample(self, rtt: float | None) -> None:
        s = self.stats
        if rtt is not None and rtt >= 0:
            s.srtt, s.rttvar = smooth(s.srtt, s.rttvar, rtt)
            s.min_rtt = rtt if s.min_rtt is None else min(s.min_rtt, rtt)

    def _go(self, now: float, to: EvState, why: str) -> None:
        if to != self.state:
            self.transitions.append((round(now, 6), self.state.value, to.value, why))
            self.state = to

    def _suspect(self, now: float, why: str, congested: bool = False) -> None:
        """GOOD -> SUSPECT: used only when no GOOD EV is left. After a loss it is probed like a failed one (a
        probe's answer brings it back, its timeout fails it); without that an unused suspect EV would stay
        so. After a congestion mark (`congested`) the path is known to deliver (the mark came back): it is
        GOOD again after a probe interval without marks, unprobed (a probe would join the queue that
        marked it)."""
        self.next_probe = now + self.config.probe_interval
        self.congested = congested
        self._go(now, EvState.SUSPECT, why)

    def _marked(self, now: float, why: str) -> None:
        """A congestion mark: a GOOD EV becomes a congested SUSPECT one; a congested one's quiet period restarts."""
        if self.state == EvState.GOOD:
            self._suspect(now, why, congested=True)
        elif self.state == EvState.SUSPECT and self.congested:
            self.next_probe = now + self.config.probe_interval

    def _fail(self, now: float, why: str) -> None:
        interval = min(self.config.max_probe_interval, self.config.probe_interval * 2 ** self.strikes)
        self.strikes += 1
        self.next_probe = now + interval
        self.clean = 0
        self._go(now, EvState.FAILED, why)

    # --- evidence ------------------------------------------------------------------------------
    def on_sent(self, now: float) -> None:
        self.stats.sent += 1
        if not self.usable:
            self.stats.sent_while_failed += 1

    def on_ack(self, now: float, rtt: float | None, ce: bool = False) -> None:
        """A data packet sent on this EV was acknowledged (rtt: its round trip; None for the ACK of a
        transmission already declared lost, Karn's rule)."""
        s = self.stats
        s.acked += 1
        self._sample(rtt)
        if ce:
            s.ecn += 1
            self.clean = 0
            if self.config.ecn_suspect:
                self._marked(now, "ecn")
            return
        self.clean += 1
        if self.state == EvState.SUSPECT and self.clean >= self.config.recover_acks:
            self._go(now, EvState.GOOD, f"{self.clean} clean acks")
        if self.state == EvState.GOOD and now - self.last_loss >= self.config.forgive:
            self.strikes = 0

    def on_timeout(self, now: float) -> None:
        """A packet on this EV went unacknowledged for an RTO: the first evidence of a dead path."""
        self.stats.timeouts += 1
        self.last_loss = now
        if self.usable:
            self._fail(now, "timeout")

    def on_sack_loss(self, now: float) -> None:
        """A packet on this EV is missing while a later one on the same path was acknowledged."""
        self.stats.sack_losses += 1
        self.last_loss = now
        self.clean = 0
        if self.state == EvState.GOOD or (self.state == EvState.SUSPECT and self.congested):
            self._suspect(now, "sack loss")
        elif self.state == EvState.SUSPECT:
            self._fail(now, "second loss while suspect")

    def on_nack(self, now: float) -> None:
        """A packet on this EV was trimmed (congestion, not a dead path): retransmit at once, suspect the EV."""
        self.stats.nacks += 1
        self.clean = 0
        self._marked(now, "trimmed")

    # --- probing -------------------------------------------------------------------------------
    def probe_due(self, now: float) -> bool:
        return (self.state == EvState.FAILED or self.state == EvState.SUSPECT and not self.congested) \
            and now >= self.next_probe

    def on_probe_sent(self, now: float, rto: float | None = None) -> None:
        """A probe went out: unanswered within `rto` (default this EV's) it fails the EV again."""
        self.stats.probes += 1
        self.probe_deadline = now + max(self.config.min_rto, self.rto() if rto is None else rto)
        self._go(now, EvState.PROBING, "probe sent")

    def on_probe_ack(self, now: float, rtt: float | None = None) -> None:
        """A probe's answer (rtt: that probe's round trip, a sample even when it came after its deadline)."""
        self.stats.probe_acks += 1
        self._sample(rtt)
        if self.state == EvState.PROBING:
            self.clean = 0
            self._go(now, EvState.GOOD, "probe acked")

    def tick(self, now: float) -> None:
        """Expire a probe: no answer within its RTO leaves the EV FAILED, probed again later (backoff). A
        congested SUSPECT EV without a mark for a probe interval is GOOD again."""
        if self.state == EvState.PROBING and now >= self.probe_deadline:
            self._fail(now, "probe timeout")
        elif self.state == EvState.SUSPECT and self.congested and now >= self.next_probe:
            self._go(now, EvState.GOOD, "no congestion mark for a probe interval")

    def to_json(self) -> dict[str, Any]:
        s = self.stats
        return {"ev": self.ev, "state": self.state.value, "strikes": self.strikes,
                "sent": s.sent, "acked": s.acked, "timeouts": s.timeouts, "sack_losses": s.sack_losses,
                "nacks": s.nacks, "ecn": s.ecn, "probes": s.probes, "probe_acks": s.probe_acks,
                "sent_while_failed": s.sent_while_failed,
                "srtt_ms": None if s.srtt is None else round(s.srtt * 1e3, 3),
                "min_rtt_ms": None if s.min_rtt is None else round(s.min_rtt * 1e3, 3),
                "transitions": [list(t) for t in self.transitions]}


class EvTable:
    """The EVs of one QP's destination: ids in a fixed order, each with its health."""

    def __init__(self, ids: list[int], config: EvConfig | None = None,
                 health: dict[int, EvHealth] | None = None) -> None:
        if not ids:
            raise ValueError("an EV table needs at least one EV")
        if len(set(ids)) != len(ids):
            raise ValueError(f"duplicate EV ids in {ids}")
        self.ids = list(ids)
        self.config = config or EvConfig()
        self.health = {i: EvHealth(i, self.config) for i in ids} if health is None else {i: health[i] for i in ids}

    def view(self, ids: list[int]) -> EvTable:
        """A table of some of these EVs sharing their health (a QP's own EV set: one path, one state)."""
        return EvTable(ids, self.config, self.health)

    def __getitem__(self, ev: int) -> EvHealth:
        return self.health[ev]

    def in_state(self, *states: EvState) -> list[int]:
        return [i for i in self.ids if self.health[i].state in states]

    def tick(self, now: float) -> list[int]:
        """Expire probes; the EVs due a probe now."""
        due = []
        for i in self.ids:
            h = self.health[i]
            h.tick(now)
            if h.probe_due(now):
                due.append(i)
        return due

    def to_json(self) -> list[dict[str, Any]]:
        return [self.health[i].to_json() for i in self.ids]
