"""The live view (`fabricctl web`, `run --web`) and `events --follow` reading the fabric's store in a real
three-member etcd cluster: what `fabricctl fail/restore` recorded there, the leader's published view, the
controllers' events (backlog, new ones, resuming by revision), a lost quorum; bad store URLs in one line."""

from __future__ import annotations

import http.client
import json
import os
import re
import select
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from controller.state.etcdstore import EtcdStore, EventSink
from controller.state.leader import Leadership
from controller.state.store import parse_url
from tests.etcd.cluster import EtcdCluster, free_ports
from tests.etcd.conftest import LAB, REPO

LINK = "p0-t0-0 -- p0-t1-1"
FABRIC = "two_plane_lab"


def fabricctl(url: str, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "fabricctl", "--topology", str(LAB), "--store", url, *args],
                          cwd=REPO, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "PYTHONPATH": str(REPO)})


class View:
    """`fabricctl --store URL web --listen 127.0.0.1:0` as a process, and GETs to it."""

    def __init__(self, url: str, *extra: str) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "fabricctl", "--topology", str(LAB), "--store", url,
                                      "web", "--listen", "127.0.0.1:0", "--duration", "240", *extra],
                                     cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     env={**os.environ, "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1"})
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], 60)
        line = self.proc.stdout.readline() if ready else ""
        assert line.startswith("fabric view: http://127.0.0.1:"), (line, self.proc.stderr.read() if not ready else "")
        self.port = int(line.split("http://127.0.0.1:", 1)[1].split("/", 1)[0])

    def get(self, path: str) -> tuple[int, Any]:
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            c.request("GET", path)
            r = c.getresponse()
            body = r.read()
            return r.status, json.loads(body) if r.getheader("Content-Type") == "application/json" else body
        finally:
            c.close()

    def snapshot(self) -> dict[str, Any]:
        status, doc = self.get("/api/snapshot")
        assert status == 200
        return doc

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(20)


@pytest.fixture
def view(cluster: EtcdCluster) -> Iterator[View]:
    v = View(cluster.url)
    yield v
    v.close()


def until(what: Callable[[], Any], why: str, tries: int = 150, every: float = 0.2) -> Any:
    for _ in range(tries):
        got = what()
        if got:
            return got
        time.sleep(every)
    raise AssertionError(f"never: {why}")


class Stream:
    """A raw reader of /events: (id, event, data) per frame."""

    def __init__(self, port: int, last_id: str | None = None) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        extra = f"Last-Event-ID: {last_id}\r\n" if last_id is not None else ""
        self.sock.sendall(f"GET /events HTTP/1.1\r\nHost: 127.0.0.1\r\n{extra}\r\n".encode())
        self.f = self.sock.makefile("rb")
        assert self.f.readline().startswith(b"HTTP/1.1 200")
        while self.f.readline().strip():
            pass

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
            out[k] = v

    def next_of(self, event: str, tries: int = 300) -> dict[str, str]:
        for _ in range(tries):
            f = self.frame()
            if f.get("event") == event:
                return f
        raise AssertionError(f"no {event} frame in {tries}")

    def close(self) -> None:
        self.f.close()
        self.sock.close()


def test_view_shows_a_failure_fabricctl_fail_records_in_etcd_and_its_removal(cluster: EtcdCluster, view: View):
    snap = view.snapshot()
    assert snap["state_file"] == f"{cluster.url}/srv6-fabric/{FABRIC}/" and snap["state_error"] is None
    assert snap["links"][LINK]["state"] == "up" and snap["failures"] == [] and snap["controller"] is None
    r = fabricctl(cluster.url, "fail", "link", "p0-t0-0", "p0-t1-1", "--no-apply")
    assert r.returncode == 0, r.stderr
    assert EtcdStore(parse_url(cluster.url), FABRIC).load() != {}  # the record is etcd's, not a state file's
    assert not (LAB.parent / ".fabric-state.json").exists()
    snap = view.snapshot()
    assert snap["links"][LINK]["state"] == "failed" and snap["links"][LINK]["recorded_by"] == "operator"
    assert snap["failures"] == [{"what": "link p0-t0-0 -- p0-t1-1", "by": "operator"}]
    stream = Stream(view.port)  # its first snapshot is the one the view built last (polled every 0.2 s)
    for _ in range(50):
        snap = json.loads(stream.next_of("snapshot")["data"])
        if snap["links"][LINK]["state"] == "failed":
            break
    assert snap["links"][LINK]["state"] == "failed"
    r = fabricctl(cluster.url, "restore", "link", "p0-t0-0", "p0-t1-1", "--no-apply")
    assert r.returncode == 0, r.stderr
    for _ in range(50):  # the stream pushes a snapshot on the change
        snap = json.loads(stream.next_of("snapshot")["data"])
        if snap["links"][LINK]["state"] == "up":
            break
    assert snap["links"][LINK]["state"] == "up" and snap["failures"] == []
    stream.close()
    assert view.snapshot()["failures"] == []


def test_view_shows_the_leaders_published_view_while_it_leads(cluster: EtcdCluster, view: View):
    import threading

    store = EtcdStore(parse_url(cluster.url), FABRIC)
    lead = Leadership(store, ttl=3, identity={"host": "m1", "pid": 4242})
    assert lead.campaign(threading.Event())
    store.publish_view({"pid": 4242, "election_id": lead.election_id, "updated": time.time(),
                        "sessions": {"p0-t0-0": {"role": "primary"}, "p0-t1-0": {"role": "primary"}},
                        "leader": {"host": "m1", "election_id": f"{lead.create_revision},0"}}, lead.lease)
    try:
        c = until(lambda: view.snapshot()["controller"], "the leader's view on the page")
        assert (c["host"], c["pid"], c["election_id"], c["primary_on"]) == ("m1", 4242, f"{lead.create_revision},0", 2)
    finally:
        lead.resign()
    until(lambda: view.snapshot()["controller"] is None, "no controller once the leader resigned (its view went)")


def test_view_streams_the_controllers_events_from_etcd_and_resumes_by_revision(cluster: EtcdCluster, view: View):
    sink = EventSink(EtcdStore(parse_url(cluster.url), FABRIC))
    for n in range(105):
        sink({"t": 1700000000.0 + n, "kind": "link_down", "pid": 7, "n": n})
    sink.close(timeout=30)
    status, last = view.get("/api/events?last=3")
    assert status == 200 and [e["n"] for e in last] == [102, 103, 104]
    s = Stream(view.port)
    backlog = [s.next_of("fabric") for _ in range(100)]
    assert [json.loads(f["data"])["n"] for f in backlog] == list(range(5, 105))  # the last 100, oldest first
    ids = [int(f["id"]) for f in backlog]
    assert ids == sorted(set(ids))  # etcd revisions: each its own, growing
    sink = EventSink(EtcdStore(parse_url(cluster.url), FABRIC))
    sink({"t": 1700000200.0, "kind": "failures_recorded", "n": "new"})
    new = s.next_of("fabric")
    assert json.loads(new["data"])["n"] == "new" and int(new["id"]) > ids[-1]
    s.close()
    sink({"t": 1700000201.0, "kind": "link_up", "n": "after"})
    sink.close(timeout=30)
    r = Stream(view.port, last_id=new["id"])  # a page reconnecting resumes after the last event it had
    assert json.loads(r.next_of("fabric")["data"])["n"] == "after"
    r.close()


def test_view_without_quorum_shows_the_last_record_and_why_then_recovers(cluster: EtcdCluster, view: View):
    assert fabricctl(cluster.url, "fail", "switch", "p1-t1-0", "--no-apply").returncode == 0
    until(lambda: view.snapshot()["failures"], "the failure on the page")
    for m in cluster.members[1:]:
        cluster.kill(m)
    snap = until(lambda: (s := view.snapshot())["store_problem"] and s, "the lost quorum on the page", tries=60)
    assert "no quorum: 1 of 3 members reachable" in snap["store_problem"]
    assert snap["failures"] == [{"what": "switch p1-t1-0", "by": "operator"}]  # what the survivor last committed
    assert snap["switches"]["p1-t1-0"]["state"] == "failed" and snap["state_error"] is None
    for m in cluster.members[1:]:
        cluster.restart(m)
    cluster.wait_healthy()
    snap = until(lambda: (s := view.snapshot())["store_problem"] is None and s, "the quorum back on the page")
    assert snap["failures"] == [{"what": "switch p1-t1-0", "by": "operator"}]


def unserved_lab(tmp_path: Path) -> Path:
    """The lab topology (same fabric name) with its switches at unix sockets nobody serves: a `run` in a
    test touches no switch of any lab on this machine, and its files stay in the test's directory."""
    text = re.sub(r'"127\.0\.0\.1:500(\d\d)"', lambda m: f'"unix:{tmp_path}/s{m.group(1)}.sock"', LAB.read_text())
    (tmp_path / "lab.yaml").write_text(text)
    return tmp_path / "lab.yaml"


def test_run_web_on_etcd_serves_the_same_view(cluster: EtcdCluster, tmp_path: Path):
    assert fabricctl(cluster.url, "fail", "link", "p0-t0-0", "p0-t1-1", "--no-apply").returncode == 0
    port = free_ports(1)[0]
    proc = subprocess.Popen([sys.executable, "-m", "fabricctl", "--topology", str(unserved_lab(tmp_path)),
                             "--store", cluster.url, "run", "--web", f"127.0.0.1:{port}", "--duration", "120",
                             "--no-probe", "--nice", "0", "--counters-every", "0"],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1"})
    try:
        assert proc.stderr is not None
        lines = [proc.stderr.readline() for _ in range(2)]  # bound before the campaign starts
        assert lines[0].startswith(f"fabric view: http://127.0.0.1:{port}/ (loopback only"), lines
        assert lines[1].startswith(f"running on {cluster.url}/srv6-fabric/{FABRIC}/: "), lines
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        c.request("GET", "/api/snapshot")
        snap = json.loads(c.getresponse().read())
        assert snap["state_file"].startswith(cluster.url) and snap["links"][LINK]["state"] == "failed"
    finally:
        proc.terminate()
        proc.wait(30)


def test_events_follow_prints_what_controllers_put_in_etcd(cluster: EtcdCluster):
    proc = subprocess.Popen([sys.executable, "-m", "fabricctl", "--topology", str(LAB), "--store", cluster.url,
                             "events", "--follow", "--json"], cwd=REPO, stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1"})
    try:
        sink = EventSink(EtcdStore(parse_url(cluster.url), FABRIC))
        assert proc.stdout is not None
        for n in range(2):
            sink({"t": 1700000000.0 + n, "kind": "link_down", "n": n})
            ready, _, _ = select.select([proc.stdout], [], [], 30)
            assert ready, f"event {n} not printed"
            assert json.loads(proc.stdout.readline())["n"] == n
        sink.close(timeout=30)
    finally:
        proc.terminate()
        proc.wait(20)


@pytest.mark.parametrize("url, code, says", [
    ("http://127.0.0.1:2379", 2, "error: store 'http://127.0.0.1:2379': expected etcd://HOST:PORT"),
    ("etcd://127.0.0.1:99999", 2, "error: store 'etcd://127.0.0.1:99999': port 99999 is not 1..65535"),
    ("etcd://no host:2379", 2, "error: store 'etcd://no host:2379': 'no host:2379' is not HOST:PORT"),
])
def test_bad_store_url_is_one_line_and_starts_nothing(url: str, code: int, says: str, tmp_path: Path):
    topo = str(unserved_lab(tmp_path))
    for argv in (["web", "--listen", "127.0.0.1:0", "--duration", "5"],
                 ["run", "--web", "127.0.0.1:0", "--duration", "5"]):
        r = fabricctl(url, "--topology", topo, *argv)
        assert (r.returncode, r.stdout) == (code, ""), (argv, r)
        assert r.stderr.splitlines() == [r.stderr.strip()] and r.stderr.startswith(says), (argv, r.stderr)
    assert os.listdir(tmp_path) == ["lab.yaml"]  # no events, state or lock file made


def test_store_nobody_answers_for_is_one_line(cluster: EtcdCluster):
    dead = free_ports(1)[0]
    r = fabricctl(f"etcd://127.0.0.1:{dead}", "web", "--listen", "127.0.0.1:0", "--duration", "5")
    assert r.returncode == 1 and r.stdout == "", r
    assert r.stderr.strip() == f"error: etcd://127.0.0.1:{dead}: no member answers (127.0.0.1:{dead} connection refused)"
    r = fabricctl(cluster.url, "web", "--events", "x.jsonl", "--listen", "127.0.0.1:0", "--duration", "5")
    assert r.returncode == 2 and r.stderr.strip().startswith("error: --events names an events file: with --store")


def test_events_without_follow_prints_every_event_past_one_page(cluster: EtcdCluster):
    sink = EventSink(EtcdStore(parse_url(cluster.url), FABRIC))
    for n in range(1003):  # the store reads 1000 a page
        sink({"t": 1700000000.0 + n, "kind": "link_down" if n % 2 else "link_up", "n": n})
    sink.close(timeout=60)
    assert sink.dropped == 0
    r = fabricctl(cluster.url, "events", "--json")
    assert r.returncode == 0, r.stderr
    assert [json.loads(line)["n"] for line in r.stdout.splitlines()] == list(range(1003))
    r = fabricctl(cluster.url, "events", "--kind", "link_up", "--json")
    assert [json.loads(line)["n"] for line in r.stdout.splitlines()] == list(range(0, 1003, 2))
