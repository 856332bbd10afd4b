"""`fabricctl run` on the kernel data plane: a switch port that loses carrier fails its link (or host port) in the
record, as the detector's, and so do a link's probes lost (controller.service.kernelprobe: K in a row or a gray ratio,
either direction); the switches the failure touches are reconciled over netlink. Carrier back on both ends restores
it, and with probes, M of them back in a row in both directions. Carrier comes from netlink link events
(controller.southbound.linkwatch); probes are UDP datagrams between the link's ends' link-local addresses.

The record is the state file `fabricctl fail/restore` share, under the same lock: an operator's failure is never
restored here (origins.merge), and a link the operator restored while it still lacks carrier is recorded again.
"""

from __future__ import annotations

import select
import threading
import time
from collections.abc import Callable, Mapping
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path

from controller import failover, ops
from controller.failover import Failure, HostPortDown, LinkDown, SwitchDown
from controller.model.topology import Topology
from controller.service.detect import Change
from controller.service.events import EventLog
from controller.service.kernelprobe import KernelProber
from controller.service.linkdetect import ProbeSettings
from controller.service.origins import merge
from controller.southbound.fleet import Fleet
from controller.southbound.linkwatch import LinkWatch
from controller.state.statefile import DETECTOR
from controller.state.statelock import state_lock

Carrier = Mapping[tuple[str, int], bool]  # (switch, port) -> carrier
RECHECK_S = 1.0  # with no carrier change, the record is read again this often (an operator's restore of a dead link)


def failures_of(topo: Topology, carrier: Carrier) -> frozenset[Failure]:
    """What the carrier says is down: a T0-T1 link with either end lacking carrier, a leaf's host port lacking it
    (ports not in `carrier` count as up)."""
    out: set[Failure] = set()
    for p in range(topo.planes):
        spines = topo.t1s(p)
        for leaf in topo.t0s(p):
            for j, port in enumerate(leaf.uplinks):
                spine = spines[j]
                if not (carrier.get((leaf.name, port), True) and carrier.get((spine.name, spine.downlinks[leaf.index]), True)):
                    out.add(LinkDown(leaf.name, spine.name))
            for port in leaf.host_ports:
                if not carrier.get((leaf.name, port), True):
                    out.add(HostPortDown(leaf.name, port))
    return frozenset(out)


@dataclass
class Healed:
    """One change of the record and its reconcile: what was added and removed, the switches written, the outcomes."""

    added: dict[Failure, str]
    removed: dict[Failure, str]
    touched: list[str]
    outcomes: list[ops.Outcome] = field(default_factory=list)
    ms: float = 0.0  # from the carrier change (or probe verdict) seen to every touched switch written
    evidence: dict[Failure, str] = field(default_factory=dict)  # which signal: "carrier lost", "3 consecutive ..."
    recorded_ns: int = 0  # monotonic when the record was saved

    @property
    def errors(self) -> list[str]:
        return [o.error for o in self.outcomes if o.error]


class CarrierHealer:
    """Keeps the record (and the switches) at what the carrier says, merged with the operator's failures."""

    def __init__(self, topo: Topology, program: str, state: Path, fleet: Fleet, *, lock_wait: float = 10.0) -> None:
        self.topo, self.program, self.state, self.fleet, self.lock_wait = topo, program, state, fleet, lock_wait

    def install(self) -> list[ops.Outcome]:
        """Every switch not recorded down to the plan of the recorded failures (as `fabricctl install`)."""
        record = failover.load_origins(self.state)
        down = ops.down_switches(record)
        names = [s.name for s in self.topo.switches if s.name not in down]
        fabric = ops.fabric(self.topo, self.program, record)  # type: ignore[arg-type]
        return self.fleet.prepare(fabric, names).run(dry_run=False, push="never")

    def update(self, carrier: Carrier, seen_ns: int | None = None, probed: Mapping[Failure, str] | None = None,
               restored: Mapping[Failure, str] | None = None) -> Healed | None:
        """Merge what the carrier says, and the links the probes hold down (`probed`: with their evidence), into the
        record under its lock; reconcile the switches the change touches. None when the record already says it.
        `restored`: the evidence of links whose probes came back (else a removal says "carrier back")."""
        by_carrier = failures_of(self.topo, carrier)
        detected = by_carrier | frozenset(probed or ())
        with state_lock(self.state, self.lock_wait):
            recorded = failover.load_origins(self.state)
            stale = {f for f, o in recorded.items() if o == DETECTOR and f not in detected
                     and (probed is not None or not isinstance(f, SwitchDown))}  # carrier says nothing of switches
            m = merge(recorded, detected, stale, detected)
            if m.record == recorded:
                return None
            change = ops.failure_change(self.topo, self.program, recorded, m.record)  # type: ignore[arg-type]
            back = sorted(ops.down_switches(recorded) - ops.down_switches(m.record))  # restored: written in full
            touched = change.touched + [n for n in back if n not in change.touched]
            prepared = self.fleet.prepare(change.fabric, touched)  # refused here: nothing recorded
            failover.save_state(self.state, m.record, m.record)
            recorded_ns = time.monotonic_ns()
            outcomes = prepared.run(dry_run=False, push="never")
        start = time.monotonic_ns() if seen_ns is None else seen_ns
        evidence = {f: "carrier lost" if f in by_carrier else (probed or {}).get(f, "") for f in m.added}
        evidence |= {f: (restored or {}).get(f, "carrier back") for f in m.removed}
        return Healed(dict(m.added), dict(m.removed), touched, outcomes,
                      round((time.monotonic_ns() - start) / 1e6, 2), evidence, recorded_ns)


def run(topo: Topology, program: str, state: Path, fleet: Fleet, events: EventLog, stop: threading.Event,
        duration: float = 0.0, say: Callable[[str], None] = print, probing: ProbeSettings | None = None,
        warn: Callable[[str], None] | None = None) -> int:
    """Watch every switch's carrier (and with `probing`, probe every link) and heal until `stop` (or `duration`
    seconds); the number of failed reconciles. `warn` gets the probes' socket errors (default: `say`)."""
    healer = CarrierHealer(topo, program, state, fleet)
    errors = 0
    with LinkWatch(topo) as watch, (KernelProber(topo, probing, warn or say) if probing else nullcontext()) as prober:
        bad = [o for o in healer.install() if not o.ok]
        for o in bad:
            say(f"error: {o.error}")
        errors += len(bad)
        if prober is not None:  # the detector's recorded links stay down until their probes come back M times
            prober.seed_down({f for f, o in failover.load_origins(state).items()
                              if o == DETECTOR and isinstance(f, (LinkDown, SwitchDown))})
        events.emit("started", dataplane="kernel", signal="carrier+probes" if prober else "carrier",
                    switches=len(topo.switches), **(_probe_fields(prober) if prober else {}))

        def update(seen: int | None) -> int:
            if prober is None:
                return _report(healer.update(watch.carrier, seen), topo, events, say)
            dead = {f for f in failures_of(topo, watch.carrier) if isinstance(f, LinkDown)}
            for s, _ in prober.force_down(dead, "carrier lost"):
                events.emit("probe_down", link=failover.failure_to_json(s.path.link), direction=s.path.label,
                            evidence="carrier lost")
            return _report(healer.update(watch.carrier, seen, prober.failures(), prober.restored()), topo, events, say)

        errors += update(None)
        end = time.monotonic() + duration if duration else None
        last = time.monotonic()
        fds = watch.fds() + (prober.fds() if prober else [])
        armed = False
        while not stop.is_set() and (end is None or time.monotonic() < end):
            now = time.monotonic()
            wait = min(0.2, prober.wait(now) if prober else 0.2, end - now if end else 0.2)
            ready, _, _ = select.select(fds, [], [], max(0.0, wait))
            seen = time.monotonic_ns()
            changes = watch.take(ready)
            for c in changes:
                events.emit("carrier", switch=c.switch, port=c.port, up=c.up)
            flips = prober.step(ready, seen) if prober else []
            if prober is not None and not armed and all(s.armed for s in prober.judge.states):
                armed = True  # every direction had a probe arrive: its losses count from here
                events.emit("probes_armed", directions=len(prober.judge.states))
            for s, ch in flips:
                events.emit("probe_down" if ch is Change.DOWN else "probe_up",
                            link=failover.failure_to_json(s.path.link), direction=s.path.label,
                            evidence=s.detector.reason)
            if changes or flips or time.monotonic() - last >= RECHECK_S:
                last = time.monotonic()
                errors += update(seen if changes or flips else None)
        if prober is not None:
            events.emit("probes", **_probe_fields(prober), sent=sum(s.sent for s in prober.judge.states),
                        lost=sum(s.lost for s in prober.judge.states), late=sum(s.late for s in prober.judge.states),
                        unsent=sum(s.unsent for s in prober.judge.states),
                        unarmed=sum(s.unarmed for s in prober.judge.states),
                        strays=prober.judge.strays + prober.socks.strays, rounds=prober.rounds, skipped=prober.skipped)
    events.emit("stopped")
    return errors


def _probe_fields(prober: KernelProber) -> dict[str, object]:
    t = prober.settings.thresholds
    return {"directions": len(prober.judge.states), "period_ms": prober.settings.period * 1000,
            "timeout_ms": prober.settings.timeout * 1000, "fail_after": t.fail_after, "restore_after": t.restore_after}


def _kind(f: Failure) -> str:
    return "link" if isinstance(f, LinkDown) else "switch" if isinstance(f, SwitchDown) else "port"


def _report(h: Healed | None, topo: Topology, events: EventLog, say: Callable[[str], None]) -> int:
    if h is None:
        return 0
    for f in sorted(h.added, key=str):
        events.emit(f"{_kind(f)}_down", failure=failover.failure_to_json(f),
                    evidence=h.evidence.get(f, ""))
        say(f"down: {ops.describe_failure(topo, f)} ({h.evidence.get(f, '')})")
    for f in sorted(h.removed, key=str):
        events.emit(f"{_kind(f)}_up", failure=failover.failure_to_json(f),
                    evidence=h.evidence.get(f, ""))
        say(f"up: {ops.describe_failure(topo, f)} ({h.evidence.get(f, '')})")
    events.emit("applied", touched=h.touched, ms=h.ms, errors=h.errors, recorded_mono_ns=h.recorded_ns)
    say(f"applied in {h.ms:.1f} ms: {len(h.touched)} switches reconciled ({', '.join(h.touched)})"
        + (f"; {len(h.errors)} failed: {h.errors[0]}" if h.errors else ""))
    return len(h.errors)

