"""A small fabric of real simple_switch_grpc switches for control-plane tests, and a controller
that can be stopped after an exact number of writes (to kill it mid-install).

Each switch of a `topology.build` fabric runs in its own network namespace with exactly the
ports the topology gives it (not wired to each other: these tests look at tables, not packets);
the topology file the CLI reads points every switch at its switch's unix gRPC socket.
"""

from __future__ import annotations

import os
import sys
import threading
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import yaml
from click.testing import CliRunner, Result

from controller import failurerecord, planning, topofile
from controller.runtime import encoding
from controller.model import topology
from controller.southbound.p4runtime import show_entity
from fabricctl.main import cli
from controller.plan.delta import diff as delta_diff
from controller.plan.entries import ActionProfileGroup, Entity, entity_key
from controller.model.failures import Failure
from controller.runtime.p4info import P4Info
from controller.runtime.p4rt import SwitchConnection
from controller.plan.fabricplan import plan as make_plan
from controller.plan.delta import Delta
from controller.model.tlsconfig import TlsConfig
from controller.programs.toolchain import Artifacts
from controller.model.topology import Topology
from mininet_labs.bmv2proc import ServerTls
from mininet_labs.nsswitch import NetnsSwitch

READER_ELECTION_ID = 0  # reads (and wipes); a lingering reader stream never outranks a controller


def switch_ports(sw: topology.Switch) -> tuple[int, ...]:
    """Every data port the topology uses on a switch."""
    return tuple(sorted({*sw.host_ports, *sw.uplinks, *sw.downlinks}))


@dataclass
class FabricLab:
    """Started switches, the topology file pointing at them, and the program they are to run."""

    topo: Topology  # as loaded from `path`: unix: addresses, the switches' device ids
    path: Path
    switches: dict[str, NetnsSwitch]
    artifacts: Artifacts
    p4info: P4Info

    @property
    def names(self) -> list[str]:
        return [s.name for s in self.topo.switches]

    @property
    def state_path(self) -> Path:
        return self.path.parent / failurerecord.STATE_NAME

    def connection(self, name: str, election_id: int = READER_ELECTION_ID) -> SwitchConnection:
        """A connected session to one switch (the caller closes it), with our P4Info loaded."""
        sw = self.topo.switch(name)
        conn = SwitchConnection(name, sw.grpc_addr, sw.device_id, election_id, p4info=self.p4info, tls=sw.tls)
        conn.connect()
        return conn

    def _each(self, fn, names: Iterable[str] | None = None) -> dict:  # type: ignore[no-untyped-def]
        chosen = self.names if names is None else list(names)
        with ThreadPoolExecutor(max_workers=len(chosen) or 1) as pool:
            return dict(zip(chosen, pool.map(fn, chosen)))

    def read(self, name: str) -> list[Entity]:
        """Everything one switch holds: entries of every table, members and groups of every profile."""
        conn = self.connection(name)
        try:
            return conn.read_all()
        finally:
            conn.close()

    def snapshot(self) -> dict[str, list[Entity]]:
        """read() of every switch."""
        return self._each(self.read)

    def pipelines(self) -> dict[str, bool]:
        """Which switches run a pipeline at all."""
        def one(name: str) -> bool:
            conn = self.connection(name)
            try:
                return conn.get_pipeline_p4info() is not None
            finally:
                conn.close()
        return self._each(one)

    def wipe(self) -> None:
        """Push our pipeline to every switch (which empties its tables) and forget recorded failures."""
        def one(name: str) -> None:
            conn = self.connection(name, election_id=READER_ELECTION_ID)
            try:
                conn.set_pipeline(self.artifacts)
            finally:
                conn.close()
        self._each(one)
        self.state_path.unlink(missing_ok=True)

    def encoded(self, failures: Iterable[Failure] = ()) -> encoding.Encoded:
        """The plan under these failures, encoded for every switch as fabricctl does it."""
        fab = planning.fabric(self.topo, self.artifacts.program, failures)  # type: ignore[arg-type]
        return encoding.encode(make_plan(fab), self.names, self.p4info, str(self.artifacts.p4info))

    def desired(self, failures: Iterable[Failure] = ()) -> dict[str, list[Entity]]:
        """Each switch's plan under these failures, in the canonical form a read returns."""
        return self.encoded(failures).desired

    def cli(self, *args: str) -> Result:
        """fabricctl --topology <this lab> ARGS, in process."""
        runner = CliRunner(env={"FABRIC_TOPOLOGY": None})
        return runner.invoke(cli, ["--topology", str(self.path), "--program", self.artifacts.program, *args],
                             prog_name="fabricctl")


def start_lab(workdir: Path, topo: Topology, program: str = "srv6_spray", *, tag: str = "fc",
              server_tls: ServerTls | None = None, tls: Mapping[str, str] | None = None) -> Iterator[FabricLab]:
    """Start one NetnsSwitch per switch of `topo` (in parallel), write the topology file that
    points at them into `workdir`, yield the lab, stop every switch. `server_tls`: the switches'
    own TLS; `tls`: the topology's fabric-wide `tls:` mapping (paths relative to `workdir`)."""
    tag = f"{tag}{os.getpid() % 100000}"
    client_tls = None if tls is None else TlsConfig(**{k: (v if k == "server_name" else workdir / v)
                                                       for k, v in tls.items()})
    switches = {s.name: NetnsSwitch(f"{tag}-{s.device_id}", ports=switch_ports(s), device_id=s.device_id,
                                    server_tls=server_tls, client_tls=client_tls)
                for s in topo.switches}
    started: list[NetnsSwitch] = []
    lock = threading.Lock()

    def start(sw: NetnsSwitch) -> None:
        sw.start()
        with lock:
            started.append(sw)

    try:
        with ThreadPoolExecutor(max_workers=len(switches)) as pool:
            list(pool.map(start, switches.values()))  # re-raises the first start error
        doc = topology.to_dict(topo)
        if tls is not None:
            doc = {"tls": dict(tls), **doc}
        for rec in doc["switches"]:
            rec["grpc"] = switches[rec["name"]].grpc_address
        path = workdir / "fabric.yaml"
        path.write_text(yaml.safe_dump(doc, sort_keys=False))
        loaded, problems = topofile.check_topology(path)
        assert loaded is not None, problems
        artifacts = Artifacts.of(program)
        yield FabricLab(loaded, path, switches, artifacts, P4Info.load(artifacts.p4info))
    finally:
        with ThreadPoolExecutor(max_workers=len(switches)) as pool:
            list(pool.map(lambda sw: sw.stop(), started))


# --- comparing what switches hold ------------------------------------------------------------

def applied(held: Iterable[Entity], delta: Delta | None) -> list[Entity]:
    """What a switch holding `held` holds after `delta` (inserts added, modifies replacing the
    entity of the same key, deletes removed by key)."""
    by_key = {entity_key(e): e for e in held}
    if delta is not None:
        for e in delta.deletes:
            assert by_key.pop(entity_key(e), None) is not None, f"delta deletes what is not there: {show_entity(e)}"
        for e in delta.modifies:
            assert entity_key(e) in by_key, f"delta modifies what is not there: {show_entity(e)}"
            by_key[entity_key(e)] = e
        for e in delta.inserts:
            assert entity_key(e) not in by_key, f"delta inserts what is there: {show_entity(e)}"
            by_key[entity_key(e)] = e
    return list(by_key.values())


def differences(got: Mapping[str, Iterable[Entity]], want: Mapping[str, Iterable[Entity]]) -> list[str]:
    """One line per entity that differs between two fabric-wide states (empty: exactly equal).

    Compares as multisets, so a switch holding an entity twice (or the plan naming it twice)
    shows up too; a switch present on one side only is named."""
    out: list[str] = []
    for name in sorted(set(got) | set(want)):
        if name not in got or name not in want:
            out.append(f"{name}: only in {'the switches' if name in got else 'the expectation'}")
            continue
        have, need = Counter(_as_planned(got[name], want[name])), Counter(want[name])
        out += [f"{name}: extra {show_entity(e)}" for e in sorted(have - need, key=str)]
        out += [f"{name}: missing {show_entity(e)}" for e in sorted(need - have, key=str)]
    return out


def _as_planned(got: Iterable[Entity], want: Iterable[Entity]) -> list[Entity]:
    """`got` with each group that is the planned one as the switch reads it back (PI returns one member's
    watch port for all: controller.plan.delta.pi_read_watch_ports) replaced by the planned group."""
    planned = {entity_key(e): e for e in want if isinstance(e, ActionProfileGroup)}
    out: list[Entity] = []
    for e in got:
        p = planned.get(entity_key(e))
        out.append(p if p is not None and p != e and not delta_diff([p], [e]) else e)
    return out


# --- a controller that stops after N writes --------------------------------------------------

GATE_LINE = "gate: writes done"


def install_until_killed(limit: int, argv: list[str]) -> None:
    """Run `fabricctl ARGV` with one update per WriteRequest; after `limit` Write calls have
    completed (fabric-wide), print GATE_LINE and block every further Write forever, so the parent
    can SIGKILL this process with exactly `limit` updates on the switches."""
    from controller.runtime.p4rt import SwitchConnection as Conn

    lock = threading.Lock()
    counts = {"slots": 0, "done": 0}
    never = threading.Event()

    class GatedStub:
        def __init__(self, stub: object) -> None:
            self._stub = stub

        def __getattr__(self, name: str) -> object:
            return getattr(self._stub, name)

        def Write(self, request, **kw):  # type: ignore[no-untyped-def]  # noqa: N802 (the RPC's name)
            with lock:
                admitted = counts["slots"] < limit
                counts["slots"] += admitted
            if not admitted:
                never.wait()
            response = self._stub.Write(request, **kw)
            with lock:
                counts["done"] += 1
                if counts["done"] == limit:
                    print(GATE_LINE, flush=True)
            return response

    connect, write = Conn.connect, Conn.write

    def gated_connect(self, timeout=None):  # type: ignore[no-untyped-def]
        primary = connect(self, timeout)
        self._stub = GatedStub(self._stub)
        return primary

    def one_per_request(self, updates, batch_size=1):  # type: ignore[no-untyped-def]
        return write(self, updates, batch_size=1)

    Conn.connect = gated_connect  # type: ignore[method-assign]
    Conn.write = one_per_request  # type: ignore[method-assign]
    sys.argv = ["fabricctl", *argv]
    cli(prog_name="fabricctl")
