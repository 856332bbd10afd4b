"""What the live view shows, as JSON: the fabric's layout, and a snapshot of the recorded failures, the running
controller's view and what the failures make unreachable, all read from the fabric's store (controller.state:
the state file and the status file beside it, or etcd)."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from controller import failover, planning
from controller.model import lookup
from controller.model.failures import Failure, HostPortDown, LinkDown, SwitchDown
from controller.plan.p4names import Program
from controller.service.status import status_path
from controller.state.filestore import FileStore
from controller.model.failures import DETECTOR
from controller.state.store import Store, StoreError
from controller.model.topology import Topology
from controller.model.failures import failure_to_json

UP, FAILED, DOWN = "up", "failed", "down"  # recorded failed (red); probes down, nothing recorded (orange)


@dataclass(frozen=True)
class Sources:
    """Where the view reads: the topology, the program (for reachability), and the store: `store` (etcd: the
    record, the leader's view and the events under the fabric's prefix), or by default the state file `state`
    with the status file beside it and the events file `events` (None: the one the running controller's status
    names, else fabric-events.jsonl beside the state file)."""

    topo: Topology
    program: Program
    state: Path
    events: Path | None = None
    store: Store | None = None

    @property
    def status(self) -> Path:
        return status_path(self.state)

    def open(self) -> Store:
        """The store the view reads (the state file's unless one was given)."""
        return self.store if self.store is not None else FileStore(self.state, self.events)


def link_key(t0: str, t1: str) -> str:
    """A link's name as `fabricctl status` and the status file give it."""
    return f"{t0} -- {t1}"


def port_key(t0: str, port: int) -> str:
    """A host port's name (the status file's, without its '(host)' suffix)."""
    return f"{t0}:{port}"


def layout(topo: Topology) -> dict[str, Any]:
    """The fabric plane by plane: spines, leaves with their host ports, and every leaf-spine link with its ports."""
    planes = []
    for p in range(topo.planes):
        spines, leaves = topo.t1s(p), topo.t0s(p)
        planes.append({
            "plane": p,
            "spines": [s.name for s in spines],
            "leaves": [{"name": leaf.name, "ports": [
                {"key": port_key(leaf.name, port), "port": port, "slot": k,
                 "host": leaf.host_names[k] if k < len(leaf.host_names) else ""}
                for k, port in enumerate(leaf.host_ports)]} for leaf in leaves],
            "links": [{"key": link_key(leaf.name, spine.name), "t0": leaf.name, "t1": spine.name,
                       "t0_port": leaf.uplinks[j], "t1_port": spine.downlinks[leaf.index]}
                      for leaf in leaves for j, spine in enumerate(spines) if j < len(leaf.uplinks)],
        })
    return {"topology": topo.name, "planes": planes}


@dataclass
class PathRates:
    """Packets per second per path, from successive readings of the controller's path counters."""

    _last: dict[tuple[str, str], tuple[float, int]] = field(default_factory=dict)
    _rates: dict[tuple[str, str], float | None] = field(default_factory=dict)

    def rows(self, paths: list[dict[str, Any]]) -> list[dict[str, Any]]:
        out = []
        for row in paths:
            key = (str(row.get("switch")), str(row.get("segments")))
            t, n = row.get("t"), row.get("packets")
            if isinstance(t, (int, float)) and isinstance(n, int):
                prev = self._last.get(key)
                if prev is not None and t > prev[0]:
                    self._rates[key] = (n - prev[1]) / (t - prev[0]) if n >= prev[1] else None  # reset: unknown
                if prev is None or t > prev[0]:
                    self._last[key] = (t, n)
            out.append({**row, "rate_pps": self._rates.get(key)})
        return out


def _probes(entry: dict[str, Any] | None) -> dict[str, Any] | None:
    """One link's (or host port's) probe health from the status file, summed over its directions."""
    if not isinstance(entry, dict):
        return None
    dirs = [d for d in entry.get("directions", {}).values() if isinstance(d, dict)]
    delays = [d["last_delay_ms"] for d in dirs if isinstance(d.get("last_delay_ms"), (int, float))]
    return {"up": bool(entry.get("up", True)), "sent": sum(int(d.get("sent", 0)) for d in dirs),
            "lost": sum(int(d.get("lost", 0)) for d in dirs), "delay_ms": max(delays) if delays else None,
            "reason": "; ".join(str(d["reason"]) for d in dirs if not d.get("up", True) and d.get("reason"))}


def _controller(doc: dict[str, Any] | None, now: float) -> dict[str, Any] | None:
    if doc is None:
        return None
    sessions = doc.get("sessions", {}) if isinstance(doc.get("sessions"), dict) else {}
    roles = [s.get("role") for s in sessions.values() if isinstance(s, dict)]
    updated = doc.get("updated")
    leader = doc.get("leader") if isinstance(doc.get("leader"), dict) else None  # etcd leadership
    return {"pid": doc.get("pid"), "election_id": leader.get("election_id") if leader else doc.get("election_id"),
            "host": leader.get("host") if leader else None,
            "primary_on": roles.count("primary"), "backup_on": roles.count("backup"), "down_on": roles.count("down"),
            "switches": {n: s.get("role") for n, s in sessions.items() if isinstance(s, dict)},
            "age_s": round(now - updated, 2) if isinstance(updated, (int, float)) else None,
            "probe_timeout_ms": doc.get("probe_timeout_ms"), "rss_kb": doc.get("rss_kb"),
            "link_changes": doc.get("link_changes"), "pending": doc.get("pending")}


class Snapshots:
    """Builds the snapshot the page draws; reachability is computed once per failure set."""

    def __init__(self, sources: Sources) -> None:
        self.sources = sources
        self.store = sources.open()
        self.layout = layout(sources.topo)
        self._base = planning.fabric(sources.topo, sources.program)
        self._unreachable: dict[frozenset[Failure], dict[str, list[str]]] = {}
        self._rates = PathRates()
        self._lock = threading.Lock()

    def unreachable(self, failures: frozenset[Failure]) -> dict[str, list[str]]:
        got = self._unreachable.get(failures)
        if got is None:
            topo = self.sources.topo
            fab = failover.with_failures(self._base, failures) if failures else self._base
            lost = failover.unreachable(fab)
            got = {str(p): [str(u).split(": ", 1)[-1] for u in lost if u.plane == p] for p in range(topo.planes)}
            if len(self._unreachable) > 256:
                self._unreachable.clear()
            self._unreachable[failures] = got
        return got

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            return self._snapshot()

    def _snapshot(self) -> dict[str, Any]:
        src, topo, store, now = self.sources, self.sources.topo, self.store, time.time()
        state_error = store_problem = None
        try:
            recorded, store_problem = store.last_known(topo)
        except StoreError as e:
            recorded, state_error = {}, str(e)
        try:
            status = None if store_problem else store.read_view()
        except StoreError:
            status = None
        try:
            events = store.events_where()
        except StoreError:
            events = None
        probes = status.get("links", {}) if status and isinstance(status.get("links"), dict) else {}
        by_key = {k.split(" (", 1)[0]: v for k, v in probes.items()}
        down_switches = {f.name: by for f, by in recorded.items() if isinstance(f, SwitchDown)}
        applied = None
        if status is not None and isinstance(status.get("applied"), list):
            applied = {str(sorted(a.items())) for a in status["applied"] if isinstance(a, dict)}

        def judged(failure: Failure, via: list[str], key: str) -> dict[str, Any]:
            """The state of a link or host port: recorded itself, or through a switch recorded down."""
            by = recorded.get(failure)
            why = "recorded failed" if by else ""
            for name in via:
                if not by and name in down_switches:
                    by, why = down_switches[name], f"switch {name} recorded failed"
            p = _probes(by_key.get(key))
            state = FAILED if by else (DOWN if p is not None and not p["up"] else UP)
            if state == DOWN:
                why = "its probes fail; not recorded (yet)"
            out: dict[str, Any] = {"state": state, "recorded_by": by and ("detector" if by == DETECTOR else "operator"),
                                   "why": why, "probes": p}
            if by and applied is not None and failure in recorded:
                out["applied"] = str(sorted(failure_to_json(failure).items())) in applied
            return out

        links: dict[str, Any] = {}
        ports: dict[str, Any] = {}
        for plane in self.layout["planes"]:
            for ln in plane["links"]:
                links[ln["key"]] = {"plane": plane["plane"], "t0": ln["t0"], "t1": ln["t1"],
                                    **judged(LinkDown(ln["t0"], ln["t1"]), [ln["t0"], ln["t1"]], ln["key"])}
            for leaf in plane["leaves"]:
                for hp in leaf["ports"]:
                    ports[hp["key"]] = {"plane": plane["plane"], "t0": leaf["name"], "port": hp["port"],
                                        "host": hp["host"],
                                        **judged(HostPortDown(leaf["name"], hp["port"]), [leaf["name"]], hp["key"])}
        switches = {s.name: {"role": s.role, "plane": s.plane,
                             "state": FAILED if s.name in down_switches else UP,
                             "recorded_by": down_switches.get(s.name) and
                             ("detector" if down_switches[s.name] == DETECTOR else "operator")}
                    for s in topo.switches}
        paths = self._paths(status)
        return {
            "time": now, "topology": topo.name, "program": src.program, "state_file": str(store),
            "state_error": state_error, "store_problem": store_problem, "events_file": events,
            "controller": _controller(status, now),
            "failures": [{"what": lookup.describe_failure(topo, f),
                          "by": "detector" if by == DETECTOR else "operator"} for f, by in sorted(recorded.items(), key=str)],
            "links": links, "host_ports": ports, "switches": switches,
            "unreachable": self.unreachable(frozenset(recorded)) if state_error is None else {},
            "paths": paths,
        }

    def _paths(self, status: dict[str, Any] | None) -> dict[str, Any]:
        if status is None:
            return {"rows": [], "note": "no controller running: per-path rates come from 'fabricctl run'"}
        rows = status.get("paths")
        if not isinstance(rows, list):
            return {"rows": [], "note": "the controller's status carries no path counters "
                    "(program without path_packets, or a fabricctl run without them)"}
        if not rows:
            return {"rows": [], "note": "no path counter read yet (the controller reads them every --counters-every s)"}
        return {"rows": self._rates.rows([r for r in rows if isinstance(r, dict)]), "note": ""}

