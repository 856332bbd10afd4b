"""Faults on a lab's T0-T1 link for the side-by-side scenarios: cut, one direction blackholed, gray loss, slow path.

Each is a pair of actions on the root-namespace ends of the link (the T0's uplink and the T1's
downlink), undone in `revert`: a cut is Lab.cut's MTU drop; a blackhole drops everything the T1
sends down the link (nftables netdev egress hook, so the T0 sends on while nothing comes back); a
gray link drops N% of what the T0 sends up it (`numgen random mod 100 < N`, the kernel has no
netem); a slow path is a tbf rate limit on the T0's uplink. nftables tables and qdiscs are named
after this process, so nothing of another lab is touched.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass, field
from typing import Any

from controller import ops
from controller.failover import LinkDown
from mininet_labs.lab import Lab, LabError
from mininet_labs.topo import link_ends

KINDS = ("cut", "blackhole", "gray", "slow")


def _run(argv: list[str]) -> None:
    proc = subprocess.run(argv, capture_output=True, text=True)
    if proc.returncode != 0:
        raise LabError(f"{' '.join(argv)}: {proc.stderr.strip()}")


@dataclass
class Fault:
    """One fault on the link t0 -- t1 (`kind` one of KINDS; `percent` for gray, `rate` e.g. '2mbit' for slow)."""

    lab: Lab
    kind: str
    t0: str
    t1: str
    percent: int = 10
    rate: str = "2mbit"
    applied: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise LabError(f"unknown fault '{self.kind}' (known: {', '.join(KINDS)})")
        ends = link_ends(self.lab.model, self.t0, self.t1, self.lab.tag)
        self.up_intf, self.down_intf = ends[0].intf, ends[1].intf
        self.table = f"srv6ep{os.getpid()}"

    @property
    def failure(self) -> LinkDown:
        """What the controller is told when the fault is announced."""
        return ops.link(self.lab.model, self.t0, self.t1)

    def crosses(self, ev: Any) -> bool:
        """Whether an EV (controller.plan.evs.Ev) goes over this link."""
        return ev.spine_name == self.t1 and self.t0 in (ev.src_leaf, ev.dst_leaf)

    def describe(self) -> str:
        extra = {"gray": f" {self.percent}% loss", "slow": f" {self.rate}"}.get(self.kind, "")
        return f"{self.kind}{extra} on {self.t0} -- {self.t1}"

    def _drop(self, intf: str, rule: list[str]) -> None:
        _run(["nft", "add", "table", "netdev", self.table])
        self.applied.append("nft")
        _run(["nft", "add", "chain", "netdev", self.table, "egress",
              f'{{ type filter hook egress device "{intf}" priority 0 ; }}'])
        _run(["nft", "add", "rule", "netdev", self.table, "egress", *rule, "counter", "drop"])

    def apply(self) -> None:
        if self.kind == "cut":
            self.lab.cut_link(self.t0, self.t1)
            self.applied.append("cut")
        elif self.kind == "blackhole":
            self._drop(self.down_intf, [])
        elif self.kind == "gray":
            self._drop(self.up_intf, ["numgen", "random", "mod", "100", "<", str(self.percent)])
        else:
            _run(["tc", "qdisc", "add", "dev", self.up_intf, "root", "tbf", "rate", self.rate, "burst", "16kbit",
                  "latency", "100ms"])
            self.applied.append("tbf")

    def revert(self) -> None:
        """Undo whatever apply did (also after it failed half-way)."""
        errors = []
        for what in reversed(self.applied):
            try:
                if what == "cut":
                    self.lab.mend_link(self.t0, self.t1)
                elif what == "nft":
                    _run(["nft", "delete", "table", "netdev", self.table])
                else:
                    _run(["tc", "qdisc", "del", "dev", self.up_intf, "root"])
            except LabError as e:
                errors.append(str(e))
        self.applied.clear()
        if errors:
            raise LabError(errors[0])
