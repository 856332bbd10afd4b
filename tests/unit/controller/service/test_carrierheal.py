"""What the carrier of the kernel data plane's ports says is down (no namespace needed)."""

from __future__ import annotations

from controller.failover import HostPortDown, LinkDown
from controller.model.topology import load
from controller.service.carrierheal import failures_of
from controller.southbound.linkwatch import carrier_of
from tests.paths import LAB_YAML


def test_either_end_of_a_link_without_carrier_fails_the_link() -> None:
    topo = load(LAB_YAML)
    spine = topo.switch("p0-t1-1")
    leaf = topo.switch("p0-t0-0")
    assert failures_of(topo, {}) == frozenset()
    assert failures_of(topo, {(spine.name, spine.downlinks[leaf.index]): False}) == {LinkDown("p0-t0-0", "p0-t1-1")}
    assert failures_of(topo, {(leaf.name, leaf.uplinks[spine.index]): False,
                              (spine.name, spine.downlinks[leaf.index]): True}) == {LinkDown("p0-t0-0", "p0-t1-1")}
    every_port_up = {(s.name, p): True for s in topo.switches for p in (*s.host_ports, *s.uplinks, *s.downlinks)}
    assert failures_of(topo, every_port_up) == frozenset()


def test_a_leaf_host_port_without_carrier_fails_that_port() -> None:
    topo = load(LAB_YAML)
    leaf = topo.switch("p1-t0-1")
    assert failures_of(topo, {(leaf.name, leaf.host_ports[1]): False}) == {HostPortDown("p1-t0-1", leaf.host_ports[1])}


class _Msg(dict):  # type: ignore[type-arg]
    """An RTM_NEWLINK as pyroute2 parses it: attributes by name, flags by key."""

    def __init__(self, attrs: dict[str, object], flags: int) -> None:
        super().__init__(flags=flags)
        self.attrs = attrs

    def get_attr(self, name: str) -> object:
        return self.attrs.get(name)


def test_carrier_needs_the_port_up_and_its_carrier() -> None:
    assert carrier_of(_Msg({"IFLA_IFNAME": "eth3", "IFLA_CARRIER": 1}, 0x1)) == ("eth3", True)
    assert carrier_of(_Msg({"IFLA_IFNAME": "eth3", "IFLA_CARRIER": 1}, 0x0)) == ("eth3", False)  # admin down
    assert carrier_of(_Msg({"IFLA_IFNAME": "eth3", "IFLA_CARRIER": 0}, 0x1)) == ("eth3", False)
    assert carrier_of(_Msg({"IFLA_IFNAME": "eth4"}, 0x10001)) == ("eth4", True)  # no IFLA_CARRIER: IFF_LOWER_UP
    assert carrier_of(_Msg({}, 0x1)) is None
