"""The southbound interface: what the controller asks of any data plane (install a switch's plan, read it back, apply a failure)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from controller.routes import Fabric
from controller.model.topology import Switch


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
