"""The loop agent's frames (exact fields, the UDP checksum scapy computes) and its hysteresis."""

from __future__ import annotations

import struct

from scapy.layers.inet import UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether

from endpoint.loopprobe import LOOP_PORT, Hysteresis, loop_frame, main, parse_loop

A, B = ("p0-t0-0", "p0-t1-1"), ("p0-t1-1", "p0-t0-0")


def test_a_loop_frame_is_the_carrier_around_a_udp_packet_to_the_host_itself():
    f = loop_frame("02:48:00:00:00:00", "02:5f:00:00:00:00", "fd00:0:400::1", "fcbb:bb00:2:400:fff::", 7, 3, 123456789)
    pkt = Ether(f)
    outer = pkt[IPv6]
    assert (outer.src, outer.dst, outer.nh, outer.hlim) == ("fd00:0:400::1", "fcbb:bb00:2:400:fff::", 41, 64)
    inner = outer.payload
    assert isinstance(inner, IPv6) and (inner.src, inner.dst, inner.nh) == ("fd00:0:400::1", "fd00:0:400::1", 17)
    udp = inner[UDP]
    assert (udp.sport, udp.dport) == (LOOP_PORT, LOOP_PORT)
    again = IPv6(bytes(inner))
    del again[UDP].chksum  # scapy computes it again on build
    assert IPv6(bytes(again))[UDP].chksum == udp.chksum != 0
    assert parse_loop(f) is None  # still encapsulated: not back yet
    back = f[:14] + f[14 + 40:]  # what the leaf's End.DT6 hands back (Ethernet rewritten: not looked at)
    assert parse_loop(back) == (7, 3, 123456789)
    assert parse_loop(back[:-1]) is None
    other = bytearray(back)
    struct.pack_into("!H", other, 14 + 40 + 2, 4791)
    assert parse_loop(bytes(other)) is None


def test_a_link_is_reported_after_confirm_rounds_in_a_row_and_cleared_after_as_many_without():
    h = Hysteresis(confirm=2)
    assert not h.update(frozenset({A}))  # once: a loop lost by chance
    assert not h.update(frozenset())
    assert not h.update(frozenset({A}))
    assert h.update(frozenset({A, B})) and h.reported == {A}
    assert h.update(frozenset({A, B})) and h.reported == {A, B}
    assert not h.update(frozenset({B}))  # A clean once: still reported
    assert not h.update(frozenset({A, B}))  # A again: its clean count starts over
    assert not h.update(frozenset({B}))
    assert h.update(frozenset({B})) and h.reported == {B}
    assert not h.update(frozenset())
    assert h.update(frozenset()) and h.reported == set()


def test_bad_arguments_are_one_line_and_exit_2(capsys, tmp_path):
    assert main(["--topology", "t.yaml", "--host", "h0", "--state", str(tmp_path / "s.json"), "--period-ms", "0"]) == 2
    err = capsys.readouterr().err
    assert err == "--period-ms and --timeout-ms must be above 0, --confirm at least 1\n"
    assert not (tmp_path / "s.json").exists()
