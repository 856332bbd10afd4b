"""What each rank of a collective sends and expects, packet by packet, and when a transfer may start.

A transfer (controller.workload's: `bytes` from host `src` to host `dst` on the connection's QP
`qp_index`, startable once every transfer in `after` has completed at this rank) becomes a run of
packets on its QP: the transfers of one (src, dst, QP) take consecutive sequence numbers in id
order, so PSNs never repeat on a QP and a packet's PSN names its transfer at both ends. Every packet
carries `mtu` data bytes (the last of a transfer the rest) after the transport's header, filled with
a pattern of (src, dst, transfer, sequence): the receiver checks each byte it gets.

Completion is local, as NCCL's: a send has completed when the sender holds the ACK of its every
packet, a receive when every packet arrived and every earlier transfer of its QP completed (RC's
completions come in order). The runner (rank.py) asks `startable` and reports
releases, ACK progress and arrivals; the timeline it writes is `RankProgress.to_json`.
"""

from __future__ import annotations

import bisect
import struct
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

PSN_STRIDE = 0x1000  # SenderCore's start PSN of QP index k: k * 0x1000 (SenderConfig.start_psn 0)
PSN_MASK = 0xFFFFFF


@dataclass(frozen=True)
class Transfer:
    """One transfer as a rank sees it (controller.workload.schedule.Transfer's fields that matter here)."""

    id: int
    src: str
    dst: str
    qp_index: int
    bytes: int
    after: tuple[int, ...] = ()
    iteration: int = 0
    step: int = 0
    warmup: bool = False

    @classmethod
    def of(cls, t: Any) -> Transfer:
        """From a workload Transfer (hosts in src_host/dst_host) or a dict of this class's fields."""
        if isinstance(t, Mapping):
            return cls(int(t["id"]), t["src"], t["dst"], int(t["qp_index"]), int(t["bytes"]),
                       tuple(int(a) for a in t.get("after", ())), int(t.get("iteration", 0)), int(t.get("step", 0)),
                       bool(t.get("warmup", False)))
        return cls(t.id, t.src_host, t.dst_host, t.qp_index, t.bytes, tuple(t.after), t.iteration, t.step, t.warmup)

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "src": self.src, "dst": self.dst, "qp_index": self.qp_index, "bytes": self.bytes,
                "after": list(self.after), "iteration": self.iteration, "step": self.step, "warmup": self.warmup}


@dataclass(frozen=True)
class Piece:
    """A transfer's packets: sequence numbers lo .. hi-1 of its QP."""

    transfer: Transfer
    lo: int
    hi: int
    mtu: int

    @property
    def packets(self) -> int:
        return self.hi - self.lo

    def data_len(self, seq: int) -> int:
        """Data bytes of the packet with this sequence number (every one `mtu`, the last the rest)."""
        if seq < self.hi - 1:
            return self.mtu
        return self.transfer.bytes - (self.packets - 1) * self.mtu


def packets_of(nbytes: int, mtu: int) -> int:
    return max(1, -(-nbytes // mtu))


def pattern(src: str, dst: str, tid: int, seq: int, n: int) -> bytes:
    """The n data bytes of one packet: (src, dst, transfer, sequence) in 16-byte blocks, so a byte that
    lands at the wrong rank, in the wrong transfer or at the wrong place does not match."""
    block = struct.pack("!IIII", zlib.crc32(f"{src}>{dst}".encode()), tid, seq, 0x5A5AA5A5)
    return (block * (n // 16 + 1))[:n]


def runs(seqs: list[int]) -> list[list[int]]:
    """Sorted sequence numbers as [first, last + 1] runs of consecutive ones."""
    out: list[list[int]] = []
    for s in seqs:
        if out and out[-1][1] == s:
            out[-1][1] = s + 1
        else:
            out.append([s, s + 1])
    return out


class Layout:
    """Every transfer's packets (see the module docstring); the same at every rank."""

    def __init__(self, transfers: Iterable[Transfer], mtu: int) -> None:
        if mtu < 16:
            raise ValueError(f"a packet must carry at least 16 data bytes, not {mtu}")
        self.mtu = mtu
        self.pieces: dict[int, Piece] = {}
        self._runs: dict[tuple[str, str, int], list[Piece]] = {}
        for t in sorted(transfers, key=lambda t: t.id):
            run = self._runs.setdefault((t.src, t.dst, t.qp_index), [])
            lo = run[-1].hi if run else 0
            p = Piece(t, lo, lo + packets_of(t.bytes, mtu), mtu)
            run.append(p)
            self.pieces[t.id] = p
        self._his = {k: [p.hi for p in run] for k, run in self._runs.items()}

    def run(self, src: str, dst: str, qp_index: int) -> list[Piece]:
        return self._runs.get((src, dst, qp_index), [])

    def piece_at(self, src: str, dst: str, qp_index: int, seq: int) -> Piece | None:
        his = self._his.get((src, dst, qp_index))
        if not his:
            return None
        i = bisect.bisect_right(his, seq)
        return self._runs[src, dst, qp_index][i] if i < len(his) else None

    def qps(self) -> int:
        """QPs per connection the transfers use (the highest index + 1)."""
        return max((k[2] for k in self._runs), default=-1) + 1


@dataclass
class RankProgress:
    """One rank's transfers: released (started), completed, and what arrived, with monotonic ns times."""

    me: str
    layout: Layout
    released: dict[int, int] = field(default_factory=dict)  # send id -> ns it started
    done: dict[int, int] = field(default_factory=dict)  # send or receive id -> ns it completed here
    first_rx: dict[int, int] = field(default_factory=dict)
    got: dict[int, set[int]] = field(default_factory=dict)  # receive id -> sequence numbers arrived
    data_bytes: dict[int, int] = field(default_factory=dict)  # receive id -> data bytes delivered (first copies)
    duplicates: dict[int, int] = field(default_factory=dict)
    bad: dict[int, int] = field(default_factory=dict)  # packets whose data did not match the pattern
    sent: dict[int, int] = field(default_factory=dict)  # send id -> packets put on the wire, resends included
    resent: dict[int, int] = field(default_factory=dict)
    stray: int = 0  # data packets of no transfer to this rank

    def __post_init__(self) -> None:
        self.sends = [p for p in self.layout.pieces.values() if p.transfer.src == self.me]
        self.recvs = {p.transfer.id: p for p in self.layout.pieces.values() if p.transfer.dst == self.me}
        self.mine = {p.transfer.id for p in self.sends} | set(self.recvs)
        self._waiting = sorted(self.sends, key=lambda p: p.transfer.id)
        for p in self.recvs.values():
            self.got[p.transfer.id] = set()
            self.data_bytes[p.transfer.id] = 0

    @property
    def finished(self) -> bool:
        return len(self.done) == len(self.mine)

    def startable(self) -> list[Piece]:
        """Sends not started whose every dependency completed here, and whose QP's earlier pieces started."""
        out, blocked = [], set()
        for p in self._waiting:
            key = (p.transfer.dst, p.transfer.qp_index)
            if key in blocked:
                continue
            if all(a in self.done for a in p.transfer.after):
                out.append(p)
            else:
                blocked.add(key)  # a later piece of this QP waits for this one
        return out

    def release(self, p: Piece, now_ns: int) -> None:
        self.released[p.transfer.id] = now_ns
        self._waiting.remove(p)

    def on_tx(self, dst: str, qp_index: int, seq: int, resend: bool) -> Piece | None:
        p = self.layout.piece_at(self.me, dst, qp_index, seq)
        if p is not None:
            self.sent[p.transfer.id] = self.sent.get(p.transfer.id, 0) + 1
            if resend:
                self.resent[p.transfer.id] = self.resent.get(p.transfer.id, 0) + 1
        return p

    def on_acked_upto(self, dst: str, qp_index: int, upto: int, now_ns: int) -> list[int]:
        """Every sequence number below `upto` of this QP is acknowledged: the sends it completes."""
        out = []
        for p in self.layout.run(self.me, dst, qp_index):
            if p.hi <= upto and p.transfer.id in self.released and p.transfer.id not in self.done:
                self.done[p.transfer.id] = now_ns
                out.append(p.transfer.id)
        return out

    def on_data(self, src: str, qp_index: int, seq: int, data: bytes, now_ns: int) -> str:
        """One data packet with a good ICRC: 'new', 'duplicate', 'bad' (data not as sent) or 'stray'."""
        p = self.layout.piece_at(src, self.me, qp_index, seq)
        if p is None or p.transfer.id not in self.recvs or seq < p.lo:
            self.stray += 1
            return "stray"
        tid = p.transfer.id
        n = p.data_len(seq)
        if data[:n] != pattern(src, self.me, tid, seq, n) or len(data) < n:
            self.bad[tid] = self.bad.get(tid, 0) + 1
            return "bad"
        got = self.got[tid]
        if seq in got:
            self.duplicates[tid] = self.duplicates.get(tid, 0) + 1
            return "duplicate"
        got.add(seq)
        self.data_bytes[tid] += n
        self.first_rx.setdefault(tid, now_ns)
        if len(got) == p.packets:
            self._complete(src, qp_index, now_ns)
        return "new"

    def _complete(self, src: str, qp_index: int, now_ns: int) -> None:
        """The receives of one QP that have every packet complete in PSN order, as RC delivers completions:
        a whole one waits for the earlier ones of its QP (a resend after a NIC move may fill it first)."""
        for p in self.layout.run(src, self.me, qp_index):
            tid = p.transfer.id
            if tid in self.done:
                continue
            if len(self.got[tid]) < p.packets:
                return
            self.done[tid] = now_ns

    def to_json(self) -> dict[str, Any]:
        """The rank's timeline: per send its start, completion (all ACKed), packets and resends; per receive
        its first and last packet, bytes delivered once, duplicates and bad packets."""
        sends = [{"id": p.transfer.id, "dst": p.transfer.dst, "qp_index": p.transfer.qp_index,
                  "bytes": p.transfer.bytes, "packets": p.packets, "start_ns": self.released.get(p.transfer.id),
                  "end_ns": self.done.get(p.transfer.id), "sent": self.sent.get(p.transfer.id, 0),
                  "retransmitted": self.resent.get(p.transfer.id, 0)} for p in self.sends]
        recvs = [{"id": tid, "src": p.transfer.src, "qp_index": p.transfer.qp_index, "bytes": p.transfer.bytes,
                  "packets": p.packets, "received": len(self.got[tid]), "data_bytes": self.data_bytes[tid],
                  "first_ns": self.first_rx.get(tid), "end_ns": self.done.get(tid),
                  "duplicates": self.duplicates.get(tid, 0), "bad": self.bad.get(tid, 0),
                  "segments": runs(sorted(self.got[tid]))}
                 for tid, p in sorted(self.recvs.items())]
        return {"rank": self.me, "finished": self.finished, "sends": sends, "recvs": recvs, "stray": self.stray}
