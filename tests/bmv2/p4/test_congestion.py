"""ECN CE marking and packet trimming in egress (p4/include/congestion.p4), on simple_switch_grpc with
a real bottleneck: the egress queue of one port served at a low rate (bmv2's Thrift runtime), a burst
sent into it, and every packet that comes out checked byte for byte against the form its place in
the queue allows (untouched, CE-marked, or trimmed to its headers with the trim DSCP)."""

from __future__ import annotations

import pytest
from scapy.layers.inet import UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from controller.plan.entries import TableEntry
from mininet_labs.bmv2runtime import Bmv2Runtime
from mininet_labs.roce import roce_v6
from tests.paths import UNIT_DATA
from tests.bmv2.p4.test_srv6_spray import (
    DST_DT6, DST_HOST, DST_LEAF, SPINE_A, SRC_HOST, UP_A, UP_B, carrier, my_sid, nbr_mac, outer, route, sw_mac,
)

THRESHOLDS = "IngressPipe.congestion.thresholds"
ECN_AT, TRIM_AT, TRIM_DSCP = 3, 6, 0x2E  # queue depths in packets; DSCP 46 as the trim class
BURST = 12
DRAIN_PPS = 20  # the bottleneck: a burst goes in far faster than this drains it
ECT0, CE = 0b10, 0b11


def thresholds(ecn: int, trim: int, dscp: int) -> TableEntry:
    return TableEntry(THRESHOLDS, (), "IngressPipe.congestion.set_thresholds",
                      (("ecn_qdepth", ecn), ("trim_qdepth", trim), ("trim_dscp", dscp)), is_default=True)


def burst_through_bottleneck(device, frames: list[bytes], in_port: int, out_port: int, *,
                             priority_queue: bool = False) -> list[bytes]:
    """Serve out_port at DRAIN_PPS (with priority_queue: only its queue 0, the trim class's queue 1 at once), send
    the frames at once, collect what comes out (in arrival order)."""
    runtime = Bmv2Runtime(ns=device.switch.ns)
    if priority_queue:
        runtime.set_queue_rate(DRAIN_PPS, out_port, 0)
        runtime.set_queue_rate(1_000_000, out_port, 1)
    else:
        runtime.set_queue_rate(DRAIN_PPS, out_port)
    try:
        for f in frames:
            device.switch.send(in_port, f)
        got = device.switch.receive(timeout=len(frames) / DRAIN_PPS + 2.0, count=len(frames))
    finally:
        runtime.set_queue_rate(1_000_000, out_port)
    assert {p for p, _ in got} <= {out_port}
    return [f for _, f in got]


def marks(device, port: int) -> tuple[int, int]:
    """(CE-marked, trimmed) packets the switch counted on an egress port."""
    return (device.counter("FabricEgress.congestion.ce_marked", port).packets,
            device.counter("FabricEgress.congestion.trimmed", port).packets)


def transit_frames(tc: int, opcode: int = 0x04, payload: bytes = bytes(range(200))) -> tuple[list[bytes], list[bytes]]:
    """A burst of encapsulated RoCEv2 (PSN 0..BURST-1; RC SEND ONLY unless told) arriving at a spine,
    and the inner packets."""
    inners = [bytes(roce_v6(SRC_HOST, DST_HOST, qp=9, psn=psn, tc=tc, opcode=opcode, payload=payload)[IPv6])
              for psn in range(BURST)]
    arriving = [bytes(Ether(src=nbr_mac(UP_A), dst=sw_mac(UP_A))
                      / IPv6(src="2001:db8:ff::1", dst=carrier(SPINE_A, DST_LEAF, DST_DT6), nh=41, tc=tc, fl=0x42)
                      / Raw(inner)) for inner in inners]
    return arriving, inners


def with_ecn(tc: int, ecn: int) -> int:
    return tc & ~0b11 | ecn


def forwarded(inner: bytes, tc: int) -> bytes:
    """The uN-shifted packet out of UP_B with outer Traffic Class tc."""
    return bytes(outer(carrier(DST_LEAF, DST_DT6), inner, UP_B, fl=0x42, hlim=63, tc=tc, src="2001:db8:ff::1"))


def trimmed(inner: bytes, tc: int) -> bytes:
    """What trimming leaves: outer + inner IPv6 + UDP + BTH, DSCP = trim class on both IPv6 headers
    (CE on the outer when ECN-capable), lengths true, UDP checksum 0, nothing after the BTH."""
    ip = IPv6(inner)
    ip.tc = TRIM_DSCP << 2 | ip.tc & 0b11
    ip.plen = 8 + 12
    ip[UDP].len = 8 + 12
    ip[UDP].chksum = 0
    cut = bytes(ip)[:40 + 8 + 12]
    frame = forwarded(cut, TRIM_DSCP << 2 | (CE if tc & 0b11 else 0))
    return frame[:14 + 4] + (40 + 8 + 12).to_bytes(2, "big") + frame[14 + 6:]


def spine_entries() -> list:
    return [my_sid(carrier(SPINE_A), 48, "usid_un"), route(carrier(DST_LEAF), 48, UP_B)]


def assert_follows_depth(forms: list[str], ce_at: int = ECN_AT, trim_at: int = TRIM_AT) -> None:
    """Each packet's form fits the deepest queue it can have met: packet i (in PSN order, sent in one burst)
    finds at most i packets ahead of it, so it is CE-marked only from ce_at on and trimmed only from trim_at on.
    The queue drains while the burst goes in (the sender and bmv2 share a busy machine), so the forms need
    not grow monotonically; the burst still fills the queue past both thresholds."""
    for i, form in enumerate(forms):
        assert form == "plain" or (form == "ce" and i >= ce_at) or (form == "trim" and i >= trim_at), (i, forms)
    assert forms[0] == "plain" and "trim" in forms, forms


def classify(frames: list[bytes], inners: list[bytes], tc: int) -> list[str]:
    """Each packet of the burst, in PSN order, as 'plain', 'ce' or 'trim': the form its frame matches byte
    for byte (else the test fails). Trimmed headers leave by the priority queue, so arrival order is not
    PSN order (arrivals() gives it); every PSN must come out exactly once."""
    return [form for _, form in sorted(arrivals(frames, inners, tc))]


def arrivals(frames: list[bytes], inners: list[bytes], tc: int) -> list[tuple[int, str]]:
    """(PSN, form) of each frame, in the order the frames came out."""
    got = []
    for n, frame in enumerate(frames):
        match = [(psn, name) for psn, inner in enumerate(inners)
                 for name, want in (("plain", forwarded(inner, tc)),
                                    ("ce", forwarded(inner, with_ecn(tc, CE) if tc & 0b11 else tc)),
                                    ("trim", trimmed(inner, tc))) if frame == want]
        assert match, f"frame {n} is none of the expected forms: {frame.hex()}"
        got.append(match[0])
    assert sorted(psn for psn, _ in got) == list(range(len(frames)))
    return got


def test_without_thresholds_a_queue_marks_and_trims_nothing(spray):
    spray.install(*spine_entries())
    arriving, inners = transit_frames(tc=0x68 | ECT0)
    out = burst_through_bottleneck(spray, arriving, UP_A, UP_B)
    assert out == [forwarded(i, 0x68 | ECT0) for i in inners]
    assert marks(spray, UP_B) == (0, 0)


def test_a_growing_queue_first_marks_ce_then_trims_to_the_headers(spray):
    spray.install(*spine_entries())
    spray.conn.write([("MODIFY", thresholds(ECN_AT, TRIM_AT, TRIM_DSCP))])
    tc = 0x68 | ECT0
    arriving, inners = transit_frames(tc)
    out = burst_through_bottleneck(spray, arriving, UP_A, UP_B)

    assert len(out) == BURST
    forms = classify(out, inners, tc)
    # Untouched below the ECN threshold, CE-marked from it on, trimmed from the trim threshold on.
    assert_follows_depth(forms)
    assert "ce" in forms
    assert forms.count("plain") <= ECN_AT + 1 and forms.count("plain") + forms.count("ce") <= TRIM_AT + 1
    # The switch's own counts, per egress port, equal what came out (a trimmed ECT packet is CE-marked too).
    assert marks(spray, UP_B) == (forms.count("ce") + forms.count("trim"), forms.count("trim"))
    assert marks(spray, UP_A) == (0, 0)


def test_not_ect_traffic_is_never_ce_marked_but_still_trimmed(spray):
    spray.install(*spine_entries())
    spray.conn.write([("MODIFY", thresholds(1, TRIM_AT, TRIM_DSCP))])
    tc = 0x68  # Not-ECT
    arriving, inners = transit_frames(tc)
    out = burst_through_bottleneck(spray, arriving, UP_A, UP_B)

    forms = classify(out, inners, tc)
    assert_follows_depth(forms, ce_at=1)
    assert set(forms) == {"plain", "trim"}  # with Not-ECT the "ce" form is the plain one
    assert marks(spray, UP_B) == (0, forms.count("trim"))  # nothing to mark: Not-ECT


def test_a_trimmed_header_overtakes_the_queue_it_was_trimmed_from(spray):
    """Trimming is decided in ingress, before the packet joins the congested queue, and the header goes
    out of the priority queue: it arrives before the packets that were queued ahead of it."""
    spray.install(*spine_entries())
    spray.conn.write([("MODIFY", thresholds(ECN_AT, TRIM_AT, TRIM_DSCP))])
    tc = 0x68 | ECT0
    arriving, inners = transit_frames(tc)
    order = arrivals(burst_through_bottleneck(spray, arriving, UP_A, UP_B, priority_queue=True), inners, tc)
    trims = [psn for psn, form in order if form == "trim"]
    assert trims and trims == sorted(trims) and min(trims) >= TRIM_AT  # none before the queue held TRIM_AT
    last_trim = max(i for i, (_, form) in enumerate(order) if form == "trim")
    queued_ahead = [psn for psn, form in order[last_trim + 1:] if form != "trim"]
    # Every header came out before packets queued ahead of it, which were still waiting in queue 0.
    assert queued_ahead and all(psn < min(trims) for psn in queued_ahead)
    assert marks(spray, UP_B)[1] == len(trims)


def test_a_packet_of_the_trim_class_overtakes_a_full_queue_untrimmed(spray):
    """What an endpoint marks with the trim DSCP (its NACKs, ACKs, CNPs) goes through the priority queue
    whole: sent last behind a queue above the trim threshold, it is not trimmed and arrives before them."""
    spray.install(*spine_entries())
    spray.conn.write([("MODIFY", thresholds(0, 100, TRIM_DSCP))])  # trimming on, not reached
    tc = 0x68 | ECT0
    arriving, inners = transit_frames(tc)
    nack_tc = TRIM_DSCP << 2 | ECT0
    nack_frames, nack_inners = transit_frames(nack_tc)
    out = burst_through_bottleneck(spray, [*arriving, nack_frames[0]], UP_A, UP_B, priority_queue=True)
    assert len(out) == BURST + 1
    at = out.index(forwarded(nack_inners[0], nack_tc))  # untouched: no CE, no cut
    assert at < BURST - 2
    assert [f for f in out if f != out[at]] == [forwarded(i, tc) for i in inners]  # the rest in order
    assert marks(spray, UP_B) == (0, 0)


def test_thresholds_read_back_from_the_switch(spray):
    spray.conn.write([("MODIFY", thresholds(ECN_AT, TRIM_AT, TRIM_DSCP))])
    assert spray.conn.read_default(THRESHOLDS) == [thresholds(ECN_AT, TRIM_AT, TRIM_DSCP)]


def test_a_trimmed_packet_passes_the_next_switch_length_checks(spray):
    """The trimmed packet's lengths are true: a second hop (the destination leaf's DT6) decapsulates it
    and forwards the inner headers, rather than dropping it as IPV6_LENGTH."""
    tc = 0x68 | ECT0
    _, inners = transit_frames(tc)
    frame = trimmed(inners[0], tc)
    spray.install(my_sid(carrier(DST_LEAF, DST_DT6), 64, "end_dt6"), route(DST_HOST, 128, UP_A))
    spray.switch.send(UP_B, bytes(Ether(src=nbr_mac(UP_B), dst=sw_mac(UP_B), type=0x86DD)) + frame[14:])
    received = spray.switch.receive(count=1)
    assert received, {k: v for k, v in spray.drop_counts().items() if v}
    (port, got), = received
    assert port == UP_A
    inner = IPv6(frame[14 + 40:])
    inner.tc = inner.tc | CE  # RFC 6040 4.2: the outer CE copied inward
    assert got == bytes(Ether(src=sw_mac(UP_A), dst=nbr_mac(UP_A), type=0x86DD)) + bytes(inner)


def test_eecmp_marks_and_trims_ipv4_roce_with_true_lengths_and_checksum(ecmp):
    """Both programs share the egress signals: IPv4 RoCEv2 through eecmp_qp_hash, one uplink."""
    from scapy.layers.inet import IP

    from controller.plan.entries import ActionProfileGroup, ActionProfileMember, Lpm
    from mininet_labs.roce import roce_v4

    host, uplink, profile = 1, 2, "IngressPipe.ecmp.ecmp_selector"
    dst = Lpm("::ffff:10.0.1.0", 96 + 24)
    ecmp.install(ActionProfileMember(profile, 1, "IngressPipe.ecmp.set_next_hop",
                                     (("port", uplink), ("smac", sw_mac(uplink)), ("dmac", nbr_mac(uplink)),
                                      ("member_index", 0))),
                 ActionProfileGroup(profile, 1, (1,), max_size=4),
                 TableEntry("IngressPipe.ecmp.routes", (("l3_dst", dst),), group_id=1))
    ecmp.conn.write([("MODIFY", thresholds(ECN_AT, TRIM_AT, TRIM_DSCP))])
    sent = []
    for psn in range(BURST):
        pkt = roce_v4("10.0.0.1", "10.0.1.1", qp=4, psn=psn, payload=bytes(200),
                      smac=nbr_mac(host), dmac=sw_mac(host))
        pkt[IP].tos = 0x68 | ECT0
        sent.append(pkt)
    out = burst_through_bottleneck(ecmp, [bytes(p) for p in sent], host, uplink)

    def routed(pkt, tos: int, trim: bool) -> bytes:
        p = pkt.copy()
        p[Ether].src, p[Ether].dst = sw_mac(uplink), nbr_mac(uplink)
        p[IP].ttl -= 1
        p[IP].tos = tos
        del p[IP].chksum
        if not trim:
            return bytes(p)
        p[IP].len = 20 + 8 + 12
        p[UDP].len = 8 + 12
        p[UDP].chksum = 0
        return bytes(p)[:14 + 20 + 8 + 12]

    by_psn = {}
    for frame in out:
        match = [(psn, name) for psn, pkt in enumerate(sent)
                 for name, want in (("plain", routed(pkt, 0x68 | ECT0, False)), ("ce", routed(pkt, 0x68 | CE, False)),
                                    ("trim", routed(pkt, TRIM_DSCP << 2 | CE, True))) if frame == want]
        assert match, frame.hex()
        by_psn[match[0][0]] = match[0][1]
    assert len(out) == BURST and sorted(by_psn) == list(range(BURST))
    forms = [by_psn[psn] for psn in range(BURST)]
    assert_follows_depth(forms)
    assert "ce" in forms


def test_the_runtime_cli_names_a_command_the_switch_refuses(spray):
    from mininet_labs.bmv2runtime import RuntimeCliError

    with pytest.raises(RuntimeCliError, match="no_such_command"):
        Bmv2Runtime(ns=spray.switch.ns).run("no_such_command 1")
    with pytest.raises(RuntimeCliError, match="set_queue_rate abc: .*Bad format for rate_pps"):
        Bmv2Runtime(ns=spray.switch.ns).run("set_queue_rate abc")


def test_turning_the_thresholds_off_puts_the_switch_back_to_no_marking_and_no_trimming(spray):
    """Reconciliation with the plan's resets (what `fabricctl install` does): thresholds on, then a plan
    without them, read back from the switch and seen in the packets of the same burst."""
    from controller.runtime.reconcile import apply
    from controller.routes import DEFAULT_RESETS

    on, off = thresholds(ECN_AT, TRIM_AT, TRIM_DSCP), thresholds(0, 0, 0)
    tc = 0x68 | ECT0
    assert apply(spray.conn, spine_entries(), resets=DEFAULT_RESETS).modifies == ()  # a fresh switch: already off
    assert apply(spray.conn, [*spine_entries(), on], resets=DEFAULT_RESETS).modifies == (on,)
    assert spray.conn.read_default(THRESHOLDS) == [on]
    arriving, inners = transit_frames(tc)
    assert "trim" in classify(burst_through_bottleneck(spray, arriving, UP_A, UP_B), inners, tc)

    delta = apply(spray.conn, spine_entries(), resets=DEFAULT_RESETS)
    assert (delta.inserts, delta.modifies, delta.deletes) == ((), (off,), ())
    assert spray.conn.read_default(THRESHOLDS) == [off]
    before = marks(spray, UP_B)
    assert burst_through_bottleneck(spray, arriving, UP_A, UP_B) == [forwarded(i, tc) for i in inners]
    assert marks(spray, UP_B) == before  # nothing marked or trimmed since
    assert not apply(spray.conn, spine_entries(), resets=DEFAULT_RESETS)  # nothing left to write


def test_without_the_resets_a_plan_that_drops_the_thresholds_leaves_them_on_the_switch(spray):
    """Why the resets exist: a default entry only on the switch is not the plan's to delete."""
    from controller.runtime.reconcile import apply

    on = thresholds(ECN_AT, TRIM_AT, TRIM_DSCP)
    apply(spray.conn, [*spine_entries(), on])
    assert not apply(spray.conn, spine_entries())
    assert spray.conn.read_default(THRESHOLDS) == [on]


def test_the_services_full_reconcile_also_turns_off_thresholds_the_plan_does_not_set(spray, tmp_path):
    """`fabricctl run` reconciles a switch in full when its session becomes primary (a restart, a
    takeover): like `install`, with the resets, so thresholds left on the switch go back to off."""

    from controller.planning import fabric
    from controller.service.sessions import Session
    from controller.plan.fabricplan import plan
    from controller.runtime.reconcile import apply
    from controller.routes import DEFAULT_RESETS
    from controller.service.healer import Healer
    from controller.model.topology import load

    class Ready:  # the one session the healer writes on: this switch, standing for the topology's spine
        reconcile = Session.reconcile  # the P4Runtime session's read-back and write, on this connection

        def __init__(self, name, conn):
            self.name, self.conn, self.ready = name, conn, True

    topo = load(UNIT_DATA / "two_plane_lab.yaml")
    name, on = "p0-t1-0", thresholds(ECN_AT, TRIM_AT, TRIM_DSCP)
    apply(spray.conn, [on])
    assert spray.conn.read_default(THRESHOLDS) == [on]
    events = []
    healer = Healer(topo, "srv6_spray", tmp_path / ".fabric-state.json",
                    {name: Ready(name, spray.conn)}, lambda kind, **f: events.append({"kind": kind, **f}))
    healer.reconcile_now(Ready(name, spray.conn))
    assert spray.conn.read_default(THRESHOLDS) == [thresholds(0, 0, 0)]
    assert [(e["kind"], e["switch"], e["modifies"]) for e in events] == [("reconciled", name, 1)]
    assert not apply(spray.conn, plan(fabric(topo, "srv6_spray"))[name], resets=DEFAULT_RESETS)  # the plan, exactly


@pytest.mark.parametrize("opcode, payload", [(0x11, bytes(4)), (0x81, bytes(16))], ids=["rc-ack", "cnp"])
def test_acks_and_cnps_are_ce_marked_but_never_trimmed(spray, opcode: int, payload: bytes):
    """An RC ACKNOWLEDGE (its AETH is all it carries, and the sender needs it whole) and a CNP (the
    congestion signal itself) go through a queue above the trim threshold untouched but for CE."""
    spray.install(*spine_entries())
    spray.conn.write([("MODIFY", thresholds(ECN_AT, TRIM_AT, TRIM_DSCP))])
    tc = 0x68 | ECT0
    arriving, inners = transit_frames(tc, opcode, payload)
    out = burst_through_bottleneck(spray, arriving, UP_A, UP_B)
    forms = ["plain" if f == forwarded(i, tc) else "ce" if f == forwarded(i, with_ecn(tc, CE)) else f.hex()
             for f, i in zip(out, inners)]
    assert len(out) == BURST and set(forms) == {"plain", "ce"} and forms.count("ce") > BURST - TRIM_AT - 1
    assert marks(spray, UP_B) == (forms.count("ce"), 0)


def test_a_runtime_session_sets_the_queue_per_command_and_names_a_refusal(spray):
    """The kept-open CLI the incast scenario uses: the same bottleneck as a one-shot run, then a refusal."""
    from mininet_labs.bmv2runtime import RuntimeCliError

    spray.install(*spine_entries())
    spray.conn.write([("MODIFY", thresholds(ECN_AT, TRIM_AT, TRIM_DSCP))])
    tc = 0x68 | ECT0
    arriving, inners = transit_frames(tc)
    with Bmv2Runtime(ns=spray.switch.ns).session() as cli:
        cli.run(f"set_queue_rate {DRAIN_PPS} {UP_B}")
        try:
            for f in arriving:
                spray.switch.send(UP_A, f)
            out = [f for _, f in spray.switch.receive(timeout=BURST / DRAIN_PPS + 2.0, count=BURST)]
        finally:
            cli.run(f"set_queue_rate 1000000 {UP_B}")
        forms = classify(out, inners, tc)
        assert len(out) == BURST
        assert_follows_depth(forms)
        with pytest.raises(RuntimeCliError, match="set_queue_rate abc: .*Bad format for rate_pps"):
            cli.run("set_queue_rate abc")
