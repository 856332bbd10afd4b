"""A lab host: commands run inside its namespace, its NICs, and the script that addresses them."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any


from mininet_labs import traffic as tr
from mininet_labs.labstate import ENV_MARK, LabError
from mininet_labs.frames import GATEWAY_V4, GATEWAY_V6


@dataclass
class LabHost:
    """A lab host: its shell's PID (its network namespace) and NICs; commands run in its namespace."""

    name: str
    pid: int
    nics: tuple[tr.HostNic, ...]
    lab_dir: str
    node: Any = None  # the Mininet Host, in the process that runs the lab (None when attached)

    def argv(self, argv: Sequence[str]) -> list[str]:
        return ["mnexec", "-a", str(self.pid), *argv]

    def popen(self, argv: Sequence[str], **kwargs: Any) -> subprocess.Popen[Any]:
        """Start a command in this host's namespace (Popen keyword arguments pass through); it
        carries the lab's mark, so cleanup stops it with the lab."""
        kwargs["env"] = {**(kwargs.get("env") or os.environ), ENV_MARK: self.lab_dir}
        return subprocess.Popen(self.argv(argv), **kwargs)

    def run(self, argv: Sequence[str], check: bool = True, timeout: float | None = 60) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(self.argv(argv), capture_output=True, text=True, timeout=timeout,
                              env={**os.environ, ENV_MARK: self.lab_dir})
        if check and proc.returncode != 0:
            raise LabError(f"{self.name}: {' '.join(argv)}: exit {proc.returncode}: "
                           f"{(proc.stderr or proc.stdout).strip()[-500:]}")
        return proc

    def nic(self, plane: int) -> tr.HostNic:
        for n in self.nics:
            if n.plane == plane:
                return n
        raise LabError(f"{self.name} has no NIC in plane {plane} (planes: {', '.join(str(n.plane) for n in self.nics)})")


def host_script(nics: Iterable[tr.HostNic]) -> str:
    """Shell commands that give a host its plane addresses: IPv6 on, DAD off, the address without an
    on-link prefix route, and the plane's prefix via a fake gateway whose neighbour entry is the T0's
    MAC (the switch never answers ND); the same for IPv4 with a static ARP entry."""
    lines = ["sysctl -qw net.ipv6.conf.all.disable_ipv6=0 net.ipv6.conf.default.disable_ipv6=0",
             "sysctl -qw net.ipv6.conf.all.accept_dad=0 net.ipv6.conf.default.accept_dad=0"]
    for n in nics:
        i = n.intf
        lines += [
            f"sysctl -qw net.ipv6.conf.{i}.disable_ipv6=0 net.ipv6.conf.{i}.accept_dad=0 "
            f"net.ipv6.conf.{i}.dad_transmits=0 net.ipv6.conf.{i}.router_solicitations=0 net.ipv6.conf.{i}.accept_ra=0 "
            f"net.ipv6.conf.{i}.keep_addr_on_down=1",  # a NIC taken down and up (cross-plane) keeps answering ND
            f"ip link set {i} address {n.mac} up",
            f"ip -6 addr replace {n.v6}/64 dev {i} nodad noprefixroute",
            f"ip -6 neigh replace {GATEWAY_V6} lladdr {n.gateway_mac} dev {i} nud permanent",
            f"ip -6 route replace {n.v6_prefix} via {GATEWAY_V6} dev {i}",
            f"ip addr replace {n.v4}/32 dev {i}",
            f"ip neigh replace {GATEWAY_V4} lladdr {n.gateway_mac} dev {i} nud permanent",
            f"ip route replace {n.v4_prefix} via {GATEWAY_V4} dev {i} onlink",
            f"ethtool -K {i} tx off rx off tso off gso off gro off >/dev/null 2>&1 || true",
        ]
    return "\n".join(lines)
