"""The receiver side of an endpoint-mode NIC: per-PSN selective ACKs on the reverse EV, CE echo, NACK for trimmed packets, stats.

`ReceiverCore.on_packet(rx, now_ns)` takes one packet as `endpoint.wire.parse` gives it and
returns the ACK to send (or None): an ACK for every data packet with a good ICRC (CE echoed), a
NACK for a trimmed one, a probe ACK for a probe. Per (sender, QP) it counts what arrived: distinct
PSNs, duplicates, the reorder distance of each late packet (how many higher PSNs came first,
histogram in powers of two), per EV (by first copy, and every copy), CE marks, trimmed packets, bad ICRCs.

A go-back-N QP's data (wire.DATA_GBN: RoCEv2 RC without selective repeat) is taken only in PSN order, as an
RC responder does: the expected PSN is acknowledged (an ACK covers every PSN up to its own), a duplicate is
acknowledged with the last PSN taken, and a PSN past the expected one is dropped, the first such of a
sequence error answered by one NAK carrying the expected PSN (the next NAK only after it came).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from controller.plan.evs import Ev
from endpoint.wire import ACK, DATA, DATA_GBN, NACK, PROBE, PROBE_ACK, REV_PROBE, REV_PROBE_ACK, AckHeader, DataHeader, Received, ev_of

PSN_MASK = 0xFFFFFF


def reorder_bucket(distance: int) -> str:
    """'0' in order, then '1', '2-3', '4-7', ... (powers of two)."""
    if distance <= 0:
        return "0"
    lo = 1 << (distance.bit_length() - 1)
    return str(lo) if lo == 1 else f"{lo}-{2 * lo - 1}"


@dataclass
class QpRx:
    """What arrived on one (sender, QP)."""

    sender: str
    qp: int
    expected: int
    start_psn: int
    received: int = 0
    duplicated: int = 0
    ecn: int = 0
    trimmed: int = 0
    icrc_bad: int = 0
    per_ev: dict[int, int] = field(default_factory=dict)  # distinct PSNs by the EV of their first copy
    carried: dict[int, int] = field(default_factory=dict)  # every copy with a good ICRC by its EV (duplicates too)
    reorder: dict[str, int] = field(default_factory=dict)
    highest: int = -1
    seen: set[int] = field(default_factory=set)
    in_order: bool = False  # a go-back-N QP: PSNs taken only in order
    next_offset: int = 0  # in order: the expected PSN (as an offset from start_psn)
    nak_out: bool = False  # in order: the sequence error's NAK is sent, the expected PSN has not come since
    out_of_sequence: int = 0  # in order: PSNs past the expected one, dropped

    @property
    def lost(self) -> int:
        return max(0, self.expected - self.received)

    def to_json(self) -> dict[str, Any]:
        return {"sender": self.sender, "qp": self.qp, "expected": self.expected, "received": self.received,
                "lost": self.lost, "duplicated": self.duplicated, "ecn": self.ecn, "trimmed": self.trimmed,
                "icrc_bad": self.icrc_bad, "out_of_sequence": self.out_of_sequence, "per_ev": {str(k): v for k, v in sorted(self.per_ev.items())},
                "carried": {str(k): v for k, v in sorted(self.carried.items())},
                "reorder": dict(sorted(self.reorder.items(), key=lambda kv: int(kv[0].split("-")[0])))}


@dataclass(frozen=True)
class Reply:
    """An ACK to send back to `peer` on EV `ev` (its reverse carrier) for QP `qp`, PSN `psn`."""

    peer: str
    ev: Ev
    qp: int
    psn: int
    header: AckHeader


@dataclass(frozen=True)
class RevProbe:
    """A probe of reverse EV `ev` towards `peer` (sent with QP 0, PSN 0), answered by the peer's sender."""

    peer: str
    ev: Ev
    header: DataHeader


class ReceiverCore:
    """One host's receiving transport. `peers`: this host's EVs per peer host (its reverse paths).

    Acknowledgements ride a reverse EV set: per (peer, plane) one EV, at first the reverse of the data's own
    EV. With `rev_probe_every` (seconds, 0: off) the receiver probes, while a peer's data keeps coming, one
    reverse EV of each plane per interval, in turn; the EV of an answered probe becomes that plane's
    reverse EV, so the set holds EVs known to work (the production paper's reverse EV set)."""

    def __init__(self, host: str, peers: dict[str, list[Ev]], bin_ms: float = 20.0, rev_probe_every: float = 0.0) -> None:
        self.host = host
        self.reverse = {(p, e.id): e for p, evs in peers.items() for e in evs}
        self.planes: dict[tuple[str, int], list[int]] = {}  # (peer, plane) -> its EV ids, in order
        for p, evs in peers.items():
            for e in sorted(evs):
                self.planes.setdefault((p, e.plane), []).append(e.id)
        self.reverse_ev: dict[tuple[str, int], int] = {}  # (peer, plane) -> the EV its acknowledgements ride
        self.reverse_changes: list[tuple[float, str, int, int]] = []  # (t, peer, plane, ev)
        self.rev_probe_every = rev_probe_every
        self.rev_next: dict[tuple[str, int], int] = {}  # (peer, plane) -> when its next probe is due (ns)
        self.rev_out: dict[tuple[str, int], tuple[int, int]] = {}  # (peer, plane) -> (EV, sent ns) of the probe out
        self.rev_turn: dict[tuple[str, int], int] = {}
        self.last_data: dict[str, int] = {}  # peer -> when its data last arrived (ns)
        self.rev_probes = 0
        self.rev_answers = 0
        self.by_addr = {e.dst: p for p, evs in peers.items() for e in evs}  # a peer's NIC address -> the peer
        self.qps: dict[tuple[str, int], QpRx] = {}
        self.bin_ns = int(bin_ms * 1e6)
        self.bins: dict[int, int] = {}  # distinct data packets per time bin (goodput)
        self.unknown = 0  # RoCEv2 packets from no peer, or on an EV with no reverse path
        self.trimmed_unmatched = 0  # trimmed before any whole packet of its QP came (or a trimmed probe): NACKed
        self.probes = 0
        self.ports = 0  # this host's port-state bitmap (bit p: its plane-p NIC is up; 0: unknown), in every ACK

    def on_packet(self, rx: Received, now_ns: int) -> Reply | None:
        peer = self.by_addr.get(rx.src)
        ev_id = ev_of(rx.sport)
        if peer is None or ev_id is None or (peer, ev_id) not in self.reverse:
            self.unknown += 1
            return None
        ev = self._reverse(peer, self.reverse[peer, ev_id])  # every acknowledgement rides the reverse EV set
        if rx.trimmed:  # headers only: the BTH says which PSN to ask for again
            q = self.qps.get((peer, rx.qp))
            if q is not None:
                q.trimmed += 1
                if q.in_order:  # lost like any PSN the receiver did not take: the sequence error's NAK, once
                    offset = (rx.psn - q.start_psn) & PSN_MASK
                    return None if q.nak_out or offset < q.next_offset else self._nak(q, peer, ev, ev_id, rx.flow_label)
            else:
                self.trimmed_unmatched += 1
            # the payload is gone; the flow label says which transmission it was (wire.tx_stamp)
            return Reply(peer, ev, rx.qp, rx.psn, AckHeader(NACK, ev_id, 0, rx.flow_label, rx.ecn == 3, self.ports))
        header = DataHeader.unpack(rx.body)
        if header is None:
            self.unknown += 1
            return None
        if header.kind == REV_PROBE:
            return None  # another receiver's probe: the sender process of this host answers it
        if header.kind == PROBE:
            self.probes += 1
            return Reply(peer, ev, rx.qp, rx.psn, AckHeader(PROBE_ACK, ev_id, header.ev_seq, header.tx_ns,
                                                            ports=self.ports))
        if header.kind not in (DATA, DATA_GBN):
            self.unknown += 1
            return None
        self.last_data[peer] = now_ns
        q = self.qps.get((peer, rx.qp))
        if q is None:
            q = self.qps[peer, rx.qp] = QpRx(peer, rx.qp, header.total, header.start_psn,
                                             in_order=header.kind == DATA_GBN)
        if not rx.icrc_ok:
            q.icrc_bad += 1
            return None
        ce = rx.ecn == 3
        if ce:
            q.ecn += 1
        offset = (rx.psn - q.start_psn) & PSN_MASK
        psn = rx.psn
        if q.in_order and offset > q.next_offset:  # a PSN sequence error: dropped
            q.out_of_sequence += 1
            return None if q.nak_out else self._nak(q, peer, ev, ev_id, header.tx_ns, ce)
        q.carried[ev_id] = q.carried.get(ev_id, 0) + 1
        if q.in_order and offset < q.next_offset:
            q.duplicated += 1
            psn = q.start_psn + q.next_offset - 1  # acknowledged with the last PSN taken
        elif offset in q.seen:
            q.duplicated += 1
        else:
            q.seen.add(offset)
            q.received += 1
            q.per_ev[ev_id] = q.per_ev.get(ev_id, 0) + 1
            bucket = reorder_bucket(q.highest - offset)
            q.reorder[bucket] = q.reorder.get(bucket, 0) + 1
            q.highest = max(q.highest, offset)
            if self.bin_ns:
                b = now_ns // self.bin_ns
                self.bins[b] = self.bins.get(b, 0) + 1
            if q.in_order:
                q.next_offset, q.nak_out = offset + 1, False
        return Reply(peer, ev, rx.qp, psn & PSN_MASK, AckHeader(ACK, ev_id, header.ev_seq, header.tx_ns, ce, self.ports))

    def _nak(self, q: QpRx, peer: str, ev: Ev, ev_id: int, tx_ns: int, ce: bool = False) -> Reply:
        """The NAK of a go-back-N QP's sequence error: the expected PSN, once until it comes."""
        q.nak_out = True
        return Reply(peer, ev, q.qp, (q.start_psn + q.next_offset) & PSN_MASK,
                     AckHeader(NACK, ev_id, 0, tx_ns, ce, self.ports))

    def _reverse(self, peer: str, ev: Ev) -> Ev:
        """The EV an acknowledgement of data that came on `ev` rides: its plane's reverse EV."""
        rid = self.reverse_ev.get((peer, ev.plane))
        return ev if rid is None else self.reverse.get((peer, rid), ev)

    def tick(self, now_ns: int) -> list[RevProbe]:
        """The reverse probes due now: per plane of every peer whose data came within the last 4 intervals,
        one per interval on the plane's next EV in turn (an unanswered one is given up after the interval)."""
        if not self.rev_probe_every:
            return []
        every = int(self.rev_probe_every * 1e9)
        out = []
        for (peer, plane), ids in self.planes.items():
            key = (peer, plane)
            if now_ns - self.last_data.get(peer, -(1 << 62)) > 4 * every or now_ns < self.rev_next.get(key, 0):
                continue
            turn = self.rev_turn.get(key, 0)
            self.rev_turn[key] = turn + 1
            ev = self.reverse[peer, ids[turn % len(ids)]]
            self.rev_out[key] = (ev.id, now_ns)
            self.rev_next[key] = now_ns + every
            self.rev_probes += 1
            out.append(RevProbe(peer, ev, DataHeader(REV_PROBE, self.host, ev.id, turn, 0, 0, now_ns)))
        return out

    def on_ack(self, peer: str, ack: AckHeader, now_ns: int) -> bool:
        """An answer to a reverse probe: its EV becomes its plane's reverse EV. Whether it was one."""
        if ack.kind != REV_PROBE_ACK or (peer, ack.ev) not in self.reverse:
            return False
        plane = self.reverse[peer, ack.ev].plane
        out = self.rev_out.get((peer, plane))
        if out is None or out[0] != ack.ev or out[1] != ack.tx_ns:
            return False  # not the probe out now (a late answer of an earlier one)
        del self.rev_out[peer, plane]
        self.rev_answers += 1
        if self.reverse_ev.get((peer, plane)) != ack.ev:
            self.reverse_ev[peer, plane] = ack.ev
            self.reverse_changes.append((round(now_ns / 1e9, 6), peer, plane, ack.ev))
        return True

    def expected_total(self) -> int:
        return sum(q.expected for q in self.qps.values())

    def received_total(self) -> int:
        return sum(q.received for q in self.qps.values())

    def to_json(self) -> dict[str, Any]:
        return {"host": self.host, "unknown": self.unknown, "probes": self.probes,
                "reverse_probes": self.rev_probes, "reverse_answers": self.rev_answers,
                "reverse_changes": [list(c) for c in self.reverse_changes],
                "trimmed_unmatched": self.trimmed_unmatched,
                "qps": [q.to_json() for q in sorted(self.qps.values(), key=lambda q: (q.sender, q.qp))],
                "bins": {str(k): v for k, v in sorted(self.bins.items())}, "bin_ms": self.bin_ns / 1e6}
