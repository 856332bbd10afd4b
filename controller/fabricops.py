"""Fabric operations behind fabricctl: checked topology, names and failures, the encoded plan, per-switch sync."""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from controller.model import limits, yamlload
from controller import failover, routes
from controller.runtime.codec import canonical
from controller.plan.delta import Changes
from controller.plan.entries import Entity
from controller.runtime.fabric_client import FabricClient
from controller.model.failures import Failure, FailoverError, HostPortDown, LinkDown, Origin, SwitchDown
from controller.runtime.p4info import P4Info, pipeline_differences
from controller.runtime.p4rt import (
    NotPrimaryError,
    P4RuntimeError,
    PipelineMismatchError,
    SwitchConnection,
    WriteError,
    describe,
    election_int,
)
from controller.runtime.reconcile import apply
from controller.plan.delta import diff
from controller.files.safefile import UnsafeFile
from controller.routes import Fabric, Options
from controller.plan.p4names import Program
from controller.model.sids import SidError, SidPlan
from controller.state import statefile
from controller.runtime.tls import check_all
from controller.model.tlsconfig import TlsConfig, TlsError, override
from controller.programs.toolchain import Artifacts
from controller.model.topology import Switch, Topology, TopologyError, from_dict

# Exit codes (documented in `fabricctl --help`).
OK, SWITCH_ERROR, BAD_INPUT, BAD_TOPOLOGY, PIPELINE, TOOLCHAIN = 0, 1, 2, 3, 4, 5

STATE_NAME = ".fabric-state.json"


class OpError(Exception):
    """One line saying what is wrong, the exit code it means, and optional detail lines after it."""

    def __init__(self, message: str, code: int = BAD_INPUT, detail: str = "") -> None:
        super().__init__(message)
        self.code = code
        self.detail = detail


# --- topology --------------------------------------------------------------------------------

def check_topology(path: Path) -> tuple[Topology | None, list[str]]:
    """The topology of a YAML file and every problem found in it (the topology is None if any).

    Beyond topology.from_dict: YAML syntax, the document's shape, the uSID block and plan
    capacity, and gRPC addresses a P4Runtime client can dial. An unreadable file is an OpError.
    """
    try:
        doc = yamlload.load_file(path, limits.MAX_TOPOLOGY_BYTES, "topology")
    except UnsafeFile as e:
        raise OpError(str(e)) from None
    except OSError as e:
        raise OpError(f"cannot read topology {path}: {e.strerror or e}") from None
    except yamlload.YamlError as e:
        return None, [str(e)]
    doc = {} if doc is None else doc
    if not isinstance(doc, dict) or not isinstance(doc.get("switches") or [], list):
        return None, ["expected a mapping with a 'switches' list (see examples/two_plane_lab.yaml)"]
    bad = [f"switch #{n} is not a mapping" for n, rec in enumerate(doc.get("switches") or [])
           if not isinstance(rec, dict)]
    if bad:
        return None, bad
    try:
        topo = from_dict(doc, path.parent)
    except TopologyError as e:
        return None, e.problems
    except (TypeError, ValueError, AttributeError, KeyError) as e:
        return None, [f"malformed document: {e}"]
    problems: list[str] = []
    if not topo.switches:
        problems.append("no switches")
    try:
        sids = sid_plan(topo)
    except SidError as e:
        problems.append(str(e))
    else:
        planes = range(topo.planes)
        problems += sids.capacity_problems(
            topo.planes, max((len(topo.t1s(p)) for p in planes), default=0),
            max((len(topo.t0s(p)) for p in planes), default=0),
            max((len(s.host_ports) for s in topo.switches), default=0))
    return (None if problems else topo), problems


def sid_plan(topo: Topology) -> SidPlan:
    """The address plan of a topology (its own uSID block, or the default)."""
    return SidPlan() if topo.usid_block is None else SidPlan.from_block(topo.usid_block)


def fabric(topo: Topology, program: Program, failures: Iterable[Failure] = (), options: Options | None = None) -> Fabric:
    """The fabric of a topology and program, with these failures (and these Options: hash mode, pins).
    Endpoint mode is on when the Options or the topology file (`host_source_routing: true`) say so, and so are
    watch ports (`watch_ports: true`);
    the ECN and trimming thresholds are the Options' when they turn a signal on, else the topology's
    (`congestion:`, with the global options over it: congestion.override)."""
    opts = Options() if options is None else options
    opts = dataclasses.replace(opts, program=program,
                               host_source_routing=opts.host_source_routing or topo.host_source_routing,
                               watch_ports=opts.watch_ports or topo.watch_ports)
    if not (opts.ecn_qdepth or opts.trim_qdepth):
        t = topo.congestion
        opts = dataclasses.replace(opts, ecn_qdepth=t.ecn_qdepth, trim_qdepth=t.trim_qdepth, trim_dscp=t.trim_dscp)
    base = Fabric(topo, sid_plan(topo), opts)
    failures = list(failures)
    return failover.with_failures(base, failures) if failures else base


@dataclass
class FailureChange:
    """Going from one failure set to another: the new fabric, and the switches whose plan changes
    (none recorded down), which are all `fabricctl fail/restore` reconciles."""

    old: frozenset[Failure]
    new: frozenset[Failure]
    fabric: Fabric
    touched: list[str]


def failure_change(topo: Topology, program: Program, old: Iterable[Failure], new: Iterable[Failure],
                   options: Options | None = None) -> FailureChange:
    old, new = frozenset(old), frozenset(new)
    new_fabric = fabric(topo, program, new, options)
    moved = failover.delta(fabric(topo, program, old, options), new_fabric)
    down = down_switches(new)
    return FailureChange(old, new, new_fabric, [s.name for s in topo.switches if s.name in moved and s.name not in down])


# --- names -----------------------------------------------------------------------------------

def unknown(kind: str, name: str, known: Sequence[str]) -> OpError:
    """`unknown switch 'x' (known: a, b, ...)`: the close matches first, else the first names."""
    ordered = sorted(known)
    close = sorted(difflib.get_close_matches(name, ordered, n=5, cutoff=0.6))
    shown = close or ordered[:5]
    more = ", ..." if len(ordered) > len(shown) else ""
    listed = f" (known: {', '.join(shown)}{more})" if shown else f" (the topology has no {kind})"
    return OpError(f"unknown {kind} '{name}'{listed}")


def switches(topo: Topology, names: Iterable[str]) -> list[Switch]:
    """The named switches (each once, in the order given); OpError naming the first unknown one."""
    out: dict[str, Switch] = {}
    for name in names:
        if not topo.has_switch(name):
            raise unknown("switch", name, [s.name for s in topo.switches])
        out.setdefault(name, topo.switch(name))
    return list(out.values())


def link(topo: Topology, a: str, b: str) -> LinkDown:
    """The link between a leaf and a spine, named in either order."""
    sa, sb = switches(topo, [a, b]) if a != b else (switches(topo, [a]) * 2)
    if sa.role == sb.role:
        raise OpError(f"{a} and {b} are both {sa.role} switches: a link joins a t0 and a t1")
    leaf, spine = (sa, sb) if sa.role == "t0" else (sb, sa)
    if leaf.plane != spine.plane:
        raise OpError(f"no link {leaf.name} -- {spine.name}: {leaf.name} is in plane {leaf.plane}, "
                      f"{spine.name} in plane {spine.plane}")
    return LinkDown(leaf.name, spine.name)


def _slots(leaf: Switch) -> str:
    items = [f"{k} {h} (port {p})" for k, (h, p) in enumerate(zip(leaf.host_names, leaf.host_ports))]
    return ", ".join(items[:4]) + (f", ... {len(items)} in all" if len(items) > 4 else "")


def host_port(topo: Topology, leaf_name: str, slot: str) -> HostPortDown:
    """A leaf's host port by host slot (0-based position among its hosts) or by host name."""
    (leaf,) = switches(topo, [leaf_name])
    if leaf.role != "t0":
        raise OpError(f"{leaf.name} is a t1: host ports are on t0 switches")
    if not leaf.host_ports:
        raise OpError(f"{leaf.name} has no host ports")
    if slot in leaf.host_names:
        k = leaf.host_names.index(slot)
    else:
        try:
            k = int(slot)
        except ValueError:
            raise OpError(f"{leaf.name} has no host slot or host '{slot}' (slots: {_slots(leaf)})") from None
        if not 0 <= k < len(leaf.host_ports):
            raise OpError(f"{leaf.name} has no host slot {k} (slots: {_slots(leaf)})")
    return HostPortDown(leaf.name, leaf.host_ports[k])


def switch_failure(topo: Topology, name: str) -> SwitchDown:
    (sw,) = switches(topo, [name])
    return SwitchDown(sw.name)


def describe_failure(topo: Topology, f: Failure) -> str:
    """One phrase for a failure: 'link p0-t0-0 -- p0-t1-0', 'switch p0-t1-1', 'host port p0-t0-0 slot 1 (port 2, h1)'."""
    if isinstance(f, LinkDown):
        return f"link {f.t0} -- {f.t1}"
    if isinstance(f, SwitchDown):
        return f"switch {f.name}"
    leaf = topo.switch(f.t0) if topo.has_switch(f.t0) else None
    if leaf is None or f.port not in leaf.host_ports:
        return f"host port {f.t0} port {f.port}"
    k = leaf.host_ports.index(f.port)
    host = f", {leaf.host_names[k]}" if k < len(leaf.host_names) else ""
    return f"host port {f.t0} slot {k} (port {f.port}{host})"


def load_failures(topo: Topology, path: Path) -> frozenset[Failure]:
    """The recorded failure set, checked against the topology (OpError naming the file otherwise)."""
    return frozenset(load_recorded(topo, path))


def load_recorded(topo: Topology, path: Path) -> dict[Failure, Origin]:
    """Each recorded failure with who recorded it (operator or detector), checked as load_failures."""
    try:
        found = statefile.load_origins(path)
    except FailoverError as e:
        raise OpError(str(e)) from None
    try:
        failover.health(topo, found)
    except FailoverError as e:
        raise OpError(f"state file {path}: {e} ('fabricctl restore all' clears it)") from None
    return found


def load_failures_known(topo: Topology, path: Path) -> tuple[frozenset[Failure], list[Failure]]:
    """The recorded failures that name what the topology has, and those that do not (what
    `restore all` drops, so a state file from an older topology can always be cleared)."""
    try:
        found = statefile.load_state(path)
    except FailoverError as e:
        raise OpError(str(e)) from None
    known, dropped = [], []
    for f in sorted(found, key=str):
        try:
            failover.health(topo, [f])
        except FailoverError:
            dropped.append(f)
        else:
            known.append(f)
    return frozenset(known), dropped


def down_switches(failures: Iterable[Failure]) -> set[str]:
    return {f.name for f in failures if isinstance(f, SwitchDown)}


# --- the plan, encoded -----------------------------------------------------------------------

@dataclass
class Encoded:
    """The canonical entities each switch should hold, and the plan form of each (for display)."""

    desired: dict[str, list[Entity]]
    planned: dict[Entity, Entity]

    def shown(self, entity: Entity) -> Entity:
        return self.planned.get(entity, entity)


def encode(plan: Mapping[str, Sequence[Entity]], names: Iterable[str], p4info: P4Info, where: str) -> Encoded:
    """Every named switch's entities in canonical form; OpError (PIPELINE) on the first that the
    P4Info cannot hold. Entities shared between switches are checked once."""
    memo: dict[Entity, Entity] = {}
    desired: dict[str, list[Entity]] = {}
    for name in names:
        out: list[Entity] = []
        for e in plan[name]:
            c = memo.get(e)
            if c is None:
                try:
                    c = memo[e] = canonical(e, p4info)
                except (ValueError, LookupError, TypeError) as err:
                    raise OpError(f"the plan does not fit {where}: {name}: {describe(e)}: {err}", PIPELINE) from None
            out.append(c)
        desired[name] = out
    return Encoded(desired, {c: e for e, c in memo.items()})


# --- switches --------------------------------------------------------------------------------

Push = Literal["never", "missing", "force"]


@dataclass
class Outcome:
    """What happened on one switch: the delta (applied, or only found) and pipeline action, or an error."""

    name: str
    delta: Changes[Any] | None = None  # a P4Runtime Delta (entities) or the kernel's RouteDelta (routes)
    pipeline: str = "kept"  # kept | pushed | would push
    primary: bool = True
    error: str | None = None
    code: int = OK

    @property
    def ok(self) -> bool:
        return self.error is None


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


def exit_code(outcomes: Iterable[Outcome]) -> int:
    """PIPELINE if any switch failed on its pipeline or primary role, else SWITCH_ERROR if any failed."""
    codes = {o.code for o in outcomes if not o.ok}
    return PIPELINE if PIPELINE in codes else SWITCH_ERROR if codes else OK


def connection(sw: Switch, election_id: int, timeout: float) -> SwitchConnection:
    return SwitchConnection(sw.name, sw.grpc_addr, sw.device_id, election_id, timeout=timeout,
                            pipeline_timeout=max(60.0, timeout), tls=sw.tls)


def replace_tls(topo: Topology, tls_of: Callable[[Switch], TlsConfig | None]) -> Topology:
    """The topology with each switch's TLS setting replaced by tls_of(switch)."""
    switches = tuple(dataclasses.replace(s, tls=tls_of(s)) for s in topo.switches)
    return dataclasses.replace(topo, switches=switches, _by_name={}, _t0=(), _t1=())


def with_tls(topo: Topology, options: TlsConfig | None) -> Topology:
    """The topology with the TLS options over every switch's own (field by field), and every TLS
    file it names checked (readable PEM of the right kind, key matching certificate): OpError naming
    the file otherwise, before any switch is contacted."""
    if options is not None:
        topo = replace_tls(topo, lambda s: override(s.tls, options))
    try:
        check_all([s.tls for s in topo.switches])
    except TlsError as e:
        raise OpError(str(e)) from None
    return topo


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
