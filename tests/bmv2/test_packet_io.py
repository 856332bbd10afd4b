"""Controller packet I/O on the explicit CPU port (255): packet-out to a port, packet-in by punt rule."""

from __future__ import annotations

import pytest
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from controller.entries import TableEntry, Ternary

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
