"""Three `fabricctl run --store etcd://` controllers on real bmv2 switches and a real three-member
etcd cluster: the leader killed, then frozen past its lease; the tables read back from the switches
are the plan of every recorded failure, each new leader's election id is higher, and the frozen
leader, thawed, writes nothing."""

from __future__ import annotations

from tests.paths import REPO

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from controller.model import topology
from controller.model.failures import LinkDown
from controller.state.etcdstore import EtcdStore
from controller.state.store import parse_url
from tests.bmv2.conftest import require_bmv2
from tests.bmv2.fabric_fixture import FabricLab, differences, start_lab
from tests.etcd.cluster import EtcdCluster

FIRST, SECOND = LinkDown("p0-t0-0", "p0-t1-1"), LinkDown("p0-t0-1", "p0-t1-0")


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FabricLab]:
    """1 plane x 2 T1 x 2 T0 x 1 host: four switches."""
    require_bmv2()
    if shutil.which("etcd") is None:
        pytest.skip("etcd not found on PATH (Debian: apt-get install etcd-server etcd-client)")
    yield from start_lab(tmp_path_factory.mktemp("fabric"), topology.build(1, 2, 2, 1, name="etcd_lab"), tag="ld")


def hilo(text: str) -> int:
    high, low = text.split(",")
    return int(high) << 64 | int(low)


def wait_for(condition, timeout: float = 60.0):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = condition()
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError(f"not within {timeout} s")


def events(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_leader_killed_then_frozen_tables_follow_the_record_and_the_deposed_writes_nothing(
        lab: FabricLab, tmp_path: Path) -> None:
    lab.wipe()
    cluster = EtcdCluster(tmp_path / "etcd")
    cluster.start()
    store = EtcdStore(parse_url(cluster.url), lab.topo.name)
    argv = [sys.executable, "-c", "from fabricctl.main import main; main()", "--topology", str(lab.path),
            "--program", lab.artifacts.program, "--store", cluster.url]
    procs: dict[int, subprocess.Popen] = {}
    logs: dict[int, Path] = {}
    try:
        for i in range(3):
            ev = tmp_path / f"events{i}.jsonl"
            p = subprocess.Popen([*argv, "run", "--no-probe", "--lease-ttl", "2", "--counters-every", "0",
                                  "--nice", "0", "--events", str(ev)], cwd=REPO,
                                 env={**os.environ, "PYTHONPATH": str(REPO)},
                                 stderr=open(tmp_path / f"run{i}.log", "w"))
            procs[p.pid], logs[p.pid] = p, ev

        def leading(exclude: set[int]) -> dict[str, Any] | None:
            view = store.read_view()
            if (view is None or view.get("pid") in exclude or view.get("applied") is None
                    or not all(s["role"] == "primary" for s in view["sessions"].values())):
                return None
            return view

        first = wait_for(lambda: leading(set()))
        r = lab.cli("--store", cluster.url, "fail", "link", FIRST.t0, FIRST.t1)
        assert r.exit_code == 0 and "applied by the running controller" in r.output, r.output
        assert wait_for(lambda: differences(lab.snapshot(), lab.desired({FIRST})) == [])

        # 1. the leader killed: another leads with a higher election id, the failure kept
        procs[first["pid"]].kill()
        procs[first["pid"]].wait(10)
        second = wait_for(lambda: leading({first["pid"]}))
        assert hilo(second["leader"]["election_id"]) > hilo(first["leader"]["election_id"])
        assert differences(lab.snapshot(), lab.desired({FIRST})) == []

        # 2. the leader frozen past its lease: another leads; a failure recorded meanwhile is applied
        # by it; the thawed one loses its leadership and writes nothing
        frozen = procs[second["pid"]]
        frozen.send_signal(signal.SIGSTOP)
        frozen_at = time.time()
        third = wait_for(lambda: leading({first["pid"], second["pid"]}))
        assert hilo(third["leader"]["election_id"]) > hilo(second["leader"]["election_id"])
        r = lab.cli("--store", cluster.url, "fail", "link", SECOND.t0, SECOND.t1)
        assert r.exit_code == 0 and "applied by the running controller" in r.output, r.output
        want = lab.desired({FIRST, SECOND})
        assert differences(lab.snapshot(), want) == []
        frozen.send_signal(signal.SIGCONT)
        log = tmp_path / f"run{list(procs).index(second['pid'])}.log"
        wait_for(lambda: "leadership lost" in log.read_text())
        said = log.read_text().splitlines()
        stopped = next(n for n, line in enumerate(said) if line.startswith("writes stopped: "))
        lost = next(n for n, line in enumerate(said) if line.startswith("leadership lost: "))
        assert stopped < lost
        # its service stopped (every thread joined, so nothing it had queued is left) once it campaigns again
        wait_for(lambda: any(line.startswith("campaigning: ") for line in log.read_text().splitlines()[lost + 1:]))
        after = [e for e in events(logs[second["pid"]]) if e["t"] > frozen_at]
        written = [e for e in after if e["kind"] == "reconciled"
                   or (e["kind"] == "deltas_written" and e.get("switches"))]
        assert written == [], written
        assert [e for e in after if e["kind"] == "writes_held"], "its healer held its writes itself"
        assert differences(lab.snapshot(), want) == []
        assert store.read_view()["pid"] == third["pid"]
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGCONT)
                p.terminate()
        for p in procs.values():
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(5)
        cluster.stop()


def test_quorum_lost_the_leader_holds_the_tables_and_resumes_when_it_returns(lab: FabricLab, tmp_path: Path) -> None:
    lab.wipe()
    cluster = EtcdCluster(tmp_path / "etcd")
    cluster.start()
    store = EtcdStore(parse_url(cluster.url), lab.topo.name)
    log = tmp_path / "run.log"
    p = subprocess.Popen([sys.executable, "-c", "from fabricctl.main import main; main()", "--topology", str(lab.path),
                          "--program", lab.artifacts.program, "--store", cluster.url, "run", "--no-probe",
                          "--lease-ttl", "2", "--counters-every", "0", "--nice", "0",
                          "--events", str(tmp_path / "events.jsonl")],
                         cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, stderr=open(log, "w"))
    try:
        wait_for(lambda: (v := store.read_view()) is not None and v.get("applied") is not None
                 and all(s["role"] == "primary" for s in v["sessions"].values()))
        r = lab.cli("--store", cluster.url, "fail", "link", FIRST.t0, FIRST.t1)
        assert r.exit_code == 0, r.output
        want = lab.desired({FIRST})
        assert differences(lab.snapshot(), want) == []
        for m in cluster.members[1:]:
            cluster.kill(m)
        wait_for(lambda: "writes stopped: lease " in log.read_text())
        r = lab.cli("--store", cluster.url, "fail", "link", SECOND.t0, SECOND.t1)
        assert r.exit_code == 1 and "no quorum" in r.output, r.output
        s = lab.cli("--store", cluster.url, "status", "--offline")
        assert s.exit_code == 0, s.output
        lines = [x for x in s.output.splitlines() if x.startswith("store: ")]
        assert len(lines) == 1 and "no quorum" in lines[0] and "holds the tables as they are" in lines[0], s.output
        assert differences(lab.snapshot(), want) == []  # still forwarding on what is installed
        for m in cluster.members[1:]:
            cluster.restart(m)
        cluster.wait_healthy()
        wait_for(lambda: "writes resumed" in log.read_text() or "leader: election id" in log.read_text().split(
            "writes stopped")[-1])
        r = lab.cli("--store", cluster.url, "fail", "link", SECOND.t0, SECOND.t1)
        assert r.exit_code == 0 and "applied by the running controller" in r.output, r.output
        assert differences(lab.snapshot(), lab.desired({FIRST, SECOND})) == []
        assert set(store.load()) == {FIRST, SECOND}
    finally:
        p.terminate()
        try:
            p.wait(15)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(5)
        cluster.stop()
