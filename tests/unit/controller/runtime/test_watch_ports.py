"""Watch ports on action-profile group members: the plan's, their wire bytes and messages, read back.

The bytes are parsed by the real p4runtime protobuf (not by this project's code), so a field number,
wire type or oneof wrong in wire.py or codec.py fails here.
"""

from __future__ import annotations

import pytest

from controller.model.topology import build, load
from controller.plan.delta import diff
from controller.plan.entries import ActionProfileGroup
from controller.plan.fabricplan import Plan, plan
from controller.plan.p4names import ECMP_SELECTOR, SPRAY_SELECTOR
from controller.routes import Fabric, Options
from controller.plan.p4names import EECMP
from controller.failover import with_failures
from controller.model.failures import LinkDown
from controller.runtime import wire
from controller.runtime.codec import canonical, decode_entity, encode_entity
from controller.runtime.p4info import P4Info
from controller.runtime.proto import p4runtime_pb2
from tests.paths import REPO

pytestmark = pytest.mark.unit

SPRAY_INFO = REPO / "p4" / "build" / "srv6_spray.p4info.txtpb"
ECMP_INFO = REPO / "p4" / "build" / "eecmp_qp_hash.p4info.txtpb"
LAB = REPO / "examples" / "two_plane_lab.yaml"


def _parsed(entity: ActionProfileGroup, p4info: P4Info) -> p4runtime_pb2.ActionProfileGroup:
    """The group as protobuf parses wire.entity_bytes: what a P4Runtime server receives."""
    msg = p4runtime_pb2.Entity()
    msg.ParseFromString(wire.entity_bytes(entity, p4info))
    assert msg.WhichOneof("entity") == "action_profile_group"
    return msg.action_profile_group


def test_watch_port_bytes_as_protobuf_reads_them() -> None:
    p4info = P4Info.load(SPRAY_INFO)
    group = ActionProfileGroup(SPRAY_SELECTOR, 1, (2, 1, 3), 3, ((3, 0x1_0000), (1, 3)))
    g = _parsed(group, p4info)
    # members in id order; member 2 watches nothing (no oneof set), the others their port as the
    # shortest big-endian bytestring (P4Runtime 8.3), in watch_port (field 4) and not the deprecated int32
    assert [(m.member_id, m.weight, m.WhichOneof("watch_kind")) for m in g.members] == [
        (1, 1, "watch_port"), (2, 1, None), (3, 1, "watch_port")]
    assert [m.watch_port for m in g.members] == [b"\x03", b"", b"\x01\x00\x00"]
    assert [m.watch for m in g.members] == [0, 0, 0]
    assert g.max_size == 3
    # the message encoder writes the same bytes, and both read back to the canonical group
    assert encode_entity(group, p4info).SerializeToString() == wire.entity_bytes(group, p4info)
    assert decode_entity(encode_entity(group, p4info), p4info) == canonical(group, p4info)
    assert canonical(group, p4info).watch_ports == ((1, 3), (3, 0x1_0000))


def test_deprecated_int32_watch_is_read_as_the_same_port() -> None:
    p4info = P4Info.load(SPRAY_INFO)
    msg = encode_entity(ActionProfileGroup(SPRAY_SELECTOR, 1, (1, 2), 2), p4info)
    msg.action_profile_group.members[0].watch = 4
    assert decode_entity(msg, p4info).watch_ports == ((1, 4),)


@pytest.mark.parametrize("watch, error", [
    (((5, 3),), "member 5 watches a port but is not in the group"),
    (((1, 3), (1, 4)), "member 1 watches two ports"),
    (((1, 0),), "watch port of member 1"),
    (((1, 1 << 31),), "watch port of member 1"),
])
def test_bad_watch_ports_are_refused_with_what_is_wrong(watch, error: str) -> None:
    p4info = P4Info.load(SPRAY_INFO)
    with pytest.raises(ValueError, match=error):
        wire.entity_bytes(ActionProfileGroup(SPRAY_SELECTOR, 1, (1, 2), 2, watch), p4info)


def _groups(p: Plan, switch: str) -> list[ActionProfileGroup]:
    return [e for e in p[switch] if isinstance(e, ActionProfileGroup)]


def test_every_leaf_group_member_watches_its_uplink_in_both_programs_when_asked() -> None:
    topo = load(LAB)
    for options, profile in ((Options(watch_ports=True), SPRAY_SELECTOR),
                             (Options(program=EECMP, watch_ports=True), ECMP_SELECTOR)):
        p = plan(Fabric(topo, options=options))
        for leaf in (s for s in topo.switches if s.role == "t0"):
            groups = _groups(p, leaf.name)
            assert groups, leaf.name
            for g in groups:
                assert g.profile == profile
                # member j + 1 is the path via spine j, which leaves by uplinks[j]
                assert g.watch_ports == tuple((m, leaf.uplinks[m - 1]) for m in g.members)


def test_watch_ports_are_off_unless_the_options_or_the_topology_file_turn_them_on() -> None:
    """Stock bmv2 dies (SIGFPE) when every member of a group is down: watching is asked for, never a default."""
    from controller import planning
    from controller.model.topology import from_dict, to_dict

    topo = load(LAB)
    assert not topo.watch_ports
    assert all(not g.watch_ports for s in topo.switches for g in _groups(plan(planning.fabric(topo, "srv6_spray")), s.name))
    on = from_dict({**to_dict(topo), "watch_ports": True})
    assert on.watch_ports and to_dict(on)["watch_ports"] is True
    leaf = on.t0(0, 0)
    assert _groups(plan(planning.fabric(on, "srv6_spray")), leaf.name)[0].watch_ports == ((1, leaf.uplinks[0]),
                                                                                     (2, leaf.uplinks[1]))
    with pytest.raises(ValueError, match="watch_ports must be true or false, got 'yes'"):
        from_dict({**to_dict(topo), "watch_ports": "yes"})


def test_exception_groups_watch_only_their_members_uplinks() -> None:
    topo = build(1, 3, 4, 1)
    leaf1 = topo.t0(0, 1)
    f = with_failures(Fabric(topo, options=Options(watch_ports=True)), [LinkDown("p0-t0-1", "p0-t1-0")])
    groups = {g.group_id: g for g in _groups(plan(f), "p0-t0-0")}
    exception = [g for gid, g in groups.items() if gid != 1]
    assert len(exception) == 1 and exception[0].members == (2, 3)
    assert exception[0].watch_ports == ((2, topo.t0(0, 0).uplinks[1]), (3, topo.t0(0, 0).uplinks[2]))
    assert groups[1].watch_ports == tuple((j + 1, port) for j, port in enumerate(topo.t0(0, 0).uplinks))
    # the leaf on the failed link: its shared group loses the member and its watch together
    assert {g.group_id: g.watch_ports for g in _groups(plan(f), "p0-t0-1")}[1] == (
        (2, leaf1.uplinks[1]), (3, leaf1.uplinks[2]))


def test_plan_json_keeps_watch_ports_and_a_switch_read_back_is_no_change() -> None:
    p4info = P4Info.load(ECMP_INFO)
    p = plan(Fabric(load(LAB), options=Options(program=EECMP, watch_ports=True)))
    again = Plan.from_json(p.to_json())
    leaf = next(s for s in p if "-t0-" in s)
    assert _groups(again, leaf) == _groups(p, leaf)
    # what the switch returns on read (the message decoded) against the plan: no update
    desired = [canonical(g, p4info) for g in _groups(p, leaf)]
    read = [decode_entity(encode_entity(g, p4info), p4info) for g in _groups(p, leaf)]
    assert not diff(desired, read)
    # a group written before watch ports existed is changed in place (a modify), not kept
    bare = [ActionProfileGroup(g.profile, g.group_id, g.members, g.max_size) for g in desired]
    changes = diff(desired, bare)
    assert list(changes.modifies) == desired and not changes.inserts and not changes.deletes


def test_stock_pi_read_back_of_one_port_for_every_member_is_no_change_but_other_ports_are() -> None:
    desired = ActionProfileGroup(ECMP_SELECTOR, 1, (1, 2, 3), 3, ((1, 3), (2, 4), (3, 5)))
    # stock PI returns every member with the watch port of the member last in its handle order
    for port in (3, 4, 5):
        read = ActionProfileGroup(ECMP_SELECTOR, 1, (1, 2, 3), 3, ((1, port), (2, port), (3, port)))
        assert not diff([desired], [read], pi_workarounds=True)
    for watch in (((1, 6), (2, 6), (3, 6)), ((1, 3), (2, 4)), ((1, 3), (2, 3), (3, 4)), ()):
        read = ActionProfileGroup(ECMP_SELECTOR, 1, (1, 2, 3), 3, watch)
        assert diff([desired], [read], pi_workarounds=True).modifies == (desired,), watch


def test_members_all_watching_one_planned_port_is_a_difference_where_pi_reads_each_members_own(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from controller.plan.delta import PI_WORKAROUNDS_VARIABLE, ordered_updates

    monkeypatch.delenv(PI_WORKAROUNDS_VARIABLE, raising=False)
    desired = ActionProfileGroup(ECMP_SELECTOR, 1, (1, 2, 3), 3, ((1, 3), (2, 4), (3, 5)))
    for port in (3, 4, 5):
        read = ActionProfileGroup(ECMP_SELECTOR, 1, (1, 2, 3), 3, ((1, port), (2, port), (3, port)))
        d = diff([desired], [read])
        assert d.modifies == (desired,) and not d.unwatch and not d.rewatch
        assert [[(u.type.name, u.entity) for u in b] for b in ordered_updates(d)] == [[("MODIFY", desired)]]
    assert not diff([desired], [desired])
    monkeypatch.setenv(PI_WORKAROUNDS_VARIABLE, "1")  # a fabric of stock PI switches says so
    assert not diff([desired], [ActionProfileGroup(ECMP_SELECTOR, 1, (1, 2, 3), 3, ((1, 4), (2, 4), (3, 4)))])


def test_without_workarounds_a_group_changes_watch_ports_and_members_in_one_write() -> None:
    unwatched = ActionProfileGroup(ECMP_SELECTOR, 1, (1, 2, 3), 3)
    watched = ActionProfileGroup(ECMP_SELECTOR, 1, (1, 2), 3, ((1, 3), (2, 4)))
    fewer = ActionProfileGroup(SPRAY_SELECTOR, 1, (1, 3), 3, ((1, 3), (3, 5)))
    more = ActionProfileGroup(SPRAY_SELECTOR, 1, (1, 2, 3), 3, ((1, 3), (2, 4), (3, 5)))
    for desired, current in ((watched, unwatched), (fewer, more)):
        d = diff([desired], [current], pi_workarounds=False)
        assert (d.modifies, d.unwatch, d.rewatch) == ((desired,), (), ())


def test_a_group_losing_watched_members_is_first_written_with_them_unwatched() -> None:
    from controller.plan.delta import ordered_updates

    current = ActionProfileGroup(SPRAY_SELECTOR, 1, (1, 2, 3), 3, ((1, 3), (2, 4), (3, 5)))
    desired = ActionProfileGroup(SPRAY_SELECTOR, 1, (1, 3), 3, ((1, 3), (3, 5)))
    d = diff([desired], [current], pi_workarounds=True)
    first = ActionProfileGroup(SPRAY_SELECTOR, 1, (1, 2, 3), 3, ((1, 3), (3, 5)))
    assert d.unwatch == (first,) and d.modifies == (desired,)
    assert [[(u.type.name, u.entity) for u in batch] for batch in ordered_updates(d)] == [
        [("MODIFY", first)], [("MODIFY", desired)]]
    # a member joining, or leaving unwatched: one write
    assert not diff([current], [desired], pi_workarounds=True).unwatch
    assert not diff([desired], [ActionProfileGroup(SPRAY_SELECTOR, 1, (1, 2, 3), 3, ((1, 3), (3, 5)))],
                    pi_workarounds=True).unwatch


def test_a_link_failure_delta_unwatches_the_leaving_member_first_for_a_stock_pi(monkeypatch: pytest.MonkeyPatch) -> None:
    from controller.failover import delta
    from controller.plan.delta import PI_WORKAROUNDS_VARIABLE

    monkeypatch.setenv(PI_WORKAROUNDS_VARIABLE, "1")

    topo = build(1, 2, 2, 1)
    watched = Options(watch_ports=True)
    healthy = Fabric(topo, options=watched)
    failed = with_failures(Fabric(topo, options=watched), [LinkDown("p0-t0-0", "p0-t1-1")])
    leaf = topo.t0(0, 0)
    d = delta(healthy, failed)["p0-t0-0"]
    assert d.unwatch == (ActionProfileGroup(SPRAY_SELECTOR, 1, (1, 2), 2, ((1, leaf.uplinks[0]),)),)
    assert ActionProfileGroup(SPRAY_SELECTOR, 1, (1,), 2, ((1, leaf.uplinks[0]),)) in d.modifies
    monkeypatch.delenv(PI_WORKAROUNDS_VARIABLE)  # a patched PI: the group in one write
    d = delta(healthy, failed)["p0-t0-0"]
    assert not d.unwatch and ActionProfileGroup(SPRAY_SELECTOR, 1, (1,), 2, ((1, leaf.uplinks[0]),)) in d.modifies


def test_a_stock_pi_group_without_watch_ports_gets_them_one_member_at_a_time() -> None:
    from controller.plan.delta import ordered_updates

    current = ActionProfileGroup(ECMP_SELECTOR, 1, (1, 2, 3), 3)
    desired = ActionProfileGroup(ECMP_SELECTOR, 1, (1, 2), 3, ((1, 3), (2, 4)))
    d = diff([desired], [current], pi_workarounds=True)
    # member 1 out, back watched; member 2 out, back watched; then the plan's group (member 3 out, unwatched)
    steps = [((2, 3), ()), ((1, 2, 3), ((1, 3),)), ((1, 3), ((1, 3),)), ((1, 2, 3), ((1, 3), (2, 4)))]
    assert [[(g.members, g.watch_ports) for g in stage] for stage in d.rewatch] == [[s] for s in steps]
    assert not d.unwatch  # member 3 leaves unwatched
    batches = ordered_updates(d)
    assert [[(u.type.name, u.entity) for u in b] for b in batches] == [
        *[[("MODIFY", g)] for (g,) in d.rewatch], [("MODIFY", desired)]]
    # a group already watched: no steps
    assert not diff([desired], [ActionProfileGroup(ECMP_SELECTOR, 1, (1, 2, 3), 3, ((1, 3), (2, 4), (3, 5)))],
                    pi_workarounds=True).rewatch


def test_a_group_is_shown_with_each_members_watch_port() -> None:
    from controller.southbound.p4runtime import show_entity

    line = show_entity(ActionProfileGroup(SPRAY_SELECTOR, 1, (1, 2, 3), 3, ((1, 3), (3, 5))))
    assert line.endswith(": members 1 (watch port 3), 2, 3 (watch port 5)")
    assert show_entity(ActionProfileGroup(SPRAY_SELECTOR, 1, ())).endswith(": members none")
