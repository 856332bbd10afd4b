"""The EV table: per entropy value (one static SRv6 path) the OCP MRC EV state and its RTT, loss and ECN stats.

The states are the specification's (`enum mrc_ctl_ev_state`, mrc_ctl.h):

- UNKNOWN: no evidence yet (a new EV); used for data, the first ACK makes it GOOD.
- GOOD: used for data.
- ASSUMED_BAD: a packet sent on it was lost and not trimmed (a retransmission timeout, or a later packet
  on the same FIFO path acknowledged first): not used for data, probed in the background; enough
  answered probes in a row bring it back to GOOD, and so does the late ACK of the very packet whose loss
  made it ASSUMED_BAD (queued, not lost: `on_late_ack`). A trim (NACK) is congestion, not a dead path: it
  never makes an EV ASSUMED_BAD.
- DENIED: set only by the controller (`set_state`, MODIFY_EV_STATE); never used, never probed, no
  evidence changes it; the controller's next `set_state` takes it back.

A port down (this host's NIC, or the destination's as its acknowledgements' port-state bitmap says)
makes the EVs of that plane unusable without changing their state. An active EV that is not usable is
replaced by a usable backup of its plane (EvTable.active_set).

`ev_min_active` (EvTable.min_active): a loss does not make an EV ASSUMED_BAD when that would leave fewer
usable EVs in the table's active set (a usable backup of its plane that would take its place counts; the
demotion is counted in `floor_held` instead). The floor holds background loss (uniform random loss on every
link makes every EV lose now and then; one loss each would map them all out), not a dead path: an EV that
loses `floor_yield` packets in a row, over an RTO at least, with no acknowledgement between goes ASSUMED_BAD
whatever the floor.
`default_min_active` is the specification's examples' choice, a quarter of the EVs.

Gray paths: the answered probes needed to come back (the hold-down) double with every gray strike: a
relapse (a loss within `forgive` of coming back) and a probe lost after an answered one (the path answers
some, loses some), up to `max_recover_probes`; a probe answered after its deadline takes back its expiry.
Each `forgive` seconds GOOD without a loss forgets one strike (the memory decays with clean time only).
An EV that probes bring back is on *probation* until it has been GOOD without a loss for `forgive` seconds
and its gray strikes are all forgotten: its weight stays at `probation_weight` and it is still probed; a
probation probe lost is a loss (ASSUMED_BAD at once). So a path still gray is mostly caught by a probe, not
by data. After the probation clean ACKs give its weight back. A dead path (no probe answered) is probed at
a doubling interval instead.

Congestion marks leave the state alone. An ECN-CE echo is a load-balancing signal (the paper's
"ECN-based load balancing"; the specification names none): it halves the EV's `weight`, its share of
the sender's per-packet choice, and each clean ACK gives back `weight_regain` up to 1. A trim (the last
hop's incast, which every EV to that host crosses) marks the EV `congested` for a probe interval: the
policy uses a congested EV only when no other is left. Times are seconds on one monotonic clock, given
by the caller (`now`), so the machine is a pure function of its event timeline.
"""

from __future__ import annotations

import enum
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from controller.plan.evs import SPINE_BITS
from endpoint.rto import smooth, timeout


class EvState(str, enum.Enum):
    GOOD = "good"
    ASSUMED_BAD = "assumed_bad"
    DENIED = "denied"
    UNKNOWN = "unknown"

    @property
    def bit(self) -> int:
        """The specification's value (MRC_CTL_EV_*), a bit of an EV profile's `ev_event_mask`."""
        return STATE_BITS[self]


STATE_BITS = {EvState.GOOD: 1 << 0, EvState.ASSUMED_BAD: 1 << 1, EvState.DENIED: 1 << 2, EvState.UNKNOWN: 1 << 31}
PROBATION_BACKOFF = 4  # a probation probe's timeout in RTOs (a retransmission's after two expiries)
DEFAULT_EVENT_MASK = STATE_BITS[EvState.GOOD] | STATE_BITS[EvState.ASSUMED_BAD]  # the only ones the spec supports


@dataclass(frozen=True)
class EvConfig:
    """Timers and thresholds of the EV state machine (seconds)."""

    min_rto: float = 0.025  # retransmission timeout floor: a packet unacknowledged this long is lost
    max_rto: float = 0.25
    probe_interval: float = 0.02  # first probe this long after ASSUMED_BAD; doubled per unanswered probe in a row
    max_probe_interval: float = 0.4
    probe_gap: float = 0.005  # the next probe this long after an answered one
    recover_probes: int = 64  # answered probes in a row that bring an ASSUMED_BAD EV back (doubled per gray strike)
    max_recover_probes: int = 256
    forgive: float = 2.0  # GOOD this long without a loss forgets one gray strike
    ecn_avoid: bool = True  # an ECN-CE echo cuts the EV's weight (ECN-based load balancing)
    ecn_cut: float = 0.5  # the weight is multiplied by this on a CE echo
    weight_regain: float = 1 / 16  # a clean ACK gives back this much weight, up to 1
    min_weight: float = 1 / 16
    probation_weight: float = 1 / 16  # the weight of an EV on probation (probes brought it back; still probed)
    reorder_window: float = 0.005  # RACK: a packet sent this much before an acknowledged one (and older than
    # an RTT plus this) is lost, on whatever EV
    floor_yield: int = 8  # losses in a row, no ACK between, that demote an EV the ev_min_active floor holds
    # (a dead path loses its whole flight in an RTT; at 4 % background loss 8 in a row is 1 in 10^11)
    undo_spurious: bool = True  # a late ACK of the packet whose loss made the EV ASSUMED_BAD takes the verdict back


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
    probe_losses: int = 0
    sent_while_failed: int = 0  # data sent while ASSUMED_BAD or DENIED (health-aware: 0; oblivious: many)
    undone: int = 0  # ASSUMED_BAD verdicts taken back: the lost packet's ACK came late (queued, not lost)
    srtt: float | None = None
    rttvar: float = 0.0
    min_rtt: float | None = None

    @property
    def losses(self) -> int:
        return self.timeouts + self.sack_losses


# (health, now, from, to, why): called on every state change
Listener = Callable[["EvHealth", float, EvState, EvState, str], None]


@dataclass
class EvHealth:
    """One EV's state machine. Call the on_* methods as evidence arrives; `transitions` logs every change."""

    ev: int
    config: EvConfig = field(default_factory=EvConfig)
    state: EvState = EvState.UNKNOWN
    stats: EvStats = field(default_factory=EvStats)
    plane: int = 0
    strikes: int = 0  # probes unanswered in a row (dead-path probe backoff)
    gray: int = 0  # gray strikes: relapses and probes lost after an answered one, until forgiven
    run: int = 0  # probes answered in a row while ASSUMED_BAD
    next_probe: float = 0.0
    probe_deadline: float | None = None  # a probe is in flight until then
    expired: tuple[int, int] | None = None  # (run, gray) before the last probe expired: what its late answer restores
    last_loss: float = float("-inf")
    back_at: float = float("-inf")  # when probes last brought it back
    congested: bool = False
    congested_until: float = float("-inf")
    weight: float = 1.0  # share of the sender's per-packet choice among the usable EVs (weighted round-robin)
    probation: bool = False  # brought back by probes: low weight, still probed (until _served)
    forgot_at: float = float("-inf")  # when a clean spell last forgot a gray strike
    local_up: bool = True  # this host's NIC port of the EV's plane
    remote_up: bool = True  # the destination's, as its last acknowledgement's port-state bitmap said
    floor_held: int = 0  # losses that left it usable because of ev_min_active
    dry: int = 0  # losses since its last acknowledgement (a dead path's grow without end)
    dry_since: float = float("-inf")  # the first of them
    undo: tuple[object, int, bool, float] | None = None  # (the lost transmission, gray, probation, last_loss before)
    may_demote: Callable[[EvHealth], bool] | None = None  # ev_min_active, set by the table that owns this health
    listener: Listener | None = None
    transitions: list[tuple[float, str, str, str]] = field(default_factory=list)  # (t, from, to, why)

    # --- derived -------------------------------------------------------------------------------
    @property
    def usable(self) -> bool:
        return self.state in (EvState.GOOD, EvState.UNKNOWN) and self.local_up and self.remote_up

    @property
    def ports_up(self) -> bool:
        return self.local_up and self.remote_up

    @property
    def need(self) -> int:
        """Answered probes in a row that bring it back now."""
        return min(self.config.max_recover_probes, self.config.recover_probes << min(self.gray, 30))

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
            old = self.state
            self.transitions.append((round(now, 6), old.value, to.value, why))
            self.state = to
            if self.listener is not None:
                self.listener(self, now, old, to, why)

    def _mark(self, now: float) -> None:
        self.congested = True
        self.congested_until = now + self.config.probe_interval

    def _served(self, now: float) -> None:
        """The probation ends `forgive` seconds GOOD after coming back, once every gray strike is forgotten."""
        if self.probation and not self.gray and now - self.back_at >= self.config.forgive:
            self.probation = False

    def _weigh(self, now: float, ce: bool) -> None:
        """A data ACK: a CE echo cuts the weight (`ecn_avoid`), a clean one gives some back (not on probation)."""
        c = self.config
        self._served(now)
        if ce and c.ecn_avoid:
            self.weight = ecn_cut(self.weight, c.ecn_cut, c.min_weight)
        elif not ce and not self.probation:
            self.weight = regain(self.weight, c.weight_regain)

    def _assume_bad(self, now: float, why: str, sent: object = None) -> None:
        """A loss that is not a trim: a usable EV is ASSUMED_BAD at once, unless ev_min_active holds it (a port
        down explains the loss: the EV is left as it is). `sent` names the lost transmission: its late ACK undoes."""
        before = (sent, self.gray, self.probation, self.last_loss)
        self.last_loss = now
        if not self.dry:
            self.dry_since = now
        self.dry += 1
        if not self.usable:
            return
        # dead: floor_yield losses in a row over an RTO at least (a burst of timeouts at one instant is a stall)
        dead = self.dry >= self.config.floor_yield and now - self.dry_since >= self.rto()
        if not dead and self.may_demote is not None and not self.may_demote(self):
            self.floor_held += 1
            return
        if now - self.back_at < self.config.forgive:
            self.gray += 1  # it came back and lost again: remember
        self.run, self.strikes, self.probe_deadline, self.expired = 0, 0, None, None
        self.probation = False
        self.undo = before if sent is not None and self.config.undo_spurious else None
        self.next_probe = now + self.config.probe_interval
        self._go(now, EvState.ASSUMED_BAD, why)

    def _forget(self, now: float) -> None:
        """One gray strike forgotten per `forgive` seconds GOOD without a loss."""
        if self.state != EvState.GOOD or not self.gray:
            return
        spell = max(self.last_loss, self.back_at, self.forgot_at)
        lapsed = forgotten(now - spell, self.config.forgive, self.gray)
        if lapsed:
            self.gray -= lapsed
            self.forgot_at = spell + lapsed * self.config.forgive

    # --- evidence ------------------------------------------------------------------------------
    def on_sent(self, now: float) -> None:
        self.stats.sent += 1
        if not self.usable:
            self.stats.sent_while_failed += 1

    def on_ack(self, now: float, rtt: float | None, ce: bool = False) -> None:
        """A data packet sent on this EV was acknowledged (rtt: its round trip; None for the ACK of a
        transmission already declared lost, Karn's rule). The first evidence makes an UNKNOWN EV GOOD; an
        ASSUMED_BAD one waits for its probes (the ACK may be of a packet sent before the loss)."""
        s = self.stats
        s.acked += 1
        self.dry = 0
        self._sample(rtt)
        if self.state == EvState.UNKNOWN:
            self._go(now, EvState.GOOD, "first ack")
        if ce:
            s.ecn += 1
        self._forget(now)
        if self.state == EvState.GOOD:
            self._weigh(now, ce)

    def on_timeout(self, now: float, sent: object = None) -> None:
        """A packet on this EV (transmission `sent`) went unacknowledged for an RTO."""
        self.stats.timeouts += 1
        self._assume_bad(now, "timeout", sent)

    def on_sack_loss(self, now: float, sent: object = None) -> None:
        """A packet on this EV (transmission `sent`) is missing while a later one was acknowledged."""
        self.stats.sack_losses += 1
        self._assume_bad(now, "sack loss", sent)

    def on_late_ack(self, now: float, sent: object) -> None:
        """The ACK of transmission `sent`, already declared lost (Eifel, RFC 3522; F-RTO, RFC 5682). If that
        loss made this EV ASSUMED_BAD, the packet was queued, not lost: the verdict and its gray strike are
        taken back (GOOD, on probation again if it was). A packet truly lost sends no ACK: its EV stays out."""
        if self.state != EvState.ASSUMED_BAD or self.undo is None or self.undo[0] != sent:
            return
        _, self.gray, self.probation, self.last_loss = self.undo
        self.undo, self.run, self.strikes, self.probe_deadline, self.expired = None, 0, 0, None, None
        self.stats.undone += 1
        self.next_probe = now + self.config.probe_gap
        self._go(now, EvState.GOOD, "late ack: queued, not lost")

    def on_nack(self, now: float) -> None:
        """A packet on this EV was trimmed: congestion, not a dead path. The headers came through, so an
        UNKNOWN EV is GOOD; the state is left alone otherwise and the EV marked congested."""
        self.stats.nacks += 1
        if self.state == EvState.UNKNOWN:
            self._go(now, EvState.GOOD, "trimmed: the path delivers")
        self._mark(now)

    # --- probing -------------------------------------------------------------------------------
    @property
    def probed(self) -> bool:
        """ASSUMED_BAD, or GOOD on probation: probed at the probe timers."""
        return self.state == EvState.ASSUMED_BAD or self.state == EvState.GOOD and self.probation

    def probe_due(self, now: float) -> bool:
        return self.probed and self.probe_deadline is None and now >= self.next_probe \
            and self.ports_up  # no probe through a port known down

    def on_probe_sent(self, now: float, rto: float | None = None) -> None:
        """A probe went out: unanswered within `rto` (default this EV's) it is lost; on probation within
        PROBATION_BACKOFF times that (its loss demotes a usable EV at once, an RTT spike must not)."""
        self.stats.probes += 1
        wait = max(self.config.min_rto, self.rto() if rto is None else rto)
        self.probe_deadline = now + wait * (PROBATION_BACKOFF if self.state == EvState.GOOD else 1)

    def on_probe_ack(self, now: float, rtt: float | None = None) -> None:
        """A probe's answer (rtt: that probe's round trip, a sample even when it came after its deadline).
        `need` answers in a row bring an ASSUMED_BAD EV back to GOOD. An answer after its probe's deadline
        (an RTT spike, not a loss) takes back what the expiry did: the run goes on, no gray strike."""
        self.stats.probe_acks += 1
        self._sample(rtt)
        if self.state == EvState.GOOD and self.probation and self.probe_deadline is not None:
            self.probe_deadline = None
            self.next_probe = now + self.config.probe_gap
            return
        if self.state != EvState.ASSUMED_BAD:
            return
        if self.probe_deadline is None:
            if self.expired is None:
                return  # nothing out and nothing expired: a duplicate answer
            self.run, self.gray = self.expired
            self.stats.probe_losses -= 1
        self.probe_deadline, self.strikes, self.expired = None, 0, None
        self.run += 1
        if self.run >= self.need:
            self.back_at = now
            self.weight, self.probation = self.config.probation_weight, True
            self.next_probe = now + self.config.probe_gap
            self._go(now, EvState.GOOD, f"{self.run} probes answered")
        else:
            self.next_probe = now + self.config.probe_gap

    def tick(self, now: float) -> None:
        """Expire a probe (lost: after an answered one a gray strike, else the dead-path backoff; on
        probation a loss) and a congestion mark a probe interval old."""
        if self.state == EvState.GOOD and self.probation and self.probe_deadline is not None \
                and now >= self.probe_deadline:
            self.stats.probe_losses += 1
            self.probe_deadline = None
            self._assume_bad(now, "probe lost on probation")
        if self.state == EvState.ASSUMED_BAD and self.probe_deadline is not None and now >= self.probe_deadline:
            self.stats.probe_losses += 1
            self.probe_deadline = None
            self.expired = (self.run, self.gray)
            if self.run:
                self.gray += 1
            self.run = 0
            self.next_probe = now + min(self.config.max_probe_interval,
                                        self.config.probe_interval * 2 ** min(self.strikes, 30))
            self.strikes += 1
        if self.congested and now >= self.congested_until:
            self.congested = False
        if self.state == EvState.GOOD:
            self._forget(now)
            self._served(now)

    # --- the controller ------------------------------------------------------------------------
    def set_state(self, now: float, state: EvState, why: str = "controller") -> None:
        """MODIFY_EV_STATE: the controller sets any state (DENIED only this way); ASSUMED_BAD starts probing."""
        self.probe_deadline, self.run, self.strikes, self.expired, self.undo = None, 0, 0, None, None
        self.probation = False
        self.next_probe = now + self.config.probe_interval
        self._go(now, state, why)

    def to_json(self) -> dict[str, Any]:
        s = self.stats
        return {"ev": self.ev, "plane": self.plane, "state": self.state.value, "strikes": self.strikes,
                "local_up": self.local_up, "remote_up": self.remote_up,
                "gray": self.gray, "need": self.need, "floor_held": self.floor_held,
                "weight": round(self.weight, 4), "probation": self.probation,
                "sent": s.sent, "acked": s.acked, "timeouts": s.timeouts, "sack_losses": s.sack_losses,
                "nacks": s.nacks, "ecn": s.ecn, "probes": s.probes, "probe_acks": s.probe_acks,
                "probe_losses": s.probe_losses, "sent_while_failed": s.sent_while_failed, "undone": s.undone,
                "srtt_ms": None if s.srtt is None else round(s.srtt * 1e3, 3),
                "min_rtt_ms": None if s.min_rtt is None else round(s.min_rtt * 1e3, 3),
                "transitions": [list(t) for t in self.transitions]}


@dataclass(frozen=True)
class EvEvent:
    """An EV state change event (`struct mrc_ctl_ev_event`): the profile (here the destination), the EV and
    its port (plane), the new state, and how many events were dropped since the previous one delivered."""

    profile: str
    ev: int
    port: int
    state: EvState
    drop_count: int
    t: float
    why: str

    def to_json(self) -> dict[str, Any]:
        return {"profile": self.profile, "ev": self.ev, "port": self.port, "state": self.state.value,
                "drop_count": self.drop_count, "t": self.t, "why": self.why}


class EvEvents:
    """The EV event CQ: at most `capacity` events waiting; an event that finds it full is dropped and
    counted, and the next event queued carries that count (MRC_CTL_OPT_CAP_EV_EVENT_PRECISE_DROP_CNT)."""

    def __init__(self, capacity: int = 1024, mask: int = DEFAULT_EVENT_MASK) -> None:
        if capacity < 1:
            raise ValueError(f"an EV event queue holds at least 1 event, not {capacity}")
        self.capacity, self.mask = capacity, mask
        self.queue: deque[EvEvent] = deque()
        self.dropped = 0  # since the last event queued
        self.dropped_total = 0

    def push(self, profile: str, h: EvHealth, now: float, to: EvState, why: str) -> None:
        if not self.mask & to.bit:
            return
        if len(self.queue) >= self.capacity:
            self.dropped += 1
            self.dropped_total += 1
            return
        self.queue.append(EvEvent(profile, h.ev, h.plane, to, self.dropped, round(now, 6), why))
        self.dropped = 0

    def poll(self, n: int | None = None) -> list[EvEvent]:
        """mrc_ctl_poll_ev_event: up to `n` (default all) waiting events, oldest first."""
        out: list[EvEvent] = []
        while self.queue and (n is None or len(out) < n):
            out.append(self.queue.popleft())
        return out


def ecn_cut(weight: float, factor: float, floor: float) -> float:
    """An EV's weight after a CE echo: multiplied by `factor`, not below `floor`."""
    return max(floor, weight * factor)


def regain(weight: float, step: float) -> float:
    """An EV's weight after a clean ACK: `step` more, at most 1."""
    return min(1.0, weight + step)


def forgotten(clean: float, forgive: float, gray: int) -> int:
    """Gray strikes a clean spell of `clean` seconds forgets: one per `forgive`, at most the `gray` there are."""
    return min(gray, int(clean // forgive)) if clean >= 0 and forgive > 0 else 0


def plane_of(ev: int) -> int:
    """The plane an EV id names (controller.plan.evs.ev_id's layout)."""
    return ev >> SPINE_BITS


class EvTable:
    """The EVs of one QP's destination: ids in a fixed order, each with its health, an active set (the EVs
    data may use) and backups; `min_active` is the specification's `ev_min_active` (0: no floor).

    A table made with `health=None` owns its EVs' health (their floor and event listener are its own); a
    `view` shares that health with an active set of its own (a QP's EV set)."""

    def __init__(self, ids: list[int], config: EvConfig | None = None,
                 health: dict[int, EvHealth] | None = None, *, active: list[int] | None = None,
                 planes: dict[int, int] | None = None, min_active: int = 0, profile: str = "",
                 events: EvEvents | None = None, clock: list[float] | None = None) -> None:
        if not ids:
            raise ValueError("an EV table needs at least one EV")
        if len(set(ids)) != len(ids):
            raise ValueError(f"duplicate EV ids in {ids}")
        act = list(ids) if active is None else list(active)
        stray = [e for e in act if e not in ids]
        if stray or not act or len(set(act)) != len(act):
            raise ValueError(f"active EVs {act} must be distinct EVs of {ids}")
        if not 0 <= min_active <= len(act):
            raise ValueError(f"ev_min_active {min_active} is not within 0-{len(act)} (the active EVs)")
        self.ids = list(ids)
        self.config = config or EvConfig()
        self.active = act
        self.backup = [e for e in ids if e not in act]
        self.min_active, self.profile, self.events = min_active, profile, events
        self.replacements: list[tuple[float, int, int, str]] = []  # (t, ev, ev_new, why)
        self.clock = clock if clock is not None else [0.0]  # the latest `now` seen (tick), shared with views
        self.port_changes: list[tuple[float, str, int, bool]] = []  # (t, "local" | "remote", plane, up)
        if health is None:
            planes = planes or {}
            self.health = {i: EvHealth(i, self.config, plane=planes.get(i, plane_of(i))) for i in ids}
            for h in self.health.values():
                h.may_demote = self._may_demote
                h.listener = self._changed
        else:
            self.health = {i: health[i] for i in ids}

    def view(self, ids: list[int], active: list[int] | None = None) -> EvTable:
        """A table of some of these EVs sharing their health (a QP's own EV set: one path, one state)."""
        return EvTable(ids, self.config, self.health, active=active, clock=self.clock)

    def __getitem__(self, ev: int) -> EvHealth:
        return self.health[ev]

    def in_state(self, *states: EvState) -> list[int]:
        return [i for i in self.ids if self.health[i].state in states]

    def _may_demote(self, h: EvHealth) -> bool:
        """ev_min_active: whether the active set keeps `min_active` usable EVs without `h`: per plane, as many
        as it has active places and usable EVs (a usable backup takes the place of an active EV that is not;
        the QPs' shares of this table swap on their own, so which EV holds a place is not counted)."""
        left = 0
        for plane in {self.health[e].plane for e in self.active}:
            places = sum(1 for e in self.active if self.health[e].plane == plane)
            ok = sum(1 for e in self.ids if e != h.ev and self.health[e].plane == plane and self.health[e].usable)
            left += min(places, ok)
        return left >= self.min_active

    def _changed(self, h: EvHealth, now: float, old: EvState, to: EvState, why: str) -> None:
        if self.events is not None:
            self.events.push(self.profile, h, now, to, why)

    # --- the active set ------------------------------------------------------------------------
    def active_set(self, now: float | None = None) -> list[int]:
        """The active EVs after replacing each ASSUMED_BAD or DENIED one by the first usable backup of its
        plane (so the planes stay equally used); the one replaced becomes the last backup. `now` defaults to
        the latest time the table saw."""
        now = self.clock[0] if now is None else now
        for i, ev in enumerate(self.active):
            if self.health[ev].usable:
                continue
            plane = self.health[ev].plane
            new = next((b for b in self.backup if self.health[b].usable and self.health[b].plane == plane), None)
            if new is not None:
                self._swap(i, new, now, f"{self.health[ev].state.value}: a backup of plane {plane}")
        return self.active

    def _swap(self, i: int, new: int, now: float, why: str) -> None:
        old = self.active[i]
        self.backup.remove(new)
        self.backup.append(old)
        self.active[i] = new
        self.replacements.append((round(now, 6), old, new, why))

    def replace(self, ev: int, new: int, now: float | None = None) -> None:
        """REPLACE_EV: `new` (a backup) takes the place of active EV `ev` (ValueError naming what is wrong)."""
        if ev not in self.active:
            raise ValueError(f"EV {ev:#x} is not active (active: {', '.join(f'{e:#x}' for e in self.active)})")
        if new not in self.backup:
            raise ValueError(f"EV {new:#x} is not a backup EV here (backups: "
                             f"{', '.join(f'{e:#x}' for e in self.backup) or 'none'})")
        self._swap(self.active.index(ev), new, self.clock[0] if now is None else now, "controller")

    def set_ports(self, ports: int, now: float, remote: bool) -> list[int]:
        """A port-state bitmap (bit p: the plane-p NIC is up) of the destination (`remote`: from an
        acknowledgement) or of this host: EVs of a plane whose port is down are not used (nor probed) until
        it is up again. The planes whose state changed, logged in `port_changes`."""
        changed = set()
        for h in self.health.values():
            up = bool(ports >> h.plane & 1)
            if (h.remote_up if remote else h.local_up) != up:
                changed.add(h.plane)
                if remote:
                    h.remote_up = up
                else:
                    h.local_up = up
        for plane in sorted(changed):
            self.port_changes.append((round(now, 6), "remote" if remote else "local", plane, bool(ports >> plane & 1)))
        return sorted(changed)

    def tick(self, now: float) -> list[int]:
        """Expire probes and marks; the EVs due a probe now."""
        self.clock[0] = now
        due = []
        for i in self.ids:
            h = self.health[i]
            h.tick(now)
            if h.probe_due(now):
                due.append(i)
        return due

    def to_json(self) -> list[dict[str, Any]]:
        return [self.health[i].to_json() for i in self.ids]


def default_min_active(evs: int, active: int) -> int:
    """ev_min_active when none is given: a quarter of the EVs (the specification's examples set ev_count / 4),
    at least 1, at most the active ones."""
    return min(active, max(1, evs // 4))


def split_active(ids: list[int], planes: dict[int, int], backups_per_plane: int) -> list[int]:
    """The active EVs when the last `backups_per_plane` EVs of each plane (in id order) are kept as
    backups; at least one EV of each plane stays active."""
    by_plane: dict[int, list[int]] = {}
    for e in ids:
        by_plane.setdefault(planes.get(e, plane_of(e)), []).append(e)
    spare = {e for evs in by_plane.values() for e in evs[max(1, len(evs) - backups_per_plane):]}
    return [e for e in ids if e not in spare]
