"""`fabricctl run --store etcd://` on the default lab, end to end once: the probes' verdicts are
recorded in etcd with their origin, a one-shot `fail` from the operator goes through the leader, and
the switches' tables are the plan of the etcd record (exported into the lab's state file to compare)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from controller.state import statefile
from controller.model.failures import LinkDown
from controller.state.etcdstore import EtcdStore
from controller.state.store import parse_url
from controller.model.failures import DETECTOR, OPERATOR
from tests.etcd.cluster import EtcdCluster
from tests.mininet.controller.service.test_service import (  # noqa: F401  (controller: the fixture starting `fabricctl run`)
    LEAF, ROOT, SPINE, controller, link_event, recorded_event, tables_equal_plan)

OTHER = LinkDown("p1-t0-0", "p1-t1-0")


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[EtcdCluster]:
    if shutil.which("etcd") is None:
        pytest.skip("etcd not found on PATH (Debian: apt-get install etcd-server etcd-client)")
    c = EtcdCluster(tmp_path / "etcd")
    c.start()
    try:
        yield c
    finally:
        c.stop()


def fabricctl(lab: Any, url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "fabricctl", "--topology", str(lab.topology_path),
                           "--store", url, *args], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})


def tables_equal_etcd_plan(lab: Any, url: str) -> dict[str, str]:
    """tables_equal_plan against the etcd record: exported into the lab's state file first."""
    r = fabricctl(lab, url, "store", "export", str(lab.failure_state_path))
    assert r.returncode == 0, r.stderr
    return tables_equal_plan(lab)


def test_run_on_etcd_records_detected_and_operator_failures_there_and_applies_them(lab, controller, cluster):
    store = EtcdStore(parse_url(cluster.url), lab.model.name)
    c = controller(10, "events", "--store", cluster.url)
    c.primary_everywhere()
    lab.cut_link(LEAF, SPINE)
    try:
        c.wait(link_event("link_down"), "link_down")
        c.wait(recorded_event(True), "failure recorded")
        c.wait(lambda e: e["kind"] == "deltas_written" and e["failures"] == 1, "deltas written")
        assert store.load() == {LinkDown(LEAF, SPINE): DETECTOR}
        assert statefile.load_state(lab.failure_state_path) == frozenset()  # the lab's file is not the record
        assert tables_equal_etcd_plan(lab, cluster.url) == {}
        r = fabricctl(lab, cluster.url, "fail", "link", OTHER.t0, OTHER.t1)
        assert r.returncode == 0, r.stderr
        assert r.stdout.splitlines()[-1].startswith(f"applied by the running controller (pid {c.proc.pid}")
        assert store.load() == {LinkDown(LEAF, SPINE): DETECTOR, OTHER: OPERATOR}
        assert tables_equal_etcd_plan(lab, cluster.url) == {}
    finally:
        lab.mend_link(LEAF, SPINE)
    n = len(c.all_events())
    c.wait(recorded_event(False), "the detector's failure removed", after=n)
    c.wait(lambda e: e["kind"] == "deltas_written" and e["failures"] == 1, "restore deltas", after=n)
    assert store.load() == {OTHER: OPERATOR}  # the operator's stays
    assert tables_equal_etcd_plan(lab, cluster.url) == {}
    s = fabricctl(lab, cluster.url, "status", "--offline")
    assert s.returncode == 0 and "controller: leader " in s.stdout and f"pid {c.proc.pid}" in s.stdout, s.stdout
