"""ev_min_active on hand-made timelines: the default floor (a quarter of the EVs), a usable backup counted, uniform
random loss on every EV leaving at least the floor usable, and a dead EV going ASSUMED_BAD through it."""

from __future__ import annotations

import random

import pytest

from endpoint.ev import EvConfig, EvState, EvTable, default_min_active, split_active

CFG = EvConfig(min_rto=0.025, max_rto=0.25, probe_interval=0.02, max_probe_interval=0.08, probe_gap=0.005,
               recover_probes=3, max_recover_probes=24, forgive=0.5)
IDS = [0, 1, 2, 3, 1024, 1025, 1026, 1027]  # 2 planes x 4 T1s
PLANES = {e: e >> 10 for e in IDS}


def lab_table(min_active: int | None = None, config: EvConfig = CFG) -> EvTable:
    """The bench's table: one backup EV per plane, the default floor unless given."""
    active = split_active(IDS, PLANES, 1)
    floor = default_min_active(len(IDS), len(active)) if min_active is None else min_active
    return EvTable(IDS, config, active=active, planes=PLANES, min_active=floor)


def usable(t: EvTable, now: float) -> list[int]:
    return [e for e in t.active_set(now) if t[e].usable]


def test_the_default_floor_is_a_quarter_of_the_evs_at_least_one_at_most_the_active_ones():
    assert [default_min_active(n, a) for n, a in ((8, 6), (16, 16), (4, 4), (3, 3), (8, 1), (1, 1))] == \
        [2, 4, 1, 1, 1, 1]
    assert lab_table().min_active == 2 and lab_table().active == [0, 1, 2, 1024, 1025, 1026]


def test_a_loss_whose_place_a_usable_backup_of_its_plane_takes_is_not_held_by_the_floor():
    t = EvTable([0, 1, 1024, 1025], CFG, active=[0, 1024], planes={0: 0, 1: 0, 1024: 1, 1025: 1}, min_active=2)
    t[0].on_sack_loss(0.1)  # backup 1 takes its place: still 2 usable
    assert t[0].state == EvState.ASSUMED_BAD and t.active_set(0.1) == [1, 1024]
    t[1].on_sack_loss(0.2)  # no usable backup of plane 0 left: held
    t[1024].on_sack_loss(0.2)  # 1025 (plane 1) would take its place, but plane 0 would have none
    assert t[1].state == EvState.UNKNOWN and t[1].floor_held == 1
    assert t[1024].state == EvState.ASSUMED_BAD and t.active_set(0.2) == [1, 1025]


def test_the_floor_holds_a_backup_that_took_an_active_place_in_a_qps_share_of_the_table():
    t = lab_table()  # active 0 1 2 | 1024 1025 1026, backups 3 | 1027, floor 2
    qp = t.view(IDS, active=list(t.active))  # a QP's share: it swaps on its own
    for e in (0, 1, 2, 1024, 1025, 1026):
        t[e].on_sack_loss(0.1)
        qp.active_set(0.1)
    assert [e for e in qp.active if qp[e].usable] == [3, 1027] and t.active == [0, 1, 2, 1024, 1025, 1026]
    t[3].on_sack_loss(0.2)  # not in the destination's active list, but holding a place in the QP's
    assert t[3].state == EvState.UNKNOWN and t[3].floor_held == 1
    assert [e for e in qp.active_set(0.2) if qp[e].usable] == [3, 1027]


def test_a_good_ev_still_goes_assumed_bad_at_its_first_loss_while_the_others_are_usable():
    t = lab_table()
    for e in IDS:
        t[e].on_ack(0.0, 0.001)
    t[1].on_timeout(0.1)
    assert [tr[1:] for tr in t[1].transitions] == [("unknown", "good", "first ack"), ("good", "assumed_bad", "timeout")]


def test_a_dead_ev_goes_assumed_bad_through_the_floor_after_floor_yield_losses_over_an_rto_with_no_ack_between():
    t = EvTable(IDS, CFG, planes=PLANES, min_active=8)  # no backups, every EV held at the floor
    assert CFG.floor_yield == 8
    t[0].on_ack(0.0, 0.001)
    assert t[0].rto() == pytest.approx(0.025)  # the floor: 1 ms + 4 x 0.5 ms
    for i in range(7):  # background loss: 7 in a row, then an ACK, then more: never 8 in a row
        t[0].on_sack_loss(0.1 + i * 0.005)
    t[0].on_ack(0.14, 0.001)
    t[0].on_sack_loss(0.15)
    assert t[0].state == EvState.GOOD and t[0].floor_held == 8 and t[0].dry == 1
    for i in range(20):  # a stall: 20 timeouts at one instant are no dead path
        t[1].on_timeout(0.2)
    assert t[1].state == EvState.UNKNOWN and t[1].floor_held == 20
    for i in range(9):  # the path died: loss after loss, nothing acknowledged, 5 ms apart
        t[2].on_timeout(0.2 + i * 0.005)
    # the 8th in a row came 35 ms after the first (over the 25 ms RTO): through the floor
    assert t[2].transitions == [(0.235, "unknown", "assumed_bad", "timeout")] and t[2].floor_held == 7


def uniform_loss(t: EvTable, loss: float, until: float, seed: int, dead: tuple[int, float] | None = None,
                 step: float = 0.001) -> list[tuple[float, int]]:
    """Every `step` one packet on each usable active EV and one probe on each EV due one, each lost with
    probability `loss` (a seeded stream: the same timeline every run); `dead` (EV, from): that EV loses
    everything from then on. The usable active EVs after each step, (t, how many)."""
    rng = random.Random(seed)
    out, now = [], 0.0
    while now < until:
        for e in t.tick(now):
            t[e].on_probe_sent(now, 0.001)
            if rng.random() >= loss and not (dead and e == dead[0] and now >= dead[1]):
                t[e].on_probe_ack(now + 0.0005, 0.0005)
        for e in usable(t, now):
            t[e].on_sent(now)
            if rng.random() < loss or (dead and e == dead[0] and now >= dead[1]):
                t[e].on_sack_loss(now)
            else:
                t[e].on_ack(now, 0.0005)
        out.append((now, len(usable(t, now))))
        now = round(now + step, 6)
    return out


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_uniform_loss_on_every_ev_leaves_at_least_the_floor_usable_without_it_none(seed: int):
    # 4 %: the lab's 1 % per link on the two T0-T1 links each way of a path, data and ACKs
    t = lab_table(config=EvConfig())
    counts = uniform_loss(t, 0.04, 5.0, seed)
    assert min(c for _, c in counts) >= t.min_active == 2
    assert sum(t[e].floor_held for e in IDS) > 0  # the floor held losses: every EV lost some
    assert len(t.in_state(EvState.ASSUMED_BAD)) >= 4
    bare = lab_table(min_active=0, config=EvConfig())
    counts = uniform_loss(bare, 0.04, 5.0, seed)
    assert counts[-1][1] == 0 and sum(1 for _, c in counts if c == 0) > len(counts) // 2  # mapped out, mostly


def test_under_uniform_loss_an_ev_that_dies_goes_assumed_bad_after_eight_losses_over_an_rto_and_stays_out():
    t = lab_table(config=EvConfig())
    uniform_loss(t, 0.04, 2.0, 7)
    held = usable(t, 2.0)
    assert len(held) == 2 and all(t[e].state != EvState.ASSUMED_BAD for e in held)
    victim = held[0]
    t2 = lab_table(config=EvConfig())
    uniform_loss(t2, 0.04, 3.0, 7, dead=(victim, 2.0))
    down = [tr for tr in t2[victim].transitions if tr[0] >= 2.0]
    # its 8th loss in a row came within 7 ms, then it waits for an RTO (25 ms) after the first of them
    assert down[0][2] == "assumed_bad" and 2.0 + 0.025 <= down[0][0] <= 2.0 + 0.025 + 0.001
    assert t2[victim].state == EvState.ASSUMED_BAD and victim not in usable(t2, 3.0)
