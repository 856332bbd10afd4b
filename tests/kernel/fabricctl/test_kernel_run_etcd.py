"""`fabricctl run --store etcd://...` on a kernel lab, as on bmv2: two controllers campaign, the leader holds the
namespaces (metrics and the live view served), the other stands by; a port that loses carrier is recorded in etcd
and its nexthops pulled; the leader stopped, the standby takes over."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import urllib.request
from typing import Any

from controller.model.failures import LinkDown
from controller.southbound.kroutes import intf
from controller.state.etcdstore import EtcdStore
from controller.state.store import parse_url
from tests.etcd.cluster import EtcdCluster
from tests.etcd.conftest import cluster  # noqa: F401  (the real etcd cluster fixture, one per test)
from tests.kernel.fabricctl.test_kernel_run import _until
from tests.paths import REPO

LINK = LinkDown("p0-t0-0", "p0-t1-1")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get(url: str) -> str:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return str(r.read().decode())
    except OSError:
        return ""


def _run(lab: Any, url: str, *args: str) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if k != "FABRIC_STORE"}
    return subprocess.Popen([sys.executable, "-m", "fabricctl", "--store", url, "--topology", str(lab.topology_path),
                             "run", "--duration", "120", *args], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)


def _stop(run: subprocess.Popen[str]) -> str:
    run.send_signal(signal.SIGTERM)
    return run.communicate(timeout=30)[1]


def test_a_kernel_fabric_on_etcd_has_a_leader_a_standby_metrics_and_the_view(lab: Any, cluster: EtcdCluster) -> None:
    topo = lab.model
    leaf, spine = topo.switch(LINK.t0), topo.switch(LINK.t1)
    ns, dev = lab.netns_of(leaf.name), intf(leaf.uplinks[spine.index])
    store = EtcdStore(parse_url(cluster.url), topo.name)
    healthy = {s.name: lab.routes(s.name) for s in topo.switches}
    metrics, web = _free_port(), _free_port()
    first = _run(lab, cluster.url, "--metrics-port", str(metrics), "--web", f"127.0.0.1:{web}")
    second = None
    try:
        _until("a leader publishing its view", lambda: (store.read_view() or {}).get("pid") == first.pid, limit=40)
        _until("every link probed", lambda: all(link["directions"] and all(d["sent"] > 0 for d in
                                                                           link["directions"].values())
                                                for link in (store.read_view() or {}).get("links", {}).values()))
        second = _run(lab, cluster.url)
        _until("metrics served", lambda: 'fabric_link_up{link="p0-t0-0--p0-t1-1"} 1.0' in
               _get(f"http://127.0.0.1:{metrics}/metrics"))
        snapshot = json.loads(_get(f"http://127.0.0.1:{web}/api/snapshot") or "{}")
        assert snapshot, "the live view answers"
        subprocess.run(["ip", "-n", ns, "link", "set", dev, "down"], check=True)
        _until("the link recorded in etcd", lambda: set(store.load()) == {LINK})
        _until("the link down in the metrics", lambda: 'fabric_link_up{link="p0-t0-0--p0-t1-1"} 0.0' in
               _get(f"http://127.0.0.1:{metrics}/metrics"))
        _until("the leaf's nexthops through it pulled", lambda: lab.routes(leaf.name) != healthy[leaf.name])
        assert all(lab.routes(s.name) == healthy[s.name] for s in topo.switches if s.plane == 1)
        assert (store.read_view() or {}).get("pid") == first.pid  # the standby wrote nothing meanwhile
        subprocess.run(["ip", "-n", ns, "link", "set", dev, "up"], check=True)
        _until("the link restored in etcd", lambda: store.load() == {}, limit=40)
        _until("the routes back", lambda: {s.name: lab.routes(s.name) for s in topo.switches} == healthy)
        err = _stop(first)
        assert first.returncode == 0, err
        _until("the standby leads", lambda: (store.read_view() or {}).get("pid") == second.pid, limit=40)
        assert store.load() == {}
    finally:
        subprocess.run(["ip", "-n", ns, "link", "set", dev, "up"], capture_output=True)
        if first.poll() is None:
            _stop(first)
        if second is not None:
            err = _stop(second)
    assert second.returncode == 0, err
    assert {s.name: lab.routes(s.name) for s in topo.switches} == healthy
