"""The kernel data plane's plan (controller.southbound.kroutes) and its netlink attributes (seg6nl), without a kernel."""

from __future__ import annotations

import pytest

from controller import planning
from controller.model.failures import LinkDown, SwitchDown
from controller.routes import Options
from controller.plan.options import Pin
from controller.southbound import seg6nl
from controller.southbound.kroutes import KernelPlanError, Nexthop, diff, link_local, pulled_nexthops, switch_routes
from mininet_labs.labstate import default_topology

TOPO = default_topology()


def _texts(fabric, name):  # type: ignore[no-untyped-def]
    return [r.text() for r in switch_routes(fabric, TOPO.switch(name))]


def test_leaf_routes_are_the_plan_carriers() -> None:
    assert _texts(planning.fabric(TOPO, "srv6_spray"), "p1-t0-0") == [
        "fcbb:bb00:1001::/48 via fe80::5f:1ff:fe01:0 dev eth3",
        "fcbb:bb00:1002::/48 via fe80::5f:1ff:fe01:1 dev eth4",
        "fcbb:bb00:1400:1c00::/64 encap seg6local action End.DX6 nh6 fd00:1::1 dev sr0",
        "fcbb:bb00:1400:1c01::/64 encap seg6local action End.DX6 nh6 fd00:1::2 dev sr0",
        "fcbb:bb00:1400:1fff::/64 encap seg6local action End.DT6 table main dev sr0",
        "fcbb:bb00:1400::/48 encap seg6local action End flavors next-csid lblen 32 nflen 16 dev sr0",
        "blackhole fcbb:bb00::/32",
        "fd00:1:1::/64 nexthop encap seg6 mode encap.red segs fcbb:bb00:1001:1401:1fff:: via fe80::5f:1ff:fe01:0 "
        "dev eth3 nexthop encap seg6 mode encap.red segs fcbb:bb00:1002:1401:1fff:: via fe80::5f:1ff:fe01:1 dev eth4",
        "fd00:1::1/128 dev eth1",
        "fd00:1::2/128 dev eth2",
    ]


def test_spine_routes_shift_and_route_leaf_uns() -> None:
    assert _texts(planning.fabric(TOPO, "srv6_spray"), "p0-t1-1") == [
        "fcbb:bb00:2::/48 encap seg6local action End flavors next-csid lblen 32 nflen 16 dev sr0",
        "fcbb:bb00:400::/48 via fe80::5f:ff:fe00:0 dev eth1",
        "fcbb:bb00:401::/48 via fe80::5f:ff:fe00:1 dev eth2",
        "blackhole fcbb:bb00::/32",
    ]


def test_a_link_failure_pulls_its_nexthops_only() -> None:
    healthy = planning.fabric(TOPO, "srv6_spray")
    failed = planning.fabric(TOPO, "srv6_spray", [LinkDown("p0-t0-0", "p0-t1-1")])
    leaf1 = TOPO.switch("p0-t0-1")
    before, after = switch_routes(healthy, leaf1), switch_routes(failed, leaf1)
    assert pulled_nexthops(before, after) == {
        "fd00::/64": (Nexthop("eth4", "fe80::5f:ff:fe01:1", "fcbb:bb00:2:400:fff::"),)}
    d = diff(after, before)
    assert (len(d.inserts), len(d.modifies), len(d.deletes)) == (0, 1, 0)
    spine = TOPO.switch("p0-t1-1")
    assert [r.prefix for r in diff(switch_routes(failed, spine), switch_routes(healthy, spine)).deletes] == [
        "fcbb:bb00:400::/48"]
    assert all(switch_routes(failed, s) == switch_routes(healthy, s) for s in TOPO.switches if s.plane == 1)


def test_a_dead_spine_leaves_one_nexthop_and_no_shift() -> None:
    failed = planning.fabric(TOPO, "srv6_spray", [SwitchDown("p0-t1-0")])
    routes = {r.prefix: r for r in switch_routes(failed, TOPO.switch("p0-t0-0"))}
    assert [h.carrier for h in routes["fd00:0:1::/64"].nexthops] == ["fcbb:bb00:2:401:fff::"]
    assert "fcbb:bb00:1::/48" not in routes


def test_what_the_kernel_cannot_do_is_refused() -> None:
    with pytest.raises(KernelPlanError, match="pinned paths"):
        switch_routes(planning.fabric(TOPO, "srv6_spray", options=Options(pins=(Pin(0, 0, 1, 0, 0x100, 1),))),
                      TOPO.switches[0])
    with pytest.raises(KernelPlanError, match="E-ECMP"):
        switch_routes(planning.fabric(TOPO, "eecmp_qp_hash"), TOPO.switches[0])
    with pytest.raises(KernelPlanError, match="trimming"):
        switch_routes(planning.fabric(TOPO, "srv6_spray", options=Options(trim_qdepth=10)), TOPO.switches[0])


def test_link_local_is_eui64() -> None:
    assert link_local("02:5f:00:01:00:01") == "fe80::5f:ff:fe01:1"
    assert link_local("00:11:22:33:44:55") == "fe80::211:22ff:fe33:4455"


def test_seg6_attributes_round_trip() -> None:
    enc = seg6nl.seg6_encap(["fcbb:bb00:1:401:fff::"])
    # SEG6_IPTUNNEL_SRH: mode 3 (encap.red), SRH next 0, hdrlen 2, type 4, SL 0, first 0, then the segment
    assert enc[:4] == bytes([32, 0, 1, 0]) and enc[4:8] == (3).to_bytes(4, "little")
    assert enc[8:16] == bytes([0, 2, 4, 0, 0, 0, 0, 0])
    assert seg6nl.parse_seg6_encap(enc) == ("encap.red", ["fcbb:bb00:1:401:fff::"])
    two = seg6nl.seg6_encap(["fcbb:bb00:1::", "fcbb:bb00:2::"], mode="encap")
    assert seg6nl.parse_seg6_encap(two) == ("encap", ["fcbb:bb00:1::", "fcbb:bb00:2::"])
    assert seg6nl.parse_seg6local(seg6nl.seg6local("End", next_csid=(32, 16))) == seg6nl.Seg6Local("End", next_csid=(32, 16))
    assert seg6nl.parse_seg6local(seg6nl.seg6local("End.DT6", table=254)) == seg6nl.Seg6Local("End.DT6", table=254)
    assert seg6nl.parse_seg6local(seg6nl.seg6local("End.DX6", nh6="fd00::1")) == seg6nl.Seg6Local("End.DX6", nh6="fd00::1")


def test_both_southbounds_have_the_interface_and_an_unreachable_switch_is_one_error_line() -> None:
    import dataclasses

    from controller.southbound.base import Southbound
    from controller.southbound.netlink import NetlinkSouthbound
    from controller.southbound.p4runtime import P4RuntimeSouthbound

    netlink = NetlinkSouthbound(lambda name: f"sf-no-such-lab-{name}", timeout=1.0)
    leaf = TOPO.switch("p0-t0-0")
    dead = dataclasses.replace(TOPO, switches=tuple(dataclasses.replace(s, grpc_addr="127.0.0.1:1")
                                                    for s in TOPO.switches), _by_name={}, _t0=(), _t1=())
    p4rt = P4RuntimeSouthbound(dead, timeout=1.0)
    assert isinstance(netlink, Southbound) and isinstance(p4rt, Southbound)
    fabric = planning.fabric(TOPO, "srv6_spray")
    out = netlink.check(fabric, leaf)
    assert not out.ok and out.error == "p0-t0-0: cannot open namespace sf-no-such-lab-p0-t0-0: No such file or directory"
    out = p4rt.check(planning.fabric(dead, "srv6_spray"), dead.switch("p0-t0-0"))
    assert not out.ok and out.error.startswith("p0-t0-0: ") and "\n" not in out.error


def test_the_kernel_lab_says_what_it_needs(monkeypatch: pytest.MonkeyPatch) -> None:
    from mininet_labs.kernel import nodes as lab

    monkeypatch.setattr(lab.os, "geteuid", lambda: 1000)
    assert lab.prerequisites() == "a kernel lab needs root (network namespaces)"
    monkeypatch.setattr(lab.os, "geteuid", lambda: 0)
    monkeypatch.setattr(lab, "Path", lambda *a: type("P", (), {"exists": lambda self: False})())
    assert lab.prerequisites() == "ip not found (Debian: iproute2, procps, nftables)"
