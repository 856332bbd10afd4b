"""bench/collectives.py without a lab: which cases an invocation runs, in which order, and the figures and
ratios it reports from hand-made runs."""

from __future__ import annotations

import argparse
import importlib.util
import sys
from types import ModuleType
from typing import Any

import pytest

from controller.workload import Record, Workload, grid, schedule
from controller.workload import metrics
from tests.paths import REPO

BENCH = REPO / "bench"


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    sys.path.insert(0, str(BENCH))  # the bench imports its sibling _stats as a script does
    try:
        spec = importlib.util.spec_from_file_location("bench_collectives", BENCH / "collectives.py")
        assert spec is not None and spec.loader is not None
        mod = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = mod  # its dataclasses look their module up by name
        spec.loader.exec_module(mod)
        return mod
    finally:
        sys.path.remove(str(BENCH))


def _args(**kw: Any) -> argparse.Namespace:
    base = dict(runs=3, mbit=1.0, size=65536, iterations=3, fault_iterations=6, fault_at=1.0, repair_at=2.0,
                freeze_schemes="leaf-spray,host-spray,eecmp", window=4, mtu=1024, timeout=120.0)
    return argparse.Namespace(**{**base, **kw})


def _model() -> Any:
    from mininet_labs.labstate import default_topology

    return default_topology(2, 2, 2, 4, grpc_base_port=52001)


def test_paired_ratio_is_run_by_run_and_skips_missing_pairs(bench: ModuleType) -> None:
    r = bench.paired_ratio([2.0, 3.0, None, 8.0], [1.0, 2.0, 5.0, 0.0])
    assert r == {"median": 1.75, "min": 1.5, "max": 2.0, "n": 2}


def test_run_span_is_the_measured_iterations_first_start_to_last_end(bench: ModuleType) -> None:
    s = schedule(Workload("allreduce", 1000, iterations=3, warmup=1), grid(1, 2, 1, "packed", 2))
    recs, now = [], 0.0
    for k, d in enumerate([5, 5, 0.5, 0.5, 1, 1, 2, 2]):  # warm-up 10 s, then iterations of 1, 2 and 4 s
        it, st = divmod(k, s.steps)
        recs += [Record(t.id, now, now + d) for t in s.step_transfers(it, st)]
        now += d
    assert bench.run_span(metrics.run(s, recs)) == 7.0


def test_plans_keep_the_chosen_groups_and_name_an_unknown_one(bench: ModuleType) -> None:
    b = bench.Bench(_model(), _args())
    chosen = bench.plans(b, ["spine_freeze", "spray_vs_ethereal"], ["eecmp", "dead link"], kernel=False)
    assert list(chosen["spine_freeze"].groups) == ["eecmp"]
    assert [c.key for c in chosen["spine_freeze"].groups["eecmp"]] == ["clean", "fault"]
    fault = chosen["spine_freeze"].groups["eecmp"][1]
    assert (fault.kw["fault"].describe(), fault.kw["fault_at"], fault.kw["repair_at"], fault.kw["controller"]) == \
        ("freeze p0-t1-0", 1.0, 2.0, True)
    assert [c.scheme for c in chosen["spray_vs_ethereal"].groups["dead link"]] == ["host-spray", "ethereal"]
    with pytest.raises(ValueError, match="no comparison chosen has a case 'uneven'"):
        bench.plans(b, ["pinning"], ["uneven"], kernel=False)


def test_on_the_kernel_pinning_and_the_freeze_are_skipped_with_the_reason(bench: ModuleType) -> None:
    chosen = bench.plans(bench.Bench(_model(), _args()), ["pinning", "spine_freeze", "rr_vs_split"], None, kernel=True)
    assert chosen["pinning"] == "the kernel data plane has no path pinning"
    assert chosen["spine_freeze"] == "the kernel data plane has no switch process to freeze"
    assert [c.key for c in chosen["rr_vs_split"].groups["allreduce"]] == ["split", "round_robin"]


def test_dry_run_budgets_every_run_without_a_lab(bench: ModuleType) -> None:
    b = bench.Bench(_model(), _args(runs=2))
    doc = bench.dry_run(b, bench.plans(b, ["calibration"], None, kernel=False), spines=2)
    full, half = doc["comparisons"]["calibration"]["rate"]
    assert (full["mbit"], half["mbit"]) == (1.0, 0.5)
    assert half["ideal_wire_s"] == pytest.approx(2 * full["ideal_wire_s"], abs=0.002)  # rounded to ms
    # 2 runs of each: 4 iterations (1 warm-up) at twice the ideal, plus the start
    want = 2 * (4 * 2 * full["ideal_wire_s"] + 4 * 2 * half["ideal_wire_s"] + 2 * bench.RUN_OVERHEAD_S)
    assert doc["budget_s"] == pytest.approx(want, abs=0.2)


class _Scripted:
    """Bench.one and Bench.at_rate replaced: the runs' order and rates recorded, figures from a script."""

    def __init__(self, bench: ModuleType, times: dict[str, list[float]], fail_at: int | None = None) -> None:
        self.b = bench.Bench(_model(), _args())
        self.calls: list[tuple[str, int]] = []
        self.rates: list[float] = []
        self.times = times
        self.fail_at = fail_at

        def one(c: Any, i: int) -> dict[str, Any]:
            if len(self.calls) == self.fail_at:
                raise RuntimeError("lab gone")
            self.calls.append((c.key, i))
            self.b.at_rate(c.mbit)
            t = self.times[c.key][i]
            return {"complete": True, "problems": [], "time_ms": t, "busbw_MBps": 1000 / t, "max_ms": t,
                    "run_ms": 3 * t, "load1": 2.0}

        def at_rate(mbit: float) -> None:
            if mbit != self.b.shaped:
                self.rates.append(mbit)
                self.b.shaped = mbit

        self.b.one, self.b.at_rate = one, at_rate


def test_cases_take_turns_and_each_ratio_is_also_given_run_by_run(bench: ModuleType) -> None:
    s = _Scripted(bench, {"full": [100.0, 110.0, 90.0], "half": [200.0, 330.0, 180.0]})
    cases = bench.calibration(s.b).groups["rate"]
    out = s.b.group(cases)
    assert s.calls == [("full", 0), ("half", 0), ("full", 1), ("half", 1), ("full", 2), ("half", 2)]
    assert s.rates == [0.5, 1.0, 0.5, 1.0, 0.5, 1.0]  # back at the bench's rate after every half-rate run
    assert out["baseline"] == "full"
    assert out["full"]["time_ms"] == {"median": 100.0, "min": 90.0, "max": 110.0, "n": 3}
    r = out["ratios"]["half"]
    assert r["time"]["of_medians"] == 2.0  # 200 / 100
    assert r["time"]["paired"] == {"median": 2.0, "min": 2.0, "max": 3.0, "n": 3}  # 2.0, 3.0, 2.0
    assert r["busbw"]["paired"] == {"median": 0.5, "min": 0.333, "max": 0.5, "n": 3}
    assert r["throughput"]["of_medians"] == 0.5  # the baseline's span over the case's
    assert out["half"]["load1"]["n"] == 3


def test_the_link_rate_is_restored_when_a_run_fails(bench: ModuleType) -> None:
    s = _Scripted(bench, {"full": [100.0], "half": [200.0]}, fail_at=2)
    with pytest.raises(RuntimeError, match="lab gone"):
        s.b.group(bench.calibration(s.b).groups["rate"])
    assert s.rates == [0.5, 1.0] and s.b.shaped == 1.0


def test_pinning_reports_pin_against_eecmp_on_the_uneven_placement(bench: ModuleType) -> None:
    s = _Scripted(bench, {"pin_spread": [500.0] * 3, "pin_uneven": [900.0] * 3, "eecmp_uneven": [600.0] * 3})
    comp = bench.pinning(s.b)
    doc = comp.results({g: s.b.group(cs) for g, cs in comp.groups.items()})
    assert doc["placement"]["ratios"]["pin_uneven"]["time"]["of_medians"] == 1.8
    assert doc["pin_over_eecmp_uneven"]["time"]["paired"] == {"median": 1.5, "min": 1.5, "max": 1.5, "n": 3}
    assert [k for k, _ in s.calls[:3]] == ["pin_spread", "pin_uneven", "eecmp_uneven"]


def test_detection_is_timed_from_the_fault_to_the_controllers_first_down_event(bench: ModuleType) -> None:
    events = [{"what": "controller (unattended): link_down p0-t0-0--p0-t1-1", "t_s": 0.2},  # before the fault
              {"what": "fault: freeze p0-t1-0", "t_s": 1.0},
              {"what": "controller (unattended): deltas_written", "t_s": 1.5},
              {"what": "controller (unattended): switch_down p0-t1-0", "t_s": 1.567},
              {"what": "repair: freeze p0-t1-0", "t_s": 2.0}]
    assert bench.detected_after(events) == 0.567
    assert bench.detected_after(events[2:]) is None  # no fault
    assert bench.detected_after(events[1:3]) is None  # the controller saw nothing


def test_a_run_that_fails_is_recorded_incomplete_and_the_bench_goes_on(bench: ModuleType,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from mininet_labs.lab import LabError

    def job(*_: Any, **__: Any) -> Any:
        raise LabError("the collective did not complete within 120 s (ranks' logs: /tmp/x)")

    monkeypatch.setattr(bench, "job", job)
    b = bench.Bench(_model(), _args())
    c = bench.rr_vs_split(b).groups["allreduce"][0]
    r = b.one(c, 0)
    assert (r["complete"], r["problems"]) == (False, ["the collective did not complete within 120 s (ranks' logs: /tmp/x)"])
    assert bench.summarize([r])["complete"] == 0


def test_a_t1_blackhole_is_every_end_of_its_links_on_bmv2_and_each_link_cut_on_the_kernel(bench: ModuleType) -> None:
    bmv2 = bench.paper_fault("t1-blackhole", kernel=False)
    assert [(p.kind, p.target) for p in bmv2.parts] == [
        ("blackhole", ("p0-t0-0", "p0-t1-0")), ("blackhole", ("p0-t1-0", "p0-t0-0")),
        ("blackhole", ("p0-t0-1", "p0-t1-0")), ("blackhole", ("p0-t1-0", "p0-t0-1"))]
    kernel = bench.paper_fault("t1-blackhole", kernel=True)  # the kernel's blackhole T0 T1 cuts both ends
    assert [p.target for p in kernel.parts] == [("p0-t0-0", "p0-t1-0"), ("p0-t0-1", "p0-t1-0")]
    assert bench.paper_fault("nic-down", kernel=True).describe() == "host-nic-down h0 0"
    assert bench.paper_fault("t0-flap", kernel=False, flap_ms=100).describe() == "flap p0-t0-0 p0-t1-0 period_ms=100"
    with pytest.raises(ValueError, match="the kernel lab's collective faults are a link blackhole and a NIC down, "
                                         "not ev-loss"):
        bench.paper_fault("ev-loss", kernel=True)


class _Part:
    """A fault part that records its apply and revert on a shared log, and fails to apply when told."""

    def __init__(self, name: str, log: list[str], fails: bool = False) -> None:
        self.name, self.log, self.fails = name, log, fails

    def apply(self, lab: Any) -> None:
        if self.fails:
            raise RuntimeError(f"{self.name} refused")
        self.log.append(f"apply {self.name}")

    def revert(self, lab: Any) -> None:
        self.log.append(f"revert {self.name}")


def test_a_fault_set_applies_in_order_reverts_in_reverse_and_rolls_back_a_partial_apply(bench: ModuleType) -> None:
    log: list[str] = []
    fs = bench.FaultSet("t1-blackhole", ("p0-t1-0",), parts=(_Part("a", log), _Part("b", log)))
    fs.apply(None)
    fs.revert(None)
    assert log == ["apply a", "apply b", "revert b", "revert a"]
    log.clear()
    bad = bench.FaultSet("t1-blackhole", ("p0-t1-0",), parts=(_Part("a", log), _Part("b", log), _Part("c", log, True)))
    with pytest.raises(RuntimeError, match="c refused"):
        bad.apply(None)
    assert log == ["apply a", "apply b", "revert b", "revert a"]


def test_paper_scenarios_pair_each_fault_with_the_schemes_clean_run(bench: ModuleType) -> None:
    args = _args(paper_schemes="host-spray,leaf-spray,eecmp", paper_faults="t1-blackhole,nic-down")
    comp = bench.plans(bench.Bench(_model(), args), ["paper_scenarios"], None, kernel=False)["paper_scenarios"]
    assert {g: [c.key for c in cs] for g, cs in comp.groups.items()} == {
        "host-spray": ["clean", "t1_blackhole", "nic_down"], "leaf-spray": ["clean", "t1_blackhole"],
        "eecmp": ["clean", "t1_blackhole"]}  # a leaf scheme's QP on a NIC that is down ends the job (no SHIFT)
    assert [c.kw["controller"] for c in comp.groups["leaf-spray"]] == [True, True]
    assert [c.kw["controller"] for c in comp.groups["host-spray"]] == [False, False, False]
    hit = comp.groups["eecmp"][1]
    assert (hit.kw["fault_at"], hit.kw["repair_at"], hit.sched.workload.iterations) == (1.0, 2.0, 6)
    assert comp.info["faults"]["nic-down"] == "host-nic-down h0 0"
    kargs = _args(paper_schemes="host-spray,leaf-spray,eecmp", paper_faults="t1-blackhole", dataplane="kernel")
    kcomp = bench.plans(bench.Bench(_model(), kargs), ["paper_scenarios"], None, kernel=True)["paper_scenarios"]
    assert list(kcomp.groups) == ["host-spray", "eecmp"]  # the kernel has no per-packet leaf spraying
