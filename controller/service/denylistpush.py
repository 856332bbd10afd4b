"""`fabricctl run` telling every endpoint the fabric-wide denylist: the recorded list (controller.model.denylist,
in the state file's or etcd's record) turned into DENIED EVs at every host whenever it changes, and UNKNOWN again
for the EVs of a link that is clean again; with loop reports to merge, the hosts' reports recorded first.

The service knows nothing of endpoints: `fabricctl run` gives it, once, from its configuration, an EndpointSink
(where the endpoints are and how a host is told, with a deadline per request and the hosts told in parallel) and
optionally a ReportSource. The pusher runs on a thread of its own, holds no lock while a host is told, and only
the leader pushes or records (a standby does nothing). A host that cannot be told is an event, a metric and a
line of the view, once per change of its error, and is told again on the next pass.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from controller.model.denylist import Denylist, Link
from controller.periodic import Periodic
from controller.state.store import Conflict, Store, StoreError

RECORD_TRIES = 5  # a record that moved on meanwhile (etcd) is read again and merged again this often

Emit = Callable[..., Any]  # (kind, **fields): an event
ReportSource = Callable[[], Mapping[str, Iterable[Link]]]  # each reporting host's failed links; ValueError: unreadable


@dataclass(frozen=True)
class Told:
    """One host's push: None as `error` when its sender took every request; `what` says what it was told."""

    host: str
    error: str | None = None
    what: str = ""

    @property
    def ok(self) -> bool:
        return self.error is None


class EndpointSink(Protocol):
    """Where the endpoints are and how each is told (fabricctl's, chosen once from `run`'s options)."""

    @property
    def where(self) -> str:
        """The endpoints in the operator's words (a directory)."""

    def push(self, before: frozenset[Link], now: frozenset[Link]) -> Sequence[Told]:
        """Tell every endpoint that has not taken `now` yet (`before`: the list last pushed); one Told per host asked.
        ValueError (one line) when the endpoints cannot be found now."""

    def pending(self, now: frozenset[Link]) -> bool:
        """Some endpoint has not taken `now` (one that missed a push, or a new one)."""


def record(store: Store, reports: Mapping[str, Iterable[Link]], lock_timeout: float,
           now: Callable[[], float] = time.time) -> tuple[Denylist, Denylist]:
    """Merge each host's failed links against the recorded list and save the result if it differs (under the store's
    lock; read-compute-save again when another writer got there first): (the list before, the list now)."""
    for _ in range(RECORD_TRIES):
        with store.locked(lock_timeout):
            before, rev = store.load_denylist()
            merged = Denylist.from_reports(reports, now=now(), before=before)
            if merged.seen_by == before.seen_by and merged.since == before.since:
                return before, merged
            try:
                store.save_denylist(merged, expect=rev)
            except Conflict:
                continue
            return before, merged
    raise Conflict(f"{store.where}: the denylist kept changing while it was merged ({RECORD_TRIES} tries)")


def _link(link: Link) -> str:
    return f"{link[0]}->{link[1]}"


class DenylistPusher:
    """One pass every `every` seconds on its own thread (`tick` does one): as the leader, record the reports (if any
    source), read the recorded list, and push it when it changed or an endpoint has not taken it."""

    def __init__(self, store: Store, sink: EndpointSink, emit: Emit, leading: Callable[[], bool], *,
                 reports: ReportSource | None = None, every: float = 0.2, lock_timeout: float = 5.0,
                 on_told: Callable[[Told], None] | None = None, on_links: Callable[[int], None] | None = None) -> None:
        self.store, self.sink, self.emit, self.leading = store, sink, emit, leading
        self.reports, self.every, self.lock_timeout = reports, every, lock_timeout
        self.on_told, self.on_links = on_told, on_links
        self.pushed: frozenset[Link] | None = None  # the list last pushed by this controller as leader
        self.hosts: dict[str, Told] = {}  # each host's last push
        self.problem: str | None = None  # why the last pass could not read the reports, the record or the endpoints
        self.led = False
        self._loop = Periodic("denylist-push", self.tick, lambda: self.every, join_within=15)

    def start(self) -> None:
        self._loop.start()

    def stop(self) -> None:
        self._loop.stop()

    def _say_problem(self, problem: str | None) -> None:
        if problem != self.problem:
            if problem:
                self.emit("denylist_error", error=problem)
            else:
                self.emit("denylist_ok")
        self.problem = problem

    def tick(self) -> None:
        """One pass (what the thread does every `every` seconds)."""
        if not self.leading():
            if self.led:  # a standby again: the next leadership pushes everything afresh
                self.emit("denylist_standby")
            self.led, self.pushed = False, None
            return
        self.led = True
        problem = None  # reports that cannot be read now: said, and the record pushed as it stands
        if self.reports is not None:
            try:
                before, merged = record(self.store, self.reports(), self.lock_timeout)
            except (ValueError, OSError) as e:  # StoreError is a ValueError: a report being replaced, the store away
                problem = str(e) or type(e).__name__
            else:
                if not merged.same_as(before):
                    self.emit("denylist_recorded", added=sorted(map(_link, merged.links - before.links)),
                              removed=sorted(map(_link, before.links - merged.links)), links=len(merged.links))
        try:
            links = self.store.load_denylist()[0].links
            if self.on_links is not None:
                self.on_links(len(links))
            if links == self.pushed and not self.sink.pending(links):
                self._say_problem(problem)
                return
            told = self.sink.push(self.pushed if self.pushed is not None else frozenset(), links)
        except (ValueError, OSError) as e:  # the store away, no EV export for the endpoints' run
            self._say_problem(str(e) or type(e).__name__)
            return
        self._say_problem(problem)
        changed, self.pushed = links != self.pushed, links
        for t in told:
            if self.on_told is not None:
                self.on_told(t)
            last = self.hosts.get(t.host)
            if not t.ok and (last is None or last.error != t.error):
                self.emit("denylist_push_error", host=t.host, error=t.error)
            elif t.ok and last is not None and not last.ok:
                self.emit("denylist_push_ok", host=t.host)
            self.hosts[t.host] = t
        if changed or any(t.ok for t in told):  # a host still not told is said once above, not every pass
            self.emit("denylist_pushed", endpoints=self.sink.where, links=sorted(map(_link, links)),
                      told=[t.host for t in told if t.ok], not_told=[t.host for t in told if not t.ok])

    def view(self) -> dict[str, Any]:
        """The status view's part: where the endpoints are, whether this controller pushes, each host's last push."""
        return {"endpoints": self.sink.where, "leading": self.led,
                "links": None if self.pushed is None else sorted(map(_link, self.pushed)), "problem": self.problem,
                "hosts": {h: {"told": t.ok, **({"error": t.error} if t.error else {"what": t.what})}
                          for h, t in sorted(self.hosts.items())}}


def lines(view: Mapping[str, Any] | None) -> list[str]:
    """`fabricctl status`'s lines for the controller's denylist push (none when it pushes to no endpoint)."""
    if not isinstance(view, Mapping):
        return []
    if not view.get("leading"):
        return [f"  denylist to endpoints in {view.get('endpoints')}: standby (the leader pushes)"]
    links = view.get("links") or []
    out = [f"  denylist to endpoints in {view.get('endpoints')}: {len(links)} link(s)"
           + (f" ({', '.join(links)})" if links else "")]
    if view.get("problem"):
        out.append(f"  denylist: {view['problem']}")
    for host, h in sorted(view.get("hosts", {}).items()):
        if isinstance(h, Mapping):
            out.append(f"  denylist {host}: " + ("told" + (f": {h['what']}" if h.get("what") else "") if h.get("told")
                                                 else f"NOT TOLD: {h.get('error')}"))
    return out
