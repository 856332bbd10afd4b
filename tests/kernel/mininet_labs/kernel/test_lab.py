"""The kernel data plane forwards: RoCEv2 between every host pair as sent, spraying over the spines, routes equal to
the plan, failures pulling their nexthops, and a teardown that leaves nothing."""

from __future__ import annotations

from tests.paths import REPO

import ipaddress
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from controller import planning
from controller.model.failures import LinkDown
from controller.southbound.kroutes import Nexthop, intf, link_local, switch_routes
from mininet_labs import roce
from mininet_labs import frames

WIRE = str(REPO / "tests" / "kernel" / "wire.py")


def _frames(lab: Any, src: str, dsts: list[str], sports: range, qp: int = 0x111) -> list[dict[str, str]]:
    """Scapy RoCEv2 frames from src to each destination on every plane, one per UDP source port."""
    out = []
    mine = {n.plane: n for n in lab.host(src).nics}
    for dst in dsts:
        for theirs in lab.host(dst).nics:
            me = mine[theirs.plane]
            for n, sport in enumerate(sports):
                pkt = roce.roce_v6(me.v6, theirs.v6, qp, n, sport=sport, smac=me.mac, dmac=me.gateway_mac,
                                   payload=f"{src}>{dst} p{theirs.plane} #{n}".encode().ljust(64, b"."))
                out.append({"intf": me.intf, "frame": bytes(pkt).hex(), "dst": dst})
    return out


def _exchange(lab: Any, tmp: Path, frames: dict[str, list[dict[str, str]]], seconds: float = 2.0, *,
              roce_only: bool = True) -> dict[str, list[dict[str, str]]]:
    """Capture on every host's NICs while each source sends its frames; what each host received (RoCEv2 only, or
    every IPv6 frame but ICMPv6)."""
    caps = {}
    for h in lab.hosts:
        ready = tmp / f"{h}.ready"
        caps[h] = lab.host(h).popen([sys.executable, WIRE, "capture" if roce_only else "capture-ip", str(tmp / f"{h}.json"),
                                     str(ready), str(seconds), *(n.intf for n in lab.host(h).nics)])
    end = time.monotonic() + 60  # a bound only: four new processes, seconds late on a loaded machine
    while not all((tmp / f"{h}.ready").exists() for h in lab.hosts):
        assert time.monotonic() < end, "capture did not start"
        time.sleep(0.02)
    for src, items in frames.items():
        path = tmp / f"send-{src}.json"
        path.write_text(json.dumps(items))
        lab.host(src).run([sys.executable, WIRE, "send", str(path)])
    for p in caps.values():
        assert p.wait(timeout=30) == 0
    return {h: json.loads((tmp / f"{h}.json").read_text()) for h in lab.hosts}


def _expected(lab: Any, sent: dict[str, str]) -> bytes:
    """The frame the destination host gets: its leaf's MAC to its NIC's, the IPv6 hop limit one lower (the
    destination leaf forwards the decapsulated packet: RFC 8200), every other byte as sent, ICRC included."""
    frame = bytes.fromhex(sent["frame"])
    dst = ipaddress.IPv6Address(frame[38:54])
    nic = next(n for n in lab.host(sent["dst"]).nics if ipaddress.IPv6Address(n.v6) == dst)
    ip = bytearray(frame[14:])
    ip[7] -= 1
    return frames.mac_bytes(nic.mac) + frames.mac_bytes(nic.gateway_mac) + frame[12:14] + bytes(ip)


def test_every_pair_delivered_as_sent(lab: Any, tmp_path: Path) -> None:
    hosts = lab.hosts
    frames = {h: _frames(lab, h, [d for d in hosts if d != h], range(49152, 49156)) for h in hosts}
    got = _exchange(lab, tmp_path, frames)
    for src, items in frames.items():
        for item in items:
            want = _expected(lab, item)
            rx = [bytes.fromhex(g["frame"]) for g in got[item["dst"]]]
            assert rx.count(want) == 1, f"{src} -> {item['dst']}: {want[:64].hex()} not received once"
            assert roce.icrc_ok(want)
    sent = sum(len(v) for v in frames.values())
    assert sum(len(v) for v in got.values()) == sent == len(hosts) * (len(hosts) - 1) * 2 * 4


def _spine_tx(lab: Any, plane: int, dst_leaf: int) -> list[int]:
    """Packets each spine of a plane sent down to a leaf."""
    out = []
    for spine in lab.model.t1s(plane):
        out.append(lab.counters(spine.name)[intf(spine.downlinks[dst_leaf])]["tx_packets"])
    return out


def test_flows_are_sprayed_over_both_spines(lab: Any, tmp_path: Path) -> None:
    """64 flows (UDP source ports, as 64 QPs) from h0 to h2 in plane 0: the L4 hash puts some on each spine."""
    before = _spine_tx(lab, 0, 1)
    items = [f for f in _frames(lab, "h0", ["h2"], range(50000, 50064)) if f["intf"] == lab.host("h0").nic(0).intf]
    got = _exchange(lab, tmp_path, {"h0": items})
    after = _spine_tx(lab, 0, 1)
    moved = [a - b for a, b in zip(after, before)]
    assert len(got["h2"]) == 64
    assert sum(moved) >= 64 and all(m > 0 for m in moved), moved


def test_routes_read_back_equal_the_plan(lab: Any) -> None:
    fabric = planning.fabric(lab.model, "srv6_spray")
    for sw in lab.model.switches:
        assert lab.routes(sw.name) == switch_routes(fabric, sw), sw.name
    outcomes = lab.install(dry_run=True)
    assert all(o.ok and not o.delta for o in outcomes.values()), {n: o.delta for n, o in outcomes.items()}


def test_failure_pulls_nexthops_traffic_passes_restore_brings_them_back(lab: Any) -> None:
    topo = lab.model
    leaf0, leaf1, spine1 = topo.switch("p0-t0-0"), topo.switch("p0-t0-1"), topo.switch("p0-t1-1")
    healthy = {s.name: lab.routes(s.name) for s in topo.switches}
    lab.cut_link("p0-t0-0", "p0-t1-1")
    try:
        lab.fail(LinkDown("p0-t0-0", "p0-t1-1"))
        spine0 = topo.switch("p0-t1-0")
        via0 = Nexthop(intf(leaf0.uplinks[0]), link_local(spine0.mac), "fcbb:bb00:1:401:fff::")
        to_leaf1 = {r.prefix: r for r in lab.routes(leaf0.name)}["fd00:0:1::/64"]
        assert to_leaf1.nexthops == (via0,)  # the nexthop through spine 1 is pulled, spine 0's stays
        assert "fcbb:bb00:2::/48" not in {r.prefix for r in lab.routes(leaf0.name)}
        back = {r.prefix: r for r in lab.routes(leaf1.name)}["fd00::/64"]
        assert [h.carrier for h in back.nexthops] == ["fcbb:bb00:1:400:fff::"]
        assert "fcbb:bb00:400::/48" not in {r.prefix for r in lab.routes(spine1.name)}
        assert all(lab.routes(s.name) == healthy[s.name] for s in topo.switches if s.plane == 1)
        report = lab.traffic(qps=8, messages=16, rate=0)
        assert report.ok, report.problems()
        assert report.totals()["received"] == report.totals()["sent"] > 0
    finally:
        lab.mend_link("p0-t0-0", "p0-t1-1")
        lab.restore()
    assert {s.name: lab.routes(s.name) for s in topo.switches} == healthy
    report = lab.traffic(qps=4, messages=8, rate=0)
    assert report.ok, report.problems()


def test_unsupported_options_say_so(lab: Any) -> None:
    from controller.routes import Options
    from controller.plan.options import Pin
    from mininet_labs.lab import LabError

    lab.options = Options(pins=(Pin(0, 0, 1, 0, 0x100, 1),))
    try:
        outcomes = lab.install(dry_run=True)
    finally:
        lab.options = None
    assert all("pinned paths" in (o.error or "") for o in outcomes.values())
    with pytest.raises(LabError, match="no P4Runtime"):
        lab.client()


def test_down_removes_its_namespaces_and_only_those(kernel_ready: None, tmp_path: Path) -> None:
    from mininet_labs.kernel import netns
    from mininet_labs.lab import Lab
    from mininet_labs.backends import nodes_for
    from mininet_labs.labstate import default_topology

    name = f"d{os.getpid()}"
    other = f"{netns.PREFIX}{name}x-other"  # shares the prefix's start, not the lab's
    netns.create([other])
    lab = Lab(default_topology(1, 1, 2, 1), tmp_path, nodes_for("kernel", name=name))
    try:
        lab.up()
        assert len(netns.existing(f"{netns.PREFIX}{name}-")) == 5
        report = lab.down()
        assert report.clean and len(report.deleted_intfs) == 5
        assert netns.existing(f"{netns.PREFIX}{name}-") == []
        assert (netns.NETNS_DIR / other).exists()
        assert not (tmp_path / "kernel-lab.json").exists()
    finally:
        lab.down()
        netns.remove([other])


def test_southbound_failure_delta_pulls_the_segments_without_reading_first(lab: Any) -> None:
    healthy = planning.fabric(lab.model, "srv6_spray")
    failed = planning.fabric(lab.model, "srv6_spray", [LinkDown("p0-t0-0", "p0-t1-1")])
    leaf1 = lab.model.switch("p0-t0-1")
    out = lab.nodes.southbound(lab.model).apply_failure(healthy, failed, leaf1)
    assert out.ok and (out.inserts, out.modifies, out.deletes) == (0, 1, 0)
    assert out.detail["pulled"] == {"fd00::/64": (Nexthop("eth4", "fe80::5f:ff:fe01:1", "fcbb:bb00:2:400:fff::"),)}
    assert lab.routes(leaf1.name) == switch_routes(failed, leaf1)
    back = lab.nodes.southbound(lab.model).apply_failure(failed, healthy, leaf1)
    assert back.ok and back.modifies == 1 and back.detail["pulled"] == {}
    assert lab.routes(leaf1.name) == switch_routes(healthy, leaf1)
