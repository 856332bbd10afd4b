"""srv6_spray.p4 drops malformed packets, never forwards them, and counts each by its reason."""

from __future__ import annotations

import struct

import pytest
from scapy.layers.inet import UDP
from scapy.layers.inet6 import IPv6, IPv6ExtHdrRouting, IPv6ExtHdrSegmentRouting
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from mininet_labs.roce import roce_v6
from tests.bmv2.p4.test_srv6_spray import (
    DST_HOST, DST_LEAF, DST_DT6, HOST, LEAF_SRC, SPINE_A, SRC_HOST, UP_A, UP_B, carrier,
    headend_entries, my_sid, nbr_mac, route, sw_mac,
)

# Drop reasons: the index of IngressPipe.drop_reasons (p4/include/defines.p4).
SRH_TRUNCATED, SRH_SEGMENTS_LEFT, ROUTING_TYPE, HOP_LIMIT, BTH_TRUNCATED = 1, 2, 3, 4, 5
USID_NO_MATCH, NO_ROUTE, SRH_TOO_DEEP, SRH_LENGTH, SID_NO_NEXT = 6, 7, 8, 9, 10
NO_PATH, DECAP_INVALID, NOT_IP = 15, 16, 17
IPV6_VERSION, IPV6_LENGTH = 19, 20

INNER = bytes(roce_v6(SRC_HOST, DST_HOST, qp=5, psn=1)[IPv6])


def eth(port: int = UP_A) -> Ether:
    return Ether(src=nbr_mac(port), dst=sw_mac(port))


def raw_srh(next_hdr: int, ext_len: int, segments_left: int, last_entry: int,
            segments: list[bytes]) -> bytes:
    return struct.pack("!BBBBBBH", next_hdr, ext_len, 4, segments_left, last_entry, 0, 0) \
        + b"".join(segments)


SEG = bytes(16)


def lying(frame: bytes, offset: int, value: bytes) -> bytes:
    """The frame with `value` written over the bytes at `offset` (a header field that lies)."""
    return frame[:offset] + value + frame[offset + len(value):]


IP = 14  # offset of the outer IPv6 header in a frame


def cases() -> dict[str, tuple[int, bytes]]:
    un = carrier(SPINE_A, DST_LEAF, DST_DT6)
    return {
        # the SRH announces two segments, the packet ends after one
        "srh truncated": (SRH_TRUNCATED, bytes(eth() / IPv6(src=LEAF_SRC, dst=un, nh=43, plen=24)
                                              / Raw(raw_srh(41, 4, 1, 1, [SEG])))),
        "srh segments left > last entry + 1": (SRH_SEGMENTS_LEFT, bytes(
            eth() / IPv6(src=LEAF_SRC, dst=un, nh=43) / Raw(raw_srh(41, 2, 2, 0, [SEG]) + INNER))),
        "routing type 0 at a SID": (ROUTING_TYPE, bytes(
            eth() / IPv6(src=LEAF_SRC, dst=un) / IPv6ExtHdrRouting(addresses=["2001:db8::1"], segleft=1)
            / Raw(INNER))),
        "hop limit 1 at a uN": (HOP_LIMIT, bytes(
            eth() / IPv6(src=LEAF_SRC, dst=un, nh=41, hlim=1) / Raw(INNER))),
        "udp 4791 without a whole bth": (BTH_TRUNCATED, bytes(
            eth(HOST) / IPv6(src=SRC_HOST, dst=DST_HOST) / UDP(sport=1, dport=4791) / Raw(b"\x04" * 6))),
        "usid of the block that matches nothing": (USID_NO_MATCH, bytes(
            eth() / IPv6(src=LEAF_SRC, dst=carrier(0x0999, DST_DT6), nh=41) / Raw(INNER))),
        "no route": (NO_ROUTE, bytes(eth() / IPv6(src=LEAF_SRC, dst="2001:db8:77::1") / Raw(INNER))),
        "srh deeper than 4 segments": (SRH_TOO_DEEP, bytes(
            eth() / IPv6(src=LEAF_SRC, dst=un, nh=43) / Raw(raw_srh(41, 10, 4, 4, [SEG] * 5) + INNER))),
        "hdr ext len too small for last entry": (SRH_LENGTH, bytes(
            eth() / IPv6(src=LEAF_SRC, dst=un, nh=43) / Raw(raw_srh(41, 2, 1, 1, [SEG] * 2) + INNER))),
        "uN with no next uSID and segments left 0": (SID_NO_NEXT, bytes(
            eth() / IPv6(src=LEAF_SRC, dst=carrier(SPINE_A), nh=41) / Raw(INNER))),
        "decap with segments left 1": (DECAP_INVALID, bytes(
            eth() / IPv6(src=LEAF_SRC, dst=carrier(DST_LEAF, DST_DT6), nh=43)
            / IPv6ExtHdrSegmentRouting(addresses=[carrier(DST_LEAF, DST_DT6), "fc00::1"], segleft=1, nh=41)
            / Raw(INNER))),
        # RFC 8200 3: headers that lie about themselves
        "version 4 under ethertype 0x86dd": (IPV6_VERSION, lying(bytes(
            eth() / IPv6(src=LEAF_SRC, dst=un, nh=41) / Raw(INNER)), IP, b"\x40")),
        "inner ipv6 with version 5": (IPV6_VERSION, bytes(
            eth() / IPv6(src=LEAF_SRC, dst=un, nh=41) / Raw(b"\x50" + INNER[1:]))),
        "payload length one byte more than the frame": (IPV6_LENGTH, lying(bytes(
            eth() / IPv6(src=LEAF_SRC, dst=un, nh=41) / Raw(INNER)), IP + 4, (len(INNER) + 1).to_bytes(2, "big"))),
        "payload length 65535 on a short frame from a host": (IPV6_LENGTH, lying(bytes(
            eth(HOST) / IPv6(src=SRC_HOST, dst=DST_HOST) / UDP(sport=1, dport=4791) / Raw(b"\x04" * 20)),
            IP + 4, b"\xff\xff")),
        "inner payload length past the outer packet": (IPV6_LENGTH, bytes(
            eth() / IPv6(src=LEAF_SRC, dst=un, nh=41) / Raw(lying(INNER, 4, (len(INNER) - 39).to_bytes(2, "big"))))),
        # RFC 8754 2: Hdr Ext Len says 1608 bytes, the packet has far fewer: dropped at the first switch
        "srh hdr ext len past the end of the packet": (SRH_TRUNCATED, bytes(
            eth() / IPv6(src=LEAF_SRC, dst=un, nh=43) / Raw(raw_srh(41, 200, 0, 0, [SEG]) + INNER))),
        "not ip": (NOT_IP, bytes(Ether(src=nbr_mac(UP_A), dst=sw_mac(UP_A), type=0x88B5) / Raw(b"\x00" * 50))),
    }


@pytest.mark.parametrize("name", list(cases()))
def test_malformed_packet_is_dropped_and_counted_by_reason(spray, name):
    reason, frame = cases()[name]
    spray.install(*headend_entries(mode=1, spines={SPINE_A: UP_A}),
                  my_sid(carrier(SPINE_A), 48, "usid_un"),
                  my_sid(carrier(DST_LEAF, DST_DT6), 64, "end_dt6"),
                  route(carrier(DST_LEAF), 48, UP_B),
                  route(DST_HOST, 128, HOST),
                  route("fcbb:bb00::", 32, UP_B, action="drop_usid_unknown"))
    before = spray.drop_counts()
    spray.switch.send(HOST if frame[6:12] == bytes.fromhex(nbr_mac(HOST).replace(":", "")) else UP_A, frame)

    assert spray.switch.receive(timeout=1.0) == []
    after = spray.drop_counts()
    assert {r: after[r] - before[r] for r in after if after[r] != before[r]} == {reason: 1}


def test_destination_with_no_path_left_is_dropped_as_no_path(spray):
    entries = [e for e in headend_entries(mode=1, spines={SPINE_A: UP_A})
               if getattr(e, "table", "").split(".")[-1] != "spray_paths"]
    spray.install(*entries)
    spray.switch.send(HOST, bytes(roce_v6(SRC_HOST, DST_HOST, qp=5, psn=1)))
    assert spray.switch.receive(timeout=1.0) == []
    assert spray.counter("IngressPipe.drop_reasons", NO_PATH).packets == 1
