"""Fixtures of the etcd tier: a real three-member etcd cluster on loopback ports, per test."""

from __future__ import annotations

from tests.paths import REPO

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.etcd.cluster import EtcdCluster

LAB = REPO / "examples" / "two_plane_lab.yaml"


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
