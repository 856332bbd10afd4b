"""analysis.closed: every closed form agrees with the seeded Monte Carlo (or exhaustive search)
within its 99.9% interval on small designs."""

from __future__ import annotations

import itertools
import math
import random

import pytest

from controller.analysis import closed
from controller.analysis import montecarlo as mc
from controller.analysis.design import KINDS, Design, Rates
from controller.analysis.reach import Down
from controller.analysis.stats import mean, poisson_rate, wilson

Z = 3.2905  # 99.9%


@pytest.mark.parametrize("d", [Design(1, 3, 3, 2), Design(2, 2, 3, 2), Design(3, 2, 2, 2)], ids=lambda d: d.spec)
def test_pair_cut_probability_matches_independent_sampling(d: Design) -> None:
    q = {"link": 0.3, "t1": 0.2, "t0": 0.1, "nic": 0.15}
    for pair, same in ((closed.given_pair(d), False), ((0, 1), True)):
        est = mc.p_cut_independent(d, pair, q, 4000, seed=7)
        ci = wilson(round(est.value * est.n), est.n, Z)
        assert ci.contains(closed.pair_cut(d, q, same)), (pair, est, closed.pair_cut(d, q, same))
    # and the one-plane figure is the planes-th root
    assert closed.pair_cut(d, q) == pytest.approx((1 - closed.plane_up(d, q)) ** d.planes)


def test_capacity_lost_matches_sampling() -> None:
    d = Design(2, 3, 4, 1)
    q = {"link": 0.2, "t1": 0.1, "t0": 0.05, "nic": 0.0}
    rng, u = random.Random(3), mc.everything(d)
    lost = mean([mc.independent_down(u, rng, q).uplink_capacity_lost() for _ in range(3000)], Z)
    assert lost.contains(closed.uplink_capacity_lost(q))


@pytest.mark.parametrize("kind", KINDS)
def test_expected_failures_to_cut_the_pair(kind: str) -> None:
    d = Design(2, 2, 3, 2)
    pair = closed.given_pair(d)
    fabric = mc.first_cut(d, pair, 1500, seed=11, kind=kind)  # type: ignore[arg-type]
    own = mc.first_cut(d, pair, 1500, seed=12, kind=kind)  # type: ignore[arg-type]
    # first_cut draws from the pair's own components; for fabric-wide counts, use all hosts' universe
    rng, u, counts = random.Random(13), mc.everything(d), []
    for _ in range(1500):
        proc, down, n = mc.Process(u, rng, kind=kind), Down(d), 0  # type: ignore[arg-type]
        while not down.job_cut(pair):
            k, index, _ = proc.next()  # type: ignore[misc]
            down.add(k, index)
            n += 1
        counts.append(n)
    assert mean(counts, Z).contains(closed.expected_failures_to_cut_pair(d, kind))  # type: ignore[arg-type]
    m = closed.expected_own_failures_to_cut_pair(d, kind)  # type: ignore[arg-type]
    assert mean(own.samples_failures, Z).contains(m) and mean(fabric.samples_failures, Z).contains(m)


@pytest.mark.parametrize("kind,k", [("nic", 3), ("t0", 2), ("link", 4), ("t1", 4)])
def test_pair_cut_after_k_failures(kind: str, k: int) -> None:
    d = Design(2, 2, 3, 1)
    pair = closed.given_pair(d)
    rng, u = random.Random(5), mc.everything(d)
    hits = sum(mc.random_down(u, rng, k, kind=kind).job_cut(pair) for _ in range(4000))  # type: ignore[arg-type]
    assert wilson(hits, 4000, Z).contains(closed.pair_cut_after(d, kind, k))  # type: ignore[arg-type]


def _fewest_to_cut(d: Design, kind: str) -> int | None:
    """Exhaustive: the smallest set of components of a kind that cuts some host pair."""
    n = d.count(kind)  # type: ignore[arg-type]
    for size in range(1, n + 1):
        for picks in itertools.combinations(range(n), size):
            down = Down(d)
            for i in picks:
                down.add(kind, i)  # type: ignore[arg-type]
            if down.job_cut(range(d.hosts)):
                return size
    return None


@pytest.mark.parametrize("d", [Design(1, 2, 2, 2), Design(2, 2, 2, 1), Design(2, 3, 1, 2), Design(3, 1, 2, 1)],
                         ids=lambda d: d.spec)
def test_worst_case_is_the_exhaustive_minimum(d: Design) -> None:
    worst = closed.worst_case(d)
    for kind in KINDS:
        assert worst[kind] == _fewest_to_cut(d, kind), kind


@pytest.mark.parametrize("planes", [1, 2])
def test_any_pair_expected_nic_failures(planes: int) -> None:
    d = Design(planes, 2, 3, 2)
    est = mc.first_cut(d, range(d.hosts), 3000, seed=21, kind="nic")
    expected = closed.expected_nic_failures_any_pair(d)
    assert expected is not None and mean(est.samples_failures, Z).contains(expected)
    assert closed.expected_nic_failures_any_pair(Design(3, 2, 3, 2)) is None


@pytest.mark.parametrize("d,gpus", [(Design(2, 2, 3, 2), 5), (Design(3, 2, 2, 2), 4), (Design(2, 3, 2, 3), 6)],
                         ids=lambda x: getattr(x, "spec", str(x)))
def test_job_cut_sets_of_order_planes_match_enumeration(d: Design, gpus: int) -> None:
    """Every set of `planes` components (any kinds) that cuts the job is one NIC port or T0 per
    plane, and for each choice of the alpha planes holding NIC ports there are job_cut_sets of them."""
    comps = [(k, i) for k in KINDS for i in range(d.count(k))]
    found = [0] * (d.planes + 1)
    for picks in itertools.combinations(comps, d.planes):
        down = Down(d)
        for k, i in picks:
            down.add(k, i)  # type: ignore[arg-type]
        if down.job_cut(range(gpus)):
            assert all(k in ("nic", "t0") for k, _ in picks)
            found[sum(k == "nic" for k, _ in picks)] += 1
    assert found == [math.comb(d.planes, a) * closed.job_cut_sets(d, gpus, a) for a in range(d.planes + 1)]


@pytest.mark.parametrize("d", [Design(2, 2, 4, 2), Design(1, 3, 3, 1)], ids=lambda d: d.spec)
def test_pair_interruption_rate_with_repair_matches_simulation(d: Design) -> None:
    rates = Rates(link=2e-3, t1=1e-3, t0=1e-3, nic=3e-3, mttr=20)
    sim = mc.with_repair(d, closed.given_pair(d), rates, seed=1, max_events=30000)
    ci = poisson_rate(sim.interruptions, sim.hours, conf=0.999)
    assert ci.contains(closed.pair_interruption_rate(d, rates)), (ci, closed.pair_interruption_rate(d, rates))


@pytest.mark.parametrize("d,gpus", [(Design(1, 2, 4, 2), 6), (Design(2, 2, 3, 2), 6)], ids=lambda x: getattr(x, "spec", str(x)))
def test_job_interruption_rate_leading_order_matches_simulation(d: Design, gpus: int) -> None:
    rates = Rates(link=1e-4, t1=1e-4, t0=1e-4, nic=1e-4, mttr=10)  # q about 1e-3
    sim = mc.with_repair(d, range(gpus), rates, seed=3, max_events=40000)
    ci = poisson_rate(sim.interruptions, sim.hours, conf=0.999)
    assert sim.interruptions > 20 and ci.contains(closed.job_interruption_rate(d, gpus, rates))


@pytest.mark.parametrize("planes,factor", [(1, 1.0), (2, 1.5)])
def test_job_time_to_interruption_without_repair(planes: int, factor: float) -> None:
    """NIC ports only: one plane, the first of N exponential clocks (1 / N rate); two planes, the
    later of the first failures in each plane (1.5 / N rate)."""
    d = Design(planes, 2, 4, 2)
    rates = Rates(link=0, t1=0, t0=0, nic=1e-3)
    est = mc.first_cut(d, range(6), 3000, seed=4, rates=rates)
    assert mean(est.samples_hours, Z).contains(factor / (6 * 1e-3))


def test_pair_survival_time_matches_simulation() -> None:
    d = Design(2, 2, 3, 1)
    rates = Rates(link=2e-3, t1=1e-3, t0=1e-3, nic=3e-3)
    est = mc.first_cut(d, closed.given_pair(d), 3000, seed=9, rates=rates)
    assert mean(est.samples_hours, Z).contains(closed.pair_survival_time(d, rates))


def test_llama3_default_rates() -> None:
    """35 switch/cable and 7 NIC interruptions in 54 days on 16,384 GPUs (docs/analysis.md)."""
    r = Rates()
    hours = 54 * 24
    assert r.t1 == r.t0 == pytest.approx(17.5 / (768 * hours))
    assert r.link == pytest.approx(17.5 / (32768 * hours))
    assert r.nic == pytest.approx(7 / (16384 * hours) + r.link)
    assert r.unavailability("nic") == pytest.approx(r.nic * 8 / (1 + r.nic * 8))
    assert math.isclose(1 / r.t1, 56875.9, rel_tol=1e-5)
