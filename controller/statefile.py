"""The failure-state file: a marked, strictly shaped JSON document that we alone write.

    {"format": "srv6-fabric-state/1", "failures": [{"link": [T0, T1]}, {"switch": NAME},
                                                   {"host_port": [T0, PORT]}]}

A marker-less file of exactly the old shape ({"failures": [...]}) is still read. Anything else
(a plan export, another program's JSON) is not a state file: it is refused, never overwritten.
Writes go through safefile.write_atomic (symlinks written through, mode kept, no temp file left).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from controller import limits
from controller.safefile import UnsafeFile, read_text, write_atomic

FORMAT = "srv6-fabric-state/1"


class StateFileError(ValueError):
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


def _failure(item: Any, n: int) -> Any:
    from controller.failover import HostPortDown, LinkDown, SwitchDown

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
    try:
        doc = parse_json(text)
    except (ValueError, RecursionError) as e:
        raise StateFileError(f"not valid JSON: {'nested too deeply' if isinstance(e, RecursionError) else e}") from None
    expected = f"expected {{\"format\": \"{FORMAT}\", \"failures\": [...]}}"
    if not isinstance(doc, dict):
        raise StateFileError(f"not a fabricctl state file ({expected}, found {limits.type_name(doc)})")
    if "failures" not in doc or set(doc) - {"format", "failures"} or doc.get("format", FORMAT) != FORMAT:
        found = ", ".join(sorted(map(str, doc)))[:80] or "none"
        raise StateFileError(f"not a fabricctl state file ({expected}, found keys {found})")
    failures = doc["failures"]
    if not isinstance(failures, list):
        raise StateFileError("not a fabricctl state file ('failures' is not a list)")
    if len(failures) > limits.MAX_FAILURES:
        raise StateFileError(f"{len(failures)} failures: at most {limits.MAX_FAILURES}")
    return frozenset(_failure(item, n) for n, item in enumerate(failures))


def to_text(failures: Iterable[Any]) -> str:
    from controller.failover import failure_to_json

    ordered = sorted(set(failures), key=lambda f: (type(f).__name__, dataclasses.astuple(f)))
    return json.dumps({"format": FORMAT, "failures": [failure_to_json(f) for f in ordered]}, indent=1) + "\n"


def load(path: str | Path) -> frozenset[Any]:
    """The failure set in a state file; an absent file is no failure. StateFileError (naming the file)
    for a file that is not a state file, too large, not regular, or unreadable."""
    try:
        text = read_text(path, limits.MAX_STATE_BYTES, "state file")
    except FileNotFoundError:
        return frozenset()
    except UnsafeFile as e:
        raise StateFileError(str(e)) from None
    except OSError as e:
        raise StateFileError(f"cannot read state file {path}: {e.strerror or e}") from None
    try:
        return from_text(text)
    except StateFileError as e:
        raise StateFileError(f"state file {path}: {e}") from None


def save(path: str | Path, failures: Iterable[Any]) -> None:
    """Write the failure set (sorted: equal sets give equal files); refuses to replace a file that is
    not a state file (StateFileError) or is not a regular file."""
    text = to_text(failures)
    try:
        write_atomic(path, text, what="state file", ours=load)
    except UnsafeFile as e:
        raise StateFileError(str(e)) from None
    except OSError as e:
        raise StateFileError(f"cannot write state file {path}: {e.strerror or e}") from None
