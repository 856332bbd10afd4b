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
import socket
import struct
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from controller.model.topology import Topology
from mininet_labs.frames import ETH_P_ALL, HostNic, OPCODES, PSN_MASK, PlaneMode, RETH_LEN, RETH_OPCODES, Tag, Verb, host_nics, roce_frame, roce_frame_v4
from mininet_labs.receiver import RecvResult, RecvSpec, receive


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
    sending_file: str | None = None  # gets the CLOCK_MONOTONIC ns of the first send, as it goes: a schedule waits for it
    interleave: bool = False  # message m goes to every destination in turn (else all of one destination's first)
    stop_file: str | None = None  # once it exists the sender stops before its next message; `messages` bounds the run

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
    last_ns: int = 0  # CLOCK_MONOTONIC when its last packet was built (the send time in that packet's tag)


@dataclass
class SendResult:
    host: str
    sent: int
    seconds: float
    qps: list[QpSent]
    start_ns: int = 0  # CLOCK_MONOTONIC when sending began and ended
    end_ns: int = 0
    plane_changes: list[dict[str, Any]] = field(default_factory=list)  # {t_ns, live}: when the usable planes changed
    stopped: bool = False  # told to stop (stop_file) before it sent all its messages

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> SendResult:
        qps = [QpSent(**{**q, "per_plane": {int(k): v for k, v in q["per_plane"].items()}}) for q in doc["qps"]]
        return cls(doc["host"], doc["sent"], doc["seconds"], qps, doc.get("start_ns", 0), doc.get("end_ns", 0),
                   doc.get("plane_changes", []), doc.get("stopped", False))


def plan_packets(spec: SendSpec, topo: Topology, *, live: Callable[[], Sequence[int]] | None = None,
                 pace: Callable[[], None] | None = None, stop: Callable[[], bool] | None = None
                 ) -> Iterator[tuple[HostNic, bytes, QpSent]]:
    """Every frame the spec sends, in sending order, with the NIC it leaves from and its QP record.

    Frames are built as they are asked for: `pace()` (if given) runs first, so the tag's send time is
    the packet's. `live()` gives the planes usable now: a QP whose plane is not among them is re-homed
    onto them (QP k onto live[k % len(live)]), and back once its plane is usable again. `stop()` is asked
    before each message: True ends the run there (a message is never cut short)."""
    mine = {n.plane: n for n in host_nics(topo, spec.host)}
    planes = sorted(mine) if spec.planes is None else list(spec.planes)
    missing = [p for p in planes if p not in mine]
    if missing or not planes:
        raise ValueError(f"{spec.host} has no NIC in plane(s) {missing or planes} (planes: {sorted(mine)})")
    if spec.mtu % 4 or spec.mtu < Tag.SIZE + RETH_LEN:
        raise ValueError(f"mtu {spec.mtu} must be a multiple of 4 and at least {Tag.SIZE + RETH_LEN}")
    first, middle, last, only = OPCODES[spec.verb]
    per_msg = spec.packets_per_message()
    counts = [0] * spec.qps  # the packets each QP sends to a destination (every destination alike)
    for m in range(spec.messages):
        counts[m % spec.qps] += per_msg
    theirs = {dst: {n.plane: n for n in host_nics(topo, dst)} for dst in spec.to}
    qps = {dst: [QpSent(dst, spec.qp_base + k, (spec.start_psn + k * 0x1000) & PSN_MASK, 0, 0) for k in range(spec.qps)]
           for dst in spec.to}
    psn = {dst: [q.start_psn for q in qps[dst]] for dst in spec.to}  # each QP's next PSN
    order = ((dst, m) for m in range(spec.messages) for dst in spec.to) if spec.interleave else \
        ((dst, m) for dst in spec.to for m in range(spec.messages))
    sent_packets = 0
    for dst, m in order:
        if stop is not None and stop():
            return
        k = m % spec.qps
        q = qps[dst][k]
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
            src, peer = mine[plane], theirs[dst][plane]
            q.last_ns = time.monotonic_ns()
            tag = Tag(spec.host, q.qp, m, i, plane, counts[k], q.start_psn, q.last_ns).pack()
            reth = struct.pack("!QII", 0x1000 * m, 0x1234, spec.message_size) if opcode in RETH_OPCODES else b""
            payload = (reth + tag).ljust(spec.mtu if i < per_msg - 1 else _last_len(spec), b"\x00")
            sport = spec.sport if spec.sport is not None else 0xC000 | (q.qp & 0x3FFF)
            if spec.ipv4:
                frame = roce_frame_v4(src.mac, src.gateway_mac, src.v4, peer.v4, opcode, q.qp, psn[dst][k], payload,
                                      sport=sport, ident=sent_packets)
            else:
                frame = roce_frame(src.mac, src.gateway_mac, src.v6, peer.v6, opcode, q.qp, psn[dst][k], payload,
                                   sport=sport)
            psn[dst][k] = (psn[dst][k] + 1) & PSN_MASK
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
    if spec.sending_file:
        tmp = Path(spec.sending_file + ".tmp")
        tmp.write_text(f"{start_ns}\n")
        tmp.replace(spec.sending_file)

    def pace() -> None:
        if gap:
            wait = start + sent * gap - time.monotonic()
            if wait > 0:
                time.sleep(wait)

    told = [False]

    def stop() -> bool:
        told[0] = spec.stop_file is not None and os.path.exists(spec.stop_file)
        return told[0]

    try:
        for nic, frame, q in plan_packets(spec, topo, live=watch, pace=pace, stop=stop if spec.stop_file else None):
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
                      time.monotonic_ns(), watch.changes if watch is not None else [], told[0])


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
    s.add_argument("--sending-file", help="created (holding CLOCK_MONOTONIC ns) as the first packet is sent")
    s.add_argument("--interleave", action="store_true",
                   help="message m to every destination in turn (default: all of one destination's first)")
    s.add_argument("--stop-file", help="stop before the next message once this file exists (--messages: the bound)")
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
                               args.sport, args.ipv4, args.rehome, args.dead_planes_file, args.start_at_ns,
                               args.sending_file, args.interleave, args.stop_file))
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
