"""RoCEv2 packets with scapy: building RC SEND/WRITE packets with their ICRC, and checking it."""

from __future__ import annotations

import struct

from scapy.contrib.roce import BTH
from scapy.layers.inet import IP, UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether
from scapy.packet import Packet, Raw

ROCE_V2_UDP_PORT = 4791
OPCODE_RC_SEND_ONLY = 0x04
OPCODE_RC_RDMA_WRITE_ONLY = 0x0A


def roce_v6(src: str, dst: str, qp: int, psn: int, *, sport: int = 49152,
            opcode: int = OPCODE_RC_SEND_ONLY, payload: bytes = b"\x00" * 64, tc: int = 0,
            hlim: int = 64, smac: str = "02:00:00:00:00:01",
            dmac: str = "02:00:00:00:00:02") -> Packet:
    """Ethernet / IPv6 / UDP 4791 / BTH / payload / ICRC, as a NIC would send it."""
    return (Ether(src=smac, dst=dmac) / IPv6(src=src, dst=dst, tc=tc, hlim=hlim)
            / UDP(sport=sport, dport=ROCE_V2_UDP_PORT)
            / BTH(opcode=opcode, dqpn=qp, psn=psn, ackreq=1) / Raw(payload))


def roce_v4(src: str, dst: str, qp: int, psn: int, *, sport: int = 49152,
            opcode: int = OPCODE_RC_SEND_ONLY, payload: bytes = b"\x00" * 64, ttl: int = 64,
            smac: str = "02:00:00:00:00:01", dmac: str = "02:00:00:00:00:02") -> Packet:
    """Ethernet / IPv4 / UDP 4791 / BTH / payload / ICRC."""
    return (Ether(src=smac, dst=dmac) / IP(src=src, dst=dst, ttl=ttl, flags="DF")
            / UDP(sport=sport, dport=ROCE_V2_UDP_PORT)
            / BTH(opcode=opcode, dqpn=qp, psn=psn, ackreq=1) / Raw(payload))


def icrc_ok(frame: bytes | Packet) -> bool:
    """True when the innermost RoCEv2 packet's ICRC matches a recomputation."""
    pkt = Ether(bytes(frame)) if isinstance(frame, (bytes, bytearray)) else frame
    if BTH not in pkt:
        return False
    bth = pkt[BTH]
    received = struct.pack("!I", bth.icrc)  # the trailer's bytes as they were on the wire
    rebuilt = bth.copy()
    rebuilt.icrc = None
    return rebuilt.compute_icrc(b"") == received
