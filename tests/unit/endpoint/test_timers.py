"""A packet queued, not lost, does not map its EV out (the late ACK of the transmission whose loss made the EV
ASSUMED_BAD takes the verdict and its gray strike back); a packet truly lost still does. And the EV model's
timers fitted to a shaped link's rate and queue (endpoint.timers), as the collective ranks and the endpoint
senders build them."""

from __future__ import annotations

import pytest

from endpoint.collective.rank import Transport
from endpoint.ev import EvConfig, EvHealth, EvState
from endpoint.sender import SenderConfig
from endpoint.timers import (ACK_FRAME, CARRIER, DATA_OVERHEAD, LinkQueue, fit, link_queue, queue_delay,
                             recover_probes, round_trip)
from endpoint.wire import ACK, AckHeader
from tests.unit.endpoint.test_transport import Net

CFG = EvConfig(min_rto=0.025, probe_interval=0.02, probe_gap=0.005, recover_probes=2, max_recover_probes=8, forgive=0.5)


def ack_of(tx) -> AckHeader:  # noqa: ANN001
    return AckHeader(ACK, tx.ev, tx.header.ev_seq, tx.header.tx_ns)


# --- the late ACK: queued, not lost ----------------------------------------------------------------

def test_a_timed_out_packet_whose_ack_comes_late_gives_its_ev_back_and_one_never_acked_does_not():
    """One QP on one EV: packets 0 and 1 out at t=0; at the 10 ms floor packet 0 times out, the EV is ASSUMED_BAD
    and packet 1, out on it, is declared lost with it. Packet 1's ACK at 25 ms is no answer to the verdict
    (it rests on packet 0): the EV stays out. Packet 0's ACK at 30 ms shows it was queued: the EV is GOOD again."""
    s = Net("health", SenderConfig(qps=1, messages=8, window=8, evs_per_qp=1)).sender
    q = s.order[0]
    tx0, tx1 = s.next_packet(0.0, 0), s.next_packet(0.0, 1000)
    assert tx0.ev == tx1.ev
    h = s.tables["h2"][tx0.ev]
    s.tick(0.0101, 10_100_000)
    assert h.state == EvState.ASSUMED_BAD and not q.outstanding
    s.on_ack("h2", tx1.qp, tx1.psn, ack_of(tx1), 0.025, 25_000_000)
    assert h.state == EvState.ASSUMED_BAD and h.stats.undone == 0 and q.acked == {1}
    s.on_ack("h2", tx0.qp, tx0.psn, ack_of(tx0), 0.03, 30_000_000)
    assert h.state == EvState.GOOD and h.stats.undone == 1 and q.acked == {0, 1} and q.spurious == 2
    assert [tuple(t) for t in h.transitions][-2:] == [(0.0101, "unknown", "assumed_bad", "timeout"),
                                                       (0.03, "assumed_bad", "good", "late ack: queued, not lost")]
    assert h.usable and s.next_packet(0.031, 31_000_000).ev == tx0.ev  # data takes it again, no probe round first


def test_a_lost_packet_keeps_its_ev_out_until_the_probes_answer():
    """The same start, but packet 0 never arrives: its resend on another EV is acknowledged (a new transmission,
    not the lost one), and the EV stays ASSUMED_BAD until `recover_probes` probes in a row are answered."""
    s = Net("health", SenderConfig(qps=1, messages=8, window=8)).sender
    tx = s.next_packet(0.0, 0)
    h = s.tables["h2"][tx.ev]
    s.tick(0.0101, 10_100_000)
    resend = s.next_packet(0.011, 11_000_000)
    assert resend.psn == tx.psn and resend.ev != tx.ev
    s.on_ack("h2", resend.qp, resend.psn, ack_of(resend), 0.013, 13_000_000)
    assert h.state == EvState.ASSUMED_BAD and h.stats.undone == 0
    assert s.tables["h2"][resend.ev].stats.undone == 0


def test_a_late_ack_after_a_sack_loss_verdict_undoes_it_too():
    h = EvHealth(5, CFG)
    h.on_ack(0.0, 0.001)
    h.on_sack_loss(0.1, sent=111)
    assert h.state == EvState.ASSUMED_BAD
    h.on_late_ack(0.12, 111)
    assert h.state == EvState.GOOD and h.stats.undone == 1 and h.stats.sack_losses == 1


def test_the_undo_takes_back_the_gray_strike_and_restores_probation():
    """Back from probes at 0.2 s (on probation), a spurious timeout at 0.25 s is a relapse: a gray strike, twice
    the probes to come back. Its late ACK takes both back: gray 0, the same probes needed, still on probation."""
    h = EvHealth(5, CFG)
    h.on_ack(0.0, 0.001)
    h.on_timeout(0.1, sent="a")
    t = 0.12
    for _ in range(CFG.recover_probes):
        h.on_probe_sent(t)
        h.on_probe_ack(t + 0.001, 0.001)
        t += 0.01
    assert h.state == EvState.GOOD and h.probation and h.gray == 0 and h.need == 2
    h.on_timeout(0.25, sent="b")
    assert h.state == EvState.ASSUMED_BAD and h.gray == 1 and h.need == 4 and not h.probation
    h.on_late_ack(0.26, "a")  # the earlier verdict's packet: that one was already answered by probes
    assert h.state == EvState.ASSUMED_BAD and h.gray == 1
    h.on_late_ack(0.27, "b")
    assert h.state == EvState.GOOD and h.gray == 0 and h.need == 2 and h.probation
    assert h.last_loss == 0.1 and h.weight == CFG.probation_weight


def test_no_undo_when_turned_off_nor_of_the_controllers_verdict():
    off = EvHealth(1, EvConfig(undo_spurious=False))
    off.on_ack(0.0, 0.001)
    off.on_timeout(0.1, sent=7)
    off.on_late_ack(0.2, 7)
    assert off.state == EvState.ASSUMED_BAD and off.stats.undone == 0
    h = EvHealth(1, CFG)
    h.on_ack(0.0, 0.001)
    h.on_timeout(0.1, sent=7)
    h.set_state(0.15, EvState.ASSUMED_BAD, "controller")
    h.on_late_ack(0.2, 7)
    assert h.state == EvState.ASSUMED_BAD and h.stats.undone == 0


def test_a_loss_without_a_named_transmission_is_never_undone():
    h = EvHealth(1, CFG)
    h.on_ack(0.0, 0.001)
    h.on_timeout(0.1)
    h.on_late_ack(0.2, None)
    assert h.state == EvState.ASSUMED_BAD



def test_a_spurious_loss_widens_a_fitted_reorder_window_and_never_narrows_it():
    """RACK's window doubles on each spurious loss up to twice the configured one (at least 50 ms): a window
    fitted to a shaped link's queue (340 ms) grows to 680 ms, and is not cut to the 50 ms a fabric needs."""
    from controller.model.topology import load
    from controller.plan.evs import host_evs
    from controller.routes import Fabric
    from endpoint.policy import make
    from endpoint.sender import SenderCore
    from tests.unit.endpoint.test_transport import LAB

    evs = host_evs(Fabric(load(LAB)), "h0", ["h2"])
    s = SenderCore("h0", evs, make("health"), SenderConfig(qps=1, messages=8, window=8),
                   EvConfig(min_rto=0.01, reorder_window=0.34))
    tx = s.next_packet(0.0, 0)
    s.tick(0.0101, 10_100_000)
    s.on_ack("h2", tx.qp, tx.psn, ack_of(tx), 0.03, 30_000_000)
    assert s.order[0].spurious == 1 and s.reorder_window == pytest.approx(0.68)
    assert Net("health", SenderConfig(qps=1)).sender.max_reorder == 0.05  # a 5 ms window: up to 50 ms, as before

# --- the timers from the link -----------------------------------------------------------------------

def test_the_round_trip_is_every_hop_storing_the_frame_and_its_ack_behind_the_queued_frames():
    q = link_queue(1.0, 36, 1024)
    frame, ack = 1024 + DATA_OVERHEAD + CARRIER, ACK_FRAME + CARRIER
    assert q == LinkQueue(125_000.0, 36, frame, ack, 4)
    assert queue_delay(q) == pytest.approx(36 * frame / 125_000)
    assert round_trip(q) == pytest.approx((4 * (frame + ack) + 36 * frame) / 125_000)
    assert link_queue(0.0, 36, 1024) is None
    assert link_queue(1.0, 4, 256, carrier=False).frame_bytes == 256 + DATA_OVERHEAD
    with pytest.raises(ValueError, match="a link queue needs"):
        LinkQueue(0.0, 1, 100)


def test_fit_holds_the_timers_above_the_queue_and_keeps_the_hold_down_in_time():
    base = EvConfig()
    assert fit(base, None) is base
    q = link_queue(1.0, 36, 1024)
    rt = round_trip(q)
    c = fit(base, q)
    assert c.min_rto == pytest.approx(rt) and c.max_rto == pytest.approx(4 * rt)
    assert c.probe_interval == pytest.approx(rt) and c.max_probe_interval == pytest.approx(4 * rt)
    assert c.reorder_window == pytest.approx(queue_delay(q))
    # 64 probes at the 5 ms gap hold an EV out 0.32 s; a probe here takes 5 ms + 384 ms: 1 would do, 4 at least
    assert (c.recover_probes, c.max_recover_probes) == (4, 16)
    assert c.undo_spurious and c.forgive == base.forgive and c.probe_gap == base.probe_gap
    fast = fit(base, link_queue(10_000.0, 36, 1024))  # 10 Gbit/s: the queue is far below every default
    assert (fast.min_rto, fast.probe_interval, fast.reorder_window, fast.recover_probes) == (0.025, 0.02, 0.005, 64)
    assert recover_probes(0.32, 0.04, 64) == 8 and recover_probes(0.32, 0.0, 64) == 64


def test_a_collective_rank_builds_its_ev_model_from_the_link_unless_told_fixed():
    tr = Transport(window=4, mtu=1024, min_rto_ms=25.0, max_rto_ms=1000.0, link_mbit=1.0, queued_frames=36)
    assert tr.ev_config() == fit(EvConfig(min_rto=0.025, max_rto=1.0, probe_interval=0.02), link_queue(1.0, 36, 1024))
    fixed = Transport(timers="fixed", min_rto_ms=340.0, max_rto_ms=1360.0, undo_spurious=False, link_mbit=1.0)
    assert fixed.ev_config() == EvConfig(min_rto=0.34, max_rto=1.36, probe_interval=0.02, undo_spurious=False)
    assert Transport().ev_config() == EvConfig(min_rto=0.025, max_rto=1.0, probe_interval=0.02)  # unshaped


def test_an_endpoint_scenarios_senders_are_told_the_link_and_the_windows_of_the_busiest_sender_and_receiver():
    from endpoint.host import _parser
    from endpoint.lab import Workload
    from endpoint.scenarios import queued_frames

    assert queued_frames([("h0", "h2"), ("h1", "h3")], 4, 16) == 2 * 4 * 16  # its own windows, as many into its peer
    assert queued_frames([("h0", "h2"), ("h1", "h2"), ("h3", "h2")], 4, 16) == (1 + 3) * 4 * 16  # an incast
    argv = Workload(link_mbit=1.0, queued_frames=128).argv()
    args = _parser().parse_args(["send", "--topology", "t", "--evs", "e", "--host", "h0", "--to", "h2", *argv])
    assert (args.link_mbit, args.queued_frames) == (1.0, 128)
