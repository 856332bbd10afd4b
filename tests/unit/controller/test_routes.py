"""Static paths, per-switch entities for both programs, counts and plan JSON."""

from __future__ import annotations

import ipaddress
import random

import pytest

from controller.plan.entries import ActionProfileGroup, ActionProfileMember, Lpm, TableEntry
from controller.failover import with_failures
from controller.model.failures import LinkDown, SwitchDown, HostPortDown
from controller.plan.fabricplan import Plan, count_entities, plan
from controller.routes import LOCAL_LEAF, PINNED_PATH, SPRAY, SPRAY_DEST, VIA_SPINE, Fabric, Options, paths
from controller.plan.p4names import DERIVE_SPRAY, EECMP, NO_PATH, QP, SPRAY_PATHS
from controller.plan.options import Pin, leaf_blocks
from controller.model.sids import SidPlan, fmt_v6
from controller.model.topology import build, load
from tests.paths import REPO

ROOT = REPO


def _params(entity: TableEntry | ActionProfileMember) -> dict[str, object]:
    return dict(entity.params)


def test_paths_and_carriers() -> None:
    topo = build(2, 3, 4, 1)
    sids = SidPlan()
    ps = list(paths(topo, 1, 0, 2))
    assert [(p.spine, p.dst) for p in ps] == [(0, 2), (1, 2), (2, 2)]
    assert fmt_v6(ps[2].carrier(sids)) == "fcbb:bb00:1003:1402:1fff::"
    # what the switch builds: block | spine_usid (member) | t0_usid_base + leaf field of the
    # destination address | decap_usid (derive_spray of the plane aggregate) | 0
    f = Fabric(topo)
    leaf = plan(f)["p1-t0-0"]
    (dest,) = [e for e in leaf if isinstance(e, TableEntry) and e.table == SPRAY_DEST and e.action == DERIVE_SPRAY]
    assert dest.match == (("dst_addr", Lpm("fd00:1::", 46)),)  # leaves 0..3
    member = next(e for e in leaf if isinstance(e, ActionProfileMember) and _params(e)["path_index"] == 2)
    leaf_field = sids.host_v6(1, 2, 0) >> 80 & 0xFFFF
    dst_usids = (int(_params(dest)["t0_usid_base"]) + leaf_field) << 16 | int(_params(dest)["decap_usid"])  # type: ignore[call-overload]
    built = sids.block << 96 | int(_params(member)["spine_usid"]) << 80 | dst_usids << 48  # type: ignore[call-overload]
    assert built == ps[2].carrier(sids)


@pytest.mark.parametrize(("leaves", "blocks"), [(1, [(0, 0)]), (6, [(0, 2), (4, 1)]), (512, [(0, 9)]),
                                                (7, [(0, 2), (4, 1), (6, 0)])])
def test_leaf_blocks_cover_the_leaves_exactly(leaves: int, blocks: list[tuple[int, int]]) -> None:
    assert leaf_blocks(leaves) == blocks
    covered = [i for start, bits in leaf_blocks(leaves) for i in range(start, start + (1 << bits))]
    assert covered == list(range(leaves))


def test_own_leaf_unreachable_and_exception_destinations_beyond_the_aggregate() -> None:
    f = with_failures(Fabric(build(1, 2, 3, 1)), [LinkDown("p0-t0-1", "p0-t1-0"), LinkDown("p0-t0-2", "p0-t1-1")])
    dest = {(e.match[0][1].value, e.match[0][1].prefix_len): (e.action, e.group_id)  # type: ignore[union-attr]
            for e in plan(f)["p0-t0-0"] if isinstance(e, TableEntry) and e.table in (SPRAY_DEST, SPRAY_PATHS)
            and e.action != DERIVE_SPRAY}
    assert dest == {("fd00::", 47): (None, 1), ("fd00:0:2::", 48): (None, 1),  # spray_paths aggregate
                    ("fd00:0:1::", 64): (None, 3), ("fd00:0:2::", 64): (None, 4),  # exception groups
                    ("fd00::", 64): (LOCAL_LEAF, None)}
    cut = {(e.match[0][1].value, e.action) for e in plan(f)["p0-t0-1"]  # type: ignore[union-attr]
           if isinstance(e, TableEntry) and e.table == SPRAY_DEST and e.action != DERIVE_SPRAY}
    assert cut == {("fd00:0:1::", LOCAL_LEAF), ("fd00:0:2::", NO_PATH)}  # p0-t0-1 and -2 share no spine


def test_lab_leaf_entities() -> None:
    f = Fabric(load(ROOT / "examples" / "two_plane_lab.yaml"))
    counts = plan(f).counts()
    assert counts["p0-t0-0"] == {
        "IngressPipe.headend.spray_selector/members": 2, "IngressPipe.headend.spray_selector/groups": 1,
        "IngressPipe.endpoint.my_sid": 4, "IngressPipe.routing.routes_v6": 5,
        "IngressPipe.headend.spray_dest": 2, "IngressPipe.headend.spray_paths": 1,
        "IngressPipe.cpu.punt": 3,  # a probe punt per uplink, one for the hosts' NAs to the probe address
        "IngressPipe.boundary.host_policy": 2}
    # the spine's uN, and per leaf its uN with the next hop (2) beside the leaf's route
    assert counts["p1-t1-1"] == {"IngressPipe.endpoint.my_sid": 3, "IngressPipe.routing.routes_v6": 3,
                                 "IngressPipe.cpu.punt": 2}


@pytest.mark.parametrize("program", [SPRAY, EECMP])
def test_lpm_values_have_zero_host_bits_and_groups_are_whole(program: str) -> None:
    f = with_failures(Fabric(build(2, 3, 5, 2), options=Options(program=program)),  # type: ignore[arg-type]
                      [LinkDown("p0-t0-1", "p0-t1-0"), LinkDown("p0-t0-2", "p0-t1-1")])
    for name, entities in plan(f).items():
        members = {e.member_id for e in entities if isinstance(e, ActionProfileMember)}
        groups = {e.group_id: e for e in entities if isinstance(e, ActionProfileGroup)}
        assert all(g.members and set(g.members) <= members for g in groups.values()), name
        for e in entities:
            if isinstance(e, TableEntry):
                assert e.group_id is None or e.group_id in groups, (name, e)
                assert e.member_id is None or e.member_id in members, (name, e)
                for _, m in e.match:
                    if isinstance(m, Lpm):
                        ipaddress.IPv6Network(f"{m.value}/{m.prefix_len}", strict=True)


@pytest.mark.parametrize("program", [SPRAY, EECMP])
def test_entities_grow_with_ports_not_leaf_pairs(program: str) -> None:
    def leaf_counts(leaves: int) -> dict[str, int]:
        fabric = Fabric(build(1, 4, leaves, 3), options=Options(program=program))  # type: ignore[arg-type]
        return count_entities(plan(fabric)["p0-t0-0"])
    small, big = leaf_counts(4), leaf_counts(16)
    for key in small:
        if key.endswith(("/members", "/groups")):
            assert small[key] == big[key], key  # one shared group, one member per uplink/host port
    if program == SPRAY:  # one aggregate prefix for 4 or 16 leaves, and the leaf's own /64
        assert big[SPRAY_PATHS] == 1 and big[SPRAY_DEST] == 2
        assert big["IngressPipe.headend.spray_selector/groups"] == 1
    assert big == small  # eecmp: one plane route serves every leaf


@pytest.mark.parametrize("program", [SPRAY, EECMP])
def test_counts_without_entities_equal_counted_entities(program: str) -> None:
    rnd = random.Random(3)
    topo = build(2, 4, 6, 3)
    base = Fabric(topo, options=Options(program=program, pins=(Pin(0, 1, 2, 0, 77, 3),)))  # type: ignore[arg-type]
    for _ in range(15):
        fails = rnd.sample([LinkDown(f"p{p}-t0-{i}", f"p{p}-t1-{j}") for p in range(2) for i in range(6)
                            for j in range(4)], 5)
        fails += [SwitchDown(rnd.choice(["p0-t1-1", "p1-t0-3"])), HostPortDown("p0-t0-2", 2)]
        f = with_failures(base, fails[: rnd.randint(0, len(fails))])
        p = plan(f)
        assert p.counts() == {n: count_entities(es) for n, es in p.items()}


def test_pins_and_modes() -> None:
    topo = build(1, 3, 3, 2)
    f = Fabric(topo, options=Options(mode=QP, dest_modes=((0, 2, 0),), pins=(Pin(0, 0, 2, 1, 0x11, 2),)))
    leaf = plan(f)["p0-t0-0"]
    pinned = [e for e in leaf if isinstance(e, TableEntry) and e.table == PINNED_PATH]
    assert len(pinned) == 1 and pinned[0].action == VIA_SPINE
    assert dict(pinned[0].match)["dst_addr"].value == "fd00:0:2::2"  # type: ignore[union-attr]
    modes = {(e.match[0][1].value, e.match[0][1].prefix_len): _params(e)["mode"] for e in leaf  # type: ignore[union-attr]
             if isinstance(e, TableEntry) and e.table == SPRAY_DEST and e.action == DERIVE_SPRAY}
    assert modes == {("fd00::", 47): QP, ("fd00:0:2::", 48): QP, ("fd00:0:2::", 64): 0}
    cut = with_failures(f, [LinkDown("p0-t0-2", "p0-t1-2")])
    assert not [e for e in plan(cut)["p0-t0-0"] if isinstance(e, TableEntry) and e.table == PINNED_PATH]


@pytest.mark.parametrize("program", [SPRAY, EECMP])
def test_plan_json_round_trip(program: str) -> None:
    f = with_failures(Fabric(build(2, 2, 3, 2), options=Options(program=program)),  # type: ignore[arg-type]
                      [LinkDown("p1-t0-0", "p1-t1-1")])
    p = plan(f)
    again = Plan.from_json(p.to_json())
    assert again == p and dict(again.items()) == dict(p.items())
    assert again.counts() == p.counts()


@pytest.mark.parametrize("program", [SPRAY, EECMP])
def test_every_entity_encodes_against_the_compiled_p4info(program: str) -> None:
    from controller.runtime.codec import canonical
    from controller.runtime.p4info import P4Info
    from controller.plan.options import HostPin

    info = P4Info.load(ROOT / "p4" / "build" / f"{program}.p4info.txtpb")
    options = Options(program=program, pins=(Pin(0, 0, 1, 0, 5, 1),), host_pins=(HostPin(0, 1, 0, 3),))  # type: ignore[arg-type]
    f = with_failures(Fabric(build(2, 3, 4, 2), options=options),
                      [LinkDown("p0-t0-1", "p0-t1-0"), *(LinkDown("p1-t0-2", f"p1-t1-{j}") for j in range(3))])
    for entities in plan(f).values():
        for e in entities:
            canonical(e, info)  # raises on an unknown table/action/param or a value too wide


def test_a_spine_gives_its_un_with_the_next_hop_of_each_leaf_it_reaches_in_one_my_sid_entry() -> None:
    """block | spine uN | leaf uN as /64 -> usid_un_next_hop with the leaf's route's next hop, for the
    leaves whose link is up; a link going down takes both the route and that entry away."""
    topo = build(2, 2, 3, 2)
    f = Fabric(topo)
    sids = SidPlan()
    spine = topo.switch("p1-t1-1")

    def table(fabric: Fabric, name: str) -> dict:
        return {e.match[0][1].value: e for e in plan(fabric)[spine.name]  # type: ignore[union-attr]
                if isinstance(e, TableEntry) and e.table.endswith(name)}

    routes, sid = table(f, "routes_v6"), table(f, "my_sid")
    nh = {k: e for k, e in sid.items() if e.action == "IngressPipe.endpoint.usid_un_next_hop"}
    want = {fmt_v6(sids.local_sid(sids.t1_usid(1, 1), sids.t0_usid(1, i))): fmt_v6(sids.un_prefix(sids.t0_usid(1, i)))
            for i in range(3)}
    assert set(nh) == set(want) and all(e.match[0][1].prefix_len == 64 for e in nh.values())
    assert {k: e.params for k, e in nh.items()} == {k: routes[r].params for k, r in want.items()}
    assert nh["fcbb:bb00:1002:1401::"].params == (("port", spine.downlinks[1]), ("smac", spine.mac),
                                                  ("dmac", topo.switch("p1-t0-1").mac))
    cut = table(with_failures(f, [LinkDown("p1-t0-1", "p1-t1-1")]), "my_sid")
    assert set(sid) - set(cut) == {"fcbb:bb00:1002:1401::"}
