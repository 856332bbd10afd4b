"""`fabricctl run`'s denylist pusher on fakes: the recorded list pushed when it changes and UNKNOWN again once
clean, the loop reports recorded first, the leader alone pushing or recording, a host that cannot be told said once
(event, metric hook, view and status line) and told again, and no lock held while a host is slow to answer."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from controller.model.denylist import Denylist, Link
from controller.service import status
from controller.service.denylistpush import DenylistPusher, Told
from controller.state.filestore import FileStore

UP, DOWN = ("p0-t0-0", "p0-t1-1"), ("p0-t1-1", "p0-t0-0")


class FakeSink:
    """Endpoints that take every push (or answer with `errors` per host); records each push asked."""

    where = "/lab/endpoint/1"

    def __init__(self, hosts: Sequence[str] = ("h2", "h3")) -> None:
        self.hosts = list(hosts)
        self.errors: dict[str, str] = {}
        self.calls: list[tuple[frozenset[Link], frozenset[Link]]] = []
        self.taken: dict[str, frozenset[Link]] = {}
        self.hold: threading.Event | None = None  # set: the push returns (a slow host)
        self.inside = threading.Event()

    def pending(self, now: frozenset[Link]) -> bool:
        return any(self.taken.get(h) != now for h in self.hosts)

    def push(self, before: frozenset[Link], now: frozenset[Link]) -> list[Told]:
        self.calls.append((before, now))
        self.inside.set()
        if self.hold is not None:
            assert self.hold.wait(10)
        out = []
        for h in self.hosts:
            if self.taken.get(h) == now:
                continue
            if h in self.errors:
                out.append(Told(h, self.errors[h]))
            else:
                self.taken[h] = now
                out.append(Told(h, None, f"denied {len(now)} link(s)"))
        return out


class Setup:
    def __init__(self, tmp_path: Path, sink: FakeSink, reports: Any = None) -> None:
        self.store = FileStore(tmp_path / ".fabric-state.json")
        self.events: list[tuple[str, dict[str, Any]]] = []
        self.told: list[Told] = []
        self.lead = True
        self.sink = sink
        self.pusher = DenylistPusher(self.store, sink, lambda kind, **f: self.events.append((kind, f)),
                                     lambda: self.lead, reports=reports, on_told=self.told.append)

    def record(self, reports: dict[str, list[Link]]) -> None:
        with self.store.locked(5.0):
            self.store.save_denylist(Denylist.from_reports(reports, now=1000.0))

    def kinds(self) -> list[str]:
        out = [k for k, _ in self.events]
        self.events.clear()
        return out


def test_the_recorded_list_is_pushed_when_it_changes_and_taken_back_once_clean(tmp_path):
    s = Setup(tmp_path, FakeSink())
    s.pusher.tick()  # nothing recorded: every endpoint takes the empty list once
    assert s.sink.calls == [(frozenset(), frozenset())]
    s.record({"h0": [UP, DOWN]})
    s.pusher.tick()
    s.pusher.tick()  # unchanged and taken everywhere: nothing pushed again
    assert s.sink.calls[1:] == [(frozenset(), frozenset({UP, DOWN}))]
    s.record({})
    s.pusher.tick()
    assert s.sink.calls[2:] == [(frozenset({UP, DOWN}), frozenset())]  # UNKNOWN again for what was denied
    pushed = [f for k, f in s.events if k == "denylist_pushed"]
    assert pushed[1] == {"endpoints": "/lab/endpoint/1", "links": ["p0-t0-0->p0-t1-1", "p0-t1-1->p0-t0-0"],
                         "told": ["h2", "h3"], "not_told": []}
    assert pushed[2]["links"] == [] and len(pushed) == 3
    assert s.pusher.view() == {"endpoints": "/lab/endpoint/1", "leading": True, "links": [], "problem": None,
                               "hosts": {"h2": {"told": True, "what": "denied 0 link(s)"},
                                         "h3": {"told": True, "what": "denied 0 link(s)"}}}


def test_a_new_endpoint_gets_the_whole_list(tmp_path):
    s = Setup(tmp_path, FakeSink(["h2"]))
    s.record({"h0": [DOWN]})
    s.pusher.tick()
    s.sink.hosts.append("h3")  # a sender started since
    s.pusher.tick()
    assert s.sink.calls == [(frozenset(), frozenset({DOWN})), (frozenset({DOWN}), frozenset({DOWN}))]
    assert [t.host for t in s.told] == ["h2", "h3"] and s.sink.taken == {"h2": {DOWN}, "h3": {DOWN}}


def test_the_loop_reports_are_recorded_then_pushed(tmp_path):
    reports = {"h0": [UP, DOWN]}
    s = Setup(tmp_path, FakeSink(), reports=lambda: reports)
    s.pusher.tick()
    dl = s.store.load_denylist()[0]
    assert dl.seen_by == {UP: {"h0"}, DOWN: {"h0"}} and dl.since[UP] == dl.since[DOWN]
    assert s.events[0] == ("denylist_recorded", {"added": ["p0-t0-0->p0-t1-1", "p0-t1-1->p0-t0-0"], "removed": [],
                                                 "links": 2})
    assert s.sink.calls == [(frozenset(), frozenset({UP, DOWN}))]
    reports["h0"] = []
    s.pusher.tick()
    assert s.store.load_denylist()[0].links == frozenset() and s.sink.calls[-1] == (frozenset({UP, DOWN}), frozenset())


def test_reports_that_cannot_be_read_are_said_once_and_the_record_is_pushed_as_it_stands(tmp_path):
    def unreadable() -> dict[str, list[Link]]:
        raise ValueError("no loop agent's report (loops-HOST.json) in /lab/loops")

    s = Setup(tmp_path, FakeSink(), reports=unreadable)
    s.record({"h0": [DOWN]})
    s.pusher.tick()
    s.pusher.tick()
    assert [k for k, _ in s.events] == ["denylist_error", "denylist_pushed"]
    assert s.events[0][1] == {"error": "no loop agent's report (loops-HOST.json) in /lab/loops"}
    assert s.sink.calls == [(frozenset(), frozenset({DOWN}))] and s.store.load_denylist()[0].links == frozenset({DOWN})
    assert "  denylist: no loop agent's report (loops-HOST.json) in /lab/loops" in status.lines(
        {"pid": 1, "denylist": s.pusher.view()})


def test_a_standby_pushes_and_records_nothing(tmp_path):
    s = Setup(tmp_path, FakeSink(), reports=lambda: {"h0": [DOWN]})
    s.lead = False
    s.pusher.tick()
    assert s.sink.calls == [] and s.events == [] and s.store.load_denylist()[0] == Denylist()
    assert status.lines({"pid": 1, "denylist": s.pusher.view()})[-1] == \
        "  denylist to endpoints in /lab/endpoint/1: standby (the leader pushes)"
    s.lead = True
    s.pusher.tick()
    assert s.sink.calls == [(frozenset(), frozenset({DOWN}))]
    s.lead = False  # deposed: it stops, and leading again it pushes afresh
    s.pusher.tick()
    assert s.kinds()[-1] == "denylist_standby" and s.pusher.pushed is None


def test_a_host_that_cannot_be_told_is_said_once_counted_each_try_and_told_again(tmp_path):
    sink = FakeSink()
    sink.errors["h3"] = "the endpoint sender at /lab/endpoint/1/control-h3.sock did not answer: timed out"
    s = Setup(tmp_path, sink)
    s.record({"h0": [DOWN]})
    s.pusher.tick()
    s.pusher.tick()  # h3 still has not taken it: asked again, said once
    assert [(k, f.get("host")) for k, f in s.events] == [("denylist_push_error", "h3"), ("denylist_pushed", None)]
    assert s.events[1][1]["told"] == ["h2"] and s.events[1][1]["not_told"] == ["h3"]
    assert [(t.host, t.ok) for t in s.told] == [("h2", True), ("h3", False), ("h3", False)]
    assert status.lines({"pid": 1, "denylist": s.pusher.view()})[-3:] == [
        "  denylist to endpoints in /lab/endpoint/1: 1 link(s) (p0-t1-1->p0-t0-0)",
        "  denylist h2: told: denied 1 link(s)",
        f"  denylist h3: NOT TOLD: {sink.errors['h3']}"]
    s.events.clear()
    del sink.errors["h3"]
    s.pusher.tick()
    assert [(k, f.get("host")) for k, f in s.events] == [("denylist_push_ok", "h3"), ("denylist_pushed", None)]
    assert s.sink.calls[-1] == (frozenset({DOWN}), frozenset({DOWN}))


def test_a_slow_host_holds_no_lock_and_its_pass_runs_on_the_pushers_own_thread(tmp_path):
    sink = FakeSink()
    sink.hold = threading.Event()
    s = Setup(tmp_path, sink, reports=lambda: {"h0": [DOWN]})
    s.pusher.every = 0.01
    s.pusher.start()
    try:
        assert sink.inside.wait(10)  # the push is under way, its hosts not answering
        with s.store.locked(0.5):  # the healer's lock is free meanwhile
            s.store.save_denylist(Denylist.from_reports({"h1": [UP]}, now=1000.0))
    finally:
        sink.hold.set()
        s.pusher.stop()
    assert s.sink.calls[0] == (frozenset(), frozenset({DOWN}))


def test_the_service_leads_with_its_fence_open_and_primary_on_some_switch():
    from types import SimpleNamespace

    from controller.service.runner import FabricService

    svc = object.__new__(FabricService)  # leading() reads the fence and the sessions' roles alone
    svc.fence = None
    svc.sessions = {"p0-t0-0": SimpleNamespace(role_name="backup"), "p0-t0-1": SimpleNamespace(role_name="down")}
    assert not svc.leading()  # a P4Runtime hot backup: another controller is primary
    svc.sessions["p0-t0-1"] = SimpleNamespace(role_name="primary")
    assert svc.leading()
    svc.fence = lambda: "the lease was not renewed"  # etcd leadership lost
    assert not svc.leading()
    svc.fence = lambda: None
    assert svc.leading()
