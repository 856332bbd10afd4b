"""A Mininet Topo of a multi-plane Clos, built from controller.model.topology's Topology.

Every switch of the model becomes a Bmv2Switch with its device id and gRPC port; every host one
Mininet host with one NIC per plane (`<host>-eth<plane>`, the model's host MAC), linked to its
plane's T0 at the port the model gives its slot; every T0-T1 link joins the ports the model says.
Switch ports live in the root namespace, so their names carry the lab's `tag` (default none):
two labs with different tags can run side by side.

FabricTopo, the Mininet Topo itself, lives in mininet_labs.fabrictopo, which imports Mininet
(MininetMissing when it is absent); the names, ports and checks here need no Mininet.
"""

from __future__ import annotations

from dataclasses import dataclass

from controller.model.topology import Switch, Topology
from mininet_labs.frames import IFNAMSIZ


class LabTopologyError(ValueError):
    """The model cannot be run as a lab here (addresses, names); one line per problem."""


def port_intf(switch: Switch, port: int, tag: str = "") -> str:
    """The root-namespace interface of a switch port: `<tag><switch>-eth<port>`, or, when that is
    longer than Linux allows, `<tag>d<device id>-eth<port>`."""
    name = f"{tag}{switch.name}-eth{port}"
    return name if len(name) <= IFNAMSIZ else f"{tag}d{switch.device_id}-eth{port}"


def grpc_port(switch: Switch) -> int:
    """The TCP port of a switch's gRPC address, which a lab switch must have on 127.0.0.1/localhost."""
    host, _, port = switch.grpc_addr.rpartition(":")
    if host not in ("127.0.0.1", "localhost") or not port.isdigit():
        raise LabTopologyError(f"{switch.name}: gRPC address {switch.grpc_addr!r} is not 127.0.0.1:PORT "
                               "(lab switches listen on the loopback)")
    return int(port)


@dataclass(frozen=True)
class SwitchPort:
    """One end of a link on a switch: the switch, its bmv2 port and the interface name."""

    switch: str
    port: int
    intf: str


@dataclass(frozen=True)
class Wire:
    """One cable of a lab: a host's NIC in a plane to its leaf's host port (`host` set, `a` the leaf), or a leaf's
    uplink to a spine's downlink (`a` the leaf, `b` the spine). Ports are the model's; each backend names them."""

    plane: int
    a: str
    a_port: int
    b: str
    b_port: int
    host: str | None = None
    host_slot: int = 0


def wires(model: Topology) -> list[Wire]:
    """Every cable of a lab of `model`, per plane: each leaf's hosts, then its uplinks (the one enumeration the
    backends wire from)."""
    out = []
    for plane in range(model.planes):
        spines = model.t1s(plane)
        for leaf in model.t0s(plane):
            for slot, (host, port) in enumerate(zip(leaf.host_names, leaf.host_ports)):
                out.append(Wire(plane, leaf.name, port, host, plane, host=host, host_slot=slot))
            for j, up in enumerate(leaf.uplinks):
                out.append(Wire(plane, leaf.name, up, spines[j].name, spines[j].downlinks[leaf.index]))
    return out


def check(model: Topology, tag: str = "") -> list[str]:
    """Every reason the model cannot become a lab (names too long, addresses off the loopback)."""
    problems = []
    for s in model.switches:
        try:
            grpc_port(s)
        except LabTopologyError as e:
            problems.append(str(e))
        for port in (*s.host_ports, *s.uplinks, *s.downlinks):
            name = port_intf(s, port, tag)
            if len(name) > IFNAMSIZ:
                problems.append(f"{s.name}: interface name {name!r} is longer than {IFNAMSIZ} (shorten the tag)")
    return problems


def link_ends(model: Topology, a: str, b: str, tag: str = "") -> tuple[SwitchPort, SwitchPort]:
    """The two switch ends (T0 first) of the link between a T0 and a T1 named in either order."""
    for name in (a, b):
        if not model.has_switch(name):
            raise LabTopologyError(f"unknown switch '{name}'")
    sa, sb = model.switch(a), model.switch(b)
    leaf, spine = (sa, sb) if sa.role == "t0" else (sb, sa)
    if leaf.role != "t0" or spine.role != "t1" or leaf.plane != spine.plane:
        raise LabTopologyError(f"no link between {a} and {b}: a link joins a t0 and a t1 of one plane")
    up, down = leaf.uplinks[spine.index], spine.downlinks[leaf.index]
    return (SwitchPort(leaf.name, up, port_intf(leaf, up, tag)),
            SwitchPort(spine.name, down, port_intf(spine, down, tag)))


def all_intfs(model: Topology, tag: str = "") -> list[str]:
    """Every root-namespace interface a lab of this model makes (the switch ends of all links)."""
    return [port_intf(s, p, tag) for s in model.switches for p in (*s.host_ports, *s.uplinks, *s.downlinks)]

