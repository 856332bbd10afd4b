"""What a switch's plan is made from: the topology's SID plan, its Fabric under a failure set and Options,
and the change between two failure sets (the switches whose plan moves)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass

from controller import failover
from controller.model.failures import Failure, SwitchDown
from controller.model.sids import SidPlan
from controller.model.topology import Topology
from controller.plan.p4names import Program
from controller.routes import Fabric, Options


def sid_plan(topo: Topology) -> SidPlan:
    """The address plan of a topology (its own uSID block, or the default)."""
    return SidPlan() if topo.usid_block is None else SidPlan.from_block(topo.usid_block)


def fabric(topo: Topology, program: Program, failures: Iterable[Failure] = (), options: Options | None = None) -> Fabric:
    """The fabric of a topology and program, with these failures (and these Options: hash mode, pins).
    Endpoint mode is on when the Options or the topology file (`host_source_routing: true`) say so, and so are
    watch ports (`watch_ports: true`);
    the ECN and trimming thresholds are the Options' when they turn a signal on, else the topology's
    (`congestion:`, with the global options over it: congestion.override)."""
    opts = Options() if options is None else options
    opts = dataclasses.replace(opts, program=program,
                               host_source_routing=opts.host_source_routing or topo.host_source_routing,
                               watch_ports=opts.watch_ports or topo.watch_ports)
    if not (opts.ecn_qdepth or opts.trim_qdepth):
        t = topo.congestion
        opts = dataclasses.replace(opts, ecn_qdepth=t.ecn_qdepth, trim_qdepth=t.trim_qdepth, trim_dscp=t.trim_dscp)
    base = Fabric(topo, sid_plan(topo), opts)
    failures = list(failures)
    return failover.with_failures(base, failures) if failures else base


@dataclass
class FailureChange:
    """Going from one failure set to another: the new fabric, and the switches whose plan changes
    (none recorded down), which are all `fabricctl fail/restore` reconciles."""

    old: frozenset[Failure]
    new: frozenset[Failure]
    fabric: Fabric
    touched: list[str]


def failure_change(topo: Topology, program: Program, old: Iterable[Failure], new: Iterable[Failure],
                   options: Options | None = None) -> FailureChange:
    old, new = frozenset(old), frozenset(new)
    new_fabric = fabric(topo, program, new, options)
    moved = failover.delta(fabric(topo, program, old, options), new_fabric)
    down = down_switches(new)
    return FailureChange(old, new, new_fabric, [s.name for s in topo.switches if s.name in moved and s.name not in down])


def down_switches(failures: Iterable[Failure]) -> set[str]:
    return {f.name for f in failures if isinstance(f, SwitchDown)}
