"""SHIFT: a rank's QPs move to another NIC of its host when theirs fails.

A host has one NIC port per plane. In the schemes that bind each QP to one NIC (the sender's policy
`qp-rr`: ecmp, eecmp, pin, leaf-spray; QP k on plane k mod planes), a failed port stops every QP bound
to it. With SHIFT (`Transport.nic_failover` "shift") a QP moves when

- local carrier: this host's port of the QP's plane is down (IFF_UP and IFF_RUNNING, read every 10 ms):
  certain, and seen at once;
- remote port: the destination's acknowledgements (of a QP on another plane) say its port of the plane is
  down (the port-state bitmap every ACK carries): within a round trip of the failure;
- retries: a packet of the QP was sent `retries` times on its NIC without an acknowledgement, RC's retry
  count exceeded: the failure nobody reports (the destination's port when no QP of another plane reaches
  it). A single resend is no sign: shaped links queue, and healthy runs resend now and then.

It moves to the next plane up whose local port is up and whose port at the destination is not known
down. Every packet it had in flight (sent, not acknowledged) is sent again there with its PSN: the QP
keeps its number and PSN space, and the receiver keys a QP by (peer, QP number), not by NIC address,
so a copy that did arrive through the old NIC makes the resend a duplicate, which it drops
(layout.RankProgress: per transfer, by sequence number; receives complete once, in PSN order). A moved
QP stays on its backup NIC for the rest of the run.

Without SHIFT ("none"), a port going down under QPs with work left is the rank's error, as RC's QPs go
to the error state when their port fails; the peers' QPs towards the port retry until the run ends.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from endpoint.ev import EvTable
from endpoint.policy import Flow, Policy
from endpoint.sender import SenderCore

MODES = ("none", "shift")
RETRIES = 3  # transmissions of one packet on one NIC, none acknowledged, before its QP moves
LOCAL, REMOTE = "local carrier down", "remote port down"


@dataclass(frozen=True)
class Move:
    """One QP moved to another NIC: when (monotonic ns), why, and what it had in flight, sent again there:
    the packets (sequence numbers in the QP) and the transfers (work requests) they belong to."""

    t_ns: int
    dst: str
    qp: int
    from_plane: int
    to_plane: int
    why: str
    resent: tuple[int, ...]
    wrs: tuple[int, ...]

    def to_json(self) -> dict[str, Any]:
        return {"t_ns": self.t_ns, "dst": self.dst, "qp": self.qp, "from_plane": self.from_plane,
                "to_plane": self.to_plane, "why": self.why, "resent": list(self.resent), "wrs": list(self.wrs)}


@dataclass(eq=False)
class NicDown(ValueError):
    """A NIC port failed under QPs with work left that cannot move (SHIFT off, or no port left)."""

    host: str
    plane: int
    qps: list[tuple[str, int]]
    reason: str

    def __str__(self) -> str:
        dst, qp = self.qps[0]
        more = f" and {len(self.qps) - 1} more" if len(self.qps) > 1 else ""
        return f"{self.host}: NIC port of plane {self.plane} down under QP {qp:#x} to {dst}{more}: {self.reason}"


class OnNic(Policy):
    """The base policy's EV, but for a QP moved to another NIC: its EV of that plane (the leaf schemes have
    one EV per plane and destination)."""

    def __init__(self, base: Policy) -> None:
        self.base = base
        self.name = base.name
        self.moved: dict[tuple[str, int], int] = {}  # (destination, QP number) -> the plane it moved to

    def _on(self, table: EvTable, flow: Flow) -> int | None:
        plane = self.moved.get((flow.dst, flow.qp))
        if plane is None:
            return None
        return next(e for e in table.ids if table[e].plane == plane)

    def pick(self, table: EvTable, flow: Flow, seq: int) -> int:
        ev = self._on(table, flow)
        return self.base.pick(table, flow, seq) if ev is None else ev

    def repick(self, table: EvTable, flow: Flow, seq: int, lost_ev: int) -> int:
        ev = self._on(table, flow)
        return self.base.repick(table, flow, seq, lost_ev) if ev is None else ev

    def holds(self, table: EvTable) -> bool:
        return self.base.holds(table)

    def on_message(self, table: EvTable, flow: Flow, first_seq: int, packets: int) -> None:
        self.base.on_message(table, flow, first_seq, packets)

    def on_done(self, flow: Flow, ev: int, packets: int = 1) -> None:
        self.base.on_done(flow, ev, packets)


def _no_wr(dst: str, qp: int, seq: int) -> int | None:
    return None


def _busy(dst: str, qp: int) -> bool:
    return True


@dataclass
class NicFailover:
    """SHIFT over one rank's SenderCore (see the module docstring). `planes`: the host's NIC ports; `wr_of(dst,
    qp, seq)`: the transfer a packet belongs to; `busy(dst, qp)`: whether the QP has work left (sent or to
    come). Each on_* returns the moves it made."""

    core: SenderCore
    policy: OnNic
    mode: str
    planes: Sequence[int]
    retries: int = RETRIES
    wr_of: Callable[[str, int, int], int | None] = _no_wr
    busy: Callable[[str, int], bool] = _busy
    plane: dict[tuple[str, int], int] = field(default_factory=dict)  # (destination, QP number) -> its NIC's plane
    local: int = -1  # this host's port-state bitmap (bit p: plane p up)
    remote: dict[str, int] = field(default_factory=dict)  # destination -> its bitmap, as its ACKs last said
    moves: list[Move] = field(default_factory=list)
    sent_before: dict[tuple[str, int, int], int] = field(default_factory=dict)  # (dst, qp, seq) -> sends before a move

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"unknown NIC failover '{self.mode}' (known: {', '.join(MODES)})")
        if self.retries < 1:
            raise ValueError(f"a QP moves after at least 1 unacknowledged send, not {self.retries}")
        for q in self.core.order:
            self.plane[q.dst, q.qp] = q.table[self.policy.pick(q.table, q.flow, 0)].plane

    def on_ports(self, ports: int, now_ns: int) -> list[Move]:
        """This host's port-state bitmap, read now: the QPs on a port that is down move."""
        self.local = ports
        return self._move([k for k, p in self.plane.items() if not ports >> p & 1], LOCAL, now_ns)

    def on_ack_ports(self, dst: str, ports: int, now_ns: int) -> list[Move]:
        """A destination's port-state bitmap from its ACK (0: not carried): the QPs to a port of it that is down move."""
        if not ports or self.mode != "shift":
            return []
        self.remote[dst] = ports
        return self._move([k for k, p in self.plane.items() if k[0] == dst and not ports >> p & 1], REMOTE, now_ns)

    def on_retries(self, now_ns: int) -> list[Move]:
        """After the transport's timers: the QPs with a packet declared lost `retries` times on their NIC."""
        if self.mode != "shift":
            return []
        keys: list[tuple[str, int]] = []
        for q, seq, _ in self.core.resend:
            key = (q.dst, q.qp)
            if key not in keys and q.attempts.get(seq, 0) - self.sent_before.get((*key, seq), 0) >= self.retries:
                keys.append(key)
        return self._move(keys, f"{self.retries} sends unacknowledged", now_ns)

    def _backup(self, dst: str, plane: int) -> int | None:
        """The next plane up from `plane` whose port here is up and whose port at `dst` is not known down."""
        order = sorted(self.planes)
        i = order.index(plane) if plane in order else -1
        for p in order[i + 1:] + order[:i + 1]:
            if p != plane and self.local >> p & 1 and self.remote.get(dst, -1) >> p & 1:
                return p
        return None

    def _move(self, keys: Iterable[tuple[str, int]], why: str, now_ns: int) -> list[Move]:
        keys = list(keys)
        stuck = [k for k in keys if self.busy(*k)]
        if self.mode != "shift":
            if stuck:
                raise NicDown(self.core.host, self.plane[stuck[0]], stuck, "its QPs have no other NIC "
                                                                            "(--nic-failover none)")
            return []
        to_plane = {k: self._backup(k[0], self.plane[k]) for k in keys}
        lost = [k for k in stuck if to_plane[k] is None]
        if lost:
            raise NicDown(self.core.host, self.plane[lost[0]], lost, "no other NIC port of the host is up")
        out = []
        for key in keys:
            dst, qp = key
            was, to = self.plane[key], to_plane[key]
            if to is None:
                continue  # idle, and no port to go to: it moves at the next change of the ports if one is up
            self.plane[key] = self.policy.moved[key] = to
            q = self.core.qps[key]
            for seq in q.attempts:
                if seq not in q.acked:
                    self.sent_before[dst, qp, seq] = q.attempts[seq]
            seqs = self.core.requeue(dst, qp)
            wrs = sorted({w for w in (self.wr_of(dst, qp, s) for s in seqs) if w is not None})
            out.append(Move(now_ns, dst, qp, was, to, why, tuple(seqs), tuple(wrs)))
        self.moves += out
        return out

    def to_json(self) -> dict[str, Any]:
        return {"mode": self.mode, "retries": self.retries, "moves": [m.to_json() for m in self.moves],
                "planes": {f"{d}/{qp:#x}": p for (d, qp), p in sorted(self.plane.items())}}


def moves(ranks: dict[str, dict[str, Any]], started_ns: int) -> list[dict[str, Any]]:
    """Every rank's QP moves from its record, in time order: `t_s` after the common start, the rank, and the
    move's fields (Move.to_json)."""
    out = [{"rank": host, "t_s": round((m["t_ns"] - started_ns) / 1e9, 4), **m}
           for host, r in ranks.items() for m in (r.get("nic_failover") or {}).get("moves", [])]
    return sorted(out, key=lambda m: (m["t_ns"], m["rank"], m["qp"]))
