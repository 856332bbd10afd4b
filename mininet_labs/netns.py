"""Network namespaces and veth pairs via iproute2, and raw packet sockets opened inside them."""

from __future__ import annotations

import ctypes
import os
import socket
import subprocess
import threading
from pathlib import Path
from typing import Callable, TypeVar

T = TypeVar("T")

CLONE_NEWNET = 0x40000000
ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4
NETNS_DIR = Path("/var/run/netns")


class NetnsError(RuntimeError):
    """An iproute2 command failed."""


def run(*args: str, ns: str | None = None, check: bool = True) -> subprocess.CompletedProcess:
    """Run a command (in namespace ns); on failure raise NetnsError with its stderr."""
    cmd = ["ip", "netns", "exec", ns, *args] if ns else list(args)
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise NetnsError(f"{' '.join(cmd)}: {proc.stderr.strip() or proc.stdout.strip()}")
    return proc


def can_create_netns() -> str | None:
    """None when namespaces can be made here, else why not (for a skip reason)."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    if subprocess.run(["which", "ip"], capture_output=True).returncode != 0:
        return "iproute2 'ip' not found"
    return None


def add_netns(name: str) -> None:
    """Create a namespace with loopback up and IPv6 off (no ND/MLD noise on test ports)."""
    delete_netns(name)
    run("ip", "netns", "add", name)
    run("ip", "link", "set", "lo", "up", ns=name)
    run("sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1", ns=name)
    run("sysctl", "-qw", "net.ipv6.conf.default.disable_ipv6=1", ns=name)


def delete_netns(name: str) -> None:
    """Remove a namespace (its veths go with it); no error if it is absent."""
    if (NETNS_DIR / name).exists():
        run("ip", "netns", "pids", name, check=False)
        for pid in run("ip", "netns", "pids", name, check=False).stdout.split():
            try:
                os.kill(int(pid), 9)
            except (ProcessLookupError, ValueError):
                pass
        run("ip", "netns", "del", name, check=False)


def add_veth(ns: str, a: str, b: str, mtu: int = 9000) -> None:
    """A veth pair a<->b inside ns, both ends up, offloads that rewrite frames off."""
    run("ip", "link", "add", a, "type", "veth", "peer", "name", b, ns=ns)
    for end in (a, b):
        run("ip", "link", "set", end, "mtu", str(mtu), "up", ns=ns)
        # bmv2 and the raw sockets see frames as sent: no checksum or segmentation offload.
        run("ethtool", "-K", end, "tx", "off", "rx", "off", "tso", "off", "gso", "off",
            "gro", "off", ns=ns, check=False)


def _libc_setns(fd: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"setns: {os.strerror(err)}")


def call_in(ns: str, fn: Callable[[], T]) -> T:
    """Run fn in namespace ns (a name under /var/run/netns, or a path such as /proc/PID/ns/net)
    from a short-lived thread and return its result.

    setns() moves only the calling thread, so a helper thread enters the namespace, runs
    fn (sockets it opens stay in that namespace) and exits; the caller's thread never moves.
    """
    result: list[T] = []
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            with open(ns if ns.startswith("/") else NETNS_DIR / ns) as target:
                _libc_setns(target.fileno())
            result.append(fn())
        except BaseException as exc:  # re-raised in the caller's thread
            errors.append(exc)

    thread = threading.Thread(target=worker, name=f"netns-{ns}")
    thread.start()
    thread.join()
    if errors:
        raise NetnsError(f"in namespace {ns}: {errors[0]}") from errors[0]
    return result[0]


def open_raw_sockets(ns: str, ifaces: list[str]) -> dict[str, socket.socket]:
    """AF_PACKET sockets bound to interfaces of ns (as for call_in; they see every frame the far end sends)."""

    def open_all() -> dict[str, socket.socket]:
        socks: dict[str, socket.socket] = {}
        try:
            for iface in ifaces:
                sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
                socks[iface] = sock
                sock.bind((iface, 0))
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
        except BaseException:
            for sock in socks.values():
                sock.close()
            raise
        return socks

    return call_in(ns, open_all)
