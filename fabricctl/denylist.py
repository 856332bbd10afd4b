"""`fabricctl endpoint denylist`: the hosts' loop reports merged into the fabric-wide denylist, shown, recorded
beside the failures (the state file's or etcd's record) and pushed to every sender of an endpoint run."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from controller.model.denylist import Denylist as Denylist, Link
from controller.model.topology import Topology
from controller.service.denylistpush import Told, record as record_reports
from controller.state.store import Store
from endpoint.clustermap import fabric_denied, link_kind
from endpoint.denypush import PushResult, Reports, host_push, push_all, read_reports as read_reports, sockets_in

NOT_TOLD = 1  # the exit code when a sender or the record could not be reached (fabricctl's SWITCH_ERROR)


def when(t: float) -> str:
    return datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def link_lines(dl: Denylist, kind: Callable[[Link], str]) -> list[str]:
    """One line per denied link: its direction, kind, who saw it and since when."""
    return [f"{a} -> {b} ({kind((a, b))}): seen by {', '.join(sorted(dl.seen_by[(a, b)]))}"
            + (f" since {when(dl.since[(a, b)])}" if (a, b) in dl.since else "") for a, b in sorted(dl.seen_by)]


def links_json(dl: Denylist, kind: Callable[[Link], str]) -> list[dict[str, Any]]:
    return [{**e, "kind": kind((e["from"], e["to"]))} for e in dl.to_json()]


def topo_kind(topo: Topology) -> Callable[[Link], str]:
    """The kind of a recorded link in `topo` ('?' for a link whose switch it does not know)."""
    def kind(link: Link) -> str:
        if not (topo.has_switch(link[0]) or topo.has_switch(link[1])):
            return "?"
        return link_kind(topo, link)
    return kind


def record(store: Store, reports: Reports, lock_timeout: float, now: Callable[[], float] = time.time
           ) -> tuple[Denylist, Denylist]:
    """Merge the reports against the recorded list and save the result if it differs (the controller's merge):
    (the list before, the list now)."""
    return record_reports(store, reports.failed, lock_timeout, now)


@dataclass
class Pusher:
    """Pushes to one endpoint run's senders; remembers per host the links its sender last took, so a host that
    missed a push is told everything it missed at the next one."""

    export: Mapping[str, Any]
    run_dir: Path
    timeout: float
    taken: dict[str, frozenset[Link]] = field(default_factory=dict)

    def push(self, before: frozenset[Link], now: frozenset[Link]) -> list[PushResult]:
        sockets = sockets_in(self.run_dir)
        pushes = {h: host_push(self.export, h, self.taken.get(h, before), now) for h in sockets}
        results = push_all(pushes, sockets, self.timeout)
        for r in results:
            if r.ok:
                self.taken[r.host] = now
        return results

    def pending(self, now: frozenset[Link]) -> bool:
        """A sender that has not taken `now` yet (or a new one)."""
        return any(self.taken.get(h) != now for h in sockets_in(self.run_dir))


class EndpointPush:
    """`fabricctl run --endpoints DIR`'s sink (controller.service.denylistpush.EndpointSink): the senders of an endpoint
    run's directory (RUN/control-HOST.sock, the EV export RUN/evs.json), or of a lab directory's latest endpoint run,
    looked up again at every push so a new run's senders are told the whole list. Only the senders that have not
    taken the list are asked, in parallel, each request with `timeout`."""

    def __init__(self, directory: Path, timeout: float) -> None:
        self.directory, self.timeout = directory, timeout
        self.pushers: dict[Path, Pusher] = {}

    @property
    def where(self) -> str:
        return str(self.directory)

    def run_dir(self) -> Path:
        """The endpoint run: DIR itself, or the newest of DIR/endpoint/NS. ValueError (one line) when there is none."""
        runs = self.directory / "endpoint"
        if not runs.is_dir():
            return self.directory
        found = [p for p in runs.glob("*") if p.is_dir() and p.name.isdigit()]
        if not found:
            raise ValueError(f"no endpoint run in {runs}")
        return max(found, key=lambda p: int(p.name))

    def _pusher(self) -> Pusher | None:
        """The run's pusher; None while it has no sender (nothing to tell yet)."""
        run = self.run_dir()
        if run not in self.pushers:
            if not sockets_in(run):
                return None
            export = load_export(run / "evs.json")
            if export is None:
                raise ValueError(f"no EV export (evs.json) in {run}: its senders' EVs are not known")
            self.pushers = {run: Pusher(export, run, self.timeout)}  # an older run's senders are gone
        return self.pushers[run]

    def pending(self, now: frozenset[Link]) -> bool:
        pusher = self._pusher()
        return pusher is not None and pusher.pending(now)

    def push(self, before: frozenset[Link], now: frozenset[Link]) -> list[Told]:
        pusher = self._pusher()
        if pusher is None:
            return []
        sockets = sockets_in(pusher.run_dir)
        todo = {h: p for h, p in sockets.items() if pusher.taken.get(h) != now}
        pushes = {h: host_push(pusher.export, h, pusher.taken.get(h, before), now) for h in todo}
        results = push_all(pushes, sockets, self.timeout)
        for r in results:
            if r.ok:
                pusher.taken[r.host] = now
        return [Told(r.host, r.error, str(r).split(": ", 1)[1]) for r in results]


def summary(reports: Reports, merged: Denylist, export: Mapping[str, Any] | None) -> dict[str, Any]:
    kind = lambda link: reports.kinds.get(link, "?")  # noqa: E731
    return {"hosts": sorted(reports.failed), "links": links_json(merged, kind),
            "denied": fabric_denied(export, merged.links) if export is not None else None}


def text_lines(reports: Reports, merged: Denylist, export: Mapping[str, Any] | None) -> list[str]:
    out = [f"{len(reports.failed)} host(s) reporting: {', '.join(sorted(reports.failed))}",
           *link_lines(merged, lambda link: reports.kinds.get(link, "?"))]
    if not merged.links:
        out.append("no failed link")
    for host, dsts in (fabric_denied(export, merged.links) if export is not None else {}).items():
        out.append(f"{host} denies " + "; ".join(f"{d}: {', '.join(f'{i:#06x}' for i in ids)}" for d, ids in dsts.items()))
    return out


def load_export(path: Path) -> dict[str, Any] | None:
    if not path.exists():
        return None
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise ValueError(f"{path}: not an EV export ({e})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("hosts"), dict):
        raise ValueError(f"{path}: not an EV export (no \"hosts\")")
    return doc
