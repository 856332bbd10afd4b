"""Interop with the Linux kernel's SRv6 (an implementation nobody here wrote), in namespaces.

Port 4 of the switch leads to namespace k1 (a kernel SRv6 headend and uN transit), port 3
to k2 (a kernel End.DT6 decapsulating for its own host address: the inner lookup is in
the "local" table, where the kernel keeps its own addresses).
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from typing import Iterator

import pytest
from scapy.layers.inet import UDP
from scapy.layers.inet6 import IPv6, IPv6ExtHdrSegmentRouting
from scapy.layers.l2 import Ether

from controller.plan.entries import ActionProfileGroup, ActionProfileMember, Exact, Lpm, TableEntry
from controller.runtime.p4rt import SwitchConnection
from controller.programs.toolchain import Artifacts
from mininet_labs import netns
from mininet_labs.nsswitch import NetnsSwitch
from mininet_labs.roce import icrc_ok, roce_v6
from tests.bmv2.conftest import Device, require_bmv2
from tests.bmv2.p4.test_srv6_spray import BLOCK, carrier, my_sid, nbr_mac, route, sw_mac

HOST, UP, K2_PORT, K1_PORT = 1, 2, 3, 4
K1_ADDR, K2_HOST = "2001:db8:1::1", "fd00:0:0:12::1"
DT6_SID = "fc00:0:0:d::6"
K1_USID = 0x0100


def kernel_ns(name: str, iface: str, port: int, address: str) -> None:
    ip = ["ip", "-n", name]
    netns.run(*ip, "link", "set", iface, "down")
    netns.run(*ip, "link", "set", iface, "address", nbr_mac(port))
    netns.run("sysctl", "-qw", f"net.ipv6.conf.{iface}.accept_dad=0", ns=name)
    netns.run("sysctl", "-qw", "net.ipv6.conf.all.forwarding=1", ns=name)
    netns.run("sysctl", "-qw", "net.ipv6.conf.all.seg6_enabled=1", ns=name)
    netns.run("sysctl", "-qw", f"net.ipv6.conf.{iface}.seg6_enabled=1", ns=name)
    netns.run(*ip, "link", "set", iface, "up")
    netns.run(*ip, "-6", "addr", "add", f"{address}/64", "dev", iface, "nodad")
    netns.run(*ip, "-6", "neigh", "add", "fe80::1", "lladdr", sw_mac(port), "dev", iface, "nud", "permanent")


@dataclass
class KernelLab(Device):
    """The switch plus the two kernel namespaces wired to it."""

    k1: str = ""
    k2: str = ""


@pytest.fixture(scope="module")
def linux() -> Iterator[KernelLab]:
    require_bmv2()
    suffix = os.getpid()
    k1, k2 = f"k1-{suffix}", f"k2-{suffix}"
    for name in (k1, k2):
        netns.delete_netns(name)
        netns.run("ip", "netns", "add", name)
    switch = NetnsSwitch(f"lnx{suffix}", ports=(HOST, UP), foreign_ports={K2_PORT: k2, K1_PORT: k1})
    try:
        switch.start()
        kernel_ns(k1, "h4", K1_PORT, K1_ADDR)
        kernel_ns(k2, "h3", K2_PORT, K2_HOST)
        for cmd, ns in (
            (["ip", "-6", "route", "add", "fd00:0:0:99::/64", "encap", "seg6", "mode", "encap", "segs",
              "fc00:0:0:a::1,fc00:0:0:b::1", "via", "fe80::1", "dev", "h4"], k1),
            (["ip", "-6", "route", "add", f"fcbb:bb00:{K1_USID:x}::/48", "encap", "seg6local", "action",
              "End", "flavors", "next-csid", "lblen", "32", "nflen", "16", "dev", "h4"], k1),
            (["ip", "-6", "route", "add", "fcbb:bb00::/32", "via", "fe80::1", "dev", "h4"], k1),
            (["ip", "-6", "route", "add", "fc00::/16", "via", "fe80::1", "dev", "h4"], k1),
            (["ip", "-6", "route", "add", f"{DT6_SID}/128", "encap", "seg6local", "action", "End.DT6",
              "table", "local", "dev", "h3"], k2),
        ):
            proc = netns.run(*cmd, ns=ns, check=False)
            if proc.returncode != 0:
                pytest.skip(f"this kernel's SRv6 refused `{' '.join(cmd)}`: {proc.stderr.strip()}")
        conn = SwitchConnection("linux", switch.grpc_address, device_id=switch.device_id, election_id=10)
        conn.connect()
        yield KernelLab(switch, conn, Artifacts.of("srv6_spray"), k1, k2)
        conn.close()
    finally:
        switch.stop()
        for name in (k1, k2):
            netns.delete_netns(name)


def test_kernel_seg6_encapsulation_is_forwarded_by_our_end(linux):
    linux.reset()
    linux.install(my_sid("fc00:0:0:a::1", 128, "end"), route("fc00:0:0:b::", 64, UP))

    def send() -> None:
        with socket.socket(socket.AF_INET6, socket.SOCK_DGRAM) as s:
            s.sendto(b"kernel-built SRH", ("fd00:0:0:99::1", 7000))

    netns.call_in(linux.k1, send)
    frames = [f for p, f in linux.switch.receive(timeout=2.0) if p == UP]
    assert len(frames) == 1
    got = Ether(frames[0])
    srh = got[IPv6ExtHdrSegmentRouting]
    assert got[IPv6].dst == "fc00:0:0:b::1" and srh.segleft == 0
    assert srh.addresses == ["fc00:0:0:b::1", "fc00:0:0:a::1"]
    inner = srh.payload
    assert isinstance(inner, IPv6) and inner.dst == "fd00:0:0:99::1" and inner.src == K1_ADDR
    assert bytes(inner[UDP].payload) == b"kernel-built SRH"


def _spray_to(linux: KernelLab, member_action: str, params: tuple) -> None:
    profile = "IngressPipe.headend.spray_selector"
    linux.install(
        TableEntry("IngressPipe.boundary.host_policy", (("ingress_port", Exact(HOST)),),
                   "IngressPipe.boundary.sr_boundary", (("host_addr", "fd00:0:0:11::1"), ("usid_block", BLOCK),
                                                        ("src_addr", "2001:db8:ff::1"), ("headend", 1))),
        TableEntry("IngressPipe.headend.spray_dest", (("dst_addr", Lpm("fd00:0:0:12::", 64)),),
                   "IngressPipe.headend.set_spray", (("mode", 1), ("dst_usids", 0x0012_E000))),
        ActionProfileMember(profile, 1, f"IngressPipe.headend.{member_action}", params),
        ActionProfileGroup(profile, 1, (1,), max_size=4),
        TableEntry("IngressPipe.headend.spray_paths", (("dst_addr", Lpm("fd00:0:0:12::", 64)),), group_id=1),
    )


def test_our_encapsulation_is_decapsulated_by_kernel_end_dt6(linux):
    linux.reset()
    _spray_to(linux, "encap_carrier", (("carrier", DT6_SID), ("path_index", 1)))
    linux.install(route("fc00:0:0:d::", 64, K2_PORT))

    def listen() -> socket.socket:
        s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
        s.bind(("::", 4791))
        s.settimeout(3.0)
        return s

    sock = netns.call_in(linux.k2, listen)
    try:
        sent = roce_v6("fd00:0:0:11::1", K2_HOST, qp=0x55, psn=9)
        linux.switch.send(HOST, bytes(sent))
        data, peer = sock.recvfrom(4096)
    finally:
        sock.close()
    assert peer[0] == "fd00:0:0:11::1"
    assert data == bytes(sent[UDP].payload)  # BTH, payload and ICRC exactly as sent


def test_kernel_next_csid_un_shifts_our_carrier(linux):
    """Our headend sends block|K1|leaf|DT6; the kernel's uN (next-csid) shifts it and sends it back."""
    linux.reset()
    _spray_to(linux, "via_spine", (("spine_usid", K1_USID), ("path_index", 1)))
    linux.install(route(carrier(K1_USID), 48, K1_PORT), route(carrier(0x0012), 48, UP))
    sent = roce_v6("fd00:0:0:11::1", "fd00:0:0:12::1", qp=0x56, psn=10)
    linux.switch.send(HOST, bytes(sent))
    frames = [f for p, f in linux.switch.receive(timeout=2.0) if p == UP]
    assert len(frames) == 1
    got = Ether(frames[0])
    assert got[IPv6].dst == carrier(0x0012, 0xE000)
    assert got[IPv6].hlim == 62  # 64 at our headend, -1 by the kernel, -1 by our routing
    assert bytes(got[IPv6].payload) == bytes(sent[IPv6])
    assert icrc_ok(frames[0])
