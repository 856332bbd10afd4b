"""The sender's retransmission backoff, duplicate ACKs and the window, a NACK matched to its transmission, and the
controller's operations on a running sender (deny, set a state, replace, query) with their EV events."""

from __future__ import annotations

import pytest

from endpoint.ev import EvState
from endpoint.sender import MAX_BACKOFF, SenderConfig, backoff
from endpoint.wire import ACK, DATA, NACK, AckHeader, DataHeader, data_frame, parse, tx_stamp
from tests.unit.endpoint.test_transport import DMAC, SMAC, Net, decap


def test_every_expiry_doubles_a_packets_retransmission_timer():
    """RFC 6298 5.5: transmission n of a packet waits backoff(n) = 2**n RTOs (the 10 ms floor here), up to 64."""
    s = Net("spray", SenderConfig(qps=1, messages=1, window=1)).sender
    q = s.order[0]
    t, ns, waits, attempts = 0.0, 0, [], []
    tx = s.next_packet(t, ns)
    for _ in range(8):
        attempts.append(tx.header.attempt)
        wait = 0.01 * backoff(tx.header.attempt)
        s.tick(t + wait - 1e-6, ns + int((wait - 1e-6) * 1e9))
        assert q.outstanding, "expired before its backed-off timer"
        t, ns = t + wait + 1e-9, ns + int(wait * 1e9) + 1
        s.tick(t, ns)
        assert not q.outstanding
        waits.append(round(wait, 6))
        tx = s.next_packet(t, ns)
    assert attempts == list(range(8)) and tx.header.attempt == 8
    assert waits == [0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 0.64]  # doubled on every expiry, capped at 2**6
    assert backoff(MAX_BACKOFF + 5) == 64 and backoff(0) == 1


def test_a_duplicate_ack_does_not_grow_the_congestion_window():
    s = Net("health", SenderConfig(qps=1, messages=8, window=8, cc=True)).sender
    q = s.order[0]
    q.cc.cwnd = 4.0
    tx = s.next_packet(0.0, 0)
    ack = AckHeader(ACK, tx.ev, tx.header.ev_seq, tx.header.tx_ns)
    s.on_ack("h2", tx.qp, tx.psn, ack, 0.002, 2_000_000)
    grown = q.cc.cwnd
    assert grown == pytest.approx(4.25)  # +1/cwnd for the ACK of a new packet
    for k in range(5):
        s.on_ack("h2", tx.qp, tx.psn, ack, 0.003 + k * 1e-3, 3_000_000 + k * 1_000_000)
    assert q.cc.cwnd == grown and q.duplicate_acks == 5 and q.cc.acked == 1


def test_the_flow_label_carries_the_transmission_stamp_through_a_trim_to_the_nack():
    net = Net("health", SenderConfig(qps=1, messages=1, window=1))
    ev = net.sender.evs["h2"][1]
    tx_ns = 123_456_789_012
    whole = decap(data_frame(SMAC, DMAC, ev.src, ev.dst, ev.carrier, 0x100, 5, DataHeader(DATA, "h0", 1, 0, 1, 0, tx_ns), 64))
    rx = parse(whole)
    assert rx.flow_label == tx_stamp(tx_ns) == (tx_ns >> 10) & 0xFFFFF and rx.icrc_ok  # outside the ICRC
    trimmed = parse(whole[:14 + 40 + 8 + 12])
    assert trimmed.trimmed and trimmed.flow_label == tx_stamp(tx_ns)
    reply = net.receiver.on_packet(trimmed, 0)
    assert reply.header.kind == NACK and reply.header.tx_ns == tx_stamp(tx_ns)


def test_a_nack_of_an_earlier_transmission_leaves_the_retransmission_outstanding():
    """One EV per QP, so the resend takes the same EV: the trimmed first try's NACK, arriving after the
    resend, names the first try's stamp and must not cancel the resend; the resend's own NACK does."""
    s = Net("spray", SenderConfig(qps=1, messages=1, window=1, evs_per_qp=1)).sender
    q = s.order[0]
    first = s.next_packet(0.0, 0)
    s.tick(0.0101, 10_100_000)
    again = s.next_packet(0.011, 11_000_000)
    assert again.ev == first.ev and again.psn == first.psn and tx_stamp(first.header.tx_ns) != tx_stamp(again.header.tx_ns)
    s.on_ack("h2", first.qp, first.psn, AckHeader(NACK, first.ev, 0, tx_stamp(first.header.tx_ns)), 0.012, 12_000_000)
    assert q.trims == 1 and 0 in q.outstanding and q.outstanding[0].tx_ns == again.header.tx_ns
    assert s.next_packet(0.0121, 12_100_000) is None  # nothing queued to resend
    s.on_ack("h2", again.qp, again.psn, AckHeader(NACK, again.ev, 0, tx_stamp(again.header.tx_ns)), 0.013, 13_000_000)
    assert q.trims == 2 and 0 not in q.outstanding
    resend = s.next_packet(0.0131, 13_100_000)
    assert resend.psn == first.psn and resend.header.attempt == 2


# --- the controller's operations -----------------------------------------------------------------

def test_the_controller_denies_sets_replaces_and_queries_evs_and_the_changes_are_events():
    s = Net("health", SenderConfig(qps=2, messages=8, window=8, backups_per_plane=1)).sender
    table = s.tables["h2"]
    assert table.active == [0, 1024] and table.backup == [1, 1025]
    assert [(e["ev"], e["state"], e["active"]) for e in s.query("h2")] == [
        (0, "unknown", True), (1, "unknown", False), (1024, "unknown", True), (1025, "unknown", False)]
    assert s.control({"op": "deny", "dst": "h2", "evs": [0]}, 0.1)["evs"][0]["state"] == "denied"
    assert table[0].state == EvState.DENIED
    assert {s.next_packet(0.2, 200_000_000).ev for _ in range(4)} == {1, 1024}  # plane 0's backup took its place
    assert all(q.table.active == [1, 1024] for q in s.order)
    assert all(q.table.replacements == [(0.2, 0, 1, "denied: a backup of plane 0")] for q in s.order)  # when it was used
    assert s.to_json()["qps"][0]["replacements"] == [[0.2, 0, 1, "denied: a backup of plane 0"]]
    answer = s.control({"op": "replace", "dst": "h2", "ev": 1024, "ev_new": 1025}, 0.3)
    assert "error" not in answer and table.active == [1, 1025] and all(q.table.active == [1, 1025] for q in s.order)
    s.control({"op": "set_state", "dst": "h2", "ev": 0, "state": "unknown"}, 0.4)
    assert table[0].state == EvState.UNKNOWN
    table[1].on_ack(0.5, 0.001)
    assert [(e.ev, e.state.value, e.why) for e in s.events.poll()] == [(1, "good", "first ack")]  # mask: GOOD, BAD
    table[1].on_ack(0.6, 0.001, ce=True)  # a CE echo: its weight in the choice halved, what QUERY says
    assert [(e["ev"], e["weight"], e["probation"]) for e in s.query("h2")][1] == (1, 0.5, False)


@pytest.mark.parametrize("request_, error", [
    ({"op": "deny", "dst": "h9", "ev": 0}, "h0 has no EVs towards 'h9' (destinations: h2)"),
    ({"op": "deny", "dst": "h2", "evs": [0, 7]}, "h0 has no EV 0x7 towards h2 (EVs: 0x0, 0x1, 0x400, 0x401)"),
    ({"op": "deny", "dst": "h2"}, "'deny' needs a destination and at least one EV"),
    ({"op": "set_state", "dst": "h2", "ev": 0, "state": "fine"}, "'fine' is not a valid EvState"),
    ({"op": "replace", "dst": "h2", "ev": 0}, "'replace' needs one EV and its replacement (ev_new)"),
    ({"op": "replace", "dst": "h2", "ev": 0, "ev_new": 1024}, "EV 0x400 is not a backup EV here (backups: none)"),
    ({"op": "drop"}, "unknown operation 'drop' (known: query, deny, set_state, replace)"),
])
def test_a_bad_controller_request_is_one_line_and_changes_nothing(request_: dict, error: str):
    s = Net("health", SenderConfig(qps=1, messages=8, window=8)).sender
    before = s.query()
    assert s.control(request_, 0.1) == {"error": error}
    assert s.query() == before
