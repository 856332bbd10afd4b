"""The kernel data plane's link prober for `fabricctl run`: each period a probe out of both ends of every T0-T1 link
(controller.southbound.linkprobe's sockets, one per switch namespace), the arrivals read in the caller's select loop,
every probe judged by controller.service.linkdetect (pure). Nothing here blocks: the caller selects on `fds()` for
at most `wait()` seconds and hands `step` what was ready."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

from controller.failover import Failure
from controller.model.topology import Topology
from controller.service.detect import Change
from controller.service.linkdetect import LinkJudge, PathState, ProbeSettings, probe_paths
from controller.southbound.linkprobe import ProbeId, ProbeSockets, decode, encode, new_nonce


class KernelProber:
    """Probes every T0-T1 link of `topo` (switches with a namespace) in both directions."""

    def __init__(self, topo: Topology, settings: ProbeSettings, say: Callable[[str], None] = print) -> None:
        self.settings = settings
        self.say = say
        self.judge = LinkJudge(probe_paths(topo), settings.thresholds, int(settings.timeout * 1e9))
        self.nonce = new_nonce()
        self.socks = ProbeSockets(topo)
        self._next = time.monotonic()
        self._errors: dict[tuple[str, int], str] = {}  # (switch, port) -> the send error said last
        self.rounds = 0
        self.skipped = 0  # rounds not sent: the loop fell a period behind (CPU starved); no burst to catch up

    def fds(self) -> list[int]:
        return self.socks.fds()

    def wait(self, now: float) -> float:
        """Seconds until the next round is due."""
        return max(0.0, self._next - now)

    def step(self, ready: Iterable[int], now_ns: int) -> list[tuple[PathState, Change]]:
        """Read what arrived, send a round if one is due, judge: the detectors' changes."""
        for a in self.socks.read(list(ready)):
            p = decode(a.payload)
            s = self.judge.state(p.link_id, p.direction) if p is not None and p.nonce == self.nonce else None
            if p is None or s is None or (s.path.dst, s.path.dst_port) != (a.switch, a.port):
                self.judge.strays += 1
                continue
            self.judge.arrived(p.link_id, p.direction, p.seq)
        now = now_ns / 1e9
        if now >= self._next:
            self._send_round(now_ns)
            self._next += self.settings.period
            if self._next < now - self.settings.period:
                self.skipped += 1
                self._next = now + self.settings.period
        return self.judge.judge(time.monotonic_ns())

    def _send_round(self, now_ns: int) -> None:
        self.rounds += 1
        for s in self.judge.states:
            pa = s.path
            seq = self.judge.sent(s, now_ns)
            err = self.socks.send(pa.src, pa.src_port, pa.dst_addr,
                                  encode(ProbeId(self.nonce, pa.link_id, pa.direction, seq, now_ns)))
            key = (pa.src, pa.src_port)
            if err is not None:
                self.judge.unsent(s, seq)
            if err is None:
                if self._errors.pop(key, None) is not None:
                    self.say(f"probe: {pa.src} port {pa.src_port} sends again")
            elif self._errors.get(key) != err:
                self._errors[key] = err
                self.say(f"probe: {pa.src} port {pa.src_port}: {err} (its probes are not counted until it sends again)")

    def force_down(self, links: Iterable[Failure], reason: str) -> list[tuple[PathState, Change]]:
        return self.judge.force_down(links, reason)

    def seed_down(self, links: Iterable[Failure]) -> None:
        self.judge.seed_down(links)

    def failures(self) -> dict[Failure, str]:
        return self.judge.failures()

    def restored(self) -> dict[Failure, str]:
        return self.judge.restored()

    def close(self) -> None:
        self.socks.close()

    def __enter__(self) -> KernelProber:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
