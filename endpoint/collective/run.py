"""A collective on a running lab (bmv2 or kernel): the scheme installed, one rank process per host, a
fault injected mid-run if asked, the ranks' timelines read back.

    result = run(lab, transfers, scheme("eecmp"), Transport(), fault=Fault("freeze", ["p0-t1-0"]), fault_at=1.0)
    result.timeline()      # per transfer: start (sender), end (receiver has it all), bytes, retransmissions
    result.problems()      # [] when every byte arrived exactly once where it should and no step started early

`transfers` are controller.workload's (or layout.Transfer). Times in the timeline are monotonic ns; the
metrics (controller.workload.metrics) turn them into completion times and bandwidths.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from controller.files.atomic import write_atomic
from controller.plan.evs import LEAF_CHOICE, ev_id
from endpoint.collective.layout import Layout, Transfer
from endpoint.collective.rank import FORMAT, Transport
from endpoint.collective.schemes import Scheme, on_kernel
from endpoint.lab import export_evs
from endpoint.timers import data_frame_bytes
from mininet_labs.lab import Lab, LabError
from mininet_labs.processes import stop_all, with_repo_path
from mininet_labs.shaping import LinkRate, current


@dataclass(frozen=True)
class Fault:
    """A fault from the lab's fault library (mininet_labs.faults: kind, target, parameters); on the kernel
    lab a 'blackhole' of a T0-T1 link is Lab.cut_link (both directions), and 'host-nic-down HOST PLANE' is
    the library's (the host's NIC down in its namespace: its leaf port loses carrier)."""

    kind: str
    target: tuple[str, ...]
    params: tuple[tuple[str, Any], ...] = ()

    def describe(self) -> str:
        extra = "".join(f" {k}={v}" for k, v in self.params)
        return f"{self.kind} {' '.join(self.target)}{extra}"

    def apply(self, lab: Lab) -> None:
        if _kernel(lab) and self.kind != "host-nic-down":
            if self.kind != "blackhole" or len(self.target) != 2:
                raise LabError(f"on the kernel lab a collective's fault is 'blackhole T0 T1' or 'host-nic-down HOST "
                               f"PLANE', not {self.describe()}")
            lab.cut_link(*self.target)
            return
        from mininet_labs import faults

        try:
            faults.inject(lab, self.kind, list(self.target), **dict(self.params))
        except faults.FaultError as e:
            raise LabError(str(e)) from None

    def revert(self, lab: Lab) -> None:
        if _kernel(lab) and self.kind != "host-nic-down":
            lab.mend_link(*self.target)
            return
        from mininet_labs import faults

        try:
            faults.undo(lab, self.kind, list(self.target))
        except faults.FaultError as e:
            raise LabError(str(e)) from None


def _kernel(lab: Lab) -> bool:
    return getattr(lab, "dataplane", "bmv2") == "kernel"


@dataclass
class CollectiveRun:
    """What the ranks recorded: their timelines (layout.RankProgress.to_json and the transport's counters)."""

    scheme: Scheme
    transport: Transport
    transfers: list[Transfer]
    ranks: dict[str, dict[str, Any]]
    started_ns: int
    events: list[dict[str, Any]] = field(default_factory=list)  # {"what", "t_ns"}: the fault, its repair
    dir: Path | None = None

    def timeline(self) -> list[dict[str, Any]]:
        """Per transfer: start (the sender released it), end (the receiver had every packet), the sender's
        last ACK, bytes, packets sent and resent; times in ns after the common start."""
        sends = {s["id"]: s for r in self.ranks.values() for s in r["sends"]}
        recvs = {x["id"]: x for r in self.ranks.values() for x in r["recvs"]}
        out = []
        for t in self.transfers:
            s, x = sends.get(t.id, {}), recvs.get(t.id, {})

            def rel(v: int | None) -> int | None:
                return None if v is None else v - self.started_ns

            out.append({**t.to_json(), "start_ns": rel(s.get("start_ns")), "end_ns": rel(x.get("end_ns")),
                        "acked_ns": rel(s.get("end_ns")), "packets": s.get("packets"), "sent": s.get("sent", 0),
                        "retransmitted": s.get("retransmitted", 0), "data_bytes": x.get("data_bytes", 0),
                        "duplicates": x.get("duplicates", 0), "bad": x.get("bad", 0)})
        return out

    def problems(self) -> list[str]:
        """Where a byte did not arrive exactly once at the rank that should have it, or a transfer started
        before one it depends on completed at its rank (empty: none)."""
        out = []
        done: dict[tuple[str, int], int] = {}
        for host, r in self.ranks.items():
            for s in r["sends"]:
                if s["end_ns"] is not None:
                    done[host, s["id"]] = s["end_ns"]
            for x in r["recvs"]:
                if x["end_ns"] is not None:
                    done[host, x["id"]] = x["end_ns"]
                if x["data_bytes"] != x["bytes"] or x["received"] != x["packets"]:
                    out.append(f"transfer {x['id']} {x['src']} -> {host}: {x['data_bytes']} of {x['bytes']} bytes "
                               f"({x['received']} of {x['packets']} packets)")
                if x["bad"]:
                    out.append(f"transfer {x['id']} {x['src']} -> {host}: {x['bad']} packets with wrong data")
            if r.get("stray"):
                out.append(f"{host} got {r['stray']} data packets of no transfer to it")
        by_id = {t.id: t for t in self.transfers}
        for host, r in self.ranks.items():
            for s in r["sends"]:
                if s["start_ns"] is None:
                    out.append(f"transfer {s['id']} {host} -> {s['dst']} never started")
                    continue
                for a in by_id[s["id"]].after:
                    if (host, a) not in done or done[host, a] > s["start_ns"]:
                        out.append(f"transfer {s['id']} {host} -> {s['dst']} started before transfer {a} completed "
                                   f"at {host}")
        return out

    def to_json(self) -> dict[str, Any]:
        return {"scheme": self.scheme.name, "transport": self.transport.to_json(), "started_ns": self.started_ns,
                "events": [{**e, "t_ns": e["t_ns"] - self.started_ns} for e in self.events],
                "timeline": self.timeline(),
                "ranks": {h: {k: v for k, v in r.items() if k not in ("sends", "recvs")} for h, r in self.ranks.items()}}


def install(lab: Lab, s: Scheme) -> Scheme:
    """The scheme's program and plan options on every switch (the kernel lab: its srv6_spray plan); the
    scheme as it runs there."""
    if _kernel(lab):
        s = on_kernel(s)
        if s.evs == "host" and not lab.model.host_source_routing:
            raise LabError(f"{s.name} on the kernel lab needs a lab whose topology sets host_source_routing: true (its "
                           "leaves' SR boundary is set at lab up and drops host-written carriers otherwise)")
    from mininet_labs.balance import _install, host_pins

    pins = host_pins(lab) if s.pins else ()
    _install(lab, s.program, s.options(pins))
    return s


def run(lab: Lab, transfers: Iterable[Any], s: Scheme, transport: Transport | None = None, *,
        fault: Fault | None = None, fault_at: float | None = None, repair_at: float | None = None,
        timeout: float = 300.0, controller: bool = False, progress: Callable[[int, int], None] | None = None
        ) -> CollectiveRun:
    """Run the transfers under scheme `s` (installed first) and return the ranks' timelines. A fault is
    applied `fault_at` s after the start and reverted at `repair_at` (None: at the end); `controller`: a
    FabricService runs meanwhile (endpoint.unattended). `progress(done, total)` is called as transfers
    complete. LabError when a rank fails or the run outlives `timeout`."""
    ts = [Transfer.of(t) for t in transfers]
    if not ts:
        raise LabError("a collective needs at least one transfer")
    for h in sorted({t.src for t in ts} | {t.dst for t in ts}):
        lab.host(h)
    s = install(lab, s)
    tr = on_link(dataclasses.replace(transport or Transport(), policy=s.policy, sport=s.sport, ipv4=s.ipv4),
                 current(lab.dir), queued_windows(ts, lab.model.planes))
    Layout(ts, tr.mtu)  # refuses a bad MTU before any process starts
    run_dir = lab.dir / "collective" / str(time.monotonic_ns())
    run_dir.mkdir(parents=True)
    evs = export_evs(lab, run_dir / "evs.json", s.evs)
    write_atomic(evs, json.dumps(with_local_peers(lab, json.loads(evs.read_text()))) + "\n")
    go = run_dir / "go"
    plan = {"format": FORMAT, "topology": str(lab.topology_path), "evs": str(evs), "go_file": str(go),
            "timeout_s": timeout, "transport": tr.to_json(), "transfers": [t.to_json() for t in ts]}
    plan_path = run_dir / "plan.json"
    write_atomic(plan_path, json.dumps(plan) + "\n")
    hosts = sorted({t.src for t in ts} | {t.dst for t in ts})
    env = with_repo_path(os.environ)
    procs: dict[str, subprocess.Popen[Any]] = {}
    events: list[dict[str, Any]] = []
    service: Any = nullcontext()
    if controller:
        from endpoint.unattended import service as fabric_service

        service = fabric_service(lab, run_dir / "service-events.jsonl")
    faulted = False
    try:
        with service:
            for h in hosts:
                with open(run_dir / f"{h}.err", "w") as err:
                    procs[h] = lab.host(h).popen([sys.executable, "-m", "endpoint.collective", "rank", "--plan",
                                                  str(plan_path), "--rank", h, "--out", str(run_dir / f"{h}.json")],
                                                 env=env, stdout=subprocess.DEVNULL, stderr=err)
            _wait(lambda: all((run_dir / f"{h}.json.ready").exists() for h in hosts), procs, run_dir, 60.0, "ready")
            started = time.monotonic_ns() + 200_000_000
            write_atomic(go, f"{started}\n")
            end = time.monotonic() + timeout
            while not all((run_dir / f"{h}.json").exists() for h in hosts):
                _alive(procs, run_dir)
                now_s = (time.monotonic_ns() - started) / 1e9
                if fault is not None and fault_at is not None and not faulted and now_s >= fault_at:
                    fault.apply(lab)
                    faulted = True
                    events.append({"what": f"fault: {fault.describe()}", "t_ns": time.monotonic_ns()})
                if faulted and repair_at is not None and now_s >= repair_at and fault is not None:
                    fault.revert(lab)
                    faulted, fault_at = False, None
                    events.append({"what": f"repair: {fault.describe()}", "t_ns": time.monotonic_ns()})
                if progress is not None:
                    progress(_done(run_dir, hosts), len(ts))
                if time.monotonic() > end:
                    raise LabError(f"the collective did not complete within {timeout:.0f} s (ranks' logs: {run_dir})")
                time.sleep(0.02)
            if progress is not None:
                progress(len(ts), len(ts))
    finally:
        if faulted and fault is not None:
            fault.revert(lab)
            events.append({"what": f"repair: {fault.describe()}", "t_ns": time.monotonic_ns()})
        if controller and lab.failures():  # what the controller recorded, undone: the next run starts healthy
            lab.restore()
        stop_all(procs.values())
    ranks = {h: json.loads((run_dir / f"{h}.json").read_text()) for h in hosts}
    return CollectiveRun(s, tr, ts, ranks, started, events, run_dir)


def with_local_peers(lab: Lab, doc: dict[str, Any]) -> dict[str, Any]:
    """The EV export with an EV per plane, without a carrier, between hosts of one leaf (the export has
    none: no spine between them, the leaf switches them itself)."""
    for h, dsts in doc["hosts"].items():
        for d in lab.hosts:
            if d == h:
                continue
            have = {e["plane"] for e in dsts.get(d, [])}
            for a, b in zip(lab.host(h).nics, lab.host(d).nics):
                if a.plane == b.plane and a.leaf == b.leaf and a.plane not in have:
                    dsts.setdefault(d, []).append({
                        "id": ev_id(a.plane, LEAF_CHOICE), "plane": a.plane, "spine": LEAF_CHOICE, "src": a.v6,
                        "dst": b.v6, "carrier": "", "usids": [], "src_leaf": a.leaf, "spine_name": "the leaf itself",
                        "dst_leaf": b.leaf})
            if d in dsts:
                dsts[d].sort(key=lambda e: e["id"])
    return doc


def frame_bytes(tr: Transport, carrier: bool = False) -> int:
    """Bytes of a full data frame on the wire (what tbf counts)."""
    return data_frame_bytes(tr.mtu, carrier)


def qps_per_link(ts: Sequence[Transfer], planes: int) -> int:
    """The most QPs one rank keeps busy at once on one of its NIC ports: its sends of the first step,
    spread over the planes (an all-to-all: every peer's QPs at once)."""
    first = min((t.iteration, t.step) for t in ts)
    busy: dict[str, set[tuple[str, int]]] = {}
    for t in ts:
        if (t.iteration, t.step) == first:
            busy.setdefault(t.src, set()).add((t.dst, t.qp_index))
    return max(1, max((-(-len(v) // max(1, planes)) for v in busy.values()), default=1))


def windows_per_round_trip(ts: Sequence[Transfer], planes: int) -> int:
    """The most QP windows a packet and its ACK can queue behind on one round trip of the first step: the
    sender's QPs on its NIC port, the QPs sending into the receiver's port (an all-to-all: every peer's),
    and the receiver's own QPs on the port its ACK leaves by (each spread over the planes)."""
    first = min((t.iteration, t.step) for t in ts)
    out: dict[str, set[tuple[str, int]]] = {}
    into: dict[str, set[tuple[str, int]]] = {}
    for t in ts:
        if (t.iteration, t.step) == first:
            out.setdefault(t.src, set()).add((t.dst, t.qp_index))
            into.setdefault(t.dst, set()).add((t.src, t.qp_index))

    def port(v: set[tuple[str, int]]) -> int:
        return -(-len(v) // max(1, planes))

    return max((port(out[t.src]) + port(into[t.dst]) + port(out.get(t.dst, set()))
                for t in ts if (t.iteration, t.step) == first), default=1)


def queued_windows(ts: Sequence[Transfer], planes: int) -> int:
    """The QP windows a round trip of the first step can queue behind: those of windows_per_round_trip, and
    at least twice the QPs on one port (a collision doubles its queue) and four."""
    return max(4, 2 * qps_per_link(ts, planes), windows_per_round_trip(ts, planes))


def on_link(tr: Transport, rate: LinkRate | None, windows: int) -> Transport:
    """The transport told the link its EV timers are fitted to (endpoint.timers.fit, in each rank): the
    shaped rate and `windows` of its frames queued (no rate: unshaped, the timers as configured)."""
    if rate is None or tr.timers != "link":
        return tr
    return dataclasses.replace(tr, link_mbit=rate.mbit, queued_frames=windows * tr.window)


def _done(run_dir: Path, hosts: Sequence[str]) -> int:
    n = 0
    for h in hosts:
        try:
            n += int((run_dir / f"{h}.json.progress").read_text() or 0)
        except (OSError, ValueError):  # not written yet, or caught mid-write: the progress bar's next poll reads it
            pass
    return n


def _alive(procs: dict[str, subprocess.Popen[Any]], run_dir: Path) -> None:
    for h, p in procs.items():
        if p.poll() is not None and not (run_dir / f"{h}.json").exists():
            err = (run_dir / f"{h}.err").read_text().strip().splitlines()
            raise LabError(f"rank {h} exited {p.returncode}: {err[-1] if err else 'no message'}")


def _wait(cond: Callable[[], bool], procs: dict[str, subprocess.Popen[Any]], run_dir: Path, within: float,
          what: str) -> None:
    end = time.monotonic() + within
    while not cond():
        _alive(procs, run_dir)
        if time.monotonic() > end:
            raise LabError(f"the ranks were not {what} within {within:.0f} s (logs: {run_dir})")
        time.sleep(0.02)
