"""The reverse EV set: a receiver's acknowledgements ride, per plane, the reverse EV its last answered probe
proved; the data's sender answers those probes; neither side takes the other's probes for its own."""

from __future__ import annotations

from controller.model.topology import load
from controller.plan.evs import host_evs
from controller.routes import Fabric
from endpoint.receiver import ReceiverCore
from endpoint.sender import SenderConfig
from endpoint.wire import ACK, DATA, NACK, REV_PROBE, REV_PROBE_ACK, AckHeader, DataHeader, ack_frame, data_frame, parse
from tests.unit.endpoint.test_transport import DMAC, LAB, SMAC, Net, decap

MS = 1_000_000


def setup():  # noqa: ANN201
    net = Net("health", SenderConfig(qps=1, messages=8, window=8))
    rx = ReceiverCore("h2", host_evs(Fabric(load(LAB)), "h2", ["h0"]), rev_probe_every=0.005)
    return net.sender, rx


def data(sender, ev: int, psn: int, now_ns: int, trimmed: bool = False):  # noqa: ANN001, ANN201
    e = sender.evs["h2"][ev]
    frame = decap(data_frame(SMAC, DMAC, e.src, e.dst, e.carrier, 0x100, psn, DataHeader(DATA, "h0", ev, psn, 8, 0, now_ns), 64))
    return parse(frame[:14 + 40 + 8 + 12] if trimmed else frame)


def test_acks_ride_the_reverse_ev_the_last_answered_probe_proved():
    sender, rx = setup()
    assert rx.tick(0) == []  # no data yet: nothing to probe for
    first = rx.on_packet(data(sender, 1, 0, 0), 0)
    assert first.ev.id == 1 and first.header.ev == 1  # before any probe: the data EV's own reverse
    probes = rx.tick(1 * MS)
    assert [(p.peer, p.ev.id, p.header.kind) for p in probes] == [("h0", 0, REV_PROBE), ("h0", 1024, REV_PROBE)]
    assert rx.tick(2 * MS) == []  # one per plane per interval
    p = probes[0]
    on_wire = parse(decap(data_frame(SMAC, DMAC, p.ev.src, p.ev.dst, p.ev.carrier, 0, 0, p.header, 48)))
    h0_rx = ReceiverCore("h0", host_evs(Fabric(load(LAB)), "h0", ["h2"]))  # a receiver at h0 leaves it to the sender
    assert h0_rx.on_packet(on_wire, 2 * MS) is None and h0_rx.unknown == 0 and not h0_rx.qps
    ev, answer = sender.answer_probe("h2", DataHeader.unpack(on_wire.body))
    assert ev.id == 0 and (answer.kind, answer.ev, answer.tx_ns) == (REV_PROBE_ACK, 0, 1 * MS)
    back = parse(decap(ack_frame(SMAC, DMAC, ev.src, ev.dst, ev.carrier, 0, 0, answer)))
    assert rx.on_ack("h0", AckHeader.unpack(back.body[4:]), 3 * MS)
    assert rx.reverse_ev == {("h0", 0): 0} and rx.reverse_changes == [(0.003, "h0", 0, 0)]
    ack = rx.on_packet(data(sender, 1, 1, 4 * MS), 4 * MS)
    assert (ack.ev.id, ack.header.kind, ack.header.ev) == (0, ACK, 1)  # rides EV 0's reverse, names EV 1
    nack = rx.on_packet(data(sender, 1, 2, 4 * MS, trimmed=True), 4 * MS)
    assert (nack.ev.id, nack.header.kind, nack.header.ev) == (0, NACK, 1)
    on_plane1 = rx.on_packet(data(sender, 1025, 3, 4 * MS), 4 * MS)
    assert on_plane1.ev.id == 1025  # plane 1's probe is unanswered: its own reverse still
    assert not rx.on_ack("h0", answer, 5 * MS)  # answered already: a repeat changes nothing
    later = rx.tick(7 * MS)
    assert [p.ev.id for p in later] == [1, 1025]  # the next EV of each plane in turn
    assert rx.tick(7 * MS + 21 * MS) == []  # no data for 4 intervals: no probing


def test_a_sender_ignores_answers_to_reverse_probes_and_answers_only_those_probes():
    sender, rx = setup()
    before = sender.to_json()
    sender.on_ack("h2", 0, 0, AckHeader(REV_PROBE_ACK, 1, 0, 5), 0.01, 10 * MS)
    after = sender.to_json()
    assert after["qps"] == before["qps"] and after["evs"] == before["evs"]
    assert sender.answer_probe("h2", DataHeader(DATA, "h2", 1, 0, 8, 0, 0)) is None  # data is not a probe
    assert sender.answer_probe("h9", DataHeader(REV_PROBE, "h9", 1, 0, 0, 0, 0)) is None  # no such peer
    assert sender.answer_probe("h2", DataHeader(REV_PROBE, "h2", 7, 0, 0, 0, 0)) is None  # no such EV
