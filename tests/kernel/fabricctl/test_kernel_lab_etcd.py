"""A kernel lab with the record in etcd (`fabricctl --store etcd://... lab up --dataplane kernel`): the plan
installed is the etcd record's, `lab status --check` compares with it, and the lab's restore changes etcd
and the routers' routes (read back)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from controller.model.failures import LinkDown
from controller.state.etcdstore import EtcdStore
from controller.state.store import parse_url
from mininet_labs.labstate import default_topology
from tests.etcd.cluster import EtcdCluster
from tests.etcd.conftest import cluster  # noqa: F401  (the real etcd cluster fixture, one per test)
from tests.paths import REPO

CUT = LinkDown("p0-t0-0", "p0-t1-1")


def fabricctl(*args: str, store: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "fabricctl", *(["--store", store] if store else []), *args],
                          capture_output=True, text=True, timeout=300, cwd=REPO,
                          env={k: v for k, v in os.environ.items() if k != "FABRIC_STORE"})


def test_kernel_lab_up_installs_the_etcd_record_and_its_restore_changes_etcd(kernel_ready: None, cluster: EtcdCluster,
                                                                              tmp_path: Path) -> None:
    from mininet_labs.lab import Lab

    fabric = default_topology().name
    store = EtcdStore(parse_url(cluster.url), fabric)
    store.save({CUT}, expect=0)
    lab_dir = str(tmp_path / "lab")
    up = fabricctl("lab", "up", "--dataplane", "kernel", "--dir", lab_dir, "--tag", f"e{os.getpid()}",
                   store=cluster.url)
    try:
        assert up.returncode == 0, up.stderr
        on_etcd = fabricctl("lab", "status", "--check", "--dir", lab_dir, store=cluster.url)
        assert on_etcd.returncode == 0 and on_etcd.stdout.count("in sync") == 8, on_etcd.stdout + on_etcd.stderr
        on_file = fabricctl("lab", "status", "--check", "--dir", lab_dir)  # the lab's own (empty) state file
        assert on_file.returncode == 1 and 0 < on_file.stdout.count("in sync") < 8, on_file.stdout  # out of sync
        lab = Lab.attach(lab_dir)
        lab.store = store
        r = lab.restore(CUT)
        assert r.via is None and r.outcomes and all(o.ok for o in r.outcomes.values()), r
        assert store.load() == {}
        on_etcd = fabricctl("lab", "status", "--check", "--dir", lab_dir, store=cluster.url)
        assert on_etcd.stdout.count("in sync") == 8, on_etcd.stdout
        on_file = fabricctl("lab", "status", "--check", "--dir", lab_dir)  # both records empty: the healthy plan
        assert on_file.stdout.count("in sync") == 8, on_file.stdout
    finally:
        down = fabricctl("lab", "down", "--dir", lab_dir)
    assert down.returncode == 0, down.stderr
