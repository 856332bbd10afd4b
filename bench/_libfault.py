"""The lab's fault library (mininet_labs.faults) as a fault of endpoint.scenarios' side-by-side runs."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from controller.model import lookup
from controller.model.failures import Failure
from controller.plan.evs import SPINE_BITS
from mininet_labs import faults
from mininet_labs.lab import Lab

# bench name -> the library's kind; link kinds act on the leaf's end of leaf -- spine (what the leaf sends up)
KINDS = {"carrier": "carrier-down", "blackhole": "blackhole", "gray": "gray", "freeze": "freeze"}


@dataclass
class LibFault:
    """One fault of the library on the link t0 -- t1 (`freeze`: the switch t1), with what endpoint.scenarios
    asks of a fault: apply, revert, describe, crosses(ev), failure (what an announcing controller records)."""

    lab: Lab
    kind: str
    t0: str
    t1: str
    percent: int = 30
    applied: list[Any] = field(default_factory=list)

    @property
    def library_kind(self) -> str:
        return KINDS[self.kind]

    @property
    def target(self) -> list[str]:
        return [self.t1] if self.kind == "freeze" else [self.t0, self.t1]

    @property
    def failure(self) -> Failure:
        return lookup.switch_failure(self.lab.model, self.t1) if self.kind == "freeze" else \
            lookup.link(self.lab.model, self.t0, self.t1)

    @property
    def plane(self) -> int:
        return self.lab.model.switch(self.t1).plane

    def crosses(self, ev: Any) -> bool:
        """Whether a host EV goes over the fault: through the frozen spine, or over the link (either way)."""
        if self.kind == "freeze":
            return bool(ev.spine_name == self.t1)
        return bool(ev.spine_name == self.t1 and self.t0 in (ev.src_leaf, ev.dst_leaf))

    def on_plane(self, ev_ids: list[int]) -> bool:
        """Whether a leaf-spray QP (its EVs: one per plane it uses) is sprayed over the fault's plane."""
        return any(i >> SPINE_BITS == self.plane for i in ev_ids)

    def describe(self) -> str:
        what = f"gray {self.percent}%" if self.kind == "gray" else self.library_kind
        return f"{what} {' -> '.join(self.target)}"

    def apply(self) -> None:
        params = {"percent": self.percent} if self.kind == "gray" else {}
        self.applied.append(faults.inject(self.lab, self.library_kind, self.target, **params))

    def revert(self) -> None:
        """Undo it if it is in place (also after a failed run)."""
        if self.applied:
            faults.undo(self.lab, self.library_kind, self.target)
            self.applied.clear()

    def detection_event(self, what: str) -> bool:
        """Whether a service event on endpoint.unattended's timeline is this fault recorded."""
        if self.kind == "freeze":
            return what == f"controller (unattended): switch_down {self.t1}"
        return what in (f"controller (unattended): link_down {self.t0}--{self.t1}",
                        f"controller (unattended): link_down {self.t1}--{self.t0}")
