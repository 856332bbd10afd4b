"""`fabricctl run` on the kernel data plane: a switch port that loses carrier fails its link (or host port) in the
record, as the detector's, and the switches that failure touches are reconciled over netlink; carrier back on both
ends restores it. The kernel has no P4 probes: carrier (netlink link events, controller.southbound.linkwatch) is
the signal it gives.

The record is the state file `fabricctl fail/restore` share, under the same lock: an operator's failure is never
restored here (origins.merge), and a link the operator restored while it still lacks carrier is recorded again.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from controller import failover, ops
from controller.failover import Failure, HostPortDown, LinkDown, SwitchDown
from controller.model.topology import Topology
from controller.service.events import EventLog
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
    ms: float = 0.0  # from the carrier change seen to every touched switch written

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

    def update(self, carrier: Carrier, seen_ns: int | None = None) -> Healed | None:
        """Merge what the carrier says into the record under its lock; reconcile the switches the change touches.
        None when the record already says it."""
        detected = failures_of(self.topo, carrier)
        with state_lock(self.state, self.lock_wait):
            recorded = failover.load_origins(self.state)
            stale = {f for f, o in recorded.items() if o == DETECTOR and not isinstance(f, SwitchDown) and f not in detected}
            m = merge(recorded, detected, stale, detected)
            if m.record == recorded:
                return None
            change = ops.failure_change(self.topo, self.program, recorded, m.record)  # type: ignore[arg-type]
            prepared = self.fleet.prepare(change.fabric, change.touched)  # refused here: nothing recorded
            failover.save_state(self.state, m.record, m.record)
            outcomes = prepared.run(dry_run=False, push="never")
        start = time.monotonic_ns() if seen_ns is None else seen_ns
        return Healed(dict(m.added), dict(m.removed), change.touched, outcomes, round((time.monotonic_ns() - start) / 1e6, 2))


def run(topo: Topology, program: str, state: Path, fleet: Fleet, events: EventLog, stop: threading.Event,
        duration: float = 0.0, say: Callable[[str], None] = print) -> int:
    """Watch every switch's carrier and heal until `stop` (or `duration` seconds); the number of failed reconciles."""
    healer = CarrierHealer(topo, program, state, fleet)
    errors = 0
    with LinkWatch(topo) as watch:
        bad = [o for o in healer.install() if not o.ok]
        for o in bad:
            say(f"error: {o.error}")
        errors += len(bad)
        events.emit("started", dataplane="kernel", signal="carrier", switches=len(topo.switches))
        errors += _report(healer.update(watch.carrier), topo, events, say)
        end = time.monotonic() + duration if duration else None
        last = time.monotonic()
        while not stop.is_set() and (end is None or time.monotonic() < end):
            wait = 0.2 if end is None else max(0.0, min(0.2, end - time.monotonic()))
            changes = watch.poll(wait)
            seen = time.monotonic_ns()
            for c in changes:
                events.emit("carrier", switch=c.switch, port=c.port, up=c.up)
            if changes or time.monotonic() - last >= RECHECK_S:
                last = time.monotonic()
                errors += _report(healer.update(watch.carrier, seen if changes else None), topo, events, say)
    events.emit("stopped")
    return errors


def _report(h: Healed | None, topo: Topology, events: EventLog, say: Callable[[str], None]) -> int:
    if h is None:
        return 0
    for f in sorted(h.added, key=str):
        events.emit("link_down" if isinstance(f, LinkDown) else "port_down", failure=failover.failure_to_json(f),
                    evidence="carrier lost")
        say(f"down: {ops.describe_failure(topo, f)} (carrier lost)")
    for f in sorted(h.removed, key=str):
        events.emit("link_up" if isinstance(f, LinkDown) else "port_up", failure=failover.failure_to_json(f),
                    evidence="carrier back")
        say(f"up: {ops.describe_failure(topo, f)} (carrier back)")
    events.emit("applied", touched=h.touched, ms=h.ms, errors=h.errors)
    say(f"applied in {h.ms:.1f} ms: {len(h.touched)} switches reconciled ({', '.join(h.touched)})"
        + (f"; {len(h.errors)} failed: {h.errors[0]}" if h.errors else ""))
    return len(h.errors)

