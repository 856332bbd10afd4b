"""What a lab's switches and hosts are made of: a node backend, chosen once and handed to the one lab orchestrator.

    Lab(model, lab_dir, nodes_for("kernel"))     # Linux SRv6 routers in named namespaces (mininet_labs.kernel.nodes)
    Lab(model, lab_dir, nodes_for("bmv2"))       # bmv2 processes under Mininet (mininet_labs.bmv2.nodes)

(nodes_for, in mininet_labs.backends, makes one by the data plane's name.)

`mininet_labs.lab.Lab` runs the lifecycle (state file, up, down, attach, status, hosts, traffic, failures) the same
way for both; a backend makes and removes its nodes, wires them, programs its switches (`sync`) and cuts its links.
A backend that cannot do something raises `Unsupported` naming it, in one line: no caller asks which kind it has.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from controller.model.topology import Topology
from mininet_labs.labstate import LabError, LabState

if TYPE_CHECKING:
    from controller.southbound.base import Push
    from controller.southbound.base import Outcome
    from controller.routes import Fabric
    from mininet_labs.carrier import CarrierSource
    from mininet_labs.labhost import LabHost
    from mininet_labs.traffic import HostNic


class Unsupported(LabError):
    """What a data plane cannot do, said by its backend in one line."""

    def __init__(self, dataplane: str, what: str, hint: str = "") -> None:
        super().__init__(dataplane, what, hint)
        self.dataplane, self.what, self.hint = dataplane, what, hint

    def __str__(self) -> str:
        return f"the {self.dataplane} data plane has no {self.what}" + (f" ({self.hint})" if self.hint else "")


@dataclass(frozen=True)
class Port:
    """A switch port as a backend reaches it: the interface and the namespace it lives in (None: the root one)."""

    switch: str
    intf: str
    netns: str | None = None


class Nodes(Protocol):
    """A data plane's nodes for a lab (see the module doc)."""

    dataplane: str
    removes: str  # what `remove` removes, as `lab down` names it: "interfaces", "namespaces"
    holder: bool  # a process must hold the running lab (Mininet's); else the nodes outlive the process that made them
    lacks: tuple[str, ...]  # what the P4 switch does that these nodes do not (what a demo on them cannot show)

    def options(self) -> dict[str, Any]:
        """The keywords of `nodes_for` that make this backend again (a holder process reads them)."""

    def why_not(self) -> str | None:
        """What this machine lacks to run such a lab (root, binaries, kernel features), or None."""

    def size_problem(self, model: Topology) -> str | None:
        """Why the topology is too large for one machine, or None."""

    def check(self, model: Topology, tag: str, program: str) -> None:
        """Raise LabError (Unsupported) for what this data plane cannot run, before anything starts."""

    def placed(self, model: Topology, lab_dir: Path, tag: str) -> Topology:
        """The model as this data plane runs it (e.g. each switch's namespace in its record)."""

    def prepare(self, model: Topology, lab_dir: Path) -> Topology:
        """At `up`, before the lab's topology file is written: the model it names (bmv2: its TLS files made)."""

    def running(self, state: LabState) -> bool:
        """Whether the lab an earlier state describes still runs."""

    def start(self, model: Topology, lab_dir: Path, tag: str, state: LabState,
              save: Callable[[], None]) -> list[LabHost]:
        """Make the switches and hosts and wire them (state filled as it goes, `save` writes it); the hosts."""

    def host_script(self, nics: Sequence[HostNic]) -> str:
        """The shell script that addresses a host's NICs."""

    def stop(self) -> None:
        """Stop what this process holds (nothing left to stop: no-op)."""

    def remove(self, lab_dir: Path, state: LabState | None, model: Topology | None, tag: str) -> tuple[list[str], list[str]]:
        """Remove the lab's interfaces or namespaces: (removed, still there)."""

    def host(self, name: str, doc: dict[str, Any], lab_dir: str) -> LabHost:
        """The handle of a host the state records."""

    def sync(self, model: Topology, fabric: Fabric, names: Sequence[str], *, program: str,
             p4info: Callable[[], Any], election_id: int, timeout: float, push: Push,
             dry_run: bool) -> dict[str, Outcome]:
        """Each named switch to its plan under `fabric` (read back, write the difference; dry: only find it)."""

    def link_ports(self, model: Topology, state: LabState, a: str, b: str) -> list[Port]:
        """Both ends of the T0-T1 link a -- b (T0 first)."""

    def switch_ports(self, model: Topology, state: LabState, name: str) -> list[Port]:
        """Every port of a switch."""

    def cut(self, ports: Iterable[Port]) -> list[str]:
        """Drop every frame through the ports, carrier and routes untouched (the controller is not told)."""

    def mend(self, ports: Iterable[Port]) -> list[str]:
        """Undo `cut`."""

    def set_link(self, ports: Iterable[Port], how: str) -> None:
        """`ip link set <port> up|down` at each port."""

    def kill_switch(self, state: LabState, lab_dir: Path, name: str) -> int | None:
        """Crash a switch (its PID, None when it was not running)."""

    def restart_switch(self, state: LabState, lab_dir: Path, name: str, timeout: float) -> int:
        """Start a crashed switch again (its PID)."""

    def routes(self, model: Topology, name: str) -> list[Any]:
        """The routes a switch holds now (Unsupported where its state is tables, not routes)."""

    def counters(self, model: Topology, name: str) -> dict[str, dict[str, int]]:
        """Per interface of a switch, packets sent and received."""

    def drops(self, model: Topology, name: str) -> dict[str, int]:
        """Packets a leaf's SR-domain boundary dropped, per reason."""

    def carrier(self, model: Topology, tag: str) -> CarrierSource:
        """The carrier of the switches' ports as the kernel reports it (mininet_labs.carrier)."""

    def require(self, what: str) -> None:
        """Raise Unsupported when this data plane has no `what` ("P4Runtime", "Mininet CLI", ...)."""

    def node_status(self, state: LabState) -> dict[str, Any]:
        """switches/hosts {name: {alive, ...}} and this data plane's own summary keys, as they are now."""

    def summary(self, doc: dict[str, Any]) -> str:
        """One line on the nodes of a status doc (`lab status`'s first line)."""

    def where(self, name: str, doc: dict[str, Any]) -> str:
        """How `lab status` names a node of its doc (a PID, a namespace)."""
