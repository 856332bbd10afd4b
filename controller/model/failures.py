"""Failures as values: a link, a switch or a host port down, an unreachable destination, and their JSON;
the record of failures as a document (the state file's and etcd's), with who recorded each."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, Union

from controller.model import limits


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


# --- the record as a document ---------------------------------------------------------------
#
# The record of failures as a document: marked, strictly shaped JSON that we alone write (the state
# file holds it, and so does etcd's record key; controller/state/ reads and writes them).
#
# {"format": "srv6-fabric-state/1", "failures": [{"link": [T0, T1]}, {"switch": NAME},
#                                                {"host_port": [T0, PORT]}]}
# {"format": "srv6-fabric-state/2", "failures": [{"link": [T0, T1], "by": "detector"},
#                                                {"switch": NAME, "by": "operator"}, ...]}
#
# Each failure has an origin, who recorded it: "operator" (a one-shot `fabricctl fail`, the lab's
# fail) or "detector" (`fabricctl run`'s probes). The running controller restores only what its
# detector recorded; an operator's failure stays until `fabricctl restore`. Version 1 has no origin:
# every failure in it is the operator's, so a file whose failures are all the operator's is still
# written as version 1 (byte for byte what older fabricctl wrote and reads) and only a file holding a
# detected failure is version 2, with "by" on every failure (an older fabricctl refuses it with its
# one-line error, never misreads it). Migration: a version-1 file (also one an older `fabricctl run`
# wrote with failures it had detected) is read as operator failures, which the controller then leaves
# to `fabricctl restore`; it is rewritten as version 2 when the detector records a failure.
#
# A marker-less file of exactly the old shape ({"failures": [...]}) is still read. Anything else
# (a plan export, another program's JSON) is not a state file: it is refused, never overwritten.

FORMAT_V1 = "srv6-fabric-state/1"
FORMAT = "srv6-fabric-state/2"
FORMATS = (FORMAT_V1, FORMAT)

Origin = Literal["operator", "detector"]
OPERATOR: Origin = "operator"
DETECTOR: Origin = "detector"
ORIGINS: tuple[Origin, ...] = (OPERATOR, DETECTOR)


class StateFileError(FailoverError):
    """A state file that cannot be read, or a file that is not a state file (one line)."""


def _reject_constant(name: str) -> float:
    raise ValueError(f"{name} is not a number JSON allows")


def _float(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise ValueError(f"{text} overflows a float")
    return value


def parse_json(text: str) -> Any:
    """Strict JSON: no NaN/Infinity, no overflowing number (ValueError); too deep nesting is a
    RecursionError from the C decoder, which the callers turn into one line."""
    return json.loads(text, parse_constant=_reject_constant, parse_float=_float)


def _failure(item: Any, n: int, version: int) -> tuple[Any, Origin]:
    """One failure of the list and its origin ("by", version 2 only; version 1: the operator's)."""
    if version == 2 and isinstance(item, dict) and "by" in item:
        item = dict(item)
        by = item.pop("by")
        if by not in ORIGINS:
            raise StateFileError(f"failures[{n}].by: {json.dumps(by)[:40]} is not one of "
                                 + ", ".join(f'"{o}"' for o in ORIGINS))
        return _what(item, n), by
    return _what(item, n), OPERATOR


def _what(item: Any, n: int) -> Any:
    def name(value: Any, field: str) -> str:
        problem = limits.name_problem(value)
        if problem:
            raise StateFileError(f"failures[{n}].{field}: {problem}")
        return value

    if not isinstance(item, dict) or len(item) != 1:
        raise StateFileError(f"failures[{n}] is not one of {{\"link\": [T0, T1]}}, {{\"switch\": NAME}}, "
                             "{\"host_port\": [T0, PORT]}")
    ((kind, value),) = item.items()
    if kind == "switch":
        return SwitchDown(name(value, kind))
    if kind in ("link", "host_port") and isinstance(value, list) and len(value) == 2:
        if kind == "link":
            return LinkDown(name(value[0], "link[0]"), name(value[1], "link[1]"))
        port = value[1]
        if not isinstance(port, int) or isinstance(port, bool) or not 0 <= port <= limits.MAX_PORT_NUMBER:
            raise StateFileError(f"failures[{n}].host_port[1]: {port!r} is not a port number "
                                 f"(an integer 0..{limits.MAX_PORT_NUMBER})")
        return HostPortDown(name(value[0], "host_port[0]"), port)
    raise StateFileError(f"failures[{n}]: {json.dumps(item)[:80]} is not a failure")


def from_text(text: str) -> frozenset[Any]:
    """The failure set of a state document; StateFileError if it is not one."""
    return frozenset(origins_from_text(text))


def origins_from_text(text: str) -> dict[Any, Origin]:
    """Each failure of a state document with who recorded it; StateFileError if it is not one."""
    try:
        doc = parse_json(text)
    except (ValueError, RecursionError) as e:
        raise StateFileError(f"not valid JSON: {'nested too deeply' if isinstance(e, RecursionError) else e}") from None
    expected = f"expected {{\"format\": \"{FORMAT_V1}\" or \"{FORMAT}\", \"failures\": [...]}}"
    if not isinstance(doc, dict):
        raise StateFileError(f"not a fabricctl state file ({expected}, found {limits.type_name(doc)})")
    if "failures" not in doc or set(doc) - {"format", "failures"} or doc.get("format", FORMAT_V1) not in FORMATS:
        found = ", ".join(sorted(map(str, doc)))[:80] or "none"
        raise StateFileError(f"not a fabricctl state file ({expected}, found keys {found})")
    failures = doc["failures"]
    if not isinstance(failures, list):
        raise StateFileError("not a fabricctl state file ('failures' is not a list)")
    if len(failures) > limits.MAX_FAILURES:
        raise StateFileError(f"{len(failures)} failures: at most {limits.MAX_FAILURES}")
    version = 2 if doc.get("format") == FORMAT else 1
    out: dict[Any, Origin] = {}
    for n, item in enumerate(failures):
        failure, origin = _failure(item, n, version)
        out[failure] = OPERATOR if out.get(failure) == OPERATOR else origin  # listed twice: the operator's wins
    return out


def to_text(failures: Iterable[Any], origins: Mapping[Any, Origin] | None = None) -> str:
    """The document of a failure set; version 1 unless a failure's origin (default: the operator) is
    the detector."""
    ordered = sorted(set(failures), key=lambda f: (type(f).__name__, dataclasses.astuple(f)))
    by = {f: (origins or {}).get(f, OPERATOR) for f in ordered}
    if all(o == OPERATOR for o in by.values()):
        return json.dumps({"format": FORMAT_V1, "failures": [failure_to_json(f) for f in ordered]}, indent=1) + "\n"
    return json.dumps({"format": FORMAT, "failures": [{**failure_to_json(f), "by": by[f]} for f in ordered]},
                      indent=1) + "\n"
