"""Failures as values: a link, a switch or a host port down, an unreachable destination, and their JSON."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union


class FailoverError(ValueError):
    """A failure that names nothing in the topology, or a state file that cannot be read (one line)."""


@dataclass(frozen=True, slots=True, order=True)
class LinkDown:
    """The link between a leaf and a spine of its plane."""

    t0: str
    t1: str


@dataclass(frozen=True, slots=True, order=True)
class SwitchDown:
    """A whole switch: counts as every one of its links (and, for a leaf, its host ports) down."""

    name: str


@dataclass(frozen=True, slots=True, order=True)
class HostPortDown:
    """A leaf's host-facing port (the host's NIC in that plane)."""

    t0: str
    port: int


Failure = Union[LinkDown, SwitchDown, HostPortDown]


@dataclass(frozen=True, slots=True, order=True)
class Unreachable:
    """`dst` (a leaf or a host) cannot be reached in `plane` from `src` (a leaf, or '*': from anywhere)."""

    plane: int
    dst: str
    src: str = "*"

    def __str__(self) -> str:
        return f"plane {self.plane}: {self.dst} unreachable from {'every leaf' if self.src == '*' else self.src}"


def failure_to_json(f: Failure) -> dict[str, object]:
    if isinstance(f, LinkDown):
        return {"link": [f.t0, f.t1]}
    if isinstance(f, SwitchDown):
        return {"switch": f.name}
    return {"host_port": [f.t0, f.port]}
