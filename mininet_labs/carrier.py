"""The lab's port status: the kernel's link events on the switches' ports, sent as carrier up/down to a controller's
port-status socket (controller/service/portstatus.py) the moment the kernel reports them, as a real switch reports
oper-status.

One carrier source per data plane, one interface (`CarrierSource`: `poll`, or `fds`/`take` in a caller's select):
bmv2 switch ports live in the root namespace (`PortWatch`), kernel switch ports in each switch's namespace
(controller.southbound.linkwatch.LinkWatch). Both read RTM_NEWLINK with linkwatch's parser. `CarrierWatcher` runs
either in a thread and sends what it reports.
"""

from __future__ import annotations

import select
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from pyroute2.netlink.rtnl.marshal import MarshalRtnl

from controller.model.topology import Topology
from controller.periodic import Periodic
from controller.service.portstatus import PortStatus, send
from controller.southbound.linkwatch import RTMGRP_LINK, CarrierChange, carrier_of
from mininet_labs.topo import port_intf


class CarrierSource(Protocol):
    """The ports' carrier of a lab's switches, kept current by `poll` (or `fds` + `take`)."""

    carrier: dict[tuple[str, int], bool]  # (switch, port) -> carrier, as last reported

    def fds(self) -> list[int]: ...

    def take(self, ready: list[int]) -> list[CarrierChange]: ...

    def poll(self, timeout: float) -> list[CarrierChange]: ...

    def close(self) -> None: ...


def port_map(model: Topology, tag: str = "") -> dict[str, tuple[str, int]]:
    """Interface name -> (switch, port) for every switch port of a bmv2 lab of `model`."""
    out: dict[str, tuple[str, int]] = {}
    for s in model.switches:
        for p in (*s.host_ports, *s.uplinks, *s.downlinks):
            out[port_intf(s, p, tag)] = (s.name, p)
    return out


def sys_carrier(intf: str) -> bool | None:
    """An interface's carrier from /sys (False when it is down; None when it does not exist)."""
    try:
        return Path("/sys/class/net", intf, "carrier").read_text().strip() == "1"
    except FileNotFoundError:
        return None
    except OSError:  # EINVAL: the interface is administratively down
        return False


class PortWatch:
    """The carrier of a bmv2 lab's switch ports (root-namespace interfaces named with the lab's tag): one netlink
    socket on RTMGRP_LINK, bound before the carrier each port has now is read from /sys."""

    def __init__(self, model: Topology, tag: str = "") -> None:
        self.ports = port_map(model, tag)
        self._marshal = MarshalRtnl()
        self._sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, socket.NETLINK_ROUTE)
        self._sock.bind((0, RTMGRP_LINK))  # bound before the initial read: no change falls between
        self._sock.setblocking(False)
        self.carrier: dict[tuple[str, int], bool] = {}
        for intf, key in self.ports.items():
            c = sys_carrier(intf)
            if c is not None:
                self.carrier[key] = c

    def fds(self) -> list[int]:
        return [self._sock.fileno()] if self._sock.fileno() >= 0 else []

    def take(self, ready: list[int]) -> list[CarrierChange]:
        if self._sock.fileno() not in ready:
            return []
        out: list[CarrierChange] = []
        while True:
            try:
                data = self._sock.recv(1 << 16)
            except BlockingIOError:
                return out
            for msg in self._marshal.parse(data):
                event = msg.get("event")
                got = carrier_of(msg) if event in ("RTM_NEWLINK", "RTM_DELLINK") else None
                if got is None or got[0] not in self.ports:
                    continue
                key = self.ports[got[0]]
                up = got[1] and event == "RTM_NEWLINK"  # a port deleted has no carrier
                if self.carrier.get(key) != up:
                    self.carrier[key] = up
                    out.append(CarrierChange(key[0], key[1], up))

    def poll(self, timeout: float) -> list[CarrierChange]:
        ready, _, _ = select.select(self.fds(), [], [], timeout)
        return self.take(ready)

    def close(self) -> None:
        self._sock.close()


class CarrierWatcher:
    """Sends every carrier change a source reports to the controller's socket (`to`), or to `on_change` when
    given; in a thread of its own (`start`/`stop`) or in the caller's (`run_forever`)."""

    def __init__(self, source: CarrierSource, to: Path | None = None,
                 on_change: Callable[[PortStatus], None] | None = None) -> None:
        self.source, self.to, self.on_change = source, to, on_change
        self.sent = 0
        # OSError, ValueError: the source closed under the poll (stop() ran)
        self.loop = Periodic("carrier-watch", self._poll, ends_on=(OSError, ValueError))

    def start(self) -> None:
        self.loop.start()

    def stop(self) -> None:
        self.loop.stop()
        self.source.close()

    def run_forever(self) -> None:
        """Watch in this thread until `loop.stop()` (a signal handler's) or a signal that raises."""
        self.loop.run()

    def _poll(self) -> None:
        changes = self.source.poll(0.2)
        now = time.monotonic_ns()
        for c in changes:
            self.emit(PortStatus(c.switch, c.port, c.up, now))

    def emit(self, status: PortStatus) -> None:
        self.sent += 1
        if self.on_change is not None:
            self.on_change(status)
        if self.to is not None:
            send(self.to, status)
