"""The fabric-wide denylist pushed to the senders: each host's requests (DENIED, UNKNOWN again) as its control
socket gets them, a sender that cannot be asked is one line and the others still get theirs, `fabricctl endpoint
denylist --push` recording the list beside the failures, and `fabricctl status` showing who saw each link."""

from __future__ import annotations

import json
import shutil
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from controller.model.denylist import Denylist
from controller.model.topology import build
from controller.plan.evs import export
from controller.routes import Fabric
from endpoint.control import ControlSocket
from endpoint.denypush import HostPush, host_push, push_all
from fabricctl.main import cli
from tests.paths import UNIT_DATA

UP, DOWN = ("p0-t0-0", "p0-t1-1"), ("p0-t1-1", "p0-t0-0")
EXPORT = export(Fabric(build(2, 4, 2, 2)))
ONE = [1]  # EV 1: plane 0, spine 1


class Recorder:
    """A control socket served on a thread that records every request and answers like a sender ("has no EVs
    towards" for a destination it does not send to)."""

    def __init__(self, path: Path, sends_to: tuple[str, ...] = ("h0", "h1", "h2", "h3")) -> None:
        self.got: list[dict[str, Any]] = []
        self.sock = ControlSocket(str(path))
        self.sends_to = sends_to
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve)
        self.thread.start()

    def _answer(self, req: dict[str, Any]) -> dict[str, Any]:
        self.got.append(req)
        if req.get("dst") not in self.sends_to:
            return {"error": f"this sender has no EVs towards {req.get('dst')}"}
        return {"host": "x", "evs": []}

    def _serve(self) -> None:
        while not self.stop.is_set():
            self.sock.serve(self._answer)
            self.stop.wait(0.005)

    def close(self) -> None:
        self.stop.set()
        self.thread.join()
        self.sock.close()


@pytest.fixture
def run_dir(tmp_path: Path) -> Iterator[Path]:
    d = tmp_path / "endpoint" / "1000"
    d.mkdir(parents=True)
    yield d


def test_a_hosts_push_denies_what_crosses_a_failed_link_and_takes_back_what_no_longer_does():
    assert host_push(EXPORT, "h2", [], [DOWN]) == HostPush("h2", {"h0": ONE, "h1": ONE}, {})
    assert host_push(EXPORT, "h0", [DOWN], [UP]) == HostPush("h0", {"h2": ONE, "h3": ONE}, {})
    assert host_push(EXPORT, "h2", [DOWN], []) == HostPush("h2", {}, {"h0": ONE, "h1": ONE})
    assert host_push(EXPORT, "h2", [DOWN], []).requests() == [
        {"op": "set_state", "dst": "h0", "evs": ONE, "state": "unknown"},
        {"op": "set_state", "dst": "h1", "evs": ONE, "state": "unknown"}]
    assert host_push(EXPORT, "h9", [], [DOWN]) == HostPush("h9", {}, {})


def test_every_sender_gets_its_exact_requests_and_one_that_cannot_be_asked_is_one_line(run_dir):
    h2 = Recorder(run_dir / "control-h2.sock", sends_to=("h0",))
    hung = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)  # listens, never answers
    hung.bind(str(run_dir / "control-h3.sock"))
    hung.listen(1)
    try:
        pushes = {h: host_push(EXPORT, h, [], [DOWN]) for h in ("h2", "h3")}
        sockets = {"h2": str(run_dir / "control-h2.sock"), "h3": str(run_dir / "control-h3.sock")}
        results = push_all(pushes, sockets, timeout=0.2)
    finally:
        h2.close()
        hung.close()
    assert h2.got == [{"op": "deny", "dst": "h0", "evs": ONE}, {"op": "deny", "dst": "h1", "evs": ONE}]
    assert [r.host for r in results] == ["h2", "h3"]
    assert results[0].ok and results[0].sent == 2 and str(results[0]) == "h2: denied h0: 0x0001; h1: 0x0001"
    assert not results[1].ok and results[1].sent == 0
    assert str(results[1]) == f"h3: not pushed: the endpoint sender at {run_dir / 'control-h3.sock'} did not answer: timed out"


def _report(path: Path, host: str, failed: list[tuple[str, str, str]]) -> None:
    path.write_text(json.dumps({"host": host, "failed": [{"from": a, "to": b, "kind": k} for a, b, k in failed],
                                "denied": {}}))


def test_denylist_push_records_the_list_tells_every_sender_and_takes_it_back_once_clean(tmp_path, run_dir):
    loops = tmp_path / "loops"
    loops.mkdir()
    (loops / "evs.json").write_text(json.dumps(EXPORT))
    _report(loops / "loops-h0.json", "h0", [(*UP, "t0-t1"), (*DOWN, "t1-t0")])  # only h0 runs an agent
    state = tmp_path / ".fabric-state.json"
    senders = {h: Recorder(run_dir / f"control-{h}.sock") for h in ("h2", "h3")}
    argv = ["--state", str(state), "endpoint", "denylist", str(loops), "--push", "--dir", str(tmp_path)]
    try:
        r = CliRunner().invoke(cli, argv)
        assert r.exit_code == 0, r.output
        lines = r.output.splitlines()
        assert lines[0] == "1 host(s) reporting: h0"
        assert lines[1].startswith("p0-t0-0 -> p0-t1-1 (t0-t1): seen by h0 since ")
        assert lines[2].startswith("p0-t1-1 -> p0-t0-0 (t1-t0): seen by h0 since ")
        assert lines[3:] == [f"recorded in state file {state}; 2 sender(s) in {run_dir}",
                             "h2: denied h0: 0x0001; h1: 0x0001", "h3: denied h0: 0x0001; h1: 0x0001"]
        for s in senders.values():
            assert s.got == [{"op": "deny", "dst": "h0", "evs": ONE}, {"op": "deny", "dst": "h1", "evs": ONE}]
            s.got.clear()
        recorded = json.loads((tmp_path / ".fabric-state.denylist.json").read_text())
        assert [(e["from"], e["to"], e["seen_by"]) for e in recorded["links"]] == [(*UP, ["h0"]), (*DOWN, ["h0"])]
        since = recorded["links"][0]["since"]
        assert not state.exists()  # the failures' record is not touched

        _report(loops / "loops-h2.json", "h2", [(*DOWN, "t1-t0")])  # a second reporter: since kept
        r = CliRunner().invoke(cli, [*argv, "--json"])
        doc = json.loads(r.output)
        assert r.exit_code == 0 and doc["links"][1] == {"from": "p0-t1-1", "to": "p0-t0-0", "seen_by": ["h0", "h2"],
                                                        "since": since, "kind": "t1-t0"}
        assert [p["host"] for p in doc["pushed"]] == ["h2", "h3"] and all(p["ok"] for p in doc["pushed"])

        _report(loops / "loops-h0.json", "h0", [])
        _report(loops / "loops-h2.json", "h2", [])
        r = CliRunner().invoke(cli, argv)
        assert r.exit_code == 0 and r.output.splitlines()[-2:] == ["h2: unknown again h0: 0x0001; h1: 0x0001",
                                                                  "h3: unknown again h0: 0x0001; h1: 0x0001"]
        assert senders["h3"].got[-2:] == [{"op": "set_state", "dst": "h0", "evs": ONE, "state": "unknown"},
                                          {"op": "set_state", "dst": "h1", "evs": ONE, "state": "unknown"}]
        assert json.loads((tmp_path / ".fabric-state.denylist.json").read_text())["links"] == []
    finally:
        for s in senders.values():
            s.close()


def test_denylist_push_to_a_sender_gone_is_one_line_exit_1_and_the_others_are_told(tmp_path, run_dir):
    loops = tmp_path / "loops"
    loops.mkdir()
    (loops / "evs.json").write_text(json.dumps(EXPORT))
    _report(loops / "loops-h0.json", "h0", [(*DOWN, "t1-t0")])
    gone = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    gone.bind(str(run_dir / "control-h2.sock"))
    gone.close()  # the socket file of a sender that exited: refused
    h3 = Recorder(run_dir / "control-h3.sock")
    try:
        r = CliRunner().invoke(cli, ["--state", str(tmp_path / "s.json"), "endpoint", "denylist",
                                                     str(loops), "--push", "--run", str(run_dir)])
    finally:
        h3.close()
    assert r.exit_code == 1
    assert r.stderr.splitlines() == [f"h2: not pushed: the endpoint sender at {run_dir / 'control-h2.sock'} did not "
                                     "answer: [Errno 111] Connection refused"]
    assert r.stdout.splitlines()[-1] == "h3: denied h0: 0x0001; h1: 0x0001"
    assert h3.got == [{"op": "deny", "dst": "h0", "evs": ONE}, {"op": "deny", "dst": "h1", "evs": ONE}]


def test_denylist_follow_needs_push_and_push_needs_the_ev_export(tmp_path, run_dir):
    _report(tmp_path / "loops-h0.json", "h0", [])
    r = CliRunner().invoke(cli, ["endpoint", "denylist", str(tmp_path), "--follow"])
    assert r.exit_code == 2 and r.output.strip().splitlines()[-1].endswith("--follow keeps pushing: give --push too")
    r = CliRunner().invoke(cli, ["--state", str(tmp_path / "s.json"), "endpoint", "denylist", str(tmp_path), "--push",
                                 "--run", str(run_dir)])
    assert r.exit_code == 2 and r.output.strip().splitlines()[-1].endswith(
        f"--push needs the EV export: no evs.json in {tmp_path} or {run_dir}")
    assert not (tmp_path / "s.denylist.json").exists()


def test_status_shows_each_denied_link_with_who_saw_it(tmp_path):
    lab = tmp_path / "lab.yaml"
    shutil.copy(UNIT_DATA / "two_plane_lab.yaml", lab)
    dl = Denylist.from_reports({"h0": [UP, DOWN], "h2": [DOWN]}, now=1795689000.0)
    from controller.state.denylistrec import file_path, save_file
    save_file(file_path(tmp_path / ".fabric-state.json"), dl)
    r = CliRunner().invoke(cli, ["--topology", str(lab), "status", "--offline"])
    assert r.exit_code == 0, r.output
    assert r.output.splitlines()[:3] == [
        f"two_plane_lab (srv6_spray), state {tmp_path / '.fabric-state.json'}: 0 failures",
        "  denied link: p0-t0-0 -> p0-t1-1 (t0-t1): seen by h0 since 2026-11-26 10:30:00 UTC",
        "  denied link: p0-t1-1 -> p0-t0-0 (t1-t0): seen by h0, h2 since 2026-11-26 10:30:00 UTC"]
    doc = json.loads(CliRunner().invoke(cli, ["--topology", str(lab), "status", "--offline", "--json"]).output)
    assert doc["denylist"] == [
        {"from": "p0-t0-0", "to": "p0-t1-1", "seen_by": ["h0"], "since": 1795689000.0, "kind": "t0-t1"},
        {"from": "p0-t1-1", "to": "p0-t0-0", "seen_by": ["h0", "h2"], "since": 1795689000.0, "kind": "t1-t0"}]


def test_a_sender_that_missed_pushes_is_told_everything_it_missed_once_it_answers(tmp_path, run_dir):
    from fabricctl.denylist import Pusher

    h2 = Recorder(run_dir / "control-h2.sock")
    gone = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    gone.bind(str(run_dir / "control-h3.sock"))
    gone.close()
    pusher = Pusher(EXPORT, run_dir, timeout=0.5)
    try:
        first = pusher.push(frozenset(), frozenset({DOWN}))
        assert [r.ok for r in first] == [True, False] and pusher.pending(frozenset({DOWN}))
        clean = pusher.push(frozenset({DOWN}), frozenset())  # the link is clean before h3 ever heard of it
        assert [r.ok for r in clean] == [True, False]
        (run_dir / "control-h3.sock").unlink()
        h3 = Recorder(run_dir / "control-h3.sock")
        try:
            assert pusher.pending(frozenset({UP}))
            last = pusher.push(frozenset(), frozenset({UP}))
        finally:
            h3.close()
    finally:
        h2.close()
    assert all(r.ok for r in last) and not pusher.pending(frozenset({UP}))
    # h3 never took DOWN: nothing to take back there; UP's EVs are h0's and h1's, not h3's
    assert h3.got == [] and str(last[1]) == "h3: nothing denied"
    assert h2.got == [{"op": "deny", "dst": "h0", "evs": ONE}, {"op": "deny", "dst": "h1", "evs": ONE},
                      {"op": "set_state", "dst": "h0", "evs": ONE, "state": "unknown"},
                      {"op": "set_state", "dst": "h1", "evs": ONE, "state": "unknown"}]


def test_denylist_follow_pushes_once_while_nothing_changes(tmp_path, run_dir):
    loops = tmp_path / "loops"
    loops.mkdir()
    (loops / "evs.json").write_text(json.dumps(EXPORT))
    _report(loops / "loops-h0.json", "h0", [(*DOWN, "t1-t0")])
    h2 = Recorder(run_dir / "control-h2.sock")
    try:
        r = CliRunner().invoke(cli, ["--state", str(tmp_path / "s.json"), "endpoint", "denylist", str(loops), "--push",
                                     "--follow", "--follow-for", "0.5", "--every", "0.05", "--run", str(run_dir),
                                     "--json"])
    finally:
        h2.close()
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    assert len(lines) == 1 and json.loads(lines[0])["pushed"][0]["denied"] == {"h0": ONE, "h1": ONE}
    assert h2.got == [{"op": "deny", "dst": "h0", "evs": ONE}, {"op": "deny", "dst": "h1", "evs": ONE}]


class Holding:
    """A sender that takes a request and holds it unanswered until `release` (or its client gives up); `held_while`
    says whether `release` came while the client still waited."""

    def __init__(self, path: Path, release: threading.Event) -> None:
        self.srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.srv.bind(str(path))
        self.srv.listen(1)
        self.release = release
        self.held_while: bool | None = None
        self.thread = threading.Thread(target=self._serve)
        self.thread.start()

    def _serve(self) -> None:
        self.srv.settimeout(10)
        conn, _ = self.srv.accept()
        with conn:
            conn.recv(4096)
            conn.settimeout(0.01)
            for _ in range(1000):  # until released, or the client closed (it gave up): 10 s at most
                if self.release.is_set():
                    self.held_while = True
                    return
                try:
                    if conn.recv(1) == b"":
                        self.held_while = False
                        return
                except socket.timeout:
                    pass

    def close(self) -> None:
        self.thread.join()
        self.srv.close()


def test_run_endpoints_a_slow_sender_holds_up_none_of_the_others(run_dir):
    from fabricctl.denylist import EndpointPush

    (run_dir / "evs.json").write_text(json.dumps(EXPORT))
    told = threading.Event()

    class Telling(Recorder):
        def _answer(self, req: dict[str, Any]) -> dict[str, Any]:
            out = super()._answer(req)
            if len(self.got) == 2:
                told.set()
            return out

    slow = Holding(run_dir / "control-h1.sock", told)  # h1 is asked first in host order
    h2 = Telling(run_dir / "control-h2.sock", sends_to=("h0",))
    try:
        results = EndpointPush(run_dir, timeout=5.0).push(frozenset(), frozenset({UP, DOWN}))
    finally:
        told.set()
        slow.close()
        h2.close()
    assert slow.held_while is True  # h2 was told while h1's request was still unanswered
    assert [(t.host, t.ok) for t in results] == [("h1", False), ("h2", True)]
    assert h2.got == [{"op": "deny", "dst": "h0", "evs": ONE}, {"op": "deny", "dst": "h1", "evs": ONE}]


def test_run_endpoints_in_a_lab_directory_follow_its_latest_run_and_ask_only_who_has_not_taken_the_list(tmp_path):
    from fabricctl.denylist import EndpointPush

    sink = EndpointPush(tmp_path, timeout=1.0)
    (tmp_path / "endpoint").mkdir()
    with pytest.raises(ValueError, match=f"^no endpoint run in {tmp_path / 'endpoint'}$"):
        sink.pending(frozenset())
    old, new = tmp_path / "endpoint" / "100", tmp_path / "endpoint" / "2000"
    old.mkdir()
    assert not sink.pending(frozenset({DOWN})) and sink.push(frozenset(), frozenset({DOWN})) == []  # no sender yet
    new.mkdir()
    h2 = Recorder(new / "control-h2.sock")
    try:
        with pytest.raises(ValueError, match=f"^no EV export \\(evs.json\\) in {new}: its senders' EVs are not known$"):
            sink.push(frozenset(), frozenset({DOWN}))
        (new / "evs.json").write_text(json.dumps(EXPORT))
        assert sink.pending(frozenset({DOWN}))
        first = sink.push(frozenset(), frozenset({DOWN}))
        assert not sink.pending(frozenset({DOWN})) and sink.push(frozenset(), frozenset({DOWN})) == []
        h3 = Recorder(new / "control-h3.sock")
        try:
            assert sink.pending(frozenset({DOWN}))
            second = sink.push(frozenset(), frozenset({DOWN}))
        finally:
            h3.close()
    finally:
        h2.close()
    assert [(t.host, t.ok, t.what) for t in first] == [("h2", True, "denied h0: 0x0001; h1: 0x0001")]
    assert [(t.host, t.ok) for t in second] == [("h3", True)]
    assert h2.got == [{"op": "deny", "dst": "h0", "evs": ONE}, {"op": "deny", "dst": "h1", "evs": ONE}]
    assert h3.got == h2.got and sink.where == str(tmp_path)


def test_run_loops_needs_endpoints(tmp_path):
    r = CliRunner().invoke(cli, ["run", "--loops", str(tmp_path)])
    assert r.exit_code == 2 and r.output.strip().splitlines()[-1] == \
        "error: --loops records the reports to push them: give --endpoints too"
