"""The probed directions: both directions of every T0-T1 link, and each host NIC's round trip behind its T0 port
(what controller.service.prober sends a probe on every period), and how the metrics and status name them."""

from __future__ import annotations

from dataclasses import dataclass

from controller import planning
from controller.model.failures import Failure, HostPortDown, LinkDown
from controller.model.topology import Topology
from controller.plan.probes import probed_host_ports


@dataclass(frozen=True, slots=True)
class Direction:
    """One direction of a T0-T1 link: out of `src` port `src_port`, into `dst` port `dst_port`; or a
    host NIC's round trip (`host` set): out of its T0's port and back in there (src == dst)."""

    link: Failure  # what is recorded when it fails: LinkDown, or HostPortDown for a host NIC
    link_id: int
    direction: int  # 0: T0 -> T1, 1: T1 -> T0 (a host NIC: 0)
    src: str
    src_port: int
    dst: str
    dst_port: int
    host: str = ""
    target: int = 0  # a host NIC's address, the target of the Neighbor Solicitations

    @property
    def label(self) -> str:
        if self.host:
            return f"{self.src}:{self.src_port}<->{self.host}"
        return f"{self.src}:{self.src_port}->{self.dst}:{self.dst_port}"


def failure_label(f: Failure) -> str:
    """A link or host port as the metrics and status name it."""
    return f"{f.t0}--{f.t1}" if isinstance(f, LinkDown) else f"{f.t0}:{f.port}"  # type: ignore[union-attr]


def directions(topo: Topology, hosts: bool = False) -> list[Direction]:
    """Both directions of every T0-T1 link (a T0's uplinks[j] faces T1 j; a T1's downlinks[i] faces T0 i);
    with `hosts`, then every host NIC behind a T0 port (link ids after the links')."""
    out: list[Direction] = []
    for p in range(topo.planes):
        for leaf in topo.t0s(p):
            for j, spine in enumerate(topo.t1s(p)):
                link = LinkDown(leaf.name, spine.name)
                n = len(out) // 2
                out.append(Direction(link, n, 0, leaf.name, leaf.uplinks[j], spine.name, spine.downlinks[leaf.index]))
                out.append(Direction(link, n, 1, spine.name, spine.downlinks[leaf.index], leaf.name, leaf.uplinks[j]))
    if hosts:
        sids = planning.sid_plan(topo)
        n = len(out) // 2
        for p in range(topo.planes):
            for leaf in topo.t0s(p):
                for slot, port, host in probed_host_ports(leaf):
                    out.append(Direction(HostPortDown(leaf.name, port), n, 0, leaf.name, port, leaf.name, port,
                                         host, sids.host_v6(p, leaf.index, slot)))
                    n += 1
    return out
