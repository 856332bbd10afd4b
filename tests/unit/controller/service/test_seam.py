"""The service over the per-switch seam, without switches: the healer's switch calls under one deadline with a frozen
switch (a test double at the handle boundary), the fence asked before a save, the stall rule against a plane gone
dark, the prober over a probe transport of fakes, and the lease between two controllers on one state file."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from controller.state.statefile import load_origins, save_state
from controller.model.failures import LinkDown
from controller.model.topology import load
from controller.service.detect import Change, Thresholds
from controller.service.healer import Healer
from controller.service.lease import ControllerLease
from controller.service.prober import Prober, is_stall
from controller.service.switchcalls import SwitchCalls
from controller.southbound.base import PlanChange, ProbeIn, SwitchSync
from controller.model.failures import DETECTOR
from tests.paths import LAB_YAML

BOUND = 30.0  # generous bound on any wait here; nothing asserts how long a step took
A = LinkDown("p0-t0-0", "p0-t1-1")


def _wait(what: str, ok: Any, limit: float = BOUND) -> None:
    end = time.monotonic() + limit
    while not ok():
        assert time.monotonic() < end, f"not within {limit} s: {what}"
        time.sleep(0.005)


class FakeSwitch:
    """A switch at the handle boundary: its deltas and reconciles counted; `freeze()` makes every later call hang
    (past any deadline, as a switch that stopped answering) until `thaw()`."""

    def __init__(self, name: str) -> None:
        self.name, self.ready = name, True
        self.writes: list[int] = []
        self.reconciles = 0
        self._frozen = threading.Event()
        self._thawed = threading.Event()

    def freeze(self) -> None:
        self._frozen.set()

    def thaw(self) -> None:
        self._thawed.set()

    @property
    def hanging(self) -> bool:
        return self._frozen.is_set() and not self._thawed.is_set()

    def _answer(self) -> None:
        if self._frozen.is_set():
            self._thawed.wait(BOUND)

    def plan_delta(self, change: PlanChange) -> object:
        return change.p4_deltas().get(self.name) or None

    def write_delta(self, delta: Any, timeout: float) -> int:
        self._answer()
        self.writes.append(len(delta))
        return len(delta)

    def reconcile(self, fabric: Any, timeout: float) -> SwitchSync:
        self._answer()
        self.reconciles += 1
        return SwitchSync(self.name)


def _healer(tmp_path: Path, **kw: Any) -> tuple[Healer, dict[str, FakeSwitch], list[dict[str, Any]], SwitchCalls]:
    topo = load(LAB_YAML)
    switches = {s.name: FakeSwitch(s.name) for s in topo.switches}
    events: list[dict[str, Any]] = []
    calls = SwitchCalls(list(switches), deadline=0.2)
    h = Healer(topo, "srv6_spray", tmp_path / ".fabric-state.json", switches,  # type: ignore[arg-type]
               lambda kind, **f: events.append({"kind": kind, **f}), calls=calls, write_deadline=0.2, **kw)
    return h, switches, events, calls


def _in_thread(fn: Any) -> threading.Thread:
    t = threading.Thread(target=fn, daemon=True)
    t.start()
    return t


def test_a_frozen_switch_delays_no_other_switchs_delta_and_waits_for_a_full_reconcile(tmp_path: Path) -> None:
    h, switches, events, calls = _healer(tmp_path)
    frozen = switches["p0-t1-1"]
    frozen.freeze()
    try:
        h.link_changed(A, True)
        tick = _in_thread(h.tick)
        _wait("the pass ended", lambda: not tick.is_alive())
        assert frozen.hanging  # the pass ended while the frozen switch still had its call
        assert load_origins(tmp_path / ".fabric-state.json") == {A: DETECTOR}
        written = next(e for e in events if e["kind"] == "deltas_written")["switches"]
        assert "p0-t1-1" not in written and written and all(switches[n].writes for n in written)
        assert [e["switch"] for e in events if e["kind"] == "delta_failed"] == ["p0-t1-1"]
        assert h.pending == ["p0-t1-1"]  # read back and written in full once it answers
    finally:
        frozen.thaw()
        calls.close()


def test_a_reconcile_of_a_frozen_switch_holds_neither_lock_so_the_record_and_other_writes_go_on(tmp_path: Path) -> None:
    h, switches, events, calls = _healer(tmp_path, reconcile_deadline=BOUND)
    frozen = switches["p1-t1-0"]  # untouched by A: the pass has nothing to write there
    frozen.freeze()
    try:
        becoming_primary = _in_thread(lambda: h.reconcile_now(frozen))  # type: ignore[arg-type]
        _wait("the reconcile reached the switch", lambda: not calls.idle("p1-t1-0"))
        h.link_changed(A, True)
        tick = _in_thread(h.tick)
        _wait("the pass ended", lambda: not tick.is_alive())
        assert becoming_primary.is_alive() and frozen.hanging  # still waiting on the frozen switch meanwhile
        assert load_origins(tmp_path / ".fabric-state.json") == {A: DETECTOR}
        assert any(switches[n].writes for n in ("p0-t0-0", "p0-t0-1"))
    finally:
        frozen.thaw()
        becoming_primary.join(BOUND)
        calls.close()
    assert frozen.reconciles == 2  # once more once thawed: to the plan the pass moved on to meanwhile


def test_a_fenced_healer_saves_nothing_and_saves_once_the_fence_opens(tmp_path: Path) -> None:
    fence: list[str | None] = ["lease not renewed"]
    h, switches, events, calls = _healer(tmp_path, fence=lambda: fence[0])
    state = tmp_path / ".fabric-state.json"
    save_state(state, [])
    before = state.read_bytes()
    try:
        h.link_changed(A, True)
        h.tick()
        assert state.read_bytes() == before  # a deposed leader writes nothing into the shared record
        assert [e["kind"] for e in events] == ["writes_held"]
        assert not any(s.writes for s in switches.values())
        fence[0] = None
        h.tick()
        assert load_origins(state) == {A: DETECTOR}
        assert [e["kind"] for e in events][1:3] == ["failures_recorded", "writes_resumed"]
    finally:
        calls.close()


# --- the stall rule ---------------------------------------------------------------------------------

MS = 1_000_000


@pytest.mark.parametrize("lossy, late_ms, answered_later, stall", [
    (8, 0, True, False),     # a whole plane dark: the loop kept time, the other plane's probes came back
    (16, 0, True, False),    # every direction lost while later probes still arrived somewhere: the fabric
    (8, 500, True, True),    # the send loop itself ran half a second late: the controller stalled
    (8, 0, False, True),     # nothing sent after the lost ones came back anywhere: the controller's side
    (7, 500, False, False),  # under half: a failure of links, whatever the loop did
])
def test_a_stall_needs_evidence_a_stall_would_also_stop(lossy: int, late_ms: int, answered_later: bool,
                                                         stall: bool) -> None:
    assert is_stall(lossy, 16, fraction=0.5, loop_late_ns=late_ms * MS, late_bound_ns=80 * MS,
                    answered_later=answered_later) is stall


def test_few_directions_are_never_a_stall() -> None:
    assert not is_stall(4, 4, fraction=0.5, loop_late_ns=10**9, late_bound_ns=80 * MS, answered_later=False)


class Wire:
    """Probes between fake switches: what a switch sends arrives at its far end at once, unless that end is dark."""

    def __init__(self) -> None:
        self.dark: set[str] = set()
        self.queued: dict[str, list[ProbeIn]] = {}
        self.peer: dict[tuple[str, int], tuple[str, int]] = {}


class FakeTransport:
    """A switch's probe transport at the handle boundary (the kernel's: no host probes, no port counters)."""

    host_probes = False
    port_counters = False
    arm_grace_ns = 0

    def __init__(self, name: str, wire: Wire) -> None:
        self.name, self.wire, self.ready = name, wire, True

    def send_probe(self, port: int, link_id: int, direction: int, seq: int, sent_ns: int, target: int = 0) -> None:
        far, far_port = self.wire.peer[self.name, port]
        if far in self.wire.dark or self.name in self.wire.dark:  # blackholed, carrier up: nothing says so
            return
        self.wire.queued.setdefault(far, []).append(ProbeIn(far_port, link_id, direction, seq, sent_ns,
                                                            time.monotonic_ns()))

    def probes_in(self) -> list[ProbeIn]:
        return self.wire.queued.pop(self.name, [])


def test_a_plane_gone_dark_fails_its_links_and_the_other_plane_stays_up() -> None:
    topo = load(LAB_YAML)
    wire = Wire()
    handles = {s.name: FakeTransport(s.name, wire) for s in topo.switches}
    changes: list[tuple[LinkDown, Change]] = []
    p = Prober(topo, handles, Thresholds(fail_after=3, restore_after=5), period=0.02, timeout=0.08,
               on_change=lambda s, c: changes.append((s.d.link, c)), hosts=True)  # type: ignore[arg-type]
    for s in p.states:
        wire.peer[s.d.src, s.d.src_port] = (s.d.dst, s.d.dst_port)
    plane0 = {s.d.link for s in p.states if topo.switch(s.d.src).plane == 0}
    assert not any(s.d.host for s in p.states)  # this transport probes no host NIC
    p.start()
    try:
        _wait("probes arriving", lambda: p.packets_in > 4 * len(p.states))
        wire.dark = {s.name for s in topo.t1s(0)}  # plane 0's spines blackholed, carrier up
        _wait("plane 0's links down", lambda: {link for link, c in changes if c is Change.DOWN} == plane0)
    finally:
        p.stop()
    assert all(s.detector.up for s in p.states if topo.switch(s.d.src).plane == 1)


def test_a_second_controller_cannot_take_the_lease_and_names_the_holder(tmp_path: Path) -> None:
    import os

    state = tmp_path / ".fabric-state.json"
    first, second = ControllerLease(state), ControllerLease(state)
    assert first.take()
    try:
        assert not second.take()  # a flock is per open file: a second holder in this process is refused too
        assert second.holder() == f"controller pid {os.getpid()} holds {state}.controller"
        stop = threading.Event()
        stop.set()
        assert second.wait(stop) is False
    finally:
        first.release()
    assert second.take()
    second.release()
