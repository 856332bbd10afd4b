"""eecmp_qp_hash.p4 on simple_switch_grpc: FIVE_TUPLE vs QP (E-ECMP) vs PIN, TTL, malformed drops."""

from __future__ import annotations

from collections import Counter

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from controller.plan.entries import ActionProfileGroup, ActionProfileMember, Lpm, TableEntry
from mininet_labs.roce import icrc_ok, roce_v4, roce_v6

HOST = 1
UPLINKS = (2, 3, 4, 5)
FIVE_TUPLE, QP, PIN = 0, 1, 3
PROFILE = "IngressPipe.ecmp.ecmp_selector"
# drop reasons (p4/include/defines.p4)
HOP_LIMIT, BTH_TRUNCATED, NO_ROUTE, IPV4_CHECKSUM, IPV4_IHL = 4, 5, 7, 12, 13


def sw_mac(port: int) -> str:
    return f"02:aa:00:00:00:{port:02x}"


def nbr_mac(port: int) -> str:
    return f"02:bb:00:00:00:{port:02x}"


def v4(prefix: str, plen: int) -> Lpm:
    """An IPv4 prefix as the IPv4-mapped IPv6 prefix the table matches on."""
    return Lpm(f"::ffff:{prefix}", 96 + plen)


def ecmp_entries(dst: Lpm, mode: int | None = FIVE_TUPLE, pin: int | None = None) -> list:
    members = [ActionProfileMember(PROFILE, i, "IngressPipe.ecmp.set_next_hop",
                                   (("port", port), ("smac", sw_mac(port)), ("dmac", nbr_mac(port)),
                                    ("member_index", i)))
               for i, port in enumerate(UPLINKS, 1)]
    policy = []
    if pin is not None:
        policy = [TableEntry("IngressPipe.ecmp.hash_policy", (("l3_dst", dst),),
                             "IngressPipe.ecmp.set_pin", (("host_index", pin),))]
    elif mode is not None:
        policy = [TableEntry("IngressPipe.ecmp.hash_policy", (("l3_dst", dst),),
                             "IngressPipe.ecmp.set_hash_mode", (("mode", mode),))]
    return [*members, ActionProfileGroup(PROFILE, 1, tuple(m.member_id for m in members), max_size=16),
            TableEntry("IngressPipe.ecmp.routes", (("l3_dst", dst),), group_id=1), *policy]


def collect(ecmp, packets) -> Counter:
    for pkt in packets:
        ecmp.switch.send(HOST, bytes(pkt))
    got = ecmp.switch.receive(timeout=30.0, count=len(packets))  # a bound only: it returns once all came
    assert len(got) == len(packets)
    return Counter(port for port, _ in got)


def test_routed_ipv4_roce_packet_exact(ecmp):
    ecmp.install(*ecmp_entries(v4("10.1.0.0", 16)))
    sent = roce_v4("10.0.0.1", "10.1.2.3", qp=0x99, psn=1, ttl=9)
    ecmp.switch.send(HOST, bytes(sent))
    (port, frame), = ecmp.switch.receive(count=1)
    assert port in UPLINKS
    expected = sent.copy()
    expected[Ether].src, expected[Ether].dst = sw_mac(port), nbr_mac(port)
    expected[IP].ttl, expected[IP].chksum = 8, None  # checksum recomputed for the new TTL
    assert frame == bytes(Ether(bytes(expected)))
    assert icrc_ok(frame)  # the ICRC masks the TTL: still valid
    member = UPLINKS.index(port) + 1
    assert ecmp.counter("IngressPipe.ecmp.member_packets", member).packets == 1


def test_five_tuple_puts_every_qp_of_a_five_tuple_on_one_member(ecmp):
    ecmp.install(*ecmp_entries(v4("10.1.0.0", 16), mode=FIVE_TUPLE))
    ports = collect(ecmp, [roce_v4("10.0.0.1", "10.1.2.3", qp=qp, psn=0) for qp in range(1, 33)])
    assert len(ports) == 1


def test_qp_mode_spreads_qps_and_keeps_each_qp_on_one_member(ecmp):
    ecmp.install(*ecmp_entries(v4("10.1.0.0", 16), mode=QP))
    ports = collect(ecmp, [roce_v4("10.0.0.1", "10.1.2.3", qp=qp, psn=0) for qp in range(1, 33)])
    assert len(ports) == 4
    one_qp = collect(ecmp, [roce_v4("10.0.0.1", "10.1.2.3", qp=7, psn=p) for p in range(100)])
    assert len(one_qp) == 1


def test_qp_mode_on_ipv6(ecmp):
    ecmp.install(*ecmp_entries(Lpm("fd00:0:0:12::", 64), mode=QP))
    ports = collect(ecmp, [roce_v6("fd00:0:0:11::1", "fd00:0:0:12::1", qp=qp, psn=0, hlim=3)
                           for qp in range(1, 33)])
    assert len(ports) == 4


def test_pin_sends_a_destination_to_one_member_whatever_the_flow(ecmp):
    ecmp.install(*ecmp_entries(v4("10.1.2.3", 32), pin=2), *ecmp_entries(v4("10.1.2.4", 32), pin=3)[5:])
    a = collect(ecmp, [roce_v4("10.0.0.1", "10.1.2.3", qp=qp, psn=0, sport=40000 + qp) for qp in range(32)])
    b = collect(ecmp, [roce_v4("10.0.0.1", "10.1.2.4", qp=qp, psn=0, sport=40000 + qp) for qp in range(32)])
    assert len(a) == 1 and len(b) == 1
    assert set(a) != set(b)  # host indices 2 and 3 pick different members of the group


def test_ttl_and_hop_limit_expiry_are_dropped_and_counted(ecmp):
    ecmp.install(*ecmp_entries(v4("10.1.0.0", 16)), *ecmp_entries(Lpm("fd00::", 16))[5:])
    before = ecmp.drop_counts()
    ecmp.switch.send(HOST, bytes(roce_v4("10.0.0.1", "10.1.2.3", qp=1, psn=0, ttl=1)))
    ecmp.switch.send(HOST, bytes(roce_v6("fd00::1", "fd00::2", qp=1, psn=0, hlim=1)))
    assert ecmp.switch.receive(timeout=1.0) == []
    assert ecmp.drop_counts()[HOP_LIMIT] - before[HOP_LIMIT] == 2


@pytest.mark.parametrize("case", ["bad checksum", "ihl 6", "truncated bth", "no route"])
def test_malformed_ipv4_is_dropped_and_counted(ecmp, case):
    ecmp.install(*ecmp_entries(v4("10.1.0.0", 16)))
    good = roce_v4("10.0.0.1", "10.1.2.3", qp=1, psn=0)
    frame, reason = {
        # bytes 24-25 of the frame: the IPv4 header checksum
        "bad checksum": (bytes(good)[:24] + b"\xde\xad" + bytes(good)[26:], IPV4_CHECKSUM),
        "ihl 6": (bytes(Ether() / IP(src="10.0.0.1", dst="10.1.2.3", ihl=6, options=b"\x01\x01\x01\x01")
                        / UDP(sport=1, dport=2)), IPV4_IHL),
        "truncated bth": (bytes(Ether() / IP(src="10.0.0.1", dst="10.1.2.3") / UDP(sport=1, dport=4791)
                                / Raw(b"\x04" * 8)), BTH_TRUNCATED),
        "no route": (bytes(roce_v4("10.0.0.1", "10.9.9.9", qp=1, psn=0)), NO_ROUTE),
    }[case]
    before = ecmp.drop_counts()
    ecmp.switch.send(HOST, frame)
    assert ecmp.switch.receive(timeout=1.0) == []
    after = ecmp.drop_counts()
    assert {r: after[r] - before[r] for r in after if after[r] != before[r]} == {reason: 1}


def test_ipv6_unaffected_by_ipv4_routes(ecmp):
    ecmp.install(*ecmp_entries(v4("10.1.0.0", 16)))
    ecmp.switch.send(HOST, bytes(Ether() / IPv6(src="fd00::1", dst="::a01:203") / UDP(sport=1, dport=2)))
    assert ecmp.switch.receive(timeout=1.0) == []
