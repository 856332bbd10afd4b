"""The failure record in a state file, read and checked against the topology (an OpError naming the file otherwise)."""

from __future__ import annotations

from pathlib import Path

from controller import failover
from controller.exitcodes import OpError
from controller.model.failures import Failure, FailoverError, Origin
from controller.model.topology import Topology
from controller.state import statefile

STATE_NAME = ".fabric-state.json"  # the state file's name next to the topology file, unless one is given


def load_failures(topo: Topology, path: Path) -> frozenset[Failure]:
    """The recorded failure set, checked against the topology (OpError naming the file otherwise)."""
    return frozenset(load_recorded(topo, path))


def load_recorded(topo: Topology, path: Path) -> dict[Failure, Origin]:
    """Each recorded failure with who recorded it (operator or detector), checked as load_failures."""
    try:
        found = statefile.load_origins(path)
    except FailoverError as e:
        raise OpError(str(e)) from None
    try:
        failover.health(topo, found)
    except FailoverError as e:
        raise OpError(f"state file {path}: {e} ('fabricctl restore all' clears it)") from None
    return found


def load_failures_known(topo: Topology, path: Path) -> tuple[frozenset[Failure], list[Failure]]:
    """The recorded failures that name what the topology has, and those that do not (what
    `restore all` drops, so a state file from an older topology can always be cleared)."""
    try:
        found = statefile.load_state(path)
    except FailoverError as e:
        raise OpError(str(e)) from None
    known, dropped = [], []
    for f in sorted(found, key=str):
        try:
            failover.health(topo, [f])
        except FailoverError:
            dropped.append(f)
        else:
            known.append(f)
    return frozenset(known), dropped
