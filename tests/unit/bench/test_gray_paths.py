"""bench/gray_paths.py's pure parts: the schedules it runs and the floor of what the aim can reach, on hand
computed numbers."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path
from types import ModuleType

import pytest

from endpoint.scenarios import EndpointSchedule

BENCH = Path(__file__).resolve().parents[3] / "bench"


def _load() -> ModuleType:
    sys.path.insert(0, str(BENCH))
    spec = importlib.util.spec_from_file_location("gray_paths", BENCH / "gray_paths.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules["gray_paths"] = mod
    spec.loader.exec_module(mod)
    return mod


gray = _load()


@pytest.mark.parametrize("name, fault_s", [("default", 1.5), ("long", 7.5), ("longer", 17.0)])
def test_each_schedule_is_the_endpoints_own_at_compares_default_rate(name: str, fault_s: float):
    sch = gray.schedule_of(name)
    assert isinstance(sch, EndpointSchedule)  # the senders' window, RTO and probes come with it
    assert (sch.rate, sch.repair_at - sch.fault_at, sch.problem()) == (500.0, fault_s, None)


def test_floor_at_one_percent_on_the_short_fault_is_far_above_a_tenth():
    f = gray.floor(1, 1.5)  # 62.5 packets/s on each of 2 senders' gray EV: 93.75 each
    assert f["packets_per_sender"] == 93.75
    assert f["plain"] == pytest.approx(1.875)
    assert f["health_floor"] == pytest.approx(2 * (1 - 0.99 ** 93.75))  # 1.22
    assert f["ratio"] == pytest.approx(0.651, abs=1e-3)
    assert f["no_loss"] == pytest.approx(0.99 ** 187.5)  # 15 %: plain spraying loses nothing at all


@pytest.mark.parametrize("percent, fault_s, ratio", [(1, 7.5, 0.211), (1, 17.0, 0.094), (5, 1.5, 0.212),
                                                     (5, 7.5, 0.043), (10, 1.5, 0.107), (10, 7.5, 0.021)])
def test_floor_ratio_falls_as_one_over_the_losses_plain_spraying_expects(percent: int, fault_s: float, ratio: float):
    f = gray.floor(percent, fault_s)
    assert f["ratio"] == pytest.approx(ratio, abs=1e-3)
    assert f["health_floor"] <= 2  # one first loss per sender at most


def test_floor_with_nothing_on_the_gray_ev_has_no_ratio():
    f = gray.floor(5, 1.5, pps_on_gray=0)
    assert (f["plain"], f["health_floor"], f["no_loss"]) == (0, 0, 1)
    assert math.isinf(f["ratio"])


def test_binomial_tail_on_two_fair_coins():
    assert [gray.binomial_tail(2, 0.5, k) for k in (0, 1, 2, 3)] == [1.0, 0.75, 0.25, 0.0]


def test_chance_met_by_hand_one_sender_two_packets_at_half_loss():
    # H = 0 with 1/4 (neither lost), then plain spraying must lose some: 3/4; H = 1 needs 10 of 2: never
    assert gray.chance_met(50, 2, senders=1, pps_on_gray=1) == pytest.approx(0.1875)


@pytest.mark.parametrize("percent, fault_s, low, high", [(1, 1.5, 0.12, 0.14), (1, 7.5, 0.005, 0.02),
                                                         (5, 1.5, 0.005, 0.02), (10, 1.5, 0.35, 0.5),
                                                         (5, 7.5, 0.999, 1.0), (10, 7.5, 0.999, 1.0)])
def test_chance_met_at_the_floor_on_the_benchs_runs(percent: int, fault_s: float, low: float, high: float):
    assert low <= gray.chance_met(percent, fault_s) <= high
