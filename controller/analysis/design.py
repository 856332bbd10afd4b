"""A fabric design (planes, T1 and T0 per plane, hosts per T0), its components, and their failure rates."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace
from typing import Literal

from controller.model.topology import Topology

Kind = Literal["link", "t1", "t0", "nic"]
KINDS: tuple[Kind, ...] = ("link", "t1", "t0", "nic")
KIND_NAMES = {"link": "T0-T1 link", "t1": "T1 switch", "t0": "T0 switch", "nic": "NIC port"}
KIND_PLURALS = {"link": "T0-T1 links", "t1": "T1 switches", "t0": "T0 switches", "nic": "NIC ports"}

# Bounds that keep every computation here in memory and time on a small machine.
MAX_PLANES, MAX_T1, MAX_T0, MAX_HOSTS_PER_T0 = 64, 4096, 4096, 1024
MAX_HOSTS = 1 << 20


class DesignError(ValueError):
    """A design, rate or option that the analysis cannot take (one line)."""


@dataclass(frozen=True)
class Design:
    """A regular multi-plane two-tier Clos: every host has one NIC port per plane, host n sits on
    T0 n // hosts_per_t0 (slot n % hosts_per_t0) in every plane, every T0 links to every T1 of its
    plane (topology.build). One host is one GPU with its NIC group (MRC's multi-plane NIC)."""

    planes: int
    t1: int
    t0: int
    hosts_per_t0: int
    name: str = ""

    def __post_init__(self) -> None:
        for label, value, top in (("planes", self.planes, MAX_PLANES), ("t1 per plane", self.t1, MAX_T1),
                                  ("t0 per plane", self.t0, MAX_T0),
                                  ("hosts per t0", self.hosts_per_t0, MAX_HOSTS_PER_T0)):
            if not 1 <= value <= top:
                raise DesignError(f"{label} must be between 1 and {top}, got {value}")
        if self.hosts > MAX_HOSTS:
            raise DesignError(f"{self.hosts} hosts is more than the {MAX_HOSTS} this analysis takes")
        if self.hosts < 2:
            raise DesignError("a design needs at least 2 hosts (a host pair to disconnect)")
        if not self.name:
            object.__setattr__(self, "name", self.spec)

    @property
    def spec(self) -> str:
        return f"{self.planes}x{self.t1}x{self.t0}x{self.hosts_per_t0}"

    @property
    def hosts(self) -> int:
        return self.t0 * self.hosts_per_t0

    def count(self, kind: Kind) -> int:
        """How many components of a kind the fabric has."""
        per_plane = {"link": self.t0 * self.t1, "t1": self.t1, "t0": self.t0, "nic": self.hosts}[kind]
        return self.planes * per_plane

    @property
    def switches(self) -> int:
        return self.planes * (self.t1 + self.t0)

    def column(self, host: int) -> int:
        """The T0 index a host hangs off (the same in every plane)."""
        return host // self.hosts_per_t0

    def topology(self) -> Topology:
        """The toolkit's topology of this design (what the controller plans)."""
        from controller.model.topology import build

        return build(self.planes, self.t1, self.t0, self.hosts_per_t0, name=self.name,
                     max_port=1 << 20, cpu_port=None)


_SPEC = re.compile(r"^\s*(\d+)\s*[xX*]\s*(\d+)\s*[xX*]\s*(\d+)\s*[xX*]\s*(\d+)\s*$")


def parse_design(text: str) -> Design:
    """'PLANESxT1xT0xHOSTS' (e.g. 8x256x512x256), optionally 'NAME=PLANESxT1xT0xHOSTS'."""
    name, _, spec = text.rpartition("=")
    m = _SPEC.match(spec)
    if m is None:
        raise DesignError(f"design {text!r} is not PLANESxT1xT0xHOSTS_PER_T0 (e.g. 8x4x16x8)")
    planes, t1, t0, hosts = (int(g) for g in m.groups())
    return Design(planes, t1, t0, hosts, name=name.strip())


def from_topology(topo: Topology) -> Design:
    """The design of a topology file, which must be regular (what the closed forms assume)."""
    problems: list[str] = []
    t1 = {len(topo.t1s(p)) for p in range(topo.planes)}
    t0 = {len(topo.t0s(p)) for p in range(topo.planes)}
    hosts = {len(s.host_names) for s in topo.switches if s.role == "t0"}
    if len(t1) > 1 or len(t0) > 1:
        problems.append("its planes differ in size")
    if len(hosts) > 1:
        problems.append("its T0s have different numbers of hosts")
    if not problems:
        for p in range(topo.planes):
            for leaf in topo.t0s(p):
                expected = tuple(topo.t0s(0)[leaf.index].host_names)
                if leaf.host_names != expected:
                    problems.append(f"{leaf.name} does not hold the same hosts as {topo.t0s(0)[leaf.index].name}")
                    break
    if problems:
        raise DesignError(f"topology {topo.name} is not a regular design ({problems[0]}); "
                          "analyze it with --design PLANESxT1xT0xHOSTS")
    return Design(topo.planes, t1.pop(), t0.pop(), hosts.pop(), name=topo.name)


# --- rates -----------------------------------------------------------------------------------

# Llama 3 (Dubey et al., "The Llama 3 Herd of Models", 2024, Table 5): over a 54-day snapshot of
# pre-training on 16,384 H100 GPUs, 419 unexpected interruptions, of which 35 "Network
# Switch/Cable" and 7 "NIC". The split of the 35 between switches and cables and the fabric's
# component counts are not published: ASSUMED half and half, over a non-blocking two-tier Clos of
# 16,384 endpoints from radix-64 switches (512 T0 + 256 T1 = 768 switches, 16,384 host cables +
# 16,384 T0-T1 cables), one NIC per GPU. docs/analysis.md shows the arithmetic.
LLAMA3_HOURS = 54 * 24
LLAMA3_GPUS = 16_384
LLAMA3_SWITCH_CABLE, LLAMA3_NIC = 35, 7
REF_SWITCHES, REF_CABLES = 768, 2 * 16_384
CABLE_RATE = LLAMA3_SWITCH_CABLE / 2 / (REF_CABLES * LLAMA3_HOURS)
SWITCH_RATE = LLAMA3_SWITCH_CABLE / 2 / (REF_SWITCHES * LLAMA3_HOURS)
NIC_RATE = LLAMA3_NIC / (LLAMA3_GPUS * LLAMA3_HOURS)
DEFAULT_MTTR_HOURS = 8.0  # ASSUMED: a swap within a shift; no published figure for these fabrics


@dataclass(frozen=True)
class Rates:
    """Failures per hour of one component of each kind, and the mean time to repair (hours).
    A NIC port's rate counts the NIC and its host cable (both take the host off that plane)."""

    link: float = CABLE_RATE
    t1: float = SWITCH_RATE
    t0: float = SWITCH_RATE
    nic: float = NIC_RATE + CABLE_RATE
    mttr: float = DEFAULT_MTTR_HOURS

    def __post_init__(self) -> None:
        for kind in KINDS:
            r = getattr(self, kind)
            if not (math.isfinite(r) and 0 <= r <= 1e3):
                raise DesignError(f"the {KIND_NAMES[kind]} failure rate must be between 0 and 1000 per hour, got {r}")
        if not (math.isfinite(self.mttr) and 0 < self.mttr <= 1e6):
            raise DesignError(f"MTTR must be above 0 and at most 1e6 hours, got {self.mttr}")

    def of(self, kind: Kind) -> float:
        return float(getattr(self, kind))

    def with_rate(self, kind: Kind, rate: float) -> Rates:
        return replace(self, **{kind: rate})

    def unavailability(self, kind: Kind) -> float:
        """Steady-state probability that one component is down (alternating up/repair)."""
        x = self.of(kind) * self.mttr
        return x / (1 + x)


def parse_rate(text: str) -> float:
    """'2.4e6h' or '2.4e6' (MTBF in hours) or '4e-7/h' (failures per hour) -> failures per hour."""
    s = text.strip().lower()
    try:
        if s.endswith("/h"):
            return float(s[:-2])
        mtbf = float(s[:-1] if s.endswith("h") else s)
    except ValueError:
        raise DesignError(f"rate {text!r} is neither an MTBF in hours (2.4e6h) nor failures per hour (4e-7/h)") from None
    if not mtbf > 0:
        raise DesignError(f"MTBF {text!r} must be above 0 hours")
    return 1.0 / mtbf
