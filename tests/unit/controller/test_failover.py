"""Failures: path math against brute force on the graph, targeted deltas, repair, state file."""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Mapping
from pathlib import Path

import networkx as nx
import pytest

from controller.plan.entries import Entity, Lpm, TableEntry, entity_key
from controller.plan.p4names import PINNED_PATH
from controller.failover import dead_paths, delta, unreachable, with_failures
from controller.state.statefile import load_state, save_state
from controller.model.failures import FailoverError, HostPortDown, LinkDown, SwitchDown, Unreachable
from controller.plan.fabricplan import diff_plans, plan
from controller.plan.delta import Delta
from controller.routes import SPRAY, Fabric, Options
from controller.plan.p4names import EECMP, SPRAY_PATHS
from controller.plan.options import Pin
from controller.model.topology import Topology, build

TOPO = build(2, 4, 6, 2)


def _random_failures(rnd: random.Random, topo: Topology, n: int) -> list:  # type: ignore[type-arg]
    pool: list = []  # type: ignore[type-arg]
    for p in range(topo.planes):
        pool += [LinkDown(a.name, b.name) for a in topo.t0s(p) for b in topo.t1s(p)]
        pool += [HostPortDown(a.name, port) for a in topo.t0s(p) for port in a.host_ports]
        pool += [SwitchDown(s.name) for s in (*topo.t0s(p), *topo.t1s(p))]
    return rnd.sample(pool, n)


def _brute_force(topo: Topology, failures: list, plane: int) -> dict[tuple[int, int], set[int]]:  # type: ignore[type-arg]
    g: nx.Graph = topo.graph.subgraph(s.name for s in topo.switches if s.plane == plane).copy()
    for f in failures:
        if isinstance(f, LinkDown) and g.has_edge(f.t0, f.t1):
            g.remove_edge(f.t0, f.t1)
        elif isinstance(f, SwitchDown) and f.name in g:
            g.remove_node(f.name)
    out = {}
    for a in topo.t0s(plane):
        for b in topo.t0s(plane):
            if a is b:
                continue
            found = set()
            if a.name in g and b.name in g:
                for path in nx.all_simple_paths(g, a.name, b.name, cutoff=2):
                    found.add(topo.switch(path[1]).index)
            out[a.index, b.index] = found
    return out


def _apply(entities: tuple[Entity, ...], d: Delta | None) -> set[Entity]:
    if d is None:
        return set(entities)
    held = {entity_key(e): e for e in entities}
    for e in d.deletes:
        del held[entity_key(e)]
    for e in d.inserts:
        assert entity_key(e) not in held
        held[entity_key(e)] = e
    for e in d.modifies:
        assert entity_key(e) in held
        held[entity_key(e)] = e
    return set(held.values())


def _assert_delta_is_exact(old: Mapping[str, tuple[Entity, ...]], new: Mapping[str, tuple[Entity, ...]],
                           d: dict[str, Delta]) -> None:
    for name in new:
        assert _apply(old[name], d.get(name)) == set(new[name]), name


@pytest.mark.parametrize("seed", range(12))
def test_path_math_matches_brute_force(seed: int) -> None:
    rnd = random.Random(seed)
    fails = _random_failures(rnd, TOPO, rnd.randint(1, 8))
    f = with_failures(Fabric(TOPO), fails)
    for plane in range(TOPO.planes):
        brute = _brute_force(TOPO, fails, plane)
        for (s, d), spines in brute.items():
            assert set(f.path_spines(plane, s, d)) == spines
    dead = {(p.plane, p.src, p.spine, p.dst) for p in dead_paths(f)}
    expect = {(pl, s, j, d) for pl in range(TOPO.planes) for (s, d), sp in _brute_force(TOPO, fails, pl).items()
              for j in range(4) if j not in sp}
    assert dead == expect


@pytest.mark.parametrize("program", [SPRAY, EECMP])
@pytest.mark.parametrize("seed", range(10))
def test_delta_changes_exactly_the_affected_entities_and_repair_restores(program: str, seed: int) -> None:
    rnd = random.Random(100 + seed)
    base = Fabric(TOPO, options=Options(program=program, pins=(Pin(0, 0, 3, 1, 5, 2),)))  # type: ignore[arg-type]
    healthy = plan(base)
    healthy_entities = dict(healthy.items())
    fails = _random_failures(rnd, TOPO, rnd.randint(1, 6))
    broken = with_failures(base, fails)
    broken_entities = dict(plan(broken).items())
    d = delta(base, broken)
    assert d == diff_plans(broken_entities, healthy_entities)
    _assert_delta_is_exact(healthy_entities, broken_entities, d)
    # repair some, then all: plan(failures - repaired) is reached, and finally the original plan
    repaired = fails[: len(fails) // 2]
    partly = with_failures(base, [x for x in fails if x not in repaired])
    d2 = delta(broken, partly)
    assert d2 == diff_plans(dict(plan(partly).items()), broken_entities)
    back = delta(partly, with_failures(partly, []))
    _assert_delta_is_exact(dict(plan(partly).items()), healthy_entities, back)
    assert plan(with_failures(broken, [])) == healthy


def test_one_remote_link_makes_exception_groups_only_for_that_destination() -> None:
    base = Fabric(TOPO)
    d = delta(base, with_failures(base, [LinkDown("p0-t0-3", "p0-t1-1")]))
    assert set(d) == {"p0-t0-0", "p0-t0-1", "p0-t0-2", "p0-t0-3", "p0-t0-4", "p0-t0-5", "p0-t1-1"}
    other = d["p0-t0-0"]
    assert [type(e).__name__ for e in other.inserts] == ["ActionProfileGroup", "TableEntry"]
    assert other.inserts[0].members == (1, 3, 4)  # type: ignore[union-attr]
    # the destination's /64 goes to the exception group, ahead of the plane aggregate (group 1)
    assert [(e.table, e.match, e.group_id) for e in other.inserts[1:]] == [  # type: ignore[union-attr]
        (SPRAY_PATHS, (("dst_addr", Lpm("fd00:0:3::", 64)),), 5)]
    assert not other.deletes and not other.modifies
    own = d["p0-t0-3"]  # drops member 2 from its shared group, and its route to p0-t1-1
    assert len(own.deletes) == 2 and [e.members for e in own.modifies] == [(1, 3, 4)]  # type: ignore[union-attr]


def test_isolated_destination_is_reported_not_given_an_empty_group() -> None:
    f = with_failures(Fabric(TOPO), [LinkDown("p1-t0-2", f"p1-t1-{j}") for j in range(4)]
                      + [LinkDown("p0-t0-0", "p0-t1-0"), LinkDown("p0-t0-0", "p0-t1-1"),
                         LinkDown("p0-t0-1", "p0-t1-2"), LinkDown("p0-t0-1", "p0-t1-3"),
                         HostPortDown("p0-t0-5", 2)])
    assert unreachable(f) == [Unreachable(0, "p0-t0-0", "p0-t0-1"), Unreachable(0, "p0-t0-1", "p0-t0-0"),
                              Unreachable(0, "h11"), Unreachable(1, "p1-t0-2")]
    assert str(unreachable(f)[0]) == "plane 0: p0-t0-0 unreachable from p0-t0-1"
    leaf = plan(f)["p1-t0-0"]
    assert not [e for e in leaf if getattr(e, "table", None) == SPRAY_PATHS
                and e.match[0][1].value == "fd00:1:2::"]  # type: ignore[union-attr]


def test_state_file_round_trip(tmp_path: Path) -> None:
    fails = {LinkDown("p0-t0-1", "p0-t1-0"), SwitchDown("p1-t1-3"), HostPortDown("p0-t0-0", 2)}
    path = tmp_path / "failures.json"
    assert load_state(path) == frozenset()
    save_state(path, fails)
    assert load_state(path) == fails
    restarted = with_failures(Fabric(TOPO), load_state(path))
    assert plan(restarted) == plan(with_failures(Fabric(TOPO), fails))
    path.write_text("{not json")
    with pytest.raises(FailoverError, match="failures.json: not valid JSON"):
        load_state(path)


@pytest.mark.parametrize("failure, message", [
    (LinkDown("p0-t0-0", "p1-t1-0"), "no link p0-t0-0 -- p1-t1-0: planes 0 and 1"),
    (LinkDown("p0-t1-0", "p0-t0-0"), "p0-t1-0 is a t1, expected a t0"),
    (SwitchDown("nope"), "unknown switch 'nope'"),
    (HostPortDown("p0-t0-0", 7), "port 7 of p0-t0-0 does not face a host"),
])
def test_bad_failures(failure, message: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(FailoverError) as err:
        with_failures(Fabric(TOPO), [failure])
    assert str(err.value) == message


@pytest.mark.parametrize("program", [SPRAY, EECMP])
@pytest.mark.parametrize("seed", range(15))
def test_spine_failure_delta_equals_whole_plan_diff_with_other_failures_around(program: str, seed: int) -> None:
    """A T1 failing (or repaired) among other failures: the targeted delta is the whole-plan diff."""
    rnd = random.Random(500 + seed)
    base = Fabric(TOPO, options=Options(program=program, pins=(Pin(0, 0, 3, 1, 5, 2),)))  # type: ignore[arg-type]
    others = _random_failures(rnd, TOPO, rnd.randint(0, 4))
    spine = SwitchDown(TOPO.t1(rnd.randrange(TOPO.planes), rnd.randrange(4)).name)
    before = with_failures(base, others)
    after = with_failures(base, [*others, spine])
    old, new = dict(plan(before).items()), dict(plan(after).items())
    assert delta(before, after) == diff_plans(new, old)
    assert delta(after, before) == diff_plans(old, new)


@pytest.mark.parametrize("program", [SPRAY, EECMP])
def test_a_spine_failure_that_cuts_a_leafs_last_uplink_delta_equals_whole_plan_diff(program: str) -> None:
    """The spine that fails is the last live uplink of p0-t0-0 (its other three links are down): that leaf is
    re-planned in full, and the targeted delta is still the whole-plan diff, both ways."""
    base = Fabric(TOPO, options=Options(program=program))  # type: ignore[arg-type]
    others = [LinkDown("p0-t0-0", f"p0-t1-{j}") for j in (1, 2, 3)]
    before = with_failures(base, others)
    after = with_failures(base, [*others, SwitchDown("p0-t1-0")])
    old, new = dict(plan(before).items()), dict(plan(after).items())
    assert delta(before, after) == diff_plans(new, old)
    assert delta(after, before) == diff_plans(old, new)


@pytest.mark.parametrize("src", [0, 2])
@pytest.mark.parametrize("cut", ["link", "host_port"])
def test_a_failure_on_a_pinned_path_away_from_its_source_leaf_removes_the_pin(cut: str, src: int) -> None:
    """srv6_spray pins (leaf `src` -> host slot 1 of leaf 3, QP 5) to spine 2; leaf 3's link to spine 2 (or that
    host's port) failing kills the pinned path while the source leaf has no failure of its own: it loses the pin,
    unlike its unpinned neighbours (before or after it), and the targeted delta is the whole-plan diff, both ways."""
    base = Fabric(TOPO, options=Options(program=SPRAY, pins=(Pin(0, src, 3, 1, 5, 2),)))  # type: ignore[arg-type]
    failure = LinkDown("p0-t0-3", "p0-t1-2") if cut == "link" else HostPortDown("p0-t0-3", TOPO.t0(0, 3).host_ports[1])
    after = with_failures(base, [failure])
    old, new = dict(plan(base).items()), dict(plan(after).items())
    d = delta(base, after)
    assert d == diff_plans(new, old)
    assert delta(after, base) == diff_plans(old, new)
    name = TOPO.t0(0, src).name
    pins = [e for e in plan(base)[name] if isinstance(e, TableEntry) and e.table == PINNED_PATH]
    assert len(pins) == 1 and pins[0] in d[name].deletes
    assert not any(isinstance(e, TableEntry) and e.table == PINNED_PATH for e in plan(after)[name])


def test_a_leaf_already_cut_off_then_failing_whole_delta_equals_whole_plan_diff() -> None:
    """p0-t0-1 has every link and host port down already; the switch itself failing too changes nothing its
    links or ports say: the targeted delta is still the whole-plan diff, both ways."""
    leaf = TOPO.t0(0, 1)
    others = [*(LinkDown(leaf.name, s.name) for s in TOPO.t1s(0)), *(HostPortDown(leaf.name, p) for p in leaf.host_ports)]
    base = Fabric(TOPO)
    before = with_failures(base, others)
    after = with_failures(base, [*others, SwitchDown(leaf.name)])
    old, new = dict(plan(before).items()), dict(plan(after).items())
    assert delta(before, after) == diff_plans(new, old)
    assert delta(after, before) == diff_plans(old, new)


def test_a_dead_host_port_with_no_host_named_is_reported_by_its_port() -> None:
    """A leaf whose hosts the topology does not name: its dead host port is unreachable under the port's name."""
    switches = tuple(dataclasses.replace(s, host_names=()) if s.name == "p0-t0-1" else s for s in TOPO.switches)
    unnamed = dataclasses.replace(TOPO, switches=switches, _by_name={}, _t0=(), _t1=())
    port = unnamed.t0(0, 1).host_ports[0]
    assert unreachable(with_failures(Fabric(unnamed), [HostPortDown("p0-t0-1", port)])) == [
        Unreachable(0, f"p0-t0-1 port {port}")]
    assert unreachable(with_failures(Fabric(TOPO), [HostPortDown("p0-t0-1", port)])) == [
        Unreachable(0, TOPO.t0(0, 1).host_names[0])]
