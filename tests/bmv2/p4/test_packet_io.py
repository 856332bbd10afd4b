"""Controller packet I/O on the explicit CPU port (255): packet-out to a port, packet-in by punt rule."""

from __future__ import annotations

import pytest
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from controller.plan.entries import TableEntry, Ternary

PROBE_ETHERTYPE = 0x88B5  # IEEE local experimental: what a liveness probe could use


def probe(port: int) -> bytes:
    return bytes(Ether(src="02:cc:00:00:00:01", dst="02:cc:00:00:00:02", type=PROBE_ETHERTYPE)
                 / Raw(f"probe via port {port}".encode().ljust(46, b"\0")))


@pytest.mark.parametrize("program", ["srv6_spray", "eecmp_qp_hash"])
def test_packet_out_leaves_by_the_named_port_untouched(request, program):
    device = request.getfixturevalue("spray" if program == "srv6_spray" else "ecmp")
    device.conn.packet_out(probe(3), egress_port=3, _pad=0)
    assert device.switch.receive(timeout=2.0, count=1) == [(3, probe(3))]


@pytest.mark.parametrize("program", ["srv6_spray", "eecmp_qp_hash"])
def test_punt_rule_sends_the_packet_in_with_its_ingress_port(request, program):
    device = request.getfixturevalue("spray" if program == "srv6_spray" else "ecmp")
    device.install(TableEntry("IngressPipe.cpu.punt",
                              (("ether_type", Ternary(PROBE_ETHERTYPE, 0xFFFF)),),
                              "IngressPipe.cpu.send_to_cpu", priority=10))
    device.switch.send(2, probe(2))
    packets = list(device.conn.packets_in(timeout=2.0))
    assert [(p.payload, dict(p.metadata)["ingress_port"]) for p in packets] == [(probe(2), 2)]
    assert device.switch.receive(timeout=0.5) == []  # punted, not forwarded
    assert device.counter("FabricEgress.port_tx", 255).packets == 1


@pytest.mark.parametrize("program", ["srv6_spray", "eecmp_qp_hash"])
def test_a_hosts_neighbor_advertisement_to_the_probe_address_is_punted_and_nothing_else(request, program):
    """Host NIC probes (controller.plan.probes): the T0 sends a Neighbor Solicitation out of a host port;
    the NA comes back to the probe address fe80::88b5:0:5 and the plan's punt entry brings it to the controller with its
    ingress port. Other IPv6 from the host (here an NA to another address) is not punted."""
    import ipaddress

    from scapy.layers.inet6 import ICMPv6ND_NA, ICMPv6NDOptDstLLAddr, IPv6

    from controller.plan.probes import advertised_target, neighbor_solicitation, punt_entries
    from controller.model.topology import Switch

    device = request.getfixturevalue("spray" if program == "srv6_spray" else "ecmp")
    leaf = Switch("t0", "t0", 0, 0, 1, "127.0.0.1:1", "02:00:00:00:00:01", host_ports=(1, 2), host_names=("h0", ""),
                  uplinks=(3, 4))
    device.install(*punt_entries(leaf))
    host = "2001:db8:7:1::3"
    ns = neighbor_solicitation(int(ipaddress.IPv6Address(host)), 5)
    device.conn.packet_out(ns, egress_port=1, _pad=0)
    assert device.switch.receive(timeout=2.0, count=1) == [(1, ns)]  # out of the host port, untouched

    def na(dst: str) -> bytes:
        return bytes(Ether(dst="02:5f:00:00:ff:fe", src="00:00:00:00:00:01") / IPv6(src=host, dst=dst, hlim=255)
                     / ICMPv6ND_NA(tgt=host, S=1) / ICMPv6NDOptDstLLAddr(lladdr="00:00:00:00:00:01"))

    device.switch.send(1, na("fe80::88b5:0:5"))
    packets = list(device.conn.packets_in(timeout=2.0))
    assert [(p.payload, dict(p.metadata)["ingress_port"]) for p in packets] == [(na("fe80::88b5:0:5"), 1)]
    assert advertised_target(packets[0].payload) == (int(ipaddress.IPv6Address(host)), 5)
    device.switch.send(1, na("fe80::1"))
    assert list(device.conn.packets_in(timeout=0.5)) == []  # not to the probe address: not punted
    assert device.counter("FabricEgress.port_tx", 255).packets == 1


def test_rocev2_skips_the_punt_lookup_and_is_routed_while_other_ipv6_is_punted(spray):
    """srv6_spray's fast path: a data packet (a BTH parsed) is never the controller's, so it skips the
    punt lookup even under a rule matching every IPv6 packet; a UDP packet that is not RoCEv2 is punted."""
    from scapy.layers.inet import UDP
    from scapy.layers.inet6 import IPv6

    from mininet_labs.roce import roce_v6
    from tests.bmv2.p4.test_srv6_spray import nbr_mac, route, sw_mac

    spray.install(TableEntry("IngressPipe.cpu.punt", (("ether_type", Ternary(0x86DD, 0xFFFF)),),
                             "IngressPipe.cpu.send_to_cpu", priority=10), route("fd00:0:0:12::", 64, 3))
    data = roce_v6("fd00:0:0:11::1", "fd00:0:0:12::1", qp=7, psn=1, smac=nbr_mac(2), dmac=sw_mac(2))
    spray.switch.send(2, bytes(data))
    want = data.copy()
    want[Ether].src, want[Ether].dst, want[IPv6].hlim = sw_mac(3), nbr_mac(3), 63
    assert spray.switch.receive(timeout=2.0, count=1) == [(3, bytes(want))]
    assert list(spray.conn.packets_in(timeout=0.5)) == []
    other = bytes(Ether(src=nbr_mac(2), dst=sw_mac(2)) / IPv6(src="fd00:0:0:11::1", dst="fd00:0:0:12::1")
                  / UDP(sport=5000, dport=5001) / Raw(bytes(16)))
    spray.switch.send(2, other)
    assert [(p.payload, dict(p.metadata)["ingress_port"]) for p in spray.conn.packets_in(timeout=2.0)] == [(other, 2)]
    assert spray.switch.receive(timeout=0.5) == []
