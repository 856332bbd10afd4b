"""Closed forms: P(a host pair is cut), capacity lost, failures endured (worst case and expected),
and interruption rates with repair. The derivations and their sources are in docs/analysis.md."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from controller.analysis.design import KINDS, Design, Kind, Rates

Probs = Mapping[Kind, float]  # kind -> probability that one component of that kind is down


def given_pair(d: Design) -> tuple[int, int]:
    """The host pair the pair figures are about: host 0 and the first host of the last T0
    (on different T0s whenever the design has two)."""
    return 0, (d.t0 - 1) * d.hosts_per_t0 if d.t0 > 1 else 1


def _spine_term(d: Design, q: Probs, ql_a: float, ql_b: float, q1: float, forced: float | None = None) -> float:
    """P(some T1 path of a plane is live) for two distinct T0s; `forced` replaces one T1 path's
    live probability (a component of that path pinned up or down)."""
    s = (1 - q1) * (1 - ql_a) * (1 - ql_b)
    if forced is None:
        return 1 - (1 - s) ** d.t1
    return 1 - (1 - forced) * (1 - s) ** (d.t1 - 1)


def plane_up(d: Design, q: Probs, same_t0: bool = False) -> float:
    """P(a host pair has a live path in one plane), components down independently with q."""
    qn, q0 = q["nic"], q["t0"]
    if same_t0:
        return (1 - qn) ** 2 * (1 - q0)
    return (1 - qn) ** 2 * (1 - q0) ** 2 * _spine_term(d, q, q["link"], q["link"], q["t1"])


def pair_cut(d: Design, q: Probs, same_t0: bool = False) -> float:
    """P(a host pair has no live path in any plane): the planes are disjoint, so (1 - U)^planes."""
    return (1 - plane_up(d, q, same_t0)) ** d.planes


def uplink_capacity_lost(q: Probs) -> float:
    """Expected fraction of T0-T1 capacity lost: a link carries traffic iff it and both its switches are up."""
    return 1 - (1 - q["link"]) * (1 - q["t1"]) * (1 - q["t0"])


def host_capacity_lost(q: Probs) -> float:
    """Expected fraction of host NIC capacity lost (a NIC port works iff it and its T0 are up)."""
    return 1 - (1 - q["nic"]) * (1 - q["t0"])


def worst_case(d: Design) -> dict[str, int | None]:
    """Per kind, the fewest failures of that kind that cut some host pair off (None: no number of
    them can); a design endures one fewer with certainty. 'any': failures of any kinds mixed."""
    cross = d.t0 > 1  # T1s and links matter only between hosts of different T0s
    return {"link": d.planes * d.t1 if cross else None, "t1": d.planes * d.t1 if cross else None,
            "t0": d.planes, "nic": d.planes, "any": d.planes}


# --- expected failures to the first cut --------------------------------------------------------

def _either(e: int) -> list[int]:
    """Coefficients of (2x + x^2)^e = x^e (2 + x)^e: e independent "one of two down" conditions."""
    return [0] * e + [math.comb(e, i) * 2 ** (e - i) for i in range(e + 1)]


def _all(e: int) -> list[int]:
    """Coefficients of x^e: all e components down."""
    return [0] * e + [1]


@dataclass(frozen=True)
class PairStructure:
    """The components of one kind that a given pair depends on: r of the kind's n, and
    g[m] = how many of the C(r, m) sets of m of them cut the pair."""

    n: int
    r: int
    g: list[int]


def pair_structure(d: Design, kind: Kind) -> PairStructure | None:
    """None when no number of failures of this kind cuts the given pair."""
    a, b = given_pair(d)
    same = d.column(a) == d.column(b)
    n = d.count(kind)
    if kind == "nic":  # per plane, one of the pair's two NIC ports
        return PairStructure(n, 2 * d.planes, _either(d.planes))
    if kind == "t0":  # per plane, one of its two T0s (the one T0, on a shared T0)
        return PairStructure(n, d.planes, _all(d.planes)) if same else PairStructure(n, 2 * d.planes, _either(d.planes))
    if same:
        return None
    if kind == "t1":  # every T1 of every plane
        return PairStructure(n, d.planes * d.t1, _all(d.planes * d.t1))
    return PairStructure(n, 2 * d.planes * d.t1, _either(d.planes * d.t1))  # per T1 path, one of two uplinks


def _share(g: int, r: int, m: int) -> float:
    """g / C(r, m) as a float, through logs (both can be far beyond a float)."""
    return 0.0 if g == 0 else math.exp(math.log(g) - math.log(math.comb(r, m)))


def expected_own_failures_to_cut_pair(d: Design, kind: Kind) -> float | None:
    """E[M]: how many of the given pair's own components of a kind (its NIC ports, T0s, every T1,
    its T0s' uplinks) are down when it is cut, failing in uniformly random order."""
    st = pair_structure(d, kind)
    if st is None:
        return None
    return sum(1 - _share(st.g[m], st.r, m) for m in range(st.r))


def expected_failures_to_cut_pair(d: Design, kind: Kind) -> float | None:
    """E[number of failures of one kind, in uniformly random order without repair, until the given
    pair is cut]. With M the number of the pair's r components down at the cut,
    E[M] = sum_{m<r} (1 - g_m / C(r, m)); the M-th of r marked items in a random order of n sits
    on average at M (n + 1) / (r + 1), so E[K] = E[M] (n + 1) / (r + 1)."""
    e_m = expected_own_failures_to_cut_pair(d, kind)
    st = pair_structure(d, kind)
    if e_m is None or st is None:
        return None
    return e_m * (st.n + 1) / (st.r + 1)


def pair_cut_after(d: Design, kind: Kind, k: int) -> float | None:
    """P(the given pair is cut after k uniformly random failures of one kind):
    sum_m P(m of the pair's r components are among the k) g_m / C(r, m) (hypergeometric)."""
    st = pair_structure(d, kind)
    if st is None:
        return None
    total = math.comb(st.n, k)
    return sum(math.exp(math.log(math.comb(st.r, m)) + math.log(math.comb(st.n - st.r, k - m)) - math.log(total))
               * _share(st.g[m], st.r, m) for m in range(min(k, st.r) + 1) if st.g[m] and k - m <= st.n - st.r)


def expected_nic_failures_any_pair(d: Design) -> float | None:
    """E[NIC port failures until some pair of the whole fabric is cut], for 1 or 2 planes: one plane,
    the first; two planes, the first failure in each plane (all ports down in one plane cut
    nothing else): 1 + 2H / (H + 1) for H hosts. None for more planes (Monte Carlo)."""
    if d.planes == 1:
        return 1.0
    if d.planes == 2:
        h = d.hosts
        return 1 + 2 * h / (h + 1)
    return None


def pair_survival_time(d: Design, rates: Rates, *, points: int = 4000) -> float:
    """E[time until the given pair is cut] with no repair, every component failing after an
    exponential time: the integral over t of 1 - pair_cut(q(t)), q = 1 - exp(-rate t)
    (trapezoid rule on a log grid; the integrand is smooth and monotone)."""
    a, b = given_pair(d)
    same = d.column(a) == d.column(b)
    total = sum(rates.of(k) for k in KINDS)
    if total <= 0:
        return math.inf
    lo, hi = 1e-6 / total, 1e4 * d.planes * max(d.t1, 1) / min(r for k in KINDS if (r := rates.of(k)) > 0)

    def surv(t: float) -> float:
        q = {k: -math.expm1(-rates.of(k) * t) for k in KINDS}
        return 1 - pair_cut(d, q, same)

    ts = [lo * (hi / lo) ** (i / points) for i in range(points + 1)]
    area = lo * surv(lo)
    for t0_, t1_ in zip(ts, ts[1:]):
        area += (surv(t0_) + surv(t1_)) / 2 * (t1_ - t0_)
    return area


# --- interruption rates with repair -----------------------------------------------------------

def unavailabilities(rates: Rates) -> dict[Kind, float]:
    return {k: rates.unavailability(k) for k in KINDS}


def pair_interruption_rate(d: Design, rates: Rates) -> float:
    """Steady-state rate (per hour) at which the given pair goes from connected to cut, with every
    component alternating up (exponential, its rate) and down (repair, MTTR). Exact for
    independent components: sum over components of rate (1 - q) [P(cut | it is down) - P(cut | it is up)]
    (the system failure frequency, Barlow and Proschan; docs/analysis.md)."""
    q = unavailabilities(rates)
    a, b = given_pair(d)
    same = d.column(a) == d.column(b)
    others = (1 - plane_up(d, q, same)) ** (d.planes - 1)
    qn, q0, q1, ql = q["nic"], q["t0"], q["t1"], q["link"]
    spine = 1.0 if same else _spine_term(d, q, ql, ql, q1)
    ends_nic = (1 - qn) * (1 - q0) ** (1 if same else 2) * spine  # U with one end's NIC pinned up
    ends_t0 = ((1 - qn) ** 2 if same else (1 - qn) ** 2 * (1 - q0) * spine)
    rate = 2 * d.planes * rates.nic * (1 - qn) * ends_nic * others  # P(cut|down) - P(cut|up) = U(up) * others
    rate += (1 if same else 2) * d.planes * rates.t0 * (1 - q0) * ends_t0 * others
    if not same:
        ends = (1 - qn) ** 2 * (1 - q0) ** 2
        # a T1 path pinned down leaves the other t1 - 1; pinned up, it is live
        pinned: tuple[tuple[Kind, float], ...] = (("t1", (1 - ql) ** 2), ("link", (1 - q1) * (1 - ql)))
        for kind, up_path in pinned:
            down = 1 - ends * _spine_term(d, q, ql, ql, q1, forced=0.0)
            upc = 1 - ends * _spine_term(d, q, ql, ql, q1, forced=up_path)
            count = d.planes * d.t1 * (2 if kind == "link" else 1)
            rate += count * rates.of(kind) * (1 - q[kind]) * (down - upc) * others
    return rate


def job_columns(d: Design, gpus: int) -> list[int]:
    """Hosts of a job of `gpus` GPUs on each T0 it uses (packed from host 0)."""
    full, rest = divmod(gpus, d.hosts_per_t0)
    return [d.hosts_per_t0] * full + ([rest] if rest else [])


def job_cut_sets(d: Design, gpus: int, alpha: int) -> int:
    """How many sets of one component per plane, `alpha` of them NIC ports of the job's hosts and
    the rest T0s of its columns, cut some pair of the job (the minimal cut sets of order `planes`
    made of NIC ports and T0s; docs/analysis.md derives the count)."""
    cols = job_columns(d, gpus)
    n, lj, beta = gpus, len(cols), d.planes - alpha
    if alpha == 0:
        return lj + math.comb(lj, 2) * (2 ** beta - 2)
    one = n * (1 + (lj - 1) * (2 ** beta - 1))
    if alpha < 2:
        return one
    same = sum(math.comb(c, 2) for c in cols)
    return one + (2 ** alpha - 2) * (same + (math.comb(n, 2) - same) * 2 ** beta)


def job_cut_probability_leading(d: Design, gpus: int, q: Probs) -> float:
    """Leading term of P(job cut) for small q: the sum over those cut sets of the product of their q."""
    p = d.planes
    return sum(math.comb(p, a) * q["nic"] ** a * q["t0"] ** (p - a) * job_cut_sets(d, gpus, a)
               for a in range(p + 1))


def job_interruption_rate(d: Design, gpus: int, rates: Rates) -> float:
    """Rare-event rate (per hour) of a job's interruptions with repair: each minimal cut set C is
    all down with probability prod(q) and leaves that state at rate |C| / MTTR, so the rate is
    sum_C prod(q) |C| / MTTR over the order-`planes` cut sets of NIC ports and T0s (cut sets of
    T1s and links have at least t1 per plane members: of higher order when t1 > 1)."""
    q = unavailabilities(rates)
    return job_cut_probability_leading(d, gpus, q) * d.planes / rates.mttr
