"""Seeded Monte Carlo over failure sets: P(cut) after k failures, failures and time to the first cut,
interruptions with repair; reachability from Down.job_cut or the controller (ControllerReach)."""

from __future__ import annotations

import heapq
import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from controller.analysis.design import KINDS, Design, DesignError, Kind, Rates
from controller.analysis.reach import ControllerReach, Down
from controller.analysis.stats import Estimate, mean, poisson_rate, wilson

Tick = Callable[[int], None]
Cut = Callable[[Down, Sequence[int]], bool]


def fast_cut(down: Down, hosts: Sequence[int]) -> bool:
    return down.job_cut(hosts)


def controller_cut(design: Design) -> Cut:
    """Job reachability through the controller's failover code (slow: for checks and small designs)."""
    reach = ControllerReach(design)
    return lambda down, hosts: bool(reach.cut_pairs(down, hosts))


@dataclass
class Universe:
    """The components a set of hosts depends on (their NIC ports, their T0s, every T1, their T0s'
    uplinks), numbered per kind; `glob` maps a local number to the fabric-wide index Down.add takes."""

    design: Design
    hosts: Sequence[int]
    columns: list[int] = field(init=False)
    sizes: dict[str, int] = field(init=False)

    def __post_init__(self) -> None:
        d = self.design
        self.columns = sorted({d.column(h) for h in self.hosts})
        c = len(self.columns)
        self.sizes = {"nic": d.planes * len(self.hosts), "t0": d.planes * c, "t1": d.planes * d.t1,
                      "link": d.planes * c * d.t1}

    def glob(self, kind: Kind, m: int) -> int:
        d = self.design
        if kind == "nic":
            p, x = divmod(m, len(self.hosts))
            return p * d.hosts + self.hosts[x]
        if kind == "t0":
            p, x = divmod(m, len(self.columns))
            return p * d.t0 + self.columns[x]
        if kind == "t1":
            return m
        p, rest = divmod(m, len(self.columns) * d.t1)
        x, j = divmod(rest, d.t1)
        return p * d.t0 * d.t1 + self.columns[x] * d.t1 + j


def everything(design: Design) -> Universe:
    return Universe(design, range(design.hosts))


class Process:
    """Components failing one after another with no repair: the next is a T0 link, T1, T0 or NIC
    port with probability proportional to (its kind's rate x how many are still up), then uniform
    among those (competing exponential clocks); `kind` alone: uniform among that kind."""

    def __init__(self, u: Universe, rng: random.Random, rates: Rates | None = None, kind: Kind | None = None) -> None:
        self.u, self.rng = u, rng
        self.weights = {k: (1.0 if k == kind else 0.0) if kind else (rates or Rates()).of(k) for k in KINDS}
        self.down: dict[str, set[int]] = {k: set() for k in KINDS}

    def total(self) -> float:
        return sum(self.weights[k] * (self.u.sizes[k] - len(self.down[k])) for k in KINDS)

    def next(self) -> tuple[Kind, int, float] | None:
        """(kind, fabric-wide index, exponential waiting time) of the next failure; None when all are down."""
        total = self.total()
        if total <= 0:
            return None
        x = self.rng.random() * total
        for k in KINDS:
            w = self.weights[k] * (self.u.sizes[k] - len(self.down[k]))
            if x < w or (w > 0 and k == KINDS[-1]):
                break
            x -= w
        else:  # rounding: the last kind with weight
            k = [k for k in KINDS if self.weights[k] * (self.u.sizes[k] - len(self.down[k])) > 0][-1]
        n, gone = self.u.sizes[k], self.down[k]
        if len(gone) * 2 < n:
            while (m := self.rng.randrange(n)) in gone:
                pass
        else:
            m = self.rng.choice([i for i in range(n) if i not in gone])
        gone.add(m)
        return k, self.u.glob(k, m), self.rng.expovariate(total)


def random_down(u: Universe, rng: random.Random, k: int, rates: Rates | None = None, kind: Kind | None = None) -> Down:
    """k distinct failed components, drawn as the Process would (uniform within a kind)."""
    proc, down = Process(u, rng, rates, kind), Down(u.design)
    for _ in range(k):
        step = proc.next()
        if step is None:
            break
        down.add(step[0], step[1])
    return down


def independent_down(u: Universe, rng: random.Random, q: dict[str, float]) -> Down:
    """Each component down independently with its kind's probability q (geometric skips: the cost
    is the number of failures, not of components)."""
    down = Down(u.design)
    for k in KINDS:
        p = q[k]
        if p <= 0:
            continue
        n, m = u.sizes[k], -1
        if p >= 1:
            for m in range(n):
                down.add(k, u.glob(k, m))
            continue
        log1p = math.log1p(-p)
        while True:
            m += 1 + int(math.log(1.0 - rng.random()) / log1p)
            if m >= n:
                break
            down.add(k, u.glob(k, m))
    return down


# --- estimators ------------------------------------------------------------------------------

def _ticker(tick: Tick | None) -> Tick:
    return tick if tick is not None else (lambda n: None)


def p_cut_after(design: Design, hosts: Sequence[int], ks: Sequence[int], samples: int, seed: int, *,
                rates: Rates | None = None, kind: Kind | None = None, cut: Cut = fast_cut,
                tick: Tick | None = None) -> list[Estimate]:
    """For each k, P(some pair of `hosts` is cut by k random failures), Wilson 95%."""
    rng, u, tick = random.Random(seed), Universe(design, hosts), _ticker(tick)
    out = []
    for k in ks:
        hits = 0
        for _ in range(samples):
            hits += cut(random_down(u, rng, k, rates, kind), hosts)
            tick(1)
        out.append(wilson(hits, samples))
    return out


def p_cut_independent(design: Design, hosts: Sequence[int], q: dict[str, float], samples: int, seed: int, *,
                      cut: Cut = fast_cut, tick: Tick | None = None) -> Estimate:
    """P(some pair of `hosts` is cut) with each component down independently (q per kind)."""
    rng, u, tick = random.Random(seed), Universe(design, hosts), _ticker(tick)
    hits = 0
    for _ in range(samples):
        hits += cut(independent_down(u, rng, q), hosts)
        tick(1)
    return wilson(hits, samples)


@dataclass(frozen=True)
class FirstCut:
    """Failures (count) and hours until the first cut of `hosts`, with no repair."""

    failures: Estimate
    hours: Estimate
    samples_failures: list[int]
    samples_hours: list[float]


def first_cut(design: Design, hosts: Sequence[int], samples: int, seed: int, *, rates: Rates | None = None,
              kind: Kind | None = None, cut: Cut = fast_cut, tick: Tick | None = None) -> FirstCut:
    """Run the no-repair Process until some pair of `hosts` is cut, `samples` times. Failures only
    accumulate, so a cut stays cut: the first cut prefix is found by doubling then bisection
    (about 2 log2(K) reachability checks instead of K)."""
    rng, u, tick = random.Random(seed), Universe(design, hosts), _ticker(tick)
    counts: list[int] = []
    hours: list[float] = []
    for _ in range(samples):
        proc = Process(u, rng, rates, kind)
        seq: list[tuple[Kind, int, float]] = []

        def cut_after(m: int) -> bool:
            while len(seq) < m:
                step = proc.next()
                if step is None:
                    return False
                seq.append(step)
            down = Down(design)
            for k, index, _ in seq[:m]:
                down.add(k, index)
            return cut(down, hosts)

        lo, hi = 0, 1
        while not cut_after(hi):
            if len(seq) < hi:
                raise DesignError("these failures never cut the hosts apart (zero rates?)")
            lo, hi = hi, hi * 2
        while hi - lo > 1:  # cut after hi, not after lo
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if cut_after(mid) else (mid, hi)
        counts.append(hi)
        hours.append(math.fsum(dt for _, _, dt in seq[:hi]))
        tick(1)
    return FirstCut(mean(counts), mean(hours), counts, hours)


@dataclass(frozen=True)
class Repaired:
    """Interruptions of `hosts` while components fail and come back after MTTR."""

    interruptions: int
    hours: float
    events: int
    rate: Estimate  # per hour, Garwood 95%


def with_repair(design: Design, hosts: Sequence[int], rates: Rates, *, seed: int, max_events: int,
                max_hours: float = math.inf, cut: Cut = fast_cut, tick: Tick | None = None) -> Repaired:
    """Event-driven: exponential failures at each kind's rate among the up components, each repaired
    MTTR hours later; an interruption is a change from no pair of `hosts` cut to some pair cut."""
    rng, u, tick = random.Random(seed), Universe(design, hosts), _ticker(tick)
    down = Down(design)
    gone: dict[Kind, set[int]] = {k: set() for k in KINDS}
    repairs: list[tuple[float, Kind, int, int]] = []
    t, events, interruptions, was_cut = 0.0, 0, 0, False
    step = max(1, max_events // 100)
    while events < max_events and t < max_hours:
        total = sum(rates.of(k) * (u.sizes[k] - len(gone[k])) for k in KINDS)
        t_fail = t + rng.expovariate(total) if total > 0 else math.inf
        if repairs and repairs[0][0] <= t_fail:
            t, k, m, g = heapq.heappop(repairs)
            gone[k].discard(m)
            down.remove(k, g)
        elif t_fail == math.inf:
            break
        else:
            t = t_fail
            x = rng.random() * total
            for k in KINDS:
                w = rates.of(k) * (u.sizes[k] - len(gone[k]))
                if x < w:
                    break
                x -= w
            n = u.sizes[k]
            while (m := rng.randrange(n)) in gone[k]:
                pass
            gone[k].add(m)
            g = u.glob(k, m)
            down.add(k, g)
            heapq.heappush(repairs, (t + rates.mttr, k, m, g))
        now_cut = cut(down, hosts)
        interruptions += now_cut and not was_cut
        was_cut = now_cut
        events += 1
        if events % step == 0:
            tick(step)
    hours = min(t, max_hours) if t > 0 else 1e-9
    return Repaired(interruptions, hours, events, poisson_rate(interruptions, hours))
