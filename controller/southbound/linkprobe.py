"""Link probes of the kernel data plane's switches: one UDP socket per switch namespace, a datagram out of a port to
the far port's link-local address, read at the far switch's socket (the arrival port from the sender's scope id).

    socks = ProbeSockets(topo)                         # every switch with a namespace; ports resolved there
    err = socks.send("p0-t0-0", 3, "fe80::..", data)   # None, or the socket's error as one line
    for a in socks.read(ready_fds):                    # (switch, port, payload) as each far switch received it
        ...

The sockets are opened inside each namespace (pyroute2 pushns/popns, as linkwatch.py) and stay there; they are
non-blocking, read in the caller's select loop. The payload's format (`encode`/`decode`) is here too: it is what
crosses the link. A probe is one way: a drop in either direction of a link fails that direction's probes only.
"""

from __future__ import annotations

import errno
import os
import socket
import struct
import sys
from dataclasses import dataclass

from pyroute2 import netns as pnetns

from controller.model.topology import Switch, Topology
from controller.southbound.kroutes import intf

PROBE_PORT = 47911  # UDP, on every switch's ports' link-local addresses
MAGIC = b"SFKP"
_FMT = struct.Struct("!4sIIBxxxIQ")  # magic, run nonce, link id, direction, seq, sent (monotonic ns)
PAYLOAD_LEN = _FMT.size
HOP_LIMIT = 255  # sent with it; a datagram that crossed a router arrives lower and is not a probe (RFC 5082)


class LinkProbeError(RuntimeError):
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


def _ports(sw: Switch) -> list[int]:
    return [*sw.uplinks, *sw.downlinks]


def _open_in(sw: Switch) -> tuple[socket.socket, dict[int, int]]:
    """A UDP socket bound inside the switch's namespace and the ifindex of each fabric port there."""
    assert sw.netns is not None
    try:
        pnetns.pushns(sw.netns)
    except OSError as e:
        raise LinkProbeError(f"{sw.name}: cannot open namespace {sw.netns}: {e.strerror or e}") from None
    try:
        sock = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
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
            raise LinkProbeError(f"{sw.name}: cannot open a probe socket (UDP {PROBE_PORT}) in namespace "
                                 f"{sw.netns}: {e.strerror or e}") from None
        except BaseException:
            sock.close()
            raise
    finally:
        pnetns.popns()
    return sock, index


class ProbeSockets:
    """One probe socket per switch of `topo` that has a namespace."""

    def __init__(self, topo: Topology) -> None:
        self._by_fd: dict[int, tuple[socket.socket, Switch, dict[int, int]]] = {}
        self._by_name: dict[str, tuple[socket.socket, dict[int, int]]] = {}
        try:
            for sw in topo.switches:
                if sw.netns is None:
                    continue
                sock, index = _open_in(sw)
                self._by_fd[sock.fileno()] = (sock, sw, {i: p for p, i in index.items()})
                self._by_name[sw.name] = (sock, index)
        except BaseException:
            self.close()
            raise
        self.strays = 0  # datagrams on the probe port that were not one hop from a fabric port's peer

    def fds(self) -> list[int]:
        return list(self._by_fd)

    def send(self, switch: str, port: int, addr: str, payload: bytes) -> str | None:
        """Send out of `port` to the link-local `addr`; None, or the error as one line (the probe is then lost)."""
        sock, index = self._by_name[switch]
        try:
            sock.sendto(payload, (addr, PROBE_PORT, 0, index[port]))
        except BlockingIOError:
            return "the socket's send buffer is full"
        except OSError as e:
            return f"{e.strerror or e} ({errno.errorcode.get(e.errno or 0, e.errno)})"
        return None

    def read(self, ready: list[int]) -> list[Arrival]:
        """Every datagram waiting on the ready sockets that came one hop in on a fabric port."""
        out: list[Arrival] = []
        space = socket.CMSG_SPACE(4)
        for fd in ready:
            got = self._by_fd.get(fd)
            if got is None:
                continue
            sock, sw, port_of = got
            while True:
                try:
                    data, anc, _flags, src = sock.recvmsg(64, space)
                except (BlockingIOError, InterruptedError):
                    break
                except OSError:  # an error queued for an earlier send: what is left is read at the next select
                    break
                hops = next((int.from_bytes(d[:4], sys.byteorder) for lvl, typ, d in anc
                             if lvl == socket.IPPROTO_IPV6 and typ == socket.IPV6_HOPLIMIT), None)
                port = port_of.get(src[3]) if len(src) >= 4 else None
                if port is None or hops != HOP_LIMIT:
                    self.strays += 1
                    continue
                out.append(Arrival(sw.name, port, data))
        return out

    def close(self) -> None:
        for sock, _, _ in self._by_fd.values():
            sock.close()
        self._by_fd.clear()
        self._by_name.clear()

    def __enter__(self) -> ProbeSockets:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def new_nonce() -> int:
    """A run's nonce: another controller's (or an earlier run's) probes are not ours."""
    return int.from_bytes(os.urandom(4), "big")
