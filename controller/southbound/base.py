"""The southbound interface: what the controller asks of any data plane (install a switch's plan, read it back, apply a failure)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from controller.ops import Outcome, Push
from controller.routes import Fabric
from controller.model.topology import Switch

# Called once per switch as it finishes: (switch name, its result or None, its error or None).
Progress = Callable[[str, Any, BaseException | None], None]


@dataclass
class SwitchSync:
    """One switch after an install, a check or a failure delta: what differed (applied, or only found), or the error."""

    name: str
    inserts: int = 0
    modifies: int = 0
    deletes: int = 0
    error: str | None = None
    detail: dict[str, Any] = field(default_factory=dict)  # implementation's own: e.g. the nexthops a failure pulled

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def in_sync(self) -> bool:
        return self.ok and not (self.inserts or self.modifies or self.deletes)


class Batch(Protocol):
    """Many switches of one southbound, their plan checked and made ready (`Southbound.prepare`): run it to read
    each switch back and write the difference (dry_run: only find it); show the delta's items for people."""

    names: list[str]

    def run(self, *, dry_run: bool, push: Push, progress: Progress | None = None) -> dict[str, Outcome]:
        """One Outcome per switch (its delta, or its error); one switch failing does not stop the others."""
        ...

    def text(self, item: Any) -> str:
        """One line for an item of a delta (a P4 entity, a route)."""
        ...

    def to_json(self, item: Any) -> Any:
        ...


@runtime_checkable
class Southbound(Protocol):
    """One data plane's way to program switches from the plan. Implementations: netlink (Linux routes in a
    namespace per switch, controller.southbound.netlink) and P4Runtime (controller.southbound.p4runtime)."""

    kind: str  # "netlink" | "p4runtime"

    def install(self, fabric: Fabric, sw: Switch, *, dry_run: bool = False) -> SwitchSync:
        """Make the switch hold its plan under the fabric's health: read it back, write the difference (dry_run:
        only find it)."""
        ...

    def check(self, fabric: Fabric, sw: Switch) -> SwitchSync:
        """Read the switch back and compare with its plan (install with dry_run)."""
        ...

    def apply_failure(self, old: Fabric, new: Fabric, sw: Switch) -> SwitchSync:
        """Go from the plan of `old` to that of `new` (a failure recorded or restored) with only the difference,
        without reading the switch first."""
        ...

    def prepare(self, fabric: Fabric, switches: Sequence[Switch]) -> Batch:
        """The switches' plans under `fabric`, checked before any switch is contacted: controller.ops.OpError (one
        line naming the switch and what its data plane cannot do) when one cannot hold its plan."""
        ...
