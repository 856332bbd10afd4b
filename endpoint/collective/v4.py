"""IPv4 RoCEv2 for the collective ranks: eecmp_qp_hash's plan routes IPv4 only (IPv4-mapped prefixes), so
the schemes on it send data and ACKs over the hosts' IPv4 addresses. A frame read back is given the
peers' IPv6 addresses, so the transport (keyed by the EV export's addresses) is the same either way."""

from __future__ import annotations

import socket
import struct

from endpoint.wire import AETH_ACK, AETH_NAK, NACK, OP_ACK, AckHeader, Received
from mininet_labs.frames import ETH_IPV4, ROCE_PORT, icrc, roce_frame_v4

PSN_MASK = 0xFFFFFF


def data_frame(smac: str, dmac: str, src: str, dst: str, qp: int, psn: int, payload: bytes, sport: int,
               opcode: int, tos: int) -> bytes:
    return roce_frame_v4(smac, dmac, src, dst, opcode, qp, psn & PSN_MASK, payload, sport=sport, tos=tos)


def ack_frame(smac: str, dmac: str, src: str, dst: str, qp: int, psn: int, header: AckHeader, sport: int) -> bytes:
    syndrome = AETH_NAK if header.kind == NACK else AETH_ACK
    return roce_frame_v4(smac, dmac, src, dst, OP_ACK, qp, psn & PSN_MASK,
                         struct.pack("!I", syndrome << 24) + header.pack(), sport=sport)


def parse(frame: bytes, to_v6: dict[str, str]) -> Received | None:
    """An IPv4 RoCEv2 frame as wire.parse gives an IPv6 one, its addresses mapped to IPv6 (None: not one)."""
    if len(frame) < 14 + 20 + 8 + 12 + 4 or struct.unpack_from("!H", frame, 12)[0] != ETH_IPV4:
        return None
    ihl = (frame[14] & 0x0F) * 4
    if frame[14 + 9] != 17:
        return None
    ip = frame[14:14 + struct.unpack_from("!H", frame, 16)[0]]
    if len(ip) < ihl + 8 + 12 + 4 or struct.unpack_from("!H", ip, ihl + 2)[0] != ROCE_PORT:
        return None
    src, dst = socket.inet_ntoa(ip[12:16]), socket.inet_ntoa(ip[16:20])
    if src not in to_v6:
        return None
    b = ihl + 8
    tos = ip[1]
    return Received(to_v6[src], to_v6.get(dst, dst), tos & 3, tos >> 2, struct.unpack_from("!H", ip, ihl)[0], ip[b],
                    struct.unpack_from("!I", ip, b + 4)[0] & PSN_MASK, struct.unpack_from("!I", ip, b + 8)[0] & PSN_MASK,
                    ip[b + 12:-4], False, icrc(ip) == ip[-4:], False)
