"""Our scheduling of calls to switches, without switches: SwitchCalls' deadlines and silence, the liveness
rule, and a prober whose one switch stops answering (fakes of the reading seam, not of a switch)."""

from __future__ import annotations

from tests.paths import UNIT_DATA

import threading
import time

import pytest

from controller.runtime.p4rt import P4RuntimeError
from controller.plan.probes import Probe, probe_frame
from controller.service.detect import Change, Thresholds
from controller.service.liveness import Pinger, Signals, SwitchHealth, judge
from controller.service.prober import LATE, Prober
from controller.service.switchcalls import CallLate, SwitchCalls, SwitchSilent
from controller.model.topology import load

DATA = UNIT_DATA
HUNG = "p0-t1-1"
BOUND = 30.0  # generous bound on any wait here; nothing asserts how long a step took
LATE_AFTER = 0.05  # the deadline of a call made to a switch held by an event (late whatever the machine's load)


# --- SwitchCalls ---------------------------------------------------------------------------------

def test_a_call_past_its_deadline_makes_only_that_switch_silent_until_it_answers():
    calls = SwitchCalls(["a", "b"], deadline=BOUND)  # calls that are answered have all the time they need
    release = threading.Event()
    try:
        with pytest.raises(CallLate):
            calls.call("a", lambda t: release.wait(BOUND), LATE_AFTER)  # a switch that ignores every deadline
        assert calls.silent_since("a") is not None
        with pytest.raises(SwitchSilent):  # refused at once: nothing queues behind a silent switch
            calls.submit("a", lambda t: "never run")
        assert calls.call("b", lambda t: "answer") == "answer"  # the other switch is untouched
        assert calls.silent_since("b") is None
        release.set()
        # the liveness check still reaches the silent switch; its answer ends the silence
        assert calls.submit("a", lambda t: "pong", probe=True).result(timeout=BOUND) == "pong"
        assert calls.silent_since("a") is None
        assert calls.call("a", lambda t: "again") == "again"
    finally:
        release.set()
        calls.close()


def test_a_deadline_exceeded_error_is_no_answer_and_an_application_error_is_one():
    calls = SwitchCalls(["a"], deadline=BOUND)

    def deadline_exceeded(t: float) -> None:
        raise P4RuntimeError("a: Read on x failed: DEADLINE_EXCEEDED Deadline Exceeded")

    def refused(t: float) -> None:
        raise P4RuntimeError("a: Read on x failed: NOT_FOUND no such counter")

    try:
        with pytest.raises(P4RuntimeError):
            calls.call("a", deadline_exceeded)
        assert calls.silent_since("a") is not None and calls.late("a") == 1
        with pytest.raises(P4RuntimeError):
            calls.submit("a", refused, probe=True).result(timeout=BOUND)
        assert calls.silent_since("a") is None  # it answered, if only to refuse
    finally:
        calls.close()


def test_gather_waits_for_the_slowest_at_most_the_deadline():
    calls = SwitchCalls(["a", "b", "c"], deadline=BOUND)
    release = threading.Event()
    try:
        # b is held until released: late whatever the deadline; a and c answer at once, given 2 s to be seen
        out = calls.gather({"a": lambda t: 1, "b": lambda t: release.wait(BOUND), "c": lambda t: 3}, 2.0)
        assert out["a"] == 1 and out["c"] == 3 and isinstance(out["b"], CallLate)
        out = calls.gather({"a": lambda t: 1, "b": lambda t: 2})
        assert out["a"] == 1 and isinstance(out["b"], SwitchSilent)
    finally:
        release.set()
        calls.close()


# --- the liveness rule ---------------------------------------------------------------------------

def sig(silent: int | None, answered: int = 0, others: int = 0, probes: int = 0, fabric: int = 0) -> Signals:
    return Signals(silent, answered, others, probes, fabric)


def test_a_switch_is_failed_only_when_it_alone_went_silent_and_no_probe_crosses_it():
    up = SwitchHealth()
    assert judge(up, sig(None, 100, 100, 100, 100), 200) == (up, None)
    # silent since 100, others answered later calls, probes elsewhere came, none through it: down
    h, change = judge(up, sig(100, 90, 150, 90, 160), 200)
    assert change is Change.DOWN and not h.up and h.since_ns == 200 and "no answer" in h.reason
    # the controller stalled (no other switch answered a later call): nothing judged
    assert judge(up, sig(100, 90, 95, 90, 160), 200) == (up, None)
    # nothing arrived anywhere since (the probes stalled, not this switch): nothing judged
    assert judge(up, sig(100, 90, 150, 90, 95), 200) == (up, None)
    # a probe through it sent after it went silent arrived: slow control plane, forwarding switch: kept
    assert judge(up, sig(100, 90, 150, 120, 160), 200) == (up, None)


def test_a_failed_switch_comes_back_when_it_answers_and_its_probes_arrive():
    down = SwitchHealth(up=False, since_ns=200)
    assert judge(down, sig(None, 300, 300, 150, 300), 400) == (down, None)  # answers, probes not yet
    assert judge(down, sig(None, 150, 300, 300, 300), 400) == (down, None)  # probes, no answer since
    assert judge(down, sig(310, 300, 300, 300, 300), 400) == (down, None)  # silent again
    h, change = judge(down, sig(None, 300, 300, 300, 300), 400)
    assert change is Change.UP and h.up and h.since_ns == 400


# --- a prober with one switch that stops answering ---------------------------------------------

class FakeConn:
    """The reading seam of one switch: counters, Capabilities. `hung` set: every call fails the way gRPC
    ends one that ran out its deadline (DEADLINE_EXCEEDED), at once: the deadlines here are generous, so on a
    loaded machine no answering switch is taken for a silent one."""

    def __init__(self, name: str, hung: threading.Event) -> None:
        self.name, self.hung = name, hung
        self.calls = 0

    def _answer(self, t: float) -> None:
        self.calls += 1
        if self.hung.is_set():
            raise P4RuntimeError(f"{self.name}: Read failed: DEADLINE_EXCEEDED Deadline Exceeded")

    def read_counter(self, name: str, index: int, timeout: float) -> list:
        self._answer(timeout)
        from controller.plan.entries import CounterValue
        return [CounterValue(name, index, 0, 100)]

    def capabilities(self, timeout: float) -> str:
        self._answer(timeout)
        return "1.3.0"


class FakeSession:
    """The session seam over the fake connection: the liveness call and the port counters."""

    port_counters = True

    def __init__(self, conn: FakeConn) -> None:
        self.conn, self.ready = conn, True

    def ping(self, timeout: float) -> None:
        self.conn.capabilities(timeout)

    def port_count(self, port: int, tx: bool, timeout: float) -> int:
        return self.conn.read_counter("tx" if tx else "rx", port, timeout)[0].packets


def test_one_silent_switch_is_recorded_failed_and_holds_up_no_other_probing():
    topo = load(DATA / "two_plane_lab.yaml")
    hung = {sw.name: threading.Event() for sw in topo.switches}
    sessions = {sw.name: FakeSession(FakeConn(sw.name, hung[sw.name])) for sw in topo.switches}
    calls = SwitchCalls(sessions, deadline=BOUND)
    pinger = Pinger(calls, sessions, lambda n: True)
    links: list[tuple[str, Change]] = []
    switches: list[tuple[str, Change]] = []
    p = Prober(topo, sessions, Thresholds(fail_after=3, restore_after=3), period=0.01, timeout=0.02,
               on_change=lambda s, c: links.append((s.d.label, c)), calls=calls,
               on_switch=lambda n, c, why: switches.append((n, c)))
    rounds = {"before": 0, "hung": 0, "after": 0}

    def one_round(phase: str) -> None:
        """Every direction sends a probe now; those that do not touch a hung switch arrive."""
        sent = time.monotonic_ns()
        pinger.ping_all()
        for s in p.states:
            s.seq += 1
            s.outstanding.append((s.seq, sent))
            if not (hung[s.d.src].is_set() or hung[s.d.dst].is_set()):
                p._arrived(s.d.dst, probe_frame(Probe(s.d.link_id, s.d.direction, s.seq, sent)), s.d.dst_port,
                           sent + 1000)
        time.sleep(0.01)
        p._judge(time.monotonic_ns())
        p._judge_switches(time.monotonic_ns())
        rounds[phase] += 1

    def scenario() -> None:
        for _ in range(5):
            one_round("before")
        hung[HUNG].set()
        while not switches and rounds["hung"] < 1000:
            one_round("hung")
        # a counter read of a direction through the hung switch does not wait on it
        d = next(s.d for s in p.states if s.d.dst == HUNG)
        assert p.port_counts(d) == LATE
        hung[HUNG].clear()
        while len(switches) < 2 and rounds["after"] < 1000:
            one_round("after")

    t = threading.Thread(target=scenario, daemon=True)
    t.start()
    t.join(BOUND)
    try:
        assert not t.is_alive(), f"the scenario did not end within {BOUND:.0f} s: {rounds}"
        assert switches == [(HUNG, Change.DOWN), (HUNG, Change.UP)]
        # its links' probes were lost, but the switch was the failure: no link was failed for them, and
        # every other link kept going
        assert links == []
        assert all(s.detector.up for s in p.states)
    finally:
        for e in hung.values():
            e.clear()
        calls.close()


def test_fabricctl_status_names_a_switch_that_does_not_answer():
    from controller.service.status import lines

    view = {"pid": 1, "election_id": 10, "links": {},
            "sessions": {"p0-t1-0": {"role": "primary", "answers": True, "late_calls": 0},
                         "p0-t1-1": {"role": "primary", "answers": False, "late_calls": 3},
                         "p0-t0-0": {"role": "backup"}}}
    assert lines(view) == ["controller: pid 1, election id 10, 2 primary / 1 backup / 0 down",
                           "  switch p0-t1-1: NOT ANSWERING (3 calls past their deadline)"]
