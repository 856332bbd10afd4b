"""Path-selection schemes for a collective on a lab: which program and plan options the switches get,
which EVs the hosts send on, how the sender picks among them, and which UDP source port it writes.

    ecmp        5-tuple ECMP (eecmp_qp_hash FLOW): the leaves hash the 5-tuple; every QP of a host pair
                in a plane shares it (the endpoint's port is its EV's), the low entropy Meta measured
    eecmp       E-ECMP (eecmp_qp_hash QP): the leaves hash the 5-tuple and the BTH destination QP, so
                QP scaling spreads a connection over the uplinks
    pin         path pinning (eecmp_qp_hash PIN): the uplink is the destination host's slot at its leaf
    leaf-spray  per-packet spraying at the leaves (srv6_spray PACKET) of plain RoCEv2
    host-spray  endpoint mode: the host sprays each QP's packets over its own SRv6 EVs (health policy)
    ethereal    endpoint mode: each message split into equal parts, each part on the least-loaded EV

In the leaf schemes QP k rides plane k mod planes (policy qp-rr over one EV per plane).
"""

from __future__ import annotations

from dataclasses import dataclass

from controller.routes import SPRAY, Options
from controller.plan.p4names import EECMP, FLOW, PACKET, QP
from controller.plan.p4names import Program
from controller.plan.options import HostPin


@dataclass(frozen=True)
class Scheme:
    name: str
    program: Program
    mode: int
    evs: str  # "leaf": one EV per plane without a carrier; "host": the host's SRv6 EVs
    policy: str
    sport: str = "ev"  # the data packets' UDP source port: the EV's, or the QP's own (rank.Transport)
    pins: bool = False
    kernel: str | None = None  # why the kernel data plane cannot carry it; None: it can
    kernel_sport: str | None = None  # on the kernel: the UDP source port that carries the scheme there
    what: str = ""
    ipv4: bool = False  # RoCEv2 over IPv4: eecmp_qp_hash's plan routes IPv4 only

    def options(self, host_pins: tuple[HostPin, ...] = ()) -> Options:
        return Options(program=self.program, mode=self.mode, host_pins=host_pins if self.pins else (),
                       host_source_routing=self.evs == "host")


SCHEMES: dict[str, Scheme] = {s.name: s for s in (
    Scheme("ecmp", EECMP, FLOW, "leaf", "qp-rr", ipv4=True, what="5-tuple ECMP at the leaves"),
    Scheme("eecmp", EECMP, QP, "leaf", "qp-rr", kernel_sport="qp", ipv4=True,
           what="E-ECMP on the destination QP (kernel: the QP's own UDP source port, which its L4 hash reads)"),
    Scheme("pin", EECMP, FLOW, "leaf", "qp-rr", pins=True, ipv4=True,
           kernel="path pinning: the kernel's multipath routes have no per-destination-host pin (plan pins are refused)",
           what="path pinning by destination host slot"),
    Scheme("leaf-spray", SPRAY, PACKET, "leaf", "qp-rr",
           kernel="per-packet leaf spraying: Linux multipath routes choose per flow (hash), never per packet",
           what="per-packet spraying at the leaves (srv6_spray)"),
    Scheme("host-spray", SPRAY, PACKET, "host", "health", what="host EV spraying (endpoint mode)"),
    Scheme("ethereal", SPRAY, PACKET, "host", "ethereal", what="Ethereal split-and-assign over the host's EVs"),
)}


def scheme(name: str) -> Scheme:
    try:
        return SCHEMES[name]
    except KeyError:
        raise ValueError(f"unknown path selection '{name}' (known: {', '.join(SCHEMES)})") from None


def on_kernel(s: Scheme) -> Scheme:
    """The scheme as the kernel data plane carries it (srv6_spray's plan, the kernel's L4 multipath hash);
    ValueError saying why when it cannot."""
    if s.kernel:
        raise ValueError(f"the kernel data plane cannot carry {s.name}: {s.kernel}")
    from dataclasses import replace

    return replace(s, program=SPRAY, mode=FLOW, sport=s.kernel_sport or s.sport, ipv4=False)
