"""The SR-domain boundary at host ports (RFC 8754 5.1, RFC 8986 8) and endpoint mode, where a host
port's policy lets the host write its own uSID carriers: each case with the exact packet out, or
dropped with exactly one count under its reason."""

from __future__ import annotations

import ipaddress

import pytest
from scapy.layers.inet6 import ICMPv6EchoRequest, IPv6, IPv6ExtHdrRouting, IPv6ExtHdrSegmentRouting
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from controller.plan.entries import Exact, Lpm, TableEntry
from controller.runtime.codec import canonical
from mininet_labs.roce import icrc_ok, roce_v6
from tests.bmv2.p4.test_srv6_spray import (
    DST_DT6, DST_HOST, DST_LEAF, HOST, SPINE_A, SPINE_B, SRC_HOST, UP_A, carrier, headend_entries, host_entry, nbr_mac,
    outer, spray_hash, sw_mac,
)

HOP_LIMIT, SR_BOUNDARY, HOST_SOURCE, HOST_SR_STEERING = 4, 21, 22, 23
OWN_LEAF = 0x0011  # this leaf's uN
POLICY = "IngressPipe.boundary.host_policy"
FIRST_USID = "IngressPipe.boundary.host_first_usid"
OTHER_HOST = "fd00:0:0:11::2"  # another host behind this leaf

INNER = bytes(roce_v6(SRC_HOST, DST_HOST, qp=5, psn=1)[IPv6])


def policy(action: str) -> TableEntry:
    return host_entry(action)


def first_usid(usid: int) -> TableEntry:
    return TableEntry(FIRST_USID, (("first_usid", Exact(usid)),), "IngressPipe.boundary.first_usid_allowed")


def from_host(*layers) -> bytes:
    pkt = Ether(src=nbr_mac(HOST), dst=sw_mac(HOST))
    for layer in layers:
        pkt = pkt / layer
    return bytes(pkt)


def carrier_packet(dst: str, src: str = SRC_HOST, inner: bytes = INNER) -> bytes:
    return from_host(IPv6(src=src, dst=dst, nh=41), Raw(inner))


def install(device, action: str) -> None:
    device.install(*headend_entries(mode=1, spines={SPINE_A: UP_A}, policy=action),
                   first_usid(SPINE_A), first_usid(SPINE_B), first_usid(OWN_LEAF))


def drops(device, frame: bytes, port: int = HOST) -> dict[int, int]:
    """Send from the host port (or `port`); nothing may come out; the drop counts that moved."""
    before = device.drop_counts()
    device.switch.send(port, frame)
    assert device.switch.receive(timeout=0.5) == []
    after = device.drop_counts()
    return {r: after[r] - before[r] for r in after if after[r] != before[r]}


SR_FROM_HOST = {
    "ipv6-in-ipv6 to a carrier": carrier_packet(carrier(SPINE_A, DST_LEAF, DST_DT6)),
    "icmpv6 echo inside ipv6-in-ipv6 to a carrier": carrier_packet(
        carrier(SPINE_A, DST_LEAF, DST_DT6), inner=bytes(IPv6(src=SRC_HOST, dst=DST_HOST) / ICMPv6EchoRequest())),
    "ipv6-in-ipv6 to a host address": carrier_packet(DST_HOST),
    "plain udp to an address in the block": from_host(IPv6(src=SRC_HOST, dst=carrier(SPINE_A, DST_LEAF)),
                                                      Raw(INNER[40:])),
    "srh to a host address": from_host(IPv6(src=SRC_HOST, dst=DST_HOST, nh=43),
                                       IPv6ExtHdrSegmentRouting(addresses=[DST_HOST], segleft=0, nh=41), Raw(INNER)),
    "routing type 0": from_host(IPv6(src=SRC_HOST, dst=DST_HOST), IPv6ExtHdrRouting(addresses=[DST_HOST], segleft=1),
                                Raw(INNER)),
}


@pytest.mark.parametrize("name", list(SR_FROM_HOST))
def test_by_default_a_host_port_is_the_sr_domain_boundary(spray, name):
    install(spray, "sr_boundary")
    assert drops(spray, SR_FROM_HOST[name]) == {SR_BOUNDARY: 1}


@pytest.mark.parametrize("action", ["sr_boundary", "host_source_routing"])
def test_a_host_may_not_use_another_hosts_source_address(spray, action):
    install(spray, action)
    assert drops(spray, bytes(roce_v6(OTHER_HOST, DST_HOST, qp=5, psn=1))) == {HOST_SOURCE: 1}
    assert drops(spray, carrier_packet(carrier(SPINE_A, DST_LEAF, DST_DT6), src=OTHER_HOST)) == {HOST_SOURCE: 1}


@pytest.mark.parametrize("action", ["sr_boundary", "host_source_routing"])
def test_plain_roce_from_the_host_is_still_encapsulated(spray, action):
    install(spray, action)
    sent = roce_v6(SRC_HOST, DST_HOST, qp=0x12, psn=7)
    spray.switch.send(HOST, bytes(sent))
    (port, frame), = spray.switch.receive(count=1)
    assert port == UP_A
    assert frame == bytes(outer(carrier(SPINE_A, DST_LEAF, DST_DT6), bytes(sent[IPv6]), UP_A,
                                fl=spray_hash(sent[IPv6], 1)))


@pytest.mark.parametrize("first", [SPINE_A, OWN_LEAF])
def test_endpoint_mode_transits_the_hosts_own_carrier(spray, first):
    """The host's carrier leaves untouched but for the hop limit (a spine first), or uN-shifted
    (this leaf first: its own uSID is consumed here, then the spine's route applies)."""
    install(spray, "host_source_routing")
    usids = (SPINE_A, DST_LEAF, DST_DT6) if first == SPINE_A else (OWN_LEAF, SPINE_A, DST_LEAF, DST_DT6)
    spray.install(TableEntry("IngressPipe.endpoint.my_sid", (("dst_addr", Lpm(carrier(OWN_LEAF), 48)),),
                             "IngressPipe.endpoint.usid_un"))
    spray.switch.send(HOST, carrier_packet(carrier(*usids)))
    (port, frame), = spray.switch.receive(count=1)
    assert port == UP_A
    assert frame == bytes(outer(carrier(SPINE_A, DST_LEAF, DST_DT6), INNER, UP_A, fl=0, hlim=63, src=SRC_HOST))
    assert icrc_ok(frame)


STEERING = {
    "first usid is another leaf (skips the spines)": carrier_packet(carrier(DST_LEAF, DST_DT6)),
    "first usid is nobody's": carrier_packet(carrier(0x0999, DST_LEAF, DST_DT6)),
    "destination outside the block": carrier_packet(DST_HOST),
    "srh segment outside the block": from_host(
        IPv6(src=SRC_HOST, dst=carrier(SPINE_A, DST_LEAF), nh=43),
        IPv6ExtHdrSegmentRouting(addresses=["2001:db8:66::1", carrier(SPINE_A, DST_LEAF)], segleft=1, nh=41),
        Raw(INNER)),
    "routing type 0 to a carrier": from_host(IPv6(src=SRC_HOST, dst=carrier(SPINE_A, DST_LEAF, DST_DT6)),
                                             IPv6ExtHdrRouting(addresses=[DST_HOST], segleft=1), Raw(INNER)),
}


@pytest.mark.parametrize("name", list(STEERING))
def test_endpoint_mode_drops_carriers_that_steer_outside_the_fabric(spray, name):
    install(spray, "host_source_routing")
    assert drops(spray, STEERING[name]) == {HOST_SR_STEERING: 1}


def test_a_port_without_a_policy_is_a_fabric_port_and_transits_carriers(spray):
    """Fabric ports carry SRv6 between switches: no boundary there (only host ports get a policy)."""
    spray.install(*headend_entries(mode=1, spines={SPINE_A: UP_A}, policy=None))
    spray.switch.send(HOST, carrier_packet(carrier(SPINE_A, DST_LEAF, DST_DT6)))
    (port, frame), = spray.switch.receive(count=1)
    assert port == UP_A and frame == bytes(outer(carrier(SPINE_A, DST_LEAF, DST_DT6), INNER, UP_A, fl=0, hlim=63,
                                                 src=SRC_HOST))


def test_policies_read_back_from_the_switch(spray):
    install(spray, "host_source_routing")
    held = spray.conn.read_all()
    want = canonical(policy("host_source_routing"), spray.conn.require_p4info())
    assert [e for e in held if getattr(e, "table", "") == POLICY] == [want]
    assert sorted(e.match[0][1].value for e in held if getattr(e, "table", "") == FIRST_USID) == \
        sorted([SPINE_A, SPINE_B, OWN_LEAF])


@pytest.mark.parametrize("hlim", [0, 1])
def test_a_host_packet_whose_hop_limit_would_expire_at_the_leaf_is_dropped(spray, hlim):
    """RFC 8200 3 / RFC 2473 3.1: the leaf forwards the host's packet into the tunnel."""
    install(spray, "sr_boundary")
    assert drops(spray, bytes(roce_v6(SRC_HOST, DST_HOST, qp=5, psn=1, hlim=hlim))) == {HOP_LIMIT: 1}


def _leaf_plan(host_source_routing: bool):
    """The controller's plan of leaf p0-t0-0 of the default lab (host ports 1, 2; uplinks 3, 4)."""
    from controller.planning import fabric, sid_plan
    from controller.plan.fabricplan import plan
    from controller.routes import Options
    from mininet_labs.labstate import default_topology

    topo = default_topology()
    f = fabric(topo, "srv6_spray", options=Options(host_source_routing=host_source_routing))
    return topo, sid_plan(topo), plan(f)["p0-t0-0"]


@pytest.mark.parametrize("endpoint_mode", [False, True])
def test_the_controllers_plan_transits_a_host_carrier_only_in_endpoint_mode(spray, endpoint_mode):
    """What the controller installs: host h0 (slot 0 of p0-t0-0) writes block | spine 1 | leaf 1 | DT6
    itself; in endpoint mode the leaf sends it to spine 1 unchanged but for the hop limit, otherwise
    it is the SR-domain boundary."""
    from controller.runtime.reconcile import apply

    topo, sids, entities = _leaf_plan(endpoint_mode)
    apply(spray.conn, entities)
    leaf, spine1 = topo.switch("p0-t0-0"), topo.switch("p0-t1-1")
    host = str(ipaddress.IPv6Address(sids.host_v6(0, 0, 0)))
    victim = str(ipaddress.IPv6Address(sids.host_v6(0, 1, 1)))
    c = str(ipaddress.IPv6Address(sids.carrier((sids.t1_usid(0, 1), sids.t0_usid(0, 1), sids.dt6_usid(0)))))
    inner = bytes(roce_v6(host, victim, qp=3, psn=9)[IPv6])
    sent = Ether(src=topo.host_mac(leaf, 0), dst=leaf.mac) / IPv6(src=host, dst=c, nh=41, fl=0xBEEF) / Raw(inner)
    before = spray.drop_counts()
    spray.switch.send(leaf.host_ports[0], bytes(sent))
    got = spray.switch.receive(timeout=0.5)
    if not endpoint_mode:
        assert got == []
        after = spray.drop_counts()
        assert {r: after[r] - before[r] for r in after if after[r] != before[r]} == {SR_BOUNDARY: 1}
        return
    expected = Ether(src=leaf.mac, dst=spine1.mac) / IPv6(src=host, dst=c, nh=41, fl=0xBEEF, hlim=63) / Raw(inner)
    assert got == [(leaf.uplinks[1], bytes(expected))]
