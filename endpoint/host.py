"""Endpoint mode in a lab host's namespace: the socket loops around SenderCore and ReceiverCore.

    python3 -m endpoint recv --topology T.yaml --evs evs.json --host h2 --expect 256 --out r.json
    python3 -m endpoint send --topology T.yaml --evs evs.json --host h0 --to h2 --policy health --out s.json

Frames leave and arrive through one AF_PACKET socket per plane NIC (as mininet_labs.traffic does);
the EVs come from `fabricctl evs --export` (controller.plan.evs). Both write their JSON result.
"""

from __future__ import annotations

import argparse
import errno
import fcntl
import json
import os
import select
import signal
import socket
import struct
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from controller.files.atomic import write_atomic
from controller.plan.evs import load_export
from controller.model.topology import load
from endpoint import policy as policies
from endpoint.control import ControlSocket
from endpoint.ev import EvConfig
from endpoint.receiver import ReceiverCore
from endpoint.sender import SenderConfig, SenderCore, Tx
from endpoint.timers import fit, link_queue
from endpoint.wire import (OP_ACK, OP_SEND_ONLY, REV_PROBE, TRIM_DSCP, AckHeader, DataHeader, ack_frame, data_frame,
                           parse)
from mininet_labs.traffic import ETH_P_ALL, HostNic, _send_all, host_nics
from mininet_labs.frames import PACKET_OUTGOING, ROCE_PORT


@dataclass
class SendSpec:
    topology: str
    evs: str
    host: str
    to: list[str]
    policy: str = "health"
    config: SenderConfig = field(default_factory=SenderConfig)
    ev_config: EvConfig = field(default_factory=EvConfig)
    rate: float = 400.0  # packets per second, retransmissions included (probes not)
    duration: float = 30.0  # give up after this long
    parts: int = 4  # ethereal: parts per message
    start_at_ns: int = 0
    events: str | None = None  # append each EV state change event here as a JSON line
    control: str | None = None  # a Unix socket here takes the controller's requests (endpoint.control)


@dataclass
class RecvSpec:
    topology: str
    evs: str
    host: str
    expect: int = 0
    timeout: float = 30.0
    linger: float = 1.0  # keep acknowledging this long after the last expected packet (lost ACKs, resends)
    ready_file: str | None = None
    bin_ms: float = 20.0
    trim_dscp: int = TRIM_DSCP
    reverse_probe: float = 0.0  # seconds between probes of each plane's reverse EVs (0: the data EV's reverse)


SIOCGIFFLAGS, IFF_UP, IFF_RUNNING = 0x8913, 0x1, 0x40
PORTS_EVERY = 0.01  # seconds between two reads of the NICs' states


class _Nics:
    """A host's plane NICs with one raw socket each."""

    def __init__(self, topology: str, host: str) -> None:
        self.nics: dict[int, HostNic] = {n.plane: n for n in host_nics(load(topology), host)}
        self.socks: dict[int, tuple[socket.socket, int]] = {}
        for nic in self.nics.values():
            s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
            s.bind((nic.intf, 0))
            s.setblocking(False)
            self.socks[s.fileno()] = (s, nic.plane)
        self.sink = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)  # no ICMP port unreachable for RoCE
        try:
            self.sink.bind(("::", ROCE_PORT))
        except OSError:
            pass  # the other endpoint process of this host holds it

    def ports(self) -> int:
        """The port-state bitmap: bit p set when the plane-p NIC is up with a carrier (IFF_UP and IFF_RUNNING,
        read in this namespace)."""
        bits = 0
        for plane, nic in self.nics.items():
            try:
                req = fcntl.ioctl(self.sink.fileno(), SIOCGIFFLAGS, struct.pack("16sH14x", nic.intf.encode()[:15], 0))
            except OSError:
                continue  # gone: down
            flags = struct.unpack_from("16sH", req)[1]
            if flags & IFF_UP and flags & IFF_RUNNING:
                bits |= 1 << plane
        return bits

    def by_plane(self, plane: int) -> tuple[socket.socket, HostNic]:
        sock = next(s for s, p in self.socks.values() if p == plane)
        return sock, self.nics[plane]

    def frames(self, timeout: float) -> list[bytes]:
        """Frames that arrived (not the ones this host sent), waiting at most `timeout` for the first."""
        out: list[bytes] = []
        try:
            ready, _, _ = select.select(list(self.socks), [], [], max(0.0, timeout))
        except InterruptedError:
            return out
        for fd in ready:
            sock = self.socks[fd][0]
            for _ in range(256):
                try:
                    frame, addr = sock.recvfrom(65535)
                except BlockingIOError:
                    break
                except OSError as e:
                    if e.errno != errno.ENETDOWN:
                        raise
                    break
                if addr[2] != PACKET_OUTGOING:
                    out.append(frame)
        return out

    def close(self) -> None:
        for s, _ in self.socks.values():
            s.close()
        self.sink.close()


def send(spec: SendSpec) -> dict[str, Any]:
    """Send spec.config's messages to every destination in spec.to under the policy; the result as JSON."""
    evs = load_export(json.loads(Path(spec.evs).read_text()), spec.host)
    missing = [d for d in spec.to if d not in evs]
    if missing:
        raise ValueError(f"the EV export has no EVs from {spec.host} to {', '.join(missing)}")
    kwargs = {"parts": spec.parts} if spec.policy == "ethereal" else {}
    core = SenderCore(spec.host, {d: evs[d] for d in spec.to}, policies.make(spec.policy, **kwargs), spec.config,
                      spec.ev_config)
    peers = {e.dst: d for d in spec.to for e in evs[d]}
    nics = _Nics(spec.topology, spec.host)
    size = max(spec.config.size, -(-DataHeader.SIZE // 4) * 4)
    sent = probes = 0

    def emit(tx: Tx, payload: int) -> None:
        ev = core.evs[tx.dst][tx.ev]
        sock, nic = nics.by_plane(ev.plane)
        _send_all(sock, data_frame(nic.mac, nic.gateway_mac, ev.src, ev.dst, ev.carrier, tx.qp, tx.psn, tx.header,
                                   payload))

    events = open(spec.events, "a", encoding="utf-8") if spec.events else None  # noqa: SIM115 (closed below)
    ctl = ControlSocket(spec.control) if spec.control else None

    def drain() -> None:
        if events is not None:
            for e in core.events.poll():
                events.write(json.dumps({"host": spec.host, **e.to_json()}) + "\n")
            events.flush()

    if spec.start_at_ns:
        time.sleep(max(0.0, (spec.start_at_ns - time.monotonic_ns()) / 1e9))
    start_ns = time.monotonic_ns()
    start = start_ns / 1e9
    interval = 1.0 / spec.rate if spec.rate > 0 else 0.0
    next_send, deadline = start, start + spec.duration
    next_ports = start
    try:
        while not core.done:
            now = time.monotonic()
            if now >= deadline:
                break
            wait = min(next_send, core.next_timer(now), deadline) - now
            for frame in nics.frames(wait):
                rx = parse(frame)
                if rx is None or rx.src not in peers or not rx.icrc_ok:
                    continue
                if rx.opcode == OP_SEND_ONLY:  # a destination's receiver probing its reverse EVs: answer
                    probe = DataHeader.unpack(rx.body)
                    answer = None if probe is None or probe.kind != REV_PROBE else core.answer_probe(peers[rx.src], probe)
                    if answer is not None:
                        ev, header = answer
                        sock, nic = nics.by_plane(ev.plane)
                        _send_all(sock, ack_frame(nic.mac, nic.gateway_mac, ev.src, ev.dst, ev.carrier, rx.qp, rx.psn,
                                                  header))
                    continue
                if rx.opcode != OP_ACK:
                    continue
                ack = AckHeader.unpack(rx.body[4:])
                if ack is not None:
                    core.on_ack(peers[rx.src], rx.qp, rx.psn, ack, time.monotonic(), time.monotonic_ns())
            now, now_ns = time.monotonic(), time.monotonic_ns()
            if now >= next_ports:
                core.set_local_ports(nics.ports(), now)
                next_ports = now + PORTS_EVERY
            for tx in core.tick(now, now_ns):
                emit(tx, 48)
                probes += 1
            if now >= next_send:
                packet = core.next_packet(now, now_ns)
                if packet is not None:
                    emit(packet, size)
                    sent += 1
                    next_send = max(next_send + interval, now - 10 * interval)
                else:
                    next_send = now + min(interval, 0.001)
            if ctl is not None:
                ctl.serve(lambda req: core.control(req, time.monotonic()))
            drain()
    finally:
        nics.close()
        if ctl is not None:
            ctl.close()
        if events is not None:
            drain()
            events.close()
    end_ns = time.monotonic_ns()
    return {**core.to_json(), "sent": sent, "probes": probes, "start_ns": start_ns, "end_ns": end_ns,
            "seconds": round((end_ns - start_ns) / 1e9, 3), "rate_pps": spec.rate, "complete": core.done}


def receive(spec: RecvSpec) -> dict[str, Any]:
    """Acknowledge and count until `expect` distinct packets came (then `linger`), `timeout`, or SIGTERM."""
    evs = load_export(json.loads(Path(spec.evs).read_text()), spec.host)
    core = ReceiverCore(spec.host, evs, spec.bin_ms, spec.reverse_probe)
    nics = _Nics(spec.topology, spec.host)
    stop = {"now": False}

    def on_signal(signum: int, _frame: Any) -> None:
        stop["now"] = True

    old = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    start = time.monotonic()
    deadline, done_at = start + spec.timeout, None
    acks = 0
    next_ports = start
    try:
        if spec.ready_file:
            Path(spec.ready_file).write_text(str(os.getpid()))
        while not stop["now"]:
            now = time.monotonic()
            if now >= deadline or (done_at is not None and now >= done_at + spec.linger):
                break
            if now >= next_ports:
                core.ports = nics.ports()  # carried in every acknowledgement
                next_ports = now + PORTS_EVERY
            for p in core.tick(time.monotonic_ns()):
                sock, nic = nics.by_plane(p.ev.plane)
                _send_all(sock, data_frame(nic.mac, nic.gateway_mac, p.ev.src, p.ev.dst, p.ev.carrier, 0, 0, p.header, 48))
            for frame in nics.frames(min(PORTS_EVERY, deadline - now)):
                rx = parse(frame, spec.trim_dscp)
                if rx is not None and rx.opcode == OP_ACK and rx.icrc_ok and rx.src in core.by_addr:
                    ack = AckHeader.unpack(rx.body[4:])
                    if ack is not None:
                        core.on_ack(core.by_addr[rx.src], ack, time.monotonic_ns())
                    continue
                if rx is None or rx.opcode != OP_SEND_ONLY:
                    continue
                reply = core.on_packet(rx, time.monotonic_ns())
                if reply is None:
                    continue
                sock, nic = nics.by_plane(reply.ev.plane)
                _send_all(sock, ack_frame(nic.mac, nic.gateway_mac, reply.ev.src, reply.ev.dst, reply.ev.carrier,
                                          reply.qp, reply.psn, reply.header, dscp=spec.trim_dscp))
                acks += 1
            if done_at is None and spec.expect and core.received_total() >= spec.expect:
                done_at = time.monotonic()
    finally:
        nics.close()
        for s, handler in old.items():
            signal.signal(s, handler)
    return {**core.to_json(), "acks_sent": acks, "seconds": round(time.monotonic() - start, 3)}


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python3 -m endpoint",
                                description="Endpoint-mode RoCEv2 (hosts spray over their own SRv6 EVs) in a lab host.")
    sub = p.add_subparsers(dest="command", required=True)
    for name in ("send", "recv"):
        c = sub.add_parser(name)
        c.add_argument("--topology", required=True, help="the lab's topology YAML")
        c.add_argument("--evs", required=True, help="the EV export (fabricctl evs --export FILE)")
        c.add_argument("--host", required=True)
        c.add_argument("--out", help="write the JSON result here instead of stdout")
    s = sub.choices["send"]
    s.add_argument("--to", action="append", required=True)
    s.add_argument("--policy", choices=list(policies.POLICIES), default="health")
    s.add_argument("--qps", type=int, default=4)
    s.add_argument("--messages", type=int, default=64, help="messages per destination, round-robined over the QPs")
    s.add_argument("--per-message", type=int, default=1, help="packets per message")
    s.add_argument("--size", type=int, default=256, help="payload bytes per packet")
    s.add_argument("--window", type=int, default=16, help="unacknowledged packets per QP")
    s.add_argument("--ev-count", type=int, default=0, help="EVs per destination (0: all)")
    s.add_argument("--evs-per-qp", type=int, default=0, help="EVs of each QP (0: all; m: QP k takes m from EV k*m)")
    s.add_argument("--parts", type=int, default=4, help="ethereal: parts per message")
    s.add_argument("--rate", type=float, default=400.0)
    s.add_argument("--duration", type=float, default=30.0)
    s.add_argument("--min-rto-ms", type=float, default=25.0)
    s.add_argument("--probe-ms", type=float, default=20.0)
    s.add_argument("--start-at-ns", type=int, default=0)
    s.add_argument("--bin-ms", type=float, default=20.0)
    s.add_argument("--cc", action="store_true", help="DCTCP congestion window per QP (at most --window)")
    s.add_argument("--backups-per-plane", type=int, default=0, help="EVs per plane kept as backups")
    s.add_argument("--ev-min-active", type=int, default=None,
                   help="usable active EVs a loss may not go below (default: a quarter of the EVs; 0: no floor)")
    s.add_argument("--recover-probes", type=int, default=EvConfig.recover_probes,
                   help="answered probes in a row that bring an ASSUMED_BAD EV back (doubled per gray strike)")
    s.add_argument("--link-mbit", type=float, default=0.0,
                   help="the shaped links' rate: the EV timers are fitted to it (0: unshaped, the timers as given)")
    s.add_argument("--queued-frames", type=int, default=0, help="data frames a round trip can queue behind")
    s.add_argument("--events", help="append EV state change events here (JSON lines)")
    s.add_argument("--control", help="take the controller's requests on a Unix socket here")
    r = sub.choices["recv"]
    r.add_argument("--expect", type=int, default=0)
    r.add_argument("--timeout", type=float, default=30.0)
    r.add_argument("--linger", type=float, default=1.0)
    r.add_argument("--ready-file")
    r.add_argument("--bin-ms", type=float, default=20.0)
    r.add_argument("--trim-dscp", type=int, default=TRIM_DSCP)
    r.add_argument("--reverse-probe-ms", type=float, default=0.0,
                   help="probe each plane's reverse EVs this often while data comes (0: ACKs ride the data EV's reverse)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "send":
            cfg = SenderConfig(args.qps, args.messages, args.per_message, args.size, args.window, ev_count=args.ev_count,
                               evs_per_qp=args.evs_per_qp, bin_ms=args.bin_ms, cc=args.cc,
                               backups_per_plane=args.backups_per_plane, ev_min_active=args.ev_min_active)
            evc = fit(EvConfig(min_rto=args.min_rto_ms / 1e3, probe_interval=args.probe_ms / 1e3,
                               recover_probes=args.recover_probes),
                      link_queue(args.link_mbit, args.queued_frames, args.size))
            doc = send(SendSpec(args.topology, args.evs, args.host, args.to, args.policy, cfg, evc, args.rate,
                                args.duration, args.parts, args.start_at_ns, args.events, args.control))
        else:
            doc = receive(RecvSpec(args.topology, args.evs, args.host, args.expect, args.timeout, args.linger,
                                   args.ready_file, args.bin_ms, args.trim_dscp, args.reverse_probe_ms / 1e3))
    except (ValueError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    text = json.dumps(doc)
    if args.out:
        write_atomic(Path(args.out), text + "\n")
    else:
        print(text)
    return 0
