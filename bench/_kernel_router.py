"""The kernel data plane as bench/dataplane_pps.py measures it: one Linux namespace routing between two
veths, set up for one case the way the kernel lab's switches route (controller/southbound/kroutes.py):
headend `encap seg6 mode encap.red`, uN transit `seg6local End flavors next-csid lblen 32 nflen 16`,
and for each plain IPv6 forwarding as the baseline. Port 1 (`h1`) is where packets go in, port 2 (`h2`)
where they come out; both far ends stay in the namespace and we hold raw sockets on them."""

from __future__ import annotations

import socket

from mininet_labs import netns

IN, OUT = 1, 2
GATEWAY, GATEWAY_MAC = "fe80::bb", "02:bb:00:00:00:02"
TUNNEL_SOURCE = "2001:db8:ff::1"
CARRIER = "fcbb:bb00:1:12:e000::"  # block | spine uN | destination leaf uN | End.DT6, as the headend case's bmv2 writes

ROUTES = {
    "headend": [f"fd00:0:0:12::/64 encap seg6 mode encap.red segs {CARRIER} via {GATEWAY} dev sw2",
                f"fcbb:bb00:1::/48 via {GATEWAY} dev sw2"],
    "headend_baseline": [f"fd00:0:0:12::/64 via {GATEWAY} dev sw2"],
    "transit_un": ["fcbb:bb00:1::/48 encap seg6local action End flavors next-csid lblen 32 nflen 16 dev sr0",
                   f"fcbb:bb00:12::/48 via {GATEWAY} dev sw2"],
    "transit_baseline": [f"fcbb:bb00:1::/48 via {GATEWAY} dev sw2"],
}


class KernelRouter:
    """A namespace `ns` forwarding one case's packets from h1 to h2 (the measure() interface of NetnsSwitch:
    `_socks` by port, `drain()`). `dst_mac`: the MAC the packets are sent to (sw1's address)."""

    def __init__(self, ns: str, case: str, dst_mac: str) -> None:
        self.ns, self.case, self.dst_mac = ns, case, dst_mac
        self._socks: dict[int, socket.socket] = {}

    def __enter__(self) -> KernelRouter:
        ns = self.ns
        netns.add_netns(ns)  # IPv6 off by default: only the router's own devices get it (no ND noise on h1, h2)
        try:
            netns.add_veth(ns, "sw1", "h1")
            netns.add_veth(ns, "sw2", "h2")
            netns.add_veth(ns, "sr0", "sr1")  # the seg6local routes' device, as the kernel lab's (no dummy module needed)
            netns.run("ip", "link", "set", "sw1", "address", self.dst_mac, ns=ns)
            for dev in ("sw1", "sw2", "sr0"):
                for key, value in (("accept_dad", "0"), ("disable_ipv6", "0"), ("seg6_enabled", "1")):
                    netns.run("sysctl", "-qw", f"net.ipv6.conf.{dev}.{key}={value}", ns=ns)
            netns.run("sysctl", "-qw", "net.ipv6.conf.all.forwarding=1", ns=ns)
            netns.run("sysctl", "-qw", "net.ipv6.conf.all.seg6_enabled=1", ns=ns)
            netns.run("ip", "sr", "tunsrc", "set", TUNNEL_SOURCE, ns=ns)
            netns.run("ip", "-6", "neigh", "replace", GATEWAY, "lladdr", GATEWAY_MAC, "dev", "sw2", "nud", "permanent",
                      ns=ns)
            for route in ROUTES[self.case]:
                netns.run("ip", "-6", "route", "add", *route.split(), ns=ns)
            socks = netns.open_raw_sockets(ns, ["h1", "h2"])
            self._socks = {IN: socks["h1"], OUT: socks["h2"]}
        except BaseException:
            self.__exit__()
            raise
        return self

    def drain(self) -> None:
        """Throw away whatever is queued on our ends (the router's own ND and MLD at start-up among it)."""
        for sock in self._socks.values():
            sock.setblocking(False)
            try:
                while True:
                    sock.recv(65535)
            except BlockingIOError:
                pass
            finally:
                sock.setblocking(True)

    def __exit__(self, *exc: object) -> None:
        for sock in self._socks.values():
            sock.close()
        self._socks = {}
        netns.delete_netns(self.ns)
