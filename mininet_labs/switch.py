"""A Mininet switch that runs bmv2's simple_switch_grpc, to be driven over P4Runtime.

Like Mininet's own switches it stays in the root namespace; its ports are the Mininet port
numbers of its links (`-i PORT@INTF`), its P4Runtime server listens on TCP 127.0.0.1:grpc_port,
and it starts with no program (`--no-p4`): the controller pushes the pipeline with
SetForwardingPipelineConfig. The CPU port is explicit (`--cpu-port 255`, docs/pipeline.md).
Everything it writes goes under the lab directory: `<name>.txt` (bmv2's log), `<name>.out`
(stdout/stderr), and with `pcap_dir` one `<intf>_in.pcap` / `<intf>_out.pcap` per port.

The class itself lives in mininet_labs.bmv2switch, which imports Mininet (MininetMissing naming
Debian's package when it is absent); the port helpers and constants here need no Mininet.
"""

from __future__ import annotations

import os
import socket
import subprocess

CPU_PORT = 255
THRIFT_OFFSET = 10000  # thrift port = gRPC port + this, unless given


def port_free(port: int, host: str = "127.0.0.1") -> bool:
    """True when nothing listens on TCP host:port (so a switch may bind it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


# Below Linux's ephemeral range (32768-60999 by default), Thrift ports included: a port found free there can
# still be taken by any client's outgoing connection before the switch binds it.
PRIVATE_PORTS = (12000, 22000)


def free_port_base(count: int, first: int = PRIVATE_PORTS[0], last: int = PRIVATE_PORTS[1], spread: int = 50) -> int:
    """A gRPC base port in [first, last) with `count` free ports (and their Thrift ports), starting the
    search at first + (pid % 40) * spread so that labs of concurrent processes pick apart."""
    for base in range(first + (os.getpid() % 40) * spread, last, count + 1):
        if all(port_free(p) and port_free(p + THRIFT_OFFSET) for p in range(base, base + count)):
            return base
    raise RuntimeError("no free port range for the lab's switches")


def quiet_intf(name: str) -> None:
    """No IPv6 (router solicitations, MLD) from the kernel on a switch port, no offloads that rewrite frames."""
    subprocess.run(["sysctl", "-qw", f"net.ipv6.conf.{name}.disable_ipv6=1"], capture_output=True)
    subprocess.run(["ethtool", "-K", name, "tx", "off", "rx", "off", "tso", "off", "gso", "off", "gro", "off"],
                   capture_output=True)

