"""The etcd store with a real three-member cluster: concurrent fail/restore, members lost and back."""

from __future__ import annotations


import json
import os
import random
import subprocess
import sys
import time

import pytest
from click.testing import CliRunner

from fabricctl.main import cli
from controller.model.failures import HostPortDown, LinkDown, SwitchDown
from controller.state.etcdstore import EtcdStore
from controller.state.store import parse_url
from tests.etcd.conftest import LAB, REPO
from tests.etcd.cluster import EtcdCluster

LINKS = {0: [LinkDown(f"p0-t0-{a}", f"p0-t1-{b}") for a in (0, 1) for b in (0, 1)],
         1: [LinkDown(f"p1-t0-{a}", f"p1-t1-{b}") for a in (0, 1) for b in (0, 1)],
         2: [HostPortDown(f"p{p}-t0-{a}", port) for p in (0, 1) for a in (0, 1) for port in (1, 2)]}
SHARED = SwitchDown("p0-t1-0")  # every worker fails it once and none restores it


def argv(f, adding: bool) -> list[str]:
    verb = "fail" if adding else "restore"
    if isinstance(f, LinkDown):
        return [verb, "link", f.t0, f.t1]
    if isinstance(f, SwitchDown):
        return [verb, "switch", f.name]
    return [verb, "port", f.t0, str(f.port - 1)]  # host slot = port - 1 in the lab topology


def plans(total: int = 100, seed: int = 21) -> tuple[list[list[list[str]]], set]:
    """Each worker's commands on its own failures (plus one shared idempotent fail), and the
    sequential result: what the record must hold whatever the interleaving."""
    rng = random.Random(seed)
    out, expected = [], {SHARED}
    for w in range(3):
        mine: set = set()
        cmds = []
        n = total // 3 + (1 if w < total % 3 else 0)
        for k in range(n - 1):
            f = rng.choice(LINKS[w])
            adding = f not in mine if rng.random() < 0.8 else f in mine  # mostly real changes, some no-ops
            (mine.add if adding else mine.discard)(f)
            cmds.append(argv(f, adding))
        cmds.insert(n // 2, argv(SHARED, True))
        expected |= mine
        out.append(cmds)
    return out, expected


def env(c: EtcdCluster) -> dict[str, str]:
    return {**os.environ, "FABRIC_TOPOLOGY": str(LAB), "FABRIC_STORE": c.url, "PYTHONPATH": str(REPO)}


def store(c: EtcdCluster) -> EtcdStore:
    return EtcdStore(parse_url(c.url), "two_plane_lab")


def run(c: EtcdCluster, *args: str):
    return CliRunner().invoke(cli, list(args), env={"FABRIC_TOPOLOGY": str(LAB), "FABRIC_STORE": c.url})


def test_concurrent_fail_restore_from_three_processes_is_the_sequential_result(cluster: EtcdCluster) -> None:
    commands, expected = plans()
    assert sum(map(len, commands)) == 100
    procs = [subprocess.Popen([sys.executable, "-m", "tests.etcd.worker", json.dumps(cmds)], env=env(cluster),
                              cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for cmds in commands]
    reports = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, (out, err[-2000:])
        reports.append(json.loads(out.strip().splitlines()[-1]))
    assert [r["ran"] for r in reports] == [len(c) for c in commands]
    record = store(cluster).load()
    assert set(record) == expected
    assert set(record.values()) == {"operator"}


def test_one_member_killed_changes_nothing(cluster: EtcdCluster) -> None:
    assert run(cluster, "fail", "link", "p0-t0-0", "p0-t1-1", "--no-apply").exit_code == 0
    cluster.kill(cluster.members[0])  # the first endpoint: the client moves on to the next
    r = run(cluster, "fail", "switch", "p1-t1-0", "--no-apply")
    assert r.exit_code == 0, r.output
    s = run(cluster, "status", "--offline")
    assert s.exit_code == 0 and "store:" not in s.output
    assert set(store(cluster).load()) == {LinkDown("p0-t0-0", "p0-t1-1"), SwitchDown("p1-t1-0")}


def test_quorum_lost_refuses_changes_in_one_line_and_recovers(cluster: EtcdCluster) -> None:
    assert run(cluster, "fail", "link", "p0-t0-0", "p0-t1-1", "--no-apply").exit_code == 0
    before = store(cluster).export_text()
    for m in cluster.members[1:]:
        cluster.kill(m)
    # until the survivor has noticed it has no leader (election timeout 1 s): a linearizable read fails
    deadline = time.monotonic() + 60
    while store(cluster).health() is None:
        assert time.monotonic() < deadline, "the survivor still answers linearizable reads 60 s after losing quorum"
        time.sleep(0.1)
    r = run(cluster, "restore", "all", "--no-apply")
    assert r.exit_code == 1
    lines = r.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: etcd://") and "no quorum: 1 of 3 members reachable" in lines[0]
    s = run(cluster, "status", "--offline")
    assert s.exit_code == 0, s.output
    store_lines = [x for x in s.output.splitlines() if x.startswith("store: ")]
    assert len(store_lines) == 1 and "no quorum" in store_lines[0] and "the record cannot change" in store_lines[0]
    assert "failed: link p0-t0-0 -- p0-t1-1 (operator)" in s.output  # read from the member that answers
    for m in cluster.members[1:]:
        cluster.restart(m)
    cluster.wait_healthy()
    assert store(cluster).export_text() == before  # nothing recorded was lost, the refused change not made
    r = run(cluster, "restore", "all", "--no-apply")
    assert r.exit_code == 0, r.output
    assert store(cluster).load() == {}


def test_events_go_to_the_store_and_fabricctl_events_reads_them(cluster: EtcdCluster) -> None:
    from controller.state.etcdstore import EventSink

    sink = EventSink(store(cluster))
    for n in range(3):
        sink({"t": 1700000000.0 + n, "kind": "link_down" if n != 1 else "link_up", "pid": 7, "n": n})
    sink.close()
    r = run(cluster, "events", "--json")
    assert r.exit_code == 0, r.output
    assert [json.loads(line)["n"] for line in r.output.splitlines()] == [0, 1, 2]
    r = run(cluster, "events", "--kind", "link_up", "--json")
    assert [json.loads(line) for line in r.output.splitlines()] == [{"t": 1700000001.0, "kind": "link_up", "pid": 7, "n": 1}]


def test_the_event_sink_keeps_only_the_newest_events_in_etcd(cluster: EtcdCluster):
    """A long-running fabric must not fill etcd's space quota: every `trim_every` events a sink deletes all but the
    newest `keep` of the fabric's events, another fabric's untouched."""
    from controller.state.etcdstore import EventSink

    store, other = EtcdStore(parse_url(cluster.url), "lab"), EtcdStore(parse_url(cluster.url), "other")
    elsewhere = EventSink(other)
    elsewhere({"kind": "link_down", "n": -1})
    elsewhere.close(timeout=30)
    sink = EventSink(store, keep=5, trim_every=4)
    for n in range(14):
        sink({"kind": "link_down", "n": n})
    sink.close(timeout=30)
    events, _ = store.events_since(None, limit=100)
    assert [doc["n"] for _, doc in events] == list(range(7, 14))  # trimmed to n 7..11 after the 12th, then two more
    assert [doc["n"] for _, doc in other.events_since(None, limit=100)[0]] == [-1]
    assert sink.trim() == 2 and [doc["n"] for _, doc in store.events_since(None, limit=100)[0]] == list(range(9, 14))
    with pytest.raises(ValueError, match="at least 1"):
        EventSink(store, keep=0)


def test_the_denylist_is_recorded_beside_the_failures_and_status_shows_who_saw_it(cluster: EtcdCluster,
                                                                                   tmp_path) -> None:
    from controller.plan.evs import export
    from controller.routes import Fabric
    from controller.model.topology import load

    loops, run_dir = tmp_path / "loops", tmp_path / "run"
    loops.mkdir()
    run_dir.mkdir()  # an endpoint run with no sender running: recorded, nobody to tell
    (loops / "evs.json").write_text(json.dumps(export(Fabric(load(LAB)))))
    (loops / "loops-h0.json").write_text(json.dumps({"host": "h0", "failed": [
        {"from": "p0-t1-1", "to": "p0-t0-0", "kind": "t1-t0"}], "denied": {}}))
    r = run(cluster, "endpoint", "denylist", str(loops), "--push", "--run", str(run_dir))
    assert r.exit_code == 0, r.output
    dl, rev = store(cluster).load_denylist()
    assert dl.seen_by == {("p0-t1-1", "p0-t0-0"): {"h0"}} and rev > 0
    assert store(cluster).load() == {}  # the failures are not touched
    r = run(cluster, "status", "--offline", "--json")
    assert [(e["from"], e["to"], e["seen_by"], e["kind"]) for e in json.loads(r.output)["denylist"]] == [
        ("p0-t1-1", "p0-t0-0", ["h0"], "t1-t0")]
    r = run(cluster, "endpoint", "denylist", str(loops), "--push", "--run", str(run_dir))
    assert store(cluster).load_denylist() == (dl, rev)  # nothing changed: not written again
