"""The incast comparison's terminal lines (endpoint.scenarios.describe): what the senders saw and did."""

from __future__ import annotations

from endpoint import scenarios  # loads without Mininet (only running a scenario needs a lab)


def test_the_incast_lines_show_resends_by_how_in_srtts_and_the_senders_ce_echoes_and_window_cuts() -> None:
    summary = {"lost_first_try": 3, "retransmitted": 5, "lost": 0, "loss_window_ms": {"median": 4.0, "max": 9.0},
               "goodput_pps": {"fault": 300, "healthy": 600, "ratio": 0.5}, "ecn": 7, "trimmed": 4, "reorder": {},
               "evs_on_fault": 0, "resend_delay_ms": {"nack": {"count": 4, "median": 9.9, "p90": 12.0, "max": 13.0},
                                                      "timeout": {"count": 1, "median": 26.7, "p90": 26.7, "max": 26.7}},
               "resend_srtts": {"nack": {"median": 0.42}, "timeout": {"median": 1.3}},
               "rtt_ms": {"min_median": 0.9}, "min_rto_ms": 25.0}
    qps = [{"ecn": 5, "cwnd_cuts": 3}, {"ecn": 2, "cwnd_cuts": None}]
    mode = scenarios.ModeResult("host-trim", "health", False, [], summary, qps, [], {})
    lines = scenarios.describe(scenarios.Comparison("incast to h2", [("h0", "h2")], scenarios.EndpointSchedule(), [mode]))
    assert "loss to resend: nack 4x median 9.9 ms (p90 12.0, max 13.0), timeout 1x median 26.7 ms" in lines[-2]
    assert "in SRTTs (median): nack 0.42, timeout 1.3" in lines[-2]
    assert lines[-1].split() == ["senders:", "CE", "echoes", "7,", "congestion", "window", "cut", "3", "times"]
