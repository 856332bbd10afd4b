"""controller.workload.metrics and delivery on hand-made timelines, against hand-computed figures."""

from __future__ import annotations

import numpy as np
import pytest

from controller.workload import Rates, Receipt, Record, Workload, check_delivery, check_dependencies, grid, ideal_time, \
    payload, schedule
from controller.workload import metrics


def _two_rank_job(iterations: int = 3, warmup: int = 1):  # type: ignore[no-untyped-def]
    # n = 2 ring AllReduce: 2 steps of two transfers (0->1, 1->0), size 1000 B (500 B chunks)
    return schedule(Workload("allreduce", 1000, iterations=iterations, warmup=warmup), grid(1, 2, 1, "packed", 2))


def _timeline(sched, step_durations):  # type: ignore[no-untyped-def]
    """Back-to-back steps: step k of the run lasts step_durations[k]; both transfers span it; 1 retransmit each."""
    out, now = [], 0.0
    for k, d in enumerate(step_durations):
        it, st = divmod(k, sched.steps)
        out += [Record(t.id, now, now + d, retransmits=1) for t in sched.step_transfers(it, st)]
        now += d
    return out


def test_run_figures_by_hand() -> None:
    s = _two_rank_job()
    # warm-up 10 s; measured iterations take 1, 2 and 4 s
    m = metrics.run(s, _timeline(s, [5, 5, 0.5, 0.5, 1, 1, 2, 2]), ideal=0.5, link_loads={"a": 30, "b": 10, "c": 20})
    assert [i.time for i in m.iterations] == [10, 1, 2, 4]
    assert (m.time_median, m.time_max) == (2, 4)
    assert m.time_p99 == pytest.approx(2 + 0.98 * (4 - 2))  # p = (3-1) * 0.99 = 1.98
    assert m.algbw == 500  # 1000 B / 2 s
    assert m.busbw == 500  # x 2(n-1)/n = 1 for n = 2
    assert m.slowdown == 4 and m.iterations[1].slowdown == 2
    assert m.retransmits == 16  # 4 transfers per iteration, 4 iterations, 1 each
    assert m.link_max_over_mean == 1.5  # 30 / mean(30, 10, 20)
    assert m.to_json()["iterations"][0]["warmup"] is True


def test_busbw_factor_of_a_four_rank_allgather() -> None:
    s = schedule(Workload("allgather", 4000), grid(1, 4, 1, "packed", 4))
    m = metrics.run(s, _timeline(s, [1, 1, 2]))  # 3 steps, 4 s
    assert (m.algbw, m.busbw) == (1000, 750)  # (n-1)/n


def test_percentile_matches_numpy() -> None:
    values = [3.0, 1.0, 7.5, 2.0, 9.0, 4.25]
    for q in (0, 50, 90, 99, 100):
        assert metrics.percentile(values, q) == pytest.approx(float(np.percentile(values, q)))


def test_fault_stretches_the_steps_it_hit() -> None:
    s = _two_rank_job(iterations=4, warmup=0)
    # steps last 1 s except iteration 2's second step (3 s); the fault is on from t=5.5 to 6.5
    tl = _timeline(s, [1, 1, 1, 1, 1, 3, 1, 1])
    hits = metrics.fault_hits(s, tl, 5.5, 6.5)
    assert [(h.iteration, h.step, h.duration, h.baseline, h.stretch) for h in hits] == [(2, 1, 3, 1, 3)]
    assert [(h.iteration, h.step) for h in metrics.fault_hits(s, tl, 7.5)] == [(2, 1), (3, 0), (3, 1)]
    assert metrics.fault_hits(s, tl, 10.0) == []  # a step ending as the fault starts was not hit


def test_throughput_spreads_each_transfer_over_its_span() -> None:
    s = _two_rank_job(iterations=1, warmup=0)
    # step 0: both 500 B transfers over [0, 2]; step 1: over [2, 3]
    tl = _timeline(s, [2, 1])
    assert metrics.throughput(s, tl, 1.0) == [(0.0, 500.0), (1.0, 500.0), (2.0, 1000.0)]


def test_missing_record_is_an_error() -> None:
    s = _two_rank_job()
    with pytest.raises(metrics.MetricsError, match="16 transfers have no record"):
        metrics.run(s, [])


def test_ideal_time_by_hand() -> None:
    # 8 ranks packed 2 per leaf on 4 leaves, 2 planes x 2 spines, 1 Gb/s links, ring AllReduce of 1 MiB:
    # each step a host sends 128 KiB over 2 Gb/s (524.288 us); a leaf sends 128 KiB over 4 Gb/s; 14 steps
    t = ideal_time(Workload("allreduce", 1 << 20), grid(2, 4, 2, "packed", 8), 2, Rates(1e9, 1e9))
    assert t == pytest.approx(14 * (1 << 17) * 8 / 2e9)
    # uneven placement on one plane: one uplink per leaf, every ring hop crosses leaves -> uplink-bound
    t = ideal_time(Workload("allreduce", 1 << 20), grid(1, 4, 2, "uneven", 4), 1, Rates(1e9, 0.5e9))
    assert t == pytest.approx(6 * (1 << 18) * 8 / 0.5e9)


def test_delivery_every_byte_once_at_its_rank() -> None:
    s = schedule(Workload("allreduce", 999, qps=2, strategy="split"), grid(1, 3, 1, "packed", 3))
    whole = [Receipt(t.id, 0, t.bytes, t.dst) for t in s.transfers]
    assert check_delivery(s, whole) == []
    halves = [Receipt(t.id, o, b, t.dst) for t in s.transfers for o, b in ((0, 50), (50, t.bytes - 50))]
    assert check_delivery(s, halves) == []
    t0 = s.transfers[0]
    assert check_delivery(s, whole[1:]) == [f"transfer 0 (0->1, step 0 of iteration 0): {t0.bytes} of {t0.bytes} "
                                            "bytes never arrived (first at byte 0)"]
    assert check_delivery(s, whole + [Receipt(0, 10, 5, 1)]) == [
        "transfer 0 (0->1, step 0 of iteration 0): 5 bytes arrived more than once"]
    assert check_delivery(s, whole + [Receipt(0, 0, 5, 2)]) == [
        "transfer 0 (0->1, step 0 of iteration 0): 5 bytes arrived at rank 2"]
    assert check_delivery(s, whole[1:] + [Receipt(0, 0, t0.bytes, 1, intact=False)])[0] == \
        f"transfer 0: bytes 0..{t0.bytes - 1} arrived corrupted"


def test_payload_differs_by_transfer_and_position() -> None:
    s = schedule(Workload("allgather", 3000), grid(1, 3, 1, "packed", 3))
    a, b = s.transfers[0], s.transfers[1]
    assert len(payload(a)) == a.bytes == 1000 and payload(a) != payload(b)
    assert payload(a) == payload(a) and payload(a)[:251] != payload(a)[1:252]


def test_dependencies_hold_or_the_early_start_is_named() -> None:
    s = _two_rank_job(iterations=1, warmup=0)
    tl = _timeline(s, [1, 1])
    assert check_dependencies(s, tl) == []
    early = [Record(r.transfer, 0.5, r.end) if r.transfer == 2 else r for r in tl]
    assert check_dependencies(s, early) == [
        "rank 0 started step 1 of iteration 0 (transfer 2) at 0.5 before transfer 0 of its previous step completed at 1.0"]
    assert check_dependencies(s, tl[1:]) == ["transfer 0 (0->1, step 0 of iteration 0) has no record"]
