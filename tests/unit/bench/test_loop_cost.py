"""bench/loop_cost.py's pure parts: its periods, the loops' timeout, an agent's CPU from /proc, the traffic delivered
in a window, and when an agent saw a failure and its clearing, on hand-made numbers."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[3] / "bench"


def _load() -> ModuleType:
    sys.path.insert(0, str(BENCH))
    spec = importlib.util.spec_from_file_location("loop_cost", BENCH / "loop_cost.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


lc = _load()


def test_periods_keep_their_order_and_none_is_a_run_without_agents():
    assert lc.parse_periods("none, 100,20,5,1") == [None, 100.0, 20.0, 5.0, 1.0]


@pytest.mark.parametrize("text, why", [("0", "a period must be above 0 ms, not 0"), ("", "no period given"),
                                       ("-5", "a period must be above 0 ms, not -5")])
def test_a_period_not_above_zero_is_refused_in_one_line(text, why):
    with pytest.raises(ValueError, match=f"^{why}$"):
        lc.parse_periods(text)


def test_bad_arguments_exit_2_naming_the_period(capsys):
    with pytest.raises(SystemExit) as e:
        lc.parse_args(["--periods", "none,0"])
    assert e.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == "loop_cost.py: error: a period must be above 0 ms, not 0"


def test_the_timeout_is_twice_the_period_at_least_5_ms_unless_given():
    assert [lc.timeout_ms(p) for p in (100.0, 20.0, 5.0, 1.0)] == [200.0, 40.0, 10.0, 5.0]
    assert lc.timeout_ms(1.0, 3.0) == 3.0


def test_cpu_seconds_read_utime_and_stime_after_a_name_with_spaces_and_parentheses():
    # pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime ...
    stat = "4242 (py thon (x)) S 1 4242 4242 0 -1 4194560 900 0 0 0 250 50 7 3 20 0 1 0 100 0 0\n"
    assert lc.cpu_seconds(stat, 100) == 3.0


def test_delivered_packets_per_second_in_a_window_of_bins_from_two_receivers():
    started_ns = 1_000 * 20_000_000  # bin 1000 is the start; 20 ms bins
    a = {"1000": 5, "1050": 8, "1099": 2, "1100": 100}
    b = {"1050": 2, "1200": 100}
    # [1.0, 2.0) s: bins 1050..1099 hold 8 + 2 + 2 packets over 1 s
    assert lc.delivered_pps([a, b], started_ns, 20.0, 1.0, 2.0) == 12.0
    assert lc.delivered_pps([a, b], started_ns, 20.0, 2.0, 2.0) is None


def test_detection_and_clearing_are_timed_from_the_fault_and_the_repair():
    changes = [(99.0, {"failed": [["x", "y"]]}), (99.5, {"failed": []}),  # a false report before the fault
               (100.012, {"failed": [["p0-t0-0", "p0-t1-1"]]}), (100.02, {"failed": [["p0-t0-0", "p0-t1-1"], ["p0-t1-1", "p0-t0-0"]]}),
               (101.03, {"failed": []})]
    d = lc.detection(changes, 100.0, 101.0)
    assert d == {"detected_ms": 12.0, "reported": [["p0-t0-0", "p0-t1-1"]], "cleared_ms": 30.0, "false_reports": 1}


def test_an_agent_that_saw_nothing_has_no_detection_and_no_clearing():
    assert lc.detection([], 100.0, 101.0) == {"detected_ms": None, "reported": None, "cleared_ms": None,
                                              "false_reports": 0}
