"""Confidence intervals: Wilson for proportions, Student-free normal for means, Garwood for Poisson counts."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from statistics import NormalDist

Z95 = 1.959963984540054


@dataclass(frozen=True)
class Estimate:
    """A Monte Carlo estimate with its confidence interval (95% unless said otherwise)."""

    value: float
    lo: float
    hi: float
    n: int

    def to_json(self) -> dict[str, float | int]:
        return {"value": self.value, "lo": self.lo, "hi": self.hi, "samples": self.n}

    def contains(self, x: float) -> bool:
        return self.lo <= x <= self.hi


def wilson(k: int, n: int, z: float = Z95) -> Estimate:
    """The Wilson score interval of k successes in n trials (Wilson 1927)."""
    if n <= 0:
        raise ValueError("no samples")
    p = k / n
    den = 1 + z * z / n
    mid = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    lo = 0.0 if k == 0 else max(0.0, mid - half)
    hi = 1.0 if k == n else min(1.0, mid + half)
    return Estimate(p, lo, hi, n)


def mean(values: Sequence[float], z: float = Z95) -> Estimate:
    """The sample mean with a normal-approximation interval (fine for the hundreds of samples used)."""
    n = len(values)
    if n == 0:
        raise ValueError("no samples")
    m = math.fsum(values) / n
    if n == 1:
        return Estimate(m, -math.inf, math.inf, 1)
    var = math.fsum((v - m) ** 2 for v in values) / (n - 1)
    half = z * math.sqrt(var / n)
    return Estimate(m, m - half, m + half, n)


def _poisson_cdf(k: int, mu: float) -> float:
    if mu == 0:
        return 1.0
    term = math.exp(-mu)
    total = term
    for i in range(1, k + 1):
        term *= mu / i
        total += term
    return min(1.0, total)


def poisson_rate(k: int, exposure: float, conf: float = 0.95) -> Estimate:
    """k events in `exposure` (hours): the rate with Garwood's exact interval (bisection on the
    Poisson CDF); a normal interval above 100 events."""
    if exposure <= 0:
        raise ValueError("no exposure")
    a = (1 - conf) / 2
    if k > 100:  # the normal approximation (and exp(-mu) would underflow in the direct sum)
        half = NormalDist().inv_cdf(1 - a) * math.sqrt(k)
        return Estimate(k / exposure, (k - half) / exposure, (k + half) / exposure, k)

    def solve(f: Callable[[float], bool], lo: float, hi: float) -> float:
        for _ in range(100):
            mid = (lo + hi) / 2
            if f(mid):
                hi = mid
            else:
                lo = mid
        return (lo + hi) / 2

    top = k + 10 * math.sqrt(k + 1) + 10
    upper = solve(lambda mu: _poisson_cdf(k, mu) <= a, 0.0, top)
    lower = 0.0 if k == 0 else solve(lambda mu: 1 - _poisson_cdf(k - 1, mu) >= a, 0.0, top)
    return Estimate(k / exposure, lower / exposure, upper / exposure, k)
