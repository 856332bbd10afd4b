"""dashboards/fabric.json against the real thing: Debian's Prometheus scrapes `fabricctl run --metrics-port`
on the default lab, and every panel's query, evaluated through Prometheus' HTTP API, returns a series;
a cut link shows on the failure panels."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.mininet.controller.service.test_service import (  # noqa: F401  (controller: the fixture starting `fabricctl run`)
    LEAF, SPINE, TIMEOUT, controller, recorded_event)
from tests.unit.controller.service.test_dashboard import DASHBOARD, queries

JOB = "fabric"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Prometheus:
    """A Prometheus process scraping one target every second, with its own data directory."""

    def __init__(self, tmp: Path, target: str) -> None:
        binary = shutil.which("prometheus")
        if binary is None:
            pytest.skip("prometheus not found (Debian: apt-get install prometheus)")
        self.port = free_port()
        config = tmp / "prometheus.yml"
        config.write_text(f"global: {{scrape_interval: 1s, evaluation_interval: 1s}}\n"
                          f"scrape_configs:\n  - job_name: {JOB}\n    static_configs: [{{targets: ['{target}']}}]\n")
        self.log = open(tmp / "prometheus.log", "w")
        self.proc = subprocess.Popen([binary, f"--config.file={config}", f"--storage.tsdb.path={tmp / 'tsdb'}",
                                      f"--web.listen-address=127.0.0.1:{self.port}"], stdout=self.log,
                                     stderr=subprocess.STDOUT)
        self.wait(lambda: self._get("/-/ready") is not None, "Prometheus ready")

    def _get(self, path: str) -> bytes | None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=5) as r:
                return r.read()
        except OSError:
            return None

    def query(self, expr: str) -> list[dict[str, Any]]:
        body = self._get("/api/v1/query?" + urllib.parse.urlencode({"query": expr}))
        assert body is not None, f"Prometheus did not answer {expr!r}"
        doc = json.loads(body)
        assert doc["status"] == "success", doc
        return doc["data"]["result"]

    def wait(self, cond: Any, what: str) -> Any:
        end = time.monotonic() + TIMEOUT
        while time.monotonic() < end:
            got = cond()
            if got:
                return got
            assert self.proc.poll() is None, f"prometheus exited: {Path(self.log.name).read_text()[-1500:]}"
            time.sleep(0.5)
        raise AssertionError(f"not {what} within {TIMEOUT:.0f}s")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


@pytest.fixture
def metrics_port() -> int:
    return free_port()


@pytest.fixture
def prometheus(tmp_path: Path, metrics_port: int) -> Iterator[Prometheus]:
    p = Prometheus(tmp_path, f"127.0.0.1:{metrics_port}")
    yield p
    p.stop()


def test_every_panel_returns_a_series_and_a_cut_shows(lab: Any, controller: Any, metrics_port: int,
                                                      prometheus: Prometheus):
    c = controller(10, "events", "--counters-every", "1", "--metrics-port", str(metrics_port))
    c.primary_everywhere()
    exprs = [(title, expr.replace("$job", JOB)) for title, expr in queries(json.loads(DASHBOARD.read_text()))]
    faulty = {"Down now"}  # a filter that is empty while nothing is down: checked under the fault below
    for title, expr in exprs:  # rate() needs two scrapes in its window: wait for each, bounded
        if title not in faulty:
            prometheus.wait(lambda: prometheus.query(expr), f"a series for panel {title!r}: {expr}")
    assert prometheus.query(f'max(fabric_failures{{job="{JOB}"}})')[0]["value"][1] == "0"
    assert [t for t, e in exprs if not prometheus.query(e)] == ["Down now"]

    n = len(c.all_events())
    lab.cut_link(LEAF, SPINE)
    try:
        c.wait(recorded_event(True), "the cut link recorded by the detector", after=n)
        label = f"{LEAF}--{SPINE}"
        prometheus.wait(lambda: prometheus.query(f'max(fabric_failures{{job="{JOB}"}}) == 1'), "failures = 1")
        down = prometheus.wait(lambda: prometheus.query(f'fabric_link_up{{job="{JOB}"}} == 0'), "a link down")
        assert [r["metric"]["link"] for r in down] == [label]
        assert [t for t, e in exprs if not prometheus.query(e)] == []  # every panel has a series now
        recorded = prometheus.query(next(e for t, e in exprs if t == "Recorded failures"))
        assert recorded[0]["value"][1] == "1"  # the failure panel shows the fault
        changes = prometheus.query(f'sum by (change) (fabric_link_changes_total{{job="{JOB}"}})')
        assert {r["metric"]["change"]: float(r["value"][1]) for r in changes}["down"] >= 1
    finally:
        lab.mend_link(LEAF, SPINE)
    c.wait(recorded_event(False), "the mended link restored", after=n)
    prometheus.wait(lambda: prometheus.query(f'max(fabric_failures{{job="{JOB}"}}) == 0'), "failures back to 0")
