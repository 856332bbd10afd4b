"""Reconciliation: diff, dependency order, apply idempotence, and the parallel FabricClient."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest

from controller.runtime.codec import canonical
from controller.plan.entries import ActionProfileGroup, ActionProfileMember, Lpm, TableEntry, Ternary
from controller.runtime.fabric_client import FabricClient
from controller.runtime.p4info import P4Info
from controller.runtime.p4rt import P4RuntimeError, SwitchConnection, WriteError
from controller.runtime.reconcile import apply
from controller.plan.delta import Delta, Update, UpdateType, diff, ordered_updates
from controller.runtime.proto import p4runtime_pb2, code_pb2
from tests.unit.p4rt_servicer import RecordingServicer, serve, socket_dir




def _member(i: int, spine: int = 0xE000) -> ActionProfileMember:
    return ActionProfileMember("S", i, "via_spine", (("spine_usid", spine + i), ("path_index", i)))


def _route(i: int, port: int = 1) -> TableEntry:
    return TableEntry("R", (("dst_addr", Lpm(i << 80, 48)),), "set_next_hop", (("port", port), ("smac", 1), ("dmac", 2)))


GROUP = ActionProfileGroup("S", 10, (1, 2))
SPRAY = TableEntry("P", (("dst_addr", Lpm(7 << 80, 48)),), group_id=10)


def test_diff_inserts_modifies_deletes_sorted() -> None:
    desired = [_route(3), _route(1, port=9), GROUP, _member(2), _member(1)]
    actual = [_route(1), _route(5), _member(1), _member(4)]
    delta = diff(desired, actual)
    assert delta == Delta(
        inserts=(_member(2), GROUP, _route(3)),
        modifies=(_route(1, port=9),),
        deletes=(_member(4), _route(5)),
    )
    assert delta.summary() == "3 inserts, 1 modifies, 2 deletes"


def test_diff_is_deterministic_regardless_of_input_order() -> None:
    desired = [_route(i) for i in (5, 1, 3)] + [_member(2), _member(1)]
    assert diff(desired, []) == diff(list(reversed(desired)), [])
    assert [e.member_id for e in diff(desired, []).inserts[:2]] == [1, 2]


def test_group_member_change_is_modify() -> None:
    new = ActionProfileGroup("S", 10, (1, 2, 3))
    assert diff([new], [GROUP]) == Delta(modifies=(new,))


def test_group_max_size_zero_in_plan_accepts_the_switch_value() -> None:
    assert not diff([GROUP], [ActionProfileGroup("S", 10, (1, 2), max_size=16)])
    assert diff([ActionProfileGroup("S", 10, (1, 2), max_size=8)], [ActionProfileGroup("S", 10, (1, 2), max_size=16)])


def test_default_entries_only_modified() -> None:
    drop = TableEntry("R", action="drop", is_default=True)
    noaction = TableEntry("R", action="NoAction", is_default=True)
    assert diff([drop], []) == Delta(modifies=(drop,))
    assert diff([drop], [noaction]) == Delta(modifies=(drop,))
    assert not diff([drop], [drop])
    assert not diff([], [noaction])


def test_conflicting_duplicates_in_plan_rejected() -> None:
    with pytest.raises(ValueError, match="the plan has two different entities with the same key"):
        diff([_route(1), _route(1, port=2)], [])
    assert diff([_route(1), _route(1)], []) == Delta(inserts=(_route(1),))


def test_ternary_and_lpm_entries_of_one_table_sort_together() -> None:
    a = TableEntry("T", (("x", Ternary(1, 1)),), "a", priority=2)
    b = TableEntry("T", (("y", Ternary(1, 1)),), "a", priority=1)
    c = TableEntry("T", (("x", Ternary("0x2", 3)),), "a", priority=1)  # mixed int/str still sorts
    assert len(diff([a, b, c], []).inserts) == 3


def test_ordered_updates_dependency_order() -> None:
    old_member, old_group, old_route = _member(8), ActionProfileGroup("S", 11, (8,)), _route(9)
    delta = diff([_member(1), _member(2), GROUP, SPRAY, _route(1, port=4)], [_route(1), old_member, old_group, old_route])
    stages = ordered_updates(delta)
    assert stages == [
        [Update(UpdateType.INSERT, _member(1)), Update(UpdateType.INSERT, _member(2))],
        [Update(UpdateType.INSERT, GROUP)],
        [Update(UpdateType.INSERT, SPRAY), Update(UpdateType.MODIFY, _route(1, port=4))],
        [Update(UpdateType.DELETE, old_route)],
        [Update(UpdateType.DELETE, old_group)],
        [Update(UpdateType.DELETE, old_member)],
    ]
    assert ordered_updates(Delta()) == []


# --- apply and FabricClient, against the recording servicer (message level only) -------------

def _plan() -> list:
    return [
        ActionProfileMember("spray_selector", 1, "via_spine", (("spine_usid", 0xE001), ("path_index", 0))),
        ActionProfileMember("spray_selector", 2, "via_spine", (("path_index", 1), ("spine_usid", "0xe002"))),
        ActionProfileGroup("spray_selector", 10, (2, 1)),
        TableEntry("spray_paths", (("dst_addr", Lpm("fcbb:bb00:2::", 48)),), group_id=10),
        TableEntry("routes_v6", (("dst_addr", Lpm("fcbb:bb00:1::", 48)),), "set_next_hop",
                   (("port", 1), ("smac", "00:00:00:00:00:01"), ("dmac", "00:00:00:00:00:02"))),
        TableEntry("routes_v6", action="routing.drop", is_default=True),
        TableEntry("punt", (("ether_type", Ternary(0x88CC, 0xFFFF)),), "send_to_cpu", priority=10),
    ]


@pytest.fixture
def session(tmp_path: Path, p4info: P4Info) -> Iterator[tuple[SwitchConnection, RecordingServicer]]:
    servicer = RecordingServicer()
    with serve(socket_dir(tmp_path), servicer) as address:
        with SwitchConnection("leaf1", address, p4info=p4info, timeout=5) as conn:
            yield conn, servicer


def _types(request: p4runtime_pb2.WriteRequest) -> list[tuple[str, str]]:
    return [(p4runtime_pb2.Update.Type.Name(u.type), u.entity.WhichOneof("entity")) for u in request.updates]


def test_apply_writes_in_order_then_nothing(session, p4info: P4Info) -> None:
    conn, servicer = session
    delta = apply(conn, _plan())
    assert delta.summary() == "6 inserts, 1 modifies, 0 deletes"
    assert [_types(w) for w in servicer.writes] == [
        [("INSERT", "action_profile_member")] * 2,
        [("INSERT", "action_profile_group")],
        [("INSERT", "table_entry"), ("INSERT", "table_entry"), ("INSERT", "table_entry"), ("MODIFY", "table_entry")],
    ]
    assert apply(conn, _plan()) == Delta()  # idempotent: the second apply writes nothing
    assert len(servicer.writes) == 3


def test_apply_removes_what_the_plan_dropped(session, p4info: P4Info) -> None:
    conn, servicer = session
    apply(conn, _plan())
    smaller = [e for e in _plan() if not isinstance(e, ActionProfileGroup) and getattr(e, "group_id", None) is None]
    smaller = [e for e in smaller if getattr(e, "member_id", None) != 2]
    delta = apply(conn, smaller)
    assert delta == Delta(deletes=tuple(canonical(e, p4info) for e in (_plan()[1], _plan()[2], _plan()[3])))
    assert [_types(w) for w in servicer.writes[3:]] == [
        [("DELETE", "table_entry")], [("DELETE", "action_profile_group")], [("DELETE", "action_profile_member")],
    ]
    assert apply(conn, smaller, dry_run=True) == Delta()


def test_apply_dry_run_writes_nothing(session) -> None:
    conn, servicer = session
    assert len(apply(conn, _plan(), dry_run=True)) == 7
    assert servicer.writes == []


def test_fabric_client_reports_each_switch(tmp_path: Path, p4info: P4Info) -> None:
    good, bad = RecordingServicer(), RecordingServicer()
    bad.fail = lambda u: (code_pb2.RESOURCE_EXHAUSTED, "table full")
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    seen: list[tuple[str, bool]] = []
    with serve(socket_dir(tmp_path / "a"), good) as a, serve(socket_dir(tmp_path / "b"), bad) as b:
        conns = [
            SwitchConnection("leaf1", a, p4info=p4info, timeout=5),
            SwitchConnection("leaf2", b, p4info=p4info, timeout=5),
            SwitchConnection("leaf3", "unix:/nonexistent/p4rt.sock", p4info=p4info, timeout=0.3),
        ]
        with FabricClient(conns) as fabric:
            connected = fabric.connect_all()
            assert connected.results == {"leaf1": True, "leaf2": True}
            assert isinstance(connected.errors["leaf3"], P4RuntimeError)
            result = fabric.reconcile_all(
                {"leaf1": _plan(), "leaf2": _plan()}, progress=lambda name, res, err: seen.append((name, err is None))
            )
    assert result.results["leaf1"].summary() == "6 inserts, 1 modifies, 0 deletes"
    assert set(result.errors) == {"leaf2"}
    error = result.errors["leaf2"]
    assert isinstance(error, WriteError) and error.failures[0].code == "RESOURCE_EXHAUSTED"
    assert sorted(seen) == [("leaf1", True), ("leaf2", False)]
    assert result.summary().startswith("1 ok, 1 failed (leaf2: leaf2: 2 of 2 updates failed: ")
    with pytest.raises(WriteError):
        result.raise_first()


def test_fabric_client_rejects_unknown_and_duplicate_names(p4info: P4Info) -> None:
    conn = SwitchConnection("leaf1", "unix:/x", p4info=p4info)
    with pytest.raises(ValueError, match="two connections for switch leaf1"):
        FabricClient([conn, conn])
    with pytest.raises(KeyError, match="unknown switch\\(es\\): spine9"):
        FabricClient([conn]).reconcile_all({"spine9": []})
