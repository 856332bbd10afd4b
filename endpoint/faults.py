"""Faults on a lab's T0-T1 link for the side-by-side scenarios: cut, one direction blackholed, gray loss, slow path.

Each is the lab's (mininet_labs.faults, the one fault library; a cut is the lab's `cut_link`), on the ends the
scenarios need: a blackhole drops everything the T1 sends down the link (the T0 sends on while nothing comes back);
a gray link drops N% of what the T0 sends up it; a slow path is a tbf rate limit on the T0's uplink. Being the
library's, each is recorded in the lab's fault record (`lab status` names it, `lab down` clears it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from controller import exitcodes
from controller.model import lookup
from controller.model.failures import LinkDown
from mininet_labs import faults as library
from mininet_labs.lab import Lab, LabError

KINDS = ("cut", "blackhole", "gray", "slow")
_RATE = re.compile(r"^(\d+(?:\.\d+)?)(k|m|g)?bit$")
_KBIT = {"k": 1, "m": 1000, "g": 1000_000, None: 0.001}


def kbit(rate: str) -> int:
    """A tc rate ('2mbit', '500kbit') in kbit/s; LabError for another spelling."""
    m = _RATE.match(rate.strip().lower())
    if m is None or float(m.group(1)) * _KBIT[m.group(2)] < 1:
        raise LabError(f"rate {rate!r}: a rate such as 500kbit or 2mbit (1 kbit/s or more)")
    return int(float(m.group(1)) * _KBIT[m.group(2)])


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
        try:
            lookup.link(self.lab.model, self.t0, self.t1)
        except exitcodes.OpError as e:
            raise LabError(str(e)) from None
        if self.kind == "slow":
            kbit(self.rate)

    @property
    def failure(self) -> LinkDown:
        """What the controller is told when the fault is announced."""
        return lookup.link(self.lab.model, self.t0, self.t1)

    def crosses(self, ev: Any) -> bool:
        """Whether an EV (controller.plan.evs.Ev) goes over this link."""
        return bool(ev.spine_name == self.t1 and self.t0 in (ev.src_leaf, ev.dst_leaf))

    def describe(self) -> str:
        extra = {"gray": f" {self.percent}% loss", "slow": f" {self.rate}"}.get(self.kind, "")
        return f"{self.kind}{extra} on {self.t0} -- {self.t1}"

    def _library(self) -> tuple[str, list[str], dict[str, Any]]:
        """The library's kind, target (the sending end first) and parameters for this fault."""
        if self.kind == "blackhole":
            return "blackhole", [self.t1, self.t0], {}
        if self.kind == "gray":
            return "gray", [self.t0, self.t1], {"percent": self.percent}
        return "slow", [self.t0, self.t1], {"kbit": kbit(self.rate), "latency_ms": 100}

    def apply(self) -> None:
        if self.kind == "cut":
            self.lab.cut_link(self.t0, self.t1)
            self.applied.append("cut")
            return
        kind, target, params = self._library()
        try:
            library.inject(self.lab, kind, target, **params)
        except library.FaultError as e:
            raise LabError(str(e)) from None
        self.applied.append(kind)

    def revert(self) -> None:
        """Undo whatever apply did (also after it failed half-way)."""
        errors = []
        for what in reversed(self.applied):
            try:
                if what == "cut":
                    self.lab.mend_link(self.t0, self.t1)
                else:
                    library.undo(self.lab, *self._library()[:2])
            except (LabError, library.FaultError) as e:
                errors.append(str(e))
        self.applied.clear()
        if errors:
            raise LabError(errors[0])
