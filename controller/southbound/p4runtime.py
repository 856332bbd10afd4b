"""The P4Runtime southbound: a thin adapter giving today's calls (ops.encode, ops.sync: arbitration, pipeline,
reconcile with read-back) the southbound interface, one switch at a time or many in parallel (`prepare`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from controller import fabricops
from controller.plan.entries import ActionProfileGroup, ActionProfileMember, Entity, TableEntry, Value
from controller.runtime.p4info import P4Info
from controller.runtime.p4rt import describe, show_value
from controller.plan.fabricplan import entity_to_json, plan as make_plan
from controller.routes import Fabric
from controller.southbound.base import Progress, SwitchSync
from controller.programs.toolchain import Artifacts
from controller.model.topology import Switch, Topology


def show_entity(e: Entity) -> str:
    """One line for an entity: what identifies it, then what it does."""
    def call(action: str | None, params: tuple[tuple[str, Value], ...]) -> str:
        return f"{(action or '?').rsplit('.', 1)[-1]}({', '.join(f'{n}={show_value(v)}' for n, v in params)})"

    if isinstance(e, TableEntry):
        if e.group_id is not None:
            return f"{describe(e)} -> group {e.group_id}"
        if e.member_id is not None:
            return f"{describe(e)} -> member {e.member_id}"
        return f"{describe(e)} -> {call(e.action, e.params)}"
    if isinstance(e, ActionProfileMember):
        return f"{describe(e)} -> {call(e.action, e.params)}"
    assert isinstance(e, ActionProfileGroup)
    watch = dict(e.watch_ports)
    return f"{describe(e)}: members " + (", ".join(f"{m} (watch port {watch[m]})" if m in watch else str(m)
                                                   for m in e.members) or "none")


@dataclass
class P4Batch:
    """P4Runtime switches with their plan encoded against the P4Info (ops.encode); `run` is ops.sync: in parallel."""

    southbound: P4RuntimeSouthbound
    names: list[str]
    encoded: fabricops.Encoded

    def run(self, *, dry_run: bool, push: fabricops.Push, progress: Progress | None = None) -> dict[str, fabricops.Outcome]:
        sb = self.southbound
        return fabricops.sync(sb.topo, self.encoded, sb.artifacts, sb.p4info, election_id=sb.election_id,
                        timeout=sb.timeout, dry_run=dry_run, push=push, progress=progress)

    def text(self, item: Any) -> str:
        return show_entity(self.encoded.shown(item))

    def to_json(self, item: Any) -> Any:
        return entity_to_json(self.encoded.shown(item))


class P4RuntimeSouthbound:
    """bmv2 (or any P4Runtime switch running the program) programmed as `fabricctl install` does."""

    kind = "p4runtime"

    def __init__(self, topo: Topology, program: str = "srv6_spray", *, election_id: int = 1, timeout: float = 10.0,
                 push: fabricops.Push = "missing", artifacts: Artifacts | None = None, p4info: P4Info | None = None) -> None:
        self.topo, self.election_id, self.timeout, self.push = topo, election_id, timeout, push
        self.artifacts = Artifacts.of(program) if artifacts is None else artifacts
        self.p4info = P4Info.load(self.artifacts.p4info) if p4info is None else p4info

    def prepare(self, fabric: Fabric, switches: Sequence[Switch]) -> P4Batch:
        names = [s.name for s in switches]
        return P4Batch(self, names, fabricops.encode(make_plan(fabric), names, self.p4info, str(self.artifacts.p4info)))

    def install(self, fabric: Fabric, sw: Switch, *, dry_run: bool = False) -> SwitchSync:
        outcome = self.prepare(fabric, [sw]).run(dry_run=dry_run, push=self.push)[sw.name]
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
