"""The southbound of each switch, chosen from its topology record: a switch with a network namespace (`netns:`) is
on the kernel data plane (netlink), any other is a P4Runtime switch at its gRPC address.

    fleet = Fleet(topo, program, election_id=1, timeout=10.0, p4info=lambda: (artifacts, p4info))
    ready = fleet.prepare(fabric, names)      # every switch's plan checked before any switch is contacted
    outcomes = ready.run(dry_run=False, push="missing")

The commands ask the fleet and never which data plane a switch is on; a P4Runtime-only feature asks
`require_p4runtime`, which names the first switch that is not one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from controller import exitcodes
from controller.southbound.base import Batch, Outcome, Progress, Push, Southbound
from controller.model.topology import Switch, Topology
from controller.programs.toolchain import Artifacts
from controller.routes import Fabric
from controller.runtime.p4info import P4Info

Kind = Literal["netlink", "p4runtime"]


def kind_of(sw: Switch) -> Kind:
    """The data plane a switch's record names: a network namespace means netlink, else P4Runtime."""
    return "netlink" if sw.netns is not None else "p4runtime"


def where(sw: Switch) -> str:
    """Where the controller reaches a switch, for people: 'netns sf-lab-p0-t0-0' or 'grpc 127.0.0.1:50001'."""
    return f"netns {sw.netns}" if sw.netns is not None else f"grpc {sw.grpc_addr}"


def require_p4runtime(topo: Topology, names: Iterable[str], what: str) -> None:
    """OpError (one line) naming the first of the switches that is not a P4Runtime switch, for a feature (`what`)
    only P4 switches have (P4 probes and counters, the P4Runtime shell)."""
    for name in names:
        sw = topo.switch(name)
        if kind_of(sw) != "p4runtime":
            raise exitcodes.OpError(f"{what} needs P4Runtime switches: {sw.name} is on the kernel data plane "
                              f"(network namespace {sw.netns}), programmed over netlink (docs/kernel.md)", exitcodes.BAD_INPUT)


@dataclass
class Prepared:
    """Switches of any data planes, each with its plan ready in its southbound's batch."""

    names: list[str]
    batches: list[Batch]
    _of: dict[str, Batch] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self._of = {n: b for b in self.batches for n in b.names}

    def run(self, *, dry_run: bool, push: Push, progress: Progress | None = None) -> list[Outcome]:
        """Every switch read back and reconciled (dry_run: only compared) by its southbound; in the order given."""
        out: dict[str, Outcome] = {}
        for batch in self.batches:
            out.update(batch.run(dry_run=dry_run, push=push, progress=progress))
        return [out[n] for n in self.names]

    def text(self, name: str, item: Any) -> str:
        return self._of[name].text(item)

    def to_json(self, name: str, item: Any) -> Any:
        return self._of[name].to_json(item)


class Fleet:
    """The southbounds of a topology's switches, made when first needed: the P4Runtime one loads the program's P4Info
    (`p4info()`: the caller's loader, with its own errors) only when a P4Runtime switch is asked for."""

    def __init__(self, topo: Topology, program: str, *, election_id: int, timeout: float,
                 p4info: Callable[[], tuple[Artifacts, P4Info]] | None = None) -> None:
        self.topo, self.program, self.election_id, self.timeout = topo, program, election_id, timeout
        self._p4info = p4info
        self._made: dict[Kind, Southbound] = {}

    def southbound(self, sw: Switch) -> Southbound:
        """The southbound that programs this switch."""
        kind = kind_of(sw)
        if kind not in self._made:
            self._made[kind] = self._make(kind)
        return self._made[kind]

    def _make(self, kind: Kind) -> Southbound:
        if kind == "netlink":
            from controller.southbound.netlink import NetlinkSouthbound  # pyroute2 only where a switch needs it

            return NetlinkSouthbound(self._netns_of, self.timeout)
        from controller.southbound.p4runtime import P4RuntimeSouthbound

        artifacts, p4info = self._p4info() if self._p4info is not None else (Artifacts.of(self.program), None)
        return P4RuntimeSouthbound(self.topo, self.program, election_id=self.election_id, timeout=self.timeout,
                                   artifacts=artifacts, p4info=p4info)

    def _netns_of(self, name: str) -> str:
        netns = self.topo.switch(name).netns
        assert netns is not None, name
        return netns

    def prepare(self, fabric: Fabric, names: Sequence[str]) -> Prepared:
        """The named switches grouped by southbound, each group's plans checked (ops.OpError naming the switch that
        cannot hold its plan) before any switch is contacted."""
        groups: dict[int, tuple[Southbound, list[Switch]]] = {}
        for name in names:
            sw = self.topo.switch(name)
            sb = self.southbound(sw)
            groups.setdefault(id(sb), (sb, []))[1].append(sw)
        return Prepared(list(names), [sb.prepare(fabric, switches) for sb, switches in groups.values()])
