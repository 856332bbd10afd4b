"""A lab's switches through the controller: P4Runtime clients, the plan installed, failures recorded and handed off to a running `fabricctl run`."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any


from controller import failurerecord, planning
from controller.model import lookup
from controller.southbound import p4runtime
from controller.southbound.base import Outcome, Push
from controller.model.failures import Failure, failure_to_json
from controller.state.filestore import FileStore
from controller.state.store import Conflict, Record, Store, StoreError
from controller.runtime.fabric_client import FabricClient
from controller.planning import FailureChange
from controller.runtime.p4info import P4Info
from controller.routes import Fabric
from controller.service import handoff
from controller.service.transaction import Proposal, Recorded, primary_of, record_then_apply
from controller.programs.toolchain import Artifacts
from mininet_labs.labstate import LabError

if TYPE_CHECKING:
    from mininet_labs.nodes import Nodes


@dataclass
class FailoverResult:
    """A failure-set change applied to a lab: the new set, the switches reconciled, their outcomes,
    and how long recording and reconciling took."""

    failures: list[Failure]
    touched: list[str]
    outcomes: dict[str, Outcome]  # empty when a running controller applied the change
    seconds: float
    via: str | None = None  # the running controller (`fabricctl run`) that applied it: "pid N, election id M"

    def to_json(self) -> dict[str, Any]:
        return {"failures": [failure_to_json(f) for f in self.failures], "touched": self.touched,
                "seconds": self.seconds, "via_controller": self.via,
                "changed": {n: len(o.delta) if o.delta is not None else None for n, o in self.outcomes.items()}}


CONFLICT_RETRIES = 50  # read-compute-save rounds on a store another writer changes meanwhile (fabricctl's)
LOCK_WAIT = 10.0  # seconds a fail/restore waits for another writer's lock on the lab's state file
Change = Callable[[frozenset[Failure]], frozenset[Failure]]  # the recorded set -> the new one


class FailoverMixin:
    """A lab's switches through the controller: P4Runtime clients, the plan installed, failures recorded and handed off to a running `fabricctl run`.

    `store`: where the record lives when it is not the lab's state file (an etcd store, as `fabricctl
    --store etcd://...` gives): failures() reads it, and fail/restore/set_failures change it as
    `fabricctl fail/restore` do (a transaction comparing the revision read, then the leader applies it,
    or the lab writes the switches when no controller leads)."""

    store: Store | None = None  # None: the lab's state file
    nodes: Nodes

    def client(self, election_id: int | None = None, connect: bool = True) -> FabricClient:
        """A FabricClient with a connection to every switch, each with the program's P4Info; unless
        told not to, connected and checked to run that pipeline. Close it (or use `with`) before
        `install`: two sessions with one election id conflict."""
        how = (lambda c, p4info: (c.connect(), c.check_pipeline(p4info))) if connect else None
        return self._switches(election_id or self.election_id, how, "use")

    def reader(self) -> FabricClient:
        """A FabricClient that only reads (no stream, no election id: `install` and `fail` go on meanwhile),
        each switch checked once to run the program. Cheap to read through for as long as it is open, where
        `client()` pays a session and a pipeline check each time; close it (or use `with`)."""
        return self._switches(self.election_id, lambda c, p4info: (c.connect_reader(), c.check_pipeline(p4info)),
                              "read")

    def _switches(self, election_id: int, how: Callable[[Any, P4Info], object] | None, verb: str) -> FabricClient:
        """A FabricClient over every switch with the program's P4Info, each opened by `how` in parallel
        (None: left closed); LabError 'cannot <verb> the switches' naming those that failed."""
        p4info = self.p4info()
        conns = [p4runtime.connection(s, election_id, self.timeout) for s in self.model.switches]
        for conn in conns:
            conn.p4info = p4info
        client = FabricClient(conns)
        if how is not None:
            result = client.run(lambda c: how(c, p4info))
            if not result.ok:
                client.close_all()
                raise LabError(f"cannot {verb} the switches: {result.summary()}")
        return client

    def p4info(self) -> P4Info:
        """The current program's P4Info (read once per program)."""
        self.nodes.require("P4Runtime")
        if self.program not in self._p4infos:
            self._p4infos[self.program] = P4Info.load(Artifacts.of(self.program).p4info)
        return self._p4infos[self.program]

    def failures(self) -> frozenset[Failure]:
        """The failure set fabricctl keeps for this lab (empty when none is recorded)."""
        if self.store is not None:
            try:
                return frozenset(self.store.recorded(self.model))
            except StoreError as e:
                raise LabError(str(e)) from None
        return failurerecord.load_failures(self.model, self.failure_state_path)

    def install(self, failures: Iterable[Failure] | None = None, *, push: Push = "missing",
                dry_run: bool = False) -> dict[str, Outcome]:
        """Reconcile every switch (but those recorded down) to the plan under `failures` (default:
        the lab's recorded failure set), pushing the pipeline where a switch has none."""
        failures = self.failures() if failures is None else frozenset(failures)
        down = planning.down_switches(failures)
        names = [s.name for s in self.model.switches if s.name not in down]
        return self._sync(planning.fabric(self.model, self.program, failures, self.options), names,  # type: ignore[arg-type]
                          push=push, dry_run=dry_run)

    def _sync(self, fabric: Fabric, names: Sequence[str], *, push: Push, dry_run: bool = False
              ) -> dict[str, Outcome]:
        """Reconcile the named switches to the plan of `fabric` through the lab's node backend."""
        return self.nodes.sync(self.model, fabric, names, program=self.program, p4info=self.p4info,
                               election_id=self.election_id, timeout=self.timeout, push=push, dry_run=dry_run)

    def set_failures(self, failures: Iterable[Failure]) -> FailoverResult:
        """What `fabricctl fail/restore` does, on this lab: record the failure set in the lab's state
        file, then reconcile the switches whose plan changes (none recorded down). While a `fabricctl
        run` with a higher election id than the lab's is primary on that file, it is the one that
        writes: the change is recorded and this waits (up to the lab's timeout) for the controller's
        word, as the command does (`via` names the controller; LabError if it did not apply it)."""
        return self._change(lambda _old: frozenset(failures))

    def _change(self, compute: Change) -> FailoverResult:
        """Record compute(recorded set) and apply it (set_failures), in the lab's state file or its store, by the
        failure transaction (controller.service.transaction): as `fabricctl fail/restore`, the running controller
        primary there applies it unless the lab's election id is above its own; else the lab writes the switches."""
        store = self.store if self.store is not None else FileStore(self.failure_state_path)
        t0 = time.monotonic()

        def wanted(record: Record) -> Proposal:
            old = frozenset(record)
            new = frozenset(compute(old))
            return Proposal(new, save=new != old)

        def plan(r: Recorded[FailureChange, dict[str, Outcome]]) -> FailureChange:
            return planning.failure_change(self.model, self.program, r.old, r.new, self.options)  # type: ignore[arg-type]

        def apply(r: Recorded[FailureChange, dict[str, Outcome]]) -> dict[str, Outcome]:
            change = _planned(r)
            return self._sync(change.fabric, change.touched, push="never") if change.touched else {}

        try:
            r: Recorded[FailureChange, dict[str, Outcome]] = record_then_apply(
                store, lambda: store.recorded_rev(self.model), wanted, lock_timeout=LOCK_WAIT,
                primary=primary_of(store), election_id=self.election_id, plan=plan, apply=apply,
                describe=lambda f: lookup.describe_failure(self.model, f), conflict_retries=CONFLICT_RETRIES)
        except Conflict:
            raise LabError(f"{store.where}: the record kept changing ({CONFLICT_RETRIES} tries)") from None
        except StoreError as e:
            raise LabError(str(e)) from None
        return self._finish(_planned(r), r.applied or {}, r.handoff, t0)

    def _finish(self, change: FailureChange, outcomes: dict[str, Outcome], passed: handoff.Handoff | None,
                t0: float) -> FailoverResult:
        if passed is not None:  # outside the lock: the controller takes it to read the record
            out = passed.wait(self.timeout)
            if not out.ok:
                raise LabError(out.error)
        result = FailoverResult(sorted(change.new, key=str), change.touched, outcomes, round(time.monotonic() - t0, 4),
                                str(passed.controller) if passed is not None else None)
        bad = [o for o in outcomes.values() if not o.ok]
        if bad:
            raise LabError(f"reconciling after the failure change failed on {len(bad)} switches: {bad[0].error}")
        return result

    def fail(self, failure: Failure) -> FailoverResult:
        return self._change(lambda old: old | {failure})

    def restore(self, failure: Failure | None = None) -> FailoverResult:
        """Remove one failure from the record (None: all) and reconcile what it touches."""
        return self._change(lambda old: frozenset() if failure is None else old - {failure})


def _planned(r: Recorded[FailureChange, dict[str, Outcome]]) -> FailureChange:
    assert r.planned is not None, "the plan step runs before the record is saved"
    return r.planned
