"""Host loop probes: their carriers from the uSID plan, localization from hand-made outcome tables (each loop
answered unless it crosses a broken directed link), the EVs a failure denies and the merged denylist."""

from __future__ import annotations

from collections.abc import Iterable

from controller.plan.evs import ev_id, host_evs
from controller.routes import Fabric, Path
from controller.model.sids import fmt_v6
from controller.model.topology import build
from controller.plan.evs import export
from endpoint.clustermap import (Denylist, Link, LoopProbe, denied_evs, fabric_denied, link_kind, localize,
                                  loop_probes)

FABRIC = Fabric(build(2, 4, 2, 2))  # h0 h1 on t0-0, h2 h3 on t0-1, in both planes; 4 spines per plane
UP, DOWN = ("p0-t0-0", "p0-t1-1"), ("p0-t1-1", "p0-t0-0")


def probes(host: str) -> list[LoopProbe]:
    return loop_probes(FABRIC.topo, FABRIC.sids, host)


def outcomes(ps: list[LoopProbe], broken: Iterable[Link]) -> dict[str, bool]:
    cut = set(broken)
    return {p.name: not cut & set(p.links) for p in ps}


def test_the_loops_are_carriers_of_the_usid_plan_as_it_is():
    ps = {p.name: p for p in probes("h0")}
    assert len(ps) == 2 * (1 + 4 + 4 * 3)  # per plane: the NIC, each spine, each ordered spine pair via t0-1
    nic = ps["p0-t0-0 nic"]
    assert (nic.carrier, nic.links) == ("fcbb:bb00:400:fff::", (("h0", "p0-t0-0"), ("p0-t0-0", "h0")))
    spine = ps["p0-t0-0 via p0-t1-1"]
    assert spine.carrier == "fcbb:bb00:2:400:fff::" == fmt_v6(Path(0, 0, 1, 0).carrier(FABRIC.sids))
    assert spine.links == (("h0", "p0-t0-0"), UP, DOWN, ("p0-t0-0", "h0"))
    cycle = ps["p0-t0-0 p0-t1-1>p0-t0-1>p0-t1-2"]
    assert cycle.carrier == "fcbb:bb00:2:401:3:400:fff:0"
    assert cycle.links == (("h0", "p0-t0-0"), UP, ("p0-t1-1", "p0-t0-1"), ("p0-t0-1", "p0-t1-2"),
                           ("p0-t1-2", "p0-t0-0"), ("p0-t0-0", "h0"))
    assert ps["p1-t0-0 nic"].carrier == "fcbb:bb00:1400:1fff::" and ps["p1-t0-0 nic"].plane == 1
    assert all(FABRIC.sids.parse(p.carrier) == p.usids for p in ps.values())
    assert len(loop_probes(FABRIC.topo, FABRIC.sids, "h0", cycles=False)) == 2 * 5


def test_nothing_broken_nothing_failed():
    ps = probes("h0")
    got = localize(ps, outcomes(ps, []))
    assert (got.failed, got.lost) == (frozenset(), ())
    assert len(got.good) == 2 * (2 + 2 * 4 + 2 * 4)  # every directed link of both planes' loops


def test_a_dead_spine_is_its_links_to_the_hosts_own_leaf_both_ways_at_every_leaf():
    dead = [(leaf, "p0-t1-1") for leaf in ("p0-t0-0", "p0-t0-1")] + [("p0-t1-1", leaf) for leaf in ("p0-t0-0", "p0-t0-1")]
    for host, leaf in (("h0", "p0-t0-0"), ("h3", "p0-t0-1")):
        ps = probes(host)
        got = localize(ps, outcomes(ps, dead))
        assert got.failed == {(leaf, "p0-t1-1"), ("p0-t1-1", leaf)}, host
        assert len(got.lost) == 1 + 3 + 3  # its spine loop, the cycles up it and the ones down it


def test_one_direction_of_a_leaf_spine_link_is_told_from_the_other_by_both_leaves():
    for broken in (UP, DOWN):
        for host in ("h0", "h1", "h2", "h3"):
            ps = probes(host)
            got = localize(ps, outcomes(ps, [broken]))
            assert got.failed == {broken}, (broken, host)
    assert link_kind(FABRIC.topo, UP) == "t0-t1" and link_kind(FABRIC.topo, DOWN) == "t1-t0"


def test_a_nic_link_is_its_nic_both_ways_and_nothing_of_the_fabric():
    ps = probes("h0")
    got = localize(ps, outcomes(ps, [("h0", "p0-t0-0")]))
    assert got.failed == {("h0", "p0-t0-0"), ("p0-t0-0", "h0")}
    assert len(got.lost) == 17  # every loop of plane 0, none of plane 1
    assert [link_kind(FABRIC.topo, link) for link in sorted(got.failed)] == ["nic-t0", "t0-nic"]
    assert got.to_json(FABRIC.topo)["failed"] == [{"from": "h0", "to": "p0-t0-0", "kind": "nic-t0"},
                                                  {"from": "p0-t0-0", "to": "h0", "kind": "t0-nic"}]


def test_a_loop_not_sent_says_nothing():
    ps = probes("h0")
    told = {k: v for k, v in outcomes(ps, [DOWN]).items() if k != "p0-t0-0 via p0-t1-1"}
    got = localize(ps, told)
    # without the spine loop, the cycles down p0-t1-1 cannot tell its way in from t0-1 from its way out
    # to t0-0 (they cross both, and nothing answered crossed either): both kept
    assert got.failed == {DOWN, ("p0-t0-1", "p0-t1-1")} and "p0-t0-0 via p0-t1-1" not in got.lost
    assert localize(ps, {}).failed == frozenset()


def test_the_evs_denied_are_those_crossing_a_failed_link():
    h0 = host_evs(FABRIC, "h0")
    assert denied_evs("h0", h0, {UP, DOWN}) == {"h2": [ev_id(0, 1)], "h3": [ev_id(0, 1)]}
    assert denied_evs("h0", h0, {DOWN}) == {}  # h0 sends up that link only
    h2 = host_evs(FABRIC, "h2")
    assert denied_evs("h2", h2, {DOWN}) == {"h0": [ev_id(0, 1)], "h1": [ev_id(0, 1)]}  # the far leaf's way in
    exported = {d: [e.to_json() for e in evs] for d, evs in h2.items()}
    assert denied_evs("h2", exported, {DOWN}) == denied_evs("h2", h2, {DOWN})
    assert denied_evs("h0", h0, {("h0", "p1-t0-0")}) == {"h2": [1024, 1025, 1026, 1027], "h3": [1024, 1025, 1026, 1027]}


def test_the_denylist_merges_the_reports_with_who_saw_each_link():
    merged = Denylist.from_reports({"h0": [UP, DOWN], "h2": [DOWN], "h3": []})
    assert merged.links == {UP, DOWN}
    assert merged.to_json() == [{"from": "p0-t0-0", "to": "p0-t1-1", "seen_by": ["h0"]},
                                {"from": "p0-t1-1", "to": "p0-t0-0", "seen_by": ["h0", "h2"]}]
    assert Denylist.from_reports({"h0": []}).to_json() == []


def test_the_fabric_wide_denylist_denies_at_every_host_whose_evs_cross_a_failed_link():
    doc = export(FABRIC)
    one = [ev_id(0, 1)]
    assert fabric_denied(doc, {DOWN}) == {"h2": {"h0": one, "h1": one}, "h3": {"h0": one, "h1": one}}
    assert fabric_denied(doc, {UP, DOWN}) == {"h0": {"h2": one, "h3": one}, "h1": {"h2": one, "h3": one},
                                              "h2": {"h0": one, "h1": one}, "h3": {"h0": one, "h1": one}}
    assert fabric_denied(doc, set()) == {}
