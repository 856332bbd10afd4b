"""A collective at fabric scale, scheme by scheme: predicted completion time, slowdown against the ideal,
bus bandwidth, link balance, and the same under random failures over many draws (fabricctl analyze collective)."""

from __future__ import annotations

import resource
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from controller.analysis.design import Design
from controller.analysis.fabricload import MAX_PARTS, SCHEME_NAMES, SCHEMES, SPORT_RULES, Fabric, Failed, LoadError, \
    Scheme, draw, iteration, per_qp, variants, with_hash_key, with_sports
from controller.workload import NAMES, CollectiveError, Placement, PlacementError, Rates, Workload, bus_factor, grid, \
    ideal_time

Tick = Callable[[int], None]
FAILURE_KINDS = ("link", "t1")


@dataclass(frozen=True)
class Settings:
    """What to analyze: the fabric (design and rates), the job (workload, placement, ranks) and which
    schemes, with `failures` random failures of `kind` over `draws` draws (seeded)."""

    design: Design
    workload: Workload
    placement: str = "packed"
    ranks: int | None = None  # default: every host the placement can hold
    schemes: tuple[Scheme, ...] = SCHEMES
    failures: int = 0
    kind: str = "link"
    draws: int = 20
    seed: int = 1
    host_bps: float = 100e9
    link_bps: float = 100e9
    sport_rule: str = "qp"  # fabricload.lab_sport: how a part's UDP source port follows its QP and plane
    hash_key: int | None = None  # ecmp/eecmp hash: None, bmv2's crc32; else a random hash with this key (Linux's)
    dead_links: tuple[tuple[int, int, int], ...] = ()  # (plane, leaf, spine) links down from the start, both ways

    def base_failed(self) -> Failed:
        """The fabric with `dead_links` down (the healthy fabric without any)."""
        f = Failed.healthy(self.fabric())
        for p, leaf, spine in self.dead_links:
            f.alive[p, leaf, spine] = False
        return f

    def sport_text(self) -> str:
        w = self.workload
        if w.sport is not None:
            return str(w.sport)
        return {"qp": "per QP", "ev": "per plane (the lab's leaf EV)", "qp-crc": "per QP (crc32, the lab's kernel)"}[
            self.sport_rule]

    def fabric(self) -> Fabric:
        d = self.design
        return Fabric(d.planes, d.t1, d.t0, d.hosts_per_t0, self.host_bps, self.link_bps)


@dataclass
class SchemeResult:
    """One scheme's figures (times in seconds, bandwidth in bytes per second)."""

    scheme: str
    time: float
    slowdown: float
    busbw: float
    link_max_over_mean: float | None
    seconds: float
    failed_slowdowns: list[float] = field(default_factory=list)
    link_loads: np.ndarray | None = field(default=None, repr=False)  # bytes per leaf-spine link of the job's leaves

    def failure_summary(self) -> dict[str, Any] | None:
        if not self.failed_slowdowns:
            return None
        s = self.failed_slowdowns
        finite = [x for x in s if np.isfinite(x)]
        whole = len(finite) == len(s)
        return {"draws": len(s), "cut": len(s) - len(finite),
                "median": _finite(statistics.median(s)),
                "p99": _finite(float(np.percentile(s, 99))) if whole else None,
                "max": _finite(max(s))}

    def to_json(self) -> dict[str, Any]:
        return {"scheme": self.scheme, "name": SCHEME_NAMES[self.scheme], "time_s": _finite(self.time),
                "slowdown": _finite(self.slowdown), "busbw_GBps": _finite(self.busbw / 1e9),
                "link_max_over_mean": self.link_max_over_mean,
                "compute_s": round(self.seconds, 3), "failures": self.failure_summary()}


@dataclass
class Result:
    settings: Settings
    placement: Placement
    ideal: float
    schemes: list[SchemeResult]
    peak_rss_mb: float = 0.0

    def to_json(self) -> dict[str, Any]:
        s, w = self.settings, self.settings.workload
        return {"design": s.design.spec, "collective": w.collective, "name": NAMES[w.collective], "ranks": self.placement.size,
                "placement": s.placement, "size": w.size, "qps": w.qps, "strategy": w.strategy,
                "sport": s.sport_text() if w.sport is None else w.sport,
                "hash": "crc32 (bmv2)" if s.hash_key is None else f"random, key {s.hash_key}",
                "dead_links": [list(x) for x in s.dead_links], "host_gbps": s.host_bps / 1e9,
                "link_gbps": s.link_bps / 1e9, "ideal_s": self.ideal,
                "failures": {"count": s.failures, "kind": s.kind, "draws": s.draws, "seed": s.seed} if s.failures else None,
                "peak_rss_mb": round(self.peak_rss_mb, 1), "schemes": [r.to_json() for r in self.schemes]}


def place(settings: Settings) -> Placement:
    d = settings.design
    room = {"packed": d.hosts, "spread": d.hosts, "uneven": d.t0 * ((d.hosts_per_t0 + 1) // 2)}
    given = [h for h in settings.placement.split(",") if h.strip()]
    n = settings.ranks if settings.ranks is not None else room.get(settings.placement, len(given))
    return grid(d.planes, d.t0, d.hosts_per_t0, settings.placement, n)


def check(settings: Settings) -> Placement:
    """The placement, or LoadError with one line on anything the analysis cannot take."""
    if settings.sport_rule not in SPORT_RULES:
        raise LoadError(f"UDP source port rule {settings.sport_rule!r} is not one of {', '.join(SPORT_RULES)}")
    if settings.sport_rule != "qp" and settings.workload.sport is not None:
        raise LoadError(f"a fixed UDP source port ({settings.workload.sport}) and the port rule "
                        f"{settings.sport_rule!r} exclude each other")
    d = settings.design
    for plane, leaf, spine in settings.dead_links:
        if not (0 <= plane < d.planes and 0 <= leaf < d.t0 and 0 <= spine < d.t1):
            raise LoadError(f"dead link plane {plane}, leaf {leaf}, spine {spine} is not a leaf-spine link of "
                            f"{d.spec} (planes 0..{d.planes - 1}, leaves 0..{d.t0 - 1}, spines 0..{d.t1 - 1})")
    if settings.kind not in FAILURE_KINDS:
        raise LoadError(f"failure kind {settings.kind!r} is not one of {', '.join(FAILURE_KINDS)}")
    for s in settings.schemes:
        if s not in SCHEMES:
            raise LoadError(f"scheme {s!r} is not one of {', '.join(SCHEMES)}")
    if not (settings.host_bps > 0 and settings.link_bps > 0):
        raise LoadError("link rates must be above 0")
    try:
        p = place(settings)
        variants(settings.workload, Placement(p.ranks[:2], p.planes), settings.fabric(), False)
        flows = _widest(settings.workload, p.size)
        qps = settings.workload.qps if settings.workload.strategy == "split" else 1
        if flows * qps > MAX_PARTS:
            raise LoadError(f"one step of this job is {flows * qps:,} QP parts, more than the {MAX_PARTS:,} the analysis "
                            "holds in memory (about 4 GB); fewer ranks (--ranks) or QPs")
    except (CollectiveError, PlacementError) as e:
        raise LoadError(str(e)) from None
    d = settings.design
    room = d.planes * d.t1 * (len(set(p.leaves)) if settings.kind == "link" else 1)
    if settings.failures > room:
        what = "leaf-spine links of the job's leaves" if settings.kind == "link" else "T1 switches"
        raise LoadError(f"--failures {settings.failures} is more than the {room} {what}")
    return p


def _widest(w: Workload, n: int) -> int:
    """Flows in the collective's widest step, without building it."""
    return n * (n - 1) if w.collective == "alltoall" else n


def units(settings: Settings) -> int:
    """Progress units: one per scheme and per scheme and failure draw."""
    return len(settings.schemes) * (1 + (settings.draws if settings.failures else 0))


def analyze(settings: Settings, tick: Tick = lambda n: None) -> Result:
    placement = check(settings)
    fab = settings.fabric()
    w = settings.workload
    try:
        ideal = ideal_time(w, placement, fab.spines, Rates(fab.host_bps, fab.link_bps))
        cache = {q: variants(w, placement, fab, q) for q in {per_qp(s) for s in settings.schemes}}
        if settings.sport_rule != "qp" and w.sport is None:
            cache = {q: with_sports(vs, settings.sport_rule) for q, vs in cache.items()}
        if settings.hash_key is not None:
            cache = {q: with_hash_key(vs, settings.hash_key) for q, vs in cache.items()}
    except CollectiveError as e:
        raise LoadError(str(e)) from None
    leaves = np.unique(np.asarray(placement.leaves))
    out: list[SchemeResult] = []
    for scheme in settings.schemes:
        t0 = time.perf_counter()
        vs = cache[per_qp(scheme)]
        base = settings.base_failed()
        it = iteration(vs, scheme, fab, base)
        tick(1)
        loads = np.concatenate([it.loads.up[leaves].ravel(), it.loads.down[leaves].ravel()])
        mean = float(loads.mean()) if loads.size else 0.0
        res = SchemeResult(scheme, it.time, it.time / ideal, w.size / it.time * bus_factor(w.collective, placement.size),
                           float(loads.max()) / mean if mean > 0 else None, 0.0, link_loads=loads)
        rng = np.random.default_rng(settings.seed)  # the same draws for every scheme, one at a time in memory
        for _ in range(settings.draws if settings.failures else 0):
            failed = draw(fab, rng, settings.kind, settings.failures, leaves)
            failed.alive &= base.alive
            res.failed_slowdowns.append(iteration(vs, scheme, fab, failed).time / ideal)
            tick(1)
        res.seconds = time.perf_counter() - t0
        out.append(res)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return Result(settings, placement, ideal, out, rss)


def render(result: Result) -> str:
    """The human table."""
    s, w = result.settings, result.settings.workload
    lines = [f"{NAMES[w.collective]} of {w.size:,} B over {result.placement.size:,} ranks ({s.placement}) on "
             f"{s.design.spec} (planes x T1 x T0 x hosts), {s.host_bps / 1e9:g} Gb/s host ports, "
             f"{s.link_bps / 1e9:g} Gb/s leaf-spine links",
             f"QPs per connection: {w.qps} ({w.strategy}), UDP source port "
             f"{s.sport_text()}; ECMP hash {'crc32 (bmv2)' if s.hash_key is None else f'random, key {s.hash_key}'}; ideal (perfect split): {_fmt_t(result.ideal)}"]
    if s.dead_links:
        lines.append("dead from the start (plane, leaf, spine): " + ", ".join(f"{p},{a},{j}" for p, a, j in s.dead_links))
    head = f"  {'scheme':<22} {'time':>10} {'slowdown':>9} {'busbw GB/s':>11} {'link max/mean':>14}"
    if s.failures:
        head += f"   {s.failures} {s.kind} failures x {s.draws}: {'median':>7} {'p99':>7} {'max':>7} {'cut':>4}"
    lines.append(head)
    for r in result.schemes:
        bal = "-" if r.link_max_over_mean is None else f"{r.link_max_over_mean:.2f}"
        row = (f"  {SCHEME_NAMES[r.scheme]:<22} {_fmt_t(r.time):>10} {r.slowdown:>9.3f} {r.busbw / 1e9:>11.2f} "
               f"{bal:>14}")
        f = r.failure_summary()
        if f is not None:
            row += " " * (len(f"   {s.failures} {s.kind} failures x {s.draws}:")) + \
                f" {_num(f['median']):>7} {_num(f['p99']):>7} {_num(f['max']):>7} {f['cut']:>4}"
        lines.append(row)
    lines.append(f"slowdown: predicted time over the ideal; under failures, against the healthy fabric's ideal; "
                 f"peak memory {result.peak_rss_mb:.0f} MB")
    return "\n".join(lines)


def _finite(x: float) -> float | None:
    """A number for JSON: None for infinity (a cut: some flow had no path)."""
    return float(x) if np.isfinite(x) else None


def _fmt_t(t: float) -> str:
    if not np.isfinite(t):
        return "cut"
    return f"{t * 1e3:.3f} ms" if t < 1 else f"{t:.3f} s"


def _num(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


def plot(result: Result, path: Any) -> Any:
    """A PNG: slowdown per scheme (healthy, and the failure draws' median and max), and the per-link
    load histogram of each scheme (leaf-spine links of the job's leaves)."""
    from controller.plotting import pyplot

    plt = pyplot()
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 4.8))
    names = [SCHEME_NAMES[r.scheme] for r in result.schemes]
    x = np.arange(len(names))
    ax1.bar(x - 0.2, [r.slowdown for r in result.schemes], 0.4, label="healthy")
    if result.settings.failures:
        med = [(r.failure_summary() or {}).get("median") or np.nan for r in result.schemes]
        top = [(r.failure_summary() or {}).get("max") or np.nan for r in result.schemes]
        ax1.bar(x + 0.2, med, 0.4, label=f"{result.settings.failures} {result.settings.kind} failures (median)")
        ax1.scatter(x + 0.2, top, marker="v", color="k", label="max over draws", zorder=3)
    ax1.axhline(1.0, color="grey", lw=0.8, ls="--")
    ax1.set_xticks(x, names, rotation=25, ha="right")
    ax1.set_ylabel("completion time / ideal")
    ax1.legend(fontsize=8)
    for r in result.schemes:
        if r.link_loads is not None and r.link_loads.size:
            mean = r.link_loads.mean() or 1.0
            ax2.hist(r.link_loads / mean, bins=40, histtype="step", label=SCHEME_NAMES[r.scheme])
    ax2.set_xlabel("link load / mean link load (leaf-spine links of the job's leaves)")
    ax2.set_ylabel("links")
    ax2.set_yscale("log")
    ax2.legend(fontsize=8)
    s = result.settings
    fig.suptitle(f"{NAMES[s.workload.collective]}, {result.placement.size} ranks ({s.placement}), {s.design.spec}, "
                 f"{s.workload.qps} QPs {s.workload.strategy}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def parse_schemes(text: str) -> tuple[Scheme, ...]:
    names = tuple(s.strip() for s in text.split(",") if s.strip())
    bad = [n for n in names if n not in SCHEMES]
    if bad or not names:
        raise LoadError(f"--schemes {text!r}: give some of {', '.join(SCHEMES)}")
    return names  # type: ignore[return-value]


def parse_size(text: str) -> int:
    """'1M', '256K', '1G', '4096' (binary multiples) -> bytes."""
    s = text.strip().upper().removesuffix("B")
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(s[-1:], 1)
    try:
        value = float(s[:-1] if s[-1:] in "KMG" else s) * mult
    except ValueError:
        raise LoadError(f"size {text!r} is not a byte count like 4096, 256K, 1M or 1G") from None
    if not 1 <= value <= 1 << 40 or value != int(value):
        raise LoadError(f"size {text!r} must be a whole number of bytes from 1 to 1T")
    return int(value)


def parse_rate_gbps(text: str, what: str) -> float:
    try:
        v = float(text.strip().lower().removesuffix("g"))
    except ValueError:
        raise LoadError(f"{what} {text!r} is not a rate in Gb/s (e.g. 100 or 400g)") from None
    if not 0 < v <= 1e6:
        raise LoadError(f"{what} must be above 0 and at most 1e6 Gb/s, got {text}")
    return v * 1e9


def parse_link(text: str) -> tuple[int, int, int]:
    """'0,1,0' -> (plane 0, leaf 1, spine 0)."""
    parts = text.split(",")
    if len(parts) != 3 or not all(p.strip().isdigit() for p in parts):
        raise LoadError(f"--dead-link {text!r}: give PLANE,LEAF,SPINE, e.g. 0,0,0")
    p, leaf, spine = (int(x) for x in parts)
    return p, leaf, spine
