"""Endpoint mode without a switch: EV export vs the plan's carriers, frame bytes, the receiver on crafted
packets (CE, trimmed, duplicate, late, bad ICRC) and sender + receiver over a simulated fabric."""

from __future__ import annotations

import heapq
import ipaddress
import json
import socket
import struct
from collections.abc import Callable

import pytest
from click.testing import CliRunner
from scapy.contrib.roce import BTH
from scapy.layers.inet import UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether

from controller import fabricops
from fabricctl.main import cli
from controller.plan.evs import Ev, export, host_evs, load_export
from controller.plan.fabricplan import plan
from controller.routes import SPRAY_DEST, SPRAY_SELECTOR, Fabric
from controller.plan.p4names import SPRAY_PATHS
from controller.model.topology import build, load
from endpoint.cc import Dctcp
from endpoint.ev import EvConfig, EvState
from endpoint.policy import make
from endpoint.receiver import ReceiverCore, reorder_bucket
from endpoint.sender import PROBE_QP, SenderConfig, SenderCore, qp_evs
from endpoint.wire import (ACK, CE, NACK, PROBE, PROBE_ACK, TRIM_DSCP, AckHeader, DataHeader, ack_frame, data_frame,
                           parse, sport_of)
from mininet_labs.roce import icrc_ok
from tests.paths import UNIT_DATA

LAB = UNIT_DATA / "two_plane_lab.yaml"
SMAC, DMAC = "02:48:00:00:00:00", "02:5f:00:00:00:00"


def lpm(ents: list, table: str, addr: str):  # noqa: ANN001, ANN201
    """The entry of `table` whose dst_addr prefix matches `addr` longest (as the switch would pick)."""
    a = ipaddress.IPv6Address(addr)
    hits = [e for e in ents if getattr(e, "table", None) == table
            and a in ipaddress.IPv6Network(f"{e.match[0][1].value}/{e.match[0][1].prefix_len}")]
    return max(hits, key=lambda e: e.match[0][1].prefix_len, default=None)


def plan_carriers(f: Fabric, src_host: str, dst_host: str) -> set[int]:
    """The carriers the plan gives the source host's leaves towards the destination host: block | a
    spray member's spine uSID | the destination uSIDs of the spray_dest entry the destination's address
    matches (given, or derived from the address: t0_usid_base + address bits 95..80, then decap_usid)."""
    out = set()
    topo = f.topo
    p = plan(f)
    for src, dst in zip(topo.hosts[src_host], topo.hosts[dst_host]):
        ents = list(p[topo.t0(src.plane, src.t0).name])
        addr = f.sids.host_v6_text(dst.plane, dst.t0, dst.slot)
        dest = lpm(ents, SPRAY_DEST, addr)
        params = dict(dest.params) if dest is not None else {}
        if "dst_usids" in params:
            dst_usids = int(params["dst_usids"])
        elif "t0_usid_base" in params:
            leaf_bits = int(ipaddress.IPv6Address(addr)) >> 80 & 0xFFFF
            dst_usids = (int(params["t0_usid_base"]) + leaf_bits) << 16 | int(params["decap_usid"])
        else:
            continue  # local_leaf / no_path: no carrier
        paths = lpm(ents, SPRAY_PATHS, addr)
        group = next(e for e in ents if getattr(e, "group_id", None) == paths.group_id and hasattr(e, "members"))
        members = [e for e in ents if getattr(e, "profile", None) == SPRAY_SELECTOR and hasattr(e, "member_id")
                   and e.member_id in group.members]
        for m in members:
            out.add(f.sids.block << 96 | int(dict(m.params)["spine_usid"]) << 80 | dst_usids << 48)
    return out


@pytest.mark.parametrize("failures", [(), (("p0-t0-0", "p0-t1-1"),), (("p1-t0-1", "p1-t1-0"), ("p0-t0-1", "p0-t1-0"))])
def test_ev_carriers_are_the_plans_carriers(failures):
    topo = load(LAB)
    f = fabricops.fabric(topo, "srv6_spray", [fabricops.link(topo, a, b) for a, b in failures])
    for src, dst in (("h0", "h2"), ("h3", "h1"), ("h1", "h2")):
        evs = host_evs(f, src, [dst])[dst]
        got = {int(ipaddress.IPv6Address(e.carrier)) for e in evs}
        assert got == plan_carriers(f, src, dst)
        assert len(got) == 4 - len(failures)
        for e in evs:
            assert e.usids == f.sids.parse(e.carrier) and e.id == e.plane << 10 | e.spine


def test_a_four_spine_export_names_every_path_and_none_to_the_hosts_own_leaf():
    f = Fabric(build(2, 4, 2, 2))
    evs = host_evs(f, "h0")
    assert evs["h1"] == []  # same leaf in both planes: no spine path
    assert [(e.plane, e.spine, e.spine_name, e.carrier) for e in evs["h2"][:2]] == [
        (0, 0, "p0-t1-0", "fcbb:bb00:1:401:fff::"), (0, 1, "p0-t1-1", "fcbb:bb00:2:401:fff::")]
    assert [e.id for e in evs["h2"]] == [0, 1, 2, 3, 1024, 1025, 1026, 1027]
    doc = json.loads(json.dumps(export(f, ["h0"])))
    assert load_export(doc, "h0") == evs
    with pytest.raises(ValueError, match="no host 'h9'"):
        load_export(doc, "h9")
    with pytest.raises(ValueError, match="unknown host 'h9'"):
        host_evs(f, "h9")


def test_fabricctl_evs_prints_exports_and_rejects_an_unknown_host(tmp_path):
    runner = CliRunner(env={"FABRIC_TOPOLOGY": None})
    r = runner.invoke(cli, ["--topology", str(LAB), "evs", "h0", "--json"], prog_name="fabricctl")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output)
    assert [e["carrier"] for e in doc["hosts"]["h0"]["h2"]] == [
        "fcbb:bb00:1:401:fff::", "fcbb:bb00:2:401:fff::", "fcbb:bb00:1001:1401:1fff::", "fcbb:bb00:1002:1401:1fff::"]
    out = tmp_path / "evs.json"
    r = runner.invoke(cli, ["--topology", str(LAB), "evs", "--export", str(out)], prog_name="fabricctl")
    assert r.exit_code == 0 and sorted(json.loads(out.read_text())["hosts"]) == ["h0", "h1", "h2", "h3"]
    r = runner.invoke(cli, ["--topology", str(LAB), "evs", "h9"], prog_name="fabricctl")
    assert r.exit_code == 2
    assert r.output.strip().splitlines()[-1].startswith("error: unknown host 'h9'")


# --- frames --------------------------------------------------------------------------------------

def ev_pair() -> tuple[Ev, Ev]:
    f = Fabric(load(LAB))
    return host_evs(f, "h0", ["h2"])["h2"][1], host_evs(f, "h2", ["h0"])["h0"][1]


def decap(frame: bytes) -> bytes:
    """What the destination leaf's End.DT6 hands the host: the inner packet in a new Ethernet header."""
    assert frame[14 + 6] == 41
    return frame[:14] + frame[14 + 40:]


def test_a_data_frame_is_the_hosts_h_encaps_to_the_carrier_around_an_intact_rocev2_packet():
    ev, _ = ev_pair()
    header = DataHeader(1, "h0", ev.id, 7, 64, 0x100, 123456789)
    frame = data_frame(SMAC, DMAC, ev.src, ev.dst, ev.carrier, 0x101, 0x105, header, 64)
    pkt = Ether(frame)
    outer, inner = pkt[IPv6], pkt[IPv6].payload
    assert (outer.src, outer.dst, outer.nh, outer.tc, outer.plen) == ("fd00::1", ev.carrier, 41, 2, len(inner))
    assert socket.inet_pton(socket.AF_INET6, outer.dst) == bytes.fromhex("fcbbbb00" "0002" "0401" "0fff") + bytes(6)
    assert (inner.src, inner.dst, inner.tc, inner[UDP].sport, inner[UDP].dport) == ("fd00::1", "fd00:0:1::1", 2,
                                                                                  0xC001, 4791)
    assert (inner[BTH].opcode, inner[BTH].dqpn, inner[BTH].psn) == (4, 0x101, 0x105)
    assert icrc_ok(decap(frame))
    rx = parse(decap(frame))
    assert (rx.qp, rx.psn, rx.sport, rx.ecn, rx.trimmed, rx.icrc_ok, rx.encapsulated) == (0x101, 0x105, sport_of(1), 2,
                                                                                           False, True, False)
    assert DataHeader.unpack(rx.body) == header and len(rx.body) == 64
    assert parse(frame).encapsulated and parse(b"\x00" * 100) is None


# --- the receiver on crafted packets -------------------------------------------------------------

def crafted(ev: Ev, psn: int, *, tc: int | None = None, trim: bool = False, corrupt: bool = False,
            seq: int = 0) -> bytes:
    frame = bytearray(decap(data_frame(SMAC, DMAC, ev.src, ev.dst, ev.carrier, 0x100, psn,
                                       DataHeader(1, "h0", ev.id, seq, 4, 0, 1000 + psn), 64)))
    if tc is not None:  # what a switch marks on the way (the ICRC leaves the traffic class out)
        frame[14] = 0x60 | tc >> 4
        frame[15] = (tc & 0xF) << 4 | frame[15] & 0xF
    if corrupt:
        frame[-10] ^= 0xFF
    if trim:  # the switch cut it to its headers (Ethernet, IPv6, UDP, BTH) and marked the trim class
        frame[14] = 0x60 | (TRIM_DSCP << 2) >> 4
        frame[15] = ((TRIM_DSCP << 2) & 0xF) << 4 | frame[15] & 0xF
        del frame[14 + 40 + 8 + 12:]
    return bytes(frame)


def test_the_receiver_acks_per_psn_echoes_ce_nacks_trimmed_packets_and_counts_reordering():
    fwd, back = ev_pair()
    r = ReceiverCore("h2", {"h0": [back]})
    replies = [r.on_packet(parse(crafted(fwd, psn, seq=psn)), 10) for psn in (0, 2)]
    assert [(x.psn, x.header) for x in replies] == [(0, AckHeader(ACK, 1, 0, 1000)), (2, AckHeader(ACK, 1, 2, 1002))]
    assert replies[0].ev == back and replies[0].peer == "h0"
    ce = r.on_packet(parse(crafted(fwd, 1, tc=CE | 0x08)), 20)  # late (one higher PSN came first) and CE-marked
    assert ce.header.ce and ce.header.kind == ACK
    dup = r.on_packet(parse(crafted(fwd, 2)), 30)
    assert dup.header.kind == ACK  # a duplicate is acknowledged again (its ACK may have been lost)
    nack = r.on_packet(parse(crafted(fwd, 3, trim=True)), 40)
    assert (nack.psn, nack.header.kind, nack.header.ev) == (3, NACK, 1)
    assert r.on_packet(parse(crafted(fwd, 3, corrupt=True)), 50) is None
    q = r.qps["h0", 0x100]
    assert (q.received, q.duplicated, q.ecn, q.trimmed, q.icrc_bad, q.lost) == (3, 1, 1, 1, 1, 1)
    assert q.reorder == {"0": 2, "1": 1} and q.per_ev == {1: 3}
    assert q.carried == {1: 4}  # the duplicate counted too; not the trimmed copy, nor the bad ICRC
    assert reorder_bucket(5) == "4-7" and reorder_bucket(1) == "1" and reorder_bucket(0) == "0"


def test_an_ack_goes_back_encapsulated_on_the_reverse_carrier_of_the_same_ev():
    fwd, back = ev_pair()
    frame = ack_frame(SMAC, DMAC, back.src, back.dst, back.carrier, 0x100, 9, AckHeader(NACK, 1, 0, 55, True))
    pkt = Ether(frame)
    assert pkt[IPv6].dst == back.carrier == "fcbb:bb00:2:400:fff::"  # same spine, the sender's leaf, End.DT6
    assert (back.plane, back.spine) == (fwd.plane, fwd.spine) and back.dst == fwd.src
    rx = parse(decap(frame))
    assert rx.opcode == 0x11 and rx.icrc_ok and rx.body[0] == 0x60  # AETH NAK
    assert AckHeader.unpack(rx.body[4:]) == AckHeader(NACK, 1, 0, 55, True)


def test_an_ack_in_the_trim_class_rides_it_inside_and_out_and_is_not_taken_for_a_trimmed_packet():
    """The receiver sends its ACKs and NACKs in the trim DSCP, so the switches' priority queue carries them
    past a congested queue (p4/include/congestion.p4); the sender must still read them whole."""
    _, back = ev_pair()
    frame = ack_frame(SMAC, DMAC, back.src, back.dst, back.carrier, 0x100, 9, AckHeader(NACK, 1, 0, 55, True),
                      dscp=TRIM_DSCP)
    pkt = Ether(frame)
    assert pkt[IPv6].tc == TRIM_DSCP << 2 | 0b10 and pkt[IPv6][1].tc == TRIM_DSCP << 2 | 0b10  # outer, inner
    rx = parse(decap(frame))
    assert rx.dscp == TRIM_DSCP and rx.icrc_ok and not rx.trimmed
    assert AckHeader.unpack(rx.body[4:]) == AckHeader(NACK, 1, 0, 55, True)
    data = data_frame(SMAC, DMAC, back.src, back.dst, back.carrier, 0x100, 9, DataHeader(1, "h0", 1, 0, 1, 0, 0), 64)
    cut = Ether(decap(data))
    cut[IPv6].tc = TRIM_DSCP << 2 | 0b10  # what a leaf's trimming leaves of a data packet: the class, lengths true
    cut[IPv6].plen = 8 + 12
    cut[UDP].len = 8 + 12
    assert parse(bytes(cut)[:14 + 40 + 8 + 12]).trimmed


def test_the_receiver_ignores_strangers_and_answers_probes():
    fwd, back = ev_pair()
    r = ReceiverCore("h2", {"h0": [back]})
    other = Ev(**{**fwd.to_json(), "src": "fd00::9"})
    assert r.on_packet(parse(crafted(other, 0)), 0) is None and r.unknown == 1
    probe = decap(data_frame(SMAC, DMAC, fwd.src, fwd.dst, fwd.carrier, 0, 0, DataHeader(2, "h0", 1, 0, 0, 0, 77), 48))
    reply = r.on_packet(parse(probe), 0)
    assert reply.header == AckHeader(PROBE_ACK, 1, 0, 77) and r.probes == 1 and not r.qps


# --- sender and receiver over a simulated fabric -------------------------------------------------

class Net:
    """Sender h0 and receiver h2 joined by real frames: each EV a FIFO path with a fixed one-way delay;
    `drop(ev, t, kind)` loses a frame, `mark(ev, t)` returns 'ce', 'trim' or None."""

    def __init__(self, policy: str, config: SenderConfig, *, delay: float = 0.001,
                 drop: Callable[[int, float, str], bool] = lambda ev, t, kind: False,
                 mark: Callable[[int, float], str | None] = lambda ev, t: None) -> None:
        f = Fabric(load(LAB))
        self.fwd = host_evs(f, "h0", ["h2"])
        self.sender = SenderCore("h0", self.fwd, make(policy), config,
                                 EvConfig(min_rto=0.01, probe_interval=0.01, max_probe_interval=0.04, recover_probes=4))
        self.receiver = ReceiverCore("h2", host_evs(f, "h2", ["h0"]))
        self.delay, self.drop, self.mark = delay, drop, mark
        self.events: list[tuple[float, int, str, bytes]] = []
        self.n = 0
        self.sent_on: list[tuple[float, int, bool]] = []  # (t, ev, probe)

    def _put(self, t: float, kind: str, frame: bytes) -> None:
        self.n += 1
        heapq.heappush(self.events, (t, self.n, kind, frame))

    def transmit(self, tx, t: float) -> None:  # noqa: ANN001
        ev = self.sender.evs["h2"][tx.ev]
        self.sent_on.append((t, tx.ev, tx.header.kind == 2))
        if self.drop(tx.ev, t, "data"):
            return
        frame = bytearray(decap(data_frame(SMAC, DMAC, ev.src, ev.dst, ev.carrier, tx.qp, tx.psn, tx.header, 64)))
        m = self.mark(tx.ev, t)
        if m == "ce":
            frame[15] |= 0x30
        elif m == "trim":
            frame[14] = 0x60 | (TRIM_DSCP << 2) >> 4
            frame[15] = ((TRIM_DSCP << 2) & 0xF) << 4 | frame[15] & 0xF
            del frame[14 + 40 + 8 + 12:]
        self._put(t + self.delay, "data", bytes(frame))

    def run(self, until: float, rate: float = 2000.0, hook: Callable[[float], None] | None = None) -> None:
        """Simulate up to `until` seconds; `hook(t)` first at every step (to change the network as time goes)."""
        t, step = 0.0, 1.0 / rate
        while t < until and not (self.sender.done and not self.events):
            if hook is not None:
                hook(t)
            while self.events and self.events[0][0] <= t:
                at, _, kind, frame = heapq.heappop(self.events)
                rx = parse(frame)
                if kind == "data":
                    reply = self.receiver.on_packet(rx, int(at * 1e9))
                    if reply is not None and not self.drop(reply.ev.id, at, "ack"):
                        e = reply.ev
                        self._put(at + self.delay, "ack",
                                  decap(ack_frame(SMAC, DMAC, e.src, e.dst, e.carrier, reply.qp, reply.psn, reply.header)))
                else:
                    self.sender.on_ack("h2", rx.qp, rx.psn, AckHeader.unpack(rx.body[4:]), at, int(at * 1e9))
            for tx in self.sender.tick(t, int(t * 1e9)):
                self.transmit(tx, t)
            tx = self.sender.next_packet(t, int(t * 1e9))
            if tx is not None:
                self.transmit(tx, t)
            t = round(t + step, 9)


def cut(ev: int, start: float, end: float) -> Callable[[int, float, str], bool]:
    return lambda e, t, kind: e == ev and start <= t < end


def test_a_cut_ev_is_failed_within_an_rtt_unused_from_then_on_and_probed_back():
    net = Net("health", SenderConfig(qps=4, messages=800, window=8), drop=cut(1, 0.05, 0.25))
    net.run(2.0)
    s, r = net.sender, net.receiver
    assert s.done and sum(q.received for q in r.qps.values()) == 800 and all(q.lost == 0 for q in r.qps.values())
    h = s.tables["h2"][1]
    # RACK: a packet sent after the EV's was acknowledged first; that one loss makes it ASSUMED_BAD
    steps = [x[1:] for x in h.transitions]
    assert steps[:2] == [("unknown", "good", "first ack"), ("good", "assumed_bad", "sack loss")]
    assert h.stats.probe_losses > 0  # probed while cut
    failed_at = h.transitions[1][0]
    assert 0.05 < failed_at <= 0.05 + 0.005 + 0.002 + 0.002  # the reordering window plus about an RTT after the cut
    back = next(t for t, _, to, why in h.transitions if to == "good" and why == "4 probes answered")
    # the first probe after the repair (backoff capped at 40 ms), then 3 more a gap (5 ms) and an RTT apart
    assert 0.25 + 3 * 0.005 <= back < 0.25 + 0.04 + 4 * (0.005 + 0.002) + 0.01
    data_while_down = [t for t, ev, probe in net.sent_on if ev == 1 and not probe and failed_at <= t < back]
    assert data_while_down == [] and h.stats.sent_while_failed == 0
    assert any(ev == 1 and not probe and t > back for t, ev, probe in net.sent_on)  # used again after repair
    lost = sum(len(q.lost_first_tx) for q in s.order)
    in_flight = [t for t, ev, probe in net.sent_on if ev == 1 and not probe and 0.05 - 0.002 <= t < failed_at]
    assert 0 < lost <= len(in_flight) + 1  # only what was sent on the EV between the cut and its detection
    assert sum(q.retransmitted for q in s.order) >= lost
    assert all(s.tables["h2"][e].state == EvState.GOOD for e in (0, 1024, 1025))
    delays = {how: d for q in s.order for how, d in q.resend_delays.items()}
    assert set(delays) <= {"sack", "timeout"} and "nack" not in delays  # a cut: seen by ACKs of later packets or RTOs
    assert sum(len(d) for q in s.order for d in q.resend_delays.values()) == sum(q.retransmitted for q in s.order)


def test_qps_whose_evs_avoid_the_cut_lose_nothing():
    net = Net("health", SenderConfig(qps=4, messages=400, window=8, evs_per_qp=2), drop=cut(1, 0.05, 0.5))
    net.run(2.0)
    assert net.sender.done
    by_qp = {q.qp: (q.table.ids, len(q.lost_first_tx)) for q in net.sender.order}
    assert by_qp[0x101][0] == by_qp[0x103][0] == [1024, 1025] and by_qp[0x101][1] == by_qp[0x103][1] == 0
    assert by_qp[0x100][0] == [0, 1] and by_qp[0x100][1] > 0
    assert qp_evs([0, 1, 2], 1, 2) == [2, 0] and qp_evs([0, 1], 3, 0) == [0, 1]


def test_when_every_ev_of_a_qp_fails_its_data_waits_for_a_probe_instead_of_taking_the_dead_path():
    # QP 0x100 has EVs 0 and 1: EV 1 is cut, and EV 0's ACKs are lost for 30 ms at the same time (what an
    # RTT spike on a busy machine looks like to the sender), so both fail. Nothing is sent on the cut EV:
    # the QP's data waits until a probe brings EV 0 back, then everything is delivered on it.
    spike = cut(0, 0.05, 0.08)
    net = Net("health", SenderConfig(qps=4, messages=400, window=8, evs_per_qp=2),
              drop=lambda ev, t, kind: (ev == 1 and 0.05 <= t < 1.0) or (kind == "ack" and spike(ev, t, kind)))
    net.run(2.0)
    s = net.sender
    assert s.done and sum(q.received for q in net.receiver.qps.values()) == 400
    h0, h1 = s.tables["h2"][0], s.tables["h2"][1]
    assert EvState.ASSUMED_BAD.value in [to for _, _, to, _ in h0.transitions]  # the spike did fail the healthy EV
    assert h1.stats.sent_while_failed == 0 and s.held > 0
    back = next(t for t, _, to, why in h0.transitions if to == "good" and why.endswith("probes answered"))
    down = next(t for t, _, to, _ in h1.transitions if to == "assumed_bad")
    data_on_1 = [t for t, ev, probe in net.sent_on if ev == 1 and not probe and down <= t < 1.0]
    assert data_on_1 == [] and back < 1.0  # EV 0 back by probing while EV 1 is still cut
    assert h0.state == EvState.GOOD and h1.state == EvState.ASSUMED_BAD


def test_a_trimmed_packet_is_resent_within_a_round_trip_not_an_rto():
    net = Net("health", SenderConfig(qps=1, messages=40, window=8),
              mark=lambda ev, t: "trim" if ev == 1024 and 0.0049 < t < 0.0051 else None)
    net.run(1.0)
    s = net.sender
    q = s.order[0]
    assert s.done and q.trims == 1 and q.retransmitted == 1 and len(q.lost_first_tx) == 0
    rtt = 2 * net.delay
    # the NACK comes back one RTT after the send, the resend is acknowledged one RTT later: well inside the RTO
    assert q.recovery and q.recovery[0] <= 2 * rtt + 1 / 2000 + 1e-9 < s.tables["h2"][1024].config.min_rto
    assert s.tables["h2"][1024].stats.nacks == 1 and s.tables["h2"][1024].stats.timeouts == 0
    assert net.receiver.qps["h0", 0x100].trimmed == 1
    # loss (the trimmed send) to resend: the NACK's round trip, then the next send slot
    (delay,) = q.resend_delays["nack"]
    assert list(q.resend_delays) == ["nack"] and rtt - 1e-9 <= delay <= rtt + 1 / 2000 + 1e-9


def test_ce_echoes_steer_data_away_from_the_ev_by_its_weight_and_clean_acks_bring_it_back():
    """EV 0's packets come back CE-marked for the first 50 ms: its weight drops, it carries a small share
    while the others carry the rest, and its share grows back with clean ACKs. The window's DCTCP
    reaction to the same echoes is as before (with `cc`)."""
    sent = {}
    for cc in (False, True):
        net = Net("health", SenderConfig(qps=1, messages=400, window=8, cc=cc),
                  mark=lambda ev, t: "ce" if ev == 0 and t < 0.05 else None)
        net.run(1.0)
        s, q = net.sender, net.sender.order[0]
        h = s.tables["h2"][0]
        assert s.done and q.ecn >= 3 and h.stats.ecn == q.ecn
        assert [x[1:] for x in h.transitions] == [("unknown", "good", "first ack")]  # congestion is no failure
        assert h.weight == 1.0  # given back by the clean ACKs after the marks

        def share(a: float, b: float) -> dict[int, int]:
            on = [ev for t, ev, probe in net.sent_on if not probe and a <= t < b]
            return {e: on.count(e) for e in (0, 1, 1024, 1025)}

        sent[cc] = [share(0.01, 0.05), share(0.05, 0.1), share(0.1, 0.2)]
        during, after, later = sent[cc]
        assert during[0] <= 2 and min(during[e] for e in (1, 1024, 1025)) >= 24  # avoided, not shut out
        assert during[0] < after[0] < later[0] and later[0] >= 0.75 * max(later.values())  # back with clean ACKs
        if cc:
            assert q.cc is not None and q.cc.cuts >= 1 and q.cc.alpha < 1  # DCTCP: cut on CE, alpha from marks
    assert sent[False] == [{0: 2, 1: 26, 1024: 26, 1025: 26}, {0: 5, 1: 32, 1024: 31, 1025: 32},
                           {0: 44, 1: 53, 1024: 52, 1025: 51}]  # deterministic: the same events, the same choices


def test_oblivious_spraying_keeps_using_a_dead_ev_and_single_path_hash_stalls_on_it():
    spray = Net("spray", SenderConfig(qps=4, messages=400, window=8), drop=cut(1, 0.05, 5.0))
    spray.run(3.0)
    assert spray.sender.done  # every packet got through, by retransmission on another EV
    assert spray.sender.tables["h2"][1].stats.sent_while_failed > 10
    health = Net("health", SenderConfig(qps=4, messages=400, window=8), drop=cut(1, 0.05, 5.0))
    health.run(3.0)
    assert health.sender.done and health.sender.tables["h2"][1].stats.sent_while_failed == 0
    lost_spray = sum(len(q.lost_first_tx) for q in spray.sender.order)
    lost_health = sum(len(q.lost_first_tx) for q in health.sender.order)
    assert lost_spray > 5 * lost_health
    hashed = Net("qp-rr", SenderConfig(qps=4, messages=400, window=8), drop=cut(1, 0.05, 5.0))
    hashed.run(1.0)
    stuck = [q for q in hashed.sender.order if not q.done]
    assert [q.qp for q in stuck] == [0x101]  # the QP on the dead EV, and only it, cannot finish


def test_a_sender_refuses_a_destination_without_evs():
    f = Fabric(load(LAB))
    with pytest.raises(ValueError, match="no EV towards h1"):
        SenderCore("h0", host_evs(f, "h0", ["h1"]), make("health"), SenderConfig())
    assert struct.calcsize(DataHeader.FMT) == DataHeader.SIZE


def test_the_congestion_window_cuts_by_half_dctcps_alpha_once_per_round_trip_and_grows_by_one_per_window():
    w = Dctcp(16)
    assert (w.window, w.alpha, w.on_mark(1.0, 0.01), w.window) == (16, 1.0, True, 8)  # alpha starts at 1: halved
    assert not w.on_mark(1.005, 0.01) and w.window == 8  # the same round trip: one cut
    w = Dctcp(4)
    for _ in range(3):
        w.on_ack()
    assert w.window == 4 and w.window_left == 1
    # the 4th packet of the window is marked: the window ends with 1 of 4 marked, alpha = 15/16 * 1 + 1/16 * 1/4
    assert w.on_mark(2.0, 0.01)
    assert w.alpha == 0.953125 and w.cwnd == 4 * (1 - 0.953125 / 2) and (w.acked, w.marked) == (0, 0)
    assert w.window_left == 4  # the next window of data: what was in flight when this one ended (SND.NXT)
    quiet = Dctcp(16, alpha=0.125)
    assert quiet.on_mark(3.0, 0.01) and quiet.cwnd == 16 * (1 - 0.125 / 2) == 15.0  # a little marking costs a little
    assert quiet.on_loss(3.02, 0.01) and quiet.cwnd == 7.5  # a loss halves, whatever alpha (RFC 8257 3.5)
    assert not quiet.on_loss(3.025, 0.01) and quiet.cuts == 2
    w = Dctcp(16, cwnd=4)
    for _ in range(4):
        w.on_ack()
    assert 4.9 < w.cwnd < 5  # +1/cwnd per ACK: about one more packet per window of ACKs
    w.on_ack()
    assert w.window == 5
    for t in range(10):
        w.on_loss(5.0 + t, 0.01)
    assert w.window == 1 and w.cwnd == 1.0 and w.cuts == 10
    with pytest.raises(ValueError, match="window 0 is below 1"):
        Dctcp(0)
    with pytest.raises(ValueError, match="DCTCP gain 0 is not in"):
        Dctcp(4, g=0)


def test_with_the_congestion_window_a_trim_halves_what_a_qp_has_in_flight():
    """RTT 10 ms against a window of 8 at 2000 packets/s: the window binds. The first packet is trimmed;
    its NACK (one RTT later) halves the window, so a round trip after that half as much is in flight."""
    first = lambda ev, t: "trim" if t < 0.0005 else None  # noqa: E731
    got = {}
    for cc in (True, False):
        net = Net("health", SenderConfig(qps=1, messages=60, window=8, cc=cc), mark=first, delay=0.005)
        net.run(0.0125)
        q = net.sender.order[0]
        got[cc] = (q.trims, len(q.outstanding), None if q.cc is None else (q.cc.cuts, q.cc.window))
    assert got == {True: (1, 4, (1, 4)), False: (1, 8, None)}
    net = Net("health", SenderConfig(qps=1, messages=60, window=8, cc=True), mark=first, delay=0.005)
    net.run(1.0)
    assert net.sender.done and net.receiver.qps["h0", 0x100].received == 60


def test_an_evs_timeout_is_never_below_its_hosts_which_learns_the_queue_from_every_ev():
    """One ACK after 40 ms on one EV (a queue at the host's leaf port) raises every EV's timeout to the
    host's RFC 6298 RTO: the packets sent on the other three EVs at the same time are not declared lost
    at their own 10 ms floor, only once the host's RTO has passed."""
    s = Net("health", SenderConfig(qps=1, messages=8, window=8)).sender
    q = s.order[0]
    txs = [s.next_packet(0.0, 0) for _ in range(4)]
    assert sorted(tx.ev for tx in txs) == [0, 1, 1024, 1025]
    first, others = txs[0], [tx.ev for tx in txs[1:]]
    s.on_ack("h2", first.qp, first.psn, AckHeader(ACK, first.ev, first.header.ev_seq, first.header.tx_ns), 0.04,
             40_000_000)
    host_rto = 0.04 + 4 * 0.02  # SRTT 40 ms, RTTVAR 20 ms after the first sample
    assert s.rtts["h2"].srtt == 0.04 and s.rto("h2", first.ev) == host_rto
    assert all(s.tables["h2"][ev].rto() == 0.01 and s.rto("h2", ev) == host_rto for ev in others)
    s.tick(0.11, 110_000_000)
    assert len(q.outstanding) == 3 and not q.lost_how
    s.tick(0.121, 121_000_000)
    assert not q.outstanding and sorted(how for _, how, _ in q.lost_how.values()) == ["timeout"] * 3


def test_a_first_trys_late_ack_completes_the_packet_as_a_spurious_loss_but_is_no_round_trip_sample():
    s = Net("health", SenderConfig(qps=1, messages=8, window=8)).sender
    q = s.order[0]
    tx = s.next_packet(0.0, 0)
    s.tick(0.0101, 10_100_000)  # the 10 ms floor: declared lost, resent on another EV
    resend = s.next_packet(0.011, 11_000_000)
    assert (resend.psn, resend.header.attempt) == (tx.psn, 1) and resend.ev != tx.ev
    s.on_ack("h2", tx.qp, tx.psn, AckHeader(ACK, tx.ev, tx.header.ev_seq, tx.header.tx_ns), 0.03, 30_000_000)
    assert q.spurious == 1 and q.acked == {0} and not q.outstanding and s.reorder_window == 0.01  # RACK widened
    assert s.tables["h2"][tx.ev].stats.srtt is None and s.rtts["h2"].samples == 0  # Karn: the outlier is no sample
    assert s.tables["h2"][tx.ev].stats.acked == 1


def test_a_trimmed_probes_nack_answers_the_probe_without_a_round_trip_sample():
    s = Net("health", SenderConfig(qps=1, messages=8, window=8)).sender
    h = s.tables["h2"][1]
    h.on_timeout(0.0)
    probes = s.tick(0.0101, 10_100_000)
    assert [(p.ev, p.qp, p.header.kind) for p in probes] == [(1, PROBE_QP, PROBE)] and h.probe_deadline is not None
    s.on_ack("h2", PROBE_QP, 0, AckHeader(NACK, 1, 0, 0), 0.0111, 11_100_000)  # the probe arrived, cut to its headers
    assert h.state == EvState.ASSUMED_BAD and h.run == 1 and h.probe_deadline is None and h.stats.probe_acks == 1
    assert h.stats.srtt is None and s.rtts["h2"].samples == 0  # the trimmed header overtook the queue: no RTT
    assert all(not q.trims for q in s.order)  # not taken for a data packet's NACK


@pytest.mark.parametrize("qp_base, qps", [(0, 4), (1, 4), (0xFFFFFF, 2), (0xFFFFFD, 4)])
def test_data_qps_never_take_the_probes_qp_nor_leave_24_bits(qp_base: int, qps: int) -> None:
    with pytest.raises(ValueError, match=rf"^first QP {qp_base} with {qps} QPs is outside 2-16777215 "):
        SenderConfig(qps=qps, qp_base=qp_base)


def test_data_qps_at_the_edges_of_the_range_are_taken() -> None:
    assert SenderConfig(qps=4, qp_base=2).qp_base == 2
    assert SenderConfig(qps=4, qp_base=0xFFFFFC).qp_base + 3 == 0xFFFFFF
