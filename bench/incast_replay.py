"""A discrete-event model of bench/endpoint_mrc.py's incast (no lab, no root; prints JSON): the real senders'
transport (endpoint.sender.SenderCore, its EV table and congestion window) against a modelled
bottleneck, to see where the goodput goes and to try a change in seconds before measuring it in the lab.

The model: h0 and h1 (4 QPs each, paced at `--rate`) send to h2 over every EV of a 2 planes x 4 T1 x
2 T0 x 2 hosts fabric; between `--fault-at` and `--repair-at` h2's leaf port of each plane is a FIFO
served at `--pps`, `--depth` packets deep; with `--trim-at` a packet that finds that many queued is cut
and NACKed at once (the trim class overtakes the queue), without it a full queue tail-drops; outside
the fault every packet is delivered after the base RTT. Probes ride the data queue like data.

    python3 bench/incast_replay.py --seeds 3          # trimming off and on, 3 seeds each

A model, not a measurement: no CPU contention, no bmv2 scheduling jitter, exact pacing. The lab's
figures are bench/endpoint_mrc.py's (docs/endpoint.md compares the two).
"""

from __future__ import annotations

import argparse
import heapq
import itertools
import json
import random
import statistics
import sys
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from controller.model.topology import build  # noqa: E402
from controller.plan.evs import host_evs  # noqa: E402
from controller.routes import Fabric  # noqa: E402
from endpoint.ev import EvConfig  # noqa: E402
from endpoint.policy import make  # noqa: E402
from endpoint.sender import SenderConfig, SenderCore, Tx  # noqa: E402
from endpoint.wire import ACK, NACK, PROBE, PROBE_ACK, AckHeader  # noqa: E402

SENDERS, RECEIVER = ("h0", "h1"), "h2"


def replay(trim_at: int, seed: int, *, pps: float = 200.0, depth: int = 32, rate: float = 300.0, seconds: float = 4.0,
           fault: tuple[float, float] = (1.0, 3.0), rtt: float = 0.0006, jitter: float = 0.0003,
           min_rto: float = 0.025, step: float = 0.0002) -> dict[str, Any]:
    """One run (`trim_at` 0: trimming off): goodput during the fault, resends by how the loss was seen,
    spurious losses, congestion-window cuts, probes, what each port served."""
    rnd = random.Random(seed)
    fabric = Fabric(build(2, 4, 2, 2, name="lab"))
    messages = int(seconds * rate / 4) // 4 * 4
    senders = {h: SenderCore(h, host_evs(fabric, h, [RECEIVER]), make("health"),
                             SenderConfig(qps=4, messages=messages, per_message=4, window=16, cc=True),
                             EvConfig(min_rto=min_rto, probe_interval=0.02)) for h in SENDERS}
    queue: dict[int, list[tuple[str, Tx]]] = {0: [], 1: []}
    events: list[tuple[float, int, str, Any]] = []
    order = itertools.count()
    seen: set[tuple[str, int, int]] = set()
    delivered, served, trimmed = Counter(), Counter(), 0

    def put(t: float, kind: str, data: Any) -> None:
        heapq.heappush(events, (t, next(order), kind, data))

    def reply(t: float, h: str, tx: Tx, kind: int) -> None:
        hd = tx.header
        put(t + rtt / 2, "ack", (h, tx, AckHeader(kind, tx.ev, hd.ev_seq if kind != NACK else 0,
                                                  hd.tx_ns if kind != NACK else 0)))

    def deliver(t: float, h: str, tx: Tx) -> None:
        if tx.header.kind == PROBE:
            return reply(t, h, tx, PROBE_ACK)
        if (h, tx.qp, tx.psn) not in seen:
            seen.add((h, tx.qp, tx.psn))
            delivered[int(t * 10)] += 1
        reply(t, h, tx, ACK)

    def arrive(t: float, h: str, tx: Tx) -> None:
        nonlocal trimmed
        plane = senders[h].evs[RECEIVER][tx.ev].plane
        q = queue[plane]
        if not fault[0] <= t < fault[1]:
            deliver(t + rtt / 4, h, tx)
        elif trim_at and len(q) >= trim_at:
            trimmed += 1
            reply(t + rtt / 4, h, tx, NACK)
        elif len(q) < depth:
            q.append((h, tx))
            if len(q) == 1:
                put(t + 1 / pps, "served", plane)

    next_send = dict.fromkeys(senders, 0.0)
    t = 0.0
    while t < seconds + 3 and not (all(s.done for s in senders.values()) and not events):
        while events and events[0][0] <= t:
            at, _, kind, data = heapq.heappop(events)
            if kind == "arrive":
                arrive(at, *data)
            elif kind == "served":
                served[data] += fault[0] <= at < fault[1]
                h, tx = queue[data].pop(0)
                deliver(at + rtt / 4, h, tx)
                if queue[data]:
                    put(at + 1 / pps, "served", data)
            else:
                h, tx, ack = data
                senders[h].on_ack(RECEIVER, tx.qp, tx.psn, ack, at, int(at * 1e9))
        for h, s in senders.items():
            out = s.tick(t, int(t * 1e9))
            if t >= next_send[h]:
                tx = s.next_packet(t, int(t * 1e9))
                next_send[h] = max(next_send[h] + 1 / rate, t - 10 / rate) if tx else t + min(1 / rate, 0.001)
                out += [tx] if tx else []
            for tx in out:
                put(t + rtt / 4 + rnd.random() * jitter, "arrive", (h, tx))
        t = round(t + step, 7)
    qps = [q for s in senders.values() for q in s.order]
    how: dict[str, list[float]] = {}
    for q in qps:
        for k, v in q.resend_delays.items():
            how.setdefault(k, []).extend(v)
    during = [delivered[b] * 10 for b in range(int(fault[0] * 10), int(fault[1] * 10))]
    return {"trim_at": trim_at, "seed": seed, "complete": all(s.done for s in senders.values()),
            "goodput_pps": statistics.mean(during), "bottleneck_pps": 2 * pps,
            "served_pps": {str(p): n / (fault[1] - fault[0]) for p, n in sorted(served.items())},
            "resends_by_how": {k: len(v) for k, v in sorted(how.items())},
            "loss_to_resend_ms_median": round(statistics.median([d for v in how.values() for d in v]) * 1e3, 2)
            if how else None, "trimmed": trimmed, "spurious": sum(q.spurious for q in qps),
            "cwnd_cuts": sum(q.cc.cuts for q in qps if q.cc), "probes": sum(s.probes_sent for s in senders.values())}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--trim-at", type=int, default=8, help="the trimming mode's threshold (the other mode is off)")
    ap.add_argument("--rate", type=float, default=300.0, help="packets/s per sender")
    ap.add_argument("--pps", type=float, default=200.0, help="each bottleneck port's rate")
    ap.add_argument("--depth", type=int, default=32)
    args = ap.parse_args()
    runs = [replay(trim, seed, pps=args.pps, depth=args.depth, rate=args.rate)
            for trim in (0, args.trim_at) for seed in range(1, args.seeds + 1)]
    off = [r["goodput_pps"] for r in runs if not r["trim_at"]]
    on = [r["goodput_pps"] for r in runs if r["trim_at"]]
    print(json.dumps({"bench": "incast_replay", "model": True, "runs": runs,
                      "goodput_on_over_bottleneck": [round(g / (2 * args.pps), 3) for g in on],
                      "goodput_on_over_off_same_seed": [round(a / b, 3) for a, b in zip(on, off)]}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
