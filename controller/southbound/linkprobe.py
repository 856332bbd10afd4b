"""Link probes of the kernel data plane's switches: one UDP socket per switch namespace, a datagram out of a port to
the far port's link-local address, read at the far switch's socket (the arrival port from the sender's scope id).

    sock = ProbeSocket(topo.switch("p0-t0-0"))   # bound in its namespace; ports resolved there
    err = sock.send(3, "fe80::..", data)         # None, or the socket's error as one line
    for a in sock.read():                        # (switch, port, payload, received) as this switch received them
        ...

The socket is opened inside the namespace (pyroute2 pushns/popns, as linkwatch.py) and stays there; it is
non-blocking, read whenever the prober drains its arrivals. The payload's format (`encode`/`decode`) is here too: it is what
crosses the link. A probe is one way: a drop in either direction of a link fails that direction's probes only.
"""

from __future__ import annotations

import errno
import os
import socket
import struct
import sys
import time
from dataclasses import dataclass

from pyroute2 import netns as pnetns

from controller.southbound.base import DataPlaneError
from controller.model.topology import Switch, Topology
from controller.southbound.kroutes import intf

PROBE_PORT = 47911  # UDP, on every switch's ports' link-local addresses
MAGIC = b"SFKP"
_FMT = struct.Struct("!4sIIBxxxIQ")  # magic, run nonce, link id, direction, seq, sent (monotonic ns)
PAYLOAD_LEN = _FMT.size
SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)  # Linux; Python names it from 3.12 on
HOP_LIMIT = 255  # sent with it; a datagram that crossed a router arrives lower and is not a probe (RFC 5082)


class LinkProbeError(DataPlaneError):
    """A switch's namespace could not be probed from (one line naming it)."""


@dataclass(frozen=True, slots=True)
class ProbeId:
    """What a probe carries: the controller run's nonce, the link direction and its sequence number."""

    nonce: int
    link_id: int
    direction: int
    seq: int
    sent_ns: int


def encode(p: ProbeId) -> bytes:
    return _FMT.pack(MAGIC, p.nonce, p.link_id, p.direction, p.seq, p.sent_ns)


def decode(data: bytes) -> ProbeId | None:
    """The probe a datagram carries; None for anything else (wrong length or magic)."""
    if len(data) != PAYLOAD_LEN:
        return None
    magic, nonce, link_id, direction, seq, sent_ns = _FMT.unpack(data)
    return ProbeId(nonce, link_id, direction, seq, sent_ns) if magic == MAGIC else None


@dataclass(frozen=True, slots=True)
class Arrival:
    """A datagram a switch's probe socket received on one of its ports."""

    switch: str
    port: int
    payload: bytes
    received_ns: int = 0  # monotonic, when the kernel took it in


def _ports(sw: Switch) -> list[int]:
    return [*sw.uplinks, *sw.downlinks]


def enter(netns: str) -> None:
    """Move this thread into an existing namespace, the one it was in saved (pnetns.popns returns to it); OSError,
    and nothing moved, when there is none of that name (pyroute2's pushns would create it)."""
    pnetns.pushns()
    try:
        pnetns.setns(netns, flags=0)
    except BaseException:
        pnetns.popns()
        raise


def _open_in(sw: Switch) -> tuple[socket.socket, dict[int, int]]:
    """A UDP socket bound inside the switch's namespace and the ifindex of each fabric port there."""
    assert sw.netns is not None
    try:
        enter(sw.netns)
    except OSError as e:
        raise LinkProbeError(f"{sw.name}: cannot open namespace {sw.netns}: {e.strerror or e}") from None
    try:
        sock = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_UNICAST_HOPS, HOP_LIMIT)
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_RECVHOPLIMIT, 1)
            sock.bind(("::", PROBE_PORT))
            sock.setblocking(False)
            index: dict[int, int] = {}
            for port in _ports(sw):
                try:
                    index[port] = socket.if_nametoindex(intf(port))
                except OSError:
                    raise LinkProbeError(f"{sw.name}: namespace {sw.netns} has no interface {intf(port)}") from None
        except OSError as e:
            sock.close()
            why = " (another controller probes this switch)" if e.errno == errno.EADDRINUSE else ""
            raise LinkProbeError(f"{sw.name}: cannot open a probe socket (UDP {PROBE_PORT}) in namespace "
                                 f"{sw.netns}: {e.strerror or e}{why}") from None
        except BaseException:
            sock.close()
            raise
    finally:
        pnetns.popns()
    return sock, index


class ProbeSocket:
    """One switch's probe socket, bound in its namespace to UDP PROBE_PORT without SO_REUSEADDR: a second controller
    probing the same switch cannot bind (EADDRINUSE) and so cannot take this one's datagrams."""

    def __init__(self, sw: Switch) -> None:
        self.switch = sw.name
        self.sock, self.index = _open_in(sw)
        self.port_of = {i: p for p, i in self.index.items()}
        self.strays = 0  # datagrams on the probe port that were not one hop from a fabric port's peer

    def fileno(self) -> int:
        return self.sock.fileno()

    def send(self, port: int, addr: str, payload: bytes) -> str | None:
        """Send out of `port` to the link-local `addr`; None, or the error as one line (the probe is then lost)."""
        try:
            self.sock.sendto(payload, (addr, PROBE_PORT, 0, self.index[port]))
        except BlockingIOError:
            return "the socket's send buffer is full"
        except OSError as e:
            return f"{e.strerror or e} ({errno.errorcode.get(e.errno or 0, e.errno)})"
        return None

    def read(self) -> list[Arrival]:
        """Every datagram waiting that came one hop in on a fabric port, with the kernel's receive time (monotonic)."""
        out: list[Arrival] = []
        space = socket.CMSG_SPACE(4) + socket.CMSG_SPACE(16)
        while True:
            try:
                data, anc, _flags, src = self.sock.recvmsg(64, space)
            except (BlockingIOError, InterruptedError):
                break
            except OSError:  # an error queued for an earlier send: what is left is read at the next call
                break
            hops, stamp = None, None
            for lvl, typ, d in anc:
                if lvl == socket.IPPROTO_IPV6 and typ == socket.IPV6_HOPLIMIT:
                    hops = int.from_bytes(d[:4], sys.byteorder)
                elif lvl == socket.SOL_SOCKET and typ == SO_TIMESTAMPNS and len(d) >= 16:
                    sec, nsec = struct.unpack("@qq", d[:16])
                    stamp = sec * 1_000_000_000 + nsec
            port = self.port_of.get(src[3]) if len(src) >= 4 else None
            if port is None or hops != HOP_LIMIT:
                self.strays += 1
                continue
            now = time.monotonic_ns()
            # the kernel stamps arrivals in wall-clock time: moved onto the monotonic clock by their age now
            received = now if stamp is None else now - max(0, time.time_ns() - stamp)
            out.append(Arrival(self.switch, port, data, received))
        return out

    def close(self) -> None:
        self.sock.close()


def new_nonce() -> int:
    """A run's nonce: another controller's (or an earlier run's) probes are not ours."""
    return int.from_bytes(os.urandom(4), "big")
