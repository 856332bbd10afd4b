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


def test_the_flap_lasts_flap_s_with_the_two_seconds_after_it_the_others_keep():
    default = mrc.scenario_for("t0-flap", 400.0)
    assert (default.schedule.fault_at, default.schedule.repair_at, default.schedule.seconds) == (1.0, 6.0, 8.0)
    assert default.scale == "5 s of flapping at the --flap-ms period (--flap-s), not a minute"
    minute = mrc.scenario_for("t0-flap", 300.0, 60.0)
    assert (minute.schedule.fault_at, minute.schedule.repair_at, minute.schedule.seconds, minute.schedule.rate) == \
        (1.0, 61.0, 63.0, 300.0)
    assert minute.scale == "60 s of flapping at the --flap-ms period"
    other = mrc.scenario_for("nic-down", 300.0, 60.0)  # --flap-s is the flap's only
    assert (other.schedule.repair_at, other.schedule.seconds, other.schedule.rate) == (2.5, 4.0, 300.0)


@pytest.mark.parametrize("flap_s", ["0", "601", "-1"])
def test_a_flap_length_out_of_range_exits_2(flap_s, capsys):
    with pytest.raises(SystemExit) as e:
        mrc.parse_args(["--flap-s", flap_s])
    assert e.value.code == 2
    assert f"--flap-s must be above 0 and at most 600, not {float(flap_s)}" in capsys.readouterr().err


def _doc(scenarios, **kw):
    return {"bench": "mrc_scenarios", "dataplane": "bmv2", "rate_pps_per_sender": 400.0, "runs": 3, "lab": "L",
            "argv": kw.pop("argv", []), "commit": "abc", "machine": {"load1_start": 3.0}, "seconds": 100.0,
            "scenarios": scenarios, **kw}


def _sc(*modes):
    return {"paper": "P", "scale": "", "fault": "F", "modes": {m: {"summary": {"n": 3}} for m in modes}}


def test_merge_puts_split_invocations_into_one_table_and_keeps_each_invocation():
    a = _doc({"t1-blackhole": _sc("host", "leaf")}, argv=["--scenario", "t1-blackhole"])
    b = _doc({"nic-down": _sc("host"), "t1-blackhole": _sc("eecmp")}, argv=["--scenario", "nic-down"])
    m = mrc.merge([a, b])
    assert list(m["scenarios"]) == ["t1-blackhole", "nic-down"]
    assert list(m["scenarios"]["t1-blackhole"]["modes"]) == ["host", "leaf", "eecmp"]
    assert m["scenarios"]["t1-blackhole"]["paper"] == "P"
    assert [i["argv"] for i in m["invocations"]] == [["--scenario", "t1-blackhole"], ["--scenario", "nic-down"]]
    assert (m["dataplane"], m["runs"]) == ("bmv2", 3)


@pytest.mark.parametrize("other, says", [
    ({"dataplane": "kernel"}, "invocation 2 has dataplane 'kernel', the first 'bmv2'"),
    ({"runs": 1}, "invocation 2 has runs 1, the first 3"),
])
def test_merge_refuses_invocations_that_are_not_one_table(other, says):
    with pytest.raises(mrc.MergeError, match=says):
        mrc.merge([_doc({"ev-loss": _sc("host")}), _doc({"nic-down": _sc("host")}, **other)])


def test_merge_refuses_a_mode_measured_twice_and_nothing():
    with pytest.raises(mrc.MergeError, match="ev-loss host is measured in more than one invocation"):
        mrc.merge([_doc({"ev-loss": _sc("host")}), _doc({"ev-loss": _sc("eecmp", "host")})])
    with pytest.raises(mrc.MergeError, match="nothing to merge"):
        mrc.merge([])


def test_merge_from_files_names_the_file_it_cannot_read(tmp_path, capsys):
    good, bad = tmp_path / "a.json", tmp_path / "b.json"
    good.write_text(__import__("json").dumps(_doc({"ev-loss": _sc("host")})))
    bad.write_text("{not json")
    assert mrc.main(["--merge", str(good), str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"mrc_scenarios.py: error: {bad}: Expecting property name") and "\n" not in err


def _summary(**kw):
    base = {"during_over_baseline": {"median": 0.95, "min": 0.9, "max": 0.99, "n": 3},
            "after_over_baseline": {"median": 1.0, "min": 1.0, "max": 1.0, "n": 3},
            "recovery_ms": {"median": None, "n": 0}, "lost_first_try": {"median": 8, "min": 6, "max": 9, "n": 3},
            "qps_failed": 0, "mapped_out_ms": {"median": 80.0, "min": 78.0, "max": 96.5, "n": 12},
            "evs_through_fault": 12, "evs_mapped_out": 12, "port_change_ms": {"local": {"median": None, "n": 0}},
            "load1": [2.5, 3.25, 2.0]}
    return {**base, **kw}


def test_markdown_rows_give_each_mode_its_spreads_and_name_the_scenario_once():
    doc = _doc({"t1-blackhole": {"paper": "largely unaffected", "scale": "", "modes": {
        "host": {"summary": _summary()},
        "eecmp": {"summary": _summary(qps_failed=2, evs_through_fault=0, evs_mapped_out=0,
                                      mapped_out_ms={"median": None, "n": 0},
                                      port_change_ms={"local": {"median": 20.0, "min": 15.0, "max": 35.0, "n": 3}})}}}})
    rows = mrc.markdown_rows(doc)
    assert rows[2] == ("| **t1-blackhole** (largely unaffected) | host | 0.95 (0.9-0.99) / 1 | - | 8 (6-9); 0 | "
                       "80 (78-96.5), 12 of 12 EVs | 2-3.25 |")
    assert rows[3] == "| | eecmp | 0.95 (0.9-0.99) / 1 | - | 8 (6-9); 2 | -; port down seen local 20 (15-35) | 2-3.25 |"
    assert len(rows) == 4 and rows[1].count("---") == 7


def test_the_endpoint_summary_gets_the_scenarios_schedule_with_the_senders_settings():
    sch = mrc.scenario_for("t0-flap", 300.0, 60.0).schedule
    ep = mrc._ep_schedule(sch)
    assert (ep.seconds, ep.fault_at, ep.repair_at, ep.rate, ep.qps, ep.timeline_ms, ep.start_delay) == \
        (63.0, 1.0, 61.0, 300.0, 4, 20.0, 3.0)
    assert (ep.window, ep.per_message, ep.min_rto_ms) == (16, 4, 25.0)  # what the bench's Workload sends with
