"""IngressPipe.port_rx counts every packet once, whichever way it goes: forwarded (counted by the congestion
step's one action), dropped, punted to the controller, or sent by the controller (packet-out)."""

from __future__ import annotations

import pytest
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from controller.plan.entries import TableEntry, Ternary
from tests.bmv2.p4.test_packet_io import PROBE_ETHERTYPE, probe

IN, OUT = 2, 3
NO_ROUTE = 7


def rx(device) -> dict[int, tuple[int, int]]:
    return {c.index: (c.packets, c.bytes) for c in device.conn.read_counter("IngressPipe.port_rx") if c.packets}


@pytest.mark.parametrize("program", ["srv6_spray", "eecmp_qp_hash"])
def test_each_packet_is_counted_once_at_its_ingress_port_whichever_way_it_goes(request, program):
    device = request.getfixturevalue("spray" if program == "srv6_spray" else "ecmp")
    device.install(TableEntry("IngressPipe.cpu.punt", (("ether_type", Ternary(PROBE_ETHERTYPE, 0xFFFF)),),
                              "IngressPipe.cpu.send_to_cpu", priority=10))
    routed = bytes(Ether(src="02:bb:00:00:00:02", dst="02:aa:00:00:00:02")
                   / IPv6(src="fd00:0:0:11::1", dst="fd00:0:0:99::1", hlim=9) / Raw(bytes(20)))
    if program == "srv6_spray":
        from tests.bmv2.p4.test_srv6_spray import route

        device.install(route("fd00:0:0:99::", 64, OUT))
        device.switch.send(IN, routed)
        assert [p for p, _ in device.switch.receive(timeout=2.0, count=1)] == [OUT]
    assert rx(device) == ({IN: (1, len(routed))} if program == "srv6_spray" else {})

    dropped = bytes(Ether(src="02:bb:00:00:00:02", dst="02:aa:00:00:00:02")
                    / IPv6(src="fd00:0:0:11::1", dst="2001:db8:77::1") / Raw(bytes(10)))  # no route
    before = device.drop_counts()
    device.switch.send(IN, dropped)
    assert device.switch.receive(timeout=0.5) == []
    assert device.drop_counts()[NO_ROUTE] - before[NO_ROUTE] == 1
    device.switch.send(OUT, probe(OUT))
    assert [p.payload for p in device.conn.packets_in(timeout=2.0)] == [probe(OUT)]
    device.conn.packet_out(probe(1), egress_port=1, _pad=0)
    assert device.switch.receive(timeout=2.0, count=1) == [(1, probe(1))]

    forwarded = 1 if program == "srv6_spray" else 0
    assert rx(device) == {
        IN: (forwarded + 1, forwarded * len(routed) + len(dropped)),
        OUT: (1, len(probe(OUT))),
        255: (1, len(probe(1)) + 2),  # the packet-out header (9-bit port, 7-bit pad) is on the packet counted
    }
