"""The port-state bitmap: the receiver's NIC ports in every acknowledgement, the sender stopping to use a plane
whose port is down at the other end from the next acknowledgement on, and this host's own ports (local remap)."""

from __future__ import annotations

import struct

from endpoint.sender import SenderConfig
from endpoint.wire import ACK, ACK_MAGIC, AckHeader
from tests.unit.endpoint.test_transport import Net

PLANE1 = (1024, 1025)


def test_an_ack_carries_the_port_bitmap_and_one_without_it_reads_as_not_carried():
    h = AckHeader(ACK, 1025, 7, 123, True, 0b01)
    assert AckHeader.unpack(h.pack()) == h
    old = struct.pack(AckHeader.FMT, ACK_MAGIC, ACK, 1025, 7, 123, 1)  # the header without the bitmap
    assert AckHeader.unpack(old) == AckHeader(ACK, 1025, 7, 123, True, 0)


def test_a_plane_down_at_the_receiver_is_avoided_from_the_next_ack_and_used_again_once_up():
    net = Net("health", SenderConfig(qps=2, messages=1200, window=8))

    def ports(t: float) -> None:
        net.receiver.ports = 0b01 if 0.1 <= t < 0.3 else 0b11  # h2's plane-1 NIC down from 0.1 to 0.3 s

    net.run(2.0, hook=ports)
    s = net.sender
    table = s.tables["h2"]
    changes = table.port_changes
    assert [(where, plane, up) for _, where, plane, up in changes] == [("remote", 1, False), ("remote", 1, True)]
    down, up = changes[0][0], changes[1][0]
    assert 0.1 <= down <= 0.1 + 2 * net.delay + 1e-3 and 0.3 <= up <= 0.3 + 2 * net.delay + 1e-3  # the next ACK
    on_plane1 = [t for t, ev, probe in net.sent_on if ev in PLANE1 and down < t < up]
    assert on_plane1 == []  # not one packet, data or probe, on plane 1 while its port was down at h2
    assert any(ev in PLANE1 for t, ev, _ in net.sent_on if t > up)  # used again once up
    assert s.done and sum(q.received for q in net.receiver.qps.values()) == 1200


def test_a_local_port_down_remaps_this_hosts_evs_towards_every_destination():
    net = Net("health", SenderConfig(qps=2, messages=400, window=8))
    s = net.sender

    def ports(t: float) -> None:
        if abs(t - 0.05) < 1e-9:
            s.set_local_ports(0b10, t)  # this host's plane-0 NIC goes down

    net.run(2.0, hook=ports)
    assert [tuple(c[1:]) for c in s.tables["h2"].port_changes] == [("local", 0, False)]
    assert not [ev for t, ev, _ in net.sent_on if ev in (0, 1) and t >= 0.05]
    assert s.done and not s.tables["h2"][0].usable and s.tables["h2"][0].local_up is False
    assert s.to_json()["port_changes"]["h2"] == [[0.05, "local", 0, False]]
