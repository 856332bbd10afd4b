"""The fabric-wide denylist pushed to every endpoint: the hosts' loop reports merged (controller.model.denylist),
and per host the EVs crossing a failed link sent as DENIED to its sender's control socket (endpoint.control),
those the previous push denied and the merged list no longer does sent back to UNKNOWN.

A host's push is its own: each request has a deadline, the hosts are asked in parallel, and a host that cannot
be asked gives one line while the others get theirs.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from controller.model.denylist import Link
from endpoint.clustermap import denied_evs
from endpoint.control import ControlError, request

NOT_SENDING = "has no EVs towards"  # the sender's answer for a destination it does not send to: nothing to map out


@dataclass
class Reports:
    """The loop agents' reports in a directory (DIR/loops-HOST.json): each host's failed links and each link's kind."""

    failed: dict[str, list[Link]] = field(default_factory=dict)
    kinds: dict[Link, str] = field(default_factory=dict)


def read_reports(loops_dir: Path) -> Reports:
    """Every DIR/loops-HOST.json; ValueError (one line naming the file) for one that is not an agent's report,
    or when there is none."""
    out = Reports()
    for path in sorted(loops_dir.glob("loops-*.json")):
        try:
            doc = json.loads(path.read_text())
            out.failed[str(doc["host"])] = [(str(f["from"]), str(f["to"])) for f in doc["failed"]]
            out.kinds.update(((str(f["from"]), str(f["to"])), str(f["kind"])) for f in doc["failed"])
        except (OSError, ValueError, KeyError, TypeError) as why:
            raise ValueError(f"{path}: not a loop agent's report ({why})") from None
    if not out.failed:
        raise ValueError(f"no loop agent's report (loops-HOST.json) in {loops_dir}")
    return out


@dataclass(frozen=True)
class HostPush:
    """What one host's sender is told: per destination the EVs to deny and those to set back to UNKNOWN."""

    host: str
    deny: dict[str, list[int]]
    unknown: dict[str, list[int]]

    def requests(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for dst in sorted(set(self.deny) | set(self.unknown)):
            if self.deny.get(dst):
                out.append({"op": "deny", "dst": dst, "evs": self.deny[dst]})
            if self.unknown.get(dst):
                out.append({"op": "set_state", "dst": dst, "evs": self.unknown[dst], "state": "unknown"})
        return out


def host_push(export: Mapping[str, Any], host: str, before: Iterable[Link], now: Iterable[Link]) -> HostPush:
    """`host`'s push from the EV export: every EV crossing a link failed `now` denied (denying again is harmless,
    and a sender whose own agent took an EV back gets it denied again), and those crossing a link failed `before`
    and no link now back to UNKNOWN."""
    dsts = export.get("hosts", {}).get(host, {})
    deny = denied_evs(host, dsts, now)
    was = denied_evs(host, dsts, before)
    unknown = {d: back for d, ids in was.items() if (back := sorted(set(ids) - set(deny.get(d, []))))}
    return HostPush(host, deny, unknown)


@dataclass(frozen=True)
class PushResult:
    """One host's push: the requests its sender took, and why it stopped (None: all taken)."""

    host: str
    push: HostPush
    sent: int
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    def __str__(self) -> str:
        if self.error is not None:
            return f"{self.host}: not pushed: {self.error}"
        if not self.push.deny and not self.push.unknown:
            return f"{self.host}: nothing denied"
        def ids(what: str, per_dst: dict[str, list[int]]) -> list[str]:
            return [f"{what} " + "; ".join(f"{d}: {', '.join(f'{i:#06x}' for i in v)}" for d, v in per_dst.items())
                    ] if per_dst else []
        parts = ids("denied", self.push.deny) + ids("unknown again", self.push.unknown)
        return f"{self.host}: " + "; ".join(parts)

    def to_json(self) -> dict[str, Any]:
        return {"host": self.host, "ok": self.ok, "denied": self.push.deny, "unknown": self.push.unknown,
                "requests": self.sent, **({"error": self.error} if self.error is not None else {})}


def push_one(socket_path: str | Path, push: HostPush, timeout: float) -> PushResult:
    """Send `push` to the sender at `socket_path`, each request with `timeout`; the first failure stops it."""
    sent = 0
    for req in push.requests():
        try:
            answer = request(socket_path, req, timeout=timeout)
        except ControlError as e:
            return PushResult(push.host, push, sent, str(e))
        if "error" in answer and NOT_SENDING not in str(answer["error"]):
            return PushResult(push.host, push, sent, f"{socket_path}: {answer['error']}")
        sent += 1
    return PushResult(push.host, push, sent)


def push_all(pushes: Mapping[str, HostPush], sockets: Mapping[str, str | Path], timeout: float) -> list[PushResult]:
    """Each host's push to its socket, in parallel: one host that hangs costs `timeout` per request, and only
    its own. Results in host order."""
    todo = sorted(pushes.items())
    with ThreadPoolExecutor(max_workers=max(1, min(16, len(todo)))) as pool:
        return list(pool.map(lambda hp: push_one(sockets[hp[0]], hp[1], timeout), todo))


def sockets_in(run_dir: Path) -> dict[str, str]:
    """The control sockets of an endpoint run's senders (RUN/control-HOST.sock)."""
    return {p.name[len("control-"):-len(".sock")]: str(p) for p in sorted(run_dir.glob("control-*.sock"))}

