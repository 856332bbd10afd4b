"""The live view's JSON, HTTP and server-sent events, against a state/status/events directory the test writes."""

from __future__ import annotations

from tests.paths import REPO, UNIT_DATA

import http.client
import json
import os
import re
import shutil
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from fabricctl.main import cli
from controller.state.statefile import save_state
from controller.model.failures import HostPortDown, LinkDown, SwitchDown
from controller.service import status as st
from controller.service.web import server as web
from controller.service.web.view import Snapshots, Sources
from controller.model.topology import load

DATA = UNIT_DATA
PAGE = Path(web.__file__).parent


@pytest.fixture
def lab(tmp_path: Path) -> Sources:
    topo = tmp_path / "lab.yaml"
    shutil.copy(DATA / "two_plane_lab.yaml", topo)
    return Sources(load(topo), "srv6_spray", tmp_path / ".fabric-state.json", tmp_path / "fabric-events.jsonl")


@pytest.fixture
def server(lab: Sources) -> Iterator[web.WebServer]:
    s = web.WebServer(lab, "127.0.0.1", 0)
    s.start()
    yield s
    s.close()


def status_doc(**extra: object) -> dict:
    return {"pid": os.getpid(), "election_id": 10, "updated": 1000.0,
            "sessions": {"p0-t0-0": {"role": "primary"}, "p0-t1-0": {"role": "backup"}},
            "links": {"p0-t0-1 -- p0-t1-0": {"up": False, "directions": {
                "p0-t0-1:3->p0-t1-0:2": {"up": False, "sent": 20, "lost": 5, "last_delay_ms": None,
                                         "reason": "3 consecutive probes lost"},
                "p0-t1-0:2->p0-t0-1:3": {"up": True, "sent": 20, "lost": 0, "last_delay_ms": 1.25, "reason": ""}}},
                "p0-t0-0:1 (h0)": {"up": True, "directions": {"p0-t0-0:1<->h0": {"up": True, "sent": 4, "lost": 0,
                                                                                  "last_delay_ms": 0.5}}}},
            "applied": [{"link": ["p0-t0-0", "p0-t1-1"]}], **extra}


def test_layout_draws_every_plane_link_and_host_port(lab: Sources):
    layout = Snapshots(lab).layout
    assert [p["plane"] for p in layout["planes"]] == [0, 1]
    p0 = layout["planes"][0]
    assert p0["spines"] == ["p0-t1-0", "p0-t1-1"]
    assert [ln["key"] for ln in p0["links"]] == ["p0-t0-0 -- p0-t1-0", "p0-t0-0 -- p0-t1-1",
                                                 "p0-t0-1 -- p0-t1-0", "p0-t0-1 -- p0-t1-1"]
    assert p0["links"][1] == {"key": "p0-t0-0 -- p0-t1-1", "t0": "p0-t0-0", "t1": "p0-t1-1", "t0_port": 4, "t1_port": 1}
    assert p0["leaves"][0]["ports"] == [{"key": "p0-t0-0:1", "port": 1, "slot": 0, "host": "h0"},
                                        {"key": "p0-t0-0:2", "port": 2, "slot": 1, "host": "h1"}]


def test_snapshot_says_who_recorded_each_failure_and_what_is_unreachable(lab: Sources):
    snaps = Snapshots(lab)
    s = snaps.snapshot()
    assert s["controller"] is None and s["failures"] == [] and s["state_error"] is None
    assert {v["state"] for v in s["links"].values()} == {"up"}
    assert s["unreachable"] == {"0": [], "1": []}
    assert "no controller running" in s["paths"]["note"]

    save_state(lab.state, [LinkDown("p0-t0-0", "p0-t1-1"), HostPortDown("p1-t0-1", 2), SwitchDown("p1-t1-0")],
               {HostPortDown("p1-t0-1", 2): "detector"})
    st.write_status(lab.status, status_doc())
    s = snaps.snapshot()
    assert s["links"]["p0-t0-0 -- p0-t1-1"] == {
        "plane": 0, "t0": "p0-t0-0", "t1": "p0-t1-1", "state": "failed", "recorded_by": "operator",
        "why": "recorded failed", "probes": None, "applied": True}
    # a switch recorded down takes its links, and says so
    assert {k: (v["state"], v["why"]) for k, v in s["links"].items() if v["plane"] == 1 and v["t1"] == "p1-t1-0"} == {
        "p1-t0-0 -- p1-t1-0": ("failed", "switch p1-t1-0 recorded failed"),
        "p1-t0-1 -- p1-t1-0": ("failed", "switch p1-t1-0 recorded failed")}
    assert s["switches"]["p1-t1-0"] == {"role": "t1", "plane": 1, "state": "failed", "recorded_by": "operator"}
    port = s["host_ports"]["p1-t0-1:2"]
    assert (port["host"], port["state"], port["recorded_by"], port["applied"]) == ("h3", "failed", "detector", False)
    # probes down but nothing recorded: orange, with the controller's evidence
    down = s["links"]["p0-t0-1 -- p0-t1-0"]
    assert (down["state"], down["recorded_by"]) == ("down", None)
    assert down["probes"] == {"up": False, "sent": 40, "lost": 5, "delay_ms": 1.25, "reason": "3 consecutive probes lost"}
    assert s["host_ports"]["p0-t0-0:1"]["probes"]["up"] is True
    assert s["unreachable"] == {"0": [], "1": ["h3 unreachable from every leaf"]}
    assert {f["what"]: f["by"] for f in s["failures"]} == {
        "link p0-t0-0 -- p0-t1-1": "operator", "host port p1-t0-1 slot 1 (port 2, h3)": "detector",
        "switch p1-t1-0": "operator"}
    c = s["controller"]
    assert (c["pid"], c["election_id"], c["primary_on"], c["backup_on"]) == (os.getpid(), 10, 1, 1)


def test_snapshot_of_an_unreadable_state_file_says_why(lab: Sources):
    lab.state.write_text('{"format": "srv6-fabric-state/1", "failures": [{"link": ["p0-t0-0", "p9-t1-0"]}]}\n')
    s = Snapshots(lab).snapshot()
    assert s["state_error"].startswith(f"state file {lab.state}: unknown switch 'p9-t1-0'")
    assert s["failures"] == [] and s["unreachable"] == {}


def test_path_rates_from_successive_counter_readings(lab: Sources):
    snaps = Snapshots(lab)
    st.write_status(lab.status, status_doc())
    assert "carries no path counters" in snaps.snapshot()["paths"]["note"]
    st.write_status(lab.status, status_doc(paths=[]))
    assert "no path counter read yet" in snaps.snapshot()["paths"]["note"]
    row = {"switch": "p0-t0-0", "plane": 0, "spine": "p0-t1-0", "segments": "fcbb:bb00:1::/48+dst"}
    st.write_status(lab.status, status_doc(paths=[{**row, "packets": 100, "t": 50.0}]))
    assert snaps.snapshot()["paths"]["rows"] == [{**row, "packets": 100, "t": 50.0, "rate_pps": None}]
    st.write_status(lab.status, status_doc(paths=[{**row, "packets": 350, "t": 55.0}]))
    assert snaps.snapshot()["paths"]["rows"][0]["rate_pps"] == 50.0
    st.write_status(lab.status, status_doc(paths=[{**row, "packets": 350, "t": 55.0}]))  # the same reading again
    assert snaps.snapshot()["paths"]["rows"][0]["rate_pps"] == 50.0
    st.write_status(lab.status, status_doc(paths=[{**row, "packets": 10, "t": 60.0}]))  # a switch restarted
    assert snaps.snapshot()["paths"]["rows"][0]["rate_pps"] is None


def get(s: web.WebServer, path: str, method: str = "GET", host: str | None = None) -> tuple[int, dict[str, str], bytes]:
    conn = http.client.HTTPConnection(*s.server_address[:2], timeout=10)
    conn.putrequest(method, path, skip_host=host is not None)
    if host is not None:
        conn.putheader("Host", host)
    conn.endheaders()
    r = conn.getresponse()
    body = r.read()
    conn.close()
    return r.status, {k.lower(): v for k, v in r.getheaders()}, body


def test_http_serves_page_and_json_read_only_and_loopback_names_only(server: web.WebServer, lab: Sources):
    code, headers, body = get(server, "/")
    assert code == 200 and headers["content-type"] == "text/html; charset=utf-8" and b"/app.js" in body
    assert "default-src 'self'" in headers["content-security-policy"]
    code, _, body = get(server, "/api/layout")
    assert code == 200 and json.loads(body)["topology"] == "two_plane_lab"
    save_state(lab.state, [LinkDown("p0-t0-0", "p0-t1-1")])
    code, _, body = get(server, "/api/snapshot")
    assert code == 200 and json.loads(body)["links"]["p0-t0-0 -- p0-t1-1"]["state"] == "failed"
    for method in ("POST", "PUT", "DELETE"):
        code, headers, _ = get(server, "/api/snapshot", method)
        assert (code, headers["allow"]) == (405, "GET, HEAD")
    assert get(server, "/nothing")[0] == 404
    assert get(server, "/", host="fabric.example.com")[0] == 421  # DNS rebinding: not a loopback name
    assert get(server, "/", host=f"localhost:{server.server_address[1]}")[0] == 200
    assert server.url == f"http://127.0.0.1:{server.server_address[1]}/"


def test_the_page_loads_nothing_from_elsewhere():
    for name in ("index.html", "app.js", "style.css"):
        text = (PAGE / name).read_text()
        urls = re.findall(r"(?:https?:)?//[\w.-]+", text.replace("http://www.w3.org/2000/svg", ""))
        assert urls == [], f"{name} names {urls}: the page must work offline"
    html = (PAGE / "index.html").read_text()
    assert re.findall(r'(?:src|href)="([^"]*)"', html) == ["/style.css", "/app.js"]


def test_api_events_gives_the_last_n(server: web.WebServer, lab: Sources):
    assert json.loads(get(server, "/api/events")[2]) == []  # no events file yet
    lab.events.write_text("".join(json.dumps({"t": i, "kind": f"k{i}"}) + "\n" for i in range(5)) + '{"torn')
    assert [e["kind"] for e in json.loads(get(server, "/api/events?last=2")[2])] == ["k3", "k4"]
    assert get(server, "/api/events?last=x")[0] == 400


def test_sse_frame():
    assert web.sse("fabric", {"kind": "link_down"}, "42") == b'id: 42\nevent: fabric\ndata: {"kind":"link_down"}\n\n'
    assert web.sse("note", "two\nlines") == b"event: note\ndata: two\ndata: lines\n\n"


class Stream:
    """A raw reader of /events: yields (id, event, data) per frame."""

    def __init__(self, s: web.WebServer, last_id: str | None = None) -> None:
        self.sock = socket.create_connection(s.server_address[:2], timeout=10)
        extra = f"Last-Event-ID: {last_id}\r\n" if last_id is not None else ""
        self.sock.sendall(f"GET /events HTTP/1.1\r\nHost: 127.0.0.1\r\n{extra}\r\n".encode())
        self.f = self.sock.makefile("rb")
        status = self.f.readline()
        assert status.startswith(b"HTTP/1.1 200"), status
        headers = {}
        while (line := self.f.readline().strip()):
            k, _, v = line.decode().partition(":")
            headers[k.lower()] = v.strip()
        assert headers["content-type"] == "text/event-stream; charset=utf-8"

    def frame(self) -> dict[str, str]:
        out: dict[str, str] = {}
        while True:
            line = self.f.readline()
            assert line, "stream closed"
            line = line.rstrip(b"\n").decode()
            if not line:
                if out:
                    return out
                continue
            if line.startswith(":"):
                continue
            k, _, v = line.partition(": ")
            out[k] = out[k] + "\n" + v if k in out else v

    def next_of(self, event: str, tries: int = 200) -> dict[str, str]:
        for _ in range(tries):
            f = self.frame()
            if f.get("event") == event:
                return f
        raise AssertionError(f"no {event} event in {tries} frames")

    def close(self) -> None:
        self.f.close()
        self.sock.close()


def test_event_stream_sends_backlog_new_events_and_state_changes(server: web.WebServer, lab: Sources):
    lines = [json.dumps({"t": 1.0 + i, "kind": "link_down" if i % 2 else "link_up", "link": ["a", "b"], "n": i})
             for i in range(web.BACKLOG + 5)]
    lab.events.write_text("".join(x + "\n" for x in lines))
    s = Stream(server)
    assert s.frame() == {"retry": "2000"}
    first = s.frame()
    assert first["event"] == "snapshot" and json.loads(first["data"])["links"]["p0-t0-0 -- p0-t1-1"]["state"] == "up"
    backlog = [s.frame() for _ in range(web.BACKLOG)]
    assert [json.loads(f["data"])["n"] for f in backlog] == list(range(5, web.BACKLOG + 5))  # the last 100
    end = lab.events.stat().st_size
    assert backlog[-1]["id"] == str(end)  # the id is the events file's offset after the event
    with open(lab.events, "a") as f:
        f.write(json.dumps({"t": 9.0, "kind": "failures_recorded", "n": "new"}) + "\n")
    new = s.next_of("fabric")
    assert json.loads(new["data"])["n"] == "new" and new["id"] == str(lab.events.stat().st_size)
    save_state(lab.state, [LinkDown("p0-t0-0", "p0-t1-1")])
    for _ in range(50):  # each change of the state file gives a snapshot; wait for the one showing this change
        snap = json.loads(s.next_of("snapshot")["data"])
        if snap["links"]["p0-t0-0 -- p0-t1-1"]["state"] == "failed":
            break
    assert snap["links"]["p0-t0-0 -- p0-t1-1"]["recorded_by"] == "operator"
    s.close()
    # a page reconnecting with Last-Event-ID resumes after the last event it had: nothing twice
    with open(lab.events, "a") as f:
        f.write(json.dumps({"t": 10.0, "kind": "link_up", "n": "after"}) + "\n")
    r = Stream(server, last_id=new["id"])
    assert json.loads(r.next_of("fabric")["data"])["n"] == "after"
    r.close()


def test_listen_addresses(lab: Sources):
    assert web.parse_listen("127.0.0.1:9400") == ("127.0.0.1", 9400)
    assert web.parse_listen("[::1]:0") == ("::1", 0)
    for bad in ("9400", ":9400", "127.0.0.1:x", "127.0.0.1:70000"):
        with pytest.raises(web.ListenError):
            web.parse_listen(bad)
    with pytest.raises(web.ListenError, match="is not a loopback address.*--allow-remote"):
        web.WebServer(lab, "0.0.0.0", 0)
    s = web.WebServer(lab, "0.0.0.0", 0, allow_remote=True)
    assert not s.loopback_only
    s.server_close()


def invoke(tmp: Path, *args: str):
    return CliRunner().invoke(cli, ["--topology", str(tmp / "lab.yaml"), *args], prog_name="fabricctl")


def test_fabricctl_web_prints_the_url_and_says_loopback(lab: Sources):
    tmp = lab.state.parent
    r = invoke(tmp, "web", "--listen", "127.0.0.1:0", "--duration", "0.2")
    assert r.exit_code == 0, r.output
    assert re.fullmatch(r"fabric view: http://127\.0\.0\.1:\d+/ \(loopback only: this machine alone can open it\); "
                        r"read-only; Ctrl-C stops\n", r.stdout)


def test_fabricctl_web_errors_are_one_line(lab: Sources):
    tmp = lab.state.parent
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    port = busy.getsockname()[1]
    try:
        r = invoke(tmp, "web", "--listen", f"127.0.0.1:{port}")
    finally:
        busy.close()
    assert (r.exit_code, r.stderr) == (2, f"error: cannot listen on 127.0.0.1:{port}: address already in use "
                                          "(another fabricctl web? choose another --listen port)\n")
    r = invoke(tmp, "web", "--listen", "0.0.0.0:0")
    assert (r.exit_code, r.stderr) == (2, "error: --listen 0.0.0.0:0 is not a loopback address: the page shows the "
                                          "whole fabric to whoever reaches it (give --allow-remote to mean it)\n")
    r = invoke(tmp, "--state", str(tmp / "nowhere" / "state.json"), "web")
    assert (r.exit_code, r.stderr) == (2, f"error: no state directory {tmp / 'nowhere'} (the state file state.json "
                                          "lives there: give --state or --topology)\n")


def test_the_events_file_is_the_running_controllers(tmp_path: Path):
    shutil.copy(DATA / "two_plane_lab.yaml", tmp_path / "lab.yaml")
    lab = Sources(load(tmp_path / "lab.yaml"), "srv6_spray", tmp_path / ".fabric-state.json")  # no --events
    (tmp_path / "fabric-events.jsonl").write_text(json.dumps({"t": 1, "kind": "beside"}) + "\n")
    own = tmp_path / "run" / "own.jsonl"
    own.parent.mkdir()
    own.write_text(json.dumps({"t": 2, "kind": "own"}) + "\n")
    s = web.WebServer(lab, "127.0.0.1", 0)
    s.start()
    try:
        assert [e["kind"] for e in json.loads(get(s, "/api/events")[2])] == ["beside"]  # no controller: the default
        st.write_status(lab.status, status_doc(events=str(own)))
        assert [e["kind"] for e in json.loads(get(s, "/api/events")[2])] == ["own"]
    finally:
        s.close()


def test_run_with_web_serves_the_view_of_that_controller(tmp_path: Path):
    """`fabricctl run --web`: the page's snapshot names the running controller. The switches' addresses
    are unix sockets nobody serves, so the run touches no switch of any lab on this machine."""
    import subprocess
    import sys
    import time

    text = (DATA / "two_plane_lab.yaml").read_text()
    text = re.sub(r'"127\.0\.0\.1:500(\d\d)"', lambda m: f'"unix:{tmp_path}/s{m.group(1)}.sock"', text)
    (tmp_path / "lab.yaml").write_text(text)
    root = REPO
    proc = subprocess.Popen([sys.executable, "-m", "fabricctl", "--topology", str(tmp_path / "lab.yaml"), "run",
                             "--no-probe", "--nice", "0", "--counters-every", "0", "--duration", "60",
                             "--web", "127.0.0.1:0"], cwd=root, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL,
                            text=True, env={**os.environ, "PYTHONPATH": str(root)})
    try:
        import queue
        import threading

        said: queue.Queue = queue.Queue()  # its stderr lines, read on a thread: a silent run cannot hold the test
        threading.Thread(target=lambda: [said.put(line) for line in proc.stderr], daemon=True).start()  # type: ignore[union-attr]
        url, seen = None, []
        end = time.monotonic() + 60
        while url is None and time.monotonic() < end:
            try:
                line = said.get(timeout=0.2)
            except queue.Empty:
                if proc.poll() is not None and said.empty():
                    break
                continue
            seen.append(line)
            m = re.match(r"fabric view: (http://127\.0\.0\.1:(\d+)/) \(loopback only", line)
            if m:
                url = m.group(1)
        assert url, f"run --web printed no URL: {seen}"
        port = int(url.rsplit(":", 1)[1].strip("/"))
        deadline = time.monotonic() + 30
        controller = None
        while time.monotonic() < deadline and controller is None:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            conn.request("GET", "/api/snapshot")
            controller = json.loads(conn.getresponse().read())["controller"]
            conn.close()
            time.sleep(0.1)
        assert controller is not None and controller["pid"] == proc.pid
        assert controller["down_on"] == 8  # no switch answers
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_run_with_web_on_a_busy_port_starts_nothing(tmp_path: Path):
    shutil.copy(DATA / "two_plane_lab.yaml", tmp_path / "lab.yaml")
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    port = busy.getsockname()[1]
    try:
        r = invoke(tmp_path, "run", "--web", f"127.0.0.1:{port}")
    finally:
        busy.close()
    assert (r.exit_code, r.stderr) == (2, f"error: cannot listen on 127.0.0.1:{port}: address already in use "
                                          "(another fabricctl web? choose another --web port)\n")
    assert not (tmp_path / "fabric-events.jsonl").exists()


def test_a_controller_that_dies_leaves_the_page(lab: Sources):
    """Its status file stays (a SIGKILLed controller cannot remove it): the view drops it once its pid is gone."""
    import subprocess
    import time

    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        st.write_status(lab.status, {**status_doc(), "pid": sleeper.pid})
        hub = web.Hub(Snapshots(lab))
        hub.start()
        assert hub.latest["controller"]["pid"] == sleeper.pid
        version = hub.version
        sleeper.kill()
        sleeper.wait()
        deadline = time.monotonic() + 30
        while hub.latest["controller"] is not None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert hub.latest["controller"] is None and hub.version > version
        hub.stop()
    finally:
        sleeper.kill()
        sleeper.wait()
