"""A running lab: the fabric of a Topology on one data plane's nodes, hosts addressed from the SID plan, the plan
installed through the node backend's southbound; and its teardown. One orchestrator for every data plane: the
backend (mininet_labs.nodes) is chosen once, when the lab is made or from its saved state, and nothing here asks
which one it got.

    lab = Lab(default_topology(), "/tmp/srv6-fabric-lab").up()    # bmv2 under Mininet; or: with Lab(...) as lab:
    lab = Lab(default_topology(), "/tmp/kl", nodes_for("kernel")).up()   # Linux SRv6 routers in namespaces
    lab.traffic()                     # every host pair, every plane: a TrafficReport
    lab.cut_link("p0-t0-0", "p0-t1-1"); lab.fail(LinkDown("p0-t0-0", "p0-t1-1"))   # what failover builds on
    lab.down()

A lab writes everything under its directory: `topology.yaml` (what fabricctl --topology reads; its failure state
`.fabric-state.json` lands next to it), `lab-state.json` (the data plane, PIDs or namespaces, interfaces, timings:
what `Lab.attach` and `cleanup` read), the switches' logs. Every process a lab starts carries
SRV6_FABRIC_LAB=<lab dir> in its environment, so `cleanup` finds them even without the state file.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import yaml

from controller import failurerecord
from controller.runtime.p4info import P4Info
from controller.routes import Options
from controller.model.topology import Topology, load, to_dict
from mininet_labs import faults
from mininet_labs.faults import active as active_faults
from mininet_labs.cleanup import CleanupReport, cleanup
from mininet_labs.labfailover import FailoverMixin
from mininet_labs.labhost import LabHost
from mininet_labs.labstate import (CONFIG_NAME, DEFAULT_DIR, LabError, LabState, STATE_NAME, TOPOLOGY_NAME, natural,
                                  write_lab_file)
from mininet_labs.labtraffic import LabTraffic
from mininet_labs.backends import nodes_for, nodes_of
from mininet_labs.nodes import Nodes, Port
from mininet_labs.trafficrun import TrafficReport, TrafficRun


class Lab(FailoverMixin):
    """One lab of a Topology under `lab_dir` on `nodes` (default: bmv2 under Mininet). `up()` makes it;
    `Lab.attach(lab_dir)` reaches one made by another process."""

    def __init__(self, model: Topology, lab_dir: str | Path = DEFAULT_DIR, nodes: Nodes | None = None, *,
                 program: str = "srv6_spray", tag: str = "", election_id: int = 1, timeout: float = 10.0) -> None:
        self.nodes: Nodes = nodes if nodes is not None else nodes_for("bmv2")
        self.dir = Path(lab_dir).resolve()
        self.model = self.nodes.placed(model, self.dir, tag)
        self.program = program
        self.tag = tag
        self.election_id = election_id
        self.timeout = timeout
        self.options: Options | None = None  # hash mode and pins of the plan install/fail/restore use
        self.state = LabState(str(self.dir), str(self.topology_path), program, tag, os.getpid(),
                              dataplane=self.nodes.dataplane)
        self._hosts: dict[str, LabHost] = {}
        self._p4infos: dict[str, P4Info] = {}  # per program, read once
        self._traffic = LabTraffic(self.dir, self.topology_path, self.host)

    @property
    def dataplane(self) -> str:
        return self.nodes.dataplane

    @property
    def topology_path(self) -> Path:
        return self.dir / TOPOLOGY_NAME

    @property
    def state_path(self) -> Path:
        return self.dir / STATE_NAME

    @property
    def failure_state_path(self) -> Path:
        """Where fabricctl --topology <lab>/topology.yaml keeps the failure set."""
        return self.dir / failurerecord.STATE_NAME

    def _save(self) -> None:
        self.state.write(self.state_path)

    def up(self, install: bool = True) -> Lab:
        """Start everything; on any error tear down what was made, then raise LabError."""
        why = self.nodes.why_not() or self.nodes.size_problem(self.model)
        if why:
            raise LabError(why)
        self.nodes.check(self.model, self.tag, self.program)
        if self.state_path.exists():
            old = LabState.read(self.state_path)
            if nodes_of(old).running(old):
                raise LabError(f"a lab already runs in {self.dir}; 'fabricctl lab down --dir {self.dir}'")
            cleanup(self.dir)  # the remains of a crashed lab
        self.dir.mkdir(parents=True, exist_ok=True)
        (self.dir / "traffic").mkdir(exist_ok=True)
        if not (self.dir / CONFIG_NAME).exists():  # marks the directory as a lab's: a later lab may replace its files
            write_lab_file(self.dir, CONFIG_NAME, json.dumps({"dataplane": self.dataplane, "tag": self.tag}) + "\n")
        self.model = self.nodes.prepare(self.model, self.dir)
        write_lab_file(self.dir, TOPOLOGY_NAME, yaml.safe_dump(to_dict(self.model), sort_keys=False))
        t0 = time.monotonic()
        self.state.phase, self.state.error = "starting", None
        self._save()
        try:
            hosts = self.nodes.start(self.model, self.dir, self.tag, self.state, self._save)
            self.state.timings["switches_s"] = round(time.monotonic() - t0, 2)
            t1 = time.monotonic()
            self._configure_hosts(hosts)
            self.state.timings["hosts_s"] = round(time.monotonic() - t1, 2)
            self._save()
            if install:
                t2 = time.monotonic()
                bad = [o for o in self.install(push="missing").values() if not o.ok]
                if bad:
                    raise LabError(f"installing the plan failed on {len(bad)} switches: {bad[0].error}")
                self.state.timings["install_s"] = round(time.monotonic() - t2, 2)
            self.state.timings["up_s"] = round(time.monotonic() - t0, 2)
            self.state.phase = "ready"
            self._save()
        except BaseException as e:
            self.state.phase, self.state.error = "failed", f"{type(e).__name__}: {e}"
            self.down()
            if isinstance(e, Exception) and not isinstance(e, LabError):
                raise LabError(f"lab up failed: {type(e).__name__}: {e}") from e
            raise
        return self

    def _configure_hosts(self, hosts: Sequence[LabHost]) -> None:
        """Every host's NICs addressed (the backend's script), in parallel."""
        procs = []
        for host in hosts:
            self._hosts[host.name] = host
            doc = self.state.hosts.setdefault(host.name, {"pid": host.pid})
            doc["nics"] = [asdict(n) for n in host.nics]
            procs.append((host, host.popen(["sh", "-ec", self.nodes.host_script(host.nics)], stdout=subprocess.PIPE,
                                           stderr=subprocess.STDOUT, text=True)))
        for host, proc in procs:
            out, _ = proc.communicate(timeout=60)
            if proc.returncode != 0:
                raise LabError(f"configuring {host.name} failed: {out.strip()[-500:]}")

    def down(self) -> CleanupReport:
        """Stop what this process holds of the lab, then remove whatever of it is left."""
        if self.state_path.exists() and self.state.pid == os.getpid():
            self.state.phase = "stopping"
            self._save()
        self.nodes.stop()
        self._hosts = {}
        return cleanup(self.dir, self.model, self.tag, signal_owner=self.state.pid != os.getpid())

    def __enter__(self) -> Lab:
        return self.up() if self.state.phase != "ready" else self

    def __exit__(self, *exc: object) -> None:
        self.down()

    @classmethod
    def attach(cls, lab_dir: str | Path = DEFAULT_DIR) -> Lab:
        """The lab another process made in lab_dir, on the data plane its state names (LabError when there is
        none or it failed)."""
        path = Path(lab_dir).resolve() / STATE_NAME
        if not path.exists():
            raise LabError(f"no lab in {Path(lab_dir).resolve()} (no {STATE_NAME}); 'fabricctl lab up' starts one")
        state = LabState.read(path)
        try:
            model = load(state.topology)
        except (OSError, ValueError) as e:  # TopologyError, YamlError, UnsafeFile: one line each
            raise LabError(f"cannot read the lab's topology {state.topology}: {' '.join(str(e).split())}") from None
        lab = cls(model, state.lab_dir, nodes_of(state), program=state.program, tag=state.tag)
        lab.model = model  # as the lab wrote it
        lab.state = state
        for name, h in state.hosts.items():
            lab._hosts[name] = lab.nodes.host(name, h, state.lab_dir)
        return lab

    # --- hosts and traffic -------------------------------------------------------------------------
    @property
    def hosts(self) -> list[str]:
        return sorted(self.model.hosts, key=natural)

    def host(self, name: str) -> LabHost:
        try:
            return self._hosts[name]
        except KeyError:
            raise LabError(f"unknown host '{name}' (hosts: {', '.join(self.hosts)})") from None

    def traffic(self, pairs: Sequence[tuple[str, str]] | None = None, **kwargs: Any) -> TrafficReport:
        """Send RoCEv2 from each pair's source to its destination (default: every ordered pair of hosts); what
        each sent and received. Keywords as `start_traffic`."""
        return self.start_traffic(pairs, **kwargs).wait()

    def start_traffic(self, pairs: Sequence[tuple[str, str]] | None = None, **kwargs: Any) -> TrafficRun:
        """Start the senders and receivers of `traffic` and return while they run (labtraffic.LabTraffic.start;
        `ipv4` defaults to what the program routes: eecmp_qp_hash, IPv4)."""
        if kwargs.get("ipv4") is None:
            kwargs["ipv4"] = self.program == "eecmp_qp_hash"
        return self._traffic.start(self.hosts, pairs, **kwargs)

    # --- wiring: faults nobody is told of ------------------------------------------------------------
    # A port set down loses, in its namespace, the routes and permanent neighbours through it, and setting it up does
    # not bring them back: the ports go down and up as the fault library's faults, which keep what they hold
    # (mininet_labs.linkroutes) and put it back, and are in the lab's fault record meanwhile.
    def link_down(self, a: str, b: str) -> tuple[str, str]:
        """Take the T0-T1 link down at both ends (a carrier-down on each; the controller is not told): their
        interfaces, a's first."""
        first = self._port_down("carrier-down", [a, b])
        try:
            return first, self._port_down("carrier-down", [b, a])
        except LabError:
            self._port_up("carrier-down", [a, b], lambda: first)
            raise

    def link_up(self, a: str, b: str) -> tuple[str, str]:
        """Both ends up again, with what link_down kept put back (an end it did not take down is only set up)."""
        end = {p.switch: p for p in self.nodes.link_ports(self.model, self.state, a, b)}
        far = self._port_up("carrier-down", [b, a], lambda: self._set_up(end[b]))
        return self._port_up("carrier-down", [a, b], lambda: self._set_up(end[a])), far

    def nic_down(self, host: str, plane: int) -> str:
        """A host's NIC in a plane down inside its namespace (its leaf port loses carrier): a host-nic-down."""
        return self._port_down("host-nic-down", [host, str(plane)])

    def nic_up(self, host: str, plane: int) -> str:
        """The NIC up again, with what nic_down kept put back (one it did not take down is only set up)."""
        return self._port_up("host-nic-down", [host, str(plane)], lambda: self.host_nic(host, plane, "up"))

    def _port_down(self, kind: str, target: list[str]) -> str:
        try:
            return str(faults.inject(self, kind, target).undo["intf"])
        except faults.FaultError as e:
            raise LabError(str(e)) from None

    def _port_up(self, kind: str, target: list[str], otherwise: Callable[[], str]) -> str:
        if not any(f.key == (kind, tuple(target)) for f in faults.active(self.dir)):
            return otherwise()
        try:
            return str(faults.undo(self, kind, target).undo["intf"])
        except faults.FaultError as e:
            raise LabError(str(e)) from None

    def _set_up(self, port: Port) -> str:
        self.nodes.set_link([port], "up")
        return port.intf

    def switch_intfs(self, name: str) -> list[str]:
        """Every interface of a switch (its host ports, uplinks and downlinks)."""
        return [p.intf for p in self.nodes.switch_ports(self.model, self.state, name)]

    def host_nic(self, host: str, plane: int, how: str) -> str:
        """Set a host's NIC in a plane up or down inside its namespace (its leaf port loses carrier)."""
        intf = self.host(host).nic(plane).intf
        self.host(host).run(["ip", "link", "set", intf, how])
        return intf

    def cut(self, ports: Iterable[str | Port]) -> list[str]:
        """Cut switch ports, named by interface or given as the backend's Ports (every frame through them dropped,
        carrier kept): every cut of the lab goes through here."""
        return self.nodes.cut(self._ports(ports))

    def mend(self, ports: Iterable[str | Port]) -> list[str]:
        return self.nodes.mend(self._ports(ports))

    def _ports(self, given: Iterable[str | Port]) -> list[Port]:
        items = list(given)
        ports = [p for p in items if isinstance(p, Port)]
        names = {p for p in items if isinstance(p, str)}
        if names:
            found = [p for s in self.model.switches for p in self.nodes.switch_ports(self.model, self.state, s.name)
                     if p.intf in names]
            if len(found) != len(names) or {p.intf for p in found} != names:
                raise LabError(f"not one switch port each: {', '.join(sorted(names))} (cut_link names a link by its "
                               "switches)")
            ports += found
        return ports

    def cut_switch(self, name: str) -> list[str]:
        """Cut every port of a switch (a switch gone silent, carrier kept); the controller is not told."""
        return self.cut(self.nodes.switch_ports(self.model, self.state, name))

    def mend_switch(self, name: str) -> list[str]:
        return self.mend(self.nodes.switch_ports(self.model, self.state, name))

    def cut_link(self, a: str, b: str) -> list[str]:
        """Cut a T0-T1 link at both ends (every frame dropped, carrier kept); the controller is not told."""
        return self.cut(self.nodes.link_ports(self.model, self.state, a, b))

    def mend_link(self, a: str, b: str) -> list[str]:
        return self.mend(self.nodes.link_ports(self.model, self.state, a, b))

    # --- switches ----------------------------------------------------------------------------------
    def kill_switch(self, name: str) -> int | None:
        """Crash a switch (bmv2: SIGKILL, no goodbye on its streams); the PID killed, None when it was not running."""
        pid = self.nodes.kill_switch(self.state, self.dir, name)
        self._save()
        return pid

    def restart_switch(self, name: str, timeout: float = 30.0) -> int:
        """Start a crashed switch again as the lab started it (no pipeline, empty tables); its new PID."""
        try:
            return self.nodes.restart_switch(self.state, self.dir, name, timeout)
        finally:
            if self.state_path.exists():
                self._save()

    def netns_of(self, node: str) -> str | None:
        """The named namespace a switch or host lives in (None where the data plane names none)."""
        return self.state.namespaces.get(node) or (self.model.switch(node).netns if self.model.has_switch(node) else None)

    def routes(self, name: str) -> list[Any]:
        """The routes a switch holds now, read back from it (a data plane of routes: the kernel's)."""
        return self.nodes.routes(self.model, name)

    def counters(self, name: str) -> dict[str, dict[str, int]]:
        """Per interface of a switch, packets sent and received."""
        return self.nodes.counters(self.model, name)

    def drops(self, name: str) -> dict[str, int]:
        """Packets a leaf's SR-domain boundary dropped, per reason."""
        return self.nodes.drops(self.model, name)

    def carrier(self) -> Any:
        """The carrier of the switches' ports, from the data plane's source (mininet_labs.carrier.CarrierSource)."""
        return self.nodes.carrier(self.model, self.tag)

    def switch(self, name: str) -> Any:
        """The Mininet switch (only in the process running a bmv2 lab)."""
        self.nodes.require("Mininet CLI")
        return self.nodes.net.get(name)  # type: ignore[attr-defined]

    def cli(self) -> None:
        """The Mininet CLI on this lab (only in the process running a bmv2 lab)."""
        self.nodes.require("Mininet CLI")
        from mininet.cli import CLI

        CLI(self.nodes.net)  # type: ignore[attr-defined]

    def status(self) -> dict[str, Any]:
        """The lab's nodes and interfaces as they are now (no switch is contacted)."""
        st = self.state
        return {"lab_dir": st.lab_dir, "topology": st.topology, "dataplane": st.dataplane, "program": st.program,
                "phase": st.phase, "error": st.error, "pid": st.pid, "timings": st.timings,
                **self.nodes.node_status(st), "faults": [f.describe() for f in active_faults(self.dir)]}
