"""analysis.reach: the fast job/pair reachability equals the controller's failover answer and
brute-force networkx path enumeration (valley-free T0-T1-T0 paths) on small designs."""

from __future__ import annotations

import itertools

import networkx as nx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.analysis.design import KINDS, Design
from controller.analysis.reach import ControllerReach, Down, failures
from controller.model.failures import HostPortDown, LinkDown, SwitchDown
from controller.model.topology import Topology

SMALL = [Design(1, 2, 2, 2), Design(2, 2, 2, 2), Design(2, 1, 3, 1), Design(3, 2, 2, 1), Design(2, 3, 2, 2)]
_REACH: dict[str, ControllerReach] = {}


def reach(d: Design) -> ControllerReach:
    if d.spec not in _REACH:
        _REACH[d.spec] = ControllerReach(d)
    return _REACH[d.spec]


def nx_paths(topo: Topology, fails: list, a: int, b: int) -> int:
    """Simple paths of at most 4 hops from host a to host b with no other host on them (hosts do not
    forward), in the topology's graph minus the failed links, switches and host ports."""
    g = topo.graph.copy()
    for f in fails:
        if isinstance(f, LinkDown):
            g.remove_edge(f.t0, f.t1)
        elif isinstance(f, SwitchDown):
            g.remove_node(f.name)
        elif isinstance(f, HostPortDown) and g.has_node(f.t0):
            leaf = topo.switch(f.t0)
            g.remove_edge(f.t0, leaf.host_names[leaf.host_ports.index(f.port)])
    g.remove_nodes_from([h for h in topo.hosts if h not in (f"h{a}", f"h{b}")])
    return sum(1 for _ in nx.all_simple_paths(g, f"h{a}", f"h{b}", cutoff=4))


def down_of(d: Design, picks: list[tuple[str, int]]) -> Down:
    down = Down(d)
    for kind, index in picks:
        down.add(kind, index % d.count(kind))  # type: ignore[arg-type]
    return down


def check(d: Design, down: Down) -> None:
    topo = reach(d).topo
    fails = failures(down)
    hosts = range(d.hosts)
    by_controller = reach(d).cut_pairs(down, hosts)
    fast = {(a, b) for a, b in itertools.combinations(hosts, 2) if not down.connected(a, b)}
    assert fast == by_controller
    for a, b in itertools.combinations(hosts, 2):
        paths = sum(down.plane_paths(p, a, b) for p in range(d.planes))
        assert paths == nx_paths(topo, fails, a, b), (a, b, fails)
    assert down.job_cut(hosts) == bool(fast)
    for n in range(2, d.hosts + 1):
        assert down.job_cut(range(n)) == any(a < n and b < n for a, b in fast)


@pytest.mark.parametrize("d", SMALL, ids=lambda d: d.spec)
def test_every_set_of_up_to_two_failures_agrees(d: Design) -> None:
    comps = [(k, i) for k in KINDS for i in range(d.count(k))]
    for size in (0, 1, 2):
        for picks in itertools.combinations(comps, size):
            check(d, down_of(d, list(picks)))


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(SMALL), st.lists(st.tuples(st.sampled_from(KINDS), st.integers(0, 63)), max_size=8))
def test_random_failure_sets_agree(d: Design, picks: list[tuple[str, int]]) -> None:
    check(d, down_of(d, picks))


def test_failures_name_the_controllers_components() -> None:
    d = Design(2, 2, 2, 2)
    down = down_of(d, [("link", 5), ("t1", 3), ("t0", 0), ("nic", 7)])
    assert failures(down) == [LinkDown("p1-t0-0", "p1-t1-1"), SwitchDown("p1-t1-1"), SwitchDown("p0-t0-0"),
                              HostPortDown("p1-t0-1", 2)]
    assert down.host_up(0, 0) is False and down.host_up(1, 3) is False and down.host_up(1, 2) is True


def test_job_cut_on_a_large_design_sees_a_pair_split_across_planes() -> None:
    """Two planes, 131072 hosts: host 5 loses plane 0, host 70000 plane 1: exactly they are cut."""
    d = Design(2, 64, 512, 256)
    down = Down(d)
    down.add("nic", 5)
    assert not down.job_cut(range(d.hosts))
    down.add("nic", d.hosts + 70000)
    assert down.job_cut(range(d.hosts))
    assert not down.job_cut(range(70000))
    assert not down.connected(5, 70000) and down.connected(5, 6)


def test_uplink_capacity_counts_links_of_down_switches_once() -> None:
    d = Design(1, 2, 4, 1)
    down = down_of(d, [("link", 0), ("t0", 0), ("t1", 1)])
    # t0 0 takes links (0,0),(0,1); t1 1 takes (i,1) for 4 leaves; link (0,0) already counted
    assert down.uplink_capacity_lost() == 5 / 8
