"""Go-back-N (policy roce-gbn: RoCEv2 RC without selective repeat): the receiver takes a QP's PSNs only in order
and NAKs a sequence error once; the sender resends everything from the lost PSN. Exact PSN sequences on the
wire, against selective retransmission under the same loss."""

from __future__ import annotations

from collections import Counter

from endpoint.receiver import ReceiverCore
from endpoint.sender import SenderConfig
from endpoint.wire import ACK, DATA_GBN, NACK, AckHeader, DataHeader, data_frame, parse
from tests.unit.endpoint.test_transport import DMAC, SMAC, Net, decap, ev_pair


def gbn_packet(psn: int, total: int = 8) -> bytes:
    fwd, _ = ev_pair()
    return decap(data_frame(SMAC, DMAC, fwd.src, fwd.dst, fwd.carrier, 0x100, psn,
                            DataHeader(DATA_GBN, "h0", fwd.id, psn, total, 0, 1000 + psn), 64))


def test_the_receiver_takes_a_go_back_n_qps_psns_in_order_and_naks_a_sequence_error_once():
    _, back = ev_pair()
    r = ReceiverCore("h2", {"h0": [back]})

    def answer(psn: int) -> tuple[int, int] | None:
        reply = r.on_packet(parse(gbn_packet(psn)), 10)
        return None if reply is None else (reply.header.kind, reply.psn)

    # 0 taken; 2 and 3 past the expected 1: dropped, one NAK for 1; 1, 2 taken; 0 again: the last PSN taken
    assert [answer(p) for p in (0, 2, 3, 1, 2, 0, 4)] == [(ACK, 0), (NACK, 1), None, (ACK, 1), (ACK, 2), (ACK, 2),
                                                          (NACK, 3)]
    q = r.qps["h0", 0x100]
    assert q.in_order and (q.received, q.out_of_sequence, q.duplicated, q.next_offset) == (3, 3, 1, 3)
    assert q.seen == {0, 1, 2} and sum(r.bins.values()) == 3  # goodput: only what was taken
    assert r.on_packet(parse(gbn_packet(5)), 20) is None  # the NAK for 3 is out: no second one
    assert answer(3) == (ACK, 3) and answer(5) == (NACK, 4)  # 3 came: a new sequence error, a new NAK


class LossyNet(Net):
    """Net with losses by PSN: `lose` holds (kind, psn, n), the n-th (0: first) data or ack frame of that PSN."""

    def __init__(self, policy: str, config: SenderConfig, lose: set[tuple[str, int, int]]) -> None:
        super().__init__(policy, config)
        self.lose = lose
        self.count: Counter[tuple[str, int]] = Counter()
        self.wire: list[int] = []  # data PSNs as sent, in order
        self.acks: list[tuple[int, int]] = []  # (kind, PSN) of the acknowledgements sent

    def _put(self, t: float, kind: str, frame: bytes) -> None:
        rx = parse(frame)
        if kind == "data":
            self.wire.append(rx.psn)
        else:
            self.acks.append((AckHeader.unpack(rx.body[4:]).kind, rx.psn))
        n = self.count[kind, rx.psn]
        self.count[kind, rx.psn] += 1
        if (kind, rx.psn, n) not in self.lose:
            super()._put(t, kind, frame)


def run(policy: str, lose: set[tuple[str, int, int]], messages: int = 10) -> LossyNet:
    # one QP, 4 in flight: a packet every 0.5 ms, 1 ms each way (an ACK frees the window 2 ms after a send)
    net = LossyNet(policy, SenderConfig(qps=1, messages=messages, window=4), lose)
    net.run(1.0)
    assert net.sender.done and net.receiver.received_total() == messages
    return net


def test_one_loss_resends_everything_from_the_lost_psn_selective_retransmission_only_it():
    gbn = run("roce-gbn", {("data", 3, 0)})
    # 4, 5, 6 were in flight behind the lost 3: the receiver drops them and NAKs 3 once; all four go again
    assert gbn.wire == [0, 1, 2, 3, 4, 5, 6, 3, 4, 5, 6, 7, 8, 9]
    assert (NACK, 3) in gbn.acks and [a for a in gbn.acks if a[0] == NACK] == [(NACK, 3)]
    q, rq = gbn.sender.order[0], gbn.receiver.qps["h0", 0x100]
    assert (q.rewinds, q.retransmitted, rq.out_of_sequence, rq.duplicated) == (1, 4, 3, 0)
    assert sorted(q.lost_first_tx) == [3, 4, 5, 6]
    # the same path and loss, selective retransmission: 3 again, and 5 (the loss made the EV ASSUMED_BAD, which
    # gives up what is in flight on it: 5 and 6; 6's ACK came before its turn to be resent), never 4
    sr = run("hash", {("data", 3, 0)})
    assert sr.wire == [0, 1, 2, 3, 4, 5, 6, 3, 5, 7, 8, 9] and sr.receiver.qps["h0", 0x100].out_of_sequence == 0


def test_a_tail_loss_has_no_later_psn_to_show_it_the_retransmission_timeout_goes_back():
    net = run("roce-gbn", {("data", 5, 0)}, messages=6)
    assert net.wire == [0, 1, 2, 3, 4, 5, 5]
    assert [a for a in net.acks if a[0] == NACK] == [] and net.sender.order[0].rewinds == 1


def test_a_lost_nak_leaves_the_sequence_error_to_the_timeout_which_goes_back_to_the_oldest_unacknowledged():
    net = run("roce-gbn", {("data", 3, 0), ("ack", 3, 0)})  # the NAK for 3 is lost: no second NAK comes
    assert net.acks.count((NACK, 3)) == 1
    assert net.wire == [0, 1, 2, 3, 4, 5, 6, 3, 4, 5, 6, 7, 8, 9]  # the same resends, an RTO later
    assert net.receiver.qps["h0", 0x100].out_of_sequence == 3


def test_an_ack_covers_every_psn_up_to_its_own_so_a_lost_ack_resends_nothing():
    net = run("roce-gbn", {("ack", 1, 0), ("ack", 2, 0)})
    assert net.wire == list(range(10)) and net.sender.order[0].retransmitted == 0
