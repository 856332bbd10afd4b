"""EV choice policies: which EV a QP's packet (or retransmission) takes.

- `spray`: oblivious per-packet spraying, round-robin over every EV whatever its state.
- `hash`: the 5-tuple hash of the QP's flow picks one EV for good (a classic RoCE NIC behind ECMP).
- `roce-gbn`: the same single path, and the transport goes back N (RoCEv2 RC without selective repeat:
  the receiver takes PSNs only in order, a loss resends everything from the lost PSN; `go_back_n`).
- `qp-rr`: QP k takes EV k mod n (one path per QP, QPs spread evenly).
- `health`: per-packet spraying over the QP's active EVs that are GOOD or UNKNOWN (congested ones only
  when no other is left), never an ASSUMED_BAD or DENIED one: an active EV so is replaced by a backup
  of its plane (EvTable.active_set); when no active EV is usable, the QP's data waits for a probe to
  bring one back (`holds`); a retransmission avoids the EV that lost it (MRC). Each EV takes packets in
  proportion to its weight (a CE echo cuts it, clean ACKs give it back; EvHealth.weight): smooth weighted
  round-robin, plain round-robin while the weights are equal.
- `ethereal`: each message is split on arrival into `parts` equal parts, each part sent whole on
  the usable EV with the least assigned (unacknowledged) load, no per-packet spraying (seed 003).

Every policy is deterministic: the same events give the same choices.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field

from endpoint.ev import EvTable


@dataclass(frozen=True)
class Flow:
    """A QP as the network sees it: the 5-tuple parts a hash would use, the QP's index at its sender and how
    many QPs its sender has to that destination (0: not said)."""

    src: str
    dst: str
    sport: int
    qp: int
    index: int
    of: int = 0


class Policy:
    """Base: subclasses choose `pick` (a new packet) and may override `repick`, `on_message`, `on_done`."""

    name = "?"
    go_back_n = False  # the sender's transport: selective retransmission (False) or go-back-N (True)

    def pick(self, table: EvTable, flow: Flow, seq: int) -> int:
        """The EV of the flow's packet number `seq` (0-based within the QP)."""
        raise NotImplementedError

    def repick(self, table: EvTable, flow: Flow, seq: int, lost_ev: int) -> int:
        """The EV a lost packet is sent again on (default: the policy's own choice)."""
        return self.pick(table, flow, seq)

    def holds(self, table: EvTable) -> bool:
        """Whether a QP with these EVs sends nothing now, new or resent (default: never holds)."""
        return False

    def on_message(self, table: EvTable, flow: Flow, first_seq: int, packets: int) -> None:
        """A message of `packets` packets starting at `first_seq` arrives to be sent."""

    def on_done(self, flow: Flow, ev: int, packets: int = 1) -> None:
        """Packets of `flow` sent on `ev` were acknowledged (or given up)."""


def usable(table: EvTable) -> list[int]:
    """The active EVs that are GOOD or UNKNOWN and not congested, else the congested ones; none when every
    active EV is ASSUMED_BAD or DENIED (after backups of the same plane took their places)."""
    ok = [e for e in table.active_set() if table[e].usable]
    return [e for e in ok if not table[e].congested] or ok


def usable_or_every(table: EvTable) -> list[int]:
    """The usable EVs, else every active EV in order (for a policy that keeps sending whatever their health)."""
    return usable(table) or list(table.active)


class Spray(Policy):
    """Oblivious per-packet spraying: round-robin over the active EVs whatever their state; a retransmission
    takes the next other EV."""

    name = "spray"

    def __init__(self) -> None:
        self.next: dict[int, int] = {}  # per QP: its packets go round the EVs

    def pick(self, table: EvTable, flow: Flow, seq: int) -> int:
        n = self.next.get(flow.qp, flow.index)
        self.next[flow.qp] = n + 1
        return table.active[n % len(table.active)]

    def repick(self, table: EvTable, flow: Flow, seq: int, lost_ev: int) -> int:
        for _ in range(len(table.active)):
            ev = self.pick(table, flow, seq)
            if ev != lost_ev:
                return ev
        return lost_ev


class FiveTupleHash(Policy):
    """One EV per flow by a CRC-32 of its 5-tuple (source, destination, protocol, ports): retransmissions too."""

    name = "hash"

    def pick(self, table: EvTable, flow: Flow, seq: int) -> int:
        key = f"{flow.src}|{flow.dst}|17|{flow.sport}|4791".encode()
        return table.active[zlib.crc32(key) % len(table.active)]


class RoceGoBackN(FiveTupleHash):
    """Single-path RoCEv2 RC: one EV per QP by its 5-tuple hash, and go-back-N retransmission."""

    name = "roce-gbn"
    go_back_n = True


class QpRoundRobin(Policy):
    """QP k of a sender on EV k mod n, retransmissions too."""

    name = "qp-rr"

    def pick(self, table: EvTable, flow: Flow, seq: int) -> int:
        return table.active[flow.index % len(table.active)]


def weighted_turn(credit: dict[int, float], weights: dict[int, float]) -> int:
    """Smooth weighted round-robin (nginx's): every candidate earns its weight, the richest (the first of
    equals, in the order given) is chosen and pays the sum. Over any run of picks each candidate's share
    is its weight's, spread evenly. `credit` (per candidate) is updated in place; absent ones are dropped."""
    for e in [e for e in credit if e not in weights]:
        del credit[e]
    for e, w in weights.items():
        credit[e] = credit.get(e, 0.0) + w
    best = max(weights, key=lambda e: credit[e])  # max keeps the first of equals
    credit[best] -= sum(weights.values())
    return best


class HealthAware(Policy):
    """Per-packet round-robin over the usable active EVs, weighted by their weights; a retransmission avoids
    the EV that lost it."""

    name = "health"

    def __init__(self) -> None:
        self.next: dict[int, int] = {}  # per QP: its packets go round the usable EVs
        self.credit: dict[int, dict[int, float]] = {}  # per QP: weighted round-robin credit per EV

    def _turn(self, flow: Flow, evs: int) -> int:
        """The QP's next turn. QP k of `of` starts k * evs / of EVs on, so that the sender's QPs, taking turns,
        put its packets on each EV evenly spaced rather than in bursts: a burst puts a second packet on a
        gray EV before the first one's loss is seen (RACK waits a reordering window and an RTT)."""
        n = self.next.get(flow.qp, flow.index * max(1, evs // flow.of) if flow.of else flow.index)
        self.next[flow.qp] = n + 1
        return n

    def _choose(self, table: EvTable, flow: Flow, choices: list[int]) -> int:
        weights = {e: table[e].weight for e in choices}
        if len(set(weights.values())) <= 1:
            self.credit.pop(flow.qp, None)
            return choices[self._turn(flow, len(choices)) % len(choices)]
        return weighted_turn(self.credit.setdefault(flow.qp, {}), weights)

    def holds(self, table: EvTable) -> bool:
        """No active EV usable: data waits for a probe's answer rather than go down a dead path
        (an RTT spike that failed the healthy EVs too is over in a probe interval)."""
        return not usable(table)

    def pick(self, table: EvTable, flow: Flow, seq: int) -> int:
        return self._choose(table, flow, usable_or_every(table))  # (the sender asks `holds` first: never every EV)

    def repick(self, table: EvTable, flow: Flow, seq: int, lost_ev: int) -> int:
        return self._choose(table, flow, [e for e in usable(table) if e != lost_ev] or usable_or_every(table))


@dataclass
class Ethereal(Policy):
    """Ethereal (seed 003): split each message into `parts` equal parts, each on the least-loaded usable EV."""

    parts: int = 4
    name = "ethereal"
    load: dict[tuple[str, int], int] = field(default_factory=dict)  # (destination, EV) -> packets assigned, unacknowledged
    # (destination, QP number, PSN offset) -> EV: a sender's QPs towards different peers share QP numbers
    route: dict[tuple[str, int, int], int] = field(default_factory=dict)

    def on_message(self, table: EvTable, flow: Flow, first_seq: int, packets: int) -> None:
        n = max(1, min(self.parts, packets))
        base, extra = divmod(packets, n)
        seq = first_seq
        for part in range(n):
            size = base + (1 if part < extra else 0)
            ev = self._least(table, flow.dst)
            self._add(flow.dst, ev, size)
            for s in range(seq, seq + size):
                self.route[flow.dst, flow.qp, s] = ev
            seq += size

    def _least(self, table: EvTable, dst: str, avoid: int | None = None) -> int:
        every = usable_or_every(table)
        choices = [e for e in every if e != avoid] or every
        return min(choices, key=lambda e: (self.load.get((dst, e), 0), choices.index(e)))

    def _add(self, dst: str, ev: int, packets: int) -> None:
        self.load[dst, ev] = max(0, self.load.get((dst, ev), 0) + packets)

    def pick(self, table: EvTable, flow: Flow, seq: int) -> int:
        ev = self.route.pop((flow.dst, flow.qp, seq), None)
        if ev is None:  # a packet of no announced message: a one-packet part
            ev = self._least(table, flow.dst)
            self._add(flow.dst, ev, 1)
        return ev

    def repick(self, table: EvTable, flow: Flow, seq: int, lost_ev: int) -> int:
        """The lost packet's load moved (on_done already took it off `lost_ev`) to the least-loaded other EV."""
        ev = self._least(table, flow.dst, avoid=lost_ev)
        self._add(flow.dst, ev, 1)
        return ev

    def on_done(self, flow: Flow, ev: int, packets: int = 1) -> None:
        self._add(flow.dst, ev, -packets)


POLICIES: dict[str, type[Policy]] = {p.name: p for p in (Spray, FiveTupleHash, RoceGoBackN, QpRoundRobin, HealthAware,
                                                           Ethereal)}


def make(name: str, **kwargs: int) -> Policy:
    """A fresh policy by name (ValueError naming the known ones otherwise)."""
    cls = POLICIES.get(name)
    if cls is None:
        raise ValueError(f"unknown policy '{name}' (known: {', '.join(POLICIES)})")
    return cls(**kwargs) if cls is Ethereal else cls()
