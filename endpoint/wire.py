"""Endpoint-mode frames: host H.Encaps (outer IPv6 to an EV's uSID carrier) around RoCEv2, data/probe/ACK headers.

A data packet on the wire from a host (RFC 8986 5.1 H.Encaps done by the NIC, RFC 9800 carrier):

    Ethernet (to the leaf) / IPv6 src=host dst=carrier nh=41 tc=ECT(0) / IPv6 src=host dst=peer /
    UDP sport=0xC000|EV dport=4791 / BTH / DataHeader / padding / ICRC

The inner packet is `mininet_labs.traffic.roce_frame`'s, ICRC included, so what the destination
leaf hands the host after End.DT6 is a plain RoCEv2 packet. The EV id rides in the inner UDP source
port (RoCEv2's entropy field), so it survives trimming. ACKs are RC ACKNOWLEDGE packets (BTH opcode
0x11, an AETH: syndrome 0 ACK, 0x60 NAK) whose payload says which EV, which packet on it and whether
it was marked CE or trimmed; they go back encapsulated on the reverse carrier of the same EV.
"""

from __future__ import annotations

import socket
import struct
from dataclasses import dataclass

from controller.model import congestion
from mininet_labs.frames import mac_bytes
from mininet_labs.traffic import PSN_MASK, roce_frame
from mininet_labs.frames import ETH_IPV6, ROCE_PORT, icrc

PROTO_IPV6 = 41
ECT0, CE = 0b10, 0b11
TRIM_DSCP = congestion.TRIM_DSCP  # the trim class the leaves' trimming marks (Options.trim_dscp; --trim-dscp)
OP_SEND_ONLY, OP_ACK = 0x04, 0x11
AETH_ACK, AETH_NAK = 0x00, 0x60  # IBA 9.7.5.1.1: syndrome ACK (credits 0) / NAK (PSN sequence error)
SPORT_BASE = 0xC000
DATA, PROBE, REV_PROBE = 1, 2, 3  # REV_PROBE: a receiver's probe of a reverse EV, answered by the data's sender
DATA_GBN = 4  # data of a go-back-N QP (RoCEv2 RC without selective repeat): the receiver takes it only in PSN order
ACK, NACK, PROBE_ACK, REV_PROBE_ACK = 1, 2, 3, 4
DATA_MAGIC, ACK_MAGIC = b"MRCE", b"MRCA"


def tx_stamp(tx_ns: int) -> int:
    """What of a transmission's send time the inner IPv6 flow label carries (20 bits of microseconds,
    ~1.05 s around): it survives trimming, so a NACK tells which transmission of a PSN was trimmed."""
    return (tx_ns >> 10) & 0xFFFFF


def sport_of(ev: int) -> int:
    return SPORT_BASE | (ev & 0x3FFF)


def ev_of(sport: int) -> int | None:
    return sport & 0x3FFF if sport & 0xC000 == SPORT_BASE else None


@dataclass(frozen=True)
class DataHeader:
    """The first payload bytes of a data or probe packet: who sent it, on which EV and when."""

    kind: int
    sender: str
    ev: int
    ev_seq: int  # the packet's number on its EV (one EV is one FIFO path: a hole is a loss)
    total: int  # packets the QP will carry (so the receiver knows what to expect)
    start_psn: int
    tx_ns: int
    attempt: int = 0  # 0: first transmission

    FMT = "!4sBB16sHIIIQB"
    SIZE = struct.calcsize(FMT)

    def pack(self) -> bytes:
        name = self.sender.encode()[:16]
        return struct.pack(self.FMT, DATA_MAGIC, self.kind, len(name), name, self.ev, self.ev_seq, self.total,
                           self.start_psn, self.tx_ns, self.attempt)

    @classmethod
    def unpack(cls, data: bytes) -> DataHeader | None:
        if len(data) < cls.SIZE or data[:4] != DATA_MAGIC:
            return None
        _, kind, n, name, ev, seq, total, start, tx, attempt = struct.unpack(cls.FMT, data[:cls.SIZE])
        return cls(kind, name[:n].decode(errors="replace"), ev, seq, total, start, tx, attempt)


@dataclass(frozen=True)
class AckHeader:
    """An ACK's payload after the AETH: ACK / NACK (trimmed) / probe ACK for one packet of one EV, and the
    acknowledging host's port-state bitmap (bit p: its NIC in plane p is up; 0: not carried), so a peer
    stops using a plane whose NIC at this end is down from the next acknowledgement on."""

    kind: int
    ev: int
    ev_seq: int
    tx_ns: int  # echoed from the data packet (RTT without clock sync); a NACK's: the trimmed one's tx_stamp
    ce: bool = False
    ports: int = 0

    FMT = "!4sBHIQB"
    SIZE = struct.calcsize(FMT)
    PORTS = "!H"  # after FMT (16 planes at most)

    def pack(self) -> bytes:
        return struct.pack(self.FMT, ACK_MAGIC, self.kind, self.ev, self.ev_seq, self.tx_ns, int(self.ce)) \
            + struct.pack(self.PORTS, self.ports & 0xFFFF)

    @classmethod
    def unpack(cls, data: bytes) -> AckHeader | None:
        if len(data) < cls.SIZE or data[:4] != ACK_MAGIC:
            return None
        _, kind, ev, seq, tx, flags = struct.unpack(cls.FMT, data[:cls.SIZE])
        ports = struct.unpack_from(cls.PORTS, data, cls.SIZE)[0] if len(data) >= cls.SIZE + 2 else 0
        return cls(kind, ev, seq, tx, bool(flags & 1), ports)


def encap(smac: str, dmac: str, src: str, carrier: str, inner_frame: bytes, *, tc: int = ECT0, hlim: int = 64) -> bytes:
    """H.Encaps of an Ethernet frame's IPv6 packet: Ethernet / outer IPv6 (nh 41) to `carrier` / the inner
    packet; no carrier (a leaf-spray EV): the frame as it is, the leaf encapsulates."""
    if not carrier:
        return inner_frame
    inner = inner_frame[14:]
    outer = (struct.pack("!IHBB", 6 << 28 | tc << 20, len(inner), PROTO_IPV6, hlim)
             + socket.inet_pton(socket.AF_INET6, src) + socket.inet_pton(socket.AF_INET6, carrier))
    return mac_bytes(dmac) + mac_bytes(smac) + struct.pack("!H", ETH_IPV6) + outer + inner


def data_frame(smac: str, dmac: str, src: str, dst: str, carrier: str, qp: int, psn: int, header: DataHeader,
               size: int) -> bytes:
    """An encapsulated RC SEND ONLY carrying `header`, padded to `size` payload bytes, ECT(0) inside and out."""
    payload = header.pack().ljust(max(size, DataHeader.SIZE), b"\x00")
    inner = bytearray(roce_frame(smac, dmac, src, dst, OP_SEND_ONLY, qp, psn & PSN_MASK, payload,
                                 sport=sport_of(header.ev), tc=ECT0))
    # the flow label (outside the ICRC and the UDP checksum) carries the transmission's stamp
    vtf = struct.unpack_from("!I", inner, 14)[0] & ~0xFFFFF | tx_stamp(header.tx_ns)
    struct.pack_into("!I", inner, 14, vtf)
    return encap(smac, dmac, src, carrier, bytes(inner))


def ack_frame(smac: str, dmac: str, src: str, dst: str, carrier: str, qp: int, psn: int, header: AckHeader,
              msn: int = 0, dscp: int = 0) -> bytes:
    """An encapsulated RC ACKNOWLEDGE (AETH ACK, or NAK for a trimmed packet) carrying `header`, ECT(0), in
    class `dscp` inside and out (the trim class: the switches' priority queue, p4/include/congestion.p4)."""
    syndrome = AETH_NAK if header.kind == NACK else AETH_ACK
    aeth = struct.pack("!I", syndrome << 24 | (msn & 0xFFFFFF))
    inner = roce_frame(smac, dmac, src, dst, OP_ACK, qp, psn & PSN_MASK, aeth + header.pack(),
                       sport=sport_of(header.ev), tc=dscp << 2 | ECT0)
    return encap(smac, dmac, src, carrier, inner, tc=dscp << 2 | ECT0)


@dataclass(frozen=True)
class Received:
    """A RoCEv2 packet as a host gets it (after the leaf's decapsulation)."""

    src: str
    dst: str
    ecn: int
    dscp: int
    sport: int
    opcode: int
    qp: int
    psn: int
    body: bytes  # after the BTH (and ICRC removed); empty if trimmed
    trimmed: bool  # cut short (IPv6 payload length longer than what arrived), or data in the trim DSCP class
    icrc_ok: bool
    encapsulated: bool  # still had the outer header (not what a host should get)
    flow_label: int = 0  # a data packet's: its transmission stamp (tx_stamp)


def parse(frame: bytes, trim_dscp: int = TRIM_DSCP) -> Received | None:
    """Parse an Ethernet frame holding IPv6 / UDP 4791 / BTH, possibly trimmed to its headers; None otherwise."""
    if len(frame) < 14 + 40 + 8 + 12 or struct.unpack_from("!H", frame, 12)[0] != ETH_IPV6:
        return None
    off, encapsulated = 14, False
    if frame[off + 6] == PROTO_IPV6:
        off, encapsulated = off + 40, True
        if len(frame) < off + 40 + 8 + 12:
            return None
    vtf, plen, nh = struct.unpack_from("!IHB", frame, off)
    if nh != 17 or struct.unpack_from("!H", frame, off + 40 + 2)[0] != ROCE_PORT:
        return None
    tc = vtf >> 20 & 0xFF
    ip = frame[off:off + 40 + plen]
    u = 40
    sport = struct.unpack_from("!H", ip, u)[0]
    b = u + 8
    opcode = ip[b]
    # An ACK/NAK in the trim class was sent in it (it rides the priority queue), never cut: not trimmed.
    trimmed = len(ip) < 40 + plen or (tc >> 2 == trim_dscp and opcode != OP_ACK)
    qp = struct.unpack_from("!I", ip, b + 4)[0] & PSN_MASK
    psn = struct.unpack_from("!I", ip, b + 8)[0] & PSN_MASK
    whole = len(ip) == 40 + plen and len(ip) >= b + 12 + 4
    body = ip[b + 12:-4] if whole else b""
    ok = whole and icrc(ip) == ip[-4:]
    return Received(socket.inet_ntop(socket.AF_INET6, ip[8:24]), socket.inet_ntop(socket.AF_INET6, ip[24:40]),
                    tc & 3, tc >> 2, sport, opcode, qp, psn, body, trimmed, ok, encapsulated, vtf & 0xFFFFF)
