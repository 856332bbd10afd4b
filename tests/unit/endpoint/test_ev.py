"""The EV state machine (OCP MRC: GOOD / ASSUMED_BAD / DENIED / UNKNOWN) over hand-made event timelines, the
ev_min_active floor, backup replacement, the controller's denylist, EV events, and the policies' choices."""

from __future__ import annotations

import pytest

from endpoint.ev import EvConfig, EvEvents, EvHealth, EvState, EvTable, split_active
from endpoint.policy import Ethereal, FiveTupleHash, Flow, HealthAware, QpRoundRobin, Spray, make

CFG = EvConfig(min_rto=0.025, max_rto=0.25, probe_interval=0.02, max_probe_interval=0.08, probe_gap=0.005,
               recover_probes=3, max_recover_probes=24, forgive=0.5)


def steps(h: EvHealth) -> list[tuple[float, str, str, str]]:
    return [tuple(t) for t in h.transitions]


def probe_round(h: EvHealth, t: float, answered: bool, rtt: float = 0.001) -> None:
    """At `t` the due probe goes out; answered after `rtt`, or expired after its deadline."""
    assert h.probe_due(t), (t, h.next_probe, h.probe_deadline)
    h.on_probe_sent(t)
    if answered:
        h.on_probe_ack(t + rtt, rtt)
    else:
        h.tick(h.probe_deadline)


# --- the state machine ---------------------------------------------------------------------------

def test_an_ev_is_unknown_until_its_first_evidence():
    for evidence, why in ((lambda h: h.on_ack(0.5, 0.001), "first ack"),
                          (lambda h: h.on_nack(0.5), "trimmed: the path delivers")):
        h = EvHealth(1, CFG)
        assert h.state == EvState.UNKNOWN and h.usable  # a new EV is used: its first packet is the evidence
        h.tick(0.4)
        h.on_sent(0.45)
        assert h.state == EvState.UNKNOWN and h.stats.sent_while_failed == 0
        evidence(h)
        assert steps(h) == [(0.5, "unknown", "good", why)]
    h = EvHealth(2, CFG)
    h.on_timeout(0.3)  # the first evidence is a loss
    assert steps(h) == [(0.3, "unknown", "assumed_bad", "timeout")]


@pytest.mark.parametrize("loss, why", [("on_sack_loss", "sack loss"), ("on_timeout", "timeout")])
def test_one_loss_that_is_not_a_trim_makes_a_good_ev_assumed_bad_at_once(loss: str, why: str):
    h = EvHealth(3, CFG)
    h.on_ack(0.0, 0.001)
    getattr(h, loss)(0.1)
    assert h.state == EvState.ASSUMED_BAD and not h.usable
    assert steps(h)[1:] == [(0.1, "good", "assumed_bad", why)]
    getattr(h, loss)(0.101)  # later losses of what was in flight: no change, no new probe timer
    h.on_ack(0.102, 0.001)  # nor does a data ACK (of a packet sent before): probes bring it back
    assert h.state == EvState.ASSUMED_BAD and len(h.transitions) == 2 and h.next_probe == pytest.approx(0.12)


def test_trims_and_ce_marks_never_make_an_ev_assumed_bad_a_trim_marks_it_congested_for_a_probe_interval():
    h = EvHealth(4, CFG)
    h.on_ack(0.0, 0.001)
    for i in range(10):
        h.on_nack(0.01 + i * 0.001)
    assert h.state == EvState.GOOD and h.congested and h.stats.nacks == 10 and h.stats.timeouts == 0
    h.tick(0.039)
    assert h.congested  # the last mark at 0.019: quiet until 0.039
    h.tick(0.0391)
    assert not h.congested and h.weight == 1.0  # a trim is the last hop's: the weight is left alone
    for i in range(10):
        h.on_ack(0.05 + i * 0.001, 0.001, ce=True)
    assert not h.congested and h.stats.ecn == 10 and h.state == EvState.GOOD  # CE: the weight, not a mark
    assert h.weight == CFG.min_weight and len(h.transitions) == 1  # only UNKNOWN -> GOOD, ever


def test_a_ce_echo_halves_the_evs_weight_and_clean_acks_give_it_back_step_by_step():
    h = EvHealth(4, CFG)
    h.on_ack(0.0, 0.001)
    weights = []
    for ce in (True, True, True, False, False, True, False):
        h.on_ack(0.01, 0.001, ce=ce)
        weights.append(h.weight)
    assert weights == [0.5, 0.25, 0.125, 0.1875, 0.25, 0.125, 0.1875]  # x1/2 per CE, +1/16 per clean ACK
    for _ in range(13):
        h.on_ack(0.02, 0.001)
    assert h.weight == 1.0 and not h.probation  # 13 x 1/16 back: whole, and never more
    h.on_ack(0.03, 0.001)
    assert h.weight == 1.0
    off = EvHealth(5, EvConfig(ecn_avoid=False))
    off.on_ack(0.0, 0.001, ce=True)
    assert off.weight == 1.0 and off.stats.ecn == 1  # ECN-based load balancing off: counted only


def test_answered_probes_bring_an_assumed_bad_ev_back_spaced_by_the_probe_gap():
    h = EvHealth(6, CFG)
    h.on_ack(0.0, 0.001)
    h.on_sack_loss(0.1)
    assert not h.probe_due(0.1199) and h.next_probe == pytest.approx(0.12)  # probe_interval after the loss
    probe_round(h, h.next_probe, True)
    assert h.state == EvState.ASSUMED_BAD and h.run == 1
    assert not h.probe_due(0.1259) and h.next_probe == pytest.approx(0.126)  # answered at 0.121: a gap later
    probe_round(h, h.next_probe, True)
    probe_round(h, h.next_probe, True)
    assert steps(h)[1:] == [(0.1, "good", "assumed_bad", "sack loss"), (0.133, "assumed_bad", "good", "3 probes answered")]
    assert h.stats.probes == h.stats.probe_acks == 3 and h.gray == 0


def test_a_dead_path_is_probed_at_a_doubling_interval_and_stays_assumed_bad():
    h = EvHealth(7, CFG)
    h.on_timeout(0.0)
    t, gaps = 0.02, []
    for _ in range(5):
        probe_round(h, t, False)  # expires after min_rto (25 ms)
        nxt = h.next_probe
        gaps.append(round(nxt - (t + CFG.min_rto), 6))
        t = nxt
    assert gaps == [0.02, 0.04, 0.08, 0.08, 0.08]  # doubled per unanswered probe, capped at max_probe_interval
    assert h.state == EvState.ASSUMED_BAD and h.gray == 0 and h.stats.probe_losses == 5 and len(h.transitions) == 1
    probe_round(h, t, True)  # the path is back: the answers in a row it needs (no gray strike) bring it back
    probe_round(h, h.next_probe, True)
    probe_round(h, h.next_probe, True)
    assert h.state == EvState.GOOD and h.strikes == 0


def test_a_late_probe_answer_is_a_round_trip_sample_and_takes_back_the_expiry():
    h = EvHealth(8, CFG)
    h.on_timeout(0.0)
    probe_round(h, h.next_probe, True)  # answered: run 1
    h.on_probe_sent(h.next_probe)
    h.tick(h.probe_deadline)  # unanswered in time: taken for a loss after an answer, a gray strike
    assert (h.run, h.gray, h.stats.probe_losses) == (0, 1, 1)
    h.on_probe_ack(0.1, 0.05)  # it was a queue, not a loss: the answer came 50 ms after the probe
    assert h.stats.srtt == pytest.approx(0.875 * 0.001 + 0.125 * 0.05)  # a sample all the same
    assert (h.run, h.gray, h.stats.probe_losses) == (2, 0, 0) and h.next_probe == pytest.approx(0.105)
    h.on_probe_ack(0.11, 0.001)  # nothing out, nothing expired: a duplicate changes nothing
    assert (h.run, h.stats.probe_acks) == (2, 3)
    probe_round(h, h.next_probe, True)
    assert h.state == EvState.GOOD and steps(h)[-1][3] == "3 probes answered"


def test_a_gray_path_needs_more_answers_each_time_it_loses_again_and_is_forgiven_after_a_clean_spell():
    h = EvHealth(9, CFG)
    h.on_ack(0.0, 0.001)
    h.on_sack_loss(0.1)
    probe_round(h, h.next_probe, True)
    probe_round(h, h.next_probe, False)  # answered, then lost: the path answers some, loses some
    assert h.gray == 1 and h.need == 6 and h.run == 0
    t = h.next_probe
    for _ in range(6):
        probe_round(h, t, True)
        t = h.next_probe
    back = h.back_at
    assert h.state == EvState.GOOD and steps(h)[-1] == (back, "assumed_bad", "good", "6 probes answered")
    h.on_sack_loss(back + 0.3)  # loses again within `forgive` of coming back: remembered
    assert h.state == EvState.ASSUMED_BAD and h.gray == 2 and h.need == 12
    t = h.next_probe
    for _ in range(12):
        probe_round(h, t, True)
        t = h.next_probe
    assert h.state == EvState.GOOD and h.gray == 2
    h.on_ack(h.back_at + 0.49, 0.001)
    assert h.gray == 2  # not yet `forgive` clean
    h.on_ack(h.back_at + 0.5001, 0.001)
    assert h.gray == 1 and h.need == 6  # one strike per `forgive` clean
    h.on_ack(h.back_at + 1.0001, 0.001)
    assert h.gray == 0 and h.need == 3
    h.gray = 10
    assert h.need == CFG.max_recover_probes


def answer(h: EvHealth, n: int) -> None:
    """`n` probes in a row, each answered 1 ms after it went out."""
    for _ in range(n):
        probe_round(h, h.next_probe, True)


def test_the_hold_down_grows_with_every_relapse_and_decays_only_with_clean_time():
    h = EvHealth(11, CFG)
    h.on_ack(0.0, 0.001)
    h.on_sack_loss(0.1)
    holds = []  # (answered probes it took, time from the loss to GOOD)
    for relapse in range(4):
        lost = h.last_loss
        answer(h, h.need)
        holds.append((int(steps(h)[-1][3].split()[0]), round(h.back_at - lost, 3)))
        assert h.state == EvState.GOOD and h.probation
        h.on_timeout(h.back_at + 0.1)  # keeps losing: back within `forgive`, lost again
    # doubled per relapse up to 24: the first probe 20 ms after the loss, then one per gap (5 ms) + RTT (1 ms)
    assert holds == [(3, 0.033), (6, 0.051), (12, 0.087), (24, 0.159)]
    assert h.gray == 4 and h.need == 24
    answer(h, 24)
    t = h.back_at
    grays = []
    for dt in (0.2, 0.49, 0.5, 0.99, 1.0, 1.5, 2.0):  # clean ACKs
        h.on_ack(t + dt, 0.001)
        grays.append(h.gray)
    assert grays == [4, 4, 3, 3, 2, 1, 0]  # one strike forgotten per 0.5 s GOOD without a loss
    # on probation until every strike is forgotten: the weight held; the ACK that ended it gave back 1/16
    assert not h.probation and h.weight == CFG.probation_weight + CFG.weight_regain
    h.on_timeout(t + 2.1)  # a loss long after: a fresh start, no strike
    assert h.gray == 0 and h.need == 3
    answer(h, 3)
    h.on_ack(h.back_at + 0.3, 0.001)
    h.on_timeout(h.back_at + 0.4)  # relapse: strike 1; its clean time restarts at the loss
    answer(h, 6)
    h.on_ack(h.back_at + 0.49, 0.001)
    assert h.gray == 1  # clean time is GOOD time: from coming back, not from the loss
    h.on_ack(h.back_at + 0.5, 0.001)
    assert h.gray == 0


def test_an_ev_back_from_assumed_bad_is_on_probation_low_weight_and_probed_then_clean_acks_make_it_whole():
    h = EvHealth(12, CFG)
    h.on_ack(0.0, 0.001)
    h.on_sack_loss(0.1)
    answer(h, 3)
    back = h.back_at
    assert h.state == EvState.GOOD and h.probation and h.weight == CFG.probation_weight and h.usable
    t = h.next_probe
    assert h.probe_due(t) and not h.probe_due(t - 1e-4)  # a gap after the last answer
    h.on_probe_sent(t)
    assert h.probe_deadline == pytest.approx(t + 4 * CFG.min_rto)  # an RTT spike must not demote a usable EV
    h.on_probe_ack(t + 0.002, 0.002)
    assert h.state == EvState.GOOD and h.probe_deadline is None and h.next_probe == pytest.approx(t + 0.007)
    for i in range(20):
        h.on_ack(back + 0.02 * i, 0.001)  # clean ACKs within `forgive` (0.5 s): the weight is held
    assert h.probation and h.weight == CFG.probation_weight
    h.tick(back + 0.5)  # served: GOOD `forgive` without a loss, no strike to forget
    assert not h.probation and not h.probe_due(back + 1)  # probes stop
    for i in range(15):
        h.on_ack(back + 0.6 + i * 0.001, 0.001)
    assert h.weight == 1.0  # then clean ACKs give the weight back, 1/16 each
    # a probation probe lost is a loss: ASSUMED_BAD at once, a strike (within `forgive` of coming back)
    g = EvHealth(13, CFG)
    g.on_ack(0.0, 0.001)
    g.on_timeout(0.1)
    answer(g, 3)
    g.on_probe_sent(g.next_probe)
    g.tick(g.probe_deadline)
    assert g.state == EvState.ASSUMED_BAD and g.gray == 1 and g.need == 6 and not g.probation
    assert steps(g)[-1][2:] == ("assumed_bad", "probe lost on probation")
    assert g.stats.probe_losses == 1


def test_denied_only_by_the_controller_never_by_a_probe_and_nothing_else_changes_it():
    h = EvHealth(10, CFG)
    h.on_ack(0.0, 0.001)
    h.on_sack_loss(0.01)
    h.on_probe_sent(0.03)
    h.set_state(0.031, EvState.DENIED)
    assert h.state == EvState.DENIED and not h.usable and h.probe_deadline is None
    h.on_probe_ack(0.032, 0.001)  # the probe in flight answers: DENIED stays
    for t in (0.1, 0.2, 0.5, 1.0):
        h.on_ack(t, 0.001)
        h.on_nack(t)
        h.on_timeout(t)
        h.on_sack_loss(t)
        h.tick(t)
        assert not h.probe_due(t)  # a denied EV is never probed
    assert h.state == EvState.DENIED and h.stats.probes == 1
    h.set_state(1.1, EvState.UNKNOWN)  # the controller takes it off its denylist
    assert h.usable and steps(h)[2:] == [(0.031, "assumed_bad", "denied", "controller"),
                                         (1.1, "denied", "unknown", "controller")]


def test_rto_follows_rfc6298_within_its_floor_and_cap():
    h = EvHealth(11, CFG)
    assert h.rto() == CFG.min_rto  # no sample yet
    h.on_ack(0.0, 0.010)
    assert h.stats.srtt == 0.010 and h.stats.rttvar == 0.005
    assert h.rto() == pytest.approx(0.030)
    h.on_ack(0.1, 0.002)
    assert h.stats.rttvar == pytest.approx(0.75 * 0.005 + 0.25 * 0.008)
    assert h.stats.srtt == pytest.approx(0.875 * 0.010 + 0.125 * 0.002)
    assert h.stats.min_rtt == 0.002
    h.on_ack(0.2, 1.0)
    assert h.rto() == CFG.max_rto


def test_data_sent_on_an_assumed_bad_or_denied_ev_is_counted():
    h = EvHealth(12, CFG)
    h.on_timeout(0.0)
    h.on_sent(0.001)
    h.set_state(0.002, EvState.DENIED)
    h.on_sent(0.003)
    assert h.stats.sent_while_failed == 2 and h.stats.sent == 2


# --- the table: floor, backups, controller, events -----------------------------------------------

def test_ev_min_active_holds_a_loss_that_would_leave_too_few_usable_evs():
    t = EvTable([0, 1, 1024], CFG, min_active=2)
    t[0].on_sack_loss(0.1)
    assert t[0].state == EvState.ASSUMED_BAD
    t[1].on_sack_loss(0.1)
    t[1].on_timeout(0.2)
    assert t[1].state == EvState.UNKNOWN and t[1].floor_held == 2 and t[1].stats.losses == 2
    t[0].set_state(0.3, EvState.GOOD)
    t[1].on_sack_loss(0.4)
    assert t[1].state == EvState.ASSUMED_BAD  # two usable left: the floor allows it now
    with pytest.raises(ValueError, match=r"^ev_min_active 4 is not within 0-3 \(the active EVs\)"):
        EvTable([0, 1, 1024], CFG, min_active=4)


def test_a_failed_ev_is_replaced_by_a_backup_of_its_own_plane():
    ids = [0, 1, 2, 1024, 1025, 1026]
    planes = {e: e >> 10 for e in ids}
    assert split_active(ids, planes, 1) == [0, 1, 1024, 1025]
    t = EvTable(ids, CFG, active=split_active(ids, planes, 1))
    assert t.backup == [2, 1026]
    t[1].on_sack_loss(0.1)
    assert t.active_set(0.1) == [0, 2, 1024, 1025] and t.backup == [1026, 1]
    assert t.replacements == [(0.1, 1, 2, "assumed_bad: a backup of plane 0")]
    t[0].set_state(0.2, EvState.DENIED)
    assert t.active_set(0.2) == [0, 2, 1024, 1025]  # plane 0 has no usable backup left: plane 1's is not taken
    t[1].set_state(0.3, EvState.GOOD)
    assert t.active_set(0.3) == [1, 2, 1024, 1025] and t.backup == [1026, 0]
    t.replace(1024, 1026, 0.4)  # the controller's REPLACE_EV
    assert t.active == [1, 2, 1026, 1025] and t.backup == [0, 1024]
    with pytest.raises(ValueError, match=r"^EV 0x400 is not active \(active: 0x1, 0x2, 0x402, 0x401\)"):
        t.replace(1024, 0)
    with pytest.raises(ValueError, match=r"^EV 0x401 is not a backup EV here \(backups: 0x0, 0x400\)"):
        t.replace(1, 1025)
    assert split_active([0, 1024], {0: 0, 1024: 1}, 3) == [0, 1024]  # one EV of every plane stays active


def test_state_change_events_follow_the_mask_and_carry_the_drop_count():
    q = EvEvents(capacity=2)
    t = EvTable([0, 1, 1024], CFG, profile="h2", events=q)
    t[0].on_ack(0.01, 0.001)  # GOOD: queued
    t[1].on_ack(0.02, 0.001)  # GOOD: queued, the queue is full
    t[0].on_sack_loss(0.03)  # ASSUMED_BAD: dropped
    t[1024].on_ack(0.04, 0.001)  # dropped
    assert [e.to_json() for e in q.poll(1)] == [
        {"profile": "h2", "ev": 0, "port": 0, "state": "good", "drop_count": 0, "t": 0.01, "why": "first ack"}]
    t[1].set_state(0.05, EvState.DENIED)  # not in the mask (the spec supports GOOD and ASSUMED_BAD only)
    t[1024].on_timeout(0.06)
    assert [(e.ev, e.port, e.state.value, e.drop_count) for e in q.poll()] == [(1, 0, "good", 0),
                                                                             (1024, 1, "assumed_bad", 2)]
    assert q.poll() == [] and q.dropped_total == 2
    with pytest.raises(ValueError, match="^an EV event queue holds at least 1 event, not 0"):
        EvEvents(0)


def test_a_table_reports_probes_due_and_rejects_bad_id_lists():
    t = EvTable([0, 1, 1024], CFG)
    t[1].on_timeout(0.0)
    assert t.tick(0.01) == [] and t.tick(0.02) == [1]
    assert t.in_state(EvState.UNKNOWN) == [0, 1024]
    with pytest.raises(ValueError, match="at least one EV"):
        EvTable([])
    with pytest.raises(ValueError, match="duplicate"):
        EvTable([1, 1])
    with pytest.raises(ValueError, match=r"^active EVs \[5\] must be distinct EVs of \[0, 1\]"):
        EvTable([0, 1], active=[5])


# --- policies ------------------------------------------------------------------------------------

def flow(k: int = 0, sport: int = 0xC100) -> Flow:
    return Flow("fd00::1", "h2", sport, 0x100 + k, k)


def test_oblivious_spray_goes_round_every_active_ev_even_a_failed_one():
    t = EvTable([0, 1, 1024, 1025], CFG)
    t[1].on_timeout(0.0)
    p = Spray()
    assert [p.pick(t, flow(0), s) for s in range(6)] == [0, 1, 1024, 1025, 0, 1]
    assert [p.pick(t, flow(1), s) for s in range(2)] == [1, 1024]  # QP 1 starts one EV further
    assert p.repick(t, flow(0), 0, lost_ev=1024) == 1025
    b = EvTable([0, 1, 1024, 1025], CFG, active=[0, 1024])
    assert {p.pick(b, flow(2), s) for s in range(8)} == {0, 1024}  # backups are not sprayed on


def test_hash_and_qp_round_robin_keep_a_qp_on_one_ev_retransmissions_included():
    t = EvTable([0, 1, 1024, 1025], CFG)
    h = FiveTupleHash()
    for k in range(8):
        f = flow(k, 0xC000 + k)
        chosen = {h.pick(t, f, s) for s in range(16)} | {h.repick(t, f, 3, lost_ev=h.pick(t, f, 3))}
        assert len(chosen) == 1
    assert len({h.pick(t, flow(k, 0xC000 + k), 0) for k in range(64)}) == 4  # flows spread over all EVs
    q = QpRoundRobin()
    assert [q.pick(t, flow(k), 0) for k in range(5)] == [0, 1, 1024, 1025, 0]
    assert q.repick(t, flow(2), 0, lost_ev=1024) == 1024


def test_health_aware_sprays_over_usable_evs_uncongested_first_never_assumed_bad_or_denied_ones():
    t = EvTable([0, 1, 1024, 1025], CFG)
    p = HealthAware()
    t[1].on_timeout(0.0)
    t[1024].set_state(0.0, EvState.DENIED)
    assert [p.pick(t, flow(0), s) for s in range(4)] == [0, 1025, 0, 1025]
    assert p.repick(t, flow(0), 9, lost_ev=0) == 1025
    t[0].on_nack(0.01)
    assert {p.pick(t, flow(0), s) for s in range(4)} == {1025}  # 0 congested: used only when nothing else is
    t[1025].on_timeout(0.02)
    assert {p.pick(t, flow(0), s) for s in range(4)} == {0} and not p.holds(t)
    t[0].on_timeout(0.03)
    assert p.holds(t)  # nothing usable: the QP's data waits for a probe to bring an EV back
    assert not make("spray").holds(t) and not Ethereal().holds(t)  # the others keep sending
    t[0].set_state(0.04, EvState.GOOD)
    assert not p.holds(t) and {p.pick(t, flow(0), s) for s in range(4)} == {0}


def test_health_aware_gives_a_ce_echoing_ev_its_weights_share_and_the_whole_again_after_clean_acks():
    t = EvTable([0, 1, 1024, 1025], CFG)
    for e in t.ids:
        t[e].on_ack(0.0, 0.001)
    p = HealthAware()
    even = [p.pick(t, flow(0), s) for s in range(8)]
    assert even == [0, 1, 1024, 1025] * 2  # equal weights: plain round-robin
    for _ in range(3):
        t[1].on_ack(0.01, 0.001, ce=True)  # three CE echoes: weight 1/8
    picks = [p.pick(t, flow(0), s) for s in range(100)]
    # smooth weighted round-robin: in every 25 picks (weights 1 + 1 + 1 + 1/8 = 25/8) 8, 8, 8 and 1, spread out
    assert {e: picks.count(e) for e in t.ids} == {0: 32, 1: 4, 1024: 32, 1025: 32}
    assert [i for i, e in enumerate(picks) if e == 1] == [6, 31, 56, 81]
    assert p.repick(t, flow(0), 7, lost_ev=0) != 0
    for _ in range(7):
        t[1].on_ack(0.02, 0.001)  # 7 clean ACKs: 1/8 + 7/16 (+1/16 each)
    assert t[1].weight == 0.5625
    picks = [p.pick(t, flow(0), s) for s in range(200)]
    assert picks.count(1) in (32, 33)  # 0.5625 / 3.5625 of 200 = 31.6: its share grows with its weight
    for _ in range(7):
        t[1].on_ack(0.03, 0.001)
    assert t[1].weight == 1.0
    picks = [p.pick(t, flow(0), s) for s in range(8)]
    assert sorted(picks) == [0, 0, 1, 1, 1024, 1024, 1025, 1025]  # whole again: every EV its turn


def test_health_aware_takes_the_backup_of_the_failed_evs_plane():
    t = EvTable([0, 1, 1024, 1025], CFG, active=[0, 1024])
    p = HealthAware()
    t[1024].on_sack_loss(0.0)
    assert {p.pick(t, flow(0), s) for s in range(4)} == {0, 1025}  # the planes stay equally used


def test_ethereal_splits_a_message_into_equal_single_path_parts_on_the_least_loaded_evs():
    t = EvTable([0, 1, 1024, 1025], CFG)
    p = Ethereal(parts=4)
    p.load = {("h2", 0): 5, ("h2", 1024): 2, ("h2", 1025): 1, ("h3", 1): 9}  # h3's load is another destination's
    p.on_message(t, flow(0), 0, 8)
    route = [p.pick(t, flow(0), s) for s in range(8)]
    assert route == [1, 1, 1025, 1025, 1, 1, 1024, 1024]  # each part of 2 packets on one EV, least load first

    def h2() -> dict[int, int]:
        return {ev: n for (d, ev), n in sorted(p.load.items()) if d == "h2"}

    assert h2() == {0: 5, 1: 4, 1024: 4, 1025: 3}
    p.on_done(flow(0), 1, 2)
    assert h2()[1] == 2
    t[1024].on_timeout(0.0)
    p.on_message(t, flow(1), 0, 3)  # 3 parts of 1 (fewer packets than parts); the failed EV is skipped
    assert [p.pick(t, flow(1), s) for s in range(3)] == [1, 1, 1025]  # ties go to the first EV
    assert h2() == {0: 5, 1: 4, 1024: 4, 1025: 4}
    p.on_done(flow(1), 1025)  # lost on 1025: its load moves to the least-loaded other usable EV
    assert p.repick(t, flow(1), 2, lost_ev=1025) == 1 and h2() == {0: 5, 1: 5, 1024: 4, 1025: 3}


def test_make_names_the_known_policies_for_an_unknown_one():
    assert make("ethereal", parts=2).parts == 2 and make("health").name == "health"
    with pytest.raises(ValueError, match="unknown policy 'ecmp' .*spray, hash, roce-gbn, qp-rr, health, ethereal"):
        make("ecmp")


def reach(state: EvState) -> EvHealth:
    """An EV brought to `state` by evidence (DENIED: by the controller, the only way)."""
    h = EvHealth(20, CFG)
    if state == EvState.GOOD:
        h.on_ack(0.0, 0.001)
    elif state == EvState.ASSUMED_BAD:
        h.on_timeout(0.0)
    elif state == EvState.DENIED:
        h.set_state(0.0, EvState.DENIED)
    assert h.state == state
    return h


@pytest.mark.parametrize("start", list(EvState))
@pytest.mark.parametrize("to", list(EvState))
def test_the_controller_sets_any_state_from_any_and_only_it_leaves_denied(start: EvState, to: EvState):
    h = reach(start)
    h.set_state(1.0, to, "controller")
    assert h.state == to and h.probe_deadline is None
    changes = [t for t in h.transitions if t[0] == 1.0]
    assert changes == ([(1.0, start.value, to.value, "controller")] if start != to else [])
    assert h.probe_due(1.0 + CFG.probe_interval) == (to == EvState.ASSUMED_BAD)  # ASSUMED_BAD is probed, nothing else
    if to == EvState.DENIED:
        for _ in range(CFG.max_recover_probes):
            h.on_probe_ack(2.0, 0.001)
        h.on_ack(2.0, 0.001)
        assert h.state == EvState.DENIED
