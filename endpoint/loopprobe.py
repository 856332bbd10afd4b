"""The loop-probing agent of one host: every period it sends each of its loops (endpoint.clustermap) from its
plane NICs, takes them back, localizes the failed links and maps them out of its own senders.

    python3 -m endpoint loops --topology T.yaml --host h0 --evs evs.json --period-ms 20 --state loops-h0.json \
        [--control control-h0.sock]... [--seconds 30]

A loop is an IPv6/UDP packet from the NIC's address to itself (port LOOP_PORT, a small header: magic,
loop index, round, send time), H.Encaps'd by endpoint.wire.encap to the loop's carrier; the leaf's End.DT6
hands it back to the host. A loop not back within `timeout` is lost. A link is reported failed once it was
localized in `confirm` rounds in a row and clean again after `confirm` rounds in a row without it: one loop
lost by chance on a loaded lab reports nothing.

The state file (written whenever the failed links change, every WRITE_EVERY seconds and at the end) is the host's report: its failed
links with their kind, the EVs it denied per destination, and the rounds' figures; `--events` appends each
change as a JSON line. Each `--control` socket (a running endpoint sender, endpoint.control) gets the EVs
crossing a failed link as DENIED, and UNKNOWN again once the link is clean: no controller is involved.
"""

from __future__ import annotations

import argparse
import json
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
from controller.model.sids import SidPlan
from controller.model.topology import load
from endpoint.clustermap import Link, denied_evs, link_kind, localize, loop_probes
from endpoint.control import ControlError, request
from endpoint.wire import encap
from mininet_labs.frames import ETH_IPV6, mac_bytes

LOOP_PORT = 9791
LOOP_MAGIC = b"MRCL"
LOOP_FMT = "!4sHIQ"  # magic, loop index, round, send time (ns)
LOOP_SIZE = struct.calcsize(LOOP_FMT)
WRITE_EVERY = 0.5  # seconds between two writes of the state file without a change (its round figures)


def _udp6_checksum(src: bytes, dst: bytes, udp: bytes) -> int:
    data = src + dst + struct.pack("!IxxxB", len(udp), 17) + udp
    if len(data) % 2:
        data += b"\x00"
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return (~total & 0xFFFF) or 0xFFFF


def loop_frame(smac: str, dmac: str, addr: str, carrier: str, index: int, round_: int, tx_ns: int) -> bytes:
    """Ethernet / outer IPv6 to `carrier` / IPv6 addr -> addr / UDP LOOP_PORT / the loop header."""
    a = socket.inet_pton(socket.AF_INET6, addr)
    body = struct.pack(LOOP_FMT, LOOP_MAGIC, index, round_ & 0xFFFFFFFF, tx_ns)
    udp = struct.pack("!HHHH", LOOP_PORT, LOOP_PORT, 8 + len(body), 0) + body
    udp = udp[:6] + struct.pack("!H", _udp6_checksum(a, a, udp)) + udp[8:]
    inner = mac_bytes(dmac) + mac_bytes(smac) + struct.pack("!H", ETH_IPV6) \
        + struct.pack("!IHBB", 6 << 28, len(udp), 17, 64) + a + a + udp
    return encap(smac, dmac, addr, carrier, inner)


def parse_loop(frame: bytes) -> tuple[int, int, int] | None:
    """(loop index, round, send time) of a loop back at its host (decapsulated); None for anything else."""
    off = 14
    if len(frame) < off + 40 + 8 + LOOP_SIZE or struct.unpack_from("!H", frame, 12)[0] != ETH_IPV6:
        return None
    if frame[off + 6] != 17 or struct.unpack_from("!H", frame, off + 40 + 2)[0] != LOOP_PORT:
        return None
    magic, index, round_, tx = struct.unpack_from(LOOP_FMT, frame, off + 48)
    return (index, round_, tx) if magic == LOOP_MAGIC else None


@dataclass
class Hysteresis:
    """The reported failed links: in after `confirm` rounds in a row localized, out after `confirm` rounds without."""

    confirm: int = 2
    reported: set[Link] = field(default_factory=set)
    _seen: dict[Link, int] = field(default_factory=dict)
    _clean: dict[Link, int] = field(default_factory=dict)

    def update(self, failed: frozenset[Link]) -> bool:
        """Take one round's localization; True when the reported set changed."""
        before = set(self.reported)
        for link in failed:
            self._seen[link] = self._seen.get(link, 0) + 1
            self._clean.pop(link, None)
            if self._seen[link] >= self.confirm:
                self.reported.add(link)
        for link in set(self._seen) - failed:
            self._seen.pop(link)
        for link in self.reported - failed:
            self._clean[link] = self._clean.get(link, 0) + 1
            if self._clean[link] >= self.confirm:
                self.reported.discard(link)
                self._clean.pop(link)
        return self.reported != before


@dataclass
class AgentSpec:
    topology: str
    host: str
    state: str
    evs: str | None = None  # the EV export (fabricctl evs --export): which EVs cross a failed link
    control: list[str] = field(default_factory=list)
    period: float = 0.02
    timeout: float = 0.05  # a loop not back this long after it was sent is lost
    confirm: int = 2
    seconds: float = 0.0  # 0: until SIGTERM/SIGINT
    events: str | None = None
    cycles: bool = True


def push_denials(paths: Sequence[str], before: dict[str, list[int]], now: dict[str, list[int]]) -> list[str]:
    """Deny at each sender's control socket the EVs denied `now` and not `before`, and set those denied before
    and no more back to UNKNOWN; what went wrong, one line each (a destination a sender does not send to is
    not an error: its EVs are nothing to map out there)."""
    errors = []
    for path in paths:
        for dst in sorted(set(now) | set(before)):
            add = sorted(set(now.get(dst, [])) - set(before.get(dst, [])))
            back = sorted(set(before.get(dst, [])) - set(now.get(dst, [])))
            reqs = ([{"op": "deny", "dst": dst, "evs": add}] if add else []) + \
                ([{"op": "set_state", "dst": dst, "evs": back, "state": "unknown"}] if back else [])
            for req in reqs:
                try:
                    answer = request(path, req)
                except ControlError as e:
                    errors.append(str(e))
                    continue
                if "error" in answer and "has no EVs towards" not in str(answer["error"]):
                    errors.append(f"{path}: {answer['error']}")
    return errors


def _percentiles(xs: list[float]) -> dict[str, float | None]:
    if not xs:
        return {"p50": None, "p99": None, "max": None}
    s = sorted(xs)
    return {"p50": round(s[len(s) // 2], 3), "p99": round(s[min(len(s) - 1, int(len(s) * 0.99))], 3),
            "max": round(s[-1], 3)}


def run(spec: AgentSpec) -> dict[str, Any]:
    from endpoint.host import _Nics
    from controller.plan.evs import load_export

    topo = load(spec.topology)
    sids = SidPlan.from_block(topo.usid_block) if topo.usid_block else SidPlan()
    probes = loop_probes(topo, sids, spec.host, cycles=spec.cycles)
    evs = load_export(json.loads(Path(spec.evs).read_text()), spec.host) if spec.evs else {}
    nics = _Nics(spec.topology, spec.host)
    stop = False

    def on_signal(_signum: int, _frame: Any) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    sink = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)  # no ICMP port unreachable for the loops
    try:
        sink.bind(("::", LOOP_PORT))
    except OSError:  # the port is bound already (another agent on this host): any bound socket keeps ICMP errors away
        pass
    frames = {}  # loop index -> (the loop, the NIC it leaves from)
    for i, p in enumerate(probes):
        _, nic = nics.by_plane(p.plane)
        frames[i] = (p, nic)
    hyst = Hysteresis(spec.confirm)
    denied: dict[str, list[int]] = {}
    rtts_ms: list[float] = []
    round_ms: list[float] = []
    late = overrun = rounds = sent_total = lost_total = 0
    errors: list[str] = []
    changes: list[dict[str, Any]] = []
    t0 = time.monotonic()
    next_at = t0

    def report(final: bool = False) -> dict[str, Any]:
        elapsed = time.monotonic() - t0
        doc = {"host": spec.host, "final": final, "rounds": rounds, "loops": len(probes),
               "period_ms": round(spec.period * 1e3, 3), "timeout_ms": round(spec.timeout * 1e3, 3),
               "achieved_period_ms": round(elapsed / rounds * 1e3, 3) if rounds else None,
               "sent": sent_total, "lost": lost_total, "late": late, "overruns": overrun,
               "rtt_ms": _percentiles(rtts_ms), "round_ms": _percentiles(round_ms),
               "failed": [{"from": a, "to": b, "kind": link_kind(topo, (a, b))} for a, b in sorted(hyst.reported)],
               "denied": denied, "changes": changes, "errors": errors[-20:]}
        write_atomic(Path(spec.state), json.dumps(doc, indent=1) + "\n")
        return doc

    report()
    written = time.monotonic()
    try:
        while not stop and (not spec.seconds or time.monotonic() - t0 < spec.seconds):
            now = time.monotonic()
            if now < next_at:
                time.sleep(min(next_at - now, 0.05))
                continue
            up = nics.ports()
            start_ns = time.monotonic_ns()
            pending: dict[int, int] = {}
            for i, (p, nic) in frames.items():
                if not up >> p.plane & 1:
                    continue  # its NIC is down: the loop says nothing this round
                sock, _ = nics.by_plane(p.plane)
                tx = time.monotonic_ns()
                try:
                    sock.send(loop_frame(nic.mac, nic.gateway_mac, nic.v6, p.carrier, i, rounds, tx))
                except OSError:
                    continue
                pending[i] = tx
            sent_total += len(pending)
            answered = {frames[i][0].name: False for i in pending}
            deadline = start_ns + int(spec.timeout * 1e9)
            while pending:
                left = (deadline - time.monotonic_ns()) / 1e9
                if left <= 0:
                    break
                for frame in nics.frames(left):
                    got = parse_loop(frame)
                    if got is None:
                        continue
                    i, r, tx = got
                    if r != rounds & 0xFFFFFFFF or pending.pop(i, None) is None:
                        late += 1
                        continue
                    answered[frames[i][0].name] = True
                    rtts_ms.append((time.monotonic_ns() - tx) / 1e6)
            lost_total += len(pending)
            round_ms.append((time.monotonic_ns() - start_ns) / 1e6)
            got_loc = localize(probes, answered)
            if hyst.update(got_loc.failed):
                new = denied_evs(spec.host, evs, hyst.reported)
                errors += push_denials(spec.control, denied, new)
                denied = new
                now = time.monotonic()  # t_s from the agent's start; monotonic_s: the host's clock, for benches
                change = {"t_s": round(now - t0, 4), "monotonic_s": round(now, 6), "round": rounds,
                          "failed": [list(link) for link in sorted(hyst.reported)], "denied": denied}
                changes.append(change)
                if spec.events:
                    with open(spec.events, "a") as f:
                        f.write(json.dumps({"host": spec.host, **change}) + "\n")
                report()
                written = time.monotonic()
            rounds += 1
            if time.monotonic() - written >= WRITE_EVERY:
                report()
                written = time.monotonic()
            next_at += spec.period
            if next_at < time.monotonic():
                overrun += 1
                next_at = time.monotonic()
    finally:
        nics.close()
        sink.close()
    return report(final=True)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python3 -m endpoint loops", description="a host's loop-probing agent")
    p.add_argument("--topology", required=True)
    p.add_argument("--host", required=True)
    p.add_argument("--state", required=True, help="the host's report, rewritten on every change")
    p.add_argument("--evs", help="the EV export: which EVs cross a failed link")
    p.add_argument("--control", action="append", default=[], help="a sender's control socket to deny EVs at")
    p.add_argument("--period-ms", type=float, default=20.0)
    p.add_argument("--timeout-ms", type=float, default=50.0)
    p.add_argument("--confirm", type=int, default=2)
    p.add_argument("--seconds", type=float, default=0.0)
    p.add_argument("--events")
    p.add_argument("--no-cycles", action="store_true", help="nic and spine loops only (no direction)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    a = _parser().parse_args(argv)
    if a.period_ms <= 0 or a.timeout_ms <= 0 or a.confirm < 1:
        print("--period-ms and --timeout-ms must be above 0, --confirm at least 1", file=sys.stderr)
        return 2
    try:
        run(AgentSpec(a.topology, a.host, a.state, a.evs, a.control, a.period_ms / 1e3, a.timeout_ms / 1e3,
                      a.confirm, a.seconds, a.events, not a.no_cycles))
    except (ValueError, OSError) as e:
        print(f"loops: {e}", file=sys.stderr)
        return 1
    return 0
