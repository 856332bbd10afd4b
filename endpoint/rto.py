"""Round-trip time estimation and the retransmission timeout of RFC 6298, per EV and per destination host."""

from __future__ import annotations

from dataclasses import dataclass


def smooth(srtt: float | None, rttvar: float, rtt: float) -> tuple[float, float]:
    """RFC 6298 2.2-2.3: (SRTT, RTTVAR) after one more round-trip sample (alpha 1/8, beta 1/4)."""
    if srtt is None:
        return rtt, rtt / 2
    return 0.875 * srtt + 0.125 * rtt, 0.75 * rttvar + 0.25 * abs(srtt - rtt)


def timeout(srtt: float | None, rttvar: float, floor: float, cap: float) -> float:
    """RFC 6298 2.4: SRTT + 4 RTTVAR within [floor, cap]; the floor before any sample (2.1 sets 1 s there,
    a fabric's floor is its minimum RTO)."""
    if srtt is None:
        return floor
    return min(cap, max(floor, srtt + 4 * rttvar))


@dataclass
class HostRtt:
    """The round trip to one destination host over all of its EVs: one estimator shared by every EV and
    QP towards it, as RFC 9040 (TCP control block interdependence, 4.1/8.1) shares RTT state between
    connections to one host. Every EV to a host ends on that host's leaf ports, where an incast queues;
    an EV that carries little data learns the queue from its own samples only after its packets waited
    in it, so an EV's timeout is never below the host's (`SenderCore.rto`). Fed by the ACKs of data
    transmissions still outstanding and by probe answers, not by NACKs (a trimmed header overtakes the
    queue) nor by the ACK of a transmission already declared lost (Karn's rule, RFC 6298 3)."""

    srtt: float | None = None
    rttvar: float = 0.0
    samples: int = 0

    def sample(self, rtt: float) -> None:
        if rtt >= 0:
            self.srtt, self.rttvar = smooth(self.srtt, self.rttvar, rtt)
            self.samples += 1

    def rto(self, floor: float, cap: float) -> float:
        return timeout(self.srtt, self.rttvar, floor, cap)
