"""RoCEv2 frames as lab hosts send them: where hosts are (their plane NICs), BTH and ICRC, the test tag, parsing."""

from __future__ import annotations

import socket
import struct
import sys
import zlib
from array import array
from dataclasses import dataclass
from typing import Literal

from controller import planning
from controller.model.sids import fmt_v4, fmt_v6
from controller.model.topology import Topology


ROCE_PORT = 4791


ETH_P_ALL = 0x0003


ETH_IPV6, ETH_IPV4 = 0x86DD, 0x0800


PACKET_OUTGOING = 4


PSN_MASK = 0xFFFFFF


MAGIC = b"RLAB"


GATEWAY_V6 = "fe80::1"  # the fake gateway each host NIC routes its plane through


GATEWAY_V4 = "169.254.0.1"


# RC opcodes (IBA 9.2): FIRST, MIDDLE, LAST, ONLY
OPCODES = {"send": (0x00, 0x01, 0x02, 0x04), "write": (0x06, 0x07, 0x08, 0x0A)}


RETH_OPCODES = {0x06, 0x0A}  # RDMA WRITE FIRST/ONLY carry a 16-byte RETH


RETH_LEN = 16


Verb = Literal["send", "write"]


PlaneMode = Literal["packet", "qp"]


@dataclass(frozen=True)
class HostNic:
    """A host's NIC in one plane: interface, MAC, addresses, and the leaf port MAC it sends to."""

    host: str
    plane: int
    intf: str
    mac: str
    v6: str
    v4: str
    leaf: str
    slot: int
    gateway_mac: str  # the T0's MAC: the plan's smac towards the host, the dmac hosts send to
    v6_prefix: str  # the plane's host prefix (fd00:<plane>::/32), routed via the gateway
    v4_prefix: str  # the plane's IPv4 /12


IFNAMSIZ = 15  # longest Linux interface name


def host_intf(host: str, plane: int) -> str:
    """A host's NIC in a plane (inside the host's namespace): `<host>-eth<plane>`, or `eth<plane>`."""
    name = f"{host}-eth{plane}"
    return name if len(name) <= IFNAMSIZ else f"eth{plane}"


def host_nics(topo: Topology, host: str) -> tuple[HostNic, ...]:
    """The NICs of a host, by plane, with the addresses of the SID plan (docs/sid-plan.md)."""
    if host not in topo.hosts:
        known = ", ".join(sorted(topo.hosts)[:8])
        raise ValueError(f"unknown host '{host}' (hosts: {known}{', ...' if len(topo.hosts) > 8 else ''})")
    sids = planning.sid_plan(topo)
    out = []
    for nic in topo.hosts[host]:
        leaf = topo.t0(nic.plane, nic.t0)
        out.append(HostNic(
            host=host, plane=nic.plane, intf=host_intf(host, nic.plane), mac=topo.host_mac(leaf, nic.slot),
            v6=fmt_v6(sids.host_v6(nic.plane, nic.t0, nic.slot)), v4=fmt_v4(sids.host_v4(nic.plane, nic.t0, nic.slot)),
            leaf=leaf.name, slot=nic.slot, gateway_mac=leaf.mac,
            v6_prefix=f"{fmt_v6(sids.leaf_v6(nic.plane, 0))}/32", v4_prefix=f"{fmt_v4(sids.plane_v4(nic.plane))}/12"))
    return tuple(out)


def mac_bytes(text: str) -> bytes:
    """aa:bb:cc:dd:ee:ff as its six bytes."""
    return bytes.fromhex(text.replace(":", ""))


def _csum16(data: bytes) -> int:
    """One's complement sum of 16-bit words (RFC 1071), in network order."""
    if len(data) % 2:
        data += b"\x00"
    words = array("H", data)
    if sys.byteorder == "little":
        words.byteswap()
    total = sum(words)
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return total


def icrc(ip_packet: bytes) -> bytes:
    """The ICRC of a RoCEv2 packet (IPv6 or IPv4 header first, ICRC trailer included or not:
    the last 4 bytes are left out). IBA A17.3.3: 8 bytes of 1s for the LRH, then the packet with
    the variant fields (TC, flow label, hop limit / TOS, TTL, checksum; UDP checksum; BTH
    FECN/BECN/resv6) set to 1s; CRC-32, stored least significant byte first."""
    p = bytearray(ip_packet[:-4])
    if p[0] >> 4 == 6:
        p[0] |= 0x0F
        p[1:4] = b"\xff\xff\xff"
        p[7] = 0xFF
        udp = 40
    else:
        ihl = (p[0] & 0x0F) * 4
        p[1] = 0xFF
        p[8] = 0xFF
        p[10:12] = b"\xff\xff"
        udp = ihl
    p[udp + 6:udp + 8] = b"\xff\xff"
    p[udp + 8 + 4] = 0xFF
    return struct.pack("<I", zlib.crc32(b"\xff" * 8 + bytes(p)) & 0xFFFFFFFF)


def bth(opcode: int, qp: int, psn: int, *, ackreq: bool = True, pkey: int = 0xFFFF) -> bytes:
    """A 12-byte BTH (no solicited event, no pad, version 0)."""
    return struct.pack("!BBHI I", opcode, 0, pkey, qp & PSN_MASK, (int(ackreq) << 31) | (psn & PSN_MASK))


def roce_frame(smac: str, dmac: str, src: str, dst: str, opcode: int, qp: int, psn: int, payload: bytes, *,
               sport: int = 49152, tc: int = 0, hlim: int = 64) -> bytes:
    """Ethernet / IPv6 / UDP 4791 / BTH / payload / ICRC, with a correct UDP checksum."""
    body = bth(opcode, qp, psn) + payload
    udp_len = 8 + len(body) + 4
    s, d = socket.inet_pton(socket.AF_INET6, src), socket.inet_pton(socket.AF_INET6, dst)
    ip = struct.pack("!IHBB", 6 << 28 | tc << 20, udp_len, 17, hlim) + s + d
    udp = struct.pack("!HHHH", sport, ROCE_PORT, udp_len, 0)
    crc = icrc(ip + udp + body + b"\x00" * 4)
    pseudo = s + d + struct.pack("!IxxxB", udp_len, 17)
    csum = 0xFFFF - _csum16(pseudo + udp + body + crc)
    udp = udp[:6] + struct.pack("!H", csum or 0xFFFF)
    return mac_bytes(dmac) + mac_bytes(smac) + struct.pack("!H", ETH_IPV6) + ip + udp + body + crc


def roce_frame_v4(smac: str, dmac: str, src: str, dst: str, opcode: int, qp: int, psn: int, payload: bytes, *,
                  sport: int = 49152, tos: int = 0, ttl: int = 64, ident: int = 1) -> bytes:
    """Ethernet / IPv4 (DF) / UDP 4791 (checksum 0, as RoCEv2 NICs send it) / BTH / payload / ICRC."""
    body = bth(opcode, qp, psn) + payload
    udp_len = 8 + len(body) + 4
    s, d = socket.inet_pton(socket.AF_INET, src), socket.inet_pton(socket.AF_INET, dst)
    ip = struct.pack("!BBHHHBBH", 0x45, tos, 20 + udp_len, ident & 0xFFFF, 0x4000, ttl, 17, 0) + s + d
    ip = ip[:10] + struct.pack("!H", 0xFFFF - _csum16(ip)) + ip[12:]
    udp = struct.pack("!HHHH", sport, ROCE_PORT, udp_len, 0)
    crc = icrc(ip + udp + body + b"\x00" * 4)
    return mac_bytes(dmac) + mac_bytes(smac) + struct.pack("!H", ETH_IPV4) + ip + udp + body + crc


@dataclass(frozen=True)
class Tag:
    """What the first payload bytes of every packet say: sender, message, packet in it, plane,
    the QP's packet total and start PSN (so a receiver knows what to expect), and when it was sent
    (CLOCK_MONOTONIC ns: one clock for every namespace of a machine)."""

    sender: str
    qp: int
    msg: int
    index: int
    plane: int
    total: int
    start_psn: int
    sent_ns: int = 0

    FMT = "!4sB32sIIHBIIQ"
    SIZE = struct.calcsize(FMT)

    def pack(self) -> bytes:
        return struct.pack(self.FMT, MAGIC, len(self.sender), self.sender.encode()[:32], self.qp, self.msg,
                           self.index, self.plane, self.total, self.start_psn, self.sent_ns)

    @classmethod
    def unpack(cls, data: bytes) -> Tag | None:
        if len(data) < cls.SIZE or data[:4] != MAGIC:
            return None
        _, n, name, qp, msg, index, plane, total, start, sent = struct.unpack(cls.FMT, data[:cls.SIZE])
        return cls(name[:n].decode(errors="replace"), qp, msg, index, plane, total, start, sent)


def parse_roce(frame: bytes) -> tuple[bytes, int, int, bytes] | None:
    """(IP packet, dest QP, PSN, payload after BTH and RETH) of a RoCEv2 frame, else None."""
    if len(frame) < 14 + 40 + 8 + 12 + 4:
        return None
    ethertype = struct.unpack_from("!H", frame, 12)[0]
    if ethertype == ETH_IPV6:
        if frame[14 + 6] != 17:
            return None
        plen = struct.unpack_from("!H", frame, 18)[0]
        ip, udp = frame[14:14 + 40 + plen], 40
    elif ethertype == ETH_IPV4:
        ihl = (frame[14] & 0x0F) * 4
        if frame[14 + 9] != 17:
            return None
        ip, udp = frame[14:14 + struct.unpack_from("!H", frame, 16)[0]], ihl
    else:
        return None
    if len(ip) < udp + 8 + 12 + 4 or struct.unpack_from("!H", ip, udp + 2)[0] != ROCE_PORT:
        return None
    b = udp + 8
    opcode, qp, psn = ip[b], struct.unpack_from("!I", ip, b + 4)[0] & PSN_MASK, struct.unpack_from("!I", ip, b + 8)[0]
    body = ip[b + 12:-4]
    if opcode in RETH_OPCODES:
        body = body[RETH_LEN:]
    return ip, qp, psn & PSN_MASK, body
