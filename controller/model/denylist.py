"""The fabric-wide denylist: each failed directed link the hosts' loop agents report, the hosts that saw it and
since when, merged from their reports (pure), and its JSON document in the fabric's record:

    {"format": "srv6-fabric-denylist/1",
     "links": [{"from": "p0-t1-1", "to": "p0-t0-0", "seen_by": ["h0", "h2"], "since": 1795689000.25}, ...]}

A link is in the list while at least one host reports it; "since" is when the merged list first held it
(kept across merges while it stays), in seconds since the epoch. A host reporting no link clears what it saw.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from controller.model import limits

Link = tuple[str, str]  # a directed link (from node, to node): a host by its name, a switch by its own
FORMAT = "srv6-fabric-denylist/1"
MAX_LINKS = 100_000


class DenylistError(ValueError):
    """A denylist document that cannot be read (one line)."""


@dataclass
class Denylist:
    """Each failed directed link with the hosts that saw it and (when merged against a clock) since when."""

    seen_by: dict[Link, set[str]] = field(default_factory=dict)
    since: dict[Link, float] = field(default_factory=dict)

    @classmethod
    def from_reports(cls, reports: Mapping[str, Iterable[Link]], now: float | None = None,
                     before: Denylist | None = None) -> Denylist:
        """From each host's failed links now; with `now`, each link's `since` is the one `before` holds for it,
        else `now`. Hosts absent from `reports` report nothing (what they saw before goes)."""
        seen: dict[Link, set[str]] = {}
        for host, links in reports.items():
            for link in links:
                seen.setdefault((link[0], link[1]), set()).add(host)
        if now is None:
            return cls(seen)
        old = before.since if before is not None else {}
        return cls(seen, {link: old.get(link, now) for link in seen})

    @property
    def links(self) -> frozenset[Link]:
        return frozenset(self.seen_by)

    def same_as(self, other: Denylist) -> bool:
        """The same links seen by the same hosts (since aside)."""
        return self.seen_by == other.seen_by

    def to_json(self) -> list[dict[str, Any]]:
        return [{"from": a, "to": b, "seen_by": sorted(self.seen_by[(a, b)]),
                 **({"since": self.since[(a, b)]} if (a, b) in self.since else {})} for a, b in sorted(self.seen_by)]


def to_text(dl: Denylist) -> str:
    """The record's document (sorted: equal lists give equal bytes)."""
    return json.dumps({"format": FORMAT, "links": dl.to_json()}, indent=1) + "\n"


def _name(value: Any, where: str) -> str:
    problem = limits.name_problem(value)
    if problem:
        raise DenylistError(f"{where}: {problem}")
    return str(value)


def from_text(text: str) -> Denylist:
    """The denylist of a record document; DenylistError (one line) if it is not one."""
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError) as e:
        raise DenylistError(f"not valid JSON: {'nested too deeply' if isinstance(e, RecursionError) else e}") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or set(doc) != {"format", "links"} \
            or not isinstance(doc["links"], list):
        raise DenylistError(f"not a denylist document (expected {{\"format\": \"{FORMAT}\", \"links\": [...]}})")
    if len(doc["links"]) > MAX_LINKS:
        raise DenylistError(f"{len(doc['links'])} links: at most {MAX_LINKS}")
    out = Denylist()
    for n, item in enumerate(doc["links"]):
        if not isinstance(item, dict) or set(item) - {"from", "to", "seen_by", "since"} \
                or not {"from", "to", "seen_by"} <= set(item):
            raise DenylistError(f"links[{n}] is not {{\"from\": A, \"to\": B, \"seen_by\": [HOST...], \"since\": T}}")
        link = (_name(item["from"], f"links[{n}].from"), _name(item["to"], f"links[{n}].to"))
        seen = item["seen_by"]
        if not isinstance(seen, list) or not seen:
            raise DenylistError(f"links[{n}].seen_by: not a non-empty list of hosts")
        out.seen_by[link] = {_name(h, f"links[{n}].seen_by") for h in seen}
        if "since" in item:
            t = item["since"]
            if isinstance(t, bool) or not isinstance(t, (int, float)) or not 0 <= t < 1e12:
                raise DenylistError(f"links[{n}].since: {t!r} is not a time (seconds since the epoch)")
            out.since[link] = float(t)
    return out
