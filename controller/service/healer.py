"""Keeps the switches equal to the plan of the recorded failures: records what the probes see in the
state file (under its lock; restoring only what the detector recorded) and writes the failover
deltas on the open sessions."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from controller import failover, ops
from controller.runtime.codec import canonical
from controller.failover import Failure, LinkDown
from controller.runtime.p4info import P4Info
from controller.runtime.p4rt import P4RuntimeError
from controller.plan.fabricplan import plan as make_plan
from controller.runtime.reconcile import Delta, apply, ordered_updates
from controller.routes import DEFAULT_RESETS, Fabric, Options, Program
from controller.service.origins import merge
from controller.service.sessions import Session
from controller.state.statefile import Origin
from controller.state.statelock import StateLocked
from controller.model.topology import Topology
from controller.state.filestore import FileStore
from controller.state.store import Conflict, Store, StoreError
from controller.service.switchcalls import SwitchCalls

Emit = Callable[..., object]


@dataclass
class Healer:
    """One thread owns every write: detector changes and state-file changes (from one-shot commands)
    become a new failure set, saved under the state lock, then per-switch deltas on ready sessions.
    A switch whose delta fails, or whose session (re)becomes primary, is reconciled in full. A link
    whose probes come back is restored only if the detector recorded it (origins.merge)."""

    topo: Topology
    program: Program
    p4info: P4Info
    state: Store  # the record's store (controller.state: the state file, or etcd)
    sessions: Mapping[str, Session]
    emit: Emit
    lock_timeout: float = 10.0
    poll: float = 0.25
    on_reconcile: Callable[[str, float], None] | None = None  # (switch, seconds) per delta written
    on_change: Callable[[], None] | None = None  # after a pass that read a new record or applied a new set
    options: Options | None = None  # hash mode and pins of the plan (default: the program's)
    fence: Callable[[], str | None] | None = None  # etcd leadership: None while this controller may write
    calls: SwitchCalls | None = None  # when set, deltas go out on the switches' workers, all at once, with a deadline
    write_deadline: float = 2.0  # seconds a switch's delta may take before it waits for a full reconcile
    applied: frozenset[Failure] | None = field(default=None, init=False)  # the failure set the switches hold
    recorded: dict[Failure, Origin] = field(default_factory=dict, init=False)  # the record, with origins, as last read
    read_mono_ns: int = field(default=0, init=False)  # when the last pass read the record (under the state lock)
    read_revision: int = field(default=0, init=False)  # the store's revision of that read (etcd; the file: 0)
    held: str | None = field(default=None, init=False)  # why writes are held now (the fence), None: they are not
    _detected: set[Failure] = field(default_factory=set, init=False)  # links/host ports the detectors hold down now
    _downs: set[Failure] = field(default_factory=set, init=False)
    _ups: set[Failure] = field(default_factory=set, init=False)
    _full: set[str] = field(default_factory=set, init=False)
    _wake: threading.Event = field(default_factory=threading.Event, init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False)
    _io: threading.Lock = field(default_factory=threading.Lock, init=False)
    _stop: threading.Event = field(default_factory=threading.Event, init=False)
    _thread: threading.Thread | None = field(default=None, init=False)
    _fabrics: dict[frozenset[Failure], Fabric] = field(default_factory=dict, init=False)
    _last_error: str = field(default="", init=False)

    def __post_init__(self) -> None:
        if not isinstance(self.state, Store):  # a state file's path, as before the store existed
            self.state = FileStore(self.state)

    # --- what others tell it -----------------------------------------------------------------
    def seed(self, detected: set[Failure]) -> None:
        """The links and host ports the detectors start down (the detector's recorded failures), before start()."""
        with self._lock:
            self._detected = set(detected)

    def link_changed(self, link: Failure, down: bool) -> None:
        with self._lock:
            (self._downs if down else self._ups).add(link)
            (self._ups if down else self._downs).discard(link)
            (self._detected.add if down else self._detected.discard)(link)
        self._wake.set()

    def reconcile_now(self, session: Session) -> None:
        """Bring one switch to the plan of the recorded failures (a session that became primary calls this)."""
        with self._io, self.state.locked(self.lock_timeout):
            self.recorded, self.read_revision = self.state.recorded_rev(self.topo)
            failures = frozenset(self.recorded)
            if self.applied is None:
                self.applied = failures
            if failures != self.applied:  # the file moved on: the loop writes the deltas to the others
                self._wake.set()
            self._full_reconcile(session, self.applied)

    # --- the loop ------------------------------------------------------------------------------
    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="healer", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=15)

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self.poll)
            self._wake.clear()
            if self._stop.is_set():
                return
            try:
                self.tick()
            except (StateLocked, ops.OpError, StoreError) as e:
                if str(e) != self._last_error:
                    self.emit("heal_error", error=str(e))
                self._last_error = str(e)
            else:
                self._last_error = ""

    def tick(self) -> None:
        """One pass: merge what the probes saw into the recorded failures, save, write the deltas."""
        with self._lock:
            downs, ups, detected = set(self._downs), set(self._ups), set(self._detected)
            self._downs.clear()
            self._ups.clear()
        try:
            self._tick(downs, ups, detected)
        except (Conflict, StoreError):  # not merged: the next pass merges them (Conflict: at once)
            with self._lock:
                self._downs |= downs - self._ups
                self._ups |= ups - self._downs
            self._wake.set()
            raise

    def _tick(self, downs: set[Failure], ups: set[Failure], detected: set[Failure]) -> None:
        with self._io, self.state.locked(self.lock_timeout):
            read_ns = time.monotonic_ns()  # a one-shot command that saved before this saw the lock free
            before, read_rev = self.state.recorded_rev(self.topo)
            recorded = frozenset(before)
            m = merge(before, downs, ups, detected)
            new = frozenset(m.record)
            if m.added or m.removed:
                read_rev = self.state.save(new, m.record, expect=read_rev)  # Conflict: merged again next pass
                added, removed = self._described(m.added), self._described(m.removed)
                self.emit("failures_recorded", added=list(added), removed=list(removed), by={**added, **removed},
                          count=len(new))
            for f in m.held:
                what = {"link": [f.t0, f.t1]} if isinstance(f, LinkDown) else {"port": [f.t0, f.port]}  # type: ignore[union-attr]
                self.emit("restore_held", **what, failure=ops.describe_failure(self.topo, f), by="operator",
                          why="probes came back, but an operator recorded this failure: it stays until 'fabricctl restore'")
            changed = m.record != self.recorded
            self.recorded = m.record
            if self.applied is None:
                self.applied = recorded
            held = self.fence() if self.fence is not None else None
            if (held is None) != (self.held is None):  # an event per change of state, not per reason's wording
                self.emit("writes_held" if held else "writes_resumed", **({"why": held} if held else {}))
                changed = True
            self.held = held
            if held:  # the record moved on; the switches keep what they hold until writes may resume
                self.recorded, self.read_mono_ns, self.read_revision = m.record, read_ns, read_rev
                if changed and self.on_change is not None:
                    self.on_change()
                return
            if new != self.applied:
                self._write_deltas(self.applied, new)
                self.applied = new
                changed = True
            self.read_mono_ns, self.read_revision = read_ns, read_rev
            for name in sorted(self._full):
                s = self.sessions[name]
                if s.ready and (self.calls is None or self.calls.silent_since(name) is None):
                    self._full_reconcile(s, new)
        if changed and self.on_change is not None:
            self.on_change()

    @property
    def pending(self) -> list[str]:
        """Switches whose session is not ready that wait for a full reconcile."""
        return sorted(self._full)

    def _described(self, failures: Mapping[Failure, Origin]) -> dict[str, Origin]:
        return {ops.describe_failure(self.topo, f): o for f, o in sorted(failures.items(), key=str)}

    # --- writing -------------------------------------------------------------------------------
    def _fabric(self, failures: frozenset[Failure]) -> Fabric:
        f = self._fabrics.get(failures)
        if f is None:
            if len(self._fabrics) > 64:
                self._fabrics.clear()
            f = self._fabrics[failures] = ops.fabric(self.topo, self.program, failures, self.options)
        return f

    def _write_deltas(self, old: frozenset[Failure], new: frozenset[Failure]) -> None:
        t0 = time.monotonic()
        deltas = failover.delta(self._fabric(old), self._fabric(new))
        down = ops.down_switches(new)
        # a switch back from a recorded failure holds whatever it held when it failed: all of it is compared
        self._full |= ops.down_switches(old) - down
        written: dict[str, int] = {}
        if self.calls is not None:
            self._write_on_workers(deltas, down, written)
            self.emit("deltas_written", switches=written, failures=len(new),
                      ms=round((time.monotonic() - t0) * 1000, 2), t_mono_ns=time.monotonic_ns())
            return
        for name, d in sorted(deltas.items()):
            s = self.sessions[name]
            if name in down or name in self._full:
                continue
            if not s.ready:
                self._full.add(name)  # reconciled in full when its session is back
                continue
            t1 = time.monotonic()
            try:
                for batch in ordered_updates(self._canonical(d)):
                    s.conn.write(batch)
                written[name] = len(d)
                if self.on_reconcile is not None:
                    self.on_reconcile(name, time.monotonic() - t1)
            except (P4RuntimeError, ValueError, LookupError) as e:
                self.emit("delta_failed", switch=name, error=str(e))
                self._full.add(name)
        self.emit("deltas_written", switches=written, failures=len(new),
                  ms=round((time.monotonic() - t0) * 1000, 2), t_mono_ns=time.monotonic_ns())

    def _write_on_workers(self, deltas: Mapping[str, Delta], down: set[str], written: dict[str, int]) -> None:
        """Every switch's delta at once on its worker; the slowest holds this thread at most
        `write_deadline`. A switch that does not answer, or whose delta failed, is reconciled in full later."""
        assert self.calls is not None
        jobs = {}
        for name, d in sorted(deltas.items()):
            s = self.sessions[name]
            if name in down or name in self._full:
                continue
            if not s.ready:
                self._full.add(name)
                continue
            batches = [list(b) for b in ordered_updates(self._canonical(d))]
            jobs[name] = (lambda t, s=s, batches=batches: (time.monotonic(), [s.conn.write(b, timeout=t) for b in batches]))
        results = self.calls.gather(jobs, self.write_deadline)
        for name, r in sorted(results.items()):
            if isinstance(r, Exception):
                self.emit("delta_failed", switch=name, error=str(r) or type(r).__name__)
                self._full.add(name)
                continue
            written[name] = len(deltas[name])
            if self.on_reconcile is not None:
                self.on_reconcile(name, time.monotonic() - r[0])

    def _canonical(self, d: Delta) -> Delta:
        c = lambda xs: tuple(canonical(e, self.p4info) for e in xs)  # noqa: E731
        return Delta(c(d.inserts), c(d.modifies), c(d.deletes), c(d.unwatch),  # type: ignore[arg-type]
                     tuple(c(stage) for stage in d.rewatch))  # type: ignore[misc]

    def _full_reconcile(self, s: Session, failures: frozenset[Failure]) -> None:
        t0 = time.monotonic()
        if s.name in ops.down_switches(failures):  # recorded down: the one-shot commands leave it alone too
            return
        # with the program's resets, as `fabricctl install`: thresholds a switch holds that the plan does not
        # set (ECN marking or trimming turned off while it was away) go back to the program's default
        d = apply(s.conn, make_plan(self._fabric(failures))[s.name], resets=DEFAULT_RESETS)
        self._full.discard(s.name)
        self.emit("reconciled", switch=s.name, inserts=len(d.inserts), modifies=len(d.modifies),
                  deletes=len(d.deletes), ms=round((time.monotonic() - t0) * 1000, 2))
        if self.on_reconcile is not None:
            self.on_reconcile(s.name, time.monotonic() - t0)
