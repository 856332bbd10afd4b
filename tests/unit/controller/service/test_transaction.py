"""The failure transaction over hand-made collaborators (a store, a fence, a controller's view, a plan and an
apply step that log what they are asked): the order of its steps, the fence asked before the save, nothing
saved when the fence says deposed or a step before the save fails, a hand-off to a primary controller against
applying here, and a conflicting save read again."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from controller.model.denylist import Denylist
from controller.model.failures import DETECTOR, OPERATOR, Failure, LinkDown, Origin, SwitchDown
from controller.service.handoff import Controller
from controller.service.transaction import Proposal, Recorded, primary_of, record_then_apply
from controller.state.filestore import FileStore
from controller.state.statefile import load_origins, save_state
from controller.state.store import Conflict, Deposed, Record, Store

A = LinkDown("p0-t0-0", "p0-t1-1")
B = SwitchDown("p1-t1-0")
LEADER = Controller(pid=4242, election_id=7)


class LoggingStore(Store):
    """A record in memory whose every lock, read, save and view read is logged in `log` (shared with the other
    collaborators of a test, so the log is the order of all steps). `conflicts`: saves refused with Conflict
    before one goes through (another writer saved meanwhile: the revision moves on each time)."""

    where = "the test's store"

    def __init__(self, log: list[Any], record: Record | None = None, rev: int = 5, conflicts: int = 0,
                 view: dict[str, Any] | None = None, save_error: Exception | None = None) -> None:
        self.log, self.record, self.rev, self.conflicts = log, dict(record or {}), rev, conflicts
        self.view, self.save_error = view, save_error

    @contextlib.contextmanager
    def locked(self, timeout: float) -> Iterator[None]:
        self.log.append(("lock", timeout))
        try:
            yield
        finally:
            self.log.append("unlock")

    def load_rev(self) -> tuple[Record, int]:
        self.log.append("read")
        return dict(self.record), self.rev

    def save(self, failures: Iterable[Failure], origins: Mapping[Failure, Origin] | None = None,
             expect: int | None = None) -> int:
        self.log.append(("save", frozenset(failures), dict(origins) if origins is not None else None, expect))
        if self.save_error is not None:
            raise self.save_error
        if self.conflicts:
            self.conflicts -= 1
            self.rev += 1
            raise Conflict(f"{self.where}: the record changed")
        self.record = {f: (origins or {}).get(f, self.record.get(f, OPERATOR)) for f in failures}
        self.rev += 1
        return self.rev

    def read_view(self) -> dict[str, Any] | None:
        self.log.append("view")
        return self.view

    def events_since(self, after: int | None, limit: int = 100) -> tuple[list[tuple[int, dict[str, Any]]], int]:
        return [], 0

    def events_where(self) -> str:
        return self.where

    def load_denylist(self) -> tuple[Denylist, int]:  # the transaction never reads the denylist
        raise AssertionError("the failure transaction read the denylist")

    def save_denylist(self, dl: Denylist, expect: int | None = None) -> int:
        raise AssertionError("the failure transaction wrote the denylist")


def primary_view(c: Controller) -> dict[str, Any]:
    """A controller's published view: primary on one switch."""
    return {"pid": c.pid, "election_id": c.election_id, "sessions": {"p0-t0-0": {"role": "primary"}}}


def run(store: LoggingStore, log: list[Any], proposal: Any, **kw: Any) -> Recorded[Any, Any]:
    """The transaction with every step logged: `proposal` maps the record read to the Proposal."""
    def compute(record: Record) -> Proposal | None:
        log.append(("compute", dict(record)))
        return proposal(record)

    def plan(r: Recorded[Any, Any]) -> str:
        log.append(("plan", r.old, r.new, r.applies_here))
        return "the plan"

    def recorded(r: Recorded[Any, Any]) -> None:
        log.append(("recorded", r.rev))

    def apply(r: Recorded[Any, Any]) -> str:
        log.append(("apply", r.planned, r.old, r.new))
        return "applied"

    args: dict[str, Any] = {"lock_timeout": 3.0, "plan": plan, "recorded": recorded, "apply": apply,
                            "sleep": lambda s: log.append(("sleep", s)), **kw}
    return record_then_apply(store, store.load_rev, compute, **args)


def test_applied_here_the_steps_run_in_order_under_one_lock() -> None:
    log: list[Any] = []
    store = LoggingStore(log, {A: DETECTOR})

    def writes_allowed() -> None:
        log.append("fence")

    r = run(store, log, lambda rec: Proposal(frozenset(rec) | {B}), fence=writes_allowed, primary=primary_of(store))
    assert log == [("lock", 3.0), "read", ("compute", {A: DETECTOR}), "fence", "view",
                   ("plan", frozenset({A}), frozenset({A, B}), True),
                   ("save", frozenset({A, B}), None, 5), ("recorded", 6),
                   ("apply", "the plan", frozenset({A}), frozenset({A, B})), "unlock"]
    assert (r.saved, r.rev, r.read_rev, r.applied, r.handoff, r.controller) == (True, 6, 5, "applied", None, None)
    assert store.record == {A: DETECTOR, B: OPERATOR}  # a failure kept keeps its origin; the new one the operator's


def test_the_fence_is_asked_before_the_save_and_a_deposed_writer_saves_and_applies_nothing() -> None:
    log: list[Any] = []
    store = LoggingStore(log, {A: DETECTOR})

    def deposed() -> str:
        log.append("fence")
        return "the leader key is no longer this controller's"

    r = run(store, log, lambda rec: Proposal(frozenset()), fence=deposed, primary=primary_of(store))
    assert log == [("lock", 3.0), "read", ("compute", {A: DETECTOR}), "fence", "unlock"]
    assert r.held == "the leader key is no longer this controller's"
    assert (r.saved, r.planned, r.applied, r.handoff) == (False, None, None, None)
    assert r.new == frozenset({A})  # the record as read
    assert store.record == {A: DETECTOR}


def test_a_primary_controller_gets_the_change_handed_off_and_nothing_is_applied_here() -> None:
    log: list[Any] = []
    store = LoggingStore(log, {A: OPERATOR}, view=primary_view(LEADER))
    r = run(store, log, lambda rec: Proposal(frozenset({B})), primary=primary_of(store), election_id=3)
    assert [e if isinstance(e, str) else e[0] for e in log] == ["lock", "read", "compute", "view", "plan", "save",
                                                                "recorded", "unlock"]
    assert ("plan", frozenset({A}), frozenset({B}), False) in log  # planned, not for applying here
    assert r.controller == LEADER and r.applied is None and r.handoff is not None
    h = r.handoff
    assert (h.controller, h.added, h.removed, h.saved_rev, h.state) == (LEADER, frozenset({B}), frozenset({A}), 6, None)
    assert h.read == store.read_view  # not a state file: awaited in the store's view, by revision


def test_an_election_id_above_the_controllers_applies_here_and_names_the_one_it_overrules() -> None:
    log: list[Any] = []
    store = LoggingStore(log, {}, view=primary_view(LEADER))
    r = run(store, log, lambda rec: Proposal(frozenset({A})), primary=primary_of(store), election_id=8)
    assert (r.controller, r.overruled, r.applies_here, r.applied, r.handoff) == (None, LEADER, True, "applied", None)
    assert log[-2] == ("apply", "the plan", frozenset(), frozenset({A}))


def test_recording_only_hands_nothing_off_overrules_nobody_and_applies_nothing() -> None:
    log: list[Any] = []
    store = LoggingStore(log, {}, view=primary_view(LEADER))
    r = run(store, log, lambda rec: Proposal(frozenset({A})), primary=primary_of(store), election_id=8, apply=None)
    assert (r.controller, r.overruled, r.applies_here, r.handoff, r.saved) == (LEADER, None, False, None, True)
    assert not any(isinstance(e, tuple) and e[0] == "apply" for e in log)
    assert store.record == {A: OPERATOR}


def test_nothing_to_change_stops_after_compute() -> None:
    log: list[Any] = []
    store = LoggingStore(log, {A: OPERATOR}, view=primary_view(LEADER))
    r = run(store, log, lambda rec: None, fence=lambda: log.append("fence"), primary=primary_of(store))
    assert log == [("lock", 3.0), "read", ("compute", {A: OPERATOR}), "unlock"]
    assert (r.proposal, r.saved, r.new) == (None, False, frozenset({A}))


def test_a_change_not_to_be_saved_is_still_applied_here_and_never_handed_off() -> None:
    log: list[Any] = []
    here = LoggingStore(log, {A: DETECTOR})
    r = run(here, log, lambda rec: Proposal(frozenset(rec), save=False))
    assert [e if isinstance(e, str) else e[0] for e in log] == ["lock", "read", "compute", "plan", "apply", "unlock"]
    assert (r.saved, r.rev, r.applied) == (False, 5, "applied")
    log.clear()
    led = LoggingStore(log, {A: DETECTOR}, view=primary_view(LEADER))
    r = run(led, log, lambda rec: Proposal(frozenset(rec), save=False), primary=primary_of(led))
    assert (r.controller, r.handoff, r.applied) == (LEADER, None, None)


def test_a_plan_that_fails_leaves_the_record_unsaved_and_the_lock_let_go() -> None:
    log: list[Any] = []
    store = LoggingStore(log, {A: OPERATOR})

    def refuse(r: Recorded[Any, Any]) -> str:
        raise ValueError("p0-t0-0 cannot hold this plan")

    with pytest.raises(ValueError, match="cannot hold"):
        record_then_apply(store, store.load_rev, lambda rec: Proposal(frozenset()), lock_timeout=1.0, plan=refuse,
                          apply=lambda r: log.append("apply"))
    assert log == [("lock", 1.0), "read", "unlock"]
    assert store.record == {A: OPERATOR}


def test_a_conflicting_save_is_read_and_computed_again_with_the_new_revision() -> None:
    log: list[Any] = []
    store = LoggingStore(log, {A: OPERATOR}, conflicts=2)
    r = run(store, log, lambda rec: Proposal(frozenset(rec) | {B}), conflict_retries=3)
    saves = [e for e in log if isinstance(e, tuple) and e[0] == "save"]
    assert [s[3] for s in saves] == [5, 6, 7]  # each round saves against the revision it read
    assert [e for e in log if isinstance(e, tuple) and e[0] == "sleep"] == [("sleep", 0.01), ("sleep", 0.02)]
    assert log.count(("lock", 3.0)) == 3 and log.count("unlock") == 3
    assert [e[0] for e in log if isinstance(e, tuple) and e[0] == "apply"] == ["apply"]  # applied once, at the end
    assert (r.rev, store.record) == (8, {A: OPERATOR, B: OPERATOR})


def test_conflicts_past_the_retries_are_raised_and_nothing_is_applied() -> None:
    log: list[Any] = []
    store = LoggingStore(log, {}, conflicts=5)
    with pytest.raises(Conflict):
        run(store, log, lambda rec: Proposal(frozenset({A})), conflict_retries=2)
    assert not any(isinstance(e, tuple) and e[0] in ("apply", "recorded") for e in log)
    assert store.record == {}


def test_a_deposed_save_propagates_and_nothing_is_applied() -> None:
    log: list[Any] = []
    store = LoggingStore(log, {}, save_error=Deposed("not saved: this controller no longer leads"))
    with pytest.raises(Deposed):
        run(store, log, lambda rec: Proposal(frozenset({A})), conflict_retries=50)
    assert log.count(("lock", 3.0)) == 1  # read again would not help: not retried
    assert not any(isinstance(e, tuple) and e[0] in ("apply", "recorded") for e in log)


def test_a_state_file_change_is_handed_off_through_the_status_file_beside_it(tmp_path: Path) -> None:
    state = tmp_path / "fabric-state.json"
    save_state(state, [A])
    store = FileStore(state)
    r: Recorded[None, None] = record_then_apply(
        store, store.load_rev, lambda rec: Proposal(frozenset()), lock_timeout=1.0, primary=lambda: LEADER,
        apply=lambda r: pytest.fail("applied with a controller running"))
    assert load_origins(state) == {}
    h = r.handoff
    assert h is not None and (h.state, h.read, h.saved_rev, h.removed) == (state, None, 0, frozenset({A}))
    assert h.saved_ns == r.saved_ns > r.read_ns  # the controller's read must come after this save
