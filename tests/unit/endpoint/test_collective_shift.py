"""SHIFT on hand-made event timelines (endpoint.collective.shift): a QP bound to a NIC that fails moves to
another NIC of the host, what it had in flight is sent again there with its PSNs, and the receiver
delivers each transfer once and in order; without SHIFT the failure is the rank's one-line error."""

from __future__ import annotations

import pytest

from controller.plan.evs import LEAF_CHOICE, Ev, ev_id
from endpoint.collective.layout import Layout, RankProgress, Transfer, pattern
from endpoint.collective.shift import LOCAL, REMOTE, Move, NicDown, NicFailover, OnNic, moves
from endpoint.ev import EvConfig
from endpoint.policy import make
from endpoint.sender import SenderConfig, SenderCore, Tx
from endpoint.wire import ACK, AckHeader

MS = 1_000_000


def leaf_ev(plane: int, dst: str) -> Ev:
    """A leaf scheme's EV: one per plane and destination, no carrier (the leaf chooses the path)."""
    return Ev(ev_id(plane, LEAF_CHOICE), plane, LEAF_CHOICE, f"fd00:{plane}::1", f"fd00:{plane}::{dst[1:]}", "", (),
              f"p{plane}-t0-0", "the leaf", f"p{plane}-t0-1")


def rank(mode: str = "shift", planes: tuple[int, ...] = (0, 1), dsts: tuple[str, ...] = ("h4",),
         work: bool = True) -> tuple[SenderCore, NicFailover]:
    """h0 with 2 QPs to each destination (QP 0x100 on plane 0, 0x101 on plane 1), 4 packets a transfer."""
    policy = OnNic(make("qp-rr"))
    core = SenderCore("h0", {d: [leaf_ev(p, d) for p in planes] for d in dsts}, policy,
                      SenderConfig(2, 0, 4, 1024, 4, qp_base=0x100), EvConfig(min_rto=0.01, max_rto=1.0))
    fo = NicFailover(core, policy, mode, planes, 3, wr_of=lambda d, qp, seq: 10 * (qp - 0x100) + seq // 4,
                     busy=lambda d, qp: work)
    return core, fo


def drain(core: SenderCore, now_ns: int) -> list[Tx]:
    out = []
    while (tx := core.next_packet(now_ns / 1e9, now_ns)) is not None:
        out.append(tx)
    return out


def ack(core: SenderCore, tx: Tx, now_ns: int, ports: int = 0) -> None:
    core.on_ack(tx.dst, tx.qp, tx.psn, AckHeader(ACK, tx.ev, tx.header.ev_seq, tx.header.tx_ns, ports=ports),
                now_ns / 1e9, now_ns)


def plane(tx: Tx) -> int:
    return tx.ev >> 10


def test_a_local_carrier_loss_moves_the_qps_of_that_nic_and_resends_their_packets_in_flight_there() -> None:
    core, fo = rank()
    assert fo.plane == {("h4", 0x100): 0, ("h4", 0x101): 1}
    for q in core.order:
        q.total = 8  # two transfers of 4 packets each released on every QP
    sent = drain(core, 0)
    assert [(tx.qp, tx.psn, plane(tx)) for tx in sent] == [
        (0x100, 0, 0), (0x101, 0x1000, 1), (0x100, 1, 0), (0x101, 0x1001, 1),
        (0x100, 2, 0), (0x101, 0x1002, 1), (0x100, 3, 0), (0x101, 0x1003, 1)]
    ack(core, sent[0], 1 * MS)
    ack(core, sent[2], 1 * MS)  # QP 0x100's PSNs 0 and 1 acknowledged; 2 and 3 in flight when the NIC fails
    assert fo.on_ports(0b11, 2 * MS) == []
    moved = fo.on_ports(0b10, 3 * MS)
    assert moved == [Move(3 * MS, "h4", 0x100, 0, 1, LOCAL, (2, 3), (0,))]
    assert fo.plane == {("h4", 0x100): 1, ("h4", 0x101): 1}
    # the two in flight go first, with their PSNs and as resends, then the QP's new packets: all on plane 1
    again = drain(core, 4 * MS)
    assert [(tx.qp, tx.psn, plane(tx), tx.header.attempt) for tx in again] == [
        (0x100, 2, 1, 1), (0x100, 3, 1, 1), (0x100, 4, 1, 0), (0x100, 5, 1, 0)]
    assert fo.on_ports(0b10, 5 * MS) == []  # nothing left on the port that is down
    assert fo.to_json()["moves"] == [{"t_ns": 3 * MS, "dst": "h4", "qp": 0x100, "from_plane": 0, "to_plane": 1,
                                      "why": LOCAL, "resent": [2, 3], "wrs": [0]}]


def test_a_port_down_at_the_destination_moves_the_qps_to_it_when_an_ack_of_another_plane_says_so() -> None:
    core, fo = rank(dsts=("h4", "h5"))
    for q in core.order:
        q.total = 4
    sent = drain(core, 0)
    on_1 = next(tx for tx in sent if tx.dst == "h4" and tx.qp == 0x101)
    ack(core, on_1, 1 * MS, ports=0b11)
    assert fo.moves == []
    fo.on_ack_ports("h4", 0, 2 * MS)  # 0: the bitmap was not carried
    ack(core, on_1, 2 * MS, ports=0b10)
    assert fo.on_ack_ports("h4", 0b10, 2 * MS) == [Move(2 * MS, "h4", 0x100, 0, 1, REMOTE, (0, 1, 2, 3), (0,))]
    assert fo.plane[("h5", 0x100)] == 0  # another destination's QPs stay


def test_a_qp_moves_after_three_unacknowledged_sends_of_a_packet_on_its_nic() -> None:
    core, fo = rank()
    core.qps["h4", 0x100].total = 1
    now = 0
    tries = []
    while not fo.moves:
        for tx in drain(core, now):
            tries.append((tx.psn, plane(tx), tx.header.attempt))
            ack(core, tx, now + 1) if plane(tx) == 1 else None  # plane 0 delivers nothing (no one says why)
        now += 100 * MS  # past any backed-off timer here (10 ms floor)
        core.tick(now / 1e9, now)
        fo.on_retries(now)
        assert now < 2_000 * MS
    assert tries == [(0, 0, 0), (0, 0, 1), (0, 0, 2)]
    assert [(m.qp, m.from_plane, m.to_plane, m.why, m.resent) for m in fo.moves] == [
        (0x100, 0, 1, "3 sends unacknowledged", ())]  # the lost packet waits for its resend, nothing in flight
    tx = drain(core, now)[0]
    assert (tx.psn, plane(tx), tx.header.attempt) == (0, 1, 3)
    ack(core, tx, now + 1)
    assert core.qps["h4", 0x100].done
    # the count starts again on the new NIC: two more losses there are not three
    core.qps["h4", 0x100].total = 2
    drain(core, now + 2)
    for k in range(2):
        now += 100 * MS
        core.tick(now / 1e9, now)
        assert fo.on_retries(now) == []
        drain(core, now)


def test_without_shift_a_port_down_under_busy_qps_is_the_ranks_error_and_idle_ones_are_left() -> None:
    core, fo = rank(mode="none")
    core.qps["h4", 0x100].total = 4
    drain(core, 0)
    with pytest.raises(NicDown) as e:
        fo.on_ports(0b10, 1 * MS)
    assert str(e.value) == "h0: NIC port of plane 0 down under QP 0x100 to h4: its QPs have no other NIC " \
                           "(--nic-failover none)"
    assert fo.on_ack_ports("h4", 0b10, 1 * MS) == [] and fo.on_retries(1 * MS) == []
    _, idle = rank(mode="none", work=False)
    assert idle.on_ports(0b10, 1 * MS) == [] and idle.moves == []


def test_no_port_left_is_an_error_for_a_busy_qp() -> None:
    core, fo = rank(planes=(0,))
    with pytest.raises(NicDown, match="h0: NIC port of plane 0 down under QP 0x100 to h4 and 1 more: no other NIC "
                                      "port of the host is up"):
        fo.on_ports(0, 1 * MS)
    with pytest.raises(ValueError, match="unknown NIC failover 'x' \\(known: none, shift\\)"):
        NicFailover(core, fo.policy, "x", (0,))


def test_the_receiver_drops_the_resent_copies_and_completes_each_transfer_once_in_psn_order() -> None:
    # transfers 0 and 1 on one QP, 4 packets each; PSN 3 of transfer 0 was in flight through the failed NIC
    lay = Layout([Transfer(0, "h0", "h4", 0, 4 * 64), Transfer(1, "h0", "h4", 0, 4 * 64)], 64)
    rx = RankProgress("h4", lay)

    def arrive(seq: int, t: int) -> str:
        tid = seq // 4
        return rx.on_data("h0", 0, seq, pattern("h0", "h4", tid, seq, 64), t)

    assert [arrive(s, 1 + s) for s in (0, 1, 2)] == ["new"] * 3  # through the old NIC; 3 was lost there
    assert [arrive(s, 10 + s) for s in (2, 4, 5, 6, 7)] == ["duplicate", "new", "new", "new", "new"]
    assert rx.done == {}  # transfer 1 is whole, but transfer 0 before it on the QP is not
    assert arrive(3, 20) == "new"
    assert rx.done == {0: 20, 1: 20}
    assert arrive(3, 21) == "duplicate" and rx.done == {0: 20, 1: 20}
    assert rx.data_bytes == {0: 256, 1: 256} and rx.duplicates == {0: 2}


def test_the_moves_of_every_rank_in_time_order_after_the_start() -> None:
    m = Move(1_500 * MS, "h4", 0x100, 0, 1, LOCAL, (2, 3), (7,)).to_json()
    r = Move(1_600 * MS, "h0", 0x100, 0, 1, REMOTE, (), ()).to_json()
    ranks = {"h5": {"nic_failover": {"moves": [r]}}, "h0": {"nic_failover": {"moves": [m]}}, "h4": {"nic_failover": None}}
    out = moves(ranks, 500 * MS)
    assert [(x["rank"], x["t_s"], x["why"], x["resent"], x["wrs"]) for x in out] == [
        ("h0", 1.0, LOCAL, [2, 3], [7]), ("h5", 1.1, REMOTE, [], [])]
