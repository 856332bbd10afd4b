"""The carrier of the kernel data plane's switch ports: one netlink socket per switch namespace on the link group
(RTMGRP_LINK), its messages parsed by pyroute2, as a real switch reports a port's oper-status.

    watch = LinkWatch(topo)              # every switch with a namespace; the carrier each port has now
    for change in watch.poll(0.2):       # (switch, port, carrier) as the kernel reports it
        ...

Ports are the topology's (`eth<port>` in the switch's namespace, controller.southbound.kroutes.intf); a port
administratively down or whose peer is down has no carrier.
"""

from __future__ import annotations

import select
import socket
from dataclasses import dataclass
from typing import Any

from pyroute2 import IPRoute
from pyroute2 import netns as pnetns
from pyroute2.netlink.rtnl.marshal import MarshalRtnl

from controller.southbound.linkprobe import enter
from controller.southbound.base import DataPlaneError
from controller.model.topology import Switch, Topology

RTMGRP_LINK = 1
IFF_UP, IFF_LOWER_UP = 0x1, 0x10000


class LinkWatchError(DataPlaneError):
    """A switch's namespace could not be watched (one line naming it)."""


@dataclass(frozen=True, slots=True)
class CarrierChange:
    """A switch port's carrier as the kernel reported it."""

    switch: str
    port: int
    up: bool


def carrier_of(msg: Any) -> tuple[str, bool] | None:
    """(interface, carrier) of an RTM_NEWLINK message: IFLA_CARRIER and IFF_UP, else IFF_LOWER_UP."""
    name = msg.get_attr("IFLA_IFNAME")
    if not name:
        return None
    carrier = msg.get_attr("IFLA_CARRIER")
    if carrier is None:
        return name, bool(msg["flags"] & IFF_LOWER_UP)
    return name, bool(carrier) and bool(msg["flags"] & IFF_UP)


def _ports(sw: Switch) -> dict[str, int]:
    return {f"eth{p}": p for p in (*sw.host_ports, *sw.uplinks, *sw.downlinks)}


def _socket_in(netns: str) -> socket.socket:
    """A netlink route socket opened inside `netns` (it stays there after this thread returns to its own)."""
    enter(netns)  # an existing one only
    try:
        sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, socket.NETLINK_ROUTE)
    finally:
        pnetns.popns()
    return sock


class LinkWatch:
    """The ports' carrier of every switch of `topo` that has a namespace, kept current by `poll`."""

    def __init__(self, topo: Topology) -> None:
        self.switches = [s for s in topo.switches if s.netns is not None]
        self._marshal = MarshalRtnl()
        self._socks: dict[int, tuple[socket.socket, Switch]] = {}
        self.carrier: dict[tuple[str, int], bool] = {}
        try:
            for sw in self.switches:
                assert sw.netns is not None
                try:
                    sock = _socket_in(sw.netns)
                except OSError as e:
                    raise LinkWatchError(f"{sw.name}: cannot open namespace {sw.netns}: {e.strerror or e}") from None
                sock.bind((0, RTMGRP_LINK))  # bound before the first read: no change falls between
                sock.setblocking(False)
                self._socks[sock.fileno()] = (sock, sw)
                self._read_all(sw)
        except BaseException:
            self.close()
            raise

    def _read_all(self, sw: Switch) -> None:
        ports = _ports(sw)
        try:
            with IPRoute(netns=sw.netns, flags=0) as ipr:
                links = list(ipr.get_links())
        except OSError as e:
            raise LinkWatchError(f"{sw.name}: cannot read the links of namespace {sw.netns}: {e.strerror or e}") from None
        for link in links:
            got = carrier_of(link)
            if got is not None and got[0] in ports:
                self.carrier[sw.name, ports[got[0]]] = got[1]
        missing = sorted(set(ports.values()) - {p for (n, p) in self.carrier if n == sw.name})
        if missing:
            raise LinkWatchError(f"{sw.name}: namespace {sw.netns} has no interface eth{missing[0]}")

    def poll(self, timeout: float) -> list[CarrierChange]:
        """Wait up to `timeout` seconds for link messages; the carrier changes they bring, in order."""
        ready, _, _ = select.select(self.fds(), [], [], timeout)
        return self.take(ready)

    def fds(self) -> list[int]:
        """The sockets to select on (with others, in the caller's loop); hand the ready ones to `take`."""
        return list(self._socks)

    def take(self, ready: list[int]) -> list[CarrierChange]:
        """The carrier changes the ready sockets of `fds()` bring (others are ignored)."""
        out: list[CarrierChange] = []
        for fd in ready:
            if fd not in self._socks:
                continue
            sock, sw = self._socks[fd]
            ports = _ports(sw)
            while True:
                try:
                    data = sock.recv(1 << 16)
                except BlockingIOError:
                    break
                for msg in self._marshal.parse(data):
                    got = carrier_of(msg) if msg.get("event") == "RTM_NEWLINK" else None
                    if got is None or got[0] not in ports:
                        continue
                    key = (sw.name, ports[got[0]])
                    if self.carrier.get(key) != got[1]:
                        self.carrier[key] = got[1]
                        out.append(CarrierChange(sw.name, key[1], got[1]))
        return out

    def close(self) -> None:
        for sock, _ in self._socks.values():
            sock.close()
        self._socks.clear()

    def __enter__(self) -> LinkWatch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
