"""Per-path packets on simple_switch_grpc: the controller's plan of a source leaf installed, RoCEv2 sprayed
from a host, the headend's path_packets cells read back and exported per path in Prometheus' text."""

from __future__ import annotations

import ipaddress
import socket
import urllib.request
from collections import Counter

from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether

from controller import planning
from controller.plan.fabricplan import plan
from controller.runtime.reconcile import apply
from controller.service.metrics import Metrics
from controller.service.paths import PATH_COUNTER, PathLabel, path_labels
from mininet_labs.labstate import default_topology
from mininet_labs.roce import roce_v6

LEAF = "p0-t0-0"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_path_packets_are_exported_per_path_with_the_counts_the_uplinks_carried(spray):
    topo = default_topology()
    sids = planning.sid_plan(topo)
    whole = plan(planning.fabric(topo, "srv6_spray"))
    labels = path_labels(topo, sids, whole)[LEAF]
    assert labels == {0: PathLabel(0, "p0-t1-0", "fcbb:bb00:1::/48+dst"), 1: PathLabel(0, "p0-t1-1", "fcbb:bb00:2::/48+dst")}
    apply(spray.conn, whole[LEAF])
    leaf = topo.switch(LEAF)
    src = str(ipaddress.IPv6Address(sids.host_v6(0, 0, 0)))  # h0, slot 0 of p0-t0-0
    dst = str(ipaddress.IPv6Address(sids.host_v6(0, 1, 0)))  # h2, behind p0-t0-1
    sent = 40
    for qp in range(sent):
        spray.switch.send(leaf.host_ports[0], bytes(roce_v6(src, dst, qp=0x100 + qp, psn=qp, sport=49152 + qp,
                                                            smac=topo.host_mac(leaf, 0), dmac=leaf.mac)))
    got = spray.switch.receive(timeout=30.0, count=sent)  # a bound only: it returns once all came
    assert len(got) == sent
    per_port = Counter(port for port, _ in got)
    assert set(per_port) <= set(leaf.uplinks) and len(per_port) == 2  # sprayed over both spines
    for port, frame in got:  # each went to the spine whose uN its carrier starts with
        spine = leaf.uplinks.index(port)
        assert sids.parse(Ether(frame)[IPv6].dst)[0] == sids.t1_usid(0, spine)

    cells = spray.conn.read_counter_cells(PATH_COUNTER, labels)
    assert [(c.index, c.packets) for c in cells] == [(j, per_port[leaf.uplinks[j]]) for j in (0, 1)]
    m = Metrics()
    m.set_paths(LEAF, cells, labels)
    port = free_port()
    m.serve(port)
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    for j, spine in enumerate(("p0-t1-0", "p0-t1-1")):
        line = (f'fabric_path_packets{{plane="0",segments="{labels[j].segments}",spine="{spine}",switch="{LEAF}"}} '
                f"{float(per_port[leaf.uplinks[j]])}")
        assert line in text.splitlines()


def test_a_path_never_used_is_exported_as_zero(spray):
    topo = default_topology()
    whole = plan(planning.fabric(topo, "srv6_spray"))
    labels = path_labels(topo, planning.sid_plan(topo), whole)["p1-t0-1"]
    apply(spray.conn, whole["p1-t0-1"])
    cells = spray.conn.read_counter_cells(PATH_COUNTER, labels)
    assert [(c.index, c.packets, c.bytes) for c in cells] == [(0, 0, 0), (1, 0, 0)]
    m = Metrics()
    m.set_paths("p1-t0-1", cells, labels)
    samples = {s.labels["spine"]: s.value for s in m.path_packets.collect()[0].samples}
    assert samples == {"p1-t1-0": 0.0, "p1-t1-1": 0.0}
