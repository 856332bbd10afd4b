"""The uN transit's one lookup (my_sid usid_un_next_hop: block | our uSID | next uSID as /64 with that
uSID's next hop) on simple_switch_grpc: the exact packet out of the entry's port, and the same drops,
with the same reasons, as the uN followed by the route (docs/pipeline.md, per-role cost)."""

from __future__ import annotations

import pytest
from scapy.layers.inet6 import IPv6, IPv6ExtHdrRouting
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from mininet_labs.roce import icrc_ok, roce_v6
from tests.bmv2.p4.test_srv6_boundary import HOP_LIMIT, drops
from tests.bmv2.p4.test_srv6_spray import (
    DST_DT6, DST_HOST, DST_LEAF, HOST, SPINE_A, SRC_HOST, UP_A, UP_B, carrier, my_sid, nbr_mac, outer, route,
    srh_packet, sw_mac,
)

ROUTING_TYPE = 3
INNER = bytes(roce_v6(SRC_HOST, DST_HOST, qp=5, psn=1)[IPv6])
NEXT_HOP_PORT = HOST  # not the route's port: a packet out of it took the my_sid entry's next hop


def next_hop_entry(port: int = NEXT_HOP_PORT):
    return my_sid(carrier(SPINE_A, DST_LEAF), 64, "usid_un_next_hop",
                  (("port", port), ("smac", sw_mac(port)), ("dmac", nbr_mac(port))))


def spine(device, with_next_hop: bool) -> None:
    """A spine as the controller sets one up: its uN (/48) and the route to the leaf's uN, and (this
    build) the uN with the leaf's next hop."""
    device.install(my_sid(carrier(SPINE_A), 48, "usid_un"), route(carrier(DST_LEAF), 48, UP_B),
                   *([next_hop_entry(UP_B)] if with_next_hop else []))


def test_the_un_and_its_next_hop_in_one_entry_shift_and_forward_the_carrier(spray):
    spray.install(my_sid(carrier(SPINE_A), 48, "usid_un"), route(carrier(DST_LEAF), 48, UP_B), next_hop_entry())
    spray.switch.send(UP_A, bytes(outer(carrier(SPINE_A, DST_LEAF, DST_DT6), INNER, UP_A, fl=0x1234, hlim=64)))

    (port, frame), = spray.switch.receive(count=1)
    assert port == NEXT_HOP_PORT
    assert frame == bytes(outer(carrier(DST_LEAF, DST_DT6), INNER, NEXT_HOP_PORT, fl=0x1234, hlim=63))
    assert icrc_ok(frame)


@pytest.mark.parametrize("with_next_hop", [False, True], ids=["un+route", "un_next_hop"])
def test_the_last_hop_a_packet_may_take_is_the_same_with_either_entry(spray, with_next_hop):
    spine(spray, with_next_hop)
    for hlim in (0, 1):
        assert drops(spray, bytes(outer(carrier(SPINE_A, DST_LEAF, DST_DT6), INNER, UP_A, fl=1, hlim=hlim)), UP_A) \
            == {HOP_LIMIT: 1}
    spray.switch.send(UP_A, bytes(outer(carrier(SPINE_A, DST_LEAF, DST_DT6), INNER, UP_A, fl=1, hlim=2)))
    (port, frame), = spray.switch.receive(count=1)
    assert (port, frame) == (UP_B, bytes(outer(carrier(DST_LEAF, DST_DT6), INNER, UP_B, fl=1, hlim=1)))


@pytest.mark.parametrize("with_next_hop", [False, True], ids=["un+route", "un_next_hop"])
def test_a_routing_header_of_another_type_with_segments_left_is_dropped_with_either_entry(spray, with_next_hop):
    """RFC 8200 4.4: not processed past, even when our uSID is not the carrier's last."""
    spine(spray, with_next_hop)
    frame = (Ether(src=nbr_mac(UP_A), dst=sw_mac(UP_A))
             / IPv6(src=SRC_HOST, dst=carrier(SPINE_A, DST_LEAF, DST_DT6), nh=43, hlim=64)
             / IPv6ExtHdrRouting(addresses=[DST_HOST], segleft=1, nh=41) / Raw(INNER))
    assert drops(spray, bytes(frame), UP_A) == {ROUTING_TYPE: 1}


def test_an_exhausted_carrier_still_takes_the_next_srh_segment_beside_the_next_hop_entry(spray):
    """Our uSID the carrier's last: the /64 does not match (next uSID 0), the /48 does."""
    spine(spray, True)
    last = carrier(DST_LEAF, DST_DT6)
    spray.switch.send(UP_A, bytes(srh_packet(carrier(SPINE_A), [last, carrier(SPINE_A)], 1, INNER, UP_A)))

    (port, frame), = spray.switch.receive(count=1)
    expected = srh_packet(last, [last, carrier(SPINE_A)], 0, INNER, UP_A, hlim=63)
    expected[Ether].src, expected[Ether].dst = sw_mac(UP_B), nbr_mac(UP_B)
    assert (port, frame) == (UP_B, bytes(expected))
