"""The lab's RoCEv2 receiver: every packet of every (sender, QP) counted (received, lost, duplicated, reordered, bad ICRC) per plane."""

from __future__ import annotations

import errno
import os
import select
import signal
import socket
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from mininet_labs.frames import ETH_P_ALL, PACKET_OUTGOING, PSN_MASK, ROCE_PORT, Tag, host_nics, icrc, parse_roce


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
