"""The lab's port status: the kernel's link events (netlink, pyroute2) on the switches' root-namespace
ports, sent as carrier up/down to a controller's port-status socket (controller/service/portstatus.py)
the moment the kernel reports them, as a real switch reports oper-status."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path

from controller.service.portstatus import PortStatus, send
from controller.model.topology import Topology
from mininet_labs.topo import port_intf


def port_map(model: Topology, tag: str = "") -> dict[str, tuple[str, int]]:
    """Interface name -> (switch, port) for every switch port of a lab of `model`."""
    out: dict[str, tuple[str, int]] = {}
    for s in model.switches:
        for p in (*s.host_ports, *s.uplinks, *s.downlinks):
            out[port_intf(s, p, tag)] = (s.name, p)
    return out


def carrier_of(msg: object) -> tuple[str, bool] | None:
    """(interface, carrier) of an RTM_NEWLINK message: IFLA_CARRIER, else IFF_LOWER_UP in its flags."""
    get = getattr(msg, "get_attr", None) or getattr(msg, "get", None)
    if get is None:
        return None
    name = get("IFLA_IFNAME")
    if not name:
        return None
    carrier = get("IFLA_CARRIER")
    if carrier is None:
        flags = msg["flags"] if hasattr(msg, "__getitem__") else 0  # type: ignore[index]
        return name, bool(flags & 0x10000)  # IFF_LOWER_UP
    return name, bool(carrier) and bool(msg["flags"] & 0x1)  # type: ignore[index]  # and IFF_UP


RTMGRP_LINK = 1


def sys_carrier(intf: str) -> bool | None:
    """An interface's carrier from /sys (False when it is down; None when it does not exist)."""
    try:
        return Path("/sys/class/net", intf, "carrier").read_text().strip() == "1"
    except FileNotFoundError:
        return None
    except OSError:  # EINVAL: the interface is administratively down
        return False


class CarrierWatcher:
    """Watches the lab's switch ports' carrier (a netlink socket on RTMGRP_LINK, messages parsed by
    pyroute2) and sends every change to the controller's socket (`to`), or to `on_change` when given.
    Starts from the carrier each port has now (/sys)."""

    def __init__(self, model: Topology, tag: str, to: Path | None = None,
                 on_change: Callable[[PortStatus], None] | None = None) -> None:
        from pyroute2.netlink.rtnl.marshal import MarshalRtnl

        self.ports = port_map(model, tag)
        self.to, self.on_change = to, on_change
        self.sent = 0
        self._marshal = MarshalRtnl()
        self._sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, socket.NETLINK_ROUTE)
        self._sock.bind((0, RTMGRP_LINK))  # bound before the initial read: no change falls between
        self._sock.settimeout(0.2)
        self._carrier: dict[str, bool] = {}
        for intf in self.ports:
            c = sys_carrier(intf)
            if c is not None:
                self._carrier[intf] = c
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="carrier-watch", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._sock.close()

    def run_forever(self) -> None:
        """Watch in this thread until stop() (or a signal that raises)."""
        self._run()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                data = self._sock.recv(1 << 16)
            except TimeoutError:
                continue
            except OSError:
                return
            now = time.monotonic_ns()
            for msg in self._marshal.parse(data):
                event = msg.get("event")
                if event not in ("RTM_NEWLINK", "RTM_DELLINK"):
                    continue
                got = carrier_of(msg)
                if got is None or got[0] not in self.ports:
                    continue
                intf, carrier = got
                if event == "RTM_DELLINK":
                    carrier = False
                if self._carrier.get(intf) == carrier:
                    continue
                self._carrier[intf] = carrier
                switch, port = self.ports[intf]
                self.emit(PortStatus(switch, port, carrier, now))

    def emit(self, status: PortStatus) -> None:
        self.sent += 1
        if self.on_change is not None:
            self.on_change(status)
        if self.to is not None:
            send(self.to, status)
