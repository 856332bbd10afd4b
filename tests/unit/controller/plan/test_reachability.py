"""Reach (positions, bitmasks) against failover.unreachable and against networkx path enumeration."""

from __future__ import annotations

import networkx as nx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.failover import health, unreachable, with_failures
from controller.model.failures import HostPortDown, LinkDown, SwitchDown, Unreachable
from controller.plan.reachability import Reach
from controller.routes import Fabric
from controller.model.topology import Topology, build

pytestmark = pytest.mark.unit


@st.composite
def designs_and_failures(draw: st.DrawFn) -> tuple[Topology, list]:  # type: ignore[type-arg]
    topo = build(draw(st.integers(1, 3)), draw(st.integers(1, 4)), draw(st.integers(1, 5)), draw(st.integers(0, 2)))
    pool: list = []  # type: ignore[type-arg]
    for p in range(topo.planes):
        pool += [LinkDown(a.name, b.name) for a in topo.t0s(p) for b in topo.t1s(p)]
        pool += [HostPortDown(a.name, port) for a in topo.t0s(p) for port in a.host_ports]
        pool += [SwitchDown(s.name) for s in (*topo.t0s(p), *topo.t1s(p))]
    failures = draw(st.lists(st.sampled_from(pool), max_size=min(len(pool), 12), unique=True))
    return topo, failures


def _reach(topo: Topology, failures: list) -> list[Unreachable]:  # type: ignore[type-arg]
    h = health(topo, failures)
    return Reach.of(topo).unreachable(h.links, h.leaves, h.spines, h.slots)


@settings(max_examples=300, deadline=None)
@given(designs_and_failures())
def test_reach_equals_failover_unreachable(case: tuple[Topology, list]) -> None:  # type: ignore[type-arg]
    topo, failures = case
    assert _reach(topo, failures) == unreachable(with_failures(Fabric(topo), failures))


@settings(max_examples=200, deadline=None)
@given(designs_and_failures())
def test_reach_pairs_equal_networkx_paths(case: tuple[Topology, list]) -> None:  # type: ignore[type-arg]
    """Every ordered leaf pair: the live path count is the number of leaf-spine-leaf paths left."""
    topo, failures = case
    h = health(topo, failures)
    planes = Reach.of(topo).of_health(h)
    g = topo.graph.copy()
    for f in failures:
        if isinstance(f, LinkDown) and g.has_edge(f.t0, f.t1):
            g.remove_edge(f.t0, f.t1)
        elif isinstance(f, SwitchDown) and f.name in g:
            g.remove_node(f.name)
    for p, r in enumerate(planes):
        for a in topo.t0s(p):
            for b in topo.t0s(p):
                if a is b:
                    continue
                paths = ([] if a.name not in g or b.name not in g
                         else list(nx.all_simple_paths(g, a.name, b.name, cutoff=2)))
                assert r.path_count(a.index, b.index) == len(paths)
                assert r.leaf_pair_ok(a.index, b.index) == bool(paths)
                assert ((a.index, b.index) in r.cut) == (not paths and not r.down
                                                         and a.index not in r.isolated and b.index not in r.isolated)


def test_a_leaf_cut_from_another_by_disjoint_uplinks() -> None:
    topo = build(1, 2, 3, 1)
    failures = [LinkDown("p0-t0-0", "p0-t1-0"), LinkDown("p0-t0-1", "p0-t1-1"), HostPortDown("p0-t0-2", 1)]
    (r,) = Reach.of(topo).planes_reach(links=[(0, 0, 0), (0, 1, 1)], slots=[(0, 2, 0)])
    assert (r.cut, r.isolated, r.dead_slots, r.ok) == (((1, 0), (0, 1)), (), ((2, 0),), False)
    assert r.path_count(0, 2) == 1 and r.path_count(0, 1) == 0
    assert _reach(topo, failures) == [Unreachable(0, "p0-t0-0", "p0-t0-1"), Unreachable(0, "p0-t0-1", "p0-t0-0"),
                                      Unreachable(0, "h2")]


def test_every_spine_down_takes_the_plane_down() -> None:
    (r,) = Reach.regular(1, 2, 3).planes_reach(spines=[(0, 0), (0, 1)])
    assert r.down and not r.ok and not r.leaf_pair_ok(0, 1) and not r.leaf_pair_ok(0, 0)


def test_unreachable_needs_names() -> None:
    with pytest.raises(ValueError, match="needs names"):
        Reach.regular(1, 2, 3).unreachable()
