"""The failure transaction: record a change of the failure set, then hand it to the running controller or
apply it here. Every writer of the record takes this one path, in this order: `fabricctl fail/restore`, a
lab's fail and restore, and the controller's healer (what its detectors saw).

    1. lock       the record's lock (the state file's flock; etcd: none, step 7 compares the revision read)
    2. read       the record and its revision
    3. compute    the record wanted (the caller's rule: an operator's change, the detector's merge);
                  None: nothing to change, and nothing more is done
    4. fence      a leader asks whether it may still write, before it saves: a deposed one saves nothing
    5. who        the primary controller publishing its view applies the change, unless this writer's
                  election id is above its own (then this writer applies it, deposing it there)
    6. plan       the caller plans the change (and checks it, when it applies it here) before the record changes
    7. save       the record, if the change says so (etcd: only if still at the revision read; Conflict
                  otherwise, and the transaction runs again from step 1, up to `conflict_retries` times)
    8. hand off   to that controller (a Handoff, which the caller waits for once the lock is let go), or
       apply      here, still under the lock: two writers never interleave, so no switch holds a set the
                  record lacks

Each caller brings its collaborators as arguments: the store, its read and its rule, the fence, who applies,
the plan, what it reports once the record is saved, and how it applies.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Generic, TypeVar

from controller.model.failures import Failure, Origin
from controller.service.handoff import Controller, Handoff, primary_in
from controller.state.filestore import FileStore
from controller.state.store import Conflict, Record, Store

P = TypeVar("P")  # what the caller's plan step returns
A = TypeVar("A")  # what the caller's apply step returns

CONFLICT_BACKOFF = 0.01  # seconds, times the attempt, between read-compute-save rounds after a Conflict


@dataclass(frozen=True)
class Proposal:
    """The record wanted: the failure set, the origins to save it with (None: each failure's as recorded,
    else the operator's), and whether the record is to be saved (False: it stays as read)."""

    failures: frozenset[Failure]
    origins: Mapping[Failure, Origin] | None = None
    save: bool = True


@dataclass
class Recorded(Generic[P, A]):
    """What a transaction did, step by step (filled as it goes: the plan and apply steps see it so far)."""

    old: frozenset[Failure]  # the failure set read
    read_rev: int  # the store's revision of that read (the state file: 0)
    read_ns: int  # monotonic ns just before the read (a save before it saw the lock free)
    proposal: Proposal | None = None  # None: nothing to change
    held: str | None = None  # the fence's reason: nothing saved, nothing applied
    controller: Controller | None = None  # the primary controller that applies it (None: this writer, or nobody)
    overruled: Controller | None = None  # the controller this writer's higher election id writes over
    applies_here: bool = False  # this writer applies the change itself (under the lock)
    planned: P | None = None
    saved: bool = False
    rev: int = 0  # the record's revision now: the save's, else the read's
    saved_ns: int = 0  # monotonic ns of the save
    handoff: Handoff | None = None  # handed to `controller`: the caller waits for it after the lock
    applied: A | None = None

    @property
    def new(self) -> frozenset[Failure]:
        """The failure set the change goes to (the set read, when the fence held it or nothing was to change)."""
        return self.proposal.failures if self.proposal is not None and not self.held else self.old


def primary_of(store: Store) -> Callable[[], Controller | None]:
    """Who applies a change recorded in `store`: the controller whose published view says it is primary on a
    switch (a state file's status file; etcd: the leader's view)."""
    return lambda: primary_in(store.read_view())


def handoff_for(store: Store, controller: Controller, saved_ns: int, rev: int, old: frozenset[Failure],
                new: frozenset[Failure], describe: Callable[[Failure], str]) -> Handoff:
    """The hand-off of a saved change to `controller`: awaited in the status file beside a state file (the
    controller's read ordered by the same monotonic clock), in the leader's view in etcd (by revision)."""
    if isinstance(store, FileStore):
        return Handoff(store.path, controller, saved_ns, new - old, old - new, describe)
    return Handoff(None, controller, saved_ns, new - old, old - new, describe, read=store.read_view, saved_rev=rev)


def record_then_apply(
    store: Store,
    read: Callable[[], tuple[Record, int]],
    compute: Callable[[Record], Proposal | None],
    *,
    lock_timeout: float,
    fence: Callable[[], str | None] | None = None,
    primary: Callable[[], Controller | None] | None = None,
    election_id: int | None = None,
    plan: Callable[[Recorded[P, A]], P] | None = None,
    recorded: Callable[[Recorded[P, A]], None] | None = None,
    apply: Callable[[Recorded[P, A]], A] | None = None,
    describe: Callable[[Failure], str] = str,
    conflict_retries: int = 1,
    sleep: Callable[[float], None] = time.sleep,
) -> Recorded[P, A]:
    """Run the transaction (the module's steps). `read` gives the record and its revision
    under the lock; `compute` the Proposal. `fence` (None: never held) is asked before any save. `primary` (None:
    nobody else applies) names the controller to hand a saved change to, unless `election_id` is above its own.
    `plan` runs before the save, `recorded` after it, `apply` (None: only record; nothing handed off or applied)
    when no controller takes the change. Conflict after `conflict_retries` rounds, and every error of the store
    or of a step, propagate; nothing is saved when a step before the save raises."""
    if conflict_retries < 1:
        raise ValueError(f"conflict_retries is {conflict_retries}: at least 1")
    for attempt in range(conflict_retries):
        try:
            with store.locked(lock_timeout):
                read_ns = time.monotonic_ns()
                record, rev = read()
                r: Recorded[P, A] = Recorded(frozenset(record), rev, read_ns, rev=rev)
                r.proposal = compute(record)
                if r.proposal is None:
                    return r
                r.held = fence() if fence is not None else None
                if r.held:
                    return r
                r.controller = primary() if primary is not None else None
                if r.controller is not None and apply is not None and election_id is not None \
                        and election_id > r.controller.election_id:
                    r.overruled, r.controller = r.controller, None
                r.applies_here = apply is not None and r.controller is None
                if plan is not None:
                    r.planned = plan(r)
                if r.proposal.save:
                    r.rev = store.save(r.proposal.failures, r.proposal.origins, expect=rev)  # Conflict: again
                    r.saved, r.saved_ns = True, time.monotonic_ns()
                    if recorded is not None:
                        recorded(r)
                if r.controller is not None and apply is not None:
                    if r.saved:  # nothing saved: nothing for the controller to apply
                        r.handoff = handoff_for(store, r.controller, r.saved_ns, r.rev, r.old, r.new, describe)
                elif apply is not None:
                    r.applied = apply(r)
                return r
        except Conflict:  # another writer saved between our read and our save: read again
            if attempt == conflict_retries - 1:
                raise
            sleep(CONFLICT_BACKOFF * (attempt + 1))
    raise AssertionError("unreachable: the last round returns or raises")
