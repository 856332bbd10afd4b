"""Incast through a bottleneck: several senders to one host whose leaf ports are slowed, packet trimming on or off.

The bottleneck is the egress queue of every leaf port towards the receiving host (one per plane),
served at `pps` packets/s and `depth` packets deep through bmv2's Thrift runtime
(mininet_labs.bmv2runtime: `set_queue_rate`, `set_queue_depth`). With trimming off a full queue
tail-drops: the sender sees the loss from the ACKs of later packets (RACK) or from its
retransmission timeout. With trimming on (the plan's thresholds, `congestion.p4`) a packet that
finds `trim_qdepth` packets ahead is cut to its headers and delivered: the receiver NACKs its PSN
and the sender resends at once. The switches' own ce_marked / trimmed counters of the bottleneck
ports are read after each mode. Turning the thresholds back off is a plain reconcile (the plan's
resets put the switches' default back).
"""

from __future__ import annotations

import dataclasses
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from controller.plan.evs import Ev
from controller.routes import Options
from controller.model.topology import Switch
from mininet_labs.bmv2runtime import Bmv2Runtime, RuntimeCliError, RuntimeSession
from mininet_labs.lab import Lab, LabError
from mininet_labs.switch import THRIFT_OFFSET
from mininet_labs.topo import grpc_port

# mode -> (how packets find their path, EV policy, trimming on)
MODES: dict[str, tuple[str, str, bool]] = {
    "host": ("host", "health", False),
    "host-trim": ("host", "health", True),
    "leaf": ("leaf", "spray", False),
    "leaf-trim": ("leaf", "spray", True),
}
UNLIMITED_PPS = 1_000_000  # what the lab's queues are served at outside the bottleneck (bmv2: no limit by default)
BMV2_QUEUE_DEPTH = 64  # bmv2's default egress queue capacity (packets)
COUNTERS = ("FabricEgress.congestion.ce_marked", "FabricEgress.congestion.trimmed")


@dataclass
class Bottleneck:
    """The leaf ports towards `host` (one per plane) served at `pps` packets/s, `depth` packets deep,
    between apply() and revert(). Used where a scenario expects a Fault (endpoint.faults)."""

    lab: Lab
    host: str
    pps: int = 200
    depth: int = 32
    applied: list[tuple[Switch, int]] = field(default_factory=list)
    failure: Any = None  # nothing for the controller to be told: congestion is no failure
    kind: str = "incast"
    sessions: dict[str, RuntimeSession] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.host not in self.lab.model.hosts:
            raise LabError(f"unknown host '{self.host}' (hosts: {', '.join(self.lab.hosts)})")
        if not 1 <= self.pps <= UNLIMITED_PPS or not 1 <= self.depth <= 4096:
            raise LabError(f"bottleneck {self.pps} packets/s, {self.depth} deep: need 1..{UNLIMITED_PPS} and 1..4096")
        self.ports = [(s, s.host_ports[s.host_names.index(self.host)]) for s in self.lab.model.switches
                      if s.role == "t0" and self.host in s.host_names]

    def describe(self) -> str:
        return f"incast to {self.host}: its leaf ports served at {self.pps} packets/s, {self.depth} packets deep"

    def crosses(self, ev: Ev) -> bool:
        """Every EV to the receiving host crosses its leaf's port (callers pass only those)."""
        return True

    @staticmethod
    def runtime(switch: Switch) -> Bmv2Runtime:
        return Bmv2Runtime(thrift_port=grpc_port(switch) + THRIFT_OFFSET)

    def open(self) -> None:
        """A runtime CLI session per bottleneck switch, started now (in parallel) so that apply() and
        revert() take milliseconds: a simple_switch_CLI takes seconds to start on the busy lab."""
        def start(s: Switch) -> RuntimeSession:
            return self.runtime(s).session()

        names = sorted({s.name for s, _ in self.ports})
        with ThreadPoolExecutor(max_workers=len(names) or 1) as pool:
            futures = {n: pool.submit(start, self.lab.model.switch(n)) for n in names}
        errors = []
        for n, f in futures.items():
            try:
                self.sessions[n] = f.result()
            except RuntimeCliError as e:
                errors.append(str(e))
        if errors:
            self.close()
            raise LabError(errors[0])

    def close(self) -> None:
        for session in self.sessions.values():
            session.close()
        self.sessions.clear()

    def _on_every_port(self, *commands: str) -> None:
        if not self.sessions:
            self.open()
        try:
            for s, port in self.ports:
                self.sessions[s.name].run(*(c.format(port=port) for c in commands))
        except RuntimeCliError as e:
            raise LabError(str(e)) from None

    def apply(self) -> None:
        self.applied = list(self.ports)
        self._on_every_port(f"set_queue_depth {self.depth} {{port}}", f"set_queue_rate {self.pps} {{port}}")

    def revert(self) -> None:
        """The lab's defaults back on every port (whatever apply() managed)."""
        if self.applied:
            self.applied = []
            self._on_every_port(f"set_queue_rate {UNLIMITED_PPS} {{port}}", f"set_queue_depth {BMV2_QUEUE_DEPTH} {{port}}")

    def counters(self) -> dict[str, dict[str, int]]:
        """CE-marked and trimmed packets as the switches count them: per bottleneck port ('leaf:port')
        and, under 'fabric', over every port of every switch."""
        keys = dict(zip(COUNTERS, ("ce_marked", "trimmed")))
        bottleneck = {(s.name, port) for s, port in self.ports}
        out: dict[str, dict[str, int]] = {f"{s}:{p}": dict.fromkeys(keys.values(), 0) for s, p in sorted(bottleneck)}
        out["fabric"] = dict.fromkeys(keys.values(), 0)
        with self.lab.client() as client:
            for name, conn in client.switches.items():
                for counter, key in keys.items():
                    for cell in conn.read_counter(counter):
                        out["fabric"][key] += cell.packets
                        if (name, cell.index) in bottleneck:
                            out[f"{name}:{cell.index}"][key] += cell.packets
        return out


def set_thresholds(lab: Lab, ecn_qdepth: int, trim_qdepth: int) -> None:
    """The lab's plan with these thresholds (0: off), reconciled on every switch (off resets them)."""
    lab.options = dataclasses.replace(lab.options or Options(), ecn_qdepth=ecn_qdepth, trim_qdepth=trim_qdepth)
    bad = [o for o in lab.install().values() if not o.ok]
    if bad:
        raise LabError(f"setting the congestion thresholds failed: {bad[0].error}")


def same_leaf(lab: Lab, a: str, b: str) -> bool:
    """Whether two hosts hang off the same leaves (endpoint mode has no EV between them)."""
    return any(a in s.host_names and b in s.host_names for s in lab.model.switches if s.role == "t0")


def default_senders(lab: Lab, host: str) -> list[str]:
    """Every host under another leaf than `host`'s."""
    return [h for h in lab.hosts if not same_leaf(lab, h, host)]
