"""bench/mrc_scenarios.py's pure parts: its arguments, the goodput and recovery figures of a binned series, when
an EV was mapped out, and the summary's ratios to the baseline run, on hand-made numbers."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[3] / "bench"


def _load() -> ModuleType:
    sys.path.insert(0, str(BENCH))
    spec = importlib.util.spec_from_file_location("mrc_scenarios", BENCH / "mrc_scenarios.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules["mrc_scenarios"] = mod  # its dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


mrc = _load()


def test_defaults_take_every_scenario_and_mode_three_runs_on_the_kernel_lab():
    a = mrc.parse_args([])
    assert (a.dataplane, a.runs, a.json) == ("kernel", 3, False)
    assert a.scenario == ["ev-loss", "t1-blackhole", "t0-flap", "loss1", "nic-down"]
    assert a.mode == ["host", "host-loops", "leaf", "eecmp", "roce-gbn"]


def test_scenario_and_mode_repeat_and_keep_their_order():
    a = mrc.parse_args(["--scenario", "loss1", "--scenario", "ev-loss", "--mode", "eecmp", "--runs", "2",
                        "--dataplane", "bmv2", "--json"])
    assert (a.scenario, a.mode, a.runs, a.dataplane, a.json) == (["loss1", "ev-loss"], ["eecmp"], 2, "bmv2", True)


@pytest.mark.parametrize("argv, says", [
    (["--scenario", "flood"], "invalid choice: 'flood'"),
    (["--runs", "0"], "--runs must be at least 1, not 0"),
    (["--rate", "-5"], "--rate must be above 0, not -5.0"),
    (["--dataplane", "tofino"], "invalid choice: 'tofino'"),
])
def test_bad_arguments_exit_2_with_one_line(argv, says, capsys):
    with pytest.raises(SystemExit) as e:
        mrc.parse_args(argv)
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert says in err and err.strip().splitlines()[-1].startswith("mrc_scenarios.py: error:")


def test_rate_counts_whole_bins_of_the_window():
    series = [10, 10, 20, 20, 0, 0]  # 20 ms bins: 500, 500, 1000, 1000, 0, 0 packets/s
    assert mrc.rate(series, 20.0, 0.0, 0.04) == 500.0
    assert mrc.rate(series, 20.0, 0.04, 0.08) == 1000.0
    assert mrc.rate(series, 20.0, 0.04, 0.12) == 500.0
    assert mrc.rate(series, 20.0, 0.2, 0.3) is None  # past the series
    assert mrc.rate(series, 20.0, 0.05, 0.05) is None  # an empty window


def test_recovery_is_the_first_span_back_at_the_healthy_share():
    # healthy 500 packets/s = 10 per 20 ms bin; the fault at 0.1 s (bin 5); 3 bins of 9 or more on average again
    # from bin 7 (9, 9, 10: 28 of the 27 needed), 40 ms after the fault; bins 6-8 (3, 9, 9) are not enough
    series = [10] * 5 + [2, 3, 9, 9, 10, 8, 10, 10]
    assert mrc.recovery_ms(series, 20.0, 0.1, 500.0) == 40.0
    assert mrc.recovery_ms(series, 20.0, 0.1, 500.0, frac=1.0) is None  # no 3 bins in a row at 30 again
    assert mrc.recovery_ms([10] * 10, 20.0, 0.1, 500.0) == 0.0  # never dropped
    assert mrc.recovery_ms([10] * 5 + [1] * 5, 20.0, 0.1, 500.0) is None  # never back
    assert mrc.recovery_ms(series, 20.0, 0.1, None) is None  # no healthy rate to compare with
    # full rate for 5 bins after the fault, then a dip (bins 10-12): back from bin 13, 160 ms after the fault
    late = [10] * 10 + [2, 2, 2] + [10] * 4
    assert mrc.recovery_ms(late, 20.0, 0.1, 500.0) == 160.0
    assert mrc.recovery_ms(late, 20.0, 0.1, 500.0, until_s=0.12) == 0.0  # a dip that began after until_s is not the fault's


def test_an_ev_is_mapped_out_at_its_first_assumed_bad_or_denied_after_the_fault():
    trans = [[0.5, "unknown", "good", "ack"], [0.8, "good", "assumed_bad", "rto"], [0.9, "assumed_bad", "good", "probes"],
             [1.0125, "good", "denied", "controller"], [1.2, "denied", "unknown", "controller"]]
    assert mrc.mapped_out_ms(trans, 1.0) == 12.5  # the loss before the fault does not count
    assert mrc.mapped_out_ms(trans[:3], 1.0) is None


def test_summary_gives_each_figure_its_spread_and_the_ratios_to_the_baseline():
    base = {"during_pps": 800.0, "after_pps": 1000.0}
    runs = [{"during_pps": 600.0, "after_pps": 1000.0, "before_pps": 800.0, "recovery_ms": 40.0, "lost_first_try": 7,
             "lost": 0, "qps_failed": 0, "mapped_out_ms": [10.0, 30.0], "evs_through_fault": 2,
             "port_change_ms": {"remote": 3.5}, "replaced_ms": [5.0, 7.0], "load1": 2.0},
            {"during_pps": 400.0, "after_pps": 900.0, "before_pps": 1000.0, "recovery_ms": None, "lost_first_try": 9,
             "lost": 1, "qps_failed": 1, "mapped_out_ms": [20.0, None], "evs_through_fault": 2, "load1": 3.0},
            {"during_pps": 800.0, "after_pps": 500.0, "before_pps": 800.0, "recovery_ms": 80.0, "lost_first_try": 8,
             "lost": 0, "qps_failed": 0, "mapped_out_ms": [], "evs_through_fault": 0, "load1": 4.0}]
    s = mrc.summarize(base, runs)
    assert s["n"] == 3
    assert s["during_over_baseline"] == {"median": 0.75, "min": 0.5, "max": 1.0, "n": 3}
    assert s["after_over_baseline"] == {"median": 0.9, "min": 0.5, "max": 1.0, "n": 3}
    assert s["during_over_before"] == {"median": 0.75, "min": 0.4, "max": 1.0, "n": 3}
    assert s["recovery_ms"] == {"median": 60.0, "min": 40.0, "max": 80.0, "n": 2}
    assert s["lost_first_try"] == {"median": 8, "min": 7, "max": 9, "n": 3}
    assert (s["qps_failed"], s["evs_through_fault"], s["evs_mapped_out"]) == (1, 4, 3)
    assert s["mapped_out_ms"] == {"median": 20.0, "min": 10.0, "max": 30.0, "n": 3}
    assert s["port_change_ms"]["remote"] == {"median": 3.5, "min": 3.5, "max": 3.5, "n": 1}
    assert s["port_change_ms"]["local"] == {"median": None, "n": 0}
    assert s["replaced_ms"] == {"median": 6.0, "min": 5.0, "max": 7.0, "n": 2}
    assert s["load1"] == [2.0, 3.0, 4.0]


def test_without_a_baseline_the_ratios_to_it_are_empty():
    s = mrc.summarize(None, [{"during_pps": 600.0, "after_pps": 1000.0, "before_pps": 600.0}])
    assert s["during_over_baseline"] == {"median": None, "n": 0}
    assert s["during_over_before"] == {"median": 1.0, "min": 1.0, "max": 1.0, "n": 1}
