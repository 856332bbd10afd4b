"""Who recorded a failure: the detector's verdicts merged into the record, the operator's failures left alone."""

from __future__ import annotations

from collections.abc import Mapping, Set
from dataclasses import dataclass

from controller.model.failures import Failure
from controller.model.failures import DETECTOR, OPERATOR, Origin

Record = Mapping[Failure, Origin]


@dataclass(frozen=True)
class Merge:
    """The record after a merge; the failures it added and removed (with their origins); and the links
    or host ports whose probes came back while the operator holds them failed (they stay until
    'fabricctl restore')."""

    record: dict[Failure, Origin]
    added: dict[Failure, Origin]
    removed: dict[Failure, Origin]
    held: tuple[Failure, ...]


def merge(recorded: Record, downs: Set[Failure], ups: Set[Failure], detected: Set[Failure]) -> Merge:
    """What the record becomes when the detector reports `downs` and `ups` since the last merge and holds
    `detected` down now (links, and host ports the probes watch). A link up again is removed only if the detector recorded it; one the operator
    recorded is held. A link the detector holds down is recorded (as the detector's) unless the record
    has it already, whoever wrote it: also one an operator's 'restore' removed while its probes still fail."""
    new = dict(recorded)
    held = []
    for link in sorted(ups, key=str):
        origin = new.get(link)
        if origin == DETECTOR:
            del new[link]
        elif origin == OPERATOR:
            held.append(link)
    for link in sorted(set(downs) | set(detected), key=str):
        if link not in new and link not in ups:
            new[link] = DETECTOR
    added = {f: o for f, o in new.items() if f not in recorded}
    removed = {f: o for f, o in recorded.items() if f not in new}
    return Merge(new, added, removed, tuple(held))


def describe_origin(origin: Origin) -> str:
    """How `fabricctl status` and the events name an origin."""
    return "detected by the controller" if origin == DETECTOR else "recorded by an operator"
