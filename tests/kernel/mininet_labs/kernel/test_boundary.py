"""The SR-domain boundary at the kernel leaves' host ports (mininet_labs/kernel/boundary.py), as srv6_spray's
host_policy does it on bmv2: by default a host may send plain IPv6 from its own address only, nothing for the SR
domain; in endpoint mode its own carriers pass when they start at a spine of its plane or its leaf. Each drop is
counted by reason at the leaf, and nothing dropped reaches any host."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from controller import planning
from controller.model.sids import fmt_v6
from controller.model.topology import from_dict, to_dict
from mininet_labs import frames, roce
from tests.kernel.mininet_labs.kernel.test_lab import _exchange

MARK = b"sf-boundary"


@pytest.fixture(scope="module")
def endpoint_lab(kernel_ready: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The default lab in endpoint mode (the topology's host_source_routing: true)."""
    from mininet_labs.lab import Lab
    from mininet_labs.backends import nodes_for
    from mininet_labs.labstate import default_topology

    model = from_dict({**to_dict(default_topology()), "host_source_routing": True})
    running = Lab(model, tmp_path_factory.mktemp("kernel-ep"), nodes_for("kernel", name=f"e{os.getpid()}")).up()
    try:
        yield running
    finally:
        assert running.down().clean


def _outer(me: Any, dst: str, inner: Any, **ipv6: Any) -> Any:
    from scapy.layers.inet6 import IPv6
    from scapy.layers.l2 import Ether

    return Ether(src=me.mac, dst=me.gateway_mac) / IPv6(src=ipv6.pop("src", me.v6), dst=dst, hlim=64, **ipv6) / inner


def _inner(me: Any, peer: Any, n: int, why: str) -> Any:
    from scapy.layers.inet6 import IPv6

    return roce.roce_v6(me.v6, peer.v6, 0x333, n, sport=50600 + n, payload=MARK + why.encode().ljust(53, b"."))[IPv6]


def _marked(got: dict[str, list[dict[str, str]]]) -> list[bytes]:
    return [f for items in got.values() for f in (bytes.fromhex(g["frame"]) for g in items) if MARK in f]


def test_a_host_sends_nothing_for_the_sr_domain_and_only_from_its_own_address(lab: Any, tmp_path: Path) -> None:
    from scapy.layers.inet6 import IPv6ExtHdrSegmentRouting

    fabric = planning.fabric(lab.model, "srv6_spray")
    me, peer = lab.host("h0").nic(0), lab.host("h2").nic(0)
    carrier = fmt_v6(fabric.sids.carrier((fabric.sids.t1_usid(0, 1), fabric.sids.t0_usid(0, 1), fabric.sids.dt6_usid(0))))
    plain = roce.roce_v6(me.v6, peer.v6, 0x333, 0, sport=50600, smac=me.mac, dmac=me.gateway_mac,
                         payload=MARK + b"plain".ljust(53, b"."))
    refused = [  # (reason, frame): each would reach h2 if the leaf let it through
        ("host_source", roce.roce_v6("fd00:0:1::77", peer.v6, 0x333, 1, sport=50601, smac=me.mac, dmac=me.gateway_mac,
                                     payload=MARK + b"spoofed".ljust(53, b"."))),
        ("sr_boundary", _outer(me, carrier, _inner(me, peer, 2, "carrier"), nh=41)),
        ("sr_boundary", _outer(me, peer.v6, IPv6ExtHdrSegmentRouting(addresses=[peer.v6], segleft=0)
                               / _inner(me, peer, 3, "srh"))),
        ("sr_boundary", _outer(me, peer.v6, _inner(me, peer, 4, "ipv6 in ipv6"), nh=41)),
    ]
    before = lab.drops(me.leaf)
    assert set(before) == {"host_source", "sr_boundary", "host_sr_steering"}
    items = [{"intf": me.intf, "frame": bytes(f).hex(), "dst": "h2"} for f in [plain, *(f for _, f in refused)]]
    got = _exchange(lab, tmp_path, {"h0": items}, roce_only=False)
    arrived = _marked(got)
    assert len(arrived) == 1 and b"plain" in arrived[0]  # the plain packet, and nothing refused
    after = lab.drops(me.leaf)
    assert {r: after[r] - before[r] for r in after} == {"host_source": 1, "sr_boundary": 3, "host_sr_steering": 0}
    assert lab.drops(lab.model.t1s(0)[0].name) == {}  # spines keep no boundary: no host faces them


def test_endpoint_mode_host_written_carriers_reach_the_host(endpoint_lab: Any, tmp_path: Path) -> None:
    """A host writes the outer header itself (an EV's carrier, End.DT6 at the far leaf, and the same path ending in
    the far host's End.DX6): the leaf routes the carrier's first locator, the spine shifts, the far leaf decapsulates
    and the host gets the inner RoCEv2 packet, hop limit one lower (the leaf forwards it after the decap). A carrier
    that starts anywhere but at a spine of the plane or the leaf itself is HOST_SR_STEERING at the leaf."""
    from scapy.layers.inet6 import IPv6
    from scapy.layers.l2 import Ether

    from controller.plan import evs

    lab = endpoint_lab
    fabric = planning.fabric(lab.model, "srv6_spray")
    ev = evs.host_evs(fabric, "h0", ["h2"])["h2"][1]  # plane 0, spine 1
    assert (ev.plane, ev.spine) == (0, 1)
    sids = fabric.sids
    dx6 = fmt_v6(sids.carrier((sids.t1_usid(0, 1), sids.t0_usid(0, 1), sids.dx6_usid(0, 0))))
    me, peer = lab.host("h0").nic(0), lab.host("h2").nic(0)
    items, inners = [], []
    for n, carrier in enumerate((ev.carrier, dx6)):
        inner = roce.roce_v6(me.v6, peer.v6, 0x222, n, sport=50500 + n, payload=f"ev {carrier}".encode().ljust(64, b"."))
        outer = Ether(src=me.mac, dst=me.gateway_mac) / IPv6(src=me.v6, dst=carrier, nh=41, hlim=64) / inner[IPv6]
        items.append({"intf": me.intf, "frame": bytes(outer).hex(), "dst": "h2"})
        inners.append(bytes(inner))
    # starting at the far leaf (not a first uSID this leaf allows), and at plane 1's spine
    for n, first in enumerate((sids.t0_usid(0, 1), sids.t1_usid(1, 0)), start=2):
        wrong = fmt_v6(sids.carrier((first, sids.t0_usid(0, 1), sids.dt6_usid(0))))
        items.append({"intf": me.intf, "frame": bytes(_outer(me, wrong, _inner(me, peer, n, "steering"), nh=41)).hex(),
                      "dst": "h2"})
    before = lab.drops(me.leaf)
    got = _exchange(lab, tmp_path, {"h0": items})
    rx = [bytes.fromhex(g["frame"]) for g in got["h2"]]
    for inner in inners:
        ip = bytearray(inner[14:])
        ip[7] -= 1
        want = frames.mac_bytes(peer.mac) + frames.mac_bytes(peer.gateway_mac) + inner[12:14] + bytes(ip)
        assert rx.count(want) == 1, want[:64].hex()
    assert len(rx) == 2
    after = lab.drops(me.leaf)
    assert {r: after[r] - before[r] for r in after} == {"host_source": 0, "sr_boundary": 0, "host_sr_steering": 2}

