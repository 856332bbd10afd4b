"""srv6_spray.p4 spray modes on simple_switch_grpc: FLOW, QP (E-ECMP), PACKET, and pinned paths."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether

from controller.plan.entries import Exact, Lpm, TableEntry
from mininet_labs.roce import roce_v6
from tests.bmv2.p4.test_srv6_spray import (
    DST_HOST, HOST, SRC_HOST, carrier, headend_entries,
)

FLOW, QP, PACKET = 0, 1, 2
# Four uplinks, four spines: member i+1 is spine i+1 on port i+2.
SPINES = {0x0001: 2, 0x0002: 3, 0x0003: 4, 0x0004: 5}
SPINE_OF_PORT = {port: usid for usid, port in SPINES.items()}


def send_and_collect(spray, packets) -> Counter:
    """Send each packet from the host port; count the uplinks they left by."""
    ports: Counter = Counter()
    for pkt in packets:
        spray.switch.send(HOST, bytes(pkt))
    # a bound only (it returns once all came): bmv2 takes seconds for 1000 packets on a loaded machine
    for port, frame in spray.switch.receive(timeout=30.0, count=len(packets)):
        ports[port] += 1
        # every packet leaves towards the spine its port leads to
        assert Ether(frame)[IPv6].dst.startswith(carrier(SPINE_OF_PORT[port]).rstrip(":"))
    assert sum(ports.values()) == len(packets)
    return ports


def path_counts(spray) -> dict[int, int]:
    return {i: spray.counter("IngressPipe.headend.path_packets", i).packets for i in range(1, 5)}


def test_qp_mode_keeps_one_qp_on_one_member(spray):
    spray.install(*headend_entries(mode=QP, spines=SPINES))
    ports = send_and_collect(spray, [roce_v6(SRC_HOST, DST_HOST, qp=0x1001, psn=p) for p in range(100)])
    assert len(ports) == 1
    counts = path_counts(spray)
    assert sorted(counts.values()) == [0, 0, 0, 100]


def test_qp_mode_spreads_qps_that_share_a_five_tuple(spray):
    spray.install(*headend_entries(mode=QP, spines=SPINES))
    ports = send_and_collect(spray, [roce_v6(SRC_HOST, DST_HOST, qp=qp, psn=0) for qp in range(1, 33)])
    assert len(ports) == 4  # 32 QPs over 4 members: E-ECMP separates what FLOW collapses


def test_flow_mode_puts_qps_sharing_a_five_tuple_on_one_member(spray):
    spray.install(*headend_entries(mode=FLOW, spines=SPINES))
    ports = send_and_collect(spray, [roce_v6(SRC_HOST, DST_HOST, qp=qp, psn=0) for qp in range(1, 33)])
    assert len(ports) == 1  # the collision E-ECMP exists to fix


def test_packet_mode_sprays_one_qp_evenly_over_all_members(spray):
    spray.install(*headend_entries(mode=PACKET, spines=SPINES))
    ports = send_and_collect(spray, [roce_v6(SRC_HOST, DST_HOST, qp=0x2002, psn=p, payload=b"")
                                     for p in range(1000)])
    assert set(ports) == set(SPINES.values())
    for port, count in ports.items():
        assert 200 <= count <= 300, ports  # within +-20% of 250
    assert path_counts(spray) == {i: ports[SPINES[usid]] for i, usid in enumerate(SPINES, 1)}


def test_pinned_destination_qp_overrides_the_hash(spray):
    pins = [TableEntry("IngressPipe.headend.pinned_path",
                       (("dst_addr", Exact(DST_HOST)), ("dest_qp", Exact(qp))),
                       "IngressPipe.headend.via_spine", (("spine_usid", 0x0003), ("path_index", 3)))
            for qp in (0x10, 0x11, 0x12)]
    spray.install(*headend_entries(mode=PACKET, spines=SPINES), *pins)
    ports = send_and_collect(spray, [roce_v6(SRC_HOST, DST_HOST, qp=qp, psn=p)
                                     for qp in (0x10, 0x11, 0x12) for p in range(50)])
    assert ports == Counter({SPINES[0x0003]: 150})
    # an unpinned QP still sprays
    ports = send_and_collect(spray, [roce_v6(SRC_HOST, DST_HOST, qp=0x13, psn=p) for p in range(100)])
    assert len(ports) == 4


def test_route_is_per_destination_prefix_shared_set_for_all(spray):
    """One spray set serves every destination prefix that points at it."""
    entries = headend_entries(mode=QP, spines=SPINES)
    other = [e for e in entries if getattr(e, "table", "").endswith(("spray_dest", "spray_paths"))]
    spray.install(*entries, *[replace(e, match=(("dst_addr", Lpm("fd00:0:0:13::", 64)),)) for e in other])
    sent = [roce_v6(SRC_HOST, "fd00:0:0:13::5", qp=qp, psn=0) for qp in range(1, 17)]
    ports = send_and_collect(spray, sent)
    assert len(ports) > 1
