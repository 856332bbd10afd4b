"""The nftables rules of the SR-domain boundary at a kernel leaf's host ports (mininet_labs/kernel/boundary.py);
tests/kernel/mininet_labs/kernel/test_boundary.py loads them into a kernel and sends what they refuse."""

from __future__ import annotations

from controller.model.sids import SidPlan
from mininet_labs.kernel.boundary import HostPort, ruleset


def test_the_boundary_rules_name_each_host_port_and_the_block() -> None:
    """The rules a leaf gets, by the plan's default and in endpoint mode."""
    ports = [HostPort("eth1", "fd00:0:1::1"), HostPort("eth2", "fd00:0:1::2")]
    closed = ruleset(ports, SidPlan())
    assert 'iifname "eth2" meta nfproto ipv6 ip6 saddr != { fd00:0:1::2, fe80::/10 } counter name host_source drop' in closed
    assert 'iifname "eth1" ip6 daddr fcbb:bb00::/32 counter name sr_boundary drop' in closed
    assert "host_sr_steering drop" not in closed
    opened = ruleset(ports, SidPlan(), first_usids=[0x100, 0x200])
    assert ('iifname "eth1" ip6 daddr fcbb:bb00::/32 ip6 daddr != { fcbb:bb00:100::/48, fcbb:bb00:200::/48 } '
            "counter name host_sr_steering drop") in opened
    assert "sr_boundary drop" not in opened
