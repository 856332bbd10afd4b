"""A collective's packets at each rank (endpoint.collective.layout), driven by hand: PSN ranges per QP,
dependencies, exactly-once delivery with the payload checked; and a whole ring AllReduce over a lossless
in-memory network, its timeline read by the workload's own checks (endpoint.collective.report)."""

from __future__ import annotations

from pathlib import Path

from controller.model.topology import build
from controller.workload import Workload, check_delivery, check_dependencies, place, schedule
from endpoint.collective.layout import Layout, RankProgress, Transfer, pattern, runs
from endpoint.collective.rank import Transport
from endpoint.collective.report import receipts, records
from endpoint.collective.run import CollectiveRun
from endpoint.collective.schemes import SCHEMES, on_kernel, scheme

import pytest


def t(id: int, src: str, dst: str, qp: int, nbytes: int, after: tuple[int, ...] = ()) -> Transfer:
    return Transfer(id, src, dst, qp, nbytes, after)


def test_transfers_of_one_qp_take_consecutive_sequence_numbers_in_id_order() -> None:
    lay = Layout([t(0, "h0", "h1", 0, 2500), t(1, "h0", "h1", 1, 100), t(2, "h0", "h1", 0, 1024, (0,))], 1024)
    assert [(p.lo, p.hi) for p in lay.run("h0", "h1", 0)] == [(0, 3), (3, 4)]
    assert (lay.pieces[1].lo, lay.pieces[1].hi) == (0, 1)
    assert [lay.pieces[0].data_len(s) for s in range(3)] == [1024, 1024, 452]
    assert lay.piece_at("h0", "h1", 0, 3) is lay.pieces[2]
    assert lay.piece_at("h0", "h1", 0, 4) is None
    assert lay.piece_at("h1", "h0", 0, 0) is None
    assert lay.qps() == 2


def test_a_send_starts_only_after_its_dependencies_and_the_earlier_pieces_of_its_qp() -> None:
    lay = Layout([t(0, "h1", "h0", 0, 16), t(1, "h0", "h1", 0, 16, (0,)), t(2, "h0", "h1", 0, 16),
                  t(3, "h0", "h1", 1, 16)], 16)
    rp = RankProgress("h0", lay)
    # 1 waits for the receive 0; 2 is behind 1 on QP 0 although it depends on nothing; QP 1's 3 is free
    assert [p.transfer.id for p in rp.startable()] == [3]
    assert rp.on_data("h1", 0, 0, pattern("h1", "h0", 0, 0, 16), 5) == "new"
    assert rp.done == {0: 5}
    assert [p.transfer.id for p in rp.startable()] == [1, 2, 3]
    for p in rp.startable():
        rp.release(p, 7)
    assert rp.startable() == []
    assert rp.on_acked_upto("h1", 0, 1, 9) == [1]
    assert rp.on_acked_upto("h1", 0, 2, 10) == [2]
    assert not rp.finished
    assert rp.on_acked_upto("h1", 1, 1, 11) == [3]
    assert rp.finished


def test_each_byte_counts_once_and_only_where_and_as_it_was_sent() -> None:
    lay = Layout([t(0, "h1", "h0", 0, 40), t(1, "h2", "h0", 0, 16)], 16)
    rp = RankProgress("h0", lay)
    good = pattern("h1", "h0", 0, 1, 16)
    assert rp.on_data("h1", 0, 1, good, 1) == "new"
    assert rp.on_data("h1", 0, 1, good, 2) == "duplicate"
    assert rp.on_data("h1", 0, 2, pattern("h2", "h0", 0, 2, 8), 3) == "bad"  # another sender's bytes
    assert rp.on_data("h1", 0, 5, good, 4) == "stray"  # past the transfer
    assert rp.on_data("h1", 1, 0, good, 4) == "stray"  # a QP with nothing for h0
    assert rp.on_data("h1", 0, 2, pattern("h1", "h0", 0, 2, 8), 5) == "new"
    assert rp.on_data("h1", 0, 0, pattern("h1", "h0", 0, 0, 16), 6) == "new"
    assert (rp.data_bytes[0], rp.duplicates, rp.bad, rp.stray, rp.done) == (40, {0: 1}, {0: 1}, 2, {0: 6})
    assert rp.to_json()["recvs"][0]["segments"] == [[0, 3]]
    assert runs([0, 1, 2, 5, 7, 8]) == [[0, 3], [5, 6], [7, 9]]


def _simulate(sched_transfers: list[Transfer], hosts: list[str], mtu: int) -> dict[str, dict]:
    """Every rank over a lossless network that delivers and acknowledges each started send at once, one
    nanosecond per event: the ranks' JSON as rank.py writes it."""
    lay = Layout(sched_transfers, mtu)
    ranks = {h: RankProgress(h, lay) for h in hosts}
    clock = 0
    while not all(r.finished for r in ranks.values()):
        moved = False
        for h, rp in ranks.items():
            for p in rp.startable():
                clock += 1
                rp.release(p, clock)
                for seq in range(p.lo, p.hi):
                    rp.on_tx(p.transfer.dst, p.transfer.qp_index, seq, False)
                    clock += 1
                    dst = ranks[p.transfer.dst]
                    got = dst.on_data(h, p.transfer.qp_index, seq,
                                      pattern(h, p.transfer.dst, p.transfer.id, seq, p.data_len(seq)), clock)
                    assert got == "new"
                clock += 1
                assert rp.on_acked_upto(p.transfer.dst, p.transfer.qp_index, p.hi, clock) == [p.transfer.id]
                moved = True
        assert moved, "the schedule deadlocked"
    return {h: {**rp.to_json(), "start_ns": 0} for h, rp in ranks.items()}


@pytest.mark.parametrize("strategy", ["split", "round_robin"])
def test_a_ring_allreduce_over_a_lossless_network_passes_the_workload_checks(strategy: str, tmp_path: Path) -> None:
    topo = build(2, 2, 2, 2)
    sched = schedule(Workload("allreduce", 10_000, iterations=2, warmup=1, qps=2, strategy=strategy),  # type: ignore[arg-type]
                     place(topo, "packed"))
    ts = [Transfer.of(x) for x in sched.transfers]
    ranks = _simulate(ts, list(sched.placement.hosts), 512)
    run = CollectiveRun(SCHEMES["ecmp"], Transport(mtu=512), ts, ranks, 0, dir=tmp_path)
    assert run.problems() == []
    recs = records(run)
    assert len(recs) == len(sched.transfers)
    assert check_dependencies(sched, recs) == []
    assert check_delivery(sched, receipts(run, sched)) == []
    # one packet short at one rank: both checks say so
    victim = ranks[sched.transfers[5].dst_host]["recvs"][0]
    victim["segments"][0][1] -= 1
    victim["received"] -= 1
    victim["data_bytes"] -= 512
    assert any("never arrived" in p for p in check_delivery(sched, receipts(run, sched)))
    assert any(p.startswith(f"transfer {victim['id']} ") for p in run.problems())


def test_a_start_before_a_dependency_completed_is_named() -> None:
    ts = [t(0, "h1", "h0", 0, 16), t(1, "h0", "h1", 0, 16, (0,))]
    ranks = _simulate(ts, ["h0", "h1"], 16)
    ranks["h0"]["sends"][0]["start_ns"] = ranks["h0"]["recvs"][0]["end_ns"] - 1
    run = CollectiveRun(SCHEMES["ecmp"], Transport(mtu=16), ts, ranks, 0)
    assert run.problems() == ["transfer 1 h0 -> h1 started before transfer 0 completed at h0"]


def test_schemes_on_the_kernel_data_plane() -> None:
    assert on_kernel(scheme("eecmp")).sport == "qp"  # the QP's own UDP port: the kernel's L4 hash spreads QPs
    assert on_kernel(scheme("ecmp")).sport == "ev"
    for name in ("pin", "leaf-spray"):
        with pytest.raises(ValueError, match="kernel data plane cannot carry"):
            on_kernel(scheme(name))
    with pytest.raises(ValueError, match="unknown path selection 'x'"):
        scheme("x")


def test_ipv4_frames_read_back_with_the_peers_ipv6_addresses() -> None:
    from endpoint.collective import v4
    from endpoint.wire import ACK, DATA, OP_SEND_ONLY, AckHeader, DataHeader

    to_v6 = {"10.0.0.1": "fd00::1", "10.0.1.1": "fd00:0:1::1"}
    header = DataHeader(DATA, "h0", 1023, 7, 3, 0, 12345)
    frame = v4.data_frame("02:00:00:00:00:01", "02:00:00:00:00:02", "10.0.0.1", "10.0.1.1", 0x101, 5,
                          header.pack() + b"x" * 20, 0xC3FF, OP_SEND_ONLY, 2)
    rx = v4.parse(frame, to_v6)
    assert rx is not None
    assert (rx.src, rx.dst, rx.qp, rx.psn, rx.sport, rx.ecn, rx.icrc_ok) == ("fd00::1", "fd00:0:1::1", 0x101, 5, 0xC3FF,
                                                                             2, True)
    assert DataHeader.unpack(rx.body) == header and rx.body[DataHeader.SIZE:] == b"x" * 20
    ack = v4.parse(v4.ack_frame("02:00:00:00:00:02", "02:00:00:00:00:01", "10.0.1.1", "10.0.0.1", 0x101, 5,
                                AckHeader(ACK, 1023, 7, 12345), 0xC3FF), to_v6)
    assert ack is not None and AckHeader.unpack(ack.body[4:]) == AckHeader(ACK, 1023, 7, 12345)
    assert v4.parse(frame, {}) is None  # from no known host
    bad = bytearray(frame)
    bad[-10] ^= 1
    assert v4.parse(bytes(bad), to_v6).icrc_ok is False  # type: ignore[union-attr]


def test_the_ranks_are_told_the_shaped_link_and_the_windows_a_round_trip_queues_behind() -> None:
    from controller.workload import Workload, place, schedule
    from endpoint.collective.run import on_link, qps_per_link, queued_windows, windows_per_round_trip
    from mininet_labs.shaping import LinkRate

    topo = build(2, 2, 2, 2)
    ring = [Transfer.of(x) for x in schedule(Workload("allreduce", 8192, qps=2, strategy="split"),
                                             place(topo, "packed")).transfers]
    a2a = [Transfer.of(x) for x in schedule(Workload("alltoall", 8192, qps=2, strategy="split"),
                                            place(topo, "packed")).transfers]
    a2a8 = [Transfer.of(x) for x in schedule(Workload("alltoall", 8192, qps=8, strategy="split"),
                                             place(topo, "packed")).transfers]
    assert qps_per_link(ring, 2) == 1  # one QP per plane to the next rank
    assert qps_per_link(a2a8, 2) == 12  # 3 peers x 8 QPs over 2 planes
    # all-to-all, 4 ranks, 2 QPs: 6 QPs out of each rank, 6 into each, over 2 planes: 3 + 3 + 3 windows
    assert windows_per_round_trip(a2a, 2) == 9
    assert windows_per_round_trip(ring, 2) == 3  # one QP a plane out, one in, the receiver's own one
    assert queued_windows(a2a, 2) == 9 and queued_windows(ring, 2) == 4  # four windows at least
    assert queued_windows(a2a8, 2) == 36  # 12 QPs a port out, 12 in, 12 ahead of the ACK (above twice 12)
    tr = Transport(window=4, mtu=1024)
    assert on_link(tr, None, 9) is tr  # unshaped: the timers as configured
    assert on_link(Transport(timers="fixed"), LinkRate(1.0), 9) == Transport(timers="fixed")
    t = on_link(tr, LinkRate(1.0), 9)
    assert (t.link_mbit, t.queued_frames, t.min_rto_ms) == (1.0, 36, tr.min_rto_ms)


def test_ethereal_parts_of_two_peers_on_the_same_qp_number_keep_their_own_evs() -> None:
    from endpoint.ev import EvTable
    from endpoint.policy import Ethereal, Flow

    pol = Ethereal(2)
    a, b = EvTable([1, 2]), EvTable([1023, 2047])  # a remote peer's EVs; a peer under the same leaf's
    fa, fb = Flow("h0", "h2", 0xC000, 0x100, 0), Flow("h0", "h1", 0xC000, 0x100, 0)
    pol.on_message(a, fa, 0, 4)
    pol.on_message(b, fb, 0, 4)
    assert {pol.pick(a, fa, s) for s in range(4)} == {1, 2}
    assert {pol.pick(b, fb, s) for s in range(4)} == {1023, 2047}
