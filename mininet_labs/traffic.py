"""RoCEv2 traffic between lab hosts: an RC sender over N QPs and a receiver that checks every packet.

The sender emits RC packets (SEND or RDMA WRITE: FIRST/MIDDLE/LAST or ONLY opcodes) from a
host's plane NICs. Messages are round-robined over the QPs (message i on QP i mod N, Meta's QP
scaling); each QP's PSN rises by one per packet from its start PSN. The plane of a packet is
chosen per packet (round-robin over the planes) or per QP (QP k on plane k mod P). Frames are
built with struct (byte-identical to mininet_labs.roce's scapy packets; a unit test checks it)
and carry their ICRC. The first payload bytes say who sent the packet and what to expect
(`Tag`), so the receiver counts per (sender, QP): received, lost, duplicated, reordered, bad
ICRC, and on which plane each packet arrived.

Run inside a host's namespace (Mininet host.popen, or `mnexec -a PID`):

    python3 -m mininet_labs.traffic recv --topology T.yaml --host h3 --expect 64 --out r.json
    python3 -m mininet_labs.traffic send --topology T.yaml --host h0 --to h3 --qps 4 --messages 16

Both print (or write with --out) their result as JSON; `SendResult.from_json` /
`RecvResult.from_json` read it back. Importable: `send(SendSpec)`, `receive(RecvSpec)`.
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import select
import signal
import socket
import struct
import sys
import time
import zlib
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from controller import ops
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


# --- where hosts are ----------------------------------------------------------------------------

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
    sids = ops.sid_plan(topo)
    out = []
    for nic in topo.hosts[host]:
        leaf = topo.t0(nic.plane, nic.t0)
        out.append(HostNic(
            host=host, plane=nic.plane, intf=host_intf(host, nic.plane), mac=topo.host_mac(leaf, nic.slot),
            v6=fmt_v6(sids.host_v6(nic.plane, nic.t0, nic.slot)), v4=fmt_v4(sids.host_v4(nic.plane, nic.t0, nic.slot)),
            leaf=leaf.name, slot=nic.slot, gateway_mac=leaf.mac,
            v6_prefix=f"{fmt_v6(sids.leaf_v6(nic.plane, 0))}/32", v4_prefix=f"{fmt_v4(sids.plane_v4(nic.plane))}/12"))
    return tuple(out)


# --- frames -------------------------------------------------------------------------------------

def _mac(text: str) -> bytes:
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
    return _mac(dmac) + _mac(smac) + struct.pack("!H", ETH_IPV6) + ip + udp + body + crc


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
    return _mac(dmac) + _mac(smac) + struct.pack("!H", ETH_IPV4) + ip + udp + body + crc


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


# --- sending ------------------------------------------------------------------------------------

@dataclass
class SendSpec:
    """What to send: from `host` to each of `to`, `messages` messages per destination over `qps`
    QPs; a message is `message_size` bytes cut into packets of `mtu` payload bytes."""

    topology: str
    host: str
    to: list[str]
    qps: int = 4
    messages: int = 8
    message_size: int = 1024
    mtu: int = 1024
    verb: Verb = "send"
    plane_mode: PlaneMode = "packet"
    planes: list[int] | None = None  # None: every plane
    qp_base: int = 0x100
    start_psn: int = 0  # QP k starts at start_psn + k * 0x1000 (mod 2**24)
    rate: float = 2000.0  # packets per second at most (0: as fast as possible)
    sport: int | None = None  # one UDP source port for every QP (None: one per QP, 0xC000 | qp)
    ipv4: bool = False  # IPv4 RoCEv2 (what eecmp_qp_hash's plan routes) instead of IPv6
    rehome: bool = False  # plane_mode qp: move a QP off its plane while that NIC has no carrier
    dead_planes_file: str | None = None  # planes to leave (whitespace-separated), re-read when it changes
    start_at_ns: int = 0  # CLOCK_MONOTONIC ns to start sending at (0: at once), so senders start together

    def packets_per_message(self) -> int:
        return max(1, -(-self.message_size // self.mtu))


@dataclass
class QpSent:
    """What a sender sent on one QP to one destination."""

    dst: str
    qp: int
    start_psn: int
    packets: int
    messages: int
    per_plane: dict[int, int] = field(default_factory=dict)


@dataclass
class SendResult:
    host: str
    sent: int
    seconds: float
    qps: list[QpSent]
    start_ns: int = 0  # CLOCK_MONOTONIC when sending began and ended
    end_ns: int = 0
    plane_changes: list[dict[str, Any]] = field(default_factory=list)  # {t_ns, live}: when the usable planes changed

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> SendResult:
        qps = [QpSent(**{**q, "per_plane": {int(k): v for k, v in q["per_plane"].items()}}) for q in doc["qps"]]
        return cls(doc["host"], doc["sent"], doc["seconds"], qps, doc.get("start_ns", 0), doc.get("end_ns", 0),
                   doc.get("plane_changes", []))


def plan_packets(spec: SendSpec, topo: Topology, *, live: Callable[[], Sequence[int]] | None = None,
                 pace: Callable[[], None] | None = None) -> Iterator[tuple[HostNic, bytes, QpSent]]:
    """Every frame the spec sends, in sending order, with the NIC it leaves from and its QP record.

    Frames are built as they are asked for: `pace()` (if given) runs first, so the tag's send time is
    the packet's. `live()` gives the planes usable now: a QP whose plane is not among them is re-homed
    onto them (QP k onto live[k % len(live)]), and back once its plane is usable again."""
    mine = {n.plane: n for n in host_nics(topo, spec.host)}
    planes = sorted(mine) if spec.planes is None else list(spec.planes)
    missing = [p for p in planes if p not in mine]
    if missing or not planes:
        raise ValueError(f"{spec.host} has no NIC in plane(s) {missing or planes} (planes: {sorted(mine)})")
    if spec.mtu % 4 or spec.mtu < Tag.SIZE + RETH_LEN:
        raise ValueError(f"mtu {spec.mtu} must be a multiple of 4 and at least {Tag.SIZE + RETH_LEN}")
    first, middle, last, only = OPCODES[spec.verb]
    per_msg = spec.packets_per_message()
    sent_packets = 0
    for dst in spec.to:
        theirs = {n.plane: n for n in host_nics(topo, dst)}
        qps = [QpSent(dst, spec.qp_base + k, (spec.start_psn + k * 0x1000) & PSN_MASK, 0, 0) for k in range(spec.qps)]
        psn = [q.start_psn for q in qps]
        counts = [0] * spec.qps
        for m in range(spec.messages):
            counts[m % spec.qps] += per_msg
        for m in range(spec.messages):
            k = m % spec.qps
            q = qps[k]
            q.messages += 1
            for i in range(per_msg):
                if pace is not None:
                    pace()
                opcode = only if per_msg == 1 else first if i == 0 else last if i == per_msg - 1 else middle
                plane = planes[sent_packets % len(planes)] if spec.plane_mode == "packet" else planes[k % len(planes)]
                if live is not None:
                    usable = [p for p in planes if p in live()]
                    if usable and plane not in usable:
                        plane = usable[(sent_packets if spec.plane_mode == "packet" else k) % len(usable)]
                src, peer = mine[plane], theirs[plane]
                tag = Tag(spec.host, q.qp, m, i, plane, counts[k], q.start_psn, time.monotonic_ns()).pack()
                reth = struct.pack("!QII", 0x1000 * m, 0x1234, spec.message_size) if opcode in RETH_OPCODES else b""
                payload = (reth + tag).ljust(spec.mtu if i < per_msg - 1 else _last_len(spec), b"\x00")
                sport = spec.sport if spec.sport is not None else 0xC000 | (q.qp & 0x3FFF)
                if spec.ipv4:
                    frame = roce_frame_v4(src.mac, src.gateway_mac, src.v4, peer.v4, opcode, q.qp, psn[k], payload,
                                          sport=sport, ident=sent_packets)
                else:
                    frame = roce_frame(src.mac, src.gateway_mac, src.v6, peer.v6, opcode, q.qp, psn[k], payload,
                                       sport=sport)
                psn[k] = (psn[k] + 1) & PSN_MASK
                q.packets += 1
                q.per_plane[plane] = q.per_plane.get(plane, 0) + 1
                sent_packets += 1
                yield src, frame, q


def _last_len(spec: SendSpec) -> int:
    """Payload bytes of a message's last packet: what is left of the message, padded to 4, at least a tag."""
    rest = spec.message_size - spec.mtu * (spec.packets_per_message() - 1)
    return max(Tag.SIZE + RETH_LEN, -(-rest // 4) * 4)


SIOCGIFFLAGS = 0x8913
IFF_UP, IFF_RUNNING = 0x1, 0x40


def carrier(intf: str) -> bool:
    """Whether a NIC of this namespace is up with carrier (IFF_UP and IFF_RUNNING, by ioctl: /sys shows
    the namespace it was mounted in, not ours)."""
    import fcntl

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            res = fcntl.ioctl(s.fileno(), SIOCGIFFLAGS, struct.pack("16sH14x", intf.encode()[:15], 0))
        except OSError:
            return False
    flags = struct.unpack_from("16sH", res)[1]
    return flags & (IFF_UP | IFF_RUNNING) == IFF_UP | IFF_RUNNING


class PlaneWatch:
    """The planes a sender may use now: those whose NIC has carrier and that no `dead_planes_file`
    names; looked at most every `every` seconds. Records when the usable set changed."""

    def __init__(self, nics: dict[int, HostNic], dead_planes_file: str | None, every: float = 0.002) -> None:
        self.nics, self.file, self.every = nics, dead_planes_file, every
        self._at = -1.0
        self._mtime: float | None = None
        self._told: frozenset[int] = frozenset()
        self._live: tuple[int, ...] = tuple(sorted(nics))
        self.changes: list[dict[str, Any]] = []

    def _read_told(self) -> None:
        if not self.file:
            return
        try:
            mtime = os.stat(self.file).st_mtime_ns
        except OSError:
            mtime, told = None, frozenset()
        else:
            if mtime == self._mtime:
                return
            try:
                told = frozenset(int(x) for x in Path(self.file).read_text().split())
            except (OSError, ValueError):
                return
        self._mtime, self._told = mtime, told

    def __call__(self) -> tuple[int, ...]:
        now = time.monotonic()
        if now - self._at >= self.every:
            self._at = now
            self._read_told()
            live = tuple(p for p, n in sorted(self.nics.items()) if p not in self._told and carrier(n.intf))
            if live != self._live:
                self._live = live
                self.changes.append({"t_ns": time.monotonic_ns(), "live": list(live)})
        return self._live


def send(spec: SendSpec) -> SendResult:
    """Send the spec's packets from this namespace's NICs (raw AF_PACKET sockets); paced by spec.rate."""
    from controller.model.topology import load

    topo = load(spec.topology)
    socks: dict[str, socket.socket] = {}
    records: dict[tuple[str, int], QpSent] = {}
    gap = 1.0 / spec.rate if spec.rate > 0 else 0.0
    watch = None
    if spec.rehome or spec.dead_planes_file:
        watch = PlaneWatch({n.plane: n for n in host_nics(topo, spec.host)}, spec.dead_planes_file)
    if spec.start_at_ns:
        time.sleep(max(0.0, (spec.start_at_ns - time.monotonic_ns()) / 1e9))
    start = time.monotonic()
    start_ns = time.monotonic_ns()
    sent = 0

    def pace() -> None:
        if gap:
            wait = start + sent * gap - time.monotonic()
            if wait > 0:
                time.sleep(wait)

    try:
        for nic, frame, q in plan_packets(spec, topo, live=watch, pace=pace):
            sock = socks.get(nic.intf)
            if sock is None:
                sock = socks[nic.intf] = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
                sock.bind((nic.intf, 0))
            _send_all(sock, frame)
            records[q.dst, q.qp] = q
            sent += 1
    finally:
        for s in socks.values():
            s.close()
    return SendResult(spec.host, sent, round(time.monotonic() - start, 3), list(records.values()), start_ns,
                      time.monotonic_ns(), watch.changes if watch is not None else [])


def _send_all(sock: socket.socket, frame: bytes) -> None:
    while True:
        try:
            sock.send(frame)
            return
        except BlockingIOError:  # the NIC's queue is full: wait for room, never drop at the source
            select.select([], [sock], [], 0.1)
        except OSError as e:
            if e.errno in (errno.ENETDOWN, errno.ENXIO, errno.EMSGSIZE):  # the NIC is down: the packet is lost
                return
            if e.errno != errno.ENOBUFS:
                raise
            time.sleep(0.001)


# --- receiving ----------------------------------------------------------------------------------

@dataclass
class RecvSpec:
    """Receive on `host`'s NICs (all planes) until `expect` tagged packets came (0: no limit),
    `timeout` seconds passed, or SIGTERM/SIGINT. `ready_file` is created once listening."""

    topology: str
    host: str
    expect: int = 0
    timeout: float = 30.0
    ready_file: str | None = None
    timeline_ms: float = 0.0  # >0: count good packets per plane in bins of this many ms (RecvResult.timeline)


@dataclass
class QpStats:
    """What a receiver saw on one (sender, QP): received counts distinct PSNs with a good ICRC."""

    sender: str
    qp: int
    expected: int
    received: int = 0
    lost: int = 0
    duplicated: int = 0
    reordered: int = 0
    icrc_bad: int = 0
    wrong_plane: int = 0  # arrived on another plane's NIC than it was sent on
    per_plane: dict[int, int] = field(default_factory=dict)
    gaps: list[Gap] = field(default_factory=list)  # runs of lost packets, in sequence order

    @property
    def loss_window_ms(self) -> float | None:
        """The longest gap between the last packet before a loss and the first after it (receiver
        clock); None without a closed gap."""
        closed = [g.rx_ms for g in self.gaps if g.rx_ms is not None]
        return max(closed) if closed else None


@dataclass
class Gap:
    """Lost packets of one QP between two received ones: `missing` packets after sequence position
    `after` (-1: from the start) up to `before` (None: to the end). rx_ms is the receiver's time
    between the packet at `after` and the one at `before`; tx_ms the same two packets' send times."""

    after: int
    before: int | None
    missing: int
    last_before_ns: int | None = None
    first_after_ns: int | None = None
    rx_ms: float | None = None
    tx_ms: float | None = None


@dataclass
class RecvResult:
    host: str
    packets: int  # tagged RoCEv2 packets seen (good and bad ICRC)
    icrc_bad: int
    untagged: int  # RoCEv2 packets without our tag, and other frames to UDP 4791
    seconds: float
    qps: list[QpStats]
    timeline: dict[str, Any] | None = None  # {"bin_ms": B, "planes": {plane: {bin: packets}}}, bin = t_ns // B ms

    def to_json(self) -> dict[str, Any]:
        doc = asdict(self)
        for q, stats in zip(doc["qps"], self.qps):
            q["loss_window_ms"] = stats.loss_window_ms
        return doc

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> RecvResult:
        qps = [QpStats(**{**{k: v for k, v in q.items() if k != "loss_window_ms"},
                          "per_plane": {int(k): v for k, v in q["per_plane"].items()},
                          "gaps": [Gap(**g) for g in q.get("gaps", [])]}) for q in doc["qps"]]
        timeline = doc.get("timeline")
        if timeline is not None:
            timeline = {"bin_ms": timeline["bin_ms"],
                        "planes": {int(p): {int(b): n for b, n in bins.items()} for p, bins in timeline["planes"].items()}}
        return cls(doc["host"], doc["packets"], doc["icrc_bad"], doc["untagged"], doc["seconds"], qps, timeline)

    def qp(self, sender: str, qp: int) -> QpStats | None:
        return next((q for q in self.qps if q.sender == sender and q.qp == qp), None)


class _QpTrack:
    def __init__(self, stats: QpStats, start_psn: int) -> None:
        self.stats, self.start = stats, start_psn
        self.seen: dict[int, tuple[int, int]] = {}  # sequence position -> (received, sent) ns
        self.highest = -1

    def add(self, psn: int, plane: int, rx_ns: int = 0, tx_ns: int = 0) -> None:
        st = self.stats
        offset = (psn - self.start) & PSN_MASK  # position in the QP's sequence, across the 2**24 wrap
        if offset in self.seen:
            st.duplicated += 1
            return
        self.seen[offset] = (rx_ns, tx_ns)
        st.received += 1
        st.per_plane[plane] = st.per_plane.get(plane, 0) + 1
        if offset < self.highest:
            st.reordered += 1
        else:
            self.highest = offset

    def gaps(self) -> list[Gap]:
        """The runs of missing sequence positions below `expected`, with the times around each."""
        out: list[Gap] = []
        prev = -1
        expected = self.stats.expected
        for pos in sorted(self.seen):
            if pos > prev + 1:
                out.append(self._gap(prev, pos, pos - prev - 1))
            prev = max(prev, pos)
        if expected and prev < expected - 1:
            out.append(self._gap(prev, None, expected - 1 - prev))
        return out

    def _gap(self, after: int, before: int | None, missing: int) -> Gap:
        a = self.seen.get(after)
        b = self.seen.get(before) if before is not None else None
        g = Gap(after, before, missing, a[0] if a else None, b[0] if b else None)
        if a and b:
            g.rx_ms = round((b[0] - a[0]) / 1e6, 3)
            g.tx_ms = round((b[1] - a[1]) / 1e6, 3)
        return g


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


def receive(spec: RecvSpec) -> RecvResult:
    """Count what arrives on this namespace's NICs of `spec.host` (see RecvSpec for when it stops)."""
    from controller.model.topology import load

    topo = load(spec.topology)
    nics = host_nics(topo, spec.host)
    socks: dict[int, tuple[socket.socket, int]] = {}
    stop = {"now": False}

    def on_signal(signum: int, _frame: Any) -> None:
        stop["now"] = True

    old = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    # A bound UDP socket keeps the kernel from answering RoCE packets with port unreachable.
    sink = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    tracks: dict[tuple[str, int], _QpTrack] = {}
    bin_ns = int(spec.timeline_ms * 1e6)
    bins: dict[int, dict[int, int]] = {n.plane: {} for n in nics}
    packets = bad = untagged = 0
    start = time.monotonic()
    try:
        sink.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sink.bind(("::", ROCE_PORT))
        for nic in nics:
            s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
            s.bind((nic.intf, 0))
            socks[s.fileno()] = (s, nic.plane)
        if spec.ready_file:
            Path(spec.ready_file).write_text(str(os.getpid()))
        deadline = start + spec.timeout

        def take(sock: socket.socket, plane: int) -> bool:
            """Count one frame from `sock` if one is there (False when none is)."""
            nonlocal packets, bad, untagged
            try:
                frame, addr = sock.recvfrom(65535)
            except BlockingIOError:
                return False
            except OSError as e:  # the NIC went down (reported once); it receives again once up
                if e.errno != errno.ENETDOWN:
                    raise
                return False
            rx_ns = time.monotonic_ns()
            if addr[2] == PACKET_OUTGOING:
                return True
            parsed = parse_roce(frame)
            if parsed is None:
                return True
            ip, qp, psn, body = parsed
            tag = Tag.unpack(body)
            if tag is None:
                untagged += 1
                return True
            packets += 1
            key = (tag.sender, qp)
            track = tracks.get(key)
            if track is None:
                track = tracks[key] = _QpTrack(QpStats(tag.sender, qp, tag.total), tag.start_psn)
            if icrc(ip) != ip[-4:]:
                bad += 1
                track.stats.icrc_bad += 1
                return True
            if tag.plane != plane:
                track.stats.wrong_plane += 1
            track.add(psn, plane, rx_ns, tag.sent_ns)
            if bin_ns:
                b = bins[plane]
                b[rx_ns // bin_ns] = b.get(rx_ns // bin_ns, 0) + 1
            return True

        while not stop["now"] and (not spec.expect or packets < spec.expect):
            left = deadline - time.monotonic()
            if left <= 0:
                break
            try:
                ready, _, _ = select.select(list(socks), [], [], min(left, 0.2))
            except InterruptedError:
                continue
            for fd in ready:
                take(*socks[fd])
        if stop["now"]:  # told to stop: what already reached this host's sockets is received, not lost
            for sock, plane in socks.values():
                sock.setblocking(False)
                while take(sock, plane):
                    pass
    finally:
        for s, _ in socks.values():
            s.close()
        sink.close()
        for s, handler in old.items():
            signal.signal(s, handler)
    stats = []
    for track in tracks.values():
        st = track.stats
        st.lost = max(0, st.expected - st.received)
        st.gaps = track.gaps()
        stats.append(st)
    stats.sort(key=lambda q: (q.sender, q.qp))
    timeline = {"bin_ms": spec.timeline_ms, "planes": bins} if bin_ns else None
    return RecvResult(spec.host, packets, bad, untagged, round(time.monotonic() - start, 3), stats, timeline)


# --- command line -------------------------------------------------------------------------------

def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python3 -m mininet_labs.traffic",
                                description="RoCEv2 RC traffic between lab hosts (run inside a host's namespace).")
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("send", help="send RC messages over N QPs to one or more hosts")
    s.add_argument("--topology", required=True, help="the lab's topology YAML")
    s.add_argument("--host", required=True, help="this host's name")
    s.add_argument("--to", action="append", required=True, help="destination host (repeatable)")
    s.add_argument("--qps", type=int, default=4)
    s.add_argument("--messages", type=int, default=8, help="messages per destination, round-robined over the QPs")
    s.add_argument("--message-size", type=int, default=1024)
    s.add_argument("--mtu", type=int, default=1024, help="payload bytes per packet")
    s.add_argument("--verb", choices=["send", "write"], default="send")
    s.add_argument("--plane-mode", choices=["packet", "qp"], default="packet")
    s.add_argument("--planes", help="comma-separated planes (default: all)")
    s.add_argument("--qp-base", type=lambda v: int(v, 0), default=0x100)
    s.add_argument("--start-psn", type=lambda v: int(v, 0), default=0)
    s.add_argument("--rate", type=float, default=2000.0, help="packets per second (0: unpaced)")
    s.add_argument("--sport", type=int, help="one UDP source port for every QP (default: one per QP)")
    s.add_argument("--ipv4", action="store_true", help="IPv4 RoCEv2 (eecmp_qp_hash routes IPv4) instead of IPv6")
    s.add_argument("--rehome", action="store_true",
                   help="move a QP off its plane while that NIC has no carrier (and back when it returns)")
    s.add_argument("--dead-planes-file", help="planes to leave, whitespace-separated; re-read when it changes")
    s.add_argument("--start-at-ns", type=int, default=0, help="CLOCK_MONOTONIC ns to start sending at")
    s.add_argument("--out", help="write the JSON result here instead of stdout")
    r = sub.add_parser("recv", help="count RoCEv2 packets per sender and QP, checking each ICRC")
    r.add_argument("--topology", required=True)
    r.add_argument("--host", required=True)
    r.add_argument("--expect", type=int, default=0, help="stop after this many tagged packets (0: never)")
    r.add_argument("--timeout", type=float, default=30.0)
    r.add_argument("--ready-file", help="created once the receiver listens")
    r.add_argument("--timeline-ms", type=float, default=0.0, help="count packets per plane in bins of this many ms")
    r.add_argument("--out", help="write the JSON result here instead of stdout")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    result: SendResult | RecvResult
    if args.command == "send":
        planes = None if not args.planes else [int(x) for x in args.planes.split(",")]
        result = send(SendSpec(args.topology, args.host, args.to, args.qps, args.messages, args.message_size,
                               args.mtu, args.verb, args.plane_mode, planes, args.qp_base, args.start_psn, args.rate,
                               args.sport, args.ipv4, args.rehome, args.dead_planes_file, args.start_at_ns))
    else:
        result = receive(RecvSpec(args.topology, args.host, args.expect, args.timeout, args.ready_file,
                                  args.timeline_ms))
    text = json.dumps(result.to_json())
    if args.out:
        tmp = Path(args.out + ".tmp")
        tmp.write_text(text + "\n")
        tmp.replace(args.out)
    else:
        print(text)
    return 0


def summarize(results: Iterable[RecvResult]) -> dict[str, Any]:
    """Totals over receivers: packets expected, received, lost, duplicated, reordered, bad ICRC."""
    total = {"expected": 0, "received": 0, "lost": 0, "duplicated": 0, "reordered": 0, "icrc_bad": 0, "wrong_plane": 0}
    for r in results:
        for q in r.qps:
            for k in total:
                total[k] += getattr(q, k)
    return total


if __name__ == "__main__":
    sys.exit(main())
