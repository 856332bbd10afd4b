"""A lab's cables, enumerated once (mininet_labs.topo.wires): what Mininet links and what the kernel lab's veths join."""

from __future__ import annotations

import pytest

from mininet_labs.labstate import default_topology
from mininet_labs.topo import Wire, wires


def test_every_host_nic_and_every_leaf_uplink_is_one_wire_per_plane() -> None:
    got = wires(default_topology())
    assert len(got) == 16  # 2 planes x (4 host NICs + 4 leaf-spine links)
    assert got[:3] == [Wire(0, "p0-t0-0", 1, "h0", 0, host="h0", host_slot=0),
                       Wire(0, "p0-t0-0", 2, "h1", 0, host="h1", host_slot=1),
                       Wire(0, "p0-t0-0", 3, "p0-t1-0", 1)]
    assert {(w.a, w.b) for w in got if w.host is None and w.plane == 1} == {
        ("p1-t0-0", "p1-t1-0"), ("p1-t0-0", "p1-t1-1"), ("p1-t0-1", "p1-t1-0"), ("p1-t0-1", "p1-t1-1")}


def test_the_mininet_topo_links_exactly_the_wires() -> None:
    from mininet_labs._mininet import missing

    if missing():
        pytest.skip(missing())
    from mininet_labs.fabrictopo import FabricTopo

    model = default_topology()
    topo = FabricTopo(model, tag="t")
    links = {(a, b): topo.linkInfo(a, b) for a, b in topo.links()}
    assert len(links) == len(wires(model))
    for w in wires(model):
        ends = (w.host, w.a) if w.host is not None else (w.a, w.b)
        info = links[ends]
        assert (info["port1"], info["port2"]) == ((w.plane, w.a_port) if w.host is not None else (w.a_port, w.b_port))
