"""The EV state machine over synthetic ACK/loss timelines, and the policies' choices."""

from __future__ import annotations

import pytest

from endpoint.ev import EvConfig, EvHealth, EvState, EvTable
from endpoint.policy import Ethereal, FiveTupleHash, Flow, HealthAware, QpRoundRobin, Spray, make

CFG = EvConfig(min_rto=0.025, max_rto=0.25, probe_interval=0.02, max_probe_interval=0.08, recover_acks=3,
               forgive=0.5)


def states(h: EvHealth) -> list[tuple[float, str, str, str]]:
    return [tuple(t) for t in h.transitions]


# --- the state machine ---------------------------------------------------------------------------

def test_a_timeout_fails_a_good_ev_at_once_and_probing_brings_it_back():
    h = EvHealth(7, CFG)
    h.on_sent(0.0)
    h.on_ack(0.002, 0.002)
    h.on_timeout(0.1)
    assert h.state == EvState.FAILED and not h.usable
    assert not h.probe_due(0.119) and h.probe_due(0.1201)  # probe_interval after the failure
    h.on_probe_sent(0.12)
    assert h.state == EvState.PROBING
    h.tick(0.13)  # no answer yet, still within the probe's RTO
    assert h.state == EvState.PROBING
    h.on_probe_ack(0.131)
    assert h.state == EvState.GOOD and h.usable
    assert states(h) == [(0.1, "good", "failed", "timeout"), (0.12, "failed", "probing", "probe sent"),
                         (0.131, "probing", "good", "probe acked")]


def test_unanswered_probes_back_off_doubling_up_to_the_cap():
    h = EvHealth(1, CFG)
    h.on_timeout(1.0)
    t, gaps = 1.0, []
    for _ in range(4):
        gaps.append(round(h.next_probe - t, 6))
        h.on_probe_sent(h.next_probe)
        t = h.probe_deadline
        h.tick(t)  # the probe's RTO passes without an ACK
        assert h.state == EvState.FAILED
    assert gaps == [0.02, 0.04, 0.08, 0.08]
    assert h.stats.probes == 4 and h.strikes == 5  # the timeout, then 4 probes unanswered


def test_a_sack_loss_makes_an_ev_suspect_and_a_second_one_fails_it():
    h = EvHealth(2, CFG)
    h.on_sack_loss(0.5)
    assert h.state == EvState.SUSPECT and h.usable
    h.on_sack_loss(0.6)
    assert h.state == EvState.FAILED
    assert h.stats.sack_losses == 2 and h.stats.losses == 2


def test_an_unused_suspect_ev_is_probed_failed_on_silence_and_restored_on_an_answer():
    h = EvHealth(2, CFG)
    h.on_sack_loss(1.0)
    assert not h.probe_due(1.019) and h.probe_due(1.0201)
    h.on_probe_sent(1.0201)
    h.tick(1.0201 + CFG.min_rto)  # the cut path: no answer
    assert h.state == EvState.FAILED
    h.on_probe_sent(h.next_probe)
    h.on_probe_ack(h.next_probe + 0.001)
    assert [x[1:] for x in h.transitions] == [("good", "suspect", "sack loss"), ("suspect", "probing", "probe sent"),
                                              ("probing", "failed", "probe timeout"), ("failed", "probing", "probe sent"),
                                              ("probing", "good", "probe acked")]


def test_a_suspect_ev_recovers_after_enough_clean_acks_but_ce_resets_the_count():
    h = EvHealth(3, CFG)
    h.on_sack_loss(0.0)
    h.on_ack(0.01, 0.001)
    h.on_ack(0.02, 0.001)
    h.on_ack(0.03, 0.001, ce=True)  # congestion: the count starts again
    h.on_ack(0.04, 0.001)
    h.on_ack(0.05, 0.001)
    assert h.state == EvState.SUSPECT
    h.on_ack(0.06, 0.001)
    assert h.state == EvState.GOOD and h.stats.ecn == 1
    assert states(h)[-1] == (0.06, "suspect", "good", "3 clean acks")


def test_ecn_and_trimming_suspect_an_ev_but_never_fail_it():
    h = EvHealth(4, CFG)
    h.on_ack(0.0, 0.001, ce=True)
    assert h.state == EvState.SUSPECT
    for t in range(10):
        h.on_nack(0.01 * t)
    assert h.state == EvState.SUSPECT and h.stats.nacks == 10 and h.stats.timeouts == 0


def test_a_congestion_mark_sets_an_ev_aside_for_a_quiet_probe_interval_without_probing_it():
    h = EvHealth(8, CFG)
    h.on_nack(1.0)  # trimmed: the path answered, it is busy
    assert h.state == EvState.SUSPECT and h.congested and h.usable
    h.on_ack(1.01, 0.04, ce=True)  # another mark restarts the quiet interval
    assert not h.probe_due(1.05) and h.next_probe == 1.01 + CFG.probe_interval
    h.tick(1.029)
    assert h.state == EvState.SUSPECT
    h.tick(1.031)
    assert h.state == EvState.GOOD and h.stats.probes == 0 and h.stats.nacks == 1 and h.stats.ecn == 1
    assert [x[1:] for x in h.transitions] == [("good", "suspect", "trimmed"),
                                              ("suspect", "good", "no congestion mark for a probe interval")]


def test_a_loss_on_a_congested_ev_is_its_first_loss_and_makes_it_probed_the_second_fails_it():
    h = EvHealth(9, CFG)
    h.on_nack(2.0)
    h.on_sack_loss(2.005)
    assert h.state == EvState.SUSPECT and not h.congested
    assert not h.probe_due(2.0249) and h.probe_due(2.025)  # a loss suspect is probed after the interval
    h.tick(2.03)
    assert h.state == EvState.SUSPECT  # no quiet-interval return for a loss
    h.on_sack_loss(2.031)
    assert h.state == EvState.FAILED
    assert [x[1:] for x in h.transitions] == [("good", "suspect", "trimmed"),
                                              ("suspect", "failed", "second loss while suspect")]


def test_a_probe_answer_is_a_round_trip_sample_even_after_its_deadline():
    h = EvHealth(10, CFG)
    h.on_timeout(0.0)
    h.on_probe_sent(0.02, rto=0.03)
    assert h.probe_deadline == 0.02 + 0.03  # the sender's timeout when it is above the EV's own
    h.tick(0.05)
    assert h.state == EvState.FAILED
    h.on_probe_ack(0.07, 0.05)  # the probe waited in a queue: the RTO must learn that
    assert h.stats.srtt == 0.05 and h.stats.rttvar == 0.025 and h.rto() == 0.05 + 4 * 0.025
    assert h.state == EvState.FAILED  # a late answer does not restore the EV: the next probe does


def test_rto_follows_rfc6298_within_its_floor_and_cap():
    h = EvHealth(5, CFG)
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


def test_data_sent_on_a_failed_ev_is_counted_and_failures_are_forgiven_after_a_quiet_spell():
    h = EvHealth(6, CFG)
    h.on_timeout(0.0)
    h.on_sent(0.001)
    assert h.stats.sent_while_failed == 1
    h.on_probe_sent(0.02)
    h.on_probe_ack(0.021)
    h.on_ack(0.3, 0.001)
    assert h.strikes == 1  # 0.3 s after the loss: not yet forgiven
    h.on_ack(0.6, 0.001)
    assert h.strikes == 0


def test_a_table_reports_probes_due_and_rejects_bad_id_lists():
    t = EvTable([0, 1, 1024], CFG)
    t[1].on_timeout(0.0)
    assert t.tick(0.01) == [] and t.tick(0.02) == [1]
    assert t.in_state(EvState.GOOD) == [0, 1024]
    with pytest.raises(ValueError, match="at least one EV"):
        EvTable([])
    with pytest.raises(ValueError, match="duplicate"):
        EvTable([1, 1])


# --- policies ------------------------------------------------------------------------------------

def flow(k: int = 0, sport: int = 0xC100) -> Flow:
    return Flow("fd00::1", "h2", sport, 0x100 + k, k)


def test_oblivious_spray_goes_round_every_ev_even_a_failed_one():
    t = EvTable([0, 1, 1024, 1025], CFG)
    t[1].on_timeout(0.0)
    p = Spray()
    assert [p.pick(t, flow(0), s) for s in range(6)] == [0, 1, 1024, 1025, 0, 1]
    assert [p.pick(t, flow(1), s) for s in range(2)] == [1, 1024]  # QP 1 starts one EV further
    assert p.repick(t, flow(0), 0, lost_ev=1024) == 1025


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


def test_health_aware_sprays_over_good_evs_then_suspect_ones_never_failed_ones():
    t = EvTable([0, 1, 1024, 1025], CFG)
    p = HealthAware()
    t[1].on_timeout(0.0)
    t[1024].on_sack_loss(0.0)
    assert [p.pick(t, flow(0), s) for s in range(4)] == [0, 1025, 0, 1025]
    assert p.repick(t, flow(0), 9, lost_ev=0) == 1025
    t[0].on_timeout(0.1)
    t[1025].on_timeout(0.1)
    assert {p.pick(t, flow(0), s) for s in range(4)} == {1024}  # only the suspect one is left
    assert not p.holds(t)
    t[1024].on_timeout(0.1)
    assert p.holds(t)  # nothing usable: the QP's data waits for a probe to bring an EV back
    assert not make("spray").holds(t) and not Ethereal().holds(t)  # the others keep sending
    t[0].on_probe_sent(0.2)
    t[0].on_probe_ack(0.201)
    assert not p.holds(t) and {p.pick(t, flow(0), s) for s in range(4)} == {0}


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
    with pytest.raises(ValueError, match="unknown policy 'ecmp' .*spray, hash, qp-rr, health, ethereal"):
        make("ecmp")
