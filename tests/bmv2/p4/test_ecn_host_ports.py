"""ECN marking off on a host-facing port (the plan's `ecn_host_ports: false`, MRC's last hop), on
simple_switch_grpc with a real bottleneck (test_congestion's): a burst leaving the host port with its
set_host_port_thresholds entry comes out untouched or trimmed, never CE-marked, while the same switch
still CE-marks what leaves a fabric port; both programs, every packet checked byte for byte, and the
plan's entries written, read back and taken away again by reconciliation."""

from __future__ import annotations

from scapy.layers.inet import IP, UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from controller.plan.entries import ActionProfileMember, Exact, Lpm, TableEntry
from mininet_labs.roce import roce_v4, roce_v6
from tests.bmv2.p4.test_congestion import (
    BURST, CE, ECN_AT, ECT0, THRESHOLDS, TRIM_AT, TRIM_DSCP, assert_follows_depth, burst_through_bottleneck, classify,
    marks, spine_entries, thresholds, transit_frames,
)
from tests.bmv2.p4.test_srv6_spray import (
    DST_DT6, DST_HOST, DST_LEAF, SRC_HOST, UP_A, UP_B, carrier, my_sid, nbr_mac, route, sw_mac,
)

HOST = 1  # the host-facing port: its entry turns CE marking off
SET_HOST_PORT = "IngressPipe.congestion.set_host_port_thresholds"
TC = 0x68 | ECT0


def host_port(port: int, trim: int = TRIM_AT, dscp: int = TRIM_DSCP) -> TableEntry:
    return TableEntry(THRESHOLDS, (("port", Exact(port)),), SET_HOST_PORT, (("trim_qdepth", trim), ("trim_dscp", dscp)))


def form(frame: bytes, plain: bytes, ce: bytes, cut: bytes, cut_ce: bytes) -> str:
    for name, want in (("plain", plain), ("ce", ce), ("trim", cut), ("trim-ce", cut_ce)):
        if frame == want:
            return name
    return "none"


def by_psn(frames: list[bytes], expected: list[dict[str, bytes]]) -> list[str]:
    """Each packet's form in PSN order; every frame must be one of its packet's forms, every PSN once."""
    got: dict[int, str] = {}
    for n, frame in enumerate(frames):
        match = [(psn, name) for psn, forms in enumerate(expected) for name, want in forms.items() if frame == want]
        assert match, f"frame {n} is none of the expected forms: {frame.hex()}"
        got[match[0][0]] = match[0][1]
    assert len(frames) == BURST and sorted(got) == list(range(BURST))
    return [got[psn] for psn in range(BURST)]


# --- srv6_spray: a leaf decapsulating to its host, and transit to a fabric port ------------------

def leaf_entries() -> list:
    return [my_sid(carrier(DST_LEAF, DST_DT6), 64, "end_dt6"), route(DST_HOST, 128, HOST), *spine_entries()]


def decap_frames() -> tuple[list[bytes], list[dict[str, bytes]]]:
    """A burst arriving from a spine for DST_HOST (End.DT6 here), and each packet's forms out of HOST:
    decapsulated (RFC 6040 4.2: ECT(0) outside and in stays ECT(0)), CE-marked, trimmed with or without CE."""
    arriving, expected = [], []
    for psn in range(BURST):
        inner = roce_v6(SRC_HOST, DST_HOST, qp=9, psn=psn, tc=TC, payload=bytes(range(200)))[IPv6]
        arriving.append(bytes(Ether(src=nbr_mac(UP_A), dst=sw_mac(UP_A))
                              / IPv6(src="2001:db8:ff::1", dst=carrier(DST_LEAF, DST_DT6), nh=41, tc=TC, fl=0x42)
                              / Raw(bytes(inner))))
        eth = bytes(Ether(src=sw_mac(HOST), dst=nbr_mac(HOST), type=0x86DD))

        def out(ecn: int, trim: bool) -> bytes:
            ip = IPv6(bytes(inner))
            ip.tc = (TRIM_DSCP << 2 if trim else TC & ~0b11) | ecn
            if not trim:
                return eth + bytes(ip)
            ip.plen, ip[UDP].len, ip[UDP].chksum = 8 + 12, 8 + 12, 0
            return eth + bytes(ip)[:40 + 8 + 12]

        expected.append({"plain": out(ECT0, False), "ce": out(CE, False), "trim": out(ECT0, True),
                         "trim-ce": out(CE, True)})
    return arriving, expected


def test_a_host_port_with_marking_off_trims_but_never_marks_ce(spray):
    spray.install(*leaf_entries(), host_port(HOST))
    spray.conn.write([("MODIFY", thresholds(ECN_AT, TRIM_AT, TRIM_DSCP))])
    assert spray.conn.read_entries(THRESHOLDS) == [host_port(HOST)]
    assert spray.conn.read_default(THRESHOLDS) == [thresholds(ECN_AT, TRIM_AT, TRIM_DSCP)]
    arriving, expected = decap_frames()
    forms = by_psn(burst_through_bottleneck(spray, arriving, UP_A, HOST), expected)
    # the queue went past the ECN threshold (it trimmed, above it), and nothing is CE-marked, a trimmed header neither
    assert set(forms) <= {"plain", "trim"} and "trim" in forms, forms
    assert_follows_depth(forms)
    assert marks(spray, HOST) == (0, forms.count("trim"))


def test_the_same_switch_still_marks_ce_on_a_fabric_port(spray):
    spray.install(*leaf_entries(), host_port(HOST))
    spray.conn.write([("MODIFY", thresholds(ECN_AT, TRIM_AT, TRIM_DSCP))])
    arriving, inners = transit_frames(TC)
    forms = classify(burst_through_bottleneck(spray, arriving, UP_A, UP_B), inners, TC)
    assert "ce" in forms
    assert_follows_depth(forms)
    assert marks(spray, UP_B) == (forms.count("ce") + forms.count("trim"), forms.count("trim"))


def test_without_the_entry_the_host_port_marks_ce(spray):
    """The default entry alone (ecn_host_ports on): the host port marks like any other."""
    spray.install(*leaf_entries())
    spray.conn.write([("MODIFY", thresholds(ECN_AT, TRIM_AT, TRIM_DSCP))])
    arriving, expected = decap_frames()
    forms = by_psn(burst_through_bottleneck(spray, arriving, UP_A, HOST), expected)
    assert "ce" in forms and "trim" not in forms, forms  # a trimmed ECT header is CE-marked too
    assert marks(spray, HOST) == (forms.count("ce") + forms.count("trim-ce"), forms.count("trim-ce"))


def test_the_plans_entries_read_back_and_reconcile_removes_them_when_marking_is_back_on(spray):
    from controller.model.topology import load
    from controller.routes import DEFAULT_RESETS, Fabric, Options, congestion_thresholds
    from controller.runtime.reconcile import apply
    from tests.paths import UNIT_DATA

    topo = load(UNIT_DATA / "two_plane_lab.yaml")
    leaf = topo.switch("p0-t0-0")
    off = congestion_thresholds(Fabric(topo, options=Options(ecn_qdepth=20, trim_qdepth=48, ecn_host_ports=False)), leaf)
    want = {host_port(p, 48, 46) for p in leaf.host_ports}
    assert len(want) == 2 and set(apply(spray.conn, off, resets=DEFAULT_RESETS).inserts) == want
    assert len(spray.conn.read_entries(THRESHOLDS)) == 2 and set(spray.conn.read_entries(THRESHOLDS)) == want
    assert spray.conn.read_default(THRESHOLDS) == [thresholds(20, 48, 46)]
    on = congestion_thresholds(Fabric(topo, options=Options(ecn_qdepth=20, trim_qdepth=48)), leaf)
    delta = apply(spray.conn, on, resets=DEFAULT_RESETS)
    assert (delta.inserts, delta.modifies) == ((), ()) and len(delta.deletes) == len(leaf.host_ports)
    assert spray.conn.read_entries(THRESHOLDS) == []
    assert spray.conn.read_default(THRESHOLDS) == [thresholds(20, 48, 46)]


# --- eecmp_qp_hash: IPv4 RoCEv2 to the host port and to an uplink -------------------------------

UPLINK = 2
PROFILE = "IngressPipe.ecmp.ecmp_selector"


def ecmp_entries() -> list:
    out = []
    for member, (port, prefix) in enumerate(((UPLINK, "::ffff:10.0.1.0"), (HOST, "::ffff:10.0.0.0")), start=1):
        out.append(ActionProfileMember(PROFILE, member, "IngressPipe.ecmp.set_next_hop",
                                       (("port", port), ("smac", sw_mac(port)), ("dmac", nbr_mac(port)),
                                        ("member_index", 0))))
        out.append(TableEntry("IngressPipe.ecmp.routes", (("l3_dst", Lpm(prefix, 96 + 24)),), member_id=member))
    return out


def v4_burst(src: str, dst: str, in_port: int, out_port: int) -> tuple[list[bytes], list[dict[str, bytes]]]:
    """IPv4 RoCEv2 (ECT(0)) in by in_port, and each packet's forms out of out_port: routed (TTL - 1,
    checksum), CE-marked, trimmed with or without CE (lengths true, UDP checksum 0, cut after the BTH)."""
    sent, expected = [], []
    for psn in range(BURST):
        pkt = roce_v4(src, dst, qp=4, psn=psn, payload=bytes(200), smac=nbr_mac(in_port), dmac=sw_mac(in_port))
        pkt[IP].tos = TC
        sent.append(bytes(pkt))

        def routed(ecn: int, trim: bool, pkt=pkt) -> bytes:
            p = pkt.copy()
            p[Ether].src, p[Ether].dst = sw_mac(out_port), nbr_mac(out_port)
            p[IP].ttl -= 1
            p[IP].tos = (TRIM_DSCP << 2 if trim else TC & ~0b11) | ecn
            del p[IP].chksum
            if not trim:
                return bytes(p)
            p[IP].len, p[UDP].len, p[UDP].chksum = 20 + 8 + 12, 8 + 12, 0
            return bytes(p)[:14 + 20 + 8 + 12]

        expected.append({"plain": routed(ECT0, False), "ce": routed(CE, False), "trim": routed(ECT0, True),
                         "trim-ce": routed(CE, True)})
    return sent, expected


def test_eecmp_host_port_trims_without_ce_and_an_uplink_marks_ce(ecmp):
    ecmp.install(*ecmp_entries(), host_port(HOST))
    ecmp.conn.write([("MODIFY", thresholds(ECN_AT, TRIM_AT, TRIM_DSCP))])
    assert ecmp.conn.read_entries(THRESHOLDS) == [host_port(HOST)]

    down, expected = v4_burst("10.0.1.1", "10.0.0.1", UPLINK, HOST)
    forms = by_psn(burst_through_bottleneck(ecmp, down, UPLINK, HOST), expected)
    assert set(forms) <= {"plain", "trim"} and "trim" in forms, forms
    assert_follows_depth(forms)
    assert marks(ecmp, HOST) == (0, forms.count("trim"))

    up, expected = v4_burst("10.0.0.1", "10.0.1.1", HOST, UPLINK)
    forms = by_psn(burst_through_bottleneck(ecmp, up, HOST, UPLINK), expected)
    assert "ce" in forms and "trim" not in forms, forms  # an uplink marks, a trimmed header too
    assert_follows_depth([{"trim-ce": "trim"}.get(f, f) for f in forms])
    assert marks(ecmp, UPLINK) == (forms.count("ce") + forms.count("trim-ce"), forms.count("trim-ce"))
