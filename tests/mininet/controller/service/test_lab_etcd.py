"""The lab's own fail/restore (mininet_labs Lab, and `fabricctl lab` commands) with the record in etcd: a
link cut in the lab and recorded by `Lab.fail` lands in etcd (not the lab's state file), the leader on
etcd pulls it from the tables (read back from the switches), `Lab.restore` puts it back; without a
controller the lab writes the switches itself; `fabricctl --store ... lab status --check` compares the
switches with the plan of the etcd record."""

from __future__ import annotations

import json
import subprocess
import sys
import os
from typing import Any

from controller.state import statefile
from controller.model.failures import LinkDown
from controller.service import handoff
from controller.state.etcdstore import EtcdStore
from controller.state.store import parse_url
from controller.model.failures import OPERATOR
from tests.mininet.controller.service.test_etcd import cluster  # noqa: F401  (the etcd cluster fixture)
from tests.mininet.controller.service.test_service import (  # noqa: F401  (controller: the fixture starting `fabricctl run`)
    LEAF, ROOT, SPINE, controller, tables_equal_plan, wait_until)

CUT = LinkDown(LEAF, SPINE)


def pulled(lab: Any) -> dict[str, str]:
    """What the switches hold beyond the healthy plan (read back): where the cut link's routes were pulled."""
    outcomes = lab.install(frozenset(), dry_run=True, push="never")
    return {n: o.delta.summary() for n, o in outcomes.items() if o.ok and o.delta}


def test_lab_fail_records_in_etcd_and_the_leader_pulls_the_link_then_restores_it(lab, controller, cluster):
    store = EtcdStore(parse_url(cluster.url), lab.model.name)
    c = controller(10, "events", "--store", cluster.url, "--no-probe")  # no detector racing the lab's record
    c.primary_everywhere()
    wait_until(lambda: handoff.primary_in(store.read_view()) is not None, "the leader's view published in etcd")
    lab.store = store
    try:
        lab.cut_link(LEAF, SPINE)
        try:
            r = lab.fail(CUT)
            assert r.via is not None and r.via.startswith(f"pid {c.proc.pid}") and r.outcomes == {}, r
            assert store.load() == {CUT: OPERATOR}
            assert statefile.load_state(lab.failure_state_path) == frozenset()  # the lab's file is not the record
            assert tables_equal_plan(lab) == {}  # the plan of the etcd record (lab.install reads the store)
            assert pulled(lab) != {}  # the leader changed tables: the healthy plan is no longer what they hold
        finally:
            lab.mend_link(LEAF, SPINE)
        r = lab.restore(CUT)
        assert r.via is not None and r.via.startswith(f"pid {c.proc.pid}"), r
        assert store.load() == {}
        assert tables_equal_plan(lab) == {} and pulled(lab) == {}
    finally:
        lab.store = None


def test_lab_fail_without_a_controller_writes_the_switches_itself(lab, cluster):
    store = EtcdStore(parse_url(cluster.url), lab.model.name)
    lab.store = store
    try:
        r = lab.fail(CUT)
        assert r.via is None and r.outcomes and all(o.ok for o in r.outcomes.values()), r
        assert store.load() == {CUT: OPERATOR} and tables_equal_plan(lab) == {} and pulled(lab) != {}
        r = lab.restore()
        assert store.load() == {} and tables_equal_plan(lab) == {} and pulled(lab) == {}
    finally:
        lab.store = None
        lab.install(push="missing")


def test_fabricctl_lab_status_check_compares_with_the_etcd_record(lab, lab_dir, cluster):
    def fabricctl(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "fabricctl", "--topology", str(lab.topology_path), "--store",
                               cluster.url, *args], cwd=ROOT, capture_output=True, text=True, timeout=120,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})

    def plan() -> dict[str, Any]:
        r = fabricctl("lab", "status", "--check", "--json", "--dir", str(lab_dir))
        out: dict[str, Any] = json.loads(r.stdout)["plan"]
        assert r.returncode == (0 if all(p["in_sync"] for p in out.values()) else 1), r.stderr  # 1: out of sync
        return out

    assert all(p["in_sync"] for p in plan().values())
    try:
        r = fabricctl("fail", "link", LEAF, SPINE, "--no-apply")  # recorded in etcd, no switch written
        assert r.returncode == 0, r.stderr
        assert statefile.load_state(lab.failure_state_path) == frozenset()
        out = plan()
        assert {n for n, p in out.items() if not p["in_sync"]} == set(pulled_by_plan(lab)), out
        r = fabricctl("install")
        assert r.returncode == 0, r.stderr
        assert all(p["in_sync"] for p in plan().values())
    finally:
        fabricctl("restore", "all", "--no-apply")
        lab.install(push="missing")
    assert all(p["in_sync"] for p in plan().values())


def pulled_by_plan(lab: Any) -> list[str]:
    """The switches whose plan the cut link changes (what `lab status --check` must find out of sync)."""
    outcomes = lab.install(frozenset({CUT}), dry_run=True, push="never")
    return [n for n, o in outcomes.items() if o.ok and o.delta]
