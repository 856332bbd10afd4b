"""The P4Runtime southbound: a thin adapter giving today's calls (ops.encode, ops.sync: arbitration, pipeline,
reconcile with read-back) the southbound interface, one switch at a time."""

from __future__ import annotations

from controller import ops
from controller.runtime.p4info import P4Info
from controller.plan.fabricplan import plan as make_plan
from controller.routes import Fabric
from controller.southbound.base import SwitchSync
from controller.programs.toolchain import Artifacts
from controller.model.topology import Switch, Topology


class P4RuntimeSouthbound:
    """bmv2 (or any P4Runtime switch running the program) programmed as `fabricctl install` does."""

    kind = "p4runtime"

    def __init__(self, topo: Topology, program: str = "srv6_spray", *, election_id: int = 1, timeout: float = 10.0,
                 push: ops.Push = "missing") -> None:
        self.topo, self.election_id, self.timeout, self.push = topo, election_id, timeout, push
        self.artifacts = Artifacts.of(program)
        self.p4info = P4Info.load(self.artifacts.p4info)

    def install(self, fabric: Fabric, sw: Switch, *, dry_run: bool = False) -> SwitchSync:
        encoded = ops.encode(make_plan(fabric), [sw.name], self.p4info, str(self.artifacts.p4info))
        outcome = ops.sync(self.topo, encoded, self.artifacts, self.p4info, election_id=self.election_id,
                           timeout=self.timeout, dry_run=dry_run, push=self.push)[sw.name]
        if not outcome.ok or outcome.delta is None:
            return SwitchSync(sw.name, error=outcome.error or f"{sw.name}: no result")
        d = outcome.delta
        return SwitchSync(sw.name, len(d.inserts), len(d.modifies), len(d.deletes),
                          detail={"delta": d, "pipeline": outcome.pipeline})

    def check(self, fabric: Fabric, sw: Switch) -> SwitchSync:
        return self.install(fabric, sw, dry_run=True)

    def apply_failure(self, old: Fabric, new: Fabric, sw: Switch) -> SwitchSync:
        """The new plan reconciled against what the switch holds (P4Runtime reads back; the failover delta is
        what that reconcile finds)."""
        return self.install(new, sw)
