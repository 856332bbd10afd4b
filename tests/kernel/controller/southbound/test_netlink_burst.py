"""A burst of seg6 encap routes written in one go is installed whole: each encap nexthop takes per-CPU memory the kernel
allocates atomically, and a burst outruns the kernel's refill of it (ENOMEM with free RAM); the southbound waits
for the refill instead of failing (controller.southbound.netlink, docs/kernel.md)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from controller.model.sids import fmt_v6
from controller.southbound.kroutes import Nexthop, Route, RouteDelta

ROUTES, HOPS = 1500, 8  # 12,000 encap nexthops: several hundred kB of per-CPU memory, far over the kernel's reserve


@pytest.fixture
def leaf_ns(kernel_ready: None) -> Iterator[str]:
    """A namespace with one interface up (eth1, a veth to eth1p) for the nexthops to leave by."""
    from mininet_labs.kernel import netns  # pyroute2: imported once the tier is known to run

    name = netns.ns_name(f"kb{os.getpid()}", "leaf")
    netns.create([name])
    try:
        netns.run_scripts({name: (["net.ipv6.conf.all.forwarding=1"],
                                  "link add eth1 type veth peer name eth1p\nlink set eth1p up\nlink set eth1 up\n")})
        yield name
    finally:
        netns.remove([name])


def _burst() -> list[Route]:
    """ROUTES multipath routes, each with HOPS nexthops encapsulating towards a carrier of its own."""
    out = []
    for r in range(ROUTES):
        hops = tuple(Nexthop("eth1", fmt_v6(0xFE80 << 112 | h + 1), fmt_v6(0xFCBB_BB00 << 96 | (h + 1) << 80 | (r + 1) << 64))
                     for h in range(HOPS))
        out.append(Route(fmt_v6(0xFD00 << 112 | (r + 1) << 64) + "/64", hops))
    return sorted(out)


def test_a_burst_of_encap_routes_is_installed_whole(leaf_ns: str) -> None:
    from controller.southbound.netlink import NetlinkSwitch

    want = _burst()
    with NetlinkSwitch("leaf", leaf_ns) as sw:
        sw.write(RouteDelta(inserts=tuple(want)))
        assert sw.read() == want
