"""Link probes: the probe frame (IEEE 802 local experimental ethertype) and the punt entries that bring it in."""

from __future__ import annotations

import struct
from dataclasses import dataclass

from controller.entries import TableEntry, Ternary
from controller.topology import Switch

PROBE_ETHERTYPE = 0x88B5  # IEEE Std 802 "local experimental ethertype 1": never on the wire between hosts
PUNT = "IngressPipe.cpu.punt"
SEND_TO_CPU = "IngressPipe.cpu.send_to_cpu"
PUNT_PRIORITY = 10
PORT_MASK = 0x1FF  # bmv2's 9-bit ports
MAGIC = b"SRV6PRB1"
# Padded like a small fabric frame (an SRv6 + RoCEv2 header alone is ~130 bytes): a link that cannot
# carry fabric frames (MTU too small, e.g. the lab's MTU-68 cut) fails its probes too.
PROBE_SIZE = 256
_BODY = struct.Struct("!8sHHIQ")  # magic, link id, direction, sequence, send time (ns, CLOCK_MONOTONIC)
_SRC_MAC = bytes.fromhex("025f0000fffe")
_DST_MAC = bytes.fromhex("025f0000ffff")


def fabric_ports(sw: Switch) -> tuple[int, ...]:
    """The ports of a switch that face other switches (a T0's uplinks, a T1's downlinks)."""
    return tuple(sorted((*sw.uplinks, *sw.downlinks)))


def punt_entries(sw: Switch) -> list[TableEntry]:
    """One punt entry per fabric port: a probe arriving there goes to the controller (packet-in)."""
    return [TableEntry(PUNT, (("ether_type", Ternary(PROBE_ETHERTYPE, 0xFFFF)), ("ingress_port", Ternary(port, PORT_MASK))),
                       SEND_TO_CPU, priority=PUNT_PRIORITY) for port in fabric_ports(sw)]


@dataclass(frozen=True, slots=True)
class Probe:
    """What a probe frame carries: which link direction it tests, its sequence number and send time."""

    link: int
    direction: int
    seq: int
    sent_ns: int


def probe_frame(p: Probe) -> bytes:
    """An Ethernet frame of PROBE_SIZE bytes with the probe in its payload."""
    body = _BODY.pack(MAGIC, p.link, p.direction, p.seq & 0xFFFFFFFF, p.sent_ns)
    return (_DST_MAC + _SRC_MAC + struct.pack("!H", PROBE_ETHERTYPE) + body).ljust(PROBE_SIZE, b"\0")


def parse_probe(frame: bytes) -> Probe | None:
    """The probe a frame carries, or None when it is not one of ours."""
    if len(frame) < 14 + _BODY.size or frame[12:14] != struct.pack("!H", PROBE_ETHERTYPE):
        return None
    magic, link, direction, seq, sent = _BODY.unpack_from(frame, 14)
    return Probe(link, direction, seq, sent) if magic == MAGIC else None
