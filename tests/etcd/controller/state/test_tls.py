"""The store over TLS (`etcd+https://HOST:PORT?ca=FILE&cert=FILE&key=FILE`) against a real etcd member that
serves its clients over TLS and requires client certificates: fail/status/export/events, leadership and
the live view work; a wrong CA, a stranger's certificate, none, or plain etcd:// are one line each."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from controller.model.failures import LinkDown
from controller.state.etcdstore import EtcdStore, EventSink
from controller.state.leader import Leadership
from controller.model.failures import OPERATOR
from controller.state.store import parse_url
from mininet_labs.pki import openssl
from tests.etcd.conftest import LAB, REPO
from tests.etcd.controller.service.test_web import View
from tests.etcd.tlsmember import TlsMember

FABRIC = "two_plane_lab"


@pytest.fixture
def member(tmp_path: Path) -> Iterator[TlsMember]:
    if shutil.which("etcd") is None:
        pytest.skip("etcd not found on PATH (Debian: apt-get install etcd-server etcd-client)")
    if openssl() is None:
        pytest.skip("openssl not found on PATH (it makes the test's certificates)")
    m = TlsMember(tmp_path / "etcd-tls")
    m.start()
    try:
        yield m
    finally:
        m.stop()


def fabricctl(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "fabricctl", "--topology", str(LAB), "--store", url, *args],
                          cwd=REPO, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(REPO)})


def test_commands_leadership_and_the_view_work_over_tls(member: TlsMember, tmp_path: Path):
    url = member.url()
    r = fabricctl(url, "fail", "link", "p0-t0-0", "p0-t1-1", "--no-apply")
    assert r.returncode == 0, r.stderr
    assert f"in etcd+https://127.0.0.1:{member.client}/srv6-fabric/{FABRIC}/" in r.stdout
    store = EtcdStore(parse_url(url), FABRIC)
    assert store.load() == {LinkDown("p0-t0-0", "p0-t1-1"): OPERATOR}
    s = fabricctl(url, "status", "--offline")
    assert s.returncode == 0 and "failed: link p0-t0-0 -- p0-t1-1 (operator)" in s.stdout, s
    e = fabricctl(url, "store", "export", str(tmp_path / "backup.json"))
    assert e.returncode == 0, e.stderr
    assert json.loads((tmp_path / "backup.json").read_text())["failures"][0]["link"] == ["p0-t0-0", "p0-t1-1"]
    sink = EventSink(store)
    sink({"t": 1700000000.0, "kind": "link_down", "n": 1})
    sink.close(timeout=30)
    ev = fabricctl(url, "events", "--json")
    assert ev.returncode == 0 and [json.loads(x)["n"] for x in ev.stdout.splitlines()] == [1], ev
    lead = Leadership(store, ttl=3)
    assert lead.campaign(threading.Event()) and lead.election_id >> 64 == lead.create_revision > 0
    lead.resign()
    view = View(url)
    try:
        snap = view.snapshot()
        assert snap["links"]["p0-t0-0 -- p0-t1-1"]["state"] == "failed" and snap["state_error"] is None
    finally:
        view.close()


def test_a_member_we_cannot_talk_to_is_one_line(member: TlsMember):
    port = member.client
    cases = [
        (member.url(ca=member.other_ca), "TLS: its certificate is not trusted (unable to get local issuer "
                                         "certificate; give the CA that signed it: ?ca=FILE)"),
        (member.url(cert=member.stranger_cert, key=member.stranger_key),
         "TLS: it ended the handshake (it wants a client certificate signed by its trusted CA: ?cert=FILE&key=FILE)"),
        (f"etcd+https://127.0.0.1:{port}?ca={member.ca}",
         "TLS: it ended the handshake (it wants a client certificate signed by its trusted CA: ?cert=FILE&key=FILE)"),
        (f"etcd://127.0.0.1:{port}", "it closed the connection without an answer (a TLS member? use etcd+https://)"),
    ]
    for url, why in cases:
        scheme = "etcd+https" if url.startswith("etcd+https") else "etcd"
        for argv in (["fail", "link", "p0-t0-0", "p0-t1-1", "--no-apply"], ["status", "--offline"],
                     ["web", "--listen", "127.0.0.1:0", "--duration", "5"]):
            r = fabricctl(url, *argv)
            assert (r.returncode, r.stdout) == (1, ""), (url, argv, r)
            assert r.stderr == f"error: {scheme}://127.0.0.1:{port}: no member answers (127.0.0.1:{port} {why})\n", \
                (url, argv, r.stderr)
    assert EtcdStore(parse_url(member.url()), FABRIC).load() == {}  # nothing was written


def test_bad_tls_options_are_one_line(tmp_path: Path):
    ca = tmp_path / "ca.crt"
    ca.write_text("not read before the handshake\n")
    cases = [
        (f"etcd://127.0.0.1:2379?ca={ca}", "?ca=" + str(ca) + ": ca, cert and key are for etcd+https://"),
        (f"etcd+https://127.0.0.1:2379?ca={tmp_path}/none.crt", f"ca file '{tmp_path}/none.crt' is not a readable file"),
        (f"etcd+https://127.0.0.1:2379?ca={ca}&cert={ca}", "cert and key go together (the client certificate and its key)"),
        (f"etcd+https://127.0.0.1:2379?cafile={ca}", f"'cafile={ca}': expected ca=FILE, cert=FILE or key=FILE"),
    ]
    for url, why in cases:
        r = fabricctl(url, "status", "--offline")
        assert (r.returncode, r.stdout) == (2, ""), (url, r)
        assert r.stderr == f"error: store {url!r}: {why}\n", r.stderr
