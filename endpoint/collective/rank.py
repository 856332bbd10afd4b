"""One rank of a collective in its lab host: a SenderCore towards every peer it sends to and a
ReceiverCore for every peer, on the host's plane NICs, driven by the transfers' dependencies.

    python3 -m endpoint.collective rank --plan plan.json --rank h0 --out h0.json

With `nic_failover` "shift", the QPs bound to a NIC that fails move to another NIC of the host, their
packets in flight sent again there (shift.py).

The plan (run.py writes it) names the topology, the EV export, the transport settings and every
transfer. One SenderCore carries the whole run: a QP's `total` grows by a transfer's packets when the
transfer starts (its dependencies complete, layout.RankProgress), so EV health, RTT estimates and
PSNs carry over from step to step as on a NIC. The rank writes `<out>.ready`, waits for the go file
(the common start time, monotonic ns), runs, writes its timeline to `out` when every transfer of its
completed, and keeps acknowledging until SIGTERM (a peer may still resend) or the plan's timeout.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import signal
import sys
import time
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from controller.files.atomic import write_atomic
from controller.model.topology import load
from controller.plan.evs import load_export
from endpoint import policy as policies
from endpoint.collective import shift, v4
from endpoint.collective.layout import PSN_MASK, PSN_STRIDE, Layout, RankProgress, Transfer, pattern
from endpoint.ev import EvConfig
from endpoint.host import PORTS_EVERY, _Nics
from endpoint.receiver import ReceiverCore
from endpoint.sender import QpState, SenderConfig, SenderCore, Tx
from endpoint.timers import fit, link_queue
from endpoint.wire import DATA, ECT0, OP_ACK, OP_SEND_ONLY, AckHeader, DataHeader, ack_frame, encap, parse, sport_of
from mininet_labs.traffic import _send_all, host_nics, roce_frame

FORMAT = "srv6-fabric-collective-plan/1"
BATCH = 32  # packets sent before the sockets are read again


@dataclasses.dataclass(frozen=True)
class Transport:
    """How every rank sends: EV policy, UDP source port ('ev': the EV's, one per host pair and path as
    the endpoint sends; 'qp': one per QP, as a NIC that spreads QPs over ports), QPs, window, data bytes
    per packet, the EV model's timers (ms) and, with `timers` "link", the link they are fitted to
    (endpoint.timers.fit: run.run sets the lab's rate and the frames a round trip can queue behind)."""

    policy: str = "qp-rr"
    sport: str = "ev"
    qp_base: int = 0x100
    window: int = 4
    mtu: int = 1024
    parts: int = 4
    min_rto_ms: float = 25.0
    max_rto_ms: float = 1000.0
    probe_ms: float = 20.0
    recover_probes: int = EvConfig.recover_probes
    undo_spurious: bool = EvConfig.undo_spurious  # a late ACK takes back the ASSUMED_BAD its packet's loss made
    timers: str = "link"  # "link": fitted to link_mbit and queued_frames; "fixed": as given
    link_mbit: float = 0.0  # the links' rate (0: unshaped)
    queued_frames: int = 0  # data frames a round trip can queue behind
    ipv4: bool = False  # RoCEv2 over the hosts' IPv4 addresses (eecmp_qp_hash routes IPv4 only)
    nic_failover: str = "none"  # "shift": QPs bound to a failed NIC move to another (policy qp-rr; shift.py)
    nic_retries: int = shift.RETRIES

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def ev_config(self) -> EvConfig:
        """The EV model every rank runs: the configured timers, fitted to the link unless `timers` is "fixed"."""
        base = EvConfig(min_rto=self.min_rto_ms / 1e3, max_rto=self.max_rto_ms / 1e3, probe_interval=self.probe_ms / 1e3,
                        recover_probes=self.recover_probes, undo_spurious=self.undo_spurious)
        if self.timers == "fixed":
            return base
        return fit(base, link_queue(self.link_mbit, self.queued_frames, self.mtu))


def qp_sport(qp: int) -> int:
    """A QP's own UDP source port in the RoCEv2 range (0xC000 and up), spread by a CRC of its number."""
    return 0xC000 | (zlib.crc32(qp.to_bytes(4, "big")) & 0x3FFF)


def read_plan(path: str) -> dict[str, Any]:
    doc = json.loads(Path(path).read_text())
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise ValueError(f"{path} is not a collective plan (no \"format\": \"{FORMAT}\")")
    return doc


def run_rank(plan: dict[str, Any], me: str, out: Path) -> dict[str, Any]:
    transport = Transport(**plan["transport"])
    transfers = [Transfer.of(t) for t in plan["transfers"]]
    layout = Layout(transfers, transport.mtu)
    progress = RankProgress(me, layout)
    evs = load_export(json.loads(Path(plan["evs"]).read_text()), me)
    dests = sorted({t.dst for t in transfers if t.src == me})
    missing = [d for d in {t.src for t in transfers if t.dst == me} | set(dests) if d not in evs]
    if missing:
        raise ValueError(f"the EV export has no EVs between {me} and {', '.join(sorted(missing))}")
    qps = max(1, layout.qps())
    # a message is a transfer (Ethereal splits each into its parts): the packets most of this rank's sends have
    sizes = [p.packets for p in progress.sends]
    per_message = max(set(sizes), key=sizes.count) if sizes else 1
    kwargs = {"parts": transport.parts} if transport.policy == "ethereal" else {}
    base = policies.make(transport.policy, **kwargs)
    policy = shift.OnNic(base) if transport.policy == "qp-rr" else base  # a QP bound to one NIC: SHIFT moves it
    core = SenderCore(me, {d: evs[d] for d in dests}, policy,
                      SenderConfig(qps, 0, per_message, transport.mtu, transport.window, qp_base=transport.qp_base),
                      transport.ev_config())
    receiver = ReceiverCore(me, evs, bin_ms=0)
    peers = {e.dst: d for d, v in evs.items() for e in v}
    nics = _Nics(plan["topology"], me)

    def wr_of(dst: str, qp: int, seq: int) -> int | None:
        p = layout.piece_at(me, dst, qp - transport.qp_base, seq)
        return None if p is None else p.transfer.id

    def has_work(dst: str, qp: int) -> bool:
        return any(p.transfer.id not in progress.done for p in layout.run(me, dst, qp - transport.qp_base))

    failover = shift.NicFailover(core, policy, transport.nic_failover, sorted(nics.nics), transport.nic_retries,
                                 wr_of, has_work) if isinstance(policy, shift.OnNic) else None
    model = load(plan["topology"])
    to_v4 = {n.v6: n.v4 for h in model.hosts for n in host_nics(model, h)}
    to_v6 = {v4: v6 for v6, v4 in to_v4.items()}
    stop = {"now": False}

    def on_signal(signum: int, _frame: Any) -> None:
        stop["now"] = True

    for s in (signal.SIGTERM, signal.SIGINT):
        signal.signal(s, on_signal)

    def emit(tx: Tx) -> None:
        ev = core.evs[tx.dst][tx.ev]
        sock, nic = nics.by_plane(ev.plane)
        k = tx.qp - transport.qp_base
        if tx.header.kind == DATA:
            seq = (tx.psn - k * PSN_STRIDE) & PSN_MASK
            p = progress.on_tx(tx.dst, k, seq, tx.header.attempt > 0)
            data = pattern(me, tx.dst, p.transfer.id, seq, p.data_len(seq)) if p is not None else b""
            sport = qp_sport(tx.qp) if transport.sport == "qp" else sport_of(tx.ev)
        else:
            data, sport = b"", sport_of(tx.ev)
        if transport.ipv4:
            _send_all(sock, v4.data_frame(nic.mac, nic.gateway_mac, to_v4[ev.src], to_v4[ev.dst], tx.qp, tx.psn,
                                          tx.header.pack() + data, sport, OP_SEND_ONLY, ECT0))
            return
        inner = roce_frame(nic.mac, nic.gateway_mac, ev.src, ev.dst, OP_SEND_ONLY, tx.qp, tx.psn,
                           tx.header.pack() + data, sport=sport, tc=ECT0)
        _send_all(sock, encap(nic.mac, nic.gateway_mac, ev.src, ev.carrier, inner))

    acked_upto: dict[tuple[str, int], int] = {}

    def advance(q: QpState, now_ns: int) -> None:
        key = (q.dst, q.index)
        upto = acked_upto.get(key, 0)
        while upto in q.acked:
            upto += 1
        if upto != acked_upto.get(key, 0):
            acked_upto[key] = upto
            progress.on_acked_upto(q.dst, q.index, upto, now_ns)

    ready = Path(str(out) + ".ready")
    go = Path(plan["go_file"])
    write_atomic(ready, "ready\n")
    wait_until = time.monotonic() + float(plan.get("ready_timeout_s", 60.0))
    while not go.exists() and not stop["now"]:
        if time.monotonic() > wait_until:
            raise ValueError(f"no go file {go} within the ready timeout")
        time.sleep(0.005)
    start_ns = int(go.read_text().strip() or 0) if go.exists() else 0
    time.sleep(max(0.0, (start_ns - time.monotonic_ns()) / 1e9))
    deadline = time.monotonic() + float(plan.get("timeout_s", 120.0))
    written = False
    busy = False
    reported = 0
    progress_file = Path(str(out) + ".progress")
    next_ports = 0.0
    try:
        while not stop["now"] and time.monotonic() < deadline:
            now_ns = time.monotonic_ns()
            if time.monotonic() >= next_ports:  # this host's ports: ACKs carry them; a port down is not used
                next_ports = time.monotonic() + PORTS_EVERY
                ports = nics.ports()
                if ports != receiver.ports:
                    receiver.ports = ports
                    core.set_local_ports(ports, time.monotonic())
                    if failover is not None:
                        failover.on_ports(ports, now_ns)
            for p in progress.startable():
                progress.release(p, now_ns)
                core.qps[p.transfer.dst, transport.qp_base + p.transfer.qp_index].total += p.packets
            if len(progress.done) != reported:  # for the runner's progress bar: receives completed here
                reported = len(progress.done)
                write_atomic(progress_file, f"{sum(1 for tid in progress.recvs if tid in progress.done)}\n")
            if progress.finished and not written:
                write_atomic(out, json.dumps(result(progress, core, receiver, start_ns, failover)) + "\n")
                written = True
            now = time.monotonic()
            wait = 0.0 if busy else min(core.next_timer(now), deadline) - now
            for frame in nics.frames(wait if not written else min(wait, 0.05)):
                rx = parse(frame) or (v4.parse(frame, to_v6) if transport.ipv4 else None)
                if rx is None or rx.src not in peers:
                    continue
                if rx.opcode == OP_ACK:
                    if not rx.icrc_ok:
                        continue
                    ack = AckHeader.unpack(rx.body[4:])
                    q = core.qps.get((peers[rx.src], rx.qp))
                    if ack is None or (q is None and rx.qp != 0):
                        continue
                    if q is not None and ((rx.psn - q.start_psn) & PSN_MASK) >= q.total:
                        continue  # not a packet of a started transfer (the core would count it acknowledged)
                    core.on_ack(peers[rx.src], rx.qp, rx.psn, ack, time.monotonic(), time.monotonic_ns())
                    if failover is not None:
                        failover.on_ack_ports(peers[rx.src], ack.ports, time.monotonic_ns())
                    if q is not None:
                        advance(q, time.monotonic_ns())
                elif rx.opcode == OP_SEND_ONLY:
                    arrived_ns = time.monotonic_ns()  # before the ACK leaves: the sender cannot see it earlier
                    header = DataHeader.unpack(rx.body) if not rx.trimmed else None
                    if header is not None:  # the EV rides in the header: the UDP port may be the QP's
                        rx = dataclasses.replace(rx, sport=sport_of(header.ev))
                    reply = receiver.on_packet(rx, arrived_ns)
                    if reply is None:
                        continue
                    sock, nic = nics.by_plane(reply.ev.plane)
                    if transport.ipv4:
                        _send_all(sock, v4.ack_frame(nic.mac, nic.gateway_mac, to_v4[reply.ev.src], to_v4[reply.ev.dst],
                                                     reply.qp, reply.psn, reply.header, sport_of(reply.header.ev)))
                    else:
                        _send_all(sock, ack_frame(nic.mac, nic.gateway_mac, reply.ev.src, reply.ev.dst,
                                                  reply.ev.carrier, reply.qp, reply.psn, reply.header))
                    if header is not None and header.kind == DATA and rx.icrc_ok:
                        k = rx.qp - transport.qp_base
                        seq = (rx.psn - k * PSN_STRIDE) & PSN_MASK
                        progress.on_data(reply.peer, k, seq, rx.body[DataHeader.SIZE:], arrived_ns)
            now, now_ns = time.monotonic(), time.monotonic_ns()
            for probe in core.tick(now, now_ns):
                emit(probe)
            if failover is not None:
                failover.on_retries(now_ns)
            busy = False
            for _ in range(BATCH):
                nxt = core.next_packet(now, now_ns)
                if nxt is None:
                    break
                emit(nxt)
            else:
                busy = True
    finally:
        nics.close()
    doc = result(progress, core, receiver, start_ns, failover)
    write_atomic(out, json.dumps(doc) + "\n")
    return doc


def result(progress: RankProgress, core: SenderCore, receiver: ReceiverCore, start_ns: int,
           failover: shift.NicFailover | None = None) -> dict[str, Any]:
    sender = core.to_json()
    return {**progress.to_json(), "start_ns": start_ns, "probes_sent": core.probes_sent,
            "evs": sender["evs"], "qps": [{k: q[k] for k in ("dst", "qp", "acked", "retransmitted", "spurious",
                                                             "lost_first_try", "per_ev")} for q in sender["qps"]],
            "receiver": {"unknown": receiver.unknown, "probes": receiver.probes},
            "nic_failover": failover.to_json() if failover is not None else None}


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python3 -m endpoint.collective",
                                description="One rank of a collective in a lab host (endpoint.collective.run starts them).")
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("rank")
    r.add_argument("--plan", required=True)
    r.add_argument("--rank", required=True, help="this rank's host")
    r.add_argument("--out", required=True)
    args = p.parse_args(argv)
    try:
        run_rank(read_plan(args.plan), args.rank, Path(args.out))
    except (ValueError, OSError, KeyError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0
