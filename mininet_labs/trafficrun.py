"""Traffic runs on a lab: senders and receivers per host pair and plane, and the report they leave."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any


from controller.files.safefile import write_atomic
from mininet_labs import traffic as tr
from mininet_labs.labstate import LabError
from mininet_labs.processes import tail


@dataclass
class PairPlane:
    """Packets from one host to another in one plane: sent, and received with a good ICRC."""

    src: str
    dst: str
    plane: int
    sent: int
    received: int


@dataclass
class TrafficReport:
    """Every sender's and receiver's result of one run, and per (src, dst, plane) totals."""

    sent: dict[str, tr.SendResult]
    received: dict[str, tr.RecvResult]
    seconds: float

    def pairs(self) -> list[PairPlane]:
        out: dict[tuple[str, str, int], PairPlane] = {}
        for src, s in self.sent.items():
            for q in s.qps:
                for plane, n in q.per_plane.items():
                    out.setdefault((src, q.dst, plane), PairPlane(src, q.dst, plane, 0, 0)).sent += n
        for dst, r in self.received.items():
            for q in r.qps:
                for plane, n in q.per_plane.items():
                    out.setdefault((q.sender, dst, plane), PairPlane(q.sender, dst, plane, 0, 0)).received += n
        return [out[k] for k in sorted(out)]

    def totals(self) -> dict[str, int]:
        return {"sent": sum(s.sent for s in self.sent.values()), **tr.summarize(self.received.values())}

    def problems(self) -> list[str]:
        """One line per pair and plane that lost packets, and per QP with duplicates, bad ICRCs or strays."""
        out = [f"{p.src} -> {p.dst} plane {p.plane}: {p.received} of {p.sent} received"
               for p in self.pairs() if p.received != p.sent]
        for dst, r in self.received.items():
            for q in r.qps:
                bad = {k: getattr(q, k) for k in ("duplicated", "icrc_bad", "wrong_plane") if getattr(q, k)}
                if bad:
                    out.append(f"{q.sender} -> {dst} qp {q.qp:#x}: " + ", ".join(f"{k} {v}" for k, v in bad.items()))
        return out

    @property
    def ok(self) -> bool:
        return not self.problems()

    def to_json(self) -> dict[str, Any]:
        return {"seconds": self.seconds, "ok": self.ok, "totals": self.totals(), "problems": self.problems(),
                "pairs": [asdict(p) for p in self.pairs()],
                "sent": {h: s.to_json() for h, s in self.sent.items()},
                "received": {h: r.to_json() for h, r in self.received.items()}}


# Once told to stop, how long the receivers still listen after the last sender ended: the packets it sent last are
# forwarded through the lab's namespaces in well under a millisecond, and a receiver told to stop first reads what
# already reached its sockets (mininet_labs.receiver).
DRAIN_S = 0.5


class TrafficRun:
    """Senders and receivers started by Lab.start_traffic: `wait()` for the report; meanwhile the
    lab can fail links, `tell_dead_planes` tells senders started with rehome to leave planes, and `stop()` ends
    the run before its senders sent all their messages (their number its bound)."""

    def __init__(self, lab: Any, run: Path, timeout: float) -> None:  # lab: the Lab that started it (a module above this one)
        self.lab, self.dir, self.timeout = lab, run, timeout
        self.senders: dict[str, subprocess.Popen[Any]] = {}
        self.receivers: dict[str, subprocess.Popen[Any]] = {}
        self.started_ns = 0  # CLOCK_MONOTONIC when the first sender was started
        self.stopped_ns = 0  # CLOCK_MONOTONIC when stop() told the senders to stop (0: not told)
        self.report: TrafficReport | None = None

    @property
    def stop_file(self) -> Path:
        """Every sender stops before its next message once this exists."""
        return self.dir / "stop"

    def stop(self) -> None:
        """Tell every sender to stop before its next message (wait() then collects the report)."""
        if not self.stopped_ns:
            self.stopped_ns = time.monotonic_ns()
            write_atomic(self.stop_file, f"{self.stopped_ns}\n")

    def dead_planes_file(self, host: str) -> Path:
        return self.dir / f"dead-planes-{host}"

    def sending_file(self, host: str) -> Path:
        return self.dir / f"sending-{host}"

    def wait_sending(self, timeout: float = 60.0) -> int:
        """CLOCK_MONOTONIC ns at which the last sender began sending: on a loaded machine a sender's process comes up
        seconds after its start time, and a schedule kept from that time would pass it by. `timeout` bounds a sender
        that never starts (LabError, as for one that failed)."""
        end = time.monotonic() + timeout
        files = {src: self.sending_file(src) for src in self.senders}
        while not all(f.exists() for f in files.values()):
            for src, p in self.senders.items():
                if p.poll() not in (None, 0):
                    raise LabError(f"sender on {src} failed: {tail(self.dir / f'send-{src}.err')}")
            if time.monotonic() > end:
                late = ", ".join(src for src, f in files.items() if not f.exists())
                raise LabError(f"senders not sending {timeout:.0f}s after they were started: {late}")
            time.sleep(0.02)
        return max(int(f.read_text()) for f in files.values())

    def tell_dead_planes(self, host: str, planes: Iterable[int]) -> None:
        """Tell a sender (started with rehome) which planes to leave; an empty set brings it back."""
        write_atomic(self.dead_planes_file(host), " ".join(map(str, sorted(planes))) + "\n")

    def running(self) -> bool:
        return any(p.poll() is None for p in self.senders.values())

    def wait(self) -> TrafficReport:
        if self.report is not None:
            return self.report
        run = self.dir
        try:
            wait_senders_receivers(self.senders, self.receivers, run, self.timeout,
                                   grace=DRAIN_S if self.stopped_ns else 3.0)
        finally:
            self.kill()
        sent = {s: tr.SendResult.from_json(json.loads((run / f"send-{s}.json").read_text())) for s in self.senders}
        got = {d: tr.RecvResult.from_json(json.loads((run / f"recv-{d}.json").read_text())) for d in self.receivers}
        for d, r in got.items():
            to_what_was_sent(d, r, sent)
        seconds = round((time.monotonic_ns() - self.started_ns) / 1e9, 3) if self.started_ns else 0.0
        self.report = TrafficReport(sent, got, seconds)
        (run / "report.json").write_text(json.dumps(self.report.to_json(), indent=1) + "\n")
        return self.report

    def kill(self) -> None:
        for p in (*self.senders.values(), *self.receivers.values()):
            if p.poll() is None:
                p.kill()
                p.wait()


def to_what_was_sent(host: str, got: tr.RecvResult, sent: Mapping[str, tr.SendResult]) -> None:
    """Count `host`'s QPs against what their senders sent, not against the totals in their packets' tags: a sender
    told to stop sent fewer, and what it never sent is not lost. Trims each QP's expected and lost packets and its
    loss to the end."""
    packets = {(s, q.dst, q.qp): q.packets for s, r in sent.items() for q in r.qps}
    for q in got.qps:
        n = packets.get((q.sender, host, q.qp))
        if n is None or n >= q.expected:
            continue
        q.expected, q.lost = n, max(0, n - q.received)
        gaps = []
        for g in q.gaps:
            if g.before is None:  # the loss to the end: up to the last packet sent
                g.missing = n - 1 - g.after
                if g.missing <= 0:
                    continue
            gaps.append(g)
        q.gaps = gaps


def wait_senders_receivers(senders: Mapping[str, subprocess.Popen[Any]], receivers: Mapping[str, subprocess.Popen[Any]],
                           run: Path, timeout: float, what: str = "", grace: float = 3.0) -> None:
    """Wait for the senders, then the receivers (they stop by themselves once all came; stragglers get `grace`
    seconds, then SIGTERM); LabError naming the first that failed, with the end of its stderr file."""
    for src, p in senders.items():
        if p.wait(timeout=timeout) != 0:
            raise LabError(f"{what}sender on {src} failed: {tail(run / f'send-{src}.err')}")
    until = time.monotonic() + grace
    for dst, p in receivers.items():
        try:
            p.wait(timeout=max(0.1, until - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.send_signal(signal.SIGTERM)
            p.wait(timeout=10)
        if p.returncode != 0:
            raise LabError(f"{what}receiver on {dst} failed: {tail(run / f'recv-{dst}.err')}")
