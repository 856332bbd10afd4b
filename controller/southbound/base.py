"""The southbound interface: what the controller asks of any data plane (install a switch's plan, read it back, apply a failure)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, Protocol, runtime_checkable

from controller.exitcodes import OK, PIPELINE, SWITCH_ERROR
from controller.plan.delta import Changes
from controller.routes import Fabric
from controller.model.topology import Switch

# Called once per switch as it finishes: (switch name, its result or None, its error or None).
Progress = Callable[[str, Any, BaseException | None], None]

# How a pipeline that is not the program's is met: never pushed, pushed where a device has none, always replaced.
Push = Literal["never", "missing", "force"]


@dataclass
class Outcome:
    """What happened on one switch: the delta (applied, or only found) and pipeline action, or an error."""

    name: str
    delta: Changes[Any] | None = None  # a P4Runtime Delta (entities) or the kernel's RouteDelta (routes)
    pipeline: str = "kept"  # kept | pushed | would push
    primary: bool = True
    error: str | None = None
    code: int = OK

    @property
    def ok(self) -> bool:
        return self.error is None


def exit_code(outcomes: Iterable[Outcome]) -> int:
    """PIPELINE if any switch failed on its pipeline or primary role, else SWITCH_ERROR if any failed."""
    codes = {o.code for o in outcomes if not o.ok}
    return PIPELINE if PIPELINE in codes else SWITCH_ERROR if codes else OK


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
        """The switches' plans under `fabric`, checked before any switch is contacted: controller.exitcodes.OpError (one
        line naming the switch and what its data plane cannot do) when one cannot hold its plan."""
        ...


# --- one switch, held open by the controller service ------------------------------------------------


@dataclass(frozen=True, slots=True)
class ProbeIn:
    """A link probe read at the far switch: the port it came in on, what it carries, when it arrived (monotonic ns)."""

    port: int
    link_id: int
    direction: int
    seq: int
    sent_ns: int
    received_ns: int


@dataclass(frozen=True, slots=True)
class HostAnswer:
    """A host NIC's answer to a host probe (a Neighbor Advertisement punted in on `port`): the probed address and
    the solicitation's slot it answers."""

    port: int
    target: int
    slot: int
    received_ns: int


class PlanChange:
    """The fabric going from `old` to `new` (failures recorded or restored), for each switch to plan its own delta
    from: the P4 deltas of the whole fabric are computed once, when a P4 switch first asks."""

    def __init__(self, old: Fabric, new: Fabric) -> None:
        self.old, self.new = old, new
        self._p4: dict[str, Any] | None = None

    def p4_deltas(self) -> dict[str, Any]:
        if self._p4 is None:
            from controller.failover import delta

            self._p4 = delta(self.old, self.new)
        return self._p4


class DataPlaneError(RuntimeError):
    """A switch's data plane could not be opened or used (its namespace, a socket there): one line naming it."""


class ProbeError(Exception):
    """A probe could not be sent or read (the transport's error, one line): counted, never judged."""


class SwitchHandle(Protocol):
    """One switch as the controller service holds it, chosen once from its record (a network namespace: netlink;
    else P4Runtime). Calls that reach the switch take `timeout` (seconds), the deadline the caller gives them
    (controller.service.switchcalls); the plan side (`plan_delta`) reaches nothing.

    What an implementation cannot do it says by name: `cannot` maps a service option (a Config field) to why."""

    kind: str  # "netlink" | "p4runtime"
    arbitrated: bool  # the switch itself elects one writer among controllers (P4Runtime election ids)
    host_probes: bool  # it can probe its hosts' NICs (Neighbor Solicitations punted back)
    port_counters: bool  # it has per-port packet counters the prober may ask (`port_count`)
    arm_grace_ns: int  # a direction's losses count from its first probe arrived, or this long after its first
    cannot: ClassVar[dict[str, str]]
    reconnects: int

    @property
    def name(self) -> str: ...

    @property
    def ready(self) -> bool:
        """Holding the switch with its plan installed: probes and deltas may go."""
        ...

    @property
    def role_name(self) -> str:
        """'primary', 'backup' or 'down' (the status file's word)."""
        ...

    def start(self) -> None: ...

    def stop(self) -> None: ...

    def reconcile(self, fabric: Fabric, timeout: float) -> SwitchSync:
        """Read the switch back and write the difference from its plan under `fabric` (the program's resets too)."""
        ...

    def plan_delta(self, change: PlanChange) -> Any | None:
        """What `change` asks of this switch, planned without I/O;
        None when nothing."""
        ...

    def write_delta(self, delta: Any, timeout: float) -> int:
        """Write a planned delta (one deadline for all of it); the items written."""
        ...

    def ping(self, timeout: float) -> None:
        """The liveness call: the cheapest request the switch answers (raises when it does not)."""
        ...

    def send_probe(self, port: int, link_id: int, direction: int, seq: int, sent_ns: int, target: int = 0) -> None:
        """A probe out of `port` to the far end (`target` set: a host probe to that address); ProbeError."""
        ...

    def probes_in(self) -> list[ProbeIn | HostAnswer]:
        """Every probe that arrived since the last call, without waiting; ProbeError."""
        ...

    def port_count(self, port: int, tx: bool, timeout: float) -> int:
        """Packets the port sent (tx) or received, from the switch's counters."""
        ...

    def read_counters(self, timeout: float) -> Any:
        """The switch's per-port and drop counters for the metrics (None: it has none)."""
        ...


class CarrierSource(Protocol):
    """Where a data plane's ports report carrier: started with a callback (switch, port, up, seen monotonic ns)."""

    def start(self) -> None: ...

    def stop(self) -> None: ...
