"""A collective job on a lab, measured: the schedule run under a scheme (run.py), its timeline turned into
the workload's records and receipts (controller.workload.delivery), and the job-level figures
(controller.workload.metrics) against two ideals:

- `ideal`: the workload's (payload bytes at the link rate, perfect split: controller.workload.ideal);
- `ideal_wire`: the same at the payload share of the link this transport leaves, every data frame's headers
  and the per-packet ACK frame coming back counted (what the lab's links can do at best for this transport).

    rep = job(lab, sched, scheme("eecmp"), Transport(), fault=Fault("freeze", ("p0-t1-0",)), fault_at=2.0)
    print("\\n".join(table([rep])))
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from controller.workload import Rates, Receipt, Record, Schedule, check_delivery, check_dependencies, ideal_time
from controller.workload import metrics as wm
from endpoint.collective.layout import Layout
from endpoint.collective.rank import Transport
from endpoint.collective.run import CollectiveRun, Fault, frame_bytes, run
from endpoint.collective.schemes import Scheme
from endpoint.collective.shift import moves
from endpoint.timers import ACK_FRAME, CARRIER
from mininet_labs.lab import Lab
from mininet_labs.shaping import LinkRate, current, fabric_link_bytes

def records(r: CollectiveRun) -> list[Record]:
    """One record per transfer that started and arrived whole: start (sender) and end (receiver), seconds."""
    out = []
    for t in r.timeline():
        if t["start_ns"] is not None and t["end_ns"] is not None:
            out.append(Record(t["id"], t["start_ns"] / 1e9, t["end_ns"] / 1e9, t["retransmitted"]))
    return out


def receipts(r: CollectiveRun, sched: Schedule) -> list[Receipt]:
    """What each rank's transport delivered (first copies), as the workload's receipts: one per run of
    consecutive packets, one not intact per packet whose bytes did not match, one per stray packet."""
    rank = {x.host: x.rank for x in sched.placement.ranks}
    layout = Layout(r.transfers, r.transport.mtu)
    out = []
    for host, doc in r.ranks.items():
        for x in doc["recvs"]:
            p = layout.pieces[x["id"]]
            for a, b in x["segments"]:
                nbytes = sum(p.data_len(seq) for seq in range(a, b))
                out.append(Receipt(x["id"], (a - p.lo) * p.mtu, nbytes, rank[host]))
            out += [Receipt(x["id"], 0, 0, rank[host], intact=False)] * x["bad"]
        out += [Receipt(-1, 0, 0, rank[host])] * doc.get("stray", 0)
    return out


def wire_share(tr: Transport, carrier: bool) -> float:
    """The payload's share of a link carrying data frames one way and their ACKs the other way."""
    extra = CARRIER if carrier else 0
    return tr.mtu / (frame_bytes(tr, carrier) + ACK_FRAME + extra)


@dataclass
class JobReport:
    """One run of a job under one scheme: its figures, checks and events (to_json for --json)."""

    scheme: Scheme
    sched: Schedule
    run: CollectiveRun
    metrics: wm.RunMetrics | None
    rate: LinkRate | None
    ideal: float | None
    ideal_wire: float | None
    link_loads: dict[str, int]
    problems: list[str]
    hits: list[wm.StepHit] = field(default_factory=list)

    @property
    def slowdown_wire(self) -> float | None:
        return self.metrics.time_median / self.ideal_wire if self.metrics and self.ideal_wire else None

    def iteration_busbw(self) -> list[tuple[float, float]]:
        """(end of the iteration, s after the start; its busbw, bytes/s) for every iteration."""
        return [(i.end, i.busbw) for i in self.metrics.iterations] if self.metrics else []

    def nic_moves(self) -> list[dict[str, Any]]:
        """The QPs moved to another NIC of their host (shift.moves), times in s after the start."""
        return moves(self.run.ranks, self.run.started_ns)

    def events_s(self) -> list[tuple[float, str]]:
        return [((e["t_ns"] - self.run.started_ns) / 1e9, e["what"]) for e in self.run.events]

    def to_json(self) -> dict[str, Any]:
        w = self.sched.workload
        return {"scheme": self.scheme.name, "what": self.scheme.what, "program": self.scheme.program,
                "collective": w.collective, "size": w.size, "ranks": list(self.sched.placement.hosts),
                "iterations": w.iterations, "warmup": w.warmup, "qps": w.qps, "strategy": w.strategy,
                "link_rate_mbit": self.rate.mbit if self.rate else None, "transport": self.run.transport.to_json(),
                "metrics": self.metrics.to_json() if self.metrics else None, "ideal_s": self.ideal,
                "ideal_wire_s": self.ideal_wire, "slowdown_wire": self.slowdown_wire,
                "link_bytes": self.link_loads, "link_max_over_mean": wm.link_balance(self.link_loads),
                "problems": self.problems, "events": [{"t_s": round(t, 4), "what": w_} for t, w_ in self.events_s()],
                "fault_hits": [dataclasses.asdict(h) for h in self.hits],
                "nic_failover": self.run.transport.nic_failover, "nic_moves": self.nic_moves(),
                "retransmitted": sum(t["retransmitted"] for t in self.run.timeline()), "dir": str(self.run.dir)}


def job(lab: Lab, sched: Schedule, s: Scheme, transport: Transport | None = None, **kwargs: Any) -> JobReport:
    """Run the schedule under scheme `s` (run.run's keyword arguments: fault, fault_at, repair_at, timeout,
    controller, progress) and measure it."""
    before = fabric_link_bytes(lab)
    r = run(lab, sched.transfers, s, transport, **kwargs)
    after = fabric_link_bytes(lab)
    loads = {k: after[k] - before.get(k, 0) for k in after}
    return measure(lab, sched, r, loads)


def measure(lab: Lab, sched: Schedule, r: CollectiveRun, loads: dict[str, int]) -> JobReport:
    rate = current(lab.dir)
    recs = records(r)
    problems = r.problems() + check_dependencies(sched, recs) + check_delivery(sched, receipts(r, sched))
    ideal = ideal_wire = None
    if rate is not None:
        spines = len(lab.model.t1s(0))
        bps = rate.mbit * 1e6
        ideal = ideal_time(sched.workload, sched.placement, spines, Rates(bps, bps))
        share = wire_share(r.transport, r.scheme.evs == "host")
        ideal_wire = ideal_time(sched.workload, sched.placement, spines, Rates(bps * share, bps * share))
    m = None
    hits: list[wm.StepHit] = []
    if len(recs) == len(sched.transfers):
        m = wm.run(sched, recs, ideal=ideal, link_loads=loads or None)
        faults = [e for e in r.events if e["what"].startswith("fault")]
        repairs = [e for e in r.events if e["what"].startswith("repair")]
        if faults:
            start = (faults[0]["t_ns"] - r.started_ns) / 1e9
            end = (repairs[0]["t_ns"] - r.started_ns) / 1e9 if repairs else None
            hits = wm.fault_hits(sched, recs, start, end)
    return JobReport(r.scheme, sched, r, m, rate, ideal, ideal_wire, loads, problems, hits)


def table(reports: list[JobReport]) -> list[str]:
    """A line per run: completion time (median / p99 / max), busbw, slowdowns, balance, resends, checks."""
    if not reports:
        return []
    w = reports[0].sched.workload
    rate = reports[0].rate
    lines = [f"{w.collective} of {w.size} bytes over {reports[0].sched.ranks} ranks "
             f"({', '.join(reports[0].sched.placement.hosts)}), {w.iterations} iterations after {w.warmup} warm-up, "
             f"{w.qps} QPs per connection ({w.strategy}); links {rate.mbit if rate else 'unshaped'} Mbit/s",
             f"  {'scheme':<11} {'time ms (med/p99/max)':>24} {'busbw MB/s':>10} {'x ideal':>8} {'x wire':>7} "
             f"{'link max/mean':>13} {'resent':>6}  checks"]
    for rep in reports:
        m = rep.metrics
        if m is None:
            lines.append(f"  {rep.scheme.name:<11} incomplete: {rep.problems[0] if rep.problems else 'no records'}")
            continue
        times = f"{m.time_median * 1e3:.0f} / {m.time_p99 * 1e3:.0f} / {m.time_max * 1e3:.0f}"
        bal = wm.link_balance(rep.link_loads)
        lines.append(f"  {rep.scheme.name:<11} {times:>24} {m.busbw / 1e6:>10.3f} "
                     f"{_x(m.slowdown):>8} {_x(rep.slowdown_wire):>7} {_x(bal):>13} {m.retransmits:>6}  "
                     f"{'ok' if not rep.problems else rep.problems[0]}")
        for t, what in rep.events_s():
            lines.append(f"  {'':<11} {t:7.3f} s  {what}")
        for mv in rep.nic_moves():
            lines.append(f"  {'':<11} {mv['t_s']:7.3f} s  {mv['rank']} QP {mv['qp']:#x} to {mv['dst']} moved from NIC "
                         f"plane {mv['from_plane']} to {mv['to_plane']} ({mv['why']}): {len(mv['wrs'])} WRs, "
                         f"{len(mv['resent'])} packets sent again")
        for h in rep.hits:
            lines.append(f"  {'':<11} hit: iteration {h.iteration} step {h.step}: {h.duration * 1e3:.0f} ms"
                         + (f" (x{h.stretch:.2f} the same step unhurt)" if h.stretch else ""))
    return lines


def _x(v: float | None) -> str:
    return "-" if v is None else f"{v:.3f}"


def png(reports: list[JobReport], path: str | Path) -> Path:
    """Per-iteration bus bandwidth over time, one line per scheme, the fault and the repair marked."""
    from controller.plotting import pyplot

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(10, 4.2))
    marked = set()
    for rep in reports:
        pts = rep.iteration_busbw()
        ax.plot([t for t, _ in pts], [b / 1e6 for _, b in pts], marker="o", markersize=3, linewidth=1,
                label=rep.scheme.name)
        for t, what in rep.events_s():
            if what not in marked:
                marked.add(what)
                ax.axvline(t, color="grey", linestyle="--", linewidth=0.8)
                ax.annotate(what, (t, 0), rotation=90, va="bottom", ha="right", fontsize=7)
    w = reports[0].sched.workload if reports else None
    ax.set_xlabel("seconds after the start (each point: an iteration's end)")
    ax.set_ylabel("bus bandwidth, MB/s")
    if w is not None:
        ax.set_title(f"{w.collective}, {w.size} bytes, {reports[0].sched.ranks} ranks", fontsize=10)
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=8)
    fig.tight_layout()
    out = Path(path)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
