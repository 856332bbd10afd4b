"""Job-level metrics of a collective run, from its timeline (one `Record` per transfer).

Definitions (docs/collectives.md, "Definitions"):
- an iteration's completion time: its last transfer's end minus its first transfer's start;
- median / p99 / max over the measured iterations (warm-up left out); p99 interpolates linearly between
  order statistics (numpy's default percentile): p = (n-1) q / 100, value = v[floor p] + frac(p) (v[ceil p] - v[floor p]);
- algbw = size / time and busbw = algbw x bus_factor, as nccl-tests defines them (doc/PERFORMANCE.md:
  2(n-1)/n for AllReduce; (n-1)/n for AllGather, ReduceScatter and all-to-all), in bytes per second; the
  run's figures are those of the median time;
- slowdown = time / ideal, the ideal being the time the links allow with a perfect split (workload.ideal);
- link balance: the busiest link's bytes over the mean of the links' bytes;
- under a fault: a step is hit when it runs while the fault is on; its stretch is its duration over the
  median duration of the same step in the iterations no fault touched; throughput over time spreads each
  transfer's bytes evenly over its [start, end] and sums them per time bin.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from controller.workload.delivery import Record
from controller.workload.schedule import Schedule


class MetricsError(ValueError):
    """A timeline the metrics cannot be computed from (one line)."""


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile by linear interpolation between order statistics (numpy.percentile's default)."""
    if not values:
        raise MetricsError("no values to take a percentile of")
    v = sorted(values)
    p = (len(v) - 1) * q / 100
    lo, hi = math.floor(p), math.ceil(p)
    return v[lo] + (p - lo) * (v[hi] - v[lo])


@dataclass(frozen=True)
class Iteration:
    """One iteration's figures (times in seconds, bandwidths in bytes per second)."""

    iteration: int
    warmup: bool
    start: float
    end: float
    time: float
    algbw: float
    busbw: float
    retransmits: int
    slowdown: float | None


@dataclass(frozen=True)
class RunMetrics:
    """A run's figures over its measured iterations."""

    collective: str
    ranks: int
    size: int
    time_median: float
    time_p99: float
    time_max: float
    algbw: float
    busbw: float
    slowdown: float | None
    ideal: float | None
    retransmits: int
    link_max_over_mean: float | None
    iterations: tuple[Iteration, ...]

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _by_transfer(sched: Schedule, records: Iterable[Record]) -> dict[int, Record]:
    at = {r.transfer: r for r in records}
    missing = [t.id for t in sched.transfers if t.id not in at]
    if missing:
        raise MetricsError(f"{len(missing)} transfers have no record (first: transfer {missing[0]})")
    return at


def iterations(sched: Schedule, records: Iterable[Record], ideal: float | None = None) -> list[Iteration]:
    """Every iteration's figures, warm-up included (flagged)."""
    at = _by_transfer(sched, records)
    w = sched.workload
    out: list[Iteration] = []
    for it in range(sched.iterations):
        recs = [at[t.id] for s in range(sched.steps) for t in sched.step_transfers(it, s)]
        start, end = min(r.start for r in recs), max(r.end for r in recs)
        time = end - start
        algbw = w.size / time if time > 0 else math.inf
        out.append(Iteration(it, it < w.warmup, start, end, time, algbw, algbw * sched.bus_factor,
                             sum(r.retransmits for r in recs), time / ideal if ideal else None))
    return out


def link_balance(loads: Mapping[Any, float]) -> float | None:
    """The busiest link's load over the mean load of the links given (None: no load at all)."""
    vals = list(loads.values())
    mean = statistics.fmean(vals) if vals else 0.0
    return max(vals) / mean if mean > 0 else None


def run(sched: Schedule, records: Iterable[Record], ideal: float | None = None,
        link_loads: Mapping[Any, float] | None = None) -> RunMetrics:
    """The run's figures (module docstring); `ideal`: the ideal completion time of one iteration
    (workload.ideal.ideal_time), `link_loads`: bytes per link, for the balance figure."""
    its = iterations(sched, records, ideal)
    measured = [i for i in its if not i.warmup]
    times = [i.time for i in measured]
    med = statistics.median(times)
    algbw = sched.workload.size / med if med > 0 else math.inf
    return RunMetrics(sched.workload.collective, sched.ranks, sched.workload.size, med, percentile(times, 99),
                      max(times), algbw, algbw * sched.bus_factor, med / ideal if ideal else None, ideal,
                      sum(i.retransmits for i in its), link_balance(link_loads) if link_loads else None, tuple(its))


@dataclass(frozen=True)
class StepHit:
    """A step that ran while the fault was on: its duration against the same step's median duration in
    the iterations the fault did not touch."""

    iteration: int
    step: int
    start: float
    end: float
    duration: float
    baseline: float | None
    stretch: float | None


def step_spans(sched: Schedule, records: Iterable[Record]) -> dict[tuple[int, int], tuple[float, float]]:
    """(iteration, step) -> (first start, last end) of its transfers."""
    at = _by_transfer(sched, records)
    out: dict[tuple[int, int], tuple[float, float]] = {}
    for it in range(sched.iterations):
        for s in range(sched.steps):
            recs = [at[t.id] for t in sched.step_transfers(it, s)]
            out[it, s] = (min(r.start for r in recs), max(r.end for r in recs))
    return out


def fault_hits(sched: Schedule, records: Iterable[Record], fault_start: float,
               fault_end: float | None = None) -> list[StepHit]:
    """The steps running while a fault was on (overlapping (fault_start, fault_end); no end: to the end of the run)."""
    spans = step_spans(sched, records)
    stop = math.inf if fault_end is None else fault_end
    hit_its = {it for (it, _), (a, b) in spans.items() if a < stop and b > fault_start}
    out: list[StepHit] = []
    for (it, s), (a, b) in sorted(spans.items()):
        if not (a < stop and b > fault_start):
            continue
        clean = [e - f for (i2, s2), (f, e) in spans.items() if s2 == s and i2 not in hit_its and i2 >= sched.workload.warmup]
        base = statistics.median(clean) if clean else None
        out.append(StepHit(it, s, a, b, b - a, base, (b - a) / base if base else None))
    return out


def throughput(sched: Schedule, records: Iterable[Record], bin_s: float) -> list[tuple[float, float]]:
    """(bin start, bytes per second) over the run: each transfer's bytes spread evenly over [start, end]."""
    if not bin_s > 0:
        raise MetricsError(f"the time bin must be above 0 s, got {bin_s}")
    at = _by_transfer(sched, records)
    t0 = min(r.start for r in at.values())
    t1 = max(r.end for r in at.values())
    bins = [0.0] * max(1, math.ceil((t1 - t0) / bin_s))
    for t in sched.transfers:
        r = at[t.id]
        a, b = r.start - t0, r.end - t0
        if b <= a:
            bins[min(int(a / bin_s), len(bins) - 1)] += t.bytes
            continue
        rate = t.bytes / (b - a)
        k = int(a / bin_s)
        while k < len(bins) and k * bin_s < b:
            lo, hi = max(a, k * bin_s), min(b, (k + 1) * bin_s)
            bins[k] += rate * max(0.0, hi - lo)
            k += 1
    return [(t0 + k * bin_s, v / bin_s) for k, v in enumerate(bins)]
