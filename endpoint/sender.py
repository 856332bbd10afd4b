"""The sender side of an endpoint-mode NIC: QPs, PSNs, EV choice, selective ACKs, retransmission on another EV, probes.

`SenderCore` is the transport without sockets: `next_packet(now)` gives what to transmit next (a
data packet, new or resent, in PSN order per QP and within each QP's window), `on_ack(...)` takes
the receiver's per-PSN ACK/NACK, `tick(now)` runs the timers (retransmission timeouts, probes of
failed EVs). Times are seconds on one monotonic clock. The socket loop that drives it in a lab
host is `run` (endpoint.host).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

from controller.plan.evs import Ev
from endpoint.cc import Dctcp
from endpoint.ev import EvConfig, EvEvents, EvState, EvTable, default_min_active, split_active
from endpoint.policy import Flow, Policy
from endpoint.rto import HostRtt
from endpoint.wire import DATA, DATA_GBN, NACK, PROBE, PROBE_ACK, REV_PROBE, REV_PROBE_ACK, AckHeader, DataHeader, tx_stamp

PSN_MASK = 0xFFFFFF
QP_MASK = 0xFFFFFF  # the BTH's destination QP, 24 bits (IBTA 9.2)
PROBE_QP = 0  # the QP number probes carry (data QPs start at SenderConfig.qp_base)
MAX_BACKOFF = 6  # RFC 6298 5.5: the timer doubles on every expiry of a packet's retransmissions, up to 64x


def backoff(attempt: int) -> int:
    """The retransmission timer's multiplier for a packet's transmission number `attempt` (0: first)."""
    return 2 ** min(max(attempt, 0), MAX_BACKOFF)


@dataclass(frozen=True)
class Tx:
    """One packet to put on the wire: to `dst` on EV `ev`, QP `qp` with PSN `psn` and this header."""

    dst: str
    ev: int
    qp: int
    psn: int
    header: DataHeader


@dataclass
class Outstanding:
    seq: int
    ev: int
    ev_seq: int
    tx: float
    tx_ns: int
    attempt: int
    first_tx: float
    first_tx_ns: int


@dataclass
class QpState:
    """One QP to one destination: what is sent, acknowledged, outstanding and lost."""

    dst: str
    qp: int
    index: int
    start_psn: int
    total: int
    per_message: int
    flow: Flow
    table: EvTable  # the QP's own EVs (a view sharing the destination's EV health)
    next_seq: int = 0
    acked: set[int] = field(default_factory=set)
    outstanding: dict[int, Outstanding] = field(default_factory=dict)
    first_tx: dict[int, tuple[float, int]] = field(default_factory=dict)
    attempts: dict[int, int] = field(default_factory=dict)  # seq -> transmissions so far
    lost_first_tx: dict[int, tuple[float, int]] = field(default_factory=dict)  # seq -> first send (s, ns), first try lost
    spurious: int = 0  # declared lost, then the first try's ACK came after all (an RTT spike, not a loss)
    retransmitted: int = 0
    trims: int = 0
    ecn: int = 0
    duplicate_acks: int = 0
    per_ev: dict[int, int] = field(default_factory=dict)
    recovery: list[float] = field(default_factory=list)  # first send -> acknowledged, for packets resent
    lost_how: dict[int, tuple[float, str, float]] = field(default_factory=dict)  # seq -> (lost send, how seen, SRTT then)
    resend_delays: dict[str, list[float]] = field(default_factory=dict)  # how seen -> lost send to its resend (s)
    resend_rtts: dict[str, list[float]] = field(default_factory=dict)  # how seen -> that delay in the EV's SRTTs
    cc: Dctcp | None = None  # the congestion window (SenderConfig.cc), else the fixed window
    rewinds: int = 0  # go-back-N: times the QP went back to a lost PSN and sent everything from it again

    @property
    def done(self) -> bool:
        return len(self.acked) >= self.total


@dataclass
class SenderConfig:
    """QPs per destination, messages per destination (round-robined over the QPs), packets per
    message, payload bytes, window (unacknowledged packets per QP), EV policy and count."""

    qps: int = 4
    messages: int = 64
    per_message: int = 1
    size: int = 256
    window: int = 16
    qp_base: int = 0x100
    start_psn: int = 0
    ev_count: int = 0  # 0: every EV the export gives
    evs_per_qp: int = 0  # 0: every QP sprays over all of them; m: QP k over m of them starting at EV k*m
    bin_ms: float = 20.0
    cc: bool = False  # DCTCP congestion window per QP (endpoint.cc), at most `window`
    backups_per_plane: int = 0  # EVs per plane and destination kept as backups (replace an ASSUMED_BAD one)
    ev_min_active: int | None = None  # the specification's floor: usable active EVs a loss may not go below
    # (None: ev.default_min_active, a quarter of the EVs)
    event_queue: int = 1024  # EV state change events waiting at most (more are dropped and counted)

    def __post_init__(self) -> None:
        # QPs 0 and 1 are the InfiniBand special QPs (SMI, GSI; IBTA 3.5), and probes here carry QP 0 (PROBE_QP):
        # a data QP numbered so would read as a probe's; the BTH's destination QP is 24 bits.
        if not 2 <= self.qp_base or self.qp_base + max(self.qps, 1) - 1 > QP_MASK:
            raise ValueError(f"first QP {self.qp_base} with {self.qps} QPs is outside 2-{QP_MASK} (the BTH's 24-bit QP;"
                             " 0 and 1 are the special QPs, 0 the probes')")


def choose_evs(evs: list[Ev], count: int) -> list[Ev]:
    """The first `count` EVs taking one spine of every plane in turn (count 0: all), in id order."""
    if not count or count >= len(evs):
        return sorted(evs, key=lambda e: e.id)
    chosen = sorted(evs, key=lambda e: (e.spine, e.plane))[:count]
    return sorted(chosen, key=lambda e: e.id)


def qp_evs(ids: list[int], k: int, m: int) -> list[int]:
    """QP k's EVs: m of them starting at position k*m, wrapping (m 0 or >= len: all)."""
    if not m or m >= len(ids):
        return list(ids)
    return [ids[(k * m + j) % len(ids)] for j in range(m)]


class SenderCore:
    """One host's sending transport towards its destinations (see the module docstring)."""

    def __init__(self, host: str, evs: dict[str, list[Ev]], policy: Policy, config: SenderConfig,
                 ev_config: EvConfig | None = None) -> None:
        self.host, self.policy, self.config = host, policy, config
        self.evs = {d: {e.id: e for e in choose_evs(v, config.ev_count)} for d, v in evs.items()}
        for d, v in self.evs.items():
            if not v:
                raise ValueError(f"{host} has no EV towards {d}")
        self.events = EvEvents(config.event_queue)
        self.tables: dict[str, EvTable] = {}
        for d, v in self.evs.items():
            planes = {e.id: e.plane for e in v.values()}
            ids = sorted(v)
            active = split_active(ids, planes, config.backups_per_plane)
            floor = default_min_active(len(ids), len(active)) if config.ev_min_active is None else config.ev_min_active
            self.tables[d] = EvTable(ids, ev_config, planes=planes, active=active, min_active=floor, profile=d,
                                     events=self.events)
        self.rtts = {d: HostRtt() for d in self.evs}  # per destination host, over all its EVs
        self.ev_seq: dict[tuple[str, int], int] = {}
        self.qps: dict[tuple[str, int], QpState] = {}
        self.order: list[QpState] = []
        for d in self.evs:
            counts = [0] * config.qps
            for m in range(config.messages):
                counts[m % config.qps] += 1
            for k in range(config.qps):
                qp = config.qp_base + k
                src = next(iter(self.evs[d].values())).src
                q = QpState(d, qp, k, (config.start_psn + k * 0x1000) & PSN_MASK, counts[k] * config.per_message,
                            config.per_message, Flow(src, d, 0xC000 | (qp & 0x3FFF), qp, k, config.qps),
                            self._qp_view(self.tables[d], k))
                if config.cc:
                    q.cc = Dctcp(config.window)
                self.qps[d, qp] = q
                self.order.append(q)
        self.resend: deque[tuple[QpState, int, int]] = deque()  # (qp, seq, the EV that lost it)
        self.rr = 0
        self.probes_sent = 0
        self.acked_bins: dict[int, int] = {}  # first acknowledgements per time bin
        self.ev_bins: dict[int, dict[int, int]] = {}  # per EV (dst-independent id) data packets sent per bin
        self.stalls = 0
        self.held = 0  # times a QP's packet waited because every EV of the QP was failed or probing
        self.late_acks = 0
        self.reorder_window = (ev_config or EvConfig()).reorder_window  # RACK's, doubled on each spurious loss
        self.max_reorder = max(0.05, 2 * self.reorder_window)  # up to this
        self.local_ports = 0  # this host's port-state bitmap as last read (0: unknown), in reverse probe answers
        self.go_back_n = policy.go_back_n  # RoCEv2 RC without selective repeat (policy roce-gbn)

    def _qp_view(self, table: EvTable, k: int) -> EvTable:
        """QP k's EVs: its share of the active ones, the backups its own too."""
        mine = qp_evs(table.active, k, self.config.evs_per_qp)
        return table.view(mine + [e for e in table.backup if e not in mine], active=mine)

    # --- what to send ----------------------------------------------------------------------------
    @property
    def done(self) -> bool:
        return all(q.done for q in self.order)

    def next_packet(self, now: float, now_ns: int) -> Tx | None:
        """The next data packet: a retransmission first, else a new packet of the next QP with room.
        A QP the policy holds (every EV failed: data waits for a probe's answer) sends neither."""
        for table in self.tables.values():
            table.clock[0] = now  # the time of any backup replacement the policy's choice makes
        for _ in range(len(self.resend)):
            q, seq, lost_ev = self.resend.popleft()
            if seq in q.acked or seq in q.outstanding:
                continue
            if self.policy.holds(q.table):
                self.resend.append((q, seq, lost_ev))  # its turn comes again once an EV is back
                self.held += 1
                continue
            ev = self.policy.repick(q.table, q.flow, seq, lost_ev)
            q.retransmitted += 1
            lost = q.lost_how.pop(seq, None)
            if lost is not None:
                sent, how, srtt = lost
                q.resend_delays.setdefault(how, []).append(now - sent)
                q.resend_rtts.setdefault(how, []).append((now - sent) / srtt)
            return self._send(q, seq, ev, now, now_ns)
        n = len(self.order)
        for i in range(n):
            q = self.order[(self.rr + i) % n]
            if q.next_seq < q.total and len(q.outstanding) < (self.config.window if q.cc is None else q.cc.window):
                if self.policy.holds(q.table):
                    self.held += 1
                    continue
                self.rr = (self.rr + i + 1) % n
                seq = q.next_seq
                q.next_seq += 1
                if seq in q.attempts:  # go-back-N: sent before, and the receiver dropped it (or it was lost)
                    q.retransmitted += 1
                elif seq % q.per_message == 0:
                    self.policy.on_message(q.table, q.flow, seq, min(q.per_message, q.total - seq))
                return self._send(q, seq, self.policy.pick(q.table, q.flow, seq), now, now_ns)
        if not self.done:
            self.stalls += 1
        return None

    def _send(self, q: QpState, seq: int, ev: int, now: float, now_ns: int) -> Tx:
        """Transmission number `attempt` of packet `seq` (0 the first, one more for every retransmission: its
        retransmission timer is backoff(attempt) times the RTO)."""
        key = (q.dst, ev)
        ev_seq = self.ev_seq.get(key, 0)
        self.ev_seq[key] = ev_seq + 1
        first, first_ns = q.first_tx.setdefault(seq, (now, now_ns))
        attempt = q.attempts.get(seq, 0)
        q.attempts[seq] = attempt + 1
        q.outstanding.pop(seq, None)
        q.outstanding[seq] = Outstanding(seq, ev, ev_seq, now, now_ns, attempt, first, first_ns)
        q.per_ev[ev] = q.per_ev.get(ev, 0) + 1
        self.tables[q.dst][ev].on_sent(now)
        b = self._bin(now_ns)
        per = self.ev_bins.setdefault(ev, {})
        per[b] = per.get(b, 0) + 1
        header = DataHeader(DATA_GBN if self.go_back_n else DATA, self.host, ev, ev_seq, q.total, q.start_psn, now_ns, min(attempt, 255))
        return Tx(q.dst, ev, q.qp, (q.start_psn + seq) & PSN_MASK, header)

    def _bin(self, now_ns: int) -> int:
        return int(now_ns // (self.config.bin_ms * 1e6))

    # --- what comes back -------------------------------------------------------------------------
    def on_ack(self, dst: str, qp: int, psn: int, ack: AckHeader, now: float, now_ns: int) -> None:
        table = self.tables.get(dst)
        if table is None or ack.ev not in table.health:
            return
        if ack.ports:  # the destination's port-state bitmap: a plane down there is not used from now on
            table.set_ports(ack.ports, now, remote=True)
        rtt = (now_ns - ack.tx_ns) / 1e9  # of the transmission this ACK echoes (RFC 7323 4: its timestamp)
        if ack.kind == PROBE_ACK:
            table[ack.ev].on_probe_ack(now, rtt)
            self.rtts[dst].sample(rtt)
            return
        if ack.kind == NACK and qp == PROBE_QP:  # a trimmed probe: the path delivered its headers, congested
            table[ack.ev].on_probe_ack(now)  # (no RTT sample: the trimmed header overtook the queue)
            return
        q = self.qps.get((dst, qp))
        if q is None:
            return
        seq = (psn - q.start_psn) & PSN_MASK
        if self.go_back_n:
            self._gbn_ack(q, seq, ack, rtt, now, now_ns)
            return
        out = q.outstanding.get(seq)
        if ack.kind == NACK:
            q.trims += 1
            table[ack.ev].on_nack(now)
            self._marked(q, table[ack.ev].stats.srtt, now)
            if out is not None and out.ev == ack.ev and tx_stamp(out.tx_ns) == ack.tx_ns:  # this transmission's
                del q.outstanding[seq]
                self.policy.on_done(q.flow, out.ev)
                q.lost_how[seq] = (out.tx, "nack", self._srtt(table[ack.ev].stats.srtt))
                self.resend.appendleft((q, seq, ack.ev))  # trimmed: resend now, not after an RTO
            return
        if seq not in q.acked:  # a duplicate acknowledges nothing new: no window growth, no mark
            if ack.ce:
                q.ecn += 1
                self._marked(q, table[ack.ev].stats.srtt, now)
            elif q.cc is not None:
                q.cc.on_ack()
        if out is None or out.tx_ns != ack.tx_ns:  # an earlier transmission's ACK, or a duplicate
            lost = q.lost_first_tx.get(seq)
            if lost is not None and lost[1] == ack.tx_ns:  # the first try arrived after all
                del q.lost_first_tx[seq]
                q.spurious += 1
                self.reorder_window = min(2 * self.reorder_window, self.max_reorder)  # RFC 8985 7.2: widen on a spurious loss
            if seq in q.acked:
                q.duplicate_acks += 1
            else:
                self.late_acks += 1
                self._acked(q, seq, now, now_ns, out)
            # no RTT sample (Karn, RFC 6298 3): an ACK of a transmission declared lost is the outlier that made it
            # look lost; sampled, it raised the RTO after every CPU stall on the lab and slowed cut detection
            table[ack.ev].on_late_ack(now, ack.tx_ns)  # its loss made the EV ASSUMED_BAD: queued, not lost
            table[ack.ev].on_ack(now, None, ack.ce)
            return
        self._acked(q, seq, now, now_ns, out)
        table[ack.ev].on_ack(now, rtt, ack.ce)
        self.rtts[dst].sample(rtt)  # (a NACK's is none: the trimmed header overtook the queue)
        # An EV with a carrier is one FIFO path: what was sent on it before this packet and is still
        # unacknowledged is lost. (A leaf-spray EV is many paths: there, only timeouts tell.)
        if self.evs[dst][ack.ev].carrier:
            for oq, o in [x for x in self._on_ev(dst, ack.ev) if x[1].ev_seq < ack.ev_seq]:
                self._lost(oq, o, now, "sack")
        # RACK (RFC 8985), per QP: a packet of this QP sent a reordering window before the one now acknowledged,
        # and older than an RTT plus that window, is lost whatever its EV; a dead EV shows in about an RTT.
        reo = self.reorder_window
        srtt = table[ack.ev].stats.srtt or 0.0
        for o in [o for o in q.outstanding.values() if o.tx + reo < out.tx and now - o.tx > srtt + reo]:
            self._lost(q, o, now, "sack")

    def _gbn_ack(self, q: QpState, seq: int, ack: AckHeader, rtt: float, now: float, now_ns: int) -> None:
        """Go-back-N, the receiver taking PSNs only in order: an ACK acknowledges every PSN up to its own; a NAK
        (PSN sequence error) says the receiver expects `seq` and dropped what came after it: back to `seq`."""
        table = self.tables[q.dst]
        out = q.outstanding.get(seq)
        fresh = ack.kind != NACK and out is not None and out.tx_ns == ack.tx_ns
        for s in range(len(q.acked), min(seq if ack.kind == NACK else seq + 1, q.total)):  # (acked: a prefix)
            self._acked(q, s, now, now_ns, q.outstanding.get(s))
        q.next_seq = max(q.next_seq, len(q.acked))
        if ack.kind == NACK:
            if seq == len(q.acked) < q.next_seq:
                self._go_back(q, seq)
            return
        if ack.ce:
            q.ecn += 1
        table[ack.ev].on_ack(now, rtt if fresh else None, ack.ce)  # (Karn: no sample from another transmission's)
        if fresh:
            self.rtts[q.dst].sample(rtt)

    def _go_back(self, q: QpState, seq: int) -> None:
        """Go-back-N: every PSN from `seq` on is sent again in order; what is in flight after it is given up
        (the receiver drops it). No EV evidence: a single-path RoCE NIC has no other path."""
        for o in [o for o in q.outstanding.values() if o.seq >= seq]:
            del q.outstanding[o.seq]
            self.policy.on_done(q.flow, o.ev)
            if o.attempt == 0:
                q.lost_first_tx[o.seq] = (o.first_tx, o.first_tx_ns)
        q.next_seq = seq
        q.rewinds += 1

    def _acked(self, q: QpState, seq: int, now: float, now_ns: int, out: Outstanding | None) -> None:
        if out is not None:
            q.outstanding.pop(seq, None)
            self.policy.on_done(q.flow, out.ev)
            if out.attempt:
                q.recovery.append(now - out.first_tx)
        q.acked.add(seq)
        b = self._bin(now_ns)
        self.acked_bins[b] = self.acked_bins.get(b, 0) + 1

    @staticmethod
    def _srtt(srtt: float | None) -> float:
        return srtt if srtt else 1e-3  # before any RTT sample: 1 ms, the lab's order of magnitude

    def _marked(self, q: QpState, srtt: float | None, now: float) -> None:
        """A CE echo or a NACK: the congestion window's DCTCP reduction."""
        if q.cc is not None:
            q.cc.on_mark(now, srtt or self.tables[q.dst].config.min_rto)

    def rto(self, dst: str, ev: int) -> float:
        """An EV's retransmission timeout: its own (RFC 6298), never below its destination host's (HostRtt)."""
        table = self.tables[dst]
        return max(table[ev].rto(), self.rtts[dst].rto(table.config.min_rto, table.config.max_rto))

    def _on_ev(self, dst: str, ev: int) -> list[tuple[QpState, Outstanding]]:
        return [(q, o) for q in self.order if q.dst == dst for o in q.outstanding.values() if o.ev == ev]

    def _lost(self, q: QpState, out: Outstanding, now: float, how: str) -> None:
        """A transmission is lost: tell its EV, and queue the packet for another EV."""
        table = self.tables[q.dst]
        q.outstanding.pop(out.seq, None)
        self.policy.on_done(q.flow, out.ev)
        if out.attempt == 0:
            q.lost_first_tx[out.seq] = (out.first_tx, out.first_tx_ns)
        q.lost_how[out.seq] = (out.tx, how, self._srtt(table[out.ev].stats.srtt))
        if q.cc is not None:
            q.cc.on_loss(now, table[out.ev].stats.srtt or table.config.min_rto)
        before = table[out.ev].state
        if how == "sack":
            table[out.ev].on_sack_loss(now, out.tx_ns)
        else:
            table[out.ev].on_timeout(now, out.tx_ns)
        self.resend.append((q, out.seq, out.ev))
        if before != EvState.ASSUMED_BAD and table[out.ev].state == EvState.ASSUMED_BAD:
            for oq, o in self._on_ev(q.dst, out.ev):  # the path is dead: everything on it is lost
                self._lost(oq, o, now, "timeout")

    # --- timers ----------------------------------------------------------------------------------
    def tick(self, now: float, now_ns: int) -> list[Tx]:
        """Retransmission timeouts, and probes for the failed EVs that are due one."""
        for q in self.order:
            for o in list(q.outstanding.values()):
                if o.seq in q.outstanding and now - o.tx >= self.rto(q.dst, o.ev) * backoff(o.attempt):
                    if self.go_back_n:
                        self._go_back(q, len(q.acked))  # the oldest unacknowledged PSN and all after it
                        break
                    self._lost(q, o, now, "timeout")
        probes = []
        for dst, table in self.tables.items():
            for ev in table.tick(now):
                table[ev].on_probe_sent(now, self.rto(dst, ev))
                self.probes_sent += 1
                probes.append(Tx(dst, ev, PROBE_QP, 0, DataHeader(PROBE, self.host, ev, 0, 0, 0, now_ns)))
        return probes

    def next_timer(self, now: float) -> float:
        """When `tick` has something to do next (at most 5 ms away)."""
        t = now + 0.005
        for q in self.order:
            for o in q.outstanding.values():
                t = min(t, o.tx + self.rto(q.dst, o.ev) * backoff(o.attempt))
        for table in self.tables.values():
            for h in table.health.values():
                if h.probed:  # ASSUMED_BAD, or on probation
                    t = min(t, h.next_probe if h.probe_deadline is None else h.probe_deadline)
                if h.congested:
                    t = min(t, h.congested_until)
        return t

    def answer_probe(self, peer: str, header: DataHeader) -> tuple[Ev, AckHeader] | None:
        """A destination's receiver probed one of its reverse EVs towards this host (wire.REV_PROBE): the
        answer, on this host's EV with the same id (the probe's path back), or None if there is none."""
        ev = self.evs.get(peer, {}).get(header.ev)
        if ev is None or header.kind != REV_PROBE:
            return None
        return ev, AckHeader(REV_PROBE_ACK, header.ev, header.ev_seq, header.tx_ns, ports=self.local_ports)

    def set_local_ports(self, ports: int, now: float) -> None:
        """This host's port-state bitmap (bit p: its plane-p NIC is up): EVs of a plane whose port is down are
        not used, towards every destination, until it is up again (the local remap)."""
        self.local_ports = ports
        for table in self.tables.values():
            table.set_ports(ports, now, remote=False)

    # --- the controller's operations --------------------------------------------------------------
    def _table(self, dst: str) -> EvTable:
        table = self.tables.get(dst)
        if table is None:
            raise ValueError(f"{self.host} has no EVs towards '{dst}' (destinations: {', '.join(sorted(self.tables))})")
        return table

    def _health(self, dst: str, ev: int) -> EvTable:
        table = self._table(dst)
        if ev not in table.health:
            raise ValueError(f"{self.host} has no EV {ev:#x} towards {dst} (EVs: {', '.join(f'{e:#x}' for e in table.ids)})")
        return table

    def query(self, dst: str | None = None) -> list[dict[str, Any]]:
        """QUERY_EV_STATE over every EV (of one destination): its state, plane and whether it is active."""
        out = []
        for d in [dst] if dst is not None else sorted(self.tables):
            table = self._table(d)
            table.active_set()
            for ev in table.ids:
                h = table[ev]
                out.append({"profile": d, "ev": ev, "port": h.plane, "state": h.state.value,
                            "active": ev in table.active, "gray": h.gray, "need": h.need,
                            "weight": round(h.weight, 4), "probation": h.probation})
        return out

    def set_state(self, dst: str, ev: int, state: EvState, now: float) -> None:
        """MODIFY_EV_STATE (DENIED: the controller's denylist; another state takes a denied EV back)."""
        self._health(dst, ev)[ev].set_state(now, state, "denied by the controller" if state == EvState.DENIED
                                            else "set by the controller")

    def replace(self, dst: str, ev: int, new: int, now: float) -> None:
        """REPLACE_EV: backup EV `new` takes active EV `ev`'s place, for the destination and each QP using it."""
        table = self._health(dst, new)
        table.active_set(now)
        table.replace(ev, new, now)
        for q in self.order:
            if q.dst == dst and ev in q.table.active and new in q.table.backup:
                q.table.replace(ev, new, now)

    def requeue(self, dst: str, qp: int) -> list[int]:
        """Every packet of one QP sent and not acknowledged, queued to be sent again in PSN order, with no
        evidence against its EV (the QP moved to another NIC: what is in flight on the old one is given up);
        their sequence numbers."""
        q = self.qps[dst, qp]
        seqs = sorted(q.outstanding)
        for seq in seqs:
            out = q.outstanding.pop(seq)
            self.policy.on_done(q.flow, out.ev)
            self.resend.append((q, seq, out.ev))
        return seqs

    def control(self, request: dict[str, Any], now: float) -> dict[str, Any]:
        """One controller request as JSON ({"op": "query" | "deny" | "set_state" | "replace", "dst", "ev",
        "ev_new", "state"}) and its answer; a bad request's answer is {"error": one line}, nothing changed."""
        try:
            op = request.get("op")
            dst = request.get("dst")
            if op == "query":
                return {"host": self.host, "evs": self.query(dst)}
            if op not in ("deny", "set_state", "replace"):
                raise ValueError(f"unknown operation '{op}' (known: query, deny, set_state, replace)")
            evs = [int(e) for e in request.get("evs", [request.get("ev")]) if e is not None]
            if not isinstance(dst, str) or not evs:
                raise ValueError(f"'{op}' needs a destination and at least one EV")
            if op in ("deny", "set_state"):
                state = EvState.DENIED if op == "deny" else EvState(request.get("state"))
                for ev in evs:
                    self._health(dst, ev)
                for ev in evs:
                    self.set_state(dst, ev, state, now)
            elif op == "replace":
                new = request.get("ev_new")
                if len(evs) != 1 or new is None:
                    raise ValueError("'replace' needs one EV and its replacement (ev_new)")
                self.replace(dst, evs[0], int(new), now)
        except (ValueError, TypeError, AttributeError) as e:
            return {"error": str(e)}
        return {"host": self.host, "evs": self.query(dst)}

    # --- results ---------------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        qps = []
        for q in self.order:
            lost = sorted(t for t, _ in q.lost_first_tx.values())
            qps.append({
                "dst": q.dst, "qp": q.qp, "evs": q.table.ids, "total": q.total, "acked": len(q.acked),
                "lost_first_try": len(lost),
                "retransmitted": q.retransmitted, "rewinds": q.rewinds, "spurious": q.spurious, "trims": q.trims, "ecn": q.ecn, "duplicate_acks": q.duplicate_acks,
                "per_ev": {str(k): v for k, v in sorted(q.per_ev.items())},
                "loss_span_ms": round((lost[-1] - lost[0]) * 1e3, 3) if lost else None,
                "first_loss_s": lost[0] if lost else None, "last_loss_s": lost[-1] if lost else None,
                "lost_at_s": [round(t, 4) for t in lost],
                "max_recovery_ms": round(max(q.recovery) * 1e3, 3) if q.recovery else None,
                "cwnd_cuts": None if q.cc is None else q.cc.cuts,
                "active": list(q.table.active), "replacements": [list(r) for r in q.table.replacements],
                "resend_delay_ms": {how: [round(d * 1e3, 3) for d in ds] for how, ds in sorted(q.resend_delays.items())},
                "resend_srtts": {how: [round(r, 2) for r in rs] for how, rs in sorted(q.resend_rtts.items())}})
        return {"host": self.host, "policy": self.policy.name, "config": vars(self.config),
                "evs": {d: [{**t.to_json(), "spine": self.evs[d][t.ev].spine_name, "plane": self.evs[d][t.ev].plane,
                             "active": t.ev in table.active} for t in table.health.values()] for d, table in self.tables.items()},
                "replacements": {d: [list(r) for r in table.replacements] for d, table in self.tables.items()},
                "port_changes": {d: [list(c) for c in table.port_changes] for d, table in self.tables.items()},
                "events_dropped": self.events.dropped_total,
                "qps": qps, "probes_sent": self.probes_sent, "stalls": self.stalls, "held": self.held, "late_acks": self.late_acks,
                "reorder_window_ms": round(self.reorder_window * 1e3, 3), "acked_bins": {str(k): v for k, v in sorted(self.acked_bins.items())},
                "ev_bins": {str(e): {str(k): v for k, v in sorted(b.items())} for e, b in sorted(self.ev_bins.items())}}
