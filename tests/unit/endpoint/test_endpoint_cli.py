"""fabricctl endpoint events / query / deny / set-state / replace against an endpoint run's files and a sender's
control socket (a SenderCore served on a thread, as `python3 -m endpoint send --control` serves it)."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner

from endpoint.control import ControlSocket, request
from endpoint.ev import EvState
from endpoint.sender import SenderConfig
from fabricctl.main import cli
from tests.unit.endpoint.test_transport import Net

EVENTS = [{"host": "h0", "profile": "h2", "ev": 1025, "port": 1, "state": "assumed_bad", "drop_count": 0,
           "t": 1.0125, "why": "sack loss"},
          {"host": "h0", "profile": "h2", "ev": 1025, "port": 1, "state": "good", "drop_count": 3, "t": 1.2,
           "why": "32 probes answered"}]


def run_dir(tmp_path: Path, name: str = "1000") -> Path:
    d = tmp_path / "endpoint" / name
    d.mkdir(parents=True)
    return d


def test_events_prints_the_latest_runs_events_as_text_or_json(tmp_path):
    run_dir(tmp_path, "999")
    d = run_dir(tmp_path, "1000")
    (d / "events-h0.jsonl").write_text("".join(json.dumps(e) + "\n" for e in EVENTS) + '{"partial": ')
    (d / "events-h1.jsonl").write_text(json.dumps({**EVENTS[0], "host": "h1"}) + "\n")
    r = CliRunner().invoke(cli, ["endpoint", "events", "h0", "--dir", str(tmp_path)])
    assert r.exit_code == 0, r.output
    assert r.output.splitlines() == [
        "1.0125 h0 -> h2 ev 0x0401 port 1: assumed_bad (sack loss)",
        "1.2000 h0 -> h2 ev 0x0401 port 1: good (32 probes answered) (3 events dropped before)"]
    r = CliRunner().invoke(cli, ["endpoint", "events", "--json", "--dir", str(tmp_path)])
    assert [json.loads(x) for x in r.output.splitlines()] == [*EVENTS, {**EVENTS[0], "host": "h1"}]


def test_events_follow_prints_what_is_appended(tmp_path):
    d = run_dir(tmp_path)
    path = d / "events-h0.jsonl"
    path.write_text(json.dumps(EVENTS[0]) + "\n")
    appended = threading.Event()

    def append() -> None:
        with open(path, "a") as f:
            f.write(json.dumps(EVENTS[1]) + "\n")
        appended.set()

    timer = threading.Timer(0.3, append)
    timer.start()
    r = CliRunner().invoke(cli, ["endpoint", "events", "--json", "--follow", "--follow-for", "3", "--run", str(d)])
    timer.join()
    assert appended.is_set() and r.exit_code == 0
    assert [json.loads(x) for x in r.output.splitlines()] == EVENTS


def test_events_without_a_run_is_one_line(tmp_path):
    r = CliRunner().invoke(cli, ["endpoint", "events", "--dir", str(tmp_path)])
    assert r.exit_code == 2 and r.output.strip().splitlines()[-1].endswith(
        f"no endpoint run in {tmp_path / 'endpoint'} (start one with `fabricctl endpoint compare`)")


@pytest.fixture
def sender(tmp_path):
    """A sender with one backup EV per plane towards h2, answering on the run's control socket for h0."""
    s = Net("health", SenderConfig(qps=2, messages=8, window=8, backups_per_plane=1)).sender
    d = run_dir(tmp_path)
    sock = ControlSocket(str(d / "control-h0.sock"))
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            sock.serve(lambda req: s.control(req, 0.5))
            stop.wait(0.005)

    t = threading.Thread(target=serve)
    t.start()
    yield s, d
    stop.set()
    t.join()
    sock.close()
    assert not (d / "control-h0.sock").exists()


def test_query_deny_set_state_and_replace_reach_the_running_sender(sender, tmp_path):
    s, d = sender
    run = CliRunner().invoke
    r = run(cli, ["endpoint", "query", "h0", "--dir", str(tmp_path)])
    assert r.exit_code == 0 and r.output.splitlines() == [
        "h0 -> h2 ev 0x0000 port 0: unknown", "h0 -> h2 ev 0x0001 port 0: unknown (backup)",
        "h0 -> h2 ev 0x0400 port 1: unknown", "h0 -> h2 ev 0x0401 port 1: unknown (backup)"]
    r = run(cli, ["endpoint", "deny", "h0", "h2", "0x400", "--dir", str(tmp_path)])
    assert r.exit_code == 0 and "h0 -> h2 ev 0x0400 port 1: denied" in r.output
    assert s.tables["h2"][1024].state == EvState.DENIED
    assert s.tables["h2"].active == [0, 1025]  # plane 1's backup took the denied EV's place
    r = run(cli, ["endpoint", "replace", "h0", "h2", "0", "1", "--run", str(d), "--json"])
    assert r.exit_code == 0 and json.loads(r.output)["host"] == "h0" and s.tables["h2"].active == [1, 1025]
    r = run(cli, ["endpoint", "set-state", "h0", "h2", "1024", "unknown", "--dir", str(tmp_path)])
    assert r.exit_code == 0 and s.tables["h2"][1024].state == EvState.UNKNOWN
    r = run(cli, ["endpoint", "deny", "h0", "h2", "0x400", "0x7", "--dir", str(tmp_path)])
    assert r.exit_code == 2 and r.output.strip().splitlines()[-1].endswith(
        "h0: h0 has no EV 0x7 towards h2 (EVs: 0x0, 0x1, 0x400, 0x401)")
    assert s.tables["h2"][1024].state == EvState.UNKNOWN  # all or none
    r = run(cli, ["endpoint", "deny", "h0", "h2", "x12", "--dir", str(tmp_path)])
    assert r.exit_code == 2 and "'x12' is not an EV id (a number, e.g. 1025 or 0x401)" in r.output
    assert request(d / "control-h0.sock", {"op": "query", "dst": "h2"})["evs"][0]["ev"] == 0


def test_a_sender_that_does_not_listen_is_one_line(tmp_path):
    run_dir(tmp_path)
    r = CliRunner().invoke(cli, ["endpoint", "query", "h0", "--dir", str(tmp_path)])
    assert r.exit_code == 1 and r.output.strip().splitlines()[-1].endswith(
        f"no endpoint sender listens at {tmp_path / 'endpoint' / '1000' / 'control-h0.sock'}")


def test_the_control_socket_answers_bad_json_and_will_not_replace_a_file(tmp_path):
    path = tmp_path / "c.sock"
    sock = ControlSocket(str(path))
    import socket as socketlib
    with socketlib.socket(socketlib.AF_UNIX, socketlib.SOCK_STREAM) as c:
        c.connect(str(path))
        c.sendall(b"nope\n")
        assert sock.serve(lambda req: {}) == 1
        assert json.loads(c.recv(4096))["error"].startswith("the request is not JSON")
    sock.close()
    regular = tmp_path / "file"
    regular.write_text("keep")
    with pytest.raises(ValueError, match="exists and is not a socket: not replaced"):
        ControlSocket(str(regular))
    assert regular.read_text() == "keep"


def test_fabricctl_evs_profile_shows_the_fields_and_values_that_expand_to_the_exported_carriers(tmp_path):
    from tests.unit.endpoint.test_transport import LAB

    runner = CliRunner(env={"FABRIC_TOPOLOGY": None})
    r = runner.invoke(cli, ["--topology", str(LAB), "evs", "h0", "--profile", "--json"])
    assert r.exit_code == 0, r.output
    p = json.loads(r.output)["h0"]["h2"]["1"]
    assert p["widths"] == [32, 16, 16, 16, 16, 16, 16]
    assert p["fields"][1] == {"width": 16, "init_val": 0x1000, "min_val": 1, "max_val": 2, "mask": 0x3}
    assert p["evs"] == [{"id": 1024, "value": "4000", "carrier": "fcbb:bb00:1001:1401:1fff::"},
                        {"id": 1025, "value": "8000", "carrier": "fcbb:bb00:1002:1401:1fff::"}]
    r = runner.invoke(cli, ["--topology", str(LAB), "evs", "--profile", "--export", str(tmp_path / "x.json")])
    assert r.exit_code == 2 and "--profile and --export do not go together" in r.output
    assert not (tmp_path / "x.json").exists()
