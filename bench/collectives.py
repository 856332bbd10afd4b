"""The seeds' collective comparisons on one lab in one run (root; bmv2 and Mininet, or --dataplane kernel
for the schemes the kernel carries): JSON with each figure, its spread over --runs, and its ratio to the
comparison's baseline.

    P4_TOOLCHAIN_BIN=/opt/p4-toolchain/bin flock /tmp/srv6-lab.lock timeout 900 \\
        .venv/bin/python bench/collectives.py --runs 3 --only spine_freeze
    .venv/bin/python bench/collectives.py --runs 3 --only calibration --dry-run   # the plan, no lab

The lab: 2 planes x 2 spines x 2 leaves x 4 hosts, every link shaped to --mbit (tbf). Comparisons:
- calibration: a ring AllReduce on a collision-free placement (h0,h1,h4,h5: one flow leaves each leaf per
  plane at every step) at the rate and at half of it (slowdown
  against the ideal the rate predicts, and the time ratio);
- ecmp_vs_eecmp (Meta): an all-to-all and a ring AllReduce whose ring crosses the leaves at every step,
  QP scaling to 8 QPs, 5-tuple ECMP against E-ECMP on the destination QP;
- rr_vs_split (Meta): E-ECMP with 4 QPs, each message whole on the next QP against split over all;
- pinning (Meta): path pinning on a balanced placement against one host of each leaf's pair busy (and E-ECMP there);
- spine_freeze (MRC): a spine stops forwarding mid-AllReduce (SIGSTOP) with the controller running, under
  leaf spraying, host EV spraying and E-ECMP; against the same run without the fault;
- spray_vs_ethereal (Ethereal): host EV spraying against split-and-assign, healthy and with a dead link;
- ev_timers: host EV spraying and Ethereal (all-to-all and ring AllReduce, and the all-to-all with a dead
  link) with the EV timers as they were (fixed, no late-ACK undo), the same with the undo, and the timers
  fitted to the link (endpoint.timers): spurious resends, ASSUMED_BAD verdicts, undone ones and probes beside
  the times.
- paper_scenarios (MRC): the production paper's failures mid-AllReduce (--paper-faults: a T1 that stops
  forwarding with carrier up, a host's NIC down, and on bmv2 one link at 20 % loss or flapping) under host
  EV spraying (no controller), leaf spraying (the controller running) and E-ECMP (none); against the same
  scheme's run without the fault. A NIC down is run for host EV spraying only: a leaf scheme's QP on the
  failed port ends the job without SHIFT (bench/nic_failover.py measures SHIFT).

Within a comparison the cases take turns (baseline run 1, compared run 1, baseline run 2, ...), so each
ratio is also given run by run ("paired": the spread of the per-run ratios) beside the ratio of the
medians, and a drift of the machine's load falls on both sides alike. `--only` (repeatable) and
`--case` (a comparison's group, e.g. allreduce, healthy, eecmp) keep one invocation short.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _stats import paired_ratio, spread  # noqa: E402

from controller.workload import Rates, Schedule, Workload, ideal_time, place, schedule  # noqa: E402
from controller.workload.metrics import RunMetrics  # noqa: E402
from endpoint.collective.rank import Transport  # noqa: E402
from endpoint.collective.report import JobReport, job, wire_share  # noqa: E402
from endpoint.collective.layout import Transfer  # noqa: E402
from endpoint.collective.run import Fault, frame_bytes, queued_windows  # noqa: E402
from endpoint.collective.schemes import SCHEMES, scheme  # noqa: E402
from mininet_labs.lab import LabError  # noqa: E402
from mininet_labs.shaping import LinkRate, shape  # noqa: E402

COMPARISONS = ("calibration", "ecmp_vs_eecmp", "rr_vs_split", "pinning", "spine_freeze", "spray_vs_ethereal",
               "ev_timers", "paper_scenarios")
PAPER_FAULTS = ("t1-blackhole", "nic-down", "ev-loss", "t0-flap")
PAPER_T1, PAPER_LINK, PAPER_NIC = "p0-t1-0", ("p0-t0-0", "p0-t1-0"), ("h0", "0")
KERNEL_LACKS = {"pinning": "path pinning", "spine_freeze": "switch process to freeze"}
RUN_OVERHEAD_S = 4.0  # a run's rank processes starting and the scheme installed (dry-run estimate)


@dataclass(frozen=True)
class Case:
    """One side of a comparison: a schedule under a scheme at a link rate, with run.run's keywords."""

    key: str
    label: str
    sched: Schedule
    scheme: str
    mbit: float
    kw: dict[str, Any] = field(default_factory=dict)
    tr: Transport | None = None  # the bench's transport unless given

    def ideal_wire(self, transport: Transport, spines: int) -> float:
        """Seconds an iteration takes at best at this rate for this transport (report.measure's ideal_wire)."""
        bps = self.mbit * 1e6 * wire_share(transport, SCHEMES[self.scheme].evs == "host")
        return ideal_time(self.sched.workload, self.sched.placement, spines, Rates(bps, bps))

    def budget_s(self, transport: Transport, spines: int) -> float:
        """A generous guess of one run's wall time: every iteration at twice its ideal, plus the start."""
        w = self.sched.workload
        return (w.iterations + w.warmup) * 2 * self.ideal_wire(transport, spines) + RUN_OVERHEAD_S

    def plan(self, transport: Transport, spines: int) -> dict[str, Any]:
        w = self.sched.workload
        fault = self.kw.get("fault")
        return {"label": self.label, "scheme": self.scheme, "collective": w.collective, "size": w.size,
                "iterations": w.iterations, "warmup": w.warmup, "qps": w.qps, "strategy": w.strategy,
                "placement": list(self.sched.placement.hosts), "mbit": self.mbit,
                "fault": fault.describe() if fault else None, "fault_at": self.kw.get("fault_at"),
                "repair_at": self.kw.get("repair_at"), "controller": self.kw.get("controller", False),
                "ideal_wire_s": round(self.ideal_wire(transport, spines), 3),
                "budget_s": round(self.budget_s(transport, spines), 1)}


@dataclass
class Comparison:
    """A claim and its groups of cases; each group's first case is the baseline of the others."""

    claim: str
    groups: dict[str, list[Case]]
    info: dict[str, Any] = field(default_factory=dict)
    also: dict[str, tuple[str, str, str]] = field(default_factory=dict)  # name: (group, case, its baseline)

    def results(self, groups: dict[str, dict[str, Any]]) -> dict[str, Any]:
        """The comparison's JSON from its groups' results: the claim, the groups, and the `also` ratios
        whose group ran."""
        out: dict[str, Any] = {"claim": self.claim, **self.info, **groups}
        for name, (g, case, base) in self.also.items():
            if g in groups:
                out[name] = ratios(groups[g][case], groups[g][base])
        return out


def run_span(m: RunMetrics) -> float | None:
    """Seconds from the first measured iteration's start to the last one's end (the job's throughput is
    the measured bytes over it): a fault's whole cost, which the median iteration hides."""
    its = [i for i in m.iterations if not i.warmup]
    return max(i.end for i in its) - min(i.start for i in its) if its else None


def detected_after(events: list[dict[str, Any]]) -> float | None:
    """Seconds from the fault to the controller's first link_down or switch_down after it (None: no fault,
    or the controller saw none); `events` are {"what", "t_s"}, the run's and the controller's."""
    fault = next((e["t_s"] for e in events if e["what"].startswith("fault")), None)
    if fault is None:
        return None
    seen = [e["t_s"] for e in events if ("link_down" in e["what"] or "switch_down" in e["what"]) and e["t_s"] >= fault]
    return round(min(seen) - fault, 3) if seen else None


def controller_events(rep: JobReport) -> list[dict[str, Any]]:
    """What the controller service of the run recorded (run.run's service-events.jsonl), s after the start."""
    from endpoint.unattended import timeline

    path = rep.run.dir / "service-events.jsonl" if rep.run.dir else None
    return timeline(path, rep.run.started_ns, rep.run.started_ns) if path and path.exists() else []


def ev_figures(ranks: dict[str, dict[str, Any]]) -> dict[str, int]:
    """The ranks' EV model counters: resends whose first try was acknowledged after all (spurious), ASSUMED_BAD
    verdicts, those a late ACK took back (undone), probes sent."""
    evs = [e for r in ranks.values() for table in r["evs"].values() for e in table]
    return {"spurious": sum(q["spurious"] for r in ranks.values() for q in r["qps"]),
            "assumed_bad": sum(1 for e in evs for t in e["transitions"] if t[2] == "assumed_bad"),
            "undone": sum(e.get("undone", 0) for e in evs), "probes": sum(r["probes_sent"] for r in ranks.values())}


def figures(rep: JobReport) -> dict[str, Any]:
    """One run's figures (times in ms, bandwidth in MB/s)."""
    m = rep.metrics
    if m is None:
        return {"complete": False, "problems": rep.problems[:3]}
    hits = [h.stretch for h in rep.hits if h.stretch]
    span = run_span(m)
    ctl = controller_events(rep)
    return {"complete": True, "problems": rep.problems[:3], "time_ms": m.time_median * 1e3, "p99_ms": m.time_p99 * 1e3,
            "max_ms": m.time_max * 1e3, "run_ms": span * 1e3 if span is not None else None,
            "busbw_MBps": m.busbw / 1e6, "slowdown": m.slowdown,
            "slowdown_wire": rep.slowdown_wire, "link_max_over_mean": rep.to_json()["link_max_over_mean"],
            "retransmits": m.retransmits, "iteration_ms": [round(i.time * 1e3, 1) for i in m.iterations],
            "worst_hit_stretch": max(hits) if hits else None, "events": rep.to_json()["events"],
            "controller_events": ctl, "detected_s": detected_after(rep.to_json()["events"] + ctl), **ev_figures(rep.run.ranks)}


FIGURES = ("time_ms", "p99_ms", "max_ms", "run_ms", "busbw_MBps", "slowdown", "slowdown_wire", "link_max_over_mean",
           "retransmits", "spurious", "assumed_bad", "undone", "probes", "worst_hit_stretch", "detected_s", "load1")


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {k: spread([r.get(k) for r in runs], 3) for k in FIGURES}
    out["complete"] = sum(1 for r in runs if r.get("complete"))
    out["problems"] = sorted({p for r in runs for p in r.get("problems", [])})[:3]
    out["runs"] = runs
    return out


def ratio(a: dict[str, Any], b: dict[str, Any], key: str = "time_ms") -> float | None:
    x, y = a[key]["median"], b[key]["median"]
    return round(x / y, 3) if x and y else None


def ratios(case: dict[str, Any], base: dict[str, Any]) -> dict[str, Any]:
    """A case's figures over its baseline's: of the medians, and run by run. `throughput` is the
    baseline's measured span over the case's (below 1: the case's job got less done per second)."""
    def side(d: dict[str, Any], k: str) -> list[Any]:
        return [r.get(k) for r in d["runs"]]

    out: dict[str, Any] = {}
    for name, key in (("time", "time_ms"), ("busbw", "busbw_MBps"), ("max", "max_ms")):
        out[name] = {"of_medians": ratio(case, base, key), "paired": paired_ratio(side(case, key), side(base, key))}
    out["throughput"] = {"of_medians": ratio(base, case, "run_ms"),
                         "paired": paired_ratio(side(base, "run_ms"), side(case, "run_ms"))}
    return out


class Bench:
    def __init__(self, model: Any, args: argparse.Namespace, lab: Any = None) -> None:
        self.model, self.args, self.lab = model, args, lab
        self.tr = Transport(window=args.window, mtu=args.mtu)
        self.shaped = args.mbit

    def sched(self, collective: str, placement: str, qps: int, strategy: str, size: int | None = None,
              iterations: int | None = None) -> Schedule:
        return schedule(Workload(collective, size or self.args.size, iterations or self.args.iterations,  # type: ignore[arg-type]
                                 warmup=1, qps=qps, strategy=strategy), place(self.model, placement, 4))  # type: ignore[arg-type]

    def case(self, key: str, label: str, sched: Schedule, name: str, mbit: float | None = None,
             tr: Transport | None = None, **kw: Any) -> Case:
        scheme(name)  # an unknown name fails here, before any lab time is spent
        return Case(key, label, sched, name, mbit or self.args.mbit, kw, tr)

    def at_rate(self, mbit: float) -> None:
        if mbit != self.shaped:
            shape(self.lab, LinkRate(mbit))
            self.shaped = mbit

    def one(self, c: Case, i: int) -> dict[str, Any]:
        self.at_rate(c.mbit)
        t0 = time.monotonic()
        try:
            fig = figures(job(self.lab, c.sched, scheme(c.scheme), c.tr or self.tr, timeout=self.args.timeout, **c.kw))
        except LabError as e:  # a rank failed or the run timed out: an incomplete run, the others still run
            fig = {"complete": False, "problems": [str(e)]}
        r = {**fig, "wall_s": round(time.monotonic() - t0, 1), "load1": round(os.getloadavg()[0], 2)}
        print(f"  {c.label} run {i + 1}: {r.get('time_ms', 0):.0f} ms (x{r.get('slowdown_wire') or 0:.2f} wire ideal), "
              f"run {r.get('run_ms') or 0:.0f} ms, {r.get('retransmits')} resent ({r.get('spurious')} spurious, "
              f"{r.get('assumed_bad')} ASSUMED_BAD, {r.get('undone')} undone), load {r['load1']}, "
              f"problems {r['problems']}", file=sys.stderr, flush=True)
        return r

    def group(self, cases: list[Case]) -> dict[str, Any]:
        """The cases in turns, --runs times; each case's summary and its ratios to the first."""
        runs: dict[str, list[dict[str, Any]]] = {c.key: [] for c in cases}
        try:
            for i in range(self.args.runs):
                for c in cases:
                    runs[c.key].append(self.one(c, i))
        finally:
            self.at_rate(self.args.mbit)
        out: dict[str, Any] = {"placement": list(cases[0].sched.placement.hosts)}
        for c in cases:
            out[c.key] = {"label": c.label, "scheme": c.scheme, "mbit": c.mbit, **summarize(runs[c.key])}
        base = out[cases[0].key]
        out["baseline"] = cases[0].key
        out["ratios"] = {c.key: ratios(out[c.key], base) for c in cases[1:]}
        return out


def calibration(b: Bench) -> Comparison:
    ring = b.sched("allreduce", "h0,h1,h4,h5", 2, "split")  # one flow out of and into each leaf per plane
    return Comparison("collision-free: within 10 % of the ideal; half the rate: twice the time",
                      {"rate": [b.case("full", "calibration at the rate", ring, "ecmp"),
                                b.case("half", "calibration at half the rate", ring, "ecmp", mbit=b.args.mbit / 2)]})


def ecmp_vs_eecmp(b: Bench) -> Comparison:
    groups = {}
    for label, sched in (("alltoall", b.sched("alltoall", "spread", 8, "split")),
                         ("allreduce", b.sched("allreduce", "spread", 8, "split"))):
        groups[label] = [b.case("ecmp", f"{label} ecmp", sched, "ecmp"),
                         b.case("eecmp", f"{label} eecmp", sched, "eecmp")]
    return Comparison("E-ECMP + QP scaling beats 5-tuple ECMP, AllReduce up to 40 % (Meta)", groups)


def rr_vs_split(b: Bench) -> Comparison:
    return Comparison("round-robin (each message whole on the next QP) beats splitting every message (Meta)",
                      {"allreduce": [b.case("split", "split", b.sched("allreduce", "spread", 4, "split"), "eecmp"),
                                     b.case("round_robin", "round robin",
                                            b.sched("allreduce", "spread", 4, "round_robin"), "eecmp")]})


def pinning(b: Bench) -> Comparison:
    uneven = b.sched("allreduce", "uneven", 2, "split")
    return Comparison("path pinning loses more than 30 % when one host of each leaf's pair is busy (Meta)",
                      {"placement": [b.case("pin_spread", "pin spread", b.sched("allreduce", "spread", 2, "split"), "pin"),
                                     b.case("pin_uneven", "pin uneven", uneven, "pin"),
                                     b.case("eecmp_uneven", "eecmp uneven", uneven, "eecmp")]},
                      also={"pin_over_eecmp_uneven": ("placement", "pin_uneven", "eecmp_uneven")})


def spine_freeze(b: Bench) -> Comparison:
    sched = b.sched("allreduce", "spread", 2, "split", iterations=b.args.fault_iterations)
    freeze = Fault("freeze", ("p0-t1-0",))
    groups = {name: [b.case("clean", f"{name} no fault", sched, name, controller=True),
                     b.case("fault", f"{name} spine frozen", sched, name, fault=freeze, fault_at=b.args.fault_at,
                            repair_at=b.args.repair_at, controller=True)]
              for name in b.args.freeze_schemes.split(",")}
    return Comparison("a T1 that stopped forwarding left job throughput largely unaffected (MRC)", groups,
                      {"fault": freeze.describe(), "fault_at_s": b.args.fault_at, "repair_at_s": b.args.repair_at})


def spray_vs_ethereal(b: Bench) -> Comparison:
    sched = b.sched("alltoall", "spread", 2, "split")
    dead = Fault("blackhole", ("p0-t0-0", "p0-t1-0"))
    groups = {}
    faults: tuple[tuple[str, dict[str, Any]], ...] = (("healthy", {}), ("dead link", {"fault": dead, "fault_at": 0.0}))
    for label, kw in faults:
        groups[label] = [b.case("host_spray", f"host-spray {label}", sched, "host-spray", **kw),
                         b.case("ethereal", f"ethereal {label}", sched, "ethereal", **kw)]
    return Comparison("Ethereal comes within a few % of ideal spraying; up to 30 % faster than spraying, also under "
                      "link failures (Ethereal)", groups, {"dead_link": dead.describe()})


def fixed_timers(b: Bench, sched: Schedule) -> Transport:
    """The EV timers as the runner set them before they were fitted to the link: the minimum RTO at the frame
    time of the windows a round trip queues behind (no hop, no ACK), the maximum four times that, 20 ms
    probes, 64 answered probes to come back, RACK's 5 ms window, no late-ACK undo."""
    ts = [Transfer.of(t) for t in sched.transfers]
    frame_ms = frame_bytes(b.tr, True) / LinkRate(b.args.mbit).bytes_per_s * 1e3
    floor = max(b.tr.min_rto_ms, round(queued_windows(ts, b.model.planes) * b.tr.window * frame_ms, 1))
    return dataclasses.replace(b.tr, timers="fixed", min_rto_ms=floor, max_rto_ms=max(b.tr.max_rto_ms, 4 * floor),
                               undo_spurious=False)


def ev_timers(b: Bench) -> Comparison:
    groups = {}
    for coll in ("alltoall", "allreduce"):
        sched = b.sched(coll, "spread", 2, "split")
        for name in ("host-spray", "ethereal"):
            fixed = fixed_timers(b, sched)
            groups[f"{coll} {name}"] = [
                b.case("fixed", f"{coll} {name}, timers fixed", sched, name, tr=fixed),
                b.case("fixed_undo", f"{coll} {name}, timers fixed, late-ACK undo", sched, name,
                       tr=dataclasses.replace(fixed, undo_spurious=True)),
                b.case("fitted", f"{coll} {name}, timers fitted", sched, name)]
    sched, dead = b.sched("alltoall", "spread", 2, "split"), Fault("blackhole", ("p0-t0-0", "p0-t1-0"))
    for name in ("host-spray", "ethereal"):  # losses that are real: the dead link's EVs must still go out
        groups[f"dead link {name}"] = [
            b.case("fixed", f"dead link {name}, timers fixed", sched, name, tr=fixed_timers(b, sched), fault=dead,
                   fault_at=0.0),
            b.case("fitted", f"dead link {name}, timers fitted", sched, name, fault=dead, fault_at=0.0)]
    return Comparison("queueing behind a shaped link is not taken for loss: fewer spurious resends, no EV mapped "
                      "out by one, the collective no slower", groups)


@dataclass(frozen=True)
class FaultSet(Fault):
    """Several faults as one, applied in order and reverted in reverse (a T1's every link end); a part
    that fails to apply reverts the parts already applied."""

    parts: tuple[Fault, ...] = ()

    def describe(self) -> str:
        return f"{self.kind} {' '.join(self.target)} ({'; '.join(p.describe() for p in self.parts)})"

    def apply(self, lab: Any) -> None:
        done: list[Fault] = []
        try:
            for p in self.parts:
                p.apply(lab)
                done.append(p)
        except BaseException:
            for p in reversed(done):
                p.revert(lab)
            raise

    def revert(self, lab: Any) -> None:
        for p in reversed(self.parts):
            p.revert(lab)


def paper_fault(name: str, kernel: bool, flap_ms: int = 250) -> Fault:
    """A scenario of the MRC paper as a collective's fault on the 2 x 2 x 2 x 4 lab. The T1 blackhole:
    every frame to and from p0-t1-0 dropped, carrier up (kernel: Lab.cut_link of each of its links, both
    ends; bmv2: the library's blackhole on each end); ValueError for a fault the data plane lacks."""
    leaves = ("p0-t0-0", "p0-t0-1")
    if name == "t1-blackhole":
        ends = [(t0, PAPER_T1) for t0 in leaves] if kernel else \
            [end for t0 in leaves for end in ((t0, PAPER_T1), (PAPER_T1, t0))]
        return FaultSet("t1-blackhole", (PAPER_T1,), parts=tuple(Fault("blackhole", e) for e in ends))
    if name == "nic-down":
        return Fault("host-nic-down", PAPER_NIC)
    if kernel:
        raise ValueError(f"the kernel lab's collective faults are a link blackhole and a NIC down, not {name}")
    if name == "ev-loss":
        return Fault("gray", PAPER_LINK, (("percent", 20),))
    if name == "t0-flap":
        return Fault("flap", PAPER_LINK, (("period_ms", flap_ms),))
    raise ValueError(f"unknown paper scenario '{name}' (known: {', '.join(PAPER_FAULTS)})")


def paper_scenarios(b: Bench) -> Comparison:
    kernel = getattr(b.args, "dataplane", "bmv2") == "kernel"
    sched = b.sched("allreduce", "spread", 2, "split", iterations=b.args.fault_iterations)
    names = [n for n in b.args.paper_faults.split(",") if n]
    faults = {n: paper_fault(n, kernel) for n in names}
    timing = {"fault_at": b.args.fault_at, "repair_at": b.args.repair_at}
    groups = {}
    for name in b.args.paper_schemes.split(","):
        if kernel and scheme(name).kernel:
            continue
        ctl = name == "leaf-spray"  # its only remedy; the hosts' schemes and E-ECMP run without one
        cases = [b.case("clean", f"{name} no fault", sched, name, controller=ctl)]
        cases += [b.case(f.replace("-", "_"), f"{name} {f}", sched, name, fault=fault, controller=ctl, **timing)
                  for f, fault in faults.items() if f != "nic-down" or SCHEMES[name].evs == "host"]
        groups[name] = cases
    return Comparison("MRC: a T1 that stops forwarding leaves throughput largely unaffected, a NIC down is remapped "
                      "in under 1 s, a flapping T0 costs about 25 % while it flaps and nothing after",
                      groups, {"faults": {n: f.describe() for n, f in faults.items()}, "fault_at_s": b.args.fault_at,
                               "repair_at_s": b.args.repair_at})


def plans(b: Bench, only: list[str], cases: list[str] | None, kernel: bool) -> dict[str, Comparison | str]:
    """Each chosen comparison with only the chosen groups (`cases`: group names; None: all), or why the
    kernel data plane lacks it; ValueError naming a group no chosen comparison has."""
    out: dict[str, Comparison | str] = {}
    seen: set[str] = set()
    for name in only:
        if kernel and name in KERNEL_LACKS:
            out[name] = f"the kernel data plane has no {KERNEL_LACKS[name]}"
            continue
        comp: Comparison = globals()[name](b)
        seen |= set(comp.groups)
        if cases is not None:
            comp.groups = {g: cs for g, cs in comp.groups.items() if g in cases}
        if comp.groups:
            out[name] = comp
    unknown = sorted(set(cases or ()) - seen)
    if unknown:
        raise ValueError(f"no comparison chosen has a case '{unknown[0]}' (they have: {', '.join(sorted(seen))})")
    return out


def dry_run(b: Bench, chosen: dict[str, Comparison | str], spines: int) -> dict[str, Any]:
    """What the invocation would run, with a generous wall-time budget (no lab)."""
    doc: dict[str, Any] = {"runs": b.args.runs, "comparisons": {}}
    total = 0.0
    for name, comp in chosen.items():
        if isinstance(comp, str):
            doc["comparisons"][name] = {"skipped": comp}
            continue
        doc["comparisons"][name] = {g: [c.plan(b.tr, spines) for c in cs] for g, cs in comp.groups.items()}
        total += b.args.runs * sum(c.budget_s(b.tr, spines) for cs in comp.groups.values() for c in cs)
    doc["budget_s"] = round(total, 1)
    return doc


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--mbit", type=float, default=1.0, help="link rate")
    ap.add_argument("--size", type=int, default=128 * 1024)
    ap.add_argument("--iterations", type=int, default=3)
    ap.add_argument("--fault-iterations", type=int, default=6)
    ap.add_argument("--fault-at", type=float, default=2.0)
    ap.add_argument("--repair-at", type=float, default=4.0)
    ap.add_argument("--freeze-schemes", default="leaf-spray,host-spray,eecmp", help="spine_freeze: these schemes")
    ap.add_argument("--paper-schemes", default="host-spray,leaf-spray,eecmp",
                    help="paper_scenarios: these schemes (kernel: those it carries)")
    ap.add_argument("--paper-faults", default="t1-blackhole,nic-down",
                    help=f"paper_scenarios: these faults, of {', '.join(PAPER_FAULTS)} (the last two bmv2 only)")
    ap.add_argument("--window", type=int, default=4)
    ap.add_argument("--mtu", type=int, default=1024)
    ap.add_argument("--timeout", type=float, default=120.0)
    ap.add_argument("--only", action="append", choices=COMPARISONS)
    ap.add_argument("--case", action="append", help="only this group of the chosen comparisons (repeatable): "
                    "alltoall, allreduce, rate, placement, healthy, 'dead link', a freeze scheme, or 'alltoall host-spray' "
                    "(ev_timers: alltoall, allreduce or dead link, then host-spray or ethereal)")
    ap.add_argument("--dataplane", choices=("bmv2", "kernel"), default="bmv2")
    ap.add_argument("--dry-run", action="store_true", help="print what would run and a time budget; no lab")
    ap.add_argument("--dir", default="/tmp/srv6-bench-collectives")
    ap.add_argument("--out", help="also write the JSON here")
    args = ap.parse_args()
    if args.runs < 1:
        ap.error("--runs must be at least 1")
    from mininet_labs.labstate import default_topology

    model = default_topology(2, 2, 2, 4, grpc_base_port=52001)
    kernel = args.dataplane == "kernel"
    b = Bench(model, args)
    try:
        chosen = plans(b, args.only or list(COMPARISONS), args.case, kernel)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    spines = len(model.t1s(0))
    if args.dry_run:
        print(json.dumps(dry_run(b, chosen, spines), indent=1))
        return 0
    from mininet_labs.lab import Lab

    if kernel:
        from mininet_labs.backends import nodes_for

        # endpoint mode's carriers pass a kernel leaf's SR boundary only when the topology says so at lab up
        lab: Any = Lab(dataclasses.replace(model, host_source_routing=True), args.dir,
                       nodes_for("kernel", name="benchcoll"))
    else:
        lab = Lab(model, args.dir, tag="bc")
    b.lab = lab
    doc: dict[str, Any] = {"bench": "collectives", "argv": sys.argv[1:],
                           "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                           "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
                           "load1_start": round(os.getloadavg()[0], 2), "dataplane": args.dataplane,
                           "lab": "2 planes x 2 spines x 2 leaves x 4 hosts", "link_mbit": args.mbit,
                           "size": args.size, "iterations": args.iterations, "runs": args.runs,
                           "transport": b.tr.to_json(), "comparisons": {}}
    t0 = time.monotonic()
    lab.up()
    try:
        shape(lab, LinkRate(args.mbit))
        for name, comp in chosen.items():
            if isinstance(comp, str):
                doc["comparisons"][name] = {"skipped": comp}
                continue
            print(f"{name}:", file=sys.stderr, flush=True)
            doc["comparisons"][name] = comp.results({g: b.group(cs) for g, cs in comp.groups.items()})
    finally:
        lab.down()
    doc["seconds"] = round(time.monotonic() - t0, 1)
    doc["load1_end"] = round(os.getloadavg()[0], 2)
    text = json.dumps(doc, indent=1)
    if args.out:
        Path(args.out).write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
