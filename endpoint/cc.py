"""A QP's congestion window: AIMD on congestion signals (trimmed packets, losses, CE), RFC 5681 / RFC 3168 style.

Off by default (the QP keeps its fixed window); the incast scenario turns it on for every mode so that
trimming on and off differ only in how congestion is seen: a NACK one round trip after a trimmed send,
or a loss found later by the ACKs of later packets (RACK) or by the retransmission timeout.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Aimd:
    """Window `cwnd` in packets, between 1 and `limit`: +1/cwnd per ACK, halved on a congestion signal
    (at most once per round trip, RFC 3168 6.1.2: one reduction per window of data)."""

    limit: int
    cwnd: float = 0.0
    last_cut: float = float("-inf")
    cuts: int = 0

    def __post_init__(self) -> None:
        if self.limit < 1:
            raise ValueError(f"window {self.limit} is below 1")
        self.cwnd = float(self.limit) if self.cwnd <= 0 else min(self.cwnd, float(self.limit))

    @property
    def window(self) -> int:
        return max(1, int(self.cwnd))

    def on_ack(self) -> None:
        self.cwnd = min(float(self.limit), self.cwnd + 1.0 / self.cwnd)

    def on_congestion(self, now: float, rtt: float) -> bool:
        """Halve, unless already halved within the last `rtt`; whether it did."""
        if now - self.last_cut < rtt:
            return False
        self.cwnd = max(1.0, self.cwnd / 2)
        self.last_cut = now
        self.cuts += 1
        return True
