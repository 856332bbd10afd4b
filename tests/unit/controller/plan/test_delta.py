"""Deltas (controller.plan.delta): their order (by kind, then by key in the values' own order), their counts,
and the group writes PI's watch-port read-back and max_size 0 call for."""

from __future__ import annotations

from controller.plan.delta import Changes, diff
from controller.plan.entries import ActionProfileGroup, ActionProfileMember, Exact, Lpm, TableEntry


def test_updates_are_sorted_by_kind_then_by_key_numbers_as_numbers() -> None:
    """Keys compare field by field with ints as ints (9 before 10, not as their text), so the order a switch
    is written in is the same whatever order the plan was built in."""
    entries = [TableEntry("t", (("dst", Exact(10)),), "fwd"), TableEntry("t", (("dst", Exact(9)),), "fwd"),
               TableEntry("t", (("dst", Lpm(10, 8)),), "fwd"), TableEntry("t", (("dst", Lpm(9, 16)),), "fwd")]
    groups = [ActionProfileGroup("sel", 10, (1,)), ActionProfileGroup("sel", 9, (1,))]
    members = [ActionProfileMember("sel", 10, "fwd"), ActionProfileMember("sel", 9, "fwd")]
    want = [*entries, *groups, *members]
    for plan in (want, list(reversed(want))):
        d = diff(plan, [])
        assert d.inserts == (members[1], members[0], groups[1], groups[0],
                             entries[1], entries[0], entries[3], entries[2])
        gone = diff([], plan)
        assert gone.deletes == d.inserts and not gone.inserts and not gone.modifies


def test_a_partly_watched_group_read_back_all_watched_is_rewritten() -> None:
    """A stock PI's read-back gives every member the last member's watch port only when all members are watched:
    a group the plan watches in part and the switch holds watched in full differs, and is modified. With each
    member's own watch port read back (patches/pi-watch-port.patch, the default), any other watch port differs."""
    desired = ActionProfileGroup("sel", 1, (1, 2), 2, ((1, 5),))
    for stock in (True, False):
        held = ActionProfileGroup("sel", 1, (1, 2), 2, ((1, 5), (2, 5)))
        assert diff([desired], [held], pi_workarounds=stock).modifies == (desired,)
    fully = ActionProfileGroup("sel", 1, (1, 2), 2, ((1, 5), (2, 6)))
    as_stock_pi_reads_it = ActionProfileGroup("sel", 1, (1, 2), 2, ((1, 6), (2, 6)))
    assert not diff([fully], [as_stock_pi_reads_it], pi_workarounds=True)
    assert diff([fully], [as_stock_pi_reads_it], pi_workarounds=False).modifies == (fully,)


def test_watch_steps_keep_the_switchs_max_size_when_the_plan_leaves_it_open() -> None:
    """A plan's max_size 0 means \"whatever the switch has\": a stock PI's intermediate group writes carry the
    switch's."""
    current = ActionProfileGroup("sel", 1, (1, 2), 8)
    d = diff([ActionProfileGroup("sel", 1, (1, 2), 0, ((1, 3), (2, 4)))], [current], pi_workarounds=True)
    assert [g.max_size for (g,) in d.rewatch] == [8, 8, 8, 8]
    leaving = diff([ActionProfileGroup("sel", 1, (1,), 0, ((1, 3),))],
                   [ActionProfileGroup("sel", 1, (1, 2), 8, ((1, 3), (2, 4)))], pi_workarounds=True)
    assert leaving.unwatch == (ActionProfileGroup("sel", 1, (1, 2), 8, ((1, 3),)),)


def test_changes_count_and_summarise_every_update() -> None:
    """What the healer's deltas_written event reports per switch."""
    c = Changes(("a",), ("b", "c"), ("d",))
    assert (len(c), bool(c), c.summary()) == (4, True, "1 inserts, 2 modifies, 1 deletes")
    assert (len(Changes()), bool(Changes()), Changes().summary()) == (0, False, "0 inserts, 0 modifies, 0 deletes")
