"""Liveness probes and the punt entries that bring them in: link probes (IEEE 802 local experimental
ethertype, packet-out at one end of a T0-T1 link, packet-in at the other) and host NIC probes (an IPv6
Neighbor Solicitation out of a T0's host port, the host's Neighbor Advertisement punted back)."""

from __future__ import annotations

import ipaddress
import struct
from dataclasses import dataclass

from controller.plan.entries import TableEntry, Ternary
from controller.model.topology import Switch

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
    """One punt entry per fabric port: a probe arriving there goes to the controller (packet-in); and
    on a T0 with hosts, one for what hosts send to the controller's probe address (their NAs)."""
    entries = [TableEntry(PUNT, (("ether_type", Ternary(PROBE_ETHERTYPE, 0xFFFF)), ("ingress_port", Ternary(port, PORT_MASK))),
                          SEND_TO_CPU, priority=PUNT_PRIORITY) for port in fabric_ports(sw)]
    if probed_host_ports(sw):
        entries.append(TableEntry(PUNT, (("ether_type", Ternary(ETHERTYPE_IPV6, 0xFFFF)),
                                         ("ipv6_dst", Ternary(PROBE_V6, PROBE_V6_MASK))), SEND_TO_CPU,
                                  priority=PUNT_PRIORITY))
    return entries


# --- host NIC probes: Neighbor Discovery (RFC 4861) ------------------------------------------------
ETHERTYPE_IPV6 = 0x86DD
ICMPV6 = 58
ND_NS, ND_NA = 135, 136
# The controller's link-local probe sources on host ports: fe80::88b5:0:N, N the probe's sequence number
# modulo PROBE_SLOTS, so the host's NA (sent to the NS's source) says which NS it answers (NS and NA
# carry no sequence of their own) and the host's neighbour cache holds at most PROBE_SLOTS of them.
PROBE_V6 = int(ipaddress.IPv6Address("fe80::88b5:0:0"))
PROBE_V6_MASK = ((1 << 128) - 1) ^ 0xFFFF
PROBE_SLOTS = 64
PROBE_MAC = _SRC_MAC


def probed_host_ports(sw: Switch) -> tuple[tuple[int, int, str], ...]:
    """(slot, port, host) of a T0's host ports with a host behind them."""
    return tuple((k, port, sw.host_names[k]) for k, port in enumerate(sw.host_ports)
                 if k < len(sw.host_names) and sw.host_names[k])


def _checksum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def neighbor_solicitation(target: int, slot: int = 0) -> bytes:
    """An NS for `target` (a host's address) from probe address `slot`, to its solicited-node multicast
    group (RFC 4291 2.7.1), with our source link-layer address so the NA comes straight back."""
    group = (0xFF02 << 112) | (0x1FF << 24) | (target & 0xFFFFFF)  # ff02::1:ffXX:XXXX
    dst_mac = bytes.fromhex("3333ff") + (target & 0xFFFFFF).to_bytes(3, "big")
    icmp = struct.pack("!BBHI", ND_NS, 0, 0, 0) + target.to_bytes(16, "big") + bytes([1, 1]) + PROBE_MAC
    src, dst = (PROBE_V6 | slot % PROBE_SLOTS).to_bytes(16, "big"), group.to_bytes(16, "big")
    pseudo = src + dst + struct.pack("!I3xB", len(icmp), ICMPV6)
    icmp = icmp[:2] + struct.pack("!H", _checksum(pseudo + icmp)) + icmp[4:]
    ip = struct.pack("!IHBB", 6 << 28, len(icmp), ICMPV6, 255) + src + dst
    return dst_mac + PROBE_MAC + struct.pack("!H", ETHERTYPE_IPV6) + ip + icmp


def advertised_target(frame: bytes) -> tuple[int, int] | None:
    """(target address, probe slot) of a Neighbor Advertisement sent to a probe address, or None."""
    if len(frame) < 14 + 40 + 24 or frame[12:14] != struct.pack("!H", ETHERTYPE_IPV6):
        return None
    dst = int.from_bytes(frame[38:54], "big")
    if frame[14] >> 4 != 6 or frame[20] != ICMPV6 or dst & PROBE_V6_MASK != PROBE_V6 or dst & 0xFFFF >= PROBE_SLOTS:
        return None
    if frame[54] != ND_NA:
        return None
    return int.from_bytes(frame[62:78], "big"), dst & 0xFFFF


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
