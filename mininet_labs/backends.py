"""The node backends by name: the data plane a lab runs on, chosen once (from --dataplane, or the lab's saved state)."""

from __future__ import annotations

from mininet_labs.labstate import DATAPLANES, LabError, LabState
from mininet_labs.nodes import Nodes


def choose(requested: str) -> tuple[str, str]:
    """(data plane, why): bmv2 where simple_switch_grpc and Mininet are at hand, else the kernel's."""
    from mininet_labs.labstate import prerequisites as bmv2_missing

    if requested != "auto":
        return requested, "asked for"
    why = bmv2_missing()
    if why is None:
        return "bmv2", "simple_switch_grpc and Mininet found"
    return "kernel", f"{why}; the kernel's SRv6 needs neither"


def nodes_for(dataplane: str, *, name: str | None = None, pcap: bool = False, log_level: str = "warn",
              tls: bool = False, cli: bool = False) -> Nodes:
    """The backend of a data plane with its options; Unsupported when it cannot carry one of them."""
    if dataplane not in DATAPLANES:
        raise LabError(f"unknown data plane {dataplane!r} (data planes: {', '.join(DATAPLANES)})")
    if dataplane == "kernel":
        from mininet_labs.kernel.nodes import NetnsNodes

        return NetnsNodes(name=name, pcap=pcap, tls=tls, cli=cli)
    from mininet_labs.bmv2.nodes import Bmv2Nodes

    return Bmv2Nodes(pcap=pcap, log_level=log_level, tls=tls)


def nodes_of(state: LabState) -> Nodes:
    """The backend that made the lab a state describes."""
    return nodes_for(state.dataplane)
