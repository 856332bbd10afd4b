"""One design's analysis as a JSON-ready dict: closed forms, Monte Carlo, job interruptions."""

from __future__ import annotations

import math
from dataclasses import dataclass

from controller.analysis import closed
from controller.analysis import montecarlo as mc
from controller.analysis.design import KIND_NAMES, KIND_PLURALS, KINDS, Design, DesignError, Kind, Rates
from controller.analysis.stats import Estimate

DEFAULT_KS = (1, 2, 4, 8, 16, 32)
# The any-pair Monte Carlo needs thousands of failures per sample on large fabrics and its check
# is quadratic in them (the MRC fabric: about 3,400 failures, minutes per sample): skipped above this.
MAX_ANY_PAIR_HOSTS = 8192
MAX_WORK = 2 * 10 ** 9  # samples x components touched: beyond this a run would take hours


@dataclass(frozen=True)
class Settings:
    """What the user asked for (fabricctl analyze's options)."""

    rates: Rates
    gpus: int | None  # job size; None: every host
    samples: int = 400
    seed: int = 1
    failures: tuple[int, ...] | None = None  # k for the P(cut after k failures) curve; None: DEFAULT_KS that fit
    kind: Kind | None = None  # None: kinds mixed by rate
    repair_events: int = 20_000
    engine: str = "fast"  # or "controller"


def job_size(d: Design, s: Settings) -> int:
    n = d.hosts if s.gpus is None else s.gpus
    if not 2 <= n <= d.hosts:
        raise DesignError(f"--gpus {n} does not fit design {d.name}: between 2 and its {d.hosts} hosts")
    return n


def _pool(d: Design, s: Settings) -> int:
    return sum(d.count(k) for k in KINDS) if s.kind is None else d.count(s.kind)


def failure_counts(d: Design, s: Settings) -> tuple[int, ...]:
    """The curve's failure counts: the ones asked for, or the default ones the design has components for."""
    return s.failures if s.failures is not None else tuple(k for k in DEFAULT_KS if k <= _pool(d, s))


def check(d: Design, s: Settings) -> None:
    """DesignError for a run that cannot be done (sizes, k beyond the components, engine limits)."""
    job_size(d, s)
    pool = _pool(d, s)
    ks = failure_counts(d, s)
    for k in ks:
        if not 0 <= k <= pool:
            raise DesignError(f"--failures {k} is more than the {pool} "
                              f"{KIND_PLURALS[s.kind] if s.kind else 'components'} of design {d.name}")
    if s.kind is not None and s.rates.of(s.kind) <= 0:
        raise DesignError(f"--kind {s.kind} with a zero {KIND_NAMES[s.kind]} rate")
    if s.engine == "controller" and d.switches > 512:
        raise DesignError(f"--engine controller builds the controller's fabric for every sample: at most 512 "
                          f"switches, design {d.name} has {d.switches} (use --engine fast, proven equal in tests)")
    work = s.samples * (len(ks) + 2) * max(ks, default=1) * d.hosts_per_t0
    if work > MAX_WORK:
        raise DesignError(f"{s.samples} samples of up to {max(ks, default=1)} failures on design {d.name} is too much "
                          "work; lower --samples or --failures")


def _est(e: Estimate | None) -> dict[str, float | int] | None:
    return None if e is None else e.to_json()


def _finite(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(x) else x


def units(s: Settings) -> int:
    """Progress ticks one analysis takes (for the progress bar)."""
    return s.samples * (len(DEFAULT_KS if s.failures is None else s.failures) + 2) + s.repair_events


def analyze(d: Design, s: Settings, tick: mc.Tick | None = None) -> dict[str, object]:
    """Everything `fabricctl analyze` reports about one design."""
    check(d, s)
    gpus, r, ks = job_size(d, s), s.rates, failure_counts(d, s)
    q = closed.unavailabilities(r)
    a, b = closed.given_pair(d)
    same = d.column(a) == d.column(b)
    cut = mc.controller_cut(d) if s.engine == "controller" else mc.fast_cut
    job = range(gpus)
    worst = closed.worst_case(d)
    pair_rate = closed.pair_interruption_rate(d, r)
    job_rate = closed.job_interruption_rate(d, gpus, r)
    curve_job = mc.p_cut_after(d, job, ks, s.samples, s.seed, rates=r, kind=s.kind, cut=cut, tick=tick)
    curve_pair = mc.p_cut_after(d, (a, b), ks, s.samples, s.seed + 1, rates=r, kind=s.kind, cut=cut)
    first = mc.first_cut(d, job, s.samples, s.seed + 2, rates=r, kind=s.kind, cut=cut, tick=tick)
    first_any = mc.first_cut(d, range(d.hosts), s.samples, s.seed + 3, rates=r, kind=s.kind, cut=cut, tick=tick) \
        if (s.engine == "fast" and d.hosts <= MAX_ANY_PAIR_HOSTS) or d.hosts <= 64 else None
    repaired = mc.with_repair(d, job, r, seed=s.seed + 4, max_events=s.repair_events, cut=cut, tick=tick) \
        if s.repair_events else None
    return {
        "design": {"name": d.name, "spec": d.spec, "planes": d.planes, "t1_per_plane": d.t1, "t0_per_plane": d.t0,
                   "hosts_per_t0": d.hosts_per_t0, "gpus": d.hosts, "switches": d.switches,
                   "links": d.count("link"), "nic_ports": d.count("nic")},
        "rates": {k: {"per_hour": r.of(k), "mtbf_hours": _finite(1 / r.of(k)) if r.of(k) else None,
                      "unavailability": q[k]} for k in KINDS} | {"mttr_hours": r.mttr},
        "worst_case": {k: {"cut_by": n, "endured": None if n is None else n - 1} for k, n in worst.items()},
        "pair": {
            "hosts": [f"h{a}", f"h{b}"], "same_t0": same,
            "p_cut_one_plane": 1 - closed.plane_up(d, q, same),
            "p_cut_every_plane": closed.pair_cut(d, q, same),
            "expected_failures_to_cut": {k: closed.expected_failures_to_cut_pair(d, k) for k in KINDS},
            "expected_own_failures_to_cut": {k: closed.expected_own_failures_to_cut_pair(d, k) for k in KINDS},
            "mean_hours_to_cut_no_repair": closed.pair_survival_time(d, r),
            "interruptions_per_hour": pair_rate,
            "mtbi_hours": _finite(1 / pair_rate) if pair_rate > 0 else None,
        },
        "capacity": {"uplink_lost": closed.uplink_capacity_lost(q), "host_lost": closed.host_capacity_lost(q)},
        "any_pair": {
            "expected_nic_failures_to_cut": closed.expected_nic_failures_any_pair(d),
            "mc_failures_to_cut": _est(first_any.failures if first_any else None),
            "mc_skipped": None if first_any else f"more than {MAX_ANY_PAIR_HOSTS} hosts (or the controller engine)",
        },
        "job": {
            "gpus": gpus, "t0s": len(closed.job_columns(d, gpus)),
            "no_repair": {"hours_to_interruption": _est(first.hours),
                          "own_failures_to_interruption": _est(first.failures)},
            "with_repair": {
                "interruptions_per_hour": job_rate, "mtbi_hours": _finite(1 / job_rate) if job_rate > 0 else None,
                "leading_order_note": ("NIC port and T0 cut sets of order planes"
                                       + ("; T1s and links also form such cut sets here (t1 = 1): a lower bound"
                                          if d.t1 == 1 and d.t0 > 1 else "")),
                "mc": None if repaired is None else {
                    "interruptions": repaired.interruptions, "hours": repaired.hours, "events": repaired.events,
                    "per_hour": repaired.rate.to_json()},
            },
        },
        "curve": {"failures": list(ks), "kind": s.kind or "mix",
                  "p_job_cut": [e.to_json() for e in curve_job], "p_pair_cut": [e.to_json() for e in curve_pair],
                  "p_pair_cut_closed": [closed.pair_cut_after(d, s.kind, k) for k in ks] if s.kind else None},
        "survival_hours": sorted(first.samples_hours),
    }
