"""Keeps the switches equal to the plan of the recorded failures: records what the probes see in the
record (under its lock; restoring only what the detector recorded; asking the leader's fence first) and
writes the failover deltas through each switch's handle (controller.southbound.base.SwitchHandle: P4
entities or Linux routes), every call under the deadline layer."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from typing import Any

from controller import exitcodes, planning
from controller.model import lookup
from controller.model.failures import Failure, LinkDown
from controller.routes import Fabric, Options
from controller.plan.p4names import Program
from controller.service.origins import Merge, merge
from controller.service.transaction import Proposal, Recorded, record_then_apply
from controller.southbound.base import PlanChange, SwitchHandle
from controller.model.failures import Origin
from controller.state.statelock import StateLocked
from controller.model.topology import Topology
from controller.state.filestore import FileStore
from controller.state.store import Conflict, Record, Store, StoreError
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
    state: Store  # the record's store (controller.state: the state file, or etcd)
    sessions: Mapping[str, SwitchHandle]
    emit: Emit
    lock_timeout: float = 10.0
    poll: float = 0.25
    on_reconcile: Callable[[str, float], None] | None = None  # (switch, seconds) per delta written
    on_change: Callable[[], None] | None = None  # after a pass that read a new record or applied a new set
    options: Options | None = None  # hash mode and pins of the plan (default: the program's)
    fence: Callable[[], str | None] | None = None  # etcd leadership: None while this controller may write
    calls: SwitchCalls | None = None  # when set, every switch call goes out on the switches' workers with a deadline
    write_deadline: float = 2.0  # seconds all switches' deltas may take, in all
    reconcile_deadline: float = 30.0  # seconds full reconciles (read everything back, write the plan) may take, in all
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

    def reconcile_now(self, session: SwitchHandle) -> None:
        """Bring one switch to the plan of the recorded failures (a session that became primary calls this). The
        record is read under its lock; the switch is written after both locks are let go, so a frozen switch
        holds up no other's write (it is not ready yet: the loop's deltas leave it to this, or to a full reconcile)."""
        with self._io, self.state.locked(self.lock_timeout):
            self.recorded, self.read_revision = self.state.recorded_rev(self.topo)
            failures = frozenset(self.recorded)
            if self.applied is None:
                self.applied = failures
            if failures != self.applied:  # the file moved on: the loop writes the deltas to the others
                self._wake.set()
            target = self.applied
        for _ in range(3):
            # a switch coming back is silent to the deadline layer until it answers: this call may reach it
            err = self._full_reconciles([session], target, reach_silent=True).get(session.name)
            if err is not None:
                raise err
            with self._io:  # the loop writes its deltas and moves `applied` under this lock
                if self.applied == target:
                    return  # any later delta of the loop reaches this switch too
                target = self.applied  # the loop moved on while this switch was written: again, to where it is
        self.emit("reconcile_behind", switch=session.name)  # the record still moving after three passes: said

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
            except (StateLocked, exitcodes.OpError, StoreError) as e:
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
        """The failure transaction (controller.service.transaction): the detector's merge is its rule, the leader's
        fence is asked before the save, and the deltas are written here, this controller being the one that applies."""
        before: Record = {}  # the record read (the last round's)
        m = merge(before, set(), set(), set())  # its merge with what the probes saw
        changed = False
        full: list[SwitchHandle] = []

        def wanted(record: Record) -> Proposal:
            nonlocal before, m
            before, m = record, merge(record, downs, ups, detected)
            return Proposal(frozenset(m.record), m.record, save=bool(m.added or m.removed))

        def recorded(r: Recorded[None, None]) -> None:
            added, removed = self._described(m.added), self._described(m.removed)
            self.emit("failures_recorded", added=list(added), removed=list(removed), by={**added, **removed},
                      count=len(r.new))

        def apply(r: Recorded[None, None]) -> None:
            nonlocal changed, full
            changed = self._take(m, r, None)
            applied = self.applied if self.applied is not None else r.old
            if r.new != applied:
                self._write_deltas(applied, r.new)
                self.applied = r.new
                changed = True
            self.read_mono_ns, self.read_revision = r.read_ns, r.rev
            full = [self.sessions[n] for n in sorted(self._full) if self.sessions[n].ready
                    and (self.calls is None or self.calls.silent_since(n) is None)]

        with self._io:
            r: Recorded[None, None] = record_then_apply(
                self.state, lambda: self.state.recorded_rev(self.topo), wanted, lock_timeout=self.lock_timeout,
                fence=self.fence, recorded=recorded, apply=apply)
            if r.held:  # the fence was asked before the save: a deposed leader saved nothing
                if m.added or m.removed:
                    with self._lock:  # kept for when writes may resume
                        self._downs |= downs - self._ups
                        self._ups |= ups - self._downs
                    m = merge(before, set(), set(), set())
                changed = self._take(m, r, r.held)
                # the record moved on; the switches keep what they hold until writes may resume
                self.read_mono_ns, self.read_revision = r.read_ns, r.rev
        if full:  # read back and written with the locks let go: a frozen switch holds up no record or other write
            for name, err in self._full_reconciles(full, r.new).items():
                self.emit("reconcile_failed", switch=name, error=str(err) or type(err).__name__)
        if changed and self.on_change is not None:
            self.on_change()

    def _take(self, m: Merge, r: Recorded[None, None], held: str | None) -> bool:
        """Note a pass's merge and the fence's answer: the operator's failures the probes saw come back (said, kept),
        the record as it now is, writes held or resumed (said once per change); whether the view changed."""
        for f in m.held:
            what = {"link": [f.t0, f.t1]} if isinstance(f, LinkDown) else {"port": [f.t0, f.port]}  # type: ignore[union-attr]
            self.emit("restore_held", **what, failure=lookup.describe_failure(self.topo, f), by="operator",
                      why="probes came back, but an operator recorded this failure: it stays until 'fabricctl restore'")
        changed = m.record != self.recorded
        self.recorded = m.record
        if self.applied is None:
            self.applied = r.old
        if (held is None) != (self.held is None):  # an event per change of state, not per reason's wording
            self.emit("writes_held" if held else "writes_resumed", **({"why": held} if held else {}))
            changed = True
        self.held = held
        return changed

    @property
    def pending(self) -> list[str]:
        """Switches whose session is not ready that wait for a full reconcile."""
        return sorted(self._full)

    def _described(self, failures: Mapping[Failure, Origin]) -> dict[str, Origin]:
        return {lookup.describe_failure(self.topo, f): o for f, o in sorted(failures.items(), key=str)}

    # --- writing -------------------------------------------------------------------------------
    def _fabric(self, failures: frozenset[Failure]) -> Fabric:
        f = self._fabrics.get(failures)
        if f is None:
            if len(self._fabrics) > 64:
                self._fabrics.clear()
            f = self._fabrics[failures] = planning.fabric(self.topo, self.program, failures, self.options)
        return f

    def _write_deltas(self, old: frozenset[Failure], new: frozenset[Failure]) -> None:
        """Each switch's delta planned by its handle (no I/O), then written on the switches' workers all at once
        under one deadline for the whole write. A switch that does not answer, or whose delta failed, is reconciled
        in full later."""
        t0 = time.monotonic()
        change = PlanChange(self._fabric(old), self._fabric(new))
        down = planning.down_switches(new)
        # a switch back from a recorded failure holds whatever it held when it failed: all of it is compared
        self._full |= planning.down_switches(old) - down
        written: dict[str, int] = {}
        jobs: dict[str, Any] = {}
        for name, s in sorted(self.sessions.items()):
            if name in down or name in self._full:
                continue
            try:
                delta = s.plan_delta(change)
            except (ValueError, LookupError, exitcodes.OpError) as e:  # a plan this switch cannot hold
                self.emit("delta_failed", switch=name, error=str(e))
                self._full.add(name)
                continue
            if delta is None:
                continue
            if not s.ready:
                self._full.add(name)  # reconciled in full when its session is back
                continue
            jobs[name] = lambda t, s=s, delta=delta: (time.monotonic(), s.write_delta(delta, t))
        for name, r in sorted(self._run_calls(jobs, self.write_deadline).items()):
            if isinstance(r, Exception):
                self.emit("delta_failed", switch=name, error=str(r) or type(r).__name__)
                self._full.add(name)
                continue
            written[name] = r[1]
            if self.on_reconcile is not None:
                self.on_reconcile(name, time.monotonic() - r[0])
        self.emit("deltas_written", switches=written, failures=len(new),
                  ms=round((time.monotonic() - t0) * 1000, 2), t_mono_ns=time.monotonic_ns())

    def _run_calls(self, jobs: Mapping[str, Any], deadline: float, *, probe: bool = False) -> dict[str, Any]:
        """Each job (fn(deadline)) on its switch's worker, all at once, `deadline` for all of them (without the
        deadline layer, tests: one after another); per switch its result or its exception."""
        if self.calls is not None:
            return self.calls.gather(jobs, deadline, probe=probe)
        out: dict[str, Any] = {}
        for name, fn in jobs.items():
            try:
                out[name] = fn(deadline)
            except Exception as e:  # the switch's own error, handed back as a value
                out[name] = e
        return out

    def _full_reconciles(self, handles: list[SwitchHandle], failures: frozenset[Failure], *,
                         reach_silent: bool = False) -> dict[str, Exception]:
        """Read back and write the difference on each switch (not one recorded down: the one-shot commands leave it
        alone too), all at once under one deadline; the errors, per switch (each stays for a full reconcile)."""
        down = planning.down_switches(failures)
        fabric = self._fabric(failures)
        jobs = {h.name: (lambda t, h=h: (time.monotonic(), h.reconcile(fabric, t))) for h in handles if h.name not in down}
        errors: dict[str, Exception] = {}
        for name, r in sorted(self._run_calls(jobs, self.reconcile_deadline, probe=reach_silent).items()):
            if isinstance(r, Exception):
                self._full.add(name)
                errors[name] = r
                continue
            t0, d = r
            self._full.discard(name)
            self.emit("reconciled", switch=name, inserts=d.inserts, modifies=d.modifies, deletes=d.deletes,
                      ms=round((time.monotonic() - t0) * 1000, 2))
            if self.on_reconcile is not None:
                self.on_reconcile(name, time.monotonic() - t0)
        return errors
