"""The controller service over any data plane: one handle per switch (controller.southbound.base.SwitchHandle,
chosen once from its record: a network namespace is netlink, an address P4Runtime), one prober, one healer,
events, metrics and the status file, wired together. A fabric may mix the two."""

from __future__ import annotations

import logging
import os
import resource
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from collections.abc import Callable, Iterable
from typing import Any

from controller import planning
from controller.model import lookup
from controller.model.failures import HostPortDown, LinkDown
from controller.runtime.p4info import P4Info
from controller.model.failures import SwitchDown
from controller.routes import Options
from controller.plan.p4names import Program
from controller.service.denylistpush import DenylistPusher, EndpointSink, ReportSource
from controller.service.detect import Change, Thresholds
from controller.service.events import EventLog
from controller.service.healer import Healer
from controller.plan.fabricplan import plan as make_plan
from controller.service.liveness import Pinger
from controller.service.portstatus import PortStatus, PortStatusListener
from controller.service.metrics import Metrics, drop_reason_names
from controller.service.paths import PATH_COUNTER, PathLabel, path_labels
from controller.service.priority import set_thread_nice
from controller.service.directions import failure_label
from controller.service.prober import DirectionState, Prober
from controller.service.sessions import Session
from controller.service.switchcalls import SwitchCalls
from controller.southbound.base import CarrierSource, SwitchHandle
from controller.southbound.fleet import kind_of
from controller.service.status import may_write, remove_status, status_path, write_status
from controller.model.failures import failure_to_json
from controller.model.failures import DETECTOR
from controller.programs.toolchain import Artifacts
from controller.model.topology import Switch, Topology
from controller.state.eventfile import EVENTS_NAME  # the default events file (importers take it from here too)
from controller.state.filestore import FileStore
from controller.state.store import Store, StoreError

log = logging.getLogger("controller.service")


def handle_class(sw: Switch) -> type[Any]:
    """The implementation that holds this switch, from its record (chosen once, here)."""
    if kind_of(sw) == "netlink":
        from controller.southbound.kernelswitch import KernelSwitch  # pyroute2 only where a switch needs it

        return KernelSwitch
    return Session


def refused(topo: Topology, given: Iterable[str]) -> tuple[str, Switch, str] | None:
    """The first option given (a Config field's name) that a switch of `topo` cannot carry: (option, the switch,
    why, in the implementation's words: its `cannot`); None when every switch carries them all."""
    for sw in topo.switches:
        cannot: dict[str, str] = getattr(handle_class(sw), "cannot", {})
        for name in given:
            if name in cannot:
                return name, sw, cannot[name]
    return None


def needs_lease(topo: Topology) -> bool:
    """Whether some switch elects no writer itself (a namespace): two controllers on a state file then need a
    lease between them (controller.service.lease), where P4Runtime's election ids make one a backup."""
    return any(not handle_class(sw).arbitrated for sw in topo.switches)


@dataclass(frozen=True)
class Config:
    """How the service runs: probe period and timeout (seconds), detector thresholds, files, ports."""

    period: float = 0.05
    probe_timeout: float = 0.08
    thresholds: Thresholds = field(default_factory=Thresholds)
    election_id: int = 1
    connect_timeout: float = 2.0
    metrics_port: int = 0
    counters_every: float = 5.0  # seconds between per-port/drop counter reads (0: never)
    status_every: float = 0.5
    events: Path | None = None  # default: fabric-events.jsonl beside the state file
    probe: bool = True
    host_probes: bool = True  # probe host NICs too (ND out of their T0 port): a NIC down is a HostPortDown
    host_every: int = 5  # ... every this many periods (the controller's CPU: 16 link directions cost half a core)
    port_evidence: bool = True  # a link is dead by K lost probes only if its port counters agree
    nice: int | None = None  # the service threads' nice value (None: as started); see priority.py
    switch_deadline: float = 0.5  # seconds a switch has to answer any call; past it, it is silent (liveness.py)
    ping_every: float = 0.1  # seconds between liveness calls to each switch (0: none, no switch is recorded hung)
    carrier_events: Path | None = None  # a unix datagram socket port-status sources send to (portstatus.py)
    denylist_every: float = 0.2  # seconds between the denylist pusher's passes (with endpoints to tell)


class FabricService:
    """`fabricctl run`: start() returns once everything runs; stop() ends it; run_until(event) blocks."""

    def __init__(self, topo: Topology, program: Program, state: Path, config: Config,
                 options: Options | None = None, store: Store | None = None,
                 fence: Callable[[], str | None] | None = None,
                 publish: Callable[[dict[str, Any]], None] | None = None,
                 sink: Callable[[dict[str, Any]], None] | None = None, endpoints: EndpointSink | None = None,
                 reports: ReportSource | None = None) -> None:
        """`store`: where the record lives (default: the state file `state`); `fence` (etcd
        leadership) is asked before every switch write; `publish` replaces the status file; `endpoints`: the
        hosts the recorded denylist is pushed to (as the leader), `reports` the loop reports recorded first."""
        self.topo, self.program, self.state, self.config = topo, program, state, config
        self.store = store if store is not None else FileStore(state)
        self.fence, self.publish = fence, publish
        p4 = any(handle_class(sw) is Session for sw in topo.switches)
        self.artifacts = Artifacts.of(program) if p4 else None
        self.p4info = P4Info.load(self.artifacts.p4info) if self.artifacts is not None else None
        self.metrics = Metrics()
        self.started = time.time()
        self.sessions: dict[str, SwitchHandle] = {}
        self._publish = threading.Event()  # set: write the status file now (the healer applied a change)
        self.calls = SwitchCalls([sw.name for sw in topo.switches], config.switch_deadline)
        self.healer = Healer(topo, program, self.store, self.sessions, lambda kind, **f: self.events.emit(kind, **f),
                             on_reconcile=lambda n, s: self.metrics.reconcile.labels(n).observe(s),
                             on_change=self._publish.set, options=options, fence=fence, calls=self.calls,
                             write_deadline=max(2.0, 4 * config.switch_deadline))
        kernel = [sw for sw in topo.switches if kind_of(sw) == "netlink"]
        if kernel:  # a plan a namespace cannot carry: refused (ops.OpError naming it) before any switch is contacted
            from controller.southbound.netlink import NetlinkSouthbound

            NetlinkSouthbound(lambda n: str(topo.switch(n).netns)).prepare(
                planning.fabric(topo, program, (), options), kernel)
        try:
            for sw in topo.switches:
                self.sessions[sw.name] = self._handle(sw)
            self.events = EventLog(config.events or state.with_name(EVENTS_NAME), sink=sink)
        except BaseException:
            for h in self.sessions.values():
                h.stop()
            raise
        self.prober = Prober(topo, self.sessions, config.thresholds, period=config.period,
                             timeout=config.probe_timeout, on_change=self._link_change, on_outcome=self._outcome,
                             on_stall=self._stall, evidence=config.port_evidence, hosts=config.host_probes,
                             host_every=config.host_every, calls=self.calls, on_switch=self._switch_change,
                             on_io_error=self._io_error)
        self.pinger = Pinger(self.calls, self.sessions, lambda n: self.sessions[n].ready, config.ping_every)
        self.port_status = None if config.carrier_events is None else \
            PortStatusListener(config.carrier_events, self._port_status,
                               on_error=lambda why: self.events.emit("carrier_events_stopped", error=why))
        self.carrier: CarrierSource | None = None  # the kernel switches' own (their namespaces' link events)
        if config.probe and any(kind_of(sw) == "netlink" for sw in topo.switches):
            from controller.southbound.kernelswitch import KernelCarrier

            self.carrier = KernelCarrier(topo, lambda n, port, up, t: self._port_status(PortStatus(n, port, up, t)),
                                         on_error=self._carrier_error)
        self.counter_errors: dict[str, str] = {}  # switch -> the counter-read error said last
        self._armed = False
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._drop_names = drop_reason_names()
        self.nice_error: str | None = None  # why the threads could not take config.nice
        self.path_labels = self._path_labels()
        self.link_changes = {"down": 0, "up": 0}
        self.path_reads: dict[str, tuple[float, dict[int, int]]] = {}  # leaf -> (when, path_index -> packets)
        self.denylist = None if endpoints is None else DenylistPusher(
            self.store, endpoints, lambda kind, **f: self.events.emit(kind, **f), self.leading, reports=reports,
            every=config.denylist_every, on_told=lambda t: self.metrics.denylist_pushes.labels(
                t.host, "told" if t.ok else "not_told").inc(), on_links=self.metrics.denylist_links.set)

    def leading(self) -> bool:
        """Whether this controller is the fabric's writer now: its fence (etcd leadership) open, and primary on some
        switch (a P4Runtime backup is not; a namespace switch is held by the lease holder alone)."""
        return (self.fence is None or self.fence() is None) and \
            any(s.role_name == "primary" for s in self.sessions.values())

    def _handle(self, sw: Switch) -> SwitchHandle:
        cls = handle_class(sw)
        if cls is Session:
            assert self.artifacts is not None and self.p4info is not None
            return Session(sw, self.config.election_id, self.artifacts, self.p4info,
                           on_primary=self.healer.reconcile_now, notify=self._session_event,
                           timeout=self.config.connect_timeout, fence=self.fence)
        from controller.southbound.kernelswitch import peers_of
        from controller.southbound.linkprobe import new_nonce

        self._nonce = getattr(self, "_nonce", None) or new_nonce()  # another controller's probes are not ours
        return cls(sw, peers_of(self.topo, sw), self._nonce, on_primary=self.healer.reconcile_now,
                   notify=self._session_event, timeout=self.config.connect_timeout)

    # --- life ----------------------------------------------------------------------------------
    def start(self) -> None:
        self.events.emit("started", election_id=self.config.election_id, period_ms=self.config.period * 1000,
                         probe_timeout_ms=self.config.probe_timeout * 1000, thresholds=asdict(self.config.thresholds),
                         switches=len(self.sessions), links=len(self.prober.states) // 2)
        self.metrics.serve(self.config.metrics_port)
        with self.store.locked(10.0):
            recorded = self.store.recorded(self.topo)
        # the detector's own failures start down (restored after M probes back); the operator's are
        # probed like any link or host port but stay recorded until 'fabricctl restore'
        detected = {f for f, by in recorded.items()
                    if isinstance(f, (LinkDown, HostPortDown, SwitchDown)) and by == DETECTOR}
        self.prober.seed_down(detected)
        if self.config.ping_every > 0:
            self.prober.seed_switches_down({f.name for f in detected if isinstance(f, SwitchDown)})
        self.healer.seed(detected)
        self._init_series(detected)
        # Threads inherit their creator's nice value: one launcher thread takes the service's and
        # starts every other (gRPC's own threads are then started by those).
        launcher = threading.Thread(target=self._launch, name="service-start", daemon=True)
        launcher.start()
        launcher.join()
        if self.config.nice is not None:
            self.events.emit("priority", nice=self.config.nice, error=self.nice_error)
            if self.nice_error:
                log.warning("%s", self.nice_error)

    def _init_series(self, down: set[Any]) -> None:
        """Every labelled series from the start (0, or each link's state), so a dashboard query finds it
        before the first loss, change or reconnect (the Prometheus way: missing is not zero)."""
        for st in self.prober.states:
            link, way = failure_label(st.d.link), str(st.d.direction)
            self.metrics.probes_sent.labels(link, way)
            self.metrics.probes_lost.labels(link, way)
            self.metrics.link_up.labels(link).set(0 if st.d.link in down else 1)
        for change in ("down", "up"):
            self.metrics.link_changes.labels(change)
        for name in self.sessions:
            self.metrics.reconnects.labels(name)
            self.metrics.primary.labels(name).set(0)

    def _launch(self) -> None:
        self.nice_error = set_thread_nice(self.config.nice)
        self.healer.start()
        for s in self.sessions.values():
            s.start()
        if self.config.probe:
            self.prober.start()
            if self.config.ping_every > 0:
                self.pinger.start()
            if self.port_status is not None:
                self.port_status.start()
            if self.carrier is not None:
                self.carrier.start()
        if self.denylist is not None:  # its own thread: a host slow to answer holds up no switch work
            self.denylist.start()
        self._threads = [threading.Thread(target=self._status_loop, name="status", daemon=True)]
        if self.config.counters_every > 0:
            self._threads.append(threading.Thread(target=self._counters_loop, name="counters", daemon=True))
        for t in self._threads:
            t.start()

    def stop(self) -> None:
        self._stop.set()
        self._publish.set()
        self.pinger.stop()
        if self.port_status is not None:
            self.port_status.stop()
        if self.carrier is not None:
            self.carrier.stop()
        self.prober.stop()
        for s in self.sessions.values():
            s.stop()
        self.healer.stop()
        if self.denylist is not None:
            self.denylist.stop()
        self.calls.close()
        for t in self._threads:
            t.join(timeout=5)
        self.events.emit("stopped")
        self.events.close()
        if self.publish is None:
            remove_status(status_path(self.state), os.getpid())

    def run_until(self, stop: threading.Event, duration: float = 0.0) -> None:
        self.start()
        try:
            stop.wait(duration if duration > 0 else None)
        finally:
            self.stop()

    # --- callbacks -----------------------------------------------------------------------------
    def _session_event(self, s: SwitchHandle, kind: str, fields: dict[str, Any]) -> None:
        self.events.emit(kind, switch=s.name, **fields)
        if kind == "stream_broken":
            self.metrics.reconnects.labels(s.name).inc()
        if kind == "mastership":
            self.metrics.primary.labels(s.name).set(1 if fields.get("role") == "primary" else 0)
        elif kind in ("stream_broken", "switch_unreachable"):
            self.metrics.primary.labels(s.name).set(0)

    def _link_change(self, st: DirectionState, change: Change) -> None:
        link = st.d.link
        down = self.prober.link_down(link)
        if change is Change.DOWN:
            self.link_changes["down"] += 1
        else:
            self.link_changes["up"] += 1
        self.metrics.link_changes.labels(change.value).inc()
        what = {"link": [link.t0, link.t1]} if isinstance(link, LinkDown) else \
            {"port": [link.t0, link.port], "host": st.d.host}  # type: ignore[union-attr]
        self.events.emit(f"{'link' if isinstance(link, LinkDown) else 'port'}_{'down' if change is Change.DOWN else 'up'}",
                         **what, direction=st.d.label, evidence=st.detector.reason,
                         ports=st.evidence if change is Change.DOWN else "", sent=st.sent, lost=st.lost,
                         t_mono_ns=time.monotonic_ns())
        if change is Change.DOWN or not down:  # a link is up again only when both directions are
            self.metrics.link_up.labels(failure_label(link)).set(0 if down else 1)
            self.healer.link_changed(link, down)

    def _switch_change(self, name: str, change: Change, reason: str) -> None:
        """The liveness rule recorded a switch failed (it stopped answering) or back."""
        down = change is Change.DOWN
        self.events.emit("switch_down" if down else "switch_up", switch=name, evidence=reason,
                         silent_calls=self.calls.late(name), t_mono_ns=time.monotonic_ns())
        self.healer.link_changed(SwitchDown(name), down)

    def _port_status(self, st: PortStatus) -> None:
        """A port-status source says a port lost (or regained) carrier: a loss fails its link now."""
        now = time.monotonic_ns()
        known = self.topo.has_switch(st.switch)
        self.events.emit("carrier", switch=st.switch, port=st.port, up=st.up, known=known,
                         source_ms=round((now - st.t_mono_ns) / 1e6, 2) if st.t_mono_ns else None, t_mono_ns=now)
        if known and self.config.probe:
            self.prober.carrier(st.switch, st.port, st.up, f"carrier lost on {st.switch}:{st.port} (port status)")

    def _carrier_error(self, error: str) -> None:
        self.events.emit("carrier_error", error=error)

    def _io_error(self, what: str, switch: str, error: str) -> None:
        """A switch's probe I/O failed (or, error empty, works again): an event per change, the count a metric."""
        self.events.emit(f"{what}_error" if error else f"{what}_ok", switch=switch, **({"error": error} if error else {}))

    def _stall(self, lossy: int, total: int) -> None:
        if self.prober.stalls == 1 or self.prober.stalls % 100 == 0:
            self.events.emit("probe_stall", lossy_directions=lossy, directions=total, stalls=self.prober.stalls)

    def _outcome(self, st: DirectionState, ok: bool, delay_ms: float | None) -> None:
        link, way = failure_label(st.d.link), str(st.d.direction)
        self.metrics.probes_sent.labels(link, way).inc()
        if not ok:
            self.metrics.probes_lost.labels(link, way).inc()
        elif delay_ms is not None:
            self.metrics.probe_delay.labels(link, way).set(delay_ms / 1000)
        self.metrics.probe_loss.labels(link, way).set(st.detector.loss_ratio())

    # --- loops ---------------------------------------------------------------------------------
    def _status_loop(self) -> None:
        path = status_path(self.state)
        while True:
            self._publish.wait(self.config.status_every)
            self._publish.clear()
            if self._stop.is_set():
                return
            try:
                if self.publish is not None:
                    self.publish(self.view())
                elif may_write(path, os.getpid(), any(s.role_name == "primary" for s in self.sessions.values())):
                    write_status(path, self.view())
            except (OSError, StoreError) as e:
                self.events.emit("status_error", error=str(e))
            if not self._armed and self.prober.states and all(st.armed for st in self.prober.states):
                self._armed = True  # every direction had a probe arrive: its losses count from here
                self.events.emit("probes_armed", directions=len(self.prober.states))
            for what, n in self.prober.io_errors.items():
                self.metrics.probe_io_errors.labels(what).set(n)
            self.metrics.packet_io.labels("out").set(self.prober.packets_out)
            self.metrics.packet_io.labels("in").set(self.prober.packets_in)
            self.metrics.probe_timeout.set(self.prober.timeout_ms / 1000)
            self.metrics.probes_late.set(self.prober.late)
            self.metrics.failures.set(len(self.healer.recorded))
            self.metrics.packet_io.labels("refused").set(self._refused())

    def _refused(self) -> int:
        """Packet-outs a P4Runtime stream's backlog refused (a kernel switch has no stream)."""
        return sum(getattr(getattr(s, "conn", None), "packets_refused", 0) for s in self.sessions.values())

    def _counters_loop(self) -> None:
        while not self._stop.wait(self.config.counters_every):
            self.read_counters()

    def read_counters(self) -> None:
        """Every switch's counters read at once on the switches' workers, one deadline for all; a switch that
        fails (or answers nothing in time) is counted and said once per change of its error, its metrics left."""
        handles = [s for s in self.sessions.values() if s.port_counters and s.ready
                   and self.calls.silent_since(s.name) is None]

        def job(s: SwitchHandle) -> Callable[[float], Any]:
            def read(t: float) -> Any:
                counters = s.read_counters(t)
                labels = self.path_labels.get(s.name)
                # path cells: a P4 leaf's alone (path_labels has no other), read on its P4Runtime connection
                cells = s.conn.read_counter_cells(PATH_COUNTER, labels) if labels else None  # type: ignore[attr-defined]
                return counters, cells
            return read

        results = self.calls.gather({s.name: job(s) for s in handles}, max(2.0, 4 * self.config.switch_deadline))
        for name, r in sorted(results.items()):
            if isinstance(r, Exception):
                self.metrics.counter_errors.labels(name).inc()
                error = str(r) or type(r).__name__
                if self.counter_errors.get(name) != error:
                    self.counter_errors[name] = error
                    self.events.emit("counters_error", switch=name, error=error)
                continue
            if self.counter_errors.pop(name, None) is not None:
                self.events.emit("counters_ok", switch=name)
            (rx, tx, drops), cells = r
            self.metrics.set_counters(name, rx, tx, drops, self._drop_names)
            if cells is not None:
                labels = self.path_labels[name]
                self.metrics.set_paths(name, cells, labels)
                self.path_reads[name] = (time.time(), {v.index: v.packets for v in cells if v.index in labels})

    def _path_labels(self) -> dict[str, dict[int, PathLabel]]:
        """Which path each path_packets cell counts, per leaf, from the healthy plan (a leaf's path
        members are the same under any failure set; only the groups change)."""
        if self.p4info is None or PATH_COUNTER not in {c.name for c in self.p4info.counters}:
            return {}
        return path_labels(self.topo, planning.sid_plan(self.topo), make_plan(planning.fabric(self.topo, self.program, (), self.healer.options)))

    def view(self) -> dict[str, Any]:
        """What `fabricctl status` shows: sessions, per-link health and last probe, recorded failures."""
        links: dict[str, dict[str, Any]] = {}
        for st in self.prober.states:
            key = failure_label(st.d.link).replace("--", " -- ") + (f" ({st.d.host})" if st.d.host else "")
            entry = links.setdefault(key, {"up": True, "directions": {}})
            entry["up"] = entry["up"] and st.detector.up
            entry["directions"][st.d.label] = {
                "up": st.detector.up, "sent": st.sent, "lost": st.lost, "loss_ratio": round(st.detector.loss_ratio(), 4),
                "last_probe": st.last_probe_t, "last_delay_ms": None if st.last_delay_ms is None else round(st.last_delay_ms, 3),
                "reason": st.detector.reason,
                "held_back": st.vetoed, "port_evidence": st.evidence}
        applied = self.healer.applied
        recorded = self.healer.recorded
        return {"pid": os.getpid(), "started": self.started, "updated": time.time(),
                "election_id": self.config.election_id, "state": str(self.state), "events": str(self.events.path),
                "period_ms": self.config.period * 1000, "probe_timeout_ms": round(self.prober.timeout_ms, 1),
                "nice": self.config.nice, "thresholds": asdict(self.config.thresholds),
                "sessions": {n: {"role": s.role_name, "kind": s.kind, "reconnects": s.reconnects,
                                 "answers": self.prober.health[n].up, "late_calls": self.calls.late(n)}
                             for n, s in self.sessions.items()},
                "primary": all(s.role_name == "primary" for s in self.sessions.values()),
                "links": links, "link_changes": dict(self.link_changes),
                "applied_failures": None if applied is None else [lookup.describe_failure(self.topo, f) for f in sorted(applied, key=str)],
                "applied": None if applied is None else [failure_to_json(f) for f in sorted(applied, key=str)],
                "recorded": [{**failure_to_json(f), "by": by} for f, by in sorted(recorded.items(), key=str)],
                "read_mono_ns": self.healer.read_mono_ns, "pending": self.healer.pending,
                "store": str(self.store), "read_revision": self.healer.read_revision, "held": self.healer.held,
                "probes": {"out": self.prober.packets_out, "in": self.prober.packets_in, "late": self.prober.late,
                           "stalls": self.prober.stalls,
                           "refused": self._refused(), "io_errors": dict(self.prober.io_errors)},
                "rss_kb": rss_kb(), "cpu_s": round(sum(resource.getrusage(resource.RUSAGE_SELF)[:2]), 3),
                **({"paths": self._path_rows()} if self.path_labels else {}),
                **({"denylist": self.denylist.view()} if self.denylist is not None else {})}

    def _path_rows(self) -> list[dict[str, Any]]:
        """The last path_packets reading per leaf and path (for the live view's rates; empty until read)."""
        return [{"switch": n, "plane": lb.plane, "spine": lb.spine, "segments": lb.segments, "packets": packets, "t": t}
                for n, (t, cells) in sorted(self.path_reads.items()) for i, packets in sorted(cells.items())
                if (lb := self.path_labels.get(n, {}).get(i)) is not None]


def rss_kb() -> int:
    """This process's resident set size, kB (0 where /proc cannot tell)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0

