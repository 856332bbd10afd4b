"""A QP's congestion window: DCTCP (RFC 8257) on trimmed and CE-marked packets, halving on a loss.

Off by default (the QP keeps its fixed window); the incast scenario turns it on for every mode so that
trimming on and off differ only in how congestion is seen: a NACK one round trip after a trimmed send,
or a loss found later by the ACKs of later packets (RACK) or by the retransmission timeout.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Dctcp:
    """Window `cwnd` in packets, between 1 and `limit`; +1/cwnd per unmarked ACK (RFC 5681 congestion
    avoidance) and at most one reduction per round trip (RFC 3168 6.1.2):

    - a marked packet (an ACK echoing CE, or a NACK: the switch trimmed the packet because the queue
      was past its threshold, the same step signal as DCTCP's marking at K) cuts the window by
      alpha/2 (RFC 8257 3.3): alpha is a moving average (gain `g`; 1/16 and a start at 1 as RFC 8257
      suggests) of the fraction of marked packets per window of data, so a queue just past the
      threshold costs a little, one that marks everything halves the window;
    - a loss (RACK or a retransmission timeout) halves it: RFC 8257 3.5, a DCTCP sender reacts to loss
      as conventional TCP does.

    A window of data is counted in packets: it ends when as many packets have been acknowledged or
    NACKed as the window held when it began (RFC 8257 3.3's WindowEnd = SND.NXT, in packets)."""

    limit: int
    cwnd: float = 0.0
    g: float = 1 / 16
    alpha: float = 1.0
    last_cut: float = float("-inf")
    cuts: int = 0
    acked: int = 0  # packets acknowledged or NACKed in this window of data
    marked: int = 0  # of which CE-echoed or NACKed
    window_left: int = 0  # packets until the window of data ends

    def __post_init__(self) -> None:
        if self.limit < 1:
            raise ValueError(f"window {self.limit} is below 1")
        if not 0 < self.g <= 1:
            raise ValueError(f"DCTCP gain {self.g} is not in (0, 1]")
        self.cwnd = float(self.limit) if self.cwnd <= 0 else min(self.cwnd, float(self.limit))
        self.window_left = self.window

    @property
    def window(self) -> int:
        return max(1, int(self.cwnd))

    def _count(self, marked: bool) -> None:
        """RFC 8257 3.3 steps 1-8: count the packet; at a window's end fold its marked fraction into alpha."""
        self.acked += 1
        self.marked += marked
        self.window_left -= 1
        if self.window_left <= 0:
            self.alpha = (1 - self.g) * self.alpha + self.g * self.marked / self.acked
            self.acked = self.marked = 0
            self.window_left = self.window

    def on_ack(self) -> None:
        """An unmarked ACK."""
        self._count(False)
        self.cwnd = min(float(self.limit), self.cwnd + 1.0 / self.cwnd)

    def on_mark(self, now: float, rtt: float) -> bool:
        """A CE-echoing ACK or a NACK: counted, and the window cut by alpha/2 unless already cut within
        the last `rtt` (alpha first updated if this packet ends a window); whether it was cut."""
        self._count(True)
        return self._cut(now, rtt, 1 - self.alpha / 2)

    def on_loss(self, now: float, rtt: float) -> bool:
        """A packet lost (RACK or a timeout): halved unless already cut within the last `rtt`."""
        return self._cut(now, rtt, 0.5)

    def _cut(self, now: float, rtt: float, factor: float) -> bool:
        if now - self.last_cut < rtt:
            return False
        self.cwnd = max(1.0, self.cwnd * factor)
        self.last_cut = now
        self.cuts += 1
        return True
