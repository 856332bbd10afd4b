"""srv6_spray.p4 on simple_switch_grpc: each behaviour with the exact packet on the exact port."""

from __future__ import annotations

import ipaddress
import zlib

import pytest
from scapy.layers.inet import UDP
from scapy.layers.inet6 import IPv6, IPv6ExtHdrSegmentRouting
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from controller.plan.entries import ActionProfileGroup, ActionProfileMember, Exact, Lpm, TableEntry
from mininet_labs.roce import icrc_ok, roce_v6

HOST, UP_A, UP_B = 1, 2, 3
BLOCK = 0xFCBBBB00
LEAF_SRC = "2001:db8:ff::1"  # this leaf's address, the source of its encapsulation
SPINE_A, SPINE_B = 0x0001, 0x0002  # spines' uN uSIDs
DST_LEAF, DST_DT6, DST_DX6 = 0x0012, 0xE000, 0xE001  # destination leaf uN and decap uSIDs
DST_PREFIX = "fd00:0:0:12::"  # hosts behind the destination leaf (/64)
SRC_HOST, DST_HOST = "fd00:0:0:11::1", "fd00:0:0:12::1"


def mac(role: int, port: int) -> str:
    return f"02:{role:02x}:00:00:00:{port:02x}"


def sw_mac(port: int) -> str:
    return mac(0xAA, port)


def nbr_mac(port: int) -> str:
    return mac(0xBB, port)


def carrier(*usids: int) -> str:
    """block | uSIDs ... | zero fill, as an IPv6 address (F3216)."""
    value = BLOCK << 96
    for i, usid in enumerate(usids):
        value |= usid << (80 - 16 * i)
    return str(ipaddress.IPv6Address(value))


def route(prefix: str, plen: int, port: int, action: str = "set_next_hop") -> TableEntry:
    params = (("port", port), ("smac", sw_mac(port)), ("dmac", nbr_mac(port)))
    return TableEntry("IngressPipe.routing.routes_v6", (("dst_addr", Lpm(prefix, plen)),),
                      f"IngressPipe.routing.{action}", params if action == "set_next_hop" else ())


def my_sid(prefix: str, plen: int, action: str, params: tuple = ()) -> TableEntry:
    return TableEntry("IngressPipe.endpoint.my_sid", (("dst_addr", Lpm(prefix, plen)),),
                      f"IngressPipe.endpoint.{action}", params)


def host_entry(action: str = "sr_boundary", host: str = SRC_HOST) -> TableEntry:
    """Host port 1's one entry: the SR-domain boundary for its host's address, and the headend on with
    this leaf's encapsulation source."""
    return TableEntry("IngressPipe.boundary.host_policy", (("ingress_port", Exact(HOST)),),
                      f"IngressPipe.boundary.{action}",
                      (("host_addr", host), ("usid_block", BLOCK), ("src_addr", LEAF_SRC), ("headend", 1)))


def headend_entries(mode: int, spines: dict[int, int], policy: str | None = "sr_boundary") -> list:
    """A source leaf: host port 1 (with the host_policy action `policy`; None: no entry, port 1 is then
    a fabric port); spray set = one via_spine member per uplink."""
    profile = "IngressPipe.headend.spray_selector"
    members = [ActionProfileMember(profile, i + 1, "IngressPipe.headend.via_spine",
                                   (("spine_usid", usid), ("path_index", i + 1)))
               for i, usid in enumerate(spines)]
    return [
        *([host_entry(policy)] if policy else []),
        TableEntry("IngressPipe.headend.spray_dest", (("dst_addr", Lpm(DST_PREFIX, 64)),),
                   "IngressPipe.headend.set_spray",
                   (("mode", mode), ("dst_usids", DST_LEAF << 16 | DST_DT6))),
        *members,
        ActionProfileGroup(profile, 1, tuple(m.member_id for m in members), max_size=16),
        TableEntry("IngressPipe.headend.spray_paths", (("dst_addr", Lpm(DST_PREFIX, 64)),),
                   group_id=1),
        *[route(carrier(usid), 48, port) for usid, port in spines.items()],
    ]


def spray_hash(inner: IPv6, mode: int) -> int:
    """The headend's hash as bmv2 computes it: CRC-32 over the packed fields, low 16 bits."""
    udp, bth = inner[UDP], inner["BTH"]
    data = (ipaddress.IPv6Address(inner.src).packed + ipaddress.IPv6Address(inner.dst).packed
            + bytes([inner.nh]) + udp.sport.to_bytes(2, "big") + udp.dport.to_bytes(2, "big"))
    if mode >= 1:
        data += bth.dqpn.to_bytes(3, "big")
    if mode == 2:
        data += bth.psn.to_bytes(3, "big")
    return zlib.crc32(data) & 0xFFFF


def outer(dst: str, inner_bytes: bytes, port: int, fl: int, nh: int = 41, hlim: int = 64,
          tc: int = 0, src: str = LEAF_SRC) -> Ether:
    return (Ether(src=sw_mac(port), dst=nbr_mac(port))
            / IPv6(src=src, dst=dst, nh=nh, hlim=hlim, tc=tc, fl=fl) / Raw(inner_bytes))


def test_headend_encapsulates_roce_towards_the_spine_carrier(spray):
    spray.install(*headend_entries(mode=1, spines={SPINE_A: UP_A}))
    sent = roce_v6(SRC_HOST, DST_HOST, qp=0x12, psn=7, tc=0x68)
    spray.switch.send(HOST, bytes(sent))

    (port, frame), = spray.switch.receive(count=1)
    assert port == UP_A
    inner = bytes(sent[IPv6])
    expected = outer(carrier(SPINE_A, DST_LEAF, DST_DT6), inner, UP_A,
                     fl=spray_hash(sent[IPv6], 1), tc=0x68)
    assert frame == bytes(expected)
    assert icrc_ok(frame)
    assert spray.counter("IngressPipe.headend.path_packets", 1).packets == 1


def test_un_shifts_the_carrier_and_forwards_on_the_next_usid(spray):
    spray.install(my_sid(carrier(SPINE_A), 48, "usid_un"),
                  route(carrier(DST_LEAF), 48, UP_B))
    inner = bytes(roce_v6(SRC_HOST, DST_HOST, qp=5, psn=1)[IPv6])
    arriving = outer(carrier(SPINE_A, DST_LEAF, DST_DT6), inner, UP_A, fl=0x1234, hlim=64)
    spray.switch.send(UP_A, bytes(arriving))

    (port, frame), = spray.switch.receive(count=1)
    assert port == UP_B
    assert frame == bytes(outer(carrier(DST_LEAF, DST_DT6), inner, UP_B, fl=0x1234, hlim=63))


def srh_packet(dst: str, segments: list[str], segments_left: int, inner: bytes, port: int,
               hlim: int = 64, last_entry: int | None = None) -> Ether:
    """Outer IPv6 + SRH (segments given as Segment List[0..n]) + inner IPv6."""
    srh = IPv6ExtHdrSegmentRouting(addresses=segments, segleft=segments_left, nh=41,
                                   lastentry=len(segments) - 1 if last_entry is None else last_entry)
    return (Ether(src=nbr_mac(port), dst=sw_mac(port))
            / IPv6(src=LEAF_SRC, dst=dst, nh=43, hlim=hlim) / srh / Raw(inner))


def test_un_with_exhausted_carrier_takes_the_next_srh_segment(spray):
    spray.install(my_sid(carrier(SPINE_A), 48, "usid_un"),
                  route(carrier(DST_LEAF), 48, UP_B))
    inner = bytes(roce_v6(SRC_HOST, DST_HOST, qp=5, psn=1)[IPv6])
    last = carrier(DST_LEAF, DST_DT6)
    arriving = srh_packet(carrier(SPINE_A), [last, carrier(SPINE_A)], 1, inner, UP_A)
    spray.switch.send(UP_A, bytes(arriving))

    (port, frame), = spray.switch.receive(count=1)
    assert port == UP_B
    got = Ether(frame)
    assert got[IPv6].dst == last and got[IPv6].hlim == 63
    assert got[IPv6ExtHdrSegmentRouting].segleft == 0
    expected = srh_packet(last, [last, carrier(SPINE_A)], 0, inner, UP_A, hlim=63)
    expected[Ether].src, expected[Ether].dst = sw_mac(UP_B), nbr_mac(UP_B)
    assert frame == bytes(expected)


def test_classic_end_moves_to_the_next_segment(spray):
    spray.install(my_sid("fc00:0:0:a::1", 128, "end"), route("fc00:0:0:b::", 64, UP_B))
    inner = bytes(roce_v6(SRC_HOST, DST_HOST, qp=9, psn=3)[IPv6])
    segs = ["fc00:0:0:b::1", "fc00:0:0:a::1"]
    spray.switch.send(UP_A, bytes(srh_packet("fc00:0:0:a::1", segs, 1, inner, UP_A)))

    (port, frame), = spray.switch.receive(count=1)
    expected = srh_packet("fc00:0:0:b::1", segs, 0, inner, UP_A, hlim=63)
    expected[Ether].src, expected[Ether].dst = sw_mac(UP_B), nbr_mac(UP_B)
    assert port == UP_B
    assert frame == bytes(expected)


@pytest.mark.parametrize("path", ["carrier", "srh2", "srh3"])
def test_pinned_path_encapsulates_with_and_without_srh(spray, path):
    entries = headend_entries(mode=1, spines={SPINE_A: UP_A})
    c0 = carrier(SPINE_B, 0x0021)          # a detour: spine B, then leaf 0x21 ...
    c1 = carrier(0x0003, DST_LEAF)          # ... spine 3, then the destination leaf
    c2 = carrier(DST_DT6)                   # ... and its decap uSID alone
    action, params, segments = {
        "carrier": ("encap_carrier", (("carrier", c0), ("path_index", 9)), None),
        "srh2": ("encap_srh2", (("carrier0", c0), ("carrier1", c1), ("path_index", 9)), [c1, c0]),
        "srh3": ("encap_srh3", (("carrier0", c0), ("carrier1", c1), ("carrier2", c2),
                                ("path_index", 9)), [c2, c1, c0]),
    }[path]
    pin = TableEntry("IngressPipe.headend.pinned_path",
                     (("dst_addr", Exact(DST_HOST)), ("dest_qp", Exact(0x77))),
                     f"IngressPipe.headend.{action}", params)
    spray.install(*entries, pin, route(carrier(SPINE_B), 48, UP_B))

    sent = roce_v6(SRC_HOST, DST_HOST, qp=0x77, psn=1)
    spray.switch.send(HOST, bytes(sent))
    (port, frame), = spray.switch.receive(count=1)
    assert port == UP_B  # the pin, not the spray set (which only has spine A)
    inner = bytes(sent[IPv6])
    fl = spray_hash(sent[IPv6], 1)
    if segments is None:
        expected = outer(c0, inner, UP_B, fl=fl)
    else:
        expected = srh_packet(c0, segments, len(segments) - 1, inner, UP_B)
        expected[IPv6].src, expected[IPv6].fl = LEAF_SRC, fl
        expected[Ether].src, expected[Ether].dst = sw_mac(UP_B), nbr_mac(UP_B)
    assert frame == bytes(expected)
    assert spray.counter("IngressPipe.headend.path_packets", 9).packets == 1


@pytest.mark.parametrize("behaviour", ["end_dx6", "end_dt6"])
def test_decapsulation_delivers_the_sent_roce_packet_unchanged(spray, behaviour):
    if behaviour == "end_dx6":
        spray.install(my_sid(carrier(DST_LEAF, DST_DX6), 64, "end_dx6",
                             (("port", HOST), ("smac", sw_mac(HOST)), ("dmac", nbr_mac(HOST)))))
        decap = DST_DX6
    else:
        spray.install(my_sid(carrier(DST_LEAF, DST_DT6), 64, "end_dt6"),
                      route(DST_HOST, 128, HOST))
        decap = DST_DT6
    sent = roce_v6(SRC_HOST, DST_HOST, qp=0x31, psn=100, tc=0x68, hlim=17)
    arriving = outer(carrier(DST_LEAF, decap), bytes(sent[IPv6]), UP_A, fl=0xBEEF, hlim=62)
    spray.switch.send(UP_A, bytes(arriving))

    (port, frame), = spray.switch.receive(count=1)
    assert port == HOST
    # What the host gets is what the remote host sent, but for the last hop's MACs.
    delivered = sent.copy()
    delivered[Ether].src, delivered[Ether].dst = sw_mac(HOST), nbr_mac(HOST)
    assert frame == bytes(delivered)
    assert icrc_ok(frame)


def test_decapsulation_after_an_srh_path(spray):
    spray.install(my_sid(carrier(DST_LEAF, DST_DX6), 64, "end_dx6",
                         (("port", HOST), ("smac", sw_mac(HOST)), ("dmac", nbr_mac(HOST)))))
    sent = roce_v6(SRC_HOST, DST_HOST, qp=0x31, psn=100)
    last = carrier(DST_LEAF, DST_DX6)
    spray.switch.send(UP_A, bytes(srh_packet(last, [last, carrier(SPINE_A)], 0,
                                             bytes(sent[IPv6]), UP_A)))
    (port, frame), = spray.switch.receive(count=1)
    delivered = sent.copy()
    delivered[Ether].src, delivered[Ether].dst = sw_mac(HOST), nbr_mac(HOST)
    assert (port, frame) == (HOST, bytes(delivered))


def test_whole_path_source_leaf_spine_destination_leaf(spray):
    """One program, every role: each hop's output is fed back in as the next switch's input."""
    spray.install(*headend_entries(mode=2, spines={SPINE_A: UP_A}),
                  my_sid(carrier(SPINE_A), 48, "usid_un"),          # the spine's uN
                  route(carrier(DST_LEAF), 48, UP_B),
                  my_sid(carrier(DST_LEAF, DST_DT6), 64, "end_dt6"),  # the destination leaf
                  route(DST_HOST, 128, HOST))
    sent = roce_v6(SRC_HOST, DST_HOST, qp=0x44, psn=0xFFFFFE)
    spray.switch.send(HOST, bytes(sent))
    (port, hop1), = spray.switch.receive(count=1)
    assert port == UP_A and Ether(hop1)[IPv6].dst == carrier(SPINE_A, DST_LEAF, DST_DT6)
    spray.switch.send(UP_A, hop1)  # arrives at "the spine"
    (port, hop2), = spray.switch.receive(count=1)
    assert port == UP_B and Ether(hop2)[IPv6].dst == carrier(DST_LEAF, DST_DT6)
    spray.switch.send(UP_B, hop2)  # arrives at "the destination leaf"
    (port, delivered), = spray.switch.receive(count=1)
    assert port == HOST
    assert bytes(Ether(delivered)[IPv6]) == bytes(sent[IPv6])
    assert icrc_ok(delivered)


def test_plain_ipv6_is_routed_by_lpm_with_hop_limit_decremented(spray):
    spray.install(route("2001:db8:5::", 48, UP_B))
    sent = (Ether(src=nbr_mac(UP_A), dst=sw_mac(UP_A)) / IPv6(src="2001:db8:1::1", dst="2001:db8:5::9", hlim=5)
            / UDP(sport=1, dport=2) / Raw(b"x" * 20))
    spray.switch.send(UP_A, bytes(sent))
    (port, frame), = spray.switch.receive(count=1)
    expected = sent.copy()
    expected[Ether].src, expected[Ether].dst, expected[IPv6].hlim = sw_mac(UP_B), nbr_mac(UP_B), 4
    assert (port, frame) == (UP_B, bytes(expected))
    assert spray.counter("IngressPipe.port_rx", UP_A).packets == 1
    assert spray.counter("FabricEgress.port_tx", UP_B).packets == 1


@pytest.mark.parametrize("outer_ecn,inner_ecn,delivered_ecn", [
    (0b11, 0b10, 0b11),  # CE on the outer header reaches the receiving NIC (RFC 6040 4.2)
    (0b11, 0b01, 0b11),
    (0b10, 0b01, 0b01),  # no congestion: the inner ECN field is kept as sent
    (0b00, 0b10, 0b10),
])
def test_decapsulation_propagates_congestion_experienced(spray, outer_ecn, inner_ecn, delivered_ecn):
    spray.install(my_sid(carrier(DST_LEAF, DST_DX6), 64, "end_dx6",
                         (("port", HOST), ("smac", sw_mac(HOST)), ("dmac", nbr_mac(HOST)))))
    sent = roce_v6(SRC_HOST, DST_HOST, qp=0x31, psn=100, tc=0x68 | inner_ecn)
    arriving = outer(carrier(DST_LEAF, DST_DX6), bytes(sent[IPv6]), UP_A, fl=1, tc=0x68 | outer_ecn)
    spray.switch.send(UP_A, bytes(arriving))

    (port, frame), = spray.switch.receive(count=1)
    delivered = sent.copy()
    delivered[Ether].src, delivered[Ether].dst = sw_mac(HOST), nbr_mac(HOST)
    delivered[IPv6].tc = 0x68 | delivered_ecn
    assert (port, frame) == (HOST, bytes(delivered))
    assert icrc_ok(frame)  # the ICRC masks the Traffic Class


def test_congestion_experienced_over_not_ect_is_dropped(spray):
    spray.install(my_sid(carrier(DST_LEAF, DST_DX6), 64, "end_dx6",
                         (("port", HOST), ("smac", sw_mac(HOST)), ("dmac", nbr_mac(HOST)))))
    sent = roce_v6(SRC_HOST, DST_HOST, qp=0x31, psn=100, tc=0x68)
    spray.switch.send(UP_A, bytes(outer(carrier(DST_LEAF, DST_DX6), bytes(sent[IPv6]), UP_A, fl=1, tc=0x6B)))
    assert spray.switch.receive(timeout=1.0) == []
    assert spray.counter("IngressPipe.drop_reasons", 18).packets == 1  # ECN_NOT_ECT


# --- destinations aggregated per plane: the carrier is read from the destination address -------

PLANE1_T0_BASE, PLANE1_DT6 = 0x1400, 0x1FFF  # plane 1: leaf i's uN is 0x1400 + i (docs/sid-plan.md)
OWN_LEAF, DEAD_LEAF = 5, 7


def aggregate_entries(mode: int) -> list:
    """A plane-1 source leaf (leaf 5) with no per-leaf entry: leaves 0..511 are fd00:1::/39."""
    profile = "IngressPipe.headend.spray_selector"
    return [
        host_entry(host=f"fd00:1:{OWN_LEAF:x}::1"),
        TableEntry("IngressPipe.headend.spray_dest", (("dst_addr", Lpm("fd00:1::", 39)),),
                   "IngressPipe.headend.derive_spray",
                   (("mode", mode), ("t0_usid_base", PLANE1_T0_BASE), ("decap_usid", PLANE1_DT6))),
        TableEntry("IngressPipe.headend.spray_dest", (("dst_addr", Lpm(f"fd00:1:{OWN_LEAF:x}::", 64)),),
                   "IngressPipe.headend.local_leaf"),
        TableEntry("IngressPipe.headend.spray_dest", (("dst_addr", Lpm(f"fd00:1:{DEAD_LEAF:x}::", 64)),),
                   "IngressPipe.headend.no_path"),
        ActionProfileMember(profile, 1, "IngressPipe.headend.via_spine", (("spine_usid", 0x1001), ("path_index", 0))),
        ActionProfileGroup(profile, 1, (1,), max_size=16),
        TableEntry("IngressPipe.headend.spray_paths", (("dst_addr", Lpm("fd00:1::", 39)),), group_id=1),
        route(carrier(0x1001), 48, UP_A),
        route(f"fd00:1:{OWN_LEAF:x}::2", 128, UP_B),  # a host of this leaf (stands for its host port)
    ]


@pytest.mark.parametrize("leaf", [0, 0x1A3, 511])
def test_a_leaf_with_no_entry_of_its_own_gets_the_carrier_derived_from_its_address(spray, leaf):
    spray.install(*aggregate_entries(mode=1))
    sent = roce_v6(f"fd00:1:{OWN_LEAF:x}::1", f"fd00:1:{leaf:x}::3", qp=0x77, psn=9, tc=0x68)
    spray.switch.send(HOST, bytes(sent))

    (port, frame), = spray.switch.receive(count=1)
    expected = outer(carrier(0x1001, PLANE1_T0_BASE + leaf, PLANE1_DT6), bytes(sent[IPv6]), UP_A,
                     fl=spray_hash(sent[IPv6], 1), tc=0x68)
    assert (port, frame) == (UP_A, bytes(expected))
    assert icrc_ok(frame)
    assert spray.counter("IngressPipe.headend.path_packets", 0).packets == 1


def test_the_own_leaf_is_not_encapsulated_and_an_unreachable_leaf_is_dropped_as_no_path(spray):
    spray.install(*aggregate_entries(mode=2))
    local = roce_v6(f"fd00:1:{OWN_LEAF:x}::1", f"fd00:1:{OWN_LEAF:x}::2", qp=3, psn=1)
    spray.switch.send(HOST, bytes(local))
    (port, frame), = spray.switch.receive(count=1)
    routed = local.copy()
    routed[Ether].src, routed[Ether].dst = sw_mac(UP_B), nbr_mac(UP_B)
    routed[IPv6].hlim -= 1
    assert (port, frame) == (UP_B, bytes(routed))

    spray.switch.send(HOST, bytes(roce_v6(f"fd00:1:{OWN_LEAF:x}::1", f"fd00:1:{DEAD_LEAF:x}::1", qp=3, psn=2)))
    spray.switch.send(HOST, bytes(roce_v6(f"fd00:1:{OWN_LEAF:x}::1", "fd00:1:200::1", qp=3, psn=3)))  # leaf 512
    assert spray.switch.receive(timeout=1.0) == []
    assert spray.counter("IngressPipe.drop_reasons", 15).packets == 1  # NO_PATH: leaf 7
    assert spray.counter("IngressPipe.drop_reasons", 7).packets == 1  # NO_ROUTE: beyond the plane's leaves
    assert spray.counter("IngressPipe.headend.path_packets", 0).packets == 0
