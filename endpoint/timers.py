"""The EV model's timers from the link: its rate, the data frames a round trip can queue behind, the frame sizes.

On a fabric link (100 Gbit/s and up) a frame takes nanoseconds and the EV model's defaults (endpoint.ev.EvConfig:
a 25 ms minimum RTO, a 20 ms probe interval, 64 answered probes to come back) are far above any queue. On a
lab link shaped to 1 Mbit/s a 1,024-byte frame takes about 9 ms on each of the 4 links of a path, and a round
trip can wait behind dozens of frames of other QPs' windows: there the defaults take queueing for loss, and
every such spurious loss marks an EV ASSUMED_BAD for 64 probe round trips. `fit` scales the timers to the link
the senders were configured with; an unshaped link (None) leaves them as configured.

    cfg = fit(EvConfig(), link_queue(1.0, queued_frames=36, payload=1024))
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from endpoint.ev import EvConfig
from endpoint.wire import AckHeader, DataHeader

DATA_OVERHEAD = 14 + 40 + 8 + 12 + DataHeader.SIZE + 4  # Ethernet, IPv6, UDP, BTH, the transport's header, ICRC
ACK_FRAME = 14 + 40 + 8 + 12 + 4 + AckHeader.SIZE + 4  # Ethernet, IPv6, UDP, BTH, AETH, the ACK header, ICRC
CARRIER = 40  # the outer IPv6 header of a host-written carrier
HOPS = 4  # links a packet crosses one way: host - leaf - spine - leaf - host
MIN_RECOVER_PROBES = 4  # answered probes in a row that bring an EV back, however slow the link


def data_frame_bytes(payload: int, carrier: bool = True) -> int:
    """Bytes of a data frame of `payload` bytes on the wire (what a shaper counts)."""
    return payload + DATA_OVERHEAD + (CARRIER if carrier else 0)


@dataclass(frozen=True)
class LinkQueue:
    """What one round trip waits for: the link rate (bytes/s on the wire, every link alike), the data frames
    queued ahead of a packet on its round trip (the windows sharing its links), a data frame's and an ACK
    frame's bytes, and the links it crosses one way (each stores and forwards the whole frame)."""

    bytes_per_s: float
    queued_frames: int
    frame_bytes: int
    ack_bytes: int = ACK_FRAME + CARRIER
    hops: int = HOPS

    def __post_init__(self) -> None:
        if not self.bytes_per_s > 0 or self.queued_frames < 0 or self.frame_bytes < 1 or self.hops < 1:
            raise ValueError(f"a link queue needs a rate above 0, frames queued >= 0, a frame and a hop, not {self}")


def link_queue(mbit: float, queued_frames: int, payload: int, carrier: bool = True) -> LinkQueue | None:
    """The link queue of `payload`-byte packets at `mbit` Mbit/s behind `queued_frames` frames (0 Mbit/s: an
    unshaped link, None: the configured timers hold)."""
    if not mbit:
        return None
    return LinkQueue(mbit * 1e6 / 8, queued_frames, data_frame_bytes(payload, carrier),
                     ACK_FRAME + (CARRIER if carrier else 0))


def queue_delay(q: LinkQueue) -> float:
    """Seconds a packet waits behind the queued frames: how far behind an earlier packet on a busier path
    a later one on an idle path can arrive (the reordering spraying sees)."""
    return q.queued_frames * q.frame_bytes / q.bytes_per_s


def round_trip(q: LinkQueue) -> float:
    """Seconds of a packet's round trip with its queues full: its frame and its ACK stored and forwarded
    on every link, behind the queued frames."""
    return q.hops * (q.frame_bytes + q.ack_bytes) / q.bytes_per_s + queue_delay(q)


def recover_probes(hold_down: float, cycle: float, most: int) -> int:
    """Answered probes in a row that take `hold_down` seconds when each takes `cycle` (its round trip and
    the gap to the next), at least MIN_RECOVER_PROBES and at most `most`."""
    return max(MIN_RECOVER_PROBES, min(most, math.ceil(hold_down / cycle))) if cycle > 0 else most


def fit(base: EvConfig, q: LinkQueue | None) -> EvConfig:
    """`base` with its timers held above what the link's queue can delay (None: `base` as it is):

    - min RTO: a round trip with the queues full (the caller's queue counts what a collision adds); max RTO
      at least 4 times that;
    - probe interval: a round trip (a probe sent sooner waits in the queue that delayed the loss's packet);
      the dead-path backoff's cap at least 4 intervals;
    - answered probes to come back: as many as keep base's hold-down in time (base's count at base's probe
      gap, a probe's round trip negligible), a probe now taking the gap and a round trip; gray strikes
      double it up to the same multiple of it as base's cap;
    - RACK's reordering window: the queue's delay (per-packet spraying reorders by that much).
    """
    if q is None:
        return base
    rt = round_trip(q)
    min_rto = max(base.min_rto, rt)
    probe = max(base.probe_interval, rt)
    need = recover_probes(base.recover_probes * base.probe_gap, base.probe_gap + rt, base.recover_probes)
    cap = max(need, base.max_recover_probes * need // max(1, base.recover_probes))
    return dataclasses.replace(base, min_rto=min_rto, max_rto=max(base.max_rto, 4 * min_rto), probe_interval=probe,
                               max_probe_interval=max(base.max_probe_interval, 4 * probe), recover_probes=need,
                               max_recover_probes=cap, reorder_window=max(base.reorder_window, queue_delay(q)))
