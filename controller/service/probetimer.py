"""How long a probe may take before it counts as lost: a floor, raised to what probes take right now.

A fixed timeout cannot serve both a quiet fabric and a busy one. On the 2-core lab, once RoCEv2
senders run beside the switches, healthy links' probes that take 20 ms when quiet take 100-450 ms in
bursts (a switch's egress thread or the controller waiting for a core), and a fixed 80 ms timeout
judges them lost three in a row and pulls healthy links. So the timeout follows the
probes, like TCP's retransmission timer (RFC 6298) follows the RTT, but from all links at once so a
burst on one link is covered by what every link saw:

    timeout = min(cap, max(floor, factor * q-quantile of the last `window` probe delays,
                           late_factor * the longest delay of a probe that arrived after it had
                           been judged lost, over the last `late_keep`))

A cut link's probes never arrive, so they never raise it: detection is `floor`-fast on a quiet
fabric and as slow as the fabric's own delays on a busy one, never judging a late probe lost twice
for the same reason. Pure: times are passed in, in nanoseconds.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field


@dataclass
class ProbeTimer:
    """The current probe timeout from recent probe delays and late arrivals."""

    floor_ns: int
    cap_ns: int
    factor: float = 2.0
    quantile: float = 0.99
    window: int = 512
    late_factor: float = 1.5
    late_keep_ns: int = 10_000_000_000
    every: int = 32  # delays between two recomputations of the quantile
    _recent: deque = field(default_factory=deque, repr=False)
    _q_ns: int = 0
    _pending: int = 0
    _late: deque = field(default_factory=deque, repr=False)  # (arrival ns, delay ns), oldest first

    def __post_init__(self) -> None:
        if self.floor_ns <= 0 or self.cap_ns < self.floor_ns:
            raise ValueError("the probe timeout needs 0 < floor <= cap")
        if not 0.0 < self.quantile <= 1.0 or self.factor < 0 or self.late_factor < 0 or self.window < 1:
            raise ValueError("quantile must be in (0, 1], factors at least 0, window at least 1")
        self._recent = deque(maxlen=self.window)

    def arrived(self, delay_ns: int) -> None:
        """A probe arrived in time, `delay_ns` after it was sent."""
        self._recent.append(delay_ns)
        self._pending += 1
        if self._pending >= self.every or len(self._recent) < self.every:
            self._pending = 0
            ordered = sorted(self._recent)
            self._q_ns = ordered[min(len(ordered) - 1, int(self.quantile * len(ordered)))]

    def late(self, delay_ns: int, now_ns: int) -> None:
        """A probe arrived `delay_ns` after it was sent, after it had been judged lost."""
        self._late.append((now_ns, delay_ns))

    def timeout_ns(self, now_ns: int) -> int:
        """The timeout for judging probes now."""
        while self._late and self._late[0][0] + self.late_keep_ns < now_ns:
            self._late.popleft()
        late = max((d for _, d in self._late), default=0)
        return min(self.cap_ns, max(self.floor_ns, int(self.factor * self._q_ns), int(self.late_factor * late)))
