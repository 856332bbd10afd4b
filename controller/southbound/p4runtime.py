"""The P4Runtime southbound: each switch's pipeline settled and its encoded plan reconciled with read-back
(`sync`, switches in parallel), behind the southbound interface, one switch at a time or many (`prepare`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from controller import routes
from controller.exitcodes import PIPELINE, SWITCH_ERROR, OpError
from controller.plan.delta import diff
from controller.plan.entries import ActionProfileGroup, ActionProfileMember, Entity, TableEntry, Value
from controller.runtime.encoding import Encoded, encode
from controller.runtime.fabric_client import FabricClient
from controller.runtime.p4info import P4Info, pipeline_differences
from controller.runtime.p4rt import (
    NotPrimaryError,
    P4RuntimeError,
    PipelineMismatchError,
    SwitchConnection,
    WriteError,
    describe,
    election_int,
    show_value,
)
from controller.runtime.reconcile import apply
from controller.plan.fabricplan import entity_to_json, plan as make_plan
from controller.routes import Fabric
from controller.southbound.base import Outcome, Progress, Push, SwitchSync
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


def error_line(name: str, error: BaseException) -> str:
    """One line for a switch's error, starting with the switch name; a write error shows its first refusal."""
    if isinstance(error, WriteError) and error.failures:
        text = (f"{len(error.failures)} of {error.attempted} updates refused ({error.written} written "
                f"before), first: {error.failures[0]}")
    elif isinstance(error, P4RuntimeError):
        text = str(error)
    else:
        text = f"{type(error).__name__}: {error}"
    text = " ".join(text.split())
    return text if text.startswith(f"{name}: ") else f"{name}: {text}"


def error_code(error: BaseException) -> int:
    return PIPELINE if isinstance(error, (PipelineMismatchError, NotPrimaryError)) else SWITCH_ERROR


def connection(sw: Switch, election_id: int, timeout: float) -> SwitchConnection:
    return SwitchConnection(sw.name, sw.grpc_addr, sw.device_id, election_id, timeout=timeout,
                            pipeline_timeout=max(60.0, timeout), tls=sw.tls)


def _not_primary(conn: SwitchConnection) -> NotPrimaryError:
    return NotPrimaryError(f"{conn.name}: not primary for device {conn.device_id} on {conn.address}: another "
                           f"controller holds an election id above {election_int(conn.election_id)} "
                           "(see --election-id)")


def _pipeline(conn: SwitchConnection, artifacts: Artifacts, p4info: P4Info, push: Push, dry_run: bool) -> str:
    """Keep the device's pipeline if it is ours, else push it where `push` allows; the action taken."""
    theirs = conn.get_pipeline_p4info()
    differences = pipeline_differences(p4info, theirs) if theirs is not None else []
    if theirs is not None and not differences:
        conn.p4info = p4info
        return "kept"
    if theirs is None and push == "never":
        raise PipelineMismatchError(f"{conn.name}: device {conn.device_id} on {conn.address} has no pipeline "
                                    f"(run 'fabricctl install {conn.name}')")
    if theirs is not None and push != "force":
        more = f"; +{len(differences) - 1} more" if len(differences) > 1 else ""
        hint = ("--force-pipeline replaces it and clears its tables" if push == "missing" else
                f"'fabricctl install --force-pipeline {conn.name}' replaces it and clears its tables")
        raise PipelineMismatchError(f"{conn.name}: the device's P4Info is not {artifacts.program}'s "
                                    f"({differences[0]}{more}); {hint}")
    if dry_run:
        return "would push"
    conn.set_pipeline(artifacts, p4info=p4info)
    return "pushed"


def sync(topo: Topology, encoded: Encoded, artifacts: Artifacts, p4info: P4Info, *, election_id: int,
         timeout: float, dry_run: bool, push: Push,
         progress: Callable[[str, Any, BaseException | None], None] | None = None) -> dict[str, Outcome]:
    """Connect to each switch of `encoded.desired` in parallel, settle its pipeline and reconcile it
    (or, dry, only diff it); one Outcome per switch, in the order given. Reads need no primary role."""
    names = list(encoded.desired)

    def one(conn: SwitchConnection) -> Outcome:
        primary = conn.connect()
        if not primary and not dry_run:
            raise _not_primary(conn)
        action = _pipeline(conn, artifacts, p4info, push, dry_run)
        want = encoded.desired[conn.name]
        found = (diff(want, []) if action == "would push"
                 else apply(conn, want, dry_run=dry_run, resets=routes.DEFAULT_RESETS))
        return Outcome(conn.name, found, action, primary)

    conns = [connection(topo.switch(n), election_id, timeout) for n in names]
    with FabricClient(conns) as client:
        result = client.run(one, names, progress)
    out = dict(result.results)
    for name, error in result.errors.items():
        out[name] = Outcome(name, error=error_line(name, error), code=error_code(error))
    return {n: out[n] for n in names}


def check_device(sw: Switch, p4info: P4Info, program: str, election_id: int, timeout: float) -> None:
    """OpError unless the switch answers and runs our P4Info (what `fabricctl shell` needs)."""
    conn = connection(sw, election_id, timeout)
    try:
        conn.connect()
        theirs = conn.get_pipeline_p4info()
    except P4RuntimeError as e:
        raise OpError(error_line(sw.name, e), SWITCH_ERROR) from None
    finally:
        conn.close()
    if theirs is None:
        raise OpError(f"{sw.name}: device {sw.device_id} on {sw.grpc_addr} has no pipeline (run 'fabricctl "
                      f"install {sw.name}', or open the shell with --push-pipeline)", PIPELINE)
    differences = pipeline_differences(p4info, theirs)
    if differences:
        raise OpError(f"{sw.name}: the device's P4Info is not {program}'s ({differences[0]}); "
                      "--push-pipeline replaces it and clears its tables", PIPELINE)


@dataclass
class P4Batch:
    """P4Runtime switches with their plan encoded against the P4Info (`encode`); `run` is `sync`: in parallel."""

    southbound: P4RuntimeSouthbound
    names: list[str]
    encoded: Encoded

    def run(self, *, dry_run: bool, push: Push, progress: Progress | None = None) -> dict[str, Outcome]:
        sb = self.southbound
        return sync(sb.topo, self.encoded, sb.artifacts, sb.p4info, election_id=sb.election_id,
                        timeout=sb.timeout, dry_run=dry_run, push=push, progress=progress)

    def text(self, item: Any) -> str:
        return show_entity(self.encoded.shown(item))

    def to_json(self, item: Any) -> Any:
        return entity_to_json(self.encoded.shown(item))


class P4RuntimeSouthbound:
    """bmv2 (or any P4Runtime switch running the program) programmed as `fabricctl install` does."""

    kind = "p4runtime"

    def __init__(self, topo: Topology, program: str = "srv6_spray", *, election_id: int = 1, timeout: float = 10.0,
                 push: Push = "missing", artifacts: Artifacts | None = None, p4info: P4Info | None = None) -> None:
        self.topo, self.election_id, self.timeout, self.push = topo, election_id, timeout, push
        self.artifacts = Artifacts.of(program) if artifacts is None else artifacts
        self.p4info = P4Info.load(self.artifacts.p4info) if p4info is None else p4info

    def prepare(self, fabric: Fabric, switches: Sequence[Switch]) -> P4Batch:
        names = [s.name for s in switches]
        return P4Batch(self, names, encode(make_plan(fabric), names, self.p4info, str(self.artifacts.p4info)))

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
